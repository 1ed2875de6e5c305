"""A stored bundle is judged by its bytes (SPEC 6): the claims about where it is stored.

``stored_claims`` is the one place the key-names-its-bundle rule lives: the key
``<prefix>/reports/bundles/<report_id>/<digest hex>.tar.zst`` must name the report and
the bundle the archive's bytes hold, or the object was altered at rest (a failed claim,
exit 1). An object without ``sha256`` metadata (copied in by another tool) is verified
from its bytes all the same; only the claim that they are the bytes recorded at upload
is unprovable (``no_recorded_sha256``). Every command that reads a stored bundle comes
here through the verifier (``bundles.verify.verify_contents``); ``inspect`` and
``download``, which do not verify, through ``inspected_stored`` and
``bundles.stored_bytes.judge_download``.
``bundle_stream`` opens a stored bundle for every command and the library alike.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

from bundler.core.claims import Claim, State, StoredObject
from bundler.core.errors import BundlerError, StorageError

if TYPE_CHECKING:
    from bundler.core.claims import Verification

_R = TypeVar("_R")

GROUP = 2
KEY_SUBJECT = "storage key names the bundle it holds"
RECORDED_SUBJECT = "stored archive holds the bytes recorded at upload"
NO_RECORDED_SHA256 = "no_recorded_sha256"


def stored_of(stream: Any) -> StoredObject | None:
    """The stored object a verified stream (``storage.open_verified``) reads, else None."""
    url = getattr(stream, "url", None)
    if not isinstance(url, str) or not url.startswith("s3://"):
        return None
    recorded = getattr(stream, "expected_sha256", None)
    why = getattr(stream, "unrecorded", None)
    return StoredObject(
        url,
        recorded if isinstance(recorded, str) else None,
        why if isinstance(why, str) else None,
    )


def stored_claims(
    stored: StoredObject, report_id: str | None, bundle_digest: str | None
) -> list[Claim]:
    """The claims about where ``stored`` is kept, for the bundle its bytes hold."""
    from bundler.storage.layout import key_names, parse_s3_url

    claims = []
    if stored.recorded_sha256 is None:
        claims.append(
            Claim(
                GROUP,
                RECORDED_SUBJECT,
                State.UNPROVABLE,
                path=None,
                reason=NO_RECORDED_SHA256,
                detail=f"{stored.url}: {stored.unrecorded or 'no sha256 metadata'} (copied "
                "in by another tool?): verified from its bytes, which cannot be shown to be "
                "the ones uploaded",
            )
        )
    named = key_names(parse_s3_url(stored.url).key)
    if named is None or bundle_digest is None:
        return claims
    key_report, key_digest = named
    if (key_report, key_digest) == (report_id, bundle_digest):
        claims.append(
            Claim(GROUP, KEY_SUBJECT, State.PROVEN, expected=key_digest, observed=bundle_digest)
        )
        return claims
    claims.append(
        Claim(
            GROUP,
            KEY_SUBJECT,
            State.FAILED,
            expected=f"{key_report} {key_digest}",
            observed=f"{report_id} {bundle_digest}",
            detail=f"{stored.url}: altered at rest: the key names bundle {key_digest} of "
            f"{key_report}, but the archive holds bundle {bundle_digest} of {report_id}",
        )
    )
    return claims


@contextmanager
def bundle_stream(location: str, endpoint_url: str | None) -> Iterator[BinaryIO | None]:
    """For s3:// locations, a stream that checks the object's sha256 at EOF (an object
    without sha256 metadata opens all the same: its bytes are judged by the verifier).
    A URL that names no object (``s3://bucket/``) is a UsageError (exit 2)."""
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


def altered_result(location: str, exc: Any, strict: bool) -> Verification:
    """A failed verification for an archive altered at rest (SPEC section 6)."""
    from bundler.core.claims import Verdict, Verification

    claim = Claim(
        GROUP,
        f"stored archive {exc.url} holds the bytes recorded for it",
        State.FAILED,
        expected=exc.recorded,
        observed=exc.observed,
        detail=exc.message,
    )
    return Verification(source=location, verdict=Verdict.FAILED, strict=strict, claims=(claim,))


def verified_stored(location: str, stream: Any, result: _R) -> _R:
    """After reading a stored archive: read what the reader left, so that bytes altered
    at rest raise AlteredAtRest even when they made the archive unreadable. (The
    key-names-its-bundle rule is a claim of the verification itself.)"""
    if not stream.verified:
        stream.drain()
    return result


def inspected_stored(stream: Any, info: Mapping[str, Any]) -> list[str]:
    """A stored bundle inspected is judged by its bytes too (SPEC 6): the key must name
    the bundle inspect read (VerificationFailed, exit 1, altered at rest). Returns the
    warnings to show: an object without sha256 metadata is inspected all the same."""
    from bundler.core.errors import VerificationFailed

    stored = stored_of(stream)
    if stored is None:
        return []
    warnings = []
    for claim in stored_claims(stored, info.get("report_id"), info.get("bundle_digest")):
        if claim.state is State.FAILED:
            raise VerificationFailed(str(claim.detail))
        if claim.state is State.UNPROVABLE:
            warnings.append(str(claim.detail))
    return warnings
