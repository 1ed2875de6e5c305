"""Lower bounds of any Python exporter and verifier, measured beside ``make bench``'s own.

Two programs that do the least work any exporter or verifier written in Python on this
stack must do, and check nothing. They answer "how close to its baseline can a Python
implementation get at all?", which the ratios of the real commands cannot answer alone.

``walk ARCHIVE``: read the archive in 1 MiB pieces, hash them (the archive SHA-256
verify reports), decompress them with python-zstandard, find each tar member from its
header's size field alone and hash its content with hashlib. No frame, header, name,
pax, manifest or claim check. Prints ``<files> <archive sha256>`` to stdout.

``pack STORE LIST OUT LEVEL``: for each file named in LIST (one path under STORE a line,
as the tar baseline reads them), read it, hash it (the bag manifests and bundle.json
need every payload's digest), and write a bare ustar header, the bytes and the padding
into one zstd stream at LEVEL with a content checksum (a tar that ``tar -t`` lists). No store parsing, no documents,
no checks. Prints the number of files to stdout.

Neither output is a bundle; they exist to be timed. ``bench/run.py`` times each as a
whole process, as it times the commands, and reports the ratio to the same baseline.
"""

from __future__ import annotations

import hashlib
import os
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import zstandard

BLOCK = 512
ZERO_BLOCK = bytes(BLOCK)
READ = 1024 * 1024


class _Ahead:
    """A producer thread feeding a bounded queue; ``get`` re-raises what it raised."""

    def __init__(self, produce: Callable[[Callable[[bytes], None]], None]) -> None:
        self._queue: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=8)
        self._thread = threading.Thread(target=self._run, args=(produce,), daemon=True)
        self._thread.start()

    def _run(self, produce: Callable[[Callable[[bytes], None]], None]) -> None:
        try:
            produce(self._queue.put)
            self._queue.put(None)
        except BaseException as exc:  # handed to the consumer, which raises it
            self._queue.put(exc)

    def __iter__(self) -> Iterator[bytes]:
        while (item := self._queue.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
        self._thread.join()


def walk(archive: Path) -> tuple[int, str]:
    """(regular files, archive SHA-256) of ``archive``, found with no checks at all.

    The archive is read, hashed and decompressed on a second thread, the members are
    found and hashed on this one: both hashlib and python-zstandard release the GIL, so
    this is the fastest arrangement of the same work on two cores.
    """
    tap = hashlib.sha256()

    def produce(put: Callable[[bytes], None]) -> None:
        decompressor = zstandard.ZstdDecompressor().decompressobj()
        with archive.open("rb") as fh:
            while raw := fh.read(READ):
                tap.update(raw)
                put(decompressor.decompress(raw))

    pending = bytearray()
    files = 0
    remaining = 0  # content bytes of the current member still to hash
    skip = 0  # padding bytes still to pass over
    hasher = hashlib.sha256()
    for chunk in _Ahead(produce):
        pending += chunk
        view = memoryview(pending)
        pos = 0
        end = len(pending)
        while True:
            if remaining:
                take = min(remaining, end - pos)
                hasher.update(view[pos : pos + take])
                pos += take
                remaining -= take
                if remaining:
                    break
                hasher.hexdigest()
            if skip:
                passed = min(skip, end - pos)
                pos += passed
                skip -= passed
                if skip:
                    break
            if pos + BLOCK > end:
                break
            header = bytes(view[pos : pos + BLOCK])
            pos += BLOCK
            if header == ZERO_BLOCK:
                continue
            size = int(header[124:135], 8)
            if header[156:157] in (b"0", b"\0"):
                files += 1
            hasher = hashlib.sha256()
            remaining = size
            skip = -size % BLOCK
        view.release()
        del pending[:pos]
    return files, tap.hexdigest()


def _header(name: str, size: int) -> bytes:
    """A plain ustar header for a regular file (names under 100 bytes, as here)."""
    header = bytearray(BLOCK)
    encoded = name.encode()
    header[: len(encoded)] = encoded
    header[100:148] = b"0000644\x000000000\x000000000\x00%011o\x0000000000000\x00" % size
    header[148:156] = b"        "
    header[156:157] = b"0"
    header[257:265] = b"ustar\x0000"
    header[148:156] = b"%06o\x00 " % sum(header)
    return bytes(header)


def pack(store: Path, names: list[str], out: Path, level: int) -> int:
    """Write ``names`` (paths under ``store``) as a bare tar into one zstd frame.

    The files are read and hashed on this thread and compressed on a second one, in
    1 MiB pieces, the fastest arrangement of the same work on two cores.
    """
    compressor = zstandard.ZstdCompressor(level=level, write_checksum=True)
    pieces: queue.Queue[bytes | None] = queue.Queue(maxsize=8)
    with out.open("wb") as raw:
        zout = compressor.stream_writer(raw, closefd=False)

        def compress() -> None:
            while (piece := pieces.get()) is not None:
                zout.write(piece)
            zout.flush(zstandard.FLUSH_FRAME)

        thread = threading.Thread(target=compress, daemon=True)
        thread.start()
        batch: list[bytes] = []
        batched = 0
        for name in names:
            fd = os.open(store / name, os.O_RDONLY)
            try:
                data = os.read(fd, os.fstat(fd).st_size + 1)
            finally:
                os.close(fd)
            hashlib.sha256(data).hexdigest()
            batch += (_header(name, len(data)), data, bytes(-len(data) % BLOCK))
            batched += len(data) + BLOCK
            if batched >= READ:
                pieces.put(b"".join(batch))
                batch, batched = [], 0
        batch.append(bytes(2 * BLOCK))
        pieces.put(b"".join(batch))
        pieces.put(None)
        thread.join()
    return len(names)


def main(argv: list[str]) -> None:
    if argv[:1] == ["walk"] and len(argv) == 2:
        files, digest = walk(Path(argv[1]))
        print(files, digest)
    elif argv[:1] == ["pack"] and len(argv) == 5:
        names = Path(argv[2]).read_text().split()
        print(pack(Path(argv[1]), names, Path(argv[3]), int(argv[4])))
    else:
        raise SystemExit("usage: bench_bare.py walk ARCHIVE | pack STORE LIST OUT LEVEL")


if __name__ == "__main__":
    main(sys.argv[1:])
