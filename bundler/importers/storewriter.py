"""Writing an import into an EvalBook store: all of a report's documents, or none (SPEC 16).

Everything is first written to a staging directory inside the store root (so the final
renames stay on one file system). Payloads are staged as they are read, so memory does
not grow with the run. ``commit`` then checks every final path before it moves anything:
a path that already holds the same bytes is left alone (identifiers name one content
forever, so the same content may already be there), a path that holds other bytes is
refused, and nothing has been moved. The report directory is moved last, in one rename,
so a report appears whole or not at all; the content-addressed files moved before it are
harmless if a crash comes between. The whole commit runs with SIGINT, SIGTERM and SIGHUP
deferred (a signal takes effect once the report is whole), and a refusal part way
through takes back what it had placed. A refusal or an interruption removes the staging
directory, and the store root too when this import created it (unless the commit had
finished), but only as far as it is empty: another import may have put a report in it
meanwhile; the signals wait until that cleanup (and the one after a commit) has
finished, so a signal never leaves half of it done. An import killed outright (SIGKILL)
cannot clean up: the next import into the store removes its staging directory, known
dead because no process holds the lock every import keeps on its own. A document whose bytes were staged already (a task file of every
scorer) is a hard link to the first copy: creating a file costs the file system far more
than linking one (100 to 300 us against 10 to 15 us on the ext4 disks measured), and
creating files is most of an import's time. Nothing is written through a symbolic link
inside the store: every move is made relative to directory descriptors opened from the
root segment by segment without following a link (``_Tree``), and every directory
opened is checked to be still at its path before the report's rename.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import shutil
import signal
import stat
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, NoReturn

from bundler.core import leftovers
from bundler.core.errors import InputError, OutputError, StoreError
from bundler.evalbook.contract import INLINE_PAYLOAD_MAX_BYTES
from bundler.importers.batchwrite import BatchWriter

STAGING_PREFIX = ".evalbook-import-"
HEAD_BYTES = 64  # of a payload, kept: more than a bundle reader looks at to keep it
# Documents this small are also kept whole in memory (up to WHOLE_BUDGET in all), so the
# export check need not open them again.
WHOLE_MAX_BYTES = 4096
WHOLE_BUDGET = 16 * 1024 * 1024


@dataclass(frozen=True)
class PayloadRef:
    """A payload staged for the store: its digest, size and location (SPEC 3.3)."""

    digest: str
    size: int

    @property
    def location(self) -> str:
        return "inline" if self.size <= INLINE_PAYLOAD_MAX_BYTES else "sso"

    @property
    def relpath(self) -> str:
        area = "blobs" if self.location == "inline" else "sso"
        return f"{area}/sha256/{self.digest.removeprefix('sha256:')}"

    def as_case_ref(self, kind: str) -> dict[str, object]:
        return {"kind": kind, "digest": self.digest, "size": self.size, "location": self.location}


@dataclass(frozen=True)
class CommitResult:
    report_written: bool  # False: the same report was already in the store
    files_written: int


_DEFERRED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def deferred_signals() -> Iterator[None]:
    """Run the block to its end even when SIGINT, SIGTERM or SIGHUP arrives; the signal's own
    handler runs afterwards. Only the main thread handles signals; elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {}
    for sig in _DEFERRED:
        if signal.getsignal(sig) is not None:  # None: a handler Python cannot restore
            previous[sig] = signal.signal(sig, lambda n, _f: caught.append(n))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if caught:
            signal.raise_signal(caught[0])


def _write_new(path: str, data: bytes) -> None:
    """Write ``data`` to a new file at ``path`` (never over one)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _same_bytes(dir_fd: int, name: str, staged: str, relpath: str | None = None) -> bool | None:
    """Whether ``name`` in the directory open at ``dir_fd`` holds the bytes of the staged
    file ``staged``; None when there is no such entry. Never follows a link: anything but
    a regular file there refuses the import."""
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except FileNotFoundError:
        return None
    except OSError:
        fd = -1
    try:
        if fd < 0 or not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StoreError(f"{relpath or name}: exists and is not a regular file; import refused")
        if os.fstat(fd).st_size != os.stat(staged).st_size:
            return False
        with open(staged, "rb") as mine, os.fdopen(fd, "rb", closefd=False) as theirs:
            while True:
                a = mine.read(1024 * 1024)
                if a != theirs.read(1024 * 1024):
                    return False
                if not a:
                    return True
    finally:
        if fd >= 0:
            os.close(fd)


class _Tree:
    """The directories below one root, each opened from its parent's descriptor without
    following a link (``O_NOFOLLOW``), the root itself too. A segment that is a symbolic
    link or not a directory refuses the import. At most ``MAX_OPEN`` descriptors are
    kept (the least recently used closed first; a run of many tasks has thousands of
    directories); the identity (device, inode) of every directory opened is kept, so one
    opened again must be the same directory. For the store, ``journal`` records what this
    commit placed (a file linked, a directory renamed whole or made), so that ``undo`` can
    take it back; the directories it placed into stay open until ``close``."""

    MAX_OPEN = 128

    def __init__(self, root: str, journal: list[tuple[str, str, str]] | None) -> None:
        self.root = root
        self.journal = journal
        try:
            fd = os.open(root, _DIR_FLAGS)
        except OSError as exc:
            self._refuse(root, None, root, exc)
        self.fds: OrderedDict[str, int] = OrderedDict({"": fd})
        self._ids = {"": self._id(fd)}
        self._pinned = {""}  # directories the journal placed into: never closed early

    @staticmethod
    def _id(fd: int) -> tuple[int, int]:
        st = os.fstat(fd)
        return (st.st_dev, st.st_ino)

    def _refuse(
        self, shown: str, parent_fd: int | None, name: str, why: OSError | None = None
    ) -> NoReturn:
        try:
            mode = os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode
        except OSError as exc:
            raise StoreError(
                f"{shown}: cannot be opened ({exc.strerror}); import refused"
            ) from None
        if stat.S_ISLNK(mode):
            raise StoreError(
                f"{shown}: a symbolic link inside the store; refusing to write through it "
                "(import refused)"
            )
        if not stat.S_ISDIR(mode):
            raise StoreError(f"{shown}: not a directory inside the store; import refused")
        reason = f" ({why.strerror})" if why is not None and why.strerror else ""
        raise StoreError(f"{shown}: cannot be opened as a directory{reason}; import refused")

    def _moved(self, reldir: str) -> NoReturn:
        where = f"{self.root}/{reldir}" if reldir else self.root
        raise StoreError(f"{where}: moved or replaced during the import; import refused")

    def dir(self, reldir: str, create: bool = False) -> int | None:
        """The descriptor of ``reldir`` (``a/b``), walked segment by segment from the
        root; None when a segment is absent (made, when ``create``). Valid until the
        next call."""
        fd = self.fds.get(reldir)
        if fd is not None:
            self.fds.move_to_end(reldir)
            return fd
        parent, _, name = reldir.rpartition("/")
        pfd = self.dir(parent, create)
        if pfd is None:
            return None
        shown = f"{self.root}/{reldir}"
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=pfd)
        except FileNotFoundError:
            if not create or reldir in self._ids:  # one opened before has gone
                if reldir in self._ids:
                    self._moved(reldir)
                return None
            try:
                os.mkdir(name, dir_fd=pfd)
            except FileExistsError:
                pass
            else:
                self.placed("dir", parent, name)
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=pfd)
            except OSError as exc:
                self._refuse(shown, pfd, name, exc)
        except OSError as exc:
            self._refuse(shown, pfd, name, exc)
        known = self._ids.setdefault(reldir, self._id(fd))
        if known != self._id(fd):
            os.close(fd)
            self._moved(reldir)
        self.fds[reldir] = fd
        self._evict()
        return fd

    def _evict(self) -> None:
        if len(self.fds) <= self.MAX_OPEN:
            return
        for reldir in list(self.fds):
            if len(self.fds) <= self.MAX_OPEN:
                break
            if reldir not in self._pinned:
                os.close(self.fds.pop(reldir))

    def exists(self, relpath: str) -> bool:
        """Whether an entry (of any type, a link too) is at ``relpath``."""
        parent, _, name = relpath.rpartition("/")
        fd = self.dir(parent)
        if fd is None:
            return False
        try:
            os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def placed(self, kind: str, parent: str, name: str) -> None:
        if self.journal is not None:
            self.journal.append((kind, parent, name))
            self._pinned.add(parent)

    def check_in_place(self) -> None:
        """Refuse when a directory opened here is no longer at its path (moved away, or
        replaced by another directory or a link): its writes would not be in the store."""
        try:
            st = os.stat(self.root, follow_symlinks=False)
        except OSError:
            self._moved("")
        if (st.st_dev, st.st_ino) != self._ids[""]:
            self._moved("")
        for reldir in sorted(self._ids, key=lambda d: d.count("/")):
            if not reldir:
                continue
            parent, _, name = reldir.rpartition("/")
            pfd = self.dir(parent)  # opened again, it must be the same directory
            if pfd is None:
                self._moved(parent)
            try:
                st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            except OSError:
                self._moved(reldir)
            if (st.st_dev, st.st_ino) != self._ids[reldir]:
                self._moved(reldir)

    def undo(self) -> None:
        """Take back, newest first, what the journal says this commit placed."""
        for kind, parent, name in reversed(self.journal or []):
            fd = self.fds.get(parent)  # pinned: still open
            if fd is None:
                continue
            try:
                if kind == "file":
                    os.unlink(name, dir_fd=fd)
                elif kind == "tree":
                    shutil.rmtree(name, dir_fd=fd)
                else:
                    os.rmdir(name, dir_fd=fd)
            except OSError:
                pass
        if self.journal is not None:
            self.journal.clear()

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


class Staged(NamedTuple):
    """A staged file: its final relpath, where it is staged, the first HEAD_BYTES of a
    payload (None for a document) and its whole bytes when they are kept in memory."""

    relpath: str
    path: str
    head: bytes | None
    data: bytes | None


# A staging directory younger than this is never swept: it may be one whose import has
# made it and not yet locked it.
STALE_AFTER = leftovers.STALE_AFTER
# The one form of a staging directory's name (the prefix and 16 hex digits): nothing else
# in the store root is ever swept, whatever it is called.
_STAGING_NAME = re.compile(re.escape(STAGING_PREFIX) + "[0-9a-f]{16}")


def sweep_stale_staging(root: str) -> list[str]:
    """Remove the staging directories that imports killed outright left in the store
    ``root`` (``core.leftovers``: every running import holds the lock of its own);
    return their names. Nothing whose name is not of the staging form is swept."""
    return leftovers.sweep(root, _STAGING_NAME, STALE_AFTER)


def _remove_empty_tree(root: str) -> None:
    """Remove the directory ``root`` made for a store, with its empty directories only:
    another import may have put a whole report there meanwhile (a store made by an import
    that then fails is shared from the moment it exists), and what it put stays. Links
    are not followed; a directory that is not empty, or that changed, stays."""
    for dirpath, _dirs, _files in os.walk(root, topdown=False, followlinks=False):
        with contextlib.suppress(OSError):
            os.rmdir(dirpath)


class StoreWriter:
    """A staging area for one import; use as a context manager (abort on error)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        if self.root.is_symlink():
            raise OutputError(f"{self.root}: the store root is a symlink; refusing to write")
        if self.root.exists() and not self.root.is_dir():
            raise OutputError(f"{self.root}: the store root is not a directory")
        if not self.root.parent.is_dir():
            raise OutputError(f"{self.root.parent}: the store's parent directory does not exist")
        self.created_root = False
        self._committed = False  # once the report is in, an interruption keeps it
        self.staging = self.root / (STAGING_PREFIX + secrets.token_hex(8))
        self._lock = -1
        if self.root.exists():
            sweep_stale_staging(str(self.root))
        with deferred_signals():  # a new root and its staging directory appear together
            if not self.root.exists():
                self.root.mkdir()
                self.created_root = True
            self.staging.mkdir()
            # Held until the staging directory is gone (the kernel lets go of it if this
            # process dies): what tells a live import's staging from a dead one's.
            self._lock = leftovers.hold(str(self.staging))
        # Paths are kept as text and files written with os calls: an import stages tens of
        # thousands of small files, and pathlib's objects cost more than the writes.
        self._root = str(self.root)
        self._files = f"{self.staging}/files"
        # Every file is staged where it goes (example bodies first by digest, until their
        # path is known), so that at commit a directory the store lacks moves whole, in one
        # rename, instead of file by file.
        self._payloads = f"{self.staging}/payloads"
        os.mkdir(self._files)
        os.mkdir(self._payloads)
        # Payloads and example bodies, written beside the reading (batchwrite); every
        # method that reads, moves or links a staged file flushes it first.
        self._pending = BatchWriter()
        self._staged: dict[str, str] = {}  # final relpath -> staged file
        self._examples: dict[str, str] = {}  # digest -> staged example body
        self._dirs: set[str] = {""}  # staged directories (under files/) already made
        # A payload's first bytes (all that decides whether a bundle's reader keeps it),
        # so the export check (``exportable``) need not open every payload again.
        self._heads: dict[str, bytes] = {}
        self._whole: dict[str, bytes] = {}  # small documents, kept whole
        self._whole_bytes = 0
        self._by_content: dict[bytes, str] = {}  # SHA-256 of a document -> its staged file

    # ------------------------------------------------------------------ staging

    def _stage_path(self, relpath: str) -> str:
        parent = relpath.rpartition("/")[0]
        if parent not in self._dirs:
            os.makedirs(f"{self._files}/{parent}", exist_ok=True)
            self._dirs.add(parent)
        return f"{self._files}/{relpath}"

    def put_payload(self, data: bytes) -> PayloadRef:
        """Stage a payload (blobs/ or sso/ by its size), once per digest."""
        ref = PayloadRef("sha256:" + hashlib.sha256(data).hexdigest(), len(data))
        relpath = ref.relpath
        if relpath not in self._staged:
            path = self._stage_path(relpath)
            self._pending.add(path, data)
            self._staged[relpath] = path
            self._heads[relpath] = data[:HEAD_BYTES]
        return ref

    def put_file_payload(self, source: Path, digest: str, size: int) -> PayloadRef:
        """Stage a run file as a payload, copied in chunks and checked against ``digest``."""
        ref = PayloadRef(digest, size)
        if ref.relpath in self._staged:
            return ref
        path = self._stage_path(ref.relpath)
        h = hashlib.sha256()
        written = 0
        head = b""
        flags = os.O_RDONLY | os.O_NOFOLLOW
        fd = os.open(source, flags)
        try:
            with os.fdopen(fd, "rb", closefd=False) as src, open(path, "xb") as dst:
                while chunk := src.read(1024 * 1024):
                    head = head or chunk[:HEAD_BYTES]
                    h.update(chunk)
                    dst.write(chunk)
                    written += len(chunk)
        finally:
            os.close(fd)
        if "sha256:" + h.hexdigest() != digest or written != size:
            raise InputError(f"{source}: changed while it was imported; import refused")
        self._staged[ref.relpath] = path
        self._heads[ref.relpath] = head
        return ref

    def put_example(self, data: bytes) -> str:
        """Stage an example body by digest; its final path is known only later."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if digest not in self._examples:
            path = f"{self._payloads}/example-{digest.removeprefix('sha256:')}"
            self._pending.add(path, data)
            self._examples[digest] = path
            self._heads[digest] = data[:HEAD_BYTES]
        return digest

    def place_example(self, digest: str, relpath: str) -> None:
        """Give a staged example body its final path: moved there the first time, linked
        for any other example with the same body."""
        self._pending.flush()
        path = self._stage_path(relpath)
        staged = self._examples[digest]
        if staged.startswith(self._payloads + "/"):
            os.rename(staged, path)
            self._examples[digest] = path
        else:
            os.link(staged, path)
        self._staged[relpath] = path
        self._heads[relpath] = self._heads[digest]

    def put_document(self, relpath: str, data: bytes) -> None:
        self._pending.flush()
        staged = self._staged.get(relpath)
        if staged is not None:
            with open(staged, "rb") as f:
                if f.read() != data:
                    raise StoreError(
                        f"{relpath}: two different documents for one path; import refused"
                    )
            return
        path = self._stage_path(relpath)
        content = hashlib.sha256(data).digest()
        same = self._by_content.get(content)
        if same is not None:
            os.link(same, path)
        else:
            _write_new(path, data)
            self._by_content[content] = path
        self._staged[relpath] = path
        if len(data) <= WHOLE_MAX_BYTES and self._whole_bytes + len(data) <= WHOLE_BUDGET:
            self._whole[relpath] = data
            self._whole_bytes += len(data)

    # ------------------------------------------------------------------ committing

    def commit(self, report_dir: str, access: bytes | None) -> CommitResult:
        """Move everything into place; refuse, moving nothing, when a path holds other
        bytes or passes through a symbolic link. ``report_dir`` (``reports/<id>``) moves
        last, in one rename.

        The whole commit runs with SIGINT, SIGTERM and SIGHUP deferred: a signal takes
        effect once the report is whole (or, after a refusal, once what this commit moved
        has been taken back). Every move is made relative to directory descriptors opened
        segment by segment from the store root without following a link, so a directory
        swapped for a symbolic link meanwhile is refused, never written through; a
        refusal part way (a link or a file that appeared, a directory moved away, a
        failed write) removes what this commit had placed, so the store holds the whole
        report or nothing of this import."""
        self._pending.flush()
        with deferred_signals():
            journal: list[tuple[str, str, str]] = []
            store = _Tree(self._root, journal)
            try:
                staged = _Tree(self._files, None)
            except BaseException:
                store.close()
                raise
            try:
                result = self._commit(store, staged, report_dir, access)
            except BaseException as exc:
                store.undo()
                if isinstance(exc, OSError):
                    where = getattr(exc, "filename", None) or self._root
                    raise StoreError(
                        f"{where}: {exc.strerror or exc} while moving the import into the "
                        "store; nothing of it was kept; import refused"
                    ) from None
                raise
            finally:
                store.close()
                staged.close()
            self._committed = True
        return result

    def _commit(
        self, store: _Tree, staged: _Tree, report_dir: str, access: bytes | None
    ) -> CommitResult:
        # Before anything moves: every directory a final path passes through is a real
        # directory (or absent), every final path absent or holding the staged bytes.
        # Each directory is walked once, not once a file: 60,000 payloads of a fresh
        # store were 120,000 failed opens of its absent blobs/.
        parents = {r.rpartition("/")[0] for r in [*self._staged, "access.json", f"{report_dir}/x"]}
        absent = {parent for parent in sorted(parents) if store.dir(parent) is None}
        prefix = report_dir + "/"
        report_files = sorted(r for r in self._staged if r.startswith(prefix))
        others = sorted(r for r in self._staged if not r.startswith(prefix))
        to_move = [
            r for r in others if r.rpartition("/")[0] in absent or not self._same(store, r)
        ]
        report_written = not self._report_present(store, report_dir, report_files)
        written = 0
        if access is not None and not store.exists("access.json"):
            self._stage_bytes("access.json", access)
            written += self._link(store, staged, "access.json")
        written += self._move_all(store, staged, to_move, report_dir)
        if report_written:
            parent, _, name = report_dir.rpartition("/")
            store.dir(parent, create=True)
            store.check_in_place()  # nothing it wrote into was moved away meanwhile
            dst = store.dir(parent)
            try:
                if dst is None:
                    raise FileNotFoundError(parent)
                os.rename(name, name, src_dir_fd=staged.dir(parent), dst_dir_fd=dst)
            except OSError as exc:
                raise StoreError(
                    f"{report_dir}: appeared during the import; import refused"
                ) from exc
            written += len(report_files)
        return CommitResult(report_written, written)

    def _report_present(self, store: _Tree, report_dir: str, report_files: list[str]) -> bool:
        """Whether the store holds this very report already (every file, the same bytes,
        nothing else); False when it holds no such directory. A report directory that
        differs refuses the import, naming what differs."""
        parent, _, name = report_dir.rpartition("/")
        pfd = store.dir(parent)
        if pfd is None or not store.exists(report_dir):
            return False
        mode = os.stat(name, dir_fd=pfd, follow_symlinks=False).st_mode
        if not stat.S_ISDIR(mode):
            raise StoreError(f"{report_dir}: exists and is not a directory; import refused")
        staged = {r[len(report_dir) + 1 :] for r in report_files}
        differences: list[str] = []
        seen: set[str] = set()
        fd = os.open(name, _DIR_FLAGS, dir_fd=pfd)
        try:
            self._compare_tree(fd, "", report_dir, staged, seen, differences)
        finally:
            os.close(fd)
        differences += [f"{r} missing" for r in sorted(staged - seen)]
        if not differences:
            return True
        shown = ", ".join(differences[:3])
        more = f" and {len(differences) - 3} more difference(s)" if len(differences) > 3 else ""
        raise StoreError(
            f"{report_dir}: the store holds a report with this id, with {shown}{more} "
            "(an import never changes a document already in the store); import refused"
        )

    def _compare_tree(
        self,
        fd: int,
        sub: str,
        report_dir: str,
        staged: set[str],
        seen: set[str],
        differences: list[str],
    ) -> None:
        """Compare the report directory open at ``fd`` (its part ``sub``) with the staged
        report, adding each difference, named by its path inside the report."""
        with os.scandir(fd) as entries:
            listed = sorted(entries, key=lambda e: e.name)
        for entry in listed:
            rel = f"{sub}{entry.name}"
            if entry.is_dir(follow_symlinks=False):
                child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                try:
                    self._compare_tree(child, rel + "/", report_dir, staged, seen, differences)
                finally:
                    os.close(child)
                continue
            if rel not in staged:
                differences.append(f"an extra file {rel}")
                continue
            seen.add(rel)
            if not entry.is_file(follow_symlinks=False):
                differences.append(f"{rel} not a regular file")
            elif not _same_bytes(fd, entry.name, self._staged[f"{report_dir}/{rel}"]):
                differences.append(f"other bytes at {rel}")

    def _move_all(self, store: _Tree, staged: _Tree, to_move: list[str], report_dir: str) -> int:
        """Move the staged files ``to_move`` into the store: where the store lacks a
        directory a file goes into (never one holding the report), the staged directory
        moves whole, in one rename (a rename replaces at most an empty directory that
        appeared meanwhile, never a file; when it cannot, its files are linked one by
        one); elsewhere each file is linked. Returns the files placed."""
        keep = {"/".join(report_dir.split("/")[:i]) for i in range(1, report_dir.count("/") + 2)}
        present: set[str] = {""}  # final directories known to exist
        moved: list[str] = []  # directories renamed whole
        written = 0
        for relpath in to_move:
            if any(relpath.startswith(m + "/") for m in moved):
                written += 1
                continue
            absent = self._absent_directory(store, relpath, keep, present)
            if absent is not None:
                parent, _, name = absent.rpartition("/")
                dst = store.dir(parent)
                try:
                    if dst is None:
                        raise FileNotFoundError(absent)
                    os.rename(name, name, src_dir_fd=staged.dir(parent), dst_dir_fd=dst)
                except OSError:
                    pass  # it appeared, not empty: link its files one by one
                else:
                    store.placed("tree", parent, name)
                    moved.append(absent)
                    present.add(absent)
                    written += 1
                    continue
            written += self._link(store, staged, relpath)
        return written

    def _absent_directory(
        self, store: _Tree, relpath: str, keep: set[str], present: set[str]
    ) -> str | None:
        """The shallowest directory of ``relpath`` the store lacks (not one in ``keep``),
        or None when the store has them all."""
        parts = relpath.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            sub = "/".join(parts[:depth])
            if sub in present or sub in keep:
                continue
            if store.dir(sub) is None:
                return sub
            present.add(sub)
        return None

    def _stage_bytes(self, relpath: str, data: bytes) -> str:
        path = self._stage_path(relpath)
        _write_new(path, data)
        self._staged[relpath] = path
        return path

    def _same(self, store: _Tree, relpath: str) -> bool:
        """Whether the final path already holds the staged bytes (refuse other bytes)."""
        parent, _, name = relpath.rpartition("/")
        fd = store.dir(parent)
        if fd is None:
            return False
        same = _same_bytes(fd, name, self._staged[relpath], relpath)
        if same is None:
            return False
        if same:
            return True
        raise StoreError(
            f"{relpath}: the store already holds other bytes at this path (an import never "
            "changes a document already in the store); import refused"
        )

    def _link(self, store: _Tree, staged: _Tree, relpath: str) -> int:
        """Link one staged file into place (never over a file that appeared meanwhile);
        returns 1 when this import placed it, 0 when the same bytes were there."""
        parent, _, name = relpath.rpartition("/")
        dst = store.dir(parent, create=True)
        try:
            os.link(
                name, name, src_dir_fd=staged.dir(parent), dst_dir_fd=dst, follow_symlinks=False
            )
        except FileExistsError:
            assert dst is not None
            if _same_bytes(dst, name, self._staged[relpath], relpath):
                return 0
            raise StoreError(f"{relpath}: appeared with other bytes during the import") from None
        store.placed("file", parent, name)
        return 1

    def staged_paths(self) -> Iterable[str]:
        return sorted(self._staged)

    def staged_files(self) -> list[Staged]:
        """Everything staged so far, every file written."""
        self._pending.flush()
        return [
            Staged(r, p, self._heads.get(r), self._whole.get(r)) for r, p in self._staged.items()
        ]

    def close(self) -> None:
        self._pending.close()  # before the staging directory goes
        with deferred_signals():
            shutil.rmtree(self.staging, ignore_errors=True)
            self._unlock()

    def abort(self) -> None:
        self._pending.close()  # before the staging directory goes
        with deferred_signals():
            shutil.rmtree(self.staging, ignore_errors=True)
            self._unlock()
            if self.created_root and not self._committed:
                _remove_empty_tree(self._root)

    def _unlock(self) -> None:
        if self._lock >= 0:
            os.close(self._lock)
            self._lock = -1

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()
