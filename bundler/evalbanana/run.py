"""eval-banana run directories (SPEC section 10): model and strict reader.

Everything here is pure or read-only: the artifact stem and bounded-tail rules and a
reader that turns a run directory into a frozen ``Run``. A check's definition (its
digest, YAML and script) is ``definitions``; the run's totals and consistency findings
are ``results``. The exporter and the verifiers share all three.

Every file of a run or a project is read through ``Beneath``: descriptor-relative,
``O_NOFOLLOW | O_NONBLOCK``, ``fstat`` before reading, regular files only, each under
its size cap; JSON documents are bounded in their value count before parsing
(``load_json``), and a run in its number of checks.
"""

from __future__ import annotations

import codecs
import enum
import errno
import functools
import hashlib
import os
import re
import stat
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from bundler.archive.bag_reader import MAX_DOCUMENT_BYTES
from bundler.archive.reader import MAX_CASES
from bundler.core import canonical
from bundler.core.digests import bytes_digest, is_digest
from bundler.core.errors import InputError

STDOUT_TAIL_CHARS = 2000
LABEL_MAX_CHARS = 40

# Caps (SPEC 5, Resources). Every document read here is one the bundle's verifier keeps
# in memory, so it gets the bundle reader's document cap and the same bound on its
# values before parsing (``canonical.value_bound`` against ``canonical.MAX_VALUES``); a
# run may hold no more checks than the case tree may hold cases.
MAX_CHECKS = MAX_CASES
MAX_JSON_VALUES = canonical.MAX_VALUES
READ_CHUNK = 1024 * 1024

_LABEL_RUN_RE = re.compile(r"[^a-zA-Z0-9._-]+")
_RUN_ID_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
_E = TypeVar("_E", bound=enum.Enum)


class CheckType(enum.Enum):
    """``check_type`` of a recorded check."""

    DETERMINISTIC = "deterministic"
    HARNESS_JUDGE = "harness_judge"


class CheckStatus(enum.Enum):
    """``status`` of a recorded check."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"


# ---------------------------------------------------------------------------
# Naming rules


def check_stem(check_id: str) -> str:
    """The artifact stem eval-banana gives a check: label, ``-``, sha256 hex of the id.

    The label is the id with every run of characters outside ``[a-zA-Z0-9._-]``
    replaced by ``_``, ``.`` and ``_`` stripped from both ends, cut to 40
    characters, or ``check`` when nothing is left.
    """
    label = _LABEL_RUN_RE.sub("_", check_id).strip("._")[:LABEL_MAX_CHARS] or "check"
    return f"{label}-{hashlib.sha256(check_id.encode('utf-8')).hexdigest()}"


def stdout_file(stem: str) -> str:
    """Run-relative path of a check's full stdout file."""
    return f"checks/{stem}.stdout.txt"


def stderr_file(stem: str) -> str:
    """Run-relative path of a check's stderr file."""
    return f"checks/{stem}.stderr.txt"


def result_file(stem: str) -> str:
    """Run-relative path of a check's result object."""
    return f"checks/{stem}.json"


def prompt_file(stem: str) -> str:
    """Run-relative path of a harness check's judge prompt."""
    return f"checks/{stem}.prompt.txt"


def bounded_tail(stdout: str, *, stem: str) -> str:
    """What report.json records for a check's full ``stdout``.

    At most 2,000 characters (code points, not bytes) are kept whole; a longer
    stdout becomes a banner naming ``checks/<stem>.stdout.txt`` followed by its
    last 2,000 characters.
    """
    if len(stdout) <= STDOUT_TAIL_CHARS:
        return stdout
    return _banner(stem) + stdout[-STDOUT_TAIL_CHARS:]


def _banner(stem: str) -> str:
    return (
        f"[eval-banana: stdout truncated to the last {STDOUT_TAIL_CHARS} characters; "
        f"full output at {stdout_file(stem)}]\n"
    )


def bounded_tail_of(chunks: Iterator[bytes], *, stem: str) -> tuple[str, bool]:
    """``bounded_tail`` of the UTF-8 text in ``chunks``, and whether it was empty.

    Streams: memory holds one chunk and the last 2,000 characters, whatever the size
    of the stdout file. Raises UnicodeDecodeError when the bytes are not UTF-8.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    tail = ""
    count = 0
    for chunk in chunks:
        text = decoder.decode(chunk)
        count += len(text)
        tail = (tail + text)[-STDOUT_TAIL_CHARS:]
    text = decoder.decode(b"", final=True)
    count += len(text)
    tail = (tail + text)[-STDOUT_TAIL_CHARS:]
    return (tail if count <= STDOUT_TAIL_CHARS else _banner(stem) + tail), count == 0


# ---------------------------------------------------------------------------
# Run model and reader


@dataclass(frozen=True)
class CheckRecord:
    """One entry of report.json's ``checks``; ``raw`` is the parsed JSON object."""

    check_id: str
    check_type: CheckType
    check_definition_sha256: str
    description: str
    source_path: str
    tags: tuple[str, ...]
    status: CheckStatus
    score: int
    started_at: str
    completed_at: str
    duration_ms: int
    reason: str | None
    error_detail: str | None
    stdout: str
    stderr: str
    exit_code: int | None
    details: Mapping[str, Any] = field(repr=False)
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @functools.cached_property
    def stem(self) -> str:
        """The artifact stem of this check (``check_stem(check_id)``)."""
        return check_stem(self.check_id)


@dataclass(frozen=True)
class Run:
    """A run directory: report.json's fields plus the inventory of the directory.

    ``files`` and ``directories`` are every regular file and directory below the
    run directory, as relative POSIX paths sorted by code point (which is also
    UTF-8 byte order). ``report_digest`` is the sha256 of report.json's bytes.
    """

    schema_version: int
    run_id: str
    project_root: str
    output_dir: str
    started_at: str
    completed_at: str
    duration_ms: int
    total_checks: int
    passed_checks: int
    failed_checks: int
    errored_checks: int
    points_earned: int
    total_points: int
    percentage: float
    pass_threshold: float
    meets_threshold: bool
    run_passed: bool
    checks: tuple[CheckRecord, ...]
    files: tuple[str, ...]
    directories: tuple[str, ...]
    report_digest: str

    def check(self, check_id: str) -> CheckRecord:
        """The check with this id; KeyError when the run has none."""
        for record in self.checks:
            if record.check_id == check_id:
                return record
        raise KeyError(check_id)


def read_run(run_dir: Path, log: ReadLog | None = None) -> Run:
    """Read and validate a run directory without following any symbolic link.

    Raises InputError when ``run_dir`` is not a real directory, when it (at any
    depth) holds a symbolic link or anything other than regular files and
    directories, when a name is not UTF-8, when report.json is missing, over its
    caps, not valid JSON, or lacks a field or has one of the wrong type, when the
    run id is not a safe identifier, when it records more checks than a bundle may
    hold, or when two checks share an id. With ``log``, report.json's read is noted.
    """
    try:
        top = os.lstat(run_dir)
    except OSError as exc:
        raise InputError(f"{run_dir}: run directory cannot be read ({exc.strerror})") from exc
    if stat.S_ISLNK(top.st_mode):
        raise InputError(f"{run_dir}: run directory is a symbolic link (refused, never followed)")
    if not stat.S_ISDIR(top.st_mode):
        raise InputError(f"{run_dir}: run directory is not a directory")

    files, directories = _inventory(run_dir)
    report_path = run_dir / "report.json"
    if "report.json" not in files:
        raise InputError(f"{report_path}: missing (a run directory holds report.json)")
    with Beneath(run_dir, log) as tree:
        data = tree.read("report.json", what="report.json")
    if data is None:
        raise InputError(f"{report_path}: missing (a run directory holds report.json)")
    report = load_json(data, source=str(report_path))
    return _parse_report(
        report,
        source=str(report_path),
        files=tuple(files),
        directories=tuple(directories),
        report_digest=bytes_digest(data),
    )


def _inventory(root: Path) -> tuple[list[str], list[str]]:
    """Every regular file and directory below ``root``, sorted; iterative, so depth is free."""
    files: list[str] = []
    dirs: list[str] = []
    base = os.fspath(root)
    pending = [""]
    while pending:
        rel = pending.pop()
        here = os.path.join(base, rel) if rel else base
        try:
            with os.scandir(here) as listing:
                entries = list(listing)
        except OSError as exc:
            raise InputError(f"{here}: cannot list the run directory ({exc.strerror})") from exc
        for entry in entries:
            try:
                entry.name.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise InputError(f"{here}: a file name is not valid UTF-8") from exc
            child = f"{rel}/{entry.name}" if rel else entry.name
            if entry.is_symlink():
                raise InputError(
                    f"{root / child}: symbolic link in the run directory (refused, never followed)"
                )
            if entry.is_dir(follow_symlinks=False):
                dirs.append(child)
                pending.append(child)
            elif entry.is_file(follow_symlinks=False):
                files.append(child)
            else:
                kind = _kind(entry.stat(follow_symlinks=False).st_mode)
                raise InputError(
                    f"{root / child}: not a regular file or directory ({kind}; refused)"
                )
    files.sort()
    dirs.sort()
    return files, dirs


# ---------------------------------------------------------------------------
# Reading files: one way, for the run directory and the project alike
#
# Each directory component is opened relative to its parent with O_NOFOLLOW and
# O_DIRECTORY, the file itself with O_NOFOLLOW and O_NONBLOCK (opening a FIFO must not
# block), then fstat on the descriptor decides: a regular file is read, its size checked
# against the cap before a byte is read; anything else is refused with one line naming
# the file. A path that does not exist is None, for the caller to decide.

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _O_CLOEXEC


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _refuse_entry(where: Path, name: str, dir_fd: int, exc: OSError) -> InputError | None:
    """The error for a component that could not be opened, or None when it is absent."""
    if exc.errno == errno.ENOENT:
        return None
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return (
            None
            if exc.errno == errno.ENOTDIR
            else InputError(f"{where}: cannot be read ({exc.strerror})")
        )
    if stat.S_ISLNK(mode):
        return InputError(f"{where}: is a symbolic link (refused, never followed)")
    if exc.errno == errno.ENOTDIR:
        return None  # a file where a directory of the path should be: the path is absent
    return InputError(f"{where}: cannot be read ({exc.strerror})")


@dataclass(frozen=True)
class Seen:
    """A file as one read saw it whole: its size and the sha256 hex of its bytes."""

    size: int
    sha256: str


class ChangedDuringRead(InputError):
    """A file read twice by one command gave other bytes the second time (exit 3)."""


class ReadLog:
    """What the ``Beneath`` readers of one command read whole, by relative path.

    The first whole read of a file is noted (``Seen``); every later one under the same
    log must give the same size and sha256, or ``ChangedDuringRead`` names the file:
    "<file>: changed during <during>; <verb> again". So a command that reads a file
    twice (export-eb checks the run, then reads it again to write it; verify in place
    checks it, then hashes the check files for the case tree) decides and reports on
    one set of bytes (threat model: files changed during the command). ``during`` and
    ``verb`` name the command in that message ("export", "export"; "verification",
    "verify").
    """

    def __init__(self, during: str, verb: str) -> None:
        self.during = during
        self.verb = verb
        self._seen: dict[str, Seen] = {}

    def note(self, where: Path, rel: str, size: int, sha256_hex: str) -> None:
        """Note a whole read of ``rel`` (below ``where``); raises ChangedDuringRead when
        an earlier read of it saw other bytes."""
        seen = Seen(size, sha256_hex)
        known = self._seen.setdefault(rel, seen)
        if known != seen:
            raise ChangedDuringRead(
                f"{where / rel}: changed during {self.during}; {self.verb} again"
            )

    def get(self, rel: str) -> Seen | None:
        """How ``rel`` was seen, or None when it was not read whole under this log."""
        return self._seen.get(rel)


class Beneath:
    """Regular files below one directory, opened by descriptor (see above).

    Directory descriptors are kept (at most ``MAX_OPEN_DIRS``) so that reading every
    file of a 20,000-check run costs one ``open`` per file; a directory replaced after
    it was opened is not followed, the descriptor still names the original. Use as a
    context manager, or ``close``. With ``log``, every file read whole (``read``, or
    ``chunks`` to its end) is noted there with its size and sha256, and a second read
    giving other bytes raises ``ChangedDuringRead``.
    """

    MAX_OPEN_DIRS = 64

    def __init__(self, root: Path, log: ReadLog | None = None) -> None:
        self.root = root
        self.log = log
        self._dirs: dict[str, int] = {}

    def __enter__(self) -> Beneath:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for fd in self._dirs.values():
            os.close(fd)
        self._dirs.clear()

    def _dir(self, reldir: str) -> int | None:
        fd = self._dirs.get(reldir)
        if fd is not None:
            return fd
        if reldir == "":
            try:
                fd = os.open(self.root, _DIR_FLAGS)
            except OSError as exc:
                raise InputError(
                    f"{self.root}: cannot be opened as a directory ({exc.strerror})"
                ) from exc
        else:
            parent, _, name = reldir.rpartition("/")
            parent_fd = self._dir(parent)
            if parent_fd is None:
                return None
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
            except OSError as exc:
                error = _refuse_entry(self.root / reldir, name, parent_fd, exc)
                if error is None:
                    return None
                raise error from exc
        if len(self._dirs) >= self.MAX_OPEN_DIRS:
            root_fd = self._dirs.pop("", None)
            self.close()
            if root_fd is not None:
                self._dirs[""] = root_fd
        self._dirs[reldir] = fd
        return fd

    def open(self, rel: str) -> tuple[int, int] | None:
        """(descriptor, size) of the regular file ``rel`` (POSIX, relative), or None.

        Returns None when the file (or a directory on its way) does not exist. Raises
        InputError naming the file when the root cannot be opened as a directory, when
        any component is a symbolic link, or the file is a FIFO, device, socket or
        directory, or cannot be read. The caller closes the descriptor.
        """
        reldir, _, name = rel.rpartition("/")
        dir_fd = self._dir(reldir)
        if dir_fd is None:
            return None
        try:
            file_fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            error = _refuse_entry(self.root / rel, name, dir_fd, exc)
            if error is None:
                return None
            raise error from exc
        info = os.fstat(file_fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(file_fd)
            raise InputError(
                f"{self.root / rel}: {_kind(info.st_mode)}, not a regular file (refused)"
            )
        return file_fd, info.st_size

    def read(self, rel: str, *, what: str, cap: int = MAX_DOCUMENT_BYTES) -> bytes | None:
        """The bytes of the regular file ``rel`` (``open``), or None when absent.

        Raises InputError, before reading, when the file is over ``cap`` bytes (``what``
        names the document in the message), and when it grows past the cap while read.
        """
        opened = self.open(rel)
        if opened is None:
            return None
        fd, size = opened
        try:
            if size > cap:
                raise InputError(
                    f"{self.root / rel}: {size} bytes, over the {cap}-byte cap for {what} "
                    "(SPEC 5, Resources; refused before reading)"
                )
            parts: list[bytes] = []
            got = 0
            while True:
                try:
                    chunk = os.read(fd, max(READ_CHUNK, size + 1 - got))
                except OSError as exc:
                    raise InputError(f"{self.root / rel}: cannot be read ({exc.strerror})") from exc
                if not chunk:
                    break
                got += len(chunk)
                if got > cap:
                    raise InputError(
                        f"{self.root / rel}: grew over the {cap}-byte cap for {what} while read"
                    )
                parts.append(chunk)
        finally:
            os.close(fd)
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        if self.log is not None:
            self.log.note(self.root, rel, len(data), hashlib.sha256(data).hexdigest())
        return data

    def chunks(self, rel: str) -> Generator[bytes, None, None] | None:
        """The chunks of the regular file ``rel`` (``open``, done now), or None when absent."""
        opened = self.open(rel)
        if opened is None:
            return None
        fd = opened[0]
        where = self.root / rel
        log = self.log
        root = self.root

        def read() -> Generator[bytes, None, None]:
            digest = hashlib.sha256()
            size = 0
            try:
                while True:
                    try:
                        chunk = os.read(fd, READ_CHUNK)
                    except OSError as exc:
                        raise InputError(f"{where}: cannot be read ({exc.strerror})") from exc
                    if not chunk:
                        if log is not None:
                            log.note(root, rel, size, digest.hexdigest())
                        return
                    if log is not None:
                        digest.update(chunk)
                        size += len(chunk)
                    yield chunk
            finally:
                os.close(fd)

        return read()


def read_regular(
    root: Path | Beneath, rel: str, *, what: str, cap: int = MAX_DOCUMENT_BYTES
) -> bytes | None:
    """``Beneath(root).read(rel, ...)``: one regular file's bytes, or None when absent."""
    if isinstance(root, Beneath):
        return root.read(rel, what=what, cap=cap)
    with Beneath(root) as tree:
        return tree.read(rel, what=what, cap=cap)


def load_json(data: bytes, *, source: str) -> Any:
    """Parse a JSON document of a run after bounding its values (``MAX_JSON_VALUES``).

    The bound is the bundle reader's (``canonical.value_bound``), so a document refused
    here is one a bundle could not hold either. Raises InputError naming ``source`` and
    the rule when it is over the cap, CanonicalJSONError when the bytes are not JSON.
    """
    if canonical.value_bound(data) > MAX_JSON_VALUES:
        raise InputError(
            f"{source}: more than {MAX_JSON_VALUES} JSON values "
            "(SPEC 5, Resources; refused before parsing)"
        )
    return canonical.loads(data, source=source)


class _Fields:
    """Typed access to one JSON object; every error names the file and the field."""

    def __init__(self, obj: object, *, source: str, where: str) -> None:
        if not isinstance(obj, dict):
            raise InputError(f"{source}: {where or 'top level'} must be a JSON object")
        self.obj: dict[str, Any] = obj
        self.source = source
        self.where = where

    def _name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def _get(self, key: str) -> Any:
        if key not in self.obj:
            raise InputError(f"{self.source}: missing field {self._name(key)!r}")
        return self.obj[key]

    def _wrong(self, key: str, want: str) -> InputError:
        return InputError(f"{self.source}: field {self._name(key)!r} must be {want}")

    def str_(self, key: str) -> str:
        value = self._get(key)
        if not isinstance(value, str):
            raise self._wrong(key, "a string")
        return value

    def opt_str(self, key: str) -> str | None:
        value = self._get(key)
        if value is not None and not isinstance(value, str):
            raise self._wrong(key, "a string or null")
        return value

    def int_(self, key: str) -> int:
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._wrong(key, "an integer")
        return value

    def opt_int(self, key: str) -> int | None:
        value = self._get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise self._wrong(key, "an integer or null")
        return value

    def number(self, key: str) -> float:
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._wrong(key, "a number")
        return float(value)

    def bool_(self, key: str) -> bool:
        value = self._get(key)
        if not isinstance(value, bool):
            raise self._wrong(key, "true or false")
        return value

    def str_list(self, key: str) -> tuple[str, ...]:
        value = self._get(key)
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self._wrong(key, "a list of strings")
        return tuple(value)

    def obj_(self, key: str) -> dict[str, Any]:
        value = self._get(key)
        if not isinstance(value, dict):
            raise self._wrong(key, "an object")
        return value

    def list_(self, key: str) -> list[Any]:
        value = self._get(key)
        if not isinstance(value, list):
            raise self._wrong(key, "a list")
        return value

    def choice(self, key: str, enum_type: type[_E]) -> _E:
        value = self._get(key)
        for member in enum_type:
            if member.value == value:
                return member
        allowed = ", ".join(str(member.value) for member in enum_type)
        raise self._wrong(key, f"one of {allowed}")


def parse_check(obj: object, *, source: str, where: str = "") -> CheckRecord:
    """Validate one check object (report.json entry or checks/<stem>.json).

    Raises InputError naming ``source`` and the field when a field is missing or
    has the wrong type. Unknown extra fields are accepted (they stay in ``raw``).
    """
    f = _Fields(obj, source=source, where=where)
    digest = f.str_("check_definition_sha256")
    if not is_digest(digest):
        raise f._wrong("check_definition_sha256", "sha256: and 64 lowercase hex digits")
    check_id = f.str_("check_id")
    if not check_id:
        raise f._wrong("check_id", "a non-empty string")
    score = f.int_("score")
    if score not in (0, 1):
        raise f._wrong("score", "0 or 1")
    duration = f.int_("duration_ms")
    return CheckRecord(
        check_id=check_id,
        check_type=f.choice("check_type", CheckType),
        check_definition_sha256=digest,
        description=f.str_("description"),
        source_path=f.str_("source_path"),
        tags=f.str_list("tags"),
        status=f.choice("status", CheckStatus),
        score=score,
        started_at=f.str_("started_at"),
        completed_at=f.str_("completed_at"),
        duration_ms=duration,
        reason=f.opt_str("reason"),
        error_detail=f.opt_str("error_detail"),
        stdout=f.str_("stdout"),
        stderr=f.str_("stderr"),
        exit_code=f.opt_int("exit_code"),
        details=f.obj_("details"),
        raw=f.obj,
    )


def _parse_report(
    report: object,
    *,
    source: str,
    files: tuple[str, ...],
    directories: tuple[str, ...],
    report_digest: str,
) -> Run:
    f = _Fields(report, source=source, where="")
    if f.int_("schema_version") != 1:
        raise f._wrong("schema_version", "1 (the only eval-banana report schema known)")
    run_id = f.str_("run_id")
    if _RUN_ID_RE.match(run_id) is None or run_id in (".", ".."):
        raise f._wrong("run_id", "an identifier matching [A-Za-z0-9][A-Za-z0-9._-]{0,127}")
    items = f.list_("checks")
    if len(items) > MAX_CHECKS:
        raise InputError(
            f"{source}: {len(items)} checks, more than the {MAX_CHECKS} cases a bundle's "
            "case tree may hold (SPEC 5, Resources)"
        )
    checks = tuple(
        parse_check(item, source=source, where=f"checks[{index}]")
        for index, item in enumerate(items)
    )
    seen: set[str] = set()
    for record in checks:
        if record.check_id in seen:
            raise InputError(f"{source}: check_id {record.check_id!r} appears more than once")
        seen.add(record.check_id)
    return Run(
        schema_version=1,
        run_id=run_id,
        project_root=f.str_("project_root"),
        output_dir=f.str_("output_dir"),
        started_at=f.str_("started_at"),
        completed_at=f.str_("completed_at"),
        duration_ms=f.int_("duration_ms"),
        total_checks=f.int_("total_checks"),
        passed_checks=f.int_("passed_checks"),
        failed_checks=f.int_("failed_checks"),
        errored_checks=f.int_("errored_checks"),
        points_earned=f.int_("points_earned"),
        total_points=f.int_("total_points"),
        percentage=f.number("percentage"),
        pass_threshold=f.number("pass_threshold"),
        meets_threshold=f.bool_("meets_threshold"),
        run_passed=f.bool_("run_passed"),
        checks=checks,
        files=files,
        directories=directories,
        report_digest=report_digest,
    )
