"""One fixity check, and ``check_batch``, the one task function every executor runs
(SPEC section 13).

``check_batch`` takes plain, picklable tasks and settings and returns plain results, so
the same function runs in this process, in local worker processes and on Dask workers.
It never writes anything: results go back to the ``fixity`` process, which alone writes
the ledger. Bytes are read once: at level ``full`` the verifier of section 5 (or 10.2)
reads the archive through a hashing reader, so re-hashing and verifying share one pass.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import random
import stat
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, BinaryIO

from bundler import storage
from bundler.core.digests import PREFIX as DIGEST_PREFIX
from bundler.core.errors import BundlerError, StorageError
from bundler.core.limits import DEFAULT_MAX_BYTES

CHUNK = 1024 * 1024
FIXITY_NAMESPACE = "evalbook-fixity-v1"
# A check that storage refused transiently (throttled, 5xx, a connection reset or cut
# short) starts again from a fresh request, up to CHECK_ATTEMPTS times in all, waiting
# RETRY_BASE_SECONDS * 2**n (with jitter) between; botocore has already retried each
# request. What the bytes say (a digest mismatch) is final and never retried.
CHECK_ATTEMPTS = 3
RETRY_BASE_SECONDS = 0.5
RETRY_CAP_SECONDS = 8.0


def now_iso() -> str:
    """The current UTC time, in the one fixed-width form the ledger compares as text."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Task:
    """One bundle to check, with what the ledger recorded for it (None: first seen)."""

    key: str
    size: int  # as listed now
    recorded_size: int | None = None
    recorded_sha256: str | None = None
    recorded_bundle_digest: str | None = None
    level: str = "full"  # full at first sight, whatever the run's level (SPEC 13.1)
    baseline: bool = False  # first sight: a pass makes what it read the baseline
    in_layout: bool = True  # s3://: the key follows the archive layout of section 6


@dataclass(frozen=True)
class Settings:
    """What every check of one run shares; plain data, so it travels to any worker."""

    source: str  # a local directory, or s3://bucket/prefix
    level: str  # "object" or "full"
    endpoint_url: str | None = None
    region: str | None = None  # as the fixity process resolved it (SPEC 13.1)
    allowed_signers: str | None = None  # the allowed_signers file's text
    allowed_signers_name: str = "allowed_signers"
    max_bytes: int = DEFAULT_MAX_BYTES

    @property
    def is_s3(self) -> bool:
        return self.source.startswith("s3://")

    @property
    def storage_config(self) -> storage.StorageConfig:
        """How every checker reaches storage: the endpoint and region the fixity process
        resolved; credentials come from each checker's own environment."""
        return storage.StorageConfig(endpoint_url=self.endpoint_url, region=self.region)

    def location(self, key: str) -> str:
        if self.is_s3:
            return f"s3://{storage.parse_s3_url(self.source).bucket}/{key}"
        return os.path.join(self.source, key)


@dataclass(frozen=True)
class Result:
    """The outcome of one check: pass, fail, missing or error, with a one-line reason.

    ``key`` and ``detail`` are as they are (a name that is not UTF-8 included); they are
    escaped once, where they are shown."""

    key: str
    outcome: str
    detail: str
    level: str
    time: str
    seconds: float
    bytes_read: int = 0
    size: int | None = None
    sha256: str | None = None  # what the bytes hash to now
    bundle_digest: str | None = None
    report_id: str | None = None
    storage_error: bool = False  # an error because storage refused (exit 5)
    cause: str | None = None  # a storage error's reason without the object's name
    baseline: bool = False  # a first sight: a pass sets the ledger's baseline


def check_batch(tasks: list[Task], settings: Settings) -> list[Result]:
    """Check each task; never raises for one bundle's trouble."""
    return [check_one(task, settings) for task in tasks]


def died(task: Task, settings: Settings, why: str) -> Result:
    """The result for a bundle whose check killed the process checking it, twice: it
    is reported, never retried for ever and never taken for a pass."""
    return Result(
        task.key,
        "error",
        f"{settings.location(task.key)}: the process checking it died ({why})",
        settings.level,
        now_iso(),
        0.0,
        size=task.size,
    )


def missing(task: Task, settings: Settings) -> Result:
    """The result for a bundle the ledger knew that the source no longer lists."""
    return Result(
        task.key,
        "missing",
        f"{settings.location(task.key)}: gone: the ledger knew it "
        f"({task.recorded_size} bytes, {task.recorded_sha256 or 'no SHA-256 recorded'})",
        settings.level,
        now_iso(),
        0.0,
    )


def held_sha256(key: str, settings: Settings) -> str:
    """The SHA-256 of the bytes ``key`` holds now, read once and nothing verified: to
    tell whether a retired bundle still holds the bytes it was retired with. OSError or
    StorageError when they cannot be read."""
    sha = hashlib.sha256()
    where = settings.location(key)
    if settings.is_s3:
        loc = storage.parse_s3_url(where)
        try:
            client = storage.make_client(settings.storage_config)
            body = client.get_object(Bucket=loc.bucket, Key=loc.key)["Body"]
            while data := body.read(CHUNK):
                sha.update(data)
        except Exception as exc:  # botocore's errors, at the storage boundary
            raise StorageError(f"{where}: reading failed: {exc}") from exc
    else:
        fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as raw:
            if not stat.S_ISREG(os.fstat(raw.fileno()).st_mode):
                raise OSError(f"{where}: not a regular file")
            while data := raw.read(CHUNK):
                sha.update(data)
    return DIGEST_PREFIX + sha.hexdigest()


class _Hashing(io.RawIOBase):
    """A raw stream that hashes and counts what passes through it."""

    def __init__(self, inner: BinaryIO) -> None:
        super().__init__()
        self._inner = inner
        self.sha = hashlib.sha256()
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self._inner.read(len(view))
        self.sha.update(data)
        self.count += len(data)
        view[: len(data)] = data
        return len(data)

    def drain(self) -> None:
        while data := self._inner.read(CHUNK):
            self.sha.update(data)
            self.count += len(data)

    @property
    def sha256(self) -> str:
        return DIGEST_PREFIX + self.sha.hexdigest()


def check_one(task: Task, settings: Settings) -> Result:
    """Check one bundle at ``task.level``, starting again when storage failed
    transiently (see CHECK_ATTEMPTS)."""
    started = time.monotonic()
    settings = replace(settings, level=task.level)
    attempt = 1
    while True:
        result, transient = _attempt(task, settings)
        if not transient or attempt >= CHECK_ATTEMPTS:
            break
        time.sleep(
            min(RETRY_CAP_SECONDS, RETRY_BASE_SECONDS * 2 ** (attempt - 1))
            * random.uniform(0.5, 1.0)
        )
        attempt += 1
    if transient:
        result = replace(result, detail=f"{result.detail} (gave up after {attempt} attempts)")
    return replace(result, seconds=round(time.monotonic() - started, 6), baseline=task.baseline)


def _attempt(task: Task, settings: Settings) -> tuple[Result, bool]:
    """One try at checking ``task``; True beside an error worth trying again."""
    base = Result(task.key, "error", "", settings.level, now_iso(), 0.0, size=task.size)
    try:
        if settings.is_s3:
            return _check_stored(task, settings, base), False
        return _check_local(task, settings, base), False
    except StorageError as exc:
        if exc.kind == "not_found":
            where = settings.location(task.key)
            return replace(
                base, outcome="missing", detail=f"{where}: gone since it was listed"
            ), False
        where = settings.location(task.key)
        cause = exc.message.replace(where, "<object>")
        return replace(base, detail=exc.message, storage_error=True, cause=cause), exc.transient
    except BundlerError as exc:
        return replace(base, detail=exc.message), False
    except OSError as exc:
        return replace(base, detail=f"{settings.location(task.key)}: {exc.strerror or exc}"), False


def _check_local(task: Task, settings: Settings, base: Result) -> Result:
    path = settings.location(task.key)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return replace(base, outcome="missing", detail=f"{path}: gone since it was listed")
        raise
    with os.fdopen(fd, "rb") as raw:
        info = os.fstat(raw.fileno())
        if not stat.S_ISREG(info.st_mode):
            return replace(base, detail=f"{path}: not a regular file")
        hashing = _Hashing(raw)
        verification = _verify(path, hashing, settings, _local_signatures(path, settings))
        hashing.drain()
    return _judge(task, settings, base, path, hashing.sha256, hashing.count, verification)


def _check_stored(task: Task, settings: Settings, base: Result) -> Result:
    url = settings.location(task.key)
    if not task.in_layout:
        # Counted, never skipped: an archive where no bundle can be (SPEC 13.1).
        return replace(
            base,
            outcome="fail",
            detail=f"{url}: its key does not name its bundle: outside the archive layout "
            "<prefix>/reports/bundles/<report_id>/<bundle-digest-hex>.tar.zst",
        )
    config = settings.storage_config
    # An object without (well-formed) sha256 metadata is judged by its bytes like any
    # other (SPEC 6): the key names its bundle, the verifier reads it, and the ledger's
    # baseline holds what it hashed to; only "the bytes recorded at upload" is unprovable.
    with storage.open_verified(
        storage.parse_s3_url(url), config=config, unrecorded_ok=True
    ) as stream:
        # A replaced object (new metadata to match) fails below, where the bytes are
        # compared with the ledger's baseline after they are read.
        from bundler.bundles.signatures import stored_sidecars

        signatures = (
            stored_sidecars(url, config=config)
            if settings.allowed_signers is not None and settings.level == "full"
            else []
        )
        hashing = _Hashing(stream)
        try:
            verification = _verify(url, hashing, settings, signatures)
            hashing.drain()
        except storage.AlteredAtRest as exc:
            # Raised at the end of the object, by the read that reached it: every
            # byte was read, and hashes to ``observed``.
            read = max(hashing.count, stream.size)
            return replace(
                base,
                outcome="fail",
                detail=exc.message,
                bytes_read=read,
                size=read,
                sha256=exc.observed,
            )
        unrecorded = stream.unrecorded
    result = _judge(task, settings, base, url, hashing.sha256, hashing.count, verification)
    named = storage.key_names(task.key)
    if (
        result.outcome == "pass"
        and verification is not None
        and named is not None
        and named != (verification.report_id, verification.bundle_digest)
    ):
        return replace(
            result,
            outcome="fail",
            detail=f"{url}: altered at rest: the key names bundle {named[1]} of {named[0]}, "
            f"but the archive holds bundle {verification.bundle_digest} of "
            f"{verification.report_id}",
        )
    if result.outcome == "pass" and unrecorded is not None:
        return replace(
            result,
            detail=f"{result.detail}; {unrecorded}: the bytes cannot be shown to be the ones "
            "recorded at upload (no_recorded_sha256)",
        )
    return result


def _verify(
    location: str,
    raw: _Hashing,
    settings: Settings,
    signatures: list[Any],
) -> Any:
    """The verification of section 5 over ``raw`` at level full; None at level object."""
    if settings.level != "full":
        return None
    from bundler.bundles.verify import read_and_verify
    from bundler.core.claims import VerifyOptions

    options = VerifyOptions(max_bytes=settings.max_bytes, sidecars=tuple(signatures))
    if settings.allowed_signers is not None:
        options = replace(options, allowed_signers=_allowed(settings))
    stream = io.BufferedReader(raw, buffer_size=CHUNK)
    result, _ = read_and_verify(location, options, stream=stream)
    # What the buffer holds but the verifier left unread is counted by draining raw.
    return result


def _judge(
    task: Task,
    settings: Settings,
    base: Result,
    where: str,
    sha256: str,
    count: int,
    verification: Any,
) -> Result:
    """The outcome from what was read: the bytes first, then the verdict."""
    seen = replace(base, bytes_read=count, size=count, sha256=sha256)
    if task.recorded_sha256 is not None and sha256 != task.recorded_sha256:
        return replace(
            seen,
            outcome="fail",
            detail=f"{where}: altered at rest: the bytes hash to {sha256}, the ledger "
            f"recorded {task.recorded_sha256}",
        )
    if task.recorded_size is not None and count != task.recorded_size:
        return replace(
            seen,
            outcome="fail",
            detail=f"{where}: altered at rest: {count} bytes, the ledger recorded "
            f"{task.recorded_size}",
        )
    if verification is None:
        return replace(seen, outcome="pass", detail="the bytes match what was recorded")
    found = replace(
        seen, bundle_digest=verification.bundle_digest, report_id=verification.report_id
    )
    if verification.verdict.value == "error":
        # The bytes were read: an archive that is truncated, corrupt or unsafe is the
        # bundle's failure, not the checker's (SPEC 13.1).
        return replace(
            found,
            outcome="fail",
            detail=_named(where, verification.error or "the archive cannot be read"),
        )
    if (
        task.recorded_bundle_digest is not None
        and verification.bundle_digest != task.recorded_bundle_digest
    ):
        return replace(
            found,
            outcome="fail",
            detail=f"{where}: holds bundle {verification.bundle_digest}, the ledger recorded "
            f"{task.recorded_bundle_digest}",
        )
    failures = verification.failures()
    if failures:
        first = failures[0]
        reason = (
            first.detail or f"{first.subject}: expected {first.expected}, observed {first.observed}"
        )
        more = f" (and {len(failures) - 1} more failed claims)" if len(failures) > 1 else ""
        return replace(found, outcome="fail", detail=f"{reason}{more}")
    counts = verification.counts()
    return replace(
        found,
        outcome="pass",
        detail=f"verified: {counts['proven']} proven, {counts['unprovable']} unprovable",
    )


def _named(where: str, message: str) -> str:
    return message if message.startswith(where) else f"{where}: {message}"


def _local_signatures(path: str, settings: Settings) -> list[Any]:
    """The signatures beside a local archive (bounded, never blocking), when checked."""
    if settings.allowed_signers is None or settings.level != "full":
        return []
    from bundler.bundles.signatures import local_sidecars

    return local_sidecars(path)


def _allowed(settings: Settings) -> Any:
    """The allowed_signers lines that anchor each bundle's signatures (SPEC 11.3)."""
    from bundler.trust import sshsig

    return tuple(
        sshsig.parse_allowed_signers(
            settings.allowed_signers or "", source=settings.allowed_signers_name
        )
    )
