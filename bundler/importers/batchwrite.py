"""New files written on a thread of their own, in batches, while the import reads on.

An import of a run near the contract's limits stages 60,000 small files (an example, an
output and an evidence payload per sample). The kernel spends 50 to 300 us creating each,
as long again under other disk work, and the reading thread spends about as long parsing
the samples: done one after the other, the two add up. Here the files go to a writer
thread in batches of at most ``BATCH_FILES`` files or ``BATCH_BYTES`` bytes, which
``bundler.core._files.write_new`` writes with the GIL released for the whole batch (a
thread taking the GIL back after each system call would wait on the reading thread each
time). At most ``QUEUED`` batches wait, so memory stays bounded.

What a caller must know: a file given to ``add`` exists once ``flush`` has returned, and
not before; the first failure (an ``OSError`` naming the file) is raised by the next
``add`` or ``flush``, and the files after it in its batch are not written. ``close``
waits for the thread and writes nothing more; it never raises.
"""

from __future__ import annotations

import queue
import threading

from bundler.core._files import write_new

BATCH_FILES = 512
BATCH_BYTES = 4 * 1024 * 1024
QUEUED = 4


class BatchWriter:
    __slots__ = ("_batch", "_bytes", "_error", "_queue", "_thread")

    def __init__(self) -> None:
        self._batch: list[tuple[str, bytes]] = []
        self._bytes = 0
        self._error: Exception | None = None
        self._queue: queue.Queue[list[tuple[str, bytes]] | None] = queue.Queue(QUEUED)
        self._thread: threading.Thread | None = None

    def add(self, path: str, data: bytes) -> None:
        """Write ``data`` to the new file ``path``, soon (never over a file)."""
        self._batch.append((path, data))
        self._bytes += len(data)
        if len(self._batch) >= BATCH_FILES or self._bytes >= BATCH_BYTES:
            self._send()

    def flush(self) -> None:
        """Return once every file added is written; raise the first failure."""
        if self._batch:
            self._send()
        if self._thread is not None:
            self._queue.join()
        self._raise()

    def close(self) -> None:
        """Stop the thread (what is queued is dropped); never raises."""
        self._batch = []
        thread, self._thread = self._thread, None
        if thread is None:
            return
        while True:  # make room for the stop, dropping what waits
            try:
                self._queue.get_nowait()
                self._queue.task_done()
            except queue.Empty:
                break
        self._queue.put(None)
        thread.join()

    def _send(self) -> None:
        self._raise()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="import-writer", daemon=True)
            self._thread.start()
        batch, self._batch, self._bytes = self._batch, [], 0
        self._queue.put(batch)

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        while True:
            batch = self._queue.get()
            try:
                if batch is None:
                    return
                if self._error is None:
                    write_new(batch)
            except Exception as exc:  # an OSError naming the file; anything else all the same
                self._error = exc
            finally:
                self._queue.task_done()
