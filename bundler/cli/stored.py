"""Bundles in object storage as the commands read them: verified streams and stored-key checks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

from bundler.core.errors import (
    BundlerError,
    StorageError,
)


@contextmanager
def _bundle_stream(location: str, endpoint_url: str | None) -> Iterator[BinaryIO | None]:
    """For s3:// locations, a stream that checks the object's sha256 at EOF."""
    if not location.startswith("s3://"):
        yield None
        return
    from bundler import storage

    config = storage.StorageConfig(endpoint_url=endpoint_url)
    loc = storage.stored_bundle_location(location)
    with storage.open_verified(loc, config=config, unrecorded_ok=True) as stream:
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


def _altered_result(location: str, exc: Any, strict: bool) -> Any:
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


def _verified_stored(location: str, stream: Any, result: Any) -> Any:
    """After verifying a stored archive: read what the verifier left, so that bytes
    altered at rest raise AlteredAtRest even when they made the archive unreadable.
    (The key-names-its-bundle rule is a claim of the verification itself.)"""
    if not stream.verified:
        stream.drain()
    return result
