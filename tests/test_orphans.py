"""A child that must not outlive its parent (``bundler.core.orphans``): fixity's helpers
and the verifier ``--check`` runs beside its re-import."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

_CHILD = (
    "import sys, time\n"
    "from bundler.core.orphans import die_with_parent\n"
    "die_with_parent(int(sys.argv[1]))\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)
_PARENT = (
    "import os, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', sys.argv[1], str(os.getpid())],"
    " stdout=subprocess.PIPE)\n"
    "assert child.stdout.readline() == b'ready\\n'\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(60)\n"
)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_stopped_child_ends_when_its_parent_is_killed() -> None:
    """Stopped, the child's own watchdog cannot run: only the kernel's death signal
    (PR_SET_PDEATHSIG) ends it once SIGKILL ends the parent, whose cleanup never runs."""
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, _CHILD], stdout=subprocess.PIPE)
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    try:
        os.kill(pid, signal.SIGSTOP)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(pid), "the child outlived its killed parent"
    finally:
        parent.stdout.close()
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_child_whose_parent_is_already_another_ends_at_once() -> None:
    """A child told of a parent that is not its own (it died before the child looked)
    ends at once, writing nothing."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(os.getpid() + 10**6)],
        capture_output=True,
        timeout=20,
    )
    assert (done.returncode, done.stdout) == (0, b"")
