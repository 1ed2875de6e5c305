"""Directories a process killed outright (SIGKILL, a machine that lost power) leaves
behind, and how the next run removes them: an import's staging directory in a store,
``--check``'s temporary directory. Each live owner holds an exclusive ``flock`` on its
directory until it has removed it, and the kernel drops the lock of a process that
dies: a directory whose lock can be taken has no process behind it."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import stat
import time

# A directory younger than this is left alone even when unlocked: its owner may be
# about to lock it.
STALE_AFTER = 60.0


def hold(path: str) -> int:
    """Lock the directory at ``path`` for as long as the returned descriptor is open
    (the caller closes it once the directory is gone)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        os.close(fd)
        raise
    return fd


def sweep(root: str, name: re.Pattern[str], stale_after: float = STALE_AFTER) -> list[str]:
    """Remove the directories in ``root`` whose whole name matches ``name``, that this
    user owns, that are older than ``stale_after`` seconds and whose lock can be taken;
    return their names. Entries that are not directories (a symbolic link included),
    and anything that changes meanwhile, are left alone."""
    swept: list[str] = []
    now = time.time()
    try:
        entries = [e for e in os.scandir(root) if name.fullmatch(e.name)]
    except OSError:
        return swept
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
            if (
                not stat.S_ISDIR(st.st_mode)
                or st.st_uid != os.getuid()
                or now - st.st_mtime < stale_after
            ):
                continue
            fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)  # a live owner's
            continue
        try:
            if os.path.samestat(os.fstat(fd), os.stat(entry.path, follow_symlinks=False)):
                shutil.rmtree(entry.path, ignore_errors=True)
                swept.append(entry.name)
        except OSError:
            pass
        finally:
            os.close(fd)
    return swept
