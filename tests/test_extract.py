"""`extract` (SPEC sections 5 and 7): verify while extracting into an absent or empty
directory, write only regular files and directories with the modes an ordinary tool gives
(0666 / 0777 less the umask), and leave nothing behind unless the bundle verifies.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import bagit
import hostile
import pytest
import repack
from conftest import run_cli

from bundler.bundles.extract import extract_bundle
from bundler.core.claims import Verdict, VerifyOptions
from bundler.core.errors import OutputError

KEY = "rpt-every-reason/alice"


def tree(root: Path) -> list[str]:
    """Every path beneath ``root``, relative, sorted (links not followed)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def entries(root: Path) -> Iterator[tuple[Path, os.stat_result]]:
    for path in sorted(root.rglob("*")):
        yield path, os.lstat(path)


# 0 and 002 tell "0666/0777 less the umask" apart from fixed 0644/0755; 022 and 077
# are the two umasks users have most.
UMASKS = [0o000, 0o002, 0o022, 0o077]


@pytest.fixture(params=UMASKS, ids=lambda u: f"umask{u:03o}")
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """The process umask for one test (a umask of 0 shows archive modes as they are)."""
    value: int = request.param
    previous = os.umask(value)
    try:
        yield value
    finally:
        os.umask(previous)


# -------------------------------------------------------------------------- success


@pytest.mark.parametrize("existing", [False, True])
def test_extract_writes_the_bag_and_it_verifies(
    existing: bool, bundles: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    if existing:
        out.mkdir()
    done = run_cli("extract", str(bundles[KEY]), str(out))
    assert done.returncode == 0, done.stderr.decode()
    assert "Extracted:" in done.stdout.decode()
    expected = repack.open_bundle(bundles[KEY])
    bag_dir = out / expected.top
    assert [p.name for p in out.iterdir()] == [expected.top]
    written = {
        str(p.relative_to(bag_dir)): p.read_bytes()
        for p, st in entries(bag_dir)
        if stat.S_ISREG(st.st_mode)
    }
    assert written == expected.files
    again = run_cli("verify", "--json", str(bag_dir))
    assert again.returncode == 0, again.stderr.decode()
    assert json.loads(again.stdout)["verdict"] == "verified"


def test_extracted_bag_passes_a_standard_bagit_validator(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    assert run_cli("extract", str(bundles["rpt-clean/bob"]), str(out)).returncode == 0
    bag = bagit.Bag(str(out / "evalbook-bundle-rpt-clean"))
    bag.validate()
    assert bag.version_info == (1, 0)
    assert "data/bundle.json" in bag.payload_entries()


def test_modes_are_an_ordinary_tools_whatever_the_archive_says(
    bundles: dict[str, Path], tmp_path: Path, umask: int
) -> None:
    """SPEC 7: 0666 for files and 0777 for directories, less the umask; never the
    archive's modes (setuid, sticky, 0000, 0700 are all dropped)."""
    eb = repack.open_bundle(bundles["rpt-clean/alice"])
    top = eb.top
    odd = {
        top: 0o777,
        f"{top}/data": 0o700,
        f"{top}/data/report": 0o1777,
        f"{top}/bagit.txt": 0o4755,
        f"{top}/data/bundle.json": 0o666,
        f"{top}/data/report/body.json": 0o000,
        f"{top}/manifest-sha256.txt": 0o2711,
    }
    archive = repack.write_bundle(eb, tmp_path / "odd.tar.zst", modes=odd)
    assert {
        h.name: h for h in repack.header_blocks(repack.archive_tar(archive))
    }.keys() >= odd.keys()
    out = tmp_path / "out"
    result = extract_bundle(str(archive), out, VerifyOptions())
    assert result.verdict is Verdict.VERIFIED, [c.to_json() for c in result.failures()]
    seen = 0
    for path, st in entries(out):
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISDIR(st.st_mode):
            assert mode == 0o777 & ~umask, (path, oct(mode))
        else:
            assert stat.S_ISREG(st.st_mode), path
            assert mode == 0o666 & ~umask, (path, oct(mode))
        seen += 1
    directories = {
        str(parent) for rel in eb.files for parent in Path(rel).parents
    }  # "." is the top
    assert seen == len(eb.files) + len(directories)


@pytest.mark.parametrize("mask", UMASKS, ids=lambda u: f"umask{u:03o}")
def test_modes_through_the_cli(mask: int, bundles: dict[str, Path], tmp_path: Path) -> None:
    """The console script, run under each umask, gives what cp or tar would."""
    out = tmp_path / "out"
    previous = os.umask(mask)  # inherited by the child
    try:
        done = run_cli("extract", str(bundles["rpt-sso-traces/bob"]), str(out))
    finally:
        os.umask(previous)
    assert done.returncode == 0, done.stderr.decode()
    modes = {stat.S_IMODE(st.st_mode) for path, st in entries(out) if stat.S_ISREG(st.st_mode)}
    dir_modes = {stat.S_IMODE(st.st_mode) for path, st in entries(out) if stat.S_ISDIR(st.st_mode)}
    assert modes == {0o666 & ~mask} and dir_modes == {0o777 & ~mask}
    if mask == 0o022:
        assert modes == {0o644} and dir_modes == {0o755}


def test_copy_that_cannot_be_written_is_one_line_and_removed(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    """A write failure while extracting (here the file size limit, as a full disk would)
    is exit 3 with one line naming the destination; what was written is removed."""
    import resource
    import shutil
    import subprocess
    import sys

    def small_files() -> None:
        # Python ignores SIGXFSZ, so an oversized write fails with EFBIG instead.
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    out = tmp_path / "out"
    exe = shutil.which("evalbook-bundle", path=str(Path(sys.executable).parent))
    assert exe is not None
    proc = subprocess.run(
        [exe, "extract", str(bundles["rpt-clean/alice"]), str(out)],
        capture_output=True,
        preexec_fn=small_files,
        check=False,
    )
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert len(err.splitlines()) == 1, err
    assert str(out) in err and "cannot write the extracted bag" in err
    assert not out.exists()


# -------------------------------------------------------------------------- refusals


def test_non_empty_directory_is_refused_and_untouched(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_bytes(b"mine\n")
    (out / "evalbook-bundle-rpt-clean").mkdir()
    done = run_cli("extract", str(bundles["rpt-clean/alice"]), str(out))
    assert done.returncode == 3
    assert "not empty" in done.stderr.decode()
    assert tree(out) == ["evalbook-bundle-rpt-clean", "keep.txt"]
    assert (out / "keep.txt").read_bytes() == b"mine\n"


def test_symlinked_directory_is_refused(bundles: dict[str, Path], tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    link = tmp_path / "out"
    link.symlink_to(target, target_is_directory=True)
    done = run_cli("extract", str(bundles["rpt-clean/alice"]), str(link))
    assert done.returncode == 3
    assert "symlink" in done.stderr.decode()
    assert list(target.iterdir()) == []
    assert link.is_symlink()


def test_directory_whose_parent_is_missing_is_refused(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    with pytest.raises(OutputError):
        extract_bundle(str(bundles["rpt-clean/alice"]), tmp_path / "no" / "such", VerifyOptions())
    assert list(tmp_path.iterdir()) == []


def mid_archive_failure(bundles: dict[str, Path], tmp_path: Path) -> tuple[Path, int]:
    """A real bundle whose 20th header has a bad checksum: earlier members are files."""
    tar = repack.archive_tar(bundles["rpt-clean/alice"])
    headers = repack.header_blocks(tar)
    victim = headers[20]
    assert sum(1 for h in headers[:20] if h.typeflag == b"0") >= 5
    mutated = bytearray(tar)
    mutated[victim.offset + 148] ^= 0x01  # checksum digit
    return repack.write_tar(bytes(mutated), tmp_path / "mid.tar.zst"), victim.offset


def dotdot_archive(tmp_path: Path) -> Path:
    top = "evalbook-bundle-rpt-clean"
    data = hostile.zstd(
        hostile.tar(
            [
                hostile.dir_member(top),
                hostile.file_member(
                    f"{top}/bagit.txt", b"BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n"
                ),
                hostile.dir_member(f"{top}/data"),
                hostile.file_member(f"{top}/data/ok.txt", b"fine\n"),
                hostile.file_member(f"{top}/data/../../escaped.txt", b"escaped\n"),
            ]
        )
    )
    path = tmp_path / "dotdot.tar.zst"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("existing", [False, True])
def test_hostile_mid_archive_leaves_nothing(
    existing: bool, bundles: dict[str, Path], tmp_path: Path
) -> None:
    archive, offset = mid_archive_failure(bundles, tmp_path)
    out = tmp_path / "out"
    if existing:
        out.mkdir()
    done = run_cli("extract", str(archive), str(out))
    assert done.returncode == 3
    assert f"offset {offset}" in done.stdout.decode() and "checksum" in done.stdout.decode()
    if existing:
        assert out.is_dir() and tree(out) == []
    else:
        assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["mid.tar.zst"] + (["out"] if existing else [])
    )


@pytest.mark.parametrize("existing", [False, True])
def test_dotdot_member_leaves_nothing(existing: bool, tmp_path: Path) -> None:
    archive = dotdot_archive(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    out = work / "out"
    if existing:
        out.mkdir()
    done = run_cli("extract", str(archive), str(out))
    assert done.returncode == 3
    assert "'..' path segment" in done.stdout.decode()
    assert tree(work) == (["out"] if existing else [])
    assert not (tmp_path / "escaped.txt").exists() and not (work / "escaped.txt").exists()


@pytest.mark.parametrize("existing", [False, True])
def test_tampered_bundle_leaves_nothing(
    existing: bool, bundles: dict[str, Path], tmp_path: Path
) -> None:
    eb = repack.open_bundle(bundles["rpt-clean/alice"])
    eb.files["data/cases/extra.jsonl"] = b"{}\n"
    archive = repack.write_bundle(eb, tmp_path / "tampered.tar.zst")
    out = tmp_path / "out"
    if existing:
        out.mkdir()
    done = run_cli("extract", str(archive), str(out))
    assert done.returncode == 1
    assert "FAILED" in done.stdout.decode() and "data/cases/extra.jsonl" in done.stdout.decode()
    if existing:
        assert tree(out) == []
    else:
        assert not out.exists()


def test_wrong_anchor_leaves_nothing(bundles: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = run_cli(
        "extract",
        "--expect-bundle-digest",
        "sha256:" + "0" * 64,
        str(bundles["rpt-clean/alice"]),
        str(out),
    )
    assert done.returncode == 1
    assert not out.exists()


def test_strict_with_anything_listed_leaves_nothing(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    done = run_cli("extract", "--strict", str(bundles["rpt-retention/alice"]), str(out))
    assert done.returncode == 1
    assert not out.exists()
