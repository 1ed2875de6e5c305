"""Single-case proofs (SPEC section 11.4): `prove` and `check-proof`.

The command line is exercised through the installed console script; the round trips over
every case of the fixture bundles and over small generated stores use
``bundler.trust.proof.prove_case``/``check_proof`` directly, to stay fast. Expected leaf
positions, roots and audit paths are derived here independently: from the case files of
the extracted archive (our own trusted output, extracted with `tar --zstd`) and with the
recursive definitions of RFC 6962 section 2.1, not with ``bundler.trust.merkle``.

Every position of trees of 1..64 leaves is already covered at the hash level by
tests/test_merkle.py; here a handful of sizes is covered at the proof-file level.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import SCENARIOS, run_cli

from bundler.bundles.proof import prove_case
from bundler.core import canonical
from bundler.evalbook.export import ExportConfig, export_bundle
from bundler.testing.fixturegen import build_large_store
from bundler.trust import sshsig
from bundler.trust.merkle import TreeBuilder
from bundler.trust.proof import NotProven, check_proof

SSH_KEYGEN = "/usr/bin/ssh-keygen"
EXPORTED_AT = datetime(2026, 11, 30, tzinfo=UTC)
PROOF_SCHEMA = "evalbook.case_proof.v1"
CASE = "accuracy-00003"  # a passing accuracy case of rpt-clean: integer score 1, leaf 3 of 32


# ------------------------------------------------------- independent RFC 6962 helpers


def _leaf(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def _split(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def _mth(hashes: list[bytes]) -> bytes:
    """MTH(D[n]) of RFC 6962 section 2.1, over leaf hashes, written out recursively."""
    if not hashes:
        return hashlib.sha256(b"").digest()
    if len(hashes) == 1:
        return hashes[0]
    k = _split(len(hashes))
    return hashlib.sha256(b"\x01" + _mth(hashes[:k]) + _mth(hashes[k:])).digest()


def _path(m: int, hashes: list[bytes]) -> list[bytes]:
    """PATH(m, D[n]) of RFC 6962 section 2.1.1, leaf level first."""
    if len(hashes) == 1:
        return []
    k = _split(len(hashes))
    if m < k:
        return [*_path(m, hashes[:k]), _mth(hashes[k:])]
    return [*_path(m - k, hashes[k:]), _mth(hashes[:k])]


def _path_length(m: int, n: int) -> int:
    if n == 1:
        return 0
    k = _split(n)
    return 1 + (_path_length(m, k) if m < k else _path_length(m - k, n - k))


def _jcs(value: Any) -> bytes:
    """RFC 8785 for values of only ASCII-keyed objects, strings, integers, bools, null."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


# --------------------------------------------------------------------- other helpers


def _extract(archive: Path, dest: Path, *members: str) -> Path:
    """Extract with GNU tar (trusted output only) and return the bag directory.

    ``members`` are tar wildcards limiting what is written (default: everything).
    """
    if shutil.which("tar") is None or shutil.which("zstd") is None:
        pytest.fail("tar and zstd are required to extract archives the way an auditor would")
    dest.mkdir(parents=True)
    select = ["--wildcards", *members] if members else []
    done = subprocess.run(
        ["tar", "--zstd", "-xf", str(archive), "-C", str(dest), *select],
        capture_output=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    (bag,) = list(dest.iterdir())
    return bag


def _case_lines(bag: Path) -> list[bytes]:
    """Exported case lines in export order: checks as bundle.json lists them, then lines."""
    bundle = json.loads((bag / "data" / "bundle.json").read_bytes())
    lines: list[bytes] = []
    for check in bundle["checks"]:
        if check["cases"]["path"] is not None:
            data = (bag / check["cases"]["path"]).read_bytes()
            assert data.endswith(b"\n") or not data
            lines.extend(data.split(b"\n")[:-1])
    return lines


def _case_id(line: bytes) -> str:
    value = json.loads(line)
    assert isinstance(value["case_id"], str)
    return value["case_id"]


def _keygen(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([SSH_KEYGEN, *args], capture_output=True, check=False, timeout=60)


@dataclass(frozen=True)
class Signer:
    key: Path
    allowed: Path  # allowed_signers naming "alice"
    fingerprint: str  # as `ssh-keygen -lf key.pub` prints it

    def sign(self, message: bytes) -> str:
        return sshsig.sign(message, sshsig.load_private_key(self.key, passphrase=None))


@pytest.fixture(scope="module")
def signer(tmp_path_factory: pytest.TempPathFactory) -> Signer:
    if not Path(SSH_KEYGEN).is_file():
        pytest.fail(f"{SSH_KEYGEN} is required: signatures must interoperate with OpenSSH")
    root = tmp_path_factory.mktemp("proof-keys")
    key = root / "alice"
    done = _keygen("-q", "-t", "ed25519", "-N", "", "-C", "x", "-f", str(key))
    assert done.returncode == 0, done.stderr.decode()
    key_type, blob = Path(f"{key}.pub").read_text(encoding="utf-8").split()[:2]
    allowed = root / "allowed_signers"
    allowed.write_text(f"alice {key_type} {blob}\n", encoding="utf-8")
    printed = _keygen("-lf", f"{key}.pub")
    assert printed.returncode == 0
    return Signer(key, allowed, printed.stdout.decode().split()[1])


@dataclass(frozen=True)
class Bundle:
    archive: Path
    bag: Path
    digest: str
    lines: list[bytes]

    @property
    def head(self) -> dict[str, Any]:
        value = json.loads((self.bag / "bundle-head.json").read_bytes())
        assert isinstance(value, dict)
        return value


@pytest.fixture(scope="module")
def signed(fixture_store: Path, signer: Signer, tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    """rpt-clean exported with an embedded head signature by alice (read-only)."""
    root = tmp_path_factory.mktemp("proof-signed")
    archive = root / "signed.tar.zst"
    result = export_bundle(
        ExportConfig(
            str(fixture_store), "rpt-clean", "alice", EXPORTED_AT, out=archive, sign=signer.sign
        )
    )
    bag = _extract(archive, root / "x")
    return Bundle(archive, bag, result.bundle_digest, _case_lines(bag))


@pytest.fixture(scope="module")
def proof_bytes(signed: Bundle, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """`prove signed --case CASE` as written to stdout."""
    done = run_cli("prove", str(signed.archive), "--case", CASE)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b""
    return done.stdout


def _check(path: Path, *extra: str) -> subprocess.CompletedProcess[bytes]:
    return run_cli("check-proof", str(path), *extra)


def _line(stderr: bytes, label: str) -> str:
    lines = [x for x in stderr.decode().splitlines() if x.startswith(label + ":")]
    assert len(lines) == 1, stderr.decode()
    return lines[0].split(":", 1)[1].strip()


# ------------------------------------------------------------------------------ prove


def test_prove_prints_a_canonical_proof_of_the_case(signed: Bundle, proof_bytes: bytes) -> None:
    assert proof_bytes.endswith(b"}\n")
    body = proof_bytes[:-1]
    proof = json.loads(body)
    assert body == _jcs(proof)  # stored canonical
    assert sorted(proof) == ["audit_path", "case", "head", "head_signature", "leaf_index", "schema"]
    assert proof["schema"] == PROOF_SCHEMA
    assert proof["head"] == signed.head
    assert proof["head"]["bundle_digest"] == signed.digest
    assert proof["head_signature"] == (signed.bag / "bundle-head.json.sig").read_text(
        encoding="ascii"
    )
    index = [_case_id(x) for x in signed.lines].index(CASE)
    assert index == 3
    assert proof["leaf_index"] == index
    assert _jcs(proof["case"]) == signed.lines[index]
    hashes = [_leaf(x) for x in signed.lines]
    assert proof["head"]["cases_tree"] == {"tree_size": len(hashes), "root": _mth(hashes).hex()}
    assert proof["audit_path"] == [h.hex() for h in _path(index, hashes)]
    assert len(proof["audit_path"]) == 5  # 32 leaves


def test_prove_out_writes_the_same_bytes_and_never_overwrites(
    signed: Bundle, proof_bytes: bytes, tmp_path: Path
) -> None:
    out = tmp_path / "proof.json"
    done = run_cli("prove", str(signed.archive), "--case", CASE, "--out", str(out))
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b""
    assert _line(done.stdout, "Proof") == f"case {CASE} at leaf 3 of 32 -> {out}"
    assert out.read_bytes() == proof_bytes

    done = run_cli("prove", str(signed.archive), "--case", "safety-00000", "--out", str(out))
    assert done.returncode == 3, done.stderr.decode()
    assert done.stdout == b""
    assert f"{out}: already exists" in done.stderr.decode()
    assert out.read_bytes() == proof_bytes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proof.json"]  # no temporary left


def test_prove_out_that_cannot_be_written_is_one_line(signed: Bundle, tmp_path: Path) -> None:
    """A proof file that cannot be written (file size limit here, as a full disk) is
    exit 3 with one line naming it, and no temporary file is left."""
    import resource
    import sys

    def no_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))

    out = tmp_path / "proof.json"
    exe = shutil.which("evalbook-bundle", path=str(Path(sys.executable).parent))
    assert exe is not None
    done = subprocess.run(
        [exe, "prove", str(signed.archive), "--case", CASE, "--out", str(out)],
        capture_output=True,
        preexec_fn=no_files,
        check=False,
    )
    err = done.stderr.decode()
    assert done.returncode == 3, err
    assert len(err.splitlines()) == 1, err
    assert f"{out}: cannot write" in err
    assert list(tmp_path.iterdir()) == []


def test_prove_refuses_an_unknown_case_and_a_broken_bundle(signed: Bundle, tmp_path: Path) -> None:
    done = run_cli("prove", str(signed.archive), "--case", "no-such-case")
    assert done.returncode == 3, done.stderr.decode()
    assert done.stdout == b""
    assert "no exported case with id 'no-such-case'" in done.stderr.decode()

    broken = tmp_path / "broken.tar.zst"
    data = bytearray(signed.archive.read_bytes())
    data[len(data) // 2] ^= 0x01
    broken.write_bytes(bytes(data))
    done = run_cli("prove", str(broken), "--case", CASE)
    assert done.returncode == 3, done.stderr.decode()  # unreadable (SPEC 8); a failed claim is 1
    assert done.stdout == b""
    assert "cannot be read" in done.stderr.decode()


# ------------------------------------------------------------------------ check-proof


def test_check_proof_without_anchor(signed: Bundle, proof_bytes: bytes, tmp_path: Path) -> None:
    path = tmp_path / "proof.json"
    path.write_bytes(proof_bytes)
    done = _check(path)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b""
    assert (
        _line(done.stdout, "Proven")
        == f"case {CASE} (status pass, score 1) is leaf 3 of 32 in bundle {signed.digest} (rpt-clean)"
    )
    anchor = _line(done.stdout, "Anchor")
    assert anchor.startswith("none:")
    assert "unanchored" in anchor
    assert "this head only" in anchor

    done = _check(path, "--json")
    assert done.returncode == 0
    assert json.loads(done.stdout) == {
        "schema": "evalbook.proof_check.v1",
        "source": str(path),
        "proven": True,
        "case_id": CASE,
        "case_status": "pass",
        "case_score": 1,
        "leaf_index": 3,
        "tree_size": 32,
        "bundle_digest": signed.digest,
        "report_id": "rpt-clean",
        "anchor": {
            "signer": None,
            "expected_bundle_digest": None,
            "self_consistent_only": True,
            "description": anchor,
        },
        "anchored": False,
    }


def test_check_proof_with_allowed_signers_names_the_signer(
    signer: Signer, proof_bytes: bytes, tmp_path: Path
) -> None:
    path = tmp_path / "proof.json"
    path.write_bytes(proof_bytes)
    for extra in ([], ["--identity", "alice"]):
        done = _check(path, "--allowed-signers", str(signer.allowed), *extra, "--json")
        assert done.returncode == 0, done.stderr.decode()
        result = json.loads(done.stdout)
        assert result["anchored"] is True
        assert result["anchor"]["description"] == f"signed by alice, key {signer.fingerprint}"
        assert result["anchor"]["signer"] == f"alice, key {signer.fingerprint}"

    done = _check(path, "--allowed-signers", str(signer.allowed), "--identity", "mallory")
    assert done.returncode == 1, done.stderr.decode()
    assert done.stdout == b""
    assert "head signature" in done.stderr.decode()
    assert "does not list identity 'mallory'" in done.stderr.decode()

    done = _check(path, "--identity", "alice")
    assert done.returncode == 2
    assert "--allowed-signers" in done.stderr.decode()


def test_check_proof_expect_bundle_digest(
    signed: Bundle, signer: Signer, proof_bytes: bytes, tmp_path: Path
) -> None:
    """SPEC 11.4: the digest binds only together with a valid signature on the head."""
    path = tmp_path / "proof.json"
    path.write_bytes(proof_bytes)
    wrong = "sha256:" + hashlib.sha256(b"another bundle").hexdigest()
    for digest in (signed.digest, wrong):
        done = _check(path, "--expect-bundle-digest", digest)
        assert done.returncode == 1, done.stderr.decode()
        assert done.stdout == b""
        message = done.stderr.decode()
        assert message.count("\n") == 1
        assert "--expect-bundle-digest alone cannot anchor a proof" in message
        assert "--allowed-signers" in message
        assert "Proven:" not in message

    as_json = _check(path, "--expect-bundle-digest", signed.digest, "--json")
    assert as_json.returncode == 1
    reason = json.loads(as_json.stdout)["reason"]
    assert "--expect-bundle-digest alone" in reason and "give --allowed-signers " in reason

    done = _check(
        path, "--expect-bundle-digest", signed.digest, "--allowed-signers", str(signer.allowed)
    )
    assert done.returncode == 0, done.stderr.decode()
    anchor = _line(done.stdout, "Anchor")
    assert f"signed by alice, key {signer.fingerprint}" in anchor
    assert signed.digest in anchor

    done = _check(path, "--expect-bundle-digest", wrong, "--allowed-signers", str(signer.allowed))
    assert done.returncode == 1, done.stderr.decode()
    assert done.stdout == b""
    assert wrong in done.stderr.decode()
    assert signed.digest in done.stderr.decode()
    assert "Proven:" not in done.stderr.decode()

    done = _check(path, "--expect-bundle-digest", "sha256:ABC")
    assert done.returncode == 2, done.stderr.decode()
    assert "--expect-bundle-digest" in done.stderr.decode()


def test_expected_bundle_digest_alone_cannot_anchor_a_forged_tree(
    signed: Bundle, proof_bytes: bytes, tmp_path: Path
) -> None:
    """Without a signature, the head is whatever the proof's author wrote.

    The bundle digest is the digest of bundle.json, which the proof does not carry, so
    `--expect-bundle-digest D` only checks a field the author chose: anyone who knows D
    can invent a case, put it in a one-leaf tree and name D. Such a proof must not come
    out as anchored to D. A genuine unsigned proof is indistinguishable from this one,
    so it cannot be reported as anchored either.
    """
    proof = json.loads(proof_bytes)
    forged_case = {**proof["case"], "status": "fail", "score": 0}
    proof["case"] = forged_case
    proof["leaf_index"] = 0
    proof["audit_path"] = []
    proof["head"]["cases_tree"] = {"tree_size": 1, "root": _leaf(_jcs(forged_case)).hex()}
    proof["head_signature"] = None
    path = tmp_path / "forged.json"
    path.write_bytes(_jcs(proof))
    done = _check(path, "--expect-bundle-digest", signed.digest, "--json")
    assert done.returncode == 1, done.stderr.decode()
    result = json.loads(done.stdout)
    assert result["proven"] is False and "cannot anchor" in result["reason"]
    assert "cannot anchor" in done.stderr.decode()


def test_sidecar_signature_goes_into_the_proof(
    bundles: dict[str, Path], signer: Signer, tmp_path: Path
) -> None:
    archive = tmp_path / "plain.tar.zst"
    shutil.copyfile(bundles["rpt-clean/alice"], archive)
    # Unsigned: the proof says so, and a signer check fails for want of a signature.
    done = run_cli("prove", str(archive), "--case", CASE, "--out", str(tmp_path / "unsigned.json"))
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads((tmp_path / "unsigned.json").read_bytes())["head_signature"] is None
    done = _check(tmp_path / "unsigned.json", "--allowed-signers", str(signer.allowed))
    assert done.returncode == 1, done.stderr.decode()
    assert "no signature" in done.stderr.decode()

    done = run_cli("sign", str(archive), "--key", str(signer.key))
    assert done.returncode == 0, done.stderr.decode()
    done = run_cli("prove", str(archive), "--case", CASE, "--out", str(tmp_path / "signed.json"))
    assert done.returncode == 0, done.stderr.decode()
    proof = json.loads((tmp_path / "signed.json").read_bytes())
    assert proof["head_signature"] == Path(f"{archive}.sig").read_text(encoding="ascii")
    done = _check(
        tmp_path / "signed.json", "--allowed-signers", str(signer.allowed), "--identity", "alice"
    )
    assert done.returncode == 0, done.stderr.decode()
    assert _line(done.stdout, "Anchor") == f"signed by alice, key {signer.fingerprint}"


def test_edited_head_keeps_no_signature(signer: Signer, proof_bytes: bytes, tmp_path: Path) -> None:
    """exported_at edited, signature kept: the case still leads to the root, the head
    signature no longer matches, with or without a signer check (SPEC 11.3, 11.4)."""
    proof = json.loads(proof_bytes)
    proof["head"]["exported_at"] = "2026-12-01T00:00:00Z"
    path = tmp_path / "edited.json"
    path.write_bytes(_jcs(proof))
    done = _check(path, "--allowed-signers", str(signer.allowed))
    assert done.returncode == 1, done.stderr.decode()
    assert done.stdout == b""
    assert "head signature" in done.stderr.decode()
    assert "does not match the signed bytes" in done.stderr.decode()
    assert "Proven:" not in done.stderr.decode()
    # Without a signer check the signature the proof carries is checked all the same.
    done = _check(path)
    assert done.returncode == 1, done.stderr.decode()
    assert done.stdout == b""
    assert "head signature" in done.stderr.decode()
    assert "does not match the signed bytes" in done.stderr.decode()


def test_malformed_head_signature_is_not_proven(
    signer: Signer, proof_bytes: bytes, tmp_path: Path
) -> None:
    proof = json.loads(proof_bytes)
    proof["head_signature"] = "not an SSH signature\n"
    path = tmp_path / "garbled.json"
    path.write_bytes(_jcs(proof))
    done = _check(path, "--allowed-signers", str(signer.allowed))
    assert done.returncode == 1, done.stderr.decode()
    assert done.stdout == b""
    assert "head signature" in done.stderr.decode()
    assert "not an SSH signature" in done.stderr.decode()
    done = _check(path)  # a signature carried is checked, anchored or not
    assert done.returncode == 1, done.stderr.decode()
    assert "head signature" in done.stderr.decode()


# --------------------------------------------------------------------- rejections

Edit = Callable[[dict[str, Any]], None]


def _set(*keys_and_value: Any) -> Edit:
    *keys, value = keys_and_value

    def edit(proof: dict[str, Any]) -> None:
        target = proof
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value(target[keys[-1]]) if callable(value) else value

    return edit


def _path_edit(change: Callable[[list[str]], list[str]]) -> Edit:
    def edit(proof: dict[str, Any]) -> None:
        proof["audit_path"] = change(list(proof["audit_path"]))

    return edit


# Not proven (exit 1): well-formed proofs whose hashes do not lead to the head's root.
NOT_PROVEN: dict[str, tuple[Edit, str]] = {
    "changed case status": (_set("case", "status", "fail"), "not proven"),
    "changed case score": (_set("case", "score", 0), "not proven"),
    "wrong leaf_index": (_set("leaf_index", 4), "not proven"),
    "truncated audit path": (_path_edit(lambda p: p[:-1]), "fewer than"),
    "audit path without its first hash": (_path_edit(lambda p: p[1:]), "not proven"),
    "audit path with an extra hash": (_path_edit(lambda p: [*p, p[0]]), "more than"),
    "audit path reordered": (_path_edit(lambda p: [p[1], p[0], *p[2:]]), "not proven"),
    "changed root": (_set("head", "cases_tree", "root", "00" * 32), "not proven"),
    "changed tree_size": (_set("head", "cases_tree", "tree_size", 33), "not proven"),
    # SPEC 11.4 names "leaf_index < tree_size" as one step of the checking algorithm, next
    # to RFC 9162's own "fn > sn: fail": a proof whose index is a valid integer but lies
    # outside the head's tree is well-formed and false, like an index inside the tree
    # with the wrong path, so it is "not proven" (1). Malformed (3) is for what cannot
    # be read as a proof at all (JSON, canonical form, schema).
    "leaf_index equal to tree_size": (_set("leaf_index", 32), "not below tree size 32"),
    "leaf_index far beyond tree_size": (_set("leaf_index", 65_535), "not below tree size"),
}

# Malformed (exit 3): the proof file itself breaks the format. A hash is written as
# exactly 64 lowercase hex digits (the schema); 65 digits is not hex bytes at all and 66
# would decode to 33 bytes. Neither reaches the tree algorithm, whose own "every hash is
# exactly 32 bytes" check guards callers of the library API.
MALFORMED: dict[str, tuple[Edit, str]] = {
    "hash padded to 65 hex digits": (_path_edit(lambda p: ["0" + p[0], *p[1:]]), "/audit_path/0"),
    "hash padded to 66 hex digits": (_path_edit(lambda p: ["00" + p[0], *p[1:]]), "/audit_path/0"),
    "hash of 62 hex digits": (_path_edit(lambda p: [p[0][2:], *p[1:]]), "/audit_path/0"),
    "hash in uppercase hex": (_path_edit(lambda p: [p[0].upper(), *p[1:]]), "/audit_path/0"),
    "hash with a trailing newline": (_path_edit(lambda p: [p[0] + "\n", *p[1:]]), "/audit_path/0"),
    "root padded to 66 hex digits": (
        _set("head", "cases_tree", "root", lambda r: "00" + r),
        "root",
    ),
    "extra field in the proof": (_set("comment", "trust me"), "comment"),
    "extra field in the head": (_set("head", "signed_by", "alice"), "signed_by"),
    "missing audit_path": (lambda p: p.pop("audit_path"), "audit_path"),
    "other schema": (_set("schema", "evalbook.case_proof.v2"), "schema"),
    "negative leaf_index": (_set("leaf_index", -1), "leaf_index"),
    "leaf_index as a string": (_set("leaf_index", "3"), "leaf_index"),
    "leaf_index beyond JSON's exact integers": (_set("leaf_index", 2**53), "2^53"),
    # No case tree has more leaves than an archive has members (MAX_TREE_SIZE).
    "leaf_index beyond any tree": (_set("leaf_index", 2**53 - 1), "leaf_index"),
    "case that is not an object": (_set("case", "accuracy-00003"), "case"),
    "malformed bundle digest in the head": (
        _set("head", "bundle_digest", "sha256:00"),
        "bundle_digest",
    ),
}


@pytest.mark.parametrize("name", sorted(NOT_PROVEN))
def test_not_proven(name: str, proof_bytes: bytes, tmp_path: Path) -> None:
    edit, needle = NOT_PROVEN[name]
    proof = json.loads(proof_bytes)
    edit(proof)
    path = tmp_path / "proof.json"
    path.write_bytes(_jcs(proof) + b"\n")
    done = _check(path)
    assert done.returncode == 1, done.stderr.decode()
    assert done.stdout == b""
    message = done.stderr.decode()
    assert message.startswith("evalbook-bundle: error: ")
    assert message.count("\n") == 1
    assert str(path) in message
    assert needle in message
    assert "Proven:" not in message


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed(name: str, proof_bytes: bytes, tmp_path: Path) -> None:
    edit, needle = MALFORMED[name]
    proof = json.loads(proof_bytes)
    edit(proof)
    path = tmp_path / "proof.json"
    path.write_bytes(_jcs(proof) + b"\n")
    done = _check(path)
    assert done.returncode == 3, done.stderr.decode()
    assert done.stdout == b""
    message = done.stderr.decode()
    assert message.startswith("evalbook-bundle: error: malformed proof: ")
    assert message.count("\n") == 1
    assert needle in message


def _reencode(old: bytes, new: bytes) -> Callable[[bytes], bytes]:
    def change(data: bytes) -> bytes:
        assert data.count(old) == 1
        return data.replace(old, new)

    return change


# SPEC 11.4: any layout of the same JSON is the same proof, because every hash is
# computed from canonical bytes.
SAME_PROOF: dict[str, Callable[[bytes], bytes]] = {
    "pretty-printed": lambda d: (
        json.dumps(json.loads(d), indent=2, sort_keys=True).encode() + b"\n"
    ),
    "keys out of order": lambda d: json.dumps(json.loads(d)).encode(),
    "CRLF line endings": lambda d: (
        json.dumps(json.loads(d), indent=1).encode().replace(b"\n", b"\r\n")
    ),
    "case score written 1.0": _reencode(b'"score":1,', b'"score":1.0,'),
    "needless escape in a case string": _reencode(
        b'"check_id":"accuracy"', b'"check_id":"accurac\\u0079"'
    ),
    # The same number (JCS writes 3 for each), so the same proof in both checkers.
    "leaf_index written 3.0": _reencode(b'"leaf_index":3,', b'"leaf_index":3.0,'),
    "leaf_index written 3e0": _reencode(b'"leaf_index":3,', b'"leaf_index":3e0,'),
    "leaf_index written 30e-1": _reencode(b'"leaf_index":3,', b'"leaf_index":30e-1,'),
    "leaf_index written 0.3e1": _reencode(b'"leaf_index":3,', b'"leaf_index":0.3e1,'),
    "two trailing newlines": lambda d: d + b"\n",
    "no trailing newline": lambda d: d[:-1],
}

# Section 2 still refuses these, and the proof's counts are JSON integers.
NOT_A_PROOF: dict[str, Callable[[bytes], bytes]] = {
    "leaf_index written 3.5": _reencode(b'"leaf_index":3,', b'"leaf_index":3.5,'),
    "leaf_index written true": _reencode(b'"leaf_index":3,', b'"leaf_index":true,'),
    "byte order mark": lambda d: b"\xef\xbb\xbf" + d,
    "duplicate key": _reencode(b'"leaf_index":3,', b'"leaf_index":3,"leaf_index":3,'),
}

NOT_JSON: dict[str, bytes] = {
    "empty file": b"",
    "not JSON": b"this is not a proof\n",
    "truncated JSON": b'{"schema":"evalbook.case_proof.v1",',
    "invalid UTF-8": b'{"schema":"\xff"}',
    "a JSON array": b"[]\n",
}


@pytest.mark.parametrize("name", sorted(SAME_PROOF))
def test_any_layout_is_the_same_proof(
    name: str, signer: Signer, proof_bytes: bytes, tmp_path: Path
) -> None:
    """The same result, and the head signature still checks: it is over the head's
    canonical bytes, not over the proof file's layout."""
    data = SAME_PROOF[name](proof_bytes)
    assert data != proof_bytes
    reference = tmp_path / "reference.json"
    reference.write_bytes(proof_bytes)
    path = tmp_path / "proof.json"
    path.write_bytes(data)
    for extra in ([], ["--allowed-signers", str(signer.allowed)]):
        want = _check(reference, "--json", *extra)
        assert want.returncode == 0, want.stderr.decode()
        done = _check(path, "--json", *extra)
        assert done.returncode == 0, done.stderr.decode()
        # The same result but for the file it names as its source.
        assert json.loads(done.stdout) == {**json.loads(want.stdout), "source": str(path)}
        assert done.stderr == want.stderr


@pytest.mark.parametrize("name", sorted(NOT_A_PROOF))
def test_refused_spellings_are_malformed(name: str, proof_bytes: bytes, tmp_path: Path) -> None:
    data = NOT_A_PROOF[name](proof_bytes)
    path = tmp_path / "proof.json"
    path.write_bytes(data)
    done = _check(path)
    assert done.returncode == 3, done.stderr.decode()
    assert done.stdout == b""
    message = done.stderr.decode()
    assert message.startswith("evalbook-bundle: error: malformed proof: ")
    assert str(path) in message


NODE_CHECKER = Path(__file__).resolve().parent.parent / "js" / "verify-bundle.mjs"


@pytest.mark.parametrize(
    ("name", "spelling"),
    [(n, SAME_PROOF[n]) for n in sorted(SAME_PROOF)]
    + [(n, NOT_A_PROOF[n]) for n in sorted(NOT_A_PROOF)],
)
def test_both_checkers_agree_on_every_spelling(
    name: str,
    spelling: Callable[[bytes], bytes],
    signer: Signer,
    proof_bytes: bytes,
    tmp_path: Path,
) -> None:
    """The second checker (SPEC 15) reads each spelling as this one does: proven, or
    malformed, never one of each."""
    path = tmp_path / "proof.json"
    path.write_bytes(spelling(proof_bytes))
    expected = 0 if name in SAME_PROOF else 3
    for extra in ([], ["--allowed-signers", str(signer.allowed)]):
        ours = _check(path, *extra)
        theirs = subprocess.run(
            ["node", str(NODE_CHECKER), "check-proof", str(path), *extra],
            capture_output=True,
            timeout=120,
        )
        assert (ours.returncode, theirs.returncode) == (expected, expected), (
            name,
            ours.stderr.decode(),
            theirs.stderr.decode(),
        )


@pytest.mark.parametrize("name", sorted(NOT_JSON))
def test_not_a_json_proof_is_malformed(name: str, tmp_path: Path) -> None:
    path = tmp_path / "proof.json"
    path.write_bytes(NOT_JSON[name])
    done = _check(path)
    assert done.returncode == 3, done.stderr.decode()
    assert done.stdout == b""
    assert done.stderr.decode().startswith("evalbook-bundle: error: malformed proof: ")


def test_missing_proof_file_is_an_input_error(tmp_path: Path) -> None:
    done = _check(tmp_path / "absent.json")
    assert done.returncode == 3
    assert done.stdout == b""
    assert "cannot read" in done.stderr.decode()


# ----------------------------------------------------------- round trips (API level)


def _round_trip_all(archive: Path, bag: Path) -> int:
    """Prove every exported case of ``archive`` and check each proof; returns the count."""
    lines = _case_lines(bag)
    hashes = [_leaf(x) for x in lines]
    head = json.loads((bag / "bundle-head.json").read_bytes())
    assert head["cases_tree"] == {"tree_size": len(lines), "root": _mth(hashes).hex()}
    for index, line in enumerate(lines):
        case_id = _case_id(line)
        proof = prove_case(str(archive), case_id)
        assert proof["leaf_index"] == index
        assert _jcs(proof["case"]) == line
        assert proof["head"] == head
        assert proof["audit_path"] == [h.hex() for h in _path(index, hashes)]
        assert len(proof["audit_path"]) == _path_length(index, len(lines))
        data = canonical.dumps(proof) + b"\n"
        result = check_proof(data, source=case_id)
        assert (result.case_id, result.leaf_index, result.tree_size) == (case_id, index, len(lines))
        assert result.bundle_digest == head["bundle_digest"]
        assert result.report_id == head["report_id"]
        assert result.anchored is False
        with pytest.raises(NotProven, match="cannot anchor"):
            check_proof(data, source=case_id, expect_bundle_digest=head["bundle_digest"])
    return len(lines)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_case_of_a_fixture_bundle_round_trips(
    scenario: str, bundles: dict[str, Path], tmp_path: Path
) -> None:
    archive = bundles[f"{scenario}/alice"]
    count = _round_trip_all(archive, _extract(archive, tmp_path / "x"))
    assert count > 0


# (cases, checks): single leaf, powers of two and their neighbours, several case files.
SIZES = [(1, 1), (2, 1), (3, 1), (4, 2), (5, 1), (7, 3), (8, 1), (9, 2), (16, 1), (17, 4)]


@pytest.mark.parametrize(("cases", "checks"), SIZES)
def test_every_position_of_small_generated_bundles(cases: int, checks: int, tmp_path: Path) -> None:
    build_large_store(tmp_path / "store", cases=cases, checks=checks, sso_payloads=0)
    archive = tmp_path / "small.tar.zst"
    export_bundle(
        ExportConfig(str(tmp_path / "store"), "rpt-large", "alice", EXPORTED_AT, out=archive)
    )
    assert _round_trip_all(archive, _extract(archive, tmp_path / "x")) == cases


def test_single_leaf_proof_has_an_empty_path_through_the_cli(tmp_path: Path) -> None:
    build_large_store(tmp_path / "store", cases=1, checks=1, sso_payloads=0)
    archive = tmp_path / "one.tar.zst"
    result = export_bundle(
        ExportConfig(str(tmp_path / "store"), "rpt-large", "alice", EXPORTED_AT, out=archive)
    )
    out = tmp_path / "proof.json"
    done = run_cli("prove", str(archive), "--case", "check-0-00000", "--out", str(out))
    assert done.returncode == 0, done.stderr.decode()
    proof = json.loads(out.read_bytes())
    assert proof["audit_path"] == []
    assert proof["leaf_index"] == 0
    assert proof["head"]["cases_tree"] == {"tree_size": 1, "root": _leaf(_jcs(proof["case"])).hex()}
    done = _check(out)
    assert done.returncode == 0, done.stderr.decode()
    assert "unanchored" in _line(done.stdout, "Anchor")
    assert (
        _line(done.stdout, "Proven")
        == f"case check-0-00000 (status fail, score 0) is leaf 0 of 1 in bundle "
        f"{result.bundle_digest} (rpt-large)"
    )


# ------------------------------------------------------------------ 20,000 cases


@dataclass(frozen=True)
class Large:
    archive: Path
    bag: Path
    digest: str
    export_seconds: float


@pytest.fixture(scope="session")
def large(tmp_path_factory: pytest.TempPathFactory) -> Large:
    root = tmp_path_factory.mktemp("large")
    build_large_store(root / "store", cases=20_000, checks=4)
    archive = root / "large.tar.zst"
    started = time.perf_counter()
    result = export_bundle(
        ExportConfig(str(root / "store"), "rpt-large", "alice", EXPORTED_AT, out=archive)
    )
    elapsed = time.perf_counter() - started
    # Only what the test reads: writing out 20,000 payload blobs would dominate the time.
    bag = _extract(
        archive, root / "x", "*/bundle-head.json", "*/data/bundle.json", "*/data/cases/*"
    )
    return Large(archive, bag, result.bundle_digest, elapsed)


@pytest.mark.slow
def test_proof_in_a_20000_case_bundle_has_15_hashes(
    large: Large, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _case_lines(large.bag)
    assert len(lines) == 20_000
    case_id = "check-1-00017"
    index = [_case_id(x) for x in lines].index(case_id)
    assert index == 5_017
    # Any leaf in the left 16,384-leaf subtree is 14 levels deep in it, plus one sibling.
    assert _path_length(index, 20_000) == 15
    assert max(_path_length(m, 20_000) for m in range(0, 20_000, 97)) == 15

    out = tmp_path / "proof.json"
    done = run_cli("prove", str(large.archive), "--case", case_id, "--out", str(out))
    assert done.returncode == 0, done.stderr.decode()
    assert _line(done.stdout, "Proof") == f"case {case_id} at leaf {index} of 20000 -> {out}"
    proof = json.loads(out.read_bytes())
    assert len(proof["audit_path"]) == 15
    assert proof["leaf_index"] == index
    assert _jcs(proof["case"]) == lines[index]
    done = _check(out)
    assert done.returncode == 0, done.stderr.decode()
    case = json.loads(lines[index])
    assert (
        _line(done.stdout, "Proven")
        == f"case {case_id} (status {case['status']}, score {case['score']:g}) is leaf {index} "
        f"of 20000 in bundle {large.digest} (rpt-large)"
    )

    # The exporter always builds the tree; what building it costs is timed here alone,
    # over the canonical case lines as the bundle holds them.
    started = time.perf_counter()
    tree = TreeBuilder()
    tree.extend(lines)
    root = tree.root()
    tree_seconds = time.perf_counter() - started
    assert (
        root.hex()
        == json.loads((large.bag / "bundle-head.json").read_bytes())["cases_tree"]["root"]
    )
    assert tree_seconds < 2.0, f"tree over 20,000 cases took {tree_seconds:.3f} s"
    with capsys.disabled():
        print(
            f"\n20,000-case bundle: export {large.export_seconds:.2f} s; "
            f"case tree alone {tree_seconds * 1000:.1f} ms "
            f"({sum(map(len, lines)):,} bytes of case lines)"
        )


def test_the_library_names_its_parameters_where_the_command_names_options(
    signed: Bundle, proof_bytes: bytes
) -> None:
    """SPEC 7.1: a library error names the function's parameters, never an option."""
    import bundler

    for digest in (signed.digest, "sha256:" + "0" * 64):
        with pytest.raises(NotProven) as caught:
            bundler.check_proof(proof_bytes, expect_bundle_digest=digest)
        message = caught.value.message
        assert "expect_bundle_digest alone cannot anchor a proof" in message
        assert "give allowed_signers to check" in message
        assert "--" not in message
        assert caught.value.to_json()["reason"] == message


# ------------------------------------------------- prove's anchors (SPEC 7.1, 11)
#
# prove verifies before it proves, so it takes the expected digests as verify does: the
# right digest proves, a wrong one of either kind refuses (exit 1, nothing written), a
# malformed one is a usage error naming the option or parameter; library and CLI alike.


def _digests(archive: Path) -> dict[str, str]:
    import bundler

    result = bundler.verify(str(archive))
    return {"bundle": str(result.bundle_digest), "report": str(result.report_digest)}


@pytest.mark.parametrize("kind", ["bundle", "report"])
@pytest.mark.parametrize("given", ["right", "wrong", "malformed"])
def test_prove_takes_the_expected_digests(
    kind: str, given: str, bundles: dict[str, Path], tmp_path: Path
) -> None:
    import bundler

    archive = bundles["rpt-clean/alice"]
    value = {
        "right": _digests(archive)[kind],
        "wrong": "sha256:" + "0" * 64,
        "malformed": "sha256:XYZ",
    }[given]
    case = "accuracy-00000"
    out = tmp_path / "p.json"
    done = run_cli(
        "prove", str(archive), "--case", case, "--out", str(out), f"--expect-{kind}-digest", value
    )
    code = {"right": 0, "wrong": 1, "malformed": 2}[given]
    assert done.returncode == code, done.stderr
    assert out.exists() is (code == 0)
    if code:
        assert done.stderr.count(b"\n") == 1 and b"Traceback" not in done.stderr
        assert f"--expect-{kind}-digest".encode() in done.stderr
    param = f"expect_{kind}_digest"
    if code == 0:
        proof = bundler.prove(str(archive), case, **{param: value})
        assert proof.bundle_digest == _digests(archive)["bundle"]
        return
    with pytest.raises(bundler.BundlerError) as raised:
        bundler.prove(str(archive), case, out=str(tmp_path / "q.json"), **{param: value})
    assert raised.value.exit_code == code
    assert param in str(raised.value)
    assert not (tmp_path / "q.json").exists()


@pytest.mark.parametrize("command", ["prove", "sign"])
def test_a_refusal_shows_a_strange_name_escaped_once(
    command: str, bundles: dict[str, Path], tmp_path: Path
) -> None:
    # The refusal's text is kept raw and escaped where it is shown (SPEC 5): a backslash
    # and an escape character in the bundle's name read as one escape each, not two.
    strange = tmp_path / "a\\b\x1bc.tar.zst"
    shutil.copyfile(bundles["rpt-clean/alice"], strange)
    wrong = "sha256:" + "0" * 64
    args = ["--case", "accuracy-00000", "--expect-bundle-digest", wrong]
    if command == "sign":
        key = tmp_path / "k"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        strange.write_bytes(strange.read_bytes()[:-1] + bytes([strange.read_bytes()[-1] ^ 1]))
        args = ["--key", str(key)]
    done = run_cli(command, str(strange), *args)
    assert done.returncode in (1, 3), done.stderr
    line = done.stderr.decode()
    assert line.count("\n") == 1
    assert "a\\\\b\\x1bc.tar.zst" in line, line
    assert "\\\\\\\\" not in line and "\\\\x1b" not in line, line
