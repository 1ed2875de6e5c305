"""The signatures of a bundle as the commands read them: beside it, checked by the verifier.

Every verifying command (verify, audit, extract, prove, sign) passes the bundle's
sidecars to the verifier through ``_with_sidecars``; the verifier checks them with the
embedded signature (``bundler.trust.signatures``) and the result lists each one.
"""

from __future__ import annotations

from typing import Any

from bundler.core.errors import VerificationFailed

_NotVerified = VerificationFailed  # a bundle a command must verify first does not (exit 1)


def _with_sidecars(
    options: Any, location: str, endpoint_url: str | None, signature: str | None = None
) -> Any:
    """``options`` checking the signatures beside ``location`` (or only ``signature``)."""
    from bundler.bundles.signatures import with_sidecars

    return with_sidecars(options, location, signature=signature, endpoint_url=endpoint_url)
