"""The library's audit (SPEC 12; ``audit``): verify a bundle, then re-derive its
report's verdict. ``Audit`` is imported here so that ``typing.get_type_hints``
resolves it."""

from __future__ import annotations

import os
from dataclasses import replace

from bundler.api import params
from bundler.api.anchors import anchors
from bundler.api.bundles import OnProgress, bundle_at, bytes_progress, progress_callback
from bundler.bundles.signatures import SignatureOutcome
from bundler.core.limits import DEFAULT_MAX_BYTES
from bundler.evalbook.audit import Audit


def audit(
    bundle: str | os.PathLike[str],
    *,
    expect_bundle_digest: str | None = None,
    expect_report_digest: str | None = None,
    allowed_signers: str | os.PathLike[str] | None = None,
    identity: str | None = None,
    signature: str | bytes | os.PathLike[str] | None = None,
    strict: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    endpoint_url: str | None = None,
    on_progress: OnProgress | None = None,
    signature_outcomes: list[SignatureOutcome] | None = None,
) -> Audit:
    """Verify a bundle, then re-derive its report's verdict from its cases (SPEC 12;
    ``audit``). Anchors as for ``verify``. The verdict is consistent, inconsistent or
    error; nothing is audited unless the bundle verifies. Raises only what ``verify``
    raises. ``signature_outcomes``, when given, receives each signature checked.
    """
    from bundler.bundles.audit import audit_bundle
    from bundler.bundles.signatures import list_signatures

    found = anchors(
        expect_bundle_digest=expect_bundle_digest,
        expect_report_digest=expect_report_digest,
        allowed_signers=allowed_signers,
        identity=identity,
        signature=signature,
        strict=strict,
        max_bytes=max_bytes,
        endpoint_url=endpoint_url,
    )
    where = params.input_location(bundle, "bundle")
    report = progress_callback(on_progress)
    options = found.options_for(where)
    with bundle_at(where, found.endpoint_url) as stream:
        result = audit_bundle(
            where, options, stream=stream, progress=bytes_progress(report, [None])
        )
    if result.verification is not None and found.outcomes:
        result = replace(result, verification=list_signatures(result.verification, found.outcomes))
    if signature_outcomes is not None:
        signature_outcomes.extend(found.outcomes)
    return result
