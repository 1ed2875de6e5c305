"""lm-evaluation-harness group tasks (mmlu-style): their aggregates, re-derived (SPEC 16).

A run of a group task (a ``group:`` yaml with subtasks and an ``aggregate_metric_list``)
holds samples for its tasks only. lm-eval 0.4 writes the group's aggregate into
``results[group]`` and, identically, ``groups[group]``; its children (tasks or groups)
into ``group_subtasks[group]``; and entries for it in ``versions``, ``n-shot`` and
``higher_is_better``. It writes no config, no ``task_hashes`` or ``n-samples`` entry and
no samples for a group, and it does not record the ``aggregate_metric_list``: the
``weight_by_size`` of each aggregate is written nowhere in the run.

lm-eval's rule (``lm_eval.api.group.Group.aggregate``): each ``<metric>,<filter>`` of a
group is the mean over the group's leaf tasks (its subtasks, and the subtasks of its
subgroups, recursively, in ``group_subtasks`` order) that report that key, weighted by
each task's ``sample_len`` when ``weight_by_size`` is true and unweighted otherwise;
``sample_len`` is the sum over all its leaf tasks, ``sample_count[key]`` the sum over
those that report the key; the ``_stderr`` is pooled from the tasks' own stderrs.

Here a group is not a check (it has no samples of its own). Each aggregate is re-derived
from its leaf tasks' checks, using the values SPEC 12 derives from their cases and the
number of documents their samples hold (each task's ``sample_len`` must be that number).
Since the run does not say which weighting the group used, the recorded value must be
what one of lm-eval's two rules gives; the rule it matches is recorded with the
re-derived value in the report body's ``subject.run.groups``. A value neither rule gives
refuses the import, naming the file and field, as a lying task value does. The stderr
is a dispersion metric: recorded, not re-derived (the tasks' own stderrs it pools from
are runner values no sample gives). ``read_groups`` reads and checks the structure;
``rederive_groups`` applies the rule once the checks are derived; the rule itself
(both means, the matched weighting) is ``evalbook.group_rule``, which ``audit`` applies
to a bundle's body with the same code.
"""

from __future__ import annotations

import math
from typing import Any

from bundler.core.errors import InputError
from bundler.evalbook.group_rule import derive_aggregate, group_forest
from bundler.importers.model import (
    GroupAggregate,
    ImportedCheck,
    ImportedDataset,
    ImportedGroup,
    Member,
)

# Keys of a group's results besides ``<metric>,<filter>`` and ``<metric>_stderr,<filter>``.
_GROUP_KEYS = frozenset({"alias", "name", "sample_len", "sample_count"})


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _count(value: Any) -> bool:
    """A count as lm-eval writes one: a JSON integer (not ``5.0``, not ``true``)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# Tables of results that lm-eval keys by task or group name, and what each may name:
# ``n-samples`` tasks only (lm-eval writes none for a group), the others tasks and groups.
_NAMED_TABLES = {"versions": True, "n-shot": True, "higher_is_better": True, "n-samples": False}


def _no_ghosts(results: dict[str, Any], tasks: set[str], groups: set[str], where: str) -> None:
    """Refuse an entry of a per-name table for a name the run does not hold (a task
    with a config, or a group where lm-eval writes one): nothing a run records is
    dropped, and an entry that names nothing could only be dropped."""
    for table, groups_too in _NAMED_TABLES.items():
        entries = results.get(table)
        if entries is None:
            continue
        if not isinstance(entries, dict):
            raise InputError(f"{where}: {table}: not an object; import refused")
        for name in entries:
            if name in tasks or (groups_too and name in groups):
                continue
            what = "a group (lm-eval writes none for a group)" if name in groups else "nothing"
            raise InputError(
                f"{where}: {table}.{name}: names {what} of the run (neither a task with a "
                f"config{'' if not groups_too else ' nor a group of group_subtasks'}); "
                "import refused"
            )


def group_names(results: dict[str, Any], where: str) -> set[str]:
    """The groups ``group_subtasks`` records (a task of ``configs`` with no children, as
    some lm-eval versions write for a task run on its own, is not a group)."""
    tree = results.get("group_subtasks", {})
    if not isinstance(tree, dict):
        raise InputError(f"{where}: group_subtasks: not an object")
    out = set()
    for name, children in tree.items():
        if not isinstance(children, list) or not all(isinstance(c, str) for c in children):
            raise InputError(f"{where}: group_subtasks.{name}: not a list of names")
        if name in results["configs"]:
            if children:
                raise InputError(
                    f"{where}: group_subtasks.{name}: a task of configs with subtasks "
                    "(a name is a task or a group, not both); import refused"
                )
            continue
        out.add(name)
    return out


def _forest(tree: dict[str, list[str]], tasks: set[str], where: str) -> dict[str, list[str]]:
    """The leaf tasks of every group, in lm-eval's order; refuses the first structure
    lm-eval never runs (``group_rule.group_forest``, the rule the audit applies too):
    a child neither a task nor a group of the run, a name under two groups or twice
    under one, a cycle, nesting over MAX_GROUP_DEPTH, a walk past the leaf bound."""
    leaves, problems = group_forest(tree, tasks.__contains__)
    for p in problems.values():
        field = f"group_subtasks.{p.group}" + ("" if p.index is None else f"[{p.index}]")
        raise InputError(f"{where}: {field}: {p.text}; import refused")
    return leaves


def read_groups(
    results: dict[str, Any],
    checks: list[ImportedCheck],
    datasets: dict[str, ImportedDataset],
    where: str,
) -> list[ImportedGroup]:
    """The run's groups, each aggregate tied to the checks it is a mean of.

    Raises InputError naming the file and field for a group whose subtasks are not all
    in the run, a cycle, a ``results`` entry for a group without its ``groups`` entry or
    the reverse (or the two differing), a key of a group's results that is not one
    lm-eval writes, a value that is not a number, or a ``sample_len`` or
    ``sample_count`` that the tasks' samples do not give.
    """
    tasks = set(results["configs"])
    groups = group_names(results, where)
    tree = {g: results["group_subtasks"][g] for g in groups}
    forest = _forest(tree, tasks, where)
    recorded = results.get("groups", {})
    if not isinstance(recorded, dict):
        raise InputError(f"{where}: groups: not an object")
    for g in recorded:
        if g not in groups:
            raise InputError(
                f"{where}: groups.{g}: a group with no group_subtasks entry (its subtasks are "
                "unknown, so its aggregate cannot be re-derived); import refused"
            )
    for task in tasks:
        size = results["results"][task].get("sample_len")
        if size is not None and not _count(size):
            raise InputError(
                f"{where}: results.{task}.sample_len: {size!r} is not a count (a JSON integer "
                "of 0 or more); import refused"
            )
        if size is not None and size != len(datasets[task].examples):
            raise InputError(
                f"{where}: results.{task}.sample_len: {size!r}, but its samples hold "
                f"{len(datasets[task].examples)} documents; import refused"
            )
    by_task: dict[str, list[ImportedCheck]] = {}
    for c in checks:
        by_task.setdefault(c.scorer, []).append(c)
    out = []
    for g in sorted(groups):
        values = results["results"].get(g)
        if not isinstance(values, dict):
            raise InputError(
                f"{where}: results.{g}: missing or not an object (lm-eval writes every group "
                "of group_subtasks into results); import refused"
            )
        if values.get("name") != g:
            raise InputError(
                f"{where}: results.{g}.name: {values.get('name')!r}, not the group's name "
                f"{g!r} (lm-eval writes a group's own name there); import refused"
            )
        leaves = forest[g]
        aggregates = _aggregates(g, values, leaves, by_task, datasets, where)
        if aggregates and g not in recorded:
            raise InputError(
                f"{where}: groups.{g}: missing, but results.{g} holds an aggregate (lm-eval "
                "writes a group's aggregate into both); import refused"
            )
        if g in recorded and recorded[g] != values:
            raise InputError(
                f"{where}: groups.{g}: differs from results.{g} (lm-eval writes the same "
                "aggregate into both); import refused"
            )
        _check_sizes(g, values, leaves, aggregates, datasets, where)
        out.append(
            ImportedGroup(
                name=g,
                subtasks=list(tree[g]),
                tasks=leaves,
                identity={
                    "alias": values.get("alias"),
                    "version": (results.get("versions") or {}).get(g),
                    "n-shot": (results.get("n-shot") or {}).get(g),
                    "higher_is_better": (results.get("higher_is_better") or {}).get(g),
                    "sample_len": values.get("sample_len"),
                },
                aggregates=aggregates,
            )
        )
    _no_ghosts(results, tasks, groups, where)
    return out


def _aggregates(
    g: str,
    values: dict[str, Any],
    leaves: list[str],
    by_task: dict[str, list[ImportedCheck]],
    datasets: dict[str, ImportedDataset],
    where: str,
) -> list[GroupAggregate]:
    # The leaf tasks' checks by (metric, filter), in leaf order: one pass over them, so a
    # group costs its keys plus its tasks' checks, never their product.
    by_key: dict[tuple[str, str], list[Member]] = {}
    for task in leaves:
        for c in by_task.get(task, []):
            member = Member(task, c.check_id, len(datasets[task].examples))
            by_key.setdefault((c.metric, c.filter), []).append(member)
    out = []
    for key, value in values.items():
        metric, sep, filt = key.partition(",")
        if not sep:
            if key not in _GROUP_KEYS:
                raise InputError(
                    f"{where}: results.{g}.{key}: not a key lm-eval writes for a group "
                    f"(<metric>,<filter>, <metric>_stderr,<filter>, "
                    f"{', '.join(sorted(_GROUP_KEYS))}); import refused"
                )
            continue
        if metric.endswith("_stderr"):
            if not (_number(value) or value == "N/A"):
                raise InputError(f'{where}: results.{g}.{key}: not a number or "N/A"')
            if f"{metric.removesuffix('_stderr')},{filt}" not in values:
                raise InputError(
                    f"{where}: results.{g}.{key}: a standard error without its aggregate "
                    f"{metric.removesuffix('_stderr')},{filt} (lm-eval writes them together, "
                    "and it could not be recorded); import refused"
                )
            continue
        field = f"{where}: results.{g}.{key}"
        if not _number(value):
            raise InputError(f"{field}: not a number; import refused")
        members = tuple(by_key.get((metric, filt), ()))
        if not members:
            raise InputError(
                f"{field}: none of the group's tasks ({', '.join(leaves) or 'none'}) reports "
                f"{metric} with filter {filt!r}, so nothing gives this aggregate; import refused"
            )
        out.append(
            GroupAggregate(
                metric, filt, value, values.get(f"{metric}_stderr,{filt}"), field, members
            )
        )
    return out


def _check_sizes(
    g: str,
    values: dict[str, Any],
    leaves: list[str],
    aggregates: list[GroupAggregate],
    datasets: dict[str, ImportedDataset],
    where: str,
) -> None:
    if aggregates:
        for key in ("sample_len", "sample_count"):
            if key not in values:
                raise InputError(
                    f"{where}: results.{g}.{key}: missing, but the group holds an aggregate "
                    "(lm-eval writes its document counts with it); import refused"
                )
    if "sample_len" in values:
        total = sum(len(datasets[t].examples) for t in leaves)
        if not _count(values["sample_len"]) or values["sample_len"] != total:
            raise InputError(
                f"{where}: results.{g}.sample_len: {values['sample_len']!r}, but its tasks' "
                f"samples hold {total} documents; import refused"
            )
    if "sample_count" in values:
        counts = values["sample_count"]
        given = {f"{a.metric},{a.filter}": sum(m.size for m in a.members) for a in aggregates}
        if (
            not isinstance(counts, dict)
            or not all(_count(n) for n in counts.values())
            or counts != given
        ):
            raise InputError(
                f"{where}: results.{g}.sample_count: {counts!r}, but its tasks' samples give "
                f"{given!r}; import refused"
            )


def rederive_groups(
    groups: list[ImportedGroup], scores: dict[str, float | None]
) -> list[dict[str, Any]]:
    """Each group as the report body records it, its aggregates re-derived from
    ``scores`` (check id -> SPEC 12's value of the check's cases under the mean).

    Raises InputError naming the file and field of an aggregate that neither of
    lm-eval's rules gives from those values.
    """
    out = []
    for group in groups:
        aggregates = []
        for a in group.aggregates:
            values = [scores[m.check_id] for m in a.members]
            if any(v is None for v in values):
                raise InputError(
                    f"{a.where}: a task of the group has no value to aggregate; import refused"
                )
            numbers = [float(v) for v in values if v is not None]
            d = derive_aggregate(a.value, numbers, [m.size for m in a.members])
            if d.rule is None:
                raise InputError(
                    f"{a.where}: {a.value!r} is not what its tasks give: {d.words()} "
                    f"(lm-eval's mean of {', '.join(m.check_id for m in a.members)}); "
                    "import refused"
                )
            aggregates.append(
                {
                    "metric": a.metric,
                    "filter": a.filter,
                    "value": a.value,
                    "stderr": a.stderr,
                    "rule": d.rule.value,
                    "derived": d.derived,
                    "tasks": [
                        {"task": m.task, "check_id": m.check_id, "size": m.size, "score": v}
                        for m, v in zip(a.members, numbers, strict=True)
                    ],
                }
            )
        out.append(
            {
                "group": group.name,
                "subtasks": group.subtasks,
                "tasks": group.tasks,
                **group.identity,
                "aggregates": aggregates,
            }
        )
    return out
