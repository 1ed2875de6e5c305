"""eval-banana check definitions (SPEC section 10): the digest, the YAML subset, the lookup.

``definition_digest`` is the one builder of a check's ``check_definition_sha256`` (the
``CHECK_DEFINITION_TAG`` framed digest of its YAML and referenced script), and
``definition_of`` the one place that finds the script a definition's YAML names
(``script_location``) and re-hashes both: the exporter and both verifiers (a bundle and
a run directory in place) get every observed digest from it. Definition YAML is read
with a deliberately small parser (``parse_definition_keys``) that extracts only the
top-level ``type``, ``script`` and ``script_path`` keys and refuses anything outside a
documented subset rather than guess; ``resolve_definition`` maps a check's recorded
``source_path`` onto a project root and reads its files through ``Beneath``.
"""

from __future__ import annotations

import enum
import functools
import os
import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from bundler.core.digests import CHECK_DEFINITION_TAG, framed_digest
from bundler.core.errors import InputError
from bundler.evalbanana.run import Beneath, CheckRecord, CheckType, Run

DEFINITION_COMPONENT = "definition.yaml"
SCRIPT_COMPONENT = "referenced-script"
SCRIPT_UNAVAILABLE_COMPONENT = "referenced-script-unavailable"


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
        hint = f"; did you mean {project_root / name}?"
    # Begins with the parameter's name, which the command line relabels as its option.
    return (
        f"project: {project_root}: no check definition found under it (expected "
        f"{project_root / first}); the project must be the run's project root, recorded as "
        f"{run.project_root} (a directory named {name!r}){hint}"
    )
