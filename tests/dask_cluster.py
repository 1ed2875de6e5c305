"""A real Dask distributed cluster on loopback, for the fixity tests and benchmark: a
scheduler and single-threaded workers as separate processes, every listener on
127.0.0.1, no dashboards, no nannies (a killed worker stays dead), stopped by PID."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 5 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _scheduler_address(scheduler_file: Path, scheduler: subprocess.Popen[bytes]) -> str:
    """The address in the scheduler file, once the scheduler has written all of it (the
    file appears empty first: it is not written by a rename)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and scheduler.poll() is None:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            address = json.loads(scheduler_file.read_text())["address"]
            if isinstance(address, str):
                return address
        time.sleep(0.1)
    raise AssertionError(f"the scheduler wrote no address to {scheduler_file}")


@contextlib.contextmanager
def local_cluster(
    work: Path, env: dict[str, str], workers: int = 2
) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """(scheduler address, worker processes) once every worker has joined; the logs go
    to ``work``."""
    env = {**env, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    scheduler_file = work / "scheduler.json"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with (work / "scheduler.log").open("wb") as log:
            procs.append(
                subprocess.Popen(
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
            )
        address = _scheduler_address(scheduler_file, procs[0])
        assert address.startswith("tcp://127.0.0.1:"), address
        started = []
        for i in range(workers):
            with (work / f"worker-{i}.log").open("wb") as log:
                started.append(
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
                        stdout=log,
                        stderr=log,
                        env=env,
                        cwd=work,
                    )
                )
        procs += started
        from distributed import Client

        with Client(address, timeout=30) as client:
            client.wait_for_workers(workers, timeout=60)
        yield address, started
    finally:
        for proc in reversed(procs):
            stop(proc)
