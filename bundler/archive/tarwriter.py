"""Deterministic POSIX pax tar writer (SPEC section 4.1).

Members are regular files and directories only, mode 0644/0755, uid/gid 0, empty owner
names, one fixed mtime. A name that does not fit the ustar name/prefix fields gets a pax
extended header carrying only its ``path``. The archive ends with two zero blocks padded
to a whole 10,240-byte record. The same calls always give the same bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Protocol

BLOCK = 512
RECORD = 20 * BLOCK
FILE_MODE = 0o644
DIR_MODE = 0o755
PAX_HEADER_NAME = "././@PaxHeader"


class Sink(Protocol):
    def write(self, data: bytes, /) -> int | None: ...


def _octal(value: int, width: int) -> bytes:
    text = b"%0*o" % (width - 1, value)
    if len(text) > width - 1:
        raise ValueError(f"value {value} does not fit a {width}-byte octal field")
    return text + b"\0"


def _split_ustar(name: bytes) -> tuple[bytes, bytes] | None:
    """(prefix, name) for the ustar fields, or None when a pax path is needed.

    The split is at the last '/' within the 155-byte prefix field, as tarfile does; if
    more than 100 bytes follow it, no split fits.
    """
    if len(name) <= 100:
        return b"", name
    i = name.rfind(b"/", 0, min(len(name) - 1, 155) + 1)
    if i > 0 and len(name) - i - 1 <= 100:
        return name[:i], name[i + 1 :]
    return None


@functools.lru_cache(maxsize=16)
def _fixed_fields(mode: int, typeflag: bytes, mtime: int) -> tuple[bytes, bytes, bytes, int]:
    """The header fields that do not vary per member, and their byte sum.

    Returns (mode..gid, mtime + checksum placeholder + typeflag, linkname..devminor,
    sum), so a header is the name, these pieces, the size and the prefix.
    """
    owner = _octal(mode, 8) + _octal(0, 8) + _octal(0, 8)
    stamp = _octal(mtime, 12) + b" " * 8 + typeflag
    rest = b"\0" * 100 + b"ustar\x0000" + b"\0" * 64 + _octal(0, 8) + _octal(0, 8)
    return owner, stamp, rest, sum(owner) + sum(stamp) + sum(rest)


def _header(
    name: bytes, prefix: bytes, *, size: int, mode: int, typeflag: bytes, mtime: int
) -> bytes:
    owner, stamp, rest, fixed_sum = _fixed_fields(mode, typeflag, mtime)
    size_field = _octal(size, 12)
    # The checksum is the byte sum of the header with its own field read as spaces;
    # NUL padding adds nothing, so the sum of the pieces is the sum of the block.
    checksum = fixed_sum + sum(name) + sum(size_field) + sum(prefix)
    stamp = stamp[:12] + b"%06o\0 " % checksum + stamp[20:]
    block = b"".join(
        (
            name.ljust(100, b"\0"),
            owner,
            size_field,
            stamp,
            rest,
            prefix.ljust(155, b"\0"),
            _TAIL,
        )
    )
    assert len(block) == BLOCK
    return block


_TAIL = b"\0" * 12


def _pax_record(key: str, value: str) -> bytes:
    payload = f" {key}={value}\n".encode()
    length = len(payload) + 1
    while len(str(length)) + len(payload) != length:
        length = len(str(length)) + len(payload)
    return str(length).encode() + payload


def _padding(size: int) -> bytes:
    return b"\0" * (-size % BLOCK)


class TarWriter:
    """Writes members to ``sink`` in the order they are added."""

    def __init__(self, sink: Sink, *, mtime: int) -> None:
        self._sink = sink
        self._mtime = mtime
        self._offset = 0
        self._closed = False

    @property
    def offset(self) -> int:
        return self._offset

    def _write(self, data: bytes) -> None:
        self._sink.write(data)
        self._offset += len(data)

    def _header_bytes(self, path: str, *, size: int, mode: int, typeflag: bytes) -> bytes:
        """The header block, preceded by a pax header when the name needs one."""
        raw = path.encode("utf-8")
        split = None if not raw.isascii() else _split_ustar(raw)
        pax = b""
        if split is None:
            record = _pax_record("path", path)
            pax = (
                _header(
                    PAX_HEADER_NAME.encode(),
                    b"",
                    size=len(record),
                    mode=FILE_MODE,
                    typeflag=b"x",
                    mtime=self._mtime,
                )
                + record
                + _padding(len(record))
            )
            split = (b"", raw[:100])
        return pax + _header(
            split[1], split[0], size=size, mode=mode, typeflag=typeflag, mtime=self._mtime
        )

    def _begin(self, path: str, *, size: int, mode: int, typeflag: bytes) -> None:
        self._write(self._header_bytes(path, size=size, mode=mode, typeflag=typeflag))

    def add_dir(self, path: str) -> None:
        """A directory member; ``path`` has no trailing slash."""
        self._begin(path + "/", size=0, mode=DIR_MODE, typeflag=b"5")

    def add_file_chunks(self, path: str, size: int, chunks: Iterable[bytes]) -> None:
        """A regular file of exactly ``size`` bytes fed in chunks."""
        self._begin(path, size=size, mode=FILE_MODE, typeflag=b"0")
        written = 0
        for chunk in chunks:
            written += len(chunk)
            if written > size:
                raise ValueError(f"{path}: more bytes than the declared {size}")
            self._write(chunk)
        if written != size:
            raise ValueError(f"{path}: {written} bytes written, {size} declared")
        self._write(_padding(size))

    def add_file(self, path: str, data: bytes) -> None:
        """A regular file held in memory: header, data and padding, in three writes
        (not joined first: the data is not copied once more)."""
        self._write(self._header_bytes(path, size=len(data), mode=FILE_MODE, typeflag=b"0"))
        self._write(data)
        self._write(_padding(len(data)))

    def close(self) -> None:
        """Two zero blocks, then zeros to the end of the 10,240-byte record."""
        if self._closed:
            return
        self._write(b"\0" * (2 * BLOCK))
        self._write(b"\0" * (-self._offset % RECORD))
        self._closed = True
