"""The shapes of an audit record's values and the comparison of one field (SPEC 12, 14).

``render`` holds each issued and derived value of an audit record to the shape the
bundle's schemas give it, and re-derives each field's outcome with the auditor's own
comparison rule (``evalbook.auditor``), so a record cannot call a disagreement an
agreement. Used by ``report.record``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

from bundler.core.textsafe import quoted


def field_disagreements(f: Mapping[str, Any]) -> int:
    from bundler.evalbook.audit import Derived, Field
    from bundler.evalbook.auditor import disagreement_count

    derived = f["derived"]
    return disagreement_count(
        Field(f["field"]),
        [v["value"] for v in f["issued"]],
        Derived(derived["value"]) if isinstance(derived, Mapping) else None,
    )


def group_field_contradiction(f: Mapping[str, Any]) -> tuple[str, str] | None:
    """(relative pointer, rule) when a group field's comparison, or its outcome, is not
    what the group audit's own rule (``evalbook.group_audit``) gives its values."""
    from bundler.evalbook.group_audit import GroupField, group_comparison, group_values_agree

    name = GroupField(f["field"])
    want = group_comparison(name).value
    if f["comparison"] != want:
        return "comparison", f"says {f['comparison']}, but field {f['field']} is compared {want}"
    derived = f["derived"]
    if f["outcome"] == "not_rederivable" or not isinstance(derived, Mapping):
        return None
    agree = group_values_agree(name, f["issued"][0]["value"], derived["value"])
    if agree != (f["outcome"] == "agree"):
        return (
            "outcome",
            f"says {f['outcome']}, but its recorded and derived values give "
            + ("agree" if agree else "disagree"),
        )
    return None


class GroupFacts:
    """What an audit record's lm-eval groups give (SPEC 16): their fields counted by
    outcome, the disagreements (a group field that disagrees is one), and the first
    field whose comparison or outcome its values contradict."""

    def __init__(self, groups: Any) -> None:
        self.outcomes: Counter[str] = Counter()
        self.found = 0
        self.wrong: tuple[str, str] | None = None
        for i, group in enumerate(groups or ()):
            at = [(f"/groups/{i}/fields/{j}", f) for j, f in enumerate(group["fields"])]
            for k, a in enumerate(group["aggregates"]):
                at += [
                    (f"/groups/{i}/aggregates/{k}/fields/{j}", f) for j, f in enumerate(a["fields"])
                ]
            for where, f in at:
                self.outcomes[f["outcome"]] += 1
                self.found += f["outcome"] == "disagree"
                wrong = group_field_contradiction(f)
                if wrong is not None and self.wrong is None:
                    self.wrong = (f"{where}/{wrong[0]}", wrong[1])
            for k, a in enumerate(group["aggregates"]):
                wrong = aggregate_contradiction(a["fields"])
                if wrong is not None and self.wrong is None:
                    self.wrong = (f"/groups/{i}/aggregates/{k}/fields/{wrong[0]}", wrong[1])


def _derived_of(f: Mapping[str, Any]) -> Any:
    d = f.get("derived")
    return d.get("value") if isinstance(d, Mapping) else None


def aggregate_contradiction(fields: Any) -> tuple[str, str] | None:
    """(relative pointer, rule) when an aggregate's derived ``value``, ``rule`` or
    ``derived`` is not what lm-eval's rule (``evalbook.group_rule.derive_aggregate``, the
    audit's own arithmetic) gives from the task scores and sizes the record itself
    holds. Checked when the aggregate's ``tasks`` agree (so every task has its size and
    score field) and each task's derived score and size are numbers; a record whose
    derived mean no task data gives cannot call a forged value an agreement."""
    from bundler.evalbook.compare import numbers_agree
    from bundler.evalbook.group_rule import derive_aggregate

    if not isinstance(fields, list):
        return None
    by: dict[tuple[Any, Any], tuple[int, Mapping[str, Any]]] = {}
    for j, f in enumerate(fields):
        if isinstance(f, Mapping):
            by.setdefault((f.get("field"), f.get("task")), (j, f))
    tasks = by.get(("tasks", None))
    if tasks is None or tasks[1].get("outcome") != "agree":
        return None
    members = _derived_of(tasks[1])
    if not isinstance(members, list) or not members:
        return None
    scores: list[float] = []
    sizes: list[int] = []
    for m in members:
        task = m.get("task") if isinstance(m, Mapping) else None
        size, score = by.get(("size", task)), by.get(("score", task))
        if size is None or score is None:
            why = f"names task {task!r}, but the aggregate has no size and score of it"
            return str(tasks[0]), why
        n, v = _derived_of(size[1]), _derived_of(score[1])
        if not _is_count(n) or not is_number(v):
            return None  # not re-derivable, or no value: the fields say so
        sizes.append(n)
        scores.append(float(v))
    value = by.get(("value", None))
    if value is None or not value[1].get("issued"):
        return None
    issued = (
        value[1]["issued"][0].get("value") if isinstance(value[1]["issued"][0], Mapping) else None
    )
    d = derive_aggregate(issued, scores, sizes)
    rule = by.get(("rule", None))
    recorded_rule = None
    if rule is not None and rule[1].get("issued") and isinstance(rule[1]["issued"][0], Mapping):
        recorded_rule = rule[1]["issued"][0].get("value")
    mean = d.derived if d.rule is not None else d.under(recorded_rule)
    want = {
        "value": mean,
        "derived": mean,
        "rule": None if d.rule is None else d.rule.value,
    }
    for name, expected in want.items():
        found = by.get((name, None))
        if found is None:
            continue
        got = _derived_of(found[1])
        same = (
            got == expected
            if name == "rule"
            else ((got is None and expected is None) or numbers_agree(got, expected))
        )
        if not same:
            return (
                f"{found[0]}/derived",
                f"says {got!r}, but the aggregate's own task scores and sizes give "
                f"{expected!r} ({d.words()})",
            )
    return None


def expected_disagreements(check_id: Any, f: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The disagreements the auditor's own comparison finds for one field of a record, as
    the record lists them but for the ``detail`` words (``auditor.field_disagreements_json``)."""
    from bundler.evalbook.audit import Derived, Field, IssuedValue
    from bundler.evalbook.auditor import field_disagreements_json

    derived = f["derived"]
    return field_disagreements_json(
        check_id,
        Field(f["field"]),
        [IssuedValue(v["document"], v["value"]) for v in f["issued"]],
        Derived(derived["value"]) if isinstance(derived, Mapping) else None,
    )


def is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 2**53 - 1


def _coverage_problem(value: Any, derived: bool) -> str | None:
    if not isinstance(value, Mapping):
        return "must be an object of counts"
    if not all(_is_count(value.get(k)) for k in ("expected", "executed")):
        return "expected and executed must be counts (integers from 0 to 2^53 - 1)"
    if "missing" in value and not _is_count(value["missing"]):
        return "missing must be a count"
    if derived and value["executed"] > value["expected"]:
        return "executed must not exceed expected"
    if derived and "missing" in value and value["missing"] != value["expected"] - value["executed"]:
        return "missing must be expected minus executed"
    return None


def _interval_problem(value: Any, derived: bool) -> str | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return "must be an object or null"
    low, high, level = value.get("low"), value.get("high"), value.get("level")
    for name, x in (("low", low), ("high", high), ("level", level)):
        if x is not None and not is_number(x):
            return f"{name} must be a finite number or null"
    if derived and low is not None and high is not None and low > high:
        return "low must not exceed high"
    if derived and level is not None and not 0 < level < 1:
        return "level must lie between 0 and 1"
    return None


def _score_problem(value: Any, derived: bool) -> str | None:
    return None if value is None or is_number(value) else "must be a finite number or null"


def _aggregation_problem(value: Any, derived: bool) -> str | None:
    if not isinstance(value, Mapping):
        return "must be an object"
    for name in ("threshold", "min_coverage"):
        x = value.get(name)
        if x is not None and not is_number(x):
            return f"{name} must be a finite number or null"
    return None


# The values of each audited field as the bundle's schemas (issued) and the deriving
# rules (derived) give them: what the page charts, so what a record must hold.
VALUE_SHAPES = {
    "coverage": _coverage_problem,
    "interval": _interval_problem,
    "score": _score_problem,
    "aggregation": _aggregation_problem,
}


def audit_field_contradiction(f: Mapping[str, Any]) -> tuple[str, str] | None:
    """(relative pointer, rule) for the first thing wrong with one field's values."""
    from bundler.evalbook.audit import Field
    from bundler.evalbook.auditor import comparison_of

    want = comparison_of(Field(f["field"])).value
    if f["comparison"] != want:
        return "comparison", f"says {f['comparison']}, but field {f['field']} is compared {want}"
    shape = VALUE_SHAPES.get(f["field"])
    if shape is None:
        return None
    for k, v in enumerate(f["issued"]):
        problem = shape(v["value"], False)
        if problem is not None:
            return f"issued/{k}/value", f"{f['field']}: {problem}"
    derived = f["derived"]
    if isinstance(derived, Mapping):
        problem = shape(derived["value"], True)
        if problem is not None:
            return "derived/value", f"{f['field']}: {problem}"
    return None


# ---- a check's derived status and the report's derived result (SPEC 12) -------------

_DERIVED_OUTCOMES = ("agree", "disagree", "informational")


def _derived_fields(fields: Any) -> dict[str, tuple[int, Any]]:
    """name -> (index, derived value) of the first field of each name that was
    re-derived (a derived value present); fields not re-derived are left out."""
    found: dict[str, tuple[int, Any]] = {}
    for j, f in enumerate(fields):
        name = f["field"]
        derived = f["derived"]
        if name in found or f["outcome"] not in _DERIVED_OUTCOMES:
            continue
        if isinstance(derived, Mapping):
            found[name] = (j, derived["value"])
    return found


def _issued_aggregations(fields: Any) -> list[Any]:
    """The aggregations the check's documents issue (suite, check result): derivation
    used the suite's, which the record does not single out, so each is tried."""
    values: list[Any] = []
    for f in fields:
        if f["field"] == "aggregation":
            values += [v["value"] for v in f["issued"]]
            if isinstance(f["derived"], Mapping):
                values.append(f["derived"]["value"])
    return values


def _coverage_of(value: Any) -> Any:
    from bundler.evalbook.verdicts import Coverage

    if _coverage_problem(value, True) is not None:
        return None
    return Coverage(value["expected"], value["executed"], value["expected"] - value["executed"])


def _words(value: Any) -> str:
    from bundler.evalbook.audit import format_value

    return quoted(value) if isinstance(value, str) else format_value(value)


def check_status_contradiction(check: Mapping[str, Any]) -> tuple[str, str] | None:
    """(pointer relative to the check, rule) when the check's derived status is not one
    SPEC 12's status rule gives over the check's own derived values, or its derived
    result is not the one its derived status gives; None otherwise.

    The rule is the auditor's own (``derive.statuses_given`` over
    ``derive.decide_status``): errors listed make the status ``error``; the score
    against the threshold and the coverage against min_coverage and min_samples
    decide the rest, and what the record does not keep (whether the check already
    failed, the unscored repeats' statuses) is tried at every value it can take. A
    status not re-derived (slices, a check that could not be derived) is not held.
    """
    from bundler.evalbook.verdicts import CheckResult, CheckStatus

    fields = check["fields"]
    derived = _derived_fields(fields)
    status_at = derived.get("status")
    status: CheckStatus | None = None
    if status_at is not None:
        status = next((s for s in CheckStatus if s.value == status_at[1]), None)
        if status is None:
            return (
                f"fields/{status_at[0]}/derived/value",
                f"status: {quoted(status_at[1])} is not a check status",
            )
        wrong = _status_rule_contradiction(check, derived, status_at[0], status)
        if wrong is not None:
            return wrong
    result_at = derived.get("result")
    if result_at is not None:
        j, value = result_at
        if not any(r.value == value for r in CheckResult):
            return f"fields/{j}/derived/value", f"result: {quoted(value)} is not a check result"
        if status is not None and value != CheckResult.from_status(status).value:
            return (
                f"fields/{j}/derived/value",
                f"result: says {value}, but the derived status {status.value} gives "
                f"{CheckResult.from_status(status).value} (SPEC 12)",
            )
    return None


def _status_rule_contradiction(
    check: Mapping[str, Any], derived: Mapping[str, tuple[int, Any]], j: int, status: Any
) -> tuple[str, str] | None:
    from bundler.evalbook.derive import statuses_given

    fields = check["fields"]
    errors = len(check["errors"])
    coverage_at = derived.get("coverage")
    coverage = _coverage_of(coverage_at[1]) if coverage_at is not None else None
    score_at = derived.get("score")
    score_known = score_at is not None and _score_problem(score_at[1], True) is None
    score = score_at[1] if score_at is not None and score_known else None
    aggregations = _issued_aggregations(fields)
    if not aggregations and not errors:
        return None  # no aggregation to hold the status to: nothing the record keeps decides
    allowed: set[Any] = set()
    for aggregation in aggregations or [{}]:
        allowed |= statuses_given(
            defects=bool(errors),
            aggregation=aggregation if isinstance(aggregation, Mapping) else {},
            coverage=coverage,
            score=score,
            score_known=score_known,
        )
    if status in allowed:
        return None
    facts = [f"{errors} error(s) listed"]
    if score_known:
        facts.append(f"score {_words(score)}")
    if coverage is not None:
        facts.append(f"{coverage.executed} of {coverage.expected} executed")
    for aggregation in aggregations[:1]:
        if isinstance(aggregation, Mapping):
            facts += [
                f"{k} {_words(aggregation.get(k))}"
                for k in ("rule", "threshold", "min_coverage", "min_samples")
            ]
    return (
        f"fields/{j}/derived/value",
        f"status: says {status.value}, but SPEC 12's status rule over the check's own "
        f"derived values ({', '.join(facts)}) gives "
        f"{' or '.join(sorted(s.value for s in allowed))}",
    )


class ReportResultFacts:
    """The required checks' derived (result, evidence complete) pairs, each kept once,
    and the first required check whose result or evidence completeness was not
    re-derived: what the report's derived result rests on."""

    def __init__(self) -> None:
        self.pairs: set[tuple[Any, bool]] = set()
        self.underived: str | None = None

    def add(self, check: Mapping[str, Any]) -> None:
        from bundler.evalbook.verdicts import CheckResult

        if check["required"] is not True:
            return
        derived = _derived_fields(check["fields"])
        result = derived.get("result")
        evidence = derived.get("evidence_complete")
        known = next((r for r in CheckResult if result and r.value == result[1]), None)
        if known is None or evidence is None or not isinstance(evidence[1], bool):
            if self.underived is None:
                self.underived = str(check["check_id"])
            return
        self.pairs.add((known, evidence[1]))

    def contradiction(self, report: Any) -> tuple[str, str] | None:
        """(pointer, rule) when the report's derived result is not what its required
        checks' derived results give (``derive.report_result``)."""
        from bundler.evalbook.derive import report_result

        if not isinstance(report, Mapping):
            return None
        at = _derived_fields(report["fields"]).get("result")
        if at is None:
            return None
        j, value = at
        pointer = f"/report/fields/{j}/derived/value"
        if self.underived is not None:
            return (
                pointer,
                f"result: derived, but required check {quoted(self.underived)} has no derived "
                "result and evidence completeness for it to rest on (SPEC 12)",
            )
        want = report_result(self.pairs).value
        if value != want:
            return (
                pointer,
                f"result: says {quoted(value)}, but its required checks' derived results give "
                f"{want} (SPEC 12)",
            )
        return None
