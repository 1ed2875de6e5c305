"""Overlap file reads and hashing with the work of the calling thread.

An export reads and hashes tens of thousands of payloads, then compresses them. File
reads and ``hashlib`` release the GIL, so one background thread can load the next
payloads while the main thread writes the current one. Two pieces:

- :func:`prefetch` runs a loader over items in order in one background thread and yields
  the results in the same order, handed over in batches, holding at most ``budget``
  bytes of loaded results ahead of the consumer (plus the batch being filled, so a
  single large item still goes).
- :class:`ThreadedSink` is a write-only file object whose writes (and a SHA-256 of
  everything written) happen in a background thread, through a bounded queue.

Errors keep their order: an exception raised by the loader for item *n* reaches the
consumer when it asks for item *n*, after items 0..n-1, exactly as a plain loop would.

This pays only where the consumer itself often waits outside the GIL (the exporter
waits on zstd). Against a consumer that is busy in Python, as the verifier is, each
small GIL-free job then waits for the GIL and the whole runs slower: measured, and the
reason verify reads and hashes on one thread.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
import time
from collections.abc import Callable, Generator, Iterable
from typing import BinaryIO, TypeVar, cast

K = TypeVar("K")
R = TypeVar("R")

_END = object()


class _Budget:
    """Bytes loaded but not yet taken by the consumer; the loader waits above ``limit``."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._held = 0
        self._cond = threading.Condition()
        self.stopped = False

    def acquire(self, size: int) -> bool:
        """Wait until ``size`` more bytes fit (or nothing is held); False once stopped."""
        with self._cond:
            while self._held and self._held + size > self._limit and not self.stopped:
                self._cond.wait()
            self._held += size
            return not self.stopped

    def release(self, size: int) -> None:
        with self._cond:
            self._held -= size
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self.stopped = True
            self._cond.notify()


# The loader hands its results over in batches: one hand-over per file cost two
# thread wake-ups and a lock, which for 25,000 small files was more than reading them.
# A batch goes at this many bytes or items (or an eighth of the budget, if smaller), or
# once it has taken BATCH_SECONDS to load (from a slow source, such as a bucket, each
# item then goes as soon as it is loaded).
BATCH_BYTES = 1024 * 1024
BATCH_ITEMS = 256
BATCH_SECONDS = 0.002


def prefetch(
    items: Iterable[K],
    load: Callable[[K], tuple[R, int]],
    *,
    budget: int,
) -> Generator[tuple[K, R], None, None]:
    """Yield ``(item, result)`` for each item, in order, loading ahead in a thread.

    ``load(item)`` returns the result and its size in bytes (what it holds in memory).
    At most ``budget`` bytes of results wait for the consumer at a time (the batch it is
    taking included), beyond the batch the thread is filling, which holds less than an
    eighth of the budget and one item (so a single large item still goes). An exception
    from ``load`` is raised to the consumer in the item's turn. Closing the iterator
    early stops the thread and waits for it.
    """
    results: queue.SimpleQueue[tuple[list[tuple[K, R]], int] | tuple[object, BaseException]] = (
        queue.SimpleQueue()
    )
    held = _Budget(budget)
    batch_bytes = max(1, min(BATCH_BYTES, budget // 8))

    def run() -> None:
        batch: list[tuple[K, R]] = []
        size = 0
        started = 0.0

        def hand_over() -> bool:
            nonlocal batch, size
            if not batch:
                return True
            if not held.acquire(size):
                return False
            results.put((batch, size))
            batch, size = [], 0
            return True

        try:
            for item in items:
                if held.stopped:
                    return
                if not batch:
                    started = time.monotonic()  # the batch's time counts its first load
                result, item_size = load(item)
                batch.append((item, result))
                size += item_size
                if (
                    size >= batch_bytes
                    or len(batch) >= BATCH_ITEMS
                    or time.monotonic() - started >= BATCH_SECONDS
                ) and not hand_over():
                    return
        except BaseException as exc:  # handed to the consumer, in order
            if hand_over():
                results.put((_END, exc))
            return
        if hand_over():
            results.put((_END, StopIteration()))

    thread = threading.Thread(target=run, name="evalbook-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            entry = results.get()
            if entry[0] is _END:
                error = entry[1]
                assert isinstance(error, BaseException)
                if isinstance(error, StopIteration):
                    return
                raise error
            batch, size = cast("tuple[list[tuple[K, R]], int]", entry)
            yield from batch
            held.release(size)
    finally:
        held.stop()
        thread.join()


class ThreadedSink:
    """Write-only file object: writes go to ``fh`` in a background thread.

    ``sha256`` and ``size`` cover every byte written, once :meth:`close` returned. At
    most ``depth`` writes wait in the queue, so memory stays bounded when the disk is
    slower than the producer. A write error is raised by the next ``write`` or by
    ``close``; nothing after it is written.
    """

    def __init__(self, fh: BinaryIO, *, depth: int = 4, sync_every: int | None = None) -> None:
        self._fh = fh
        self.sha256 = hashlib.sha256()
        self.size = 0
        # With ``sync_every``, the thread also flushes and fdatasyncs after each that
        # many bytes, so the writer's final fsync finds little left to write: the disk
        # works while the producer does, not after it.
        self._sync_every = sync_every
        self._unsynced = 0
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="evalbook-sink", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            data = self._queue.get()
            if data is None:
                return
            if self._error is not None:
                continue  # drain, so that the producer never blocks on a dead sink
            try:
                self.sha256.update(data)
                self._fh.write(data)
                self.size += len(data)
                if self._sync_every is not None:
                    self._unsynced += len(data)
                    if self._unsynced >= self._sync_every:
                        self._fh.flush()
                        os.fdatasync(self._fh.fileno())
                        self._unsynced = 0
            except BaseException as exc:  # raised to the producer
                self._error = exc

    def write(self, data: bytes) -> int:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise ValueError("write to a closed sink")
        self._queue.put(bytes(data))
        return len(data)

    def close(self, *, raise_error: bool = True) -> None:
        """Wait for every queued write; raise the first write error, if any.

        ``raise_error=False`` is for a producer already failing with its own error.
        """
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._thread.join()
        if raise_error and self._error is not None:
            raise self._error
