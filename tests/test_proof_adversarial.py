"""Hostile proof files and hostile bundles for `check-proof` and `prove` (SPEC 11.4, 5, 8).

By class, each with the invariant it holds:

1. Form: every field of a proof file x every bad spelling is malformed (exit 3), and
   every layout of the same JSON is the same proof.
2. Anchoring: a digest alone anchors nothing; only a valid signature on the head does,
   and then the expected digest must be the head's.
3. The case shown is the leaf proven: ``case_bytes`` must parse to the case shown,
   equal as JSON (JCS bytes), never by Python's ``==`` (``True == 1``).
4. Resources: any proof file, and `prove` of any bundle, within 300 MB and 10 s;
   oversize input refused before it is parsed; special files refused, never waited on.
5. Exit codes of `prove`: 1 for a bundle that reads but does not verify, 3 unreadable.
6. Output: untrusted text from a proof is printed escaped.

Expected values are computed here with ``rfc8785`` (an independent JCS) and SHA-256 by
hand, not with the project's own canonical JSON or tree code.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from conftest import run_cli

from bundler.core.errors import BundlerError
from bundler.evalbook.export import ExportConfig, export_bundle
from bundler.trust import sshsig
from bundler.trust.proof import check_proof

SSH_KEYGEN = "/usr/bin/ssh-keygen"
EXPORTED_AT = datetime(2026, 11, 30, tzinfo=UTC)
PROOF_SCHEMA = "evalbook.case_proof.v1"
CASE = "accuracy-00003"  # leaf 3 of 32 in rpt-clean
EB_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "eval-banana"
EB_RUN = sorted((EB_FIXTURES / "runs" / "default").iterdir())[0]
BUDGET_BYTES = 300 * 1000 * 1000
BUDGET_SECONDS = 10.0
MIB = 1024 * 1024


# --------------------------------------------------------------------------- helpers


def _leaf(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def _jcs(value: Any) -> bytes:
    return bytes(rfc8785.dumps(value))


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Key:
    private: Path
    allowed: Path  # allowed_signers naming this key's principal

    def sign(self, message: bytes) -> str:
        return sshsig.sign(message, sshsig.load_private_key(self.private, passphrase=None))


def _make_key(root: Path, name: str) -> Key:
    private = root / name
    done = subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(private)],
        capture_output=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    key_type, blob = Path(f"{private}.pub").read_text(encoding="utf-8").split()[:2]
    allowed = root / f"{name}.allowed"
    allowed.write_text(f"{name} {key_type} {blob}\n", encoding="utf-8")
    return Key(private, allowed)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Key]:
    if not Path(SSH_KEYGEN).is_file():
        pytest.fail(f"{SSH_KEYGEN} is required: signatures must interoperate with OpenSSH")
    root = tmp_path_factory.mktemp("adversarial-keys")
    return {name: _make_key(root, name) for name in ("alice", "mallory")}


@dataclass(frozen=True)
class Signed:
    archive: Path
    digest: str
    proof: bytes  # `prove --case CASE` of the archive, as written


@pytest.fixture(scope="module")
def signed(
    fixture_store: Path, keys: dict[str, Key], tmp_path_factory: pytest.TempPathFactory
) -> Signed:
    root = tmp_path_factory.mktemp("adversarial-signed")
    archive = root / "signed.tar.zst"
    result = export_bundle(
        ExportConfig(
            str(fixture_store), "rpt-clean", "alice", EXPORTED_AT, out=archive,
            sign=keys["alice"].sign,
        )
    )  # fmt: skip
    done = run_cli("prove", str(archive), "--case", CASE)
    assert done.returncode == 0, done.stderr.decode()
    return Signed(archive, result.bundle_digest, done.stdout)


@pytest.fixture(scope="module")
def eb_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The committed eval-banana run exported (read-only)."""
    root = tmp_path_factory.mktemp("adversarial-eb")
    archive = root / "eb.tar.zst"
    done = run_cli(
        "export-eb", str(EB_RUN), "--project", str(EB_FIXTURES / "project"),
        "--out", str(archive), "--exported-at", "2026-11-30T03:00:00Z",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    return archive


def _eb_check_ids() -> list[str]:
    report = json.loads((EB_RUN / "report.json").read_bytes())
    return [c["check_id"] for c in report["checks"]]


def _head(root: bytes, tree_size: int = 1, **fields: Any) -> dict[str, Any]:
    head = {
        "schema": "evalbook.bundle_head.v1",
        "bundle_digest": _digest("bundle"),
        "report_id": "rpt-forged",
        "report_digest": _digest("report"),
        "exported_at": "2026-11-30T00:00:00Z",
        "cases_tree": {"tree_size": tree_size, "root": root.hex()},
    }
    head.update(fields)
    return head


def one_leaf_proof(case: Any, *, leaf: bytes | None = None, **head: Any) -> dict[str, Any]:
    """A self-consistent proof of ``case`` as the only leaf of an invented tree.

    ``leaf`` given: the leaf is those bytes, carried as ``case_bytes``.
    """
    data = _jcs(case) if leaf is None else leaf
    proof: dict[str, Any] = {
        "schema": PROOF_SCHEMA,
        "head": _head(_leaf(data), **head),
        "head_signature": None,
        "case": case,
        "leaf_index": 0,
        "audit_path": [],
    }
    if leaf is not None:
        proof["case_bytes"] = base64.b64encode(leaf).decode("ascii")
    return proof


def _compact(value: Any) -> bytes:
    """Canonical layout, but numbers as Python writes them (3.0 stays 3.0), as an
    attacker would send them; for the ASCII-keyed proofs here this is JCS otherwise."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _exit_code(data: bytes, **kw: Any) -> int:
    """check_proof's verdict as an exit code (0 proven), through the library API."""
    try:
        check_proof(data, source="proof.json", **kw)
    except BundlerError as exc:
        return exc.exit_code
    return 0


def _check_file(tmp_path: Path, data: bytes, *extra: str) -> subprocess.CompletedProcess[bytes]:
    path = tmp_path / "proof.json"
    path.write_bytes(data)
    return run_cli("check-proof", str(path), *extra)


def _one_line_error(done: subprocess.CompletedProcess[bytes], code: int, *needles: str) -> str:
    message = done.stderr.decode()
    assert done.returncode == code, message
    if done.stdout:  # with --json: the same failure as its one JSON line (SPEC 7)
        line = json.loads(done.stdout)
        assert line.get("proven") is False or line["schema"] == "evalbook.error.v1", line
        assert done.stdout.count(b"\n") == 1
    assert message.startswith("evalbook-bundle: error: "), message
    assert message.count("\n") == 1, message
    assert "Traceback" not in message
    for needle in needles:
        assert needle in message, message
    return message


# ============================================================ 1. form of a proof file


Edit = Callable[[dict[str, Any]], None]
MISSING = object()


def _at(*path: str | int) -> Callable[[Any], Edit]:
    """An edit setting the value at ``path`` (MISSING deletes it)."""

    def with_value(value: Any) -> Edit:
        def edit(proof: dict[str, Any]) -> None:
            target: Any = proof
            for key in path[:-1]:
                target = target[key]
            if value is MISSING:
                del target[path[-1]]
            else:
                target[path[-1]] = value

        return edit

    return with_value


HEX = "ab" * 32
# Bad spellings of each kind of field. Each is malformed wherever that kind appears.
BAD_INTEGERS: dict[str, Any] = {
    "string": "3",
    "true": True,
    "false": False,
    "null": None,
    "float": 3.5,
    "float over the range": 1e300,
    "negative": -1,
    "beyond 2^53": 2**53,
    "huge": 10**30,
    "list": [3],
    "object": {"n": 3},
}
BAD_HASHES: dict[str, Any] = {
    "uppercase": HEX.upper(),
    "mixed case": "AB" + HEX[2:],
    "63 hex digits": HEX[:63],
    "65 hex digits": HEX + "a",
    "62 hex digits": HEX[:62],
    "66 hex digits (33 bytes)": HEX + "ab",
    "0x prefix": "0x" + HEX[2:],
    "sha256: prefix": "sha256:" + HEX,
    "space inside": HEX[:32] + " " + HEX[33:],
    "not hex": "g" + HEX[1:],
    "trailing newline": HEX + "\n",
    "empty": "",
    "integer": 7,
    "null": None,
    "true": True,
    "list": [HEX],
}
BAD_DIGESTS: dict[str, Any] = {
    "uppercase": "sha256:" + HEX.upper(),
    "63 hex digits": "sha256:" + HEX[:63],
    "65 hex digits": "sha256:" + HEX + "a",
    "other algorithm": "sha512:" + HEX,
    "no prefix": HEX,
    "trailing newline": "sha256:" + HEX + "\n",
    "integer": 1,
    "null": None,
    "true": True,
}
BAD_STRINGS: dict[str, Any] = {
    "integer": 1,
    "true": True,
    "null": None,
    "list": ["x"],
    "object": {"x": 1},
}
BAD_OBJECTS: dict[str, Any] = {
    "list": [],
    "string": "x",
    "integer": 1,
    "true": True,
    "null": None,
}

FIELD_CASES: dict[str, Edit] = {}


def _add(field: str, edit: Callable[[Any], Edit], spellings: dict[str, Any]) -> None:
    for name, value in spellings.items():
        FIELD_CASES[f"{field} {name}"] = edit(value)


_add("leaf_index", _at("leaf_index"), BAD_INTEGERS)
_add("tree_size", _at("head", "cases_tree", "tree_size"), BAD_INTEGERS)
FIELD_CASES["leaf_index beyond any tree"] = _at("leaf_index")(1_000_000)
FIELD_CASES["tree_size beyond any tree"] = _at("head", "cases_tree", "tree_size")(1_000_001)
FIELD_CASES["leaf_index 2^53-1"] = _at("leaf_index")(2**53 - 1)
_add("root", _at("head", "cases_tree", "root"), BAD_HASHES)
_add("audit_path[0]", _at("audit_path", 0), BAD_HASHES)
_add("audit_path[4]", _at("audit_path", 4), BAD_HASHES)
_add("bundle_digest", _at("head", "bundle_digest"), BAD_DIGESTS)
_add("report_digest", _at("head", "report_digest"), BAD_DIGESTS)
_add("report_id", _at("head", "report_id"), {**BAD_STRINGS, "empty": "", "257 chars": "r" * 257})
_add(
    "exported_at",
    _at("head", "exported_at"),
    {**BAD_STRINGS, "date only": "2026-11-30", "offset": "2026-11-30T00:00:00+00:00"},
)
_add("schema", _at("schema"), {**BAD_STRINGS, "v2": "evalbook.case_proof.v2", "empty": ""})
_add("head.schema", _at("head", "schema"), {**BAD_STRINGS, "v2": "evalbook.bundle_head.v2"})
_add("head", _at("head"), BAD_OBJECTS)
_add("cases_tree", _at("head", "cases_tree"), BAD_OBJECTS)
_add("case", _at("case"), BAD_OBJECTS)
_add("case.case_id", _at("case", "case_id"), {k: v for k, v in BAD_STRINGS.items()})
_add(
    "audit_path",
    _at("audit_path"),
    {
        "string": HEX,
        "object": {"0": HEX},
        "null": None,
        "21 hashes": [HEX] * 21,
        "64 hashes": [HEX] * 64,
    },
)
_add(
    "head_signature",
    _at("head_signature"),
    {"integer": 1, "true": True, "list": ["x"], "over 65536 characters": "x" * 65537},
)
_add(
    "case_bytes",
    _at("case_bytes"),
    {
        "integer": 1,
        "null": None,
        "true": True,
        "not base64": "@@@@",
        "base64 with a newline": "e30=\n",
        "base64 with spaces": "e3 0=",
        "non-canonical base64 padding bits": "e31=",
        "missing padding": "e30",
        "base64 of a non-JSON leaf": base64.b64encode(b"not json").decode(),
        "base64 of a duplicate key": base64.b64encode(b'{"a":1,"a":1}').decode(),
        "base64 of NaN": base64.b64encode(b'{"a":NaN}').decode(),
        "base64 of a lone surrogate": base64.b64encode(b'{"a":"\\ud800"}').decode(),
        "base64 of invalid UTF-8": base64.b64encode(b'{"a":"\xff"}').decode(),
        "base64 of a BOM": base64.b64encode(b'\xef\xbb\xbf{"a":1}').decode(),
        "base64 of 65 levels": base64.b64encode(b"[" * 65 + b"]" * 65).decode(),
    },
)
for _key in ("schema", "head", "head_signature", "case", "leaf_index", "audit_path"):
    FIELD_CASES[f"missing {_key}"] = _at(_key)(MISSING)
for _key in ("schema", "bundle_digest", "report_id", "report_digest", "exported_at", "cases_tree"):
    FIELD_CASES[f"missing head.{_key}"] = _at("head", _key)(MISSING)
for _key in ("tree_size", "root"):
    FIELD_CASES[f"missing cases_tree.{_key}"] = _at("head", "cases_tree", _key)(MISSING)


def _no_case_id(proof: dict[str, Any]) -> None:
    del proof["case"]["case_id"], proof["case"]["check_id"]


FIELD_CASES["missing case id and check id"] = _no_case_id
FIELD_CASES["extra key in the proof"] = _at("anchored")(True)
FIELD_CASES["extra key in the head"] = _at("head", "signed_by")("alice")
FIELD_CASES["extra key in cases_tree"] = _at("head", "cases_tree", "leaf_count")(32)


@pytest.mark.parametrize("name", sorted(FIELD_CASES))
def test_every_field_by_every_bad_spelling_is_malformed(name: str, signed: Signed) -> None:
    proof = json.loads(signed.proof)
    FIELD_CASES[name](proof)
    assert _exit_code(_compact(proof)) == 3, name


@pytest.mark.parametrize(
    "name", ["leaf_index float", "tree_size true", "root uppercase", "missing head"]
)
def test_malformed_through_the_cli_is_one_line_exit_3(
    name: str, signed: Signed, tmp_path: Path
) -> None:
    proof = json.loads(signed.proof)
    FIELD_CASES[name](proof)
    done = _check_file(tmp_path, _compact(proof))
    _one_line_error(done, 3, "malformed proof: ", str(tmp_path / "proof.json"))


# Section 2 inputs, spliced into the proof's text where a parser meets them.
def _splice(old: bytes, new: bytes) -> Callable[[bytes], bytes]:
    def change(data: bytes) -> bytes:
        assert data.count(old) == 1, old
        return data.replace(old, new)

    return change


REFUSED_JSON: dict[str, Callable[[bytes], bytes]] = {
    "duplicate top-level key": _splice(b'"leaf_index":3', b'"leaf_index":3,"leaf_index":3'),
    "duplicate key, different values": _splice(b'"leaf_index":3', b'"leaf_index":4,"leaf_index":3'),
    "duplicate key in the head": _splice(
        b'"report_id":"rpt-clean"', b'"report_id":"rpt-clean","report_id":"rpt-clean"'
    ),
    "duplicate key in the case": _splice(b'"score":1,', b'"score":0,"score":1,'),
    "duplicate key spelled with an escape": _splice(b'"score":1,', b'"score":0,"scor\\u0065":1,'),
    "NaN": _splice(b'"score":1,', b'"score":NaN,'),
    "Infinity": _splice(b'"score":1,', b'"score":Infinity,'),
    "-Infinity": _splice(b'"score":1,', b'"score":-Infinity,'),
    "overflow to infinity": _splice(b'"score":1,', b'"score":1e999,'),
    "integer beyond 2^53 in the case": _splice(b'"score":1,', b'"score":9007199254740993,'),
    "lone high surrogate": _splice(b'"check_id":"accuracy"', b'"check_id":"\\ud800"'),
    "lone low surrogate in a key": _splice(b'"score":1,', b'"score":1,"\\udc00":1,'),
    "65 levels of nesting": _splice(b'"score":1,', b'"score":1,"x":' + b"[" * 63 + b"]" * 63 + b","),
    "invalid UTF-8": _splice(b'"check_id":"accuracy"', b'"check_id":"accur\xc3acy"'),
    "byte order mark": lambda d: b"\xef\xbb\xbf" + d,
    "trailing data": lambda d: d + b"{}",
    "two documents": lambda d: d + d,
    "single quotes": _splice(b'"leaf_index":3', b"'leaf_index':3"),
    "comment": lambda d: b"// proof\n" + d,
    "double comma": _splice(b'"leaf_index":3', b'"leaf_index":3,'),
    "UTF-16": lambda d: d.decode().encode("utf-16"),
}


@pytest.mark.parametrize("name", sorted(REFUSED_JSON))
def test_inputs_section_2_refuses_are_malformed(name: str, signed: Signed) -> None:
    data = REFUSED_JSON[name](signed.proof)
    assert _exit_code(data) == 3, name


def _reformat(indent: int | None, *, sort_keys: bool, ascii: bool) -> Callable[[bytes], bytes]:
    def change(data: bytes) -> bytes:
        value = json.loads(data)
        if not sort_keys:  # reverse every object's key order
            value = json.loads(json.dumps(value), object_pairs_hook=lambda p: dict(p[::-1]))
        return json.dumps(value, indent=indent, ensure_ascii=ascii, sort_keys=sort_keys).encode()

    return change


LAYOUTS: dict[str, Callable[[bytes], bytes]] = {
    "pretty, indent 2": _reformat(2, sort_keys=True, ascii=True),
    "pretty, tabs": lambda d: json.dumps(json.loads(d), indent="\t").encode(),
    "keys reversed": _reformat(None, sort_keys=False, ascii=False),
    "pretty and keys reversed": _reformat(4, sort_keys=False, ascii=True),
    "CRLF": lambda d: json.dumps(json.loads(d), indent=2).encode().replace(b"\n", b"\r\n"),
    "CRLF and a final CRLF": lambda d: (
        json.dumps(json.loads(d), indent=2).encode().replace(b"\n", b"\r\n") + b"\r\n"
    ),
    "no final newline": lambda d: d.rstrip(b"\n"),
    "three final newlines": lambda d: d + b"\n\n",
    "leading whitespace": lambda d: b" \t\r\n" + d,
    "every string escaped": lambda d: json.dumps(json.loads(d), ensure_ascii=True).encode(),
    "integer case values as 1.0": _splice(b'"score":1,', b'"score":1.0,'),
    "exponent spelling in the case": _splice(b'"score":1,', b'"score":1e0,'),
    "escaped character in the case": _splice(b'"check_id":"accuracy"', b'"check_id":"\\u0061ccuracy"'),
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_every_layout_of_the_same_json_is_the_same_proof(
    name: str, signed: Signed, keys: dict[str, Key], tmp_path: Path
) -> None:
    data = LAYOUTS[name](signed.proof)
    assert data != signed.proof
    allowed = ["--allowed-signers", str(keys["alice"].allowed)]
    want = _check_file(tmp_path, signed.proof, "--json", *allowed)
    assert want.returncode == 0, want.stderr.decode()
    done = _check_file(tmp_path, data, "--json", *allowed)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == want.stdout
    assert done.stderr == want.stderr


def test_proof_from_stdin_in_any_layout(signed: Signed) -> None:
    data = LAYOUTS["pretty and keys reversed"](signed.proof)
    done = run_cli("check-proof", "-", "--json", input=data)
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout)["case_id"] == CASE


# ========================================================================= 2. anchors


def _forged(signed: Signed) -> dict[str, Any]:
    """An invented failing case in a one-leaf tree whose head names the real bundle."""
    proof: dict[str, Any] = json.loads(signed.proof)
    case = {**proof["case"], "status": "fail", "score": 0}
    proof.update(case=case, leaf_index=0, audit_path=[], head_signature=None)
    proof["head"]["cases_tree"] = {"tree_size": 1, "root": _leaf(_jcs(case)).hex()}
    return proof


def _sign_head(proof: dict[str, Any], key: Key) -> None:
    proof["head_signature"] = key.sign(_jcs(proof["head"]))


# (how the forged proof is signed, the options) -> exit code and a needle.
ANCHOR_CASES: dict[str, tuple[str, list[str], int, str]] = {
    "digest alone": ("unsigned", ["--expect-bundle-digest", "{digest}"], 1, "cannot anchor"),
    "digest alone, JSON": (
        "unsigned", ["--expect-bundle-digest", "{digest}", "--json"], 1, "cannot anchor",
    ),
    "digest and signers, no signature": (
        "unsigned",
        ["--expect-bundle-digest", "{digest}", "--allowed-signers", "{alice}"],
        1,
        "no signature",
    ),
    "signers, no signature": ("unsigned", ["--allowed-signers", "{alice}"], 1, "no signature"),
    "the real head's signature kept": (
        "real signature", ["--allowed-signers", "{alice}"], 1, "head signature",
    ),
    "the real signature and the digest": (
        "real signature",
        ["--allowed-signers", "{alice}", "--expect-bundle-digest", "{digest}"],
        1,
        "head signature",
    ),
    "signed by a key not allowed": (
        "mallory", ["--allowed-signers", "{alice}"], 1, "head signature",
    ),
    "signed by a key not allowed, with the digest": (
        "mallory",
        ["--allowed-signers", "{alice}", "--expect-bundle-digest", "{digest}"],
        1,
        "head signature",
    ),
    "digest alone, signed by someone": (
        "mallory", ["--expect-bundle-digest", "{digest}"], 1, "cannot anchor",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(ANCHOR_CASES))
def test_forged_one_leaf_head_is_not_proven_when_an_anchor_is_asked(
    name: str, signed: Signed, keys: dict[str, Key], tmp_path: Path
) -> None:
    how, options, code, needle = ANCHOR_CASES[name]
    proof = _forged(signed)
    if how == "real signature":
        proof["head_signature"] = json.loads(signed.proof)["head_signature"]
    elif how == "mallory":
        _sign_head(proof, keys["mallory"])
    args = [o.format(digest=signed.digest, alice=keys["alice"].allowed) for o in options]
    done = _check_file(tmp_path, _jcs(proof), *args)
    message = _one_line_error(done, code, needle)
    assert "Proven:" not in message


def test_forged_head_without_options_is_proven_only_as_unanchored(
    signed: Signed, tmp_path: Path
) -> None:
    """It is a valid tree of one leaf; the output must say nothing anchors it."""
    done = _check_file(tmp_path, _jcs(_forged(signed)), "--json")
    assert done.returncode == 0, done.stderr.decode()
    result = json.loads(done.stdout)
    assert result["anchored"] is False
    assert result["anchor"]["description"].startswith("none:")
    assert "unanchored" in result["anchor"]["description"]
    assert result["anchor"]["self_consistent_only"] is True
    human = _check_file(tmp_path, _jcs(_forged(signed)))
    assert "unanchored" in human.stdout.decode()


def test_forged_head_signed_by_an_allowed_key_is_anchored_to_that_signer_only(
    signed: Signed, keys: dict[str, Key], tmp_path: Path
) -> None:
    """mallory, trusted by this allowed_signers file, can vouch for any head she signs:
    the output names her as the anchor. A digest it names is then a claim of hers."""
    proof = _forged(signed)
    _sign_head(proof, keys["mallory"])
    mallory = ["--allowed-signers", str(keys["mallory"].allowed)]
    done = _check_file(tmp_path, _jcs(proof), *mallory, "--json")
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout)["anchor"]["description"].startswith("signed by mallory")
    other = "sha256:" + hashlib.sha256(b"other").hexdigest()
    done = _check_file(tmp_path, _jcs(proof), *mallory, "--expect-bundle-digest", other)
    _one_line_error(done, 1, other, signed.digest)


def test_real_proof_with_every_anchor_combination(
    signed: Signed, keys: dict[str, Key], tmp_path: Path
) -> None:
    alice = ["--allowed-signers", str(keys["alice"].allowed)]
    wrong = "sha256:" + hashlib.sha256(b"other").hexdigest()
    expect = [
        ([], 0),
        (alice, 0),
        ([*alice, "--identity", "alice"], 0),
        ([*alice, "--identity", "mallory"], 1),
        ([*alice, "--expect-bundle-digest", signed.digest], 0),
        ([*alice, "--expect-bundle-digest", wrong], 1),
        (["--expect-bundle-digest", signed.digest], 1),
        (["--expect-bundle-digest", wrong], 1),
        (["--allowed-signers", str(keys["mallory"].allowed)], 1),
    ]
    for options, code in expect:
        done = _check_file(tmp_path, signed.proof, *options, "--json")
        assert done.returncode == code, (options, done.stderr.decode())
        if code == 0:
            result = json.loads(done.stdout)
            assert result["anchored"] is bool(options)
            if "--expect-bundle-digest" in options:
                assert signed.digest in result["anchor"]["description"]


def test_unsigned_real_proof_with_a_digest_is_not_proven(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    """A genuine unsigned proof cannot be told from a forged one: not proven either."""
    archive = bundles["rpt-clean/alice"]
    done = run_cli("prove", str(archive), "--case", CASE)
    assert done.returncode == 0, done.stderr.decode()
    digest = json.loads(done.stdout)["head"]["bundle_digest"]
    result = _check_file(tmp_path, done.stdout, "--expect-bundle-digest", digest)
    _one_line_error(result, 1, "cannot anchor")
    assert _exit_code(done.stdout, expect_bundle_digest=digest) == 1


# ============================================== 3. the case shown is the leaf proven

# (the leaf's verbatim bytes, the case shown as JSON text, proven?)
LEAF = b'{\n  "check_id": "c",\n  "score": %s\n}\n'
TYPE_CASES: dict[str, tuple[bytes, bytes, bool]] = {
    "true shown for 1": (LEAF % b"1", b'{"check_id":"c","score":true}', False),
    "1 shown for true": (LEAF % b"true", b'{"check_id":"c","score":1}', False),
    "false shown for 0": (LEAF % b"0", b'{"check_id":"c","score":false}', False),
    "0 shown for false": (LEAF % b"false", b'{"check_id":"c","score":0}', False),
    '"1" shown for 1': (LEAF % b"1", b'{"check_id":"c","score":"1"}', False),
    '1 shown for "1"': (LEAF % b'"1"', b'{"check_id":"c","score":1}', False),
    "null shown for an absent key": (b'{"check_id":"c"}', b'{"check_id":"c","score":null}', False),
    "absent key shown for null": (LEAF % b"null", b'{"check_id":"c"}', False),
    '"" shown for null': (LEAF % b"null", b'{"check_id":"c","score":""}', False),
    "[1] shown for 1": (LEAF % b"1", b'{"check_id":"c","score":[1]}', False),
    "[true] shown for [1]": (LEAF % b"[1]", b'{"check_id":"c","score":[true]}', False),
    "nested false shown for 0": (
        LEAF % b'{"a":{"b":0}}', b'{"check_id":"c","score":{"a":{"b":false}}}', False,
    ),
    "{} shown for []": (LEAF % b"[]", b'{"check_id":"c","score":{}}', False),
    "2 shown for 1": (LEAF % b"1", b'{"check_id":"c","score":2}', False),
    "an extra key shown": (LEAF % b"1", b'{"check_id":"c","score":1,"x":1}', False),
    # Equal as JSON: the same number, the same string, key order is not content.
    "1 shown as written": (LEAF % b"1", b'{"check_id":"c","score":1}', True),
    "1.0 shown for 1": (LEAF % b"1", b'{"check_id":"c","score":1.0}', True),
    "1 shown for 1.0": (LEAF % b"1.0", b'{"check_id":"c","score":1}', True),
    "1 shown for 1e0": (LEAF % b"1e0", b'{"check_id":"c","score":1}', True),
    "0 shown for -0": (LEAF % b"-0", b'{"check_id":"c","score":0}', True),
    "keys in another order": (LEAF % b"1", b'{"score":1,"check_id":"c"}', True),
    "escaped string shown": (LEAF % b'"a"', b'{"check_id":"c","score":"\\u0061"}', True),
}  # fmt: skip


def _type_proof(leaf: bytes, shown_case: bytes) -> bytes:
    proof = one_leaf_proof({"check_id": "c"}, leaf=leaf)
    text = _jcs(proof)
    return text.replace(b'"case":{"check_id":"c"}', b'"case":' + shown_case)


@pytest.mark.parametrize("name", sorted(TYPE_CASES))
def test_case_bytes_must_hold_the_case_shown_type_for_type(name: str) -> None:
    leaf, shown_case, proven = TYPE_CASES[name]
    data = _type_proof(leaf, shown_case)
    assert _exit_code(data) == (0 if proven else 1), name


def test_type_confusion_through_the_cli_says_why(tmp_path: Path) -> None:
    data = _type_proof(LEAF % b"1", b'{"check_id":"c","score":true}')
    done = _check_file(tmp_path, data)
    _one_line_error(done, 1, "case_bytes do not hold the case shown")


@pytest.mark.parametrize("check_id", _eb_check_ids())
def test_every_eval_banana_check_round_trips_and_refuses_a_retyped_case(
    check_id: str, eb_bundle: Path, tmp_path: Path
) -> None:
    done = run_cli("prove", str(eb_bundle), "--case", check_id)
    assert done.returncode == 0, done.stderr.decode()
    proof = json.loads(done.stdout)
    leaf = base64.b64decode(proof["case_bytes"])
    assert json.loads(leaf) == proof["case"]
    assert _jcs(proof["case"]) == _jcs(json.loads(leaf))
    assert _exit_code(done.stdout) == 0
    # The same proof, the case's integer score shown as a boolean: not the leaf.
    assert proof["case"]["score"] in (0, 1) and type(proof["case"]["score"]) is int
    proof["case"]["score"] = bool(proof["case"]["score"])
    assert _exit_code(_jcs(proof)) == 1
    proof["case"]["score"] = str(int(proof["case"]["score"]))
    assert _exit_code(_jcs(proof)) == 1


def test_evalbook_case_shown_with_a_retyped_value_is_not_the_leaf(signed: Signed) -> None:
    proof = json.loads(signed.proof)
    assert proof["case"]["score"] == 1 and "case_bytes" not in proof
    proof["case"]["score"] = True
    assert _exit_code(_jcs(proof)) == 1


def test_case_id_must_be_a_string_to_be_shown(signed: Signed) -> None:
    """A case id of true would print as "True", the same as the string "True"."""
    for value in (True, 1, None, ["x"]):
        proof = one_leaf_proof({"case_id": value, "check_id": "x"})
        assert _exit_code(_jcs(proof)) == 3, value
    proof = one_leaf_proof({"check_id": 7})
    assert _exit_code(_jcs(proof)) == 3


# ======================================================================= 4. resources


@dataclass(frozen=True)
class Measured:
    returncode: int
    stdout: bytes
    stderr: bytes
    peak_rss: int  # bytes
    seconds: float  # wall time
    cpu_seconds: float  # user + system


# Runs one command and reports its own peak RSS and time. A child forked from pytest
# would count pytest's pages in its peak RSS, so the command is started from this small
# fresh interpreter instead.
_LAUNCHER = """
import json, os, subprocess, sys, threading, time
report, timeout, *command = sys.argv[1:]
started = time.monotonic()
proc = subprocess.Popen(command)
killer = threading.Timer(float(timeout), proc.kill)
killer.start()
_, status, usage = os.wait4(proc.pid, 0)
killer.cancel()
proc.returncode = os.waitstatus_to_exitcode(status)
with open(report, "w") as fh:
    json.dump({"returncode": proc.returncode, "peak_rss": usage.ru_maxrss * 1024,
               "seconds": time.monotonic() - started,
               "cpu_seconds": usage.ru_utime + usage.ru_stime}, fh)
"""


def measure(*args: str, stdin: Path | None = None, timeout: float = 60) -> Measured:
    """Run the console script; its own peak RSS (os.wait4) and wall time."""
    exe = shutil.which("evalbook-bundle", path=str(Path(sys.executable).parent))
    assert exe is not None
    with (
        tempfile.TemporaryDirectory() as scratch,
        open(stdin if stdin is not None else os.devnull, "rb") as source,
    ):
        report = Path(scratch) / "report.json"
        done = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, str(report), str(timeout), exe, *args],
            stdin=source, capture_output=True, check=False, timeout=timeout + 30,
        )  # fmt: skip
        figures = json.loads(report.read_bytes())
    return Measured(
        figures["returncode"],
        done.stdout,
        done.stderr,
        figures["peak_rss"],
        figures["seconds"],
        figures["cpu_seconds"],
    )


def _within_budget(result: Measured) -> None:
    assert b"Traceback" not in result.stderr, result.stderr.decode()
    assert result.returncode in (0, 1, 3), result.stderr.decode()
    assert result.peak_rss < BUDGET_BYTES, f"peak RSS {result.peak_rss / 1e6:.0f} MB"
    # The budget is the command's own work: CPU time, so that other jobs on a shared
    # machine cannot fail it; wall time only guards against waiting (a hang is killed).
    assert result.cpu_seconds < BUDGET_SECONDS, f"{result.cpu_seconds:.1f} s of CPU"
    assert result.seconds < 3 * BUDGET_SECONDS, f"{result.seconds:.1f} s"


def _proof_around(case_text: bytes) -> bytes:
    """A proof file whose case is ``case_text`` (raw JSON text, not parsed here)."""
    proof = one_leaf_proof({"case_id": "x"})
    return _jcs(proof).replace(b'"case":{"case_id":"x"}', b'"case":' + case_text)


def _cap() -> int:
    from bundler.trust.proof import MAX_PROOF_BYTES

    return MAX_PROOF_BYTES


def _fill(unit: bytes, size: int) -> bytes:
    return b",".join([unit] * (size // (len(unit) + 1)))


# Cases built to use the most memory per byte of proof; (builder of the case text at
# a given size). Each is run at 26 MB (the held-out example), just under the proof cap
# and just over it.
HOSTILE_CASES: dict[str, Callable[[int], bytes]] = {
    "floats": lambda n: b'{"case_id":"x","f":[' + _fill(b"1.5", n) + b"]}",
    "empty objects": lambda n: b'{"case_id":"x","o":[' + _fill(b"{}", n) + b"]}",
    "empty arrays": lambda n: b'{"case_id":"x","a":[' + _fill(b"[]", n) + b"]}",
    "small integers": lambda n: b'{"case_id":"x","i":[' + _fill(b"7", n) + b"]}",
    "empty strings": lambda n: b'{"case_id":"x","s":[' + _fill(b'""', n) + b"]}",
    "one astral string": lambda n: b'{"case_id":"x","s":"\xf0\x9f\x98\x80' + b"a" * n + b'"}',
    "escaped controls": lambda n: b'{"case_id":"x","s":"' + b"\\u0001" * (n // 6) + b'"}',
    "many keys": lambda n: (
        b'{"case_id":"x",' + b",".join(b'"k%07d":0' % i for i in range(n // 13)) + b"}"
    ),
    "a duplicate key after a long string": lambda n: (
        b'{"case_id":"x","s":"\xf0\x9f\x98\x80' + b"a" * (n - 200) + b'","s":1}'
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_CASES))
def test_26_mb_case_in_a_proof_is_refused_within_budget(name: str, tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(_proof_around(HOSTILE_CASES[name](26_000_000)))
    result = measure("check-proof", str(path))
    _within_budget(result)
    assert result.returncode == 3
    message = result.stderr.decode()
    assert str(path) in message and "bytes" in message, message
    assert message.count("\n") == 1


@pytest.mark.parametrize("name", sorted(HOSTILE_CASES))
def test_proofs_at_the_cap_stay_within_budget(name: str, tmp_path: Path) -> None:
    text = HOSTILE_CASES[name](_cap() - 2_000)
    data = _proof_around(text)
    assert len(data) <= _cap()
    path = tmp_path / "at-cap.json"
    path.write_bytes(data)
    result = measure("check-proof", str(path))
    _within_budget(result)
    assert result.returncode in (1, 3)  # the invented head's root does not match, or refused


def test_case_bytes_at_the_cap_stay_within_budget(tmp_path: Path) -> None:
    """The case shown and case_bytes, each as large as the cap allows."""
    leaf = b'{"check_id":"x","s":"\xf0\x9f\x98\x80' + b"a" * (_cap() * 3 // 7 - 2000) + b'"}'
    data = _jcs(one_leaf_proof(json.loads(leaf), leaf=leaf))
    assert len(data) <= _cap()
    path = tmp_path / "case-bytes.json"
    path.write_bytes(data)
    result = measure("check-proof", str(path))
    _within_budget(result)
    assert result.returncode == 0, result.stderr.decode()


def test_one_byte_over_the_cap_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "over.json"
    with open(path, "wb") as fh:  # sparse: the size alone must refuse it
        fh.truncate(_cap() + 1)
    result = measure("check-proof", str(path))
    _within_budget(result)
    message = result.stderr.decode()
    assert result.returncode == 3, message
    assert str(path) in message and str(_cap()) in message
    assert result.peak_rss < 100 * 1000 * 1000


def test_99_mb_on_stdin_is_refused_within_budget(tmp_path: Path) -> None:
    path = tmp_path / "stdin.json"
    path.write_bytes(b"[" + b"1," * (99 * 1000 * 1000 // 2) + b"1]")
    result = measure("check-proof", "-", stdin=path)
    _within_budget(result)
    assert result.returncode == 3
    assert "<stdin>" in result.stderr.decode()


def test_more_values_than_a_proof_may_hold_is_refused_before_parsing(tmp_path: Path) -> None:
    from bundler.trust.proof import MAX_PROOF_VALUES

    text = b'{"case_id":"x","a":[' + b",".join([b"0"] * MAX_PROOF_VALUES) + b"]}"
    data = _proof_around(text)
    assert len(data) < _cap()
    assert _exit_code(data) == 3
    fewer = _proof_around(b'{"case_id":"x","a":[' + b",".join([b"0"] * 1000) + b"]}")
    assert _exit_code(fewer) == 1  # the invented root: read, then not proven


@pytest.mark.parametrize("kind", ["fifo", "directory", "character device", "dangling symlink"])
def test_special_files_are_refused_without_waiting(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "proof.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "character device":
        path = Path("/dev/zero")
    else:
        path.symlink_to(tmp_path / "absent")
    result = measure("check-proof", str(path), timeout=20)
    _within_budget(result)
    assert result.returncode == 3, result.stderr.decode()
    assert result.stderr.decode().count("\n") == 1


def test_symlink_to_a_proof_is_read(signed: Signed, tmp_path: Path) -> None:
    target = tmp_path / "proof.json"
    target.write_bytes(signed.proof)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert run_cli("check-proof", str(link)).returncode == 0


# ================================================================ 5. prove, exit codes


def _failed_claim_bundle(source: Path, dest: Path) -> Path:
    """A bundle that reads and whose BagIt manifests check, but a case line was edited
    after export: bundle.json's digest of the case file fails (a claim, not an error)."""
    import repack

    bag = repack.open_bundle(source)
    path = next(p for p in bag.files if p.startswith("data/cases/"))
    lines = bag.lines(path)
    lines[0] = lines[0].replace(b'"status":"pass"', b'"status":"fail"')
    bag.set_lines(path, lines)
    return repack.write_bundle(bag, dest, bundle_json=False)


def test_prove_of_a_bundle_that_does_not_verify_exits_1(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    archive = _failed_claim_bundle(bundles["rpt-clean/alice"], tmp_path / "failed.tar.zst")
    verified = run_cli("verify", str(archive))
    assert verified.returncode == 1, verified.stdout.decode()
    done = run_cli("prove", str(archive), "--case", CASE)
    _one_line_error(done, 1, "does not verify", "refusing to prove")
    out = tmp_path / "proof.json"
    done = run_cli("prove", str(archive), "--case", CASE, "--out", str(out))
    assert done.returncode == 1
    assert not out.exists()


def test_prove_of_an_unreadable_bundle_exits_3(bundles: dict[str, Path], tmp_path: Path) -> None:
    data = bundles["rpt-clean/alice"].read_bytes()
    for name, broken in (("truncated", data[: len(data) // 2]), ("empty", b"")):
        archive = tmp_path / f"{name}.tar.zst"
        archive.write_bytes(broken)
        done = run_cli("prove", str(archive), "--case", CASE)
        _one_line_error(done, 3, "cannot be read")
    done = run_cli("prove", str(tmp_path / "absent.tar.zst"), "--case", CASE)
    assert done.returncode == 3


def test_prove_passes_over_a_special_sidecar_without_waiting(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    # A sidecar is outside the archive: a FIFO there neither hangs nor blocks the proof
    # (SPEC 6), which carries the bundle's own signature instead.
    archive = tmp_path / "b.tar.zst"
    shutil.copyfile(bundles["rpt-clean/alice"], archive)
    os.mkfifo(f"{archive}.sig")
    result = measure("prove", str(archive), "--case", CASE, timeout=30)
    assert result.returncode == 0, result.stderr.decode()
    proof = json.loads(result.stdout)
    assert proof["head_signature"] is None or "SSH SIGNATURE" in proof["head_signature"]


def test_prove_passes_over_a_sidecar_too_large_for_a_proof(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    archive = tmp_path / "b.tar.zst"
    shutil.copyfile(bundles["rpt-clean/alice"], archive)
    Path(f"{archive}.sig").write_bytes(b"x" * 70_000)
    out = tmp_path / "proof.json"
    done = run_cli("prove", str(archive), "--case", CASE, "--out", str(out))
    assert done.returncode == 0, done.stderr.decode()
    assert b"x" * 100 not in out.read_bytes()


def _eb_run_with_stderr(tmp_path: Path, check_id: str, size: int) -> Path:
    """A copy of the committed run where ``check_id`` wrote ``size`` bytes of stderr."""
    from bundler.evalbanana import run as evalbanana

    run = tmp_path / "run"
    shutil.copytree(EB_RUN, run)
    stem = evalbanana.check_stem(check_id)
    text = "e" * size

    def edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
        value = json.loads(path.read_bytes())
        change(value)
        path.write_text(json.dumps(value, indent=2, ensure_ascii=False), encoding="utf-8")

    def set_stderr(check: dict[str, Any]) -> None:
        check["stderr"] = text

    def in_report(report: dict[str, Any]) -> None:
        set_stderr(next(c for c in report["checks"] if c["check_id"] == check_id))

    edit(run / "report.json", in_report)
    edit(run / "checks" / f"{stem}.json", set_stderr)
    (run / evalbanana.stderr_file(stem)).write_text(text, encoding="utf-8")
    return run


def test_prove_refuses_a_case_too_large_for_a_proof_within_budget(tmp_path: Path) -> None:
    """The exporter's bundle verifies; its 9 MB check cannot be proven in a file that
    check-proof reads, so prove refuses it (3) rather than write one check-proof refuses."""
    run = _eb_run_with_stderr(tmp_path, "passes", 9 * MIB)
    archive = tmp_path / "eb.tar.zst"
    done = run_cli(
        "export-eb", str(run), "--project", str(EB_FIXTURES / "project"), "--out", str(archive),
        "--exported-at", "2026-11-30T03:00:00Z",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    assert run_cli("verify", str(archive)).returncode == 0
    out = tmp_path / "proof.json"
    result = measure("prove", str(archive), "--case", "passes", "--out", str(out))
    _within_budget(result)
    message = result.stderr.decode()
    assert result.returncode == 3, message
    assert "passes" in message and str(_cap()) in message
    assert not out.exists()
    # Every other check of the same bundle is still proven.
    done = run_cli("prove", str(archive), "--case", "fails")
    assert done.returncode == 0, done.stderr.decode()
    assert _exit_code(done.stdout) == 0


def test_prove_of_a_case_just_under_the_cap_round_trips(tmp_path: Path) -> None:
    """What prove writes, check-proof reads: a large eval-banana check near the cap."""
    size = (_cap() - 64 * 1024) * 3 // 7  # case shown + base64 case_bytes fit the cap
    run = _eb_run_with_stderr(tmp_path, "passes", size)
    archive = tmp_path / "eb.tar.zst"
    done = run_cli(
        "export-eb", str(run), "--project", str(EB_FIXTURES / "project"), "--out", str(archive),
        "--exported-at", "2026-11-30T03:00:00Z",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    out = tmp_path / "proof.json"
    result = measure("prove", str(archive), "--case", "passes", "--out", str(out))
    _within_budget(result)
    assert result.returncode == 0, result.stderr.decode()
    checked = measure("check-proof", str(out))
    _within_budget(checked)
    assert checked.returncode == 0, checked.stderr.decode()


@pytest.fixture(scope="module")
def large_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bundler.testing.fixturegen import build_large_store

    root = tmp_path_factory.mktemp("adversarial-large")
    build_large_store(root / "store", cases=20_000, checks=4)
    archive = root / "large.tar.zst"
    export_bundle(ExportConfig(str(root / "store"), "rpt-large", "alice", EXPORTED_AT, out=archive))
    return archive


@pytest.mark.slow
def test_prove_of_the_largest_bundle_stays_within_budget(
    large_archive: Path, tmp_path: Path
) -> None:
    out = tmp_path / "proof.json"
    result = measure("prove", str(large_archive), "--case", "check-3-04999", "--out", str(out))
    _within_budget(result)
    assert result.returncode == 0, result.stderr.decode()
    proof = json.loads(out.read_bytes())
    assert proof["head"]["cases_tree"]["tree_size"] == 20_000
    assert len(proof["audit_path"]) == _path_length(19_999, 20_000)
    assert _exit_code(out.read_bytes()) == 0


# ========================================================================== 6. output


HOSTILE_TEXT = "\x1b[2J\x1b[H\rProven: case ok\u202e\u200b"


def test_untrusted_text_from_a_proof_is_printed_escaped(tmp_path: Path) -> None:
    proof = one_leaf_proof({"case_id": HOSTILE_TEXT}, report_id="rpt" + HOSTILE_TEXT)
    done = _check_file(tmp_path, _jcs(proof))
    assert done.returncode == 0, done.stderr.decode()
    human = done.stdout.decode()
    for raw in ("\x1b", "\r", "\u202e", "\u200b"):
        assert raw not in human
    assert "\\x1b[2J" in human and "\\u202e" in human
    assert human.count("\n") == 2
    done = _check_file(tmp_path, _jcs(proof), "--json")
    result = json.loads(done.stdout)  # JSON keeps the exact strings
    assert result["case_id"] == HOSTILE_TEXT
    assert result["report_id"] == "rpt" + HOSTILE_TEXT


def test_untrusted_text_in_errors_is_escaped(tmp_path: Path) -> None:
    proof = one_leaf_proof({"case_id": "x"}, exported_at="2026" + HOSTILE_TEXT)
    done = _check_file(tmp_path, _jcs(proof))
    message = _one_line_error(done, 3, "malformed proof")
    assert "\x1b" not in message and "\r" not in message
    done = run_cli("prove", str(tmp_path / "proof.json"), "--case", HOSTILE_TEXT)
    assert done.returncode == 3
    assert "\x1b" not in done.stderr.decode()


def test_prove_escapes_the_case_id_it_cannot_find(bundles: dict[str, Path]) -> None:
    done = run_cli("prove", str(bundles["rpt-clean/alice"]), "--case", HOSTILE_TEXT)
    message = _one_line_error(done, 3, "no exported case")
    assert "\x1b" not in message and "\\x1b" in message


# ======================================================= the bounds are the contract's


def test_bounds_agree_with_the_schema_and_the_contract() -> None:
    from bundler.archive.reader import MAX_MEMBERS
    from bundler.core import schemas
    from bundler.evalbook.export import MAX_CASES as EXPORTED_CASES
    from bundler.trust.proof import MAX_AUDIT_PATH, MAX_SIGNATURE_BYTES, MAX_TREE_SIZE

    schema = schemas.load_schema("case-proof")
    tree = schema["$defs"]["head"]["properties"]["cases_tree"]["properties"]
    assert tree["tree_size"]["maximum"] == MAX_TREE_SIZE
    assert schema["properties"]["leaf_index"]["maximum"] == MAX_TREE_SIZE - 1
    assert schema["properties"]["audit_path"]["maxItems"] == MAX_AUDIT_PATH
    assert schema["properties"]["head_signature"]["maxLength"] == MAX_SIGNATURE_BYTES
    assert schema["properties"]["case_bytes"]["maxLength"] == _cap()
    # An EvalBook tree holds at most MAX_CASES leaves, an eval-banana one a leaf per
    # member; every tree either can build fits.
    assert MAX_TREE_SIZE >= EXPORTED_CASES
    assert MAX_TREE_SIZE >= MAX_MEMBERS
    assert 2**MAX_AUDIT_PATH >= MAX_TREE_SIZE > 2 ** (MAX_AUDIT_PATH - 1)


def test_tree_bounds_at_and_past_their_limits(signed: Signed) -> None:
    from bundler.trust.proof import MAX_TREE_SIZE

    def with_counts(leaf_index: int, tree_size: int) -> bytes:
        proof = json.loads(signed.proof)
        proof["leaf_index"] = leaf_index
        proof["head"]["cases_tree"]["tree_size"] = tree_size
        return _jcs(proof)

    assert _exit_code(with_counts(3, MAX_TREE_SIZE)) == 1  # a tree that large: wrong path
    assert _exit_code(with_counts(MAX_TREE_SIZE - 1, MAX_TREE_SIZE)) == 1
    assert _exit_code(with_counts(3, MAX_TREE_SIZE + 1)) == 3
    assert _exit_code(with_counts(MAX_TREE_SIZE, MAX_TREE_SIZE)) == 3
    assert _exit_code(with_counts(32, 32)) == 1  # outside its own tree: not proven


def _path_length(m: int, n: int) -> int:
    if n == 1:
        return 0
    k = 1
    while k * 2 < n:
        k *= 2
    return 1 + (_path_length(m, k) if m < k else _path_length(m - k, n - k))


def test_path_length_is_rfc_6962s() -> None:
    from bundler.trust.merkle import path_length

    for n in range(1, 70):
        for m in range(n):
            assert path_length(m, n) == _path_length(m, n), (m, n)
    for m, n in ((0, 1_000_000), (999_999, 1_000_000), (5_017, 20_000)):
        assert path_length(m, n) == _path_length(m, n)


def test_wrong_length_paths_are_refused_before_any_hash_is_used() -> None:
    from bundler.trust.merkle import InclusionError, InclusionFailure, verify_inclusion

    leaf = _leaf(b"x")
    for extra in (1, 5, 40):
        with pytest.raises(InclusionError) as info:
            verify_inclusion(leaf, 0, 1, [leaf] * extra, leaf)
        assert info.value.reason is InclusionFailure.PROOF_LENGTH
    with pytest.raises(InclusionError) as info:
        verify_inclusion(leaf, 3, 8, [leaf] * 2, leaf)
    assert info.value.reason is InclusionFailure.PROOF_LENGTH
    assert "(3)" in info.value.message


def test_proof_file_is_read_only_as_a_regular_file(tmp_path: Path) -> None:
    from bundler.core.errors import InputError
    from bundler.trust.proof import read_bounded

    path = tmp_path / "x"
    path.write_bytes(b"12345")
    assert read_bounded(str(path), limit=5, what="proof") == b"12345"
    with pytest.raises(InputError, match="over the 4 bytes"):
        read_bounded(str(path), limit=4, what="proof")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        read_bounded(str(fifo), limit=5, what="proof")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
