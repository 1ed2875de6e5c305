"""A stored bundle is judged by its bytes (SPEC 6): the claims about where it is stored.

``stored_claims`` is the one place the key-names-its-bundle rule lives: the key
``<prefix>/reports/bundles/<report_id>/<digest hex>.tar.zst`` must name the report and
the bundle the archive's bytes hold, or the object was altered at rest (a failed claim,
exit 1). An object without ``sha256`` metadata (copied in by another tool) is verified
from its bytes all the same; only the claim that they are the bytes recorded at upload
is unprovable (``no_recorded_sha256``). Every command that reads a stored bundle comes
here through the verifier (``bundles.verify.verify_contents``).
"""

from __future__ import annotations

from typing import Any

from bundler.core.claims import Claim, State, StoredObject

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
    return StoredObject(url, recorded if isinstance(recorded, str) else None)


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
                detail=f"{stored.url}: no sha256 metadata (copied in by another tool?): "
                "verified from its bytes, which cannot be shown to be the ones uploaded",
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
