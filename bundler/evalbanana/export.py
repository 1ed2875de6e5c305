"""Export one eval-banana run directory into an eval-banana bundle (SPEC sections 10.1, 4.1, 11).

The run directory is read strictly (``evalbanana.read_run``: no symbolic link is
followed, report.json must parse) and must be a consistent eval-banana run
(``results.check_run`` finds nothing); otherwise the export is refused with an input
error. Each check's definition is looked up under ``--project`` through the recorded
``project_root`` (``definitions.resolve_definition``): a definition that recomputes to the
recorded ``check_definition_sha256`` is bundled with its referenced script, any other is
listed under ``unavailable`` and left out.

Member order (the verifier does not depend on it): the top directory
``eval-banana-bundle-<run_id>/``, then ``data/run/<path>`` for every file of the run
directory in byte order of the path, then ``data/definitions/<path>`` for every bundled
YAML and script in byte order, then ``data/bundle.json``, then the tag files bagit.txt,
bag-info.txt, manifest-sha256.txt, bundle-head.json (and bundle-head.json.sig),
tagmanifest-sha256.txt. Each directory is written just before its first member; empty
directories of the run (eval-banana's empty evidence directories) are not kept.
Nothing is written at the target name until the archive is complete and fsynced.

Every byte written is one the export checked: the definitions are written from the
very bytes hashed when they were resolved, and each run file read again to be written
must have the size and sha256 the consistency check saw (``_checked_run_file``); a file
changed in between abandons the export ("changed during export; export again").
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, assert_never

from bundler.core import canonical
from bundler.core.digests import json_digest
from bundler.core.errors import InputError, StrictFailure
from bundler.core.version import TOOL_NAME, __version__
from bundler.evalbanana import run as eb
from bundler.evalbanana.budget import BundleBudget, BundleRefusal, run_file_sizes
from bundler.evalbanana.definitions import (
    Definition,
    DefinitionState,
    ScriptState,
    no_definition_found,
    resolve_definition,
)
from bundler.evalbanana.results import check_run
from bundler.evalbook.bagwriter import (
    DEFAULT_LEVEL,
    BagWriter,
    Progress,
    check_not_before,
    format_timestamp,
    resolve_output,
    write_bag_archive,
    write_tag_files,
)
from bundler.trust.merkle import TreeBuilder

BUNDLE_SCHEMA = "evalbook.eval_banana_bundle.v1"
RUN_PREFIX = "data/run/"
DEFINITIONS_PREFIX = "data/definitions/"
REPORT_MEMBER = RUN_PREFIX + "report.json"
DEFINITION_KIND = "definition"
# Limits the strict archive reader enforces on every member name (SPEC section 5).
_MAX_NAME_BYTES = 4096
_MAX_SEGMENT_BYTES = 255


class UnavailableReason(StrEnum):
    """Why a definition is listed instead of bundled (SPEC section 10.1)."""

    DEFINITION_MISSING = "definition_missing"
    DEFINITION_DIGEST_MISMATCH = "definition_digest_mismatch"


@dataclass(frozen=True)
class EbExportConfig:
    """What ``export_eb_bundle`` needs; ``sign`` signs the bundle-head.json bytes."""

    run_dir: Path
    project_root: Path
    exported_at: datetime
    out: Path | None = None
    level: int = DEFAULT_LEVEL
    strict: bool = False
    sign: Callable[[bytes], str] | None = None
    exported_at_source: str = "--exported-at"  # what gave exported_at, for messages


@dataclass(frozen=True)
class EbExportResult:
    """The archive written and the bundle.json it holds."""

    path: Path
    run_id: str
    bundle_digest: str
    report_digest: str
    archive_sha256: str
    archive_size: int
    bundle: dict[str, Any] = field(repr=False)  # the whole bundle.json: not for a repr

    def to_json(self) -> dict[str, Any]:
        """The object ``export-eb --json`` prints (schemas/export-eb-summary.schema.json)."""
        return self.summary()

    def summary(self) -> dict[str, Any]:
        """The machine-readable summary printed by ``export-eb --json``."""
        bundle = self.bundle
        by_reason: dict[str, int] = {}
        for item in bundle["unavailable"]:
            by_reason[item["reason"]] = by_reason.get(item["reason"], 0) + 1
        paths = [f["path"] for f in bundle["files"]]
        return {
            "schema": "evalbook.export_eb_summary.v1",
            "path": str(self.path),
            "run_id": self.run_id,
            "bundle_digest": self.bundle_digest,
            "report_digest": self.report_digest,
            "archive_sha256": self.archive_sha256,
            "archive_size": self.archive_size,
            "exported_at": bundle["exported_at"],
            "run_passed": bundle["run"]["run_passed"],
            "counts": {
                "checks": len(bundle["checks"]),
                "run_files": sum(1 for p in paths if p.startswith(RUN_PREFIX)),
                "definition_files": sum(1 for p in paths if p.startswith(DEFINITIONS_PREFIX)),
                "unavailable": len(bundle["unavailable"]),
            },
            "unavailable_by_reason": dict(sorted(by_reason.items())),
        }


def archive_name(run_id: str) -> str:
    """Default file name of the archive of run ``run_id``."""
    return f"eval-banana-bundle-{run_id}.tar.zst"


def top_directory(run_id: str) -> str:
    """The single top-level directory of the archive of run ``run_id``."""
    return f"eval-banana-bundle-{run_id}"


def result_member(stem: str) -> str:
    """Bag path of a check's result file."""
    return RUN_PREFIX + eb.result_file(stem)


# --------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class _Plan:
    """Every decision of the export, made before a byte is written."""

    run: eb.Run
    definitions: dict[str, bytes]  # project-relative path -> the exact bytes hashed
    checks: list[dict[str, Any]]
    unavailable: list[dict[str, Any]]
    run_sizes: dict[str, int]  # run-relative path -> its size when planned
    # The run files the consistency check read whole, with their size and sha256: the
    # bytes export writes must be these (``_checked_run_file``).
    seen: eb.ReadLog | None = None


def _listing(definition: Definition) -> dict[str, Any] | None:
    """The unavailable entry for a definition that is not bundled, or None."""
    state = definition.state
    if state is DefinitionState.MATCHES:
        return None
    if state is DefinitionState.DIGEST_MISMATCH:
        reason, detail = UnavailableReason.DEFINITION_DIGEST_MISMATCH, definition.observed_digest
    elif state is DefinitionState.MISSING:
        reason, detail = UnavailableReason.DEFINITION_MISSING, definition.detail
    elif state is DefinitionState.OUTSIDE_PROJECT:
        reason, detail = (
            UnavailableReason.DEFINITION_MISSING,
            f"outside the project: {definition.detail}",
        )
    elif state is DefinitionState.UNREADABLE:
        reason, detail = UnavailableReason.DEFINITION_MISSING, f"unreadable: {definition.detail}"
    else:
        assert_never(state)
    return {
        "kind": DEFINITION_KIND,
        "ref": definition.check_id,
        "digest": definition.recorded_digest,
        "reason": reason.value,
        "detail": detail,
    }


def _keep_definition(definitions: dict[str, bytes], rel: str, data: bytes) -> str:
    """Record ``data`` at ``rel`` once; the same path must never carry two contents."""
    known = definitions.setdefault(rel, data)
    if known != data:
        raise InputError(f"{rel}: changed while the definitions were read; export again")
    return DEFINITIONS_PREFIX + rel


def plan_export(run_dir: Path, project_root: Path) -> _Plan:
    """Read the run, refuse an inconsistent one, and decide every definition.

    Raises InputError when the project root is not a directory, when the run
    directory cannot be read strictly (``read_run``), when ``check_run`` finds any
    inconsistency in it (the first is named, with the count of the others), when no
    definition at all is found under the project root (``no_definition_found``), and
    for anything the bundle's own verifier would reject: a run file over the document
    cap, a definition with an empty inline script beside a ``script_path``.
    """
    if project_root.is_symlink() or not project_root.is_dir():
        raise InputError(f"{project_root}: project root is not a directory")
    seen = eb.ReadLog("export", "export")
    run = eb.read_run(run_dir, seen)
    run_sizes = run_file_sizes(run, run_dir)
    findings = check_run(run, run_dir, log=seen)
    if findings:
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        raise InputError(
            f"{run_dir}: not a consistent eval-banana run: {findings[0].message}{more}"
        )
    with eb.Beneath(project_root) as project:
        resolved = []
        for check in run.checks:
            definition = resolve_definition(run, check, project)
            _refuse_empty_inline_script(project.root, definition)
            resolved.append(definition)
    return plan_from(run, run_sizes, resolved, project_root, seen)


def plan_from(
    run: eb.Run,
    run_sizes: dict[str, int],
    resolved: list[Definition],
    project_root: Path,
    seen: eb.ReadLog | None = None,
) -> _Plan:
    """The plan of a consistent run whose definitions are resolved (one per check, in
    report order): each check's entry, its definition bundled or listed; ``seen``, what
    the consistency check read. Raises InputError when no definition at all is found
    under the project root."""
    files = set(run.files)
    definitions: dict[str, bytes] = {}
    checks: list[dict[str, Any]] = []
    unavailable: list[dict[str, Any]] = []
    for check, definition in zip(run.checks, resolved, strict=True):
        _plan_check(check, definition, files, definitions, checks, unavailable)
    problem = no_definition_found(run, resolved, project_root)
    if problem is not None:
        raise InputError(problem + "; nothing written", param="project")
    unavailable.sort(key=lambda e: (e["kind"], e["ref"]))
    return _Plan(run, definitions, checks, unavailable, run_sizes, seen)


def _refuse_empty_inline_script(project_root: Path, definition: Definition) -> None:
    if definition.state is DefinitionState.MATCHES and definition.empty_inline_script:
        raise BundleRefusal(
            f"{project_root / (definition.yaml_path or '')}: an empty inline script beside "
            f"script_path {definition.script_path}: eval-banana ran the empty script while "
            "the digest covers the referenced one (SPEC 10.2); its bundle would fail "
            "verification"
        )


def _plan_check(
    check: eb.CheckRecord,
    definition: Definition,
    files: set[str],
    definitions: dict[str, bytes],
    checks: list[dict[str, Any]],
    unavailable: list[dict[str, Any]],
) -> None:
    """One check's entry, and its definition bundled or listed."""
    stem = check.stem
    entry: dict[str, Any] = {
        "check_id": check.check_id,
        "stem": stem,
        "status": check.status.value,
        "check_definition_sha256": check.check_definition_sha256,
        "result": result_member(stem),
        "stdout": _run_member_if(files, eb.stdout_file(stem)),
        "stderr": _run_member_if(files, eb.stderr_file(stem)),
        "prompt": _run_member_if(files, eb.prompt_file(stem)),
        "definition": None,
        "script": None,
    }
    listed = _listing(definition)
    if listed is not None:
        unavailable.append(listed)
    else:
        assert definition.yaml_path is not None and definition.yaml_bytes is not None
        entry["definition"] = _keep_definition(
            definitions, definition.yaml_path, definition.yaml_bytes
        )
        if definition.script_state is ScriptState.PRESENT:
            assert definition.script_path is not None and definition.script_bytes is not None
            entry["script"] = _keep_definition(
                definitions, definition.script_path, definition.script_bytes
            )
    checks.append(entry)


def _run_member_if(files: set[str], rel: str) -> str | None:
    return RUN_PREFIX + rel if rel in files else None


# A control character (C0 or DEL), found by a regex at C speed: walking each character
# of 20,000 checks' names in Python cost 3.6 s of an in-place verify's 10 s budget.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_member_names(top: str, paths: Iterable[str]) -> None:
    """Refuse names the strict archive reader would reject (SPEC section 5).

    Raises InputError naming the file when a name holds a backslash or a control
    character, is not NFC, has an over-long segment or is over-long as a whole, or
    collides with another after NFC and case folding.
    """
    folded: dict[str, str] = {}
    for path in paths:
        full = f"{top}/{path}"
        if "\\" in full or _CONTROL.search(full) is not None:
            raise InputError(f"{path}: name holds a backslash or control character")
        if not unicodedata.is_normalized("NFC", full):
            raise InputError(f"{path}: name is not NFC-normalised, which bundles refuse")
        if len(full.encode("utf-8")) > _MAX_NAME_BYTES:
            raise InputError(f"{path}: name longer than {_MAX_NAME_BYTES} bytes")
        parts = full.split("/")
        for i, segment in enumerate(parts):
            if len(segment.encode("utf-8")) > _MAX_SEGMENT_BYTES:
                raise InputError(f"{path}: path segment longer than {_MAX_SEGMENT_BYTES} bytes")
            prefix = "/".join(parts[: i + 1])
            key = unicodedata.normalize("NFC", prefix.casefold())
            other = folded.setdefault(key, prefix)
            if other != prefix:
                raise InputError(f"{path}: collides with {other} after NFC and case folding")


# --------------------------------------------------------------------------- writing


def export_eb_bundle(
    config: EbExportConfig, progress: Callable[[Progress], None] | None = None
) -> EbExportResult:
    """Export the run directory ``config.run_dir`` into an eval-banana bundle archive.

    Raises InputError (exit 3) for an unreadable, unsafe or inconsistent run or a
    project root that is not a directory, OutputError (exit 3) for an output path that
    exists, is a symbolic link or has no parent directory, and StrictFailure (exit 1)
    under ``strict`` when any definition would be listed unavailable. Nothing is left
    at the target name unless the export succeeds.
    """
    plan = plan_export(config.run_dir, config.project_root)
    run = plan.run
    check_not_before(
        config.exported_at, run.completed_at, "the run's completed_at", config.exported_at_source
    )
    if config.strict and plan.unavailable:
        reasons = sorted({u["reason"] for u in plan.unavailable})
        raise StrictFailure(
            f"strict: {len(plan.unavailable)} definition(s) would be unavailable "
            f"({', '.join(reasons)}); nothing written",
            param="strict",
        )
    top = _checked_top(plan)
    target = resolve_output(config.out, archive_name(run.run_id))

    bundle, archive_sha256, archive_size = write_bag_archive(
        target,
        top=top,
        level=config.level,
        mtime=int(config.exported_at.timestamp()),
        fill=lambda writer: _fill_bag(writer, plan, config),
        progress=progress,
    )
    return EbExportResult(
        path=target,
        run_id=run.run_id,
        bundle_digest=json_digest(bundle),
        report_digest=bundle["run"]["digest"],
        archive_sha256=archive_sha256,
        archive_size=archive_size,
        bundle=bundle,
    )


def _checked_top(plan: _Plan) -> str:
    """The top directory, after refusing member names the strict reader would reject."""
    top = top_directory(plan.run.run_id)
    members = [RUN_PREFIX + rel for rel in plan.run.files]
    members += [DEFINITIONS_PREFIX + rel for rel in plan.definitions]
    check_member_names(top, [*members, "data/bundle.json"])
    return top


# Stands for a sha256 digest or a tree root where the bytes are not hashed: the same
# length and no comma, colon or bracket, so bundle.json's size and ``json_values`` are
# those of the document export writes (tests/test_export_verify_property.py).
_UNHASHED_DIGEST = "sha256:" + "0" * 64
_UNHASHED_ROOT = "0" * 64


def check_exportable(
    run: eb.Run,
    run_dir: Path,
    run_sizes: dict[str, int],
    resolved: list[Definition],
    project_root: Path,
    log: eb.ReadLog | None = None,
) -> None:
    """Raise what ``export_eb_bundle`` raises over the bundle's names and reader caps,
    for a consistent run already read (``run_sizes`` from ``run_file_sizes``) whose
    definitions are resolved; nothing is written, hashed or archived.

    Every member goes through the same ``BundleBudget``, in the order export writes
    it, with the sizes already known; only the kept JSON run files are read again, to
    count their values. bundle.json is the document export builds (``bundle_document``),
    with unhashed digests of the same length. Raises InputError (exit 3), in export's
    words. (SPEC 5, Resources; docs/format.md, "Sizes: one rule for export and verify in
    place".)
    """
    plan = plan_from(run, run_sizes, resolved, project_root)
    budget = BundleBudget(run_dir, _checked_top(plan))
    files: list[dict[str, Any]] = []
    with eb.Beneath(run_dir, log) as source:
        for rel in run.files:
            member = RUN_PREFIX + rel
            size = run_sizes[rel]
            budget.admit(member, size, functools.partial(_read_run_file, source, rel, run_dir))
            files.append({"path": member, "digest": _UNHASHED_DIGEST, "size": size})
    for rel in sorted(plan.definitions, key=lambda p: p.encode("utf-8")):
        data = plan.definitions[rel]
        budget.admit_bytes(DEFINITIONS_PREFIX + rel, data)
        files.append(
            {"path": DEFINITIONS_PREFIX + rel, "digest": _UNHASHED_DIGEST, "size": len(data)}
        )
    files.sort(key=lambda f: f["path"].encode("utf-8"))
    tree = {"tree_size": len(run.checks), "root": _UNHASHED_ROOT}
    bundle = bundle_document(plan, files, tree, datetime.now(UTC))
    _admit_bundle_json(budget, bundle)


def _read_run_file(source: eb.Beneath, rel: str, run_dir: Path) -> bytes:
    data = source.read(rel, what="a run file")
    if data is None:
        raise InputError(f"{run_dir / rel}: disappeared during export; export again")
    return data


def _admit_bundle_json(budget: BundleBudget, bundle: dict[str, Any]) -> bytes:
    """bundle.json's canonical bytes, after the budget admits them and the tag files."""
    bundle_bytes = canonical.dumps(bundle)
    budget.admit_bytes("data/bundle.json", bundle_bytes)
    budget.admit_tag_files([f["path"] for f in bundle["files"]] + ["data/bundle.json"])
    return bundle_bytes


def bundle_document(
    plan: _Plan, files: list[dict[str, Any]], tree: dict[str, Any], exported_at: datetime
) -> dict[str, Any]:
    """bundle.json of the plan, naming ``files`` (sorted) with the case tree ``tree``."""
    run = plan.run
    return {
        "schema": BUNDLE_SCHEMA,
        "exported_at": format_timestamp(exported_at),
        "exporter": {"tool": TOOL_NAME, "version": __version__},
        "run": {
            "run_id": run.run_id,
            "digest": run.report_digest,
            "path": REPORT_MEMBER,
            "project_root": run.project_root,
            "run_passed": run.run_passed,
        },
        "files": files,
        "checks": plan.checks,
        "unavailable": plan.unavailable,
        "redacted": [],
        "cases_tree": tree,
    }


def _checked_run_file(source: eb.Beneath, rel: str, plan: _Plan, run_dir: Path) -> bytes:
    """Run file ``rel`` read to be written: the bytes the plan checked.

    Every byte export writes is one it checked (threat model: files changed during the
    command). ``source`` reads under the plan's log, so a file the consistency check
    read whole (report.json, the check files, stdout and stderr) that comes back with
    another size or sha256 raises ChangedDuringRead there; any other (report.md, a
    prompt, evidence: checked for presence and size only) must have its planned size.
    Either refusal comes before a byte of the file is written; the export is abandoned
    and its temporary archive removed.
    """
    data = _read_run_file(source, rel, run_dir)
    if len(data) != plan.run_sizes[rel]:
        raise eb.ChangedDuringRead(f"{run_dir / rel}: changed during export; export again")
    return data


def _add_run_file(
    writer: BagWriter,
    source: eb.Beneath,
    rel: str,
    plan: _Plan,
    config: EbExportConfig,
    files: list[dict[str, Any]],
    leaves: dict[str, bytes],
    budget: BundleBudget,
) -> None:
    data = _checked_run_file(source, rel, plan, config.run_dir)
    member = RUN_PREFIX + rel
    budget.admit_bytes(member, data)
    hex_digest = writer.add(member, data, planned=plan.run_sizes[rel])
    files.append({"path": member, "digest": "sha256:" + hex_digest, "size": len(data)})
    if rel.startswith("checks/") and rel.endswith(".json"):
        leaves[member] = data  # the case tree's leaves; other files are not held


def _fill_bag(writer: BagWriter, plan: _Plan, config: EbExportConfig) -> dict[str, Any]:
    """Every member of an eval-banana bundle, in the documented order; returns bundle.json."""
    run = plan.run
    files: list[dict[str, Any]] = []
    leaves: dict[str, bytes] = {}
    budget = BundleBudget(config.run_dir, writer.top)
    writer.plan(sum(plan.run_sizes.values()) + sum(map(len, plan.definitions.values())))
    with eb.Beneath(config.run_dir, plan.seen) as source:
        for rel in run.files:
            _add_run_file(writer, source, rel, plan, config, files, leaves, budget)
    writer.count_cases(len(run.checks))
    for rel in sorted(plan.definitions, key=lambda p: p.encode("utf-8")):
        data = plan.definitions[rel]
        member = DEFINITIONS_PREFIX + rel
        budget.admit_bytes(member, data)
        hex_digest = writer.add(member, data, planned=len(data))
        files.append({"path": member, "digest": "sha256:" + hex_digest, "size": len(data)})
    tree = TreeBuilder()
    for entry in plan.checks:
        tree.append(leaves[entry["result"]])
    files.sort(key=lambda f: f["path"].encode("utf-8"))
    cases_tree = {"tree_size": tree.size, "root": tree.root().hex()}
    bundle = bundle_document(plan, files, cases_tree, config.exported_at)
    bundle_bytes = _admit_bundle_json(budget, bundle)
    writer.add("data/bundle.json", bundle_bytes)
    write_tag_files(writer, bundle, bundle_bytes, config.sign)
    return bundle
