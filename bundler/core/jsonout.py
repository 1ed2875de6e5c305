"""JSON a command writes for people and programs (stdout lines, saved records).

A path that is not UTF-8 reaches Python as text with lone surrogates (``\\udcff`` for the
byte 0xff); JSON Lines cannot carry those, and orjson refuses them. Such a string is
written as the console shows it (``textsafe.shown``: ``\\udcff`` spelled out), the one
rule for every record, so a record always serialises and names the file as the summary
does.
"""

from __future__ import annotations

from typing import Any

import orjson

from bundler.core.textsafe import shown


def dumps(value: Any, *, indent: bool = False) -> bytes:
    """``value`` as JSON bytes (no newline); lone surrogates written as shown."""
    option = orjson.OPT_INDENT_2 if indent else 0
    try:
        return orjson.dumps(value, option=option)
    except TypeError:
        return orjson.dumps(_utf8(value), option=option)


def _utf8(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return shown(value)
        return value
    if isinstance(value, dict):
        return {_utf8(k): _utf8(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_utf8(v) for v in value]
    return value
