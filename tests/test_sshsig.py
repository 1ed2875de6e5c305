"""SSHSIG signatures (SPEC section 11.3), checked against the real ssh-keygen both ways."""

from __future__ import annotations

import base64
import calendar
import importlib.util
import os
import shutil
import struct
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from bundler.core.errors import BundlerError, InputError, UsageError
from bundler.trust.sshsig import (
    NAMESPACE,
    PASSPHRASE_ENV,
    SignatureError,
    check_novalidate,
    fingerprint,
    key_permissions_warning,
    load_private_key,
    match_pattern_list,
    parse_allowed_signers,
    parse_signature,
    sign,
    verify,
)

SSH_KEYGEN = "/usr/bin/ssh-keygen"
MESSAGE = b'{"schema":"evalbook.bundle_head.v1","bundle_digest":"sha256:00"}'
PASSPHRASE = b"correct horse battery"


@dataclass(frozen=True)
class Keys:
    root: Path
    alice: Path
    bob: Path
    encrypted: Path
    rsa: Path

    def public_line(self, key: Path) -> str:
        """``keytype base64`` of the key's .pub file, as ssh-keygen wrote it."""
        key_type, blob = Path(f"{key}.pub").read_text(encoding="utf-8").split()[:2]
        return f"{key_type} {blob}"


def _keygen(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [SSH_KEYGEN, *args], input=stdin, capture_output=True, check=False, timeout=60
    )


def _generate(path: Path, key_type: str, passphrase: str) -> Path:
    extra = ["-b", "2048"] if key_type == "rsa" else []
    done = _keygen("-q", "-t", key_type, *extra, "-N", passphrase, "-C", path.name, "-f", str(path))
    assert done.returncode == 0, done.stderr.decode()
    return path


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    if not Path(SSH_KEYGEN).is_file():
        pytest.fail(f"{SSH_KEYGEN} is required for the SSHSIG interoperability tests")
    root = tmp_path_factory.mktemp("keys")
    return Keys(
        root=root,
        alice=_generate(root / "alice", "ed25519", ""),
        bob=_generate(root / "bob", "ed25519", ""),
        encrypted=_generate(root / "enc", "ed25519", PASSPHRASE.decode()),
        rsa=_generate(root / "rsa", "rsa", ""),
    )


def _keygen_sign(
    key: Path, message: bytes, workdir: Path, namespace: str = NAMESPACE, hashalg: str = ""
) -> str:
    workdir.mkdir(parents=True, exist_ok=True)
    target = workdir / "message"
    target.write_bytes(message)
    extra = ["-O", f"hashalg={hashalg}"] if hashalg else []
    done = _keygen("-Y", "sign", "-q", "-f", str(key), "-n", namespace, *extra, str(target))
    assert done.returncode == 0, done.stderr.decode()
    text = (workdir / "message.sig").read_text(encoding="utf-8")
    (workdir / "message.sig").unlink()
    return text


def _our_sign(
    key: Path, message: bytes, workdir: Path, namespace: str = NAMESPACE, hashalg: str = ""
) -> str:
    assert not hashalg
    return sign(message, load_private_key(key, passphrase=None), namespace=namespace)


def _keygen_verify(
    message: bytes, signature: str, allowed: str, identity: str, workdir: Path
) -> tuple[bool, str]:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "allowed_signers").write_text(allowed, encoding="utf-8")
    (workdir / "sig").write_text(signature, encoding="utf-8")
    done = _keygen(
        "-Y", "verify",
        "-f", str(workdir / "allowed_signers"),
        "-I", identity,
        "-n", NAMESPACE,
        "-s", str(workdir / "sig"),
        stdin=message,
    )  # fmt: skip
    output = (done.stdout + done.stderr).decode()
    return done.returncode == 0, output


def _our_verify(
    message: bytes, signature: str, allowed: str, identity: str, workdir: Path
) -> tuple[bool, str]:
    try:
        signers = parse_allowed_signers(allowed, source="allowed_signers")
        result = verify(message, signature, signers, identity=identity)
    except SignatureError as exc:
        assert exc.exit_code == 1
        assert "\n" not in exc.message
        return False, exc.message
    return True, f"{result.principal} {result.fingerprint}"


Signer = Callable[..., str]
Verifier = Callable[[bytes, str, str, str, Path], tuple[bool, str]]
SIGNERS: dict[str, Signer] = {"ours": _our_sign, "ssh-keygen": _keygen_sign}
VERIFIERS: dict[str, Verifier] = {"ours": _our_verify, "ssh-keygen": _keygen_verify}


def _keygen_fingerprint(key: Path) -> str:
    done = _keygen("-l", "-E", "sha256", "-f", f"{key}.pub")
    assert done.returncode == 0
    return done.stdout.decode().split()[1]


# --- byte-for-byte and cross verification --------------------------------------------


def test_our_signature_is_byte_identical_to_ssh_keygen(keys: Keys, tmp_path: Path) -> None:
    ours = sign(MESSAGE, load_private_key(keys.alice, passphrase=None))
    theirs = _keygen_sign(keys.alice, MESSAGE, tmp_path)
    assert ours == theirs
    lines = ours.splitlines()
    assert lines[0] == "-----BEGIN SSH SIGNATURE-----"
    assert lines[-1] == "-----END SSH SIGNATURE-----"
    assert ours.endswith("-----END SSH SIGNATURE-----\n")
    assert all(len(line) <= 70 for line in lines[1:-1])


@pytest.mark.parametrize("signer", sorted(SIGNERS))
@pytest.mark.parametrize("verifier", sorted(VERIFIERS))
def test_signatures_verify_across_implementations(
    keys: Keys, tmp_path: Path, signer: str, verifier: str
) -> None:
    signature = SIGNERS[signer](keys.alice, MESSAGE, tmp_path / "sign")
    allowed = f"alice@example.com {keys.public_line(keys.alice)}\n"
    ok, output = VERIFIERS[verifier](
        MESSAGE, signature, allowed, "alice@example.com", tmp_path / "verify"
    )
    assert ok, output
    assert _keygen_fingerprint(keys.alice) in output


def test_verified_result_names_principal_and_key(keys: Keys, tmp_path: Path) -> None:
    signature = _keygen_sign(keys.alice, MESSAGE, tmp_path)
    signers = parse_allowed_signers(
        f"alice@example.com {keys.public_line(keys.alice)} laptop\n", source="allowed"
    )
    result = verify(MESSAGE, signature, signers, identity="alice@example.com")
    assert result.principal == "alice@example.com"
    assert result.fingerprint == _keygen_fingerprint(keys.alice)
    assert result.signer.line == 1
    assert result.signer.comment == "laptop"


def test_sha256_signature_from_ssh_keygen_verifies(keys: Keys, tmp_path: Path) -> None:
    signature = _keygen_sign(keys.alice, MESSAGE, tmp_path, hashalg="sha256")
    assert parse_signature(signature, source="sig").hash_algorithm == "sha256"
    allowed = f"alice@example.com {keys.public_line(keys.alice)}\n"
    ok, output = _our_verify(MESSAGE, signature, allowed, "alice@example.com", tmp_path)
    assert ok, output


def test_identity_none_reports_principals_like_find_principals(keys: Keys, tmp_path: Path) -> None:
    signature = sign(MESSAGE, load_private_key(keys.alice, passphrase=None))
    allowed = (
        f"bob@example.com {keys.public_line(keys.bob)}\n"
        f"alice@example.com,alice@corp.example {keys.public_line(keys.alice)}\n"
    )
    (tmp_path / "allowed").write_text(allowed, encoding="utf-8")
    (tmp_path / "sig").write_text(signature, encoding="utf-8")
    done = _keygen(
        "-Y", "find-principals", "-f", str(tmp_path / "allowed"), "-s", str(tmp_path / "sig")
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    result = verify(MESSAGE, signature, parse_allowed_signers(allowed, source="a"), identity=None)
    # find-principals prints one principal a line; we report the line's list as written.
    assert result.principal.split(",") == done.stdout.decode().split()
    assert result.signer.line == 2


def test_fingerprint_matches_ssh_keygen(keys: Keys) -> None:
    for key in (keys.alice, keys.bob, keys.rsa):
        blob = base64.b64decode(keys.public_line(key).split()[1])
        assert fingerprint(blob) == _keygen_fingerprint(key)


# --- rejections, in both implementations ---------------------------------------------


@dataclass(frozen=True)
class Case:
    message: bytes
    allowed: str
    identity: str
    namespace: str = NAMESPACE


def _cases(keys: Keys) -> dict[str, Case]:
    alice, bob = keys.public_line(keys.alice), keys.public_line(keys.bob)
    return {
        "tampered message": Case(
            MESSAGE + b" ", f"alice@example.com {alice}\n", "alice@example.com"
        ),
        "wrong namespace": Case(
            MESSAGE, f"alice@example.com {alice}\n", "alice@example.com", namespace="file"
        ),
        "wrong identity": Case(MESSAGE, f"alice@example.com {alice}\n", "mallory@example.com"),
        "key not allowed": Case(MESSAGE, f"alice@example.com {bob}\n", "alice@example.com"),
        "namespaces excludes ours": Case(
            MESSAGE, f'alice@example.com namespaces="git,file" {alice}\n', "alice@example.com"
        ),
        "negated identity": Case(
            MESSAGE, f"!alice@example.com,*@example.com {alice}\n", "alice@example.com"
        ),
        "cert-authority line": Case(
            MESSAGE, f"alice@example.com cert-authority {alice}\n", "alice@example.com"
        ),
        "expired key": Case(
            MESSAGE, f'alice@example.com valid-before="20200101" {alice}\n', "alice@example.com"
        ),
        "not yet valid key": Case(
            MESSAGE, f'alice@example.com valid-after="20990101" {alice}\n', "alice@example.com"
        ),
        "rsa line for the principal": Case(
            MESSAGE, f"alice@example.com {keys.public_line(keys.rsa)}\n", "alice@example.com"
        ),
    }


def _accepted(keys: Keys) -> dict[str, Case]:
    alice, bob = keys.public_line(keys.alice), keys.public_line(keys.bob)
    return {
        "wildcard principal": Case(MESSAGE, f"*@example.com {alice}\n", "alice@example.com"),
        "question mark": Case(MESSAGE, f"alic?@example.com {alice}\n", "alice@example.com"),
        "negation elsewhere": Case(
            MESSAGE, f"!mallory@example.com,*@example.com {alice}\n", "alice@example.com"
        ),
        "namespaces includes ours": Case(
            MESSAGE, f'alice@example.com namespaces="git,evalbook-*" {alice}\n', "alice@example.com"
        ),
        "option names any case": Case(
            MESSAGE, f'alice@example.com NAMESPACES="{NAMESPACE}" {alice}\n', "alice@example.com"
        ),
        "within validity": Case(
            MESSAGE,
            f'alice@example.com valid-after="20200101",valid-before="20990101" {alice}\n',
            "alice@example.com",
        ),
        "second line": Case(
            MESSAGE,
            f"# team\n\nbob@example.com {bob}\nalice@example.com {alice} work key\n",
            "alice@example.com",
        ),
        "quoted principals": Case(MESSAGE, f'"alice@example.com,ops" {alice}\n', "ops"),
    }


@pytest.mark.parametrize("signer", sorted(SIGNERS))
@pytest.mark.parametrize("verifier", sorted(VERIFIERS))
@pytest.mark.parametrize(
    "name",
    [
        "tampered message",
        "wrong namespace",
        "wrong identity",
        "key not allowed",
        "namespaces excludes ours",
        "negated identity",
        "cert-authority line",
        "expired key",
        "not yet valid key",
        "rsa line for the principal",
    ],
)
def test_rejected_by_both_implementations(
    keys: Keys, tmp_path: Path, signer: str, verifier: str, name: str
) -> None:
    case = _cases(keys)[name]
    signature = SIGNERS[signer](keys.alice, MESSAGE, tmp_path / "sign", namespace=case.namespace)
    ok, output = VERIFIERS[verifier](
        case.message, signature, case.allowed, case.identity, tmp_path / "verify"
    )
    assert not ok, f"{verifier} accepted a signature it must refuse ({name}): {output}"


@pytest.mark.parametrize("verifier", sorted(VERIFIERS))
@pytest.mark.parametrize(
    "name",
    [
        "wildcard principal",
        "question mark",
        "negation elsewhere",
        "namespaces includes ours",
        "option names any case",
        "within validity",
        "second line",
        "quoted principals",
    ],
)
def test_accepted_by_both_implementations(
    keys: Keys, tmp_path: Path, verifier: str, name: str
) -> None:
    case = _accepted(keys)[name]
    signature = sign(MESSAGE, load_private_key(keys.alice, passphrase=None))
    ok, output = VERIFIERS[verifier](case.message, signature, case.allowed, case.identity, tmp_path)
    assert ok, f"{verifier} refused ({name}): {output}"


def test_rejection_messages_say_why(keys: Keys) -> None:
    alice, bob = keys.public_line(keys.alice), keys.public_line(keys.bob)
    key = load_private_key(keys.alice, passphrase=None)
    good = sign(MESSAGE, key)

    def refusal(message: bytes, signature: str, allowed: str, identity: str | None) -> str:
        signers = parse_allowed_signers(allowed, source="allowed")
        with pytest.raises(SignatureError) as info:
            verify(message, signature, signers, identity=identity, source="head.sig")
        assert info.value.message.startswith("head.sig: ")
        return info.value.message

    line = f"alice@example.com {alice}\n"
    assert "does not match" in refusal(MESSAGE + b"x", good, line, "alice@example.com")
    other_ns = sign(MESSAGE, key, namespace="file")
    assert "namespace 'file'" in refusal(MESSAGE, other_ns, line, "alice@example.com")
    assert "not in the allowed signers" in refusal(
        MESSAGE, good, f"alice@example.com {bob}\n", None
    )
    assert "does not list identity 'eve'" in refusal(MESSAGE, good, line, "eve")
    assert "namespaces 'git'" in refusal(
        MESSAGE, good, f'alice@example.com namespaces="git" {alice}\n', "alice@example.com"
    )
    assert "expire" in refusal(
        MESSAGE, good, f'alice@example.com valid-before="20200101Z" {alice}\n', None
    )


def test_unsupported_hash_algorithm_is_refused(keys: Keys) -> None:
    signature = sign(MESSAGE, load_private_key(keys.alice, passphrase=None))
    blob = _blob(signature).replace(b"\x00\x00\x00\x06sha512", b"\x00\x00\x00\x06sha384")
    signers = parse_allowed_signers(
        f"alice@example.com {keys.public_line(keys.alice)}\n", source="a"
    )
    with pytest.raises(SignatureError, match="sha384"):
        verify(MESSAGE, _armor(blob), signers, identity="alice@example.com")


def test_rsa_signature_from_ssh_keygen_is_refused(keys: Keys, tmp_path: Path) -> None:
    signature = _keygen_sign(keys.rsa, MESSAGE, tmp_path)
    assert parse_signature(signature, source="sig").key_type == "ssh-rsa"
    signers = parse_allowed_signers(f"alice@example.com {keys.public_line(keys.rsa)}\n", source="a")
    with pytest.raises(SignatureError, match="ssh-rsa"):
        verify(MESSAGE, signature, signers, identity="alice@example.com")


def test_signature_over_other_bytes_fails(keys: Keys) -> None:
    signature = sign(b"other bytes", load_private_key(keys.alice, passphrase=None))
    signers = parse_allowed_signers(
        f"alice@example.com {keys.public_line(keys.alice)}\n", source="a"
    )
    with pytest.raises(SignatureError, match="does not match the signed bytes"):
        verify(MESSAGE, signature, signers, identity="alice@example.com")


# --- corrupt signatures --------------------------------------------------------------


def _blob(armored: str) -> bytes:
    return base64.b64decode("".join(armored.splitlines()[1:-1]))


def _armor(blob: bytes) -> str:
    body = base64.b64encode(blob).decode()
    lines = [body[i : i + 70] for i in range(0, len(body), 70)]
    armor = ["-----BEGIN SSH SIGNATURE-----", *lines, "-----END SSH SIGNATURE-----"]
    return "\n".join(armor) + "\n"


def _u32(n: int) -> bytes:
    return struct.pack(">I", n)


def test_parsed_fields(keys: Keys) -> None:
    signature = sign(MESSAGE, load_private_key(keys.alice, passphrase=None))
    parsed = parse_signature(signature, source="sig")
    assert parsed.version == 1
    assert parsed.key_type == "ssh-ed25519"
    assert parsed.namespace == NAMESPACE
    assert parsed.hash_algorithm == "sha512"
    assert parsed.reserved == b""
    assert parsed.public_key is not None and len(parsed.public_key) == 32
    assert parsed.signature is not None and len(parsed.signature) == 64
    assert parsed.fingerprint == _keygen_fingerprint(keys.alice)
    # CR before the body's line ends is whitespace to ssh-keygen's base64 reader too.
    header, rest = signature.split("\n", 1)
    assert parse_signature(header + "\n" + rest.replace("\n", "\r\n"), source="sig") == parsed


def _keygen_check_novalidate(message: bytes, signature: str, workdir: Path) -> bool:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "sig").write_bytes(signature.encode("utf-8"))
    done = _keygen(
        "-Y", "check-novalidate", "-n", NAMESPACE, "-s", str(workdir / "sig"), stdin=message
    )  # fmt: skip
    return done.returncode == 0


def _our_check_novalidate(message: bytes, signature: str) -> bool:
    try:
        check_novalidate(message, signature, source="sig")
    except BundlerError as exc:
        assert "\n" not in exc.message and exc.message.startswith("sig: ")
        return False
    return True


LINE_ENDS = {"LF": "\n", "CRLF": "\r\n"}


@pytest.mark.parametrize("footer", ["LF", "CRLF", "none"])
@pytest.mark.parametrize("body", sorted(LINE_ENDS))
@pytest.mark.parametrize("header", sorted(LINE_ENDS))
@pytest.mark.parametrize("signer", sorted(SIGNERS))
def test_line_endings_are_read_as_ssh_keygen_reads_them(
    keys: Keys, tmp_path: Path, signer: str, header: str, body: str, footer: str
) -> None:
    # An auditor checks with ssh-keygen (SPEC 11.3): no spelling of the armor's line ends
    # may anchor trust here that ssh-keygen refuses, nor the other way round.
    signature = SIGNERS[signer](keys.alice, MESSAGE, tmp_path / "s")
    lines = signature.rstrip("\n").split("\n")
    spelled = (
        lines[0]
        + LINE_ENDS[header]
        + "".join(line + LINE_ENDS[body] for line in lines[1:-1])
        + lines[-1]
        + ("" if footer == "none" else LINE_ENDS[footer])
    )
    theirs = _keygen_check_novalidate(MESSAGE, spelled, tmp_path / "k")
    assert _our_check_novalidate(MESSAGE, spelled) == theirs, (header, body, footer, theirs)
    assert theirs == (header == "LF")  # what ssh-keygen does, so the test cannot pass vacuously


def test_corrupt_signatures_are_clear_errors(keys: Keys) -> None:
    good = sign(MESSAGE, load_private_key(keys.alice, passphrase=None))
    blob = _blob(good)
    corrupt = {
        "empty": ("", "missing -----BEGIN"),
        "no header": (good.split("\n", 1)[1], "missing -----BEGIN"),
        "no footer": (good.replace("-----END SSH SIGNATURE-----\n", ""), "no -----END"),
        "not base64": (_armor(blob).replace(_armor(blob).splitlines()[1][:4], "!!!!"), "base64"),
        "bad padding": (good.replace("==\n", "\n").replace("=\n", "\n"), "base64"),
        "truncated": (_armor(blob[:50]), "truncated"),
        "wrong magic": (_armor(b"SSHSIX" + blob[6:]), "SSHSIG"),
        "version 2": (_armor(blob[:6] + _u32(2) + blob[10:]), "version 2"),
        "trailing bytes": (_armor(blob + b"\x00"), "trailing"),
        "text after footer": (good + "extra\n", "after -----END"),
    }
    signers = parse_allowed_signers(
        f"alice@example.com {keys.public_line(keys.alice)}\n", source="a"
    )
    for name, (text, needle) in corrupt.items():
        with pytest.raises(InputError) as info:
            parse_signature(text, source="head.sig")
        assert needle in info.value.message, (name, info.value.message)
        assert info.value.message.startswith("head.sig:"), name
        assert "\n" not in info.value.message
        with pytest.raises(SignatureError):
            verify(MESSAGE, text, signers, identity="alice@example.com", source="head.sig")


def test_short_ed25519_signature_is_refused(keys: Keys) -> None:
    good = sign(MESSAGE, load_private_key(keys.alice, passphrase=None))
    blob = _blob(good)
    inner = _u32(11) + b"ssh-ed25519" + _u32(63) + b"\x00" * 63
    head = blob[: -(4 + 4 + 11 + 4 + 64)]
    with pytest.raises(InputError, match="63 bytes"):
        parse_signature(_armor(head + _u32(len(inner)) + inner), source="sig")


# --- allowed_signers -----------------------------------------------------------------


def test_empty_allowed_signers_is_a_clear_error() -> None:
    for text in ("", "\n\n", "# nobody yet\n   \n"):
        with pytest.raises(InputError, match="allowed_signers: allowed signers file lists no"):
            parse_allowed_signers(text, source="allowed_signers")


def test_verify_with_no_signers_fails(keys: Keys) -> None:
    signature = sign(MESSAGE, load_private_key(keys.alice, passphrase=None))
    with pytest.raises(SignatureError, match="no allowed signers"):
        verify(MESSAGE, signature, [], identity=None)


def test_allowed_signers_fields(keys: Keys) -> None:
    alice, rsa_line = keys.public_line(keys.alice), keys.public_line(keys.rsa)
    text = (
        "# comment line\n"
        f'  "alice@example.com,ops team" Namespaces="a,b",VALID-AFTER="20240102030405Z" '
        f"{alice} alice laptop\n"
        f"carol@example.com {rsa_line}\n"
        f'dave@example.com cert-authority,valid-before="20300101UTC" {alice}\n'
    )
    first, second, third = parse_allowed_signers(text, source="as")
    assert first.line == 2
    assert first.principals == "alice@example.com,ops team"
    assert first.namespaces == "a,b"
    assert first.valid_after == calendar.timegm((2024, 1, 2, 3, 4, 5, 0, 0, 0))
    assert first.valid_before is None
    assert first.comment == "alice laptop"
    assert first.matches_principal("ops team")
    assert not first.allows_namespace(NAMESPACE)
    assert second.key_type == "ssh-rsa"
    assert second.public_key is None
    assert third.cert_authority
    assert third.valid_before == calendar.timegm((2030, 1, 1, 0, 0, 0, 0, 0, 0))


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("alice@example.com", "no key"),
        ("alice@example.com   ", "missing key"),
        ('"alice@example.com ssh-ed25519 AAAA', "unterminated quote"),
        ('alice@example.com namespaces="x ssh-ed25519 AAAA', "unterminated quote"),
        ('alice@example.com foo="bar" KEY', "unknown option 'foo'"),
        ("alice@example.com namespaces=git KEY", "double quotes"),
        ('alice@example.com namespaces="a",namespaces="b" KEY', 'more than one "namespaces"'),
        ('alice@example.com valid-after="2020" KEY', "YYYYMMDD"),
        ('alice@example.com valid-after="20201340" KEY', "not a valid time"),
        (
            'alice@example.com valid-after="20300101",valid-before="20200101" KEY',
            '"valid-before" is not after',
        ),
        ('alice@example.com namespaces="a", KEY', "end with a comma"),
        ("alice@example.com ssh-ed25519 !!!!", "not valid base64"),
        ("alice@example.com ssh-ed25519", "missing key"),
        ("alice@example.com ssh-rsa BLOB", "labelled ssh-rsa but holds ssh-ed25519"),
    ],
)
def test_malformed_allowed_signers_lines(keys: Keys, line: str, needle: str) -> None:
    blob = keys.public_line(keys.alice).split()[1]
    text = "# header\n" + line.replace("KEY", f"ssh-ed25519 {blob}").replace("BLOB", blob) + "\n"
    with pytest.raises(InputError) as info:
        parse_allowed_signers(text, source="allowed_signers")
    assert info.value.message.startswith("allowed_signers:2: ")
    assert needle in info.value.message


@pytest.mark.parametrize(
    ("patterns", "identity"),
    [
        ("alice@example.com", "alice@example.com"),
        ("alice@example.com", "Alice@example.com"),
        ("*@example.com", "alice@example.com"),
        ("*@example.com", "alice@example.org"),
        ("a*e@*.com", "alice@example.com"),
        ("a?ice@example.com", "alice@example.com"),
        ("a?ice@example.com", "alliice@example.com"),
        ("*", "anyone"),
        ("bob,carol,alice", "alice"),
        ("!alice,*", "alice"),
        ("*,!alice", "alice"),
        ("!bob,*", "alice"),
        ("!alice", "bob"),
        ("**a**", "banana"),
        ("*ana", "banana"),
        ("b*n?n*", "banana"),
    ],
)
def test_principal_patterns_match_like_ssh_keygen(
    keys: Keys, tmp_path: Path, patterns: str, identity: str
) -> None:
    allowed = tmp_path / "allowed"
    allowed.write_text(f"{patterns} {keys.public_line(keys.alice)}\n", encoding="utf-8")
    done = _keygen("-Y", "match-principals", "-I", identity, "-f", str(allowed))
    assert match_pattern_list(identity, patterns) == (done.returncode == 0)


# --- private keys --------------------------------------------------------------------


def test_encrypted_key_needs_the_right_passphrase(keys: Keys, tmp_path: Path) -> None:
    with pytest.raises(UsageError) as missing:
        load_private_key(keys.encrypted, passphrase=None)
    assert PASSPHRASE_ENV in missing.value.message
    assert str(keys.encrypted) in missing.value.message
    if importlib.util.find_spec("bcrypt") is None:
        pytest.fail("decrypting OpenSSH keys needs the 'bcrypt' package, which is not installed")
    with pytest.raises(UsageError) as wrong:
        load_private_key(keys.encrypted, passphrase=b"wrong")
    assert PASSPHRASE_ENV in wrong.value.message
    assert "wrong passphrase" in wrong.value.message
    key = load_private_key(keys.encrypted, passphrase=PASSPHRASE)
    signature = sign(MESSAGE, key)
    ok, output = _keygen_verify(
        MESSAGE, signature, f"enc {keys.public_line(keys.encrypted)}\n", "enc", tmp_path
    )
    assert ok, output


def test_passphrase_is_ignored_for_an_unencrypted_key(keys: Keys) -> None:
    key = load_private_key(keys.alice, passphrase=b"unused")
    assert sign(MESSAGE, key) == sign(MESSAGE, load_private_key(keys.alice, passphrase=None))


def test_rsa_key_is_refused(keys: Keys) -> None:
    with pytest.raises(UsageError) as info:
        load_private_key(keys.rsa, passphrase=None)
    assert info.value.exit_code == 2
    assert str(keys.rsa) in info.value.message
    assert "RSA" in info.value.message and "Ed25519" in info.value.message


def test_unreadable_or_foreign_key_files_are_refused(keys: Keys, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read signing key"):
        load_private_key(tmp_path / "absent", passphrase=None)
    public = Path(f"{keys.alice}.pub")
    with pytest.raises(UsageError, match="not an OpenSSH private key"):
        load_private_key(public, passphrase=None)


def test_group_readable_key_warns_but_works(keys: Keys, tmp_path: Path) -> None:
    loose = tmp_path / "loose.key"
    shutil.copyfile(keys.alice, loose)
    os.chmod(loose, 0o644)
    warning = key_permissions_warning(loose)
    assert warning is not None
    assert str(loose) in warning and "0644" in warning
    signature = sign(MESSAGE, load_private_key(loose, passphrase=None))
    ok, output = _keygen_verify(
        MESSAGE, signature, f"alice {keys.public_line(keys.alice)}\n", "alice", tmp_path
    )
    assert ok, output
    os.chmod(loose, 0o600)
    assert key_permissions_warning(loose) is None


def test_sign_refuses_empty_namespace(keys: Keys) -> None:
    with pytest.raises(UsageError, match="namespace"):
        sign(MESSAGE, load_private_key(keys.alice, passphrase=None), namespace="")


def test_a_namespace_with_a_backslash_reads_as_the_node_verifier_reads_it() -> None:
    """SPEC 5's one escaping rule: the reason quotes the namespace unescaped (one
    backslash), as js/test/sshsig.test.mjs expects of the Node verifier for these bytes."""
    from pathlib import Path

    from bundler.trust import sshsig

    data = Path(__file__).parent.parent / "js" / "test" / "data"
    message = (data / "namespace-backslash.msg").read_bytes()
    text = (data / "namespace-backslash.sig").read_text()
    with pytest.raises(sshsig.SignatureError) as caught:
        sshsig.check_novalidate(message, text, source="namespace-backslash.sig")
    assert caught.value.message == (
        "namespace-backslash.sig: signature is for namespace 'evalbook\\bundle', "
        "not 'evalbook-bundle-head-v1'"
    )
