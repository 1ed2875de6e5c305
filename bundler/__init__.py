"""evalbook-bundle: reproducibility bundles of EvalBook reports, verifiable offline.

The library face: the same operations the command line runs, as functions. Each imports
its implementation on first call, so ``import bundler`` stays cheap. Every error the
toolkit raises on purpose is a ``bundler.core.errors.BundlerError`` whose ``exit_code``
is the command line's (SPEC section 8); nothing else is raised for a bad input.

    >>> import bundler
    >>> result = bundler.export("fixtures/stores/main", "rpt-clean", principal="alice")
    >>> check = bundler.verify(str(result.path))
    >>> check.verdict.value, check.bundle_digest == result.bundle_digest
    ('verified', True)
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundler.core.version import TOOL_NAME, __version__

if TYPE_CHECKING:
    from bundler.core.claims import Verification, VerifyOptions
    from bundler.evalbook.audit import Audit
    from bundler.evalbook.export import ExportResult
    from bundler.trust.proof import ProofCheck

__all__ = [
    "TOOL_NAME",
    "__version__",
    "audit",
    "check_proof",
    "download",
    "export",
    "extract",
    "inspect",
    "prove",
    "upload",
    "verify",
]


def export(
    store: str,
    report_id: str,
    *,
    principal: str,
    out: Path | None = None,
    exported_at: datetime | None = None,
    strict: bool = False,
) -> ExportResult:
    """Export one issued report into a reproducibility bundle (SPEC section 4).

    ``store`` is a directory or ``s3://bucket/prefix``; the archive goes to ``out``
    (default ``./evalbook-bundle-<report_id>.tar.zst``; never overwritten). Promises a
    deterministic archive: the same store, report, principal and time give the same
    bytes. Raises PermissionDenied (exit 4) when ``principal`` lacks report.export,
    InputError (3) for a missing or malformed report, StrictFailure (1) with ``strict``
    when anything would be unavailable, StorageError (5) for an s3:// store.
    """
    from datetime import UTC

    from bundler.evalbook.export import ExportConfig, export_bundle

    moment = exported_at or datetime.now(UTC).replace(microsecond=0)
    return export_bundle(ExportConfig(store, report_id, principal, moment, out=out, strict=strict))


def verify(bundle: str, options: VerifyOptions | None = None) -> Verification:
    """Verify a bundle offline (SPEC section 5): an archive, a bag directory or s3:// URL.

    Never raises for a bad bundle: the result's verdict is ``verified``, ``failed`` (a
    claim failed) or ``error`` (unreadable or unsafe), with every claim and its state.
    ``options`` carries the trust anchors (expected digests, a signature check) and
    ``strict``. Raises StorageError (exit 5) only when an s3:// bundle cannot be fetched.
    """
    from bundler.bundles.verify import verify_bundle
    from bundler.core.claims import VerifyOptions

    if bundle.startswith("s3://"):
        from bundler import storage

        location = storage.parse_s3_url(bundle)
        with storage.open_verified(location, config=storage.StorageConfig()) as stream:
            return verify_bundle(bundle, options or VerifyOptions(), stream=stream)
    return verify_bundle(bundle, options or VerifyOptions())


def inspect(bundle: str) -> dict[str, Any]:
    """What a bundle holds, read through the safe reader, without proving it.

    Raises InputError (exit 3) for an unreadable or unsafe archive.
    """
    from bundler.bundles.inspect import inspect_bundle

    return inspect_bundle(bundle)


def extract(bundle: str, directory: Path, options: VerifyOptions | None = None) -> Verification:
    """Verify while extracting into ``directory`` (absent or empty).

    Only regular files and directories are written, relative to directory descriptors
    and never through a link; unless the result is ``verified`` everything written is
    removed again. Raises OutputError (exit 3) when ``directory`` is not absent or empty.
    """
    from bundler.bundles.extract import extract_bundle
    from bundler.core.claims import VerifyOptions

    return extract_bundle(bundle, directory, options or VerifyOptions())


def audit(bundle: str, options: VerifyOptions | None = None) -> Audit:
    """Verify a bundle, then re-derive its report's verdict from its cases (SPEC 12).

    The result's verdict is consistent, inconsistent or error; nothing is audited unless
    the bundle verifies. Raises only for what ``verify`` raises for.
    """
    from bundler.bundles.audit import audit_bundle
    from bundler.core.claims import VerifyOptions

    return audit_bundle(bundle, options or VerifyOptions())


def prove(bundle: str, case_id: str) -> dict[str, Any]:
    """A proof (``evalbook.case_proof.v1``) that one case belongs to a verified bundle.

    Raises VerificationFailed (exit 1) when the bundle does not verify, InputError (3)
    when it cannot be read or holds no such case.
    """
    from bundler.bundles.proof import prove_case

    return prove_case(bundle, case_id)


def check_proof(proof: bytes, *, source: str = "<proof>") -> ProofCheck:
    """Check a case proof without the bundle: leaf, audit path, root and head.

    Unanchored unless a signature check is given (see ``bundler.trust.proof``). Raises
    InputError (exit 3) for a malformed proof, NotProven (1) when it proves nothing.
    """
    from bundler.trust.proof import check_proof as check

    return check(proof, source=source)


def upload(archive: Path, prefix: str) -> dict[str, Any]:
    """Store a bundle under ``s3://bucket/prefix`` without ever overwriting (SPEC 6).

    The caller verifies first (the command line does). Identical bytes already stored are
    reported as already archived. Raises StorageError (exit 5) when the service fails.
    """
    from bundler import storage
    from bundler.bundles.verify import read_verified
    from bundler.core.claims import VerifyOptions

    result, _ = read_verified(str(archive), VerifyOptions(), action="upload")
    uploaded = storage.upload_bundle(
        archive,
        storage.parse_s3_url(prefix),
        bundle_digest=str(result.bundle_digest),
        report_id=str(result.report_id),
        report_digest=str(result.report_digest),
        config=storage.StorageConfig(),
    )
    return uploaded.as_dict()


def download(url: str, dest: Path) -> dict[str, Any]:
    """Download ``s3://bucket/key`` to ``dest`` only if its bytes hash to their recorded
    SHA-256. Raises AlteredAtRest (exit 1) when they do not, StorageError (5) when the
    object cannot be fetched, OutputError (3) when ``dest`` exists."""
    from bundler import storage

    src = storage.parse_s3_url(url)
    result = storage.download_bundle(src, dest, config=storage.StorageConfig())
    return result.as_dict()
