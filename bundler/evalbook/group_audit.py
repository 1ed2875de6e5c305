"""The audit of lm-eval group aggregates a report body records (SPEC 12, 16).

An imported lm-eval run with groups records each group in the body's
``subject.run.groups`` (``importers.lmgroups``): its leaf ``tasks``, its ``sample_len``
and, per aggregate ``<metric>,<filter>``, the runner's ``value``, the ``rule`` it
matched, the ``derived`` mean and each task's ``size`` and ``score``. ``audit_groups``
re-derives all of them from the bundle's own documents, with the import's own rule
(``evalbook.group_rule``): the leaf tasks from the recorded ``subtasks`` tree, the
members of an aggregate from the checks the bundle holds (``member_check_id``), each
task's score as SPEC 12's mean of its check's cases and its size as the examples of its
dataset manifest (given by the auditor, ``member``), then both of lm-eval's means and
the rule the value matches. Every recorded field is compared with what is derived; a
difference is a disagreement naming the group, the metric and filter, the task and the
field. What rests on a check the audit cannot re-derive is "not re-derivable" with the
check's reason, never a disagreement.

Recorded and not re-derived (runner values no document of the bundle gives): each
group's ``subtasks`` (the tree the leaf tasks are derived from), ``alias``, ``version``,
``n-shot``, ``higher_is_better`` and each aggregate's ``stderr``; ``import-lm-eval
--check`` holds them to the run files.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from bundler.evalbook.compare import (
    REPORT_BODY,
    Comparison,
    Derived,
    IssuedValue,
    Outcome,
    _json_equal,
    _precision,
    format_value,
    numbers_agree,
)
from bundler.evalbook.group_rule import (
    MAX_GROUP_DEPTH,
    MAX_LEAF_TASKS,
    derive_aggregate,
    group_forest,
    member_check_id,
)

# Leaf-task visits over all groups of a body (a task sits in at most MAX_GROUP_DEPTH + 1
# groups of a forest), and (aggregate, leaf task) lookups over all aggregates: a hostile
# body cannot make the audit grow past either.
MAX_LEAF_VISITS = MAX_LEAF_TASKS * (MAX_GROUP_DEPTH + 1)
MAX_MEMBER_LOOKUPS = MAX_LEAF_TASKS * (MAX_GROUP_DEPTH + 1)
# The records a body can hold, from the checks it records (``checks``, at most the
# 20,000 cases of SPEC 4.3, each check holding one): each aggregate of a group is the mean
# of at least one check of its leaf tasks (the import refuses one no task reports), and
# two keys of one group are given by two checks, so a group holds at most ``checks``
# aggregates; a check is under at most MAX_GROUP_DEPTH + 1 nested groups (a forest), so
# the body holds at most ``checks * (MAX_GROUP_DEPTH + 1)`` aggregates. Each group holds
# a leaf task below it (lm-eval runs no group without a task), each task a check, and a
# task's chain of groups is at most MAX_GROUP_DEPTH + 1 long: as many groups at most.
# More is a forged body: one disagreement, found before any of it is audited, with the
# count recorded (not the records), so the audit's output stays as small as its bound.
NESTING = MAX_GROUP_DEPTH + 1


def _over(w: _Where, what: str, count: int, cap: int, why: str) -> GroupFieldAudit:
    return w.compare(
        GroupField.ENTRY, {what: count}, None, f"{count} {what}, more than {cap}: {why}"
    )


class GroupField(enum.Enum):
    """What is compared for a group, one of its aggregates, or a task of an aggregate."""

    ENTRY = "entry"  # the record's shape: a group or aggregate as the importer writes one
    TASKS = "tasks"  # a group's leaf tasks; an aggregate's tasks (task and check id)
    SAMPLE_LEN = "sample_len"
    VALUE = "value"
    RULE = "rule"
    DERIVED = "derived"
    SIZE = "size"
    SCORE = "score"


_TOLERANT = frozenset({GroupField.VALUE, GroupField.DERIVED, GroupField.SCORE})


def group_comparison(name: GroupField) -> Comparison:
    """How a recorded value of ``name`` is compared with the derived one."""
    return Comparison.TOLERANCE if name in _TOLERANT else Comparison.EXACT


def group_values_agree(name: GroupField, issued: Any, derived: Any) -> bool:
    """The one comparison of a group field: numbers within the audit's tolerance for
    values, derived means and scores; exact JSON equality for the rest."""
    if name in _TOLERANT:
        return numbers_agree(issued, derived)
    return _json_equal(issued, derived)


@dataclass(frozen=True)
class MemberValue:
    """A leaf task's check as the bundle gives it: SPEC 12's mean of its cases, and the
    number of examples of its dataset version."""

    score: float | None
    size: int


# check id -> its value, the reason it cannot be re-derived, or None (no such check)
MemberLookup = Callable[[str], MemberValue | str | None]


@dataclass(frozen=True)
class GroupFieldAudit:
    """One recorded field of a group, aggregate or task: recorded vs derived."""

    group: str | None
    metric: str | None
    filter: str | None
    task: str | None
    field: GroupField
    outcome: Outcome
    issued: tuple[IssuedValue, ...]
    derived: Derived | None
    reason: str | None = None  # why not re-derivable
    why: str | None = None  # the rule and numbers that decide the derived value

    @property
    def comparison(self) -> Comparison:
        return group_comparison(self.field)

    def where(self) -> str:
        text = "group " + (repr(self.group) if self.group is not None else "(unnamed)")
        if self.metric is not None or self.filter is not None:
            text += f" aggregate {self.metric},{self.filter}"
        if self.task is not None:
            text += f" task {self.task}"
        return text

    def describe(self, *, short: bool = False) -> str:
        """One line: where, the field, the derived value and why, the recorded value."""
        issued = self.issued[0].value if self.issued else None
        if self.derived is None:
            return f"{self.where()} {self.field.value}: recorded {format_value(issued)}"
        p = _precision([(issued, self.derived.value)], short)
        why = f" ({self.why})" if self.why else ""
        return (
            f"{self.where()} {self.field.value}: derived {format_value(self.derived.value, p)}"
            f"{why} (recorded: {format_value(issued, p)}, in {REPORT_BODY})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "field": self.field.value,
            "task": self.task,
            "outcome": self.outcome.value,
            "issued": [v.to_json() for v in self.issued],
            "derived": None if self.derived is None else {"value": self.derived.value},
            "comparison": self.comparison.value,
            "reason": self.reason,
        }

    def disagreement_json(self) -> dict[str, Any]:
        return {
            "scope": "group",
            "check_id": None,
            "group": self.group,
            "metric": self.metric,
            "filter": self.filter,
            "task": self.task,
            "field": self.field.value,
            "kind": "issued_vs_derived",
            "issued": [v.to_json() for v in self.issued],
            "derived": None if self.derived is None else {"value": self.derived.value},
            "comparison": self.comparison.value,
            "detail": self.describe(),
        }


@dataclass(frozen=True)
class GroupNotRederivable:
    """Fields of a group (or its aggregate) that cannot be re-derived, and why."""

    group: str | None
    metric: str | None
    filter: str | None
    fields: tuple[GroupField, ...]
    reason: str

    def describe(self) -> str:
        where = "group " + (repr(self.group) if self.group is not None else "(unnamed)")
        if self.metric is not None:
            where += f" aggregate {self.metric},{self.filter}"
        return f"{where} ({', '.join(f.value for f in self.fields)}): {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {
            "scope": "group",
            "check_id": None,
            "group": self.group,
            "metric": self.metric,
            "filter": self.filter,
            "fields": [f.value for f in self.fields],
            "reason": self.reason,
        }


@dataclass(frozen=True)
class AggregateAudit:
    metric: str | None
    filter: str | None
    fields: tuple[GroupFieldAudit, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "filter": self.filter,
            "fields": [f.to_json() for f in self.fields],
        }


@dataclass(frozen=True)
class GroupAudit:
    """One group of the body: its own fields and each aggregate's."""

    group: str | None
    fields: tuple[GroupFieldAudit, ...]
    aggregates: tuple[AggregateAudit, ...] = ()

    def all_fields(self) -> Iterator[GroupFieldAudit]:
        yield from self.fields
        for a in self.aggregates:
            yield from a.fields

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "fields": [f.to_json() for f in self.fields],
            "aggregates": [a.to_json() for a in self.aggregates],
        }


def group_not_rederivable(groups: tuple[GroupAudit, ...]) -> tuple[GroupNotRederivable, ...]:
    """The fields not re-derived, per group or aggregate and reason."""
    grouped: dict[tuple[str | None, str | None, str | None, str], list[GroupField]] = {}
    for g in groups:
        for f in g.all_fields():
            if f.outcome is Outcome.NOT_REDERIVABLE:
                key = (g.group, f.metric, f.filter, f.reason or "unknown")
                if f.field not in grouped.setdefault(key, []):
                    grouped[key].append(f.field)
    return tuple(
        GroupNotRederivable(group, metric, filt, tuple(fields), reason)
        for (group, metric, filt, reason), fields in grouped.items()
    )


# ----------------------------------------------------------------------- the audit


class _Where:
    """Builds the field audits of one group or aggregate."""

    def __init__(self, document: str, group: str | None, metric: Any, filt: Any) -> None:
        self.document = document
        self.group = group
        self.metric = metric if isinstance(metric, str) else None
        self.filter = filt if isinstance(filt, str) else None

    def compare(
        self, name: GroupField, issued: Any, derived: Any, why: str | None, task: str | None = None
    ) -> GroupFieldAudit:
        if name is GroupField.ENTRY and issued is None:
            derived = why  # an entry is always refused: never equal to the recorded null
        agree = group_values_agree(name, issued, derived)
        return GroupFieldAudit(
            self.group,
            self.metric,
            self.filter,
            task,
            name,
            Outcome.AGREE if agree else Outcome.DISAGREE,
            (IssuedValue(self.document, issued),),
            Derived(derived),
            why=why,
        )

    def blocked(
        self, name: GroupField, issued: Any, reason: str, task: str | None = None
    ) -> GroupFieldAudit:
        return GroupFieldAudit(
            self.group,
            self.metric,
            self.filter,
            task,
            name,
            Outcome.NOT_REDERIVABLE,
            (IssuedValue(self.document, issued),),
            None,
            reason=reason,
        )


_GROUP_SHAPE = (
    "not a group as the importer records one (an object with a string group, a list of "
    "subtasks and a list of aggregates)"
)
_AGGREGATE_SHAPE = (
    "not an aggregate as the importer records one (an object with a string metric and filter)"
)


def _group_shape(entry: Any) -> bool:
    return (
        isinstance(entry, Mapping)
        and isinstance(entry.get("group"), str)
        and isinstance(entry.get("subtasks"), list)
        and isinstance(entry.get("aggregates"), list)
    )


def audit_groups(
    raw: Any, member: MemberLookup, document: str, run_tasks: Any = None, checks: int = 0
) -> tuple[GroupAudit, ...]:
    """Every group of ``raw`` (the body's ``subject.run.groups``) audited against the
    bundle's own checks; ``member`` gives a check's value (cached by the caller);
    ``run_tasks`` is the body's ``subject.run.tasks`` (the run's tasks with a config).

    Never raises for a bad record: a record of the wrong shape, and a structure the
    import refuses (``group_rule.group_forest``: a cycle, nesting over MAX_GROUP_DEPTH, a
    name under two groups, a leaf that is not a task of the run, a walk past
    MAX_LEAF_VISITS), is a disagreement of its group's ``entry``: only a forged body
    holds one. So is a body with more groups or aggregates than its ``checks`` (the
    body's checks) can give (see NESTING). The work is bounded by MAX_LEAF_VISITS and
    MAX_MEMBER_LOOKUPS.
    """
    w = _Where(document, None, None, None)
    if not isinstance(raw, list):
        shown = raw if not isinstance(raw, Mapping) else f"an object of {len(raw)} keys"
        return (GroupAudit(None, (w.compare(GroupField.ENTRY, shown, None, _GROUP_SHAPE),)),)
    cap = checks * NESTING
    bound = (
        f"the body's {checks} checks give at most {cap} (each aggregate is the mean of a "
        f"check, under at most {NESTING} nested groups)"
    )
    total = sum(
        len(e["aggregates"])
        for e in raw
        if isinstance(e, Mapping) and isinstance(e.get("aggregates"), list)
    )
    if len(raw) > cap:
        return (GroupAudit(None, (_over(w, "groups", len(raw), cap, bound),)),)
    if total > cap:
        return (GroupAudit(None, (_over(w, "aggregates", total, cap, bound),)),)
    out: list[GroupAudit] = []
    tree: dict[str, list[Any]] = {}
    entries: list[Mapping[str, Any]] = []
    for entry in raw:
        name = entry.get("group") if isinstance(entry, Mapping) else None
        name = name if isinstance(name, str) else None
        if _group_shape(entry) and len(entry["aggregates"]) > checks:
            gw = _Where(document, name, None, None)
            over = _over(
                gw,
                "aggregates",
                len(entry["aggregates"]),
                checks,
                f"a group's aggregates are given by distinct checks, and the body has {checks}",
            )
            out.append(GroupAudit(name, (over,)))
            continue
        why = None if _group_shape(entry) else _GROUP_SHAPE
        if why is None and name in tree:
            why = f"a second record of group {name!r} (the importer records each group once)"
        if why is not None:
            w = _Where(document, name, None, None)
            out.append(GroupAudit(name, (w.compare(GroupField.ENTRY, entry, None, why),)))
            continue
        assert name is not None
        tree[name] = entry["subtasks"]
        entries.append(entry)
    tasks = (
        frozenset(t for t in run_tasks if isinstance(t, str))
        if isinstance(run_tasks, list)
        else frozenset()
    )
    forest, problems = group_forest(tree, tasks.__contains__, [MAX_LEAF_VISITS])
    lookups = [MAX_MEMBER_LOOKUPS]
    for entry in entries:
        problem = problems.get(entry["group"])
        if problem is not None:
            w = _Where(document, entry["group"], None, None)
            where = f"subtasks of group {problem.group!r}" + (
                "" if problem.index is None else f"[{problem.index}]"
            )
            why = f"{where}: {problem.text} (the import refuses this structure)"
            out.append(
                GroupAudit(
                    entry["group"], (w.compare(GroupField.ENTRY, entry["subtasks"], None, why),)
                )
            )
            continue
        out.append(_audit_group(entry, forest[entry["group"]], lookups, member, document))
    return tuple(out)


def _audit_group(
    entry: Mapping[str, Any],
    leaves: list[str],
    lookups: list[int],
    member: MemberLookup,
    document: str,
) -> GroupAudit:
    name: str = entry["group"]
    w = _Where(document, name, None, None)
    fields: list[GroupFieldAudit] = []
    fields.append(
        w.compare(
            GroupField.TASKS,
            entry.get("tasks"),
            leaves,
            "the leaf tasks of its recorded subtasks, in lm-eval's order",
        )
    )
    sizes: dict[str, int] = {}
    aggregates = []
    keys: set[tuple[str, str]] = set()
    for a in entry["aggregates"]:
        metric = a.get("metric") if isinstance(a, Mapping) else None
        filt = a.get("filter") if isinstance(a, Mapping) else None
        if isinstance(metric, str) and isinstance(filt, str):
            if (metric, filt) in keys:
                aw = _Where(document, name, metric, filt)
                why = (
                    f"a second record of aggregate {metric},{filt} (lm-eval writes one "
                    "value per key, and the importer records it once)"
                )
                aggregates.append(
                    AggregateAudit(metric, filt, (aw.compare(GroupField.ENTRY, a, None, why),))
                )
                continue
            keys.add((metric, filt))
        aggregates.append(_audit_aggregate(a, name, leaves, lookups, member, document, sizes))
    if entry["aggregates"] or entry.get("sample_len") is not None:
        fields.append(_sample_len(w, entry.get("sample_len"), leaves, sizes))
    return GroupAudit(name, tuple(fields), tuple(aggregates))


def _sample_len(
    w: _Where, issued: Any, leaves: list[str] | str, sizes: Mapping[str, int]
) -> GroupFieldAudit:
    if isinstance(leaves, str):
        return w.blocked(GroupField.SAMPLE_LEN, issued, leaves)
    unknown = next((t for t in leaves if t not in sizes), None)
    if unknown is not None:
        return w.blocked(
            GroupField.SAMPLE_LEN,
            issued,
            f"leaf task {unknown} has no check in the group's aggregates to give its size",
        )
    total = sum(sizes[t] for t in leaves)
    return w.compare(
        GroupField.SAMPLE_LEN, issued, total, f"the examples of its {len(leaves)} leaf tasks"
    )


def _audit_aggregate(
    a: Any,
    group: str,
    leaves: list[str] | str,
    lookups: list[int],
    member: MemberLookup,
    document: str,
    sizes: dict[str, int],
) -> AggregateAudit:
    metric = a.get("metric") if isinstance(a, Mapping) else None
    filt = a.get("filter") if isinstance(a, Mapping) else None
    w = _Where(document, group, metric, filt)
    if not isinstance(a, Mapping) or not isinstance(metric, str) or not isinstance(filt, str):
        return AggregateAudit(
            w.metric, w.filter, (w.compare(GroupField.ENTRY, a, None, _AGGREGATE_SHAPE),)
        )
    value, rule = a.get("value"), a.get("rule")
    computed = (GroupField.TASKS, GroupField.VALUE, GroupField.RULE, GroupField.DERIVED)
    if isinstance(leaves, str) or lookups[0] < len(leaves):
        why = (
            leaves
            if isinstance(leaves, str)
            else f"more than {MAX_MEMBER_LOOKUPS} (aggregate, leaf task) pairs in the body"
        )
        return AggregateAudit(
            metric, filt, tuple(w.blocked(f, a.get(f.value), why) for f in computed)
        )
    lookups[0] -= len(leaves)
    members: list[tuple[str, str, MemberValue | str]] = []
    for task in leaves:
        check_id = member_check_id(task, metric, filt)
        found = member(check_id)
        if found is not None:
            members.append((task, check_id, found))
    recorded = a.get("tasks")
    recorded_list = recorded if isinstance(recorded, list) else []
    fields = [
        w.compare(
            GroupField.TASKS,
            [
                {"task": t.get("task"), "check_id": t.get("check_id")}
                if isinstance(t, Mapping)
                else t
                for t in recorded_list
            ]
            if isinstance(recorded, list)
            else recorded,
            [{"task": t, "check_id": c} for t, c, _ in members],
            f"the group's leaf tasks that have a check {metric},{filt}",
        )
    ]
    by_task: dict[Any, Mapping[str, Any]] = {}
    for t in recorded_list:
        if isinstance(t, Mapping):
            by_task.setdefault(t.get("task"), t)
    for task, check_id, found in members:
        if isinstance(found, MemberValue):
            sizes[task] = found.size
        issued_task = by_task.get(task)
        if issued_task is None:
            continue  # the tasks field names it
        for name, derived in (
            (GroupField.SIZE, found.size if isinstance(found, MemberValue) else None),
            (GroupField.SCORE, found.score if isinstance(found, MemberValue) else None),
        ):
            if isinstance(found, str):
                fields.append(w.blocked(name, issued_task.get(name.value), found, task))
                continue
            why = (
                f"the examples of check {check_id}'s dataset"
                if name is GroupField.SIZE
                else f"SPEC 12's mean of check {check_id}'s cases"
            )
            fields.append(w.compare(name, issued_task.get(name.value), derived, why, task))
    blocked = next((f"task {t}: {v}" for t, _, v in members if isinstance(v, str)), None)
    if blocked is not None:
        fields += [w.blocked(f, a.get(f.value), blocked) for f in computed[1:]]
        return AggregateAudit(metric, filt, tuple(fields))
    values = [v for _, _, v in members if isinstance(v, MemberValue)]
    scores = [v.score for v in values]
    if not values or any(s is None for s in scores):
        why = (
            f"no leaf task of the group has a check {metric},{filt}, so nothing gives it"
            if not values
            else "a task of the aggregate has no value (no example of its check scored)"
        )
        fields += [w.compare(f, a.get(f.value), None, why) for f in computed[1:]]
        return AggregateAudit(metric, filt, tuple(fields))
    d = derive_aggregate(
        value, [float(s) for s in scores if s is not None], [v.size for v in values]
    )
    mean = d.derived if d.rule is not None else d.under(rule)
    matched = (
        f"the value matches {d.rule.value}"
        if d.rule is not None
        else "neither rule gives the recorded value"
    )
    why = f"lm-eval's mean of {len(values)} task(s): {d.words()}; {matched}"
    fields += [
        w.compare(GroupField.VALUE, value, mean, why),
        w.compare(GroupField.RULE, rule, None if d.rule is None else d.rule.value, why),
        w.compare(GroupField.DERIVED, a.get("derived"), mean, why),
    ]
    return AggregateAudit(metric, filt, tuple(fields))
