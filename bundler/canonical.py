"""Canonical JSON (RFC 8785, JCS): strict parsing and canonical serialisation.

TEMPORARY implementation; the public API below is fixed:

- ``loads(data, *, source)``: parse UTF-8 JSON bytes strictly, rejecting everything
  SPEC section 2 rejects; raises CanonicalJSONError naming ``source`` and the rule.
- ``dumps(value)``: the JCS bytes of a parsed value; raises CanonicalJSONError.
- ``loads_canonical(data, *, source)``: parse and require ``data == dumps(value)``.
"""

from __future__ import annotations

import json
from typing import Any

import rfc8785

from bundler.errors import CanonicalJSONError

MAX_DEPTH = 64


def loads(data: bytes, *, source: str = "<input>") -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CanonicalJSONError(f"{source}: not valid JSON ({exc})") from exc


def dumps(value: Any) -> bytes:
    try:
        return bytes(rfc8785.dumps(value))
    except Exception as exc:
        raise CanonicalJSONError(f"cannot canonicalize: {exc}") from exc


def loads_canonical(data: bytes, *, source: str = "<input>") -> Any:
    value = loads(data, source=source)
    if dumps(value) != data:
        raise CanonicalJSONError(f"{source}: not stored canonical (bytes differ from JCS form)")
    return value
