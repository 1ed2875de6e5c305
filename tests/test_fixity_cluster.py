"""fixity --scheduler (SPEC section 13): the same checks on a Dask distributed cluster
started on loopback, and a worker killed mid-run loses no check."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from conftest import CLI, run_cli

from bundler.core.schemas import validator_for

pytest.importorskip("distributed")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """A scheduler and two single-threaded workers, every listener on 127.0.0.1, no
    dashboards, no nannies (a killed worker stays dead); stopped by PID."""
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    scheduler_file = tmp_path / "scheduler.json"
    with (tmp_path / "scheduler.log").open("wb") as log:
        scheduler = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(scheduler_file),
            ],
            stdout=log,
            stderr=log,
            env=env,
        )
    procs = [scheduler]
    try:
        deadline = time.monotonic() + 60
        while not scheduler_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        workers = []
        for i in range(2):
            with (tmp_path / f"worker-{i}.log").open("wb") as wlog:
                workers.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "distributed.cli.dask_worker",
                            address,
                            "--host",
                            "127.0.0.1",
                            "--no-dashboard",
                            "--no-nanny",
                            "--nthreads",
                            "1",
                            "--name",
                            f"w{i}",
                        ],
                        stdout=wlog,
                        stderr=wlog,
                        env=env,
                        cwd=tmp_path,
                    )
                )
        procs += workers
        _wait_for_workers(address, 2)
        yield address, workers
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _wait_for_workers(address: str, n: int) -> None:
    from distributed import Client

    with Client(address, timeout=30) as client:
        client.wait_for_workers(n, timeout=60)


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
    assert proc.returncode == 0, err
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
