"""A flood of sidecars never decides which real signatures are read (SPEC 6, 11.3).

Anyone who can write beside a bundle can add ``<archive>.sig.<sha256 of bytes they
choose>`` under names that sort before the real countersignatures (a few thousand tries
buy a name below any given one). Only 64 sidecars are read, so reading in name order
let such a flood push the real signatures out: a false FAILED for ``verify
--identity``, ``prove --identity`` and ``fixity --allowed-signers``, and ``download``
leaving the real signatures behind. The signatures already there are now read first
(the store's own write time, which no writer sets), so every command proceeds with them.

Each kind of flood (junk bytes, valid signatures by an unknown key, oversized, named
against its bytes) x every command that reads sidecars, locally (both verifiers) and in
storage, through the installed console script and ``node js/verify-bundle.mjs``.
"""

from __future__ import annotations

import hashlib
import secrets
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from conftest import CLI, EXPORTED_AT, raw_client, run_cli
from s3_server import Server
from test_cli_voice import json_lines

from bundler.trust import sshsig

REPO = Path(__file__).resolve().parent.parent
STORE = REPO / "fixtures" / "stores" / "main"
NODE_VERIFIER = REPO / "js" / "verify-bundle.mjs"
STAMP = EXPORTED_AT.strftime("%Y-%m-%dT%H:%M:%SZ")
SSH_KEYGEN = "/usr/bin/ssh-keygen"
CASE = "accuracy-00003"
FLOOD = 70  # more than the 64 sidecars read


def _keygen(path: Path) -> Path:
    done = subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)],
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    return path


def _pub(key: Path) -> str:
    return " ".join(Path(f"{key}.pub").read_text().split()[:2])


@dataclass(frozen=True)
class Keys:
    bob: Path
    carol: Path
    mallory: Path
    allowed: Path  # bob@x and carol@x
    carol_only: Path


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    root = tmp_path_factory.mktemp("flood-keys")
    bob, carol, mallory = (_keygen(root / n) for n in ("bob", "carol", "mallory"))
    allowed = root / "allowed"
    allowed.write_text(f"bob@x {_pub(bob)}\ncarol@x {_pub(carol)}\n")
    carol_only = root / "carol_only"
    carol_only.write_text(f"carol@x {_pub(carol)}\n")
    return Keys(bob, carol, mallory, allowed, carol_only)


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """rpt-clean, unsigned at export: only the sidecars can anchor it."""
    out = tmp_path_factory.mktemp("flood-archive") / "clean.tar.zst"
    done = run_cli(
        "export", "--store", str(STORE), "--report", "rpt-clean", "--principal", "alice",
        "--exported-at", STAMP, "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    return out


def _head(archive: Path) -> bytes:
    import tarfile

    import zstandard

    with (
        zstandard.ZstdDecompressor().stream_reader(archive.read_bytes()) as raw,
        tarfile.open(fileobj=raw, mode="r|") as tar,
    ):
        for member in tar:
            if member.name.endswith("/bundle-head.json"):
                handle = tar.extractfile(member)
                assert handle is not None
                return handle.read()
    raise AssertionError("no bundle-head.json")


def _below(limit: str, make: Callable[[int], bytes]) -> list[bytes]:
    """FLOOD distinct contents whose SHA-256 hex sorts before ``limit``."""
    found: list[bytes] = []
    n = 0
    while len(found) < FLOOD:
        data = make(n)
        if hashlib.sha256(data).hexdigest() < limit:
            found.append(data)
        n += 1
    return found


def _mallory_signs(head: bytes, mallory: Path) -> Callable[[int], bytes]:
    key = sshsig.load_private_key(mallory, passphrase=None)
    signature = sshsig.sign(head, key).encode()

    # A valid signature by a key nobody allows, re-spelled (whitespace after its footer,
    # which ssh-keygen and both verifiers pass over) so that each copy has its own name.
    def make(n: int) -> bytes:
        tail = b""
        while n:
            n, digit = divmod(n, 4)
            tail += b" \t\r\n"[digit : digit + 1]
        return signature + tail + b"\n"

    return make


# The kinds of flood: what each of the FLOOD objects holds, and the name it takes.
Flood = Callable[[bytes, Keys], list[tuple[str, bytes]]]


def _named_by_bytes(contents: list[bytes]) -> list[tuple[str, bytes]]:
    return [(f".sig.{hashlib.sha256(c).hexdigest()}", c) for c in contents]


def _floods(limit: str) -> dict[str, Flood]:
    return {
        "junk bytes": lambda head, keys: _named_by_bytes(
            _below(limit, lambda n: f"junk {n}\n".encode())
        ),
        "valid signatures by an unknown key": lambda head, keys: _named_by_bytes(
            _below(limit, _mallory_signs(head, keys.mallory))
        ),
        "names their bytes do not hash to": lambda head, keys: [
            (f".sig.{n:064x}", b"x") for n in range(FLOOD)
        ],
    }


FLOOD_KINDS = sorted(_floods("f"))


@dataclass(frozen=True)
class Local:
    archive: Path
    carol_sidecar: str


def _local(archive: Path, keys: Keys, tmp: Path, kind: str) -> Local:
    """A copy of the archive countersigned by bob (.sig) and carol (.sig.<hex>), then
    flooded with FLOOD sidecars whose names sort before carol's."""
    copy = tmp / "a.tar.zst"
    copy.write_bytes(archive.read_bytes())
    for key in (keys.bob, keys.carol):
        done = run_cli("sign", str(copy), "--key", str(key))
        assert done.returncode == 0, done.stderr.decode()
    [carol] = [p.name for p in tmp.iterdir() if p.name.startswith("a.tar.zst.sig.")]
    time.sleep(0.05)
    for suffix, data in _floods(carol.rsplit(".", 1)[1])[kind](_head(copy), keys):
        (tmp / f"a.tar.zst{suffix}").write_bytes(data)
    return Local(copy, carol)


def _node(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["node", str(NODE_VERIFIER), *args], capture_output=True, timeout=300)


@pytest.mark.parametrize("kind", FLOOD_KINDS)
def test_a_local_flood_never_pushes_out_the_real_countersignatures(
    kind: str, archive: Path, keys: Keys, tmp_path: Path
) -> None:
    local = _local(archive, keys, tmp_path, kind)
    a = str(local.archive)
    for identity in ("bob@x", "carol@x"):
        done = run_cli("verify", a, "--allowed-signers", str(keys.allowed), "--identity", identity)
        assert done.returncode == 0, (kind, identity, done.stdout.decode()[-3000:])
        node = _node(a, "--allowed-signers", str(keys.allowed), "--identity", identity)
        assert node.returncode == 0, (kind, identity, node.stdout.decode()[-3000:])
    done = run_cli("verify", a, "--allowed-signers", str(keys.carol_only), "--json")
    assert done.returncode == 0, done.stdout.decode()[-3000:]
    [line] = json_lines(done)
    listed = line["signatures"]
    # The 64 read (bob's and carol's among them) and one entry naming how many were not.
    assert len(listed) == 64 + 1
    assert [s["state"] for s in listed if s["identity"] == "carol@x"] == ["verified"]
    assert "more than 64" in listed[-1]["reason"] and listed[-1]["state"] == "invalid"
    proof = tmp_path / "p.json"
    done = run_cli(
        "prove", a, "--case", CASE, "--allowed-signers", str(keys.allowed),
        "--identity", "carol@x", "--out", str(proof),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert orjson.loads(proof.read_bytes())["head_signature"] is not None


def test_the_node_verifier_checks_every_local_sidecar(
    archive: Path, keys: Keys, tmp_path: Path
) -> None:
    """Sidecars beside the archive are found without --signature, and every one is
    listed: good ones verify, bad ones (junk, misnamed, odd names) fail nothing."""
    copy = tmp_path / "a.tar.zst"
    copy.write_bytes(archive.read_bytes())
    done = run_cli("sign", str(copy), "--key", str(keys.bob))
    assert done.returncode == 0, done.stderr.decode()
    junk = b"not a signature\n"
    (tmp_path / f"a.tar.zst.sig.{hashlib.sha256(junk).hexdigest()}").write_bytes(junk)
    (tmp_path / f"a.tar.zst.sig.{'1' * 64}").write_bytes(b"misnamed")
    (tmp_path / f"a.tar.zst.sig.{hashlib.sha256(junk).hexdigest().upper()}").write_bytes(junk)
    (tmp_path / "a.tar.zst.sig.bak").write_bytes(junk)
    node = _node(str(copy), "--allowed-signers", str(keys.allowed))
    assert node.returncode == 0, node.stdout.decode()
    out = node.stdout.decode()
    for name in ("a.tar.zst.sig:", f"sig.{'1' * 64}", ".sig.bak"):
        assert name in out, (name, out)
    assert out.count("Signature:") == 5, out
    plain = _node(str(copy))
    assert plain.returncode == 0 and plain.stdout.decode().count("Signature:") == 5
    # No allowed signer among them: the same verdict in both verifiers.
    (tmp_path / "carol_only").write_text(keys.carol_only.read_text())
    node = _node(str(copy), "--allowed-signers", str(keys.carol_only))
    ours = run_cli("verify", str(copy), "--allowed-signers", str(keys.carol_only), "--json")
    assert (node.returncode, ours.returncode) == (1, 1)
    [line] = json_lines(ours)
    reasons = " ".join(str(s["reason"]) for s in line["signatures"])
    assert ".sig.bak" in " ".join(s["where"] for s in line["signatures"]), reasons
    assert "neither <archive>.sig nor" in reasons


# ------------------------------------------------------------------------ in storage


@dataclass(frozen=True)
class Stored:
    url: str
    prefix: str
    carol_key: str


def _stored(s3_server: Server, archive: Path, keys: Keys, kind: str) -> tuple[Stored, list[str]]:
    raw = raw_client(s3_server.endpoint)
    bucket = f"flood-{secrets.token_hex(4)}"
    raw.create_bucket(Bucket=bucket)
    endpoint = ["--endpoint-url", s3_server.endpoint]
    done = run_cli("upload", str(archive), f"s3://{bucket}/p", *endpoint, "--json")
    assert done.returncode == 0, done.stderr.decode()
    url = orjson.loads(done.stdout)["url"]
    for key in (keys.bob, keys.carol):
        done = run_cli("sign", url, "--key", str(key), *endpoint)
        assert done.returncode == 0, done.stderr.decode()
    key = url.split("/", 3)[3]
    listed = raw.list_objects_v2(Bucket=bucket, Prefix=key + ".sig.")
    [carol] = [o["Key"] for o in listed["Contents"]]
    time.sleep(1.1)  # the store's clock counts seconds
    for suffix, data in _floods(carol.rsplit(".", 1)[1])[kind](_head(archive), keys):
        raw.put_object(Bucket=bucket, Key=key + suffix, Body=data)
    return Stored(url, f"s3://{bucket}/p", carol), endpoint


@pytest.mark.s3
@pytest.mark.parametrize("kind", FLOOD_KINDS)
def test_a_stored_flood_never_pushes_out_the_real_countersignatures(
    kind: str, s3_server: Server, archive: Path, keys: Keys, tmp_path: Path
) -> None:
    stored, endpoint = _stored(s3_server, archive, keys, kind)

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*CLI, *args, *endpoint], capture_output=True, timeout=300)

    for identity in ("bob@x", "carol@x"):
        done = run("verify", stored.url, "--allowed-signers", str(keys.allowed), "--identity", identity)  # fmt: skip
        assert done.returncode == 0, (kind, identity, done.stdout.decode()[-3000:])
    done = run(
        "prove", stored.url, "--case", CASE, "--allowed-signers", str(keys.allowed),
        "--identity", "carol@x", "--out", str(tmp_path / "p.json"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    done = run("download", stored.url, str(tmp_path / "got.tar.zst"), "--json")
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    [line] = json_lines(done)
    carol_suffix = stored.carol_key.rsplit(".sig", 1)[1]
    assert str(tmp_path / f"got.tar.zst.sig{carol_suffix}") in line["signature_paths"]
    assert str(tmp_path / "got.tar.zst.sig") in line["signature_paths"]
    got = run_cli(
        "verify", str(tmp_path / "got.tar.zst"), "--allowed-signers", str(keys.carol_only)
    )
    assert got.returncode == 0, got.stdout.decode()[-3000:]
    done = run(
        "fixity", stored.prefix, "--level", "full", "--allowed-signers", str(keys.carol_only),
        "--ledger", str(tmp_path / "ledger.sqlite"), "--json", "-q",
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr).decode()[-3000:]


def test_verify_of_the_extract_directory_names_the_bag_beside_its_signatures(
    archive: Path, keys: Keys, tmp_path: Path
) -> None:
    """extract writes DIR/<bag>/ and its signatures beside it; verify DIR, the obvious
    next step, says which bag to verify, and that bag verifies with its sidecar."""
    copy = tmp_path / "a.tar.zst"
    copy.write_bytes(archive.read_bytes())
    assert run_cli("sign", str(copy), "--key", str(keys.bob)).returncode == 0
    out = tmp_path / "out"
    done = run_cli("extract", str(copy), str(out))
    assert done.returncode == 0, done.stderr.decode()
    [bag] = [p for p in out.iterdir() if p.is_dir()]
    assert (out / f"{bag.name}.sig").is_file()
    done = run_cli("verify", str(out))
    assert done.returncode == 3
    said = (done.stdout + done.stderr).decode()
    assert f"verify {bag}" in said, said
    done = run_cli("verify", str(bag), "--allowed-signers", str(keys.allowed))
    assert done.returncode == 0, done.stdout.decode()


@pytest.mark.parametrize(
    ("text", "once"),
    [("\x1b[2J", "\\x1b[2J"), ("\u202e", "\\u202e"), ("\r\n", "\\x0d\\x0a"), ("\u200b", "\\u200b")],
)
def test_untrusted_text_in_a_signature_reason_is_escaped_once(
    text: str, once: str, archive: Path, keys: Keys, tmp_path: Path
) -> None:
    """Text a signature carries (its namespace) is escaped where it is shown, once: the
    console and Markdown show ``\\u202e``, never ``\\\\u202e`` nor the raw character."""
    key = sshsig.load_private_key(keys.mallory, passphrase=None)
    sig = tmp_path / "odd.sig"
    sig.write_text(sshsig.sign(_head(archive), key, namespace=f"x{text}FORGED"))
    outdir = tmp_path / "out"
    done = run_cli(
        "verify", str(archive), "--allowed-signers", str(keys.allowed), "--signature",
        str(sig), "--output-dir", str(outdir),
    )  # fmt: skip
    assert done.returncode == 1
    console = done.stdout.decode()
    assert f"x{once}FORGED" in console, console
    assert "\\" + once not in console, console  # never escaped twice
    assert text not in console
    for page in outdir.rglob("*.md"):
        assert text not in page.read_text(encoding="utf-8")  # Markdown escapes for itself


@pytest.mark.parametrize("target", ["a valid signature", "a dangling name", "/dev/zero"])
def test_a_sidecar_that_is_a_link_is_never_followed_by_either_verifier(
    keys: Keys, archive: Path, tmp_path: Path, target: str
) -> None:
    # A link beside the archive may point anywhere; neither verifier follows it: it is
    # listed as not followed and, with only it to anchor, both say FAILED alike.
    original = archive
    archive = tmp_path / "b.tar.zst"
    archive.write_bytes(original.read_bytes())
    signed = tmp_path / "elsewhere.tar.zst"
    signed.write_bytes(archive.read_bytes())
    assert run_cli("sign", str(signed), "--key", str(keys.bob)).returncode == 0
    pointed = {
        "a valid signature": f"{signed}.sig",
        "a dangling name": str(tmp_path / "nothing-here"),
        "/dev/zero": "/dev/zero",
    }[target]
    Path(f"{archive}.sig").symlink_to(pointed)
    anchors = ["--allowed-signers", str(keys.allowed), "--identity", "bob@x", "--json"]
    python = run_cli("verify", str(archive), *anchors)
    node = subprocess.run(
        ["node", str(NODE_VERIFIER), str(archive), *anchors], capture_output=True, check=False
    )
    for done in (python, node):
        record = orjson.loads(done.stdout.splitlines()[-1])
        assert done.returncode == 1 and record["verdict"] == "failed", done.stderr
        (listed,) = [s for s in record["signatures"] if s["where"].endswith(".sig")]
        assert listed["state"] == "invalid" and "not followed" in (listed["reason"] or "")


def test_a_named_signature_is_checked_beside_the_sidecars_never_instead(
    keys: Keys, archive: Path, tmp_path: Path
) -> None:
    # SPEC 11.3: every signature present is checked; --signature adds one. Both
    # verifiers list the named one and the sidecar, and bob's sidecar anchors the bundle.
    bundle = tmp_path / "b.tar.zst"
    bundle.write_bytes(archive.read_bytes())
    assert run_cli("sign", str(bundle), "--key", str(keys.bob)).returncode == 0
    other = tmp_path / "other.tar.zst"
    other.write_bytes(archive.read_bytes())
    mallory = _keygen(tmp_path / "mallory")
    assert run_cli("sign", str(other), "--key", str(mallory)).returncode == 0
    named = tmp_path / "named.sig"
    Path(f"{other}.sig").rename(named)
    anchors = ["--allowed-signers", str(keys.allowed), "--signature", str(named), "--json"]
    python = run_cli("verify", str(bundle), *anchors)
    node = subprocess.run(
        ["node", str(NODE_VERIFIER), str(bundle), *anchors], capture_output=True, check=False
    )
    for done in (python, node):
        record = orjson.loads(done.stdout.splitlines()[-1])
        assert done.returncode == 0 and record["verdict"] == "verified", done.stderr
        states = sorted(s["state"] for s in record["signatures"])
        assert states == ["not_allowed", "verified"], record["signatures"]
