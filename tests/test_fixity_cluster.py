"""fixity --scheduler (SPEC section 13): the same checks on a Dask distributed cluster
started on loopback, and a worker killed mid-run loses no check."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import CLI, run_cli
from dask_cluster import local_cluster

from bundler.core.schemas import validator_for

pytest.importorskip("distributed")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """A scheduler and two single-threaded workers on loopback (tests/dask_cluster.py)."""
    with local_cluster(tmp_path, dict(os.environ)) as (address, workers):
        yield address, workers


def _events(ledger: Path) -> list[str]:
    try:
        with sqlite3.connect(ledger) as conn:
            return [row[0] for row in conn.execute("SELECT key FROM events")]
    except sqlite3.Error:
        return []


def test_cluster_run_survives_a_killed_worker(
    cluster: tuple[str, list[subprocess.Popen[bytes]]], tmp_path: Path, bundles: dict[str, Path]
) -> None:
    address, workers = cluster
    root = tmp_path / "archive"
    root.mkdir()
    for i in range(60):
        shutil.copyfile(bundles["rpt-clean/alice"], root / f"b{i:03d}.tar.zst")
    ledger = tmp_path / "ledger.sqlite"
    record = tmp_path / "run.jsonl"
    proc = subprocess.Popen(
        [
            *CLI,
            "fixity",
            str(root),
            "--ledger",
            str(ledger),
            "--scheduler",
            address,
            "--record",
            str(record),
            "--json",
            "-q",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while not _events(ledger) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before a worker could be killed"
    os.kill(workers[0].pid, signal.SIGKILL)  # mid-run: its batch runs again elsewhere
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, (out, err)
    summary = orjson.loads(out)
    assert list(validator_for("fixity-summary").iter_errors(summary)) == []
    assert summary["counts"] == {"pass": 60, "fail": 0, "missing": 0, "error": 0}
    keys = _events(ledger)
    assert sorted(keys) == sorted(f"b{i:03d}.tar.zst" for i in range(60))  # each once
    assert workers[0].poll() is not None
    assert len(record.read_bytes().splitlines()) == 62


def test_scheduler_unreachable_is_one_line(tmp_path: Path, bundles: dict[str, Path]) -> None:
    (tmp_path / "a").mkdir()
    shutil.copyfile(bundles["rpt-clean/alice"], tmp_path / "a" / "b.tar.zst")
    done = run_cli(
        "fixity",
        str(tmp_path / "a"),
        "--ledger",
        str(tmp_path / "l.sqlite"),
        "--scheduler",
        "tcp://127.0.0.1:9",
    )
    assert done.returncode == 3, done.stderr
    assert done.stderr.count(b"\n") == 1 and b"tcp://127.0.0.1:9" in done.stderr
    assert done.stdout == b""


def _free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    "address",
    [
        "x",  # no scheme, no port
        "127.0.0.1:8786",  # no scheme
        "tcp://127.0.0.1",  # no port
        "tcp://127.0.0.1:0",
        "tcp://127.0.0.1:65536",
        "http://127.0.0.1:8786",  # no Dask scheme
        "tcp://host name:8786",
        "tcp://127.0.0.1:8786/path",
        "",
        "tcp://" + "a" * 5000 + ":8786",
    ],
)
@pytest.mark.parametrize("as_json", [False, True])
def test_a_malformed_scheduler_address_is_a_usage_error_before_anything(
    tmp_path: Path, bundles: dict[str, Path], address: str, as_json: bool
) -> None:
    (tmp_path / "a").mkdir()
    shutil.copyfile(bundles["rpt-clean/alice"], tmp_path / "a" / "b.tar.zst")
    ledger = tmp_path / "l.sqlite"
    started = time.monotonic()
    done = run_cli(
        "fixity",
        str(tmp_path / "a"),
        "--ledger",
        str(ledger),
        "--scheduler",
        address,
        *(["--json"] if as_json else []),
    )
    assert time.monotonic() - started < 10
    assert done.returncode == 2, done.stderr
    assert done.stderr.count(b"\n") == 1 and done.stderr.startswith(
        b"evalbook-bundle: error: --scheduler"
    ), done.stderr
    assert len(done.stderr) < 600  # the value shown cut short
    assert not ledger.exists()
    if as_json:
        error = orjson.loads(done.stdout)
        assert error["exit_code"] == 2 and error["error"].startswith("--scheduler")
        assert len(done.stdout) < 2000
    else:
        assert done.stdout == b""


@pytest.mark.parametrize("host", ["127.0.0.1", "[::1]"])
def test_an_unreachable_scheduler_is_refused_at_once_leaving_nothing(
    tmp_path: Path, bundles: dict[str, Path], host: str
) -> None:
    """A port nobody listens on: refused before the ledger exists, in one line, exit 3
    (the run could not start), fast, and no traceback as the process ends."""
    (tmp_path / "a").mkdir()
    shutil.copyfile(bundles["rpt-clean/alice"], tmp_path / "a" / "b.tar.zst")
    ledger = tmp_path / "l.sqlite"
    address = f"tcp://{host}:{_free_port()}"
    started = time.monotonic()
    done = run_cli(
        "fixity", str(tmp_path / "a"), "--ledger", str(ledger), "--scheduler", address, "--json"
    )
    assert time.monotonic() - started < 10
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith(
        f"evalbook-bundle: error: --scheduler: {address}: cannot reach the Dask scheduler (".encode()
    ), done.stderr
    assert done.stderr.count(b"\n") == 1 and b"Exception ignored" not in done.stderr
    assert orjson.loads(done.stdout)["exit_code"] == 3
    assert not ledger.exists() and list(tmp_path.glob("l.sqlite*")) == []


@pytest.mark.parametrize("listener", ["silent", "http"])
def test_a_listener_that_is_no_scheduler_is_refused_within_the_deadline(
    tmp_path: Path, bundles: dict[str, Path], listener: str
) -> None:
    """A port that accepts but speaks no Dask (a silent server, an HTTP server whose
    reply reads as a length prefix of exabytes): the handshake is tried in a child
    killed past its deadline, so the run is refused (exit 3, one line, no ledger, no
    traceback) instead of hanging or failing to allocate."""
    import socket
    import threading

    from bundler.fixity.execute import SCHEDULER_HANDSHAKE_SECONDS

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def serve() -> None:
        held = []
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            if listener == "http":
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" * 64)
            held.append(conn)
        for conn in held:
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    (tmp_path / "a").mkdir()
    shutil.copyfile(bundles["rpt-clean/alice"], tmp_path / "a" / "b.tar.zst")
    ledger = tmp_path / "l.sqlite"
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    started = time.monotonic()
    try:
        done = run_cli(
            "fixity",
            str(tmp_path / "a"),
            "--ledger",
            str(ledger),
            "--scheduler",
            address,
            timeout=SCHEDULER_HANDSHAKE_SECONDS + 60,
        )
    finally:
        stop.set()
        thread.join()
        server.close()
    assert time.monotonic() - started < SCHEDULER_HANDSHAKE_SECONDS + 30
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith(
        f"evalbook-bundle: error: --scheduler: {address}: cannot reach the Dask scheduler (".encode()
    ), done.stderr
    assert done.stderr.count(b"\n") == 1 and b"Traceback" not in done.stderr
    assert not ledger.exists() and list(tmp_path.glob("l.sqlite*")) == []


def test_library_unreachable_scheduler_is_an_input_error_naming_it(
    tmp_path: Path, bundles: dict[str, Path]
) -> None:
    import bundler

    (tmp_path / "a").mkdir()
    shutil.copyfile(bundles["rpt-clean/alice"], tmp_path / "a" / "b.tar.zst")
    address = f"tcp://127.0.0.1:{_free_port()}"
    with pytest.raises(bundler.InputError) as caught:
        bundler.fixity(tmp_path / "a", ledger=tmp_path / "m.sqlite", workers=1, scheduler=address)
    assert caught.value.param == "scheduler" and caught.value.exit_code == 3
    assert caught.value.message.startswith(f"scheduler: {address}: cannot reach")
    assert not (tmp_path / "m.sqlite").exists()
    with pytest.raises(bundler.ParameterError, match=r"^scheduler 'x': not a scheduler address"):
        bundler.fixity(tmp_path / "a", ledger=tmp_path / "m.sqlite", scheduler="x")


# ------------------------------------------------------------------ SPEC 13.1


@pytest.mark.s3
def test_storage_settings_travel_to_workers_and_credentials_do_not(
    s3_server: Any, bucket: str, bundles: dict[str, Path], tmp_path: Path
) -> None:
    prefix = f"s3://{bucket}/archive"
    from bundler.bundles.verify import read_and_verify
    from bundler.core.claims import VerifyOptions
    from bundler.storage import StorageConfig, parse_s3_url, upload_bundle

    copies = []
    for i, name in enumerate(
        (
            "rpt-clean/alice",
            "rpt-clean/bob",
            "rpt-superseded/alice",
            "rpt-retention/alice",
            "rpt-superseded/bob",
        )
    ):
        result, _ = read_and_verify(str(bundles[name]), VerifyOptions())
        upload_bundle(
            bundles[name],
            parse_s3_url(prefix),
            bundle_digest=result.bundle_digest,
            report_id=result.report_id,
            report_digest=result.report_digest,
            config=StorageConfig(endpoint_url=s3_server.endpoint),
        )
        copies.append(i)
    # The workers know no endpoint; the fixity process has it only in AWS_ENDPOINT_URL_S3.
    worker_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    run_env = {"AWS_ENDPOINT_URL_S3": s3_server.endpoint}
    with local_cluster(tmp_path, worker_env) as (address, _):
        done = run_cli(
            "fixity",
            prefix,
            "--ledger",
            str(tmp_path / "a.sqlite"),
            "--scheduler",
            address,
            "--json",
            "-q",
            env=run_env,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr
    summary = orjson.loads(done.stdout)
    assert summary["counts"] == {"pass": 5, "fail": 0, "missing": 0, "error": 0}

    # Workers without credentials: the error says the worker raised it, and the run
    # stops early with that one error instead of repeating it for every bundle.
    bare = {k: v for k, v in worker_env.items() if not k.startswith("AWS_")}
    bare |= {
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
    }
    (tmp_path / "bare").mkdir()
    with local_cluster(tmp_path / "bare", bare) as (address, _):
        done = run_cli(
            "fixity",
            prefix,
            "--ledger",
            str(tmp_path / "b.sqlite"),
            "--scheduler",
            address,
            "-q",
            env=run_env,
            timeout=300,
        )
    assert done.returncode == 5, done.stderr
    assert done.stderr.count(b"\n") == 1 and b"Traceback" not in done.stderr
    assert b"worker tcp://127.0.0.1:" in done.stderr and b"no AWS credentials" in done.stderr
