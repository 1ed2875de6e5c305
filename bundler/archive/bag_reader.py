"""Read a bundle once, as a stream, into what the verifier needs (SPEC section 5).

The source is an archive (through the strict ``archive_reader``) or an extracted bag
directory (walked without following links). Every file is hashed exactly once; the
bytes of small documents (tag files, bundle.json, report, suite, scorer files, dataset
manifests, check results, case files, evidence manifests) are kept, each under a size
cap, and payload bodies and example bodies are only hashed. ``extract_to`` also writes
every file beneath a directory while reading (used by ``extract``).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, NamedTuple

from bundler.archive import names
from bundler.archive.reader import MAX_CASES, ArchiveTap, Member, iter_archive
from bundler.archive.safe_extract import SafeExtractor
from bundler.core import canonical
from bundler.core.errors import ArchiveError, InputError
from bundler.core.limits import DEFAULT_MAX_BYTES

# Reader caps (docs/format.md, "Reader caps"). Each derives from the contract's limits
# and is one the exporter checks before it writes (``document_problem``), so no bundle
# a legitimate export writes is refused by them; each refusal is one ArchiveError
# naming the member and the rule (verdict error, exit 3).
#
# The kept documents (everything but example bodies and payload blobs) are held in
# memory and parsed: 20,000 cases of about 1 KiB each (a case with its output and a few
# evidence refs), their bundle.json entries and the report need about 32 MiB in all.
# One document may be that large (a single check holding every case); all of them
# together get half as much again. The budget (SPEC 5, Resources) is 300 MB.
MAX_DOCUMENT_BYTES = 32 * 1024 * 1024
MAX_KEPT_BYTES = 48 * 1024 * 1024
# Parsed JSON costs far more than its bytes (a float is 32 bytes of Python, `0,` two
# bytes of JSON), so the parse is bounded by its values, counted before parsing: the
# commas, colons and opening brackets of every kept JSON document (an upper bound on
# its values and keys; characters inside strings count too). 20,000 cases with an
# output and two evidence refs each, and their bundle.json entries, stay under it.
MAX_JSON_VALUES = canonical.MAX_VALUES
# Case lines over all case files: the contract's own limit (bundle.json
# limits.max_cases), counted while the files stream in, before any line is parsed.
MAX_CASE_LINES = MAX_CASES
# Canonical evidence manifests start with their first key in JCS order.
EVIDENCE_MANIFEST_PREFIX = b'{"check_id":'
CHUNK = 1024 * 1024

# The writer ``read_bag`` extracts through (descriptor-based, see bundler.archive.safe_extract).
Extractor = SafeExtractor


class FileInfo(NamedTuple):
    sha256: str  # 64 lowercase hex
    size: int


@dataclass
class BagContents:
    """One bag as read: every file's digest, and the bytes of the documents kept."""

    source: str
    top: str
    files: dict[str, FileInfo] = field(default_factory=dict)  # bag-relative path -> info
    kept: dict[str, bytes] = field(default_factory=dict)
    directories: set[str] = field(default_factory=set)

    def data_files(self) -> list[str]:
        return [p for p in self.files if p.startswith("data/")]


def _keep(rel: str, first_chunk: bytes, size: int) -> bool:
    if "/" not in rel:
        return True  # a tag file at the bag root
    if not rel.startswith("data/"):
        return False  # a file anywhere else is hashed, reported, never trusted
    if rel.startswith("data/datasets/") and "/examples/" in rel:
        return False
    if rel.startswith("data/blobs/"):
        return first_chunk.startswith(EVIDENCE_MANIFEST_PREFIX)
    if rel.startswith("data/run/"):
        # eval-banana run files: JSON and text the verifier re-derives; logs stay hashed only.
        return size <= MAX_DOCUMENT_BYTES
    return True


def _extractable(rel: str) -> bool:
    """Whether ``extract`` writes ``rel``: data/ and the tag files at the bag root.

    Anything else (a tag file in a subdirectory, a directory beside data/) stays out of
    the copy; it is still hashed and reported in ``BagContents`` so claim 1 fails it.
    """
    return "/" not in rel or rel.startswith("data/")


def _counts_case_lines(rel: str) -> bool:
    return rel.startswith("data/") and rel.endswith(".jsonl") and not rel.startswith("data/run/")


def json_values(data: bytes) -> int:
    """An upper bound on the values and keys of JSON ``data`` (``canonical.value_bound``)."""
    return canonical.value_bound(data)


def case_lines(data: bytes) -> int:
    """The lines of a JSON Lines file (a last line without its newline counts)."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def read_bag(
    members: Iterator[tuple[Member, Iterator[bytes]]],
    *,
    source: str,
    extract: Extractor | None = None,
    progress: Callable[[int], None] | None = None,
) -> BagContents:
    """Consume the member stream into BagContents; raises ArchiveError when unsafe.

    Every file is hashed and listed in ``files``, wherever it is. ``extract`` gets only
    data/ and the files at the bag root (see ``_extractable``). The reader caps are
    enforced before any kept document is parsed: ArchiveError for a document over
    MAX_DOCUMENT_BYTES, kept documents over MAX_KEPT_BYTES or MAX_JSON_VALUES in all,
    and more than MAX_CASE_LINES case lines (counted as the bytes stream in).
    """
    bag: BagContents | None = None
    kept_total = 0
    values_total = 0
    lines_total = 0
    done = 0
    for member, chunks in members:
        if bag is None:
            if not member.is_dir or "/" in member.path:
                raise ArchiveError(
                    f"{source}: {member.path}: the first member must be the top directory"
                )
            bag = BagContents(source=source, top=member.path)
            if extract is not None:
                extract.directory(member.path)
            continue
        rel = member.path[len(bag.top) + 1 :]
        if member.is_dir:
            bag.directories.add(rel)
            if extract is not None and (rel == "data" or rel.startswith("data/")):
                extract.directory(member.path)
            continue

        def refuse(rule: str, path: str = member.path) -> ArchiveError:
            return ArchiveError(f"{source}: {path}: {rule}")

        hasher = hashlib.sha256()
        # The keep decision looks at the first bytes of the member; they are gathered
        # first, so how the content happens to be chunked never changes it.
        head: list[bytes] = []
        head_size = 0
        buffer: list[bytes] | None = None
        decided = False
        count_lines = _counts_case_lines(rel)
        out = extract.open(member.path) if extract is not None and _extractable(rel) else None
        size = 0
        try:
            for chunk in chunks:
                hasher.update(chunk)
                size += len(chunk)
                if out is not None:
                    out.write(chunk)
                if count_lines:
                    lines_total += chunk.count(b"\n")
                    if lines_total > MAX_CASE_LINES:
                        raise refuse(
                            f"more than {MAX_CASE_LINES} case lines in the bundle's case files "
                            "(limits.max_cases; refused before parsing)"
                        )
                if decided:
                    if buffer is not None:
                        buffer.append(chunk)
                else:
                    head.append(chunk)
                    head_size += len(chunk)
                    if head_size >= len(EVIDENCE_MANIFEST_PREFIX):
                        decided = True
                        buffer = _admit(rel, head, member.size, kept_total, refuse)
                        if buffer is not None:
                            kept_total += member.size
                done += len(chunk)
                if progress is not None:
                    progress(done)
        finally:
            if out is not None:
                out.close()
        if not decided:
            buffer = _admit(rel, head, size, kept_total, refuse)
            if buffer is not None:
                kept_total += size
        if count_lines and size and not _ends_with_newline(head, buffer):
            lines_total += 1
            if lines_total > MAX_CASE_LINES:
                raise refuse(f"more than {MAX_CASE_LINES} case lines in the bundle's case files")
        bag.files[rel] = FileInfo(hasher.hexdigest(), size)
        if buffer is not None:
            data = b"".join(buffer)
            del buffer
            if len(data) > MAX_DOCUMENT_BYTES:
                raise refuse(
                    f"document of {len(data)} bytes is over the {MAX_DOCUMENT_BYTES}-byte cap"
                )
            if rel.endswith((".json", ".jsonl")):
                values_total += json_values(data)
                if values_total > MAX_JSON_VALUES:
                    raise refuse(
                        f"JSON documents in the bundle hold more than {MAX_JSON_VALUES} values "
                        "(refused before parsing)"
                    )
            bag.kept[rel] = data
    if bag is None:
        raise ArchiveError(f"{source}: the archive holds no members")
    return bag


def _ends_with_newline(head: list[bytes], buffer: list[bytes] | None) -> bool:
    for chunk in reversed(buffer if buffer else head):
        if chunk:
            return chunk.endswith(b"\n")
    return False


def _admit(
    rel: str,
    head: list[bytes],
    size: int,
    kept_before: int,
    refuse: Callable[[str], ArchiveError],
) -> list[bytes] | None:
    """The buffer a kept member's chunks go into (``head`` first), or None if not kept."""
    first = head[0] if len(head) == 1 else b"".join(head)
    if not _keep(rel, first, size):
        return None
    if size > MAX_DOCUMENT_BYTES:
        raise refuse(f"document of {size} bytes is over the {MAX_DOCUMENT_BYTES}-byte cap")
    if kept_before + size > MAX_KEPT_BYTES:
        raise refuse(f"documents in the bundle exceed {MAX_KEPT_BYTES} bytes in total")
    return [first] if first else []


def iter_directory(root: Path, *, source: str) -> Iterator[tuple[Member, Iterator[bytes]]]:
    """Members of an extracted bag directory, refusing links and special files.

    ``root`` is the bag directory itself, however it is spelled (``bag/``, ``bag/.``,
    ``.`` from inside it, ``data/..``); members are named ``<name>/<rel>`` after the
    directory's real name, the last component of its resolved path. A symbolic link as
    the bag root is refused, not followed: InputError.
    """
    try:
        top_stat = os.lstat(root)
    except OSError as exc:
        raise InputError(f"{source}: cannot read ({exc.strerror})") from exc
    if stat.S_ISLNK(top_stat.st_mode):
        raise InputError(
            f"{source}: a symbolic link as the bag directory (refused; name the directory itself)"
        )
    if not stat.S_ISDIR(top_stat.st_mode):
        raise InputError(f"{source}: not a directory")
    top = os.path.basename(os.path.realpath(root))
    if not top:
        raise InputError(f"{source}: the file system root cannot be a bag directory")
    # The archive's member and name-byte caps hold for a directory too: the bag's names
    # are kept (BagContents.files), so their count and bytes are what memory grows with.
    ledger = names.MemberNames()

    def counted(name: str, rel: str) -> str:
        problem = ledger.tally(len(name.encode("utf-8", "surrogateescape")))
        if problem is not None:
            raise ArchiveError(f"{source}: {rel}: {problem}")
        return name

    yield Member(counted(top, "."), True, 0, 0, 0o755), iter(())

    def walk(directory: Path, prefix: str) -> Iterator[tuple[Member, Iterator[bytes]]]:
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            rel = f"{prefix}{entry.name}"
            counted(f"{top}/{rel}", rel)
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                raise ArchiveError(f"{source}: {rel}: symbolic link in the bag directory (refused)")
            if stat.S_ISDIR(st.st_mode):
                yield Member(f"{top}/{rel}", True, 0, 0, 0o755), iter(())
                yield from walk(Path(entry.path), rel + "/")
            elif stat.S_ISREG(st.st_mode):
                yield (
                    Member(f"{top}/{rel}", False, st.st_size, 0, 0o644),
                    _file_chunks(Path(entry.path)),
                )
            else:
                raise ArchiveError(f"{source}: {rel}: not a regular file or directory (refused)")

    yield from walk(root, "")


def _file_chunks(path: Path) -> Iterator[bytes]:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        while chunk := fh.read(CHUNK):
            yield chunk


def open_members(
    location: str,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    stream: BinaryIO | None = None,
    tap: ArchiveTap | None = None,
) -> Iterator[tuple[Member, Iterator[bytes]]]:
    """Members of an archive file, an already-open archive stream, or a bag directory.

    ``tap``, for an archive, is attached between the file (or stream) and the reader:
    once the members are read to their end it has hashed and counted the whole file
    (whatever the reader left is drained). A bag directory leaves it unattached.
    """
    if stream is not None:
        yield from _archive_members(stream, location, max_bytes, tap)
        return
    path = Path(location)
    if path.is_dir():
        yield from iter_directory(path, source=location)
        return
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below, after the generator is drained
    except OSError as exc:
        raise InputError(f"{location}: cannot open ({exc.strerror})") from exc
    with fh:
        yield from _archive_members(fh, location, max_bytes, tap)


def _archive_members(
    raw: BinaryIO, location: str, max_bytes: int, tap: ArchiveTap | None
) -> Iterator[tuple[Member, Iterator[bytes]]]:
    if tap is None:
        yield from iter_archive(raw, source=location, max_bytes=max_bytes)
        return
    try:
        yield from iter_archive(tap.attach(raw), source=location, max_bytes=max_bytes)
    except ArchiveError:
        # Unreadable or unsafe: the file is still hashed whole, while it is open, so the
        # record names the archive that was refused.
        tap.drain_if_readable()
        raise
    try:
        tap.drain()  # the reader stops at the verified end; nothing should be left
    except OSError as exc:
        raise ArchiveError(f"{location}: cannot read archive: {exc}") from exc


def is_kept(rel: str, first_chunk: bytes, size: int) -> bool:
    """Whether the reader keeps the bytes of the file at ``rel`` (a document) in memory."""
    return _keep(rel, first_chunk, size)


def document_problem(
    rel: str, data: bytes, kept_before: int, *, values_before: int = 0
) -> str | None:
    """Why the reader would refuse a kept document, or None; the exporter asks the same.

    ``kept_before`` is the bytes of documents already kept in the bag, ``values_before``
    the sum of ``json_values`` over the JSON documents (``.json``, ``.jsonl``) kept
    before this one, both in member order.
    """
    values = json_values(data) if is_json(rel) else 0
    return sized_document_problem(
        len(data), values, kept_before=kept_before, values_before=values_before
    )


def is_json(rel: str) -> bool:
    """Whether the reader counts the values of the kept document at ``rel``."""
    return rel.endswith((".json", ".jsonl"))


def sized_document_problem(
    size: int, values: int, *, kept_before: int, values_before: int
) -> str | None:
    """``document_problem`` from a kept document's size and ``json_values`` (0 for a
    document that is not JSON), for a caller that knows them without holding the bytes."""
    if size > MAX_DOCUMENT_BYTES:
        return f"document of {size} bytes is over the {MAX_DOCUMENT_BYTES}-byte cap"
    if kept_before + size > MAX_KEPT_BYTES:
        return f"documents in the bundle exceed {MAX_KEPT_BYTES} bytes in total"
    if values_before + values > MAX_JSON_VALUES:
        return f"JSON documents in the bundle hold more than {MAX_JSON_VALUES} values"
    return None
