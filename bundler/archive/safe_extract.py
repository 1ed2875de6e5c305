"""Write an extracted bag beneath one directory descriptor, whatever races it (SPEC 5, 7).

A local process that can write inside the destination may rename, replace or plant
entries while ``extract`` runs. Nothing here is ever created or removed by path: the
destination is opened once (``O_DIRECTORY | O_NOFOLLOW``) and every directory and file is
created relative to the descriptor of a directory this extraction created itself
(``mkdir`` / ``open`` with ``dir_fd``, ``O_EXCL``, ``O_NOFOLLOW``). Each directory's
identity (``st_dev``, ``st_ino``) is recorded when it is created, and before every write
the chain of names from the destination down to the parent is checked against those
identities, so a directory swapped for a symbolic link, or for any other directory, is
found and the extraction stops with an OutputError (exit 3) instead of writing through
it; a check of every name once the bag is written catches a swap after the last write.
Removal works the same way: an entry is unlinked or removed only by name within a
directory this extraction created, and only while that name still holds the very entry
it created (an entry renamed within its directory is found there by identity); what the
other process moved out of reach, or added entries to, is left and reported.

Created entries get the modes any ordinary tool gives (0666 for files and 0777 for
directories, less the process umask); the modes an archive records are never used.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from bundler.core.errors import OutputError

FILE_MODE = 0o666
DIRECTORY_MODE = 0o777
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
# Descriptors kept open along the most recently used chain of directories; deeper ones
# (a hostile archive may nest 2,000 levels) are opened for one step and closed again.
MAX_CACHED_DEPTH = 64
# Directory entries looked at, in all, when removal searches for an entry another process
# renamed; bounds the work such a process can cause.
MAX_SEARCHED_ENTRIES = 1_000_000

Identity = tuple[int, int]


def _identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino)


@dataclass(frozen=True, slots=True)
class _Entry:
    rel: str
    is_dir: bool
    identity: Identity


class SafeExtractor:
    """Creates directories and regular files beneath ``root``, never by path.

    ``root`` must be an existing, empty directory (``prepare_output_dir`` makes it so);
    it is opened once here and everything descends from that descriptor. ``created``
    says whether the caller created ``root`` for this extraction, so that
    ``remove_all`` removes it too. Raises OutputError when ``root`` is a symbolic link,
    not a directory, or no longer empty.
    """

    def __init__(self, root: Path, *, created: bool = False) -> None:
        self.root = root
        self.created_root = created
        try:
            self._root_fd = os.open(root, _DIRECTORY_FLAGS)
        except OSError as exc:
            raise OutputError(
                f"{root}: cannot open as a directory without following links "
                f"({exc.strerror or exc}); refusing to write"
            ) from exc
        try:
            self._root_identity = _identity(os.fstat(self._root_fd))
            if os.listdir(self._root_fd):
                raise OutputError(
                    f"{root}: not empty when opened for extraction; refusing to write"
                )
        except BaseException:
            os.close(self._root_fd)
            raise
        self._euid = os.geteuid()
        self._dirs: dict[str, Identity] = {}
        self._entries: list[_Entry] = []
        self._chain: list[tuple[str, int]] = []  # (rel, fd), depth i at index i
        self._closed = False
        self._search_budget = MAX_SEARCHED_ENTRIES

    # ------------------------------------------------------------------ writing

    def directory(self, rel: str) -> None:
        """Create directory ``rel`` (mode 0777 less the umask) in its created parent."""
        parent, name = self._split(rel)
        with self._parent_fd(parent) as parent_fd:
            try:
                os.mkdir(name, DIRECTORY_MODE, dir_fd=parent_fd)
            except FileExistsError as exc:
                raise self._planted(rel) from exc
            # No call creates a directory and opens it in one step: open what the name now
            # holds without following links, and accept it only if this user created it
            # and it is an empty directory (another user cannot give us either).
            try:
                fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=parent_fd)
            except OSError as exc:
                raise self._swapped(rel) from exc
            try:
                st = os.fstat(fd)
                if st.st_uid != self._euid or os.listdir(fd):
                    raise self._swapped(rel)
            finally:
                os.close(fd)
        self._dirs[rel] = _identity(st)
        self._entries.append(_Entry(rel, True, _identity(st)))

    def open(self, rel: str) -> BinaryIO:
        """Create regular file ``rel`` exclusively (mode 0666 less the umask); its writer."""
        parent, name = self._split(rel)
        with self._parent_fd(parent) as parent_fd:
            try:
                fd = os.open(name, _FILE_FLAGS, FILE_MODE, dir_fd=parent_fd)
            except FileExistsError as exc:
                raise self._planted(rel) from exc
        try:
            identity = _identity(os.fstat(fd))
        except BaseException:
            os.close(fd)
            raise
        self._entries.append(_Entry(rel, False, identity))
        return os.fdopen(fd, "wb")

    def check_intact(self) -> None:
        """Raise OutputError unless every name created still holds what was created there.

        Called once the bag is written: a swap that happened after the last write (and
        so could not be refused then) still fails the extraction.
        """
        root_now: Identity | None
        try:
            root_now = _identity(os.stat(self.root, follow_symlinks=False))
        except OSError:
            root_now = None
        if root_now != self._root_identity:
            raise OutputError(
                f"{self.root}: replaced while extracting (no longer the directory extract "
                "opened); extraction stopped"
            )
        for entry in self._entries:
            parent, name = self._split(entry.rel)
            with self._parent_fd(parent) as parent_fd:
                try:
                    st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
                except OSError as exc:
                    raise self._swapped(entry.rel) from exc
                if _identity(st) != entry.identity:
                    raise self._swapped(entry.rel)

    # ------------------------------------------------------------------ removing

    def remove_all(self) -> list[str]:
        """Remove every entry this extraction created, deepest first; never anything else.

        An entry is removed only by name within a directory this extraction created, and
        only while that name holds the very entry created (``lstat`` identity, links never
        followed). An entry another process renamed within its directory is found there
        by identity and removed too. What cannot be reached that way (moved elsewhere, or
        its directory was) is left alone and returned, as paths relative to ``root``
        ("." for ``root`` itself when this extraction created it). Closes every descriptor.
        """
        left: list[str] = []
        for entry in reversed(self._entries):
            parent, name = self._split(entry.rel)
            try:
                with self._parent_fd(parent, lenient=True) as parent_fd:
                    holder = self._holder(parent_fd, name, entry.identity, search=True)
                    if holder is None:
                        left.append(entry.rel)
                    elif entry.is_dir:
                        self._forget(entry.rel)
                        os.rmdir(holder, dir_fd=parent_fd)
                    else:
                        os.unlink(holder, dir_fd=parent_fd)
            except (OSError, OutputError):
                left.append(entry.rel)
        self._entries.clear()
        self._dirs.clear()
        self._close_chain(0)
        if self.created_root and not self._remove_root():
            left.append(".")
        self.close()
        return left

    def close(self) -> None:
        """Close every descriptor (the files written stay)."""
        if self._closed:
            return
        self._closed = True
        self._close_chain(0)
        os.close(self._root_fd)

    # ------------------------------------------------------------------ internals

    def _split(self, rel: str) -> tuple[str, str]:
        parts = rel.split("/")
        if any(p in ("", ".", "..") or "\0" in p for p in parts):
            raise OutputError(f"{self.root}/{rel}: not a plain relative path; refusing to write")
        return "/".join(parts[:-1]), parts[-1]

    def _planted(self, rel: str) -> OutputError:
        return OutputError(
            f"{self.root}/{rel}: appeared while extracting (created by another process); "
            "extraction stopped"
        )

    def _swapped(self, rel: str) -> OutputError:
        return OutputError(
            f"{self.root}/{rel}: replaced while extracting (no longer the entry extract "
            "created, e.g. a symbolic link); extraction stopped, nothing written through it"
        )

    @contextlib.contextmanager
    def _parent_fd(self, rel: str, *, lenient: bool = False) -> Iterator[int]:
        """The descriptor of created directory ``rel`` ("" for the root), chain checked.

        Every name from the root down must hold the directory created under it. Each
        descriptor is either opened (``O_NOFOLLOW | O_DIRECTORY``) relative to its checked
        parent and compared with ``fstat`` to the identity recorded at creation, or a
        cached one of the same directory. Raises OutputError otherwise. ``lenient``
        (removal only) descends into a created directory wherever its parent now holds
        it: through the cached descriptor, or under the name it was renamed to.
        """
        if self._closed:
            raise OutputError(f"{self.root}: extraction already closed")
        transient: int | None = None
        try:
            fd = self._root_fd
            path = ""
            for depth, name in enumerate(rel.split("/") if rel else ()):
                path = f"{path}/{name}" if path else name
                expected = self._dirs.get(path)
                if expected is None:
                    raise self._swapped(path)
                cached = (
                    self._chain[depth][1]
                    if depth < len(self._chain) and self._chain[depth][0] == path
                    else None
                )
                if cached is not None:
                    if not lenient and self._holder(fd, name, expected, search=False) is None:
                        raise self._swapped(path)
                    fd = cached
                    continue
                holder = self._holder(fd, name, expected, search=True) if lenient else name
                child = None if holder is None else self._open_checked(fd, holder, expected)
                if child is None:
                    raise self._swapped(path)
                if depth < MAX_CACHED_DEPTH:
                    self._close_chain(depth)
                    self._chain.append((path, child))
                else:
                    if transient is not None:
                        os.close(transient)
                    transient = child
                fd = child
            yield fd
        finally:
            if transient is not None:
                os.close(transient)

    @staticmethod
    def _open_checked(parent_fd: int, name: str, expected: Identity) -> int | None:
        """``name`` in ``parent_fd`` opened as a directory without following links, if it
        is the directory ``expected``; None if it is anything else."""
        try:
            fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=parent_fd)
        except OSError as exc:
            # ELOOP: a symbolic link, refused by O_NOFOLLOW; ENOTDIR: not a directory.
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                return None
            raise
        try:
            if _identity(os.fstat(fd)) == expected:
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
        return None

    def _holder(self, parent_fd: int, name: str, expected: Identity, *, search: bool) -> str | None:
        """The name in ``parent_fd`` that holds the entry ``expected`` (links not followed).

        ``name`` itself, or with ``search`` any entry of that directory (another process
        renamed it), within a bounded number of entries looked at.
        """
        with contextlib.suppress(OSError):
            if _identity(os.stat(name, dir_fd=parent_fd, follow_symlinks=False)) == expected:
                return name
        if not search:
            return None
        with contextlib.suppress(OSError), os.scandir(parent_fd) as found:
            for item in found:
                if self._search_budget <= 0:
                    break
                self._search_budget -= 1
                if _identity(item.stat(follow_symlinks=False)) == expected:
                    return item.name
        return None

    def _close_chain(self, depth: int) -> None:
        while len(self._chain) > depth:
            _, fd = self._chain.pop()
            with contextlib.suppress(OSError):
                os.close(fd)

    def _forget(self, rel: str) -> None:
        for depth, (path, _) in enumerate(self._chain):
            if path == rel:
                self._close_chain(depth)
                return

    def _remove_root(self) -> bool:
        """Remove the root by name in its parent, only while that name holds the root."""
        parent = self.root.parent
        try:
            parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
        except OSError:
            return False
        try:
            st = os.stat(self.root.name, dir_fd=parent_fd, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode) or _identity(st) != self._root_identity:
                return False
            os.rmdir(self.root.name, dir_fd=parent_fd)
            return True
        except OSError:
            return False
        finally:
            os.close(parent_fd)
