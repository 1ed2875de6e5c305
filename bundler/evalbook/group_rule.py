"""lm-evaluation-harness group aggregates: the one rule the import and the audit apply
(SPEC 16, 12).

A group's aggregate ``<metric>,<filter>`` is lm-eval's ``Group.aggregate``: the mean over
the group's leaf tasks that report that key, weighted by each task's size when the
group's ``weight_by_size`` is true and unweighted otherwise. The run does not record
which, so a recorded value is held to what one of the two rules gives. Here, and only
here, live: the two means (``derive_aggregate``), which rule a value matches, the value
of each task (SPEC 12's mean of its cases, ``mean_aggregation``), the check a leaf task
gives for a key (``member_check_id``) and the groups' structure and leaf tasks
(``group_forest``).
``importers.lmgroups`` refuses a run whose aggregate neither rule gives;
``evalbook.group_audit`` compares what a bundle's body records with what its own checks
give. Both call these functions, so the rule cannot drift between them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bundler.evalbook.compare import numbers_agree

MAX_GROUP_DEPTH = 32  # nesting of groups in groups (mmlu is two deep)
# The most leaf tasks a group can have in a bundle: each holds at least one case, and a
# bundle holds at most 20,000 (SPEC 4.3).
MAX_LEAF_TASKS = 20_000

MAX_IDENTIFIER = 128
_LONG_KEEP = MAX_IDENTIFIER - 17  # the first characters kept of a name over the limit
_OUTSIDE = re.compile(r"[^A-Za-z0-9._-]")


def to_identifier(raw: str) -> str:
    """``raw`` in the identifier alphabet of SPEC 3: each character outside it becomes
    ``_``; a first character that is not a letter or digit gets an ``x`` before it. A
    name over 128 characters keeps its first 111 and ends in ``-`` and 16 hex digits of
    the SHA-256 of the whole raw name (UTF-8), so a long name is never cut silently into
    another. Collisions are the caller's to refuse."""
    name = _OUTSIDE.sub("_", raw)
    if not name or not name[0].isascii() or not name[0].isalnum():
        name = "x" + name
    if len(name) <= MAX_IDENTIFIER:
        return name
    tail = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{name[:_LONG_KEEP]}-{tail}"


def member_check_id(task: str, metric: str, filt: str) -> str:
    """The check id an lm-eval import gives (task, metric, filter)."""
    return to_identifier(f"{task}.{metric}.{filt}")


def mean_aggregation(repeats: int) -> dict[str, Any]:
    """The aggregation of a check without a decision: the mean, no threshold. Under it
    SPEC 12's value of a check is the value a runner's metric and a group's task are
    held to."""
    return {
        "rule": "mean",
        "threshold": None,
        "min_coverage": None,
        "min_samples": None,
        "repeats": repeats,
    }


class Weighting(StrEnum):
    """Which of lm-eval's two rules the recorded aggregate matches."""

    BY_SIZE = "weight_by_size"  # mean weighted by each task's sample_len
    UNWEIGHTED = "unweighted"  # plain mean of the task values
    EITHER = "weight_by_size or unweighted (they agree here)"


@dataclass(frozen=True)
class AggregateDerivation:
    """Both of lm-eval's means of a group's tasks, and the rule a recorded value matches."""

    weighted: float | None  # None when the sizes sum to 0
    unweighted: float
    rule: Weighting | None  # None: neither rule gives the recorded value
    derived: float | None  # the mean under ``rule``; None when no rule matched

    def under(self, rule: Any) -> float | None:
        """The mean under a recorded rule's words (weighted for ``weight_by_size`` and
        ``either``, unweighted for ``unweighted``, else weighted when defined)."""
        if rule == Weighting.UNWEIGHTED.value:
            return self.unweighted
        if rule in (Weighting.BY_SIZE.value, Weighting.EITHER.value):
            return self.weighted
        return self.weighted if self.weighted is not None else self.unweighted

    def words(self) -> str:
        return f"{self.weighted!r} weighted by size, {self.unweighted!r} unweighted"


def derive_aggregate(
    value: Any, scores: Sequence[float], sizes: Sequence[int]
) -> AggregateDerivation:
    """lm-eval's ``aggregate_subtask_metrics`` both ways, summed in its order, and which
    of them ``value`` agrees with (within audit's tolerance). ``scores`` is not empty."""
    total = sum(sizes)
    weighted = sum(v * n for v, n in zip(scores, sizes, strict=True)) / total if total else None
    unweighted = sum(scores) / len(scores)
    by_size = weighted is not None and numbers_agree(value, weighted)
    plain = numbers_agree(value, unweighted)
    if by_size and plain:
        rule: Weighting | None = Weighting.EITHER
    elif by_size:
        rule = Weighting.BY_SIZE
    elif plain:
        rule = Weighting.UNWEIGHTED
    else:
        rule = None
    derived = None if rule is None else (weighted if by_size else unweighted)
    return AggregateDerivation(weighted, unweighted, rule, derived)


@dataclass(frozen=True)
class ForestProblem:
    """Why the recorded groups are not a forest lm-eval could have run: the group, the
    index of the child concerned (None for the group as a whole) and the rule."""

    group: str
    index: int | None
    text: str


def group_forest(
    tree: Mapping[str, Sequence[Any]],
    is_task: Callable[[str], bool],
    budget: list[int] | None = None,
) -> tuple[dict[str, list[str]], dict[str, ForestProblem]]:
    """The leaf tasks of each group of ``tree`` (group -> its children), and what makes
    the structure one lm-eval never runs, per group: a child that is not a name, a name
    under two groups or twice under one, a child that is neither a group of ``tree`` nor
    a task (``is_task``), a group that contains itself, groups nested more than
    MAX_GROUP_DEPTH deep, or a walk past ``budget[0]`` leaf visits. The import refuses
    the first problem; the audit reports each as a disagreement of its group's entry.
    One rule, here, for both."""
    problems: dict[str, ForestProblem] = {}
    parent: dict[str, str] = {}
    for g in sorted(tree):
        for i, child in enumerate(tree[g]):
            text = None
            if not isinstance(child, str):
                text = f"subtask {child!r} is not a name"
            elif child in parent:
                text = (
                    f"{child!r} is already a subtask of {parent[child]!r} (lm-eval runs a "
                    "task or group once, under one group)"
                )
            elif child not in tree and not is_task(child):
                text = (
                    f"subtask {child!r} is not in the run (no config and no group_subtasks "
                    "entry): the group's aggregate cannot be re-derived"
                )
            if text is not None:
                problems[g] = ForestProblem(g, i, text)
                break
            parent[child] = g
    leaves: dict[str, list[str]] = {}
    left = [MAX_LEAF_TASKS * (MAX_GROUP_DEPTH + 1)] if budget is None else budget
    for g in sorted(tree):
        if g in problems:
            continue
        found = _walk(g, tree, left)
        if isinstance(found, ForestProblem):
            problems[g] = found
        else:
            leaves[g] = found
    return leaves, problems


def _walk(
    name: str, tree: Mapping[str, Sequence[Any]], left: list[int]
) -> list[str] | ForestProblem:
    out: list[str] = []

    def walk(group: str, path: tuple[str, ...]) -> ForestProblem | None:
        if len(path) > MAX_GROUP_DEPTH:
            return ForestProblem(name, None, f"groups nested more than {MAX_GROUP_DEPTH} deep")
        for i, child in enumerate(tree[group]):
            left[0] -= 1
            if left[0] < 0:
                return ForestProblem(
                    name,
                    None,
                    f"more subtasks than the {MAX_LEAF_TASKS} leaf tasks a bundle can hold "
                    "(each holds a case) in every group they are nested in",
                )
            if not isinstance(child, str):
                return ForestProblem(group, i, f"subtask {child!r} is not a name")
            if child not in tree:
                out.append(child)
            elif child in path:
                return ForestProblem(group, i, f"group {child!r} contains itself")
            else:
                why = walk(child, (*path, child))
                if why is not None:
                    return why
        return None

    why = walk(name, (name,))
    return out if why is None else why
