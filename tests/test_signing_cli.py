"""Signed bundle heads end to end (SPEC section 11.3), through the installed console script.

Every signature is checked twice: by `evalbook-bundle verify --allowed-signers` and by the
real `ssh-keygen -Y verify` an auditor already has, and signatures made by
`ssh-keygen -Y sign` must verify with ours. Archives are extracted for ssh-keygen with
`tar --zstd -xf`, which is fine here because the archives are our own trusted output.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import CLI, run_cli

SSH_KEYGEN = "/usr/bin/ssh-keygen"
# Written out rather than imported, so that a change of the namespace in the code fails here.
NAMESPACE = "evalbook-bundle-head-v1"
PASSPHRASE_ENV = "EVALBOOK_SIGN_PASSPHRASE"
PASSPHRASE = "correct horse battery staple"
EXPORTED_AT = "2026-11-30T00:00:00Z"
HEAD = "bundle-head.json"
HEAD_SIG = "bundle-head.json.sig"


# --------------------------------------------------------------------------- helpers


def _run(
    *args: str, stdin: bytes = b"", cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        list(args), input=stdin, capture_output=True, check=False, timeout=120, cwd=cwd
    )


def _keygen(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return _run(SSH_KEYGEN, *args, stdin=stdin)


@dataclass(frozen=True)
class Keys:
    alice: Path
    bob: Path
    encrypted: Path
    rsa: Path
    loose: Path  # an unencrypted Ed25519 key with mode 0644

    @staticmethod
    def public(key: Path) -> str:
        """``keytype base64`` of the key's .pub file as ssh-keygen wrote it."""
        key_type, blob = Path(f"{key}.pub").read_text(encoding="utf-8").split()[:2]
        return f"{key_type} {blob}"

    @staticmethod
    def fingerprint(key: Path) -> str:
        """The SHA256 fingerprint `ssh-keygen -lf key.pub` prints."""
        done = _keygen("-lf", f"{key}.pub")
        assert done.returncode == 0, done.stderr.decode()
        value = done.stdout.decode().split()[1]
        assert value.startswith("SHA256:")
        return value


def _generate(path: Path, key_type: str, passphrase: str = "") -> Path:
    extra = ["-b", "2048"] if key_type == "rsa" else []
    if passphrase:
        # Few KDF rounds: every load of the key pays for them, and strength is not under test.
        extra += ["-a", "2"]
    done = _keygen("-q", "-t", key_type, *extra, "-N", passphrase, "-C", "x", "-f", str(path))
    assert done.returncode == 0, done.stderr.decode()
    return path


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    if not Path(SSH_KEYGEN).is_file():
        pytest.fail(f"{SSH_KEYGEN} is required: signatures must interoperate with OpenSSH")
    for tool in ("tar", "zstd"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is required to extract archives the way an auditor would")
    root = tmp_path_factory.mktemp("keys")
    loose = _generate(root / "loose", "ed25519")
    loose.chmod(0o644)
    return Keys(
        alice=_generate(root / "alice", "ed25519"),
        bob=_generate(root / "bob", "ed25519"),
        encrypted=_generate(root / "encrypted", "ed25519", PASSPHRASE),
        rsa=_generate(root / "rsa", "rsa"),
        loose=loose,
    )


def _allowed(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _extract(archive: Path, dest: Path) -> Path:
    """Extract with GNU tar (trusted output only) and return the bag directory."""
    dest.mkdir(parents=True)
    done = _run("tar", "--zstd", "-xf", str(archive), "-C", str(dest))
    assert done.returncode == 0, done.stderr.decode()
    (bag,) = list(dest.iterdir())
    return bag


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _keygen_verify(
    allowed: Path, identity: str, signature: Path, message: bytes, namespace: str = NAMESPACE
) -> subprocess.CompletedProcess[bytes]:
    return _keygen(
        "-Y", "verify", "-f", str(allowed), "-I", identity, "-n", namespace, "-s", str(signature),
        stdin=message,
    )  # fmt: skip


def _keygen_sign(key: Path, message: Path, namespace: str = NAMESPACE) -> Path:
    """`ssh-keygen -Y sign -f key -n namespace message` -> message.sig."""
    done = _keygen("-Y", "sign", "-q", "-f", str(key), "-n", namespace, str(message))
    assert done.returncode == 0, done.stderr.decode()
    return Path(f"{message}.sig")


def _line(stderr: bytes, label: str) -> str:
    """The console summary line that starts with ``label:``."""
    lines = [x for x in stderr.decode().splitlines() if x.startswith(label + ":")]
    assert len(lines) == 1, stderr.decode()
    return lines[0].split(":", 1)[1].strip()


def _export(
    store: Path,
    out: Path,
    *extra: str,
    report: str = "rpt-clean",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    return run_cli(
        "export", "--store", str(store), "--report", report, "--principal", "alice",
        "--out", str(out), "--exported-at", EXPORTED_AT, *extra, env=env,
    )  # fmt: skip


@pytest.fixture(autouse=True)
def _no_inherited_passphrase(monkeypatch: pytest.MonkeyPatch) -> None:
    # run_cli passes the caller's environment through; a passphrase set there would
    # change what "no passphrase" means in these tests.
    monkeypatch.delenv(PASSPHRASE_ENV, raising=False)


@dataclass(frozen=True)
class Signed:
    archive: Path
    stdout: str
    bag: Path  # the extracted bag directory


@pytest.fixture(scope="module")
def signed(fixture_store: Path, keys: Keys, tmp_path_factory: pytest.TempPathFactory) -> Signed:
    """rpt-clean exported with --key alice (read-only), and its extracted bag."""
    root = tmp_path_factory.mktemp("signed")
    archive = root / "signed.tar.zst"
    done = _export(fixture_store, archive, "--key", str(keys.alice))
    assert done.returncode == 0, done.stderr.decode()
    assert "warning" not in done.stderr.decode()
    return Signed(archive, done.stdout.decode(), _extract(archive, root / "x"))


@pytest.fixture
def unsigned(bundles: dict[str, Path], tmp_path: Path) -> Path:
    """A private copy of the unsigned rpt-clean bundle (so sidecars can be written)."""
    dest = tmp_path / "plain.tar.zst"
    shutil.copyfile(bundles["rpt-clean/alice"], dest)
    return dest


@pytest.fixture
def unsigned_head(bundles: dict[str, Path], tmp_path: Path) -> Path:
    """The bundle-head.json of the unsigned rpt-clean bundle, extracted into tmp_path."""
    bag = _extract(bundles["rpt-clean/alice"], tmp_path / "head-x")
    return bag / HEAD


# ------------------------------------------------------------------ export --key


def test_export_embeds_a_signature_listed_in_the_tag_manifest(signed: Signed) -> None:
    bag = signed.bag
    assert (bag / HEAD).is_file()
    assert (bag / HEAD_SIG).is_file()
    sig_text = (bag / HEAD_SIG).read_text(encoding="ascii")
    assert sig_text.startswith("-----BEGIN SSH SIGNATURE-----\n")
    assert sig_text.endswith("-----END SSH SIGNATURE-----\n")
    tags: dict[str, str] = {}
    for line in (bag / "tagmanifest-sha256.txt").read_text(encoding="utf-8").splitlines():
        hex_digest, name = line.split("  ", 1)
        tags[name] = hex_digest
    assert tags[HEAD] == _sha256(bag / HEAD)
    assert tags[HEAD_SIG] == _sha256(bag / HEAD_SIG)
    # Tag files, not payload: the payload manifest does not name them.
    payload = (bag / "manifest-sha256.txt").read_text(encoding="utf-8")
    assert HEAD not in payload
    # The extra tag files keep the bag valid for a standard BagIt validator.
    import bagit

    bagit.Bag(str(bag)).validate()


def test_embedded_signature_verifies_with_ssh_keygen(
    signed: Signed, keys: Keys, tmp_path: Path
) -> None:
    allowed = _allowed(tmp_path / "allowed_signers", f"alice {keys.public(keys.alice)}")
    # Exactly the auditor's command of SPEC 11.3, run in the extracted bag.
    done = _run(
        SSH_KEYGEN, "-Y", "verify", "-f", str(allowed), "-I", "alice", "-n", NAMESPACE,
        "-s", HEAD_SIG, stdin=(signed.bag / HEAD).read_bytes(), cwd=signed.bag,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    said = (done.stdout + done.stderr).decode()
    assert f'Good "{NAMESPACE}" signature for alice' in said
    assert keys.fingerprint(keys.alice) in said


def test_verify_with_allowed_signers_names_signer_and_key(
    signed: Signed, keys: Keys, tmp_path: Path
) -> None:
    allowed = _allowed(tmp_path / "allowed_signers", f"alice {keys.public(keys.alice)}")
    done = run_cli(
        "verify", str(signed.archive), "--allowed-signers", str(allowed), "--identity", "alice"
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b""
    assert _line(done.stdout, "Anchor") == f"signed by alice, key {keys.fingerprint(keys.alice)}"
    assert _line(done.stdout, "Verdict") == "VERIFIED"
    assert _line(done.stdout, "Failed") == "0 claims"


def test_verify_without_identity_names_the_allowed_principals(
    signed: Signed, keys: Keys, tmp_path: Path
) -> None:
    allowed = _allowed(
        tmp_path / "allowed_signers", f"alice,auditor@example.org {keys.public(keys.alice)}"
    )
    done = run_cli("verify", str(signed.archive), "--allowed-signers", str(allowed), "--json")
    assert done.returncode == 0, done.stderr.decode()
    result = json.loads(done.stdout)
    expected = f"alice,auditor@example.org, key {keys.fingerprint(keys.alice)}"
    assert result["anchor"]["signer"] == expected
    assert result["anchor"]["self_consistent_only"] is False
    assert result["anchor"]["description"] == f"signed by {expected}"
    assert done.stderr == b""  # SPEC 7: --json prints no human summary


def test_head_names_the_printed_bundle_digest_and_anchors_verify(
    signed: Signed, keys: Keys, tmp_path: Path
) -> None:
    bag = signed.bag
    printed = dict(line.split(":", 1) for line in signed.stdout.splitlines()[:3])
    printed_digest = printed["Bundle digest"].split()[0]
    printed_path = printed["Archive"].strip()
    assert printed_path == str(signed.archive)
    head_bytes = (bag / HEAD).read_bytes()
    head = json.loads(head_bytes)
    bundle_bytes = (bag / "data" / "bundle.json").read_bytes()
    bundle = json.loads(bundle_bytes)
    # The head is derived from bundle.json alone (SPEC 11.2), recomputed here by hand.
    assert head == {
        "schema": "evalbook.bundle_head.v1",
        "bundle_digest": "sha256:" + hashlib.sha256(bundle_bytes).hexdigest(),
        "report_id": "rpt-clean",
        "report_digest": "sha256:" + _sha256(bag / "data" / "report" / "body.json"),
        "exported_at": EXPORTED_AT,
        "cases_tree": bundle["cases_tree"],
    }
    # Stored canonical: sorted keys, no whitespace (all its strings are ASCII).
    assert head_bytes == json.dumps(head, sort_keys=True, separators=(",", ":")).encode()
    assert head["bundle_digest"] == printed_digest

    done = run_cli("verify", str(signed.archive), "--expect-bundle-digest", head["bundle_digest"])
    assert done.returncode == 0, done.stderr.decode()
    assert _line(done.stdout, "Anchor") == f"expected bundle digest {printed_digest}"

    allowed = _allowed(tmp_path / "allowed_signers", f"alice {keys.public(keys.alice)}")
    done = run_cli(
        "verify", str(signed.archive), "--expect-bundle-digest", printed_digest,
        "--allowed-signers", str(allowed), "--identity", "alice",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    fingerprint = keys.fingerprint(keys.alice)
    assert _line(done.stdout, "Anchor") == (
        f"signed by alice, key {fingerprint}; expected bundle digest {printed_digest}"
    )

    wrong = "sha256:" + hashlib.sha256(b"another bundle").hexdigest()
    done = run_cli("verify", str(signed.archive), "--expect-bundle-digest", wrong)
    assert done.returncode == 1
    assert _line(done.stdout, "Verdict") == "FAILED"
    assert wrong in done.stdout.decode()


def test_signed_bundle_without_allowed_signers_is_self_consistent_only(signed: Signed) -> None:
    done = run_cli("verify", str(signed.archive), "--json")
    assert done.returncode == 0, done.stderr.decode()
    anchor = json.loads(done.stdout)["anchor"]["description"]
    assert "self-consistency only" in anchor
    # The signature is checked and named by its key, but anchors nothing (SPEC 11.3).
    assert "signed by key SHA256:" in anchor
    assert "(not anchored: pass --allowed-signers to check who)" in anchor
    result = json.loads(done.stdout)
    assert result["verdict"] == "verified"
    assert result["anchor"]["signer"] is None
    assert result["anchor"]["self_consistent_only"] is True
    [embedded] = result["signatures"]
    assert embedded["embedded"] is True
    assert embedded["state"] == "valid"
    assert embedded["key"].startswith("SHA256:")


def test_identity_or_signature_without_allowed_signers_is_a_usage_error(
    signed: Signed, tmp_path: Path
) -> None:
    for extra in (["--identity", "alice"], ["--signature", str(signed.bag / HEAD_SIG)]):
        done = run_cli("verify", str(signed.archive), *extra)
        assert done.returncode == 2, done.stderr.decode()
        assert "--allowed-signers" in done.stderr.decode()
        assert done.stdout == b""


# ------------------------------------------------------------------------------ sign


def test_sign_writes_a_sidecar_and_leaves_the_archive_alone(
    unsigned: Path, unsigned_head: Path, keys: Keys, tmp_path: Path
) -> None:
    before = _sha256(unsigned)
    done = run_cli("sign", str(unsigned), "--key", str(keys.alice))
    assert done.returncode == 0, done.stderr.decode()
    sidecar = Path(f"{unsigned}.sig")
    assert done.stdout.decode().splitlines()[-1] == f"Signature:   {sidecar}"
    assert "Signed:" in done.stdout.decode()
    assert "warning" not in done.stderr.decode()
    assert _sha256(unsigned) == before
    assert sorted(
        p.name for p in unsigned.parent.iterdir() if p.name.startswith(unsigned.name)
    ) == [
        unsigned.name,
        sidecar.name,
    ]

    # Ed25519 is deterministic: ssh-keygen signing the same head gives the same bytes.
    theirs = _keygen_sign(keys.alice, unsigned_head)
    assert sidecar.read_bytes() == theirs.read_bytes()

    allowed = _allowed(tmp_path / "allowed_signers", f"alice {keys.public(keys.alice)}")
    keygen = _keygen_verify(allowed, "alice", sidecar, unsigned_head.read_bytes())
    assert keygen.returncode == 0, keygen.stderr.decode()

    fingerprint = keys.fingerprint(keys.alice)
    # Picked up automatically as <archive>.sig ...
    done = run_cli(
        "verify", str(unsigned), "--allowed-signers", str(allowed), "--identity", "alice"
    )
    assert done.returncode == 0, done.stderr.decode()
    assert _line(done.stdout, "Anchor") == f"signed by alice, key {fingerprint}"
    # ... and named explicitly from anywhere else.
    elsewhere = tmp_path / "detached.sig"
    sidecar.rename(elsewhere)
    done = run_cli(
        "verify", str(unsigned), "--allowed-signers", str(allowed), "--signature", str(elsewhere)
    )
    assert done.returncode == 0, done.stderr.decode()
    assert _line(done.stdout, "Anchor") == f"signed by alice, key {fingerprint}"
    # With the sidecar gone the unsigned bundle has nothing to show.
    done = run_cli("verify", str(unsigned), "--allowed-signers", str(allowed))
    assert done.returncode == 1
    assert "no signature" in done.stdout.decode()


def test_sign_never_replaces_an_existing_sidecar(unsigned: Path, keys: Keys) -> None:
    # Whatever lies at ARCHIVE.sig stays; the new signature takes ARCHIVE.sig.<its hex>.
    sidecar = Path(f"{unsigned}.sig")
    sidecar.write_bytes(b"keep me\n")
    before = _sha256(unsigned)
    done = run_cli("sign", str(unsigned), "--key", str(keys.alice))
    assert done.returncode == 0, done.stderr.decode()
    assert sidecar.read_bytes() == b"keep me\n"
    assert _sha256(unsigned) == before
    [counter] = [p for p in unsigned.parent.iterdir() if p.name.startswith(f"{unsigned.name}.sig.")]
    assert counter.name == f"{unsigned.name}.sig.{_sha256(counter)}"


def test_sign_refuses_a_bundle_that_does_not_verify(unsigned: Path, keys: Keys) -> None:
    import zstandard

    # A claim fails (a case's score changed, no digest updated): exit 1, as verify.
    tar = bytearray(zstandard.ZstdDecompressor().stream_reader(unsigned.read_bytes()).read())
    index = tar.index(b'"score":1,"status":"pass"')
    tar[index + 8] = ord("0")
    data = zstandard.ZstdCompressor(write_checksum=True).compress(bytes(tar))
    unsigned.write_bytes(data)
    done = run_cli("sign", str(unsigned), "--key", str(keys.alice))
    assert done.returncode == 1, done.stderr.decode()
    assert done.stdout == b""
    assert "does not verify" in done.stderr.decode()
    assert "refusing to sign" in done.stderr.decode()
    assert not Path(f"{unsigned}.sig").exists()
    assert unsigned.read_bytes() == data


def test_sign_refuses_an_unreadable_bundle_with_exit_3(unsigned: Path, keys: Keys) -> None:
    data = bytearray(unsigned.read_bytes())
    data[len(data) // 2] ^= 0x01  # the zstd checksum no longer matches: unreadable
    unsigned.write_bytes(bytes(data))
    done = run_cli("sign", str(unsigned), "--key", str(keys.alice))
    assert done.returncode == 3, done.stderr.decode()
    assert "cannot be read" in done.stderr.decode()
    assert not Path(f"{unsigned}.sig").exists()


def test_signature_made_by_ssh_keygen_verifies_with_ours(
    unsigned: Path, unsigned_head: Path, keys: Keys, tmp_path: Path
) -> None:
    theirs = _keygen_sign(keys.alice, unsigned_head)
    allowed = _allowed(tmp_path / "allowed_signers", f"alice {keys.public(keys.alice)}")
    done = run_cli(
        "verify", str(unsigned), "--allowed-signers", str(allowed), "--identity", "alice",
        "--signature", str(theirs),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    assert _line(done.stdout, "Anchor") == f"signed by alice, key {keys.fingerprint(keys.alice)}"
    # The same file dropped beside the archive is picked up as the sidecar.
    shutil.copyfile(theirs, f"{unsigned}.sig")
    done = run_cli(
        "verify", str(unsigned), "--allowed-signers", str(allowed), "--identity", "alice"
    )
    assert done.returncode == 0, done.stderr.decode()
    assert _line(done.stdout, "Verdict") == "VERIFIED"


# ---------------------------------------------------------------- refused signatures


@dataclass(frozen=True)
class Refusal:
    allowed: Path
    identity: str
    signature: Path
    needle: str  # what our message must say


def _refusal(case: str, keys: Keys, head: Path, other_head: Path, work: Path) -> Refusal:
    alice = keys.public(keys.alice)
    allowed = work / "allowed_signers"
    if case == "wrong identity":
        _allowed(allowed, f"alice {alice}")
        return Refusal(
            allowed, "bob", _keygen_sign(keys.alice, head), "does not list identity 'bob'"
        )
    if case == "key not in allowed_signers":
        _allowed(allowed, f"alice {keys.public(keys.bob)}")
        return Refusal(
            allowed, "alice", _keygen_sign(keys.alice, head), "is not in the allowed signers"
        )
    if case == "namespaces option excludes ours":
        _allowed(allowed, f'alice namespaces="other" {alice}')
        return Refusal(
            allowed,
            "alice",
            _keygen_sign(keys.alice, head),
            "restricts the key to namespaces 'other'",
        )
    if case == "signature over other bytes":
        _allowed(allowed, f"alice {alice}")
        return Refusal(
            allowed,
            "alice",
            _keygen_sign(keys.alice, other_head),
            "does not match the signed bytes",
        )
    if case == "wrong namespace":
        _allowed(allowed, f"alice {alice}")
        return Refusal(
            allowed, "alice", _keygen_sign(keys.alice, head, namespace="other"), "namespace 'other'"
        )
    if case == "malformed signature":
        _allowed(allowed, f"alice {alice}")
        garbage = work / "garbage.sig"
        garbage.write_text(
            "-----BEGIN SSH SIGNATURE-----\nnot base64!\n-----END SSH SIGNATURE-----\n"
        )
        return Refusal(allowed, "alice", garbage, "not valid base64")
    raise AssertionError(case)


REFUSALS = [
    "wrong identity",
    "key not in allowed_signers",
    "namespaces option excludes ours",
    "signature over other bytes",
    "wrong namespace",
    "malformed signature",
]


@pytest.mark.parametrize("case", REFUSALS)
def test_refused_by_ours_and_by_ssh_keygen(
    case: str,
    unsigned: Path,
    unsigned_head: Path,
    bundles: dict[str, Path],
    keys: Keys,
    tmp_path: Path,
) -> None:
    # The head of another bundle (the superseded report), for "signature over other bytes".
    other_head = _extract(bundles["rpt-superseded/alice"], tmp_path / "other") / HEAD
    assert other_head.read_bytes() != unsigned_head.read_bytes()
    refusal = _refusal(case, keys, unsigned_head, other_head, tmp_path)

    keygen = _keygen_verify(
        refusal.allowed, refusal.identity, refusal.signature, unsigned_head.read_bytes()
    )
    assert keygen.returncode != 0, f"ssh-keygen accepted: {keygen.stdout.decode()}"
    assert b"Good" not in keygen.stdout + keygen.stderr

    done = run_cli(
        "verify", str(unsigned), "--allowed-signers", str(refusal.allowed),
        "--identity", refusal.identity, "--signature", str(refusal.signature),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr.decode()
    stdout = done.stdout.decode()
    assert _line(done.stdout, "Verdict") == "FAILED"
    assert _line(done.stdout, "Failed") == "1 claim"
    failure = [x for x in stdout.splitlines() if x.startswith("  - [2 bundle] signature:")]
    assert len(failure) == 1, stdout
    assert refusal.needle in failure[0]
    assert "signed by" not in _line(done.stdout, "Anchor")


def test_signature_over_another_bundle_made_by_our_sign_is_refused(
    unsigned: Path, bundles: dict[str, Path], keys: Keys, tmp_path: Path
) -> None:
    other = tmp_path / "other.tar.zst"
    shutil.copyfile(bundles["rpt-superseded/alice"], other)
    done = run_cli("sign", str(other), "--key", str(keys.alice))
    assert done.returncode == 0, done.stderr.decode()
    allowed = _allowed(tmp_path / "allowed_signers", f"alice {keys.public(keys.alice)}")
    # A valid signature by a trusted key, but of the other bundle's head.
    shutil.copyfile(f"{other}.sig", f"{unsigned}.sig")
    done = run_cli(
        "verify", str(unsigned), "--allowed-signers", str(allowed), "--identity", "alice"
    )
    assert done.returncode == 1
    assert "does not match the signed bytes" in done.stdout.decode()


def test_bundle_without_any_signature_fails_when_signers_are_given(
    unsigned: Path, keys: Keys, tmp_path: Path
) -> None:
    allowed = _allowed(tmp_path / "allowed_signers", f"alice {keys.public(keys.alice)}")
    done = run_cli("verify", str(unsigned), "--allowed-signers", str(allowed))
    assert done.returncode == 1, done.stderr.decode()
    assert _line(done.stdout, "Verdict") == "FAILED"
    assert "no signature: neither bundle-head.json.sig nor a sidecar" in done.stdout.decode()
    assert "signed by" not in _line(done.stdout, "Anchor")


def test_empty_allowed_signers_is_an_input_error(signed: Signed, tmp_path: Path) -> None:
    """An allowed_signers file with no signer line is exit 3, not a failed verification.

    The file is an input the user gave that cannot serve at all (it trusts nobody), like
    an unreadable --allowed-signers path: that is an input error (SPEC section 8, exit
    3), reported before any verdict. Exit 1 is for a signature that was checked against
    usable signers and did not match. The verdict must not be "verified", and must not
    silently fall back to self-consistency either. ssh-keygen refuses too (it cannot
    verify against nobody).
    """
    for name, text in (("empty", ""), ("comments-only", "# nobody yet\n\n")):
        allowed = tmp_path / name
        allowed.write_text(text, encoding="utf-8")
        done = run_cli("verify", str(signed.archive), "--allowed-signers", str(allowed))
        assert done.returncode == 3, done.stderr.decode()
        assert done.stdout == b""
        assert f"{allowed}: allowed signers file lists no signers" in done.stderr.decode()
        assert "VERIFIED" not in done.stderr.decode()
        keygen = _keygen_verify(
            allowed, "alice", signed.bag / HEAD_SIG, (signed.bag / HEAD).read_bytes()
        )
        assert keygen.returncode != 0


# ------------------------------------------------------------------------------ keys


def test_encrypted_key_needs_the_passphrase_from_the_environment(
    unsigned: Path, unsigned_head: Path, keys: Keys, tmp_path: Path
) -> None:
    sidecar = Path(f"{unsigned}.sig")
    done = run_cli("sign", str(unsigned), "--key", str(keys.encrypted))
    assert done.returncode == 2, done.stderr.decode()
    assert done.stdout == b""
    assert "passphrase-protected" in done.stderr.decode()
    assert PASSPHRASE_ENV in done.stderr.decode()
    assert not sidecar.exists()

    done = run_cli(
        "sign", str(unsigned), "--key", str(keys.encrypted), env={PASSPHRASE_ENV: "wrong"}
    )
    assert done.returncode == 2, done.stderr.decode()
    assert "wrong passphrase" in done.stderr.decode()
    assert not sidecar.exists()

    done = run_cli(
        "sign", str(unsigned), "--key", str(keys.encrypted), env={PASSPHRASE_ENV: PASSPHRASE}
    )
    assert done.returncode == 0, done.stderr.decode()
    assert PASSPHRASE not in (done.stdout + done.stderr).decode()
    allowed = _allowed(tmp_path / "allowed_signers", f"carol {keys.public(keys.encrypted)}")
    keygen = _keygen_verify(allowed, "carol", sidecar, unsigned_head.read_bytes())
    assert keygen.returncode == 0, keygen.stderr.decode()
    done = run_cli(
        "verify", str(unsigned), "--allowed-signers", str(allowed), "--identity", "carol"
    )
    assert done.returncode == 0, done.stderr.decode()
    assert (
        _line(done.stdout, "Anchor") == f"signed by carol, key {keys.fingerprint(keys.encrypted)}"
    )


def test_passphrase_is_never_an_option(unsigned: Path, keys: Keys) -> None:
    done = run_cli("sign", str(unsigned), "--key", str(keys.encrypted), "--passphrase", PASSPHRASE)
    assert done.returncode == 2
    assert "No such option" in done.stderr.decode()
    assert not Path(f"{unsigned}.sig").exists()


def test_export_with_encrypted_key(fixture_store: Path, keys: Keys, tmp_path: Path) -> None:
    out = tmp_path / "enc.tar.zst"
    done = _export(fixture_store, out, "--key", str(keys.encrypted))
    assert done.returncode == 2, done.stderr.decode()
    assert done.stdout == b""
    assert PASSPHRASE_ENV in done.stderr.decode()
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []  # no partial file left behind either

    done = _export(
        fixture_store, out, "--key", str(keys.encrypted), env={PASSPHRASE_ENV: PASSPHRASE}
    )
    assert done.returncode == 0, done.stderr.decode()
    bag = _extract(out, tmp_path / "x")
    allowed = _allowed(tmp_path / "allowed_signers", f"carol {keys.public(keys.encrypted)}")
    keygen = _keygen_verify(allowed, "carol", bag / HEAD_SIG, (bag / HEAD).read_bytes())
    assert keygen.returncode == 0, keygen.stderr.decode()


def test_rsa_key_is_refused_naming_ed25519(
    fixture_store: Path, unsigned: Path, keys: Keys, tmp_path: Path
) -> None:
    done = run_cli("sign", str(unsigned), "--key", str(keys.rsa))
    assert done.returncode == 2, done.stderr.decode()
    assert done.stdout == b""
    message = done.stderr.decode()
    assert "Ed25519" in message
    assert "RSA" in message
    assert str(keys.rsa) in message
    assert not Path(f"{unsigned}.sig").exists()

    out = tmp_path / "rsa.tar.zst"
    done = _export(fixture_store, out, "--key", str(keys.rsa))
    assert done.returncode == 2, done.stderr.decode()
    assert "Ed25519" in done.stderr.decode()
    assert not out.exists()


def test_key_readable_by_others_is_used_with_a_warning(
    unsigned: Path, unsigned_head: Path, keys: Keys, tmp_path: Path
) -> None:
    assert os.stat(keys.loose).st_mode & 0o777 == 0o644
    done = run_cli("sign", str(unsigned), "--key", str(keys.loose))
    assert done.returncode == 0, done.stderr.decode()
    warning = [x for x in done.stderr.decode().splitlines() if x.startswith("warning:")]
    assert len(warning) == 1, done.stderr.decode()
    assert str(keys.loose) in warning[0]
    assert "0644" in warning[0]
    assert "chmod 600" in warning[0]
    sidecar = Path(f"{unsigned}.sig")
    allowed = _allowed(tmp_path / "allowed_signers", f"dave {keys.public(keys.loose)}")
    keygen = _keygen_verify(allowed, "dave", sidecar, unsigned_head.read_bytes())
    assert keygen.returncode == 0, keygen.stderr.decode()


def test_extract_checks_the_sidecar_and_writes_it_beside_the_bag(
    unsigned: Path, keys: Keys, tmp_path: Path
) -> None:
    assert run_cli("sign", str(unsigned), "--key", str(keys.alice)).returncode == 0
    allowed = _allowed(tmp_path / "allowed", f"alice@example.org {keys.public(keys.alice)}")
    out = tmp_path / "out"
    done = run_cli("extract", str(unsigned), str(out), "--allowed-signers", str(allowed))
    assert done.returncode == 0, done.stderr.decode()
    (bag,) = [p for p in out.iterdir() if p.is_dir()]
    sig = out / f"{bag.name}.sig"  # beside the bag, where verify of the bag looks
    assert sig.read_bytes() == Path(f"{unsigned}.sig").read_bytes()
    # The README's step for auditors, with OpenSSH alone.
    check = _keygen_verify(
        allowed, "alice@example.org", sig, (bag / "bundle-head.json").read_bytes()
    )
    assert check.returncode == 0, check.stderr.decode()
    # The extracted bag itself still verifies (nothing was added inside it), and verify
    # of the bag finds the sidecar beside it.
    done = run_cli("verify", str(bag), "--allowed-signers", str(allowed), "--json")
    assert done.returncode == 0, done.stderr.decode()
    [found] = json.loads(done.stdout)["signatures"]
    assert (found["where"], found["state"]) == (str(sig), "verified")


def test_extract_with_allowed_signers_refuses_an_unknown_signer(
    unsigned: Path, keys: Keys, tmp_path: Path
) -> None:
    assert run_cli("sign", str(unsigned), "--key", str(keys.bob)).returncode == 0
    allowed = _allowed(tmp_path / "allowed", f"alice@example.org {keys.public(keys.alice)}")
    out = tmp_path / "out"
    done = run_cli("extract", str(unsigned), str(out), "--allowed-signers", str(allowed))
    assert done.returncode == 1, done.stderr.decode()
    assert not out.exists() or list(out.iterdir()) == []


def test_a_fifo_where_the_sidecar_should_be_never_hangs_verify(
    unsigned: Path, keys: Keys, tmp_path: Path
) -> None:
    os.mkfifo(f"{unsigned}.sig")
    allowed = _allowed(tmp_path / "allowed", f"alice@example.org {keys.public(keys.alice)}")
    done = subprocess.run(
        [*CLI, "verify", str(unsigned), "--allowed-signers", str(allowed)],
        capture_output=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr.decode()
    assert b"not a regular file" in done.stdout + done.stderr
    assert b"Traceback" not in done.stderr
