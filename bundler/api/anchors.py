"""The trust anchors of SPEC 11 as keyword arguments: checked, then turned into the
``VerifyOptions`` the verifier takes. Every signature present is checked on every path
(SPEC 11.3): the embedded one and every sidecar beside the bundle (or the one named
instead), by ``bundler.trust.signatures``; an allowed_signers file anchors them."""

from __future__ import annotations

import os
from dataclasses import dataclass

from bundler.api import params
from bundler.bundles.signatures import explicit_signature, load_allowed, with_sidecars
from bundler.core.claims import Verification, VerifyOptions
from bundler.core.errors import InputError, ParameterError
from bundler.core.limits import DEFAULT_MAX_BYTES
from bundler.core.signatures import SignatureSource

Signature = str | bytes | os.PathLike[str]


@dataclass
class Anchors:
    """The anchors of one call, checked; ``options_for`` gives each bundle its options."""

    options: VerifyOptions
    explicit: SignatureSource | None = None
    endpoint_url: str | None = None

    def options_for(self, location: str) -> VerifyOptions:
        """Options for ``location``: the verifier checks the embedded signature and every
        sidecar beside it (or the one signature given instead), anchored or not."""
        return with_sidecars(
            self.options, location, signature=self.explicit, endpoint_url=self.endpoint_url
        )


def anchors(
    *,
    expect_bundle_digest: object = None,
    expect_report_digest: object = None,
    allowed_signers: object = None,
    identity: object = None,
    signature: object = None,
    strict: object = False,
    max_bytes: object = DEFAULT_MAX_BYTES,
    endpoint_url: object = None,
) -> Anchors:
    """Check the anchor parameters (ParameterError naming the first bad one) and load the
    allowed_signers file and an explicit signature (InputError naming the file)."""
    bundle_digest = params.digest(expect_bundle_digest, "expect_bundle_digest")
    report_digest = params.digest(expect_report_digest, "expect_report_digest")
    signers_file = params.optional_path(allowed_signers, "allowed_signers")
    who = params.optional_text(identity, "identity")
    is_strict = params.flag(strict, "strict")
    cap = params.integer(max_bytes, "max_bytes", 1)
    endpoint = params.endpoint(endpoint_url)
    if signature is not None and not isinstance(signature, bytes):
        signature = (
            params.s3_url(signature, "signature")
            if isinstance(signature, str) and signature.startswith("s3://")
            else str(
                params.existing_input(
                    params.path(signature, "signature"), "signature", directory_ok=False
                )
            )
        )
    if signers_file is None and (who is not None or signature is not None):
        raise ParameterError(
            "identity" if who is not None else "signature",
            "needs allowed_signers (a signature is checked only against an allowed_signers file)",
        )
    allowed = None
    if signers_file is not None:
        params.existing_input(signers_file, "allowed_signers", directory_ok=False)
        with params.reading("allowed_signers"):
            allowed = load_allowed(signers_file)
    options = VerifyOptions(
        bundle_digest, report_digest, is_strict, cap, allowed_signers=allowed, identity=who
    )
    explicit = None
    if isinstance(signature, str | bytes):  # checked above: a path, a URL or the bytes
        explicit = explicit_signature(signature, endpoint)
    return Anchors(options, explicit, endpoint)


def raise_unless_verified(result: Verification, action: str) -> None:
    """For commands that act only on a verified bundle (SPEC 8): InputError (3) when it
    could not be read, VerificationFailed (1) when it does not verify."""
    from bundler.core.claims import Verdict

    if result.verdict is Verdict.ERROR:
        raise InputError(
            f"{result.source}: cannot be read as a bundle ({result.error}); refusing to {action}"
        )
    if result.verdict is not Verdict.VERIFIED:
        from bundler.bundles.verify import not_verified

        raise not_verified(result.source, result, action)
