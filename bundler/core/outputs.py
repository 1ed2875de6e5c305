"""Writing output files safely: atomically, never over an existing file or through a link.

Every output file (archive, sidecar signature, proof, verification and audit records)
starts as a temporary file made by ``create_temp`` beside its target and is linked into
place. It gets the mode any ordinary tool gives a new file, 0666 less the umask (SPEC
section 7): the kernel applies the umask to the mode ``open`` is given, so it is never
read or changed here (reading it means setting it, which races other threads).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from bundler.core.errors import OutputError

PARTIAL_SUFFIX = ".partial"
NEW_FILE_MODE = 0o666  # less the umask, as open(2) applies it
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def create_temp(target: Path) -> tuple[int, Path]:
    """A new, empty temporary file beside ``target``: ``(descriptor open for writing, path)``.

    Named ``.<target name>.<random>.partial`` in the target's directory, created
    exclusively without following a link, with mode 0666 less the umask, so that linking
    it to ``target`` gives a file a colleague can read under umask 022. The caller removes
    it (``unlink``) on every path once it is linked or abandoned. Raises OSError when the
    directory does not accept it.
    """
    for _ in range(100):
        temp = target.parent / f".{target.name}.{secrets.token_hex(6)}{PARTIAL_SUFFIX}"
        try:
            return os.open(temp, _TEMP_FLAGS, NEW_FILE_MODE), temp
        except FileExistsError:
            continue
        except BaseException:
            # A signal (SIGINT, or SIGTERM as the CLI raises it) is acted on as soon as
            # open() returns, before the caller holds the path it would clean up: the
            # file may exist then, and nobody else knows its name. The name is random and
            # was not taken (that is FileExistsError, above), so a file there is ours.
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
    raise FileExistsError(f"{target.parent}: no free temporary name beside {target.name}")


def check_output_dir(directory: Path) -> bool:
    """Whether ``directory`` must be created (False: it exists, empty); raises OutputError
    for a symlink, a non-directory, existing contents or a missing parent. Creates
    nothing: a command checks every output first, then creates (``output_dir``)."""
    if directory.is_symlink():
        raise OutputError(f"{directory}: is a symlink; refusing to write into it")
    if directory.exists():
        if not directory.is_dir():
            raise OutputError(f"{directory}: exists and is not a directory")
        if any(directory.iterdir()):
            raise OutputError(f"{directory}: not empty; existing contents are never overwritten")
        return False
    if not directory.parent.is_dir():
        raise OutputError(f"{directory.parent}: parent directory does not exist")
    return True


def prepare_output_dir(directory: Path) -> Path:
    """Create ``directory`` or accept it when empty; refuse a symlink or existing contents."""
    if not check_output_dir(directory):
        return directory
    try:
        directory.mkdir()
    except FileExistsError as exc:
        raise OutputError(f"{directory}: appeared while preparing it; refusing to write") from exc
    return directory


@contextlib.contextmanager
def output_dir(directory: Path) -> Iterator[Path]:
    """``prepare_output_dir``, undone when the block raises before anything was written
    into it: a refused or failed command leaves no empty directory behind."""
    created = check_output_dir(directory)
    prepare_output_dir(directory)
    try:
        yield directory
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                directory.rmdir()  # only when still empty
        raise


def write_new_file(path: Path, data: bytes | Iterable[bytes]) -> None:
    """Write ``path`` atomically: a temporary file in the same directory, fsync, then link.
    ``data`` is the bytes, or an iterable of chunks (never held whole).

    The file gets mode 0666 less the umask. An interrupt (SIGINT, or SIGTERM, which the
    CLI turns into the same exception) removes the temporary file before it propagates.

    Raises OutputError when ``path`` exists (it is never replaced) or cannot be written
    (unwritable directory, full disk); nothing is left behind then.
    """
    try:
        fd, temp = create_temp(path)
    except OSError as exc:
        raise OutputError(f"{path}: cannot create ({exc.strerror or exc})") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            if isinstance(data, bytes | bytearray | memoryview):
                fh.write(data)
            else:
                for chunk in data:
                    fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(temp, path)
        except FileExistsError as exc:
            raise OutputError(f"{path}: already exists; refusing to overwrite") from exc
    except OSError as exc:
        raise OutputError(f"{path}: cannot write ({exc.strerror or exc})") from exc
    finally:
        temp.unlink(missing_ok=True)


def write_output_dir(directory: Path, files: Mapping[str, bytes]) -> list[Path]:
    """Write each named file into an absent or empty, non-symlink ``directory``."""
    prepare_output_dir(directory)
    written = []
    for name, data in files.items():
        write_new_file(directory / name, data)
        written.append(directory / name)
    return written
