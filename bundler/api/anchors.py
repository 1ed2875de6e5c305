"""The trust anchors of SPEC 11 as keyword arguments: checked, then turned into the
``VerifyOptions`` the verifier takes, with every signature found checked against an
allowed_signers file (``bundler.bundles.signatures``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from bundler.api import params
from bundler.bundles.signatures import (
    SignatureCandidate,
    SignatureOutcome,
    SignatureSet,
    explicit_signature,
    sidecar_signatures,
)
from bundler.core.claims import Verification, VerifyOptions
from bundler.core.errors import InputError, ParameterError, VerificationFailed
from bundler.core.limits import DEFAULT_MAX_BYTES

Signature = str | bytes | os.PathLike[str]


@dataclass
class Anchors:
    """The anchors of one call, checked; ``options_for`` gives each bundle its options."""

    options: VerifyOptions
    signers: SignatureSet | None = None
    explicit: SignatureCandidate | None = None
    endpoint_url: str | None = None
    outcomes: list[SignatureOutcome] = field(default_factory=list)

    def options_for(self, location: str) -> VerifyOptions:
        """Options for ``location``: the signature check covers the embedded signature
        and every sidecar beside it (or the one signature given instead)."""
        self.outcomes.clear()
        if self.signers is None:
            return self.options
        found = (
            [self.explicit]
            if self.explicit is not None
            else sidecar_signatures(location, self.endpoint_url)
        )
        check: Callable[[bytes, str | None], str] = self.signers.checker(
            found, self.outcomes, embedded=self.explicit is None
        )
        return replace(self.options, check_signature=check, signature_text=None)


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
    endpoint = params.optional_text(endpoint_url, "endpoint_url")
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
    options = VerifyOptions(bundle_digest, report_digest, is_strict, cap)
    if signers_file is None:
        return Anchors(options, endpoint_url=endpoint)
    params.existing_input(signers_file, "allowed_signers", directory_ok=False)
    signers = SignatureSet(Path(signers_file), who)
    explicit = None
    if signature is not None:
        assert isinstance(signature, str | bytes)
        explicit = explicit_signature(signature, endpoint)
    return Anchors(options, signers, explicit, endpoint)


def raise_unless_verified(result: Verification, action: str) -> None:
    """For commands that act only on a verified bundle (SPEC 8): InputError (3) when it
    could not be read, VerificationFailed (1) when it does not verify."""
    from bundler.core.claims import Verdict

    if result.verdict is Verdict.ERROR:
        raise InputError(
            f"{result.source}: cannot be read as a bundle ({result.error}); refusing to {action}"
        )
    if result.verdict is not Verdict.VERIFIED:
        detail = "; ".join(f"{c.subject}: {c.detail}" for c in result.failures()[:3])
        raise VerificationFailed(
            f"{result.source}: bundle does not verify ({detail}); refusing to {action}"
        )
