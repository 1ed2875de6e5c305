"""Writing output files safely: atomically, never over an existing file or through a link."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from bundler.errors import OutputError


def prepare_output_dir(directory: Path) -> Path:
    """Create ``directory`` or accept it when empty; refuse a symlink or existing contents."""
    if directory.is_symlink():
        raise OutputError(f"{directory}: is a symlink; refusing to write into it")
    if directory.exists():
        if not directory.is_dir():
            raise OutputError(f"{directory}: exists and is not a directory")
        if any(directory.iterdir()):
            raise OutputError(f"{directory}: not empty; existing contents are never overwritten")
        return directory
    if not directory.parent.is_dir():
        raise OutputError(f"{directory.parent}: parent directory does not exist")
    try:
        directory.mkdir()
    except FileExistsError as exc:
        raise OutputError(f"{directory}: appeared while preparing it; refusing to write") from exc
    return directory


def write_new_file(path: Path, data: bytes) -> None:
    """Write ``path`` atomically: a temporary file in the same directory, fsync, then link.

    Raises OutputError when ``path`` exists (it is never replaced) or cannot be written
    (unwritable directory, full disk); nothing is left behind then.
    """
    try:
        fd, temp_name = tempfile.mkstemp(
            dir=path.parent, prefix=f".{path.name}.", suffix=".partial"
        )
    except OSError as exc:
        raise OutputError(f"{path}: cannot create ({exc.strerror or exc})") from exc
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
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
