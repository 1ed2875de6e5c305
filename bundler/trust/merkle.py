"""The case tree of SPEC section 11.1: an RFC 6962 Merkle tree (RFC 9162 section 2.1).

Leaf hash ``SHA-256(0x00 || leaf)``, node hash ``SHA-256(0x01 || left || right)``, a tree
of n > 1 leaves splits at the largest power of two smaller than n, and the empty tree's
hash is ``SHA-256()``.

Building is one pass over the leaves with a stack of O(log n) perfect-subtree roots
(`TreeBuilder`). Proofs follow RFC 9162 section 2.1.3.1 (`inclusion_proof`) and are
checked with the algorithm of section 2.1.3.2 (`verify_inclusion`), plus the two checks
SPEC section 11.4 adds: every hash is exactly 32 bytes and the leaf index is smaller
than the tree size.

A proof that does not check raises `InclusionError`, whose exit code is 1 ("not
proven", SPEC sections 8 and 11.4). Input that cannot be a tree at all (a leaf hash of
the wrong size handed to the builder, an index outside the leaves) raises `InputError`.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
from collections.abc import Iterable, Sequence

from bundler.core.errors import BundlerError, InputError

HASH_SIZE = 32
LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
EMPTY_ROOT = hashlib.sha256(b"").digest()


class InclusionFailure(enum.Enum):
    """Why an inclusion proof was refused."""

    HASH_SIZE = "hash-size"
    INDEX_OUT_OF_RANGE = "index-out-of-range"
    PROOF_LENGTH = "proof-length"
    ROOT_MISMATCH = "root-mismatch"


class InclusionError(BundlerError):
    """An inclusion proof that does not prove its leaf is in the tree (exit 1).

    ``reason`` says which rule failed; the message says it in words.
    """

    exit_code = 1

    def __init__(self, message: str, reason: InclusionFailure) -> None:
        super().__init__(message)
        self.reason = reason


def leaf_hash(data: bytes | bytearray | memoryview) -> bytes:
    """``SHA-256(0x00 || data)``: the hash of one leaf (``data`` is not copied)."""
    hasher = hashlib.sha256(LEAF_PREFIX)
    hasher.update(data)
    return hasher.digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 || left || right)``: the hash of an interior node."""
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


def _check_hash(value: bytes, what: str) -> None:
    if not isinstance(value, bytes) or len(value) != HASH_SIZE:
        size = len(value) if isinstance(value, bytes) else type(value).__name__
        raise InputError(f"{what}: a hash must be exactly {HASH_SIZE} bytes, got {size}")


class TreeBuilder:
    """Builds the tree hash leaf by leaf, in one pass.

    Holds one root per perfect subtree of the leaves appended so far (one per set bit
    of ``size``), so memory is O(log n) unless ``keep_leaves`` asks it to keep every leaf
    hash for proofs later.
    """

    def __init__(self, *, keep_leaves: bool = False) -> None:
        # Roots of the maximal perfect subtrees, left to right, with their leaf counts;
        # counts strictly decrease, so the stack mirrors the binary digits of `size`.
        self._stack: list[tuple[int, bytes]] = []
        self._size = 0
        self._leaves: list[bytes] | None = [] if keep_leaves else None

    @property
    def size(self) -> int:
        """Number of leaves appended so far."""
        return self._size

    @property
    def leaf_hashes(self) -> Sequence[bytes]:
        """The leaf hashes in order; raises InputError unless built with keep_leaves."""
        if self._leaves is None:
            raise InputError("tree builder was made without keep_leaves; leaf hashes are gone")
        return tuple(self._leaves)

    def append(self, leaf: bytes | bytearray | memoryview) -> int:
        """Append a leaf's bytes (hashed here); return its 0-based index."""
        return self.append_leaf_hash(leaf_hash(leaf))

    def append_leaf_hash(self, hash_: bytes) -> int:
        """Append an already computed leaf hash; return its 0-based index.

        Raises InputError if ``hash_`` is not exactly 32 bytes.
        """
        _check_hash(hash_, f"leaf {self._size}")
        index = self._size
        if self._leaves is not None:
            self._leaves.append(hash_)
        count, value = 1, hash_
        stack = self._stack
        while stack and stack[-1][0] == count:
            left_count, left = stack.pop()
            count, value = left_count + count, node_hash(left, value)
        stack.append((count, value))
        self._size += 1
        return index

    def extend(self, leaves: Iterable[bytes]) -> None:
        """Append each leaf's bytes in order."""
        for leaf in leaves:
            self.append(leaf)

    def root(self) -> bytes:
        """The tree hash of the leaves so far (``EMPTY_ROOT`` for none)."""
        if not self._stack:
            return EMPTY_ROOT
        # RFC 6962 splits at the largest power of two below n, so the root is the
        # perfect subtrees folded from the right: H(S1, H(S2, H(S3, ...))).
        value = self._stack[-1][1]
        for _, left in reversed(self._stack[:-1]):
            value = node_hash(left, value)
        return value

    def inclusion_proof(self, index: int) -> list[bytes]:
        """The audit path of leaf ``index``; needs ``keep_leaves=True``."""
        return inclusion_proof(self.leaf_hashes, index)


def _range_root(hashes: Sequence[bytes], start: int, end: int) -> bytes:
    """Tree hash of ``hashes[start:end]`` without copying the slice."""
    if start == end:
        return EMPTY_ROOT
    stack: list[tuple[int, bytes]] = []
    for i in range(start, end):
        count, value = 1, hashes[i]
        while stack and stack[-1][0] == count:
            left_count, left = stack.pop()
            count, value = left_count + count, node_hash(left, value)
        stack.append((count, value))
    value = stack[-1][1]
    for _, left in reversed(stack[:-1]):
        value = node_hash(left, value)
    return value


def root_from_leaf_hashes(hashes: Sequence[bytes]) -> bytes:
    """Tree hash of the given leaf hashes; raises InputError if one is not 32 bytes."""
    builder = TreeBuilder()
    for hash_ in hashes:
        builder.append_leaf_hash(hash_)
    return builder.root()


def _split(n: int) -> int:
    """Largest power of two strictly smaller than ``n`` (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


def path_length(index: int, tree_size: int) -> int:
    """How many hashes the audit path of leaf ``index`` in a tree of ``tree_size`` has.

    At most ``ceil(log2(tree_size))``; computed in O(log n) without hashing, so a proof
    of the wrong length is refused before any of its hashes is used. Raises InputError
    unless ``0 <= index < tree_size`` (both plain integers).
    """
    for number in (index, tree_size):
        if isinstance(number, bool) or not isinstance(number, int):
            raise InputError(f"{number!r} is not an integer")
    if not 0 <= index < tree_size:
        raise InputError(f"leaf index {index} is outside the tree of {tree_size} leaves")
    length = 0
    start, end = 0, tree_size
    while end - start > 1:
        mid = start + _split(end - start)
        if index < mid:
            end = mid
        else:
            start = mid
        length += 1
    return length


def inclusion_proof(leaf_hashes: Sequence[bytes], index: int) -> list[bytes]:
    """RFC 9162 section 2.1.3.1 PATH(index, D[n]): sibling hashes, leaf level first.

    Costs O(n) hashing for one proof and yields ceil(log2 n) hashes at most.
    Raises InputError if ``index`` is not a leaf of the tree or a hash is not 32 bytes.
    """
    n = len(leaf_hashes)
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
        raise InputError(f"leaf index {index!r} is outside the tree of {n} leaves")
    for i, hash_ in enumerate(leaf_hashes):
        _check_hash(hash_, f"leaf {i}")
    # Walk down from the root, collecting the sibling subtree at each split; PATH lists
    # them from the leaf up, so the collected list is reversed at the end.
    siblings: list[bytes] = []
    start, end = 0, n
    while end - start > 1:
        mid = start + _split(end - start)
        if index < mid:
            siblings.append(_range_root(leaf_hashes, mid, end))
            end = mid
        else:
            siblings.append(_range_root(leaf_hashes, start, mid))
            start = mid
    siblings.reverse()
    return siblings


def verify_inclusion(
    leaf_hash: bytes,
    index: int,
    tree_size: int,
    proof: Sequence[bytes],
    root: bytes,
) -> None:
    """Check that ``leaf_hash`` is leaf ``index`` of the tree of ``tree_size`` with ``root``.

    The algorithm of RFC 9162 section 2.1.3.2, plus: the leaf hash, the root and every
    proof hash must be exactly 32 bytes, and ``index`` must be below ``tree_size``.
    Returns None when the proof holds; raises InclusionError (exit 1) naming the rule
    broken otherwise.
    """
    _check_proof_hash(leaf_hash, "leaf hash")
    _check_proof_hash(root, "root")
    for position, element in enumerate(proof):
        _check_proof_hash(element, f"proof[{position}]")
    for name, number in (("leaf index", index), ("tree size", tree_size)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise InclusionError(
                f"{name} {number!r} is not a non-negative integer",
                InclusionFailure.INDEX_OUT_OF_RANGE,
            )
    if index >= tree_size:
        raise InclusionError(
            f"leaf index {index} is not below tree size {tree_size}",
            InclusionFailure.INDEX_OUT_OF_RANGE,
        )
    needed = path_length(index, tree_size)
    if len(proof) != needed:
        word = "more" if len(proof) > needed else "fewer"
        raise InclusionError(
            f"proof has {len(proof)} hashes, {word} than leaf {index} of a tree of "
            f"{tree_size} needs ({needed})",
            InclusionFailure.PROOF_LENGTH,
        )
    fn, sn = index, tree_size - 1
    value = leaf_hash
    for position, element in enumerate(proof):
        if sn == 0:
            raise InclusionError(
                f"proof has {len(proof)} hashes, more than leaf {index} of a tree of "
                f"{tree_size} needs (extra from proof[{position}])",
                InclusionFailure.PROOF_LENGTH,
            )
        if fn & 1 or fn == sn:
            value = node_hash(element, value)
            if not fn & 1:
                # A right-edge node with no right sibling: climb until we are a
                # right child again (or reach the root's left spine).
                while fn != 0 and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            value = node_hash(value, element)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise InclusionError(
            f"proof has {len(proof)} hashes, fewer than leaf {index} of a tree of "
            f"{tree_size} needs",
            InclusionFailure.PROOF_LENGTH,
        )
    if not hmac.compare_digest(value, root):
        raise InclusionError(
            f"proof for leaf {index} of a tree of {tree_size} leads to root "
            f"{value.hex()}, not {root.hex()}",
            InclusionFailure.ROOT_MISMATCH,
        )


def _check_proof_hash(value: bytes, what: str) -> None:
    if not isinstance(value, bytes) or len(value) != HASH_SIZE:
        size = f"{len(value)} bytes" if isinstance(value, bytes) else type(value).__name__
        raise InclusionError(
            f"{what} must be exactly {HASH_SIZE} bytes, got {size}",
            InclusionFailure.HASH_SIZE,
        )
