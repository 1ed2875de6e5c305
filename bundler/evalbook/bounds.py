"""The bounds on document numbers that size the re-derivation work (SPEC 5, Resources).

``BOUNDS`` is the one table of the numbers that become loop bounds, allocations or
arguments of a numeric routine when a check is re-derived (repeats, min_samples, the
examples and cases of a check, bootstrap draws, resamples, level, seed), each with its
range and what a value beyond it keeps from being re-derived (``BoundScope``);
``bound_violations`` applies it to a check's inputs before anything is derived, and
the parsers of ``derive.derive_check`` consult the same entries.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from bundler.evalbook.stats import DEFAULT_RESAMPLES, MAX_LEVEL, MAX_RESAMPLES

# SPEC 4.3: a bundle holds at most 20,000 cases (``export.MAX_CASES``, a test keeps the
# two equal). No check of a bundle can have more repeats of one example, more executed
# examples or more cases than that.
MAX_CASES = 20_000
MAX_SEED = (1 << 128) - 1
# The index draws the audit of one bundle spends on bootstrap intervals at most: the
# default resamples over the most cases a bundle holds, a few seconds of numpy. More
# resamples (up to MAX_RESAMPLES) fit when a bundle's bootstrapped checks are smaller.
MAX_BOOTSTRAP_DRAWS = DEFAULT_RESAMPLES * MAX_CASES


class BoundScope(enum.Enum):
    """What an out-of-bound value keeps from being re-derived."""

    CHECK = "check"  # every field of the check
    INTERVAL = "interval"  # the check's interval only


@dataclass(frozen=True)
class Bound:
    """The range a document number must lie in before it is used (SPEC 5, Resources)."""

    field: str
    scope: BoundScope
    low: int | float
    high: int | float
    integer: bool
    why: str

    def violation(self, value: object) -> str | None:
        """A one-line reason naming the field, the value and the bound, or None.

        Only well-typed values at or above ``low`` are judged here; a value of the wrong
        type or below ``low`` is a defect the parsers report with their own message.
        """
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if self.integer and not isinstance(value, int):
            return None
        if value < self.low or value <= self.high:
            return None
        return f"{self.field} {value!r} is above {self.high!r}, {self.why}"


# The one table of bounds on numbers that become loop bounds, allocations or arguments
# of a numeric routine; ``bound_violations`` applies it before any derivation, and the
# parsers of ``derive_check`` consult the same entries.
BOUNDS: dict[str, Bound] = {
    b.field: b
    for b in (
        Bound(
            "aggregation.repeats",
            BoundScope.CHECK,
            1,
            MAX_CASES,
            True,
            "the most cases a bundle holds (SPEC 4.3): no example could have every repeat",
        ),
        Bound(
            "aggregation.min_samples",
            BoundScope.CHECK,
            0,
            MAX_CASES,
            True,
            "the most cases a bundle holds (SPEC 4.3): no check could reach it",
        ),
        Bound(
            "examples",
            BoundScope.CHECK,
            0,
            MAX_CASES,
            True,
            "the most cases a bundle holds (SPEC 4.3), so no bundle can show the check",
        ),
        Bound(
            "cases",
            BoundScope.CHECK,
            0,
            MAX_CASES,
            True,
            "the most cases a bundle holds (SPEC 4.3)",
        ),
        Bound(
            "bootstrap draws",
            BoundScope.INTERVAL,
            0,
            MAX_BOOTSTRAP_DRAWS,
            True,
            "the bootstrap index draws (resamples x cases, over the bundle's intervals) one "
            "audit spends at most (docs/format.md, Audit)",
        ),
        Bound(
            "interval.resamples",
            BoundScope.INTERVAL,
            1,
            MAX_RESAMPLES,
            True,
            "the most bootstrap resamples this tool re-derives (docs/format.md, Audit)",
        ),
        Bound(
            "interval.level",
            BoundScope.INTERVAL,
            0,
            MAX_LEVEL,
            False,
            "the highest level whose normal quantile is finite in double precision",
        ),
        Bound(
            "interval.seed",
            BoundScope.INTERVAL,
            0,
            MAX_SEED,
            True,
            "the largest Philox4x64-10 key (2^128 - 1)",
        ),
    )
}


@dataclass(frozen=True)
class OutOfBound:
    """A document number beyond its bound, and what it keeps from being re-derived."""

    field: str
    scope: BoundScope
    reason: str


def bound_violations(
    aggregation: Mapping[str, object] | None,
    interval: Mapping[str, object] | None,
    *,
    examples: int = 0,
    cases: int = 0,
    draws: int = 0,
) -> tuple[OutOfBound, ...]:
    """Every value of a check's inputs beyond its bound in ``BOUNDS``, before derivation.

    ``aggregation`` is the suite check's, ``interval`` the issued check's (None: no
    interval), ``examples`` the number of examples of its dataset version and ``cases``
    the number of its cases, ``draws`` the bootstrap index draws the audit would have
    spent with this check's. Absent or null values take their defaults, which are in
    bounds.
    """
    values: dict[str, object] = {"examples": examples, "cases": cases, "bootstrap draws": draws}
    if isinstance(aggregation, Mapping):
        values["aggregation.repeats"] = aggregation.get("repeats")
        values["aggregation.min_samples"] = aggregation.get("min_samples")
    if isinstance(interval, Mapping):
        values["interval.level"] = interval.get("level")
        values["interval.seed"] = interval.get("seed")
        values["interval.resamples"] = interval.get("resamples")
    found = []
    for name, value in values.items():
        bound = BOUNDS[name]
        reason = bound.violation(value)
        if reason is not None:
            found.append(OutOfBound(name, bound.scope, reason))
    return tuple(found)
