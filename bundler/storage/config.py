"""How object storage is reached, and how its failures are told.

``StorageConfig`` (endpoint, profile, part sizes, concurrency, timeouts, retries), the
botocore client built from it and reused while the AWS_* environment is unchanged
(``make_client``), the connection wrapper ``_Conn`` that scrubs credentials from every
message, and the mapping of botocore errors and S3 error codes to the one-line
``StorageError`` each operation raises.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import os
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

import botocore.exceptions as bexc
import botocore.loaders
import botocore.session
from botocore.config import Config

from bundler.core.errors import StorageError, UsageError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


MiB = 1024 * 1024
MIN_PART_SIZE = 5 * MiB  # S3's minimum for every part but the last
CHUNK = 8 * MiB


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
# Answers that say "not now": throttling (S3's SlowDown and the names other services
# use) and server-side failures; botocore's standard retry mode treats them alike.
_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "ProvisionedThroughputExceededException",
        "ServiceUnavailable",
        "InternalError",
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
    }
)
_TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
# Transport failures: the connection was refused, reset, timed out or cut short.
_TRANSIENT_TRANSPORT: tuple[type[BaseException], ...] = (
    bexc.ConnectionError,
    bexc.HTTPClientError,  # ConnectionClosedError, ReadTimeoutError: cut off mid-answer
    bexc.IncompleteReadError,
    bexc.ResponseStreamingError,
    bexc.ReadTimeoutError,
    OSError,
)


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
    region: str | None = None  # None: botocore's own resolution (environment, profile)
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


# The shortest string treated as a secret: a real secret key is 40 characters and a
# session token hundreds; a test secret of one letter ("S") would otherwise turn every
# capital S of a message into ***.
MIN_SECRET_CHARS: Final = 8


def scrub_secrets(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each secret of at least MIN_SECRET_CHARS characters written ***, where
    it stands as a whole token (not inside a longer run of letters and digits)."""
    for secret in secrets:
        if len(secret) >= MIN_SECRET_CHARS:
            token = re.compile(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])")
            text = token.sub("***", text)
    return text


@dataclass(frozen=True)
class _Conn:
    """A client plus what messages need: the endpoint and the strings never to print."""

    client: S3Client
    endpoint: str
    hidden: tuple[str, ...]

    def scrub(self, text: str) -> str:
        return " ".join(scrub_secrets(text, self.hidden).split())

    def fail(
        self,
        url: str,
        action: str,
        exc: BaseException | None = None,
        detail: str = "",
        *,
        kind: str | None = None,
    ) -> StorageError:
        """A one-line StorageError for ``action`` on ``url``; chain it with ``from exc``.
        Its ``kind`` is ``kind`` when given, else what ``exc`` says (``failure_kind``)."""
        reason = detail or (_explain(exc, self.endpoint, url) if exc is not None else "failed")
        if kind is None:
            kind = failure_kind(exc) if exc is not None else "refused"
        return StorageError(self.scrub(f"{url}: {action} failed: {reason}"), kind=kind)


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
                region_name=config.region,
                config=_botocore_config(config, path_style=endpoint is not None),
            ),
        )
        if endpoint is None and not _is_aws_endpoint(client.meta.endpoint_url):
            # The profile names a custom endpoint: same reasoning as above.
            client = cast(
                "S3Client",
                session.create_client(
                    "s3",
                    region_name=config.region,
                    config=_botocore_config(config, path_style=True),
                ),
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


def resolved_config(config: StorageConfig) -> StorageConfig:
    """``config`` with what this process resolved from its options, environment and
    profile written out: the endpoint (``endpoint_url``, else AWS_ENDPOINT_URL_S3, else
    AWS_ENDPOINT_URL, else a profile's custom endpoint; None for AWS itself) and the
    region, and no profile. For work sent to other machines (fixity on a cluster), which
    must reach the same storage the same way; it carries no credential.
    """
    client = _connect(config).client
    endpoint = _configured_endpoint(config)
    if endpoint is None and not _is_aws_endpoint(client.meta.endpoint_url):
        endpoint = client.meta.endpoint_url
    return dataclasses.replace(
        config, endpoint_url=endpoint, region=client.meta.region_name, profile=None
    )


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


def failure_kind(exc: BaseException) -> str:
    """``transient`` for what may work when asked again (throttling, 5xx, a request
    timeout, a connection refused, reset or cut short), ``not_found`` for a missing
    key, else ``refused``; the ``kind`` of StorageError."""
    if isinstance(exc, bexc.ClientError):
        code, _, status = _error_code(exc)
        if code in _TRANSIENT_CODES or status in _TRANSIENT_STATUSES:
            return "transient"
        return "not_found" if _is_not_found(exc) else "refused"
    if isinstance(exc, bexc.SSLError):
        return "refused"  # a certificate or TLS setup problem does not pass by itself
    if isinstance(exc, _TRANSIENT_TRANSPORT):
        return "transient"
    return "refused"


def _is_not_found(exc: bexc.ClientError) -> bool:
    code, _, status = _error_code(exc)
    # A 404 about the bucket or its configuration (no such bucket, no Object Lock
    # configuration) is the service refusing the request, not an item not found.
    return code in _NOT_FOUND_CODES or (
        status == 404 and code not in ("NoSuchBucket", "ObjectLockConfigurationNotFoundError")
    )


def _is_precondition_failed(exc: bexc.ClientError) -> bool:
    code, _, status = _error_code(exc)
    return code in _PRECONDITION_CODES or status == 412
