"""The library's audit (SPEC 12; ``audit``): verify a bundle, then re-derive its
report's verdict. ``Audit`` is imported here so that ``typing.get_type_hints``
resolves it."""

from __future__ import annotations

import os

from bundler.api import params
from bundler.api.anchors import anchors
from bundler.api.bundles import OnProgress, bundle_at, bytes_progress, progress_callback
from bundler.core.errors import InputError, StorageError
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
) -> Audit:
    """Verify a bundle, then re-derive its report's verdict from its cases (SPEC 12;
    ``audit``). Anchors as for ``verify``. The verdict is consistent, inconsistent or
    error; nothing is audited unless the bundle verifies. Raises only what ``verify``
    raises. The verification's ``signatures`` lists every signature checked.
    """
    from bundler.bundles.audit import audit_bundle, unreadable
    from bundler.bundles.stored import verified_stored

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
    where = params.stored_object(params.location(bundle, "bundle"), "bundle")
    report = progress_callback(on_progress)
    try:
        params.input_location(where, "bundle")
        options = found.options_for(where)
        with bundle_at(where, found.endpoint_url) as stream:
            result = audit_bundle(
                where, options, stream=stream, progress=bytes_progress(report, [None])
            )
            if stream is not None and result.verification is not None:
                verified_stored(where, stream, result)
    except (InputError, StorageError) as exc:
        # As verify: a bundle that cannot be read (missing, a special file, no such
        # object) is a result with verdict error, not an exception. A failing service
        # (exit 5) is not the bundle's trouble and still raises.
        if exc.exit_code != 3:
            raise
        return unreadable(where, exc.message.removeprefix("bundle: "), found.options.strict)
    return result
