"""fixity (SPEC section 13): outcomes, the ledger, selection, interruption, object
storage, the summary and the record, end to end through the CLI."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import CLI, run_cli
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bundler.core.schemas import validator_for
from bundler.fixity.ledger import SCHEMA_VERSION
from bundler.fixity.select import group_of


def _validate(name: str, value: Any) -> None:
    errors = sorted(str(e) for e in validator_for(name).iter_errors(value))
    assert not errors, errors


def _archive(tmp_path: Path, bundles: dict[str, Path], n: int = 24) -> Path:
    """A local archive: one small bundle copied under ``n`` names in a few directories."""
    root = tmp_path / "archive"
    source = bundles["rpt-clean/alice"]
    for i in range(n):
        directory = root / f"shelf-{i % 4}"
        directory.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, directory / f"bundle-{i:03d}.tar.zst")
    return root


def _fixity(*args: str, cwd: Path | None = None) -> tuple[int, dict[str, Any], str]:
    # One process unless a test asks for more: starting workers costs more than these
    # small archives take to check.
    workers = () if "--workers" in args else ("--workers", "1")
    done = run_cli("fixity", *args, *workers, "--json", "-q", cwd=cwd)
    lines = done.stdout.decode().splitlines()
    assert len(lines) == 1, (done.stdout, done.stderr)
    summary = orjson.loads(lines[0])
    _validate("fixity-summary", summary)
    return done.returncode, summary, done.stderr.decode()


def _events(ledger: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(ledger) as conn:
        return list(conn.execute("SELECT key, outcome, run_id FROM events ORDER BY id"))


def test_local_pass_then_rot_truncation_and_deletion(
    tmp_path: Path, bundles: dict[str, Path]
) -> None:
    root = _archive(tmp_path, bundles, n=8)
    ledger = tmp_path / "ledger.sqlite"
    code, summary, _ = _fixity(str(root), "--ledger", str(ledger), "--workers", "2")
    assert code == 0
    assert summary["counts"] == {"pass": 8, "fail": 0, "missing": 0, "error": 0}
    assert summary["bytes_read"] == 8 * bundles["rpt-clean/alice"].stat().st_size
    assert summary["shares"] == {"30d": 1.0, "90d": 1.0, "365d": 1.0}

    rotted = root / "shelf-0/bundle-000.tar.zst"
    data = bytearray(rotted.read_bytes())
    data[len(data) // 2] ^= 0x40  # same length, other bytes
    rotted.write_bytes(bytes(data))
    truncated = root / "shelf-1/bundle-001.tar.zst"
    truncated.write_bytes(truncated.read_bytes()[:-100])
    (root / "shelf-2/bundle-002.tar.zst").unlink()

    for level in ("object", "full"):
        code, summary, _ = _fixity(str(root), "--ledger", str(ledger), "--level", level)
        assert code == 1
        assert summary["counts"] == {"pass": 5, "fail": 2, "missing": 1, "error": 0}
        problems = {p["key"]: p for p in summary["problems"]}
        assert problems["shelf-0/bundle-000.tar.zst"]["outcome"] == "fail"
        assert "altered at rest" in problems["shelf-0/bundle-000.tar.zst"]["detail"]
        assert problems["shelf-1/bundle-001.tar.zst"]["outcome"] == "fail"
        assert problems["shelf-2/bundle-002.tar.zst"]["outcome"] == "missing"
        assert all("\n" not in p["detail"] for p in summary["problems"])

    human = run_cli("fixity", str(root), "--ledger", str(ledger), "--level", "object")
    assert human.returncode == 1
    text = human.stdout.decode()
    assert "5 pass, 2 fail, 1 missing, 0 error" in text
    # Each with the time it was found (SPEC 13.1).
    assert re.search(r"  - fail since [0-9T:.-]+Z: shelf-0/bundle-000\.tar\.zst: ", text)
    assert re.search(r"  - missing since [0-9T:.-]+Z: shelf-2/bundle-002\.tar\.zst: ", text)
    assert "within 30/90/365 days" in text


def test_full_level_fails_a_bundle_that_was_broken_when_first_seen(
    tmp_path: Path, bundles: dict[str, Path]
) -> None:
    root = _archive(tmp_path, bundles, n=2)
    ledger = tmp_path / "ledger.sqlite"
    broken = root / "shelf-0/bundle-000.tar.zst"
    data = bytearray(broken.read_bytes())
    data[len(data) // 2] ^= 0x01
    broken.write_bytes(bytes(data))
    # Without a recorded digest, object level has nothing to compare with: it passes
    # and pins the digest; full level reads the archive and does not.
    code, summary, _ = _fixity(str(root), "--ledger", str(ledger), "--level", "full")
    assert code in (1, 3)
    outcome = {p["key"]: p["outcome"] for p in summary["problems"]}
    assert outcome["shelf-0/bundle-000.tar.zst"] in ("fail", "error")
    assert summary["counts"]["pass"] == 1


def test_sample_groups_cover_every_bundle_exactly_once(
    tmp_path: Path, bundles: dict[str, Path]
) -> None:
    root = _archive(tmp_path, bundles, n=30)
    ledger = tmp_path / "ledger.sqlite"
    seen: list[str] = []
    for k in range(7):
        code, summary, _ = _fixity(
            str(root), "--ledger", str(ledger), "--sample", f"{k}/7", "--level", "object"
        )
        assert code == 0
        assert summary["selection"]["sample"] == f"{k}/7"
        run_keys = [key for key, _, run in _events(ledger) if run == summary["run_id"]]
        assert all(group_of(key, 7) == k for key in run_keys)
        seen += run_keys
    assert sorted(seen) == sorted(str(p.relative_to(root)) for p in root.rglob("*.tar.zst"))
    assert len(set(seen)) == len(seen) == 30


def test_older_than_right_after_a_run_checks_nothing(
    tmp_path: Path, bundles: dict[str, Path]
) -> None:
    root = _archive(tmp_path, bundles, n=6)
    ledger = tmp_path / "ledger.sqlite"
    assert _fixity(str(root), "--ledger", str(ledger), "--level", "object")[0] == 0
    # A first sight is always full (SPEC 13.1), so a full run right after checks nothing.
    code, summary, _ = _fixity(str(root), "--ledger", str(ledger), "--older-than", "1h")
    assert (code, summary["checked"]) == (0, 0)
    with sqlite3.connect(ledger) as conn:
        levels = {row[0] for row in conn.execute("SELECT level FROM events")}
    assert levels == {"full"}
    code, summary, _ = _fixity(
        str(root), "--ledger", str(ledger), "--older-than", "12h", "--level", "object"
    )
    assert (code, summary["checked"]) == (0, 0)  # the full check counts as an object one


def test_limit_and_limit_bytes_take_the_oldest_first(
    tmp_path: Path, bundles: dict[str, Path]
) -> None:
    root = _archive(tmp_path, bundles, n=6)
    ledger = tmp_path / "ledger.sqlite"
    size = bundles["rpt-clean/alice"].stat().st_size
    _, first, _ = _fixity(str(root), "--ledger", str(ledger), "--limit", "4", "--level", "object")
    assert first["checked"] == 4
    _, second, _ = _fixity(
        str(root), "--ledger", str(ledger), "--limit-bytes", str(2 * size), "--level", "object"
    )
    assert second["checked"] == 2
    firsts = {k for k, _, r in _events(ledger) if r == first["run_id"]}
    seconds = {k for k, _, r in _events(ledger) if r == second["run_id"]}
    assert not firsts & seconds  # the never-checked two went first


def test_sigkill_mid_run_loses_only_checks_in_flight(
    tmp_path: Path, bundles: dict[str, Path]
) -> None:
    root = _archive(tmp_path, bundles, n=80)
    ledger = tmp_path / "ledger.sqlite"
    proc = subprocess.Popen(
        [*CLI, "fixity", str(root), "--ledger", str(ledger), "--workers", "1", "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if ledger.exists():
                try:
                    if _events(ledger):
                        break
                except sqlite3.Error:
                    pass
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    first = _events(ledger)
    assert 0 < len(first) < 80, len(first)
    code, summary, _ = _fixity(str(root), "--ledger", str(ledger), "--older-than", "1h")
    assert code == 0
    assert summary["checked"] == 80 - len(first)
    keys = [key for key, _, _ in _events(ledger)]
    assert len(keys) == len(set(keys)) == 80  # nothing checked twice, nothing lost


def test_ledger_schema_version_and_bad_ledger(tmp_path: Path, bundles: dict[str, Path]) -> None:
    root = _archive(tmp_path, bundles, n=1)
    ledger = tmp_path / "ledger.sqlite"
    assert _fixity(str(root), "--ledger", str(ledger), "--level", "object")[0] == 0
    with sqlite3.connect(ledger) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        row = conn.execute(
            "SELECT key, size, sha256, first_seen, last_outcome FROM bundles"
        ).fetchone()
    digest = "sha256:" + hashlib.sha256(bundles["rpt-clean/alice"].read_bytes()).hexdigest()
    assert row[:3] == (
        "shelf-0/bundle-000.tar.zst",
        bundles["rpt-clean/alice"].stat().st_size,
        digest,
    )
    assert row[4] == "pass"

    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database, not at all" * 100)
    done = run_cli("fixity", str(root), "--ledger", str(junk))
    assert done.returncode == 3
    assert b"junk.sqlite" in done.stderr and b"Traceback" not in done.stderr
    assert done.stdout == b""

    newer = tmp_path / "newer.sqlite"
    with sqlite3.connect(newer) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    done = run_cli("fixity", str(root), "--ledger", str(newer))
    assert done.returncode == 3 and b"newer" in done.stderr

    missing = run_cli("fixity", str(tmp_path / "nowhere"), "--ledger", str(ledger))
    assert missing.returncode == 3 and b"nowhere" in missing.stderr
    for bad in (["--sample", "7/7"], ["--sample", "x"], ["--older-than", "3 days"]):
        done = run_cli("fixity", str(root), "--ledger", str(ledger), *bad)
        assert done.returncode == 2, bad
        assert bad[0].encode() in done.stderr


# Every value past an option's bound is a usage error naming the bound, in every unit,
# at the bound and one past it; never a traceback (a cutoff before year 1 once was).
@pytest.mark.parametrize(
    ("option", "value", "accepted"),
    [
        ("--older-than", "36525d", True),
        ("--older-than", "36526d", False),
        ("--older-than", "740000d", False),
        ("--older-than", "2932897d", False),
        ("--older-than", "5217w", True),
        ("--older-than", "5218w", False),
        ("--older-than", "876600h", True),
        ("--older-than", "876601h", False),
        ("--older-than", "52596000m", True),
        ("--older-than", "3155760001s", False),
        ("--older-than", "9" * 40 + "d", False),
        ("--sample", "0/999999999", True),
        ("--sample", "1/1000000000", False),
        ("--sample", "0/" + "9" * 40, False),
    ],
)
def test_option_bounds_are_named(
    option: str, value: str, accepted: bool, tmp_path: Path, bundles: dict[str, Path]
) -> None:
    root = _archive(tmp_path, bundles, n=1)
    ledger = tmp_path / "l.sqlite"
    done = run_cli("fixity", str(root), "--ledger", str(ledger), option, value, "-q")
    assert b"Traceback" not in done.stderr
    if accepted:
        assert done.returncode == 0, done.stderr
        return
    assert done.returncode == 2, done.stderr
    line = done.stderr.decode().strip()
    assert "\n" not in line and line.startswith(f"evalbook-bundle: error: {option}:")
    assert ("36,525 days" if option == "--older-than" else "999,999,999") in line
    assert not ledger.exists()


# Every file a run writes is an output checked before any work: an existing record or
# (when signed) record signature is refused like any output (exit 3), and the record
# may not be the ledger or a file SQLite keeps beside it (exit 2); no ledger is made.
@pytest.mark.parametrize(
    ("record", "planted", "signed", "code"),
    [
        ("r.jsonl", "r.jsonl", False, 3),
        ("r.jsonl", "r.jsonl", True, 3),
        ("r.jsonl", "r.jsonl.sig", True, 3),
        ("r.jsonl", "r.jsonl.sig/", True, 3),  # a directory where the signature goes
        ("r.jsonl", "r.jsonl/", False, 3),  # and where the record goes
        ("l.sqlite", None, False, 2),
        ("l.sqlite-wal", None, False, 2),
        ("l.sqlite-journal", None, True, 2),
        ("l.sqlite-shm", None, False, 2),
        ("l.sqlit", None, True, None),  # the signature l.sqlit.sig is no ledger file
    ],
)
def test_record_outputs_are_checked_before_the_run(
    record: str,
    planted: str | None,
    signed: bool,
    code: int | None,
    tmp_path: Path,
    bundles: dict[str, Path],
) -> None:
    root = _archive(tmp_path, bundles, n=1)
    work = tmp_path / "out"
    work.mkdir()
    if planted is not None and planted.endswith("/"):
        (work / planted).mkdir()
    elif planted is not None:
        (work / planted).write_bytes(b"kept")
    key = tmp_path / "id_ed25519"
    key.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    key.chmod(0o600)
    args = ["--record", str(work / record), *(["--key", str(key)] if signed else [])]
    done = run_cli("fixity", str(root), "--ledger", str(work / "l.sqlite"), *args, "-q")
    assert b"Traceback" not in done.stderr
    if code is None:
        assert done.returncode == 0, done.stderr
        assert (work / (record + ".sig")).is_file()
        return
    assert done.returncode == code, done.stderr
    assert done.stderr.count(b"\n") == 1 and b"--record" in done.stderr
    assert not (work / "l.sqlite").exists(), "a refused run made a ledger"
    if planted is not None and planted.endswith("/"):
        assert (work / planted).is_dir() and not any((work / planted).iterdir())
    elif planted is not None:
        assert (work / planted).read_bytes() == b"kept"


def _record_lines(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    raw_lines = data.splitlines(keepends=True)
    lines = [orjson.loads(line) for line in raw_lines]
    _validate("fixity-run", lines[0])
    for line in lines[1:-1]:
        _validate("fixity-check", line)
    _validate("fixity-footer", lines[-1])
    preceding = b"".join(raw_lines[:-1])
    assert lines[-1]["preceding_sha256"] == "sha256:" + hashlib.sha256(preceding).hexdigest()
    return lines


def test_record_is_schema_valid_and_signed(tmp_path: Path, bundles: dict[str, Path]) -> None:
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed")
    root = _archive(tmp_path, bundles, n=5)
    (root / "shelf-3/bundle-003.tar.zst").write_bytes(b"not an archive")
    key = tmp_path / "id_ed25519"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "keeper", "-f", str(key)],
        check=True,
    )
    record = tmp_path / "run.jsonl"
    code, summary, _ = _fixity(
        str(root),
        "--ledger",
        str(tmp_path / "l.sqlite"),
        "--record",
        str(record),
        "--key",
        str(key),
    )
    assert code in (1, 3)
    lines = _record_lines(record)
    assert lines[0]["run_id"] == summary["run_id"] == lines[-1]["run_id"]
    assert lines[-1]["counts"] == summary["counts"]
    assert len(lines) == 2 + 5
    assert summary["record_chain_sha256"] == lines[-1]["preceding_sha256"]
    assert summary["record_sha256"] == "sha256:" + hashlib.sha256(record.read_bytes()).hexdigest()
    sig = Path(str(record) + ".sig")
    assert summary["signature"] == str(sig)
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(
        "keeper "
        + (tmp_path / "id_ed25519.pub").read_text().split(" ", 2)[0]
        + " "
        + (tmp_path / "id_ed25519.pub").read_text().split(" ", 2)[1]
        + "\n"
    )
    with record.open("rb") as fh:
        checked = subprocess.run(
            [
                "ssh-keygen",
                "-Y",
                "verify",
                "-f",
                str(allowed),
                "-I",
                "keeper",
                "-n",
                "evalbook-fixity-v1",
                "-s",
                str(sig),
            ],
            stdin=fh,
            capture_output=True,
            check=False,
        )
    assert checked.returncode == 0, checked.stderr
    again = run_cli(
        "fixity", str(root), "--ledger", str(tmp_path / "l.sqlite"), "--record", str(record)
    )
    assert again.returncode == 3 and b"never written over" in again.stderr


# ------------------------------------------------------------------ object storage


@pytest.mark.s3
def test_archive_prefix_altered_at_rest(
    s3_server: Any, raw: Any, bucket: str, bundles: dict[str, Path], tmp_path: Path
) -> None:
    endpoint = ["--endpoint-url", s3_server.endpoint]
    prefix = f"s3://{bucket}/archive"
    names = [
        "rpt-clean/alice",
        "rpt-clean/bob",
        "rpt-superseded/alice",
        "rpt-retention/alice",
        "rpt-superseded/bob",
    ]
    keys = []
    for name in names:
        done = run_cli("upload", str(bundles[name]), prefix, *endpoint, "--json")
        assert done.returncode == 0, done.stderr
        keys.append(orjson.loads(done.stdout)["key"])
    ledger = tmp_path / "ledger.sqlite"
    code, summary, _ = _fixity(prefix, "--ledger", str(ledger), *endpoint, "--workers", "2")
    assert code == 0, summary
    assert summary["counts"]["pass"] == 5

    rotted, stripped, deleted = keys[0], keys[1], keys[2]
    head = raw.head_object(Bucket=bucket, Key=rotted)
    data = bytearray(raw.get_object(Bucket=bucket, Key=rotted)["Body"].read())
    data[len(data) // 2] ^= 0x08
    raw.put_object(Bucket=bucket, Key=rotted, Body=bytes(data), Metadata=head["Metadata"])
    body = raw.get_object(Bucket=bucket, Key=stripped)["Body"].read()
    raw.put_object(Bucket=bucket, Key=stripped, Body=body)  # the same bytes, no metadata
    raw.delete_object(Bucket=bucket, Key=deleted)

    for level in ("object", "full"):
        code, summary, _ = _fixity(prefix, "--ledger", str(ledger), *endpoint, "--level", level)
        assert code == 1
        outcome = {p["key"]: (p["outcome"], p["detail"]) for p in summary["problems"]}
        assert outcome[rotted][0] == "fail" and "altered at rest" in outcome[rotted][1]
        # The same bytes without metadata are verified from their bytes (SPEC 6): no problem.
        assert stripped not in outcome
        assert outcome[deleted][0] == "missing"
        assert summary["counts"] == {"pass": 3, "fail": 1, "missing": 1, "error": 0}

    # A bundle first seen without its sha256 metadata is verified from its bytes (SPEC 6),
    # as every reader verifies it: it passes; the rotted one still fails.
    fresh = tmp_path / "fresh.sqlite"
    code, summary, _ = _fixity(prefix, "--ledger", str(fresh), *endpoint, "--level", "object")
    outcome = {p["key"]: p["outcome"] for p in summary["problems"]}
    assert stripped not in outcome
    assert outcome[rotted] == "fail"  # the metadata still records the old bytes
    assert code == 1

    record_run = run_cli(
        "fixity",
        prefix,
        "--ledger",
        str(ledger),
        *endpoint,
        "--upload-record",
        "--json",
        "-q",
        "--sample",
        "0/1",
    )
    uploaded = orjson.loads(record_run.stdout)
    assert uploaded["record_url"].startswith(f"s3://{bucket}/archive/fixity/")
    key = uploaded["record_url"].removeprefix(f"s3://{bucket}/")
    stored = raw.get_object(Bucket=bucket, Key=key)["Body"].read()
    path = tmp_path / "stored.jsonl"
    path.write_bytes(stored)
    assert _record_lines(path)[0]["run_id"] == uploaded["run_id"]


@pytest.mark.s3
def test_unreachable_storage_exits_5(tmp_path: Path, s3_env: None) -> None:
    done = run_cli(
        "fixity",
        "s3://nobucket/archive",
        "--ledger",
        str(tmp_path / "l.sqlite"),
        "--endpoint-url",
        "http://127.0.0.1:9",
    )
    assert done.returncode == 5, done.stderr
    assert b"Traceback" not in done.stderr


def test_scheduler_without_distributed_names_the_extra(
    tmp_path: Path, bundles: dict[str, Path]
) -> None:
    root = _archive(tmp_path, bundles, n=1)
    blocker = tmp_path / "blocker" / "distributed"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('not installed')\n")
    done = run_cli(
        "fixity",
        str(root),
        "--ledger",
        str(tmp_path / "l.sqlite"),
        "--scheduler",
        "tcp://127.0.0.1:8786",
        env={"PYTHONPATH": str(blocker.parent)},
    )
    assert done.returncode == 2
    assert b"pip install 'evalbook-bundle[cluster]'" in done.stderr
    assert done.stderr.count(b"\n") == 1


def test_a_sidecar_signature_replaced_by_another_keys_fails(
    tmp_path: Path, bundles: dict[str, Path]
) -> None:
    """The archive's bytes are intact but its signature is now a stranger's: at level
    full with --allowed-signers that is a failed check, not a pass."""
    keygen = shutil.which("ssh-keygen")
    assert keygen is not None, "ssh-keygen is needed (openssh-client; .ci/run installs it)"
    keys = {}
    for name in ("alice", "mallory"):
        key = tmp_path / name
        subprocess.run(
            [keygen, "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True
        )
        keys[name] = key
    key_type, blob = (tmp_path / "alice.pub").read_text().split()[:2]
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f'alice namespaces="evalbook-bundle-head-v1" {key_type} {blob}\n')
    root = _archive(tmp_path, bundles, n=2)
    archives = sorted(root.rglob("*.tar.zst"))
    for archive in archives:
        assert run_cli("sign", str(archive), "--key", str(keys["alice"]), "-q").returncode == 0
    ledger = tmp_path / "ledger.sqlite"
    code, summary, _ = _fixity(
        str(root), "--ledger", str(ledger), "--allowed-signers", str(allowed)
    )
    assert (code, summary["counts"]["pass"]) == (0, 2)

    # Replace the first archive's sidecar with mallory's signature of the same head.
    victim = archives[0]
    Path(f"{victim}.sig").unlink()
    assert run_cli("sign", str(victim), "--key", str(keys["mallory"]), "-q").returncode == 0
    code, summary, _ = _fixity(
        str(root), "--ledger", str(ledger), "--allowed-signers", str(allowed)
    )
    assert code == 1
    assert summary["counts"] == {"pass": 1, "fail": 1, "missing": 0, "error": 0}
    (problem,) = summary["problems"]
    assert problem["key"] == str(victim.relative_to(root)) and problem["outcome"] == "fail"
    assert "signature" in problem["detail"]
