"""Every signature present means one thing on every path (SPEC 11.3), locally.

By class, against the real ``ssh-keygen``: an embedded signature that no longer verifies
fails every command that reads the bundle, with or without ``--allowed-signers`` (as
``ssh-keygen -Y check-novalidate`` says); every kind of sidecar (valid by an allowed
signer, valid by another, malformed, another namespace, over other bytes, oversized, a
FIFO, misnamed, one of too many) is listed with its state and never blocks; local
countersignatures work as in a bucket; and every ``--json`` line of every command, signed
or not, succeeding or failing, validates against its schema, and ``render`` takes every
record ``verify`` and ``audit`` write. The bundles are exported once per module.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import repack
from conftest import CLI, EXPORTED_AT, run_cli
from test_cli_voice import json_lines

REPO = Path(__file__).resolve().parent.parent
STORE = REPO / "fixtures" / "stores" / "main"
STAMP = EXPORTED_AT.strftime("%Y-%m-%dT%H:%M:%SZ")
SSH_KEYGEN = "/usr/bin/ssh-keygen"
NAMESPACE = "evalbook-bundle-head-v1"  # written out: a change in the code must fail here
CASE = "accuracy-00003"


def _keygen(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [SSH_KEYGEN, *args], input=stdin, capture_output=True, check=False, timeout=60
    )


def _key(root: Path, name: str) -> Path:
    path = root / name
    done = _keygen("-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path))
    assert done.returncode == 0, done.stderr.decode()
    return path


def _public(key: Path) -> str:
    return " ".join(Path(f"{key}.pub").read_text(encoding="utf-8").split()[:2])


def _fingerprint(key: Path) -> str:
    done = _keygen("-l", "-f", f"{key}.pub")
    return done.stdout.decode().split()[1]


def _sign_with_keygen(key: Path, message: bytes, where: Path, namespace: str = NAMESPACE) -> bytes:
    source = where.with_name(where.name + ".msg")
    source.write_bytes(message)
    done = _keygen("-Y", "sign", "-q", "-f", str(key), "-n", namespace, str(source))
    assert done.returncode == 0, done.stderr.decode()
    return Path(f"{source}.sig").read_bytes()


@dataclass(frozen=True)
class World:
    root: Path
    alice: Path
    bob: Path
    allowed: Path  # alice@example.org only
    both: Path  # alice@example.org and bob@example.org
    signed: Path  # exported with --key alice (embedded signature)
    unsigned: Path
    head: bytes  # the unsigned bundle's bundle-head.json
    tampered: Path  # signed, then a document changed and everything but the sig recomputed


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    if not Path(SSH_KEYGEN).is_file():
        pytest.fail(f"{SSH_KEYGEN} is required: signatures must interoperate with OpenSSH")
    root = tmp_path_factory.mktemp("sigpaths")
    alice, bob = _key(root, "alice"), _key(root, "bob")
    allowed = root / "allowed_signers"
    allowed.write_text(f"alice@example.org {_public(alice)}\n", encoding="utf-8")
    both = root / "both_signers"
    both.write_text(
        f"alice@example.org {_public(alice)}\nbob@example.org {_public(bob)}\n", encoding="utf-8"
    )
    signed, unsigned = root / "signed.tar.zst", root / "unsigned.tar.zst"
    for out, extra in ((signed, ("--key", str(alice))), (unsigned, ())):
        done = run_cli(
            "export", "--store", str(STORE), "--report", "rpt-clean", "--principal", "alice",
            "--exported-at", STAMP, "--out", str(out), *extra,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()
    bag = repack.open_bundle(signed)
    assert repack.HEAD_SIG_FILE in bag.files
    # The attack of the issue: edit a case, recompute every manifest, bundle.json and the
    # head, keep the old signature. Every other claim holds.
    cases = "data/cases/accuracy.jsonl"
    before = bag.files[cases]
    bag.files[cases] = before.replace(b'"example_id":"qa-0000"', b'"example_id":"qa-0001"', 1)
    assert bag.files[cases] != before
    tampered = repack.write_bundle(bag, root / "tampered.tar.zst")
    head = repack.open_bundle(unsigned).files[repack.HEAD_FILE]
    return World(root, alice, bob, allowed, both, signed, unsigned, head, tampered)


def _copy(src: Path, dest_dir: Path) -> Path:
    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / src.name
    shutil.copyfile(src, target)
    return target


# ------------------------------------------- an embedded signature that does not verify


def test_ssh_keygen_agrees_the_tampered_head_signature_is_bad(world: World) -> None:
    bag = repack.open_bundle(world.tampered)
    sig = world.root / "tampered-head.sig"
    sig.write_bytes(bag.files[repack.HEAD_SIG_FILE])
    done = _keygen(
        "-Y", "check-novalidate", "-n", NAMESPACE, "-s", str(sig),
        stdin=bag.files[repack.HEAD_FILE],
    )  # fmt: skip
    assert done.returncode != 0


TAMPERED_RUNS: dict[str, Callable[[World, Path], list[str]]] = {
    "verify": lambda w, t: ["verify", str(w.tampered), "--json"],
    "verify --allowed-signers": lambda w, t: [
        "verify",
        str(w.tampered),
        "--allowed-signers",
        str(w.allowed),
        "--json",
    ],
    "audit": lambda w, t: ["audit", str(w.tampered), "--json"],
    "extract": lambda w, t: ["extract", str(w.tampered), str(t / "out"), "--json"],
    "prove": lambda w, t: ["prove", str(w.tampered), "--case", CASE],
    "sign": lambda w, t: ["sign", str(_copy(w.tampered, t)), "--key", str(w.bob), "--json"],
}


@pytest.mark.parametrize("command", sorted(TAMPERED_RUNS))
def test_an_embedded_signature_that_does_not_verify_fails_every_command(
    command: str, world: World, tmp_path: Path
) -> None:
    done = run_cli(*TAMPERED_RUNS[command](world, tmp_path))
    assert done.returncode == 1, (command, done.stderr.decode())
    assert "Traceback" not in done.stderr.decode()
    text = done.stdout.decode() + done.stderr.decode()
    assert "embedded signature" in text and "does not match the signed bytes" in text
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    assert not list(tmp_path.glob("*.sig*"))
    if command.startswith("verify"):
        record = json_lines(done)[0]
        [embedded] = [s for s in record["signatures"] if s["embedded"]]
        assert embedded["state"] == "invalid"
        assert embedded["key"] == _fingerprint(world.alice)


def test_a_valid_embedded_signature_reads_signed_by_key_not_anchored(world: World) -> None:
    done = run_cli("verify", str(world.signed))
    assert done.returncode == 0, done.stderr.decode()
    anchor = next(x for x in done.stdout.decode().splitlines() if x.startswith("Anchor:"))
    assert f"signed by key {_fingerprint(world.alice)} (not anchored: pass --allowed-signers" in (
        anchor
    )
    assert "self-consistency only" in anchor


# ---------------------------------------------------------- sidecars, every kind


SIDECAR_KINDS = (
    # name, state without anchors, state with alice allowed
    ("alice", "valid", "verified"),
    ("bob", "valid", "not_allowed"),
    ("garbage", "invalid", "invalid"),
    ("other-namespace", "invalid", "invalid"),
    ("other-bytes", "invalid", "invalid"),
    ("oversized", "invalid", "invalid"),
    ("fifo", "invalid", "invalid"),
    ("misnamed", "invalid", "invalid"),
)


def _plant(kind: str, world: World, archive: Path) -> Path:
    """One sidecar of ``kind`` beside ``archive``, as ``.sig.<hex>`` (or ``.sig``)."""

    def countersig(data: bytes) -> Path:
        target = Path(f"{archive}.sig.{hashlib.sha256(data).hexdigest()}")
        target.write_bytes(data)
        return target

    scratch = archive.parent / f"scratch-{kind}"
    if kind == "alice":
        return countersig(_sign_with_keygen(world.alice, world.head, scratch))
    if kind == "bob":
        return countersig(_sign_with_keygen(world.bob, world.head, scratch))
    if kind == "garbage":
        return countersig(b"-----BEGIN SSH SIGNATURE-----\nnot base64 at all\n")
    if kind == "other-namespace":
        return countersig(_sign_with_keygen(world.alice, world.head, scratch, "file"))
    if kind == "other-bytes":
        return countersig(_sign_with_keygen(world.alice, world.head + b" ", scratch))
    if kind == "oversized":
        return countersig(b"x" * (64 * 1024 + 1))
    if kind == "misnamed":
        target = Path(f"{archive}.sig.{'0' * 64}")
        target.write_bytes(_sign_with_keygen(world.bob, world.head, scratch))
        return target
    assert kind == "fifo"
    target = Path(f"{archive}.sig")
    os.mkfifo(target)
    return target


@pytest.fixture(scope="module")
def crowded(world: World, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    """The unsigned bundle with one sidecar of every kind beside it."""
    archive = _copy(world.unsigned, tmp_path_factory.mktemp("crowded"))
    return archive, {kind: _plant(kind, world, archive) for kind, _, _ in SIDECAR_KINDS}


@pytest.mark.parametrize("anchored", [False, True], ids=["unanchored", "allowed-signers"])
def test_every_kind_of_sidecar_is_listed_with_its_state(
    anchored: bool, world: World, crowded: tuple[Path, dict[str, Path]]
) -> None:
    archive, planted = crowded
    extra = ["--allowed-signers", str(world.allowed)] if anchored else []
    done = subprocess.run(
        [*CLI, "verify", str(archive), "--json", *extra], capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()
    record = json_lines(done)[0]
    states = {s["where"]: s for s in record["signatures"]}
    for kind, plain, with_allowed in SIDECAR_KINDS:
        found = states[str(planted[kind])]
        assert found["state"] == (with_allowed if anchored else plain), (kind, found)
        assert found["embedded"] is False
        if found["state"] == "invalid":
            assert found["reason"], kind
    if anchored:
        assert record["anchor"]["signer"] == f"alice@example.org, key {_fingerprint(world.alice)}"
    else:
        assert record["anchor"]["signer"] is None
        assert record["anchor"]["self_consistent_only"] is True


def test_no_sidecar_blocks_prove_audit_extract_or_fixity(
    world: World, crowded: tuple[Path, dict[str, Path]], tmp_path: Path
) -> None:
    archive, _ = crowded
    anchor = ["--allowed-signers", str(world.allowed)]
    proof = subprocess.run(
        [*CLI, "prove", str(archive), "--case", CASE, *anchor], capture_output=True, timeout=60
    )
    assert proof.returncode == 0, proof.stderr.decode()
    signature = json.loads(proof.stdout)["head_signature"]
    assert (
        signature == (archive.parent / f"{archive.name}.sig.{_hex_of(world, 'alice')}").read_text()
    )
    audit = subprocess.run([*CLI, "audit", str(archive), *anchor], capture_output=True, timeout=60)
    assert audit.returncode == 0, audit.stderr.decode()
    out = tmp_path / "bag"
    extract = subprocess.run(
        [*CLI, "extract", str(archive), str(out), *anchor], capture_output=True, timeout=60
    )
    assert extract.returncode == 0, extract.stderr.decode()
    (bag,) = [p for p in out.iterdir() if p.is_dir()]
    # Only the sidecars that verify over the head travel with the bag.
    written = sorted(p.name for p in out.iterdir() if p.is_file())
    assert len(written) == 2 and written[0] == f"{bag.name}.sig", written


def _hex_of(world: World, who: str) -> str:
    key = world.alice if who == "alice" else world.bob
    data = _sign_with_keygen(key, world.head, world.root / f"hex-{who}")
    return hashlib.sha256(data).hexdigest()


def test_sixty_five_sidecars_are_bounded_and_never_block(world: World, tmp_path: Path) -> None:
    archive = _copy(world.unsigned, tmp_path)
    good = _sign_with_keygen(world.alice, world.head, tmp_path / "good")
    Path(f"{archive}.sig").write_bytes(good)
    for n in range(65):
        junk = f"junk {n}\n".encode()
        Path(f"{archive}.sig.{hashlib.sha256(junk).hexdigest()}").write_bytes(junk)
    done = run_cli("verify", str(archive), "--allowed-signers", str(world.allowed), "--json")
    assert done.returncode == 0, done.stderr.decode()
    listed = json_lines(done)[0]["signatures"]
    assert len(listed) == 65  # 64 read, one entry for the rest
    assert listed[0]["state"] == "verified"
    assert "more than 64" in listed[-1]["reason"]


# ------------------------------------------------------ countersignatures, locally


def test_local_countersignatures_repeat_and_choice_of_signer(world: World, tmp_path: Path) -> None:
    archive = _copy(world.unsigned, tmp_path)
    first = json_lines(run_cli("sign", str(archive), "--key", str(world.alice), "--json"))[0]
    assert (first["signature"], first["state"]) == (f"{archive}.sig", "stored")
    second = json_lines(run_cli("sign", str(archive), "--key", str(world.bob), "--json"))[0]
    bob_sig = Path(second["signature"])
    assert second["state"] == "stored"
    assert bob_sig.name == f"{archive.name}.sig.{hashlib.sha256(bob_sig.read_bytes()).hexdigest()}"
    for key, where in ((world.alice, f"{archive}.sig"), (world.bob, str(bob_sig))):
        again = run_cli("sign", str(archive), "--key", str(key), "--json")
        assert again.returncode == 0, again.stderr.decode()
        assert json_lines(again)[0] == {**json_lines(again)[0], "state": "already_signed"}
        assert json_lines(again)[0]["signature"] == where
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [archive.name, f"{archive.name}.sig", bob_sig.name]
    )
    # ssh-keygen verifies both, each as its signer.
    for identity, sig in (
        ("alice@example.org", Path(f"{archive}.sig")),
        ("bob@example.org", bob_sig),
    ):
        done = _keygen(
            "-Y", "verify", "-f", str(world.both), "-I", identity, "-n", NAMESPACE,
            "-s", str(sig), stdin=world.head,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()
    verified = json_lines(
        run_cli("verify", str(archive), "--allowed-signers", str(world.both), "--json")
    )[0]
    assert [s["state"] for s in verified["signatures"]] == ["verified", "verified"]
    # prove --identity chooses the signature the proof carries; check-proof agrees.
    for identity, sig in (
        ("bob@example.org", bob_sig),
        ("alice@example.org", Path(f"{archive}.sig")),
    ):
        proof = tmp_path / f"{identity}.proof.json"
        done = run_cli(
            "prove", str(archive), "--case", CASE, "--out", str(proof),
            "--allowed-signers", str(world.both), "--identity", identity,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()
        assert json.loads(proof.read_bytes())["head_signature"] == sig.read_text()
        check = run_cli(
            "check-proof", str(proof), "--allowed-signers", str(world.both), "--identity", identity
        )
        assert check.returncode == 0, check.stderr.decode()
    nobody = run_cli(
        "prove", str(archive), "--case", CASE,
        "--allowed-signers", str(world.both), "--identity", "carol@example.org",
    )  # fmt: skip
    assert nobody.returncode == 1


# -------------------------------------------- every --json line validates; render takes it


def _cases(world: World, tmp: Path) -> list[tuple[list[str], int]]:
    signed_copy = _copy(world.signed, tmp / "signed")
    return [
        (["verify", str(world.signed), "--json"], 0),
        (["verify", str(world.unsigned), "--json"], 0),
        (["verify", str(world.signed), "--allowed-signers", str(world.allowed), "--json"], 0),
        (["verify", str(world.unsigned), "--allowed-signers", str(world.allowed), "--json"], 1),
        (
            [
                "verify",
                str(world.signed),
                "--allowed-signers",
                str(world.both),
                "--identity",
                "bob@example.org",
                "--json",
            ],
            1,
        ),
        (["verify", str(world.tampered), "--json"], 1),
        (["verify", str(world.signed), str(world.tampered), "--json"], 1),
        (["audit", str(world.signed), "--allowed-signers", str(world.allowed), "--json"], 0),
        (["audit", str(world.tampered), "--json"], 1),
        (["extract", str(world.signed), str(tmp / "x1"), "--json"], 0),
        (["extract", str(world.tampered), str(tmp / "x2"), "--json"], 1),
        (["sign", str(signed_copy), "--key", str(world.alice), "--json"], 0),
        (["sign", str(signed_copy), "--key", str(world.bob), "--json"], 0),
        (["sign", str(_copy(world.tampered, tmp / "t")), "--key", str(world.bob), "--json"], 1),
        (
            [
                "prove",
                str(world.signed),
                "--case",
                CASE,
                "--allowed-signers",
                str(world.allowed),
                "--out",
                str(tmp / "p.json"),
                "--json",
            ],
            0,
        ),
        (["prove", str(world.tampered), "--case", CASE, "--json"], 1),
        (["inspect", str(world.signed), "--json"], 0),
    ]


def test_every_json_line_validates_and_render_takes_every_record(
    world: World, tmp_path: Path
) -> None:
    rendered = 0
    first = run_cli("verify", str(world.signed), "--json")
    (tmp_path / "first.json").write_bytes(first.stdout)
    page = tmp_path / "first.html"
    assert run_cli("render", str(tmp_path / "first.json"), "--html", str(page)).returncode == 0
    assert "(not anchored: pass --allowed-signers to check who)" in page.read_text()
    for n, (args, code) in enumerate(_cases(world, tmp_path)):
        done = run_cli(*args)
        assert done.returncode == code, (args, done.stderr.decode())
        for line in json_lines(done):
            if line["schema"] not in ("evalbook.verification.v1", "evalbook.audit.v1"):
                continue
            record = tmp_path / f"record-{n}-{rendered}.json"
            record.write_text(json.dumps(line), encoding="utf-8")
            page = tmp_path / f"page-{n}-{rendered}.html"
            shown = run_cli("render", str(record), "--html", str(page))
            assert shown.returncode == 0, (args, shown.stderr.decode())
            html = page.read_text(encoding="utf-8")
            sigs = line.get("signatures", (line.get("verification") or {}).get("signatures"))
            for sig in sigs or []:
                # The page names every signature and its state, as the record does.
                assert f"Signature {sig['where']} (" in html, (args, sig)
            rendered += 1
    assert rendered >= 10


@pytest.mark.parametrize("kind", [k for k, _, _ in SIDECAR_KINDS])
def test_the_anchor_claim_names_the_sidecar_it_rests_on(
    kind: str, world: World, tmp_path: Path
) -> None:
    """A sidecar alone: the signature claim names that sidecar, never
    bundle-head.json.sig, which the bundle does not hold (on the console and in JSON)."""
    archive = _copy(world.unsigned, tmp_path / kind)
    sidecar = _plant(kind, world, archive)
    args = [*CLI, "verify", str(archive), "--allowed-signers", str(world.allowed)]
    done = subprocess.run([*args, "--json"], capture_output=True, timeout=60)
    record = json_lines(done)[0]
    claims = [c for c in record["claims"] if c["subject"] == "signature"]
    assert len(claims) == 1 and claims[0]["path"] == str(sidecar), claims
    if claims[0]["state"] == "failed":
        text = subprocess.run(args, capture_output=True, timeout=60)
        shown = (text.stdout + text.stderr).decode()
        assert f"path {sidecar}" in shown, shown
        assert "path bundle-head.json.sig" not in shown, shown
