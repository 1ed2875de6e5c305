"""The shapes of an audit record's values and the comparison of one field (SPEC 12, 14).

``render`` holds each issued and derived value of an audit record to the shape the
bundle's schemas give it, and re-derives each field's outcome with the auditor's own
comparison rule (``evalbook.auditor``), so a record cannot call a disagreement an
agreement. Used by ``report.record``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def field_disagreements(f: Mapping[str, Any]) -> int:
    from bundler.evalbook.audit import Derived, Field
    from bundler.evalbook.auditor import disagreement_count

    derived = f["derived"]
    return disagreement_count(
        Field(f["field"]),
        [v["value"] for v in f["issued"]],
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
