"""The import's writer thread (``importers/batchwrite.py``): files added exist once
flushed, byte for byte; the first failure is raised, naming the file, and nothing after
it in its batch is written; ``close`` stops the thread without raising; and an import
whose staging write fails is refused with one line, leaving the store as it was."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from bundler.core._files import write_new
from bundler.importers import batchwrite
from bundler.importers.batchwrite import BATCH_FILES, BatchWriter


def test_every_file_added_exists_byte_for_byte_once_flushed(tmp_path: Path) -> None:
    writer = BatchWriter()
    sizes = [0, 1, 4095, 4096, 1 << 20, 5 << 20]  # one file over a whole batch of bytes
    want = {}
    for i in range(3 * BATCH_FILES + 7):
        data = bytes([i % 251]) * sizes[i % len(sizes)]
        path = tmp_path / f"f{i:05d}"
        writer.add(str(path), data)
        want[path] = data
    writer.flush()
    assert {p: p.read_bytes() for p in want} == want
    writer.close()


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_the_first_failure_is_raised_naming_the_file_and_the_rest_of_its_batch_unwritten(
    tmp_path: Path, where: str
) -> None:
    names = [tmp_path / f"f{i}" for i in range(10)]
    bad = {"first": 0, "middle": 5, "last": 9}[where]
    names[bad].write_bytes(b"there before")  # O_EXCL: never written over
    writer = BatchWriter()
    for p in names:
        writer.add(str(p), b"new")
    with pytest.raises(OSError) as caught:
        writer.flush()
    assert caught.value.errno == errno.EEXIST and caught.value.filename == str(names[bad])
    assert names[bad].read_bytes() == b"there before"
    assert [p.exists() for p in names[bad + 1 :]] == [False] * (9 - bad)
    with pytest.raises(OSError):  # and again, at the next add or flush
        writer.add(str(tmp_path / "later"), b"x")
        writer.flush()
    writer.close()


def test_close_stops_the_thread_and_writes_nothing_after_it(tmp_path: Path) -> None:
    gate = threading.Event()
    started = threading.Event()

    def slow(batch: list[tuple[str, bytes]]) -> int:
        started.set()
        gate.wait(5)
        return write_new(batch)

    writer = BatchWriter()
    original = batchwrite.write_new
    batchwrite.write_new = slow
    try:
        for i in range(BATCH_FILES * 3):  # one batch being written, two waiting
            writer.add(str(tmp_path / f"f{i:05d}"), b"x")
        assert started.wait(5)
        closer = threading.Thread(target=writer.close)
        closer.start()
        gate.set()
        closer.join(10)
        assert not closer.is_alive()
    finally:
        batchwrite.write_new = original
    written = len(list(tmp_path.iterdir()))
    assert written <= BATCH_FILES  # the batch under way at most; the waiting ones dropped
    assert not [t for t in threading.enumerate() if t.name == "import-writer"]
    writer.close()  # twice: no error


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EIO, errno.EDQUOT])
def test_an_import_whose_staging_write_fails_is_refused_and_the_store_untouched(
    tmp_path: Path, err: int
) -> None:
    script = tmp_path / "failing.py"
    script.write_text(
        "import errno, os, sys\n"
        "from bundler.importers import batchwrite\n"
        "real = batchwrite.write_new\n"
        "calls = []\n"
        "def failing(batch):\n"
        "    calls.append(1)\n"
        "    if len(calls) == 2:\n"
        f"        raise OSError({err}, os.strerror({err}), batch[0][0])\n"
        "    return real(batch)\n"
        "batchwrite.write_new = failing\n"
        "from bundler.cli import main\n"
        "sys.exit(main())\n"
    )
    run = _big_enough_log(tmp_path)
    store = tmp_path / "store"
    done = run_cli_script(
        script, "import-inspect", str(run), "--store", str(store), "--principal", "alice"
    )
    assert done.returncode == 3, done.stderr
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr.decode(), lines
    assert "while staging the import" in lines[0] and os.strerror(err) in lines[0], lines
    assert not store.exists(), sorted(p.name for p in store.iterdir())  # made by it, gone


def _big_enough_log(tmp_path: Path) -> Path:
    """An Inspect log of enough samples for the writer to send two batches."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import bench_import

    out = tmp_path / "run.eval"
    bench_import.build_log(out, samples=BATCH_FILES)
    return out


def run_cli_script(script: Path, *args: str) -> Any:
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, timeout=120,
        stdin=subprocess.DEVNULL,
    )
