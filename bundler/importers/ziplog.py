"""A strict reader of the zip container of Inspect's ``.eval`` logs (SPEC 16).

It never extracts and never trusts one part of the file over another: the end record,
the central directory and every local header must agree, the members must tile the
file exactly (no gap, overlap or trailing byte, so nothing can hide between them), and
every name must be safe (no duplicate, absolute, ``..``, backslash, empty segment,
control character or non-NFC name). Sizes and ratios are checked against the caps
before a byte is decompressed, and decompression stops at the declared size, which must
then match exactly, with the CRC-32. Methods: stored (0), deflate (8) and zstd (93, as
Inspect writes since 0.3.206; Python's ``zipfile`` cannot read it before 3.14).

Every refusal is an InputError naming the log, the member and the rule.
"""

from __future__ import annotations

import struct
import unicodedata
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import zstandard

from bundler.core.errors import InputError
from bundler.importers.runfile import RunFile

# Caps (SPEC 5's bounds): a member is parsed whole as JSON, so it is held to the bundle
# reader's document cap; the log as a whole to what an import can parse in seconds.
# Members: a sample and epoch each, plus the header, summaries and journal; 50,000 is
# beyond any log whose cases a bundle can hold (20,000) with its journal, and below the
# zip format's own 65,535 (zip64 logs are refused).
MAX_MEMBERS = 50_000
MAX_MEMBER_BYTES = 32 * 1024 * 1024
MAX_TOTAL_BYTES = 2 * 1024**3
# Expansion: JSON compresses well, but no honest member expands a thousandfold; members
# under SMALL_MEMBER bytes are exempt (a tiny member's ratio means nothing).
MAX_RATIO = 1000
SMALL_MEMBER = 64 * 1024

STORED, DEFLATE, ZSTD = 0, 8, 93
ZSTD_PIECE = 1024  # compressed bytes fed to zstd at a time (see _zstd)
METHODS = {STORED: "stored", DEFLATE: "deflate", ZSTD: "zstd"}

_EOCD = struct.Struct("<4sHHHHIIH")  # signature .. comment length
_CDH = struct.Struct("<4sHHHHHHIIIHHHHHII")
_LFH = struct.Struct("<4sHHHHHIIIHH")
_EOCD_SIG = b"PK\x05\x06"
_CDH_SIG = b"PK\x01\x02"
_LFH_SIG = b"PK\x03\x04"
_DD_SIG = b"PK\x07\x08"
_ZIP64_LOCATOR_SIG = b"PK\x06\x07"
FLAG_ENCRYPTED = 0x1
FLAG_DESCRIPTOR = 0x8
FLAG_UTF8 = 0x800
_ALLOWED_FLAGS = FLAG_DESCRIPTOR | FLAG_UTF8 | 0x6  # bits 1-2: compression options


@dataclass(frozen=True)
class ZipMember:
    name: str
    method: int
    flags: int
    crc: int
    compressed_size: int
    size: int
    header_offset: int
    data_offset: int


def _name_problem(name: str) -> str | None:
    if not name:
        return "an empty name"
    if name.startswith("/"):
        return "an absolute name"
    if "\\" in name:
        return "a backslash in the name"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return "a control character in the name"
    if unicodedata.normalize("NFC", name) != name:
        return "a name that is not NFC"
    for segment in name.split("/"):
        if segment in ("", ".", ".."):
            return f"an unsafe segment {segment!r} in the name"
    return None


class ZipLog:
    """The members of a zip run file, read by name after the whole layout checks."""

    def __init__(self, run_file: RunFile, members: dict[str, ZipMember]) -> None:
        self.file = run_file
        self.members = members
        self._total = 0

    @classmethod
    def open(cls, run_file: RunFile) -> ZipLog:
        """Check the container's whole layout; InputError naming the rule broken."""
        return cls(run_file, _read_layout(run_file))

    def names(self) -> list[str]:
        return sorted(self.members)

    def read(self, name: str) -> bytes:
        """The decompressed bytes of member ``name`` (declared size and CRC checked)."""
        m = self.members[name]
        where = f"{self.file.name}: member {name}"
        self._total += m.size
        if self._total > MAX_TOTAL_BYTES:
            raise InputError(
                f"{self.file.name}: its members expand to more than {MAX_TOTAL_BYTES} bytes"
            )
        raw = self.file.pread(m.compressed_size, m.data_offset)
        if m.method == STORED:
            data = raw
        elif m.method == DEFLATE:
            d = zlib.decompressobj(-15)
            try:
                data = d.decompress(raw, m.size + 1)
            except zlib.error as exc:
                raise InputError(f"{where}: corrupt deflate data ({exc})") from exc
            if not d.eof or d.unused_data or d.unconsumed_tail:
                raise InputError(f"{where}: deflate data does not end at its declared size")
        else:
            data = _zstd(raw, m.size, where)
        if len(data) != m.size:
            raise InputError(
                f"{where}: decompresses to {len(data)} bytes, the directory says {m.size}"
            )
        if zlib.crc32(data) != m.crc:
            raise InputError(f"{where}: CRC-32 does not match its bytes")
        return data


def _zstd(raw: bytes, size: int, where: str) -> bytes:
    """One zstd frame that expands to exactly ``size`` bytes, never more held.

    A frame header that declares another size is refused before decompressing (zstandard
    would allocate what the header says); the input is fed in small pieces and the
    output checked after each, so a hostile frame (run-length blocks expand about
    40,000-fold) is stopped within ``ZSTD_PIECE`` x 43,000 bytes past ``size``; bytes after
    the frame are refused.
    """
    try:
        declared = zstandard.get_frame_parameters(raw).content_size
        if declared != zstandard.CONTENTSIZE_UNKNOWN and declared != size:
            raise InputError(
                f"{where}: its zstd frame declares {declared} bytes, the directory says {size}"
            )
        obj = zstandard.ZstdDecompressor(max_window_size=1 << 27).decompressobj()
        parts: list[bytes] = []
        total = 0
        for start in range(0, len(raw), ZSTD_PIECE):
            if obj.eof:
                raise InputError(f"{where}: bytes after its zstd frame")
            out = obj.decompress(raw[start : start + ZSTD_PIECE])
            total += len(out)
            if total > size:
                raise InputError(f"{where}: expands beyond its declared {size} bytes")
            parts.append(out)
        if not obj.eof or obj.unused_data:
            raise InputError(f"{where}: zstd data does not end where the member ends")
    except zstandard.ZstdError as exc:
        raise InputError(f"{where}: corrupt zstd data ({exc})") from exc
    return b"".join(parts)


def _read_layout(f: RunFile) -> dict[str, ZipMember]:
    where = f.name
    if f.size < _EOCD.size:
        raise InputError(f"{where}: not a zip file (too short)")
    # No archive comment is allowed, so the end record is the last 22 bytes exactly.
    eocd = f.pread(_EOCD.size, f.size - _EOCD.size)
    sig, disk, cd_disk, n_disk, n_total, cd_size, cd_offset, comment = _EOCD.unpack(eocd)
    if sig != _EOCD_SIG or comment != 0:
        raise InputError(
            f"{where}: not a zip file ending in an end-of-central-directory record "
            "without a comment"
        )
    if disk or cd_disk or n_disk != n_total:
        raise InputError(f"{where}: a multi-disk zip is refused")
    if 0xFFFF in (n_total,) or 0xFFFFFFFF in (cd_size, cd_offset):
        raise InputError(f"{where}: a zip64 log is refused (over {MAX_MEMBERS} members or 4 GiB)")
    if n_total > MAX_MEMBERS:
        raise InputError(f"{where}: {n_total} members, over the cap of {MAX_MEMBERS}")
    if cd_offset + cd_size != f.size - _EOCD.size:
        raise InputError(f"{where}: the central directory does not end where the end record begins")
    if cd_offset >= 20 and f.pread(4, cd_offset - 20) == _ZIP64_LOCATOR_SIG:
        raise InputError(f"{where}: a zip64 log is refused")
    directory = f.pread(cd_size, cd_offset)
    members: dict[str, ZipMember] = {}
    pos = 0
    declared = 0
    for index in range(n_total):
        if pos + _CDH.size > len(directory):
            raise InputError(f"{where}: central directory entry {index} is truncated")
        (
            sig,
            _made,
            _needed,
            flags,
            method,
            _time,
            _date,
            crc,
            csize,
            usize,
            name_len,
            extra_len,
            comment_len,
            disk_start,
            _iattr,
            _eattr,
            offset,
        ) = _CDH.unpack_from(directory, pos)
        if sig != _CDH_SIG:
            raise InputError(f"{where}: central directory entry {index} has a bad signature")
        end = pos + _CDH.size + name_len + extra_len + comment_len
        if end > len(directory):
            raise InputError(f"{where}: central directory entry {index} is truncated")
        raw_name = directory[pos + _CDH.size : pos + _CDH.size + name_len]
        pos = end
        name = _decode_name(raw_name, flags, where, index)
        problem = _name_problem(name)
        if problem is not None:
            raise InputError(f"{where}: member {name!r}: {problem}")
        if name in members:
            raise InputError(f"{where}: member {name!r} appears twice")
        if flags & FLAG_ENCRYPTED or flags & ~_ALLOWED_FLAGS:
            raise InputError(f"{where}: member {name}: flags {flags:#06x} (encryption or unknown)")
        if method not in METHODS:
            raise InputError(
                f"{where}: member {name}: compression method {method} "
                "(stored, deflate and zstd are read)"
            )
        if disk_start != 0:
            raise InputError(f"{where}: member {name}: on another disk")
        if usize > MAX_MEMBER_BYTES:
            raise InputError(
                f"{where}: member {name}: declares {usize} bytes, over the "
                f"{MAX_MEMBER_BYTES}-byte cap"
            )
        if method == STORED and csize != usize:
            raise InputError(
                f"{where}: member {name}: stored, yet sizes {csize} and {usize} differ"
            )
        if usize > SMALL_MEMBER and usize > MAX_RATIO * max(csize, 1):
            raise InputError(
                f"{where}: member {name}: expands {csize} bytes to {usize}, over the "
                f"{MAX_RATIO}:1 ratio cap"
            )
        members[name] = ZipMember(name, method, flags, crc, csize, usize, offset, 0)
        declared += usize
        if declared > MAX_TOTAL_BYTES:
            raise InputError(
                f"{where}: its members declare more than {MAX_TOTAL_BYTES} bytes in all "
                "(refused before decompressing any)"
            )
    if pos != len(directory):
        raise InputError(f"{where}: bytes after the last central directory entry")
    return _check_local_headers(f, members, cd_offset)


def _decode_name(raw: bytes, flags: int, where: str, index: int) -> str:
    try:
        if flags & FLAG_UTF8:
            return raw.decode("utf-8")
        return raw.decode("ascii")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{where}: central directory entry {index}: a name that is not "
            + ("UTF-8" if flags & FLAG_UTF8 else "ASCII (without the UTF-8 flag)")
        ) from exc


def _check_local_headers(
    f: RunFile, members: dict[str, ZipMember], cd_offset: int
) -> dict[str, ZipMember]:
    """Each local header agrees with its directory entry; the members tile the file."""
    where = f.name
    expected_offset = 0
    out: dict[str, ZipMember] = {}
    for m in sorted(members.values(), key=lambda m: m.header_offset):
        if m.header_offset != expected_offset:
            what = (
                "overlaps the member before it"
                if m.header_offset < expected_offset
                else ("leaves a gap before it")
            )
            raise InputError(f"{where}: member {m.name}: {what} (offset {m.header_offset})")
        if m.header_offset + _LFH.size > cd_offset:
            raise InputError(f"{where}: member {m.name}: its header runs into the directory")
        (
            sig,
            _needed,
            flags,
            method,
            _time,
            _date,
            crc,
            csize,
            usize,
            name_len,
            extra_len,
        ) = _LFH.unpack(f.pread(_LFH.size, m.header_offset))
        if sig != _LFH_SIG:
            raise InputError(f"{where}: member {m.name}: bad local header signature")
        name_start = m.header_offset + _LFH.size
        if name_start + name_len + extra_len > cd_offset:
            raise InputError(f"{where}: member {m.name}: its header runs into the directory")
        raw_name = f.pread(name_len, name_start)
        if _decode_name(raw_name, flags, where, 0) != m.name or flags != m.flags:
            raise InputError(
                f"{where}: member {m.name}: local header and central directory disagree "
                "on its name or flags"
            )
        if method != m.method:
            raise InputError(
                f"{where}: member {m.name}: local header and central directory disagree "
                "on its method"
            )
        descriptor = bool(flags & FLAG_DESCRIPTOR)
        if not descriptor and (crc, csize, usize) != (m.crc, m.compressed_size, m.size):
            raise InputError(
                f"{where}: member {m.name}: local header and central directory disagree "
                "on its sizes or CRC"
            )
        data_offset = name_start + name_len + extra_len
        end = data_offset + m.compressed_size
        if end > cd_offset:
            raise InputError(f"{where}: member {m.name}: its data runs into the directory")
        if descriptor:
            end = _check_descriptor(f, m, end, cd_offset)
        expected_offset = end
        out[m.name] = ZipMember(
            m.name,
            m.method,
            m.flags,
            m.crc,
            m.compressed_size,
            m.size,
            m.header_offset,
            data_offset,
        )
    if expected_offset != cd_offset:
        raise InputError(f"{where}: bytes between the last member and the central directory")
    return out


def _check_descriptor(f: RunFile, m: ZipMember, at: int, limit: int) -> int:
    """A data descriptor (optional signature) that repeats the directory's CRC and sizes."""
    where = f"{f.name}: member {m.name}"
    want = struct.pack("<III", m.crc, m.compressed_size, m.size)
    for size, prefix in ((16, _DD_SIG), (12, b"")):
        if at + size <= limit and f.pread(size, at) == prefix + want:
            return at + size
    raise InputError(f"{where}: its data descriptor disagrees with the central directory")


def iter_json_members(log: ZipLog, prefix: str) -> Iterator[str]:
    """Member names under ``prefix`` in byte order."""
    for name in sorted(log.members, key=lambda n: n.encode("utf-8")):
        if name.startswith(prefix):
            yield name
