"""eval-banana run directories (SPEC section 10): model, strict reader and consistency checks.

Everything here is pure or read-only: the artifact stem and bounded-tail rules, the
check-definition digest, a reader that turns a run directory into a frozen ``Run``,
``resolve_definition`` which finds a check's YAML (and referenced script) under a
project root, and ``check_run`` which returns every inconsistency as a ``Finding``
instead of raising at the first one. The exporter and the verifier share these.

Definition YAML is read with a deliberately small parser (``parse_definition_keys``)
that extracts only the top-level ``type``, ``script`` and ``script_path`` keys and
refuses anything outside a documented subset rather than guess.
"""

from __future__ import annotations

import enum
import hashlib
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal, TypeVar

from bundler import canonical
from bundler.digests import CHECK_DEFINITION_TAG, bytes_digest, framed_digest, is_digest
from bundler.errors import InputError

STDOUT_TAIL_CHARS = 2000
LABEL_MAX_CHARS = 40
DEFINITION_COMPONENT = "definition.yaml"
SCRIPT_COMPONENT = "referenced-script"
SCRIPT_UNAVAILABLE_COMPONENT = "referenced-script-unavailable"

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
    banner = (
        f"[eval-banana: stdout truncated to the last {STDOUT_TAIL_CHARS} characters; "
        f"full output at {stdout_file(stem)}]\n"
    )
    return banner + stdout[-STDOUT_TAIL_CHARS:]


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

    @property
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
    directories, when a name is not UTF-8, when report.json is missing, not
    valid JSON, or lacks a field or has one of the wrong type, when the run id
    is not a safe identifier, or when two checks share an id.
    """
    try:
        top = os.lstat(run_dir)
    except OSError as exc:
        raise InputError(f"{run_dir}: run directory cannot be read ({exc.strerror})") from exc
    if stat.S_ISLNK(top.st_mode):
        raise InputError(f"{run_dir}: run directory is a symbolic link (refused, never followed)")
    if not stat.S_ISDIR(top.st_mode):
        raise InputError(f"{run_dir}: run directory is not a directory")

    files: list[str] = []
    directories: list[str] = []
    _inventory(run_dir, PurePosixPath(), files, directories)
    files.sort()
    directories.sort()

    report_path = run_dir / "report.json"
    if "report.json" not in files:
        raise InputError(f"{report_path}: missing (a run directory holds report.json)")
    data = _read_regular(report_path)
    report = canonical.loads(data, source=str(report_path))
    return _parse_report(
        report,
        source=str(report_path),
        files=tuple(files),
        directories=tuple(directories),
        report_digest=bytes_digest(data),
    )


def _inventory(root: Path, rel: PurePosixPath, files: list[str], dirs: list[str]) -> None:
    here = root / rel
    try:
        entries = sorted(os.scandir(here), key=lambda e: e.name)
    except OSError as exc:
        raise InputError(f"{here}: cannot list the run directory ({exc.strerror})") from exc
    for entry in entries:
        try:
            entry.name.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InputError(f"{here}: a file name is not valid UTF-8") from exc
        child = rel / entry.name
        path = root / child
        if entry.is_symlink():
            raise InputError(
                f"{path}: symbolic link in the run directory (refused, never followed)"
            )
        if entry.is_dir(follow_symlinks=False):
            dirs.append(child.as_posix())
            _inventory(root, child, files, dirs)
        elif entry.is_file(follow_symlinks=False):
            files.append(child.as_posix())
        else:
            raise InputError(f"{path}: not a regular file or directory")


def _read_regular(path: Path) -> bytes:
    """Bytes of a regular file, refusing a symbolic link at the last component."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror})") from exc
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise InputError(f"{path}: not a regular file")
        return handle.read()


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
    checks = tuple(
        parse_check(item, source=source, where=f"checks[{index}]")
        for index, item in enumerate(f.list_("checks"))
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
    root = PurePosixPath(project_root)
    src = PurePosixPath(source_path)
    if not root.is_absolute() or not src.is_absolute() or ".." in src.parts:
        return None
    if ".." in root.parts or not src.is_relative_to(root) or src == root:
        return None
    return src.relative_to(root).as_posix()


def resolve_definition(run: Run, check: CheckRecord, project_root: Path) -> Definition:
    """Find ``check``'s YAML (and referenced script) under ``project_root`` and re-hash it.

    The recorded absolute ``source_path`` is mapped through the run's recorded
    ``project_root`` onto ``project_root``; a source path outside the recorded root
    is never resolved (state OUTSIDE_PROJECT). The referenced script is found as
    eval-banana does (``script_path`` relative to the YAML's directory, symbolic
    links resolved) but must stay inside ``project_root``. A missing script gives
    the ``referenced-script-unavailable`` digest, as it did at run time. Never
    raises for a problem with the definition: the state and ``detail`` say it.
    """
    recorded = check.check_definition_sha256

    def result(state: DefinitionState, detail: str | None, **kw: Any) -> Definition:
        base: dict[str, Any] = {
            "check_id": check.check_id,
            "state": state,
            "recorded_digest": recorded,
            "observed_digest": None,
            "yaml_path": None,
            "script_path": None,
            "script_state": ScriptState.NONE,
            "empty_inline_script": False,
            "detail": detail,
        }
        base.update(kw)
        return Definition(**base)

    rel = map_source_path(run.project_root, check.source_path)
    if rel is None:
        return result(
            DefinitionState.OUTSIDE_PROJECT,
            f"source_path {check.source_path!r} is not under project_root {run.project_root!r}",
        )
    root_real = project_root.resolve()
    yaml_real = (project_root / rel).resolve()
    if not yaml_real.is_relative_to(root_real):
        return result(
            DefinitionState.OUTSIDE_PROJECT,
            f"{rel} resolves outside the project root",
            yaml_path=rel,
        )
    try:
        yaml_bytes = yaml_real.read_bytes()
    except FileNotFoundError:
        return result(DefinitionState.MISSING, f"{rel} not found", yaml_path=rel)
    except OSError as exc:
        return result(
            DefinitionState.MISSING, f"{rel} cannot be read ({exc.strerror})", yaml_path=rel
        )
    try:
        keys = parse_definition_keys(yaml_bytes, source=rel)
    except UnsupportedYAML as exc:
        return result(DefinitionState.UNREADABLE, exc.message, yaml_path=rel, yaml_bytes=yaml_bytes)
    if keys.type not in (CheckType.DETERMINISTIC.value, CheckType.HARNESS_JUDGE.value):
        return result(
            DefinitionState.UNREADABLE,
            f"{rel}: type {keys.type!r} is not an eval-banana check type",
            yaml_path=rel,
            yaml_bytes=yaml_bytes,
        )

    script: bytes | Literal["unavailable"] | None = None
    script_rel: str | None = None
    script_state = ScriptState.NONE
    deterministic = keys.type == CheckType.DETERMINISTIC.value
    if deterministic and keys.script_path is not None:
        target = (yaml_real.parent / keys.script_path).resolve()
        if not target.is_relative_to(root_real):
            return result(
                DefinitionState.OUTSIDE_PROJECT,
                f"{rel}: script_path {keys.script_path!r} leaves the project root",
                yaml_path=rel,
                yaml_bytes=yaml_bytes,
            )
        script_rel = target.relative_to(root_real).as_posix()
        script_state = ScriptState.UNAVAILABLE
        script = "unavailable"
        if target.is_file():
            try:
                script = target.read_bytes()
                script_state = ScriptState.PRESENT
            except OSError:
                pass
    observed = definition_digest(yaml_bytes, script)
    state = DefinitionState.MATCHES if observed == recorded else DefinitionState.DIGEST_MISMATCH
    return result(
        state,
        None if state is DefinitionState.MATCHES else f"{rel}: digest {observed} != recorded",
        observed_digest=observed,
        yaml_path=rel,
        script_path=script_rel,
        script_state=script_state,
        empty_inline_script=(
            deterministic and keys.script is ScriptField.EMPTY and bool(keys.script_path)
        ),
        yaml_bytes=yaml_bytes,
        script_bytes=script if isinstance(script, bytes) else None,
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
    files = set(run.files)
    findings: list[Finding] = []
    if "report.md" not in files:
        findings.append(Finding(FindingKind.MISSING_FILE, "report.md: missing", path="report.md"))
    expected_files = {"report.json", "report.md"}
    evidence_dirs: set[str] = set()
    for check in run.checks:
        stem = check.stem
        own = {result_file(stem), stdout_file(stem), stderr_file(stem)}
        if check.check_type is CheckType.HARNESS_JUDGE:
            own.add(prompt_file(stem))
        expected_files |= own
        evidence_dirs.add(f"checks/{stem}")
        findings.extend(_check_files(run_dir, files, check))
        if project_root is not None:
            findings.extend(_check_definition(run, check, project_root))
    findings.extend(_check_totals(run))
    for name in run.files:
        if name in expected_files or any(name.startswith(d + "/") for d in evidence_dirs):
            continue
        findings.append(
            Finding(
                FindingKind.UNEXPECTED_FILE,
                f"{name}: not part of the eval-banana run layout for the recorded checks",
                path=name,
            )
        )
    return findings


def _check_files(run_dir: Path, files: set[str], check: CheckRecord) -> list[Finding]:
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
        try:
            value = canonical.loads(_read_regular(run_dir / own), source=own)
        except InputError as exc:
            out.append(
                Finding(FindingKind.CHECK_FILE_MISMATCH, exc.message, path=own, check_id=cid)
            )
        else:
            if not json_equal(value, check.raw):
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
    full, problem = _read_text(run_dir, files, out_name)
    if problem is not None:
        out.append(Finding(FindingKind.STDOUT_TAIL_MISMATCH, problem, path=out_name, check_id=cid))
    elif bounded_tail(full, stem=stem) != check.stdout:
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
    elif out_name in files and full == "":
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


def _read_text(run_dir: Path, files: set[str], name: str) -> tuple[str, str | None]:
    """(text, None), or ("", problem) when the file is not UTF-8; absent means ""."""
    if name not in files:
        return "", None
    data = _read_regular(run_dir / name)
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


def _check_definition(run: Run, check: CheckRecord, project_root: Path) -> list[Finding]:
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
