"""The Node verifier within SPEC 5's resource bounds on every hostile family (SPEC 15).

Each family of tests/hostile.py (the ones the Python commands are held to in
test_resource_budget.py, and the zstd bombs) runs through ``node js/verify-bundle.mjs``
as a subprocess: it must be refused (exit 3) with a one-line error and no stack trace,
peak RSS under 300 MB, and under 10 s of CPU for inputs under 100 MB.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import hostile
import pytest

ROOT = Path(__file__).resolve().parent.parent
BUDGET_BYTES = 300 * 1000 * 1000
BUDGET_SECONDS = 10.0

FAMILIES = {
    "floats": hostile.floats_bundle,
    "case_lines": hostile.case_lines_bundle,
    "empty_members": lambda _clean, out: hostile.empty_members_bundle(out),
    "nesting": hostile.nesting_bundle,
    "huge_string": hostile.huge_string_bundle,
    "zero_bomb": lambda _clean, out: out.write_bytes(hostile.zero_bomb(10 * 2**30)),
    "member_bomb": lambda _clean, out: out.write_bytes(hostile.member_bomb(2 * 2**30)),
}


@pytest.fixture(scope="module")
def families(bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("js-hostile")
    made = {}
    for name, build in FAMILIES.items():
        path = out / f"{name}.tar.zst"
        build(bundles["rpt-clean/alice"], path)
        made[name] = path
    return made


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_node_verifier_stays_within_budget(families: dict[str, Path], family: str) -> None:
    path = families[family]
    out, err = path.with_suffix(".out"), path.with_suffix(".err")
    start = time.monotonic()
    with out.open("wb") as fo, err.open("wb") as fe:
        proc = subprocess.Popen(["node", str(ROOT / "js" / "verify-bundle.mjs"), str(path), "--json"],
                                stdout=fo, stderr=fe)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    code = proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    stderr = err.read_text()
    detail = f"{family}: exit {code}, {wall:.1f} s wall, {cpu:.1f} s CPU, peak {usage.ru_maxrss // 1024} MiB: {stderr[-300:]}"
    assert code == 3, detail
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), detail
    assert '"verdict":"error"' in out.read_text(), detail
    assert usage.ru_maxrss * 1024 < BUDGET_BYTES, detail
    # CPU, not wall: the suite runs beside other work on two cores.
    assert cpu < BUDGET_SECONDS, detail
