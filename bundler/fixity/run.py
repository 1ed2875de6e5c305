"""Running a fixity pass (SPEC section 13): select, check in batches (in this process,
local processes or a Dask cluster), write the ledger and the record, summarise.

Work goes out in batches of about a second each, with at most a few batches per worker
in flight; results come back here, and this process alone writes the ledger, one
transaction per batch, so a run killed at any point loses at most the batches in flight.
"""

from __future__ import annotations

import collections
import importlib
import os
import secrets
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import orjson

from bundler import storage
from bundler.core.errors import BundlerError, StorageError, UsageError
from bundler.core.version import TOOL_NAME, __version__
from bundler.fixity.check import Result, Settings, Task, check_batch, died, missing, now_iso
from bundler.fixity.ledger import Event, Ledger
from bundler.fixity.record import CHECK_SCHEMA, FOOTER_SCHEMA, RUN_SCHEMA, RecordWriter
from bundler.fixity.select import Candidate, Selection, list_source, select

SUMMARY_SCHEMA = "evalbook.fixity_summary.v1"
OUTCOMES = ("pass", "fail", "missing", "error")
TARGET_BATCH_SECONDS = 1.0
MAX_BATCH = 256
IN_FLIGHT_PER_WORKER = 2
GUIDED_SHARE = 8
# Pools started again in a row, with no batch finished between, before helpers are given up.
MAX_POOL_RESTARTS = 3
# Runs of one bundle alone on a Dask cluster that lost it, before it is an error.
DASK_TRIES = 3
SHARE_WINDOWS = (("30d", 30), ("90d", 90), ("365d", 365))


@dataclass(frozen=True)
class FixityConfig:
    """One run of ``fixity``, as the command line gives it."""

    source: str
    level: str = "full"
    ledger: Path = Path("evalbook-fixity.sqlite")
    selection: Selection = field(default_factory=Selection)
    workers: int = 1
    scheduler: str | None = None
    endpoint_url: str | None = None
    allowed_signers: Path | None = None
    record: Path | None = None
    upload_record: bool = False


@dataclass
class Progress:
    """What the progress line shows: checked of total, bytes, failures so far."""

    total: int = 0
    checked: int = 0
    bytes_read: int = 0
    not_passed: int = 0


@dataclass(frozen=True)
class Summary:
    """The result of a run, as stdout shows it (``to_json`` for --json)."""

    run_id: str
    source: str
    level: str
    selection: dict[str, object]
    started: str
    finished: str
    wall_seconds: float
    listed: int
    counts: dict[str, int]
    bytes_read: int
    problems: list[dict[str, str]]
    shares: dict[str, float]
    ledger: str
    record: str | None
    record_sha256: str | None
    record_url: str | None
    signature: str | None
    storage_errors: int

    @property
    def exit_code(self) -> int:
        """0 every check passed; 1 any failed or is missing; 5 storage kept some from
        being checked; 3 some could not be read for another reason."""
        if self.counts["fail"] or self.counts["missing"]:
            return 1
        if self.storage_errors:
            return 5
        return 3 if self.counts["error"] else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SUMMARY_SCHEMA,
            "tool": {"name": TOOL_NAME, "version": __version__},
            **{k: v for k, v in asdict(self).items() if k != "storage_errors"},
            "checked": sum(self.counts.values()),
        }


def normalise_source(source: str) -> str:
    """The source as the ledger keys it: an absolute local path, or the s3:// prefix
    without a trailing slash. UsageError for an s3:// URL that is no prefix."""
    if source.startswith("s3://"):
        loc = storage.parse_s3_url(source)
        return f"s3://{loc.bucket}/{loc.key.strip('/')}".rstrip("/")
    return os.path.abspath(source)


def run_fixity(
    config: FixityConfig,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    signer: Callable[[bytes], str] | None = None,
) -> Summary:
    """Check the bundles ``config`` selects; the ledger and the record hold every
    finished check. Raises InputError (exit 3) when the run cannot start (unreadable
    ledger or bad source), StorageError (exit 5) when the source cannot be listed."""
    source = normalise_source(config.source)
    settings = Settings(
        source=source,
        level=config.level,
        endpoint_url=config.endpoint_url,
        allowed_signers=_read_text(config.allowed_signers),
        allowed_signers_name=str(config.allowed_signers or "allowed_signers"),
    )
    ledger = Ledger(config.ledger, tool_version=__version__)
    started_clock = time.monotonic()
    started = now_iso()
    run_id = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ-") + secrets.token_hex(4)
    record = RecordWriter(config.record) if config.record or config.upload_record else None
    # Local helpers start now, so their interpreters are up (and warm) by the time the
    # listing is done and the first batch is ready.
    helpers = (
        _Helpers(settings, config.workers - 1)
        if config.workers > 1 and config.scheduler is None
        else None
    )
    try:
        listed = list(list_source(source, config.endpoint_url))
        chosen = select(
            listed, ledger.known(source), config.selection, config.level, datetime.now(UTC)
        )
        selection = config.selection.describe()
        ledger.start_run(run_id, source, config.level, orjson.dumps(selection).decode(), started)
        if record is not None:
            record.write(
                {
                    "schema": RUN_SCHEMA,
                    "run_id": run_id,
                    "tool": {"name": TOOL_NAME, "version": __version__},
                    "source": source,
                    "level": config.level,
                    "selection": selection,
                    "started": started,
                    "selected": len(chosen),
                }
            )
        progress = Progress(total=len(chosen))
        counts = dict.fromkeys(OUTCOMES, 0)
        problems: list[dict[str, str]] = []
        storage_errors = 0

        def take(results: list[Result]) -> None:
            nonlocal storage_errors
            ledger.record(source, run_id, [_event(r) for r in results])
            for r in results:
                counts[r.outcome] += 1
                progress.checked += 1
                progress.bytes_read += r.bytes_read
                storage_errors += r.storage_error
                if r.outcome != "pass":
                    progress.not_passed += 1
                    problems.append({"key": r.key, "outcome": r.outcome, "detail": r.detail})
                if record is not None:
                    record.write(_check_line(r))
            if on_progress is not None:
                on_progress(progress)

        gone = [c for c in chosen if c.gone]
        if gone:
            take([missing(_task(c), settings) for c in gone])
        present = [c for c in chosen if not c.gone]
        if present:
            execute(present, settings, config, take, helpers)
        finished = now_iso()
        now = datetime.now(UTC)
        shares = ledger.shares(
            source,
            config.level,
            [(name, _iso(now - timedelta(days=days))) for name, days in SHARE_WINDOWS],
        )
        bytes_read = progress.bytes_read
        record_bytes: bytes | None = None
        record_sha = None
        if record is not None:
            record_sha = record.sha256
            record.write(
                {
                    "schema": FOOTER_SCHEMA,
                    "run_id": run_id,
                    "counts": counts,
                    "bytes_read": bytes_read,
                    "finished": finished,
                    "preceding_sha256": record_sha,
                }
            )
            record_bytes = record.finish()
        ledger.finish_run(run_id, finished, orjson.dumps(counts).decode())
    except BaseException:
        if record is not None:
            record.abandon()
        raise
    finally:
        if helpers is not None:
            helpers.close()
        ledger.close()
    signature_path = None
    record_url = None
    if record is not None and (signer is not None or config.upload_record):
        data = record_bytes if record_bytes is not None else Path(str(config.record)).read_bytes()
        signature = signer(data) if signer is not None else None
        if signature is not None and config.record is not None:
            from bundler.fixity.record import write_signature

            signature_path = str(write_signature(config.record, signature))
        if config.upload_record:
            record_url = upload_record(source, run_id, data, signature, config.endpoint_url)
    return Summary(
        run_id=run_id,
        source=source,
        level=config.level,
        selection=selection,
        started=started,
        finished=finished,
        wall_seconds=round(time.monotonic() - started_clock, 3),
        listed=len(listed),
        counts=counts,
        bytes_read=bytes_read,
        problems=problems,
        shares=shares,
        ledger=str(config.ledger),
        record=None if config.record is None else str(config.record),
        record_sha256=record_sha,
        record_url=record_url,
        signature=signature_path,
        storage_errors=storage_errors,
    )


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _read_text(path: Path | None) -> str | None:
    if path is None:
        return None
    from bundler.trust import sshsig

    sshsig.load_allowed_signers(path)  # a malformed file is refused before any work
    return path.read_text(encoding="utf-8")


def _task(c: Candidate) -> Task:
    k = c.known
    return Task(
        key=c.key,
        size=c.size,
        recorded_size=None if k is None else k.size,
        recorded_sha256=None if k is None else k.sha256,
        recorded_bundle_digest=None if k is None else k.bundle_digest,
    )


def _event(r: Result) -> Event:
    return Event(
        key=r.key,
        time=r.time,
        level=r.level,
        outcome=r.outcome,
        detail=r.detail,
        size=r.size,
        sha256=r.sha256,
        bundle_digest=r.bundle_digest,
        report_id=r.report_id,
    )


def _check_line(r: Result) -> dict[str, Any]:
    return {
        "schema": CHECK_SCHEMA,
        "key": r.key,
        "time": r.time,
        "level": r.level,
        "outcome": r.outcome,
        "detail": r.detail,
        "size": r.size,
        "bytes_read": r.bytes_read,
        "sha256": r.sha256,
        "bundle_digest": r.bundle_digest,
        "report_id": r.report_id,
        "seconds": r.seconds,
    }


# ---------------------------------------------------------------------------- execution


class _Batches:
    """Cuts the work into batches of about ``TARGET_BATCH_SECONDS`` each, from the
    throughput measured so far (bytes per second and seconds per bundle).

    Towards the end batches shrink (to an eighth of the work left per worker, as
    guided scheduling does), so no worker is left with a long last batch while the
    others idle.
    """

    def __init__(self, candidates: list[Candidate], workers: int = 1) -> None:
        self._queue = [_task(c) for c in candidates]
        self._queue.reverse()
        self._left_bytes = sum(t.size for t in self._queue)
        self.workers = max(1, workers)
        self._seconds = 0.0
        self._bytes = 0
        self._count = 0

    def __bool__(self) -> bool:
        return bool(self._queue)

    def learn(self, results: list[Result]) -> None:
        for r in results:
            self._seconds += r.seconds
            self._bytes += r.bytes_read
            self._count += 1

    def next(self) -> list[Task]:
        batch: list[Task] = []
        estimate = 0.0
        per_item = self._seconds / self._count if self._count else None
        per_byte = self._seconds / self._bytes if self._bytes else None
        left = per_byte * self._left_bytes if per_byte else (per_item or 0.0) * len(self._queue)
        budget = min(TARGET_BATCH_SECONDS, left / (GUIDED_SHARE * self.workers))
        while self._queue and len(batch) < MAX_BATCH:
            if per_item is None and batch:
                break  # nothing measured yet: one bundle per batch to learn the rate
            task = self._queue[-1]
            cost = (per_byte * task.size) if per_byte else (per_item or 0.0)
            if batch and estimate + cost > budget:
                break
            batch.append(self._queue.pop())
            self._left_bytes -= task.size
            estimate += cost
        return batch


def execute(
    candidates: list[Candidate],
    settings: Settings,
    config: FixityConfig,
    take: Callable[[list[Result]], None],
    helpers: _Helpers | None = None,
) -> None:
    """Run ``check_batch`` over every candidate; ``take`` receives each batch's results
    in this process, as they arrive. ``helpers``: local helper processes, for
    ``config.workers`` above one (the caller closes them)."""
    batches = _Batches(candidates, config.workers)
    if config.scheduler is not None:
        _execute_dask(batches, settings, config.scheduler, take)
    elif helpers is None:
        while batches:
            results = check_batch(batches.next(), settings)
            batches.learn(results)
            take(results)
    else:
        _execute_local(batches, settings, helpers, take)


def _execute_local(
    batches: _Batches, settings: Settings, helpers: _Helpers, take: Callable[[list[Result]], None]
) -> None:
    """Checkers: this process and the helper processes.

    This process has already imported the verifier and opened a storage client (for
    the listing), so it checks batches itself between collecting the helpers' results
    rather than idling; a result waits at most one batch (about a second) before the
    ledger records it. A helper that dies (killed, out of memory, crashed by what it
    read) loses no check: see ``_Helpers``.
    """
    while batches or helpers.busy:
        while batches and helpers.has_room:
            helpers.submit(batches.next())
        if batches:
            results = check_batch(batches.next(), settings)
            batches.learn(results)
            take(results)
        else:
            helpers.last_submitted()
        for results in helpers.collect(block=not batches):
            batches.learn(results)
            take(results)


def _warm(settings: Settings) -> None:
    """A helper's initializer: import the verifier and open the storage client while
    the fixity process lists the source. Best effort: a failure here shows in the
    checks, where it is reported properly."""
    try:
        importlib.import_module("bundler.bundles.verify")
        if settings.is_s3:
            storage.make_client(storage.StorageConfig(endpoint_url=settings.endpoint_url))
    except Exception:  # reported by the checks themselves
        pass


class _Helpers:
    """Helper processes that check batches, at most IN_FLIGHT_PER_WORKER each.

    When a helper dies, every batch in flight is lost (the pool breaks); a new pool
    takes over and the lost bundles are checked again one at a time, alone in the
    pool, so a bundle that kills its checker again is known for certain and reported
    as an error rather than retried for ever.
    """

    def __init__(self, settings: Settings, count: int) -> None:
        self._settings = settings
        self._count = count
        self._warmups: list[Future[int]] = []
        self._pool = self._new_pool()
        self._pending: dict[Future[list[Result]], list[Task]] = {}
        self._suspects: list[Task] = []  # lost with a dead helper, to check alone
        self._suspect: Future[list[Result]] | None = None
        self._draining = False
        self._restarts = 0  # pools started again since a helper last finished a batch

    def _new_pool(self) -> ProcessPoolExecutor:
        # spawn: a helper opens its own storage connections, never a forked copy of ours.
        pool = ProcessPoolExecutor(
            max_workers=self._count,
            mp_context=get_context("spawn"),
            initializer=_warm,
            initargs=(self._settings,),
        )
        # The pool starts a process per waiting task; each first answers its pid, which
        # shows the helpers came up (a death after that is the work's, not the start's).
        self._warmups = [pool.submit(os.getpid) for _ in range(self._count)]
        self._draining = False
        return pool

    def _started(self) -> bool:
        """Whether a helper of the current pool came up (answered its first task)."""
        return any(f.done() and not f.cancelled() and f.exception() is None for f in self._warmups)

    def last_submitted(self) -> None:
        """Nothing more will be submitted (unless a helper dies): let the helpers exit
        as soon as their last batch is done, while this process finishes its own."""
        if not self._draining and not self._suspects:
            self._draining = True
            self._pool.shutdown(wait=False)

    @property
    def busy(self) -> bool:
        return bool(self._pending or self._suspects)

    @property
    def has_room(self) -> bool:
        return (
            self._count > 0
            and not self._suspects
            and self._suspect is None
            and len(self._pending) < self._count * IN_FLIGHT_PER_WORKER
        )

    def submit(self, batch: list[Task]) -> None:
        try:
            self._pending[self._pool.submit(check_batch, batch, self._settings)] = batch
        except BrokenProcessPool:  # a helper died since the last collect
            self._recover(batch)

    def collect(self, *, block: bool) -> list[list[Result]]:
        """The results of the batches finished so far (waiting for one when ``block``)."""
        if not self._count:  # no helpers any more: the rest is checked here
            left, self._suspects = self._suspects, []
            return [check_batch([task], self._settings) for task in left]
        if self._suspects and self._suspect is None:
            task = self._suspects.pop()
            try:
                self._suspect = self._pool.submit(check_batch, [task], self._settings)
            except BrokenProcessPool:
                self._recover([task])
                return []
            self._pending[self._suspect] = [task]
        if not self._pending:
            return []
        done, _ = wait(self._pending, timeout=None if block else 0, return_when=FIRST_COMPLETED)
        finished: list[list[Result]] = []
        lost: list[Task] = []
        broken = False
        for future in done:
            batch = self._pending.pop(future)
            try:
                finished.append(future.result())
                self._restarts = 0  # helpers work: only deaths in a row count
            except BrokenProcessPool:
                broken = True
                if future is self._suspect and self._started():
                    finished.append(
                        [died(batch[0], self._settings, "twice, the second time checking it alone")]
                    )
                else:
                    lost.extend(batch)
            if future is self._suspect:
                self._suspect = None
        if broken:
            self._recover(lost)
        return finished

    def _recover(self, lost: list[Task]) -> None:
        """After a helper died: every batch in flight is lost with it (a broken pool
        fails them all); queue their bundles to be checked alone, in a new pool."""
        for batch in self._pending.values():
            lost.extend(batch)
        self._pending.clear()
        self._suspect = None
        self._suspects.extend(lost)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._restarts += 1
        if self._restarts > MAX_POOL_RESTARTS:
            # Helpers die before finishing anything (they cannot start here): stop
            # starting them, and check what is left in this process.
            self._count = 0
            return
        self._pool = self._new_pool()

    def close(self) -> None:
        # Waits for the helpers to exit: none outlives the run.
        self._pool.shutdown(wait=True, cancel_futures=True)


def _execute_dask(
    batches: _Batches, settings: Settings, address: str, take: Callable[[list[Result]], None]
) -> None:
    try:
        # Optional (the cluster extra), and untyped: imported only for --scheduler.
        distributed: Any = importlib.import_module("distributed")
    except ImportError as exc:
        raise UsageError(
            "--scheduler needs the Dask distributed client: pip install 'evalbook-bundle[cluster]'"
        ) from exc
    try:
        client = distributed.Client(address, timeout=10, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        # The run cannot start (exit 3): nothing was checked.
        raise BundlerError(
            f"--scheduler {address}: cannot reach the Dask scheduler ({exc})"
        ) from exc
    try:
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        batches.workers = workers
        settings_future = client.scatter(settings, broadcast=True)
        batch_of: dict[str, list[Task]] = {}
        redo: list[Task] = []  # bundles of a batch the cluster gave up on, to run alone
        tries: collections.Counter[str] = collections.Counter()  # runs alone so far

        def submit() -> Any:
            batch = [redo.pop()] if redo else batches.next()
            future = client.submit(check_batch, batch, settings_future, pure=False)
            batch_of[future.key] = batch
            return future

        def more() -> bool:
            return bool(redo or batches)

        first = [submit() for _ in range(workers * IN_FLIGHT_PER_WORKER) if more()]
        pending = distributed.as_completed(first, loop=client.loop)
        in_flight = len(first)
        # The scheduler re-runs the batch of a worker that died on another worker; after
        # its allowed failures it gives up (KilledWorker), and then each of the batch's
        # bundles runs alone, so only the one that kills its workers ends as an error.
        while in_flight:
            while more() and in_flight < workers * IN_FLIGHT_PER_WORKER:
                pending.add(submit())
                in_flight += 1
            future = next(pending)
            in_flight -= 1
            batch = batch_of.pop(future.key)
            try:
                results = future.result()
            except Exception as exc:
                # The cluster gave up on the batch (KilledWorker), or lost it otherwise:
                # its bundles run again alone, each up to DASK_TRIES times in all.
                again = [t for t in batch if len(batch) > 1 or tries[t.key] < DASK_TRIES]
                for task in again:
                    tries[task.key] += 1
                redo.extend(again)
                if again:
                    continue
                results = [died(batch[0], settings, f"Dask: {type(exc).__name__}: {exc}")]
            batches.learn(results)
            take(results)
    finally:
        client.close()


def upload_record(
    source: str, run_id: str, data: bytes, signature: str | None, endpoint_url: str | None
) -> str:
    """Store the record under ``<prefix>/fixity/<run-id>.jsonl`` (and its signature
    beside it as ``.sig``), never over an existing object. Returns the record's URL."""
    import base64
    import hashlib

    if not source.startswith("s3://"):
        raise UsageError("--upload-record needs an s3://bucket/prefix SOURCE")
    loc = storage.parse_s3_url(source)
    prefix = loc.key.strip("/")
    key = f"{prefix}/fixity/{run_id}.jsonl" if prefix else f"fixity/{run_id}.jsonl"
    client = storage.make_client(storage.StorageConfig(endpoint_url=endpoint_url))
    objects = [(key, data)]
    if signature is not None:
        objects.append((key + ".sig", signature.encode("ascii")))
    for name, body in objects:
        digest = hashlib.sha256(body).digest()
        url = f"s3://{loc.bucket}/{name}"
        try:
            client.put_object(
                Bucket=loc.bucket,
                Key=name,
                Body=body,
                ContentType="application/x-ndjson",
                ChecksumAlgorithm="SHA256",
                ChecksumSHA256=base64.b64encode(digest).decode("ascii"),
                IfNoneMatch="*",
                Metadata={"sha256": "sha256:" + digest.hex()},
            )
        except Exception as exc:
            raise StorageError(f"{url}: storing the fixity record failed: {exc}") from exc
    return f"s3://{loc.bucket}/{key}"
