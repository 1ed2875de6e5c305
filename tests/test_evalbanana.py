"""eval-banana runs (SPEC section 10): naming rules, digests, the run reader and checks.

The committed runs under fixtures/eval-banana/runs/ were written by the real
eval-banana 0.5.0 (fixtures/eval-banana/regenerate.sh) from the sample project
fixtures/eval-banana/project/, which it ran as /tmp/eb-sample/project. Bad inputs
are copies of those runs, edited in tmp_path.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from bundler.core.errors import InputError
from bundler.evalbanana import run as eb
from bundler.evalbanana.definitions import (
    DefinitionKeys,
    DefinitionState,
    ScriptState,
    UnsupportedYAML,
    definition_digest,
    map_source_path,
    parse_definition_keys,
    resolve_definition,
)
from bundler.evalbanana.results import (
    Finding,
    FindingKind,
    check_run,
    recompute_totals,
    summary_lines,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "eval-banana"
PROJECT = FIXTURES / "project"
RECORDED_ROOT = "/tmp/eb-sample/project"
DEFAULT_RUNS = sorted((FIXTURES / "runs" / "default").iterdir())
DEFAULT_RUN = DEFAULT_RUNS[0]
FLAT_RUN = FIXTURES / "runs" / "flat"
RUNS = [DEFAULT_RUN, FLAT_RUN]
TAG = b"eval-banana/check-definition-sha256/v1"

# Which script each check of the sample project references (project-relative), read
# off the YAML files by hand; None for inline and harness checks.
REFERENCED_SCRIPTS: dict[str, str | None] = {
    "passes": "eval_checks/scripts/passes.py",
    "fails": "eval_checks/scripts/fails.py",
    "long-output-with-a-very-long-check-identifier-over-forty": "tools/long_output.py",
    "exact-limit": None,
    "missing-script": "eval_checks/scripts/does_not_exist.py",
    "_inline_": None,
    "crlf-inline": None,
    "context-keys": "tools/context_keys.py",
    "judge": None,
}


def _frame(name: bytes, content: bytes) -> bytes:
    return len(name).to_bytes(8, "big") + name + len(content).to_bytes(8, "big") + content


def _hand_digest(yaml_bytes: bytes, script: bytes | None, unavailable: bool = False) -> str:
    """Independent framing for the cross-checks (the module uses bundler.core.digests)."""
    data = TAG + b"\x00" + _frame(b"definition.yaml", yaml_bytes)
    if unavailable:
        data += _frame(b"referenced-script-unavailable", b"")
    elif script is not None:
        data += _frame(b"referenced-script", script)
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _copy_run(tmp_path: Path, run: Path = DEFAULT_RUN) -> Path:
    dest = tmp_path / "run"
    shutil.copytree(run, dest, symlinks=True)
    return dest


def _copy_project(tmp_path: Path) -> Path:
    dest = tmp_path / "project"
    shutil.copytree(PROJECT, dest, symlinks=True)
    return dest


def _edit_json(path: Path, change: Callable[[Any], None]) -> None:
    value = json.loads(path.read_bytes())
    change(value)
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False), encoding="utf-8")


def _edit_check(run_dir: Path, check_id: str, change: Callable[[dict[str, Any]], None]) -> None:
    """Apply the same edit to a check's report.json entry and its checks/<stem>.json."""

    def in_report(report: dict[str, Any]) -> None:
        change(next(c for c in report["checks"] if c["check_id"] == check_id))

    _edit_json(run_dir / "report.json", in_report)
    _edit_json(run_dir / "checks" / f"{eb.check_stem(check_id)}.json", change)


def _kinds(findings: list[Finding]) -> list[tuple[FindingKind, str | None]]:
    return [(f.kind, f.check_id) for f in findings]


# ---------------------------------------------------------------------------
# Definition digest: vectors framed by hand


def test_digest_inline_lf_yaml_vector() -> None:
    yaml_bytes = b"id: a\nscript: x\n"  # 16 bytes
    framed = (
        b"eval-banana/check-definition-sha256/v1\x00"
        b"\x00\x00\x00\x00\x00\x00\x00\x0f"
        b"definition.yaml"
        b"\x00\x00\x00\x00\x00\x00\x00\x10"
        b"id: a\nscript: x\n"
    )
    assert definition_digest(yaml_bytes) == "sha256:" + hashlib.sha256(framed).hexdigest()
    assert definition_digest(yaml_bytes, None) == definition_digest(yaml_bytes)


def test_digest_crlf_yaml_vector_differs_from_lf() -> None:
    yaml_bytes = b"id: a\r\nscript: x\r\n"  # 18 bytes
    framed = (
        b"eval-banana/check-definition-sha256/v1\x00"
        b"\x00\x00\x00\x00\x00\x00\x00\x0f"
        b"definition.yaml"
        b"\x00\x00\x00\x00\x00\x00\x00\x12"
        b"id: a\r\nscript: x\r\n"
    )
    crlf = definition_digest(yaml_bytes)
    assert crlf == "sha256:" + hashlib.sha256(framed).hexdigest()
    assert crlf != definition_digest(b"id: a\nscript: x\n")


def test_digest_script_path_vector() -> None:
    yaml_bytes = b"script_path: s.py\n"  # 18 bytes
    script = b"print(1)\n"  # 9 bytes
    framed = (
        b"eval-banana/check-definition-sha256/v1\x00"
        b"\x00\x00\x00\x00\x00\x00\x00\x0f"
        b"definition.yaml"
        b"\x00\x00\x00\x00\x00\x00\x00\x12"
        b"script_path: s.py\n"
        b"\x00\x00\x00\x00\x00\x00\x00\x11"
        b"referenced-script"
        b"\x00\x00\x00\x00\x00\x00\x00\x09"
        b"print(1)\n"
    )
    assert definition_digest(yaml_bytes, script) == (
        "sha256:" + hashlib.sha256(framed).hexdigest()
    )


def test_digest_missing_script_vector() -> None:
    yaml_bytes = b"script_path: s.py\n"
    framed = (
        b"eval-banana/check-definition-sha256/v1\x00"
        b"\x00\x00\x00\x00\x00\x00\x00\x0f"
        b"definition.yaml"
        b"\x00\x00\x00\x00\x00\x00\x00\x12"
        b"script_path: s.py\n"
        b"\x00\x00\x00\x00\x00\x00\x00\x1d"
        b"referenced-script-unavailable"
        b"\x00\x00\x00\x00\x00\x00\x00\x00"
    )
    unavailable = definition_digest(yaml_bytes, "unavailable")
    assert unavailable == "sha256:" + hashlib.sha256(framed).hexdigest()
    # An empty script is still a script: the component name keeps them apart.
    assert unavailable != definition_digest(yaml_bytes, b"")


# ---------------------------------------------------------------------------
# Cross-checks against the runs the real tool recorded


@pytest.mark.parametrize("run_dir", RUNS, ids=["default", "flat"])
def test_recorded_definition_digests_recompute_from_project(run_dir: Path) -> None:
    run = eb.read_run(run_dir)
    assert {c.check_id for c in run.checks} == set(REFERENCED_SCRIPTS)
    for check in run.checks:
        assert check.source_path.startswith(RECORDED_ROOT + "/")
        rel = check.source_path[len(RECORDED_ROOT) + 1 :]
        yaml_bytes = (PROJECT / rel).read_bytes()
        script_rel = REFERENCED_SCRIPTS[check.check_id]
        script_file = PROJECT / script_rel if script_rel else None
        hand = _hand_digest(
            yaml_bytes,
            script_file.read_bytes() if script_file and script_file.exists() else None,
            unavailable=script_file is not None and not script_file.exists(),
        )
        assert hand == check.check_definition_sha256, check.check_id

        definition = resolve_definition(run, check, PROJECT)
        assert definition.state is DefinitionState.MATCHES, definition.detail
        assert definition.observed_digest == check.check_definition_sha256
        assert definition.yaml_path == rel
        assert definition.script_path == script_rel
        assert definition.yaml_bytes == yaml_bytes
        assert not definition.empty_inline_script
    states = {c.check_id: resolve_definition(run, c, PROJECT).script_state for c in run.checks}
    assert states["missing-script"] is ScriptState.UNAVAILABLE
    assert states["passes"] is ScriptState.PRESENT
    assert states["judge"] is ScriptState.NONE


def test_crlf_definition_is_hashed_raw() -> None:
    raw = (PROJECT / "eval_checks" / "crlf_inline.yaml").read_bytes()
    assert b"\r\n" in raw
    run = eb.read_run(DEFAULT_RUN)
    recorded = run.check("crlf-inline").check_definition_sha256
    assert definition_digest(raw) == recorded
    assert definition_digest(raw.replace(b"\r\n", b"\n")) != recorded


@pytest.mark.parametrize("run_dir", RUNS, ids=["default", "flat"])
def test_real_stems_follow_the_rule(run_dir: Path) -> None:
    run = eb.read_run(run_dir)
    on_disk = {name.split("/")[1].split(".")[0] for name in run.files if name.startswith("checks/")}
    assert on_disk == {eb.check_stem(c.check_id) for c in run.checks}
    # Labels as eval-banana wrote them (cut to 40, underscores stripped).
    labels = {stem.rsplit("-", 1)[0] for stem in on_disk}
    assert "long-output-with-a-very-long-check-ident" in labels
    assert "inline" in labels
    for check in run.checks:
        digest = hashlib.sha256(check.check_id.encode()).hexdigest()
        assert check.stem.endswith("-" + digest)


@pytest.mark.parametrize("run_dir", RUNS, ids=["default", "flat"])
def test_real_stdout_tails_follow_the_rule(run_dir: Path) -> None:
    run = eb.read_run(run_dir)
    for check in run.checks:
        full_path = run_dir / eb.stdout_file(check.stem)
        full = full_path.read_text(encoding="utf-8") if full_path.exists() else ""
        assert eb.bounded_tail(full, stem=check.stem) == check.stdout, check.check_id

    long_check = run.check("long-output-with-a-very-long-check-identifier-over-forty")
    full = (run_dir / eb.stdout_file(long_check.stem)).read_text(encoding="utf-8")
    banner = (
        "[eval-banana: stdout truncated to the last 2000 characters; full output at "
        f"checks/{long_check.stem}.stdout.txt]\n"
    )
    assert long_check.stdout.startswith(banner)
    tail = long_check.stdout[len(banner) :]
    assert len(tail) == 2000 and full.endswith(tail)
    # Characters, not bytes: the same tail is far longer in UTF-8.
    assert len(tail.encode("utf-8")) > 2000

    exact = run.check("exact-limit")
    assert len(exact.stdout) == 2000 and not exact.stdout.startswith("[eval-banana")
    assert (run_dir / eb.stdout_file(exact.stem)).read_text(encoding="utf-8") == exact.stdout


def test_bounded_tail_boundaries() -> None:
    stem = "s-" + "0" * 64
    assert eb.bounded_tail("", stem=stem) == ""
    assert eb.bounded_tail("é" * 2000, stem=stem) == "é" * 2000
    assert eb.bounded_tail("a" + "é" * 2000, stem=stem) == (
        "[eval-banana: stdout truncated to the last 2000 characters; full output at "
        "checks/s-0000000000000000000000000000000000000000000000000000000000000000.stdout.txt]\n"
        + "é"
        * 2000
    )


def test_check_stem_label_rule() -> None:
    def hexdigest(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    assert eb.check_stem("passes") == "passes-" + hexdigest("passes")
    assert eb.check_stem("_inline_") == "inline-" + hexdigest("_inline_")
    assert eb.check_stem("a b//c") == "a_b_c-" + hexdigest("a b//c")
    assert eb.check_stem("..x.y_..") == "x.y-" + hexdigest("..x.y_..")
    assert eb.check_stem("__") == "check-" + hexdigest("__")
    assert eb.check_stem("ééé") == "check-" + hexdigest("ééé")
    assert eb.check_stem("x" * 50) == "x" * 40 + "-" + hexdigest("x" * 50)
    # Cutting happens after stripping: the label may end in "_" again.
    assert eb.check_stem("a" * 39 + "_b") == "a" * 39 + "_-" + hexdigest("a" * 39 + "_b")


# ---------------------------------------------------------------------------
# Reading the committed runs


@pytest.mark.parametrize("run_dir", RUNS, ids=["default", "flat"])
def test_read_run_committed(run_dir: Path) -> None:
    run = eb.read_run(run_dir)
    report = json.loads((run_dir / "report.json").read_bytes())
    assert run.run_id == report["run_id"]
    assert run.project_root == RECORDED_ROOT
    assert run.output_dir == report["output_dir"]
    assert (run.total_checks, run.passed_checks, run.failed_checks, run.errored_checks) == (
        9,
        6,
        1,
        2,
    )
    assert (run.points_earned, run.total_points, run.percentage) == (6, 9, 66.7)
    assert run.pass_threshold == 0.6
    assert run.meets_threshold is True and run.run_passed is False
    assert [c.check_id for c in run.checks] == [c["check_id"] for c in report["checks"]]
    judge = run.check("judge")
    assert judge.check_type is eb.CheckType.HARNESS_JUDGE
    assert judge.status is eb.CheckStatus.ERROR
    assert (
        dict(judge.details)
        == report["checks"][[c["check_id"] for c in report["checks"]].index("judge")]["details"]
    )
    assert run.check("fails").stderr == "expected 42, got 41\nsecond diagnostic line\n"
    on_disk = sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file())
    assert list(run.files) == on_disk
    assert "checks" in run.directories
    assert (
        run.report_digest
        == "sha256:" + hashlib.sha256((run_dir / "report.json").read_bytes()).hexdigest()
    )


def test_default_layout_run_id_names_its_directory() -> None:
    assert len(DEFAULT_RUNS) == 1
    run = eb.read_run(DEFAULT_RUN)
    assert DEFAULT_RUN.name == run.run_id
    assert run.output_dir == f"{RECORDED_ROOT}/.eval-banana/results/{run.run_id}"
    assert eb.read_run(FLAT_RUN).output_dir == "/tmp/eb-sample/flat"


@pytest.mark.parametrize("run_dir", RUNS, ids=["default", "flat"])
def test_committed_runs_have_no_findings(run_dir: Path) -> None:
    run = eb.read_run(run_dir)
    assert check_run(run, run_dir) == []
    assert check_run(run, run_dir, PROJECT) == []


def test_summary_lines_match_eval_banana_console() -> None:
    run = eb.read_run(DEFAULT_RUN)
    totals = recompute_totals([c.status for c in run.checks], run.pass_threshold)
    console = (FIXTURES / "console" / "default.stdout.txt").read_text(encoding="utf-8")
    assert summary_lines(run.run_id, totals) == console.splitlines()[:4]


# ---------------------------------------------------------------------------
# The pass rule


def test_percentage_uses_eval_bananas_float_rounding() -> None:
    statuses = [eb.CheckStatus.PASSED] * 23 + [eb.CheckStatus.FAILED] * 57
    totals = recompute_totals(statuses, 0.25)
    # eval-banana rounds the binary value of (23 / 80) * 100, 28.7499999...
    binary = Decimal((23 / 80) * 100).quantize(Decimal("0.1"), rounding=ROUND_HALF_EVEN)
    assert totals.percentage == float(binary) == 28.7
    # ...which is not what rounding the exact 28.75 would give.
    exact = Decimal(Fraction(23 * 100, 80).numerator) / Fraction(23 * 100, 80).denominator
    assert exact.quantize(Decimal("0.1"), rounding=ROUND_HALF_EVEN) == Decimal("28.8")
    assert totals.meets_threshold is True and totals.run_passed is True


def test_errored_check_fails_run_that_meets_threshold() -> None:
    statuses = [eb.CheckStatus.PASSED] * 9 + [eb.CheckStatus.ERROR]
    totals = recompute_totals(statuses, 0.9)
    assert (totals.points_earned, totals.total_points, totals.percentage) == (9, 10, 90.0)
    assert totals.meets_threshold is True and totals.run_passed is False
    empty = recompute_totals([], 0.0)
    assert (empty.percentage, empty.meets_threshold, empty.run_passed) == (0.0, False, False)


# ---------------------------------------------------------------------------
# Bad inputs: read_run refuses


def test_missing_report_json(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)
    (run_dir / "report.json").unlink()
    with pytest.raises(InputError, match=r"report\.json: missing"):
        eb.read_run(run_dir)


def test_malformed_report_json(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)
    path = run_dir / "report.json"
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(InputError, match=r"report\.json"):
        eb.read_run(run_dir)


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        (lambda r: r.pop("run_passed"), r"missing field 'run_passed'"),
        (lambda r: r.update(percentage="66.7"), r"'percentage' must be a number"),
        (lambda r: r.update(total_checks=True), r"'total_checks' must be an integer"),
        (lambda r: r["checks"][0].pop("stdout"), r"missing field 'checks\[0\]\.stdout'"),
        (lambda r: r["checks"][1].update(score=2), r"'checks\[1\]\.score' must be 0 or 1"),
        (lambda r: r["checks"][2].update(status="skipped"), r"'checks\[2\]\.status' must be one"),
        (lambda r: r["checks"][0].update(tags="a"), r"'checks\[0\]\.tags' must be a list"),
        (
            lambda r: r["checks"][0].update(check_definition_sha256="sha256:ABC"),
            r"check_definition_sha256",
        ),
        (lambda r: r.update(schema_version=2), r"'schema_version' must be 1"),
        (lambda r: r.update(run_id="../escape"), r"'run_id' must be an identifier"),
        (lambda r: r.update(checks={}), r"'checks' must be a list"),
        (lambda r: r["checks"].append(r["checks"][0]), r"appears more than once"),
    ],
    ids=[
        "missing-field",
        "string-number",
        "bool-for-int",
        "missing-check-field",
        "bad-score",
        "bad-status",
        "bad-tags",
        "bad-digest",
        "schema-version",
        "unsafe-run-id",
        "checks-not-list",
        "duplicate-id",
    ],
)
def test_report_fields_are_validated(
    tmp_path: Path, change: Callable[[Any], None], pattern: str
) -> None:
    run_dir = _copy_run(tmp_path)
    _edit_json(run_dir / "report.json", change)
    with pytest.raises(InputError, match=r"report\.json: .*" + pattern):
        eb.read_run(run_dir)


def test_symlink_in_run_directory_is_refused(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)
    (run_dir / "checks" / "extra.txt").symlink_to(run_dir / "report.md")
    with pytest.raises(InputError, match=r"extra\.txt: symbolic link"):
        eb.read_run(run_dir)


def test_symlinked_report_is_refused(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)
    (run_dir / "report.json").rename(tmp_path / "elsewhere.json")
    (run_dir / "report.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(InputError, match=r"report\.json: symbolic link"):
        eb.read_run(run_dir)


def test_symlinked_directory_inside_run_is_refused(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)
    (tmp_path / "outside").mkdir()
    (run_dir / "checks" / "evidence").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(InputError, match=r"evidence: symbolic link"):
        eb.read_run(run_dir)


def test_symlinked_run_directory_is_refused(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(run_dir, target_is_directory=True)
    with pytest.raises(InputError, match=r"run directory is a symbolic link"):
        eb.read_run(link)


def test_special_file_is_refused(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)
    os.mkfifo(run_dir / "checks" / "pipe")
    with pytest.raises(InputError, match=r"pipe: not a regular file or directory"):
        eb.read_run(run_dir)


def test_missing_run_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"cannot be read"):
        eb.read_run(tmp_path / "nope")


def test_evidence_files_and_empty_directories_are_listed(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)
    stem = eb.check_stem("passes")
    (run_dir / "checks" / stem / "sub").mkdir(parents=True)
    (run_dir / "checks" / stem / "sub" / "note.txt").write_text("evidence\n")
    (run_dir / "checks" / eb.check_stem("fails")).mkdir()
    run = eb.read_run(run_dir)
    assert f"checks/{stem}/sub/note.txt" in run.files
    assert f"checks/{eb.check_stem('fails')}" in run.directories
    assert f"checks/{stem}/sub" in run.directories
    assert check_run(run, run_dir, PROJECT) == []


# ---------------------------------------------------------------------------
# Bad inputs: check_run reports


def test_check_file_disagreeing_with_report(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)
    _edit_json(
        run_dir / "checks" / f"{eb.check_stem('fails')}.json",
        lambda c: c.update(status="passed", score=1),
    )
    findings = check_run(eb.read_run(run_dir), run_dir)
    assert _kinds(findings) == [(FindingKind.CHECK_FILE_MISMATCH, "fails")]


def test_check_file_compares_values_not_bytes(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)
    path = run_dir / "checks" / f"{eb.check_stem('passes')}.json"
    value = json.loads(path.read_bytes())
    path.write_text(json.dumps(value, indent=4, sort_keys=True))
    assert check_run(eb.read_run(run_dir), run_dir) == []
    # ...but true is not 1.
    value["score"] = True
    path.write_text(json.dumps(value))
    findings = check_run(eb.read_run(run_dir), run_dir)
    assert _kinds(findings) == [(FindingKind.CHECK_FILE_MISMATCH, "passes")]


def test_check_file_missing_or_malformed(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)
    (run_dir / "checks" / f"{eb.check_stem('passes')}.json").unlink()
    (run_dir / "checks" / f"{eb.check_stem('fails')}.json").write_text("{not json")
    findings = check_run(eb.read_run(run_dir), run_dir)
    assert _kinds(findings) == [
        (FindingKind.CHECK_FILE_MISMATCH, "fails"),
        (FindingKind.MISSING_FILE, "passes"),
    ]


def test_check_file_under_wrong_stem(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)
    right = run_dir / "checks" / f"{eb.check_stem('_inline_')}.json"
    wrong = run_dir / "checks" / f"_inline_-{hashlib.sha256(b'_inline_').hexdigest()}.json"
    right.rename(wrong)
    findings = check_run(eb.read_run(run_dir), run_dir)
    assert [(f.kind, f.path) for f in findings] == [
        (FindingKind.MISSING_FILE, f"checks/{right.name}"),
        (FindingKind.UNEXPECTED_FILE, f"checks/{wrong.name}"),
    ]


def test_stdout_tail_not_matching_full_file(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)
    check_id = "long-output-with-a-very-long-check-identifier-over-forty"
    full = run_dir / eb.stdout_file(eb.check_stem(check_id))
    text = full.read_text(encoding="utf-8")
    full.write_text(text[:-3] + "X\n", encoding="utf-8")
    findings = check_run(eb.read_run(run_dir), run_dir)
    assert _kinds(findings) == [(FindingKind.STDOUT_TAIL_MISMATCH, check_id)]


def test_stdout_change_before_the_tail_goes_unnoticed(tmp_path: Path) -> None:
    # Only the last 2,000 characters are bound by report.json: the full file is
    # what an archive's digests protect.
    run_dir = _copy_run(tmp_path)
    check_id = "long-output-with-a-very-long-check-identifier-over-forty"
    full = run_dir / eb.stdout_file(eb.check_stem(check_id))
    text = full.read_text(encoding="utf-8")
    full.write_text("Y" + text[1:], encoding="utf-8")
    assert check_run(eb.read_run(run_dir), run_dir) == []


def test_missing_stdout_file_means_empty_stdout(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)
    (run_dir / eb.stdout_file(eb.check_stem("passes"))).unlink()
    findings = check_run(eb.read_run(run_dir), run_dir)
    assert _kinds(findings) == [(FindingKind.STDOUT_TAIL_MISMATCH, "passes")]
    assert "absent, so empty" in findings[0].message
    # With the report saying "no stdout", the absent file is consistent.
    _edit_check(run_dir, "passes", lambda c: c.update(stdout=""))
    assert check_run(eb.read_run(run_dir), run_dir) == []


def test_stderr_must_match_its_file(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)
    (run_dir / eb.stderr_file(eb.check_stem("fails"))).write_text("edited\n")
    (run_dir / eb.stderr_file(eb.check_stem("passes"))).write_text("appeared\n")
    findings = check_run(eb.read_run(run_dir), run_dir)
    assert _kinds(findings) == [
        (FindingKind.STDERR_MISMATCH, "fails"),
        (FindingKind.STDERR_MISMATCH, "passes"),
    ]


def test_run_passed_that_does_not_follow(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)
    _edit_json(run_dir / "report.json", lambda r: r.update(run_passed=True))
    findings = check_run(eb.read_run(run_dir), run_dir)
    assert [(f.kind, f.field, f.expected, f.observed) for f in findings] == [
        (FindingKind.TOTALS_MISMATCH, "run_passed", "false", "true")
    ]


def test_totals_that_do_not_follow(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)

    def change(report: dict[str, Any]) -> None:
        report.update(percentage=66.6, meets_threshold=False, passed_checks=7, total_points=10)

    _edit_json(run_dir / "report.json", change)
    findings = check_run(eb.read_run(run_dir), run_dir)
    assert [f.field for f in findings] == [
        "passed_checks",
        "total_points",
        "percentage",
        "meets_threshold",
    ]
    assert {f.kind for f in findings} == {FindingKind.TOTALS_MISMATCH}


def test_status_flip_is_caught_by_totals_and_score(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)
    _edit_check(run_dir, "fails", lambda c: c.update(status="passed"))
    findings = check_run(eb.read_run(run_dir), run_dir)
    assert (FindingKind.SCORE_MISMATCH, "fails") in _kinds(findings)
    assert {f.field for f in findings if f.kind is FindingKind.TOTALS_MISMATCH} == {
        "passed_checks",
        "failed_checks",
        "points_earned",
        "percentage",
    }


def test_raw_response_path_must_name_stdout_file(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)
    _edit_check(
        run_dir, "judge", lambda c: c["details"].update(raw_response_path="checks/x.stdout.txt")
    )
    findings = check_run(eb.read_run(run_dir), run_dir)
    assert _kinds(findings) == [(FindingKind.RAW_RESPONSE_PATH_MISMATCH, "judge")]


def test_unexpected_files_are_reported(tmp_path: Path) -> None:
    run_dir = _copy_run(tmp_path)
    (run_dir / "checks" / "stray.txt").write_text("x")
    (run_dir / "notes.txt").write_text("x")
    (run_dir / eb.prompt_file(eb.check_stem("passes"))).write_text("x")
    (run_dir / "report.md").unlink()
    findings = check_run(eb.read_run(run_dir), run_dir)
    assert [(f.kind, f.path) for f in findings] == [
        (FindingKind.MISSING_FILE, "report.md"),
        (FindingKind.UNEXPECTED_FILE, f"checks/{eb.check_stem('passes')}.prompt.txt"),
        (FindingKind.UNEXPECTED_FILE, "checks/stray.txt"),
        (FindingKind.UNEXPECTED_FILE, "notes.txt"),
    ]


# ---------------------------------------------------------------------------
# Definitions under a project root


def test_definition_edited_after_the_run(tmp_path: Path) -> None:
    project = _copy_project(tmp_path)
    with (project / "eval_checks" / "passes.yaml").open("ab") as handle:
        handle.write(b"# edited\n")
    (project / "tools" / "long_output.py").write_text("print('changed')\n")
    run = eb.read_run(DEFAULT_RUN)
    findings = check_run(run, DEFAULT_RUN, project)
    assert _kinds(findings) == [
        (
            FindingKind.DEFINITION_DIGEST_MISMATCH,
            "long-output-with-a-very-long-check-identifier-over-forty",
        ),
        (FindingKind.DEFINITION_DIGEST_MISMATCH, "passes"),
    ]
    passes = next(f for f in findings if f.check_id == "passes")
    assert passes.path == "eval_checks/passes.yaml"
    assert passes.expected == run.check("passes").check_definition_sha256
    assert passes.observed == _hand_digest(
        (project / "eval_checks" / "passes.yaml").read_bytes(),
        (project / "eval_checks" / "scripts" / "passes.py").read_bytes(),
    )


def test_missing_script_that_appeared_later(tmp_path: Path) -> None:
    project = _copy_project(tmp_path)
    (project / "eval_checks" / "scripts" / "does_not_exist.py").write_text("print(1)\n")
    findings = check_run(eb.read_run(DEFAULT_RUN), DEFAULT_RUN, project)
    assert _kinds(findings) == [(FindingKind.DEFINITION_DIGEST_MISMATCH, "missing-script")]


def test_definition_missing(tmp_path: Path) -> None:
    project = _copy_project(tmp_path)
    (project / "eval_checks" / "judge.yaml").unlink()
    run = eb.read_run(DEFAULT_RUN)
    definition = resolve_definition(run, run.check("judge"), project)
    assert definition.state is DefinitionState.MISSING
    assert definition.yaml_path == "eval_checks/judge.yaml"
    findings = check_run(run, DEFAULT_RUN, project)
    assert _kinds(findings) == [(FindingKind.DEFINITION_MISSING, "judge")]


@pytest.mark.parametrize(
    "source_path",
    [
        "/etc/passwd",
        "/tmp/eb-sample/project/../secret.yaml",
        "/tmp/eb-sample/projectx/a.yaml",
        "/tmp/eb-sample/project",
        "eval_checks/passes.yaml",
    ],
)
def test_source_path_outside_project_root(tmp_path: Path, source_path: str) -> None:
    run_dir = _copy_run(tmp_path)
    _edit_check(run_dir, "passes", lambda c: c.update(source_path=source_path))
    run = eb.read_run(run_dir)
    definition = resolve_definition(run, run.check("passes"), PROJECT)
    assert definition.state is DefinitionState.OUTSIDE_PROJECT
    assert definition.yaml_bytes is None and definition.observed_digest is None
    findings = check_run(run, run_dir, PROJECT)
    assert _kinds(findings) == [(FindingKind.DEFINITION_OUTSIDE_PROJECT, "passes")]


def test_symlinked_definition_leaving_project_is_not_read(tmp_path: Path) -> None:
    project = _copy_project(tmp_path)
    outside = tmp_path / "outside.yaml"
    outside.write_bytes((PROJECT / "eval_checks" / "passes.yaml").read_bytes())
    (project / "eval_checks" / "passes.yaml").unlink()
    (project / "eval_checks" / "passes.yaml").symlink_to(outside)
    run = eb.read_run(DEFAULT_RUN)
    with pytest.raises(InputError, match="is a symbolic link \\(refused, never followed\\)"):
        resolve_definition(run, run.check("passes"), project)


def test_script_path_leaving_project_is_not_read(tmp_path: Path) -> None:
    project = _copy_project(tmp_path)
    (tmp_path / "evil.py").write_text("print(1)\n")
    yaml_path = project / "eval_checks" / "passes.yaml"
    yaml_path.write_bytes(yaml_path.read_bytes().replace(b"scripts/passes.py", b"../../evil.py"))
    run = eb.read_run(DEFAULT_RUN)
    definition = resolve_definition(run, run.check("passes"), project)
    assert definition.state is DefinitionState.OUTSIDE_PROJECT
    assert definition.script_bytes is None
    assert "leaves the project root" in (definition.detail or "")


def test_empty_inline_script_beside_script_path(tmp_path: Path) -> None:
    # eval-banana accepts script: "" with a script_path, runs the empty inline
    # script (the check passes) and yet hashes the referenced script.
    project = _copy_project(tmp_path)
    yaml_path = project / "eval_checks" / "fails.yaml"
    yaml_bytes = yaml_path.read_bytes() + b'script: ""\n'
    yaml_path.write_bytes(yaml_bytes)
    script = (project / "eval_checks" / "scripts" / "fails.py").read_bytes()
    digest = _hand_digest(yaml_bytes, script)
    run_dir = _copy_run(tmp_path)
    _edit_check(run_dir, "fails", lambda c: c.update(check_definition_sha256=digest))
    findings = check_run(eb.read_run(run_dir), run_dir, project)
    assert _kinds(findings) == [(FindingKind.EMPTY_INLINE_SCRIPT, "fails")]
    assert "eval_checks/scripts/fails.py" in findings[0].message


def test_unreadable_definition_yaml(tmp_path: Path) -> None:
    project = _copy_project(tmp_path)
    yaml_path = project / "eval_checks" / "passes.yaml"
    yaml_path.write_bytes(yaml_path.read_bytes().replace(b"script_path: ", b"script_path: &a "))
    run = eb.read_run(DEFAULT_RUN)
    definition = resolve_definition(run, run.check("passes"), project)
    assert definition.state is DefinitionState.UNREADABLE
    findings = check_run(run, DEFAULT_RUN, project)
    assert _kinds(findings) == [(FindingKind.DEFINITION_UNREADABLE, "passes")]


def test_findings_serialise() -> None:
    finding = Finding(FindingKind.TOTALS_MISMATCH, "m", path="report.json", field="x")
    assert json.loads(json.dumps(finding.to_dict()))["kind"] == "totals_mismatch"


# ---------------------------------------------------------------------------
# The YAML subset


def _keys(text: str) -> DefinitionKeys:
    return parse_definition_keys(text.encode("utf-8"), source="t.yaml")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("type: deterministic\nscript_path: a.py\n", ("deterministic", "absent", "a.py")),
        (
            "type: deterministic # c\nscript_path: a b.py  # c\n",
            ("deterministic", "absent", "a b.py"),
        ),
        ("script_path: 'it''s.py'\n", (None, "absent", "it's.py")),
        ('script_path: "q.py" # c\n', (None, "absent", "q.py")),
        ("script_path: ~\nscript: null\n", (None, "absent", None)),
        ("script_path:\nscript:\n", (None, "absent", None)),
        ('script: ""\nscript_path: s.py\n', (None, "empty", "s.py")),
        ("script: ''\n", (None, "empty", None)),
        ("script: |\n  print(1)\n", (None, "non_empty", None)),
        ("script: |-\n\n  # only a comment-looking line\n", (None, "non_empty", None)),
        ("script: >\n\n\n", (None, "empty", None)),
        ("script: |\nscript_path: s.py\n", (None, "empty", "s.py")),
        ("script: print(1)\n", (None, "non_empty", None)),
        ("\ufeff---\ntype: harness_judge\n", ("harness_judge", "absent", None)),
        ("type: deterministic\r\nscript: |\r\n  x\r\n", ("deterministic", "non_empty", None)),
        (
            "tags:\n- a\n- b\ndescription: >\n  long\n  text\nscript_path: s.py\n",
            (None, "absent", "s.py"),
        ),
        ("instructions: |\n  script_path: not-a-key\n", (None, "absent", None)),
        ("# comment\n\ntags: [a, b]\nid: x\n", (None, "absent", None)),
    ],
)
def test_yaml_subset_reads(text: str, expected: tuple[str | None, str, str | None]) -> None:
    keys = _keys(text)
    assert (keys.type, keys.script.value, keys.script_path) == expected


@pytest.mark.parametrize(
    "text",
    [
        "script_path: &a s.py\n",
        "script_path: *a\n",
        "script_path: !!str s.py\n",
        "script_path: [s.py]\n",
        "script_path: |\n  s.py\n",
        "script_path:\n  s.py\n",
        "script_path: a: b\n",
        'script_path: "a\\x41.py"\n',
        "script_path: 'open\n",
        "script_path: a.py\nscript_path: b.py\n",
        '"script_path": a.py\n',
        "? script_path\n: a.py\n",
        "<<: {script_path: a.py}\n",
        'description: "two\nscript_path: x"\n',
        "tags: [a,\nb]\n",
        "script: |2\n  x\n",
        "script: |\n     \n  x\n",
        "script: |+\n\n",
        "  type: deterministic\n",
        "type: deterministic\n...\n",
        "%YAML 1.1\n---\ntype: x\n",
        "type: x\u2028\n",
    ],
)
def test_yaml_subset_refuses(text: str) -> None:
    with pytest.raises(UnsupportedYAML, match=r"t\.yaml"):
        _keys(text)


def test_yaml_subset_refuses_non_utf8() -> None:
    with pytest.raises(UnsupportedYAML, match="not UTF-8"):
        parse_definition_keys(b"type: \xff\n", source="t.yaml")


def test_map_source_path() -> None:
    assert map_source_path("/r/p", "/r/p/a/b.yaml") == "a/b.yaml"
    assert map_source_path("/r/p/", "/r/p/a.yaml") == "a.yaml"
    assert map_source_path("/r/p", "/r/pa/b.yaml") is None
    assert map_source_path("/r/p", "/r/p/../x.yaml") is None
    assert map_source_path("/r/../p", "/p/x.yaml") is None
    assert map_source_path("r/p", "r/p/x.yaml") is None
    assert map_source_path("/r/p", "/r/p") is None
