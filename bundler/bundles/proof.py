"""Signing and proving a bundle of either kind (SPEC sections 11.3 and 11.4).

``sign_bundle`` verifies an archive, then signs its ``bundle-head.json`` for a sidecar.
``prove_case`` verifies a bundle (``read_verified_bundle``), finds the one leaf of its
case tree that holds the case (an EvalBook case line, or an eval-banana check file,
``case_leaves``) and builds the proof with ``bundler.trust.proof.build_proof``. Checking
a proof needs no bundle: that is ``bundler.trust.proof.check_proof``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from bundler.archive.bag_reader import BagContents
from bundler.bundles.verify import not_verified, read_and_verify
from bundler.core import canonical
from bundler.core.claims import Verdict, Verification, VerifyOptions
from bundler.core.errors import InputError
from bundler.core.signatures import SignatureState
from bundler.core.textsafe import shown
from bundler.evalbanana import run as eb
from bundler.evalbanana.export import result_member
from bundler.evalbook.contract import BUNDLE_SCHEMA
from bundler.trust.head import HEAD_SIG_FILE
from bundler.trust.merkle import TreeBuilder
from bundler.trust.proof import build_proof, head_of, refuse_unreadable


def sign_bundle(
    location: str, sign: Callable[[bytes], str], *, options: VerifyOptions | None = None
) -> tuple[str, Verification]:
    """Verify the archive and return the armored signature of its head (for a sidecar)."""
    return sign_verified(location, sign, options or VerifyOptions())


def sign_verified(
    location: str,
    sign: Callable[[bytes], str],
    options: VerifyOptions,
    *,
    stream: BinaryIO | None = None,
) -> tuple[str, Verification]:
    """Verify the bundle (every signature present checked, SPEC 11.3), then sign its
    head. Raises VerificationFailed (exit 1) when it does not verify, InputError (3)
    when it cannot be read."""
    result, contents = read_verified_bundle(location, options, action="sign", stream=stream)
    return sign(head_of(contents)), result


def signed_already(result: Verification, signature: str) -> str | None:
    """Where the head already carries a valid signature by the key that made
    ``signature`` (embedded or a sidecar), else None: signing again adds nothing."""
    from bundler.trust import sshsig

    key = sshsig.parse_signature(signature, source="signature").fingerprint
    for check in result.signatures:
        if check.key == key and check.state is not SignatureState.INVALID:
            return check.where
    return None


def read_verified_bundle(
    location: str, options: VerifyOptions, *, action: str, stream: BinaryIO | None = None
) -> tuple[Verification, BagContents]:
    """Read and verify a bundle for a command that acts only on a verified one.

    Raises VerificationFailed (exit 1) when a claim fails, InputError (exit 3) when the
    bundle cannot be read or checked at all (SPEC 8).
    """
    result, contents = read_and_verify(location, options, stream=stream)
    if result.verdict is Verdict.VERIFIED and contents is not None:
        return result, contents
    if result.verdict is Verdict.FAILED:
        raise not_verified(location, result, action)
    raise InputError(f"{location}: bundle cannot be read ({result.error}); refusing to {action}")


def chosen_signature(
    result: Verification, options: VerifyOptions, contents: BagContents
) -> str | None:
    """The head signature a proof carries: the first verified one when allowed signers
    were given, else the first valid one (embedded first); None when there is none."""
    want = (
        {SignatureState.VERIFIED} if options.allowed_signers is not None else {SignatureState.VALID}
    )
    texts = {source.where: source.text for source in options.sidecars}
    for check in result.signatures:
        if check.state not in want:
            continue
        if check.embedded:
            return contents.kept[HEAD_SIG_FILE].decode("ascii", "replace")
        if check.where in texts:
            return texts[check.where]
    return None


def case_leaves(contents: BagContents, bundle: dict[str, Any]) -> list[bytes]:
    """The leaves of the case tree: the bytes of each ``checks/<stem>.json`` in report order.

    Each file is found by the stem rule from its check id (never at the path bundle.json
    names); the order is bundle.json's, which verify has proven to be report.json's.
    Raises InputError when the bag does not hold a check's result file.
    """
    leaves = []
    for entry in bundle["checks"]:
        member = result_member(eb.check_stem(entry["check_id"]))
        data = contents.kept.get(member)
        if data is None:
            raise InputError(f"{contents.source}: {member}: missing from the bag")
        leaves.append(data)
    return leaves


def _lines(data: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of each newline-terminated line, without copying ``data``."""
    start = 0
    while (end := data.find(b"\n", start)) >= 0:
        yield start, end
        start = end + 1


def _find_leaf(
    contents: BagContents, bundle: dict[str, Any], case_id: str, location: str
) -> tuple[int, bytes, TreeBuilder]:
    """The index and bytes of the one leaf whose case (or check) id is ``case_id``, and
    the tree of every leaf hash. Raises InputError when there is none or more than one."""
    tree = TreeBuilder(keep_leaves=True)
    found: list[tuple[int, bytes]] = []
    if bundle["schema"] == BUNDLE_SCHEMA:
        # Case lines of a verified bundle are canonical (claim 8), so the id appears
        # spelled exactly so; only the lines holding it are parsed.
        needle = b'"case_id":' + canonical.dumps(case_id)
        for entry in bundle["checks"]:
            path = entry["cases"]["path"]
            if path is None:
                continue
            data = contents.kept[path]
            view = memoryview(data)
            for start, end in _lines(data):
                index = tree.append(view[start:end])
                if data.find(needle, start, end) >= 0:
                    line = data[start:end]
                    value = canonical.loads(line, source=f"{path}: line {index}")
                    if isinstance(value, dict) and value.get("case_id") == case_id:
                        found.append((index, line))
    else:
        leaves = case_leaves(contents, bundle)
        tree.extend(leaves)
        for index, entry in enumerate(bundle["checks"]):
            if entry["check_id"] == case_id:
                value = canonical.loads(leaves[index], source=entry["result"])
                if not (isinstance(value, dict) and value.get("check_id") == case_id):
                    raise InputError(
                        f"{shown(location)}: {shown(entry['result'])} does not hold check "
                        f"'{shown(case_id)}' that bundle.json maps to it"
                    )
                found.append((index, leaves[index]))
    if not found:
        raise InputError(
            f"case_id: {shown(location)}: no exported case with id '{shown(case_id)}'",
            param="case_id",
        )
    if len(found) > 1:
        raise InputError(
            f"{shown(location)}: case id '{shown(case_id)}' occurs more than once; a proof "
            "needs one leaf"
        )
    index, leaf = found[0]
    return index, leaf, tree


def prove_case(
    location: str,
    case_id: str,
    *,
    options: VerifyOptions | None = None,
    stream: BinaryIO | None = None,
) -> dict[str, Any]:
    """The case proof object for ``case_id`` in a verified bundle.

    The proof carries one head signature (``chosen_signature``): with allowed signers
    (and an identity), the first that verifies by that signer, else the first that is
    valid, the embedded one before the sidecars in ``options.sidecars``. The proof is
    one that ``check_proof`` accepts: a case too large for a proof file is refused
    here. Raises VerificationFailed (exit 1) when the bundle does not verify (with
    allowed signers: when no signature verifies by one), InputError (exit 3) when it
    cannot be read, holds no such case, or the case cannot be written as a proof.
    """
    options = options or VerifyOptions()
    result, contents = read_verified_bundle(location, options, action="prove", stream=stream)
    signature = chosen_signature(result, options, contents)
    bundle = canonical.loads(contents.kept["data/bundle.json"], source="data/bundle.json")
    index, leaf, tree = _find_leaf(contents, bundle, case_id, location)
    del bundle
    proof = build_proof(
        contents,
        index,
        leaf,
        tree,
        case_id=case_id,
        location=location,
        signature=signature,
    )
    del contents, tree
    refuse_unreadable(proof, case_id, location)
    return proof
