"""Object storage for bundles and store roots (SPEC section 6).

Archives live at ``<prefix>/reports/bundles/<report_id>/<bundle-digest-hex>.tar.zst``
in any S3-compatible service. Three promises hold for every operation here:

- Nothing is overwritten. Writes are conditional (``If-None-Match: *``); when the key is
  taken, the stored object is compared with ours and either reported as already
  archived (same bundle) or refused.
- Corrupted bytes are refused in transit. A single PUT carries the archive's SHA-256 as
  an S3 checksum, which the server recomputes. A multipart upload carries a checksum
  per part and a full-object CRC64NVME (when ``awscrt`` is installed) or CRC32, which
  the server recomputes over the assembled object; the archive's SHA-256 travels as
  metadata. A HEAD with checksum mode afterwards confirms size, metadata and checksum.
- Nothing downloaded is trusted without re-hashing. Downloads and verified streams
  recompute the SHA-256 and compare it with the ``sha256`` metadata; a download only
  appears at its destination once it matches.

Every failure is one ``StorageError`` (exit 5) line naming the ``s3://`` URL and what
happened; credentials never appear in a message. The one exception is an object whose
bytes no longer hash to its recorded ``sha256``: it was altered at rest, which is a
failed verification (``AlteredAtRest``, exit 1), not a failure of the service.

Signatures of a stored bundle are sidecar objects beside its archive: ``<key>.sig`` for
the first one stored, ``<key>.sig.<hex>`` (the SHA-256 of the signature's bytes) for
each further one, so several signers never contend for one key (docs/format.md).
"""

from __future__ import annotations

import base64
import collections
import contextlib
import dataclasses
import enum
import errno
import functools
import hashlib
import io
import itertools
import os
import re
import secrets
import stat
import threading
import zlib
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

import botocore.exceptions as bexc
import botocore.loaders
import botocore.session
from botocore.config import Config

from bundler.archive.prefetch import ThreadedSink
from bundler.core.digests import PREFIX as DIGEST_PREFIX
from bundler.core.digests import parse_digest
from bundler.core.errors import InputError, OutputError, StorageError, StoreError, UsageError

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer
    from botocore.response import StreamingBody
    from mypy_boto3_s3 import S3Client

MiB = 1024 * 1024
MIN_PART_SIZE = 5 * MiB  # S3's minimum for every part but the last
MAX_PARTS = 10_000
MAX_SIDECAR_BYTES = 1 * MiB
MAX_SIGNATURES = 64  # signature objects read beside one archive
CHUNK = 8 * MiB
# Downloads above this size fetch ranges of it in parallel (as boto3's transfer
# manager does), pinned to one object version with If-Match.
DOWNLOAD_RANGE = 8 * MiB
ARCHIVE_SUFFIX = ".tar.zst"
SIDECAR_SUFFIX = ".sig"
CONTENT_TYPE = "application/zstd"

META_BUNDLE_DIGEST = "bundle-digest"
META_REPORT_ID = "report-id"
META_REPORT_DIGEST = "report-digest"
META_SHA256 = "sha256"

_IDENTIFIER_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
_BUCKET_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{1,254}\Z")
_SHA256_META_RE = re.compile(r"\Asha256:[0-9a-f]{64}\Z")
_COUNTERSIGNATURE_RE = re.compile(r"\.sig\.([0-9a-f]{64})\Z")

# Codes S3-compatible services use for each failure class.
_NOT_FOUND_CODES = frozenset({"404", "NoSuchKey", "NotFound"})
_CREDENTIAL_CODES = frozenset(
    {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidToken",
        "ExpiredToken",
        "TokenRefreshRequired",
        "AuthorizationHeaderMalformed",
        "InvalidClientTokenId",
        "InvalidSecurity",
    }
)
_DENIED_CODES = frozenset({"AccessDenied", "403", "Forbidden", "AllAccessDisabled"})
_CORRUPT_CODES = frozenset(
    {
        "BadDigest",
        "InvalidDigest",
        "XAmzContentSHA256Mismatch",
        "InvalidChecksum",
        "ChecksumMismatch",
        "IncompleteBody",
    }
)
_PRECONDITION_CODES = frozenset({"PreconditionFailed", "412"})
_LOCK_MISSING_CODES = frozenset({"ObjectLockConfigurationNotFoundError", "InvalidBucketState"})
_UNSUPPORTED_CODES = frozenset({"NotImplemented", "MethodNotAllowed", "501", "405"})


# --------------------------------------------------------------------------- locations


@dataclass(frozen=True)
class S3Location:
    """A bucket and a key (or key prefix) inside it."""

    bucket: str
    key: str

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def child(self, relpath: str) -> S3Location:
        """The location of ``relpath`` under this location taken as a prefix."""
        prefix = _normalise_prefix(self.key)
        return S3Location(self.bucket, f"{prefix}/{relpath}" if prefix else relpath)


def parse_s3_url(url: str) -> S3Location:
    """Split ``s3://bucket/key`` into bucket and key (the key may be empty).

    Raises UsageError when the URL does not start with ``s3://`` or names no valid
    bucket.
    """
    if not isinstance(url, str) or not url.startswith("s3://"):
        raise UsageError(f"{url!r}: not an s3:// URL (want s3://bucket/prefix)")
    bucket, _, key = url[len("s3://") :].partition("/")
    if not bucket:
        raise UsageError(f"{url!r}: no bucket name (want s3://bucket/prefix)")
    if _BUCKET_RE.match(bucket) is None:
        raise UsageError(f"{url!r}: invalid bucket name {bucket!r}")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in key):
        raise UsageError(f"{url!r}: control character in the key")
    return S3Location(bucket, key)


def _normalise_prefix(prefix: str) -> str:
    return prefix.strip("/")


def bundle_key(prefix: str, report_id: str, bundle_digest: str) -> str:
    """``<prefix>/reports/bundles/<report_id>/<bundle-digest-hex>.tar.zst``.

    Leading and trailing slashes of ``prefix`` are dropped; an empty prefix gives
    ``reports/bundles/...``. Raises UsageError for an invalid report id and DigestError
    for a malformed bundle digest.
    """
    _check_report_id(report_id)
    hex_digest = parse_digest(bundle_digest, source="bundle digest")
    relpath = f"reports/bundles/{report_id}/{hex_digest}{ARCHIVE_SUFFIX}"
    norm = _normalise_prefix(prefix)
    return f"{norm}/{relpath}" if norm else relpath


def _check_report_id(report_id: str) -> None:
    if not isinstance(report_id, str) or _IDENTIFIER_RE.match(report_id) is None:
        raise UsageError(
            f"invalid report id {report_id!r} "
            "(identifiers match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$)"
        )


_KEY_LAYOUT_RE = re.compile(r"(?:\A|/)reports/bundles/([^/]+)/([0-9a-f]{64})\.tar\.zst\Z")


def key_names(key: str) -> tuple[str, str] | None:
    """The (report id, bundle digest) an archive key names by the layout, or None for
    a key outside the layout."""
    match = _KEY_LAYOUT_RE.search(key)
    if match is None:
        return None
    return match.group(1), DIGEST_PREFIX + match.group(2)


def _bundles_prefix(prefix: str, report_id: str | None) -> str:
    norm = _normalise_prefix(prefix)
    base = f"{norm}/reports/bundles/" if norm else "reports/bundles/"
    return f"{base}{report_id}/" if report_id is not None else base


def check_archive_prefix(dest: S3Location) -> None:
    """Refuse an upload destination that is a key rather than an archive prefix.

    ``upload`` builds the key itself; a destination ending in ``.tar.zst`` or holding
    ``reports/bundles/`` would store the bundle where ``list`` of the real prefix never
    finds it. Raises UsageError naming the prefix to use.
    """
    norm = _normalise_prefix(dest.key)
    padded = f"/{norm}/"
    layout = "/reports/bundles/"
    at = padded.find(layout)
    if at >= 0:
        why = "lies inside the archive layout (<prefix>/reports/bundles/...)"
        prefix = padded[1:at]
    elif norm.endswith(ARCHIVE_SUFFIX):
        why = f"ends in {ARCHIVE_SUFFIX}"
        prefix = norm.rpartition("/")[0]
    else:
        return
    use = f"s3://{dest.bucket}/{prefix}" if prefix else f"s3://{dest.bucket}"
    raise UsageError(
        f"{dest.url}: upload takes an archive prefix, not a key, and this {why}; "
        f"use {use} (the key <prefix>/reports/bundles/<report_id>/<digest>{ARCHIVE_SUFFIX} "
        "is chosen from the bundle)"
    )


# --------------------------------------------------------------------------- client


@dataclass(frozen=True)
class StorageConfig:
    """How to reach object storage.

    ``endpoint_url`` wins over AWS_ENDPOINT_URL_S3, which wins over AWS_ENDPOINT_URL;
    without any, botocore's own resolution applies (profile settings, then AWS).
    Objects of ``multipart_threshold`` bytes or more are sent in ``part_size`` parts
    (raised when needed to stay within S3's 10,000 parts), ``max_concurrency`` at a
    time. Timeouts and ``max_attempts`` bound how long an unreachable endpoint takes
    to fail (about 15 s with the defaults).
    """

    endpoint_url: str | None = None
    profile: str | None = None
    multipart_threshold: int = 64 * MiB
    part_size: int = 8 * MiB
    page_size: int = 1000
    max_concurrency: int = 10
    connect_timeout: float = 4.0
    read_timeout: float = 60.0
    max_attempts: int = 3

    def __post_init__(self) -> None:
        if self.part_size < MIN_PART_SIZE:
            raise UsageError(f"part size {self.part_size} is below S3's minimum of {MIN_PART_SIZE}")
        if self.multipart_threshold < 1:
            raise UsageError(f"multipart threshold {self.multipart_threshold} must be positive")
        if not 1 <= self.page_size <= 1000:
            raise UsageError(f"page size {self.page_size} must be between 1 and 1000")
        if not 1 <= self.max_concurrency <= 64:
            raise UsageError(f"max concurrency {self.max_concurrency} must be between 1 and 64")
        if self.max_attempts < 1:
            raise UsageError(f"max attempts {self.max_attempts} must be at least 1")
        if self.endpoint_url is not None and not self.endpoint_url.startswith(
            ("http://", "https://")
        ):
            raise UsageError(
                f"endpoint URL {self.endpoint_url!r} must start with http:// or https://"
            )


@dataclass(frozen=True)
class _Conn:
    """A client plus what messages need: the endpoint and the strings never to print."""

    client: S3Client
    endpoint: str
    hidden: tuple[str, ...]

    def scrub(self, text: str) -> str:
        for secret in self.hidden:
            if secret:
                text = text.replace(secret, "***")
        return " ".join(text.split())

    def fail(
        self, url: str, action: str, exc: BaseException | None = None, detail: str = ""
    ) -> StorageError:
        """A one-line StorageError for ``action`` on ``url``; chain it with ``from exc``."""
        reason = detail or (_explain(exc, self.endpoint, url) if exc is not None else "failed")
        return StorageError(self.scrub(f"{url}: {action} failed: {reason}"))


def _configured_endpoint(config: StorageConfig) -> str | None:
    if config.endpoint_url:
        return config.endpoint_url
    if os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() == "true":
        return None
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def _is_aws_endpoint(url: str) -> bool:
    host = url.split("://", 1)[-1].split("/", 1)[0].split("@")[-1].split(":")[0].lower()
    return host.endswith((".amazonaws.com", ".amazonaws.com.cn"))


def _display_endpoint(url: str) -> str:
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0].split("@")[-1]
    return f"{scheme}://{host}"


def _botocore_config(config: StorageConfig, *, path_style: bool) -> Config:
    kwargs: dict[str, Any] = {
        "connect_timeout": config.connect_timeout,
        "read_timeout": config.read_timeout,
        "retries": {"mode": "standard", "max_attempts": config.max_attempts},
        "max_pool_connections": max(10, config.max_concurrency + 2),
        "tcp_keepalive": True,
        # Response checksums are validated where asked for (ChecksumMode), not on
        # every download, whose SHA-256 is checked anyway.
        "response_checksum_validation": "when_required",
    }
    if path_style:
        # Custom endpoints (an IP address, localhost, an internal name) seldom resolve
        # bucket subdomains; path-style addressing works everywhere.
        kwargs["s3"] = {"addressing_style": "path"}
    return Config(**kwargs)


@functools.cache
def _shared_loader() -> botocore.loaders.Loader:
    # Loading the S3 service model dominates building a client; one loader keeps it
    # parsed once per process while every new client still gets a fresh session.
    return botocore.loaders.create_loader()


_CONN_CACHE: collections.OrderedDict[tuple[StorageConfig, str], _Conn] = collections.OrderedDict()
_CONN_CACHE_SIZE = 8
_CONN_LOCK = threading.Lock()


def _connect(config: StorageConfig) -> _Conn:
    """A client for ``config``, reused while the AWS_* environment is unchanged.

    Building a client costs about 0.1 s of CPU; reusing it (and its connection pool)
    keeps repeated calls cheap. Any change to an AWS_* variable (credentials, profile,
    endpoint) yields a new client; botocore refreshes expiring credentials itself.
    """
    fingerprint = hashlib.sha256(
        repr(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_"))).encode()
    ).hexdigest()
    key = (config, fingerprint)
    with _CONN_LOCK:
        conn = _CONN_CACHE.get(key)
        if conn is not None:
            _CONN_CACHE.move_to_end(key)
            return conn
    conn = _new_conn(config)
    with _CONN_LOCK:
        _CONN_CACHE[key] = conn
        while len(_CONN_CACHE) > _CONN_CACHE_SIZE:
            _CONN_CACHE.popitem(last=False)
    return conn


def _new_conn(config: StorageConfig) -> _Conn:
    session = botocore.session.Session(profile=config.profile)
    session.register_component("data_loader", _shared_loader())
    endpoint = _configured_endpoint(config)
    try:
        client = cast(
            "S3Client",
            session.create_client(
                "s3",
                endpoint_url=endpoint,
                config=_botocore_config(config, path_style=endpoint is not None),
            ),
        )
        if endpoint is None and not _is_aws_endpoint(client.meta.endpoint_url):
            # The profile names a custom endpoint: same reasoning as above.
            client = cast(
                "S3Client",
                session.create_client("s3", config=_botocore_config(config, path_style=True)),
            )
    except bexc.ProfileNotFound as exc:
        raise UsageError(
            f"AWS profile {config.profile or os.environ.get('AWS_PROFILE')!r} not found"
        ) from exc
    except bexc.BotoCoreError as exc:
        raise StorageError(f"cannot set up the S3 client: {type(exc).__name__}") from exc
    except ValueError as exc:
        raise UsageError(f"invalid S3 endpoint {endpoint!r}") from exc
    hidden: list[str] = []
    try:
        credentials = session.get_credentials()
    except bexc.BotoCoreError:
        credentials = None
    if credentials is not None:
        hidden += [credentials.secret_key or "", credentials.token or ""]
    return _Conn(client, _display_endpoint(client.meta.endpoint_url), tuple(hidden))


def make_client(config: StorageConfig) -> S3Client:
    """An S3 client from the standard AWS chain with the endpoint, timeouts and retries
    of ``config`` (path-style addressing for non-AWS endpoints).

    Raises UsageError for an unknown profile or invalid endpoint, StorageError when
    botocore cannot build a client.
    """
    return _connect(config).client


def _error_code(exc: bexc.ClientError) -> tuple[str, str, int]:
    error = exc.response.get("Error", {})
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return str(error.get("Code", "")), str(error.get("Message", "")), int(status or 0)


def _explain(exc: BaseException, endpoint: str, url: str) -> str:
    """Why a botocore call failed, in words; never includes request headers."""
    if isinstance(exc, bexc.ClientError):
        code, message, status = _error_code(exc)
        bucket = url[len("s3://") :].split("/", 1)[0]
        if code == "NoSuchBucket":
            return f"bucket {bucket!r} does not exist at {endpoint}"
        if code in _CREDENTIAL_CODES:
            return f"credentials rejected by {endpoint} ({code})"
        if code in _DENIED_CODES or status == 403:
            return f"access denied by {endpoint} ({code or status})"
        if code in _CORRUPT_CODES:
            return (
                f"the server refused the bytes as corrupted in transit ({code}); "
                "nothing was stored (did the file change during the upload?)"
            )
        if code in _PRECONDITION_CODES or status == 412:
            return f"precondition failed ({code or status})"
        if code in _NOT_FOUND_CODES or status == 404:
            return "no such object"
        if code == "NoSuchUpload":
            return "the multipart upload no longer exists on the server (NoSuchUpload)"
        if code in _UNSUPPORTED_CODES:
            return f"not supported by {endpoint} ({code})"
        text = f"{code} {message}".strip() or f"HTTP {status}"
        return f"the server answered {text}"
    if isinstance(exc, bexc.NoCredentialsError):
        return "no AWS credentials found (environment, shared credentials file or profile)"
    if isinstance(exc, bexc.PartialCredentialsError):
        return f"incomplete AWS credentials ({exc})"
    if isinstance(exc, bexc.FlexibleChecksumError):
        return "the bytes received do not match the checksum the server sent"
    if isinstance(exc, bexc.ReadTimeoutError):
        return f"{endpoint} stopped answering (read timeout)"
    if isinstance(exc, bexc.ConnectTimeoutError):
        return f"cannot connect to object storage at {endpoint} (timed out)"
    if isinstance(exc, bexc.EndpointConnectionError | bexc.ConnectionClosedError):
        return f"cannot reach object storage at {endpoint} ({type(exc).__name__})"
    if isinstance(exc, bexc.SSLError):
        return f"TLS handshake with {endpoint} failed"
    if isinstance(exc, bexc.ConnectionError):
        return f"connection to {endpoint} failed ({type(exc).__name__})"
    if isinstance(exc, bexc.IncompleteReadError | bexc.ResponseStreamingError):
        return f"the connection to {endpoint} broke while reading ({type(exc).__name__})"
    if isinstance(exc, bexc.BotoCoreError):
        return f"{type(exc).__name__}: {exc}"
    if isinstance(exc, OSError):
        return f"{type(exc).__name__}: {exc.strerror or exc}"
    return type(exc).__name__


def _is_not_found(exc: bexc.ClientError) -> bool:
    code, _, status = _error_code(exc)
    return code in _NOT_FOUND_CODES or (status == 404 and code != "NoSuchBucket")


def _is_precondition_failed(exc: bexc.ClientError) -> bool:
    code, _, status = _error_code(exc)
    return code in _PRECONDITION_CODES or status == 412


# Errors that may surface while a response body is being read.
_STREAM_ERRORS: tuple[type[BaseException], ...] = (bexc.BotoCoreError, OSError)


# --------------------------------------------------------------------------- checksums


@dataclass(frozen=True)
class _Crc:
    """The full-object checksum algorithm of multipart uploads.

    ``compute(data, previous)`` continues a CRC like ``zlib.crc32``; ``poly`` is the
    reflected polynomial, which ``combine`` needs.
    """

    name: str
    width: int  # in bytes
    poly: int
    compute: Callable[[bytes | memoryview, int], int]

    @property
    def param(self) -> str:
        return f"Checksum{self.name}"

    def encode(self, value: int) -> str:
        return base64.b64encode(value.to_bytes(self.width, "big")).decode("ascii")

    def combine(self, crc1: int, crc2: int, len2: int) -> int:
        """The CRC of A || B from crc(A), crc(B) and len(B), so the full-object CRC
        comes from the part CRCs instead of a second pass over the bytes."""
        bits = self.width * 8
        return _crc_multiply(_crc_x8n(len2, self.poly, bits), crc1, self.poly, bits) ^ crc2


# CRC combination as zlib does it (crc32_combine): in GF(2)[x] modulo the CRC
# polynomial, appending n bytes multiplies by x^(8n). Values are reflected, with
# x^0 in the top bit. Works for CRC-32 and CRC-64/NVME alike (both reflected, with
# all-ones initial value and final xor).


def _crc_multiply(a: int, b: int, poly: int, bits: int) -> int:
    if a == 0:
        return 0
    mask = 1 << (bits - 1)
    product = 0
    while True:
        if a & mask:
            product ^= b
            if not a & (mask - 1):
                return product
        mask >>= 1
        b = (b >> 1) ^ poly if b & 1 else b >> 1


@functools.lru_cache(maxsize=64)
def _crc_x8n(n: int, poly: int, bits: int) -> int:
    """x^(8n) modulo the polynomial; cached, since every part but the last has one size."""
    squares = [1 << (bits - 2)]  # x^(2^k) for k = 0, 1, ...
    while len(squares) < n.bit_length() + 4:
        squares.append(_crc_multiply(squares[-1], squares[-1], poly, bits))
    result = 1 << (bits - 1)  # x^0
    k = 3  # n bytes are 8n = n * 2^3 bits
    while n:
        if n & 1:
            result = _crc_multiply(squares[k], result, poly, bits)
        n >>= 1
        k += 1
    return result


def _full_object_crc() -> _Crc:
    """CRC64NVME when awscrt provides it, else CRC32 from zlib.

    S3 (and SeaweedFS, MinIO) accept both as FULL_OBJECT checksums of multipart
    uploads; awscrt is what botocore itself uses for CRC64NVME.
    """
    try:
        from awscrt import checksums  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return _Crc("CRC32", 4, 0xEDB88320, zlib.crc32)
    crc64: Callable[[bytes | memoryview, int], int] = checksums.crc64nvme
    return _Crc("CRC64NVME", 8, 0x9A6C9329AC4BC9B5, crc64)


def _b64_hex(hex_digest: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_digest)).decode("ascii")


@dataclass(frozen=True)
class _Hashed:
    size: int
    sha256_hex: str
    crc: _Crc
    full_crc: int
    part_size: int
    part_crcs: tuple[int, ...]

    @property
    def sha256(self) -> str:
        return DIGEST_PREFIX + self.sha256_hex


def _part_size_for(size: int, configured: int) -> int:
    needed = -(-size // MAX_PARTS)
    if needed <= configured:
        return configured
    return -(-needed // MiB) * MiB


def _hash_file(path: Path, *, part_size: int | None, crc: _Crc) -> _Hashed:
    """One pass over the file: SHA-256, full-object CRC and, when ``part_size`` is
    given, the CRC of each part. Raises InputError when the file cannot be read or
    changes size while it is read."""
    sha = hashlib.sha256()
    full = 0
    parts: list[int] = []
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    total = 0
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise InputError(f"{path}: not a regular file")
            expected = st.st_size
            step = part_size or expected or 1
            while True:
                part_crc = 0
                part_len = 0
                while part_len < step:
                    n = fh.readinto(view[: min(CHUNK, step - part_len)])
                    if not n:
                        break
                    chunk = view[:n]
                    sha.update(chunk)
                    part_crc = crc.compute(chunk, part_crc)
                    part_len += n
                if part_len:
                    parts.append(part_crc)
                    full = crc.combine(full, part_crc, part_len)
                    total += part_len
                if part_len < step:
                    break
    except FileNotFoundError as exc:
        raise InputError(f"{path}: no such file") from exc
    except IsADirectoryError as exc:
        raise InputError(f"{path}: not a regular file") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
    if total != expected:
        raise InputError(f"{path}: file changed size while being read ({expected} -> {total})")
    return _Hashed(
        size=total,
        sha256_hex=sha.hexdigest(),
        crc=crc,
        full_crc=full,
        part_size=part_size or total,
        part_crcs=tuple(parts) if part_size else (),
    )


# --------------------------------------------------------------------------- upload


class UploadStatus(enum.Enum):
    """What ``upload_bundle`` did with an archive (or its signature sidecar)."""

    UPLOADED = "uploaded"
    ALREADY_ARCHIVED = "already_archived"


class RetentionMode(enum.Enum):
    """S3 Object Lock retention modes."""

    GOVERNANCE = "GOVERNANCE"
    COMPLIANCE = "COMPLIANCE"


@dataclass(frozen=True)
class UploadResult:
    """The outcome of an upload, as confirmed by a HEAD of the stored object.

    ``identical`` is true when the stored archive has our SHA-256 and size. An
    ``already_archived`` bundle may be stored as different archive bytes (another zstd
    level of the same bundle shares the key, SPEC section 6); then ``identical`` is
    false and ``stored_sha256`` names the stored archive.
    """

    status: UploadStatus
    bucket: str
    key: str
    size: int
    sha256: str
    bundle_digest: str
    report_id: str
    report_digest: str
    identical: bool
    stored_size: int
    stored_sha256: str | None
    checksum_algorithm: str | None
    checksum: str | None
    multipart: bool  # whether this call sent a multipart upload
    part_count: int
    retention_mode: str | None = None
    retain_until: datetime | None = None
    signatures: tuple[SignatureUpload, ...] = ()

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    @property
    def sidecar_key(self) -> str | None:
        """The key of the first signature this call stored or found, if any."""
        return self.signatures[0].key if self.signatures else None

    @property
    def sidecar_status(self) -> UploadStatus | None:
        return self.signatures[0].status if self.signatures else None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping (enums as their strings, times in RFC 3339)."""
        return {
            "status": self.status.value,
            "url": self.url,
            "bucket": self.bucket,
            "key": self.key,
            "size": self.size,
            "sha256": self.sha256,
            "bundle_digest": self.bundle_digest,
            "report_id": self.report_id,
            "report_digest": self.report_digest,
            "identical": self.identical,
            "stored_size": self.stored_size,
            "stored_sha256": self.stored_sha256,
            "checksum_algorithm": self.checksum_algorithm,
            "checksum": self.checksum,
            "multipart": self.multipart,
            "part_count": self.part_count,
            "retention_mode": self.retention_mode,
            "retain_until": self.retain_until.isoformat() if self.retain_until else None,
            "sidecar_key": self.sidecar_key,
            "sidecar_status": self.sidecar_status.value if self.sidecar_status else None,
            "signatures": [sig.as_dict() for sig in self.signatures],
        }


@dataclass(frozen=True)
class SignatureUpload:
    """Where one signature of a stored bundle is, and whether this call wrote it."""

    bucket: str
    key: str
    status: UploadStatus

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def as_dict(self) -> dict[str, Any]:
        return {"url": self.url, "key": self.key, "status": self.status.value}


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
        raise UsageError(f"retain-until {retain_until.isoformat()} is not in the future")
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


def _stored_checksum(
    head: Mapping[str, Any], hashed: _Hashed, multipart: bool
) -> tuple[str, str | None]:
    if multipart:
        return hashed.crc.name, head.get(hashed.crc.param)
    return "SHA256", head.get("ChecksumSHA256")


def _any_checksum(head: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The strongest checksum a HEAD reports, as (algorithm, base64 value)."""
    for algorithm in ("SHA256", "CRC64NVME", "CRC32C", "CRC32"):
        value = head.get(f"Checksum{algorithm}")
        if value is not None:
            return algorithm, str(value)
    return None, None


def _expected_checksum(hashed: _Hashed, multipart: bool) -> str:
    return hashed.crc.encode(hashed.full_crc) if multipart else _b64_hex(hashed.sha256_hex)


def _confirm_stored(
    conn: _Conn,
    loc: S3Location,
    hashed: _Hashed,
    metadata: Mapping[str, str],
    *,
    multipart: bool,
    retention: _Retention | None,
) -> tuple[str, str, dict[str, Any]]:
    """HEAD the object we just wrote and check size, metadata, checksum, retention."""
    head = _head(conn, loc, "confirming the upload")
    if head is None:
        raise conn.fail(loc.url, "confirming the upload", detail="object not found after upload")
    stored = "the object was stored but "
    if int(head.get("ContentLength", -1)) != hashed.size:
        raise conn.fail(
            loc.url,
            "confirming the upload",
            detail=f"{stored}its size is {head.get('ContentLength')}, not {hashed.size}",
        )
    got_meta = {k.lower(): v for k, v in head.get("Metadata", {}).items()}
    for name, value in metadata.items():
        if got_meta.get(name) != value:
            raise conn.fail(
                loc.url,
                "confirming the upload",
                detail=f"{stored}its {name!r} metadata is {got_meta.get(name)!r}, not {value!r}",
            )
    algorithm, got = _stored_checksum(head, hashed, multipart)
    want = _expected_checksum(hashed, multipart)
    if got is None:
        raise conn.fail(
            loc.url,
            "confirming the upload",
            detail=f"{stored}the server did not confirm a {algorithm} checksum "
            "(it may not support S3 checksums); check it with a download",
        )
    if got != want:
        raise conn.fail(
            loc.url,
            "confirming the upload",
            detail=f"{stored}its {algorithm} checksum is {got}, not {want}",
        )
    if multipart and head.get("ChecksumType", "FULL_OBJECT") != "FULL_OBJECT":
        raise conn.fail(
            loc.url,
            "confirming the upload",
            detail=f"{stored}its checksum type is {head.get('ChecksumType')}, not FULL_OBJECT",
        )
    if retention is not None:
        _confirm_retention(conn, loc, head, retention)
    return algorithm, got, head


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


def _put_single(
    conn: _Conn,
    loc: S3Location,
    path: Path,
    hashed: _Hashed,
    metadata: Mapping[str, str],
    retention: _Retention | None,
) -> bool:
    """Single conditional PUT with a SHA-256 checksum. False when the key is taken."""
    try:
        with open(path, "rb") as body:
            conn.client.put_object(
                Bucket=loc.bucket,
                Key=loc.key,
                Body=body,
                ContentLength=hashed.size,
                ContentType=CONTENT_TYPE,
                ChecksumAlgorithm="SHA256",
                ChecksumSHA256=_b64_hex(hashed.sha256_hex),
                IfNoneMatch="*",
                Metadata=dict(metadata),
                **_retention_params(retention),
            )
    except bexc.ClientError as exc:
        if _is_precondition_failed(exc):
            return False
        raise conn.fail(loc.url, "upload", exc) from exc
    except bexc.BotoCoreError as exc:
        raise conn.fail(loc.url, "upload", exc) from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
    return True


def _put_multipart(
    conn: _Conn,
    loc: S3Location,
    path: Path,
    hashed: _Hashed,
    metadata: Mapping[str, str],
    retention: _Retention | None,
    *,
    concurrency: int,
    progress: Callable[[int], None] | None,
) -> bool:
    """Multipart upload with per-part checksums and a full-object checksum, completed
    conditionally. False when the key is taken. The upload is aborted on any failure."""
    crc = hashed.crc
    params: dict[str, Any] = {
        "Bucket": loc.bucket,
        "Key": loc.key,
        "ContentType": CONTENT_TYPE,
        "ChecksumAlgorithm": crc.name,
        "ChecksumType": "FULL_OBJECT",
        "Metadata": dict(metadata),
        **_retention_params(retention),
    }
    try:
        created = conn.client.create_multipart_upload(**params)
    except (bexc.ClientError, bexc.BotoCoreError) as exc:
        raise conn.fail(loc.url, "starting the multipart upload", exc) from exc
    upload_id = created["UploadId"]
    try:
        parts = _send_parts(conn, loc, path, hashed, upload_id, concurrency, progress)
        try:
            complete: dict[str, Any] = {
                "Bucket": loc.bucket,
                "Key": loc.key,
                "UploadId": upload_id,
                "MultipartUpload": {"Parts": parts},
                "ChecksumType": "FULL_OBJECT",
                "MpuObjectSize": hashed.size,
                "IfNoneMatch": "*",
                crc.param: crc.encode(hashed.full_crc),
            }
            conn.client.complete_multipart_upload(**complete)
        except bexc.ClientError as exc:
            if _is_precondition_failed(exc):
                _abort(conn, loc, upload_id)
                return False
            raise conn.fail(loc.url, "completing the multipart upload", exc) from exc
        except bexc.BotoCoreError as exc:
            raise conn.fail(loc.url, "completing the multipart upload", exc) from exc
    except BaseException as exc:
        note = _abort(conn, loc, upload_id)
        if note and isinstance(exc, StorageError):
            raise StorageError(f"{exc.message}; {note}") from exc.__cause__
        raise
    return True


def _send_parts(
    conn: _Conn,
    loc: S3Location,
    path: Path,
    hashed: _Hashed,
    upload_id: str,
    concurrency: int,
    progress: Callable[[int], None] | None,
) -> list[dict[str, Any]]:
    crc = hashed.crc
    count = len(hashed.part_crcs)

    def send(fd: int, number: int) -> tuple[int, dict[str, Any], int]:
        offset = (number - 1) * hashed.part_size
        length = min(hashed.part_size, hashed.size - offset)
        data = os.pread(fd, length, offset)
        if len(data) != length:
            raise InputError(f"{path}: file shrank during upload")
        want = crc.encode(hashed.part_crcs[number - 1])
        params: dict[str, Any] = {
            "Bucket": loc.bucket,
            "Key": loc.key,
            "UploadId": upload_id,
            "PartNumber": number,
            "Body": data,
            "ContentLength": length,
            "ChecksumAlgorithm": crc.name,
            crc.param: want,
        }
        try:
            answer: dict[str, Any] = dict(conn.client.upload_part(**params))
        except (bexc.ClientError, bexc.BotoCoreError) as exc:
            raise conn.fail(loc.url, f"uploading part {number} of {count}", exc) from exc
        echoed = answer.get(crc.param)
        if echoed is not None and echoed != want:
            raise conn.fail(
                loc.url,
                f"uploading part {number} of {count}",
                detail=f"the server recorded {crc.name} {echoed}, not {want}",
            )
        return number, {"PartNumber": number, "ETag": answer["ETag"], crc.param: want}, length

    done: dict[int, dict[str, Any]] = {}
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
    try:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="s3-part") as pool:
            # Submitting lazily keeps at most `concurrency` parts in memory.
            pending: set[Future[tuple[int, dict[str, Any], int]]] = set()
            numbers = iter(range(1, count + 1))
            try:
                while True:
                    while len(pending) < concurrency:
                        number = next(numbers, None)
                        if number is None:
                            break
                        pending.add(pool.submit(send, fd, number))
                    if not pending:
                        break
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in finished:
                        number, part, length = future.result()
                        done[number] = part
                        if progress is not None:
                            progress(length)
            finally:
                for future in pending:
                    future.cancel()
    finally:
        os.close(fd)
    return [done[n] for n in sorted(done)]


def _abort(conn: _Conn, loc: S3Location, upload_id: str) -> str:
    """Abort a multipart upload; return a note when that failed too."""
    try:
        conn.client.abort_multipart_upload(Bucket=loc.bucket, Key=loc.key, UploadId=upload_id)
    except (bexc.ClientError, bexc.BotoCoreError) as exc:
        return (
            f"the incomplete multipart upload {upload_id} could not be aborted "
            f"({_explain(exc, conn.endpoint, loc.url)}); a bucket lifecycle rule or a later "
            "abort removes it"
        )
    return ""


def _compare_existing(
    conn: _Conn,
    loc: S3Location,
    hashed: _Hashed,
    metadata: Mapping[str, str],
    *,
    what: str,
) -> tuple[bool, dict[str, Any]]:
    """Decide whether the object already at ``loc`` is ours; raise when it is not.

    Returns (identical bytes, HEAD answer). A bundle archive is "ours" when its
    metadata names the same bundle, report and report digest; a sidecar only when
    its bytes are identical.
    """
    head = _head(conn, loc, "checking the existing object")
    if head is None:
        raise conn.fail(
            loc.url,
            "upload",
            detail="the key is taken but the object cannot be read back; refusing to overwrite",
        )
    got = {k.lower(): v for k, v in head.get("Metadata", {}).items()}
    identical = (
        got.get(META_SHA256) == hashed.sha256 and int(head.get("ContentLength", -1)) == hashed.size
    )
    if identical:
        # The metadata says "same bytes"; the stored checksum must not contradict it.
        for algorithm, param, want in (
            ("SHA256", "ChecksumSHA256", _b64_hex(hashed.sha256_hex)),
            (hashed.crc.name, hashed.crc.param, hashed.crc.encode(hashed.full_crc)),
        ):
            stored = head.get(param)
            if (
                stored is not None
                and head.get("ChecksumType", "FULL_OBJECT") == "FULL_OBJECT"
                and stored != want
            ):
                raise conn.fail(
                    loc.url,
                    "upload",
                    detail=f"{what} exists with our sha256 metadata but a different {algorithm} "
                    "checksum (altered?); refusing to overwrite",
                )
    same_bundle = all(got.get(name) == metadata[name] for name in metadata if name != META_SHA256)
    if not same_bundle:
        raise conn.fail(
            loc.url,
            "upload",
            detail=f"{what} exists with different content (stored sha256 "
            f"{got.get(META_SHA256)!r}, ours {hashed.sha256}); refusing to overwrite",
        )
    return identical, head


def upload_bundle(
    path: Path,
    dest: S3Location,
    *,
    bundle_digest: str,
    report_id: str,
    report_digest: str,
    config: StorageConfig,
    retain_until: datetime | None = None,
    retention_mode: str | None = None,
    sidecars: Sequence[Path] = (),
    progress: Callable[[int], None] | None = None,
) -> UploadResult:
    """Store the archive at ``path`` under the prefix ``dest`` without ever overwriting.

    The key is ``bundle_key(dest.key, report_id, bundle_digest)``. The archive is hashed
    once (SHA-256, plus a CRC for multipart uploads), then written conditionally with
    checksums the server recomputes, then confirmed with a HEAD. When the key is taken
    by the same bundle the result is ``already_archived`` and nothing is written; any
    other object there is refused. Each of ``sidecars`` (signature files) is stored
    beside the archive by ``add_signature``'s rules: a signature already stored there is
    already archived, a new one is added, none replaces another.
    ``retain_until`` applies S3 Object Lock retention (``retention_mode`` GOVERNANCE,
    the default, or COMPLIANCE) to what this call writes; an object already archived
    keeps the retention it has, which the result reports. When the sidecar fails
    after the archive was stored, the error says so and a repeated call completes it.
    ``progress`` receives the number of bytes each completed request stored.

    Raises UsageError or DigestError for bad arguments, InputError when a file cannot be
    read, StorageError (exit 5) for everything the storage side refuses or cannot do.
    """
    _check_report_id(report_id)
    parse_digest(bundle_digest, source="bundle digest")
    parse_digest(report_digest, source="report digest")
    retention = _retention(retain_until, retention_mode)
    loc = S3Location(dest.bucket, bundle_key(dest.key, report_id, bundle_digest))
    crc = _full_object_crc()

    try:
        size = path.stat().st_size
    except FileNotFoundError as exc:
        raise InputError(f"{path}: no such file") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
    multipart = size >= config.multipart_threshold
    part_size = _part_size_for(size, config.part_size) if multipart else None
    hashed = _hash_file(path, part_size=part_size, crc=crc)
    if hashed.size != size:
        raise InputError(f"{path}: file changed size while being read ({size} -> {hashed.size})")
    signatures = [_read_sidecar(path) for path in sidecars]

    conn = _connect(config)
    if retention is not None:
        _check_lock_configuration(conn, loc)
    metadata = {
        META_BUNDLE_DIGEST: bundle_digest,
        META_REPORT_ID: report_id,
        META_REPORT_DIGEST: report_digest,
        META_SHA256: hashed.sha256,
    }

    # A HEAD first spares sending the archive when it is already there; without read
    # permission (403) the conditional write alone decides.
    existing: dict[str, Any] | None
    try:
        existing = _head(conn, loc, "checking for an existing object")
    except StorageError as exc:
        cause = exc.__cause__
        if not (isinstance(cause, bexc.ClientError) and _error_code(cause)[2] == 403):
            raise
        existing = None

    stored: tuple[str, str, dict[str, Any]] | None = None
    if existing is None:
        if multipart:
            written = _put_multipart(
                conn,
                loc,
                path,
                hashed,
                metadata,
                retention,
                concurrency=config.max_concurrency,
                progress=progress,
            )
        else:
            written = _put_single(conn, loc, path, hashed, metadata, retention)
            if written and progress is not None:
                progress(hashed.size)
        if written:
            stored = _confirm_stored(
                conn, loc, hashed, metadata, multipart=multipart, retention=retention
            )

    algorithm: str | None
    checksum: str | None
    if stored is not None:
        algorithm, checksum, head = stored
        status = UploadStatus.UPLOADED
        identical = True
    else:
        identical, head = _compare_existing(conn, loc, hashed, metadata, what="the bundle")
        status = UploadStatus.ALREADY_ARCHIVED
        algorithm, checksum = _any_checksum(head)
        multipart = False

    stored_signatures: list[SignatureUpload] = []
    for data in signatures:
        try:
            stored_signatures.append(
                _store_signature(conn, loc, data, bundle_digest=bundle_digest, retention=retention)
            )
        except StorageError as exc:
            raise StorageError(
                f"{exc.message} (the archive itself is stored at {loc.url})"
            ) from exc.__cause__

    got = {k.lower(): v for k, v in head.get("Metadata", {}).items()}
    until = head.get("ObjectLockRetainUntilDate")
    return UploadResult(
        status=status,
        bucket=loc.bucket,
        key=loc.key,
        size=hashed.size,
        sha256=hashed.sha256,
        bundle_digest=bundle_digest,
        report_id=report_id,
        report_digest=report_digest,
        identical=identical,
        stored_size=int(head.get("ContentLength", -1)),
        stored_sha256=got.get(META_SHA256),
        checksum_algorithm=algorithm,
        checksum=checksum,
        multipart=multipart,
        part_count=len(hashed.part_crcs) if multipart else 0,
        retention_mode=head.get("ObjectLockMode"),
        retain_until=until if isinstance(until, datetime) else None,
        signatures=tuple(stored_signatures),
    )


def _read_sidecar(path: Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise InputError(f"{path}: not a regular file")
            data = fh.read(MAX_SIDECAR_BYTES + 1)
    except FileNotFoundError as exc:
        raise InputError(f"{path}: no such file") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
    if len(data) > MAX_SIDECAR_BYTES:
        raise InputError(f"{path}: larger than {MAX_SIDECAR_BYTES} bytes (not a signature?)")
    return data


def _put_sidecar(
    conn: _Conn,
    loc: S3Location,
    data: bytes,
    *,
    bundle_digest: str,
    retention: _Retention | None,
) -> UploadStatus | None:
    """Write ``data`` at ``loc`` only if the key is free. None when another object
    (not these bytes) holds the key; nothing is ever replaced."""
    sha_hex = hashlib.sha256(data).hexdigest()
    crc = _full_object_crc()
    hashed = _Hashed(len(data), sha_hex, crc, crc.compute(data, 0), len(data), ())
    metadata = {META_BUNDLE_DIGEST: bundle_digest, META_SHA256: hashed.sha256}
    try:
        conn.client.put_object(
            Bucket=loc.bucket,
            Key=loc.key,
            Body=data,
            ContentType="application/octet-stream",
            ChecksumAlgorithm="SHA256",
            ChecksumSHA256=_b64_hex(sha_hex),
            IfNoneMatch="*",
            Metadata=metadata,
            **_retention_params(retention),
        )
    except bexc.ClientError as exc:
        if not _is_precondition_failed(exc):
            raise conn.fail(loc.url, "storing the signature", exc) from exc
        head = _head(conn, loc, "checking the existing signature")
        if head is None:
            raise conn.fail(
                loc.url,
                "storing the signature",
                detail="the key is taken but the object cannot be read back; refusing to overwrite",
            ) from exc
        got = {k.lower(): v for k, v in head.get("Metadata", {}).items()}
        if got.get(META_SHA256) == hashed.sha256 and int(head.get("ContentLength", -1)) == len(
            data
        ):
            return UploadStatus.ALREADY_ARCHIVED
        return None
    except bexc.BotoCoreError as exc:
        raise conn.fail(loc.url, "storing the signature", exc) from exc
    _confirm_stored(conn, loc, hashed, metadata, multipart=False, retention=retention)
    return UploadStatus.UPLOADED


def signature_keys(archive_key: str, data: bytes) -> tuple[str, str]:
    """The two keys a signature may take beside ``archive_key``, in the order tried:
    ``<key>.sig`` (the first signature stored for the bundle), then
    ``<key>.sig.<hex>`` with the SHA-256 of the signature's own bytes."""
    first = archive_key + SIDECAR_SUFFIX
    return first, f"{first}.{hashlib.sha256(data).hexdigest()}"


def _store_signature(
    conn: _Conn,
    archive: S3Location,
    data: bytes,
    *,
    bundle_digest: str,
    retention: _Retention | None,
) -> SignatureUpload:
    """Store one signature beside ``archive`` (see ``signature_keys``).

    A second signer finds ``<key>.sig`` taken by other bytes and takes the key named by
    its own bytes, so countersignatures never contend for a key and none is replaced.
    """
    for key in signature_keys(archive.key, data):
        loc = S3Location(archive.bucket, key)
        status = _put_sidecar(conn, loc, data, bundle_digest=bundle_digest, retention=retention)
        if status is not None:
            return SignatureUpload(archive.bucket, key, status)
    raise conn.fail(
        loc.url,
        "storing the signature",
        detail="another object holds the key named by this signature's own SHA-256 "
        "(altered?); refusing to overwrite",
    )


def add_signature(
    archive: S3Location,
    signature: bytes,
    *,
    config: StorageConfig,
    retain_until: datetime | None = None,
    retention_mode: str | None = None,
) -> SignatureUpload:
    """Add a signature (a countersignature, when the bundle has one) beside a stored
    archive, never replacing any signature there.

    The archive must exist and carry ``bundle-digest`` metadata, which the signature
    object records too. Checking that the signature is one of this bundle's head is
    the caller's job (``sign`` verifies the bundle and signs its head). Raises
    InputError for a signature over 1 MiB, StorageError when the archive is absent or
    the signature cannot be stored.
    """
    if len(signature) > MAX_SIDECAR_BYTES:
        raise InputError(f"signature larger than {MAX_SIDECAR_BYTES} bytes (not a signature?)")
    retention = _retention(retain_until, retention_mode)
    conn = _connect(config)
    head = _head_precise(conn, archive, "adding a signature")
    if head is None:
        raise conn.fail(archive.url, "adding a signature", detail="no such object")
    meta = {k.lower(): v for k, v in head.get("Metadata", {}).items()}
    bundle_digest = meta.get(META_BUNDLE_DIGEST)
    if not isinstance(bundle_digest, str):
        raise conn.fail(
            archive.url,
            "adding a signature",
            detail="the object has no bundle-digest metadata; it was not stored by upload",
        )
    return _store_signature(
        conn, archive, signature, bundle_digest=bundle_digest, retention=retention
    )


@dataclass(frozen=True)
class StoredSignature:
    """One signature object found beside a stored archive.

    ``sha256`` is the SHA-256 of ``data``; ``recorded_sha256`` what the object's
    ``sha256`` metadata (or, for ``<key>.sig.<hex>``, its key) says it should be.
    Whether the signature verifies is for the caller to check against the bundle head.
    """

    bucket: str
    key: str
    data: bytes
    sha256: str
    recorded_sha256: str | None

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    @property
    def suffix(self) -> str:
        """What follows the archive's name: ``.sig`` or ``.sig.<hex>``."""
        return SIDECAR_SUFFIX + self.key.rpartition(SIDECAR_SUFFIX)[2]

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")

    @property
    def problem(self) -> str | None:
        """Why these are not the bytes stored (altered at rest), else None."""
        if self.recorded_sha256 is None or self.recorded_sha256 == self.sha256:
            return None
        return (
            f"altered at rest: its bytes hash to {self.sha256}, but it was stored as "
            f"{self.recorded_sha256}"
        )


def _signature_object_keys(conn: _Conn, archive: S3Location) -> list[str]:
    """The signature keys beside ``archive``, ``<key>.sig`` first. Without permission
    to list, only ``<key>.sig`` is tried."""
    first = archive.key + SIDECAR_SUFFIX
    pattern = re.compile(re.escape(first) + r"(\.[0-9a-f]{64})?\Z")
    paginator = conn.client.get_paginator("list_objects_v2")
    keys: list[str] = []
    try:
        for page in paginator.paginate(Bucket=archive.bucket, Prefix=first):
            for item in page.get("Contents", []):
                key = str(item.get("Key", ""))
                if pattern.match(key) is None:
                    continue
                if len(keys) >= MAX_SIGNATURES:
                    raise InputError(
                        f"{archive.url}: more than {MAX_SIGNATURES} signatures stored beside it"
                    )
                keys.append(key)
    except bexc.ClientError as exc:
        code, _, status = _error_code(exc)
        if code in _DENIED_CODES or status == 403:
            return [first]
        raise conn.fail(archive.url, "listing its signatures", exc) from exc
    except bexc.BotoCoreError as exc:
        raise conn.fail(archive.url, "listing its signatures", exc) from exc
    return sorted(keys, key=lambda k: (k != first, k))


def _read_signature_object(conn: _Conn, loc: S3Location) -> StoredSignature | None:
    answer = _get(conn, loc, "reading the signature")
    if answer is None:
        return None
    size = int(answer.get("ContentLength", 0))
    with _open_reader(conn, loc, answer, None) as reader:
        if size > MAX_SIDECAR_BYTES:
            raise InputError(f"{loc.url}: larger than {MAX_SIDECAR_BYTES} bytes (not a signature?)")
        data = reader.readall()
    meta = {k.lower(): v for k, v in answer.get("Metadata", {}).items()}
    named = _COUNTERSIGNATURE_RE.search(loc.key)
    # A countersignature's key names its bytes; rewriting the object can change its
    # metadata, not its name.
    recorded = DIGEST_PREFIX + named.group(1) if named else meta.get(META_SHA256)
    actual = DIGEST_PREFIX + hashlib.sha256(data).hexdigest()
    return StoredSignature(loc.bucket, loc.key, data, actual, recorded)


def _read_signatures(conn: _Conn, archive: S3Location) -> list[StoredSignature]:
    found = []
    for key in _signature_object_keys(conn, archive):
        signature = _read_signature_object(conn, S3Location(archive.bucket, key))
        if signature is not None:
            found.append(signature)
    return found


def stored_signatures(archive: S3Location | str, *, config: StorageConfig) -> list[StoredSignature]:
    """Every signature stored beside the archive ``archive`` (an ``s3://`` URL or a
    location), ``<key>.sig`` first, then the countersignatures in key order.

    Each is read whole (at most 1 MiB, at most 64 of them) and checked against its
    recorded SHA-256; a mismatch is reported in ``problem``, not raised, so that one
    altered signature does not hide the others. An empty list when there is none.
    Raises UsageError for a malformed URL, InputError for an oversized signature or too
    many, StorageError when the service fails.
    """
    loc = parse_s3_url(archive) if isinstance(archive, str) else archive
    return _read_signatures(_connect(config), loc)


def read_signature(url: str, *, config: StorageConfig) -> StoredSignature:
    """The one signature object at ``url`` (for ``--signature s3://...``).

    Raises InputError when it is absent or oversized, AlteredAtRest (exit 1) when its
    bytes do not match its recorded SHA-256, StorageError when the service fails.
    """
    loc = parse_s3_url(url)
    conn = _connect(config)
    signature = _read_signature_object(conn, loc)
    if signature is None:
        raise InputError(f"{loc.url}: no such signature object")
    if signature.problem is not None:
        raise _altered(signature)
    return signature


def _altered(signature: StoredSignature) -> AlteredAtRest:
    return AlteredAtRest(
        f"{signature.url}: {signature.problem}",
        url=signature.url,
        recorded=str(signature.recorded_sha256),
        observed=signature.sha256,
    )


# --------------------------------------------------------------------------- list


@dataclass(frozen=True)
class ListedBundle:
    """One archive found under a prefix."""

    report_id: str
    bundle_digest: str
    key: str
    size: int
    last_modified: datetime
    signature_keys: tuple[str, ...] = ()  # stored beside it; not checked here

    @property
    def signed(self) -> bool:
        return bool(self.signature_keys)

    def as_dict(self) -> dict[str, Any]:
        return {
            "report_id": self.report_id,
            "bundle_digest": self.bundle_digest,
            "key": self.key,
            "size": self.size,
            "last_modified": self.last_modified.isoformat(),
            "signed": self.signed,
            "signatures": len(self.signature_keys),
            "signature_keys": list(self.signature_keys),
        }


def list_bundles(
    prefix_loc: S3Location, *, report_id: str | None = None, config: StorageConfig
) -> Iterator[ListedBundle]:
    """The archives under ``prefix_loc`` (optionally of one report), in key order.

    Lists ``config.page_size`` keys per request, lazily; keys that do not follow the
    bundle layout are skipped, and each archive's signature objects (``<key>.sig`` and
    ``<key>.sig.<hex>``, which sort right after it) are counted into its
    ``signature_keys`` without being read. Raises UsageError
    for an invalid report id at once, StorageError while iterating when listing fails.
    """
    if report_id is not None:
        _check_report_id(report_id)
    prefix = _bundles_prefix(prefix_loc.key, report_id)
    layout = re.compile(
        re.escape(_bundles_prefix(prefix_loc.key, None))
        + r"([^/]+)/([0-9a-f]{64})"
        + re.escape(ARCHIVE_SUFFIX)
        + r"\Z"
    )
    conn = _connect(config)
    return _iter_bundles(conn, prefix_loc.bucket, prefix, layout, config.page_size)


def _iter_bundles(
    conn: _Conn, bucket: str, prefix: str, layout: re.Pattern[str], page_size: int
) -> Iterator[ListedBundle]:
    url = f"s3://{bucket}/{prefix}"
    paginator = conn.client.get_paginator("list_objects_v2")
    pages = paginator.paginate(
        Bucket=bucket, Prefix=prefix, PaginationConfig={"PageSize": page_size}
    )
    # Keys arrive in byte order, so an archive's signatures follow it directly: hold
    # each archive back until a key that is not one of its signatures.
    pending: ListedBundle | None = None
    signatures: list[str] = []
    try:
        for page in pages:
            for item in page.get("Contents", []):
                key = item.get("Key", "")
                if pending is not None and key.startswith(pending.key + SIDECAR_SUFFIX):
                    rest = key[len(pending.key) :]
                    if rest == SIDECAR_SUFFIX or _COUNTERSIGNATURE_RE.fullmatch(rest):
                        signatures.append(key)
                        continue
                match = layout.match(key)
                if match is None or _IDENTIFIER_RE.match(match.group(1)) is None:
                    continue
                if pending is not None:
                    yield dataclasses.replace(pending, signature_keys=tuple(signatures))
                pending, signatures = (
                    ListedBundle(
                        report_id=match.group(1),
                        bundle_digest=DIGEST_PREFIX + match.group(2),
                        key=key,
                        size=int(item.get("Size", 0)),
                        last_modified=item["LastModified"],
                    ),
                    [],
                )
    except (bexc.ClientError, bexc.BotoCoreError) as exc:
        raise conn.fail(url, "listing", exc) from exc
    if pending is not None:
        yield dataclasses.replace(pending, signature_keys=tuple(signatures))


# --------------------------------------------------------------------------- reading


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


class VerifiedStream(io.BufferedReader):
    """A buffered stream of an object that checks its SHA-256 at the end.

    Reading to EOF (or exactly ``size`` bytes) raises StorageError when the bytes do
    not hash to the ``sha256`` metadata; a consumer that stops earlier has verified
    nothing, so consumers must read to EOF (``drain()`` does that).
    """

    def __init__(
        self, raw: _BodyReader, *, url: str, size: int, metadata: Mapping[str, str]
    ) -> None:
        super().__init__(raw, buffer_size=1 * MiB)
        self._raw_reader = raw
        self.url = url
        self.size = size
        self.metadata = dict(metadata)
        self.expected_sha256 = self.metadata.get(META_SHA256)

    @property
    def verified(self) -> bool:
        """True once every byte has been read and matched the metadata."""
        return (
            self._raw_reader.sha256 is not None and self._raw_reader.sha256 == self.expected_sha256
        )

    def drain(self) -> None:
        """Read what is left, so the check at EOF runs."""
        while self.read(CHUNK):
            pass


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


def _expected_sha256(conn: _Conn, loc: S3Location, answer: Mapping[str, Any]) -> str:
    meta = {k.lower(): v for k, v in answer.get("Metadata", {}).items()}
    value = meta.get(META_SHA256)
    if value is None:
        raise conn.fail(
            loc.url, "verifying", detail="no sha256 metadata; the object cannot be verified"
        )
    if _SHA256_META_RE.match(value) is None:
        raise conn.fail(loc.url, "verifying", detail=f"malformed sha256 metadata {value!r}")
    return str(value)


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


@contextlib.contextmanager
def open_verified(src: S3Location, *, config: StorageConfig) -> Iterator[VerifiedStream]:
    """Open an object for streaming; the stream raises StorageError at EOF when its
    bytes do not hash to the ``sha256`` metadata.

    For ``verify s3://...`` and ``inspect s3://...``, which read without a temporary
    file: consumers must read to EOF and treat a StorageError from the last read as the
    whole object being untrustworthy. Raises StorageError at once when the object is
    absent or carries no (valid) ``sha256`` metadata.
    """
    conn = _connect(config)
    answer = _get(conn, src, "opening")
    if answer is None:
        raise conn.fail(src.url, "opening", detail="no such object")
    try:
        expected = _expected_sha256(conn, src, answer)
    except StorageError:
        answer["Body"].close()
        raise
    raw = _open_reader(conn, src, answer, expected)
    stream = VerifiedStream(
        raw,
        url=src.url,
        size=int(answer.get("ContentLength", 0)),
        metadata=answer.get("Metadata", {}),
    )
    with stream:
        yield stream


# --------------------------------------------------------------------------- download


@dataclass(frozen=True)
class DownloadResult:
    """A download that matched its ``sha256`` metadata and is now at ``path``."""

    bucket: str
    key: str
    path: Path
    size: int
    sha256: str
    bundle_digest: str | None
    report_id: str | None
    report_digest: str | None
    signature_paths: tuple[Path, ...] = ()

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    @property
    def sidecar_path(self) -> Path | None:
        """Where the first signature (``<key>.sig``, or the first found) went."""
        return self.signature_paths[0] if self.signature_paths else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "path": str(self.path),
            "size": self.size,
            "sha256": self.sha256,
            "bundle_digest": self.bundle_digest,
            "report_id": self.report_id,
            "report_digest": self.report_digest,
            "sidecar_path": str(self.sidecar_path) if self.sidecar_path else None,
            "signature_paths": [str(path) for path in self.signature_paths],
        }


def download_path(src: S3Location, path: str) -> Path:
    """Where ``download SRC PATH`` writes, as ``aws s3 cp`` users expect.

    A PATH that is an existing directory, or ends in ``/``, receives the object under
    its own name (the last segment of the key); a missing ``dir/`` is created (its
    parent must exist). Any other PATH is the file to create. ``-`` (stdout) is the
    caller's to handle. Raises UsageError when the key has no usable last segment,
    OutputError when ``dir/`` cannot be created.
    """
    if not (path.endswith("/") or os.path.isdir(path)):
        return Path(path)
    name = src.key.rpartition("/")[2]
    if name in ("", ".", ".."):
        raise UsageError(f"{src.url}: the key has no name to save under in {path}")
    directory = Path(path)
    if not directory.is_dir():
        try:
            directory.mkdir(0o777)
        except FileNotFoundError as exc:
            raise OutputError(f"{directory.parent}: destination directory does not exist") from exc
        except FileExistsError as exc:
            raise OutputError(f"{path}: exists and is not a directory") from exc
        except OSError as exc:
            raise OutputError(f"{directory}: cannot create ({exc.strerror})") from exc
    return directory / name


def _check_destination(dest: Path) -> None:
    if os.path.lexists(dest):
        raise OutputError(f"{dest}: already exists (never overwritten)")
    parent = dest.parent
    if not parent.is_dir():
        raise OutputError(f"{parent}: destination directory does not exist")


def _create_temp(dest: Path) -> tuple[int, Path]:
    for _ in range(16):
        tmp = dest.parent / f".{dest.name}.{secrets.token_hex(6)}.part"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue
        except OSError as exc:
            raise OutputError(
                f"{dest.parent}: cannot create a temporary file ({exc.strerror})"
            ) from exc
    raise OutputError(f"{dest.parent}: cannot create a temporary file")


def _write_temp(
    chunks: Generator[bytes, None, None], dest: Path, progress: Callable[[int], None] | None
) -> tuple[Path, str]:
    """Write ``chunks`` to a temporary file beside ``dest``, hashing them, and fsync it.

    Returns the file and its SHA-256; the file is removed when anything fails. Hashing
    and writing run in a second thread so that they overlap fetching the next chunk
    (hashlib and file writes release the GIL).
    """
    fd, tmp = _create_temp(dest)
    try:
        with contextlib.closing(chunks), os.fdopen(fd, "wb") as out:
            # One chunk in flight, as many bytes as one range: memory stays bounded.
            sink = ThreadedSink(out, depth=1)
            try:
                for chunk in chunks:
                    sink.write(chunk)
                    if progress is not None:
                        progress(len(chunk))
            except BaseException:
                sink.close(raise_error=False)
                raise
            sink.close()
            out.flush()
            os.fsync(out.fileno())
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise OutputError(f"{dest}: cannot write ({exc.strerror})") from exc
        raise
    return tmp, DIGEST_PREFIX + sink.sha256.hexdigest()


def _reader_chunks(reader: _BodyReader) -> Generator[bytes, None, None]:
    with reader:
        while chunk := reader.read_chunk(CHUNK):
            yield chunk


def _fetch_range(conn: _Conn, loc: S3Location, start: int, length: int, etag: str) -> bytes:
    """One byte range of the object version named by ``etag``."""
    try:
        answer: dict[str, Any] = dict(
            conn.client.get_object(
                Bucket=loc.bucket,
                Key=loc.key,
                Range=f"bytes={start}-{start + length - 1}",
                IfMatch=etag,
            )
        )
    except bexc.ClientError as exc:
        if _is_precondition_failed(exc):
            raise conn.fail(
                loc.url, "download", exc, detail="the object changed during the download"
            ) from exc
        raise conn.fail(loc.url, "download", exc) from exc
    except bexc.BotoCoreError as exc:
        raise conn.fail(loc.url, "download", exc) from exc
    if not str(answer.get("ContentRange", "")).startswith(f"bytes {start}-"):
        answer["Body"].close()
        raise conn.fail(
            loc.url, "download", detail=f"the server did not honour the range at byte {start}"
        )
    with _open_reader(conn, loc, answer, None) as reader:
        data = reader.readall()
    if len(data) != length:
        raise conn.fail(
            loc.url,
            "download",
            detail=f"the range at byte {start} returned {len(data)} bytes, not {length}",
        )
    return data


def _range_chunks(
    conn: _Conn, loc: S3Location, size: int, etag: str, part: int, concurrency: int
) -> Generator[bytes, None, None]:
    """The object in order, fetched as ranges ``concurrency`` at a time (bounded
    memory: at most ``concurrency + 1`` ranges are held)."""
    starts = iter(range(0, size, part))
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="s3-range") as pool:
        window: collections.deque[Future[bytes]] = collections.deque()
        try:
            for start in itertools.islice(starts, concurrency):
                window.append(
                    pool.submit(_fetch_range, conn, loc, start, min(part, size - start), etag)
                )
            while window:
                data = window.popleft().result()
                following = next(starts, None)
                if following is not None:
                    length = min(part, size - following)
                    window.append(pool.submit(_fetch_range, conn, loc, following, length, etag))
                yield data
        finally:
            for future in window:
                future.cancel()


def _place(tmp: Path, dest: Path) -> None:
    """Give the finished temporary file its name without replacing anything there."""
    try:
        os.link(tmp, dest)
    except FileExistsError as exc:
        raise OutputError(f"{dest}: appeared during the download (never overwritten)") from exc
    except OSError as exc:
        if exc.errno not in (
            errno.EPERM,
            errno.ENOTSUP,
            errno.EOPNOTSUPP,
            errno.EXDEV,
            errno.EMLINK,
        ):
            raise OutputError(f"{dest}: cannot create ({exc.strerror})") from exc
        # File systems without hard links: a plain rename, after a last check.
        if os.path.lexists(dest):
            raise OutputError(f"{dest}: appeared during the download (never overwritten)") from exc
        os.rename(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _object_chunks(
    conn: _Conn, src: S3Location, head: Mapping[str, Any], config: StorageConfig
) -> Generator[bytes, None, None]:
    """The object's bytes in order: parallel ranges of the version ``head`` saw for
    objects over 8 MiB, else one GET pinned to it."""
    size = int(head.get("ContentLength", 0))
    etag = str(head.get("ETag", ""))
    if size > DOWNLOAD_RANGE and etag:
        return _range_chunks(conn, src, size, etag, DOWNLOAD_RANGE, config.max_concurrency)
    answer = _get(conn, src, "download", if_match=etag or None)
    if answer is None:
        raise conn.fail(src.url, "download", detail="the object vanished")
    return _reader_chunks(_open_reader(conn, src, answer, None))


def _one_chunk(data: bytes) -> Generator[bytes, None, None]:
    yield data


def _download_result(
    src: S3Location, path: Path | None, head: Mapping[str, Any], sha256: str
) -> DownloadResult:
    meta = {k.lower(): v for k, v in head.get("Metadata", {}).items()}
    return DownloadResult(
        bucket=src.bucket,
        key=src.key,
        path=path if path is not None else Path("-"),
        size=int(head.get("ContentLength", 0)),
        sha256=sha256,
        bundle_digest=meta.get(META_BUNDLE_DIGEST),
        report_id=meta.get(META_REPORT_ID),
        report_digest=meta.get(META_REPORT_DIGEST),
    )


def download_bundle(
    src: S3Location,
    dest: Path,
    *,
    config: StorageConfig,
    progress: Callable[[int], None] | None = None,
    on_size: Callable[[int], None] | None = None,
) -> DownloadResult:
    """Download ``src`` to ``dest`` only if its bytes hash to its ``sha256`` metadata.

    The object streams into a temporary file beside ``dest`` while being hashed (in
    order; objects over 8 MiB arrive as parallel ranges of the version a first HEAD
    saw); the file is fsynced and linked into place only after the SHA-256 matches,
    so ``dest`` never holds unverified bytes and an existing file is never replaced.
    Every signature stored beside it (``<key>.sig``, ``<key>.sig.<hex>``) comes along
    as ``<dest>.sig``, ``<dest>.sig.<hex>``, checked the same way; all arrive or none.

    Raises OutputError (exit 3) when ``dest`` or a signature's destination exists or
    the parent directory is missing, AlteredAtRest (exit 1) when the bytes of the
    object or of a signature do not match what was recorded, StorageError (exit 5)
    when the object is absent, lacks ``sha256`` metadata, or cannot be fetched.
    """
    if not src.key or src.key.endswith("/"):
        raise UsageError(f"{src.url}: names a prefix, not an object")
    _check_destination(dest)
    conn = _connect(config)

    head = _head_precise(conn, src, "download")
    if head is None:
        raise conn.fail(src.url, "download", detail="no such object")
    if on_size is not None:
        on_size(int(head.get("ContentLength", 0)))
    expected = _expected_sha256(conn, src, head)
    signatures = _read_signatures(conn, src)
    for signature in signatures:
        if signature.problem is not None:
            raise _altered(signature)
    targets = [dest.with_name(dest.name + sig.suffix) for sig in signatures]
    for target in targets:
        _check_destination(target)
    placed: list[Path] = []
    temps: list[Path] = []
    try:
        tmp, actual = _write_temp(_object_chunks(conn, src, head, config), dest, progress)
        temps.append(tmp)
        _check_sha256(conn, src.url, actual, expected)
        for signature, target in zip(signatures, targets, strict=True):
            tmp, _ = _write_temp(_one_chunk(signature.data), target, None)
            temps.append(tmp)
        for tmp, target in zip(temps, [dest, *targets], strict=True):
            _place(tmp, target)
            placed.append(target)
    except BaseException:
        for tmp in temps:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        # Only what this call linked into place is removed: the set goes in together.
        for path in placed:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        raise
    _fsync_dir(dest.parent)
    return dataclasses.replace(
        _download_result(src, dest, head, expected), signature_paths=tuple(targets)
    )


def stream_bundle(
    src: S3Location,
    out: BinaryIO,
    *,
    config: StorageConfig,
    progress: Callable[[int], None] | None = None,
    on_size: Callable[[int], None] | None = None,
) -> DownloadResult:
    """Write the object's bytes to ``out`` as they arrive (``download SRC -``).

    The bytes are out before the last one is hashed, so the result is the verdict:
    AlteredAtRest (exit 1) after the last write when they do not hash to the
    ``sha256`` metadata, StorageError when the object is absent, lacks metadata or
    cannot be fetched. Signatures are not written (fetch them with a file download
    or ``stored_signatures``).
    """
    if not src.key or src.key.endswith("/"):
        raise UsageError(f"{src.url}: names a prefix, not an object")
    conn = _connect(config)
    head = _head_precise(conn, src, "download")
    if head is None:
        raise conn.fail(src.url, "download", detail="no such object")
    if on_size is not None:
        on_size(int(head.get("ContentLength", 0)))
    expected = _expected_sha256(conn, src, head)
    sha = hashlib.sha256()
    with contextlib.closing(_object_chunks(conn, src, head, config)) as chunks:
        for chunk in chunks:
            sha.update(chunk)
            out.write(chunk)
            if progress is not None:
                progress(len(chunk))
    out.flush()
    actual = DIGEST_PREFIX + sha.hexdigest()
    _check_sha256(conn, src.url, actual, expected)
    return _download_result(src, None, head, expected)


# --------------------------------------------------------------------------- store roots


class S3StoreSource:
    """Read access to an EvalBook store root at ``s3://bucket/prefix`` (SPEC section 3).

    Relative paths are POSIX paths the caller has validated. Absent files are None;
    transport and permission failures are StorageError; a file over the caller's size
    limit is StoreError.
    """

    def __init__(self, root: S3Location, *, config: StorageConfig | None = None) -> None:
        self.root = S3Location(root.bucket, _normalise_prefix(root.key))
        self.config = config or StorageConfig()
        self._conn: _Conn | None = None

    @classmethod
    def from_url(cls, url: str, *, config: StorageConfig | None = None) -> S3StoreSource:
        """A source for ``s3://bucket/prefix``; UsageError for a malformed URL."""
        return cls(parse_s3_url(url), config=config)

    @property
    def conn(self) -> _Conn:
        if self._conn is None:
            self._conn = _connect(self.config)
        return self._conn

    def _loc(self, relpath: str) -> S3Location:
        return self.root.child(relpath)

    def describe(self, relpath: str) -> str:
        return self._loc(relpath).url

    def read_bytes(self, relpath: str, *, max_size: int) -> bytes | None:
        """The whole object, or None when absent; StoreError when over ``max_size``."""
        loc = self._loc(relpath)
        answer = _get(self.conn, loc, "reading", checksum_mode=True)
        if answer is None:
            return None
        size = int(answer.get("ContentLength", 0))
        with _open_reader(self.conn, loc, answer, None) as reader:
            if size > max_size:
                raise StoreError(f"{loc.url}: larger than {max_size} bytes")
            # The reader refuses more bytes than the declared size.
            data = reader.readall()
        return data

    def open_stream(self, relpath: str) -> tuple[BinaryIO, int] | None:
        """A buffered stream of the object and its size, or None when absent."""
        loc = self._loc(relpath)
        answer = _get(self.conn, loc, "reading", checksum_mode=True)
        if answer is None:
            return None
        size = int(answer.get("ContentLength", 0))
        raw = _open_reader(self.conn, loc, answer, None)
        return io.BufferedReader(raw, buffer_size=1 * MiB), size

    def list_names(self, reldir: str, *, limit: int) -> list[str]:
        """The names directly under ``reldir/`` (keys and common prefixes), in key order;
        empty when nothing is stored there. StoreError when there are more than
        ``limit``, StorageError when listing fails."""
        base = self._loc(reldir).key + "/"
        url = f"s3://{self.root.bucket}/{base}"
        paginator = self.conn.client.get_paginator("list_objects_v2")
        pages = paginator.paginate(
            Bucket=self.root.bucket,
            Prefix=base,
            Delimiter="/",
            PaginationConfig={"PageSize": self.config.page_size},
        )
        names: list[str] = []
        try:
            for page in pages:
                found = [
                    str(p.get("Prefix", ""))[len(base) : -1] for p in page.get("CommonPrefixes", [])
                ]
                # A "directory marker" object at the prefix itself names nothing.
                found += [
                    str(o.get("Key", ""))[len(base) :]
                    for o in page.get("Contents", [])
                    if o.get("Key") != base
                ]
                for name in found:
                    if len(names) >= limit:
                        raise StoreError(f"{url}: more than {limit} entries")
                    names.append(name)
        except (bexc.ClientError, bexc.BotoCoreError) as exc:
            raise self.conn.fail(url, "listing", exc) from exc
        return names
