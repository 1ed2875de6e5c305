"""SIGINT and SIGTERM during a fixity run (SPEC 13.1): they stop the checking, never the
writing of a check's evidence half way.

A batch of results is written in one order, ledger events then record lines then the
counts the summary and the footer report (``run._Evidence.take``). A signal that came
in the middle of that would leave the three disagreeing: an event in the ledger that
no record line shows, or a line hashed into the footer's chain but never written.
``Interrupts`` holds SIGINT and SIGTERM back while evidence is written and delivers
them, to the handler that was there before, as soon as the writing is done; while
checks run or results are awaited they are delivered at once, so a run stops quickly.
Once checking has ended, the run closes its ledger run and record with every signal
held, and ``pending`` says whether one came.

Signals the process ignores or leaves at their default are not touched (only the main
thread can set handlers; elsewhere nothing is held).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

# SIGHUP asks the run to end as SIGTERM does (the command line handles it so): it is
# held and delivered alike, and recorded as SIGTERM.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupts:
    """Installs the gate for SIGINT and SIGTERM (a context manager). Signals are held
    except inside ``opened()``, and inside that again inside ``held()``."""

    def __init__(self) -> None:
        self.pending: int | None = None  # the first signal that came
        self._open = False
        self._held = 0
        self._delivered = False
        self._previous: dict[int, Callable[[int, FrameType | None], Any]] = {}

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is not threading.main_thread():
            return self
        for signum in SIGNALS:
            previous = signal.getsignal(signum)
            if callable(previous):
                self._previous[signum] = previous
                signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            # Unless the handler that was delivered to replaced the gate itself (the
            # CLI ignores a second SIGTERM once the first one started the cleanup).
            if signal.getsignal(signum) == self._on_signal:
                signal.signal(signum, previous)
        self._previous.clear()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.pending is None:
            self.pending = signal.SIGTERM if signum == signal.SIGHUP else signum
        if self._open and not self._held:
            self._deliver()

    def _deliver(self) -> None:
        if self.pending is None or self._delivered or self.pending not in self._previous:
            return
        self._delivered = True
        # The handler that was there raises: KeyboardInterrupt, or the CLI's SIGTERM.
        self._previous[self.pending](self.pending, None)

    @contextlib.contextmanager
    def opened(self) -> Iterator[None]:
        """Signals are delivered at once inside the block (the run is listing or
        checking); once it ends, however it ends, they are held for good."""
        self._open = True
        try:
            self._deliver()
            yield
        finally:
            self._open = False

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Signals wait until the block ends (evidence is being written), then are
        delivered if the gate is open."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
        if self._open and not self._held:
            self._deliver()

    @property
    def name(self) -> str | None:
        """SIGINT or SIGTERM when one came, else None."""
        return None if self.pending is None else signal.Signals(self.pending).name
