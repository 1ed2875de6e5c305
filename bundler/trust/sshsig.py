"""OpenSSH SSHSIG signatures with Ed25519 keys (SPEC section 11.3).

The format is OpenSSH's ``PROTOCOL.sshsig``, as ``ssh-keygen -Y sign`` writes it and
``ssh-keygen -Y verify`` reads it, so an auditor can check our signatures with a tool
already on the machine and we can check theirs:

- armor: ``-----BEGIN SSH SIGNATURE-----``, the base64 of the blob in lines of 70
  characters, ``-----END SSH SIGNATURE-----``, each line ending in a newline;
- blob: ``"SSHSIG"``, uint32 version 1, string public key, string namespace, string
  reserved (empty), string hash algorithm, string signature;
- signed data: ``"SSHSIG"``, string namespace, string reserved, string hash algorithm,
  string H(message).

Strings are RFC 4251 strings (uint32 big-endian length, then the bytes). We sign with
sha512; we accept sha512 and sha256, as ssh-keygen does.

``allowed_signers`` files are read as ``ssh-keygen`` reads them (ssh-keygen(1), ALLOWED
SIGNERS): ``principals [options] keytype base64-key [comment]``, principals a
comma-separated pattern list (``*`` and ``?`` wildcards, ``!`` negation), options
``namespaces="..."``, ``valid-after="..."``, ``valid-before="..."`` and
``cert-authority``. Two deliberate differences:

- a malformed line is an error naming the file and line, where ssh-keygen logs it and
  skips it: a typo must not silently drop a trusted key;
- ``cert-authority`` lines are parsed but never match: they vouch for signatures made
  by certificates, and only plain Ed25519 keys are accepted here.

Keys of types other than ``ssh-ed25519`` are parsed and never match.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import hashlib
import hmac
import os
import stat
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ec, ed448, rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_ssh_private_key,
)

from bundler.core.errors import BundlerError, InputError, UsageError
from bundler.trust.signertimes import parse_time as _parse_time

NAMESPACE = "evalbook-bundle-head-v1"
PASSPHRASE_ENV = "EVALBOOK_SIGN_PASSPHRASE"
HASH_ALGORITHM = "sha512"
ACCEPTED_HASH_ALGORITHMS = ("sha512", "sha256")
KEY_TYPE = "ssh-ed25519"

ARMOR_BEGIN = "-----BEGIN SSH SIGNATURE-----"
ARMOR_HEADER_RULE = (
    "SSH signature header line must end with a plain line feed, as ssh-keygen reads it "
    "(not CRLF, not followed by other text)"
)
ARMOR_END = "-----END SSH SIGNATURE-----"
ARMOR_WIDTH = 70  # ssh-keygen's line width for the base64 body

_MAGIC = b"SSHSIG"
_VERSION = 1
_ED25519_KEY_SIZE = 32
_ED25519_SIG_SIZE = 64

# Key type names ssh-keygen can read in an allowed_signers line; a token that is none of
# these is taken as the options field, as ssh-keygen does when its key parser fails.
_KEY_TYPES = frozenset(
    {
        "ssh-ed25519",
        "ssh-rsa",
        "ssh-dss",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "sk-ecdsa-sha2-nistp256@openssh.com",
        "sk-ssh-ed25519@openssh.com",
        "ssh-xmss@openssh.com",
        "ssh-ed25519-cert-v01@openssh.com",
        "ssh-rsa-cert-v01@openssh.com",
        "ssh-dss-cert-v01@openssh.com",
        "ecdsa-sha2-nistp256-cert-v01@openssh.com",
        "ecdsa-sha2-nistp384-cert-v01@openssh.com",
        "ecdsa-sha2-nistp521-cert-v01@openssh.com",
        "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com",
        "sk-ssh-ed25519-cert-v01@openssh.com",
        "ssh-xmss-cert-v01@openssh.com",
    }
)
_WHITESPACE = " \t\r\n"
# allowed_signers as ssh-keygen reads it (sshsig.c): lines end at LF alone (a CR before
# it is CRLF's), leading spaces and tabs skipped, the principals end at a space, tab or
# CR, options and key fields at a space or tab; any other character is in its token.
_LINE_LEAD = " \t"
_PRINCIPALS_END = " \t\r"
_FIELD_END = " \t"


def _quoted(value: object) -> str:
    """A value read from a signature, in quotes but not escaped: text from a signature
    is escaped once, where it is shown (``textsafe.shown``), never here as well."""
    return f"'{value}'"


class SignatureError(BundlerError):
    """A signature that does not verify against the allowed signers (exit 1)."""

    exit_code = 1


# --- wire encoding -------------------------------------------------------------------


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


class _Reader:
    """Reads RFC 4251 fields from a blob; every short read is an InputError."""

    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._pos = 0
        self._what = what

    def take(self, n: int, field: str) -> bytes:
        if len(self._data) - self._pos < n:
            raise InputError(f"{self._what}: truncated at {field}")
        chunk = self._data[self._pos : self._pos + n]
        self._pos += n
        return chunk

    def uint32(self, field: str) -> int:
        value: int = struct.unpack(">I", self.take(4, field))[0]
        return value

    def string(self, field: str) -> bytes:
        return self.take(self.uint32(field), field)

    def text(self, field: str) -> str:
        raw = self.string(field)
        if b"\x00" in raw:
            raise InputError(f"{self._what}: {field} contains a NUL byte")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{self._what}: {field} is not UTF-8") from exc

    def end(self) -> None:
        if self._pos != len(self._data):
            raise InputError(f"{self._what}: {len(self._data) - self._pos} bytes of trailing data")


def _ed25519_key_blob(raw: bytes) -> bytes:
    return _string(KEY_TYPE.encode("ascii")) + _string(raw)


def _parse_key_blob(blob: bytes, what: str) -> tuple[str, bytes | None]:
    """Key type of an SSH public key blob, and the raw key when it is Ed25519."""
    reader = _Reader(blob, what)
    key_type = reader.text("key type")
    if key_type != KEY_TYPE:
        return key_type, None
    raw = reader.string("ed25519 key")
    reader.end()
    if len(raw) != _ED25519_KEY_SIZE:
        raise InputError(f"{what}: ed25519 key is {len(raw)} bytes, want {_ED25519_KEY_SIZE}")
    return key_type, raw


def fingerprint(public_key_blob: bytes) -> str:
    """The key's fingerprint as ssh-keygen prints it: ``SHA256:`` + unpadded base64."""
    digest = hashlib.sha256(public_key_blob).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


def _signed_data(namespace: str, hash_algorithm: str, message: bytes) -> bytes:
    digest = hashlib.new(hash_algorithm, message).digest()
    return (
        _MAGIC
        + _string(namespace.encode("utf-8"))
        + _string(b"")
        + _string(hash_algorithm.encode("ascii"))
        + _string(digest)
    )


# --- private keys --------------------------------------------------------------------


def _key_kind(key: object) -> str:
    if isinstance(key, rsa.RSAPrivateKey):
        return "RSA"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return "ECDSA"
    if isinstance(key, ed448.Ed448PrivateKey):
        return "Ed448"
    return type(key).__name__


def load_private_key(path: Path, *, passphrase: bytes | None) -> Ed25519PrivateKey:
    """Load an OpenSSH private key file that must hold an Ed25519 key.

    ``passphrase`` decrypts a protected key and is ignored for an unprotected one.
    Raises UsageError (exit 2) naming the file when it cannot be read, is not an OpenSSH
    private key, holds another key type, or is protected and the passphrase (from
    EVALBOOK_SIGN_PASSPHRASE) is missing or wrong.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read signing key ({exc.strerror or exc})") from exc
    try:
        key: object = load_ssh_private_key(data, password=None)
    except TypeError as exc:
        # Raised only for a passphrase-protected key loaded without a passphrase.
        if not passphrase:
            raise UsageError(
                f"{path}: signing key is passphrase-protected; set {PASSPHRASE_ENV}"
            ) from exc
        key = _load_encrypted(path, data, passphrase)
    except UnsupportedAlgorithm as exc:
        raise UsageError(f"{path}: unsupported OpenSSH private key ({exc})") from exc
    except ValueError as exc:
        raise UsageError(
            f"{path}: not an OpenSSH private key (want -----BEGIN OPENSSH PRIVATE KEY-----; {exc})"
        ) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError(
            f"{path}: signing key is {_key_kind(key)}; signatures need an Ed25519 key "
            "(ssh-keygen -t ed25519)"
        )
    return key


def _load_encrypted(path: Path, data: bytes, passphrase: bytes) -> object:
    try:
        return load_ssh_private_key(data, password=passphrase)
    except UnsupportedAlgorithm as exc:
        if "bcrypt" in str(exc):
            raise UsageError(
                f"{path}: decrypting a passphrase-protected key needs the 'bcrypt' package"
            ) from exc
        raise UsageError(f"{path}: unsupported OpenSSH private key ({exc})") from exc
    except (ValueError, TypeError) as exc:
        raise UsageError(
            f"{path}: wrong passphrase for signing key (from {PASSPHRASE_ENV})"
        ) from exc


def key_permissions_warning(path: Path) -> str | None:
    """A warning when the key file is open to group or others, else None.

    The key is still usable; ssh-keygen itself would refuse it. Returns None when the
    file cannot be examined or is not a regular file (load_private_key reports that).
    """
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None  # not a key file at all: the error that follows says so, alone
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077 == 0:
        return None
    return (
        f"{path}: private key is accessible by group or others (mode {mode:04o}); "
        f"run chmod 600 {path}"
    )


# --- signing -------------------------------------------------------------------------


def _check_namespace(namespace: str) -> None:
    if not namespace or "\x00" in namespace:
        raise UsageError(f"signature namespace {namespace!r} must be non-empty, without NUL")


def sign(message: bytes, key: Ed25519PrivateKey, *, namespace: str = NAMESPACE) -> str:
    """Armored SSHSIG signature of ``message`` (sha512), ending with a newline.

    Byte for byte what ``ssh-keygen -Y sign -n NAMESPACE`` writes for the same key, as
    Ed25519 signatures are deterministic.
    """
    _check_namespace(namespace)
    raw_public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    raw_signature = key.sign(_signed_data(namespace, HASH_ALGORITHM, message))
    blob = (
        _MAGIC
        + struct.pack(">I", _VERSION)
        + _string(_ed25519_key_blob(raw_public))
        + _string(namespace.encode("utf-8"))
        + _string(b"")
        + _string(HASH_ALGORITHM.encode("ascii"))
        + _string(_string(KEY_TYPE.encode("ascii")) + _string(raw_signature))
    )
    body = base64.b64encode(blob).decode("ascii")
    lines = [body[i : i + ARMOR_WIDTH] for i in range(0, len(body), ARMOR_WIDTH)]
    return "\n".join([ARMOR_BEGIN, *lines, ARMOR_END]) + "\n"


# --- parsing signatures --------------------------------------------------------------


@dataclass(frozen=True)
class Signature:
    """An SSHSIG blob, parsed but not verified.

    ``public_key`` and ``signature`` hold the raw 32-byte key and 64-byte signature when
    the key type is ssh-ed25519, else None; ``public_key_blob`` is the key's SSH wire
    encoding (what ``fingerprint`` hashes).
    """

    version: int
    key_type: str
    public_key_blob: bytes
    public_key: bytes | None
    namespace: str
    reserved: bytes
    hash_algorithm: str
    signature_algorithm: str
    signature_blob: bytes
    signature: bytes | None

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.public_key_blob)


def _dearmor(text: str, source: str) -> bytes:
    if not text.startswith(ARMOR_BEGIN):
        raise InputError(f"{source}: not an SSH signature (missing {ARMOR_BEGIN})")
    rest = text[len(ARMOR_BEGIN) :]
    # ssh-keygen reads the header with its LF ("-----BEGIN SSH SIGNATURE-----\n"): a
    # header ending in CRLF is one it refuses ("missing header"), and so do we, so that
    # no signature anchors trust here that the auditor's ssh-keygen path rejects.
    if not rest.startswith("\n"):
        raise InputError(f"{source}: {ARMOR_HEADER_RULE}")
    rest = rest[1:]
    # Like ssh-keygen, the footer is the first END line; we also refuse anything but
    # whitespace after it, so a signature file carries nothing unsigned-looking.
    end = rest.find("\n" + ARMOR_END)
    if end < 0:
        raise InputError(f"{source}: SSH signature has no {ARMOR_END} line")
    trailer = rest[end + 1 + len(ARMOR_END) :]
    if trailer.strip(_WHITESPACE):
        raise InputError(f"{source}: unexpected text after {ARMOR_END}")
    body = "".join(rest[:end].split())
    if not body:
        raise InputError(f"{source}: SSH signature body is empty")
    try:
        return base64.b64decode(body.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise InputError(f"{source}: SSH signature body is not valid base64 ({exc})") from exc


def parse_signature(text: str, *, source: str) -> Signature:
    """Parse an armored SSHSIG signature; raises InputError naming ``source`` if corrupt.

    Checks the armor, the base64, the blob layout (magic, version 1, all fields, no
    trailing bytes, non-empty namespace) and, for ssh-ed25519, the key and signature
    sizes and that the signature algorithm matches the key. Does not verify anything.
    """
    blob = _dearmor(text, source)
    what = f"{source}: SSH signature blob"
    reader = _Reader(blob, what)
    if reader.take(len(_MAGIC), "magic") != _MAGIC:
        raise InputError(f"{what}: does not start with SSHSIG")
    version = reader.uint32("version")
    if version != _VERSION:
        raise InputError(f"{what}: version {version}, only version {_VERSION} is known")
    public_key_blob = reader.string("public key")
    namespace = reader.text("namespace")
    reserved = reader.string("reserved")
    hash_algorithm = reader.text("hash algorithm")
    signature_blob = reader.string("signature")
    reader.end()
    if not namespace:
        raise InputError(f"{what}: namespace is empty")
    key_type, public_key = _parse_key_blob(public_key_blob, f"{what} public key")
    sig_reader = _Reader(signature_blob, f"{what} signature")
    signature_algorithm = sig_reader.text("signature type")
    signature: bytes | None = None
    if key_type == KEY_TYPE:
        if signature_algorithm != KEY_TYPE:
            raise InputError(
                f"{what}: signature type {_quoted(signature_algorithm)} does not match key type {KEY_TYPE}"
            )
        signature = sig_reader.string("ed25519 signature")
        sig_reader.end()
        if len(signature) != _ED25519_SIG_SIZE:
            raise InputError(
                f"{what}: ed25519 signature is {len(signature)} bytes, want {_ED25519_SIG_SIZE}"
            )
    return Signature(
        version=version,
        key_type=key_type,
        public_key_blob=public_key_blob,
        public_key=public_key,
        namespace=namespace,
        reserved=reserved,
        hash_algorithm=hash_algorithm,
        signature_algorithm=signature_algorithm,
        signature_blob=signature_blob,
        signature=signature,
    )


# --- allowed signers -----------------------------------------------------------------


def match_pattern(text: str, pattern: str) -> bool:
    """OpenSSH's match_pattern: ``*`` any run of characters, ``?`` exactly one."""
    # Iterative wildcard match with one backtrack point, equivalent to the recursive
    # OpenSSH matcher for patterns of `*` and `?`.
    t = p = 0
    star_p, star_t = -1, 0
    while t < len(text):
        if p < len(pattern) and (pattern[p] == "?" or pattern[p] == text[t]):
            t += 1
            p += 1
        elif p < len(pattern) and pattern[p] == "*":
            star_p, star_t = p, t
            p += 1
        elif star_p >= 0:
            star_t += 1
            t, p = star_t, star_p + 1
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


def match_pattern_list(text: str, patterns: str) -> bool:
    """OpenSSH's match_pattern_list, true only for a positive match.

    ``patterns`` is comma-separated; a pattern starting with ``!`` that matches makes
    the whole list fail, whatever else matches.
    """
    pieces = patterns.split(",")
    if len(pieces) > 1 and not pieces[-1]:
        # OpenSSH stops at a trailing comma rather than reading an empty pattern.
        pieces.pop()
    positive = False
    for pattern in pieces:
        negated = pattern.startswith("!")
        if negated:
            pattern = pattern[1:]
        if match_pattern(text, pattern):
            if negated:
                return False
            positive = True
    return positive


@dataclass(frozen=True)
class AllowedSigner:
    """One line of an allowed_signers file.

    ``principals`` is the line's pattern list as written (quotes removed);
    ``public_key`` is the raw 32-byte key for ssh-ed25519 lines, else None.
    ``valid_after``/``valid_before`` are Unix times (inclusive bounds), or None.
    """

    source: str
    line: int
    principals: str
    key_type: str
    key_blob: bytes
    public_key: bytes | None
    namespaces: str | None = None
    cert_authority: bool = False
    valid_after: int | None = None
    valid_before: int | None = None
    comment: str = ""

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.key_blob)

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"

    def matches_principal(self, identity: str) -> bool:
        """True when ``identity`` matches this line's principals (as ssh-keygen -I does)."""
        return match_pattern_list(identity, self.principals)

    def allows_namespace(self, namespace: str) -> bool:
        """True unless a ``namespaces=`` option excludes ``namespace``."""
        return self.namespaces is None or match_pattern_list(namespace, self.namespaces)


def _split_principals(line: str, where: str) -> tuple[str, str]:
    """ssh-keygen's strdelimw: the first token, a quoted one taken whole."""
    cut = next((i for i, ch in enumerate(line) if ch in _PRINCIPALS_END + '"'), -1)
    if cut < 0:
        raise InputError(f"{where}: line has principals but no key")
    if line[cut] == '"':
        close = line.find('"', cut + 1)
        if close < 0:
            raise InputError(f"{where}: unterminated quote in principals")
        token = line[:cut] + line[cut + 1 : close]
        rest = line[close + 1 :]
    else:
        token, rest = line[:cut], line[cut:]
    return token, rest.lstrip(_PRINCIPALS_END)


def _first_field(text: str) -> str:
    """The text up to the first space or tab."""
    return next((text[:i] for i, ch in enumerate(text) if ch in _FIELD_END), text)


def _split_options(text: str, where: str) -> tuple[str, str]:
    """Options run to the first whitespace outside double quotes."""
    quoted = False
    i = 0
    while i < len(text) and (quoted or text[i] not in " \t"):
        if text[i] == "\\" and text[i + 1 : i + 2] == '"':
            i += 1
        elif text[i] == '"':
            quoted = not quoted
        i += 1
    if quoted:
        raise InputError(f"{where}: unterminated quote in options")
    return text[:i], text[i:].lstrip(_FIELD_END)


def _dequote(text: str, where: str, option: str) -> tuple[str, str]:
    if not text.startswith('"'):
        raise InputError(f"{where}: {option}= value must be in double quotes")
    out: list[str] = []
    i = 1
    while i < len(text) and text[i] != '"':
        if text[i] == "\\" and text[i + 1 : i + 2] == '"':
            i += 1
        out.append(text[i])
        i += 1
    if i >= len(text):
        raise InputError(f"{where}: {option}= value has no closing quote")
    return "".join(out), text[i + 1 :]


def _parse_options(text: str, where: str) -> dict[str, object]:
    """ssh-keygen's sshsigopt_parse: option names are case-insensitive."""
    found: dict[str, object] = {}
    rest = text
    while rest:
        lower = rest.lower()
        if lower.startswith("cert-authority"):
            found["cert_authority"] = True
            rest = rest[len("cert-authority") :]
        else:
            for option, key in (
                ("namespaces", "namespaces"),
                ("valid-after", "valid_after"),
                ("valid-before", "valid_before"),
            ):
                if lower.startswith(option + "="):
                    if key in found:
                        raise InputError(f'{where}: more than one "{option}" option')
                    value, rest = _dequote(rest[len(option) + 1 :], where, option)
                    if key == "namespaces":
                        found[key] = value
                    else:
                        found[key] = _parse_time(value, where, option)
                    break
            else:
                name = rest.split(",", 1)[0].split("=", 1)[0]
                raise InputError(f"{where}: unknown option {name!r}")
        if not rest:
            break
        if rest[0] != ",":
            raise InputError(f"{where}: options must be separated by commas")
        rest = rest[1:]
        if not rest:
            raise InputError(f"{where}: options end with a comma")
    after, before = found.get("valid_after"), found.get("valid_before")
    if isinstance(after, int) and isinstance(before, int) and before <= after:
        raise InputError(f'{where}: "valid-before" is not after "valid-after"')
    return found


def _parse_key(text: str, where: str) -> tuple[str, bytes, bytes | None, str]:
    key_type = _first_field(text)
    rest = text[len(key_type) :].lstrip(_FIELD_END)
    encoded = _first_field(rest)
    if not key_type or not encoded:
        raise InputError(f"{where}: missing key (want keytype base64-key)")
    comment = rest[len(encoded) :].strip(_FIELD_END)
    try:
        blob = base64.b64decode(encoded.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise InputError(f"{where}: {key_type} key is not valid base64") from exc
    blob_type, raw = _parse_key_blob(blob, f"{where}: {key_type} key")
    if blob_type != key_type:
        raise InputError(f"{where}: key is labelled {key_type} but holds {blob_type}")
    return key_type, blob, raw, comment


def _parse_line(line: str, where: str, source: str, number: int) -> AllowedSigner | None:
    text = line.removesuffix("\r").lstrip(_LINE_LEAD)
    if not text or text.startswith("#"):
        return None
    principals, rest = _split_principals(text, where)
    if not principals:
        raise InputError(f"{where}: empty principals")
    options: dict[str, object] = {}
    first = _first_field(rest)
    if first and first not in _KEY_TYPES:
        option_text, rest = _split_options(rest, where)
        if not rest:
            raise InputError(f"{where}: options but no key")
        options = _parse_options(option_text, where)
    key_type, blob, raw, comment = _parse_key(rest, where)
    namespaces = options.get("namespaces")
    valid_after = options.get("valid_after")
    valid_before = options.get("valid_before")
    return AllowedSigner(
        source=source,
        line=number,
        principals=principals,
        key_type=key_type,
        key_blob=blob,
        public_key=raw,
        namespaces=namespaces if isinstance(namespaces, str) else None,
        cert_authority=bool(options.get("cert_authority", False)),
        valid_after=valid_after if isinstance(valid_after, int) else None,
        valid_before=valid_before if isinstance(valid_before, int) else None,
        comment=comment,
    )


def parse_allowed_signers(text: str, *, source: str) -> list[AllowedSigner]:
    """Parse an OpenSSH allowed_signers file's text, one entry per non-comment line.

    Raises InputError naming ``source`` and the line for a malformed line, and when
    the file holds no signer line at all (it would trust nobody).
    """
    signers: list[AllowedSigner] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if "\0" in line:
            # ssh-keygen reads a line as a C string, ending it at the NUL: what follows
            # would be read here and not there (a principal list widened, a key that is
            # not its). Refused, as any line ssh-keygen would read otherwise.
            raise InputError(
                f"{source}:{number}: a NUL character (ssh-keygen ends the line there); "
                "not a valid allowed_signers file"
            )
        signer = _parse_line(line, f"{source}:{number}", source, number)
        if signer is not None:
            signers.append(signer)
    if not signers:
        raise InputError(f"{source}: allowed signers file lists no signers")
    return signers


def load_allowed_signers(path: Path) -> list[AllowedSigner]:
    """Read and parse an allowed_signers file; raises InputError if unreadable or bad."""
    try:
        # Bytes, decoded: a text-mode read would turn a lone CR into a line end.
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read allowed signers file ({exc})") from exc
    return parse_allowed_signers(text, source=str(path))


# --- verification --------------------------------------------------------------------


@dataclass(frozen=True)
class Verified:
    """A signature that verified: who signed (the allowed_signers principals, or the
    identity asked for) and with which key."""

    principal: str
    fingerprint: str
    signer: AllowedSigner


def verify(
    message: bytes,
    signature_text: str,
    allowed: Sequence[AllowedSigner],
    *,
    identity: str | None,
    namespace: str = NAMESPACE,
    source: str = "signature",
    now: int | None = None,
) -> Verified:
    """Verify an armored SSHSIG signature over ``message`` against allowed signers.

    Succeeds when the signature is a valid ssh-ed25519 signature of ``message`` in
    ``namespace`` with hash sha512 or sha256, and some allowed_signers line holds the
    signing key, is not a cert-authority line, lists ``identity`` among its principals
    (any principal when ``identity`` is None), permits ``namespace`` and is valid at
    ``now`` (Unix time, default the current time). Raises SignatureError (exit 1)
    naming the rule broken otherwise, including for a malformed signature.
    """
    parsed = check_novalidate(message, signature_text, namespace=namespace, source=source)
    return match_signer(parsed, allowed, identity, namespace, source, now)


def check_novalidate(
    message: bytes, signature_text: str, *, namespace: str = NAMESPACE, source: str = "signature"
) -> Signature:
    """Check a signature as ``ssh-keygen -Y check-novalidate`` does: well formed, an
    ssh-ed25519 key, of ``namespace``, hash sha512 or sha256, and valid over ``message``
    with the public key it carries. Who holds that key is not asked (``match_signer``).

    Returns the parsed signature; raises SignatureError (exit 1) naming the rule broken.
    """
    try:
        parsed = parse_signature(signature_text, source=source)
    except InputError as exc:
        raise SignatureError(exc.message) from exc
    if parsed.key_type != KEY_TYPE or parsed.public_key is None or parsed.signature is None:
        raise SignatureError(
            f"{source}: signed with a {parsed.key_type} key; only {KEY_TYPE} is accepted"
        )
    if parsed.namespace != namespace:
        raise SignatureError(
            f"{source}: signature is for namespace {_quoted(parsed.namespace)}, not {_quoted(namespace)}"
        )
    if parsed.hash_algorithm not in ACCEPTED_HASH_ALGORITHMS:
        raise SignatureError(
            f"{source}: hash algorithm {_quoted(parsed.hash_algorithm)} is not sha512 or sha256"
        )
    try:
        public_key = Ed25519PublicKey.from_public_bytes(parsed.public_key)
        public_key.verify(parsed.signature, _signed_data(namespace, parsed.hash_algorithm, message))
    except (InvalidSignature, ValueError) as exc:
        raise SignatureError(
            f"{source}: signature does not match the signed bytes (key {parsed.fingerprint})"
        ) from exc
    return parsed


def _utc(seconds: int) -> str:
    return _dt.datetime.fromtimestamp(seconds, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def match_signer(
    parsed: Signature,
    allowed: Sequence[AllowedSigner],
    identity: str | None,
    namespace: str,
    source: str,
    now: int | None,
) -> Verified:
    """The allowed_signers line that vouches for ``parsed`` (already checked by
    ``check_novalidate``) as ``identity`` (any principal when None) in ``namespace`` at
    ``now``; raises SignatureError saying why none does."""
    if not allowed:
        raise SignatureError(f"{source}: no allowed signers to check the signature against")
    at = int(time.time()) if now is None else now
    key = parsed.fingerprint
    holders = [
        s
        for s in allowed
        if s.key_type == KEY_TYPE
        and s.public_key is not None
        and hmac.compare_digest(s.public_key, parsed.public_key or b"")
    ]
    if not holders:
        raise SignatureError(f"{source}: signing key {key} is not in the allowed signers")
    reasons: list[str] = []
    for signer in holders:
        if signer.cert_authority:
            reasons.append(f"{signer.where} is a cert-authority line (certificates unsupported)")
        elif identity is not None and not signer.matches_principal(identity):
            reasons.append(f"{signer.where} does not list identity {identity!r}")
        elif not signer.allows_namespace(namespace):
            reasons.append(f"{signer.where} restricts the key to namespaces {signer.namespaces!r}")
        elif signer.valid_after is not None and at < signer.valid_after:
            reasons.append(f"{signer.where} makes the key valid from {_utc(signer.valid_after)}")
        elif signer.valid_before is not None and at > signer.valid_before:
            reasons.append(f"{signer.where} made the key expire at {_utc(signer.valid_before)}")
        else:
            principal = identity if identity is not None else signer.principals
            return Verified(principal=principal, fingerprint=key, signer=signer)
    raise SignatureError(f"{source}: signing key {key} is not allowed: " + "; ".join(reasons))
