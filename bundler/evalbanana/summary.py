"""The summary of an eval-banana verification record (SPEC 10.2, 14): the run's own
result, its console labels and each check's status and score as recomputed, and the
cases tree, in bundle and in place alike. Used by ``evalbanana.verify``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from bundler.evalbanana import run as eb
from bundler.evalbanana.results import recompute_totals, summary_lines
from bundler.trust.merkle import TreeBuilder

MODE_BUNDLE = "bundle"
MODE_RUN_DIRECTORY = "run_directory"
IN_PLACE_NOTE = "run directory in place; claims 1 (BagIt) and 2 (bundle.json) do not apply"


def run_result(summary: dict[str, Any]) -> str:
    """The run's own result as its pass rule gives it (recomputed): ``pass`` or ``fail``."""
    return "pass" if summary["recomputed"]["run_passed"] else "fail"


def recomputed_labels(run: eb.Run) -> list[list[str]]:
    """eval-banana's console labels (Run ID, Score, Percentage, Passed) as recomputed."""
    totals = recompute_totals([c.status for c in run.checks], run.pass_threshold)
    return [line.split(": ", 1) for line in summary_lines(run.run_id, totals)]


def summary_of(run: eb.Run, mode: str, tree: dict[str, Any] | None) -> dict[str, Any]:
    totals = recompute_totals([c.status for c in run.checks], run.pass_threshold)
    labels = recomputed_labels(run)
    if mode == MODE_RUN_DIRECTORY:
        labels.insert(0, ["Checked", IN_PLACE_NOTE])
    return {
        "mode": mode,
        "labels": labels,
        "run_id": run.run_id,
        # Each check's own status and score, so a page lists them from structure.
        "pass_threshold": run.pass_threshold,
        "checks": [
            {"check_id": c.check_id, "status": c.status.value, "score": c.score} for c in run.checks
        ],
        # Every field of Totals, in its order: the counts, points, percentage and verdict.
        "recomputed": dataclasses.asdict(totals),
        "cases_tree": tree,
    }


def tree_of(leaves: Sequence[bytes] | None) -> dict[str, Any] | None:
    if leaves is None:
        return None
    tree = TreeBuilder()
    tree.extend(leaves)
    return {"tree_size": tree.size, "root": tree.root().hex()}
