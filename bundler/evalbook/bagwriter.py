"""Writing a bag archive, shared by both exporters (SPEC sections 4, 5 and 7).

``BagWriter`` streams members into a deterministic tar, refusing any name or document
the bundle's reader would refuse, and keeps the payload manifest, Payload-Oxum and the
progress counts; ``write_bag_archive`` compresses the tar into one zstd frame in a
temporary file, fsyncs it and links it into place, so nothing is left at the target name
unless the archive is complete; ``write_tag_files`` writes bagit.txt, bag-info.txt, the
manifests and the bundle head. The output path and export-time rules both exporters
apply (``resolve_output``, ``check_not_before``) live here too. What goes into a bundle
is decided by each exporter, not here.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import zstandard

from bundler.archive import bag, bag_reader, names
from bundler.archive.prefetch import ThreadedSink
from bundler.core import canonical
from bundler.core.digests import bytes_digest
from bundler.core.errors import OutputError, ParameterError, StoreError
from bundler.trust.head import (
    HEAD_FILE,
    HEAD_SIG_FILE,
    bag_info_bytes,
    bundle_head,
)

DEFAULT_LEVEL = 3
# libzstd's output is the same for any number of worker threads from one up (not for
# none); two let one job compress while the next fills, so the bursty producer (case
# parsing, then payloads) rarely waits.
ZSTD_WORKERS = 2
# The archive is flushed to disk every this many bytes as it is written, so the fsync
# before it is linked into place waits for the last few MiB, not the whole archive.
SYNC_EVERY = 16 * 1024 * 1024
TAR_WRITE_BYTES = 1024 * 1024
T = TypeVar("T")


@dataclass(frozen=True)
class Progress:
    """What the exporter has done so far; passed to the progress callback.

    ``bytes`` counts the content of the files written into the bag (tar headers and
    compression aside). ``total_bytes`` is what ``bytes`` will reach: None until the
    export has decided what goes in, then the bytes written plus the sizes of the files
    still to come, as their documents and references give them (the small files made at
    the end, bundle.json and the tag files, are counted as they are written).
    """

    files: int
    bytes: int
    cases: int
    total_bytes: int | None = None


def format_timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_not_before(moment: datetime, earliest: str, what: str, source: str) -> None:
    """Refuse an export time before ``earliest`` (RFC 3339, from the report or the run).

    Raises ParameterError (exit 2) naming ``source`` (the option or variable that gave the
    time): a bundle cannot be exported before what it holds was issued (SPEC section 7).
    """
    try:
        bound = datetime.fromisoformat(earliest.replace("Z", "+00:00").replace("z", "+00:00"))
        bound = bound.astimezone(UTC).replace(microsecond=0)
    except (ValueError, OverflowError):
        return  # schema-checked already; a time we cannot read is nothing to compare with
    if moment < bound:
        # A bad value of one parameter (exit 2), named as the library or the command
        # line spells it.
        raise ParameterError(
            source,
            f"before {what} {earliest}; an export cannot predate what it exports",
            value=format_timestamp(moment),
        )


def resolve_output(out: Path | None, default_name: str) -> Path:
    """The archive path; refuse an existing file, a symlink, or a missing parent.

    As ``cp`` reads a destination: no ``out`` is ``default_name`` in the current
    directory, an ``out`` that is an existing directory gets ``default_name`` inside it,
    and any other ``out`` is the file itself. Raises OutputError (exit 3) for a path that
    exists or is a symbolic link, or whose directory does not exist.
    """
    if out is None:
        path = Path.cwd() / default_name
    elif out.is_dir():
        path = out / default_name
    else:
        path = out
    if path.is_symlink():
        raise OutputError(f"{path}: is a symlink; refusing to write through it")
    if path.exists():
        raise OutputError(f"{path}: already exists; refusing to overwrite")
    if not path.parent.is_dir():
        raise OutputError(f"{path.parent}: output directory does not exist")
    return path


class BagAdmission:
    """What the bundle's reader admits, member by member: the one ledger the exporter
    writes under and the importer asks before it writes anything to a store (SPEC 16),
    so an import never makes a report its own export refuses. Member names go through
    the reader's ``names.MemberNames`` (name rules, collisions, counts); a document the
    reader keeps through ``bag_reader.document_problem`` (its cap, and the bag's totals
    of kept bytes and JSON values, in member order). Raises StoreError naming the
    member and the rule."""

    def __init__(self, top: str) -> None:
        self.top = top
        # The reader's own ledger of names (names.MemberNames): the exporter refuses
        # exactly the names, counts and name bytes the reader refuses, in its words.
        self._names = names.MemberNames()
        self._kept_bytes = 0
        self._kept_values = 0
        self.claim(top, is_dir=True)

    def claim(self, name: str, *, is_dir: bool = False) -> None:
        """Refuse a member name the reader would refuse (names.py), before writing it."""
        refused = self._names.claim(name, is_dir=is_dir)
        if refused is not None:
            raise StoreError(
                f"{name[len(self.top) + 1 :] or name}: the bundle cannot hold this name "
                f"({refused[0]}); the verifier would reject it, export refused"
            )

    def directories(self, relpath: str) -> list[str]:
        """Claim the directories of ``relpath`` not claimed yet; returns them, shallowest
        first, for the writer to write."""
        parent = relpath.rpartition("/")[0]
        if not parent or self._names.has_directory(f"{self.top}/{parent}"):
            return []  # most files go into a directory already written
        out = []
        parts = relpath.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            directory = self.top + "/" + "/".join(parts[:i])
            if not self._names.has_directory(directory):
                self.claim(directory, is_dir=True)
                out.append(directory)
        return out

    def file(self, relpath: str, head: bytes, size: int, data: Callable[[], bytes]) -> None:
        """Admit the file at ``relpath`` (its directories first): ``head`` is its first
        bytes (``bag_reader.CHUNK`` of them decide whether the reader keeps it), and
        ``data`` gives its bytes when it does."""
        self.directories(relpath)
        self.claim(f"{self.top}/{relpath}")
        if bag_reader.is_kept(relpath, head, size):
            self.document(relpath, data())

    def document(self, relpath: str, data: bytes) -> None:
        """Refuse a document over the reader's caps, which the verifier would reject."""
        if not bag_reader.is_kept(relpath, data[: bag_reader.CHUNK], len(data)):
            return
        problem = bag_reader.document_problem(
            relpath, data, self._kept_bytes, values_before=self._kept_values
        )
        if problem is not None:
            raise StoreError(f"{relpath}: {problem}; the verifier would reject it, export refused")
        self._kept_bytes += len(data)
        if relpath.endswith((".json", ".jsonl")):
            self._kept_values += bag_reader.json_values(data)


class BagWriter:
    """Streams bag members into a tar; tracks directories, manifests and Payload-Oxum."""

    def __init__(self, tar: Any, top: str, progress: Callable[[Progress], None] | None) -> None:
        self._tar = tar
        self.top = top
        self.manifest: dict[str, str] = {}
        self.payload_bytes = 0
        self._progress = progress
        self._cases = 0
        self.content_bytes = 0
        self._planned: int | None = None  # bytes of planned files not yet written
        self._admission = BagAdmission(top)
        tar.add_dir(top)

    def _claim_name(self, name: str, *, is_dir: bool = False) -> None:
        self._admission.claim(name, is_dir=is_dir)

    def _ensure_dirs(self, relpath: str) -> None:
        for directory in self._admission.directories(relpath):
            self._tar.add_dir(directory)

    def _check_document(self, relpath: str, data: bytes) -> None:
        self._admission.document(relpath, data)

    def add(
        self,
        relpath: str,
        data: bytes,
        *,
        sha256_hex: str | None = None,
        planned: int | None = None,
    ) -> str:
        """Add a file at ``relpath`` (relative to the bag root); returns its sha256 hex.

        ``planned``: the size this file was announced with by ``plan``, now written.
        Raises StoreError for a name or a document the bundle's reader would refuse.
        """
        self._ensure_dirs(relpath)
        self._claim_name(f"{self.top}/{relpath}")
        self._check_document(relpath, data)
        self._tar.add_file(f"{self.top}/{relpath}", data)
        hex_digest = sha256_hex or hashlib.sha256(data).hexdigest()
        if relpath.startswith("data/"):
            self.manifest[relpath] = hex_digest
            self.payload_bytes += len(data)
        self.content_bytes += len(data)
        if planned is not None:
            self.unplan(planned)
        else:
            self._report()
        return hex_digest

    def add_stream(
        self,
        relpath: str,
        size: int,
        chunks: Iterable[bytes],
        *,
        sha256_hex: str,
        planned: int | None = None,
    ) -> None:
        """Add a payload file of ``size`` bytes fed in chunks (never held whole), whose
        SHA-256 must come out as ``sha256_hex``; StoreError otherwise (the export is then
        abandoned, so nothing is left at the target). For run files of any size (SPEC 16),
        which the reader only hashes."""
        self._ensure_dirs(relpath)
        self._claim_name(f"{self.top}/{relpath}")
        h = hashlib.sha256()

        def hashed() -> Iterator[bytes]:
            for chunk in chunks:
                h.update(chunk)
                yield chunk

        self._tar.add_file_chunks(f"{self.top}/{relpath}", size, hashed())
        if h.hexdigest() != sha256_hex:
            raise StoreError(f"{relpath}: changed while it was exported; export refused")
        self.manifest[relpath] = sha256_hex
        self.payload_bytes += size
        self.content_bytes += size
        if planned is not None:
            self.unplan(planned)
        else:
            self._report()

    def plan(self, size: int) -> None:
        """Announce ``size`` more bytes of files still to be written (for the total)."""
        self._planned = (self._planned or 0) + size
        self._report()

    def unplan(self, size: int) -> None:
        """``size`` announced bytes are written, or will not be (an item left out)."""
        if self._planned is not None:
            self._planned -= size
        self._report()

    def _report(self) -> None:
        if self._progress is None:
            return
        total = None if self._planned is None else self.content_bytes + max(0, self._planned)
        self._progress(Progress(len(self.manifest), self.content_bytes, self._cases, total))

    def count_cases(self, n: int) -> None:
        self._cases += n


def write_bag_archive(
    target: Path,
    *,
    top: str,
    level: int,
    mtime: int,
    fill: Callable[[BagWriter], T],
    progress: Callable[[Progress], None] | None = None,
    before_link: Callable[[T], None] | None = None,
) -> tuple[T, str, int]:
    """Write a bag archive at ``target`` atomically; return (fill's result, sha256, size).

    ``fill`` adds every member below the top directory, tag files included. The archive
    goes to a temporary file in the target's directory, is fsynced, checked by
    ``before_link`` (which may raise to abandon it) and linked into place: ``os.link``
    refuses an existing target, so nothing is overwritten, and an interrupted or failed
    export leaves nothing at the target name.
    """
    from bundler.archive.tarwriter import TarWriter
    from bundler.core.outputs import create_temp

    # 0666 less the umask, like any new file (SPEC 7); mkstemp would give 0600.
    fd, temp = create_temp(target)
    try:
        try:
            with os.fdopen(fd, "wb") as fh:
                # Compressed output is hashed and written in its own thread, while zstd's
                # workers compress and this thread reads and hashes the store's files.
                sink = ThreadedSink(fh, sync_every=SYNC_EVERY)
                try:
                    compressor = zstandard.ZstdCompressor(
                        level=level, write_checksum=True, threads=ZSTD_WORKERS
                    )
                    # ThreadedSink is the write-only file object zstandard needs; its stubs want IO[bytes].
                    with compressor.stream_writer(sink, closefd=False, write_size=1 << 20) as zout:  # type: ignore[arg-type]
                        # The tar reaches zstd in 1 MiB writes: 25,000 small files would
                        # otherwise cost three calls into the compressor each, every one
                        # giving up and retaking the GIL the reading thread waits for. The
                        # compressed bytes are the same however the input is cut. Detached
                        # at the end, not closed: closing it would close the compressor.
                        batched = io.BufferedWriter(zout, buffer_size=TAR_WRITE_BYTES)  # type: ignore[type-var]
                        tar = TarWriter(batched, mtime=mtime)
                        result = fill(BagWriter(tar, top, progress))
                        tar.close()
                        batched.detach()  # flushes what is left
                except BaseException:
                    sink.close(raise_error=False)
                    raise
                sink.close()
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            # Store reads raise StoreError; an OSError here is the archive's own file
            # (disk full, file size limit, I/O error).
            reason = exc.strerror or str(exc)
            raise OutputError(
                f"{target}: cannot write the archive ({reason}); nothing written"
            ) from exc
        if before_link is not None:
            before_link(result)
        try:
            os.link(temp, target)
        except FileExistsError as exc:
            raise OutputError(f"{target}: appeared during export; refusing to overwrite") from exc
        _fsync_dir(target.parent)
    finally:
        temp.unlink(missing_ok=True)
    return result, "sha256:" + sink.sha256.hexdigest(), sink.size


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_tag_files(
    writer: BagWriter,
    bundle: dict[str, Any],
    bundle_bytes: bytes,
    sign: Callable[[bytes], str] | None,
) -> None:
    """bagit.txt, bag-info.txt, the manifests and the bundle head, in that order."""
    bundle_digest = bytes_digest(bundle_bytes)
    tags: dict[str, str] = {}
    tags[bag.BAGIT] = writer.add(bag.BAGIT, bag.BAGIT_TXT)
    info = bag_info_bytes(bundle, bundle_digest, writer.payload_bytes, len(writer.manifest))
    tags[bag.BAG_INFO] = writer.add(bag.BAG_INFO, info)
    tags[bag.MANIFEST] = writer.add(bag.MANIFEST, bag.manifest(writer.manifest))
    head_bytes = canonical.dumps(bundle_head(bundle, bundle_digest))
    tags[HEAD_FILE] = writer.add(HEAD_FILE, head_bytes)
    if sign is not None:
        tags[HEAD_SIG_FILE] = writer.add(HEAD_SIG_FILE, sign(head_bytes).encode("ascii"))
    writer.add(bag.TAG_MANIFEST, bag.manifest(tags))
