"""The command's entry point (``evalbook-bundle``, ``python -m bundler``).

Importing the command line takes tens of milliseconds before ``app.main`` installs its
signal handling; a SIGINT or SIGTERM in that window would print Python's traceback (or
end the process by the raw signal). Here, first, they end it as the command line would
at that point, where nothing has been done: its one line on stderr, exit 130 or 143. A
signal the caller ignores (``nohup``, a background job) stays ignored.
"""

from __future__ import annotations

import os
import signal
from typing import NoReturn

_WORDS = {signal.SIGINT: (b"interrupted", 130), signal.SIGTERM: (b"terminated", 143)}


def _early(signum: int, _frame: object) -> None:
    word, code = _WORDS[signal.Signals(signum)]
    os.write(2, b"evalbook-bundle: " + word + b"\n")
    os._exit(code)


def main() -> NoReturn:
    previous: dict[signal.Signals, signal._HANDLER] = {}
    for sig in _WORDS:
        if signal.getsignal(sig) not in (signal.SIG_IGN, None):
            previous[sig] = signal.signal(sig, _early)
    from bundler.cli.app import main as cli_main

    # Back to what they were (SIGINT: Python's KeyboardInterrupt, which the command
    # cleans up after); ``cli_main`` installs its own for SIGTERM at once.
    for sig, handler in previous.items():
        signal.signal(sig, handler)
    cli_main()
