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
