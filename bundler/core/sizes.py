"""The size of a local file when it is a regular one: what a progress bar or a reader
sized from metadata may use before any byte is read."""

from __future__ import annotations

import os
import stat


def regular_size(path: str) -> int | None:
    """The size of the regular file at ``path``; None for another kind of file or one
    that cannot be looked at (whose read then says why)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None
