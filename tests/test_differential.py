"""The two verifiers agree on randomly mutated real bundles (SPEC 15, conformance/differential.py).

A thousand mutations here (about a minute and a half); ``make differential`` runs
100,000. Each mutation is verified by the Python verifier in process and by the
JavaScript verifier in one Node process; exit codes and failed claims as (group, path)
must be equal.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent



def test_verifiers_agree_on_a_thousand_mutations(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "conformance" / "differential.py"), "--n", "1000", "--seed", "15",
         "--out", str(tmp_path / "disagreements")],
        capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1000 mutations" in done.stdout and ", 0 disagreements" in done.stdout
