"""The command line at its edges (issue 14 items 6, 7, 9; SPEC sections 7 and 8).

File modes (0666 less the umask), SIGTERM handled as SIGINT (exit 143, no ``*.partial``
left), export times the archive can hold (exit 2 naming the option), and messages that
name the thing and the way forward. End-to-end cases run the console script.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import CLI, run_cli, wait_for_temporary

from bundler import cli as cli_module
from bundler.core.errors import UsageError
from bundler.core.outputs import write_new_file, write_output_dir

EXPORTED_AT_TEXT = "2026-11-30T00:00:00Z"
SSH_KEYGEN = shutil.which("ssh-keygen") or "/usr/bin/ssh-keygen"


@contextmanager
def umask(value: int) -> Iterator[None]:
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def cli_exe() -> list[str]:
    exe = shutil.which("evalbook-bundle", path=str(Path(CLI[0]).parent))
    return [exe] if exe else list(CLI)


def run_with_umask(mask: int, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*cli_exe(), *args],
        capture_output=True,
        preexec_fn=lambda: os.umask(mask),
        check=False,
        timeout=120,
    )


# ---------------------------------------------------------------- item 6: file modes


@pytest.mark.parametrize(
    ("mask", "expected"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600), (0, 0o666)]
)
def test_output_files_get_0666_less_the_umask(tmp_path: Path, mask: int, expected: int) -> None:
    with umask(mask):
        write_new_file(tmp_path / "one", b"x")
        written = write_output_dir(tmp_path / "dir", {"a.json": b"{}", "a.md": b"#"})
    assert mode(tmp_path / "one") == expected
    assert [mode(p) for p in written] == [expected, expected]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "one"]  # no temporary left


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o077, 0o600)])
def test_verification_files_are_readable_by_a_colleague(
    bundles: dict[str, Path], tmp_path: Path, mask: int, expected: int
) -> None:
    out = tmp_path / "out"
    proc = run_with_umask(
        mask, "verify", str(bundles["rpt-clean/alice"]), "--output-dir", str(out), "--quiet"
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert {p.name: mode(p) for p in out.iterdir()} == {
        "verification.json": expected,
        "verification.md": expected,
    }


def test_exported_archive_is_readable_by_a_colleague(fixture_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "b.tar.zst"
    proc = run_with_umask(
        0o022,
        "export",
        "--store",
        str(fixture_store),
        "--report",
        "rpt-clean",
        "--principal",
        "alice",
        "--out",
        str(out),
        "--exported-at",
        EXPORTED_AT_TEXT,
        "--quiet",
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert mode(out) == 0o644


def test_temporary_names_are_hidden_partial_files_beside_the_target(tmp_path: Path) -> None:
    from bundler.core.outputs import create_temp

    fd, temp = create_temp(tmp_path / "x.tar.zst")
    os.close(fd)
    assert temp.parent == tmp_path
    assert temp.name.startswith(".x.tar.zst.") and temp.name.endswith(".partial")
    with pytest.raises(FileExistsError):
        os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    # A link planted at a would-be name is never followed.
    fd2, other = create_temp(tmp_path / "x.tar.zst")
    os.close(fd2)
    assert other != temp


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, cli_module.Terminated])
def test_an_interrupt_just_after_the_temporary_file_is_made_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, interrupt: type[BaseException]
) -> None:
    # A signal is acted on as soon as open() returns, before create_temp has handed the
    # name to a caller that would remove it: create_temp removes it itself.
    from bundler.core import outputs

    real_open = os.open

    def open_then_interrupted(path: Any, flags: int, mode: int = 0o777) -> int:
        os.close(real_open(path, flags, mode))
        raise interrupt()

    monkeypatch.setattr(os, "open", open_then_interrupted)
    with pytest.raises(interrupt):
        outputs.create_temp(tmp_path / "x.tar.zst")
    with pytest.raises(interrupt):
        outputs.write_new_file(tmp_path / "y.json", b"{}")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------- item 6: SIGTERM like SIGINT


@pytest.fixture(scope="module")
def large_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bundler.testing.fixturegen import build_large_store

    store = tmp_path_factory.mktemp("large") / "store"
    build_large_store(store, cases=20_050, checks=4, payload_bytes=0)
    return store


def _interrupt_export(large_store: Path, tmp_path: Path, sig: int) -> tuple[int, str, Path, Path]:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "evalbook-bundle-rpt-large.tar.zst"
    cmd = [
        *cli_exe(),
        "export",
        "--store",
        str(large_store),
        "--report",
        "rpt-large",
        "--principal",
        "alice",
        "--out",
        str(target),
        "--exported-at",
        EXPORTED_AT_TEXT,
        "--quiet",
    ]
    # A shell without job control starts background commands with SIGINT ignored, and
    # the ignored disposition is inherited through exec: an export started that way
    # rightly ignores Ctrl-C, as any POSIX tool does. The test is about SIGINT delivered
    # to an export that can receive it, so the child starts with SIGINT at its default.
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        wait_for_temporary(out_dir, proc)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err.decode(), out_dir, target


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "code", "word"),
    [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")],
)
def test_signal_mid_export_cleans_up_and_exits_128_plus_the_signal(
    large_store: Path, tmp_path: Path, sig: int, code: int, word: str
) -> None:
    returncode, err, out_dir, target = _interrupt_export(large_store, tmp_path, sig)
    assert returncode == code, err
    assert "Traceback" not in err and word in err
    assert not target.exists()
    assert list(out_dir.iterdir()) == []  # no *.partial left behind


def test_sigterm_handler_raises_a_keyboard_interrupt() -> None:
    # The same cleanup paths as SIGINT: every `finally` and `except BaseException` run.
    assert issubclass(cli_module.Terminated, KeyboardInterrupt)
    previous = signal.signal(signal.SIGTERM, cli_module._on_sigterm)
    previous_hup = signal.getsignal(signal.SIGHUP)
    try:
        with pytest.raises(cli_module.Terminated):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
        # A second SIGTERM (or a SIGHUP) during the cleanup is ignored, not a second
        # interrupt.
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGHUP, previous_hup)


def test_main_restores_the_sigterm_handler(capsys: pytest.CaptureFixture[str]) -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit):
        cli_module.main(["--version"])
    assert signal.getsignal(signal.SIGTERM) == before


# -------------------------------------------------------- item 7: times the archive holds


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("1969-12-31T23:59:59Z", "out of range"),
        ("2300-01-01T00:00:00Z", "out of range"),
        ("2242-03-16T12:56:32Z", "out of range"),  # one second past 8**11 - 1
        ("1970-01-01T00:59:59+01:00", "out of range"),  # 1969 in UTC
        ("0001-01-01T00:00:00+01:00", "not a valid time"),
        ("9999-12-31T23:59:59-01:00", "not a valid time"),
        ("2026-11-30T00:00:00", "not an RFC 3339 timestamp"),
        ("2026-11-30T00:00:00.5Z", "not an RFC 3339 timestamp"),
        ("2026-11-30T00:00:00,5Z", "not an RFC 3339 timestamp"),
        ("2026-W48-1T00:00:00Z", "not an RFC 3339 timestamp"),
        ("\uff12\uff10\uff12\uff16-11-30T00:00:00Z", "not an RFC 3339 timestamp"),
        ("2026-02-30T00:00:00Z", "not a valid time"),
        ("2026-11-30T24:00:00Z", "not a valid time"),
        ("2026-11-30T00:00:00+24:00", "not a valid time"),
        ("", "not an RFC 3339 timestamp"),
        ("now", "not an RFC 3339 timestamp"),
    ],
)
def test_exported_at_out_of_range_or_malformed_is_exit_2_naming_the_option(
    fixture_store: Path, tmp_path: Path, value: str, why: str
) -> None:
    out = tmp_path / "b.tar.zst"
    proc = run_cli(
        "export",
        "--store",
        str(fixture_store),
        "--report",
        "rpt-clean",
        "--principal",
        "alice",
        "--out",
        str(out),
        "--exported-at",
        value,
    )
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "--exported-at" in err and why in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("-1", "not a whole number"),
        ("1.5", "not a whole number"),
        ("", "not a whole number"),
        (" 1", "not a whole number"),
        ("²", "not a whole number"),  # str.isdigit() says yes, int() says no
        ("١٢٣", "not a whole number"),  # Arabic-Indic digits: int() would take them
        ("0x10", "not a whole number"),
        ("8589934592", "out of range"),
        ("99999999999999999999", "out of range"),
        ("9" * 400, "not a whole number"),
    ],
)
def test_source_date_epoch_out_of_range_or_malformed_is_exit_2_naming_it(
    fixture_store: Path, tmp_path: Path, value: str, why: str
) -> None:
    proc = run_cli(
        "export",
        "--store",
        str(fixture_store),
        "--report",
        "rpt-clean",
        "--principal",
        "alice",
        "--out",
        str(tmp_path / "b.tar.zst"),
        env={"SOURCE_DATE_EPOCH": value},
    )
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "SOURCE_DATE_EPOCH" in err and why in err
    assert list(tmp_path.iterdir()) == []


def test_export_eb_refuses_the_same_times(tmp_path: Path) -> None:
    from conftest import REPO

    eb = REPO / "fixtures" / "eval-banana"
    run = sorted((eb / "runs" / "default").iterdir())[0]
    for args, env, name in [
        (("--exported-at", "2300-01-01T00:00:00Z"), None, "--exported-at"),
        ((), {"SOURCE_DATE_EPOCH": "99999999999999999999"}, "SOURCE_DATE_EPOCH"),
    ]:
        proc = run_cli(
            "export-eb",
            str(run),
            "--project",
            str(eb / "project"),
            "--out",
            str(tmp_path / "b.tar.zst"),
            *args,
            env=env,
        )
        err = proc.stderr.decode()
        assert proc.returncode == 2 and name in err and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("1970-01-01T00:00:00Z", 0),
        ("1970-01-01T01:00:00+01:00", 0),
        ("2242-03-16T12:56:31Z", 8**11 - 1),
        ("2026-11-30t00:00:00z", 1795996800),
    ],
)
def test_the_bounds_themselves_are_accepted(value: str, seconds: int) -> None:
    assert cli_module._exported_at(value) == datetime.fromtimestamp(seconds, UTC)


def test_source_date_epoch_bounds_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    for seconds in (0, 8**11 - 1):
        monkeypatch.setenv("SOURCE_DATE_EPOCH", str(seconds))
        assert cli_module._exported_at(None) == datetime.fromtimestamp(seconds, UTC)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "8589934592")
    with pytest.raises(UsageError, match="SOURCE_DATE_EPOCH"):
        cli_module._exported_at(None)


def test_the_archive_holds_the_upper_bound(fixture_store: Path, tmp_path: Path) -> None:
    # 8**11 - 1 fits the ustar field: exported and verified (where issued_at allows it).
    out = tmp_path / "b.tar.zst"
    proc = run_cli(
        "export",
        "--store",
        str(fixture_store),
        "--report",
        "rpt-clean",
        "--principal",
        "alice",
        "--out",
        str(out),
        "--exported-at",
        "2242-03-16T12:56:31Z",
        "--quiet",
    )
    assert proc.returncode == 0, proc.stderr.decode()
    proc = run_cli("verify", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr.decode()


def test_exported_at_before_the_reports_issued_at_is_refused(
    fixture_store: Path, tmp_path: Path
) -> None:
    proc = run_cli(
        "export",
        "--store",
        str(fixture_store),
        "--report",
        "rpt-clean",
        "--principal",
        "alice",
        "--out",
        str(tmp_path / "b.tar.zst"),
        "--exported-at",
        "1970-01-01T00:00:00Z",
    )
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "--exported-at" in err and "issued_at" in err
    assert list(tmp_path.iterdir()) == []


def test_exported_at_before_the_runs_completed_at_is_refused(tmp_path: Path) -> None:
    from conftest import REPO

    eb = REPO / "fixtures" / "eval-banana"
    run = sorted((eb / "runs" / "default").iterdir())[0]
    proc = run_cli(
        "export-eb",
        str(run),
        "--project",
        str(eb / "project"),
        "--out",
        str(tmp_path / "b.tar.zst"),
        "--exported-at",
        "1970-01-01T00:00:00Z",
    )
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "--exported-at" in err and "completed_at" in err


# --------------------------------------------------------------- item 9: messages


def test_retain_until_errors_name_the_option(bundles: dict[str, Path]) -> None:
    proc = run_cli(
        "upload", str(bundles["rpt-clean/alice"]), "s3://bucket/prefix", "--retain-until", "soon"
    )
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "--retain-until" in err and "Traceback" not in err


def test_max_bytes_errors_name_the_option(bundles: dict[str, Path]) -> None:
    proc = run_cli("verify", "--max-bytes", "0", str(bundles["rpt-clean/alice"]))
    assert proc.returncode == 2
    assert "--max-bytes" in proc.stderr.decode()


def test_sign_on_a_missing_file_is_not_found_exit_3(tmp_path: Path) -> None:
    key = tmp_path / "key"
    done = subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    proc = run_cli("sign", str(tmp_path / "absent.tar.zst"), "--key", str(key))
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert "not found" in err and "does not verify" not in err
    assert "absent.tar.zst" in err and len(err.splitlines()) == 1
    # Found before the key is even read: the same answer with no usable key.
    proc = run_cli("sign", str(tmp_path / "absent.tar.zst"), "--key", str(tmp_path / "nokey"))
    assert proc.returncode == 3 and "not found" in proc.stderr.decode()
    assert list(p.name for p in tmp_path.iterdir() if p.name.endswith(".sig")) == []


def test_sign_on_a_directory_says_what_sign_takes(tmp_path: Path) -> None:
    proc = run_cli("sign", str(tmp_path), "--key", str(tmp_path / "key"))
    err = proc.stderr.decode()
    assert proc.returncode in (2, 3), err
    assert "Traceback" not in err


def test_a_bad_signature_says_signature_once(bundles: dict[str, Path], tmp_path: Path) -> None:
    keys = {}
    for name in ("alice", "mallory"):
        keys[name] = tmp_path / name
        done = subprocess.run(
            [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(keys[name])],
            capture_output=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()
    archive = tmp_path / "b.tar.zst"
    shutil.copyfile(bundles["rpt-clean/alice"], archive)
    proc = run_cli("sign", str(archive), "--key", str(keys["mallory"]), "--quiet")
    assert proc.returncode == 0, proc.stderr.decode()
    allowed = tmp_path / "allowed_signers"
    public = Path(f"{keys['alice']}.pub").read_text().split()[:2]
    allowed.write_text(f"alice@example.org {' '.join(public)}\n")
    proc = run_cli("verify", str(archive), "--allowed-signers", str(allowed))
    err = proc.stdout.decode()  # verify's result
    assert proc.returncode == 1, err
    assert "signature: signature" not in err
    assert "[2 bundle] signature: " in err and "not in the allowed signers" in err


# ------------------------------------- item 9: messages made in the verifier and reader


def test_a_missing_store_root_is_said_not_to_exist(tmp_path: Path) -> None:
    proc = run_cli("export", "--store", str(tmp_path / "nostore"), "--report", "r",
                   "--principal", "alice", "--out", str(tmp_path / "b.tar.zst"))
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert "does not exist" in err and "not a directory" not in err


def test_a_gzip_file_is_named_as_one(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "bundle.tar.gz"
    path.write_bytes(gzip.compress(b"x" * 100))
    proc = run_cli("verify", str(path))
    err = proc.stdout.decode()  # verify's result
    assert proc.returncode == 3, err
    assert "this is a gzip file, not a zstd frame: not a bundle" in err


def test_a_gnu_tar_repack_is_named_as_one(bundles: dict[str, Path], tmp_path: Path) -> None:
    import tarfile

    import zstandard

    extracted = tmp_path / "x"
    assert run_cli("extract", str(bundles["rpt-clean/alice"]), str(extracted), "--quiet").returncode == 0
    (top,) = extracted.iterdir()
    raw = tmp_path / "gnu.tar"
    with tarfile.open(raw, "w", format=tarfile.GNU_FORMAT) as tar:
        tar.add(top, arcname=top.name)
    archive = tmp_path / "gnu.tar.zst"
    archive.write_bytes(zstandard.ZstdCompressor(write_checksum=True).compress(raw.read_bytes()))
    proc = run_cli("verify", str(archive))
    err = proc.stdout.decode()  # verify's result
    assert proc.returncode == 3, err
    assert "a GNU tar header, not a POSIX ustar header: not a bundle" in err


@pytest.mark.parametrize("command", ["verify", "inspect", "audit", "extract"])
@pytest.mark.parametrize("as_json", [False, True])
def test_max_bytes_cap_names_the_option(
    bundles: dict[str, Path], tmp_path: Path, command: str, as_json: bool
) -> None:
    # The library's text names its parameter (max_bytes=100, the max_bytes cap); the
    # command line shows the option that carries it, in the error line, the record's
    # error and the human summary alike (SPEC 7: "naming the option").
    args = [command, "--max-bytes", "100", str(bundles["rpt-clean/alice"])]
    if command == "extract":
        args.append(str(tmp_path / "bag"))
    proc = run_cli(*args, *(["--json"] if as_json else []))
    out = proc.stdout.decode() + proc.stderr.decode()
    assert proc.returncode == 3, out
    assert "--max-bytes=100" in out and "the --max-bytes cap; raise it" in out, out
    assert " max_bytes=" not in out and "the max_bytes cap" not in out, out
    if as_json:
        record = orjson.loads(proc.stdout)
        assert "--max-bytes=100" in str(record.get("error")), record


def test_max_bytes_in_the_library_names_the_parameter(bundles: dict[str, Path]) -> None:
    import bundler

    result = bundler.verify(bundles["rpt-clean/alice"], max_bytes=100)
    assert result.error is not None and "max_bytes=100" in result.error
    assert "the max_bytes cap" in result.error and "--" not in result.error


def test_verify_on_the_directory_extract_was_given_points_at_the_bag(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    target = tmp_path / "x"
    assert run_cli("extract", str(bundles["rpt-clean/alice"]), str(target), "--quiet").returncode == 0
    proc = run_cli("verify", str(target))
    err = proc.stdout.decode()  # verify's result
    assert proc.returncode == 3, err
    assert f"verify {target / 'evalbook-bundle-rpt-clean'}" in err
    assert run_cli("verify", str(target / "evalbook-bundle-rpt-clean"), "--quiet").returncode == 0


def test_verify_on_a_run_without_project_hints_at_project() -> None:
    from conftest import REPO

    run = sorted((REPO / "fixtures" / "eval-banana" / "runs" / "default").iterdir())[0]
    proc = run_cli("verify", str(run))
    err = proc.stdout.decode()  # verify's result
    assert proc.returncode == 3, err
    assert "eval-banana run directory" in err and "--project" in err


def test_verify_on_a_store_report_hints_at_export(fixture_store: Path) -> None:
    proc = run_cli("verify", str(fixture_store / "reports" / "rpt-clean"))
    err = proc.stdout.decode()  # verify's result
    assert proc.returncode == 3, err
    assert "export --store" in err and "--report rpt-clean" in err


def test_expect_bundle_digest_given_the_archive_hash_says_so(bundles: dict[str, Path]) -> None:
    import hashlib

    archive = bundles["rpt-clean/alice"]
    file_hash = "sha256:" + hashlib.sha256(archive.read_bytes()).hexdigest()
    proc = run_cli("verify", str(archive), "--expect-bundle-digest", file_hash)
    err = proc.stdout.decode()  # verify's result
    assert proc.returncode == 1, err
    assert "archive file's SHA-256" in err and "Bundle-Digest" in err
    other = "sha256:" + "0" * 64
    proc = run_cli("verify", str(archive), "--expect-bundle-digest", other)
    err = proc.stdout.decode()  # verify's result
    assert proc.returncode == 1 and "Bundle-Digest" in err and "archive file's" not in err


def test_a_mistyped_report_id_suggests_the_near_ones(fixture_store: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [*CLI, "export", "--store", str(fixture_store), "--report", "rpt-claen",
         "--principal", "alice", "--out", str(tmp_path / "x.tar.zst")],
        capture_output=True, text=True,
    )
    assert done.returncode == 3, done.stderr
    assert "--report 'rpt-claen': no such report" in done.stderr
    assert "did you mean 'rpt-clean'" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "x.tar.zst").exists()
