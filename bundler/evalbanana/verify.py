"""Verification of eval-banana bundles and run directories (SPEC section 10.2).

``verify_eb_bundle`` is called by ``bundler.bundles.verify.verify_contents`` for
bundles whose schema is ``evalbook.eval_banana_bundle.v1``; ``verify_run_dir`` checks a
run directory in place against a project root, without an archive. Both return claims
in the groups of SPEC section 5 (proven / unprovable / failed) and never raise for a
bad run:

- 1 bagit and 2 bundle.json (bundles only): BagIt manifests, Payload-Oxum, bag-info,
  the top directory's name; bundle.json stored canonical, the bundle head.
- 3 report: report.json's sha256, that it is a valid eval-banana report, that
  bundle.json's ``run`` agrees with it, and that the counts, points, percentage,
  meets_threshold and run_passed follow from the per-check statuses.
- 7 checks: each ``checks/<stem>.json`` equals its report entry and is named by the
  stem rule, each score follows from its status, bundle.json's check entries agree with
  the report, and each ``check_definition_sha256`` recomputes from the definition (the
  bundled one, re-hashed in memory, or the one under the project root), or is listed.
- 8 cases: the bounded stdout tails and stderr against their files; the case tree over
  the check files' bytes in report order.
- 10 accounting: every file under data/ named in bundle.json's ``files`` with its digest
  and size; no file outside eval-banana's run layout; each ``unavailable`` entry agrees
  with what the bundle holds (a listed definition is never also present).

The consistency rules themselves are ``evalbanana.check_run``'s; its findings become
failed claims here. The run files of a bundle are checked by ``check_run`` from a
private temporary copy made of the bytes the bag reader kept (``check_run`` reads
files by path); the definitions are never written anywhere, they are re-hashed from the
kept bytes.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bundler.archive.bag_reader import BagContents
from bundler.core.claims import (
    EB_REPORT_SUBJECT,
    EXPECT_REPORT_SUBJECT,
    RUN_REPORT_SUBJECT,
    Anchor,
    Claims,
    State,
    Verdict,
    Verification,
    VerifyOptions,
    apply_strict,
)
from bundler.core.digests import is_digest
from bundler.core.errors import BundlerError, InputError, UsageError
from bundler.evalbanana import run as eb
from bundler.evalbanana.budget import (
    as_export_would,
    run_file_sizes,
)
from bundler.evalbanana.bundled_definitions import bundled_definition, expected_definition_member
from bundler.evalbanana.definitions import (
    Definition,
    DefinitionState,
    ScriptState,
    no_definition_found,
    resolve_definition,
)
from bundler.evalbanana.export import (
    DEFINITION_KIND,
    DEFINITIONS_PREFIX,
    REPORT_MEMBER,
    RUN_PREFIX,
    UnavailableReason,
    check_exportable,
    result_member,
    top_directory,
)
from bundler.evalbanana.results import (
    Finding,
    FindingKind,
    check_run,
)
from bundler.evalbanana.summary import (
    MODE_BUNDLE,
    MODE_RUN_DIRECTORY,
    run_result,
    summary_of,
    tree_of,
)
from bundler.evalbook.bagcheck import check_bag_frame

_FINDING_GROUPS: dict[FindingKind, int] = {
    FindingKind.MISSING_FILE: 7,
    FindingKind.UNEXPECTED_FILE: 10,
    FindingKind.CHECK_FILE_MISMATCH: 7,
    FindingKind.SCORE_MISMATCH: 7,
    FindingKind.TOTALS_MISMATCH: 3,
    FindingKind.STDOUT_TAIL_MISMATCH: 8,
    FindingKind.STDERR_MISMATCH: 8,
    FindingKind.RAW_RESPONSE_PATH_MISMATCH: 7,
    FindingKind.DEFINITION_MISSING: 7,
    FindingKind.DEFINITION_DIGEST_MISMATCH: 7,
    FindingKind.DEFINITION_OUTSIDE_PROJECT: 7,
    FindingKind.DEFINITION_UNREADABLE: 7,
    FindingKind.EMPTY_INLINE_SCRIPT: 7,
}


# --------------------------------------------------------------------------- entry points


def verify_eb_bundle(
    contents: BagContents, bundle: dict[str, Any], options: VerifyOptions
) -> tuple[Claims, dict[str, Any]]:
    """Claims over an eval-banana bundle already read, and the facts verify reports.

    ``bundle`` is bundle.json, parsed and schema-valid. The facts are
    ``bundle_digest``, ``report_id`` (the run id), ``report_digest`` (bundle.json's
    digest of report.json) and ``summary`` (``mode``, ``labels`` with eval-banana's Run
    ID, Score, Percentage and Passed as recomputed from the statuses, ``recomputed``).
    Raises nothing for a bad bundle: every problem is a failed claim.
    """
    return _BundleVerifier(contents, bundle, options).verify()


def verify_run_dir(run_dir: Path, project_root: Path, options: VerifyOptions) -> Verification:
    """Check a run directory in place against ``project_root`` (``verify RUN_DIR --project``).

    The same checks as for a bundle, without the archive claims (groups 1 and 2).
    A definition that is missing under ``project_root`` (or outside it, or unreadable)
    is unprovable as ``definition_missing``, one that no longer recomputes is
    unprovable as ``definition_digest_mismatch``: exactly what ``export-eb`` would list.
    An unreadable, unsafe or malformed run directory, a project root that is not a
    directory, or a run whose bundle export-eb refuses over the bundle reader's caps
    and names (``budget.BundleBudget``, in export's words after ``EXPORT_WOULD_REFUSE``)
    gives verdict ``error``. Raises UsageError for options that need a
    bundle (``--expect-bundle-digest``, signatures).
    """
    if options.expect_bundle_digest is not None:
        raise UsageError(
            "expect_bundle_digest: a run directory has no bundle digest (export it with export-eb)",
            param="expect_bundle_digest",
        )
    if options.allowed_signers is not None or options.sidecars:
        raise UsageError(
            "allowed_signers: a run directory has no signed bundle head", param="allowed_signers"
        )
    source = str(run_dir)
    try:
        if project_root.is_symlink() or not project_root.is_dir():
            raise InputError(f"{project_root}: project root is not a directory")
        # One log for every read: a file read again (for the case tree, for the size
        # rule) must give the bytes the claims were decided on (ChangedDuringRead).
        log = eb.ReadLog("verification", "verify")
        run = eb.read_run(run_dir, log)
        # Export's first refusal, before any file is read: a run file the bundle reader
        # would not keep whole (docs/format.md, "Sizes: one rule for export and verify
        # in place").
        run_sizes = as_export_would(lambda: run_file_sizes(run, run_dir))
        findings = check_run(run, run_dir, log=log)
        with eb.Beneath(project_root) as project:
            definitions = [resolve_definition(run, check, project) for check in run.checks]
        tree = tree_of(_read_results(run, run_dir, log))
        not_found = no_definition_found(run, definitions, project_root)
    except BundlerError as exc:
        return Verification(
            source=source, verdict=Verdict.ERROR, error=exc.message, strict=options.strict
        )
    claims = Claims()
    report_path = "report.json"
    if options.expect_report_digest is not None:
        claims.compare(
            3,
            EXPECT_REPORT_SUBJECT,
            options.expect_report_digest,
            run.report_digest,
            path=report_path,
            detail="the report is not the one expected",
        )
    claims.proven(3, RUN_REPORT_SUBJECT, path=report_path, observed=run.report_digest)
    checker = _RunClaims(claims, run, findings, prefix="")
    checker.add_finding_claims()
    for check, definition in zip(run.checks, definitions, strict=True):
        _definition_in_place(claims, check, definition)
    if not_found is not None:
        claims.unprovable(
            7,
            "the project root holds the run's definitions",
            UnavailableReason.DEFINITION_MISSING.value,
            path=str(project_root),
            detail=not_found,
        )
    final = apply_strict(claims.items, options.strict)
    verdict = Verdict.FAILED if any(c.state is State.FAILED for c in final) else Verdict.VERIFIED
    if verdict is Verdict.VERIFIED and not_found is None:
        # A run that verifies in place must be one export-eb writes a bundle of, and one
        # export refuses over the bundle's names and reader caps is refused here in its
        # words: the same rule (BundleBudget), asked with the sizes, definitions and
        # JSON documents already at hand, nothing hashed or archived.
        try:
            as_export_would(
                lambda: check_exportable(run, run_dir, run_sizes, definitions, project_root, log)
            )
        except BundlerError as exc:
            return Verification(
                source=source, verdict=Verdict.ERROR, error=exc.message, strict=options.strict
            )
    summary = summary_of(run, MODE_RUN_DIRECTORY, tree)
    if not_found is not None:
        summary["labels"].append(["Definitions", f"NONE FOUND: {not_found}"])
    return Verification(
        source=source,
        verdict=verdict,
        kind=None,
        bundle_digest=None,
        report_id=run.run_id,
        report_digest=run.report_digest,
        anchor=Anchor(expected_report_digest=options.expect_report_digest),
        strict=options.strict,
        claims=tuple(final),
        summary=summary,
        report_result=run_result(summary),
        report_issued_at=run.completed_at,
    )


def _read_results(run: eb.Run, run_dir: Path, log: eb.ReadLog) -> list[bytes] | None:
    """The check files' bytes in report order, or None when one is missing; each the
    bytes ``log`` saw (ChangedDuringRead otherwise)."""
    files = set(run.files)
    leaves = []
    with eb.Beneath(run_dir, log) as tree:
        for check in run.checks:
            rel = eb.result_file(check.stem)
            if rel not in files:
                return None
            data = tree.read(rel, what="a check result")
            if data is None:
                return None
            leaves.append(data)
    return leaves


class _RunClaims:
    """Turns ``check_run`` findings into claims, with a proven claim where none failed.

    ``prefix`` maps run-relative paths to claim paths (``data/run/`` in a bundle).
    """

    def __init__(
        self, claims: Claims, run: eb.Run, findings: Sequence[Finding], *, prefix: str
    ) -> None:
        self.claims = claims
        self.run = run
        self.findings = list(findings)
        self.prefix = prefix

    def _group(self, finding: Finding) -> int:
        if finding.kind is FindingKind.MISSING_FILE and finding.check_id is None:
            return 3
        return _FINDING_GROUPS[finding.kind]

    def _fail(self, finding: Finding, subject: str) -> None:
        self.claims.failed(
            self._group(finding),
            subject,
            finding.message,
            path=None if finding.path is None else self.prefix + finding.path,
            expected=finding.expected,
            observed=finding.observed,
        )

    def add_finding_claims(self) -> None:
        """Groups 3, 7, 8 and 10 from the findings, per check in report order."""
        per_check: dict[str, list[Finding]] = {}
        general: list[Finding] = []
        for finding in self.findings:
            if finding.check_id is None:
                general.append(finding)
            else:
                per_check.setdefault(finding.check_id, []).append(finding)
        for check in self.run.checks:
            own = per_check.get(check.check_id, [])
            result_path = self.prefix + eb.result_file(check.stem)
            files = [f for f in own if self._group(f) == 7]
            tails = [f for f in own if self._group(f) == 8]
            for finding in files:
                self._fail(finding, f"check {check.check_id}: {finding.kind.value}")
            if not files:
                self.claims.proven(
                    7,
                    f"check {check.check_id}: result file equals its report entry; stem and score follow",
                    path=result_path,
                )
            for finding in tails:
                self._fail(finding, f"check {check.check_id}: {finding.kind.value}")
            if not tails:
                self.claims.proven(
                    8,
                    f"check {check.check_id}: stdout tail and stderr match their files",
                    path=self.prefix + eb.stdout_file(check.stem),
                )
        totals = [f for f in general if f.kind is FindingKind.TOTALS_MISMATCH]
        for finding in totals:
            self._fail(finding, f"report.json {finding.field}")
        if not totals:
            self.claims.proven(
                3,
                "counts, points, percentage, meets_threshold and run_passed follow from the statuses",
                path=self.prefix + "report.json",
            )
        for finding in general:
            if finding.kind is FindingKind.TOTALS_MISMATCH:
                continue
            subject = (
                "every run file belongs to eval-banana's run layout"
                if finding.kind is FindingKind.UNEXPECTED_FILE
                else f"run file {finding.path}"
            )
            self._fail(finding, subject)
        if not any(f.kind is FindingKind.UNEXPECTED_FILE for f in general):
            self.claims.proven(
                10, f"{len(self.run.files)} run files, none outside eval-banana's run layout"
            )


def _empty_inline_script(
    claims: Claims, check: eb.CheckRecord, definition: Definition, path: str | None
) -> None:
    if definition.empty_inline_script:
        claims.failed(
            7,
            f"check {check.check_id}: {FindingKind.EMPTY_INLINE_SCRIPT.value}",
            f"{definition.yaml_path} has an empty inline script and a script_path; eval-banana ran "
            f"the empty script while the digest covers {definition.script_path}",
            path=path,
        )


def _definition_in_place(claims: Claims, check: eb.CheckRecord, definition: Definition) -> None:
    """Group 7 for a definition under the project root (run directory mode)."""
    subject = f"check {check.check_id}: check_definition_sha256 recomputes from its definition"
    path = definition.yaml_path
    state = definition.state
    if state is DefinitionState.MATCHES:
        claims.proven(
            7,
            subject,
            path=path,
            expected=definition.recorded_digest,
            observed=definition.observed_digest,
        )
    elif state is DefinitionState.DIGEST_MISMATCH:
        claims.unprovable(
            7,
            subject,
            UnavailableReason.DEFINITION_DIGEST_MISMATCH.value,
            path=path,
            expected=definition.recorded_digest,
            observed=definition.observed_digest,
            detail=definition.observed_digest,
        )
    else:
        claims.unprovable(
            7,
            subject,
            UnavailableReason.DEFINITION_MISSING.value,
            path=path,
            expected=definition.recorded_digest,
            detail=definition.detail,
        )
    _empty_inline_script(claims, check, definition, path)


# --------------------------------------------------------------------------- bundles


@contextmanager
def _materialised_run(contents: BagContents) -> Iterator[Path]:
    """A private temporary copy of the kept data/run/ files, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="evalbook-eb-verify-") as tmp:
        root = Path(tmp) / "run"
        root.mkdir(mode=0o700)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        for member in sorted(contents.kept):
            if not member.startswith(RUN_PREFIX):
                continue
            parts = member[len(RUN_PREFIX) :].split("/")
            if any(part in ("", ".", "..") for part in parts):
                raise InputError(f"{contents.source}: {member}: unsafe path in the run")
            target = root.joinpath(*parts)
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(target, flags, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(contents.kept[member])
        yield root


class _BundleVerifier:
    def __init__(
        self, contents: BagContents, bundle: dict[str, Any], options: VerifyOptions
    ) -> None:
        self.c = contents
        self.bundle = bundle
        self.options = options
        self.claims = Claims()
        self.run: eb.Run | None = None  # report.json as read, once it parses

    def check_all(self) -> str:
        digest = check_bag_frame(
            self.c,
            self.claims,
            self.bundle,
            self.options,
            expected_top=top_directory(self.bundle["run"]["run_id"]),
        )
        self.check_report()
        if self.run is not None:
            self.check_entries(self.run)
            self.check_definitions(self.run)
            self.check_tree(self.run)
        self.check_files()
        self.check_listing()
        return digest

    def verify(self) -> tuple[Claims, dict[str, Any]]:
        digest = self.check_all()
        facts: dict[str, Any] = {
            "bundle_digest": digest,
            "report_id": self.bundle["run"]["run_id"],
            "report_digest": self.bundle["run"]["digest"],
        }
        if self.run is not None:
            facts["summary"] = summary_of(self.run, MODE_BUNDLE, self.bundle["cases_tree"])
            facts["report_result"] = run_result(facts["summary"])
            facts["report_issued_at"] = self.run.completed_at
        else:
            facts["summary"] = {
                "mode": MODE_BUNDLE,
                "labels": [["Run ID", self.bundle["run"]["run_id"]]],
            }
        return self.claims, facts

    def file_digest(self, path: str) -> str | None:
        info = self.c.files.get(path)
        return None if info is None else "sha256:" + info.sha256

    # -- claim 3: report.json and the run's own consistency ------------------------------

    def check_report(self) -> None:
        entry = self.bundle["run"]
        path = REPORT_MEMBER  # where the contract puts it, whatever run.path says
        observed = self.file_digest(path)
        self.claims.compare(3, EB_REPORT_SUBJECT, entry["digest"], observed, path=path)
        if self.options.expect_report_digest is not None:
            self.claims.compare(
                3,
                EXPECT_REPORT_SUBJECT,
                self.options.expect_report_digest,
                observed,
                path=path,
                detail="the report is not the one expected",
            )
        oversize = sorted(
            p for p in self.c.data_files() if p.startswith(RUN_PREFIX) and p not in self.c.kept
        )
        for member in oversize:
            self.claims.failed(
                3,
                "run file can be re-checked",
                "over the document size cap; not re-checked",
                path=member,
            )
        with _materialised_run(self.c) as root:
            try:
                run = eb.read_run(root)
                findings = check_run(run, root)
            except InputError as exc:
                message = exc.message.replace(str(root), RUN_PREFIX.rstrip("/"))
                self.claims.failed(3, RUN_REPORT_SUBJECT, message, path=path)
                return
        self.run = run
        self.claims.proven(3, RUN_REPORT_SUBJECT, path=path)
        for name, recorded in (
            ("run_id", run.run_id),
            ("project_root", run.project_root),
            ("run_passed", run.run_passed),
        ):
            value = entry[name]
            if value == recorded and type(value) is type(recorded):
                self.claims.proven(3, f"bundle.json run.{name} agrees with report.json", path=path)
            else:
                self.claims.failed(
                    3,
                    f"bundle.json run.{name} agrees with report.json",
                    "bundle.json differs from report.json",
                    path="data/bundle.json",
                    expected=str(recorded),
                    observed=str(value),
                )
        _RunClaims(self.claims, run, findings, prefix=RUN_PREFIX).add_finding_claims()

    # -- claim 7: bundle.json's check entries and the definitions ------------------------

    def check_entries(self, run: eb.Run) -> None:
        entries = self.bundle["checks"]
        if len(entries) != len(run.checks):
            self.claims.failed(
                7,
                "bundle.json has one check entry per report check",
                "the number of entries differs",
                path="data/bundle.json",
                expected=str(len(run.checks)),
                observed=str(len(entries)),
            )
        for index, check in enumerate(run.checks):
            subject = f"check {check.check_id}: bundle.json entry agrees with report.json"
            if index >= len(entries):
                self.claims.failed(7, subject, "no entry in bundle.json", path="data/bundle.json")
                continue
            problems = self.entry_problems(run, check, entries[index])
            if problems:
                self.claims.failed(7, subject, "; ".join(problems), path="data/bundle.json")
            else:
                self.claims.proven(7, subject, path="data/bundle.json")

    def entry_problems(
        self, run: eb.Run, check: eb.CheckRecord, entry: dict[str, Any]
    ) -> list[str]:
        stem = check.stem
        want: dict[str, Any] = {
            "check_id": check.check_id,
            "stem": stem,
            "status": check.status.value,
            "check_definition_sha256": check.check_definition_sha256,
            "result": result_member(stem),
            "stdout": self.present_or_none(RUN_PREFIX + eb.stdout_file(stem)),
            "stderr": self.present_or_none(RUN_PREFIX + eb.stderr_file(stem)),
            "prompt": self.present_or_none(RUN_PREFIX + eb.prompt_file(stem)),
        }
        problems = [
            f"{key} is {entry[key]!r}, expected {value!r}"
            for key, value in want.items()
            if entry[key] != value
        ]
        definition = entry["definition"]
        expected = expected_definition_member(run.project_root, check.source_path)
        if definition is not None and definition != expected:
            problems.append(f"definition is {definition!r}, but source_path maps to {expected!r}")
        if definition is None and entry["script"] is not None:
            problems.append("a script is named without its definition")
        return problems

    def present_or_none(self, member: str) -> str | None:
        return member if member in self.c.files else None

    def check_definitions(self, run: eb.Run) -> None:
        listed = {e["ref"]: e for e in self.bundle["unavailable"]}
        entries = {e["check_id"]: e for e in self.bundle["checks"]}
        for check in run.checks:
            subject = f"check {check.check_id}: check_definition_sha256 recomputes from the bundled definition"
            entry = entries.get(check.check_id)
            if entry is None or entry["definition"] is None:
                item = listed.get(check.check_id)
                if item is not None:
                    self.claims.unprovable(
                        7,
                        subject,
                        item["reason"],
                        expected=check.check_definition_sha256,
                        detail=item["detail"],
                    )
                else:
                    self.claims.failed(
                        7,
                        subject,
                        "the definition is neither bundled nor listed as unavailable",
                        expected=check.check_definition_sha256,
                    )
                continue
            definition = bundled_definition(run, check, self.c.kept)
            if definition.state in (DefinitionState.MATCHES, DefinitionState.DIGEST_MISMATCH):
                # Only a YAML read names a script: without one (missing, outside the
                # project, unreadable) its own claim fails, and nothing is said of the
                # script bundle.json maps, as the JavaScript verifier does.
                self.check_script_entry(check, entry, definition)
            if definition.state is DefinitionState.MATCHES:
                self.claims.proven(
                    7,
                    subject,
                    path=definition.yaml_path,
                    expected=definition.recorded_digest,
                    observed=definition.observed_digest,
                )
            elif definition.state is DefinitionState.DIGEST_MISMATCH:
                self.claims.failed(
                    7,
                    subject,
                    "the bundled definition does not recompute to the recorded digest",
                    path=definition.yaml_path,
                    expected=definition.recorded_digest,
                    observed=definition.observed_digest,
                )
            else:
                self.claims.failed(
                    7,
                    subject,
                    definition.detail or definition.state.value,
                    path=definition.yaml_path,
                    expected=definition.recorded_digest,
                )
            _empty_inline_script(self.claims, check, definition, definition.yaml_path)

    def check_script_entry(
        self, check: eb.CheckRecord, entry: dict[str, Any], definition: Definition
    ) -> None:
        """bundle.json's ``script`` must be the file the check's own YAML names."""
        want = definition.script_path if definition.script_state is ScriptState.PRESENT else None
        subject = f"check {check.check_id}: bundle.json's script is the one its YAML names"
        if entry["script"] == want:
            if want is not None:
                self.claims.proven(7, subject, path=want)
        else:
            self.claims.failed(
                7,
                subject,
                "bundle.json maps the check to a script other than the file at the path its "
                "YAML's script_path names (SPEC 10.2)",
                path="data/bundle.json",
                expected=str(want),
                observed=str(entry["script"]),
            )

    # -- claim 8: the case tree -----------------------------------------------------------

    def check_tree(self, run: eb.Run) -> None:
        recorded = self.bundle["cases_tree"]
        leaves = []
        for check in run.checks:
            data = self.c.kept.get(result_member(check.stem))
            if data is None:
                self.claims.failed(
                    8,
                    "cases_tree recomputes",
                    "a check's result file is missing",
                    path=result_member(check.stem),
                )
                return
            leaves.append(data)
        tree = tree_of(leaves)
        assert tree is not None
        self.claims.compare(
            8,
            "cases_tree size",
            str(recorded["tree_size"]),
            str(tree["tree_size"]),
            path="data/bundle.json",
            detail="tree_size differs from the number of checks",
        )
        self.claims.compare(
            8,
            "cases_tree root over the check files in report order",
            recorded["root"],
            tree["root"],
            path="data/bundle.json",
            detail="the case tree root differs",
        )

    # -- claim 10: accounting -------------------------------------------------------------

    def check_files(self) -> None:
        named: dict[str, dict[str, Any]] = {}
        ok = True
        paths = [f["path"] for f in self.bundle["files"]]
        if paths != sorted(paths, key=lambda p: p.encode("utf-8")) or len(set(paths)) != len(paths):
            self.claims.failed(
                10,
                "bundle.json files are unique and sorted by path",
                "duplicate or unsorted paths",
                path="data/bundle.json",
            )
            ok = False
        for item in self.bundle["files"]:
            named[item["path"]] = item
            info = self.c.files.get(item["path"])
            if info is None:
                self.claims.failed(
                    10,
                    "every named file is present",
                    "bundle.json names a file the bag lacks",
                    path=item["path"],
                    expected=item["digest"],
                )
                ok = False
            elif "sha256:" + info.sha256 != item["digest"] or info.size != item["size"]:
                self.claims.failed(
                    10,
                    "named file matches its digest and size",
                    "file differs from bundle.json",
                    path=item["path"],
                    expected=f"{item['digest']} ({item['size']} bytes)",
                    observed=f"sha256:{info.sha256} ({info.size} bytes)",
                )
                ok = False
        for path in sorted(set(self.c.data_files()) - set(named) - {"data/bundle.json"}):
            self.claims.failed(
                10,
                "every file is named by bundle.json",
                "file under data/ that bundle.json does not name",
                path=path,
                observed="sha256:" + self.c.files[path].sha256,
            )
            ok = False
        referenced: set[str] = set()
        for entry in self.bundle["checks"]:
            for key in ("result", "stdout", "stderr", "prompt", "definition", "script"):
                if entry[key] is not None:
                    referenced.add(entry[key])
                    if entry[key] not in named:
                        self.claims.failed(
                            10,
                            "every file a check names is in files",
                            "not among bundle.json's files",
                            path=entry[key],
                        )
                        ok = False
        for path in sorted(
            p for p in named if p.startswith(DEFINITIONS_PREFIX) and p not in referenced
        ):
            self.claims.failed(
                10,
                "every bundled definition file belongs to a check",
                "no check names this definition or script",
                path=path,
            )
            ok = False
        if ok:
            self.claims.proven(
                10,
                f"accounting: {len(named)} files named with their digests; every file under data/ is named",
            )

    def check_listing(self) -> None:
        checks: dict[str, eb.CheckRecord] = {}
        if self.run is not None:
            checks = {c.check_id: c for c in self.run.checks}
        entries = {e["check_id"]: e for e in self.bundle["checks"]}
        seen: set[str] = set()
        for item in self.bundle["unavailable"]:
            subject = f"listed definition {item['ref']} ({item['reason']})"
            problem = self.listing_problem(item, checks, entries, seen)
            seen.add(item["ref"])
            if problem is None:
                self.claims.proven(10, subject + " agrees with the bundle", expected=item["digest"])
            else:
                self.claims.failed(10, subject, problem, expected=item["digest"])

    def listing_problem(
        self,
        item: dict[str, Any],
        checks: Mapping[str, eb.CheckRecord],
        entries: Mapping[str, dict[str, Any]],
        seen: set[str],
    ) -> str | None:
        """Why a listed definition contradicts what the bundle holds, or None."""
        ref = item["ref"]
        if item["kind"] != DEFINITION_KIND:
            return f"eval-banana bundles list definitions only, not {item['kind']}"
        if ref in seen:
            return "listed more than once"
        entry = entries.get(ref)
        if entry is None:
            return "not a check of the run"
        if self.run is not None and ref in checks:
            check = checks[ref]
            if item["digest"] != check.check_definition_sha256:
                return "digest is not the recorded check_definition_sha256"
            member = expected_definition_member(self.run.project_root, check.source_path)
            if member is not None and member in self.c.files:
                return f"listed, yet {member} is in the bundle"
        if entry["definition"] is not None or entry["script"] is not None:
            return "listed, yet bundle.json names its bundled definition"
        if item["reason"] == UnavailableReason.DEFINITION_DIGEST_MISMATCH.value:
            if not is_digest(item["detail"]):
                return "definition_digest_mismatch must record the observed digest"
            if item["detail"] == item["digest"]:
                return "the observed digest equals the recorded one: nothing mismatched"
        return None
