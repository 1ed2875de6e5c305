"""Signing bundle heads and proving single cases (SPEC sections 11.3 and 11.4).

``sign_bundle`` verifies an archive, then signs its ``bundle-head.json`` into a sidecar.
``prove_case`` verifies a bundle and writes an ``evalbook.case_proof.v1`` for one case:
the head, its signature, the case and its RFC 6962 audit path. ``check_proof`` checks
such a proof without the bundle: leaf hash, audit path, root against the head, and the
head against a signature or an expected bundle digest.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from bundler import canonical, schemas
from bundler.bag_reader import BagContents
from bundler.errors import BundlerError, CanonicalJSONError, InputError, SchemaError
from bundler.export import HEAD_FILE, HEAD_SIG_FILE
from bundler.merkle import InclusionError, TreeBuilder, leaf_hash, verify_inclusion
from bundler.verify import Verification, VerifyOptions, read_verified

PROOF_SCHEMA = "evalbook.case_proof.v1"


class NotProven(BundlerError):
    """A well-formed proof that does not prove its case (exit 1)."""

    exit_code = 1


@dataclass(frozen=True)
class ProofCheck:
    case_id: str
    leaf_index: int
    tree_size: int
    bundle_digest: str
    report_id: str
    anchor: str  # how the head was anchored
    anchored: bool


def head_of(contents: BagContents) -> bytes:
    head = contents.kept.get(HEAD_FILE)
    if head is None:
        raise InputError(f"{contents.source}: {HEAD_FILE} is missing")
    return head


def sign_bundle(
    location: str, sign: Callable[[bytes], str], *, options: VerifyOptions | None = None
) -> tuple[str, Verification]:
    """Verify the archive and return the armored signature of its head (for a sidecar)."""
    result, contents = read_verified(location, options or VerifyOptions(), action="sign")
    return sign(head_of(contents)), result


def _case_leaves(
    contents: BagContents, bundle: dict[str, Any]
) -> tuple[list[bytes], dict[str, Any]]:
    """The case lines in export order and the bundle's tree (EvalBook or eval-banana)."""
    leaves: list[bytes] = []
    if "checks" in bundle and bundle["schema"] == "evalbook.reproducibility_bundle.v1":
        for entry in bundle["checks"]:
            path = entry["cases"]["path"]
            if path is None:
                continue
            data = contents.kept[path]
            leaves.extend(data.split(b"\n")[:-1])
    else:
        from bundler import ebverify

        leaves = ebverify.case_leaves(contents, bundle)
    return leaves, bundle["cases_tree"]


def prove_case(
    location: str,
    case_id: str,
    *,
    options: VerifyOptions | None = None,
    stream: BinaryIO | None = None,
    sidecar_signature: str | None = None,
) -> dict[str, Any]:
    """The case proof object for ``case_id`` in a verified bundle.

    Raises InputError when the bundle does not verify or holds no such case.
    """
    _, contents = read_verified(location, options or VerifyOptions(), action="prove", stream=stream)
    bundle = canonical.loads(contents.kept["data/bundle.json"], source="data/bundle.json")
    head = canonical.loads(head_of(contents), source=HEAD_FILE)
    leaves, _ = _case_leaves(contents, bundle)
    index = None
    case = None
    for i, raw in enumerate(leaves):
        value = canonical.loads(raw, source=f"case {i}")
        if isinstance(value, dict) and value.get("case_id", value.get("check_id")) == case_id:
            if index is not None:
                raise InputError(
                    f"{location}: case id {case_id!r} occurs more than once; a proof needs one leaf"
                )
            index, case = i, value
    if index is None:
        raise InputError(f"{location}: no exported case with id {case_id!r}")
    tree = TreeBuilder(keep_leaves=True)
    tree.extend(leaves)
    signature = sidecar_signature
    if signature is None and HEAD_SIG_FILE in contents.kept:
        signature = contents.kept[HEAD_SIG_FILE].decode("ascii", "replace")
    proof: dict[str, Any] = {
        "schema": PROOF_SCHEMA,
        "head": head,
        "head_signature": signature,
        "case": case,
        "leaf_index": index,
        "audit_path": [h.hex() for h in tree.inclusion_proof(index)],
    }
    if leaves[index] != canonical.dumps(case):
        # eval-banana leaves are the verbatim check files (SPEC 11.1), not JCS bytes.
        proof["case_bytes"] = base64.b64encode(leaves[index]).decode("ascii")
    return proof


def check_proof(
    data: bytes,
    *,
    source: str,
    check_signature: Callable[[bytes, str | None], str] | None = None,
    expect_bundle_digest: str | None = None,
) -> ProofCheck:
    """Check a case proof without the bundle.

    Raises InputError (exit 3) for a malformed proof, NotProven (exit 1) when it does not
    prove its case or its head does not match the anchor given.
    """
    text = data[:-1] if data.endswith(b"\n") else data
    try:
        proof = canonical.loads_canonical(text, source=source)
        schemas.validate("case-proof", proof, source=source)
    except (CanonicalJSONError, SchemaError) as exc:
        raise InputError(f"malformed proof: {exc.message}") from exc
    head = proof["head"]
    hashes: list[bytes] = [bytes.fromhex(h) for h in proof["audit_path"]]
    leaf = leaf_hash(_leaf_bytes(proof, source))
    size = head["cases_tree"]["tree_size"]
    root = bytes.fromhex(head["cases_tree"]["root"])
    try:
        verify_inclusion(leaf, proof["leaf_index"], size, hashes, root)
    except InclusionError as exc:
        raise NotProven(f"{source}: the case is not proven in the tree of the head: {exc}") from exc
    head_bytes = canonical.dumps(head)
    anchors = []
    signed = False
    if check_signature is not None:
        try:
            signer = check_signature(head_bytes, proof["head_signature"])
        except BundlerError as exc:
            raise NotProven(f"{source}: head signature: {exc.message}") from exc
        anchors.append(f"signed by {signer}")
        signed = True
    if expect_bundle_digest is not None:
        if head["bundle_digest"] != expect_bundle_digest:
            raise NotProven(
                f"{source}: head names bundle {head['bundle_digest']}, expected {expect_bundle_digest}"
            )
        # The proof does not carry bundle.json, so only a signature binds the head's case
        # tree to that digest; without one, the author of the proof chose the whole head.
        anchors.append(
            f"head names the expected bundle {expect_bundle_digest}"
            + (
                ""
                if signed
                else " (unsigned: nothing binds its case tree to that bundle; verify the bundle or use a signed head)"
            )
        )
    case = proof["case"]
    return ProofCheck(
        case_id=str(case.get("case_id", case.get("check_id"))),
        leaf_index=proof["leaf_index"],
        tree_size=size,
        bundle_digest=head["bundle_digest"],
        report_id=head["report_id"],
        anchor="; ".join(anchors)
        or "none: the proof ties the case to this head only, not to a signer or a known bundle",
        anchored=signed,
    )


def _leaf_bytes(proof: dict[str, Any], source: str) -> bytes:
    """The leaf: the case's JCS bytes, or the verbatim ``case_bytes`` that must parse to it."""
    if "case_bytes" not in proof:
        return canonical.dumps(proof["case"])
    try:
        raw = base64.b64decode(proof["case_bytes"], validate=True)
        parsed = canonical.loads(raw, source=f"{source}: case_bytes")
    except (binascii.Error, CanonicalJSONError) as exc:
        raise InputError(
            f"malformed proof: {source}: case_bytes is not base64 of a JSON document"
        ) from exc
    if parsed != proof["case"]:
        raise NotProven(f"{source}: case_bytes do not hold the case shown")
    return raw


def write_sidecar(archive: Path, signature: str) -> Path:
    from bundler.outputs import write_new_file

    target = Path(str(archive) + ".sig")
    write_new_file(target, signature.encode("ascii"))
    return target
