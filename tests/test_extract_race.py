"""`extract` against a local process racing it (SPEC 5 and 7; threat: a process that can
write inside the extraction target while `extract` runs).

Invariant under test: every directory and file is created relative to the descriptor of
a directory this extraction created itself, never by path; a name found holding anything
but what was created there (a symbolic link, another directory, nothing) stops the
extraction with one line and exit 3; and removal takes away only what was created, by
name within its own directories, so nothing outside the target is ever written or
removed, whichever directory is swapped and whenever.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import pytest
import repack

import bundler.bundles.extract as verify_module
from bundler.archive.bag_reader import Extractor
from bundler.bundles.extract import extract_bundle
from bundler.core.claims import Verdict, VerifyOptions
from bundler.core.errors import OutputError
from bundler.evalbook.export import ExportConfig, export_bundle
from bundler.testing.fixturegen import build_large_store

CLEAN = "rpt-clean/alice"
SENTINEL = b"belongs to someone else\n"


# ------------------------------------------------------------------------ helpers


@dataclass(frozen=True)
class Step:
    """One member of an archive, as the extractor is asked to write it."""

    name: str
    is_dir: bool


def steps_of(archive: Path) -> list[Step]:
    return [
        Step(h.name.rstrip("/"), h.typeflag == b"5")
        for h in repack.header_blocks(repack.archive_tar(archive))
    ]


def shapes_of(archive: Path) -> list[Step]:
    """The archive's members with every directory but at most two files in a row per
    directory: every kind of step the extractor takes (a new directory, the first file
    in it, a file after another in the same directory, a return to a directory made
    earlier, a tag file after the deep payload), at a third of the cost."""
    kept: list[Step] = []
    run = 0
    for step in steps_of(archive):
        if step.is_dir or not kept or parent_of(kept[-1].name) != parent_of(step.name):
            run = 0
        if step.is_dir or run < 2:
            kept.append(step)
        run += 0 if step.is_dir else 1
    return kept


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Everything beneath ``root``, links not followed: path -> bytes, "dir" or "-> target"."""
    found: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = os.lstat(path)
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(st.st_mode):
                found[rel] = f"-> {os.readlink(path)}"
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = "dir"
            else:
                found[rel] = path.read_bytes()
    return found


def regular_files(root: Path) -> list[str]:
    return sorted(k for k, v in snapshot(root).items() if isinstance(v, bytes))


def outside_dir(base: Path) -> Path:
    """A directory the racing process points links at, holding someone else's file."""
    outside = base / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_bytes(SENTINEL)
    return outside


def mirror_into(outside: Path, directory: Path) -> None:
    """Copy ``directory``'s tree into ``outside`` as decoys with the same names, as an
    attacker would, so that a cleanup by path through the link would delete them."""
    for dirpath, _, filenames in os.walk(directory, followlinks=False):
        rel = Path(dirpath).relative_to(directory)
        (outside / rel).mkdir(parents=True, exist_ok=True)
        for name in filenames:
            (outside / rel / name).write_bytes(b"decoy\n")


def swap_for_link(directory: Path, outside: Path) -> Path:
    """What the racing process does: move the directory aside, a link in its place."""
    moved = directory.with_name(directory.name + ".moved")
    mirror_into(outside, directory)
    os.rename(directory, moved)
    os.symlink(outside, directory)
    return moved


def swap_for_directory(directory: Path, outside: Path) -> Path:
    """Move the directory aside and put another (empty) directory in its place."""
    moved = directory.with_name(directory.name + ".moved")
    os.rename(directory, moved)
    directory.mkdir()
    return moved


def move_away(directory: Path, outside: Path) -> Path:
    moved = directory.with_name(directory.name + ".moved")
    os.rename(directory, moved)
    return moved


SWAPS: dict[str, Callable[[Path, Path], Path]] = {
    "symlink": swap_for_link,
    "other-directory": swap_for_directory,
    "moved-away": move_away,
}


def play(
    writer: Any, steps: list[Step], *, before: Callable[[int], None]
) -> tuple[int, str] | None:
    """Drive ``writer`` through ``steps`` as read_bag does; ``before(i)`` runs between the
    calls for steps i-1 and i. The step refused and the message, or None."""
    for i, step in enumerate(steps):
        before(i)
        try:
            if step.is_dir:
                writer.directory(step.name)
            else:
                out: BinaryIO = writer.open(step.name)
                with out:
                    out.write(f"member {i}\n".encode())
        except OutputError as exc:
            assert "\n" not in str(exc)
            return i, str(exc)
    return None


@dataclass
class Run:
    root: Path
    outside: Path
    refused: tuple[int, str] | None
    at_swap: dict[str, bytes | str]  # the outside directory as the swap left it


def run_swapped(
    steps: list[Step], work: Path, target: int, action: Callable[[Path, Path, str], object]
) -> Run:
    """Write ``steps`` beneath ``work/out``; ``action(root, outside, name)`` runs just
    before step ``target`` (named ``name``); then everything written is removed."""
    work.mkdir()
    outside = outside_dir(work)
    root = work / "out"
    root.mkdir()
    seen: list[dict[str, bytes | str]] = []

    def before(i: int) -> None:
        if i == target:
            action(root, outside, steps[target].name)
            seen.append(snapshot(outside))

    writer = Extractor(root)
    refused = play(writer, steps, before=before)
    writer.remove_all()
    return Run(root, outside, refused, seen[0] if seen else {})


def parent_of(name: str) -> str:
    return name.rsplit("/", 1)[0]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


# ------------------------------------------------------- a real racing process (CLI)

# Loops over the targets (paths relative to the extraction directory): whenever one is a
# real directory, its subdirectories are mirrored in OUTSIDE (so that paths through the
# link resolve), then a symbolic link to OUTSIDE takes its place and the directory moves
# aside, in one atomic renameat2(RENAME_EXCHANGE) where the C library has it (no moment
# without an entry at the name), else by two renames. In "flip" mode the two are
# exchanged back at once, over and over, so the directory is there most of the time.
# Between rounds it looks for any file in OUTSIDE but its own precious.txt and reports
# it, so that a file written there and removed again before the run ends still counts.
RACER = r"""
import ctypes, os, sys, time
out, outside, mode = sys.argv[1:4]
targets = [os.path.join(out, t) for t in sys.argv[4:]]
libc = ctypes.CDLL(None, use_errno=True)
exchange = getattr(libc, "renameat2", None)
AT_FDCWD, RENAME_EXCHANGE = -100, 2

def swap(a, b):
    if exchange is not None and exchange(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE) == 0:
        return
    os.rename(b, b + ".tmp")
    os.rename(a, b)
    os.rename(b + ".tmp", a)

swaps = 0
seen = set()
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    for path in targets:
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                for dirpath, _, _ in os.walk(path):
                    os.makedirs(os.path.join(outside, os.path.relpath(dirpath, path)), exist_ok=True)
                aside = f"{path}.moved{swaps}"
                os.symlink(outside, aside)
                swap(aside, path)
                swaps += 1
                print(swaps, flush=True)
                if mode == "flip":
                    swap(aside, path)
                    os.unlink(aside)
        except OSError:
            pass
    if swaps:
        for dirpath, _, files in os.walk(outside):
            for name in files:
                found = os.path.join(dirpath, name)
                if found != os.path.join(outside, "precious.txt") and found not in seen:
                    seen.add(found)
                    print("escaped", found, flush=True)
"""


@pytest.fixture(scope="module")
def many_members(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A verifying bundle of several hundred members (examples and payload blobs)."""
    base = tmp_path_factory.mktemp("race-bundle")
    build_large_store(base / "store", cases=300, checks=2, sso_payloads=0)
    out = base / "many.tar.zst"
    export_bundle(
        ExportConfig(
            str(base / "store"), "rpt-large", "alice", datetime(2026, 11, 30, tzinfo=UTC), out=out
        )
    )
    return out


def test_a_racing_process_never_gets_a_byte_outside(many_members: Path, tmp_path: Path) -> None:
    """Run `extract` as a subprocess, again and again, while another process swaps a
    directory inside the target for a link to an outside directory: nothing ever appears
    in (or disappears from) the outside directory, a raced run is one line and exit 3,
    and what it wrote is gone."""
    top = steps_of(many_members)[0].name
    targets = [
        [f"{top}/data"],
        [top],
        [f"{top}/data/datasets"],
        [f"{top}/data/blobs", f"{top}/data/blobs/sha256"],
        [f"{top}/data/cases", f"{top}/data/checks", f"{top}/data/scorers"],
        [f"{top}/data/datasets/ds-large/1/examples"],
    ]
    budget = time.monotonic() + 12
    attempts = raced = 0
    while attempts < 4 or (time.monotonic() < budget and attempts < 24):
        work = tmp_path / f"attempt-{attempts}"
        work.mkdir()
        outside = outside_dir(work)
        out = work / "out"
        mode = "flip" if attempts % 3 == 2 else "swap"
        racer = subprocess.Popen(
            [sys.executable, "-c", RACER, str(out), str(outside), mode]
            + targets[attempts % len(targets)],
            stdout=subprocess.PIPE,
        )
        try:
            done = subprocess.run(
                [sys.executable, "-m", "bundler", "extract", str(many_members), str(out)],
                capture_output=True,
                timeout=120,
                check=False,
            )
        finally:
            racer.kill()
            reported = racer.communicate()[0].decode().splitlines()
        swaps = sum(1 for line in reported if line.isdigit())
        escaped = [line for line in reported if line.startswith("escaped")]
        attempts += 1
        err = done.stderr.decode()
        assert escaped == [], (attempts, mode, escaped[:5], err)
        # (the directories there are the other process's own mirror)
        assert regular_files(outside) == ["precious.txt"], (attempts, mode, err)
        assert (outside / "precious.txt").read_bytes() == SENTINEL
        assert done.returncode in (0, 3), err
        if done.returncode == 3:
            raced += 1
            assert swaps > 0, err
            assert len(err.splitlines()) == 1, err
            assert "replaced while extracting" in err, err
            if mode == "swap":
                # (a flipping process may still be moving things while we remove them;
                # what it keeps out of reach is named in the message instead)
                assert regular_files(out) == [], (attempts, mode, err)
    print(f"{attempts} runs of extract, {raced} of them raced and refused")
    assert raced >= 1, f"no run of {attempts} was raced; the test proves nothing"


# ---------------------------------------------- a swap between two writer calls


@pytest.mark.parametrize("kind", sorted(SWAPS))
def test_swapping_the_parent_before_any_step_is_refused(
    kind: str, bundles: dict[str, Path], tmp_path: Path
) -> None:
    """For every member, the directory it is about to be written into is swapped just
    before: that very call is refused, nothing reaches the outside directory, and
    removal leaves no file of ours and deletes no decoy."""
    steps = shapes_of(bundles[CLEAN])
    swap = SWAPS[kind]

    def action(root: Path, outside: Path, name: str) -> None:
        swap(root / parent_of(name), outside)

    for target in range(1, len(steps)):
        run = run_swapped(steps, tmp_path / str(target), target, action)
        where = f"{kind} before step {target} ({steps[target].name})"
        assert run.refused is not None and run.refused[0] == target, where
        assert "replaced while extracting" in run.refused[1], where
        assert regular_files(run.root) == [], where
        assert snapshot(run.outside) == run.at_swap, where
        assert (run.outside / "precious.txt").read_bytes() == SENTINEL


@pytest.mark.parametrize("level", ["top", "data"])
def test_swapping_an_ancestor_is_refused_at_the_next_step(
    level: str, bundles: dict[str, Path], tmp_path: Path
) -> None:
    """An ancestor swapped (the bag's top directory, or data/) while its descriptor is
    cached is found at the next call, however deep that call writes."""
    steps = shapes_of(bundles[CLEAN])
    top = steps[0].name
    victim = top if level == "top" else f"{top}/data"
    first = next(i for i, s in enumerate(steps) if s.name == victim) + 1
    below = [i for i in range(first + 1, len(steps)) if steps[i].name.startswith(victim + "/")]

    def action(root: Path, outside: Path, name: str) -> None:
        swap_for_link(root / victim, outside)

    for target in below[::3] + below[-1:]:
        run = run_swapped(steps, tmp_path / str(target), target, action)
        where = (level, target, steps[target].name)
        assert run.refused is not None and run.refused[0] == target, where
        assert "replaced while extracting" in run.refused[1], where
        assert regular_files(run.root) == [], where
        assert snapshot(run.outside) == run.at_swap, where


@pytest.mark.parametrize("kind", ["symlink-to-directory", "symlink-to-file", "directory", "file"])
def test_a_name_planted_before_its_member_is_refused_and_kept(
    kind: str, bundles: dict[str, Path], tmp_path: Path
) -> None:
    """For every member, something is planted at its name just before it is written:
    the call is refused as a race (never followed, never overwritten), the planted
    entry and its target are left alone, and everything of ours is removed."""
    steps = shapes_of(bundles[CLEAN])

    def plant(root: Path, outside: Path, name: str) -> None:
        planted = root / name
        if kind == "symlink-to-directory":
            planted.symlink_to(outside)
        elif kind == "symlink-to-file":
            planted.symlink_to(outside / "precious.txt")
        elif kind == "directory":
            planted.mkdir()
        else:
            planted.write_bytes(b"planted\n")

    for target in range(1, len(steps)):
        run = run_swapped(steps, tmp_path / str(target), target, plant)
        name = steps[target].name
        assert run.refused is not None and run.refused[0] == target, (kind, target)
        assert "appeared while extracting" in run.refused[1], (kind, target)
        expected = {
            "symlink-to-directory": f"-> {run.outside}",
            "symlink-to-file": f"-> {run.outside / 'precious.txt'}",
            "directory": "dir",
            "file": b"planted\n",
        }[kind]
        assert snapshot(run.root)[name] == expected, (kind, target)
        assert regular_files(run.root) == ([name] if kind == "file" else []), (kind, target)
        assert snapshot(run.outside) == {"precious.txt": SENTINEL}


# ------------------------------------------------ through extract_bundle itself


@pytest.fixture
def hooked(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Callable[[int], None]]]:
    """Hooks run before the n-th call of the extractor's directory() or open()."""
    hooks: list[Callable[[int], None]] = []
    count = [0]
    real_directory, real_open = Extractor.directory, Extractor.open

    def step() -> None:
        for hook in hooks:
            hook(count[0])
        count[0] += 1

    def directory(self: Any, rel: str) -> None:
        step()
        real_directory(self, rel)

    def open_(self: Any, rel: str) -> BinaryIO:
        step()
        out: BinaryIO = real_open(self, rel)
        return out

    monkeypatch.setattr(Extractor, "directory", directory)
    monkeypatch.setattr(Extractor, "open", open_)
    yield hooks


def test_extract_bundle_refuses_a_swap_mid_archive_and_cleans_up(
    hooked: list[Callable[[int], None]], bundles: dict[str, Path], tmp_path: Path
) -> None:
    """The held-out case: data/ swapped for a link right after it is made; the bundle
    itself verifies, so before the fix every later member landed outside and stayed."""
    steps = steps_of(bundles[CLEAN])
    top = steps[0].name
    outside = outside_dir(tmp_path)
    out = tmp_path / "out"
    data_at = next(i for i, s in enumerate(steps) if s.name == f"{top}/data")

    def hook(i: int) -> None:
        if i == data_at + 1:
            swap_for_link(out / top / "data", outside)

    hooked.append(hook)
    with pytest.raises(OutputError, match="replaced while extracting") as info:
        extract_bundle(str(bundles[CLEAN]), out, VerifyOptions())
    assert "\n" not in str(info.value)
    assert snapshot(outside) == {"precious.txt": SENTINEL}
    assert regular_files(out) == []
    assert sorted(snapshot(out)) == [top, f"{top}/data"]  # the other process's link


def test_a_swap_after_the_last_write_still_fails_the_extraction(
    monkeypatch: pytest.MonkeyPatch, bundles: dict[str, Path], tmp_path: Path
) -> None:
    """Swapped once every member is written (while the bundle is being judged): the
    extraction fails rather than hand over a tree with a link in it."""
    top = steps_of(bundles[CLEAN])[0].name
    outside = outside_dir(tmp_path)
    out = tmp_path / "out"
    real = verify_module.verify_contents

    def judged(*args: Any, **kwargs: Any) -> Any:
        swap_for_link(out / top / "data" / "report", outside)
        return real(*args, **kwargs)

    clean = extract_bundle(str(bundles[CLEAN]), tmp_path / "unraced", VerifyOptions())
    assert clean.verdict is Verdict.VERIFIED
    baseline = open_fds()
    monkeypatch.setattr(verify_module, "verify_contents", judged)
    with pytest.raises(OutputError, match="replaced while extracting"):
        extract_bundle(str(bundles[CLEAN]), out, VerifyOptions())
    assert snapshot(outside) == {
        "precious.txt": SENTINEL,
        "body.json": b"decoy\n",
        "envelope.json": b"decoy\n",
    }
    assert regular_files(out) == []
    assert open_fds() <= baseline


def test_cleanup_of_a_failed_bundle_never_deletes_through_a_link(
    monkeypatch: pytest.MonkeyPatch, bundles: dict[str, Path], tmp_path: Path
) -> None:
    """A bundle that fails verification is removed; data/ was swapped for a link to a
    mirror of it just before: the mirror is untouched, our files are gone."""
    eb = repack.open_bundle(bundles[CLEAN])
    eb.files["data/cases/extra.jsonl"] = b"{}\n"
    archive = repack.write_bundle(eb, tmp_path / "tampered.tar.zst")
    outside = outside_dir(tmp_path)
    out = tmp_path / "out"
    real = verify_module.verify_contents

    mirrors: list[dict[str, bytes | str]] = []

    def judged(*args: Any, **kwargs: Any) -> Any:
        swap_for_link(out / eb.top / "data", outside)
        mirrors.append(snapshot(outside))
        return real(*args, **kwargs)

    monkeypatch.setattr(verify_module, "verify_contents", judged)
    result = extract_bundle(str(archive), out, VerifyOptions())
    assert result.verdict is Verdict.FAILED
    assert len(mirrors[0]) > 60 and mirrors[0]["precious.txt"] == SENTINEL
    assert snapshot(outside) == mirrors[0]
    assert regular_files(out) == []


# ------------------------------------------------------------- the writer alone


def test_the_window_between_mkdir_and_open_is_checked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No call makes a directory and opens it at once: a link put in its place between
    the two is refused, and so is a directory someone already filled."""
    outside = outside_dir(tmp_path)
    real_mkdir = os.mkdir

    def racing_mkdir(plant: str) -> Callable[..., None]:
        def mkdir(path: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
            real_mkdir(path, mode, dir_fd=dir_fd)
            os.rename(path, f"{path}.moved", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            if plant == "link":
                os.symlink(outside, path, dir_fd=dir_fd)
            else:
                real_mkdir(path, 0o777, dir_fd=dir_fd)
                fd = os.open(f"{path}/x", os.O_WRONLY | os.O_CREAT, 0o666, dir_fd=dir_fd)
                os.close(fd)

        return mkdir

    for plant in ("link", "filled"):
        root = tmp_path / plant
        root.mkdir()
        writer = Extractor(root)
        writer.directory("top")
        monkeypatch.setattr(os, "mkdir", racing_mkdir(plant))
        with pytest.raises(OutputError, match="replaced while extracting"):
            writer.directory("top/data")
        monkeypatch.setattr(os, "mkdir", real_mkdir)
        with pytest.raises(OutputError):
            writer.open("top/data/file")
        writer.remove_all()
        assert snapshot(outside) == {"precious.txt": SENTINEL}


def test_deep_trees_beyond_the_cached_descriptors(tmp_path: Path) -> None:
    """A hostile archive may nest thousands of levels: descriptors stay bounded, a swap
    deep below the cached ones is found, and removal still reaches everything."""
    from bundler.archive.safe_extract import MAX_CACHED_DEPTH

    depth = MAX_CACHED_DEPTH + 40
    names = ["/".join(["d"] * (i + 1)) for i in range(depth)]
    outside = outside_dir(tmp_path)
    root = tmp_path / "out"
    root.mkdir()
    baseline = open_fds()
    writer = Extractor(root)
    for name in names:
        writer.directory(name)
    with writer.open(names[-1] + "/leaf") as fh:
        fh.write(b"leaf\n")
    assert open_fds() - baseline <= MAX_CACHED_DEPTH + 2
    swapped = root / names[MAX_CACHED_DEPTH + 20]
    swap_for_link(swapped, outside)
    with pytest.raises(OutputError, match="replaced while extracting"):
        writer.open(names[-1] + "/second")
    # Everything below the swapped directory is reached where it was moved to and
    # removed; its ancestors still hold the other process's link.
    assert sorted(writer.remove_all()) == sorted(names[: MAX_CACHED_DEPTH + 20])
    assert open_fds() == baseline
    assert regular_files(root) == []
    left = snapshot(root)
    assert all(v == "dir" or v == f"-> {outside}" for v in left.values())
    assert sum(1 for v in left.values() if v == "dir") == MAX_CACHED_DEPTH + 20


def test_removal_takes_everything_written_and_nothing_else(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    """After a full write another process adds its own file in one of our directories
    and renames one of our files: removal takes all of ours (the renamed one found by
    identity), keeps theirs and the directories that still hold it, and says which."""
    steps = steps_of(bundles[CLEAN])
    top = steps[0].name
    root = tmp_path / "out"
    root.mkdir()
    writer = Extractor(root)
    assert play(writer, steps, before=lambda i: None) is None
    theirs = root / top / "data" / "checks" / "theirs.txt"
    theirs.write_bytes(SENTINEL)
    body = root / top / "data" / "report" / "body.json"
    os.rename(body, body.with_name("renamed.json"))
    left = writer.remove_all()
    assert sorted(left) == [top, f"{top}/data", f"{top}/data/checks"]
    assert snapshot(root) == {
        top: "dir",
        f"{top}/data": "dir",
        f"{top}/data/checks": "dir",
        f"{top}/data/checks/theirs.txt": SENTINEL,
    }


def test_the_root_is_opened_once_and_must_be_a_plain_empty_directory(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(OutputError, match="without following links"):
        Extractor(link)
    (target / "x").write_bytes(b"x")
    with pytest.raises(OutputError, match="not empty"):
        Extractor(target)
    root = tmp_path / "root"
    root.mkdir()
    writer = Extractor(root)
    for bad in ("a/../b", "/abs", "a//b", "./a", ""):
        with pytest.raises(OutputError, match="not a plain relative path"):
            writer.directory(bad)
    writer.remove_all()


def test_a_created_root_is_removed_only_while_it_is_ours(tmp_path: Path) -> None:
    root = tmp_path / "made"
    root.mkdir()
    writer = Extractor(root, created=True)
    writer.directory("top")
    assert writer.remove_all() == []
    assert not root.exists()
    root.mkdir()
    writer = Extractor(root, created=True)
    os.rename(root, tmp_path / "aside")
    root.mkdir()  # someone else's directory now has the name
    assert writer.remove_all() == ["."]
    assert root.is_dir() and (tmp_path / "aside").is_dir()
    shutil.rmtree(tmp_path / "aside")
