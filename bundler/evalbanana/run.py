"""eval-banana run directories (SPEC section 10): model, strict reader and consistency checks.

Everything here is pure or read-only: the artifact stem and bounded-tail rules, the
check-definition digest, a reader that turns a run directory into a frozen ``Run``,
``resolve_definition`` which finds a check's YAML (and referenced script) under a
project root, and ``check_run`` which returns every inconsistency as a ``Finding``
instead of raising at the first one. The exporter and the verifier share these.

Every file of a run or a project is read through ``Beneath``: descriptor-relative,
``O_NOFOLLOW | O_NONBLOCK``, ``fstat`` before reading, regular files only, each under
its size cap; JSON documents are bounded in their value count before parsing
(``load_json``), and a run in its number of checks.

Definition YAML is read with a deliberately small parser (``parse_definition_keys``)
that extracts only the top-level ``type``, ``script`` and ``script_path`` keys and
refuses anything outside a documented subset rather than guess.
"""

from __future__ import annotations

import codecs
import enum
import errno
import functools
import hashlib
import os
import posixpath
import re
import stat
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal, TypeVar

from bundler.archive.bag_reader import MAX_DOCUMENT_BYTES
from bundler.core import canonical
from bundler.core.digests import CHECK_DEFINITION_TAG, bytes_digest, framed_digest, is_digest
from bundler.core.errors import CanonicalJSONError, InputError
from bundler.evalbook.export import MAX_CASES

STDOUT_TAIL_CHARS = 2000
LABEL_MAX_CHARS = 40
DEFINITION_COMPONENT = "definition.yaml"
SCRIPT_COMPONENT = "referenced-script"
SCRIPT_UNAVAILABLE_COMPONENT = "referenced-script-unavailable"

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


def definition_digest(
    yaml_bytes: bytes, script: bytes | Literal["unavailable"] | None = None
) -> str:
    """``check_definition_sha256`` of a definition (framed digest v1, SPEC section 10).

    ``yaml_bytes`` are the raw bytes of the check's YAML (no normalisation).
    ``script`` is ``None`` for inline-script and harness checks (YAML component
    only), the referenced script's bytes for a deterministic ``script_path``
    check, or ``"unavailable"`` when that script could not be read (an empty
    ``referenced-script-unavailable`` component).
    """
    components: list[tuple[str, bytes]] = [(DEFINITION_COMPONENT, yaml_bytes)]
    if script == "unavailable":
        components.append((SCRIPT_UNAVAILABLE_COMPONENT, b""))
    elif isinstance(script, bytes):
        components.append((SCRIPT_COMPONENT, script))
    return framed_digest(CHECK_DEFINITION_TAG, components)


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


def read_run(run_dir: Path) -> Run:
    """Read and validate a run directory without following any symbolic link.

    Raises InputError when ``run_dir`` is not a real directory, when it (at any
    depth) holds a symbolic link or anything other than regular files and
    directories, when a name is not UTF-8, when report.json is missing, over its
    caps, not valid JSON, or lacks a field or has one of the wrong type, when the
    run id is not a safe identifier, when it records more checks than a bundle may
    hold, or when two checks share an id.
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
    data = read_regular(run_dir, "report.json", what="report.json")
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


class Beneath:
    """Regular files below one directory, opened by descriptor (see above).

    Directory descriptors are kept (at most ``MAX_OPEN_DIRS``) so that reading every
    file of a 20,000-check run costs one ``open`` per file; a directory replaced after
    it was opened is not followed, the descriptor still names the original. Use as a
    context manager, or ``close``.
    """

    MAX_OPEN_DIRS = 64

    def __init__(self, root: Path) -> None:
        self.root = root
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
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def chunks(self, rel: str) -> Generator[bytes, None, None] | None:
        """The chunks of the regular file ``rel`` (``open``, done now), or None when absent."""
        opened = self.open(rel)
        if opened is None:
            return None
        fd = opened[0]
        where = self.root / rel

        def read() -> Generator[bytes, None, None]:
            try:
                while True:
                    try:
                        chunk = os.read(fd, READ_CHUNK)
                    except OSError as exc:
                        raise InputError(f"{where}: cannot be read ({exc.strerror})") from exc
                    if not chunk:
                        return
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


# ---------------------------------------------------------------------------
# Totals and the pass rule


@dataclass(frozen=True)
class Totals:
    """The report-level fields as they follow from per-check statuses."""

    total_checks: int
    passed_checks: int
    failed_checks: int
    errored_checks: int
    points_earned: int
    total_points: int
    percentage: float
    meets_threshold: bool
    run_passed: bool


def recompute_totals(statuses: Sequence[CheckStatus], pass_threshold: float) -> Totals:
    """Counts, points, percentage and verdict from the checks' statuses.

    ``points_earned`` counts passed checks; ``percentage`` is
    ``round(points_earned / total_points * 100, 1)`` evaluated in binary
    floating point exactly as eval-banana does (0.0 for no checks);
    ``meets_threshold`` is ``points_earned / total_points >= pass_threshold``
    (false for no checks); ``run_passed`` also needs no errored check.
    """
    total = len(statuses)
    passed = sum(1 for s in statuses if s is CheckStatus.PASSED)
    failed = sum(1 for s in statuses if s is CheckStatus.FAILED)
    errored = sum(1 for s in statuses if s is CheckStatus.ERROR)
    if total == 0:
        percentage, meets = 0.0, False
    else:
        percentage = round((passed / total) * 100, 1)
        meets = (passed / total) >= pass_threshold
    return Totals(
        total_checks=total,
        passed_checks=passed,
        failed_checks=failed,
        errored_checks=errored,
        points_earned=passed,
        total_points=total,
        percentage=percentage,
        meets_threshold=meets,
        run_passed=meets and errored == 0,
    )


def summary_lines(run_id: str, totals: Totals) -> list[str]:
    """eval-banana's console summary labels (Run ID, Score, Percentage, Passed)."""
    return [
        f"Run ID: {run_id}",
        f"Score: {totals.points_earned}/{totals.total_points}",
        f"Percentage: {totals.percentage:.1f}%",
        f"Passed: {'yes' if totals.run_passed else 'no'}",
    ]


# ---------------------------------------------------------------------------
# Definition YAML: the subset we read


class ScriptField(enum.Enum):
    """What a definition's top-level ``script`` key holds."""

    ABSENT = "absent"  # no key, or null
    EMPTY = "empty"  # the empty string
    NON_EMPTY = "non_empty"


@dataclass(frozen=True)
class DefinitionKeys:
    """The top-level keys of a definition YAML that decide its digest."""

    type: str | None
    script: ScriptField
    script_path: str | None


class UnsupportedYAML(InputError):
    """A definition YAML outside the subset ``parse_definition_keys`` reads."""


_KEY_LINE_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):(?:[ \t]+(.*))?\Z")
_BLOCK_HEADER_RE = re.compile(r"([|>])([+-]?)(?:[ \t]+#.*)?\Z")
_LINE_BREAK_RE = re.compile(r"\r\n|\r|\n")
_WANTED = ("type", "script", "script_path")
_NULLS = ("~", "null", "Null", "NULL")
_PLAIN_FORBIDDEN_START = set("[]{}&*!%@`,?:#'\"|>")


def parse_definition_keys(yaml_bytes: bytes, *, source: str) -> DefinitionKeys:
    """Read ``type``, ``script`` and ``script_path`` from a definition YAML.

    The subset: UTF-8 (an optional BOM and a leading ``---`` line are allowed), a
    block mapping whose keys start in column 0 as ``name:``; comments and blank
    lines anywhere. The three keys read must appear once each, on one line, as a
    plain, single-quoted or double-quoted (no backslash) scalar, or null; ``script``
    may also be a ``|``/``>`` block scalar (only its emptiness is read). Other keys
    may hold anything that stays indented below them; their one-line values that
    open a quote or a flow collection must close on that line. Anything else
    raises UnsupportedYAML naming ``source`` (never a guess that could differ from
    what eval-banana's YAML loader read).
    """
    try:
        text = yaml_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnsupportedYAML(f"{source}: not UTF-8") from exc
    text = text.removeprefix("\ufeff")
    if any(ch in text for ch in "\x85\u2028\u2029"):
        raise UnsupportedYAML(f"{source}: line separators other than LF/CR are not read")
    lines = _LINE_BREAK_RE.split(text)
    found: dict[str, tuple[str, list[str], int]] = {}
    i, n = 0, len(lines)
    first = True
    while i < n:
        line = lines[i]
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            i += 1
            continue
        if first and re.fullmatch(r"---(?:[ \t]+#.*)?", line):
            first = False
            i += 1
            continue
        first = False
        match = _KEY_LINE_RE.match(line)
        if match is None:
            raise UnsupportedYAML(f"{source}: line {i + 1} is not a top-level 'key:' line")
        key, rest = match.group(1), (match.group(2) or "").rstrip(" \t")
        opens_nested = rest == "" or rest.startswith("#")
        j = i + 1
        while j < n and _continues(lines[j], opens_nested):
            j += 1
        continuation = lines[i + 1 : j]
        if key in _WANTED:
            if key in found:
                raise UnsupportedYAML(f"{source}: key {key!r} appears more than once")
            found[key] = (rest, continuation, i + 1)
        else:
            _check_other_value(rest, continuation, source=source, line=i + 1)
        i = j
    kind = _string_value(found, "type", source)
    script_path = _string_value(found, "script_path", source)
    return DefinitionKeys(type=kind, script=_script_value(found, source), script_path=script_path)


def _continues(line: str, opens_nested: bool) -> bool:
    if not line.strip():
        return True
    if line[0] in " \t":
        return True
    # A block sequence may sit in column 0 under a key with no inline value.
    return opens_nested and (line == "-" or line.startswith("- "))


def _check_other_value(rest: str, continuation: list[str], *, source: str, line: int) -> None:
    single_line = not any(item.strip() for item in continuation)
    if rest[:1] in ("'", '"'):
        if not single_line:
            raise UnsupportedYAML(f"{source}: line {line}: multi-line quoted scalar is not read")
        _quoted(rest, source=source, line=line, allow_escapes=True)
    elif rest[:1] in ("[", "{") and not single_line:
        raise UnsupportedYAML(f"{source}: line {line}: multi-line flow collection is not read")


def _quoted(rest: str, *, source: str, line: int, allow_escapes: bool) -> str:
    """The value of a one-line quoted scalar; the rest of the line may be a comment."""
    quote = rest[0]
    out: list[str] = []
    k = 1
    while k < len(rest):
        ch = rest[k]
        if quote == "'" and ch == "'":
            if rest[k + 1 : k + 2] == "'":
                out.append("'")
                k += 2
                continue
            break
        if quote == '"' and ch == "\\":
            if not allow_escapes:
                raise UnsupportedYAML(f"{source}: line {line}: escapes in a quoted value")
            k += 2
            continue
        if quote == '"' and ch == '"':
            break
        out.append(ch)
        k += 1
    else:
        raise UnsupportedYAML(f"{source}: line {line}: unterminated quoted scalar")
    tail = rest[k + 1 :].strip(" \t")
    if tail and not tail.startswith("#"):
        raise UnsupportedYAML(f"{source}: line {line}: text after a quoted scalar")
    if tail and rest[k + 1 : k + 2] not in (" ", "\t"):
        raise UnsupportedYAML(f"{source}: line {line}: comment not separated by a space")
    return "".join(out)


def _inline_scalar(
    key: str, rest: str, continuation: list[str], source: str, line: int
) -> str | None:
    if any(item.strip() for item in continuation):
        raise UnsupportedYAML(f"{source}: line {line}: {key!r} must be a one-line scalar")
    if rest == "" or rest.startswith("#"):
        return None
    if rest[0] in ("'", '"'):
        return _quoted(rest, source=source, line=line, allow_escapes=False)
    if rest[0] in _PLAIN_FORBIDDEN_START or rest == "-" or rest.startswith(("- ", "-\t")):
        raise UnsupportedYAML(f"{source}: line {line}: {key!r} starts with a YAML indicator")
    value = re.split(r"[ \t]#", rest, maxsplit=1)[0].rstrip(" \t")
    if ": " in value or ":\t" in value or value.endswith(":"):
        raise UnsupportedYAML(f"{source}: line {line}: {key!r} holds a ': ' sequence")
    return None if value in _NULLS else value


def _string_value(
    found: dict[str, tuple[str, list[str], int]], key: str, source: str
) -> str | None:
    if key not in found:
        return None
    rest, continuation, line = found[key]
    if rest[:1] in ("|", ">"):
        raise UnsupportedYAML(f"{source}: line {line}: {key!r} as a block scalar is not read")
    return _inline_scalar(key, rest, continuation, source, line)


def _script_value(found: dict[str, tuple[str, list[str], int]], source: str) -> ScriptField:
    if "script" not in found:
        return ScriptField.ABSENT
    rest, continuation, line = found["script"]
    if rest[:1] in ("|", ">"):
        header = _BLOCK_HEADER_RE.match(rest)
        if header is None:
            raise UnsupportedYAML(f"{source}: 'script' block header {rest!r} is not read")
        content = [item for item in continuation if item.strip()]
        if content:
            first = content[0]
            indent = len(first) - len(first.lstrip(" "))
            leading = continuation[: continuation.index(first)]
            # YAML sizes the block's indentation from its widest leading blank line
            # too; a first content line less indented than that ends the block.
            if first[indent : indent + 1] == "\t" or any(
                len(item) > indent or "\t" in item for item in leading
            ):
                raise UnsupportedYAML(
                    f"{source}: line {line}: 'script' block indentation is not read"
                )
            return ScriptField.NON_EMPTY
        # "|+" keeps the trailing blank lines as content: no longer simply empty.
        if header.group(2) == "+" and continuation:
            raise UnsupportedYAML(f"{source}: 'script' is a keep-chomped block of blank lines")
        return ScriptField.EMPTY
    value = _inline_scalar("script", rest, continuation, source, line)
    if value is None:
        return ScriptField.ABSENT
    return ScriptField.EMPTY if value == "" else ScriptField.NON_EMPTY


# ---------------------------------------------------------------------------
# Definitions: mapping source paths onto a project root


class DefinitionState(enum.Enum):
    """Outcome of looking for a check's definition under a project root."""

    MATCHES = "matches"
    MISSING = "definition_missing"
    DIGEST_MISMATCH = "definition_digest_mismatch"
    OUTSIDE_PROJECT = "definition_outside_project"
    UNREADABLE = "definition_unreadable"


class ScriptState(enum.Enum):
    """The referenced-script component of a definition digest."""

    NONE = "none"  # inline script or harness check: YAML component only
    PRESENT = "present"  # referenced-script with the script's bytes
    UNAVAILABLE = "unavailable"  # referenced-script-unavailable (script not readable)


@dataclass(frozen=True)
class Definition:
    """A check's definition as found under a project root.

    ``yaml_path`` is the YAML's path relative to the recorded ``project_root``
    (POSIX); ``script_path`` is the referenced script's resolved path relative to
    the project root, when it is inside it. ``yaml_bytes``/``script_bytes`` are
    the exact bytes that were hashed into ``observed_digest``.
    ``empty_inline_script`` is true when the YAML has ``script: ""`` and a
    ``script_path``: eval-banana then runs the empty inline script while the
    digest covers the referenced one.
    """

    check_id: str
    state: DefinitionState
    recorded_digest: str
    observed_digest: str | None
    yaml_path: str | None
    script_path: str | None
    script_state: ScriptState
    empty_inline_script: bool
    detail: str | None
    yaml_bytes: bytes | None = field(default=None, repr=False)
    script_bytes: bytes | None = field(default=None, repr=False)


def map_source_path(project_root: str, source_path: str) -> str | None:
    """``source_path`` relative to ``project_root`` (POSIX), or None when outside it.

    Purely lexical: both must be absolute POSIX paths, and the relative part may
    not contain ``..`` (eval-banana records resolved paths).
    """
    # String work, not PurePosixPath: this runs once per check, 20,000 times a run.
    if not project_root.startswith("/") or not source_path.startswith("/"):
        return None
    if project_root.startswith("//") or source_path.startswith("//"):
        return None  # POSIX leaves the meaning of a leading "//" to the system
    root = [p for p in project_root.split("/") if p and p != "."]
    src = [p for p in source_path.split("/") if p and p != "."]
    if ".." in root or ".." in src or len(src) <= len(root) or src[: len(root)] != root:
        return None
    return "/".join(src[len(root) :])


class ScriptRef(enum.Enum):
    """What a definition's YAML says about the script its digest covers."""

    NONE = "none"  # inline script or harness check: YAML component only
    AT = "at"  # the file at ``script_location``
    UNREADABLE = "unreadable"  # an empty script_path: nothing can be read
    OUTSIDE = "outside"  # script_path leaves the project root


def script_location(yaml_rel: str, keys: DefinitionKeys) -> tuple[ScriptRef, str | None]:
    """Where the script a check's digest covers lives, relative to the project root.

    The one rule for the exporter and both verifiers (SPEC 10.2: "the file at the path
    its own YAML names"): a deterministic check's ``script_path`` is joined to the
    directory of the YAML at ``yaml_rel`` and normalised lexically (no directory on the
    way may be a link, so this is the path eval-banana resolved). Never a path another
    document names.
    """
    if keys.type != CheckType.DETERMINISTIC.value or keys.script_path is None:
        return ScriptRef.NONE, None
    if keys.script_path == "":
        return ScriptRef.UNREADABLE, None
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(yaml_rel), keys.script_path))
    if joined.startswith("/") or joined == ".." or joined.startswith("../") or joined == ".":
        return ScriptRef.OUTSIDE, None
    return ScriptRef.AT, joined


def definition_of(
    check: CheckRecord,
    yaml_rel: str,
    yaml_bytes: bytes,
    read_script: Callable[[str], bytes | None],
    *,
    where: str = "",
) -> Definition:
    """A check's definition from its YAML bytes; ``read_script(rel)`` gives a script's
    bytes or None when absent. Shared by the in-place and the in-bundle readers, so the
    script is always found by ``script_location``. ``where`` prefixes the paths
    (``data/definitions/`` in a bundle)."""
    recorded = check.check_definition_sha256
    shown_yaml = where + yaml_rel

    def result(state: DefinitionState, detail: str | None, **kw: Any) -> Definition:
        base: dict[str, Any] = {
            "check_id": check.check_id,
            "state": state,
            "recorded_digest": recorded,
            "observed_digest": None,
            "yaml_path": shown_yaml,
            "script_path": None,
            "script_state": ScriptState.NONE,
            "empty_inline_script": False,
            "detail": detail,
            "yaml_bytes": yaml_bytes,
        }
        base.update(kw)
        return Definition(**base)

    try:
        keys = _definition_keys(yaml_bytes, shown_yaml)
    except UnsupportedYAML as exc:
        return result(DefinitionState.UNREADABLE, exc.message)
    if keys.type not in (CheckType.DETERMINISTIC.value, CheckType.HARNESS_JUDGE.value):
        return result(
            DefinitionState.UNREADABLE,
            f"{shown_yaml}: type {keys.type!r} is not an eval-banana check type",
        )
    ref, script_rel = script_location(yaml_rel, keys)
    script: bytes | Literal["unavailable"] | None = None
    script_state = ScriptState.NONE
    if ref is ScriptRef.OUTSIDE:
        return result(
            DefinitionState.OUTSIDE_PROJECT,
            f"{shown_yaml}: script_path {keys.script_path!r} leaves the project root",
        )
    if ref is ScriptRef.UNREADABLE:
        script, script_state = "unavailable", ScriptState.UNAVAILABLE
    elif ref is ScriptRef.AT:
        assert script_rel is not None
        data = read_script(script_rel)
        if data is None:
            script, script_state = "unavailable", ScriptState.UNAVAILABLE
        else:
            script, script_state = data, ScriptState.PRESENT
    observed = definition_digest(yaml_bytes, script)
    state = DefinitionState.MATCHES if observed == recorded else DefinitionState.DIGEST_MISMATCH
    return result(
        state,
        None
        if state is DefinitionState.MATCHES
        else f"{shown_yaml}: digest {observed} != recorded",
        observed_digest=observed,
        script_path=None if script_rel is None else where + script_rel,
        script_state=script_state,
        empty_inline_script=ref is ScriptRef.AT and keys.script is ScriptField.EMPTY,
        script_bytes=script if isinstance(script, bytes) else None,
    )


def _definition_keys(yaml_bytes: bytes, source: str) -> DefinitionKeys:
    # Checks that share a YAML (and the same YAML read twice) are parsed once; only
    # small YAMLs are remembered, so the cache stays under 16 MiB.
    if len(yaml_bytes) > 65_536:
        return parse_definition_keys(yaml_bytes, source=source)
    return _small_definition_keys(yaml_bytes, source)


@functools.lru_cache(maxsize=256)
def _small_definition_keys(yaml_bytes: bytes, source: str) -> DefinitionKeys:
    return parse_definition_keys(yaml_bytes, source=source)


def resolve_definition(run: Run, check: CheckRecord, project_root: Path | Beneath) -> Definition:
    """Find ``check``'s YAML (and referenced script) under ``project_root`` and re-hash it.

    The recorded absolute ``source_path`` is mapped through the run's recorded
    ``project_root`` onto ``project_root``; a source path outside the recorded root
    is never resolved (state OUTSIDE_PROJECT). The script is the file at
    ``script_location``; a missing one gives the ``referenced-script-unavailable``
    digest, as it did at run time. Every file is read by ``Beneath``: a link,
    FIFO, device or directory at the YAML's or the script's path (or on the way to it)
    raises InputError, as does a file over the document cap; any other problem with the
    definition is in the state and ``detail``.
    """
    rel = map_source_path(run.project_root, check.source_path)
    if rel is None:
        return Definition(
            check_id=check.check_id,
            state=DefinitionState.OUTSIDE_PROJECT,
            recorded_digest=check.check_definition_sha256,
            observed_digest=None,
            yaml_path=None,
            script_path=None,
            script_state=ScriptState.NONE,
            empty_inline_script=False,
            detail=(
                f"source_path {check.source_path!r} is not under project_root {run.project_root!r}"
            ),
        )
    if not isinstance(project_root, Beneath):
        with Beneath(project_root) as tree:
            return resolve_definition(run, check, tree)
    yaml_bytes = project_root.read(rel, what="a check definition")
    if yaml_bytes is None:
        return Definition(
            check_id=check.check_id,
            state=DefinitionState.MISSING,
            recorded_digest=check.check_definition_sha256,
            observed_digest=None,
            yaml_path=rel,
            script_path=None,
            script_state=ScriptState.NONE,
            empty_inline_script=False,
            detail=f"{rel} not found",
        )
    return definition_of(
        check,
        rel,
        yaml_bytes,
        lambda script_rel: project_root.read(script_rel, what="a referenced script"),
    )


def no_definition_found(
    run: Run, definitions: Sequence[Definition], project_root: Path
) -> str | None:
    """Why ``project_root`` is probably not the run's project, or None.

    Said when the run has checks whose YAML was looked for under ``project_root`` and not
    one was found there (issue: ``--project`` one level too high or too low). The message
    names the recorded project root, where the first YAML was expected and, when that
    YAML exists one directory down under the recorded root's name, the option to use.
    """
    looked = [d for d in definitions if d.yaml_path is not None]
    if not looked or any(d.yaml_bytes is not None for d in definitions):
        return None
    first = looked[0].yaml_path
    assert first is not None
    name = PurePosixPath(run.project_root).name
    hint = ""
    if name and os.path.lexists(project_root / name / first):
        hint = f"; did you mean --project {project_root / name}?"
    return (
        f"{project_root}: no check definition found under --project (expected "
        f"{project_root / first}); --project must be the run's project root, recorded as "
        f"{run.project_root} (a directory named {name!r}){hint}"
    )


# ---------------------------------------------------------------------------
# Consistency checks


class FindingKind(enum.Enum):
    """What a finding says is wrong."""

    MISSING_FILE = "missing_file"
    UNEXPECTED_FILE = "unexpected_file"
    CHECK_FILE_MISMATCH = "check_file_mismatch"
    SCORE_MISMATCH = "score_mismatch"
    TOTALS_MISMATCH = "totals_mismatch"
    STDOUT_TAIL_MISMATCH = "stdout_tail_mismatch"
    STDERR_MISMATCH = "stderr_mismatch"
    RAW_RESPONSE_PATH_MISMATCH = "raw_response_path_mismatch"
    DEFINITION_MISSING = "definition_missing"
    DEFINITION_DIGEST_MISMATCH = "definition_digest_mismatch"
    DEFINITION_OUTSIDE_PROJECT = "definition_outside_project"
    DEFINITION_UNREADABLE = "definition_unreadable"
    EMPTY_INLINE_SCRIPT = "empty_inline_script_with_script_path"


@dataclass(frozen=True)
class Finding:
    """One inconsistency in a run. ``path`` is run-relative, or project-relative for
    definitions; ``field`` names the report field when there is one."""

    kind: FindingKind
    message: str
    path: str | None = None
    check_id: str | None = None
    field: str | None = None
    expected: str | None = None
    observed: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the kind as its string value)."""
        return {
            "kind": self.kind.value,
            "message": self.message,
            "path": self.path,
            "check_id": self.check_id,
            "field": self.field,
            "expected": self.expected,
            "observed": self.observed,
        }


_DEFINITION_FINDINGS = {
    DefinitionState.MISSING: FindingKind.DEFINITION_MISSING,
    DefinitionState.DIGEST_MISMATCH: FindingKind.DEFINITION_DIGEST_MISMATCH,
    DefinitionState.OUTSIDE_PROJECT: FindingKind.DEFINITION_OUTSIDE_PROJECT,
    DefinitionState.UNREADABLE: FindingKind.DEFINITION_UNREADABLE,
}


def check_run(run: Run, run_dir: Path, project_root: Path | None = None) -> list[Finding]:
    """Every inconsistency between a run's files, its report and (optionally) its project.

    Checks: each ``checks/<stem>.json`` exists and equals its report entry as a
    JSON value; no file outside the eval-banana layout; each score is 1 exactly
    for a passed check; counts, points, percentage, meets_threshold and
    run_passed follow from the statuses and pass_threshold; each stdout tail is
    ``bounded_tail`` of the full stdout file (none means empty); each stderr
    equals its file (none means empty); a harness check's raw_response_path
    names its stdout file. With ``project_root``, each definition is resolved
    and re-hashed (``resolve_definition``) and a YAML with an empty inline
    ``script`` beside a ``script_path`` is reported. Findings come in a fixed
    order: per check in report order, then totals, then unexpected files.
    Raises InputError only when a listed file cannot be read at all.
    """
    with Beneath(run_dir) as tree:
        if project_root is None:
            return _check_run(run, tree, None)
        with Beneath(project_root) as project:
            return _check_run(run, tree, project)


def _check_run(run: Run, run_dir: Beneath, project_root: Beneath | None) -> list[Finding]:
    files = set(run.files)
    findings: list[Finding] = []
    if "report.md" not in files:
        findings.append(Finding(FindingKind.MISSING_FILE, "report.md: missing", path="report.md"))
    expected_files = {"report.json", "report.md"}
    stems: set[str] = set()
    for check in run.checks:
        stem = check.stem
        own = {result_file(stem), stdout_file(stem), stderr_file(stem)}
        if check.check_type is CheckType.HARNESS_JUDGE:
            own.add(prompt_file(stem))
        expected_files |= own
        stems.add(stem)
        findings.extend(_check_files(run_dir, files, check))
        if project_root is not None:
            findings.extend(_check_definition(run, check, project_root))
    findings.extend(_check_totals(run))
    for name in run.files:
        parts = name.split("/", 2)
        if name in expected_files or (
            len(parts) == 3 and parts[0] == "checks" and parts[1] in stems
        ):
            continue
        findings.append(
            Finding(
                FindingKind.UNEXPECTED_FILE,
                f"{name}: not part of the eval-banana run layout for the recorded checks",
                path=name,
            )
        )
    return findings


def _check_files(run_dir: Beneath, files: set[str], check: CheckRecord) -> list[Finding]:
    out: list[Finding] = []
    stem, cid = check.stem, check.check_id
    own = result_file(stem)
    if own not in files:
        out.append(
            Finding(
                FindingKind.MISSING_FILE,
                f"{own}: missing (the result file of check {cid!r})",
                path=own,
                check_id=cid,
            )
        )
    else:
        data = run_dir.read(own, what="a check result")
        if data is None:
            raise InputError(f"{run_dir.root / own}: disappeared while the run was read")
        try:
            value = load_json(data, source=own)
        except CanonicalJSONError as exc:
            out.append(
                Finding(FindingKind.CHECK_FILE_MISMATCH, exc.message, path=own, check_id=cid)
            )
        else:
            # Canonical bytes, not Python equality: true is not 1, and 1.0 is 1 (JCS).
            if canonical.dumps(value) != canonical.dumps(check.raw):
                out.append(
                    Finding(
                        FindingKind.CHECK_FILE_MISMATCH,
                        f"{own}: differs from its entry in report.json",
                        path=own,
                        check_id=cid,
                    )
                )

    want_score = 1 if check.status is CheckStatus.PASSED else 0
    if check.score != want_score:
        out.append(
            Finding(
                FindingKind.SCORE_MISMATCH,
                f"check {cid!r}: score {check.score} with status {check.status.value}",
                path="report.json",
                check_id=cid,
                field="score",
                expected=str(want_score),
                observed=str(check.score),
            )
        )

    out_name = stdout_file(stem)
    tail, empty, problem = _stdout_tail(run_dir, files, out_name, stem)
    if problem is not None:
        out.append(Finding(FindingKind.STDOUT_TAIL_MISMATCH, problem, path=out_name, check_id=cid))
    elif tail != check.stdout:
        out.append(
            Finding(
                FindingKind.STDOUT_TAIL_MISMATCH,
                f"check {cid!r}: stdout is not the bounded tail of {out_name}"
                + ("" if out_name in files else " (absent, so empty)"),
                path=out_name,
                check_id=cid,
                field="stdout",
            )
        )
    elif out_name in files and empty:
        out.append(
            Finding(
                FindingKind.STDOUT_TAIL_MISMATCH,
                f"{out_name}: empty (eval-banana writes it only for non-empty stdout)",
                path=out_name,
                check_id=cid,
            )
        )

    err_name = stderr_file(stem)
    err, problem = _read_text(run_dir, files, err_name)
    if problem is not None:
        out.append(Finding(FindingKind.STDERR_MISMATCH, problem, path=err_name, check_id=cid))
    elif err != check.stderr or (err_name in files and err == ""):
        out.append(
            Finding(
                FindingKind.STDERR_MISMATCH,
                f"check {cid!r}: stderr differs from {err_name}"
                + ("" if err_name in files else " (absent, so empty)"),
                path=err_name,
                check_id=cid,
                field="stderr",
            )
        )

    if check.check_type is CheckType.HARNESS_JUDGE and "raw_response_path" in check.details:
        want = out_name if out_name in files else None
        got = check.details["raw_response_path"]
        if got != want:
            out.append(
                Finding(
                    FindingKind.RAW_RESPONSE_PATH_MISMATCH,
                    f"check {cid!r}: details.raw_response_path is {got!r}, expected {want!r}",
                    path="report.json",
                    check_id=cid,
                    field="details.raw_response_path",
                    expected=want,
                    observed=got if isinstance(got, str) else repr(got),
                )
            )
    return out


def _stdout_tail(
    run_dir: Beneath, files: set[str], name: str, stem: str
) -> tuple[str, bool, str | None]:
    """(bounded tail, empty, None) of a stdout file, streamed whatever its size; absent
    means empty; ("", False, problem) when it is not UTF-8."""
    if name not in files:
        return "", True, None
    chunks = run_dir.chunks(name)
    if chunks is None:
        raise InputError(f"{run_dir.root / name}: disappeared while the run was read")
    try:
        tail, empty = bounded_tail_of(chunks, stem=stem)
    except UnicodeDecodeError:
        return "", False, f"{name}: not valid UTF-8"
    finally:
        chunks.close()
    return tail, empty, None


def _read_text(run_dir: Beneath, files: set[str], name: str) -> tuple[str, str | None]:
    """(text, None), or ("", problem) when the file is not UTF-8; absent means ""."""
    if name not in files:
        return "", None
    data = run_dir.read(name, what="a stderr file")
    if data is None:
        raise InputError(f"{run_dir.root / name}: disappeared while the run was read")
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return "", f"{name}: not valid UTF-8"


def _check_totals(run: Run) -> list[Finding]:
    want = recompute_totals([c.status for c in run.checks], run.pass_threshold)
    out: list[Finding] = []
    for name in (
        "total_checks",
        "passed_checks",
        "failed_checks",
        "errored_checks",
        "points_earned",
        "total_points",
        "percentage",
        "meets_threshold",
        "run_passed",
    ):
        expected, observed = getattr(want, name), getattr(run, name)
        if expected != observed or type(expected) is not type(observed):
            out.append(
                Finding(
                    FindingKind.TOTALS_MISMATCH,
                    f"report.json: {name} is {_show(observed)}, the checks give {_show(expected)}",
                    path="report.json",
                    field=name,
                    expected=_show(expected),
                    observed=_show(observed),
                )
            )
    return out


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def _check_definition(run: Run, check: CheckRecord, project_root: Beneath) -> list[Finding]:
    definition = resolve_definition(run, check, project_root)
    out: list[Finding] = []
    kind = _DEFINITION_FINDINGS.get(definition.state)
    if kind is not None:
        out.append(
            Finding(
                kind,
                f"check {check.check_id!r}: {definition.detail}",
                path=definition.yaml_path,
                check_id=check.check_id,
                expected=definition.recorded_digest,
                observed=definition.observed_digest,
            )
        )
    if definition.empty_inline_script:
        out.append(
            Finding(
                FindingKind.EMPTY_INLINE_SCRIPT,
                f"check {check.check_id!r}: {definition.yaml_path} has an empty inline script "
                "and a script_path; eval-banana ran the empty script while the digest covers "
                f"{definition.script_path}",
                path=definition.yaml_path,
                check_id=check.check_id,
            )
        )
    return out


def json_equal(a: object, b: object) -> bool:
    """Equality of parsed JSON values where ``true`` never equals ``1``.

    Numbers compare by value (``1`` equals ``1.0``, as JSON does not tell them
    apart); objects compare key by key regardless of order.
    """
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return False
