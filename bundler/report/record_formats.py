"""Rules a saved record's own fields are held to, whatever its kind (SPEC 14): its exit
code against its verdict, and the formats of its digests and times. Used by
``report.record``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any


def exit_contradiction(
    head: Mapping[str, Any], allowed: tuple[int, ...]
) -> Iterator[tuple[str, str]]:
    exit_code = head.get("exit_code")
    if exit_code is not None and exit_code not in allowed:
        yield (
            "/exit_code",
            f"says {exit_code}, but the verdict {head['verdict']} exits "
            + " or ".join(str(c) for c in allowed),
        )


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def format_contradictions(
    head: Mapping[str, Any],
    formats: tuple[tuple[tuple[str, ...], re.Pattern[str], str, str | None], ...],
) -> Iterator[tuple[str, str]]:
    for path, pattern, rule, bundle_schema in formats:
        if bundle_schema is not None and head.get("bundle_schema") != bundle_schema:
            continue
        value = _at(head, path)
        if value is not None and not (isinstance(value, str) and pattern.fullmatch(value)):
            yield "/" + "/".join(path), rule
