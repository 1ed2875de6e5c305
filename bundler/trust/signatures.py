"""Checking every signature of a bundle head, one way on every path (SPEC 11.3).

``check_signatures`` checks each signature offered (the one embedded in the archive,
the sidecars beside it, local or stored, or one named on the command line) as
``ssh-keygen -Y check-novalidate`` does, then, given an allowed_signers file, who
signed. ``signature_claims`` turns the checks into the verifier's claims and anchor:
an embedded signature that does not verify is a failed claim (the archive changed
after it was signed); a sidecar that does not verify fails nothing by itself (anyone
who can write beside an archive can add one) and is listed with its state; with
allowed signers, at least one signature must verify by an allowed signer. Every
command that reads a bundle's signatures (verify, audit, extract, prove, fixity, sign)
comes through here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from bundler.core.claims import SIGNER_SUBJECT, Claim, State
from bundler.core.errors import BundlerError, InputError
from bundler.core.signatures import SignatureCheck, SignatureSource, SignatureState
from bundler.trust import sshsig
from bundler.trust.head import HEAD_FILE, HEAD_SIG_FILE

GROUP = 2  # signatures are claims about the bundle (group 2)
EMBEDDED_SUBJECT = "embedded signature verifies over bundle-head.json"
ANCHOR_SUBJECT = SIGNER_SUBJECT
LISTED_IN_DETAIL = 5  # signatures named in the one-line reason none is allowed


def _reason(exc: BundlerError, where: str) -> str:
    return exc.message.removeprefix(f"{where}: ")


def _key_of(text: str, where: str) -> str | None:
    """The fingerprint of the key a signature carries, when it parses at all."""
    try:
        return sshsig.parse_signature(text, source=where).fingerprint
    except InputError:
        return None


def check_one(
    head: bytes,
    source: SignatureSource,
    *,
    allowed: Sequence[sshsig.AllowedSigner] | None,
    identity: str | None,
) -> SignatureCheck:
    """How ``source`` ends over the head bytes ``head``; never raises for a bad signature."""
    where, embedded = source.where, source.embedded
    if source.problem is not None:
        return SignatureCheck(where, embedded, SignatureState.INVALID, reason=source.problem)
    try:
        parsed = sshsig.check_novalidate(head, source.text, source=where)
    except BundlerError as exc:
        key = _key_of(source.text, where)
        return SignatureCheck(
            where, embedded, SignatureState.INVALID, key, reason=_reason(exc, where)
        )
    key = parsed.fingerprint
    if allowed is None:
        return SignatureCheck(where, embedded, SignatureState.VALID, key)
    try:
        verified = sshsig.match_signer(parsed, allowed, identity, sshsig.NAMESPACE, where, None)
    except BundlerError as exc:
        return SignatureCheck(
            where, embedded, SignatureState.NOT_ALLOWED, key, reason=_reason(exc, where)
        )
    return SignatureCheck(where, embedded, SignatureState.VERIFIED, key, verified.principal)


def check_signatures(
    head: bytes,
    sources: Iterable[SignatureSource],
    *,
    allowed: Sequence[sshsig.AllowedSigner] | None,
    identity: str | None = None,
) -> tuple[SignatureCheck, ...]:
    """Every signature in ``sources`` checked over ``head``, in order.

    Without ``allowed`` (no allowed_signers file) a good signature is ``valid``; with
    it, ``verified`` when an allowed signer (of ``identity``, when given) made it and
    ``not_allowed`` otherwise. Anything malformed, of another namespace or key type, not
    over these bytes, or refused before the check (``problem``) is ``invalid``.
    """
    return tuple(check_one(head, s, allowed=allowed, identity=identity) for s in sources)


def signer_of(check: SignatureCheck) -> str:
    """``ID, key SHA256:...``, as the anchor names a verified signer."""
    return f"{check.identity}, key {check.key}"


def signature_claims(
    head: bytes | None,
    sources: Sequence[SignatureSource],
    *,
    allowed: Sequence[sshsig.AllowedSigner] | None,
    identity: str | None = None,
) -> tuple[tuple[SignatureCheck, ...], list[Claim], str | None, tuple[str, ...]]:
    """The checks, the claims they make, the anchor's signer and the unanchored keys.

    ``head`` is the bundle's bundle-head.json (None when the bag has none). Returns
    (checks, claims, signer or None, fingerprints of valid signatures not anchored).
    """
    if head is None:
        if not sources and allowed is None:
            return (), [], None, ()
        detail = "bundle-head.json is missing, nothing to check the signature against"
        claim = Claim(GROUP, ANCHOR_SUBJECT, State.FAILED, path=HEAD_FILE, detail=detail)
        return (), [claim], None, ()
    checks = check_signatures(head, sources, allowed=allowed, identity=identity)
    claims: list[Claim] = []
    for check in checks:
        if not check.embedded:
            continue
        if check.state is SignatureState.INVALID:
            detail = f"{check.reason} (the archive changed after it was signed, or the signature was never valid)"
            claims.append(
                Claim(
                    GROUP,
                    EMBEDDED_SUBJECT,
                    State.FAILED,
                    path=HEAD_SIG_FILE,
                    observed=check.key,
                    detail=detail,
                )
            )
        else:
            claims.append(
                Claim(GROUP, EMBEDDED_SUBJECT, State.PROVEN, path=HEAD_SIG_FILE, observed=check.key)
            )
    signers = list(
        dict.fromkeys(signer_of(c) for c in checks if c.state is SignatureState.VERIFIED)
    )
    signer = " and ".join(signers) or None
    if allowed is not None:
        path = anchor_path(checks)
        if signer is not None:
            claims.append(Claim(GROUP, ANCHOR_SUBJECT, State.PROVEN, path=path, observed=signer))
        else:
            claims.append(
                Claim(
                    GROUP,
                    ANCHOR_SUBJECT,
                    State.FAILED,
                    path=path,
                    detail=_none_allowed(checks),
                )
            )
    keys = (
        ()
        if allowed is not None
        else tuple(dict.fromkeys(c.key for c in checks if c.good and c.key))
    )
    return checks, claims, signer, keys


def anchor_path(checks: Sequence[SignatureCheck]) -> str:
    """The file the anchor claim names: the first signature that verified, else the
    first one checked (embedded first, then the sidecars as given), else
    bundle-head.json.sig, where a signature would be. A sidecar is named as given, never
    as the embedded file it is not (the Node verifier's ``anchorPath`` is the same rule).
    """
    verified = [c for c in checks if c.state is SignatureState.VERIFIED]
    first = (verified or list(checks))[:1]
    return first[0].where if first else HEAD_SIG_FILE


def _none_allowed(checks: Sequence[SignatureCheck]) -> str:
    if not checks:
        return "no signature: neither bundle-head.json.sig nor a sidecar"
    # One line an auditor can read: the first few, then how many more (each is listed
    # in full in the record's signatures).
    shown_checks = checks[:LISTED_IN_DETAIL]
    listing = "; ".join(f"{c.where}: {c.describe()}" for c in shown_checks)
    rest = len(checks) - len(shown_checks)
    more = f"; and {rest} more (see the signatures listed)" if rest else ""
    return f"none of {len(checks)} signature(s) verifies by an allowed signer: {listing}{more}"
