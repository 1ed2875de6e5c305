"""How two JSON Schema keywords are evaluated as the schemas mean them (SPEC 3).

``pattern`` follows ECMA-262 (``_ecma_regex``: ``$`` is the end of the string, not also
before a final newline) and ``uniqueItems`` compares items by JSON equality
(``_json_key``: ``1 == 1.0``, ``true != 1``), hashed instead of compared pairwise. One
definition for both evaluators: the reference validator's keyword functions
(``schemas``) and the compiled acceptance checks (``schemagen``).
"""

from __future__ import annotations

import functools
import re
from typing import Any


def _ecma_regex(pattern: str) -> str:
    """Rewrite a JSON Schema (ECMA-262) pattern for Python's ``re``.

    Only ``$`` outside character classes differs for the patterns these schemas use;
    it becomes ``\\Z`` so that a trailing newline is not ignored.
    """
    out: list[str] = []
    in_class = False
    escaped = False
    for char in pattern:
        if escaped:
            out.append(char)
            escaped = False
        elif char == "\\":
            out.append(char)
            escaped = True
        elif in_class:
            out.append(char)
            in_class = char != "]"
        elif char == "[":
            out.append(char)
            in_class = True
        elif char == "$":
            out.append(r"\Z")
        else:
            out.append(char)
    return "".join(out)


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(_ecma_regex(pattern))


def _json_key(value: Any) -> Any:
    """A hashable key under which two JSON values collide exactly when JSON-equal."""
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        # 1 and 1.0 hash and compare equal, as JSON Schema requires.
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(_json_key(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, _json_key(item)) for key, item in value.items()))
    # Not a JSON value (a caller's tuple, say): equal only to itself.
    return ("other", id(value))
