"""The background-thread helpers: order, error order, bounded memory, clean shutdown."""

from __future__ import annotations

import hashlib
import io
import random
import threading
import time

import pytest

from bundler.archive.prefetch import ThreadedSink, prefetch


def _threads() -> set[str]:
    return {t.name for t in threading.enumerate()}


def _settle(name: str) -> bool:
    """True once no thread called ``name`` is alive (waits up to 5 s)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if name not in _threads():
            return True
        time.sleep(0.01)
    return False


def test_prefetch_yields_every_item_in_order() -> None:
    items = list(range(500))
    got = list(prefetch(items, lambda i: (i * i, 8), budget=64))
    assert got == [(i, i * i) for i in items]
    assert _settle("evalbook-prefetch")


def test_prefetch_raises_the_loaders_error_in_the_items_turn() -> None:
    def load(i: int) -> tuple[int, int]:
        if i == 7:
            raise ValueError("item 7 is bad")
        return i, 1

    seen = []
    with pytest.raises(ValueError, match="item 7 is bad"):
        for item, _ in prefetch(range(20), load, budget=1 << 20):
            seen.append(item)
    assert seen == list(range(7))
    assert _settle("evalbook-prefetch")


def test_prefetch_holds_at_most_the_budget_ahead() -> None:
    lock = threading.Lock()
    loaded = 0
    taken = 0
    most_ahead = 0

    def load(i: int) -> tuple[bytes, int]:
        nonlocal loaded, most_ahead
        with lock:
            loaded += 100
            most_ahead = max(most_ahead, loaded - taken)
        return bytes(100), 100

    for _ in prefetch(range(200), load, budget=1000):
        with lock:
            taken += 100
        time.sleep(0.0005)  # a slow consumer: the loader would run far ahead unbounded
    # The budget, the item just handed over (released before the consumer counts it)
    # and the one the thread has loaded and waits to queue.
    assert most_ahead <= 1000 + 2 * 100
    assert most_ahead >= 500  # it did read ahead


def test_prefetch_lets_one_item_larger_than_the_budget_through() -> None:
    got = list(prefetch([1, 2], lambda i: (i, 10_000), budget=10))
    assert got == [(1, 1), (2, 2)]


def test_closing_prefetch_early_stops_the_thread() -> None:
    started = threading.Event()

    def load(i: int) -> tuple[int, int]:
        started.set()
        return i, 1

    it = prefetch(range(10**9), load, budget=10)
    assert next(it) == (0, 0)
    assert started.is_set()
    it.close()
    assert _settle("evalbook-prefetch")


class _FailingFile(io.BytesIO):
    def __init__(self, fail_after: int) -> None:
        super().__init__()
        self._fail_after = fail_after

    def write(self, data: bytes) -> int:  # type: ignore[override]
        if self.tell() + len(data) > self._fail_after:
            raise OSError(28, "No space left on device")
        return super().write(data)


def test_threaded_sink_writes_and_hashes_everything() -> None:
    rng = random.Random(5)
    pieces = [rng.randbytes(rng.randint(0, 70_000)) for _ in range(300)]
    out = io.BytesIO()
    sink = ThreadedSink(out, depth=4)
    for piece in pieces:
        assert sink.write(piece) == len(piece)
    sink.close()
    whole = b"".join(pieces)
    assert out.getvalue() == whole
    assert sink.sha256.hexdigest() == hashlib.sha256(whole).hexdigest()
    assert sink.size == len(whole)
    assert _settle("evalbook-sink")


def test_threaded_sink_reports_a_write_error() -> None:
    sink = ThreadedSink(_FailingFile(10_000), depth=2)
    with pytest.raises(OSError, match="No space left"):
        for _ in range(1000):
            sink.write(bytes(1000))
        sink.close()
    with pytest.raises(OSError, match="No space left"):
        sink.close()
    assert _settle("evalbook-sink")


def test_threaded_sink_close_without_raising_for_a_failing_producer() -> None:
    sink = ThreadedSink(_FailingFile(0))
    sink.write(b"x")
    sink.close(raise_error=False)
    assert _settle("evalbook-sink")
    with pytest.raises(OSError, match="No space left"):
        sink.close()


def test_threaded_sink_refuses_writes_after_close() -> None:
    sink = ThreadedSink(io.BytesIO())
    sink.close()
    with pytest.raises(ValueError, match="closed"):
        sink.write(b"more")


def test_prefetch_streams_from_a_slow_source() -> None:
    # Batches go after 2 ms as well as at 1 MiB or 256 items: from a bucket, where each
    # item takes milliseconds, the consumer must not wait for a whole batch to fill.
    def load(i: int) -> tuple[int, int]:
        time.sleep(0.01)
        return i, 10

    start = time.monotonic()
    it = prefetch(range(300), load, budget=1 << 20)
    assert next(it) == (0, 0)
    assert time.monotonic() - start < 1.0  # not 300 (or 256) items of 10 ms each
    it.close()
    assert _settle("evalbook-prefetch")
