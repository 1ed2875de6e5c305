"""The fixity record (SPEC section 13): a JSON Lines log of one run, the evidence a
keeper files.

Line 1 is the header (``evalbook.fixity_run.v1``: run id, tool, source, level,
selection, start time), then one ``evalbook.fixity_check.v1`` line per check, then the
footer (``evalbook.fixity_footer.v1``: counts, bytes read, end time, and the SHA-256 of
the bytes of every line before it: the chain digest). Each line is compact JSON ending
in a newline. The record is named by the SHA-256 of all its bytes (``file_sha256``,
what ``sha256sum`` prints), kept apart from the footer's chain digest.

The record is written to a file without a name (Linux ``O_TMPFILE``) in its target's
directory and linked into place at the end, never over an existing file: a run killed
even by SIGKILL leaves nothing behind. Where the file system cannot do that, a hidden
temporary file beside the target is used instead and removed on every exit Python sees.
``--key`` signs the whole file (SSHSIG, namespace ``evalbook-fixity-v1``) into
``FILE.sig``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import orjson

from bundler.core.digests import PREFIX as DIGEST_PREFIX
from bundler.core.errors import OutputError
from bundler.core.outputs import create_temp, write_new_file

RUN_SCHEMA = "evalbook.fixity_run.v1"
CHECK_SCHEMA = "evalbook.fixity_check.v1"
FOOTER_SCHEMA = "evalbook.fixity_footer.v1"
SIGNATURE_NAMESPACE = "evalbook-fixity-v1"


def _anonymous(target: Path) -> int | None:
    """A file without a name in ``target``'s directory, or None where the system has none."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or not os.path.isdir("/proc/self/fd"):
        return None
    directory = target.parent if str(target.parent) else Path(".")
    try:
        return os.open(directory, flag | os.O_WRONLY | os.O_CLOEXEC, 0o666)
    except OSError:
        return None  # e.g. a file system without O_TMPFILE: a named temporary file then


def _link_anonymous(fd: int, target: Path) -> None:
    # linkat(AT_SYMLINK_FOLLOW) on /proc/self/fd/N names an O_TMPFILE file; CPython calls
    # linkat (rather than link, which would not follow) only when given a directory fd.
    root = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.link(f"/proc/self/fd/{fd}", target, src_dir_fd=root, follow_symlinks=True)
    finally:
        os.close(root)


class RecordWriter:
    """Appends record lines to a temporary file and hashes them as they go."""

    def __init__(self, target: Path | None) -> None:
        self.target = target
        self._sha = hashlib.sha256()
        self._fh: Any = None
        self._temp: Path | None = None
        self._lines: list[bytes] | None = None
        self.file_sha256: str | None = None
        if target is None:
            self._lines = []  # kept for --upload-record without --record
            return
        if os.path.lexists(target):
            raise OutputError(f"{target}: already exists; refusing to overwrite")
        fd = _anonymous(target)
        if fd is None:
            try:
                fd, self._temp = create_temp(target)
            except OSError as exc:
                raise OutputError(f"{target}: cannot create ({exc.strerror or exc})") from exc
        self._fh = os.fdopen(fd, "wb")

    def write(self, line: dict[str, Any]) -> None:
        data = orjson.dumps(line) + b"\n"
        # Written, then hashed: the chain digest never covers a line the file lacks.
        if self._lines is not None:
            self._lines.append(data)
        else:
            self._fh.write(data)
        self._sha.update(data)

    @property
    def sha256(self) -> str:
        """The SHA-256 of every line written so far."""
        return DIGEST_PREFIX + self._sha.hexdigest()

    def finish(self) -> bytes | None:
        """Link the record into place; returns its bytes when kept in memory. Sets
        ``file_sha256``, the SHA-256 of every byte of the record."""
        self.file_sha256 = self.sha256
        if self._lines is not None:
            return b"".join(self._lines)
        assert self.target is not None
        try:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            try:
                if self._temp is None:
                    _link_anonymous(self._fh.fileno(), self.target)
                else:
                    os.link(self._temp, self.target)
            except FileExistsError as exc:
                raise OutputError(f"{self.target}: already exists; refusing to overwrite") from exc
        except OSError as exc:
            raise OutputError(f"{self.target}: cannot write ({exc.strerror or exc})") from exc
        finally:
            self._fh.close()
            if self._temp is not None:
                self._temp.unlink(missing_ok=True)
        return None

    def abandon(self) -> None:
        """Remove the temporary file (an interrupted run)."""
        if self._fh is not None and not self._fh.closed:
            self._fh.close()
        if self._temp is not None:
            self._temp.unlink(missing_ok=True)


def sign_record(data: bytes, key_path: Path, passphrase: bytes | None) -> str:
    """The armored SSHSIG signature of a record's bytes."""
    from bundler.trust import sshsig

    key = sshsig.load_private_key(key_path, passphrase=passphrase)
    return sshsig.sign(data, key, namespace=SIGNATURE_NAMESPACE)


def write_signature(target: Path, signature: str) -> Path:
    sig_path = target.with_name(target.name + ".sig")
    write_new_file(sig_path, signature.encode("ascii"))
    return sig_path
