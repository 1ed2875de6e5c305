"""The Node verifier when its reader goes away (SPEC 7: never a traceback): a pipe closed
before the output is written ends the command with exit 1 and nothing on stderr, as
the Python command does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("command", ["node", "python"])
def test_a_closed_stdout_ends_the_command_quietly(
    command: str, bundles: dict[str, Path]
) -> None:
    bundle = str(bundles["rpt-clean/alice"])
    argv = (
        ["node", str(ROOT / "js" / "verify-bundle.mjs")]
        if command == "node"
        else [sys.executable, "-m", "bundler", "verify"]
    )
    proc = subprocess.Popen(
        [*argv, *[bundle] * 20, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line
    with proc.stderr:
        err = proc.stderr.read()
    assert proc.wait(timeout=120) == 1
    assert b"Error" not in err and b"Traceback" not in err and b"    at " not in err, err
