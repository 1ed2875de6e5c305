"""Where fixity checks run (SPEC sections 13 and 13.1): this process, local helper
processes, or a Dask distributed cluster; and nothing outliving the run.

Helpers are plain child processes (``python -m bundler.fixity.helper --fixity-helper``)
fed batches over a pipe, one length-prefixed pickle frame per batch, answering the same
way. No multiprocessing machinery is involved, so no resource tracker or semaphore
outlives anything. A helper cannot outlive the fixity process, even one killed by
SIGKILL whose cleanup never runs: on Linux the kernel kills it when its parent dies
(``PR_SET_PDEATHSIG``), and everywhere a watchdog thread ends it within half a second
of its parent changing, and it ends when its pipe reaches end of file.

Work goes out in batches of about a second each (``Batches``), with at most
``IN_FLIGHT_PER_WORKER`` batches per checker in flight; results come back to the fixity
process, which alone writes the ledger. A helper that dies loses no check: its batches
are checked again, each bundle alone, so a bundle that kills its checker twice is
reported as an error rather than retried for ever.
"""

from __future__ import annotations

import collections
import contextlib
import importlib
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import IO, Any

from bundler import storage
from bundler.core.errors import InputError, UsageError
from bundler.core.orphans import die_with_parent
from bundler.fixity.check import Result, Settings, Task, check_batch, died

TARGET_BATCH_SECONDS = 1.0
MAX_BATCH = 256
IN_FLIGHT_PER_WORKER = 2
GUIDED_SHARE = 8
# Helpers started again in a row, none having come up, before helpers are given up.
MAX_HELPER_RESTARTS = 3
# Runs of one bundle alone on a Dask cluster that lost it, before it is an error.
DASK_TRIES = 3
HELPER_FLAG = "--fixity-helper"
# How long close() waits for helpers to leave by themselves before killing them.
CLOSE_GRACE_SECONDS = 2.0
_FRAME = struct.Struct(">Q")


# ---------------------------------------------------------------------------- batches


class Batches:
    """Cuts the work into batches of about ``TARGET_BATCH_SECONDS`` each, from the
    throughput measured so far (bytes per second and seconds per bundle).

    Towards the end batches shrink (to an eighth of the work left per worker, as
    guided scheduling does), so no worker is left with a long last batch while the
    others idle.
    """

    def __init__(self, tasks: list[Task], workers: int = 1) -> None:
        self._queue = list(reversed(tasks))
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
    tasks: list[Task],
    settings: Settings,
    take: Callable[[list[Result]], None],
    *,
    workers: int = 1,
    scheduler: Any = None,
    helpers: HelperPool | None = None,
) -> None:
    """Run ``check_batch`` over every task; ``take`` receives each batch's results in
    this process, as they arrive. ``helpers``: local helper processes, for ``workers``
    above one (the caller closes them); ``scheduler``: a Dask client
    (``connect_scheduler``), closed here."""
    batches = Batches(tasks, workers)
    if scheduler is not None:
        _execute_dask(batches, settings, scheduler, take)
    elif helpers is None:
        while batches:
            results = check_batch(batches.next(), settings)
            batches.learn(results)
            take(results)
    else:
        _execute_local(batches, settings, helpers, take)


def _execute_local(
    batches: Batches, settings: Settings, helpers: HelperPool, take: Callable[[list[Result]], None]
) -> None:
    """Checkers: this process and the helper processes.

    This process has already imported the verifier and opened a storage client (for
    the listing), so it checks batches itself between collecting the helpers' results
    rather than idling; a result waits at most one batch (about a second) before the
    ledger records it.
    """
    while batches or helpers.busy:
        while batches and helpers.has_room:
            helpers.submit(batches.next())
        if batches:
            results = check_batch(batches.next(), settings)
            batches.learn(results)
            take(results)
        for results in helpers.collect(block=not batches):
            batches.learn(results)
            take(results)


# ---------------------------------------------------------------------------- helpers


def _send(stream: IO[bytes], value: object) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_FRAME.pack(len(data)) + data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    """The next frame's value; EOFError at the end of the stream (or a cut frame)."""
    head = stream.read(_FRAME.size)
    if len(head) < _FRAME.size:
        raise EOFError
    (size,) = _FRAME.unpack(head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)  # from a helper this process started, running this code


@dataclass
class _Helper:
    proc: subprocess.Popen[bytes]
    inflight: collections.deque[list[Task]] = field(default_factory=collections.deque)
    started: bool = False  # it answered "ready": a death after that is the work's
    alone: bool = False  # checking one bundle alone, after a helper died with it
    dead: bool = False


class HelperPool:
    """``count`` helper processes, at most ``IN_FLIGHT_PER_WORKER`` batches each."""

    def __init__(self, settings: Settings, count: int) -> None:
        self._settings = settings
        self._count = count
        self._events: queue.Queue[tuple[_Helper, Any]] = queue.Queue()
        self._helpers: list[_Helper] = []
        self._suspects: list[Task] = []  # lost with a dead helper, to check alone
        self._restarts = 0  # helpers started again since one last came up
        for _ in range(count):
            self._start()

    def _start(self) -> None:
        env = dict(os.environ)
        proc = subprocess.Popen(
            [sys.executable, "-m", "bundler.fixity.helper", HELPER_FLAG, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            env=env,
        )
        helper = _Helper(proc)
        assert proc.stdin is not None and proc.stdout is not None
        with contextlib.suppress(OSError):  # it died at once: its reader reports the end
            _send(proc.stdin, self._settings)
        threading.Thread(target=self._read, args=(helper,), daemon=True).start()
        self._helpers.append(helper)

    def _read(self, helper: _Helper) -> None:
        stream = helper.proc.stdout
        assert stream is not None
        while True:
            try:
                value = _receive(stream)
            except (EOFError, OSError, pickle.UnpicklingError):
                with contextlib.suppress(OSError):
                    stream.close()
                self._events.put((helper, None))
                return
            self._events.put((helper, value))

    @property
    def busy(self) -> bool:
        return bool(self._suspects) or any(h.inflight for h in self._helpers)

    def _free(self) -> list[_Helper]:
        return [
            h
            for h in self._helpers
            if not h.dead and not h.alone and len(h.inflight) < IN_FLIGHT_PER_WORKER
        ]

    @property
    def has_room(self) -> bool:
        return self._count > 0 and not self._suspects and bool(self._free())

    def submit(self, batch: list[Task]) -> None:
        helper = min(self._free(), key=lambda h: len(h.inflight))
        self._dispatch(helper, batch)

    def _dispatch(self, helper: _Helper, batch: list[Task], *, alone: bool = False) -> None:
        helper.inflight.append(batch)
        helper.alone = alone
        assert helper.proc.stdin is not None
        with contextlib.suppress(OSError):  # dead: its reader reports the end
            _send(helper.proc.stdin, batch)

    def collect(self, *, block: bool) -> list[list[Result]]:
        """The results of the batches finished so far (waiting for one when ``block``)."""
        if not self._count:  # no helpers any more: the rest is checked here
            left, self._suspects = self._suspects, []
            return [check_batch([task], self._settings) for task in left]
        finished: list[list[Result]] = []
        while True:
            self._assign_suspects()
            wait = block and not finished and self.busy and self._count > 0
            try:
                helper, value = self._events.get(block=wait)
            except queue.Empty:
                break
            if helper not in self._helpers:
                continue  # one stopped on purpose
            if value is None:
                finished += self._lost(helper)
            elif isinstance(value, str):  # "ready"
                helper.started = True
                self._restarts = 0
            else:
                helper.inflight.popleft()
                helper.alone = False
                finished.append(value)
        if not self._count:
            finished += self.collect(block=False)
        return finished

    def _assign_suspects(self) -> None:
        for helper in self._helpers:
            if not self._suspects:
                return
            if not helper.dead and not helper.inflight:
                self._dispatch(helper, [self._suspects.pop()], alone=True)

    def _lost(self, helper: _Helper) -> list[list[Result]]:
        """A helper died: every batch it had in flight is lost with it. A bundle it was
        checking alone is reported; the others are checked again, each alone."""
        self._stop(helper)
        self._helpers.remove(helper)
        results: list[list[Result]] = []
        lost = [task for batch in helper.inflight for task in batch]
        if helper.alone and helper.started and len(lost) == 1:
            why = "twice, the second time checking it alone"
            results.append([died(lost[0], self._settings, why)])
        else:
            self._suspects.extend(lost)
        if not helper.started:
            self._restarts += 1
        if self._restarts > MAX_HELPER_RESTARTS:
            # Helpers die before coming up (they cannot start here): stop starting
            # them, and check what is left in this process.
            self._suspects += [t for h in self._helpers for b in h.inflight for t in b]
            for other in list(self._helpers):
                other.inflight.clear()
                self._stop(other)
            self._helpers.clear()
            self._count = 0
        else:
            self._start()
        return results

    def _stop(self, helper: _Helper) -> None:
        helper.dead = True
        with contextlib.suppress(OSError):
            helper.proc.kill()
        helper.proc.wait()
        if helper.proc.stdin is not None:
            with contextlib.suppress(OSError):
                helper.proc.stdin.close()

    def close(self) -> None:
        """End every helper: end of input first, then SIGKILL for any still there
        after ``CLOSE_GRACE_SECONDS``; none outlives the run."""
        for helper in self._helpers:
            if helper.proc.stdin is not None:
                with contextlib.suppress(OSError):
                    helper.proc.stdin.close()
        deadline = time.monotonic() + CLOSE_GRACE_SECONDS
        for helper in self._helpers:
            try:
                helper.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._stop(helper)
        self._helpers.clear()

    def kill(self) -> None:
        """End every helper now (the run was interrupted)."""
        for helper in self._helpers:
            self._stop(helper)
        self._helpers.clear()


def _warm(settings: Settings) -> None:
    """Import the verifier and open the storage client while the fixity process lists
    the source. Best effort: a failure here shows in the checks, reported properly."""
    with contextlib.suppress(Exception):
        importlib.import_module("bundler.bundles.verify")
        if settings.is_s3:
            storage.make_client(settings.storage_config)


def helper_main(parent: int) -> None:
    """A helper: settings first, then batches until end of input."""
    die_with_parent(parent)
    # Ctrl-C reaches the whole process group; the fixity process decides what stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    try:
        settings = _receive(stdin)
        _warm(settings)
        _send(stdout, "ready")
        while True:
            batch = _receive(stdin)
            _send(stdout, check_batch(batch, settings))
    except (EOFError, BrokenPipeError):
        pass


# ---------------------------------------------------------------------------- dask


def check_on_worker(tasks: list[Task], settings: Settings) -> list[Result]:
    """``check_batch`` as a Dask task: an error says which worker raised it."""
    results = check_batch(tasks, settings)
    try:
        distributed: Any = importlib.import_module("distributed")
        address = str(distributed.get_worker().address)
    except (ImportError, ValueError):
        return results
    return [
        replace(r, detail=f"worker {address}: {r.detail}") if r.outcome == "error" else r
        for r in results
    ]


# How long reaching a Dask scheduler may take: a TCP connection first (a refused one
# fails at once), then the client's own handshake.
SCHEDULER_PROBE_SECONDS = 3.0
SCHEDULER_CONNECT_SECONDS = 10.0
# How long closing a client may wait for the scheduler to answer.
SCHEDULER_CLOSE_SECONDS = 2.0
# The handshake is first tried in a child process that is killed past this deadline:
# a listener that is no Dask scheduler can make the client wait forever (a silent
# server) or read a length prefix of exabytes (an HTTP server), neither of which its
# own timeout covers. The child's imports are inside the deadline.
SCHEDULER_HANDSHAKE_SECONDS = SCHEDULER_CONNECT_SECONDS + 20.0
_HANDSHAKE_PROBE = """
import sys
from distributed import Client
try:
    Client(sys.argv[1], timeout=float(sys.argv[2]), set_as_default=False).close(timeout=2)
except BaseException as exc:
    print(type(exc).__name__, str(exc).splitlines()[0][:200] if str(exc) else "", flush=True)
    raise SystemExit(1)
"""


def _handshake_problem(address: str) -> str | None:
    """Why a Dask client cannot complete its handshake with ``address``, asked of a child
    process that is killed past ``SCHEDULER_HANDSHAKE_SECONDS``; None when it can."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _HANDSHAKE_PROBE, address, str(SCHEDULER_CONNECT_SECONDS)],
            capture_output=True,
            timeout=SCHEDULER_HANDSHAKE_SECONDS,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"no Dask handshake within {SCHEDULER_HANDSHAKE_SECONDS:g} s"
    if done.returncode == 0:
        return None
    said = done.stdout.decode("utf-8", "replace").strip().splitlines()
    return (said[0] if said else f"the handshake failed (exit {done.returncode})")[:200]


def connect_scheduler(address: str) -> Any:
    """A Dask client connected to the scheduler at ``address``; the caller closes it
    (``close_scheduler``). Called before the run creates anything, so an unreachable
    scheduler leaves no ledger. Raises UsageError (exit 2) without the cluster extra,
    InputError (exit 3, the run cannot start) naming ``scheduler`` when the scheduler
    cannot be reached: a refused connection at once, a silent host after
    ``SCHEDULER_PROBE_SECONDS``, a listener that is no Dask scheduler after
    ``SCHEDULER_CONNECT_SECONDS``."""
    import socket
    from urllib.parse import urlsplit

    try:
        # Optional (the cluster extra), and untyped: imported only for --scheduler.
        distributed: Any = importlib.import_module("distributed")
    except ImportError as exc:
        raise UsageError(
            "scheduler needs the Dask distributed client: pip install 'evalbook-bundle[cluster]'",
            param="scheduler",
        ) from exc

    def unreachable(why: object) -> InputError:
        return InputError(
            f"scheduler: {address}: cannot reach the Dask scheduler ({why})", param="scheduler"
        )

    try:
        parts = urlsplit(address)  # checked already: scheme://host:port
        host, port = parts.hostname or "", parts.port or 0
        with socket.create_connection((host, port), timeout=SCHEDULER_PROBE_SECONDS):
            pass
    except TimeoutError:
        raise unreachable(f"no answer within {SCHEDULER_PROBE_SECONDS:g} s") from None
    except (OSError, ValueError) as exc:
        raise unreachable(getattr(exc, "strerror", None) or exc) from None

    class _Client(distributed.Client):  # type: ignore[misc]
        def __del__(self) -> None:
            # A client whose handshake failed is closed without waiting (distributed's
            # own would wait twice the connect timeout, then print a traceback).
            close_scheduler(self)

    problem = _handshake_problem(address)
    if problem is not None:
        raise unreachable(problem)
    try:
        return _Client(address, timeout=SCHEDULER_CONNECT_SECONDS, set_as_default=False)
    except Exception as exc:  # the service's reply is untrusted: any failure is its
        raise unreachable(
            str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        ) from None


def close_scheduler(client: Any) -> None:
    """Close a client, never waiting long and never raising: the run's result stands."""
    with contextlib.suppress(Exception):
        if getattr(client, "status", "newly-created") not in ("closed", "newly-created"):
            client.close(timeout=SCHEDULER_CLOSE_SECONDS)


def _execute_dask(
    batches: Batches, settings: Settings, client: Any, take: Callable[[list[Result]], None]
) -> None:
    distributed: Any = importlib.import_module("distributed")
    try:
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        batches.workers = workers
        batch_of: dict[str, list[Task]] = {}
        redo: list[Task] = []  # bundles of a batch the cluster gave up on, to run alone
        tries: collections.Counter[str] = collections.Counter()  # runs alone so far

        def submit() -> Any:
            batch = [redo.pop()] if redo else batches.next()
            # The settings travel with each batch: endpoint and region as this process
            # resolved them, never a credential (SPEC 13.1).
            future = client.submit(check_on_worker, batch, settings, pure=False)
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
        close_scheduler(client)
