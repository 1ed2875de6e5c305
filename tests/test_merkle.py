"""The case tree (SPEC section 11.1) and inclusion proofs (SPEC section 11.4)."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import time
from pathlib import Path
from typing import Any

import pymerkle
import pytest

from bundler.core.errors import InputError
from bundler.trust.merkle import (
    EMPTY_ROOT,
    InclusionError,
    InclusionFailure,
    TreeBuilder,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root_from_leaf_hashes,
    verify_inclusion,
)

PROBES = Path(__file__).resolve().parent / "data" / "ct-inclusion"

# SPEC section 11.1: the 8-leaf tree used across CT implementations.
CT_LEAVES = [
    bytes.fromhex(h)
    for h in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
CT_ROOTS = {
    1: "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    2: "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    3: "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    4: "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    5: "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    6: "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    7: "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    8: "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
}
CT_PROOF_LEAF0 = [
    "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
    "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
]


def _reference_root(hashes: list[bytes]) -> bytes:
    """RFC 6962 MTH written out recursively, as the RFC states it."""
    n = len(hashes)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return hashes[0]
    k = 1
    while k * 2 < n:
        k *= 2
    return hashlib.sha256(
        b"\x01" + _reference_root(hashes[:k]) + _reference_root(hashes[k:])
    ).digest()


# --- hashing basics ------------------------------------------------------------------


def test_hash_prefixes_and_empty_root() -> None:
    assert leaf_hash(b"abc") == hashlib.sha256(b"\x00abc").digest()
    left, right = b"L" * 32, b"R" * 32
    assert node_hash(left, right) == hashlib.sha256(b"\x01" + left + right).digest()
    assert EMPTY_ROOT.hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert TreeBuilder().root() == EMPTY_ROOT
    assert root_from_leaf_hashes([]) == EMPTY_ROOT


# --- SPEC 11.1 vectors ---------------------------------------------------------------


@pytest.mark.parametrize("n", sorted(CT_ROOTS))
def test_ct_vector_roots(n: int) -> None:
    builder = TreeBuilder()
    builder.extend(CT_LEAVES[:n])
    assert builder.size == n
    assert builder.root().hex() == CT_ROOTS[n]
    assert root_from_leaf_hashes([leaf_hash(x) for x in CT_LEAVES[:n]]).hex() == CT_ROOTS[n]


def test_ct_vector_proof_of_leaf_0() -> None:
    hashes = [leaf_hash(x) for x in CT_LEAVES]
    proof = inclusion_proof(hashes, 0)
    assert [p.hex() for p in proof] == CT_PROOF_LEAF0
    verify_inclusion(hashes[0], 0, 8, proof, bytes.fromhex(CT_ROOTS[8]))


def test_builder_root_is_available_after_every_append() -> None:
    builder = TreeBuilder()
    for n, leaf in enumerate(CT_LEAVES, start=1):
        assert builder.append(leaf) == n - 1
        assert builder.root().hex() == CT_ROOTS[n]


# --- the 98 probes -------------------------------------------------------------------


def _probe_files() -> list[Path]:
    if not PROBES.is_dir():
        pytest.fail(f"inclusion probes missing: {PROBES}")
    return sorted(PROBES.rglob("*.json"))


def _b64(value: str) -> bytes:
    return base64.b64decode(value, validate=True)


def _load_probe(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_probe_count_is_98() -> None:
    assert len(_probe_files()) == 98


def test_every_probe_gives_its_expected_outcome() -> None:
    accepted: list[str] = []
    wrong: list[str] = []
    files = _probe_files()
    for path in files:
        probe = _load_probe(path)
        name = str(path.relative_to(PROBES))
        try:
            verify_inclusion(
                _b64(probe["leafHash"]),
                probe["leafIdx"],
                probe["treeSize"],
                [_b64(p) for p in probe["proof"] or []],
                _b64(probe["root"]),
            )
        except InclusionError:
            if not probe["wantErr"]:
                wrong.append(f"{name}: refused, want accepted")
        else:
            accepted.append(name)
            if probe["wantErr"]:
                wrong.append(f"{name}: accepted, want refused")
    assert wrong == []
    want_accepted = sum(1 for p in files if not _load_probe(p)["wantErr"])
    assert len(accepted) == want_accepted
    assert want_accepted > 0


def test_happy_probes_match_our_proofs_of_the_ct_tree() -> None:
    """The probes' happy paths are proofs in prefixes of the SPEC's 8-leaf tree."""
    hashes = [leaf_hash(x) for x in CT_LEAVES]
    checked = 0
    for path in _probe_files():
        probe = _load_probe(path)
        if probe["wantErr"] or probe["treeSize"] < 2:
            continue
        size, index = probe["treeSize"], probe["leafIdx"]
        assert _b64(probe["root"]).hex() == CT_ROOTS[size]
        assert _b64(probe["leafHash"]) == hashes[index]
        assert inclusion_proof(hashes[:size], index) == [_b64(p) for p in probe["proof"]]
        checked += 1
    assert checked == 4


def test_refusals_name_their_reason() -> None:
    hashes = [leaf_hash(x) for x in CT_LEAVES]
    root = bytes.fromhex(CT_ROOTS[8])
    proof = inclusion_proof(hashes, 3)
    cases = [
        ((hashes[3], 3, 8, [*proof[:-1], proof[-1][:31]], root), InclusionFailure.HASH_SIZE),
        ((hashes[3][:31], 3, 8, proof, root), InclusionFailure.HASH_SIZE),
        ((hashes[3], 3, 8, proof, root + b"\x00"), InclusionFailure.HASH_SIZE),
        ((hashes[3], 8, 8, proof, root), InclusionFailure.INDEX_OUT_OF_RANGE),
        ((hashes[3], -1, 8, proof, root), InclusionFailure.INDEX_OUT_OF_RANGE),
        ((hashes[3], 3, 8, proof[:-1], root), InclusionFailure.PROOF_LENGTH),
        ((hashes[3], 3, 8, [*proof, proof[0]], root), InclusionFailure.PROOF_LENGTH),
        ((hashes[2], 3, 8, proof, root), InclusionFailure.ROOT_MISMATCH),
    ]
    for args, reason in cases:
        with pytest.raises(InclusionError) as info:
            verify_inclusion(*args)
        assert info.value.reason is reason
        assert info.value.exit_code == 1
        assert "\n" not in info.value.message


# --- cross-check against pymerkle ----------------------------------------------------


def _pymerkle_tree(leaves: list[bytes]) -> Any:
    # pymerkle's default "security" mode prefixes leaves with 0x00 and nodes with 0x01,
    # and its unoptimised root is the RFC's recursive MTH (split at the largest power of
    # two below n); the empty tree hashes to sha256 of nothing.
    tree = pymerkle.InmemoryTree(algorithm="sha256", disable_optimizations=True)
    assert tree.leaf_prefix == b"\x00"
    assert tree.node_prefix == b"\x01"
    assert tree.hash_empty() == hashlib.sha256(b"").digest()
    for leaf in leaves:
        tree.append_entry(leaf)
    return tree


def _sizes() -> list[int]:
    sizes = set(range(1, 70))
    for exponent in range(1, 11):
        power = 1 << exponent
        sizes.update({power - 1, power, power + 1})
    sizes.update({1000, 1999, 2000})
    sizes.update(random.Random(6962).sample(range(70, 2000), 25))
    return sorted(s for s in sizes if 1 <= s <= 2000)


def test_roots_match_pymerkle_on_random_trees() -> None:
    rng = random.Random(9162)
    sizes = _sizes()
    assert {1, 2, 3, 1023, 1024, 1025, 2000} <= set(sizes)
    for size in sizes:
        leaves = [rng.randbytes(rng.randrange(0, 48)) for _ in range(size)]
        builder = TreeBuilder()
        builder.extend(leaves)
        expected = _pymerkle_tree(leaves).get_root()
        assert builder.root() == expected, size


def test_proofs_match_pymerkle_and_reference_root() -> None:
    rng = random.Random(17)
    for size in (1, 2, 3, 5, 8, 13, 64, 100, 255, 256, 257):
        leaves = [rng.randbytes(8) for _ in range(size)]
        hashes = [leaf_hash(x) for x in leaves]
        tree = _pymerkle_tree(leaves)
        assert root_from_leaf_hashes(hashes) == _reference_root(hashes)
        for index in {0, size // 2, size - 1}:
            theirs = tree.prove_inclusion(index + 1)
            # pymerkle's path starts with the leaf itself, then the siblings upwards.
            assert theirs.path[0] == hashes[index]
            assert inclusion_proof(hashes, index) == list(theirs.path[1:])


# --- round trips ---------------------------------------------------------------------


def test_every_proof_round_trips_for_sizes_1_to_64() -> None:
    for size in range(1, 65):
        builder = TreeBuilder(keep_leaves=True)
        builder.extend(f"case-{i}".encode() for i in range(size))
        root = builder.root()
        hashes = builder.leaf_hashes
        assert root == _reference_root(list(hashes))
        for index in range(size):
            proof = builder.inclusion_proof(index)
            assert len(proof) <= (size - 1).bit_length()
            verify_inclusion(hashes[index], index, size, proof, root)
            if size > 1:
                other = (index + 1) % size
                with pytest.raises(InclusionError):
                    verify_inclusion(hashes[other], index, size, proof, root)


def test_20000_leaves_build_fast_and_prove_in_15_hashes() -> None:
    leaves = [i.to_bytes(4, "big") * 32 for i in range(20_000)]
    started = time.perf_counter()
    builder = TreeBuilder(keep_leaves=True)
    builder.extend(leaves)
    root = builder.root()
    elapsed = time.perf_counter() - started
    assert elapsed < 1.0, f"20,000-leaf tree took {elapsed:.3f} s"
    proof = builder.inclusion_proof(12_345)
    assert len(proof) == 15
    verify_inclusion(builder.leaf_hashes[12_345], 12_345, 20_000, proof, root)
    assert root == _reference_root(list(builder.leaf_hashes))


# --- misuse --------------------------------------------------------------------------


def test_builder_refuses_bad_leaf_hash_and_missing_leaves() -> None:
    builder = TreeBuilder()
    with pytest.raises(InputError, match="32 bytes"):
        builder.append_leaf_hash(b"\x00" * 31)
    builder.append(b"x")
    with pytest.raises(InputError, match="keep_leaves"):
        builder.inclusion_proof(0)


def test_inclusion_proof_refuses_index_outside_tree() -> None:
    hashes = [leaf_hash(b"a"), leaf_hash(b"b")]
    for index in (-1, 2):
        with pytest.raises(InputError, match="outside the tree"):
            inclusion_proof(hashes, index)
    with pytest.raises(InputError):
        inclusion_proof([], 0)
