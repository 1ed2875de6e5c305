"""Auditing a bundle where it lies (SPEC section 12): read it, verify it, then audit.

``audit_bundle`` runs the verifier first (``read_and_verify``); unless the verdict is
``verified`` the audit is an error carrying the verification's reason: exit 1 when the
bundle failed verification (SPEC 8, as ``verify``), 3 when it could not be read. The
verified bag is audited by ``bundler.evalbook.auditor.audit_contents``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import BinaryIO

from bundler.bundles.verify import read_and_verify
from bundler.core.claims import Claim, State, Verdict, Verification, VerifyOptions
from bundler.core.errors import BundlerError
from bundler.evalbook.audit import Audit, AuditVerdict
from bundler.evalbook.auditor import audit_contents


def audit_bundle(
    location: str,
    options: VerifyOptions,
    *,
    stream: BinaryIO | None = None,
    progress: Callable[[int], None] | None = None,
) -> Audit:
    """Verify the bundle at ``location`` (archive, bag directory, or ``stream``), then audit it.

    ``progress`` receives the bytes read so far, as in ``verify.verify_bundle``. Never
    raises for a bad bundle: a verdict other than ``verified``, a bundle that is not an
    EvalBook report bundle, or a document that cannot be parsed give an ``Audit`` with
    verdict ``error`` and the one-line reason.
    """
    verification, contents = read_and_verify(location, options, stream=stream, progress=progress)
    if verification.verdict is not Verdict.VERIFIED or contents is None:
        return Audit(location, AuditVerdict.ERROR, verification, _verification_reason(verification))
    try:
        return audit_contents(verification, contents.kept)
    except BundlerError as exc:
        return Audit(location, AuditVerdict.ERROR, verification, exc.message)


def unreadable(location: str, error: str, strict: bool) -> Audit:
    """The audit of a bundle that could not be read at all (missing, a special file):
    verdict error (exit 3), as its verification has it."""
    verification = Verification(source=location, verdict=Verdict.ERROR, error=error, strict=strict)
    return Audit(location, AuditVerdict.ERROR, verification, _verification_reason(verification))


def _verification_reason(v: Verification) -> str:
    if v.verdict is Verdict.ERROR:
        return f"the bundle could not be verified: {v.error}"
    failed = [c for c in v.claims if c.state is State.FAILED]
    first = f"; first: {_claim_text(failed[0])}" if failed else ""
    claims = f"{len(failed)} claim{'' if len(failed) == 1 else 's'}"
    return f"verification failed ({claims} failed){first}; nothing was audited"


def _claim_text(c: Claim) -> str:
    text = f"[{c.group}] {c.subject}: {c.detail or c.state.value}"
    return text + (f" ({c.path})" if c.path else "")
