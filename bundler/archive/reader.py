"""Strict streaming reader of bundle archives (SPEC sections 4.1 and 5).

A bundle is one zstd frame holding a POSIX pax tar. Archives come from people the
auditor does not trust, so this module reads them itself, block by block, and refuses
anything outside the small subset the exporter writes. Python's ``tarfile`` is never
used here: it treats a bad header as the end of the archive, accepts a missing end
marker, and fills sparse members with invented zeros.

Two layers, composed by :func:`iter_archive`:

- :class:`ZstdStream` (module ``zstdframe``) checks the zstd frame header itself (one
  frame, checksum flag, no dictionary, window at most 8 MiB), walks the frame block by
  block so that each call into the decompressor produces at most one block (128 KiB) of
  output, stops once more than ``max_bytes`` come out, and at the end insists on a
  verified content checksum and nothing after the frame.
- :func:`iter_members` reads 512-byte tar blocks and yields each regular file or
  directory with an iterator over its content, after checking the header, the pax
  records and the name rules.

Memory stays flat: at most one decompressed block, one content chunk, one pax header
(64 KiB) and a 16-byte digest of each member name (capped by ``max_members``) are held
at a time.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from typing import Final, NamedTuple

from bundler.archive import names
from bundler.archive.zstdframe import _BUNDLE_IS, _CAP_HINT, _SOURCE_READ, Readable, ZstdStream
from bundler.core.errors import ArchiveError
from bundler.core.limits import DEFAULT_MAX_BYTES
from bundler.core.textsafe import quoted

MAX_PAX_BYTES: Final = 64 * 1024
MAX_NAME_BYTES: Final = names.MAX_NAME_BYTES
MAX_SEGMENT_BYTES: Final = names.MAX_SEGMENT_BYTES
CHUNK_BYTES: Final = 1024 * 1024
# The contract's limit on the cases of one bundle (bundle.json limits.max_cases).
MAX_CASES: Final = 20_000
# The most members a bundle may have, and the most bytes its names may take together
# (names.py, docs/format.md "Reader caps"). Each member costs the reader about 40 us and
# about 150 bytes whatever its name's length (names.MemberNames), so these bound both
# time and memory (SPEC 5, Resources); the exporter refuses a bundle that would need more.
MAX_MEMBERS: Final = names.MAX_MEMBERS
MAX_NAMES_TOTAL_BYTES: Final = names.MAX_NAMES_TOTAL_BYTES

BLOCK: Final = 512
RECORD: Final = 20 * BLOCK
_ZERO_BLOCK: Final = bytes(BLOCK)

_REGULAR_TYPES: Final = frozenset({b"0", b"\0"})
_DIR_TYPE: Final = b"5"
_PAX_TYPE: Final = b"x"
_REJECTED_TYPES: Final = {
    b"1": "hard link",
    b"2": "symbolic link",
    b"3": "character device",
    b"4": "block device",
    b"6": "FIFO",
    b"7": "contiguous file",
    b"g": "pax global header",
    b"L": "GNU long name record",
    b"K": "GNU long link name record",
    b"S": "GNU sparse member",
    b"D": "GNU dumpdir",
    b"M": "GNU multi-volume continuation",
    b"N": "GNU old long name",
    b"V": "GNU volume header",
}

# Keys whose values this reader uses, and keys that carry nothing the verifier needs
# and are ignored. Anything else is refused rather than silently misread: `linkpath`,
# `hdrcharset` (would change how `path` is decoded), `uname`/`uid`..., vendor keys.
_PAX_USED: Final = frozenset({"path", "mtime", "size"})
_PAX_IGNORED: Final = frozenset({"atime", "ctime", "comment"})
_PAX_TIME_RE: Final = re.compile(rb"\A[0-9]+(?:\.[0-9]+)?\Z")
_PAX_LENGTH_DIGITS: Final = 20


class Member(NamedTuple):
    """One tar member as the archive names it.

    ``path`` is the full name inside the archive (top directory included) without a
    trailing slash; ``size`` is 0 for directories; ``mtime`` is in whole seconds. A
    named tuple, not a frozen dataclass: a bundle has tens of thousands of members, and
    building one costs half as much.
    """

    path: str
    is_dir: bool
    size: int
    mtime: int
    mode: int


def _show(name: str | bytes) -> str:
    """Quote a name for a one-line message, its characters as they are for ``shown`` to
    escape once where the message is shown (``repr`` escaped them here too, and a name
    of tag characters came out as ``\\U000e0041``); bytes that are not UTF-8 can only be
    written as escapes (the message is text)."""
    if isinstance(name, bytes):
        name = name.decode("utf-8", errors="backslashreplace")
    return quoted(name)


class ArchiveTap:
    """The raw archive bytes a reader consumes: their SHA-256, their count, progress.

    ``attach(src)`` puts the tap between the archive file (or stream) and the reader;
    every ``read`` passes through, is hashed and counted, and ``progress`` (if given)
    receives the running count of compressed bytes. ``drain()`` reads what the reader
    left, so that ``sha256`` and ``size`` cover the whole file. A tap never attached
    (an extracted bag directory) has nothing to report.
    """

    def __init__(self, progress: Callable[[int], None] | None = None) -> None:
        self._src: Readable | None = None
        self._hasher = hashlib.sha256()
        self._size = 0
        self._progress = progress
        self._eof = False

    @property
    def attached(self) -> bool:
        return self._src is not None

    @property
    def size(self) -> int:
        """Bytes read from the archive so far."""
        return self._size

    @property
    def sha256(self) -> str:
        """Lowercase hex SHA-256 of the bytes read so far (as ``sha256sum`` prints it)."""
        return self._hasher.hexdigest()

    @property
    def complete(self) -> bool:
        """True once the archive has been read to its end."""
        return self._eof

    def attach(self, src: Readable) -> ArchiveTap:
        self._src = src
        return self

    def read(self, size: int, /) -> bytes:
        if self._src is None:
            raise ValueError("ArchiveTap.read before attach")
        data = self._src.read(size)
        if not data:
            self._eof = size != 0 or self._eof
            return data
        self._hasher.update(data)
        self._size += len(data)
        if self._progress is not None:
            self._progress(self._size)
        return data

    def drain(self) -> None:
        """Read to the end of the archive, so the digest covers every byte of it."""
        while self._src is not None and not self._eof:
            self.read(_SOURCE_READ)

    def drain_if_readable(self) -> None:
        """``drain`` after the reader refused the archive: a file that cannot be read to
        its end (or is closed) leaves the tap incomplete instead of raising. Errors of
        the stream itself (an object altered at rest) still propagate."""
        try:
            self.drain()
        except (OSError, ValueError):
            return


# ---------------------------------------------------------------------------- tar layer


class _Header(NamedTuple):
    offset: int
    typeflag: bytes
    raw_name: bytes
    size: int
    mtime: int
    mode: int


class _Pax(NamedTuple):
    offset: int
    path: bytes | None
    size: int | None
    mtime: int | None


def _cstring(field: bytes) -> bytes | None:
    """The bytes before the first NUL, or None if anything but NULs follows it."""
    nul = field.find(b"\0")
    if nul < 0:
        return field
    if field[nul:].strip(b"\0"):
        return None
    return field[:nul]


# The numeric fields (mode, uid, gid, size, mtime, checksum) as a plain ustar writer
# spells them: zero-padded octal digits, each field closed by NUL (checksum by NUL, space).
_PLAIN_NUMBERS: Final = re.compile(
    rb"([0-7]{7})\0[0-7]{7}\0[0-7]{7}\0([0-7]{11})\0([0-7]{11})\0([0-7]{6})\0 "
)
_PLAIN_TYPES: Final = frozenset({b"0", b"\0", _DIR_TYPE, _PAX_TYPE})
_NO_LINK: Final = bytes(100)


def _fast_header(block: bytes) -> tuple[bytes, bytes, int, int, int] | None:
    """(typeflag, name, size, mtime, mode) of a header in the plain form, else None.

    Accepts only headers the full parser accepts with the same result; anything else
    (including every malformed header) returns None and gets the full parser and its
    error messages. Exporters write this form, so it is the path of nearly every member.
    """
    numbers = _PLAIN_NUMBERS.fullmatch(block, 100, 156)
    typeflag = block[156:157]
    if (
        numbers is None
        or typeflag not in _PLAIN_TYPES
        or block[257:265] != b"ustar\x0000"
        or block[157:257] != _NO_LINK
    ):
        return None
    # The byte sum with the checksum field counted as spaces. A header is mostly NULs,
    # which add nothing: summing the other bytes is the same sum, at a third of the cost.
    if int(numbers[4], 8) != sum(block.translate(None, b"\0")) - sum(block[148:156]) + 256:
        return None
    name = _cstring(block[0:100])
    prefix = _cstring(block[345:500])
    if name is None or prefix is None:
        return None
    raw_name = prefix + b"/" + name if prefix else name
    return typeflag, raw_name, int(numbers[2], 8), int(numbers[3], 8), int(numbers[1], 8)


class _TarReader:
    def __init__(self, stream: Readable, source: str, max_bytes: int, max_members: int) -> None:
        self._stream = stream
        self._source = source
        self._max_bytes = max_bytes
        self._max_members = max_members
        self._offset = 0
        self._remaining = 0
        self._token: object = None
        self._top: str | None = None
        self._top_prefix = ""
        self._names = names.MemberNames(max_members=max_members)

    # -- errors

    def _at(self, offset: int, rule: str) -> ArchiveError:
        return ArchiveError(f"{self._source}: tar header at offset {offset}: {rule}")

    def _member_error(self, name: str | bytes, offset: int, rule: str) -> ArchiveError:
        return ArchiveError(
            f"{self._source}: member {_show(name)} (header at offset {offset}): {rule}"
        )

    # -- reading

    def _read(self, n: int, what: str, *, at_boundary: str | None = None) -> bytes:
        """Exactly ``n`` bytes or ArchiveError("truncated tar").

        ``at_boundary`` words the error when the stream ends before the first byte.
        """
        if self._offset + n > self._max_bytes:
            raise ArchiveError(
                f"{self._source}: tar stream at offset {self._offset}: "
                f"more than max_bytes={self._max_bytes} bytes ({_CAP_HINT})"
            )
        parts: list[bytes] = []
        got = 0
        while got < n:
            chunk = self._raw_read(n - got)
            if not chunk:
                where = at_boundary if got == 0 and at_boundary else f"inside {what}"
                raise ArchiveError(
                    f"{self._source}: truncated tar: stream ended at offset "
                    f"{self._offset + got} {where}"
                )
            parts.append(chunk)
            got += len(chunk)
        self._offset += n
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _raw_read(self, n: int) -> bytes:
        try:
            return self._stream.read(n)
        except OSError as exc:
            raise ArchiveError(f"{self._source}: cannot read archive: {exc}") from exc

    def _skip_padding(self, size: int, name: str | None, offset: int) -> None:
        pad = -size % BLOCK
        if pad and self._read(pad, "the block padding").strip(b"\0"):
            rule = "nonzero bytes in the block padding"
            raise self._at(offset, rule) if name is None else self._member_error(name, offset, rule)

    # -- headers

    def _octal(self, block: bytes, start: int, end: int, field: str, offset: int) -> int:
        raw = block[start:end]
        if raw[0] & 0x80:
            raise self._at(offset, f"base-256 {field} field (not allowed)")
        digits = raw.rstrip(b"\0 ").lstrip(b" ")
        if not digits or digits.strip(b"01234567"):
            raise self._at(offset, f"{field} field is not an octal number ({raw!r})")
        return int(digits, 8)

    def _parse_header(self, block: bytes, offset: int) -> _Header:
        fast = _fast_header(block)
        if fast is not None:
            typeflag, raw_name, size, mtime, mode = fast
            return _Header(offset, typeflag, raw_name, size, mtime, mode)
        stored = self._octal(block, 148, 156, "checksum", offset)
        computed = sum(block[:148]) + 8 * 0x20 + sum(block[156:])
        if stored != computed:
            raise self._at(offset, f"bad header checksum (stored {stored}, computed {computed})")
        if block[148:156] != b"%06o\0 " % computed:
            # Leniency in how the field is spelled would let a byte change go unnoticed.
            raise self._at(
                offset, f"checksum field not in the ustar form '%06o\\0 ' ({block[148:156]!r})"
            )
        typeflag = block[156:157]
        name = _cstring(block[0:100])
        prefix = _cstring(block[345:500])
        shown: str | bytes = name if name is not None else block[0:100]
        if prefix and name is not None:
            shown = prefix + b"/" + name
        if typeflag in _REJECTED_TYPES:
            raise self._member_error(
                shown, offset, f"{_REJECTED_TYPES[typeflag]} (type {typeflag!r}) not allowed"
            )
        if typeflag not in _REGULAR_TYPES and typeflag not in (_DIR_TYPE, _PAX_TYPE):
            raise self._member_error(shown, offset, f"unknown member type {typeflag!r}")
        if block[257:265] == b"ustar  \0":
            raise self._member_error(
                shown,
                offset,
                f"a GNU tar header, not a POSIX ustar header: not a bundle ({_BUNDLE_IS})",
            )
        if block[257:263] != b"ustar\0" or block[263:265] != b"00":
            raise self._member_error(
                shown, offset, f"not a POSIX ustar header (magic {block[257:265]!r})"
            )
        if name is None or prefix is None:
            raise self._member_error(shown, offset, "bytes after the NUL in the name field")
        if typeflag != _PAX_TYPE and block[157:257].strip(b"\0"):
            raise self._member_error(shown, offset, "link name set on a non-link member")
        size = self._octal(block, 124, 136, "size", offset)
        mtime = self._octal(block, 136, 148, "mtime", offset)
        mode = self._octal(block, 100, 108, "mode", offset)
        self._octal(block, 108, 116, "uid", offset)
        self._octal(block, 116, 124, "gid", offset)
        raw_name = prefix + b"/" + name if prefix else name
        return _Header(offset, typeflag, raw_name, size, mtime, mode)

    def _parse_pax(self, data: bytes, offset: int) -> _Pax:
        records: dict[str, bytes] = {}
        pos = 0
        while pos < len(data):
            space = data.find(b" ", pos, pos + _PAX_LENGTH_DIGITS + 1)
            length_field = data[pos:space] if space > pos else b""
            if (
                not length_field
                or length_field.strip(b"0123456789")
                or length_field.startswith(b"0")
            ):
                raise self._at(offset, f"malformed pax record at byte {pos} of the pax header")
            end = pos + int(length_field)
            if end > len(data) or end <= space + 1 or data[end - 1 : end] != b"\n":
                raise self._at(
                    offset, f"pax record length does not match at byte {pos} of the pax header"
                )
            key_raw, eq, value = data[space + 1 : end - 1].partition(b"=")
            try:
                key = key_raw.decode("utf-8")
            except UnicodeDecodeError:
                key = ""
            if not eq or not key:
                raise self._at(offset, f"malformed pax record at byte {pos} of the pax header")
            if key in records:
                raise self._at(offset, f"duplicate pax key {_show(key)}")
            records[key] = value
            pos = end
        for key in records:
            if key.startswith("GNU.sparse."):
                raise self._at(offset, f"sparse member (pax key {_show(key)}) not allowed")
            if key not in _PAX_USED and key not in _PAX_IGNORED:
                raise self._at(offset, f"unsupported pax key {_show(key)}")
        for key in _PAX_USED:
            if key in records and not records[key]:
                raise self._at(offset, f"empty pax {key} record")
        size: int | None = None
        if "size" in records:
            if records["size"].strip(b"0123456789"):
                raise self._at(offset, f"pax size is not a decimal number ({records['size']!r})")
            size = int(records["size"])
        mtime: int | None = None
        if "mtime" in records:
            if not _PAX_TIME_RE.match(records["mtime"]):
                raise self._at(offset, f"pax mtime is not a number ({records['mtime']!r})")
            mtime = int(records["mtime"].split(b".")[0])
        return _Pax(offset, records.get("path"), size, mtime)

    # -- names

    def _check_name(self, raw: bytes, is_dir: bool, offset: int) -> str:
        """Validate the effective name and record it; return it without a trailing '/'."""
        if b"\0" in raw:
            raise self._member_error(raw, offset, "NUL byte in name")
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self._member_error(raw, offset, "name is not UTF-8") from None

        def fail(rule: str) -> ArchiveError:
            return self._member_error(name, offset, rule)

        if len(raw) > MAX_NAME_BYTES:
            raise fail(f"name longer than {MAX_NAME_BYTES} bytes")
        if name.endswith("/"):
            if not is_dir:
                raise fail("regular file name ends with '/'")
            name = name[:-1]
        # Only the top directory's name is kept as text; every other name is remembered
        # by digest (names.MemberNames), so memory does not grow with name length.
        refused = self._names.claim(name, tag=offset, is_dir=is_dir)
        if refused is not None:
            rule, earlier = refused
            if earlier >= 0:
                rule = f"{rule} (the member whose header is at offset {earlier})"
            raise fail(rule)
        if self._top is None:
            if not is_dir or "/" in name:
                raise fail("the first member must be the single top-level directory")
            self._top = name
            self._top_prefix = name + "/"
        else:
            if not name.startswith(self._top_prefix):
                raise fail(f"outside the top-level directory {_show(self._top)}")
            parent = name.rpartition("/")[0]
            if not self._names.has_directory(parent):
                raise fail(f"parent directory {_show(parent)} has not appeared before it")
        return name

    # -- iteration

    def members(self) -> Iterator[tuple[Member, Iterator[bytes]]]:
        pax: _Pax | None = None
        while True:
            offset = self._offset
            block = self._read(BLOCK, "a header", at_boundary="without an end-of-archive marker")
            if block == _ZERO_BLOCK:
                if pax is not None:
                    raise self._at(pax.offset, "pax header not followed by a member")
                self._finish(offset)
                return
            header = self._parse_header(block, offset)
            if header.typeflag == _PAX_TYPE:
                if pax is not None:
                    raise self._at(offset, "pax header follows another pax header")
                if header.size > MAX_PAX_BYTES:
                    raise self._at(
                        offset,
                        f"oversize pax record ({header.size} bytes, limit {MAX_PAX_BYTES})",
                    )
                data = self._read(header.size, "a pax header")
                self._skip_padding(header.size, None, offset)
                pax = self._parse_pax(data, offset)
                continue
            yield from self._member(header, pax)
            pax = None

    def _member(
        self, header: _Header, pax: _Pax | None
    ) -> Iterator[tuple[Member, Iterator[bytes]]]:
        offset = header.offset
        raw_name = header.raw_name
        size = header.size
        mtime = header.mtime
        if pax is not None:
            if pax.path is not None:
                raw_name = pax.path
            if pax.size is not None and pax.size != size:
                raise self._member_error(
                    raw_name,
                    offset,
                    f"pax size {pax.size} disagrees with header size {size}",
                )
            if pax.mtime is not None:
                mtime = pax.mtime
        is_dir = header.typeflag == _DIR_TYPE
        if is_dir and size:
            raise self._member_error(raw_name, offset, f"directory with {size} bytes of data")
        name = self._check_name(raw_name, is_dir, offset)
        if offset + BLOCK + size + (-size % BLOCK) > self._max_bytes:
            raise self._member_error(
                name,
                offset,
                f"size {size} goes past max_bytes={self._max_bytes} ({_CAP_HINT})",
            )
        member = Member(path=name, is_dir=is_dir, size=size, mtime=mtime, mode=header.mode)
        if is_dir:
            yield member, iter(())
            return
        token = object()
        self._token = token
        self._remaining = size
        yield member, self._content(token, name, offset)
        self._token = None
        while self._remaining:
            self._read_content(name, offset)
        self._skip_padding(size, name, offset)

    def _read_content(self, name: str, offset: int) -> bytes:
        # Always a whole chunk (or the rest of the member): what a caller sees of a
        # member's content must depend on the tar alone, never on where the zstd block
        # boundaries fell (SPEC 5, Resources).
        want = min(self._remaining, CHUNK_BYTES)
        chunk = self._raw_read(want)
        if len(chunk) < want:
            parts = [chunk]
            got = len(chunk)
            while parts[-1] and got < want:
                parts.append(self._raw_read(want - got))
                got += len(parts[-1])
            if got < want:
                raise ArchiveError(
                    f"{self._source}: truncated tar: stream ended at offset "
                    f"{self._offset + got} inside member {_show(name)} "
                    f"(header at offset {offset})"
                )
            chunk = b"".join(parts)
        self._remaining -= want
        self._offset += want
        return chunk

    def _content(self, token: object, name: str, offset: int) -> Iterator[bytes]:
        while True:
            if self._token is not token:
                raise RuntimeError(f"content of {name!r} read after advancing to the next member")
            if not self._remaining:
                return
            yield self._read_content(name, offset)

    def _finish(self, offset: int) -> None:
        second = self._read(BLOCK, "the end-of-archive marker")
        if second != _ZERO_BLOCK:
            raise self._at(
                offset, "zero block not followed by a second zero block (data after end marker?)"
            )
        end = self._offset
        pad = -end % RECORD
        if pad:
            padding = self._read(pad, "the record padding after the end-of-archive marker")
            if padding.strip(b"\0"):
                first = end + len(padding) - len(padding.lstrip(b"\0"))
                raise ArchiveError(
                    f"{self._source}: tar stream at offset {first}: "
                    "data after the end-of-archive marker"
                )
        if self._raw_read(1):
            raise ArchiveError(
                f"{self._source}: tar stream at offset {self._offset}: data after the "
                "end-of-archive marker and its record padding"
            )


def iter_members(
    stream: Readable,
    *,
    source: str,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_members: int = MAX_MEMBERS,
) -> Iterator[tuple[Member, Iterator[bytes]]]:
    """Yield each member of a decompressed tar stream with an iterator over its content.

    Directories come with an empty iterator; a file's iterator yields its bytes in
    chunks of at most 1 MiB. Content not drained by the caller is skipped when the
    caller advances; reading an iterator after advancing raises RuntimeError. The
    archive is only fully checked (end marker, padding, end of stream) once the
    iteration has run to its end.

    Raises ArchiveError, naming ``source``, the member or block offset and the rule, for:
    member types other than regular files, directories and pax extended headers;
    malformed, oversize (over 64 KiB), sparse or unsupported pax records and pax sizes
    that disagree with the header; bad header checksums, non-octal or base-256 numeric
    fields, non-ustar magic, directories with data; names that are absolute, contain
    backslashes, control characters, empty, `.` or `..` segments, are not UTF-8 or not
    NFC, lie outside the single top-level directory (which must come first), come before
    their parent directory, or repeat another name exactly or after NFC + case folding;
    a stream that ends early or without the end marker; anything but zero padding to
    the next 10,240-byte record after the end marker; more than ``max_bytes`` bytes,
    ``max_members`` members or ``MAX_NAMES_TOTAL_BYTES`` bytes of names in all (each
    name is remembered by a 16-byte digest to detect collisions, so the member count is
    what the reader's memory grows with).
    """
    yield from _TarReader(stream, source, max_bytes, max_members).members()


def iter_archive(
    fileobj: Readable,
    *,
    source: str,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_members: int = MAX_MEMBERS,
) -> Iterator[tuple[Member, Iterator[bytes]]]:
    """Read a `.tar.zst` bundle: :class:`ZstdStream` under :func:`iter_members`.

    Same promises and errors as both; ``max_bytes`` caps the decompressed bytes.
    """
    stream = ZstdStream(fileobj, source=source, max_bytes=max_bytes)
    yield from iter_members(stream, source=source, max_bytes=max_bytes, max_members=max_members)
