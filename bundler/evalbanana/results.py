"""An eval-banana run's results checked (SPEC section 10): totals and consistency.

``recompute_totals`` applies the pass rule to the recorded statuses and
``summary_lines`` prints the result; ``check_run`` returns every inconsistency of a run
(totals, artifact files, bounded stdout tails, definitions) as a ``Finding`` instead of
raising at the first one. The exporter and both verifiers share these.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundler.core import canonical
from bundler.core.errors import CanonicalJSONError, InputError
from bundler.evalbanana.definitions import DefinitionState, resolve_definition
from bundler.evalbanana.run import (
    Beneath,
    CheckRecord,
    CheckStatus,
    CheckType,
    ReadLog,
    Run,
    bounded_tail_of,
    load_json,
    prompt_file,
    result_file,
    stderr_file,
    stdout_file,
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


def check_run(
    run: Run, run_dir: Path, project_root: Path | None = None, log: ReadLog | None = None
) -> list[Finding]:
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
    Raises InputError only when a listed file cannot be read at all. With ``log``,
    every run file read whole is noted there (``ReadLog``), for a caller that reads
    the files again to write them.
    """
    with Beneath(run_dir, log) as tree:
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
                f"{own}: missing (the result file of check '{cid}')",
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
                f"check '{cid}': score {check.score} with status {check.status.value}",
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
                f"check '{cid}': stdout is not the bounded tail of {out_name}"
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
                f"check '{cid}': stderr differs from {err_name}"
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
                    f"check '{cid}': details.raw_response_path is {got!r}, expected {want!r}",
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
