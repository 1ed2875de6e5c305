"""Reading one stored object without trusting it.

HEAD and GET with the errors mapped (absent keys are None), the body reader that refuses
more or fewer bytes than declared and checks the SHA-256 against the ``sha256``
metadata, and ``AlteredAtRest``, raised when the bytes no longer hash to what was
recorded: a failed verification (exit 1), not a failure of the service.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import botocore.exceptions as bexc

from bundler.core.digests import PREFIX as DIGEST_PREFIX
from bundler.core.errors import StorageError
from bundler.storage.config import CHUNK, _Conn, _error_code, _is_not_found, _is_precondition_failed
from bundler.storage.layout import META_SHA256, S3Location, parse_s3_url

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer
    from botocore.response import StreamingBody

_SHA256_META_RE = re.compile(r"\Asha256:[0-9a-f]{64}\Z")


# Errors that may surface while a response body is being read.
_STREAM_ERRORS: tuple[type[BaseException], ...] = (bexc.BotoCoreError, OSError)


def _head(conn: _Conn, loc: S3Location, action: str) -> dict[str, Any] | None:
    """HEAD with checksum mode; None when the object is absent."""
    try:
        answer: dict[str, Any] = dict(
            conn.client.head_object(Bucket=loc.bucket, Key=loc.key, ChecksumMode="ENABLED")
        )
    except bexc.ClientError as exc:
        if _is_not_found(exc):
            return None
        raise conn.fail(loc.url, action, exc) from exc
    except bexc.BotoCoreError as exc:
        raise conn.fail(loc.url, action, exc) from exc
    return answer


class _BodyReader(io.RawIOBase):
    """A response body as a raw stream that turns transport errors into StorageError
    and refuses more or fewer bytes than the declared size.

    With ``expected_sha256`` and ``hash_inline``, the bytes are hashed as they pass
    and the SHA-256 is checked as soon as the declared length has been read (or the
    body ends): a mismatch raises StorageError from that read. Without ``hash_inline``
    the caller hashes and calls ``check_sha256``.
    """

    def __init__(
        self,
        conn: _Conn,
        body: StreamingBody,
        *,
        url: str,
        size: int,
        expected_sha256: str | None,
        hash_inline: bool = True,
    ) -> None:
        super().__init__()
        self._conn = conn
        self._body = body
        self._url = url
        self._size = size
        self._expected = expected_sha256
        self._sha = hashlib.sha256() if hash_inline and expected_sha256 else None
        self._count = 0
        self._finished = False
        self.sha256: str | None = None

    def readable(self) -> bool:
        return True

    def _read_body(self, amount: int) -> bytes:
        try:
            return self._body.read(amount)
        except _STREAM_ERRORS as exc:
            raise self._conn.fail(self._url, "reading", exc) from exc

    def read_chunk(self, amount: int) -> bytes:
        """Up to ``amount`` bytes (fewer at the end); b"" once the object is complete."""
        if self._finished or amount <= 0:
            return b""
        data = self._read_body(amount)
        if not data:
            self._finish()
            return b""
        if self._sha is not None:
            self._sha.update(data)
        self._count += len(data)
        if self._count > self._size:
            raise self._conn.fail(
                self._url, "reading", detail=f"more bytes than the declared {self._size}"
            )
        if self._count == self._size:
            self._finish()
        return data

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read_chunk(len(view))
        view[: len(data)] = data
        return len(data)

    def readall(self) -> bytes:
        chunks = []
        while chunk := self.read_chunk(CHUNK):
            chunks.append(chunk)
        return b"".join(chunks)

    def _finish(self) -> None:
        self._finished = True
        # One more read lets botocore check the length and any response checksum.
        if self._read_body(1):
            raise self._conn.fail(
                self._url, "reading", detail=f"more bytes than the declared {self._size}"
            )
        if self._count != self._size:
            raise self._conn.fail(
                self._url,
                "reading",
                detail=f"the object ended after {self._count} of {self._size} bytes",
                kind="transient",  # the connection ended early; the object may be whole
            )
        if self._sha is not None:
            self.check_sha256(DIGEST_PREFIX + self._sha.hexdigest())

    def check_sha256(self, actual: str) -> None:
        """Record the SHA-256 of the bytes read; StorageError when it is not the
        expected one."""
        self.sha256 = actual
        if self._expected is not None:
            _check_sha256(self._conn, self._url, actual, self._expected)

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(Exception):
                self._body.close()
        super().close()


class AlteredAtRest(StorageError):
    """A stored object whose bytes no longer hash to its recorded ``sha256`` (exit 1).

    The service answered; the bytes it holds are not the ones stored, so this is a
    failed verification (SPEC sections 6 and 8), never a storage error. It derives from
    StorageError only so that readers which let storage failures through (rather than
    turning them into a verdict about the bytes read so far) let this through too.
    """

    exit_code = 1

    def __init__(self, message: str, *, url: str, recorded: str, observed: str) -> None:
        super().__init__(message)
        self.url = url
        self.key = parse_s3_url(url).key
        self.recorded = recorded
        self.observed = observed


def _check_sha256(conn: _Conn, url: str, actual: str, expected: str) -> None:
    if actual != expected:
        raise AlteredAtRest(
            conn.scrub(
                f"{url}: altered at rest: the stored bytes hash to {actual}, but the "
                f"object's sha256 metadata records {expected}"
            ),
            url=url,
            recorded=expected,
            observed=actual,
        )


def _get(
    conn: _Conn,
    loc: S3Location,
    action: str,
    *,
    checksum_mode: bool = False,
    if_match: str | None = None,
) -> dict[str, Any] | None:
    """GetObject; None when the key (not the bucket) is absent.

    ``checksum_mode`` lets botocore check the server's checksum of the response, for
    objects without ``sha256`` metadata; where the SHA-256 is checked, that would be a
    second, weaker pass over the same bytes.
    """
    params: dict[str, Any] = {"Bucket": loc.bucket, "Key": loc.key}
    if checksum_mode:
        params["ChecksumMode"] = "ENABLED"
    if if_match:
        params["IfMatch"] = if_match
    try:
        answer: dict[str, Any] = dict(conn.client.get_object(**params))
    except bexc.ClientError as exc:
        if _is_not_found(exc):
            return None
        if if_match and _is_precondition_failed(exc):
            raise conn.fail(
                loc.url, action, exc, detail="the object changed during the download"
            ) from exc
        raise conn.fail(loc.url, action, exc) from exc
    except bexc.BotoCoreError as exc:
        raise conn.fail(loc.url, action, exc) from exc
    return answer


def _head_precise(conn: _Conn, loc: S3Location, action: str) -> dict[str, Any] | None:
    """HEAD, or when that answers 403/404 (which carry no error code), a GET whose
    error says what is wrong: missing key or bucket, bad credentials, denied read.
    None when the key is absent."""
    try:
        head = _head(conn, loc, action)
    except StorageError as exc:
        cause = exc.__cause__
        if not (isinstance(cause, bexc.ClientError) and _error_code(cause)[2] == 403):
            raise
        head = None
    if head is not None:
        return head
    answer = _get(conn, loc, action)
    if answer is not None:
        answer["Body"].close()
    return answer


def recorded_sha256(metadata: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The SHA-256 an object's ``sha256`` metadata records, or None and why not.

    The one place that reads that metadata (SPEC 2, 6): only ``sha256:`` and 64
    lowercase hex digits is a recorded digest; a value missing or spelled any other way
    records nothing, so the claim that the bytes are the ones uploaded is unprovable,
    never silently dropped."""
    meta = {str(k).lower(): v for k, v in metadata.items()}
    value = meta.get(META_SHA256)
    if value is None:
        return None, "no sha256 metadata"
    if not isinstance(value, str) or _SHA256_META_RE.match(value) is None:
        return None, f"malformed sha256 metadata '{str(value)[:80]}' (not a digest)"
    return value, None


def _expected_sha256(conn: _Conn, loc: S3Location, answer: Mapping[str, Any]) -> str:
    value, why = recorded_sha256(answer.get("Metadata", {}))
    if value is None:
        raise conn.fail(
            loc.url,
            "verifying",
            detail=f"{why}; the object cannot be verified",
            kind="unverifiable",
        )
    return value


def _open_reader(
    conn: _Conn,
    loc: S3Location,
    answer: Mapping[str, Any],
    expected: str | None,
    *,
    hash_inline: bool = True,
) -> _BodyReader:
    return _BodyReader(
        conn,
        answer["Body"],
        url=loc.url,
        size=int(answer.get("ContentLength", 0)),
        expected_sha256=expected,
        hash_inline=hash_inline,
    )
