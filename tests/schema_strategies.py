"""Hypothesis strategies that generate JSON documents from this project's JSON Schemas.

Covers the keywords the schemas use (type, enum, const, pattern, minimum/maximum,
min/maxLength, properties, required, additionalProperties, items, min/maxItems,
anyOf/oneOf, allOf, $ref); ``if``/``then``/``else`` and ``not`` are left to the validator,
so a generated document is usually, not always, valid. Numbers and strings lean to the
extremes: the largest and smallest doubles, the integer limits, every invisible class of
SPEC 5, separators and quotes. Import as ``import schema_strategies`` from tests.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

MAX_SAFE = 2**53 - 1
EXTREME_NUMBERS = [0, 1, -1, 1e308, -1e308, 5e-324, -5e-324, MAX_SAFE, -MAX_SAFE, 0.5, 1e-12]
# Separators, quotes and one member of each invisible class SPEC 5 names.
TRICKY_TEXT = [
    "",
    ": ",
    "check fails: decoy",
    "a\\b",
    "'\"`$(x)",
    "<b>&amp;</b>",
    "rpt-clean\U000e0100",
    "x\ufe0f",
    "\u202eevil",
    "\u200b",
    "\x1b[2J",
    "\r\n",
    "\U000e0041",
    "\u2028",
    "\ue000",
    "\u3164",
    "\u2800",
    "\u00a0",
    "\U0010ffff",
]


def _numbers(schema: dict[str, Any], integer: bool) -> st.SearchStrategy[Any]:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))

    def ok(x: Any) -> bool:
        if integer and not isinstance(x, int):
            return False
        if "exclusiveMinimum" in schema and not x > schema["exclusiveMinimum"]:
            return False
        if "exclusiveMaximum" in schema and not x < schema["exclusiveMaximum"]:
            return False
        return (low is None or x >= low) and (high is None or x <= high)

    picks = [x for x in EXTREME_NUMBERS if ok(x)]
    if integer:
        lo = max(-MAX_SAFE, int(low) if low is not None else -MAX_SAFE)
        hi = min(MAX_SAFE, int(high) if high is not None else MAX_SAFE)
        base: st.SearchStrategy[Any] = st.integers(lo, hi)
    else:
        base = st.floats(
            min_value=low, max_value=high, allow_nan=False, allow_infinity=False
        ).filter(ok) | st.integers(-1000, 1000).filter(ok)
    return st.sampled_from(picks) | base if picks else base


def _strings(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    if "pattern" in schema:
        return st.from_regex(schema["pattern"].replace("$", r"\Z"), fullmatch=True)
    low = schema.get("minLength", 0)
    high = schema.get("maxLength")
    base = st.sampled_from(TRICKY_TEXT) | st.text(max_size=20)
    return base.filter(lambda s: len(s) >= low and (high is None or len(s) <= high))


def any_json(depth: int = 2) -> st.SearchStrategy[Any]:
    leaves = (
        st.none() | st.booleans() | st.sampled_from(EXTREME_NUMBERS) | st.sampled_from(TRICKY_TEXT)
    )
    if depth == 0:
        return leaves
    inner = any_json(depth - 1)
    keys = st.sampled_from(["expected", "executed", "missing", "low", "high", "value", "x"])
    return leaves | st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4)


def from_schema(schema: Any, root: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Documents shaped by ``schema`` (a subschema of ``root``, whose $defs it may name)."""
    if schema is True or schema == {}:
        return any_json()
    if not isinstance(schema, dict):
        return st.nothing()
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return st.deferred(lambda: from_schema(root["$defs"][name], root, depth + 1))
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([from_schema(s, root, depth) for s in schema[key]])
    if "allOf" in schema and "type" not in schema and "properties" not in schema:
        first = schema["allOf"][0]
        return from_schema(first, root, depth)
    types = schema.get("type")
    if isinstance(types, list):
        return st.one_of([from_schema({**schema, "type": t}, root, depth) for t in types])
    if types == "null":
        return st.none()
    if types == "boolean":
        return st.booleans()
    if types == "integer":
        return _numbers(schema, integer=True)
    if types == "number":
        return _numbers(schema, integer=False)
    if types == "string":
        return _strings(schema)
    if types == "array":
        items = schema.get("items", {})
        low = schema.get("minItems", 0)
        high = min(schema.get("maxItems", 4), 4 if depth < 3 else max(low, 1))
        return st.lists(from_schema(items, root, depth + 1), min_size=low, max_size=max(low, high))
    if types == "object" or "properties" in schema:
        props = schema.get("properties", {})
        required = [k for k in schema.get("required", []) if k in props]
        fixed = {k: from_schema(props[k], root, depth + 1) for k in required}
        optional = {
            k: from_schema(v, root, depth + 1) for k, v in props.items() if k not in required
        }
        return st.fixed_dictionaries(fixed, optional=optional)
    return any_json()
