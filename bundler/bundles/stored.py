"""Bundles in object storage as the commands and the library read them: verified streams
and stored-key checks (SPEC 6)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, BinaryIO

from bundler.bundles.signatures import sidecar_signatures
from bundler.core.errors import (
    BundlerError,
    InputError,
    StorageError,
)

if TYPE_CHECKING:
    from bundler.core.claims import Verification


def first_sidecar(location: str, endpoint_url: str | None) -> str | None:
    """The first intact signature beside a bundle (``ARCHIVE.sig``, or stored beside an
    ``s3://`` object), for prove and extract; None when there is none."""
    from bundler.trust.proof import MAX_SIGNATURE_BYTES

    for candidate in sidecar_signatures(location, endpoint_url):
        if candidate.problem is not None and not location.startswith("s3://"):
            raise InputError(candidate.problem)  # a local sidecar that is no signature file
        if candidate.problem is None and len(candidate.text) <= MAX_SIGNATURE_BYTES:
            return candidate.text
    return None


@contextmanager
def bundle_stream(location: str, endpoint_url: str | None) -> Iterator[BinaryIO | None]:
    """For s3:// locations, a stream that checks the object's sha256 at EOF."""
    if not location.startswith("s3://"):
        yield None
        return
    from bundler import storage

    config = storage.StorageConfig(endpoint_url=endpoint_url)
    with storage.open_verified(storage.parse_s3_url(location), config=config) as stream:
        try:
            yield stream
        except StorageError:
            raise
        except BundlerError as exc:
            # Bytes altered at rest can make the archive unreadable before its end; the
            # digest of the whole object tells that apart from a bundle stored broken.
            try:
                stream.drain()
            except storage.AlteredAtRest as altered:
                raise altered from exc
            raise


def altered_result(location: str, exc: Any, strict: bool) -> Verification:
    """A failed verification for an archive altered at rest (SPEC section 6)."""
    from bundler.core.claims import Claim, State, Verdict, Verification

    claim = Claim(
        2,
        f"stored archive {exc.url} holds the bytes recorded for it",
        State.FAILED,
        expected=exc.recorded,
        observed=exc.observed,
        detail=exc.message,
    )
    return Verification(source=location, verdict=Verdict.FAILED, strict=strict, claims=(claim,))


def check_stored_key(location: str, result: Verification) -> Verification:
    """``result`` with a claim that the archive's key names the bundle it holds."""

    from bundler import storage
    from bundler.core.claims import Claim, State, Verdict

    named = storage.key_names(storage.parse_s3_url(location).key)
    if named is None or result.bundle_digest is None:
        return result
    report_id, digest = named
    subject = "storage key names the bundle it holds"
    if (report_id, digest) == (result.report_id, result.bundle_digest):
        claim = Claim(2, subject, State.PROVEN, expected=digest, observed=result.bundle_digest)
        return replace(result, claims=(*result.claims, claim))
    claim = Claim(
        2,
        subject,
        State.FAILED,
        expected=f"{report_id} {digest}",
        observed=f"{result.report_id} {result.bundle_digest}",
        detail=f"{location}: altered at rest: the key names bundle {digest} of {report_id}, "
        f"but the archive holds bundle {result.bundle_digest} of {result.report_id}",
    )
    return replace(result, verdict=Verdict.FAILED, claims=(*result.claims, claim))


def verified_stored(location: str, stream: Any, result: Verification) -> Verification:
    """After verifying a stored archive: read what the verifier left, so that bytes
    altered at rest raise AlteredAtRest even when they made the archive unreadable,
    then check that the key names the bundle."""
    if not stream.verified:
        stream.drain()
    return check_stored_key(location, result)
