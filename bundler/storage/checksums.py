"""The checksums a write carries so that the server refuses bytes corrupted in transit.

The full-object CRC of multipart uploads (CRC64NVME when ``awscrt`` is installed, else
CRC32), combined from the part CRCs rather than computed in a second pass, the base64
form S3 wants for a SHA-256, and ``_Hashed``, what one pass over an archive yields.
"""

from __future__ import annotations

import base64
import functools
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from bundler.core.digests import PREFIX as DIGEST_PREFIX


@dataclass(frozen=True)
class _Crc:
    """The full-object checksum algorithm of multipart uploads.

    ``compute(data, previous)`` continues a CRC like ``zlib.crc32``; ``poly`` is the
    reflected polynomial, which ``combine`` needs.
    """

    name: str
    width: int  # in bytes
    poly: int
    compute: Callable[[bytes | memoryview, int], int]

    @property
    def param(self) -> str:
        return f"Checksum{self.name}"

    def encode(self, value: int) -> str:
        return base64.b64encode(value.to_bytes(self.width, "big")).decode("ascii")

    def combine(self, crc1: int, crc2: int, len2: int) -> int:
        """The CRC of A || B from crc(A), crc(B) and len(B), so the full-object CRC
        comes from the part CRCs instead of a second pass over the bytes."""
        bits = self.width * 8
        return _crc_multiply(_crc_x8n(len2, self.poly, bits), crc1, self.poly, bits) ^ crc2


# CRC combination as zlib does it (crc32_combine): in GF(2)[x] modulo the CRC
# polynomial, appending n bytes multiplies by x^(8n). Values are reflected, with
# x^0 in the top bit. Works for CRC-32 and CRC-64/NVME alike (both reflected, with
# all-ones initial value and final xor).


def _crc_multiply(a: int, b: int, poly: int, bits: int) -> int:
    if a == 0:
        return 0
    mask = 1 << (bits - 1)
    product = 0
    while True:
        if a & mask:
            product ^= b
            if not a & (mask - 1):
                return product
        mask >>= 1
        b = (b >> 1) ^ poly if b & 1 else b >> 1


@functools.lru_cache(maxsize=64)
def _crc_x8n(n: int, poly: int, bits: int) -> int:
    """x^(8n) modulo the polynomial; cached, since every part but the last has one size."""
    squares = [1 << (bits - 2)]  # x^(2^k) for k = 0, 1, ...
    while len(squares) < n.bit_length() + 4:
        squares.append(_crc_multiply(squares[-1], squares[-1], poly, bits))
    result = 1 << (bits - 1)  # x^0
    k = 3  # n bytes are 8n = n * 2^3 bits
    while n:
        if n & 1:
            result = _crc_multiply(squares[k], result, poly, bits)
        n >>= 1
        k += 1
    return result


def _full_object_crc() -> _Crc:
    """CRC64NVME when awscrt provides it, else CRC32 from zlib.

    S3 (and SeaweedFS, MinIO) accept both as FULL_OBJECT checksums of multipart
    uploads; awscrt is what botocore itself uses for CRC64NVME.
    """
    try:
        from awscrt import checksums  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return _Crc("CRC32", 4, 0xEDB88320, zlib.crc32)
    crc64: Callable[[bytes | memoryview, int], int] = checksums.crc64nvme
    return _Crc("CRC64NVME", 8, 0x9A6C9329AC4BC9B5, crc64)


def _b64_hex(hex_digest: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_digest)).decode("ascii")


@dataclass(frozen=True)
class _Hashed:
    size: int
    sha256_hex: str
    crc: _Crc
    full_crc: int
    part_size: int
    part_crcs: tuple[int, ...]

    @property
    def sha256(self) -> str:
        return DIGEST_PREFIX + self.sha256_hex
