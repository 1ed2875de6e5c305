"""S3 Object Lock retention of what an upload writes.

Parsing the retention asked for (``RetentionMode``, a retain-until time in the future),
the request parameters that apply it, the early check that the bucket can hold it, and
the check after a write that the server applied it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import botocore.exceptions as bexc

from bundler.core.errors import ParameterError, UsageError
from bundler.storage.config import (
    _DENIED_CODES,
    _LOCK_MISSING_CODES,
    _UNSUPPORTED_CODES,
    _Conn,
    _error_code,
    _explain,
)
from bundler.storage.layout import S3Location


class RetentionMode(enum.Enum):
    """S3 Object Lock retention modes."""

    GOVERNANCE = "GOVERNANCE"
    COMPLIANCE = "COMPLIANCE"


@dataclass(frozen=True)
class _Retention:
    mode: RetentionMode
    until: datetime


def _retention(retain_until: datetime | None, retention_mode: str | None) -> _Retention | None:
    if retain_until is None:
        if retention_mode is not None:
            raise UsageError("a retention mode needs a retain-until time")
        return None
    if retain_until.tzinfo is None or retain_until.utcoffset() is None:
        raise UsageError(f"retain-until {retain_until.isoformat()} has no time zone")
    if retain_until <= datetime.now(retain_until.tzinfo):
        # Named as the library's parameter; the command line relabels it --retain-until.
        raise ParameterError("retain_until", f"{retain_until.isoformat()} is not in the future")
    try:
        mode = RetentionMode((retention_mode or RetentionMode.GOVERNANCE.value).upper())
    except ValueError as exc:
        raise UsageError(
            f"retention mode {retention_mode!r} is not GOVERNANCE or COMPLIANCE"
        ) from exc
    return _Retention(mode, retain_until)


def _retention_params(retention: _Retention | None) -> dict[str, Any]:
    if retention is None:
        return {}
    return {
        "ObjectLockMode": retention.mode.value,
        "ObjectLockRetainUntilDate": retention.until,
    }


def _check_lock_configuration(conn: _Conn, loc: S3Location) -> None:
    """Refuse early when the bucket cannot hold retention; without permission to
    read the configuration, the upload itself (and the HEAD after it) decides."""
    url = f"s3://{loc.bucket}"
    try:
        answer = conn.client.get_object_lock_configuration(Bucket=loc.bucket)
    except bexc.ClientError as exc:
        code, _, status = _error_code(exc)
        if code in _LOCK_MISSING_CODES or (status == 404 and code != "NoSuchBucket"):
            raise conn.fail(
                url,
                "retention",
                exc,
                detail=f"bucket {loc.bucket!r} has no Object Lock configuration; "
                "create it with Object Lock enabled to use retention",
            ) from exc
        if code in _UNSUPPORTED_CODES:
            raise conn.fail(
                url, "retention", exc, detail=f"{conn.endpoint} does not support S3 Object Lock"
            ) from exc
        if code in _DENIED_CODES or status == 403:
            return
        raise conn.fail(url, "retention check", exc) from exc
    except bexc.BotoCoreError as exc:
        raise conn.fail(url, "retention check", exc) from exc
    enabled = answer.get("ObjectLockConfiguration", {}).get("ObjectLockEnabled")
    if enabled != "Enabled":
        raise conn.fail(
            url, "retention", detail=f"Object Lock is not enabled on bucket {loc.bucket!r}"
        )


def _confirm_retention(
    conn: _Conn, loc: S3Location, head: Mapping[str, Any], retention: _Retention
) -> None:
    mode = head.get("ObjectLockMode")
    until = head.get("ObjectLockRetainUntilDate")
    if mode is None or until is None:
        # HEAD omits retention without s3:GetObjectRetention; ask directly.
        try:
            answer = conn.client.get_object_retention(Bucket=loc.bucket, Key=loc.key)
        except (bexc.ClientError, bexc.BotoCoreError) as exc:
            raise conn.fail(
                loc.url,
                "confirming retention",
                exc,
                detail="the object was stored but its retention could not be read back "
                f"({_explain(exc, conn.endpoint, loc.url)})",
            ) from exc
        mode = answer.get("Retention", {}).get("Mode")
        until = answer.get("Retention", {}).get("RetainUntilDate")
    # Servers store the time with second (or millisecond) precision.
    if (
        mode != retention.mode.value
        or until is None
        or until < retention.until - timedelta(seconds=1)
    ):
        raise conn.fail(
            loc.url,
            "confirming retention",
            detail=f"the object was stored but the server did not apply {retention.mode.value} "
            f"retention until {retention.until.isoformat()} (it reports {mode} until {until})",
        )
