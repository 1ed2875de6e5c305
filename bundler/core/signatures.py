"""What a signature check found (SPEC 11.3): the record of each signature, no I/O.

``SignatureSource`` is one signature offered for checking (the one embedded in the
archive, a sidecar file beside it, an object stored beside it, or one named on the
command line), with ``problem`` set when it was refused before any check (too large,
one of too many, altered at rest). ``SignatureCheck`` is how it ended, one of four
states (``SignatureState``); the verification record lists one per signature. The
checking itself is ``bundler.trust.signatures.check_signatures``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from bundler.core.errors import OutputError

# Bounds on what lies beside a bundle (SPEC 6): anyone who can write beside an archive
# can add a sidecar, so each is read only up to this size and only this many are read.
MAX_SIDECAR_BYTES: Final = 64 * 1024
MAX_SIDECARS: Final = 64
# Names beside a bundle looked at before the rest are counted but not even listed.
MAX_LISTED: Final = 4096

EMBEDDED_WHERE: Final = "bundle-head.json.sig"

NOT_ANCHORED: Final = "not anchored: pass --allowed-signers to check who"


def order_sidecars(found: Iterable[tuple[str, tuple[float, ...]]], *, first: str) -> list[str]:
    """The order sidecars are read in, and so which ``MAX_SIDECARS`` are read when more
    lie beside a bundle (SPEC 6): ``first`` (``<archive>.sig``), then oldest first by
    what the store recorded when each was written (S3's ``LastModified``; locally the
    status-change time, then the inode number for files written within one clock
    tick), then by name. A countersignature's name is chosen by whoever writes it (the
    SHA-256 of bytes of their choosing); the store's record is not, so a flood of names
    added later never pushes out the signatures already there."""
    ordered = sorted(found, key=lambda item: (item[0] != first, item[1], item[0]))
    return [name for name, _ in ordered]


def too_many(rest: int) -> str:
    """Why the sidecars past ``MAX_SIDECARS`` are listed as not verifying."""
    return (
        f"more than {MAX_SIDECARS} signatures beside the bundle: {rest} not read "
        "(the oldest are read, so none added later displaces them)"
    )


class SignatureState(StrEnum):
    VERIFIED = "verified"  # valid, and by a signer the allowed_signers file allows
    VALID = "valid"  # valid with the key it carries; no allowed_signers given
    NOT_ALLOWED = "not_allowed"  # valid, but the signer is not allowed
    INVALID = "invalid"  # malformed, wrong namespace, or not over these head bytes


@dataclass(frozen=True)
class SignatureSource:
    """One signature to check: where it was found and its text (or why it is unreadable)."""

    where: str
    text: str
    embedded: bool = False
    problem: str | None = None


@dataclass(frozen=True)
class SignatureCheck:
    """How one signature ended. ``key`` is the fingerprint of the key it carries
    (``SHA256:...``) when it could be parsed; ``identity`` the allowed principal when
    verified; ``reason`` why it is not verified or valid."""

    where: str
    embedded: bool
    state: SignatureState
    key: str | None = None
    identity: str | None = None
    reason: str | None = None

    @property
    def good(self) -> bool:
        return self.state in (SignatureState.VERIFIED, SignatureState.VALID)

    def describe(self) -> str:
        """One line for people: ``signed by key SHA256:... (not anchored ...)`` and so on."""
        if self.state is SignatureState.VERIFIED:
            return f"verified: signed by {self.identity}, key {self.key}"
        if self.state is SignatureState.VALID:
            return f"valid: signed by key {self.key} ({NOT_ANCHORED})"
        if self.state is SignatureState.NOT_ALLOWED:
            return f"not allowed: {self.reason}"
        return f"invalid: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {
            "where": self.where,
            "embedded": self.embedded,
            "state": self.state.value,
            "key": self.key,
            "identity": self.identity,
            "reason": self.reason,
        }


def sidecar_taken(name: str) -> OutputError:
    """The one refusal when the name a new signature takes beside a bundle, locally or in
    storage, holds other bytes: ``<archive>.sig.<sha256 of the signature>`` is fixed for
    a key and a head (Ed25519 signatures are deterministic), so anyone who can write
    beside the bundle can pre-empt it (docs/format.md, an open limit). Exit 3: the input
    is in the way, not the service."""
    return OutputError(
        f"{name}: holds other bytes than this signature, at the name it takes; refusing "
        "to overwrite (if it is not a signature anyone keeps, remove or rename it and "
        "sign again)"
    )
