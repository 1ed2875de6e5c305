"""The Node verifier within SPEC 5's resource bounds on every hostile family (SPEC 15).

Each family of tests/hostile.py (the ones the Python commands are held to in
test_resource_budget.py, and the zstd bombs) runs through ``node js/verify-bundle.mjs``
as a subprocess: it must be refused (exit 3) with a one-line error and no stack trace,
peak RSS under 300 MB, and under 10 s of CPU for inputs under 100 MB. So must a valid
eval-banana bundle at each of the reader's caps (a report with values just under the
value cap, stdout files just under the documents' total, 65,480 run files): verified,
within the same budget.
"""

from __future__ import annotations

from pathlib import Path

import hostile
import measure
import pytest
from test_export_eb import FLAT_RUN, PROJECT, copy_run, do_export, edit_check

from bundler.evalbanana import run as eb

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
    # 40,000 names of 3,900 bytes: over the names cap both verifiers share (docs/format.md).
    "long_names": lambda _clean, out: hostile.long_names_bundle(out, 40_000, 3_900),
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
    # Through the small launcher of tests/measure.py: a child started straight from the
    # pytest worker would be charged the worker's own resident size.
    run = measure.spawn_measured(
        ["node", str(ROOT / "js" / "verify-bundle.mjs"), str(families[family]), "--json"],
        deadline=60,
    )
    stderr = run.stderr.decode(errors="replace")
    detail = (
        f"{family}: exit {run.code}, {run.wall:.1f} s wall, {run.cpu:.1f} s CPU, "
        f"peak {run.peak_bytes // 2**20} MiB: {stderr[-300:]}"
    )
    assert run.code == 3 and not run.killed, detail
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), detail
    assert b'"verdict":"error"' in run.stdout, detail
    if family == "long_names":
        assert "member names over 33554432 bytes in all" in stderr, detail
    assert run.peak_bytes < BUDGET_BYTES, detail
    # CPU, not wall: the suite runs beside other work on two cores.
    assert run.cpu < BUDGET_SECONDS, detail


# --------------------------------------------------------------- eval-banana at the caps


def _stdout(run: Path, check_id: str, size: int) -> None:
    """A sparse stdout file of ``size`` NUL bytes, its tail recorded."""
    stem = eb.check_stem(check_id)
    with open(run / "checks" / f"{stem}.stdout.txt", "wb") as handle:
        handle.truncate(size)
    tail = eb.bounded_tail("\x00" * min(size, eb.STDOUT_TAIL_CHARS + 1), stem=stem)
    edit_check(run, check_id, lambda c: c.update(stdout=tail))


def _tags(run: Path) -> None:
    # Just under the 2,000,000-value cap: the tags are counted in report.json and in
    # the check's own file.
    edit_check(run, "passes", lambda c: c.update(tags=[""] * 999_200))


def _total(run: Path) -> None:
    # A 32 MiB stdout and one just under what the 48 MiB of kept documents leave.
    _stdout(run, "passes", 32 * 2**20)
    _stdout(run, "fails", 16_657_710)


def _files(run: Path) -> None:
    # 65,480 evidence files: just under the member cap with the rest of the bundle.
    evidence = run / "checks" / eb.check_stem("passes")
    evidence.mkdir()
    for i in range(65_480):
        (evidence / f"{i:08d}").touch()


EB_SHAPES = {"tags": _tags, "total": _total, "files": _files}


@pytest.mark.parametrize("shape", sorted(EB_SHAPES))
def test_node_verifier_stays_within_budget_on_eval_banana_bundles_at_the_caps(
    shape: str, tmp_path: Path
) -> None:
    run = copy_run(tmp_path, FLAT_RUN)
    EB_SHAPES[shape](run)
    out = tmp_path / "b.tar.zst"
    do_export(run, PROJECT, out)
    measured = measure.spawn_measured(
        ["node", str(ROOT / "js" / "verify-bundle.mjs"), str(out), "--json"], deadline=60
    )
    detail = (
        f"{shape}: exit {measured.code}, {measured.wall:.1f} s wall, {measured.cpu:.1f} s CPU, "
        f"peak {measured.peak_bytes // 2**20} MiB: {measured.stderr.decode(errors='replace')[-300:]}"
    )
    assert measured.code == 0 and not measured.killed, detail
    assert b'"verdict":"verified"' in measured.stdout, detail
    assert measured.peak_bytes < BUDGET_BYTES, detail
    assert measured.cpu < BUDGET_SECONDS, detail
