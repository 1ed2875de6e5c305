"""Finding and checking the signatures of a bundle (embedded, sidecar, stored), for the
commands and the library alike (SPEC 11.3): verify, audit and extract with an
allowed_signers file, and upload and sign, which carry the sidecars along."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from bundler.core.errors import (
    BundlerError,
    InputError,
)
from bundler.core.textsafe import shown

if TYPE_CHECKING:
    from bundler.core.claims import Verification

# Local signature files beside an archive: ARCHIVE.sig and ARCHIVE.sig.<hex>, the names
# `download` gives the stored ones (docs/format.md, storage).
_LOCAL_COUNTERSIGNATURE = re.compile(r"\.sig\.[0-9a-f]{64}")


@dataclass(frozen=True)
class SignatureCandidate:
    source: str  # where it was found, as printed
    text: str
    problem: str | None = None  # why it cannot verify before it is checked


@dataclass(frozen=True)
class SignatureOutcome:
    source: str
    signer: str | None  # "ID, key SHA256:..." when it verified
    detail: str | None  # why not, otherwise


def local_signatures(archive: str) -> list[SignatureCandidate]:
    """ARCHIVE.sig, then ARCHIVE.sig.<hex> in name order; none for a directory."""
    path = Path(archive)
    if not path.is_file():
        return []
    names = [path.name + ".sig"]
    with contextlib.suppress(OSError):
        names += sorted(
            entry.name
            for entry in os.scandir(path.parent)
            if entry.name.startswith(path.name)
            and _LOCAL_COUNTERSIGNATURE.fullmatch(entry.name[len(path.name) :])
        )
    from bundler.trust.proof import MAX_SIGNATURE_BYTES, read_bounded

    found = []
    for name in names:
        candidate = path.with_name(name)
        if not os.path.lexists(candidate):
            continue
        try:
            # Regular files only, opened without blocking: a FIFO cannot hang verify.
            data = read_bounded(str(candidate), limit=MAX_SIGNATURE_BYTES, what="signature")
        except InputError as exc:
            found.append(SignatureCandidate(str(candidate), "", exc.message))
            continue
        found.append(SignatureCandidate(str(candidate), data.decode("utf-8", "replace")))
    return found


def sidecar_signatures(location: str, endpoint_url: str | None) -> list[SignatureCandidate]:
    """The signatures stored or lying beside a bundle (not the embedded one)."""
    if not location.startswith("s3://"):
        return local_signatures(location)
    from bundler import storage

    return [
        SignatureCandidate(sig.url, sig.text, sig.problem)
        for sig in storage.stored_signatures(
            location, config=storage.StorageConfig(endpoint_url=endpoint_url)
        )
    ]


def explicit_signature(value: str | bytes, endpoint_url: str | None) -> SignatureCandidate:
    """A signature given instead of the bundle's own: its bytes, a file or an s3:// URL.

    A file is read as a regular file only, without blocking and within
    ``MAX_SIGNATURE_BYTES``. Raises InputError for a file that cannot be, StorageError
    for an object that cannot be fetched.
    """
    from bundler.trust.proof import MAX_SIGNATURE_BYTES, read_bounded

    if isinstance(value, bytes):
        if len(value) > MAX_SIGNATURE_BYTES:
            raise InputError(
                f"signature: {len(value)} bytes, over the {MAX_SIGNATURE_BYTES}-byte cap"
            )
        return SignatureCandidate("<signature>", value.decode("utf-8", "replace"))
    if value.startswith("s3://"):
        from bundler import storage

        stored = storage.read_signature(
            value, config=storage.StorageConfig(endpoint_url=endpoint_url)
        )
        return SignatureCandidate(stored.url, stored.text)
    # "-" is a file of that name here; standard input is the command line's to read.
    data = read_bounded(
        "./-" if value == "-" else value, limit=MAX_SIGNATURE_BYTES, what="signature"
    )
    return SignatureCandidate(value, data.decode("utf-8", "replace"))


class SignatureSet:
    """Checks every signature of a bundle against one allowed_signers file.

    Several signers may sign one bundle (the exporter, auditors countersigning), so the
    head is anchored when at least one signature verifies; every outcome is kept, to be
    listed with the result.
    """

    def __init__(self, allowed_signers: Path, identity: str | None) -> None:
        from bundler.trust import sshsig

        self.allowed = sshsig.load_allowed_signers(allowed_signers)
        self.identity = identity

    def checker(
        self,
        candidates: list[SignatureCandidate],
        outcomes: list[SignatureOutcome],
        *,
        embedded: bool,
    ) -> Callable[[bytes, str | None], str]:
        """A ``VerifyOptions.check_signature`` that checks the embedded signature (when
        ``embedded``) and ``candidates``, appending each outcome to ``outcomes``."""
        from bundler.trust import sshsig
        from bundler.trust.head import HEAD_SIG_FILE

        def check(head: bytes, embedded_text: str | None) -> str:
            found = list(candidates)
            if embedded and embedded_text is not None:
                found.insert(0, SignatureCandidate(HEAD_SIG_FILE, embedded_text))
            if not found:
                raise sshsig.SignatureError(
                    "no signature: neither bundle-head.json.sig nor a sidecar"
                )
            for candidate in found:
                outcomes.append(self.check_one(head, candidate))
            signers = [o.signer for o in outcomes if o.signer is not None]
            if signers:
                return " and ".join(dict.fromkeys(signers))
            raise sshsig.SignatureError(
                f"none of {len(outcomes)} signature(s) verifies: "
                + "; ".join(f"{o.source}: {o.detail}" for o in outcomes)
            )

        return check

    def check_one(self, head: bytes, candidate: SignatureCandidate) -> SignatureOutcome:
        from bundler.trust import sshsig

        if candidate.problem is not None:
            return SignatureOutcome(candidate.source, None, candidate.problem)
        try:
            verified = sshsig.verify(
                head, candidate.text, self.allowed, identity=self.identity, source=candidate.source
            )
        except BundlerError as exc:
            return SignatureOutcome(
                candidate.source, None, exc.message.removeprefix(f"{candidate.source}: ")
            )
        return SignatureOutcome(
            candidate.source, f"{verified.principal}, key {verified.fingerprint}", None
        )


def list_signatures(result: Verification, outcomes: list[SignatureOutcome]) -> Verification:
    """``result`` with its signature claim naming every signature and its state."""

    if not outcomes:
        return result
    good = sum(o.signer is not None for o in outcomes)
    listing = f"{good} of {len(outcomes)} signature(s) verify: " + "; ".join(
        f"{o.source}: verified ({o.signer})"
        if o.signer
        else f"{o.source}: not verified ({o.detail})"
        for o in outcomes
    )
    claims = tuple(
        replace(c, detail=listing) if c.group == 2 and c.subject == "signature" else c
        for c in result.claims
    )
    return replace(result, claims=claims)


def signatures_text(outcomes: list[SignatureOutcome]) -> str:
    if not outcomes:
        return ""
    good = sum(o.signer is not None for o in outcomes)
    lines = [f"Signatures:  {len(outcomes)} ({good} verified)"]
    for o in outcomes:
        state = f"verified: {o.signer}" if o.signer else f"not verified: {o.detail}"
        lines.append(f"  - {shown(o.source)}: {shown(state)}")
    return "\n".join(lines) + "\n"
