"""The signature helpers the commands share, under the names the commands use; the
implementation is the library's (``bundler.bundles.signatures``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bundler.bundles.signatures import (
    SignatureCandidate as _SignatureCandidate,
)
from bundler.bundles.signatures import (
    SignatureOutcome as _SignatureOutcome,
)
from bundler.bundles.signatures import (
    SignatureSet as _SignatureSet,
)
from bundler.bundles.signatures import (
    explicit_signature,
)
from bundler.bundles.signatures import (
    list_signatures as _list_signatures,
)
from bundler.bundles.signatures import (
    local_signatures as _local_signatures,
)
from bundler.bundles.signatures import (
    sidecar_signatures as _sidecar_signatures,
)
from bundler.bundles.signatures import (
    signatures_text as _signatures_text,
)
from bundler.cli.common import _read_input
from bundler.core.errors import VerificationFailed

_NotVerified = VerificationFailed  # a bundle a command must verify first does not (exit 1)

__all__ = [
    "_NotVerified",
    "_SignatureCandidate",
    "_SignatureOutcome",
    "_SignatureSet",
    "_explicit_signature",
    "_list_signatures",
    "_local_signatures",
    "_sidecar_signatures",
    "_signatures_text",
]


def _explicit_signature(value: str, endpoint_url: str | None) -> _SignatureCandidate:
    """``--signature`` as a file, ``-`` (standard input) or an s3:// URL."""
    if value == "-":
        return replace(explicit_signature(_read_input(value), endpoint_url), source="<stdin>")
    return explicit_signature(
        str(Path(value)) if not value.startswith("s3://") else value, endpoint_url
    )
