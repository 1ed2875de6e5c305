"""As many failed claims as a bundle can give, within SPEC 5's bounds, in every writer of
the verification record (SPEC 5, 7, 15).

A real bundle with 61,000 empty files of 540-byte names added under data/ (in no
manifest, named by nothing) is a 140 KB archive within every cap of both readers, and
gives 122,001 failed claims with long subjects: a record of about 100 MB of JSON. Both
verifiers, each way they write the record (the human summary, ``--json``, Python's
``--output-dir``), must say failed (exit 1) under 300 MB of memory and 10 s of CPU, and
the record they write must hold every claim.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import hostile
import measure
import pytest

ROOT = Path(__file__).resolve().parent.parent
BUDGET_BYTES = 300 * 1000 * 1000
BUDGET_SECONDS = 10.0
NAMES = 61_000
FAILED = 2 * NAMES + 1  # each name twice (BagIt's listing, the bundle's), and the oxum


@pytest.fixture(scope="module")
def many(bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("many-failed") / "many.tar.zst"
    return hostile.unlisted_members_bundle(bundles["rpt-clean/alice"], out, NAMES, 540)


PYTHON = [sys.executable, "-m", "bundler", "verify"]
NODE = ["node", str(ROOT / "js" / "verify-bundle.mjs")]
WAYS = {
    "python summary": (PYTHON, []),
    "python --json": (PYTHON, ["--json"]),
    "python --output-dir": (PYTHON, ["--output-dir", "{out}", "-q"]),
    "node summary": (NODE, []),
    "node --json": (NODE, ["--json"]),
}


@pytest.mark.parametrize("way", sorted(WAYS))
def test_every_record_writer_stays_within_budget(many: Path, way: str, tmp_path: Path) -> None:
    command, options = WAYS[way]
    out = tmp_path / "out"
    args = [o.replace("{out}", str(out)) for o in options]
    run = measure.spawn_measured([*command, str(many), *args], deadline=120)
    detail = (
        f"{way}: exit {run.code}, {run.wall:.1f} s wall, {run.cpu:.1f} s CPU, peak "
        f"{run.peak_bytes // 2**20} MiB: {run.stderr[-300:].decode(errors='replace')}"
    )
    assert run.code == 1 and not run.killed, detail
    assert run.peak_bytes < BUDGET_BYTES, detail
    # CPU, not wall: the suite runs beside other work on two cores.
    assert run.cpu < BUDGET_SECONDS, detail
    if "--json" in way:
        record = json.loads(run.stdout)
        assert record["counts"]["failed"] == FAILED == len(
            [c for c in record["claims"] if c["state"] == "failed"]
        )
        assert record["exit_code"] == 1
    elif "--output-dir" in way:
        record = json.loads((out / "verification.json").read_bytes())
        assert len(record["claims"]) == record["counts"]["proven"] + FAILED
        markdown = (out / "verification.md").read_text()
        assert markdown.count(" | failed | ") == FAILED  # one table row each
    else:
        assert b"FAILED" in run.stdout
