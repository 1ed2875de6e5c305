"""A record read as a stream: its top-level fields, and its long arrays one item at a time.

A saved verification record of a 20,000-case bundle is tens of megabytes, almost all of it
one array (``claims``); parsed whole into Python objects it would take several hundred
megabytes, over SPEC 5's bound. ``scan_object`` finds where each top-level value starts and
ends without parsing it, and ``scan_array`` where each item of an array does, so the caller
parses one small slice at a time (with ``canonical.loads``, the strict parser every JSON
input passes) and keeps only what it needs.

The scanner only skips: strings (with their escapes) and everything between brackets, by
regular expressions with possessive quantifiers, so each byte is looked at a bounded number
of times and a hostile file cannot make it backtrack. What it accepts as a value is then
parsed by ``canonical.loads``, which decides whether it is JSON; the scanner itself refuses
only structure it cannot walk (an unterminated string, unbalanced brackets, something after
the end), naming the byte offset.

The file is mapped, not read, and the pages already walked are given back to the kernel, so
resident memory does not grow with the file.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterator
from dataclasses import dataclass

from bundler.core.canonical import MAX_DEPTH
from bundler.core.errors import InputError

_WS = re.compile(rb"[ \t\n\r]*+")
# Between brackets: runs of anything but a bracket or a quote, and whole strings.
_INNER = re.compile(rb'(?:[^"\[\]{}]++|"(?:[^"\\]++|\\.)*+")*+', re.S)
# A scalar: one string, or a run up to the next separator (canonical.loads judges it).
_SCALAR = re.compile(rb'"(?:[^"\\]++|\\.)*+"|[^\s,\]}:\[{"]++', re.S)
# Runs of flat objects (no bracket inside but in strings), each followed by a comma: the
# shape of a claims or problems array, walked in one match instead of one per item.
_FLAT = rb'\{(?:[^"{}\[\]]++|"(?:[^"\\]++|\\.)*+")*+\}'
_FLAT_RUN = re.compile(rb"(?:[ \t\n\r]*+" + _FLAT + rb"[ \t\n\r]*+,)*+", re.S)
# Items parsed together: at most this many, and this many bytes.
RUN_ITEMS = 1000
RUN_BYTES = 4 * 1024 * 1024
_FLAT_BATCH = re.compile(rb"(?:[ \t\n\r]*+" + _FLAT + rb"[ \t\n\r]*+,){1,%d}+" % RUN_ITEMS, re.S)
# Pages walked are given back to the kernel every this many bytes.
_RELEASE_EVERY = 8 * 1024 * 1024


@dataclass(frozen=True)
class Span:
    """The bytes ``[start, end)`` of one value in the buffer."""

    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


class Buffer:
    """A file mapped read-only, with the pages already walked released as the scan moves on."""

    def __init__(self, fd: int, size: int) -> None:
        self.size = size
        self._map = mmap.mmap(fd, size, prot=mmap.PROT_READ) if size else None
        self._bytes = b""
        self._released = 0

    @classmethod
    def from_bytes(cls, data: bytes) -> Buffer:
        """A buffer over bytes already in memory (nothing to map or release)."""
        buf = cls.__new__(cls)
        buf.size = len(data)
        buf._map = None
        buf._bytes = data
        buf._released = 0
        return buf

    @property
    def data(self) -> bytes | mmap.mmap:
        return self._map if self._map is not None else self._bytes

    def slice(self, span: Span) -> bytes:
        return self.data[span.start : span.end]

    def release_before(self, offset: int) -> None:
        """Drop the mapped pages wholly before ``offset`` from resident memory."""
        if self._map is None or offset - self._released < _RELEASE_EVERY:
            return
        end = offset - offset % mmap.PAGESIZE
        # Everything before ``end`` may be walked again (the first items of each array),
        # which only faults those pages back in.
        if end > self._released:
            self._map.madvise(mmap.MADV_DONTNEED, self._released, end - self._released)
            self._released = end

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None


class _Walker:
    def __init__(self, data: bytes | mmap.mmap, source: str, buffer: Buffer | None) -> None:
        self.data = data
        self.source = source
        self.size = len(data)
        self.buffer = buffer
        self.next_release = _RELEASE_EVERY

    def fail(self, pos: int, rule: str) -> InputError:
        return InputError(f"{self.source}: byte {pos}: {rule}")

    def ws(self, pos: int) -> int:
        m = _WS.match(self.data, pos)
        assert m is not None  # matches the empty string
        return m.end()

    def byte(self, pos: int) -> int | None:
        return self.data[pos] if pos < self.size else None

    def expect(self, pos: int, char: bytes) -> int:
        if self.byte(pos) != char[0]:
            raise self.fail(pos, f"expected {char.decode()!r} (not a JSON object)")
        return pos + 1

    def value_end(self, pos: int) -> int:
        """The end of the value starting at ``pos`` (brackets balanced, strings closed)."""
        first = self.byte(pos)
        if first is None:
            raise self.fail(pos, "the document ends where a value should start")
        if first not in (0x7B, 0x5B):  # { [
            m = _SCALAR.match(self.data, pos)
            if m is None or m.end() == pos:
                raise self.fail(pos, "not a JSON value (or an unterminated string)")
            return m.end()
        stack = []
        while True:
            ch = self.byte(pos)
            if ch in (0x7B, 0x5B):
                stack.append(0x7D if ch == 0x7B else 0x5D)
                if len(stack) > MAX_DEPTH:
                    raise self.fail(pos, f"nesting deeper than {MAX_DEPTH} levels")
            elif ch in (0x7D, 0x5D):
                if ch != stack.pop():
                    raise self.fail(pos, "brackets do not balance")
                if not stack:
                    return pos + 1
            elif ch is None:
                raise self.fail(pos, "the document ends inside a value")
            else:
                raise self.fail(pos, "an unterminated string")
            if ch == 0x5B:
                run = _FLAT_RUN.match(self.data, pos + 1)
                assert run is not None
                pos = run.end() - 1
            m = _INNER.match(self.data, pos + 1)
            assert m is not None
            pos = m.end()
            if pos >= self.next_release and self.buffer is not None:
                self.buffer.release_before(pos)
                self.next_release = pos + _RELEASE_EVERY


def scan_object(
    data: bytes | mmap.mmap, source: str, buffer: Buffer | None = None
) -> Iterator[tuple[Span, Span]]:
    """(key span, value span) of each member of the top-level object, in file order.

    Raises InputError naming the byte offset when the document is not one JSON object
    whose structure can be walked (keys and values are judged when parsed).
    """
    w = _Walker(data, source, buffer)
    pos = w.expect(w.ws(0), b"{")
    pos = w.ws(pos)
    if w.byte(pos) == 0x7D:
        pos += 1
    else:
        while True:
            if w.byte(pos) != 0x22:
                raise w.fail(pos, "expected a quoted key")
            key_end = w.value_end(pos)
            key = Span(pos, key_end)
            pos = w.ws(w.expect(w.ws(key_end), b":"))
            end = w.value_end(pos)
            yield key, Span(pos, end)
            pos = w.ws(end)
            if w.byte(pos) == 0x2C:
                pos = w.ws(pos + 1)
                continue
            pos = w.expect(pos, b"}")
            break
    if w.ws(pos) != w.size:
        raise w.fail(w.ws(pos), "something follows the end of the JSON object")


def scan_array(
    data: bytes | mmap.mmap, span: Span, source: str, buffer: Buffer | None = None
) -> Iterator[tuple[Span, bool]]:
    """The items of the array at ``span`` (which starts with ``[``), as (span, run): a run
    is several whole items with the commas between them (parse it inside ``[`` ``]``),
    at most ``RUN_ITEMS`` items and about ``RUN_BYTES``; otherwise the span is one item."""
    w = _Walker(data, source, buffer)
    pos = w.ws(w.expect(span.start, b"["))
    if w.byte(pos) == 0x5D:
        return
    while True:
        # Bounded by bytes as well as items: unbounded, a run of 1,000 items of 8 KB was
        # matched and then refused as too long for every item in turn (60 s on a record
        # of long names).
        batch = _FLAT_BATCH.match(data, pos, pos + RUN_BYTES)
        if batch is not None:
            end = batch.end() - 1  # the last comma
            yield Span(pos, end), True
            pos = w.ws(batch.end())
            continue
        end = w.value_end(pos)
        yield Span(pos, end), False
        pos = w.ws(end)
        if w.byte(pos) == 0x2C:
            pos = w.ws(pos + 1)
            continue
        w.expect(pos, b"]")
        return


def run_items(
    data: bytes | mmap.mmap, run: Span, source: str, buffer: Buffer | None = None
) -> Iterator[Span]:
    """Each item of a run ``scan_array`` gave, one span at a time: to name the very item
    a run's parse refused (its index, not the run's first)."""
    w = _Walker(data, source, buffer)
    pos = w.ws(run.start)
    while pos < run.end:
        end = w.value_end(pos)
        yield Span(pos, end)
        pos = w.ws(end)
        if pos < run.end and w.byte(pos) == 0x2C:
            pos = w.ws(pos + 1)
