"""SIGINT and SIGTERM during a fixity run (SPEC 13, 13.1): whenever the signal comes, the
record holds exactly the checks the ledger and the summary count, and the footer's
chain digest is the SHA-256 of the lines before it.

By class: each signal, delivered at every point of the writing of a batch (in the
process, deterministically), and through the CLI at several moments of a run with one
checker and with a helper process, repeated to catch a race."""

from __future__ import annotations

import collections
import contextlib
import hashlib
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import CLI

from bundler.cli.app import Terminated
from bundler.fixity import FixityConfig, run_fixity
from bundler.fixity.ledger import Ledger
from bundler.fixity.record import RecordWriter

SIGNALS = [(signal.SIGINT, "SIGINT", 130), (signal.SIGTERM, "SIGTERM", 143)]
# The command line takes a hang-up as a request to end, as SIGTERM (SPEC 13.1's summary
# names SIGINT or SIGTERM).
CLI_SIGNALS = [*SIGNALS, (signal.SIGHUP, "SIGTERM", 143)]


def _archive(root: Path, good: Path, n: int) -> Path:
    root.mkdir(parents=True)
    for i in range(n):
        shutil.copyfile(good, root / f"b{i:03d}.tar.zst")
    return root


def _ledger_events(ledger: Path, run_id: str) -> list[tuple[str, str]]:
    with contextlib.closing(sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)) as conn:
        rows = conn.execute("SELECT key, outcome FROM events WHERE run_id = ?", (run_id,))
        return sorted((str(k), str(o)) for k, o in rows)


def _assert_evidence_agrees(record: Path, ledger: Path, summary: dict[str, Any]) -> None:
    """The record, the ledger and the summary hold the same checks, and the record's
    digests are what its bytes say."""
    data = record.read_bytes()
    assert "sha256:" + hashlib.sha256(data).hexdigest() == summary["record_sha256"]
    lines = data.splitlines(keepends=True)
    header, checks, footer = orjson.loads(lines[0]), lines[1:-1], orjson.loads(lines[-1])
    assert header["run_id"] == footer["run_id"] == summary["run_id"]
    chain = "sha256:" + hashlib.sha256(b"".join(lines[:-1])).hexdigest()
    assert footer["preceding_sha256"] == chain == summary["record_chain_sha256"]
    in_record = sorted((c["key"], c["outcome"]) for c in map(orjson.loads, checks))
    assert in_record == _ledger_events(ledger, summary["run_id"])
    counted = dict.fromkeys(("pass", "fail", "missing", "error"), 0)
    counted.update(collections.Counter(outcome for _, outcome in in_record))
    assert footer["counts"] == summary["counts"] == counted
    assert footer.get("interrupted") == summary["interrupted"]


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM as the CLI handles it (raising Terminated), for a run in this process."""

    def handler(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# Where, in the writing of one batch, the signal is sent: the points between which an
# interrupt used to split the ledger, the record and the counts.
def _patch_points(monkeypatch: pytest.MonkeyPatch, point: str, after: int, signum: int) -> None:
    calls = {"n": 0}

    def fire() -> None:
        calls["n"] += 1
        if calls["n"] == after:
            os.kill(os.getpid(), signum)

    def wrap(cls: type, name: str, before: bool) -> None:
        original: Callable[..., Any] = getattr(cls, name)

        def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
            if before:
                fire()
            result = original(self, *args, **kwargs)
            if not before:
                fire()
            return result

        monkeypatch.setattr(cls, name, patched)

    if point == "before-ledger":
        wrap(Ledger, "record", True)
    elif point == "after-ledger-commit":
        wrap(Ledger, "record", False)
    elif point == "before-record-line":
        wrap(RecordWriter, "write", True)
    elif point == "after-record-line":
        wrap(RecordWriter, "write", False)
    else:
        raise AssertionError(point)


POINTS = ["before-ledger", "after-ledger-commit", "before-record-line", "after-record-line"]


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize(("signum", "name", "code"), SIGNALS)
@pytest.mark.parametrize("after", [1, 2, 5])
def test_a_signal_at_any_point_of_writing_a_batch_keeps_the_evidence_whole(
    tmp_path: Path,
    bundles: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    point: str,
    signum: int,
    name: str,
    code: int,
    after: int,
) -> None:
    root = _archive(tmp_path / "a", bundles["rpt-clean/alice"], 8)
    ledger, record = tmp_path / "l.sqlite", tmp_path / "r.jsonl"
    _patch_points(monkeypatch, point, after, signum)
    config = FixityConfig(source=str(root), ledger=ledger, workers=1, record=record)
    with _sigterm_raises():
        summary = run_fixity(config).to_json()
    # The header is the first record line: a signal there comes before any check.
    assert summary["interrupted"] == name and summary["exit_code"] == code
    assert 0 < summary["checked"] < 8 or point.endswith("record-line")
    _assert_evidence_agrees(record, ledger, summary)
    # The signal handlers are the ones there before the run.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _events(ledger: Path) -> int:
    try:
        with contextlib.closing(sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)) as conn:
            return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])
    except sqlite3.Error:
        return 0


@pytest.fixture(scope="module")
def big(bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _archive(tmp_path_factory.mktemp("big") / "a", bundles["rpt-clean/alice"], 160)


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize(("signum", "name", "code"), CLI_SIGNALS)
def test_the_cli_interrupted_at_many_moments_keeps_the_evidence_whole(
    tmp_path: Path, big: Path, workers: str, signum: int, name: str, code: int
) -> None:
    # The moments: after the first events, then further in, each with a jitter, so the
    # signal lands in a batch's writing as often as between batches.
    for attempt, (events, jitter) in enumerate([(1, 0.0), (3, 0.013), (8, 0.031), (20, 0.007)]):
        ledger, record = tmp_path / f"l{attempt}.sqlite", tmp_path / f"r{attempt}.jsonl"
        proc = subprocess.Popen(
            [
                *CLI,
                "fixity",
                str(big),
                "--ledger",
                str(ledger),
                "--workers",
                workers,
                "--record",
                str(record),
                "--json",
                "-q",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        while proc.poll() is None and _events(ledger) < events and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(jitter)
        assert proc.poll() is None, "the run ended before it could be stopped"
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == code, err
        assert b"Traceback" not in err
        summary = orjson.loads(out)
        assert summary["interrupted"] == name and summary["exit_code"] == code
        assert summary["checked"] < 160
        _assert_evidence_agrees(record, ledger, summary)


def _block_answered() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))


@pytest.mark.parametrize(("signum", "name", "code"), CLI_SIGNALS)
def test_the_cli_started_with_its_signals_blocked_still_answers_them(
    tmp_path: Path, big: Path, signum: int, name: str, code: int
) -> None:
    # A runner may pass a mask with these signals blocked; a handler for a blocked signal
    # never runs, so the run would go on to exit 0 as though nothing had been asked.
    ledger, record = tmp_path / "l.sqlite", tmp_path / "r.jsonl"
    proc = subprocess.Popen(
        [*CLI, "fixity", str(big), "--ledger", str(ledger), "--record", str(record), "--json", "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_block_answered,
    )
    deadline = time.monotonic() + 60
    while proc.poll() is None and _events(ledger) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, "the run ended before it could be stopped"
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert orjson.loads(out)["interrupted"] == name
