"""Opening a run file (an Inspect log, an lm-eval results or samples file) safely.

A run file is untrusted input (SPEC 16): it is opened by descriptor without following
a symbolic link, must be a regular file, and its size is checked against the cap before
anything is read. The digest of its bytes names it in the report's subject and as an
artifact payload; it is computed once, streaming.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bundler.core.errors import InputError

CHUNK = 1024 * 1024
# The largest run file an import reads: four times what a verifier reads of a bundle in
# ten seconds is far beyond any run of 20,000 cases, and far below what would exhaust a
# machine; a log over it is refused before a byte is read.
MAX_RUN_FILE_BYTES = 4 * 1024**3


@dataclass(frozen=True)
class RunFile:
    """An open run file: its name as given, its size and the SHA-256 of its bytes."""

    name: str
    path: Path
    fd: int
    size: int
    sha256: str

    def pread(self, size: int, offset: int) -> bytes:
        """Exactly ``size`` bytes at ``offset``; InputError when the file is shorter."""
        if offset < 0 or size < 0 or offset + size > self.size:
            raise InputError(f"{self.name}: reads past its end at offset {offset}")
        data = os.pread(self.fd, size, offset)
        if len(data) != size:
            raise InputError(f"{self.name}: changed while it was read (short read)")
        return data

    def chunks(self) -> Iterator[bytes]:
        """The file's bytes in chunks, from the start."""
        offset = 0
        while offset < self.size:
            n = min(CHUNK, self.size - offset)
            yield self.pread(n, offset)
            offset += n

    def read_all(self, *, cap: int) -> bytes:
        """The whole file, refused when over ``cap`` bytes."""
        if self.size > cap:
            raise InputError(f"{self.name}: {self.size} bytes, over the {cap}-byte cap")
        return self.pread(self.size, 0)

    def close(self) -> None:
        os.close(self.fd)


def open_run_file(path: Path, *, role: str, cap: int = MAX_RUN_FILE_BYTES) -> RunFile:
    """Open ``path`` for reading: no symlink, a regular file, at most ``cap`` bytes.

    Raises InputError (exit 3) naming the file and the rule.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError as exc:
        raise InputError(f"{path}: {role} not found") from exc
    except OSError as exc:
        reason = "is a symbolic link" if os.path.islink(path) else (exc.strerror or str(exc))
        raise InputError(f"{path}: cannot open the {role} ({reason})") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{path}: the {role} is not a regular file")
        if st.st_size > cap:
            raise InputError(f"{path}: the {role} has {st.st_size} bytes, over the {cap}-byte cap")
        h = hashlib.sha256()
        offset = 0
        while offset < st.st_size:
            data = os.pread(fd, min(CHUNK, st.st_size - offset), offset)
            if not data:
                raise InputError(f"{path}: the {role} changed while it was read")
            h.update(data)
            offset += len(data)
        if os.pread(fd, 1, offset):
            raise InputError(f"{path}: the {role} grew while it was read")
    except BaseException:
        os.close(fd)
        raise
    return RunFile(str(path), Path(path), fd, st.st_size, "sha256:" + h.hexdigest())
