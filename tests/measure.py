"""Measure a command's own peak memory and time, whatever process runs the test.

A child's ``ru_maxrss`` starts from the resident size of the process it was forked from
(Linux records the old memory's high-water mark at exec, vfork included), so a command
started straight from a large pytest worker would be charged the worker's memory.
``spawn_measured`` starts a small fresh interpreter that starts the command and waits
for it with ``os.wait4``: the figures are the command's own. Import as ``import
measure`` from tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

_LAUNCHER = textwrap.dedent(
    """
    import json, os, resource, signal, subprocess, sys, time
    cmd, stdin_path, out_path, err_path, deadline, as_limit, env, cwd = json.loads(sys.argv[1])

    def limit():
        if as_limit:
            resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))

    started = time.monotonic()
    with open(stdin_path or os.devnull, "rb") as i, open(out_path, "wb") as o, open(err_path, "wb") as e:
        child = subprocess.Popen(
            cmd, stdin=i, stdout=o, stderr=e, preexec_fn=limit, env=env, cwd=cwd
        )
    killed = False
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - started > deadline:
            os.kill(child.pid, signal.SIGKILL)
            killed = True
            pid, status, usage = os.wait4(child.pid, 0)
            break
        time.sleep(0.01)
    print(json.dumps({
        "code": os.waitstatus_to_exitcode(status),
        "wall": time.monotonic() - started,
        "cpu": usage.ru_utime + usage.ru_stime,
        "peak_bytes": usage.ru_maxrss * 1024,
        "killed": killed,
    }))
    """
)


@dataclass(frozen=True)
class Measured:
    code: int
    stdout: bytes
    stderr: bytes
    peak_bytes: int
    cpu: float
    wall: float
    killed: bool


def spawn_measured(
    cmd: list[str],
    *,
    deadline: float = 120,
    address_space: int | None = None,
    stdin: Path | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Measured:
    """Run ``cmd`` under the launcher; a command outliving ``deadline`` is killed."""
    with tempfile.TemporaryDirectory(prefix="measure-") as scratch:
        out, err = Path(scratch, "stdout"), Path(scratch, "stderr")
        spec = [
            cmd,
            str(stdin) if stdin else None,
            str(out),
            str(err),
            deadline,
            address_space,
            env if env is not None else dict(os.environ),
            str(cwd) if cwd else None,
        ]
        done = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, json.dumps(spec)],
            capture_output=True,
            check=True,
            timeout=deadline + 30,
        )
        r = json.loads(done.stdout)
        return Measured(
            r["code"], out.read_bytes(), err.read_bytes(), r["peak_bytes"], r["cpu"], r["wall"],
            r["killed"],
        )


# SPEC 5's bounds for one command on an input under 100 MB.
BUDGET_BYTES = 300 * 1000 * 1000
BUDGET_SECONDS = 10.0


def within_budget(cmd: list[str], label: str, code: int, *, deadline: float = 120) -> Measured:
    """Run ``cmd`` measured and assert that it exits ``code`` under SPEC 5's 300 MB and
    10 s of CPU (CPU, not wall: the suite runs beside other work on two cores); the
    assertion names ``label`` and the figures. Returns the run."""
    run = spawn_measured(cmd, deadline=deadline)
    detail = (
        f"{label}: exit {run.code}, {run.wall:.1f} s wall, {run.cpu:.1f} s CPU, peak "
        f"{run.peak_bytes // 2**20} MiB: {run.stderr[-300:].decode(errors='replace')}"
    )
    assert run.code == code and not run.killed, detail
    assert run.peak_bytes < BUDGET_BYTES, detail
    assert run.cpu < BUDGET_SECONDS, detail
    return run
