"""Times given by a user: RFC 3339 text or an aware ``datetime``, checked one way for the
command line and the library (SPEC sections 7 and 7.1).

Every refusal is a ``ParameterError`` (exit 2) naming the parameter it was given as:
``exported_at`` in the library, ``--exported-at`` on the command line.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from bundler.core.errors import ParameterError

# RFC 3339 date-time with whole seconds and a zone, ASCII digits only (no week dates,
# ordinal dates, fractions or other spellings datetime.fromisoformat would also take).
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[Zz]|[+-][0-9]{2}:[0-9]{2})",
    re.ASCII,
)
# The archive's tar headers hold the export time as a ustar mtime: 11 octal digits of
# seconds since 1970-01-01T00:00:00Z (SPEC section 7).
ARCHIVE_TIME_MIN = 0
ARCHIVE_TIME_MAX = 8**11 - 1  # 2242-03-16T12:56:31Z


def parse_timestamp(value: str, param: str) -> datetime:
    """RFC 3339 with Z or an offset, whole seconds; returned in UTC.

    Raises ParameterError (exit 2) naming ``param`` for anything else; never another error.
    """
    text = value.strip()
    if not _RFC3339.fullmatch(text):
        raise ParameterError(
            param,
            "not an RFC 3339 timestamp with whole seconds and a zone (e.g. 2026-11-30T00:00:00Z)",
            value=value,
        )
    try:
        moment = datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
        return moment.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise ParameterError(param, f"not a valid time ({exc})", value=value) from exc


def aware_time(value: object, param: str) -> datetime:
    """A timezone-aware ``datetime`` or RFC 3339 text, as a UTC ``datetime``.

    Raises ParameterError naming ``param`` for a naive ``datetime`` (its zone would be a
    guess), any other type, or text that is not RFC 3339.
    """
    if isinstance(value, str):
        return parse_timestamp(value, param)
    if not isinstance(value, datetime):
        raise ParameterError(
            param, f"expected an aware datetime or RFC 3339 text, not {type(value).__name__}"
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise ParameterError(
            param,
            f"naive datetime {value.isoformat()}: give a timezone "
            "(e.g. datetime(2026, 11, 30, tzinfo=timezone.utc))",
        )
    try:
        return value.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise ParameterError(param, f"not a representable time ({exc})") from exc


def archive_time(seconds: int, param: str, *, value: str | None = None) -> datetime:
    """``seconds`` since the epoch as a UTC time, if a ustar mtime field can hold it."""
    if not ARCHIVE_TIME_MIN <= seconds <= ARCHIVE_TIME_MAX:
        raise ParameterError(
            param,
            "out of range; the archive records times from 1970-01-01T00:00:00Z to "
            f"2242-03-16T12:56:31Z ({ARCHIVE_TIME_MAX} seconds, the most a ustar mtime "
            "field holds)",
            value=value,
        )
    return datetime.fromtimestamp(seconds, UTC)


def export_time(value: object, param: str, environ: dict[str, str], now: float) -> datetime:
    """The export time: ``value`` when given, else ``SOURCE_DATE_EPOCH``, else ``now``.

    Whole seconds (the archive records no fraction; a fraction given is dropped), within
    what the archive's tar headers hold. Raises ParameterError naming ``param`` or the
    variable.
    """
    if value is not None:
        moment = aware_time(value, param)
        shown_value = value if isinstance(value, str) else moment.isoformat()
        return archive_time(int(moment.timestamp()), param, value=shown_value)
    epoch = environ.get("SOURCE_DATE_EPOCH")
    if epoch is not None:
        if not re.fullmatch(r"[0-9]{1,20}", epoch, re.ASCII):
            raise ParameterError(
                "SOURCE_DATE_EPOCH",
                "not a whole number of seconds since 1970-01-01",
                value=epoch,
            )
        return archive_time(int(epoch), "SOURCE_DATE_EPOCH", value=epoch)
    return archive_time(int(now), f"the current time (set {param})")


def time_source(value: object, param: str, environ: dict[str, str]) -> str:
    """What gave the export time, as messages that refuse it name it."""
    if value is not None:
        return param
    if environ.get("SOURCE_DATE_EPOCH") is not None:
        return "SOURCE_DATE_EPOCH"
    return f"the current time (set {param})"
