"""Single-case proofs (SPEC sections 11.3 and 11.4): building one, its file, checking it.

``build_proof`` makes an ``evalbook.case_proof.v1`` for one case of a verified bundle:
the head, its signature, the case and its RFC 6962 audit path (reading and verifying
the bundle first is ``bundler.bundles.proof``'s). ``check_proof`` checks such a proof
without the bundle; ``write_sidecar`` writes a head signature beside an archive.

A proof file is untrusted input, read in one place, ``CaseProof.from_bytes``, which
refuses (``InputError``, exit 3) before any hash is computed:

- a file over ``MAX_PROOF_BYTES``, or whose ``canonical.value_bound`` is over
  ``MAX_PROOF_VALUES``, before it is parsed (a proof is one case and about 1 KB besides);
- what section 2 refuses (duplicate keys, NaN, lone surrogates, nesting over 64...), a
  schema-invalid proof, and what JSON Schema cannot say: ``leaf_index`` and
  ``tree_size`` are whole numbers (``3.0`` and ``3e0`` are ``3``, as JCS writes them;
  ``3.5`` and ``true`` are not), ``tree_size`` at most
  ``MAX_TREE_SIZE``, every hash 64 lowercase hex digits, the case id a string,
  ``case_bytes`` canonical base64 of a JSON document.

Layout never matters: every hash is computed from canonical bytes, so a pretty-printed,
re-ordered or CRLF copy of a proof is the same proof. Values are compared as the
contract hashes them, as JCS bytes, never with Python's ``==`` (which says
``True == 1`` and ``1 == 1.0``).

A well-formed proof is then proven or not (``NotProven``, exit 1): the leaf leads to the
head's root, ``case_bytes`` parse to exactly the case shown, and the head is anchored
as asked. A digest alone anchors nothing (anyone who knows a bundle digest can build a
one-leaf head naming it): ``expect_bundle_digest`` binds only with a valid signature.
"""

from __future__ import annotations

import base64
import binascii
import errno
import os
import re
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundler.archive.reader import MAX_CASES, MAX_MEMBERS
from bundler.core import canonical, schemas
from bundler.core.errors import (
    BundlerError,
    CanonicalJSONError,
    InputError,
    Named,
    SchemaError,
)
from bundler.core.textsafe import shown
from bundler.trust.merkle import InclusionError, TreeBuilder, verify_inclusion
from bundler.trust.merkle import leaf_hash as hash_leaf

if TYPE_CHECKING:
    from bundler.archive.bag_reader import BagContents

PROOF_SCHEMA = "evalbook.case_proof.v1"

# A case tree has one leaf per exported case: at most 20,000 in an EvalBook bundle
# (SPEC 4.3), and one per check file in an eval-banana bundle (SPEC 11.1), each a member
# of the archive, so never more than the archive reader's member limit (65,536). The
# proof schema states the same numbers; a test keeps them equal.
MAX_TREE_SIZE = max(MAX_CASES, MAX_MEMBERS)
# The longest audit path of any tree of at most MAX_TREE_SIZE leaves: ceil(log2(n)).
MAX_AUDIT_PATH = (MAX_TREE_SIZE - 1).bit_length()
# A proof is one case plus about a kilobyte of head, signature and path. Parsed, JSON
# text can grow fourfold (one astral character makes a string four bytes a character),
# and the strict parser's fallback parses twice. 8 MiB keeps the worst proofs well
# within the 300 MB budget of SPEC 5 (Resources): proofs built to use the most memory
# (a long astral string, a million values, a duplicate key at the end) peak under 170 MB
# for the whole command. A case too large for it cannot be proven, and `prove` refuses
# it rather than write a proof `check-proof` would refuse.
MAX_PROOF_BYTES = 8 * 1024 * 1024
# Parsed JSON costs far more than its text (an empty object is 64 bytes of Python, a key
# about 60, and the strict parser's fallback doubles that): a proof whose
# ``canonical.value_bound`` is over this is refused before parsing. An eighth of the
# document cap ``canonical.MAX_VALUES``, so that the slowest parse (a quarter of a
# million keys and a duplicate at the end) stays within seconds; about 20,000 payload
# references in one case.
MAX_PROOF_VALUES = canonical.MAX_VALUES // 8
# The armored SSHSIG of an Ed25519 key is under 400 characters; the schema allows this.
MAX_SIGNATURE_BYTES = 65536

_HEX_HASH = re.compile(r"[0-9a-f]{64}")
_UNANCHORED = (
    "none: the proof is unanchored; it ties the case to this head only, not to a signer "
    "or a known bundle (check the head's signature with --allowed-signers)"
)


class NotProven(BundlerError):
    """A well-formed proof that does not prove its case (exit 1).

    ``to_json()`` is the object ``check-proof --json`` prints for it (SPEC 7.1: the
    library's answer and the command's are one), once ``source`` names the proof."""

    exit_code = 1
    source: str = "<proof>"

    def to_json(self) -> dict[str, object]:
        """The ``evalbook.proof_check.v1`` record of a proof that proves nothing."""
        return {
            "schema": "evalbook.proof_check.v1",
            "source": self.source,
            "proven": False,
            "reason": self.message,
            "exit_code": self.exit_code,
            "input": self.source,
        }


@dataclass(frozen=True)
class ProofCheck:
    case_id: str
    leaf_index: int
    tree_size: int
    bundle_digest: str
    report_id: str
    anchor: str  # how the head was anchored
    anchored: bool
    signer: str | None = None  # "ID, key SHA256:..." when a signature anchors the head


@dataclass(frozen=True)
class CaseProof:
    """A proof file read and checked for form; nothing in it is proven yet."""

    head: dict[str, Any]
    head_signature: str | None
    case_id: str
    leaf: bytes  # the leaf bytes: the case's JCS form, or the decoded case_bytes
    leaf_index: int
    tree_size: int
    root: bytes
    audit_path: tuple[bytes, ...]

    @property
    def bundle_digest(self) -> str:
        return str(self.head["bundle_digest"])

    @property
    def report_id(self) -> str:
        return str(self.head["report_id"])

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str) -> CaseProof:
        """Parse and check the form of a proof file (any layout of the same JSON).

        Raises InputError (exit 3, "malformed proof: ...") for anything that is not a
        proof, NotProven (exit 1) when ``case_bytes`` do not hold the case shown.
        """
        _check_size(data, source, "proof")
        try:
            proof = canonical.loads(data, source=source, max_values=MAX_PROOF_VALUES)
            del data
            schemas.validate("case-proof", proof, source=source)
        except (CanonicalJSONError, SchemaError) as exc:
            raise _malformed(exc.message) from exc
        head = proof["head"]
        tree = head["cases_tree"]
        leaf_index = _integer(proof["leaf_index"], "leaf_index", MAX_TREE_SIZE - 1, source)
        tree_size = _integer(tree["tree_size"], "head.cases_tree.tree_size", MAX_TREE_SIZE, source)
        if len(proof["audit_path"]) > MAX_AUDIT_PATH:
            raise _malformed(
                f"{source}: audit_path has {len(proof['audit_path'])} hashes; no tree of at "
                f"most {MAX_TREE_SIZE} leaves needs more than {MAX_AUDIT_PATH}"
            )
        root = _hash(tree["root"], "head.cases_tree.root", source)
        path = tuple(
            _hash(h, f"audit_path[{i}]", source) for i, h in enumerate(proof["audit_path"])
        )
        case = proof.pop("case")
        case_id = _case_id(case, source)
        leaf = canonical.dumps(case)
        del case
        if "case_bytes" in proof:
            leaf = _case_bytes(proof.pop("case_bytes"), leaf, source)
        return cls(
            head=head,
            head_signature=proof["head_signature"],
            case_id=case_id,
            leaf=leaf,
            leaf_index=leaf_index,
            tree_size=tree_size,
            root=root,
            audit_path=path,
        )


def _malformed(message: str) -> InputError:
    return InputError(f"malformed proof: {shown(message)}")


def _check_size(data: bytes, source: str, what: str) -> None:
    if len(data) > MAX_PROOF_BYTES:
        raise _malformed(
            f"{source}: {what} of {len(data)} bytes, over the {MAX_PROOF_BYTES} bytes a "
            "proof may hold (refused before parsing)"
        )


def _integer(value: Any, name: str, maximum: int, source: str) -> int:
    # A number is read as JCS writes it (SPEC 11.4: any formatting of the same JSON is
    # the same proof): 3.0 and 3e0 are 3, as the JavaScript checker reads them; 3.5 and
    # true are not integers.
    if type(value) is float and value.is_integer() and abs(value) <= 2**53 - 1:
        value = int(value)
    if type(value) is not int or not 0 <= value <= maximum:
        raise _malformed(
            f"{source}: {name} must be an integer from 0 to {maximum}, "
            f"not {canonical.dumps(value).decode()[:40]}"
        )
    return value


def _hash(value: Any, name: str, source: str) -> bytes:
    # bytes.fromhex alone would take uppercase and spaces.
    if not isinstance(value, str) or _HEX_HASH.fullmatch(value) is None:
        raise _malformed(f"{source}: {name} must be 64 lowercase hex digits (32 bytes)")
    return bytes.fromhex(value)


def _case_id(case: dict[str, Any], source: str) -> str:
    key = "case_id" if "case_id" in case else "check_id"
    value = case.get(key)
    if not isinstance(value, str):
        raise _malformed(
            f"{source}: case.{key} must be a string (the case's id; check_id for an "
            "eval-banana check)"
        )
    return value


def _case_bytes(encoded: str, shown_jcs: bytes, source: str) -> bytes:
    """The leaf from ``case_bytes``, which must parse to exactly the case shown.

    Equal means equal JCS bytes: the contract's own identity of JSON values, under which
    ``true`` is not ``1``, ``"1"`` is not ``1``, an absent key is not ``null`` and key
    order or number spelling (``1.0``, ``1e0``) do not count.
    """
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _malformed(f"{source}: case_bytes is not base64") from exc
    if base64.b64encode(raw).decode("ascii") != encoded:
        raise _malformed(f"{source}: case_bytes is not in canonical base64 (RFC 4648)")
    del encoded
    _check_size(raw, f"{source}: case_bytes", "document")
    try:
        parsed = canonical.loads(raw, source=f"{source}: case_bytes", max_values=MAX_PROOF_VALUES)
        parsed_jcs = canonical.dumps(parsed)
        del parsed
    except CanonicalJSONError as exc:
        raise _malformed(exc.message) from exc
    if parsed_jcs != shown_jcs:
        at = _first_difference(parsed_jcs, shown_jcs)
        raise NotProven(
            f"{shown(source)}: case_bytes do not hold the case shown (their canonical forms "
            f"differ at byte {at}); the leaf proven would not be the case you read"
        )
    return raw


def _first_difference(left: bytes, right: bytes) -> int:
    """The offset of the first byte where ``left`` and ``right`` differ."""
    low, high = 0, min(len(left), len(right))
    # Halve the common prefix by comparing slices (C speed), not byte by byte.
    while low < high:
        mid = (low + high + 1) // 2
        if left[low:mid] == right[low:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def read_bounded(path: str, *, limit: int, what: str, follow: bool = True) -> bytes:
    """The bytes of the regular file ``path`` (``-``: standard input), at most ``limit``.

    Opened without blocking (a FIFO cannot hang the command) and refused unless it is a
    regular file; its size is checked before any byte is read. Raises InputError (exit
    3) naming the file and the rule.
    """
    if path == "-":
        if sys.stdin is None:  # the caller closed it: nothing to read, as Node reads it
            return b""
        try:
            data = sys.stdin.buffer.read(limit + 1)
        except OSError as exc:
            raise InputError(f"<stdin>: cannot read ({exc.strerror or exc})") from exc
        if len(data) > limit:
            raise InputError(f"<stdin>: {what} over the {limit} bytes a {what} may hold")
        return data
    try:
        # A file the command found itself (a sidecar beside the archive) is never
        # followed through a link: anyone who can write beside it can point one anywhere.
        nofollow = 0 if follow else os.O_NOFOLLOW
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | nofollow | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if not follow and exc.errno == errno.ELOOP:
            raise InputError(f"{shown(path)}: a symbolic link, not followed") from exc
        raise InputError(f"{shown(path)}: cannot read ({exc.strerror})") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(
                f"{shown(path)}: not a regular file; a {what} is read from a regular file "
                "(or - for standard input)"
            )
        if info.st_size > limit:
            raise InputError(
                f"{shown(path)}: {what} of {info.st_size} bytes, over the {limit} bytes a "
                f"{what} may hold (refused before reading)"
            )
        chunks = []
        remaining = limit + 1
        while remaining > 0 and (chunk := os.read(fd, min(remaining, 1 << 20))):
            chunks.append(chunk)
            remaining -= len(chunk)
    except OSError as exc:
        raise InputError(f"{shown(path)}: cannot read ({exc.strerror})") from exc
    finally:
        os.close(fd)
    data = b"".join(chunks)
    del chunks
    if len(data) > limit:
        raise InputError(f"{shown(path)}: {what} over the {limit} bytes a {what} may hold")
    return data


def read_proof_file(path: str) -> bytes:
    """The bytes of a proof file, refused (exit 3) over ``MAX_PROOF_BYTES`` before reading."""
    return read_bounded(path, limit=MAX_PROOF_BYTES, what="proof")


def check_proof(
    data: bytes,
    *,
    source: str,
    check_signature: Callable[[bytes, str | None], str] | None = None,
    expect_bundle_digest: str | None = None,
) -> ProofCheck:
    """Check a case proof without the bundle.

    Raises InputError (exit 3) for a malformed proof, NotProven (exit 1) when it does not
    prove its case, or is not anchored as asked: ``expect_bundle_digest`` without
    ``check_signature``, an unsigned head with either, a signature that does not verify,
    or a signed head naming another bundle.
    """
    proof = CaseProof.from_bytes(data, source=source)
    del data
    try:
        verify_inclusion(
            hash_leaf(proof.leaf), proof.leaf_index, proof.tree_size, proof.audit_path, proof.root
        )
    except InclusionError as exc:
        raise NotProven(
            f"{shown(source)}: the case is not proven in the tree of the head: {exc.message}"
        ) from exc
    anchor, signer = _anchor(proof, source, check_signature, expect_bundle_digest)
    return ProofCheck(
        case_id=proof.case_id,
        leaf_index=proof.leaf_index,
        tree_size=proof.tree_size,
        bundle_digest=proof.bundle_digest,
        report_id=proof.report_id,
        anchor=anchor,
        anchored=signer is not None,
        signer=signer,
    )


def _anchor(
    proof: CaseProof,
    source: str,
    check_signature: Callable[[bytes, str | None], str] | None,
    expect_bundle_digest: str | None,
) -> tuple[str, str | None]:
    """How the head is anchored and by whom (None: by nobody), or NotProven when it is
    not anchored as asked."""
    where = shown(source)
    if check_signature is None:
        if expect_bundle_digest is not None:
            raise NotProven.naming(
                f"{where}: ",
                Named("expect_bundle_digest"),
                " alone cannot anchor a proof: the head is whatever the proof's author "
                "wrote, and anyone who knows a bundle digest can build a one-leaf head "
                "naming it; give ",
                Named("allowed_signers"),
                " to check the head's signature, or verify the bundle itself",
            )
        _check_unanchored(proof, where)
        return _UNANCHORED, None
    if proof.head_signature is None:
        raise NotProven(
            f"{where}: the head has no signature (head_signature is null), so nothing "
            "binds it to a signer"
            + ("" if expect_bundle_digest is None else " or to the expected bundle")
        )
    try:
        signer = check_signature(canonical.dumps(proof.head), proof.head_signature)
    except BundlerError as exc:
        raise NotProven(f"{where}: head signature: {shown(exc.message)}") from exc
    anchor = f"signed by {signer}"
    if expect_bundle_digest is not None:
        if proof.bundle_digest != expect_bundle_digest:
            raise NotProven(
                f"{where}: the signed head names bundle {proof.bundle_digest}, expected "
                f"{shown(expect_bundle_digest)}"
            )
        anchor += f"; the signed head names the expected bundle {expect_bundle_digest}"
    return anchor, signer


def _check_unanchored(proof: CaseProof, where: str) -> None:
    """Without allowed signers the head is still checked against the signature the proof
    carries (SPEC 11.3, 11.4), by the one check every path uses: one that does not
    verify over the head is NotProven, whoever signed."""
    if proof.head_signature is None:
        return
    from bundler.core.signatures import SignatureSource, SignatureState
    from bundler.trust.signatures import check_one

    checked = check_one(
        canonical.dumps(proof.head),
        SignatureSource("head_signature", proof.head_signature),
        allowed=None,
        identity=None,
    )
    if checked.state is SignatureState.INVALID:
        raise NotProven(f"{where}: head signature: {shown(str(checked.reason))}")


# ----------------------------------------------------------------------------- build


def head_of(contents: BagContents) -> bytes:
    from bundler.trust.head import HEAD_FILE

    head = contents.kept.get(HEAD_FILE)
    if head is None:
        raise InputError(f"{shown(contents.source)}: {HEAD_FILE} is missing")
    return head


def build_proof(
    contents: BagContents,
    index: int,
    leaf: bytes,
    tree: TreeBuilder,
    *,
    case_id: str,
    location: str,
    signature: str | None = None,
) -> dict[str, Any]:
    """The case proof object for the leaf ``index`` (``leaf``, its bytes) of a verified
    bundle's case tree ``tree``, with the head ``contents`` holds and ``signature``
    (the head signature chosen by the caller, or None).

    Raises InputError (exit 3) when the case or the head signature is too large for a
    proof file. Check the result with ``refuse_unreadable`` before writing it.
    """
    if len(leaf) > MAX_PROOF_BYTES:
        raise InputError(
            f"{shown(location)}: case '{shown(case_id)}' is {len(leaf)} bytes; a proof holds "
            f"at most {MAX_PROOF_BYTES}, so this case cannot be proven in a proof file"
        )
    if signature is not None and len(signature) > MAX_SIGNATURE_BYTES:
        raise InputError(
            f"{shown(location)}: the head signature is {len(signature)} bytes; a proof "
            f"holds a head signature of at most {MAX_SIGNATURE_BYTES}"
        )
    case = canonical.loads(leaf, source=f"case {index}")
    proof: dict[str, Any] = {
        "schema": PROOF_SCHEMA,
        "head": canonical.loads(head_of(contents), source="bundle-head.json"),
        "head_signature": signature,
        "case": case,
        "leaf_index": index,
        "audit_path": [h.hex() for h in tree.inclusion_proof(index)],
    }
    if leaf != canonical.dumps(case):
        # eval-banana leaves are the verbatim check files (SPEC 11.1), not JCS bytes.
        proof["case_bytes"] = base64.b64encode(leaf).decode("ascii")
    return proof


def proof_file_bytes(proof: dict[str, Any]) -> bytes:
    """The bytes `prove` writes: the proof stored canonical, with a final newline."""
    return canonical.dumps(proof) + b"\n"


def refuse_unreadable(proof: dict[str, Any], case_id: str, location: str) -> None:
    """Refuse (exit 3) a proof that ``CaseProof.from_bytes`` would not read, so `prove`
    never writes a file `check-proof` calls malformed."""
    try:
        CaseProof.from_bytes(proof_file_bytes(proof), source=f"proof of '{case_id}'")
    except BundlerError as exc:
        raise InputError(
            f"{shown(location)}: case '{shown(case_id)}' cannot be written as a proof: "
            f"{exc.message.removeprefix('malformed proof: ')}"
        ) from exc


def write_sidecar(archive: Path, signature: str) -> Path:
    from bundler.core.outputs import write_new_file

    target = Path(str(archive) + ".sig")
    write_new_file(target, signature.encode("ascii"))
    return target
