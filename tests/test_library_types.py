"""The library ships its types (SPEC 7.1): ``mypy --strict`` passes on a user's script
that calls every function (tests/data/library_user.py), and the same run fails on one
that passes a wrong type, so the check can fail."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO

import bundler

WRONG = '''
from __future__ import annotations

import bundler

bundler.verify(3)
bundler.export("store", "rpt", principal=5)
result: bundler.ExportResult = bundler.verify("b.tar.zst")
'''


def test_mypy_strict_passes_on_a_script_calling_every_function(tmp_path: Path) -> None:
    user = REPO / "tests" / "data" / "library_user.py"
    source = user.read_text("utf-8")
    for name in bundler.__all__:
        if name[0].islower() and name != "__version__":
            assert f"bundler.{name}(" in source, f"library_user.py does not call {name}"
    assert (REPO / "bundler" / "py.typed").is_file()
    wrong = tmp_path / "wrong_user.py"
    wrong.write_text(WRONG)
    shutil.copy(user, tmp_path / "library_user.py")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(tmp_path / "library_user.py"),
            str(wrong),
        ],
        cwd=REPO,
        capture_output=True,
        timeout=600,
    )
    out = done.stdout.decode()
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert all(line.startswith(str(wrong)) for line in errors), out
    # Each wrong line is caught: an int bundle, an int principal, the wrong result type.
    assert {int(line.split(":")[1]) for line in errors} == {6, 7, 8}, out
