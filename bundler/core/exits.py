"""The exit codes of a run ended by a signal (SPEC 8, 13.1): 128 plus the signal's number,
by the name a fixity summary records. One table for the run that writes the summary
and for ``render``, which re-derives a summary's exit code."""

from __future__ import annotations

SIGNAL_EXIT = {"SIGINT": 130, "SIGTERM": 143}
