"""The envelope's supersession against its report (SPEC 3.2): one rule, every reader.

The schemas tie an envelope's status to its supersession fields and spell the successor
as an identifier (SPEC 3). What a schema cannot say without the report beside it is here:
a report is not superseded by itself, nor before it was issued. The store's export, the
verifier (its claim "envelope is schema-valid") and ``render`` ask ``supersession_problem``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _instant(text: Any) -> tuple[str, str] | None:
    """An RFC 3339 UTC timestamp (schema-valid) as a comparable pair: whole seconds and
    the fraction padded, so ``...00.5Z`` sorts after ``...00Z``; None otherwise."""
    if not isinstance(text, str) or not text.endswith("Z"):
        return None
    whole, _, fraction = text[:-1].partition(".")
    return whole, fraction.ljust(9, "0")


def supersession_problem(
    report_id: Any, issued_at: Any, envelope: Mapping[str, Any]
) -> tuple[str, str] | None:
    """(field, rule) when a superseded envelope names its own report as the successor,
    or was superseded before the report's ``issued_at``; None otherwise."""
    if envelope.get("status") != "superseded":
        return None
    if envelope.get("superseded_by") == report_id:
        return "superseded_by", "names the report itself, not the report that supersedes it"
    at, issued = _instant(envelope.get("superseded_at")), _instant(issued_at)
    if at is not None and issued is not None and at < issued:
        return (
            "superseded_at",
            f"says {envelope['superseded_at']}, earlier than the report's issued_at {issued_at}",
        )
    return None
