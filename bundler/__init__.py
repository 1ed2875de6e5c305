"""evalbook-bundle: reproducibility bundles of EvalBook reports, verifiable offline.

The library face (SPEC 7.1): every command as a function with the same meaning and the
same checks, documented in docs/library.md. Paths are ``str`` or ``os.PathLike``; times
are timezone-aware ``datetime`` or RFC 3339 text; the trust anchors are keyword
arguments. For a bad input only ``BundlerError`` subclasses are raised, naming the
parameter, with the command's ``exit_code``; results are frozen, and ``to_json()``
gives the command's ``--json`` object. Each function imports its implementation on
first call, so ``import bundler`` stays cheap.

    >>> import bundler
    >>> result = bundler.export("fixtures/stores/main", "rpt-clean", principal="alice",
    ...                         out="/tmp/", exported_at="2026-11-30T00:00:00Z")
    >>> check = bundler.verify(result.path, expect_bundle_digest=result.bundle_digest)
    >>> check.verdict.value
    'verified'
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from bundler.core.errors import (
    BundlerError,
    InputError,
    NotFound,
    OutputError,
    ParameterError,
    PermissionDenied,
    StorageError,
    StrictFailure,
    UsageError,
    VerificationFailed,
)
from bundler.core.version import TOOL_NAME, __version__

if TYPE_CHECKING:
    from bundler.api.auditing import audit
    from bundler.api.bundles import extract, inspect, reports, verify
    from bundler.api.exporting import export, export_eb
    from bundler.api.fixity import fixity, retire
    from bundler.api.pages import render
    from bundler.api.proofs import check_proof, prove, sign
    from bundler.api.results import (
        BundleListing,
        DownloadResult,
        InspectResult,
        Progress,
        ProofCheckResult,
        ProofResult,
        RenderResult,
        ReportListing,
        SignResult,
        UploadResult,
    )
    from bundler.api.stored import download, list_bundles, upload
    from bundler.core.claims import Verdict, Verification
    from bundler.evalbanana.export import EbExportResult
    from bundler.evalbook.audit import Audit
    from bundler.evalbook.export import ExportResult
    from bundler.fixity.run import Retirement
    from bundler.fixity.run import Summary as FixitySummary
    from bundler.trust.proof import NotProven

# Where each lazily imported name lives.
_LAZY = {
    **dict.fromkeys(("extract", "inspect", "reports", "verify"), "bundler.api.bundles"),
    **dict.fromkeys(("export", "export_eb"), "bundler.api.exporting"),
    "audit": "bundler.api.auditing",
    **dict.fromkeys(("fixity", "retire"), "bundler.api.fixity"),
    **dict.fromkeys(("check_proof", "prove", "sign"), "bundler.api.proofs"),
    "render": "bundler.api.pages",
    **dict.fromkeys(("download", "list_bundles", "upload"), "bundler.api.stored"),
    **dict.fromkeys(
        (
            "BundleListing",
            "DownloadResult",
            "InspectResult",
            "Progress",
            "ProofCheckResult",
            "ProofResult",
            "RenderResult",
            "ReportListing",
            "SignResult",
            "UploadResult",
        ),
        "bundler.api.results",
    ),
    "Verdict": "bundler.core.claims",
    "Verification": "bundler.core.claims",
    "EbExportResult": "bundler.evalbanana.export",
    "Audit": "bundler.evalbook.audit",
    "ExportResult": "bundler.evalbook.export",
    "FixitySummary": "bundler.fixity.run",
    "Retirement": "bundler.fixity.run",
    "NotProven": "bundler.trust.proof",
}
_RENAMED = {"FixitySummary": "Summary"}

__all__ = [
    "TOOL_NAME",
    "Audit",
    "BundleListing",
    "BundlerError",
    "DownloadResult",
    "EbExportResult",
    "ExportResult",
    "FixitySummary",
    "InputError",
    "InspectResult",
    "NotFound",
    "NotProven",
    "OutputError",
    "ParameterError",
    "PermissionDenied",
    "Progress",
    "ProofCheckResult",
    "ProofResult",
    "RenderResult",
    "ReportListing",
    "Retirement",
    "SignResult",
    "StorageError",
    "StrictFailure",
    "UploadResult",
    "UsageError",
    "Verdict",
    "Verification",
    "VerificationFailed",
    "__version__",
    "audit",
    "check_proof",
    "download",
    "export",
    "export_eb",
    "extract",
    "fixity",
    "inspect",
    "list_bundles",
    "prove",
    "render",
    "reports",
    "retire",
    "sign",
    "upload",
    "verify",
]


class _Face(types.ModuleType):
    """The package as a module whose function ``fixity`` keeps its name: importing the
    subpackage ``bundler.fixity`` (which the import system then sets as an attribute of
    ``bundler``) must not replace the function SPEC 7.1 names. The subpackage stays
    importable by its full name (``from bundler.fixity import ...``)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Face


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bundler' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), _RENAMED.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
