"""Digests of SPEC section 2: `sha256:<hex>` strings, JSON digests, framed digest v1.

The one place digests are computed; export and verify both call these.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Iterable
from typing import Any

from bundler.core import canonical
from bundler.core.errors import DigestError

PREFIX = "sha256:"
_DIGEST_RE = re.compile(r"\Asha256:[0-9a-f]{64}\Z")
_HEX_RE = re.compile(r"\A[0-9a-f]{64}\Z")

SCORER_TAG = "evalbook/scorer-version-sha256/v1"
CHECK_DEFINITION_TAG = "eval-banana/check-definition-sha256/v1"


def is_digest(value: object) -> bool:
    """True when ``value`` is a well-formed `sha256:` + 64 lowercase hex string."""
    return isinstance(value, str) and _DIGEST_RE.match(value) is not None


def parse_digest(value: object, *, source: str = "digest") -> str:
    """Return the 64-hex part of a digest string; raise DigestError if malformed."""
    if not is_digest(value):
        raise DigestError(
            f"{source}: malformed digest {value!r} (want sha256: and 64 lowercase hex digits)"
        )
    assert isinstance(value, str)
    return value[len(PREFIX) :]


def from_hex(hex_digest: str) -> str:
    """`sha256:` + hex, after checking the hex part."""
    if _HEX_RE.match(hex_digest) is None:
        raise DigestError(f"malformed hex digest {hex_digest!r}")
    return PREFIX + hex_digest


def bytes_digest(data: bytes) -> str:
    """Digest of raw bytes."""
    return PREFIX + hashlib.sha256(data).hexdigest()


def json_digest(value: Any) -> str:
    """The JSON digest: sha256 of the JCS bytes of ``value``."""
    return bytes_digest(canonical.dumps(value))


def _u64(n: int) -> bytes:
    return struct.pack(">Q", n)


class FramedHasher:
    """Framed digest v1, fed component by component so large files can stream.

    ``sha256(TAG || 0x00 || C1 || C2 ...)`` with
    ``Ci = u64be(len(name)) || name || u64be(len(content)) || content``.
    """

    def __init__(self, tag: str) -> None:
        self._h = hashlib.sha256(tag.encode("ascii") + b"\x00")
        self._open = 0

    def begin(self, name: str, size: int) -> None:
        """Start a component of ``size`` bytes; feed its content with ``update``."""
        if self._open:
            raise ValueError("previous framed component not finished")
        raw = name.encode("utf-8")
        self._h.update(_u64(len(raw)) + raw + _u64(size))
        self._open = size

    def update(self, chunk: bytes) -> None:
        if len(chunk) > self._open:
            raise ValueError("framed component longer than declared")
        self._h.update(chunk)
        self._open -= len(chunk)

    def add(self, name: str, content: bytes) -> None:
        self.begin(name, len(content))
        self.update(content)

    def digest(self) -> str:
        if self._open:
            raise ValueError("framed component shorter than declared")
        return PREFIX + self._h.hexdigest()


def framed_digest(tag: str, components: Iterable[tuple[str, bytes]]) -> str:
    """Framed digest v1 of (name, content) pairs in the order given."""
    hasher = FramedHasher(tag)
    for name, content in components:
        hasher.add(name, content)
    return hasher.digest()
