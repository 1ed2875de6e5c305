"""The zstd layer of the bundle reader (SPEC sections 4.1 and 5): one frame, checked.

:class:`ZstdStream` checks the zstd frame header itself (one frame, checksum flag, no
dictionary, window at most 8 MiB), walks the frame block by block so that each call
into the decompressor produces at most one block (128 KiB) of output, stops once more
than ``max_bytes`` come out, and at the end insists on a verified content checksum and
nothing after the frame. Input that is not a zstd frame is refused with what its first
bytes say it is. The tar member walk above it is ``reader``.
"""

from __future__ import annotations

from typing import Final, Protocol

import zstandard

from bundler.core.errors import ArchiveError
from bundler.core.limits import DEFAULT_MAX_BYTES

MAX_WINDOW_BYTES: Final = 8 * 1024 * 1024
_BLOCKS_PER_FEED: Final = 8

_ZSTD_MAGIC: Final = 0xFD2FB528
_SKIPPABLE_MIN: Final = 0x184D2A50
_SKIPPABLE_MAX: Final = 0x184D2A5F
_ZSTD_BLOCK_MAX: Final = 128 * 1024
_SOURCE_READ: Final = 256 * 1024


class Readable(Protocol):
    """Anything with ``read(n) -> bytes`` that returns ``b""`` only at the end."""

    def read(self, size: int, /) -> bytes: ...


_CAP_HINT = "the max_bytes cap; raise it to read a larger bundle"
_BUNDLE_IS = "a bundle is one POSIX ustar/pax tar in a single zstd frame, as export writes it"
# The first bytes of files people hand to verify by mistake.
_MAGICS = (
    (b"\x1f\x8b", "this is a gzip file"),
    (b"BZh", "this is a bzip2 file"),
    (b"\xfd7zXZ", "this is an xz file"),
    (b"PK\x03\x04", "this is a zip file"),
    (b"\x89PNG", "this is a PNG image"),
    (b"%PDF", "this is a PDF file"),
    (b"{", "this looks like a JSON document"),
    (b"[", "this looks like a JSON document"),
)


def _what_file(head: bytes) -> str:
    """What the first bytes of a non-zstd input say it is, for the refusal."""
    for magic, what in _MAGICS:
        if head.startswith(magic):
            return f"{what}, not a zstd frame"
    return f"not a zstd frame (magic {head.hex()}; an uncompressed tar or another format)"


class ZstdStream:
    """File-like reader of the single zstd frame a bundle must be.

    ``read(n)`` returns up to ``n`` decompressed bytes and ``b""`` only after the whole
    frame was read, its content checksum verified and the input found to end right
    after it. Raises ArchiveError (naming ``source``) for a skippable frame or a
    non-zstd magic, a dictionary ID, a missing checksum flag, a window (or
    single-segment content size) over 8 MiB, a truncated or corrupt frame, a bad
    checksum, a second frame or trailing bytes, and once more than ``max_bytes``
    decompressed bytes come out.
    """

    def __init__(
        self, fileobj: Readable, *, source: str, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self._src = fileobj
        self._source = source
        self._max_bytes = max_bytes
        self._inbuf = b""
        self._inpos = 0
        self._in_offset = 0
        self._src_eof = False
        self._out = b""
        self._outpos = 0
        self._bytes_out = 0
        self._started = False
        self._done = False
        self._block_max = 0
        self._dobj = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW_BYTES).decompressobj()

    @property
    def bytes_out(self) -> int:
        """Decompressed bytes produced so far."""
        return self._bytes_out

    def read(self, size: int, /) -> bytes:
        """Return up to ``size`` decompressed bytes; ``b""`` at a verified end of frame."""
        if size < 0:
            raise ValueError("ZstdStream.read needs a non-negative size")
        if size == 0:
            return b""
        while self._outpos >= len(self._out):
            if self._done:
                return b""
            self._advance()
        end = min(len(self._out), self._outpos + size)
        chunk = self._out[self._outpos : end]
        self._outpos = end
        return chunk

    def _fail(self, rule: str, offset: int | None = None) -> ArchiveError:
        at = self._in_offset if offset is None else offset
        return ArchiveError(f"{self._source}: zstd stream at byte {at}: {rule}")

    def _fill(self, n: int) -> None:
        while len(self._inbuf) - self._inpos < n and not self._src_eof:
            try:
                more = self._src.read(max(_SOURCE_READ, n))
            except OSError as exc:
                raise ArchiveError(f"{self._source}: cannot read archive: {exc}") from exc
            if not more:
                self._src_eof = True
                break
            self._inbuf = self._inbuf[self._inpos :] + more
            self._inpos = 0

    def _take(self, n: int, what: str) -> bytes:
        self._fill(n)
        got = self._inbuf[self._inpos : self._inpos + n]
        if len(got) < n:
            raise self._fail(f"truncated zstd stream (input ended inside the {what})")
        self._inpos += n
        self._in_offset += n
        return got

    def _feed(self, data: bytes | memoryview, what: str, offset: int) -> bytes:
        try:
            out: bytes = self._dobj.decompress(data)
        except zstandard.ZstdError as exc:
            if what == "content checksum":
                raise self._fail("bad zstd content checksum", offset) from exc
            raise self._fail(f"corrupt zstd {what}: {exc}", offset) from exc
        self._bytes_out += len(out)
        if self._bytes_out > self._max_bytes:
            raise self._fail(
                f"more than max_bytes={self._max_bytes} decompressed bytes ({_CAP_HINT})",
                offset,
            )
        return out

    def _advance(self) -> None:
        """Consume the frame header or one block (or the checksum and the end)."""
        if not self._started:
            self._started = True
            self._read_frame_header()
            return
        offset = self._in_offset
        # Up to _BLOCKS_PER_FEED blocks go to the decompressor at once: each block yields
        # at most one block maximum of output, so memory stays bounded while the Python
        # work per gigabyte drops eightfold.
        pieces: list[bytes | memoryview] = []
        buffer = self._inbuf
        start = self._inpos
        last = 0
        blocks = 0
        while not last and blocks < _BLOCKS_PER_FEED:
            blocks += 1
            try:
                last = self._take_block(pieces)
            except ArchiveError:
                if pieces:
                    # A corrupt earlier block explains garbage after it: let the decoder
                    # name that block first.
                    self._feed(b"".join(pieces), "block", offset)
                raise
        # The blocks lie side by side in the input buffer unless it was refilled on the
        # way: then they go to the decoder as one view of it, with no copy.
        data = (
            memoryview(buffer)[start : self._inpos] if self._inbuf is buffer else b"".join(pieces)
        )
        out = self._feed(data, "block", offset)
        if last:
            offset = self._in_offset
            checksum = self._take(4, "content checksum")
            out += self._feed(checksum, "content checksum", offset)
            if not self._dobj.eof:
                raise self._fail("corrupt zstd frame (decoder did not reach the end)", offset)
            self._check_trailing()
            self._done = True
        self._out = out
        self._outpos = 0

    def _take_block(self, pieces: list[bytes | memoryview]) -> int:
        """Append one block's header and payload to ``pieces``; return its last-block bit."""
        buf = self._inbuf
        pos = self._inpos
        if len(buf) - pos >= 3:
            # The common case, a valid block already in the buffer, in a few operations;
            # anything else takes the path below, which names the problem.
            value = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
            block_type = (value >> 1) & 3
            block_size = value >> 3
            end = pos + 3 + (1 if block_type == 1 else block_size)
            if block_type != 3 and block_size <= self._block_max and end <= len(buf):
                pieces.append(memoryview(buf)[pos:end])
                self._in_offset += end - pos
                self._inpos = end
                return value & 1
        block_offset = self._in_offset
        header = self._take(3, "block header")
        value = int.from_bytes(header, "little")
        block_type = (value >> 1) & 3
        block_size = value >> 3
        if block_type == 3:
            raise self._fail("corrupt zstd frame (reserved block type)", block_offset)
        if block_size > self._block_max:
            raise self._fail(
                f"zstd block of {block_size} bytes exceeds the block maximum {self._block_max}",
                block_offset,
            )
        pieces.append(header)
        pieces.append(self._take(1 if block_type == 1 else block_size, "block"))
        return value & 1

    def _read_frame_header(self) -> None:
        self._fill(4)
        if self._inpos >= len(self._inbuf):
            raise self._fail("empty input, not a zstd frame")
        magic_bytes = self._take(4, "frame magic")
        magic = int.from_bytes(magic_bytes, "little")
        if _SKIPPABLE_MIN <= magic <= _SKIPPABLE_MAX:
            raise self._fail("skippable zstd frame (not allowed)", 0)
        if magic != _ZSTD_MAGIC:
            raise self._fail(f"{_what_file(magic_bytes)}: not a bundle ({_BUNDLE_IS})", 0)
        descriptor = self._take(1, "frame header")[0]
        fcs_flag = descriptor >> 6
        single_segment = (descriptor >> 5) & 1
        reserved = (descriptor >> 3) & 1
        has_checksum = (descriptor >> 2) & 1
        dict_flag = descriptor & 3
        if reserved:
            raise self._fail("corrupt zstd frame header (reserved bit set)", 4)
        if dict_flag:
            raise self._fail("zstd frame names a dictionary ID (not allowed)", 4)
        if not has_checksum:
            raise self._fail("zstd frame has no content checksum flag", 4)
        window = 0
        header = magic_bytes + bytes([descriptor])
        if not single_segment:
            window_descriptor = self._take(1, "frame header")[0]
            header += bytes([window_descriptor])
            exponent = window_descriptor >> 3
            mantissa = window_descriptor & 7
            base = 1 << (10 + exponent)
            window = base + (base // 8) * mantissa
            if window > MAX_WINDOW_BYTES:
                raise self._fail(f"zstd window of {window} bytes exceeds {MAX_WINDOW_BYTES}", 5)
        fcs_size = {0: 1 if single_segment else 0, 1: 2, 2: 4, 3: 8}[fcs_flag]
        if fcs_size:
            fcs_bytes = self._take(fcs_size, "frame header")
            header += fcs_bytes
            content_size = int.from_bytes(fcs_bytes, "little") + (256 if fcs_size == 2 else 0)
            if single_segment:
                if content_size > MAX_WINDOW_BYTES:
                    raise self._fail(
                        f"single-segment zstd frame of {content_size} bytes exceeds "
                        f"the {MAX_WINDOW_BYTES}-byte window limit",
                        5,
                    )
                window = content_size
        self._block_max = min(window, _ZSTD_BLOCK_MAX)
        self._out = self._feed(header, "frame header", 0)
        self._outpos = 0

    def _check_trailing(self) -> None:
        offset = self._in_offset
        self._fill(4)
        rest = self._inbuf[self._inpos : self._inpos + 4]
        if not rest:
            return
        magic = int.from_bytes(rest, "little") if len(rest) == 4 else -1
        if magic == _ZSTD_MAGIC:
            raise self._fail("a second zstd frame follows the first (not allowed)", offset)
        if _SKIPPABLE_MIN <= magic <= _SKIPPABLE_MAX:
            raise self._fail("a skippable zstd frame follows the frame (not allowed)", offset)
        raise self._fail("trailing bytes after the zstd frame", offset)
