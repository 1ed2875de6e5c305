"""The values an audit compares and how (SPEC 12): issued and derived values, the
outcome of a comparison, the tolerance for numbers, and the words a person reads for a
value. The audit's result (``evalbook.audit``), the group audit
(``evalbook.group_audit``) and the renderings share them; kept apart so the result
model and the group audit import the same comparison without importing each other.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from bundler.core import canonical

TOLERANCE = 1e-12
TOLERANCE_RULE = "|issued - derived| <= 1e-12 x max(1, |issued|, |derived|)"
REPORT_BODY = "report body"


class Outcome(enum.Enum):
    """How one field's comparison ended."""

    AGREE = "agree"
    DISAGREE = "disagree"
    NOT_REDERIVABLE = "not_rederivable"
    INFORMATIONAL = "informational"


class Comparison(enum.Enum):
    """How values were compared: exactly as JSON, or numbers within TOLERANCE_RULE."""

    EXACT = "exact"
    TOLERANCE = "tolerance"


@dataclass(frozen=True)
class IssuedValue:
    """A value as one document (a bag-relative path) carries it."""

    document: str
    value: Any

    def to_json(self) -> dict[str, Any]:
        return {"document": self.document, "value": self.value}


@dataclass(frozen=True)
class Derived:
    """A derived value (``value`` may itself be null: a derived null)."""

    value: Any


_FIRST_PRECISION = 3  # significant digits a person reads
_FULL_PRECISION = 17  # enough to tell any two doubles apart


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: numbers by value (1 == 1.0), booleans only equal booleans."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def numbers_agree(issued: Any, derived: Any) -> bool:
    """Two numbers (or nulls) within TOLERANCE_RULE; null agrees only with null."""
    if issued is None or derived is None:
        return issued is None and derived is None
    if not (_is_number(issued) and _is_number(derived)):
        return False
    a, b = float(issued), float(derived)
    if not (math.isfinite(a) and math.isfinite(b)):
        return a == b
    return abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))


def _num(x: float | int, p: int | None) -> str:
    """A number: in full (``p`` None), else ``p`` significant digits below 1 and ``p``
    decimals from 1 up, trailing zeros dropped."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    if p is None or not math.isfinite(x):
        return repr(x)
    if x == 0:
        return "0"
    text = f"{x:.{p}f}" if abs(x) >= 1 else f"{x:.{p}g}"
    if "e" not in text and "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _numbers_of(a: Any, b: Any) -> Iterator[tuple[float, float]]:
    """The pairs of numbers at the same place of ``a`` and ``b`` (scores, bounds)."""
    if _is_number(a) and _is_number(b):
        yield float(a), float(b)
    elif isinstance(a, dict) and isinstance(b, dict):
        for key in a.keys() & b.keys():
            yield from _numbers_of(a[key], b[key])


def _precision(pairs: Iterable[tuple[Any, Any]], short: bool) -> int | None:
    """The fewest significant digits (from 3) at which every two different numbers of
    ``pairs`` look different; None (full precision) unless ``short``."""
    if not short:
        return None
    numbers = [(x, y) for a, b in pairs for x, y in _numbers_of(a, b) if x != y]
    for p in range(_FIRST_PRECISION, _FULL_PRECISION + 1):
        if all(_num(x, p) != _num(y, p) for x, y in numbers):
            return p
    return _FULL_PRECISION


def format_value(value: Any, p: int | None = None) -> str:
    """A value as a person reads it: numbers in full precision (``p`` None) or at ``p``
    digits (``_num``), coverage and intervals in words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _num(value, p)
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"expected", "executed", "missing"}:
        return (
            f"{value['expected']} expected, {value['executed']} executed, "
            f"{value['missing']} missing"
        )
    if isinstance(value, dict) and "low" in value and "high" in value:
        low, high = format_value(value["low"], p), format_value(value["high"], p)
        extra = [str(value[k]) for k in ("method",) if value.get(k) is not None]
        if value.get("level") is not None:
            extra.append(f"level {format_value(value['level'])}")
        if value.get("seed") is not None:
            extra.append(f"seed {value['seed']}")
        if value.get("resamples") is not None:
            extra.append(f"{value['resamples']} resamples")
        return f"[{low}, {high}]" + (f" ({', '.join(extra)})" if extra else "")
    text: str = canonical.dumps(value).decode("utf-8")
    return text
