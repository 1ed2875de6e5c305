"""How a storage failure is classed (StorageError.kind), by class: every code and
status the table names, every transport failure, and what must never count as
transient. fixity retries ``transient`` and only that (SPEC 13)."""

from __future__ import annotations

import botocore.exceptions as bexc
import pytest

from bundler.core.errors import StorageError
from bundler.storage.config import _TRANSIENT_CODES, failure_kind


def _client_error(code: str, status: int) -> bexc.ClientError:
    return bexc.ClientError(
        {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "GetObject",
    )


@pytest.mark.parametrize("code", sorted(_TRANSIENT_CODES))
def test_every_throttling_and_server_code_is_transient(code: str) -> None:
    assert failure_kind(_client_error(code, 400)) == "transient"


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_every_transient_status_is_transient_whatever_the_code(status: int) -> None:
    assert failure_kind(_client_error("", status)) == "transient"
    assert failure_kind(_client_error("SomethingNew", status)) == "transient"


@pytest.mark.parametrize(
    ("code", "status"),
    [("NoSuchKey", 404), ("404", 404), ("NotFound", 404), ("", 404)],
)
def test_a_missing_key_is_not_found(code: str, status: int) -> None:
    assert failure_kind(_client_error(code, status)) == "not_found"


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("NoSuchBucket", 404),  # the bucket, not the key: nothing to retry or report gone
        ("AccessDenied", 403),
        ("InvalidAccessKeyId", 403),
        ("SignatureDoesNotMatch", 403),
        ("ExpiredToken", 400),
        ("BadDigest", 400),
        ("PreconditionFailed", 412),
        ("NotImplemented", 501),  # not supported: asking again will not help
        ("", 400),
    ],
)
def test_refusals_are_never_transient(code: str, status: int) -> None:
    assert failure_kind(_client_error(code, status)) == "refused"


@pytest.mark.parametrize(
    "exc",
    [
        bexc.EndpointConnectionError(endpoint_url="http://127.0.0.1:9"),
        bexc.ConnectTimeoutError(endpoint_url="http://127.0.0.1:9"),
        bexc.ReadTimeoutError(endpoint_url="http://127.0.0.1:9"),
        bexc.ConnectionClosedError(endpoint_url="http://127.0.0.1:9"),
        bexc.IncompleteReadError(actual_bytes=1, expected_bytes=2),
        bexc.ResponseStreamingError(error="reset"),
        ConnectionResetError(104, "Connection reset by peer"),
        BrokenPipeError(32, "Broken pipe"),
        TimeoutError("timed out"),
    ],
    ids=type,
)
def test_transport_failures_are_transient(exc: BaseException) -> None:
    assert failure_kind(exc) == "transient"


@pytest.mark.parametrize(
    "exc",
    [
        bexc.SSLError(endpoint_url="https://127.0.0.1", error="certificate verify failed"),
        bexc.NoCredentialsError(),
        bexc.PartialCredentialsError(provider="env", cred_var="AWS_SECRET_ACCESS_KEY"),
        ValueError("not a transport failure"),
    ],
    ids=type,
)
def test_tls_credentials_and_other_errors_are_refused(exc: BaseException) -> None:
    assert failure_kind(exc) == "refused"


def test_a_storage_error_is_refused_unless_told_and_altered_at_rest_never_transient() -> None:
    from bundler.storage import AlteredAtRest

    assert StorageError("x").kind == "refused" and not StorageError("x").transient
    assert StorageError("x", kind="transient").transient
    altered = AlteredAtRest("x", url="s3://bucket/key", recorded="sha256:" + "0" * 64, observed="y")
    assert altered.kind == "refused" and not altered.transient
