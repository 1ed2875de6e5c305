"""Downloads that only trust bytes matching their ``sha256`` metadata.

``download_bundle`` streams an object (as parallel ranges pinned to one version when it
is large) into a temporary file, hashing it, and links the file into place only when
it matches, together with its signatures; ``stream_bundle`` writes the bytes to a
stream and gives the verdict after the last one; ``open_verified`` opens an object as a
``VerifiedStream`` that checks at EOF.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import errno
import hashlib
import io
import itertools
import os
from collections.abc import Callable, Generator, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import botocore.exceptions as bexc

from bundler.archive.prefetch import ThreadedSink
from bundler.core.digests import PREFIX as DIGEST_PREFIX
from bundler.core.errors import OutputError, StorageError, UsageError
from bundler.core.outputs import create_temp
from bundler.storage.config import (
    CHUNK,
    MiB,
    StorageConfig,
    _Conn,
    _connect,
    _is_precondition_failed,
)
from bundler.storage.layout import (
    META_BUNDLE_DIGEST,
    META_REPORT_DIGEST,
    META_REPORT_ID,
    S3Location,
)
from bundler.storage.objects import (
    _BodyReader,
    _check_sha256,
    _expected_sha256,
    _get,
    _head_precise,
    _open_reader,
    recorded_sha256,
)
from bundler.storage.signatures import _read_signatures

# Downloads above this size fetch ranges of it in parallel (as boto3's transfer
# manager does), pinned to one object version with If-Match.
DOWNLOAD_RANGE = 8 * MiB


class VerifiedStream(io.BufferedReader):
    """A buffered stream of an object that checks its SHA-256 at the end.

    Reading to EOF (or exactly ``size`` bytes) raises StorageError when the bytes do
    not hash to the ``sha256`` metadata; a consumer that stops earlier has verified
    nothing, so consumers must read to EOF (``drain()`` does that).
    """

    def __init__(
        self, raw: _BodyReader, *, url: str, size: int, metadata: Mapping[str, str]
    ) -> None:
        super().__init__(raw, buffer_size=1 * MiB)
        self._raw_reader = raw
        self.url = url
        self.size = size
        self.metadata = dict(metadata)
        # Only a well-formed digest is a recorded one: a malformed value records nothing.
        self.expected_sha256, self.unrecorded = recorded_sha256(self.metadata)

    @property
    def verified(self) -> bool:
        """True once every byte has been read and matched the metadata."""
        return (
            self._raw_reader.sha256 is not None and self._raw_reader.sha256 == self.expected_sha256
        )

    def drain(self) -> None:
        """Read what is left, so the check at EOF runs."""
        while self.read(CHUNK):
            pass


@contextlib.contextmanager
def open_verified(
    src: S3Location, *, config: StorageConfig, unrecorded_ok: bool = False
) -> Iterator[VerifiedStream]:
    """Open an object for streaming; the stream raises StorageError at EOF when its
    bytes do not hash to the ``sha256`` metadata.

    For ``verify s3://...`` and ``inspect s3://...``, which read without a temporary
    file: consumers must read to EOF and treat a StorageError from the last read as the
    whole object being untrustworthy. With ``unrecorded_ok``, an object without (valid)
    ``sha256`` metadata opens with ``expected_sha256`` None: nothing recorded to check,
    its bytes are judged by the verifier alone (SPEC 6); without it that is a
    StorageError (kind ``unverifiable``), as is an absent object.
    """
    conn = _connect(config)
    answer = _get(conn, src, "opening")
    if answer is None:
        raise conn.fail(src.url, "opening", detail="no such object", kind="not_found")
    try:
        expected: str | None = _expected_sha256(conn, src, answer)
    except StorageError as exc:
        if exc.kind != "unverifiable" or not unrecorded_ok:
            answer["Body"].close()
            raise
        expected = None  # copied in by another tool: judged by its bytes alone (SPEC 6)
    raw = _open_reader(conn, src, answer, expected)
    stream = VerifiedStream(
        raw,
        url=src.url,
        size=int(answer.get("ContentLength", 0)),
        metadata=answer.get("Metadata", {}),
    )
    with stream:
        yield stream


@dataclass(frozen=True)
class DownloadResult:
    """A download that matched its ``sha256`` metadata and is now at ``path``."""

    bucket: str
    key: str
    path: Path
    size: int
    sha256: str
    bundle_digest: str | None
    report_id: str | None
    report_digest: str | None
    signature_paths: tuple[Path, ...] = ()
    # Signatures beside the object left behind (too large, one of too many, altered):
    # (URL, reason). They never block the download of the bundle (SPEC 6).
    skipped_signatures: tuple[tuple[str, str], ...] = ()

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    @property
    def sidecar_path(self) -> Path | None:
        """Where the first signature (``<key>.sig``, or the first found) went."""
        return self.signature_paths[0] if self.signature_paths else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "path": str(self.path),
            "size": self.size,
            "sha256": self.sha256,
            "bundle_digest": self.bundle_digest,
            "report_id": self.report_id,
            "report_digest": self.report_digest,
            "sidecar_path": str(self.sidecar_path) if self.sidecar_path else None,
            "signature_paths": [str(path) for path in self.signature_paths],
            "skipped_signatures": [
                {"url": url, "reason": reason} for url, reason in self.skipped_signatures
            ],
        }


def _check_destination(dest: Path) -> None:
    if os.path.lexists(dest):
        raise OutputError(f"{dest}: already exists (never overwritten)")
    parent = dest.parent
    if not parent.is_dir():
        raise OutputError(f"{parent}: destination directory does not exist")


def _create_temp(dest: Path) -> tuple[int, Path]:
    """``create_temp``, the one maker of every output's temporary file, its refusal an
    OutputError."""
    try:
        return create_temp(dest)
    except OSError as exc:
        raise OutputError(
            f"{dest.parent}: cannot create a temporary file ({exc.strerror or exc})"
        ) from exc


def _write_temp(
    chunks: Generator[bytes, None, None], dest: Path, progress: Callable[[int], None] | None
) -> tuple[Path, str]:
    """Write ``chunks`` to a temporary file beside ``dest``, hashing them, and fsync it.

    Returns the file and its SHA-256; the file is removed when anything fails. Hashing
    and writing run in a second thread so that they overlap fetching the next chunk
    (hashlib and file writes release the GIL).
    """
    fd, tmp = _create_temp(dest)
    try:
        with contextlib.closing(chunks), os.fdopen(fd, "wb") as out:
            # One chunk in flight, as many bytes as one range: memory stays bounded.
            sink = ThreadedSink(out, depth=1)
            try:
                for chunk in chunks:
                    sink.write(chunk)
                    if progress is not None:
                        progress(len(chunk))
            except BaseException:
                sink.close(raise_error=False)
                raise
            sink.close()
            out.flush()
            os.fsync(out.fileno())
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise OutputError(f"{dest}: cannot write ({exc.strerror})") from exc
        raise
    return tmp, DIGEST_PREFIX + sink.sha256.hexdigest()


def _reader_chunks(reader: _BodyReader) -> Generator[bytes, None, None]:
    with reader:
        while chunk := reader.read_chunk(CHUNK):
            yield chunk


def _fetch_range(conn: _Conn, loc: S3Location, start: int, length: int, etag: str) -> bytes:
    """One byte range of the object version named by ``etag``."""
    try:
        answer: dict[str, Any] = dict(
            conn.client.get_object(
                Bucket=loc.bucket,
                Key=loc.key,
                Range=f"bytes={start}-{start + length - 1}",
                IfMatch=etag,
            )
        )
    except bexc.ClientError as exc:
        if _is_precondition_failed(exc):
            raise conn.fail(
                loc.url, "download", exc, detail="the object changed during the download"
            ) from exc
        raise conn.fail(loc.url, "download", exc) from exc
    except bexc.BotoCoreError as exc:
        raise conn.fail(loc.url, "download", exc) from exc
    if not str(answer.get("ContentRange", "")).startswith(f"bytes {start}-"):
        answer["Body"].close()
        raise conn.fail(
            loc.url, "download", detail=f"the server did not honour the range at byte {start}"
        )
    with _open_reader(conn, loc, answer, None) as reader:
        data = reader.readall()
    if len(data) != length:
        raise conn.fail(
            loc.url,
            "download",
            detail=f"the range at byte {start} returned {len(data)} bytes, not {length}",
        )
    return data


def _range_chunks(
    conn: _Conn, loc: S3Location, size: int, etag: str, part: int, concurrency: int
) -> Generator[bytes, None, None]:
    """The object in order, fetched as ranges ``concurrency`` at a time (bounded
    memory: at most ``concurrency + 1`` ranges are held)."""
    starts = iter(range(0, size, part))
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="s3-range") as pool:
        window: collections.deque[Future[bytes]] = collections.deque()
        try:
            for start in itertools.islice(starts, concurrency):
                window.append(
                    pool.submit(_fetch_range, conn, loc, start, min(part, size - start), etag)
                )
            while window:
                data = window.popleft().result()
                following = next(starts, None)
                if following is not None:
                    length = min(part, size - following)
                    window.append(pool.submit(_fetch_range, conn, loc, following, length, etag))
                yield data
        finally:
            for future in window:
                future.cancel()


def _place(tmp: Path, dest: Path) -> None:
    """Give the finished temporary file its name without replacing anything there."""
    try:
        os.link(tmp, dest)
    except FileExistsError as exc:
        raise OutputError(f"{dest}: appeared during the download (never overwritten)") from exc
    except OSError as exc:
        if exc.errno not in (
            errno.EPERM,
            errno.ENOTSUP,
            errno.EOPNOTSUPP,
            errno.EXDEV,
            errno.EMLINK,
        ):
            raise OutputError(f"{dest}: cannot create ({exc.strerror})") from exc
        # File systems without hard links: a plain rename, after a last check.
        if os.path.lexists(dest):
            raise OutputError(f"{dest}: appeared during the download (never overwritten)") from exc
        os.rename(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _object_chunks(
    conn: _Conn, src: S3Location, head: Mapping[str, Any], config: StorageConfig
) -> Generator[bytes, None, None]:
    """The object's bytes in order: parallel ranges of the version ``head`` saw for
    objects over 8 MiB, else one GET pinned to it."""
    size = int(head.get("ContentLength", 0))
    etag = str(head.get("ETag", ""))
    if size > DOWNLOAD_RANGE and etag:
        return _range_chunks(conn, src, size, etag, DOWNLOAD_RANGE, config.max_concurrency)
    answer = _get(conn, src, "download", if_match=etag or None)
    if answer is None:
        raise conn.fail(src.url, "download", detail="the object vanished")
    return _reader_chunks(_open_reader(conn, src, answer, None))


def _one_chunk(data: bytes) -> Generator[bytes, None, None]:
    yield data


def _download_result(
    src: S3Location, path: Path | None, head: Mapping[str, Any], sha256: str
) -> DownloadResult:
    meta = {k.lower(): v for k, v in head.get("Metadata", {}).items()}
    return DownloadResult(
        bucket=src.bucket,
        key=src.key,
        path=path if path is not None else Path("-"),
        size=int(head.get("ContentLength", 0)),
        sha256=sha256,
        bundle_digest=meta.get(META_BUNDLE_DIGEST),
        report_id=meta.get(META_REPORT_ID),
        report_digest=meta.get(META_REPORT_DIGEST),
    )


def download_bundle(
    src: S3Location,
    dest: Path,
    *,
    config: StorageConfig,
    progress: Callable[[int], None] | None = None,
    on_size: Callable[[int], None] | None = None,
    accept: Callable[[Path, str | None], None] | None = None,
) -> DownloadResult:
    """Download ``src`` to ``dest`` only if its bytes hash to its ``sha256`` metadata.

    The object streams into a temporary file beside ``dest`` while being hashed (in
    order; objects over 8 MiB arrive as parallel ranges of the version a first HEAD
    saw); the file is fsynced and linked into place only after the SHA-256 matches,
    so ``dest`` never holds unverified bytes and an existing file is never replaced.
    Every intact signature stored beside it (``<key>.sig``, ``<key>.sig.<hex>``) comes
    along as ``<dest>.sig``, ``<dest>.sig.<hex>``, checked the same way; all arrive or
    none. A signature too large, one of too many, or altered at rest is left behind and
    named in ``skipped_signatures``: it never blocks the bundle (SPEC 6).
    ``accept(temporary file, recorded sha256 or None)`` judges the bytes before they
    are placed (the caller verifies the bundle they hold and that the key names it); it
    raises to refuse them. An object without ``sha256`` metadata is downloaded only
    through ``accept``, which then judges it by its bytes alone.

    Raises OutputError (exit 3) when ``dest`` or a signature's destination exists or
    the parent directory is missing, AlteredAtRest (exit 1) when the bytes of the
    object or of a signature do not match what was recorded, StorageError (exit 5)
    when the object is absent, lacks ``sha256`` metadata, or cannot be fetched.
    """
    if not src.key or src.key.endswith("/"):
        raise UsageError(f"{src.url}: names a prefix, not an object")
    _check_destination(dest)
    conn = _connect(config)

    head = _head_precise(conn, src, "download")
    if head is None:
        raise conn.fail(src.url, "download", detail="no such object", kind="not_found")
    if on_size is not None:
        on_size(int(head.get("ContentLength", 0)))
    try:
        expected: str | None = _expected_sha256(conn, src, head)
    except StorageError as exc:
        if exc.kind != "unverifiable" or accept is None:
            raise
        expected = None  # copied in by another tool: judged by ``accept`` alone
    found = _read_signatures(conn, src)
    signatures = [sig for sig in found if sig.problem is None]
    skipped = tuple((sig.url, str(sig.problem)) for sig in found if sig.problem is not None)
    targets = [dest.with_name(dest.name + sig.suffix) for sig in signatures]
    for target in targets:
        _check_destination(target)
    placed: list[Path] = []
    temps: list[Path] = []
    try:
        tmp, actual = _write_temp(_object_chunks(conn, src, head, config), dest, progress)
        temps.append(tmp)
        if expected is not None:
            _check_sha256(conn, src.url, actual, expected)
        if accept is not None:
            accept(tmp, expected)
        for signature, target in zip(signatures, targets, strict=True):
            tmp, _ = _write_temp(_one_chunk(signature.data), target, None)
            temps.append(tmp)
        for tmp, target in zip(temps, [dest, *targets], strict=True):
            _place(tmp, target)
            placed.append(target)
    except BaseException:
        for tmp in temps:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        # Only what this call linked into place is removed: the set goes in together.
        for path in placed:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        raise
    _fsync_dir(dest.parent)
    return dataclasses.replace(
        _download_result(src, dest, head, expected or actual),
        signature_paths=tuple(targets),
        skipped_signatures=skipped,
    )


def stream_bundle(
    src: S3Location,
    out: BinaryIO,
    *,
    config: StorageConfig,
    progress: Callable[[int], None] | None = None,
    on_size: Callable[[int], None] | None = None,
) -> DownloadResult:
    """Write the object's bytes to ``out`` as they arrive (``download SRC -``).

    The bytes are out before the last one is hashed, so the result is the verdict:
    AlteredAtRest (exit 1) after the last write when they do not hash to the
    ``sha256`` metadata, StorageError when the object is absent, lacks metadata or
    cannot be fetched. Signatures are not written (fetch them with a file download
    or ``stored_signatures``).
    """
    if not src.key or src.key.endswith("/"):
        raise UsageError(f"{src.url}: names a prefix, not an object")
    conn = _connect(config)
    head = _head_precise(conn, src, "download")
    if head is None:
        raise conn.fail(src.url, "download", detail="no such object", kind="not_found")
    if on_size is not None:
        on_size(int(head.get("ContentLength", 0)))
    expected = _expected_sha256(conn, src, head)
    sha = hashlib.sha256()
    with contextlib.closing(_object_chunks(conn, src, head, config)) as chunks:
        for chunk in chunks:
            sha.update(chunk)
            out.write(chunk)
            if progress is not None:
                progress(len(chunk))
    out.flush()
    actual = DIGEST_PREFIX + sha.hexdigest()
    _check_sha256(conn, src.url, actual, expected)
    return _download_result(src, None, head, expected)
