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
from typing import BinaryIO

from bundler.archive_reader import DEFAULT_MAX_BYTES, Member, iter_archive
from bundler.errors import ArchiveError, InputError
from bundler.safe_extract import SafeExtractor

# A JSON document or tag file over this is refused (SPEC 5: "a JSON document over its
# size cap"); kept bytes in total are capped so memory stays bounded.
MAX_DOCUMENT_BYTES = 48 * 1024 * 1024
MAX_KEPT_BYTES = 96 * 1024 * 1024
# Parsed JSON costs far more than its bytes (an empty object is about 64 bytes of
# Python): a document with more objects and arrays than this is refused before parsing.
MAX_JSON_CONTAINERS = 1_000_000
# Canonical evidence manifests start with their first key in JCS order.
EVIDENCE_MANIFEST_PREFIX = b'{"check_id":'
CHUNK = 1024 * 1024

# The writer ``read_bag`` extracts through (descriptor-based, see bundler.safe_extract).
Extractor = SafeExtractor


@dataclass(frozen=True)
class FileInfo:
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
    if rel.startswith("data/datasets/") and "/examples/" in rel:
        return False
    if rel.startswith("data/blobs/"):
        return first_chunk.startswith(EVIDENCE_MANIFEST_PREFIX)
    if rel.startswith("data/run/"):
        # eval-banana run files: JSON and text the verifier re-derives; logs stay hashed only.
        return size <= MAX_DOCUMENT_BYTES
    return True


def read_bag(
    members: Iterator[tuple[Member, Iterator[bytes]]],
    *,
    source: str,
    extract: Extractor | None = None,
    progress: Callable[[int], None] | None = None,
) -> BagContents:
    """Consume the member stream into BagContents; raises ArchiveError when unsafe."""
    bag: BagContents | None = None
    kept_total = 0
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
            if extract is not None:
                extract.directory(member.path)
            continue
        hasher = hashlib.sha256()
        buffer: list[bytes] | None = None
        out = extract.open(member.path) if extract is not None else None
        size = 0
        try:
            for chunk in chunks:
                if buffer is None and size == 0:
                    keep = _keep(rel, chunk, member.size)
                    if keep and kept_total + member.size > MAX_KEPT_BYTES:
                        raise ArchiveError(
                            f"{source}: {member.path}: documents in the bundle exceed "
                            f"{MAX_KEPT_BYTES} bytes in total"
                        )
                    if keep:
                        kept_total += member.size
                    if keep and member.size > MAX_DOCUMENT_BYTES:
                        raise ArchiveError(
                            f"{source}: {member.path}: document of {member.size} bytes is over the "
                            f"{MAX_DOCUMENT_BYTES}-byte cap"
                        )
                    buffer = [] if keep else None
                hasher.update(chunk)
                size += len(chunk)
                if buffer is not None:
                    buffer.append(chunk)
                if out is not None:
                    out.write(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(done)
        finally:
            if out is not None:
                out.close()
        if size == 0 and _keep(rel, b"", 0):
            buffer = []
        bag.files[rel] = FileInfo(hasher.hexdigest(), size)
        if buffer is not None:
            data = b"".join(buffer)
            del buffer
            if rel.endswith((".json", ".jsonl")):
                containers = data.count(b"{") + data.count(b"[")
                if containers > MAX_JSON_CONTAINERS:
                    raise ArchiveError(
                        f"{source}: {member.path}: JSON document with more than "
                        f"{MAX_JSON_CONTAINERS} objects and arrays (refused before parsing)"
                    )
            bag.kept[rel] = data
    if bag is None:
        raise ArchiveError(f"{source}: the archive holds no members")
    return bag


def iter_directory(root: Path, *, source: str) -> Iterator[tuple[Member, Iterator[bytes]]]:
    """Members of an extracted bag directory, refusing links and special files.

    ``root`` is the bag directory itself; members are named ``<root name>/<rel>``.
    """
    try:
        top_stat = os.lstat(root)
    except OSError as exc:
        raise InputError(f"{source}: cannot read ({exc.strerror})") from exc
    if not stat.S_ISDIR(top_stat.st_mode):
        raise InputError(f"{source}: not a directory")
    top = root.name
    yield Member(top, True, 0, 0, 0o755), iter(())

    def walk(directory: Path, prefix: str) -> Iterator[tuple[Member, Iterator[bytes]]]:
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            rel = f"{prefix}{entry.name}"
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
    location: str, *, max_bytes: int = DEFAULT_MAX_BYTES, stream: BinaryIO | None = None
) -> Iterator[tuple[Member, Iterator[bytes]]]:
    """Members of an archive file, an already-open archive stream, or a bag directory."""
    if stream is not None:
        yield from iter_archive(stream, source=location, max_bytes=max_bytes)
        return
    path = Path(location)
    if path.is_dir() and not path.is_symlink():
        yield from iter_directory(path, source=location)
        return
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below, after the generator is drained
    except OSError as exc:
        raise InputError(f"{location}: cannot open ({exc.strerror})") from exc
    with fh:
        yield from iter_archive(fh, source=location, max_bytes=max_bytes)


def is_kept(rel: str, first_chunk: bytes, size: int) -> bool:
    """Whether the reader keeps the bytes of the file at ``rel`` (a document) in memory."""
    return _keep(rel, first_chunk, size)


def document_problem(rel: str, data: bytes, kept_before: int) -> str | None:
    """Why the reader would refuse a kept document, or None; the exporter asks the same.

    ``kept_before`` is the bytes of documents already kept in the bag.
    """
    if len(data) > MAX_DOCUMENT_BYTES:
        return f"document of {len(data)} bytes is over the {MAX_DOCUMENT_BYTES}-byte cap"
    if kept_before + len(data) > MAX_KEPT_BYTES:
        return f"documents in the bundle exceed {MAX_KEPT_BYTES} bytes in total"
    if rel.endswith((".json", ".jsonl")):
        containers = data.count(b"{") + data.count(b"[")
        if containers > MAX_JSON_CONTAINERS:
            return f"JSON document with more than {MAX_JSON_CONTAINERS} objects and arrays"
    return None
