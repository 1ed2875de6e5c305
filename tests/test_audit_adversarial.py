"""Hostile inputs to the audit, by class (issue 13 classes 4 and 8, issue 14 items 3 and 8).

- Bounds: every number of a check's inputs that sizes the work (``derive.BOUNDS``) at
  its bound, one past it, huge, negative, a boolean and a float where an integer is
  expected. At the bound it is derived; beyond, the field is "not re-derivable" with a
  reason naming the field and the bound; ill-typed or negative it is a defect (or the
  verifier refuses the bundle, exit 1); never a traceback, a hang or exit 3.
- Resources: the CLI run as a subprocess on the hostile bundles, its peak RSS taken from
  ``os.wait4`` and its wall time measured (SPEC 5: 300 MB; 10 s under 100 MB of input).
- Exit codes and the verdict line: a bundle that fails verification exits 1; one that
  cannot be read 3; a report whose result was not re-derived never reads a bare
  CONSISTENT, and ``--strict`` fails it.
- Output: every free-text field holding ESC sequences, CR, LF, bidi controls or
  zero-width characters is shown escaped in the console summary and in audit.md.
- Odd ref spellings (non-ASCII digits) in listings never give a traceback.

Hostile bundles are exported bundles edited with ``repack`` and resealed; everything
but the edited field stays self-consistent.
"""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import measure
import pytest
import repack
from conftest import EXPORTED_AT

from bundler.bundles.audit import audit_bundle
from bundler.bundles.verify import read_and_verify
from bundler.core import canonical
from bundler.core.claims import Verdict, Verification, VerifyOptions
from bundler.core.digests import json_digest
from bundler.evalbook.audit import (
    Audit,
    AuditVerdict,
    CheckAudit,
    Comparison,
    Derived,
    Disagreement,
    DisagreementKind,
    Field,
    FieldAudit,
    IssuedValue,
    Outcome,
    ReportAudit,
)
from bundler.evalbook.auditor import audit_contents
from bundler.evalbook.bounds import BOUNDS, MAX_CASES, BoundScope, bound_violations
from bundler.evalbook.export import MAX_CASES as EXPORT_MAX_CASES
from bundler.evalbook.export import ExportConfig, export_bundle
from bundler.evalbook.stats import MAX_LEVEL, MAX_RESAMPLES, bootstrap_interval, wilson_interval
from bundler.evalbook.verdicts import Problem, ProblemCode
from bundler.report.audit import audit_markdown, audit_text
from bundler.testing.fixturegen import build_large_store
from bundler.testing.fixtures_audit import build_audit_store

REPO = Path(__file__).resolve().parents[1]
OPTIONS = VerifyOptions()
BODY = "data/report/body.json"
# The repeats report: consistency is pass_rate over 5 examples x 3 repeats with a
# bootstrap interval (seed 42, 2000 resamples); every check is consistent as exported.
REPEATS_REPORT = "rpt-audit-consistent-repeats"
CHECK = "consistency"
BUDGET_BYTES = 300 * 1024 * 1024
BUDGET_SECONDS = 10.0
# The child's address space, so that a regression fails its test instead of waking the
# machine's OOM killer.
CHILD_ADDRESS_SPACE = 3 * 1024**3
HOSTILE_TEXT = (
    "\x1b[2J\x1b[H",  # clear the screen, cursor home
    "\r",
    "\n",
    "\x07",
    "\u202e",  # right-to-left override
    "\u2066",  # left-to-right isolate
    "\u200b",  # zero-width space
    "\u200d",  # zero-width joiner
    "\ufeff",  # zero-width no-break space
    "\u2028",  # line separator
    "\u00a0",  # no-break space
)
FORGED = "Verdict:     CONSISTENT"


# ----------------------------------------------------------------------------- helpers


@pytest.fixture(scope="session")
def repeats_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("adv-store") / "audit"
    build_audit_store(root)
    out = tmp_path_factory.mktemp("adv-bundles") / "repeats.tar.zst"
    export_bundle(ExportConfig(str(root), REPEATS_REPORT, "alice", EXPORTED_AT, out=out))
    return out


def resealed(source: Path, path: Path, edit: Callable[[repack.EditableBag], None]) -> Path:
    bag = repack.open_bundle(source)
    edit(bag)
    return repack.write_bundle(bag, path)


def set_aggregation(bag: repack.EditableBag, check_id: str | None, **values: Any) -> None:
    """Set aggregation fields in the suite (``check_id`` None: every check) and the check
    results alike; the report body's suite_ref follows the suite's new digest."""
    bundle = bag.bundle
    suite_path = bundle["suite"]["path"]
    suite = bag.json(suite_path)
    for check in suite["checks"]:
        if check_id in (None, check["check_id"]):
            check["aggregation"].update(values)
    bag.set_json(suite_path, suite)
    bag.edit_json(BODY, lambda body: body["suite_ref"].update(digest=json_digest(suite)))
    for entry in bundle["checks"]:
        if check_id in (None, entry["check_id"]):
            bag.edit_json(entry["path"], lambda result: result["aggregation"].update(values))


def set_interval(bag: repack.EditableBag, check_id: str | None, **values: Any) -> None:
    for entry in bag.bundle["checks"]:
        if check_id in (None, entry["check_id"]):
            bag.edit_json(entry["path"], lambda result: result["interval"].update(values))


def check_audit(audit: Audit, check_id: str) -> CheckAudit:
    return next(c for c in audit.checks if c.check_id == check_id)


def outcome(audit: Audit, check_id: str, name: Field) -> FieldAudit:
    found = check_audit(audit, check_id).get(name)
    assert found is not None
    return found


def console_script() -> list[str]:
    exe = shutil.which("evalbook-bundle", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "bundler"]


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str
    peak_rss: int  # bytes
    seconds: float  # CPU seconds of the child


def run_measured(args: list[str], *, timeout: float = 120) -> Run:
    """Run ``args`` as a child with a capped address space; its own peak RSS from wait4
    (through a small launcher, so this worker's memory is not counted: tests/measure.py)."""
    m = measure.spawn_measured(args, deadline=timeout, address_space=CHILD_ADDRESS_SPACE)
    return Run(
        m.code,
        m.stdout.decode("utf-8", "replace"),
        m.stderr.decode("utf-8", "replace"),
        m.peak_bytes,
        m.cpu,  # CPU, not wall: the suite shares two cores (as test_resource_budget)
    )


class _spool:
    """A temporary file for a child's output (a pipe could fill and block the child)."""

    def __enter__(self) -> Any:
        import tempfile

        self.file = tempfile.TemporaryFile()
        return self.file

    def __exit__(self, *exc: object) -> None:
        self.file.close()


def audit_cli(bundle: Path, *extra: str, timeout: float = 120) -> Run:
    return run_measured([*console_script(), "audit", str(bundle), *extra], timeout=timeout)


def assert_no_traceback(run: Run) -> None:
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.returncode in (0, 1, 3), (run.returncode, run.stderr[-2000:])


def assert_within_budget(run: Run) -> None:
    assert run.peak_rss < BUDGET_BYTES, f"peak RSS {run.peak_rss / 2**20:.0f} MiB"
    assert run.seconds < BUDGET_SECONDS, f"{run.seconds:.1f} s"


# ------------------------------------------------------------------- the bound table


def test_the_case_bound_is_the_exporters() -> None:
    assert MAX_CASES == EXPORT_MAX_CASES == 20_000


def test_every_bound_is_documented_in_format_md() -> None:
    text = (REPO / "docs" / "format.md").read_text("utf-8")
    audit = text[text.index("## Audit") :]
    audit = audit[: audit.index("\n## ", 1)]
    for name in ("repeats", "min_samples", "examples", "case lines", "resamples", "level", "seed"):
        assert f"| {name}" in audit or f"`aggregation.{name}`" in audit or name in audit
    assert "10,000" in audit and "20,000" in audit and "2^-52" in audit


BOUND_FIELDS = sorted(BOUNDS)


def _violations(name: str, value: Any) -> tuple[Any, ...]:
    """``bound_violations`` with ``value`` in the one field ``name``."""
    aggregation: dict[str, object] = {}
    interval: dict[str, object] = {}
    counts = {"examples": 0, "cases": 0, "draws": 0}
    group, _, key = name.partition(".")
    if group == "aggregation":
        aggregation[key] = value
    elif group == "interval":
        interval[key] = value
    else:
        counts[name.replace("bootstrap ", "")] = value
    return bound_violations(aggregation, interval, **counts)


@pytest.mark.parametrize("name", BOUND_FIELDS)
def test_each_bound_admits_its_limit_and_names_itself_one_past_it(name: str) -> None:
    bound = BOUNDS[name]
    past: int | float = (
        bound.high + 1 if bound.integer else float(__import__("math").nextafter(bound.high, 2))
    )
    assert _violations(name, bound.high) == ()
    (found,) = _violations(name, past)
    assert found.field == name and found.scope is bound.scope
    assert name in found.reason and repr(bound.high) in found.reason
    assert "\n" not in found.reason


@pytest.mark.parametrize("name", [n for n in BOUND_FIELDS if "." in n])
@pytest.mark.parametrize("value", [-1, True, False, 2.5, None, "7", [3]])
def test_ill_typed_or_negative_values_are_not_judged_by_the_bounds(
    name: str, value: object
) -> None:
    # They are defects the parsers report (or the verifier refuses); the bound table
    # judges only numbers of the right type at or above their minimum.
    found = _violations(name, value)
    if value == 2.5 and not BOUNDS[name].integer and not isinstance(value, bool):
        assert [b.field for b in found] == [name]  # a level of 2.5 is a level, too high
    else:
        assert found == ()


# --------------------------------------------------------- bounded fields in a bundle


@dataclass(frozen=True)
class Hostile:
    field: str
    value: object
    expect: str  # "derived" | "beyond" | "defect"


def _hostiles() -> list[Hostile]:
    import math

    past_level = math.nextafter(MAX_LEVEL, 2.0)
    return [
        Hostile("aggregation.repeats", MAX_CASES, "derived"),
        Hostile("aggregation.repeats", MAX_CASES + 1, "beyond"),
        Hostile("aggregation.repeats", -1, "defect"),
        Hostile("aggregation.repeats", 0, "defect"),
        Hostile("aggregation.repeats", True, "defect"),
        Hostile("aggregation.repeats", 2.5, "defect"),
        Hostile("aggregation.min_samples", MAX_CASES, "derived"),
        Hostile("aggregation.min_samples", MAX_CASES + 1, "beyond"),
        Hostile("aggregation.min_samples", 2**53 - 1, "beyond"),
        Hostile("aggregation.min_samples", -1, "defect"),
        Hostile("aggregation.min_samples", True, "defect"),
        Hostile("aggregation.min_samples", 2.5, "defect"),
        Hostile("interval.resamples", MAX_RESAMPLES, "derived"),
        Hostile("interval.resamples", MAX_RESAMPLES + 1, "beyond"),
        Hostile("interval.resamples", -1, "defect"),
        Hostile("interval.resamples", 0, "defect"),
        Hostile("interval.resamples", True, "defect"),
        Hostile("interval.resamples", 2.5, "defect"),
        Hostile("interval.level", MAX_LEVEL, "derived"),
        Hostile("interval.level", past_level, "beyond"),
        Hostile("interval.level", -0.5, "defect"),
        Hostile("interval.level", 1.5, "defect"),
        Hostile("interval.level", True, "defect"),
        Hostile("interval.seed", 2**53 - 1, "derived"),
        Hostile("interval.seed", -1, "defect"),
        Hostile("interval.seed", True, "defect"),
        Hostile("interval.seed", 2.5, "defect"),
    ]


@pytest.mark.parametrize("hostile", _hostiles(), ids=lambda h: f"{h.field}={h.value!r}")
def test_bounded_fields_of_a_resealed_bundle(
    hostile: Hostile, repeats_bundle: Path, tmp_path: Path
) -> None:
    group, _, key = hostile.field.partition(".")

    def edit(bag: repack.EditableBag) -> None:
        if group == "aggregation":
            set_aggregation(bag, CHECK, **{key: hostile.value})
        else:
            set_interval(bag, CHECK, **{key: hostile.value})

    path = resealed(repeats_bundle, tmp_path / "hostile.tar.zst", edit)
    start = time.perf_counter()
    audit = audit_bundle(str(path), OPTIONS)
    assert time.perf_counter() - start < BUDGET_SECONDS
    text = audit_text(audit)
    assert audit.verification is not None
    if hostile.expect == "defect":
        # Either the verifier refuses the document (schema, claim 11: exit 1), or the
        # audit names the defect: an error of the check, or the field not re-derivable.
        if audit.verification.verdict is not Verdict.VERIFIED:
            assert audit.verification.verdict is Verdict.FAILED and audit.exit_code == 1
            return
        assert audit.verdict is not AuditVerdict.ERROR, text
        names = {p.code for p in check_audit(audit, CHECK).errors}
        field = Field.INTERVAL if group == "interval" else Field.STATUS
        assert names or outcome(audit, CHECK, field).outcome is Outcome.NOT_REDERIVABLE
        return
    assert audit.verification.verdict is Verdict.VERIFIED, text
    watched = Field.INTERVAL if group == "interval" else Field.STATUS
    f = outcome(audit, CHECK, watched)
    if hostile.expect == "derived":
        assert f.outcome in (Outcome.AGREE, Outcome.DISAGREE), text
        assert not any(hostile.field in (n.reason or "") for n in audit.not_rederivable)
        return
    assert f.outcome is Outcome.NOT_REDERIVABLE, text
    assert f.reason is not None and hostile.field in f.reason
    assert repr(BOUNDS[hostile.field].high) in f.reason
    assert audit.disagreements == () and audit.exit_code == 0
    if BOUNDS[hostile.field].scope is BoundScope.CHECK:
        # Nothing of the check, and so not the report's result, was re-derived.
        assert audit.report_result_blocker is not None
        assert "NOT RE-DERIVED" in text and "CONSISTENT" not in text.split("\n")[3]


# ------------------------------------------------------------ resources, as the CLI


def _huge_repeats(bag: repack.EditableBag) -> None:
    set_aggregation(bag, CHECK, repeats=100_000_000)


def _largest_repeats(bag: repack.EditableBag) -> None:
    set_aggregation(bag, None, repeats=2**53 - 1)


def _huge_resamples(bag: repack.EditableBag) -> None:
    set_interval(bag, CHECK, resamples=1_000_000_000)


def _largest_resamples(bag: repack.EditableBag) -> None:
    set_interval(bag, None, resamples=2**53 - 1)


HUGE = {
    "repeats-1e8": (_huge_repeats, "aggregation.repeats"),
    "repeats-2^53-1": (_largest_repeats, "aggregation.repeats"),
    "resamples-1e9": (_huge_resamples, "interval.resamples"),
    "resamples-2^53-1": (_largest_resamples, "interval.resamples"),
}


@pytest.mark.parametrize("name", sorted(HUGE))
def test_huge_counts_are_not_rederivable_within_the_budget(
    name: str, repeats_bundle: Path, tmp_path: Path
) -> None:
    edit, field = HUGE[name]
    path = resealed(repeats_bundle, tmp_path / f"{name}.tar.zst", edit)
    run = audit_cli(path, "--json", timeout=60)
    assert_no_traceback(run)
    assert_within_budget(run)
    assert run.returncode == 0, run.stderr[-2000:]
    doc = json.loads(run.stdout)
    reasons = [item["reason"] for item in doc["not_rederivable"]]
    assert any(field in r and str(BOUNDS[field].high) in r for r in reasons), reasons
    # --json: the one JSON line is all of stdout.
    assert run.stdout.count("\n") == 1 and run.stdout.endswith("}\n")


@pytest.fixture(scope="module")
def large_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20,000 cases of one check over 20,000 examples: the most a bundle holds."""
    root = tmp_path_factory.mktemp("adv-large")
    build_large_store(root / "store", cases=MAX_CASES, checks=1)
    out = root / "large.tar.zst"
    export_bundle(
        ExportConfig(
            str(root / "store"), "rpt-large", "alice", datetime(2026, 11, 30, tzinfo=UTC), out=out
        )
    )
    return out


LARGE = {
    # 20,000 examples x 20,000 repeats: 4 x 10^8 slots if expanded; nothing executed.
    "repeats-at-bound": lambda bag: set_aggregation(bag, None, repeats=MAX_CASES),
    "repeats-1e8": lambda bag: set_aggregation(bag, None, repeats=100_000_000),
    # The bundle's bootstrap budget exactly: 2,000 resamples x 20,000 cases, derived.
    "bootstrap-draws-at-bound": lambda bag: set_interval(
        bag,
        None,
        method="bootstrap-percentile/philox4x64-10/t7",
        resamples=2000,
        seed=1,
    ),
    # The most resamples, over the most cases: 2 x 10^8 draws, not re-derived.
    "bootstrap-resamples-at-bound": lambda bag: set_interval(
        bag,
        None,
        method="bootstrap-percentile/philox4x64-10/t7",
        resamples=MAX_RESAMPLES,
        seed=1,
    ),
    "resamples-1e9": lambda bag: set_interval(
        bag,
        None,
        method="bootstrap-percentile/philox4x64-10/t7",
        resamples=1_000_000_000,
        seed=1,
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(LARGE))
def test_many_cases_stay_within_the_budget(name: str, large_bundle: Path, tmp_path: Path) -> None:
    path = resealed(large_bundle, tmp_path / f"{name}.tar.zst", LARGE[name])
    assert path.stat().st_size < 100 * 1024 * 1024
    run = audit_cli(path, "--json", timeout=300)
    assert_no_traceback(run)
    assert run.returncode in (0, 1)
    assert run.peak_rss < BUDGET_BYTES, f"peak RSS {run.peak_rss / 2**20:.0f} MiB"
    doc = json.loads(run.stdout)
    (check,) = doc["checks"]
    interval = next(f for f in check["fields"] if f["field"] == "interval")
    if name == "bootstrap-draws-at-bound":
        assert interval["outcome"] in ("agree", "disagree"), interval
    elif name == "bootstrap-resamples-at-bound":
        assert interval["outcome"] == "not_rederivable"
        assert "bootstrap draws 200000000 is above 40000000" in interval["reason"]
    # The audit's own work, after the verification it starts with, within 10 s (the
    # verification's share is the verifier's; on a loaded machine the two wall times of
    # separate processes are too noisy to subtract).
    verification, contents = read_and_verify(str(path), OPTIONS)
    assert verification.verdict is Verdict.VERIFIED and contents is not None
    start = time.perf_counter()
    audit = audit_contents(verification, contents.kept)
    seconds = time.perf_counter() - start
    print(
        f"{name}: whole audit {run.seconds:.1f} s, {run.peak_rss / 2**20:.0f} MiB; "
        f"audit after verification {seconds:.1f} s"
    )
    assert audit.exit_code == run.returncode
    assert seconds < BUDGET_SECONDS


_SPARSE = textwrap.dedent(
    """
    import time
    from bundler.evalbook.derive import derive_check
    ids = [f"ex-{i:05d}" for i in range(20_000)]
    output = {"kind": "output", "digest": "sha256:" + "ab" * 32, "size": 1, "location": "inline"}
    cases = [
        {"case_id": f"c{i}", "example": {"dataset_id": "d", "version": 1, "example_id": e},
         "repeat": 1 + i % 7, "status": "pass", "score": 1, "assurance": "reported",
         "output": output}
        for i, e in enumerate(ids)
    ]
    for rule in ("all_pass", "pass_rate", "mean", "min"):
        start = time.perf_counter()
        check = derive_check(
            {"rule": rule, "threshold": 0.5, "repeats": 20_000},
            dataset_id="d", dataset_version=1, expected_example_ids=ids, cases=cases,
        )
        assert check.coverage.executed == 0 and check.coverage.missing == 20_000, check
        assert check.status.value == "missing", check.status
        print(rule, round(time.perf_counter() - start, 2))
    check = derive_check(
        {"rule": "pass_rate", "threshold": 0.5, "repeats": 10**15},
        dataset_id="d", dataset_version=1, expected_example_ids=ids, cases=cases,
    )
    assert check.status.value == "error"
    assert [p.code.value for p in check.problems] == ["invalid_repeats"], check.problems
    assert "above 20000" in check.problems[0].message
    print("ok")
    """
)


def test_derivation_never_expands_examples_times_repeats() -> None:
    # 20,000 expected examples x 20,000 repeats, one case each: the cost is the cases'.
    run = run_measured([sys.executable, "-c", _SPARSE], timeout=60)
    assert run.returncode == 0 and run.stdout.endswith("ok\n"), run.stderr[-2000:]
    assert_within_budget(run)


# --------------------------------------------------------------- stats, second line


def test_stats_refuse_what_the_bounds_refuse() -> None:
    from bundler.core.errors import InputError

    values = [0.5, 0.25, 1.0]
    with pytest.raises(InputError, match="resamples"):
        bootstrap_interval(
            values, statistic="mean", seed=1, level=0.95, resamples=MAX_RESAMPLES + 1
        )
    with pytest.raises(InputError, match="values"):
        bootstrap_interval([0.5] * (MAX_CASES + 1), statistic="mean", seed=1, level=0.95)
    import math

    past = math.nextafter(MAX_LEVEL, 2.0)
    # The largest double below 1: its upper tail rounds to 1, whose quantile is infinite.
    with pytest.raises(InputError, match="level"):
        wilson_interval(3, 10, past)
    with pytest.raises(InputError, match="level"):
        bootstrap_interval(values, statistic="mean", seed=1, level=past)
    low, high = wilson_interval(3, 10, MAX_LEVEL)
    assert 0.0 <= low <= high <= 1.0
    bootstrap_interval(values, statistic="mean", seed=1, level=MAX_LEVEL, resamples=MAX_RESAMPLES)


# ---------------------------------------------------------- exit codes and the verdict


def test_a_bundle_that_fails_verification_exits_1(repeats_bundle: Path, tmp_path: Path) -> None:
    bag = repack.open_bundle(repeats_bundle)
    path = f"data/cases/{CHECK}.jsonl"
    bag.files[path] = bag.files[path].replace(b'"status":"pass"', b'"status":"fail"', 1)
    tampered = repack.write_bundle(bag, tmp_path / "tampered.tar.zst", bundle_json=False)
    run = audit_cli(tampered, "--json")
    assert_no_traceback(run)
    assert run.returncode == 1, run.stderr[-2000:]
    doc = json.loads(run.stdout)
    assert doc["verdict"] == "error" and doc["exit_code"] == 1
    # The error is said on stderr too, in one line, even with --json.
    (line,) = run.stderr.splitlines()
    assert line.startswith("evalbook-bundle: error: verification failed")


def test_a_bundle_that_cannot_be_read_exits_3(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.zst"
    junk.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 64)
    run = audit_cli(junk, "--json")
    assert_no_traceback(run)
    assert run.returncode == 3
    assert json.loads(run.stdout)["exit_code"] == 3


def test_a_report_result_not_rederived_is_said_and_fails_strict(
    repeats_bundle: Path, tmp_path: Path
) -> None:
    path = resealed(repeats_bundle, tmp_path / "beyond.tar.zst", _huge_repeats)
    plain = audit_cli(path)
    assert plain.returncode == 0, plain.stderr[-2000:]
    verdict = next(line for line in plain.stdout.splitlines() if line.startswith("Verdict:"))
    assert "CONSISTENT" not in verdict and verdict.startswith("Verdict:     NOT RE-DERIVED")
    assert "the report's result was not re-derived" in verdict
    assert "aggregation.repeats 100000000 is above 20000" in verdict
    strict = audit_cli(path, "--strict", "--json")
    assert strict.returncode == 1, strict.stderr[-2000:]
    doc = json.loads(strict.stdout)
    assert doc["verdict"] == "consistent" and doc["exit_code"] == 1
    human = audit_cli(path, "--strict")
    assert human.returncode == 1
    assert "--strict: what was not re-derived fails the audit" in human.stdout


def test_cases_cut_by_case_limit_say_so_in_the_verdict(repeats_bundle: Path) -> None:
    bag = repack.open_bundle(repeats_bundle)
    bundle = bag.bundle
    entry = next(c for c in bundle["checks"] if c["check_id"] == CHECK)
    entry["cases"]["total"] = entry["cases"]["exported"] + 3
    bundle["unavailable"].append(
        {"kind": "cases", "ref": CHECK, "digest": None, "reason": "case_limit", "detail": "3"}
    )
    bag.set_bundle(bundle)
    for strict in (False, True):
        verification = Verification(source="<edited>", verdict=Verdict.VERIFIED, strict=strict)
        audit = audit_contents(verification, dict(bag.files))
        verdict = next(x for x in audit_text(audit).splitlines() if x.startswith("Verdict:"))
        assert verdict.startswith("Verdict:     NOT RE-DERIVED"), verdict
        assert f"required check {CHECK}: case_limit: 3 of 18 cases were not exported" in verdict
        assert audit.exit_code == (1 if strict else 0)
        assert ("--strict" in verdict) is strict
        assert "NOT RE-DERIVED" in audit_markdown(audit)


# ------------------------------------------------------------------ output that lies


def _hostile_audit(bad: str) -> Audit:
    """An audit whose every free-text field carries ``bad``."""
    body = f"data/report/body{bad}.json"
    issued = (IssuedValue(body, f"pass{bad}"), IssuedValue(f"data/checks/x{bad}.json", 0.5))
    disagreement = Disagreement(
        f"chk{bad}",
        Field.STATUS,
        DisagreementKind.ISSUED_VS_DERIVED,
        issued,
        Derived(f"fail{bad}"),
        Comparison.EXACT,
    )
    fields = (
        FieldAudit(
            Field.STATUS,
            Outcome.DISAGREE,
            issued,
            Derived(f"fail{bad}"),
            Comparison.EXACT,
            disagreements=(disagreement,),
        ),
        FieldAudit(
            Field.SCORE,
            Outcome.NOT_REDERIVABLE,
            issued,
            None,
            Comparison.TOLERANCE,
            reason=f"because{bad}",
        ),
        FieldAudit(
            Field.RESULT,
            Outcome.INFORMATIONAL,
            issued,
            Derived({f"k{bad}": bad}),
            Comparison.EXACT,
            reason=f"note{bad}",
        ),
    )
    check = CheckAudit(
        f"chk{bad}", True, fields, (Problem(ProblemCode.MALFORMED_CASE, f"case {bad}: bad"),)
    )
    verification = Verification(
        source=f"bundle{bad}.tar.zst",
        verdict=Verdict.VERIFIED,
        bundle_digest=f"sha256:{bad}",
        report_id=f"rpt{bad}",
        report_digest=f"sha256:{bad}",
    )
    report = ReportAudit(f"rpt{bad}", fields)
    return Audit(
        f"bundle{bad}.tar.zst", AuditVerdict.INCONSISTENT, verification, None, report, (check,)
    )


def _invisible(text: str) -> list[str]:
    return [
        ch
        for ch in text
        if ch != "\n" and (unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") or ch == "\u00a0")
    ]


@pytest.mark.parametrize("bad", HOSTILE_TEXT, ids=lambda b: f"U+{ord(b[0]):04X}")
def test_every_free_text_field_is_shown_escaped(bad: str) -> None:
    hostile = _hostile_audit(bad + FORGED)
    plain = _hostile_audit("X" + FORGED.replace(" ", "_").replace(":", "_"))
    for render in (audit_text, audit_markdown):
        out = render(hostile)
        assert _invisible(out) == [], render.__name__
        # No value adds a line: the page has the shape of the same audit with plain text.
        assert out.count("\n") == render(plain).count("\n"), render.__name__
        assert not any(line.startswith("Verdict:     CONSISTENT") for line in out.splitlines())
    error = Audit("b\x1b[2J.tar.zst", AuditVerdict.ERROR, None, f"bad {bad}{FORGED}")
    for render in (audit_text, audit_markdown):
        out = render(error)
        assert _invisible(out) == []
        assert out.count("\n") == render(Audit("b", AuditVerdict.ERROR, None, "x")).count("\n")


def test_markdown_values_cannot_open_cells_code_or_tags() -> None:
    audit = _hostile_audit("|`<img src=x onerror=alert(1)>*_[x](y)#")
    page = audit_markdown(audit)
    for line in page.splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            pipes = sum(
                1 for i, ch in enumerate(line) if ch == "|" and (i == 0 or line[i - 1] != "\\")
            )
            assert pipes == 5, line
    for line in page.splitlines():
        for ch in "`<>[]":
            bare = [i for i, c in enumerate(line) if c == ch and line[i - 1 : i] != "\\"]
            assert bare == [], (ch, line)


def _rename_check(bag: repack.EditableBag, old: str, new: str) -> None:
    """Rename a check in every document the audit reads (paths stay: audit_contents
    reads the bag as given, no verifier runs)."""
    bundle = bag.bundle
    for entry in bundle["checks"]:
        if entry["check_id"] == old:
            entry["check_id"] = new
            bag.edit_json(entry["path"], lambda r: r.update(check_id=new))
            lines = []
            for line in bag.lines(entry["cases"]["path"]):
                case = canonical.loads(line)
                case["check_id"] = new
                case["case_id"] = case["case_id"] + new
                lines.append(canonical.dumps(case))
            bag.set_lines(entry["cases"]["path"], lines)
    bag.set_bundle(bundle)

    def rename(document: dict[str, Any]) -> None:
        for check in document["checks"]:
            if check["check_id"] == old:
                check["check_id"] = new

    bag.edit_json(BODY, rename)
    bag.edit_json(bundle["suite"]["path"], rename)


@pytest.mark.parametrize("bad", HOSTILE_TEXT, ids=lambda b: f"U+{ord(b[0]):04X}")
def test_hostile_ids_from_a_bundle_are_shown_escaped(bad: str, repeats_bundle: Path) -> None:
    bag = repack.open_bundle(repeats_bundle)
    new = f"{CHECK}{bad}{FORGED}"
    _rename_check(bag, CHECK, new)

    def wrong(case: dict[str, Any]) -> None:  # an unexpected example: its id in a message
        case["example"]["example_id"] = f"rp-9{bad}"

    path = f"data/cases/{CHECK}.jsonl"
    lines = bag.lines(path)
    case = canonical.loads(lines[0])
    wrong(case)
    bag.set_lines(path, [*lines, canonical.dumps(case)])
    audit = audit_contents(Verification(source="<edited>", verdict=Verdict.VERIFIED), bag.files)
    assert audit.verdict is AuditVerdict.INCONSISTENT
    assert any(c.check_id == new for c in audit.checks)
    for render in (audit_text, audit_markdown):
        out = render(audit)
        assert _invisible(out) == [], render.__name__
        assert not any(line.startswith(FORGED) for line in out.splitlines())


# ------------------------------------------------------------- odd spellings in refs


ODD_REFS = [
    "ds-repeats@\uff11/rp-0000",  # FULLWIDTH DIGIT ONE
    "ds-repeats@\u0663/rp-0000",  # ARABIC-INDIC DIGIT THREE
    "ds-repeats@\u00b9/rp-0000",  # SUPERSCRIPT ONE (str.isdigit accepts it)
    "ds-repeats@01/rp-0000",
    "ds-repeats@+1/rp-0000",
    "ds-repeats@1\x1b[2J/rp-0000",
    "ds-repeats@/rp-0000",
    "@",
    "",
]


@pytest.mark.parametrize("ref", ODD_REFS)
@pytest.mark.parametrize("kind", ["example", "dataset", "cases", "suite", "check"])
def test_odd_ref_spellings_in_listings_never_crash_the_audit(
    kind: str, ref: str, repeats_bundle: Path
) -> None:
    bag = repack.open_bundle(repeats_bundle)
    bundle = bag.bundle
    bundle["unavailable"].append(
        {
            "kind": kind,
            "ref": ref,
            "digest": None,
            "reason": "missing_from_store",
            "detail": f"detail {ref}",
        }
    )
    bag.set_bundle(bundle)
    audit = audit_contents(Verification(source="<edited>", verdict=Verdict.VERIFIED), bag.files)
    assert audit.verdict is AuditVerdict.CONSISTENT
    assert _invisible(audit_text(audit)) == [] and _invisible(audit_markdown(audit)) == []


@pytest.mark.parametrize("ref", ODD_REFS[:3] + ODD_REFS[5:6])
def test_odd_ref_spellings_through_the_cli(ref: str, repeats_bundle: Path, tmp_path: Path) -> None:
    def edit(bag: repack.EditableBag) -> None:
        bundle = bag.bundle
        bundle["unavailable"].append(
            {
                "kind": "example",
                "ref": ref,
                "digest": None,
                "reason": "removed_by_retention",
                "detail": None,
            }
        )
        bag.set_bundle(bundle)

    run = audit_cli(resealed(repeats_bundle, tmp_path / "odd.tar.zst", edit))
    assert_no_traceback(run)
    assert_within_budget(run)
    # A ref in no canonical form fails claim 10: verification failed, exit 1.
    assert run.returncode == 1, run.stderr[-2000:]
    assert "Verdict:" in run.stdout
    assert _invisible(run.stdout.replace("\n", "")) == []
