"""Writing an import into an EvalBook store: all of a report's documents, or none (SPEC 16).

Everything is first written to a staging directory inside the store root (so the final
renames stay on one file system). Payloads are staged as they are read, so memory does
not grow with the run. ``commit`` then checks every final path before it moves anything:
a path that already holds the same bytes is left alone (identifiers name one content
forever, so the same content may already be there), a path that holds other bytes is
refused, and nothing has been moved. The report directory is moved last, in one rename,
so a report appears whole or not at all; the content-addressed files moved before it are
harmless if a crash comes between. A refusal or an interruption removes the staging
directory, and the store root too when this import created it; SIGINT and SIGTERM wait
until that cleanup (and the one after a commit) has finished, so a signal never leaves
half of it done. A document whose bytes were staged already (a task file of every
scorer) is a hard link to the first copy: creating a file costs the file system far more
than linking one (100 to 300 us against 10 to 15 us on the ext4 disks measured), and
creating files is most of an import's time. Nothing is written through a symbolic link
inside the store: the root and every directory below it that a path passes through must
be real directories.
"""

from __future__ import annotations

import filecmp
import hashlib
import os
import secrets
import shutil
import signal
import stat
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from bundler.core.errors import InputError, OutputError, StoreError
from bundler.evalbook.contract import INLINE_PAYLOAD_MAX_BYTES

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


class Staged(NamedTuple):
    """A staged file: its final relpath, where it is staged, the first HEAD_BYTES of a
    payload (None for a document) and its whole bytes when they are kept in memory."""

    relpath: str
    path: str
    head: bytes | None
    data: bytes | None


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
        self.staging = self.root / (STAGING_PREFIX + secrets.token_hex(8))
        with deferred_signals():  # a new root and its staging directory appear together
            if not self.root.exists():
                self.root.mkdir()
                self.created_root = True
            self.staging.mkdir()
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
            _write_new(path, data)
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
            _write_new(path, data)
            self._examples[digest] = path
            self._heads[digest] = data[:HEAD_BYTES]
        return digest

    def place_example(self, digest: str, relpath: str) -> None:
        """Give a staged example body its final path: moved there the first time, linked
        for any other example with the same body."""
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

    def _real_directories(self, relpaths: Iterable[str]) -> None:
        """Refuse (moving nothing) when a directory a final path passes through is a
        symbolic link or not a directory: a link inside the store would write outside it."""
        checked: set[str] = set()
        for relpath in relpaths:
            parts = relpath.split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                sub = "/".join(parts[:depth])
                if sub in checked:
                    continue
                checked.add(sub)
                try:
                    mode = os.lstat(self.root / sub).st_mode
                except FileNotFoundError:
                    continue
                if stat.S_ISLNK(mode):
                    raise StoreError(
                        f"{self.root / sub}: a symbolic link inside the store; refusing to write "
                        "through it (import refused)"
                    )
                if not stat.S_ISDIR(mode):
                    raise StoreError(
                        f"{self.root / sub}: not a directory inside the store; import refused"
                    )

    def commit(self, report_dir: str, access: bytes | None) -> CommitResult:
        """Move everything into place; refuse, moving nothing, when a path holds other
        bytes or passes through a symbolic link. ``report_dir`` (``reports/<id>``) moves
        last, in one rename."""
        self._real_directories([*self._staged, "access.json", f"{report_dir}/x"])
        prefix = report_dir + "/"
        report_files = sorted(r for r in self._staged if r.startswith(prefix))
        others = sorted(r for r in self._staged if not r.startswith(prefix))
        to_move = [r for r in others if not self._same(r)]
        final_report = self.root / report_dir
        report_written = True
        if final_report.exists() or final_report.is_symlink():
            if not final_report.is_dir() or final_report.is_symlink():
                raise StoreError(f"{report_dir}: exists and is not a directory; import refused")
            present = sorted(
                p.relative_to(self.root).as_posix()
                for p in final_report.rglob("*")
                if p.is_file() or p.is_symlink()
            )
            if present != report_files or not all(self._same(r) for r in report_files):
                raise StoreError(
                    f"{report_dir}: the store already holds a different report with this id "
                    "(an import never changes a document already in the store); import refused"
                )
            report_written = False
        written = 0
        self._made: set[str] = {""}  # final directories already made
        if access is not None and not (self.root / "access.json").exists():
            self._move_file(self._stage_bytes("access.json", access), "access.json")
            written += 1
        written += self._move_all(to_move, report_dir)
        if report_written:
            staged_dir = f"{self._files}/{report_dir}"
            final_report.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.rename(staged_dir, final_report)
            except OSError as exc:
                raise StoreError(
                    f"{report_dir}: appeared during the import; import refused"
                ) from exc
            written += len(report_files)
        return CommitResult(report_written, written)

    def _move_all(self, to_move: list[str], report_dir: str) -> int:
        """Move the staged files ``to_move`` into the store: where the store lacks a
        directory a file goes into (never one holding the report), the staged directory
        moves whole, in one rename (a rename replaces at most an empty directory that
        appeared meanwhile, never a file; when it cannot, its files are linked one by
        one); elsewhere each file is linked. Returns the files placed."""
        keep = {"/".join(report_dir.split("/")[:i]) for i in range(1, report_dir.count("/") + 2)}
        present: set[str] = {""}  # final directories known to exist
        moved: list[str] = []  # directories renamed whole
        for relpath in to_move:
            if any(relpath.startswith(m + "/") for m in moved):
                continue
            absent = self._absent_directory(relpath, keep, present)
            if absent is not None:
                try:
                    os.rename(f"{self._files}/{absent}", f"{self._root}/{absent}")
                except OSError:
                    pass  # it appeared, not empty: link its files one by one
                else:
                    moved.append(absent)
                    present.add(absent)
                    continue
            self._move_file(self._staged[relpath], relpath)
        return len(to_move)

    def _absent_directory(self, relpath: str, keep: set[str], present: set[str]) -> str | None:
        """The shallowest directory of ``relpath`` the store lacks (not one in ``keep``),
        or None when the store has them all."""
        parts = relpath.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            sub = "/".join(parts[:depth])
            if sub in present or sub in keep:
                continue
            try:
                os.lstat(f"{self._root}/{sub}")
            except FileNotFoundError:
                return sub
            present.add(sub)
        return None

    def _stage_bytes(self, relpath: str, data: bytes) -> str:
        path = self._stage_path(relpath)
        _write_new(path, data)
        return path

    def _same(self, relpath: str) -> bool:
        """Whether the final path already holds the staged bytes (refuse other bytes)."""
        final = f"{self._root}/{relpath}"
        try:
            mode = os.lstat(final).st_mode
        except FileNotFoundError:
            return False
        if not stat.S_ISREG(mode):
            raise StoreError(f"{relpath}: exists and is not a regular file; import refused")
        if filecmp.cmp(final, self._staged[relpath], shallow=False):
            return True
        raise StoreError(
            f"{relpath}: the store already holds other bytes at this path (an import never "
            "changes a document already in the store); import refused"
        )

    def _move_file(self, staged: str, relpath: str) -> None:
        parent = relpath.rpartition("/")[0]
        if parent not in self._made:
            os.makedirs(f"{self._root}/{parent}", exist_ok=True)
            self._made.add(parent)
        final = f"{self._root}/{relpath}"
        # link, not rename: a file that appeared meanwhile is never replaced.
        try:
            os.link(staged, final)
        except FileExistsError:
            if not filecmp.cmp(final, staged, shallow=False):
                raise StoreError(
                    f"{relpath}: appeared with other bytes during the import"
                ) from None

    def staged_paths(self) -> Iterable[str]:
        return sorted(self._staged)

    def staged_files(self) -> list[Staged]:
        """Everything staged so far, every file written."""
        return [
            Staged(r, p, self._heads.get(r), self._whole.get(r)) for r, p in self._staged.items()
        ]

    def close(self) -> None:
        with deferred_signals():
            shutil.rmtree(self.staging, ignore_errors=True)

    def abort(self) -> None:
        with deferred_signals():
            shutil.rmtree(self.staging, ignore_errors=True)
            if self.created_root:
                shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()
