"""fixity against real faults (SPEC section 13): a few hundred bundles in SeaweedFS,
damaged the ways archives get damaged, behind a proxy that throttles and resets
connections; and a helper process killed mid-run.

Each fault gets the outcome SPEC 13 names: rot in place, truncation and stripped
metadata fail (altered at rest), a deleted object is missing, a replaced signature
fails, throttling and resets are retried until they pass (or, when they never stop,
end as an error with exit 5), and a digest mismatch is read once and never retried.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import proctable
import pytest
from conftest import CLI, EXPORTED_AT, run_cli
from faulty_proxy import FaultyProxy, no_corruption

from bundler.core.schemas import validator_for
from bundler.evalbook.export import ExportConfig, ExportResult, export_bundle
from bundler.fixity.select import group_of
from bundler.storage import StorageConfig, parse_s3_url, upload_bundle

ARCHIVED = 200  # bundles in the archive: every run checks them all
SMALL = 30  # enough for the retry tests, whose waits dominate


@pytest.fixture(scope="module")
def many(
    fixture_store: Path, tmp_path_factory: pytest.TempPathFactory
) -> list[tuple[Path, ExportResult]]:
    """ARCHIVED distinct bundles (one report exported at ARCHIVED moments)."""
    out = tmp_path_factory.mktemp("many")
    made = []
    for i in range(ARCHIVED):
        path = out / f"b{i:03d}.tar.zst"
        result = export_bundle(
            ExportConfig(
                str(fixture_store), "rpt-clean", "alice", EXPORTED_AT + timedelta(seconds=i), path
            )
        )
        made.append((path, result))
    return made


def _store(many: list[tuple[Path, ExportResult]], endpoint: str, bucket: str) -> list[str]:
    """Upload every bundle under s3://BUCKET/archive as `upload` does; their keys."""
    config = StorageConfig(endpoint_url=endpoint)
    dest = parse_s3_url(f"s3://{bucket}/archive")
    keys = []
    for path, exported in many:
        stored = upload_bundle(
            path,
            dest,
            bundle_digest=exported.bundle_digest,
            report_id=exported.report_id,
            report_digest=exported.report_digest,
            config=config,
            sidecars=[sig] if (sig := Path(f"{path}.sig")).exists() else [],
        )
        keys.append(stored.key)
    return keys


def _fixity(*args: str, workers: int = 2) -> tuple[int, dict[str, Any], str]:
    done = run_cli("fixity", *args, "--workers", str(workers), "--json", "-q", timeout=300)
    lines = done.stdout.decode().splitlines()
    assert len(lines) == 1, (done.stdout, done.stderr)
    summary = orjson.loads(lines[0])
    errors = sorted(str(e) for e in validator_for("fixity-summary").iter_errors(summary))
    assert not errors, errors
    assert b"Traceback" not in done.stderr
    return done.returncode, summary, done.stderr.decode()


def _gets(proxy: FaultyProxy, bucket: str, key: str) -> int:
    """GetObject requests the proxy relayed or answered for ``key``."""
    target = f"/{bucket}/{key}"
    return sum(1 for method, t in proxy.requests if method == "GET" and t == target)


def _first_n(victims: set[str], n: int, what: str) -> Callable[[str, str], str | None]:
    """A fault for the first ``n`` GETs of each victim path; None for the rest."""
    seen: collections.Counter[str] = collections.Counter()

    def fault(method: str, target: str) -> str | None:
        if method != "GET" or target not in victims:
            return None
        seen[target] += 1
        return what if seen[target] <= n else None

    return fault


@pytest.mark.s3
def test_damage_at_rest_gets_the_outcome_spec_13_names(
    s3_server: Any, raw: Any, bucket: str, many: list[tuple[Path, ExportResult]], tmp_path: Path
) -> None:
    keys = _store(many, s3_server.endpoint, bucket)
    prefix = f"s3://{bucket}/archive"
    ledger = str(tmp_path / "ledger.sqlite")
    with FaultyProxy(s3_server.port, select=no_corruption) as proxy:
        endpoint = ["--endpoint-url", proxy.endpoint]
        code, summary, _ = _fixity(prefix, "--ledger", ledger, *endpoint)
        assert (code, summary["counts"]["pass"]) == (0, ARCHIVED), summary["problems"]

        rotted, truncated, deleted, stripped = keys[3], keys[50], keys[101], keys[177]
        replaced = keys[120]
        head = raw.head_object(Bucket=bucket, Key=rotted)
        data = bytearray(raw.get_object(Bucket=bucket, Key=rotted)["Body"].read())
        data[len(data) // 3] ^= 0x01  # one bit, same length, metadata kept: bit rot
        raw.put_object(Bucket=bucket, Key=rotted, Body=bytes(data), Metadata=head["Metadata"])
        head = raw.head_object(Bucket=bucket, Key=truncated)
        data = raw.get_object(Bucket=bucket, Key=truncated)["Body"].read()
        raw.put_object(Bucket=bucket, Key=truncated, Body=data[:-100], Metadata=head["Metadata"])
        raw.delete_object(Bucket=bucket, Key=deleted)
        body = raw.get_object(Bucket=bucket, Key=stripped)["Body"].read()
        raw.put_object(Bucket=bucket, Key=stripped, Body=body)  # same bytes, no metadata
        # Another bundle's bytes, no metadata: the bytes say what happened, not the
        # metadata's absence.
        other = raw.get_object(Bucket=bucket, Key=keys[121])["Body"].read()
        raw.put_object(Bucket=bucket, Key=replaced, Body=other)

        # An object without sha256 metadata is judged by its bytes (SPEC 6): the same
        # bytes as the ledger's baseline pass; other bytes are altered at rest.
        expected = {
            rotted: ("fail", "altered at rest"),
            truncated: ("fail", "altered at rest"),
            deleted: ("missing", "gone"),
            replaced: ("fail", "altered at rest"),
        }
        for level in ("object", "full"):
            proxy.requests.clear()
            code, summary, _ = _fixity(prefix, "--ledger", ledger, *endpoint, "--level", level)
            assert code == 1
            found = {p["key"]: (p["outcome"], p["detail"]) for p in summary["problems"]}
            assert set(found) == set(expected), found
            for key, (outcome, words) in expected.items():
                assert found[key][0] == outcome and words in found[key][1], (level, found[key])
            assert summary["counts"] == {
                "pass": ARCHIVED - 4,
                "fail": 3,
                "missing": 1,
                "error": 0,
            }
            assert stripped not in found  # read, and its bytes are the baseline's
            # A digest mismatch is what the bytes say: read once, never retried.
            assert _gets(proxy, bucket, rotted) == 1
            assert _gets(proxy, bucket, truncated) == 1


@pytest.mark.s3
def test_throttling_is_retried_and_throttling_that_never_stops_is_an_error(
    s3_server: Any, bucket: str, many: list[tuple[Path, ExportResult]], tmp_path: Path
) -> None:
    keys = _store(many[:SMALL], s3_server.endpoint, bucket)
    passes, never = keys[10], keys[20]
    # Four 503 SlowDown answers in a row exhaust the storage client's own retries (it
    # makes 4 attempts), so the first needs fixity's: the fifth request gets through.
    # The second is throttled every time: 3 checks of 4 attempts, then an error.
    fault_passes = _first_n({f"/{bucket}/{passes}"}, 4, "throttle")
    fault_never = _first_n({f"/{bucket}/{never}"}, 10**9, "throttle")

    def fault(method: str, target: str) -> str | None:
        return fault_passes(method, target) or fault_never(method, target)

    with FaultyProxy(s3_server.port, select=no_corruption, fault=fault) as proxy:
        code, summary, _ = _fixity(
            f"s3://{bucket}/archive",
            "--ledger",
            str(tmp_path / "l.sqlite"),
            "--endpoint-url",
            proxy.endpoint,
            "--level",
            "object",
        )
    assert code == 5
    assert summary["counts"] == {"pass": SMALL - 1, "fail": 0, "missing": 0, "error": 1}
    assert _gets(proxy, bucket, passes) == 5
    (problem,) = summary["problems"]
    assert problem["key"] == never and problem["outcome"] == "error"
    assert "SlowDown" in problem["detail"] and "gave up after 3 attempts" in problem["detail"]
    assert "\n" not in problem["detail"]
    assert _gets(proxy, bucket, never) == 12
    assert proxy.throttled == 4 + 12


@pytest.mark.s3
def test_connections_reset_mid_body_are_retried_at_both_levels(
    s3_server: Any, bucket: str, many: list[tuple[Path, ExportResult]], tmp_path: Path
) -> None:
    keys = _store(many[:SMALL], s3_server.endpoint, bucket)
    assert all(p.stat().st_size > 8192 for p, _ in many)  # so a reset lands mid-body
    for level in ("object", "full"):
        victims = {f"/{bucket}/{k}" for k in keys[::5]}
        fault = _first_n(victims, 1, "reset")
        with FaultyProxy(s3_server.port, select=no_corruption, fault=fault) as proxy:
            code, summary, _ = _fixity(
                f"s3://{bucket}/archive",
                "--ledger",
                str(tmp_path / f"{level}.sqlite"),
                "--endpoint-url",
                proxy.endpoint,
                "--level",
                level,
            )
        assert code == 0, summary["problems"]
        assert summary["counts"]["pass"] == SMALL
        assert proxy.resets == len(victims)
        for key in keys[::5]:
            assert _gets(proxy, bucket, key) == 2


@pytest.mark.s3
def test_a_stored_signature_replaced_by_another_keys_fails(
    s3_server: Any, raw: Any, bucket: str, many: list[tuple[Path, ExportResult]], tmp_path: Path
) -> None:
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
    signed = []
    for path, exported in many[:3]:
        copy = tmp_path / path.name
        shutil.copyfile(path, copy)
        assert run_cli("sign", str(copy), "--key", str(keys["alice"]), "-q").returncode == 0
        signed.append((copy, exported))
    stored = _store(signed, s3_server.endpoint, bucket)
    assert all(raw.head_object(Bucket=bucket, Key=k + ".sig") for k in stored)
    prefix = f"s3://{bucket}/archive"
    ledger = str(tmp_path / "l.sqlite")
    common = ["--ledger", ledger, "--endpoint-url", s3_server.endpoint]
    code, summary, _ = _fixity(prefix, *common, "--allowed-signers", str(allowed), workers=1)
    assert (code, summary["counts"]["pass"]) == (0, 3), summary["problems"]

    # Mallory signs the same head and puts her signature in place of alice's, with
    # metadata that matches her bytes: only the allowed signers can tell.
    victim_path = signed[1][0]
    os.unlink(f"{victim_path}.sig")
    assert run_cli("sign", str(victim_path), "--key", str(keys["mallory"]), "-q").returncode == 0
    forged = Path(f"{victim_path}.sig").read_bytes()
    raw.put_object(
        Bucket=bucket,
        Key=stored[1] + ".sig",
        Body=forged,
        Metadata={"sha256": "sha256:" + hashlib.sha256(forged).hexdigest()},
    )
    code, summary, _ = _fixity(prefix, *common, "--allowed-signers", str(allowed), workers=1)
    assert code == 1
    assert summary["counts"] == {"pass": 2, "fail": 1, "missing": 0, "error": 0}
    (problem,) = summary["problems"]
    assert problem["key"] == stored[1] and "signature" in problem["detail"]
    # At level object the signature is not checked: the bytes are intact.
    code, summary, _ = _fixity(prefix, *common, "--level", "object", workers=1)
    assert (code, summary["counts"]["pass"]) == (0, 3)


def _helper_pids(parent: int) -> list[int]:
    """The parent's helper processes."""
    return [
        p.pid
        for p in proctable.processes()
        if p.ppid == parent and b"--fixity-helper" in p.cmdline
    ]


def _local_archive(tmp_path: Path, bundles: dict[str, Path], count: int) -> Path:
    """``count`` copies of one small bundle in a directory."""
    root = tmp_path / "archive"
    root.mkdir()
    for i in range(count):
        shutil.copyfile(bundles["rpt-clean/alice"], root / f"b{i:04d}.tar.zst")
    return root


def _one_event_each(ledger: Path, count: int) -> None:
    with sqlite3.connect(ledger) as conn:
        events = conn.execute("SELECT key, count(*) FROM events GROUP BY key").fetchall()
    assert len(events) == count and all(n == 1 for _, n in events)


def test_a_helper_killed_mid_run_loses_no_check(tmp_path: Path, bundles: dict[str, Path]) -> None:
    count = 600
    root = _local_archive(tmp_path, bundles, count)
    ledger = tmp_path / "l.sqlite"
    proc = subprocess.Popen(
        [*CLI, "fixity", str(root), "--ledger", str(ledger), "--workers", "2", "--json", "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    killed = None
    deadline = time.monotonic() + 60
    while killed is None and time.monotonic() < deadline and proc.poll() is None:
        helpers = _helper_pids(proc.pid)
        if helpers and ledger.exists():
            try:
                with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as conn:
                    checked = conn.execute("SELECT count(*) FROM events").fetchone()[0]
            except sqlite3.OperationalError:  # the ledger is being created
                checked = 0
            if checked >= 20:  # the run is under way; the helper has work in flight
                time.sleep(0.3)
                os.kill(helpers[0], signal.SIGKILL)
                killed = helpers[0]
                break
        time.sleep(0.02)
    assert killed is not None, "the run ended before a helper could be killed"
    assert proc.poll() is None, "the run ended before the kill: nothing was tested"
    out, err = proc.communicate(timeout=120)
    assert b"Traceback" not in err, err
    summary = orjson.loads(out)
    assert proc.returncode == 0, (summary["problems"], err)
    assert summary["counts"]["pass"] == count
    _one_event_each(ledger, count)


def test_helpers_that_cannot_start_are_given_up_and_the_run_finishes(
    tmp_path: Path, bundles: dict[str, Path]
) -> None:
    """Every helper dies as it starts (here: a sitecustomize that kills spawned
    children): the pool is started again a few times, then the rest is checked in
    the fixity process itself. The run ends, no bundle is blamed for a helper that
    never came up, and every bundle has one event."""
    count = 30
    root = _local_archive(tmp_path, bundles, count)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import os, sys\nif '--fixity-helper' in sys.argv:\n    os._exit(70)\n"
    )
    ledger = tmp_path / "l.sqlite"
    done = run_cli(
        "fixity",
        str(root),
        "--ledger",
        str(ledger),
        "--workers",
        "2",
        "--json",
        "-q",
        env={"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])},
        timeout=120,
    )
    assert b"Traceback" not in done.stderr, done.stderr
    summary = orjson.loads(done.stdout)
    assert summary["counts"] == {"pass": count, "fail": 0, "missing": 0, "error": 0}
    assert done.returncode == 0
    _one_event_each(ledger, count)


# ------------------------------------------------------------------ SPEC 13.1


def _stray_keys(raw: Any, bucket: str, source: Path) -> list[str]:
    """``*.tar.zst`` objects under reports/bundles/ outside the key layout (a real
    bundle among them), and one object that is no archive at all."""
    strays = [
        "archive/reports/bundles/stray.tar.zst",
        "archive/reports/bundles/rpt-clean/not-a-digest.tar.zst",
        "archive/reports/bundles/rpt-clean/deeper/x.tar.zst",
    ]
    for key in strays:
        raw.put_object(Bucket=bucket, Key=key, Body=source.read_bytes())
    raw.put_object(Bucket=bucket, Key="archive/reports/bundles/README.txt", Body=b"hello")
    return strays


def _ledger_events(ledger: str) -> list[tuple[str, str]]:
    try:
        with contextlib.closing(sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)) as conn:
            return list(conn.execute("SELECT key, outcome FROM events ORDER BY id"))
    except sqlite3.Error:
        return []


@pytest.mark.s3
def test_the_keeper_can_rely_on_it_against_the_real_server(
    s3_server: Any, raw: Any, bucket: str, many: list[tuple[Path, ExportResult]], tmp_path: Path
) -> None:
    count = 24
    keys = _store(many[:count], s3_server.endpoint, bucket)
    strays = _stray_keys(raw, bucket, many[0][0])
    listed = count + len(strays)
    prefix = f"s3://{bucket}/archive"
    endpoint = ["--endpoint-url", s3_server.endpoint]

    # Shares are over everything listed, whatever a fresh ledger and --sample chose.
    code, summary, _ = _fixity(
        prefix,
        "--ledger",
        str(tmp_path / "fresh.sqlite"),
        *endpoint,
        "--sample",
        "0/5",
        "--level",
        "object",
        workers=1,
    )
    assert summary["listed"] == listed and 0 < summary["checked"] < listed
    assert summary["shares"]["30d"] == round(summary["checked"] / listed, 6)

    # Every archive is counted; one outside the layout fails: its key names no bundle.
    ledger = str(tmp_path / "ledger.sqlite")
    code, summary, _ = _fixity(prefix, "--ledger", ledger, *endpoint, workers=1)
    assert code == 1 and summary["counts"] == {"pass": count, "fail": 3, "missing": 0, "error": 0}
    assert {p["key"] for p in summary["problems"]} == set(strays)
    assert all("does not name its bundle" in p["detail"] for p in summary["problems"])

    # Two objects rot in place (metadata kept); a run is killed once its ledger holds
    # both failures; the next run, --older-than 1h, still reports them, and exits 1.
    rotted = [keys[4], keys[17]]
    for key in rotted:
        head = raw.head_object(Bucket=bucket, Key=key)
        data = bytearray(raw.get_object(Bucket=bucket, Key=key)["Body"].read())
        data[len(data) // 2] ^= 0x02
        raw.put_object(Bucket=bucket, Key=key, Body=bytes(data), Metadata=head["Metadata"])
    before = len(_ledger_events(ledger))
    proc = subprocess.Popen(
        [
            *CLI,
            "fixity",
            prefix,
            "--ledger",
            ledger,
            *endpoint,
            "--workers",
            "1",
            "-q",
            "--level",
            "object",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        found = {k for k, outcome in _ledger_events(ledger)[before:] if outcome == "fail"}
        if set(rotted) <= found:
            break
        time.sleep(0.01)
    proc.kill()
    proc.wait()
    assert set(rotted) <= {k for k, o in _ledger_events(ledger)[before:] if o == "fail"}
    code, summary, _ = _fixity(prefix, "--ledger", ledger, *endpoint, "--older-than", "1h")
    assert code == 1
    not_passed = {p["key"]: p for p in summary["problems"]} | {
        c["key"]: c for c in summary["carried"]
    }
    assert set(rotted) | set(strays) <= set(not_passed)
    # The failed check recorded what it read: the whole object and what it hashes to.
    with contextlib.closing(sqlite3.connect(ledger)) as conn:
        rows = conn.execute(
            "SELECT key, bytes_read, sha256 FROM events WHERE outcome = 'fail' AND key IN (?, ?)",
            rotted,
        ).fetchall()
    for key, bytes_read, sha in rows:
        body = raw.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert (bytes_read, sha) == (len(body), "sha256:" + hashlib.sha256(body).hexdigest())


@pytest.mark.s3
def test_the_same_storage_error_for_the_first_checks_stops_the_run(
    s3_server: Any, bucket: str, many: list[tuple[Path, ExportResult]], tmp_path: Path
) -> None:
    _store(many[:14], s3_server.endpoint, bucket)
    denied = f"/{bucket}/archive/"

    def deny(method: str, target: str) -> str | None:
        return "deny" if method == "GET" and target.startswith(denied) else None

    ledger = str(tmp_path / "ledger.sqlite")
    with FaultyProxy(s3_server.port, select=no_corruption, fault=deny) as proxy:
        done = run_cli(
            "fixity",
            f"s3://{bucket}/archive",
            "--ledger",
            ledger,
            "--endpoint-url",
            proxy.endpoint,
            "--workers",
            "1",
            "-q",
        )
    assert done.returncode == 5, done.stderr
    assert done.stderr.count(b"\n") == 1 and b"Traceback" not in done.stderr
    assert b"the first 10 checks all ended in the same storage error" in done.stderr
    assert b"access denied" in done.stderr
    assert len(_ledger_events(ledger)) == 10  # not one error per bundle


@pytest.mark.s3
def test_every_kind_of_stored_failure_is_carried_by_the_next_run(
    s3_server: Any, raw: Any, bucket: str, many: list[tuple[Path, ExportResult]], tmp_path: Path
) -> None:
    """Each kind of key a failure can have (outside the layout at each depth, a layout
    name that is not the bundle's, a stored object without sha256 metadata whose bytes
    are damaged) keeps its verdict, and a later run that checks none of them still
    lists each with its found time and exits 1 (SPEC 13.1)."""
    keys = _store(many[:3], s3_server.endpoint, bucket)
    source = many[0][0].read_bytes()
    head = raw.head_object(Bucket=bucket, Key=keys[0])
    failing = {
        "archive/reports/bundles/stray.tar.zst": (source, head["Metadata"]),
        "archive/reports/bundles/rpt-clean/sub/x.tar.zst": (source, head["Metadata"]),
        f"archive/reports/bundles/rpt-clean/{'a' * 64}.tar.zst": (source, head["Metadata"]),
        # Damaged, and with no metadata at all: fails whatever the metadata rule.
        keys[1]: (source[: len(source) // 2], {}),
    }
    for key, (body, metadata) in failing.items():
        raw.put_object(Bucket=bucket, Key=key, Body=body, Metadata=metadata)
    prefix = f"s3://{bucket}/archive"
    ledger = str(tmp_path / "l.sqlite")
    endpoint = ["--endpoint-url", s3_server.endpoint]
    code, first, _ = _fixity(prefix, "--ledger", ledger, *endpoint, "--level", "object")
    assert code == 1 and {p["key"] for p in first["problems"]} == set(failing)
    found = {p["key"]: p["found"] for p in first["problems"]}
    # A group of --sample that holds none of the failures: they are carried.
    n = 64
    groups = {group_of(k, n) for k in failing}
    k = next(g for g in range(n) if g not in groups)
    code, second, _ = _fixity(prefix, "--ledger", ledger, *endpoint, "--sample", f"{k}/{n}")
    assert code == 1 and second["problems"] == []
    assert {c["key"]: c["found"] for c in second["carried"]} == found
    with contextlib.closing(sqlite3.connect(ledger)) as conn:
        verdicts = dict(conn.execute("SELECT key, verdict FROM bundles"))
    assert all(verdicts[key] == "fail" for key in failing), verdicts
