"""A child process that must not outlive the process that started it (fixity helpers,
the verifier ``--check`` runs beside its re-import), even one killed by SIGKILL whose
cleanup never runs: on Linux the kernel kills the child when its parent dies
(``PR_SET_PDEATHSIG``), and everywhere a watchdog thread ends it within half a second
of its parent changing."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

# How often a child looks whether its parent is still the one that started it.
WATCHDOG_SECONDS = 0.5
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Make this process end when ``parent`` does, whatever kills it."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it died before the line above took effect
        os._exit(0)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCHDOG_SECONDS)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()
