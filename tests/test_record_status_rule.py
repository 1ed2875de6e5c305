"""`render` holds an audit record's derived statuses to SPEC 12's rule (SPEC 12, 14).

A check's derived status must be one the auditor's own status rule
(``derive.decide_status``, read over what a record keeps by ``derive.statuses_given``)
gives over the check's own derived values: its listed errors, its score against its
aggregation's threshold, its coverage against min_coverage and min_samples. Its derived
result must be the one the status gives, and the report's derived result the one its
required checks' derived results give. By class: every status x every reason it could be
wrong, in memory over the whole matrix and through the installed command for each
reason; and, the other way round, every status derivation gives is admitted for the
values it derives with it (a property over generated checks).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_record_coherence import _refused, _renders

from bundler.core.errors import InputError
from bundler.evalbook.audit import TOLERANCE_RULE
from bundler.evalbook.derive import derive_check, statuses_given
from bundler.evalbook.verdicts import CheckResult, CheckStatus, Coverage
from bundler.report.record import sift_value

ALL = frozenset(s.value for s in CheckStatus)
UNSCORED = ALL - {"pass", "fail"}
D = "sha256:" + "1" * 64


def _field(name: str, value: Any, *, derived: bool = True, outcome: str = "agree") -> dict:
    comparison = "tolerance" if name in ("score", "interval") else "exact"
    reason = {"agree": None, "informational": "no document", "not_rederivable": "cut"}[outcome]
    return {
        "field": name,
        "outcome": outcome,
        "issued": [] if outcome == "informational" else [{"document": "body.json", "value": value}],
        "derived": {"value": value} if derived and outcome != "not_rederivable" else None,
        "comparison": comparison,
        "reason": reason,
    }


def check(
    status: str,
    *,
    rule: str = "pass_rate",
    threshold: float | None = 0.5,
    min_coverage: float | None = None,
    min_samples: int | None = None,
    expected: int = 10,
    executed: int = 10,
    score: float | None = 0.8,
    errors: int = 0,
    unknown: tuple[str, ...] = (),
    check_id: str = "acc",
    required: bool = True,
    evidence: bool = True,
) -> dict[str, Any]:
    """A check whose every field agrees with its derived value; the fields named in
    ``unknown`` are not re-derived."""
    aggregation = {
        "rule": rule,
        "threshold": threshold,
        "min_coverage": min_coverage,
        "min_samples": min_samples,
        "repeats": 1,
    }
    result = CheckResult.from_status(CheckStatus(status)).value if status in ALL else status
    values = {
        "status": status,
        "result": result,
        "coverage": {"expected": expected, "executed": executed, "missing": expected - executed},
        "score": score,
    }
    fields = [
        _field(name, value, outcome="not_rederivable" if name in unknown else "agree")
        for name, value in values.items()
    ]
    agg = _field("aggregation", aggregation, derived=False)
    fields.append(agg)
    fields.append(_field("evidence_complete", evidence, outcome="informational"))
    return {
        "check_id": check_id,
        "required": required,
        "fields": fields,
        "errors": [{"code": "missing_score", "message": "a case has no score"}] * errors,
    }


def audit(*checks: dict[str, Any], report_result: Any = None) -> dict[str, Any]:
    """A schema-valid audit record, consistent in its outcomes and counts, of ``checks``
    (and a report whose derived result is ``report_result``, if given)."""
    report_fields = [] if report_result is None else [_field("result", report_result)]
    fields = report_fields + [f for c in checks for f in c["fields"]]
    outcomes = [f["outcome"] for f in fields]
    errors = [{"check_id": c["check_id"], **e} for c in checks for e in c["errors"]]
    return {
        "schema": "evalbook.audit.v1",
        "source": "bundle.tar.zst",
        "verdict": "consistent",
        "exit_code": 0,
        "error": None,
        "verification": None,
        "anchor": {
            "expected_bundle_digest": None,
            "expected_report_digest": None,
            "signer": None,
            "self_consistent_only": True,
            "description": "self-consistency only",
        },
        "tolerance": {"value": 1e-12, "rule": TOLERANCE_RULE},
        "counts": {
            "checks": len(checks),
            "agree": outcomes.count("agree"),
            "disagree": 0,
            "not_rederivable": outcomes.count("not_rederivable"),
            "informational": outcomes.count("informational"),
            "disagreements": 0,
            "errors": len(errors),
        },
        "report": {"report_id": "rpt-x", "fields": report_fields},
        "checks": list(checks),
        "disagreements": [],
        "not_rederivable": [],
        "errors": errors,
        "tool": {"name": "evalbook-bundle", "version": "0.1.0"},
        "audited_at": "2026-11-30T00:00:00Z",
        "archive": None,
    }


def refusal(record: dict[str, Any]) -> str | None:
    try:
        sift_value(record, source="record.json")
    except InputError as exc:
        return exc.message
    return None


# reason -> (the check's values, the statuses SPEC 12 admits for them), read from SPEC 12.
REASONS: dict[str, tuple[dict[str, Any], frozenset[str]]] = {
    # Score against threshold, every example executed: the value alone decides.
    "score_below_threshold": ({"score": 0.2}, frozenset({"fail"})),
    "score_equals_threshold": ({"score": 0.5}, frozenset({"pass"})),
    "score_above_threshold": ({"score": 0.8}, frozenset({"pass"})),
    "mean_below": ({"rule": "mean", "score": 0.49}, frozenset({"fail"})),
    "min_equal": ({"rule": "min", "score": 0.5}, frozenset({"pass"})),
    "negative_threshold": ({"rule": "mean", "threshold": -1.0, "score": -1.5}, frozenset({"fail"})),
    # Some examples not executed, coverage enough: below the threshold still fails;
    # meeting it passes, or fails when a repeat outside the executed ones already failed.
    "partial_score_below": (
        {"executed": 8, "min_coverage": 0.5, "score": 0.2},
        frozenset({"fail"}),
    ),
    "partial_score_meets": (
        {"executed": 8, "min_coverage": 0.5, "score": 0.5},
        frozenset({"pass", "fail"}),
    ),
    # Coverage against min_coverage (exact), min_samples, nothing executed: never pass;
    # fail when already failed, else the highest unscored status or inconclusive.
    "coverage_below_min": (
        {"executed": 4, "min_coverage": 0.5, "score": 0.9},
        UNSCORED | {"fail"},
    ),
    "coverage_equals_min_exactly": (
        {"expected": 25, "executed": 7, "min_coverage": 0.28, "score": 0.9},
        frozenset({"pass", "fail"}),
    ),
    "below_min_samples": ({"executed": 5, "min_samples": 6, "score": 0.9}, UNSCORED | {"fail"}),
    "all_executed_below_min_samples": (
        {"executed": 10, "min_samples": 11, "score": 0.9},
        frozenset({"inconclusive"}),
    ),
    "nothing_executed": ({"executed": 0, "score": None}, UNSCORED | {"fail"}),
    "no_expected_example": (
        {"expected": 0, "executed": 0, "score": None},
        frozenset({"inconclusive"}),
    ),
    # Errors listed make the status error, whatever the numbers say.
    "errors_listed": ({"errors": 1, "score": 0.9}, frozenset({"error"})),
    "errors_listed_below": ({"errors": 2, "score": 0.1}, frozenset({"error"})),
    "invalid_aggregation": ({"rule": "median"}, frozenset({"error"})),
    # No threshold: no decision.
    "missing_threshold": ({"threshold": None, "score": 0.9}, frozenset({"inconclusive"})),
    # A null score with examples executed: the value cannot meet the threshold.
    "null_score_executed": ({"score": None}, frozenset({"fail"})),
    # all_pass has no score: complete coverage passes or fails, short coverage never passes.
    "all_pass_complete": ({"rule": "all_pass", "score": None}, frozenset({"pass", "fail"})),
    "all_pass_short": (
        {"rule": "all_pass", "executed": 3, "min_coverage": 0.5, "score": None},
        UNSCORED | {"fail"},
    ),
    # What the record does not re-derive is tried at every value it can take.
    "score_not_rederived": ({"score": 0.2, "unknown": ("score",)}, frozenset({"pass", "fail"})),
    "coverage_not_rederived": (
        {"score": 0.8, "unknown": ("coverage",)},
        ALL,
    ),
    "status_not_rederived": ({"score": 0.2, "unknown": ("status", "result")}, ALL),
}


@pytest.mark.parametrize("reason", sorted(REASONS))
@pytest.mark.parametrize("status", sorted(ALL))
def test_every_status_for_every_reason(reason: str, status: str) -> None:
    values, admitted = REASONS[reason]
    message = refusal(audit(check(status, **values)))
    if status in admitted:
        assert message is None, message
    else:
        assert message is not None
        assert message.startswith("record.json: /checks/0/fields/0/derived/value: status: says ")
        assert "SPEC 12's status rule" in message and "\n" not in message


def test_the_reviewed_pass_below_threshold_is_refused(tmp_path: Path) -> None:
    """Score 0.2, threshold 0.5, enough coverage, derived pass: shown as CONSISTENT before."""
    record = audit(check("pass", score=0.2, threshold=0.5, executed=9, min_coverage=0.5))
    line = _refused(tmp_path, record, "/checks/0/fields/0/derived/value")
    assert "score 0.2" in line and "threshold 0.5" in line and "gives fail" in line


# One wrong status and one right one per reason, through the installed command.
CLI_CASES = [
    (reason, sorted(ALL - admitted)[0], sorted(admitted)[0])
    for reason, (_, admitted) in sorted(REASONS.items())
    if ALL - admitted
]


@pytest.mark.parametrize(("reason", "wrong", "right"), CLI_CASES)
def test_the_command_refuses_by_reason(tmp_path: Path, reason: str, wrong: str, right: str) -> None:
    values = REASONS[reason][0]
    _refused(tmp_path, audit(check(wrong, **values)), "/checks/0/fields/0/derived/value")
    _renders(tmp_path, audit(check(right, **values)))


@pytest.mark.parametrize("status", sorted(ALL))
@pytest.mark.parametrize("result", sorted(r.value for r in CheckResult))
def test_a_derived_result_its_derived_status_does_not_give_is_refused(
    status: str, result: str
) -> None:
    c = check(status, rule="all_pass", executed=3, min_coverage=0.5, score=None)
    c["fields"][1]["derived"]["value"] = c["fields"][1]["issued"][0]["value"] = result
    message = refusal(audit(c))
    wanted = CheckResult.from_status(CheckStatus(status)).value
    if status == "pass":
        assert message is not None and "/fields/0/" in message  # the status itself
    elif result == wanted:
        assert message is None, message
    else:
        assert message is not None and "/checks/0/fields/1/derived/value: result: says" in message


@pytest.mark.parametrize("value", ["banana", None, 1, ["pass"], {"s": "pass"}])
def test_a_derived_status_outside_the_vocabulary_is_refused(value: Any) -> None:
    c = check("pass")
    c["fields"][0]["derived"]["value"] = c["fields"][0]["issued"][0]["value"] = value
    message = refusal(audit(c))
    assert message is not None and "/checks/0/fields/0/derived/value: status:" in message


# ---- the report's derived result ------------------------------------------------------

# (each required check's (status, evidence complete)) -> the report result SPEC 12 gives
REPORTS = [
    ((("pass", True),), "pass"),
    ((("pass", True), ("pass", False)), "inconclusive"),
    ((("pass", True), ("fail", True)), "fail"),
    ((("error", True), ("fail", False)), "fail"),
    ((("error", True), ("pass", True)), "error"),
    ((("timeout", False), ("pass", True)), "inconclusive"),
    ((("missing", False),), "inconclusive"),
    ((("stale", True),), "inconclusive"),
    ((), "inconclusive"),
]


def _report(pairs: tuple[tuple[str, bool], ...], result: str) -> dict[str, Any]:
    checks = []
    for i, (status, evidence) in enumerate(pairs):
        values: dict[str, Any] = {"score": 0.9}
        if status == "fail":
            values["score"] = 0.1
        elif status == "error":
            values["errors"] = 1
        elif status != "pass":
            values.update(executed=0, score=None)
        checks.append(check(status, check_id=f"c{i}", evidence=evidence, **values))
    # A check that is not required does not count, whatever it says.
    checks.append(check("fail", score=0.1, check_id="optional", required=False))
    return audit(*checks, report_result=result)


@pytest.mark.parametrize(("pairs", "want"), REPORTS)
@pytest.mark.parametrize("result", ["pass", "fail", "error", "inconclusive"])
def test_the_report_result_follows_its_required_checks(
    pairs: tuple[tuple[str, bool], ...], want: str, result: str
) -> None:
    message = refusal(_report(pairs, result))
    if result == want:
        assert message is None, message
    else:
        assert message is not None
        assert message.startswith("record.json: /report/fields/0/derived/value: result: says")


def test_the_command_refuses_a_report_result_its_checks_do_not_give(tmp_path: Path) -> None:
    line = _refused(
        tmp_path,
        _report((("pass", True), ("fail", True)), "pass"),
        "/report/fields/0/derived/value",
    )
    assert "give fail" in line
    _renders(tmp_path, _report((("pass", True), ("fail", True)), "fail"))


def test_a_report_result_resting_on_a_result_not_rederived_is_refused(tmp_path: Path) -> None:
    c = check("pass", unknown=("status", "result"))
    _refused(tmp_path, audit(c, report_result="pass"), "/report/fields/0/derived/value")
    report = audit(c, report_result="pass")
    report["report"]["fields"][0] = _field("result", "pass", outcome="not_rederivable")
    report["counts"].update(agree=report["counts"]["agree"] - 1)
    report["counts"]["not_rederivable"] += 1
    _renders(tmp_path, report)


# ---- the other way round: what derivation gives is always admitted --------------------

_STATUS = st.sampled_from([s.value for s in CheckStatus])


@st.composite
def derivations(draw: st.DrawFn) -> tuple[dict[str, Any], Any]:
    rule = draw(st.sampled_from(["all_pass", "pass_rate", "mean", "min"]))
    aggregation = {
        "rule": rule,
        "threshold": draw(st.none() | st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])),
        "min_coverage": draw(st.none() | st.sampled_from([0.0, 0.28, 0.5, 1.0])),
        "min_samples": draw(st.none() | st.integers(0, 4)),
        "repeats": draw(st.integers(1, 3)),
    }
    examples = [f"e{i}" for i in range(draw(st.integers(0, 5)))]
    cases = []
    for n in range(draw(st.integers(0, 12))):
        cases.append(
            {
                "case_id": f"k{n}",
                "example": {
                    "dataset_id": "ds",
                    "version": 1,
                    "example_id": draw(st.sampled_from([*examples, "elsewhere"])),
                },
                "repeat": draw(st.integers(1, 3)),
                "status": draw(st.sampled_from(["pass", "fail", "pass", "fail"]) | _STATUS),
                "score": draw(st.none() | st.sampled_from([0.0, 0.25, 0.5, 1.0])),
                "assurance": "reported",
                "output": None,
            }
        )
    derived = derive_check(
        aggregation,
        dataset_id="ds",
        dataset_version=1,
        expected_example_ids=examples,
        cases=cases,
    )
    return aggregation, derived


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(derivations(), st.booleans(), st.booleans())
def test_every_status_derivation_gives_is_admitted(
    pair: tuple[dict[str, Any], Any], score_known: bool, coverage_known: bool
) -> None:
    aggregation, d = pair
    admitted = statuses_given(
        defects=bool(d.problems),
        aggregation=aggregation,
        coverage=d.coverage if coverage_known else None,
        score=d.score,
        score_known=score_known,
    )
    assert d.status in admitted, (aggregation, d)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(derivations())
def test_a_record_of_what_derivation_gives_renders(pair: tuple[dict[str, Any], Any]) -> None:
    aggregation, d = pair
    c = check(
        d.status.value,
        rule=str(aggregation["rule"]),
        threshold=aggregation["threshold"],
        min_coverage=aggregation["min_coverage"],
        min_samples=aggregation["min_samples"],
        expected=d.coverage.expected,
        executed=d.coverage.executed,
        score=d.score,
        errors=len(d.problems),
        evidence=d.evidence_complete,
    )
    c["fields"][4]["issued"][0]["value"] = copy.deepcopy(aggregation)
    assert refusal(audit(c, report_result=_report_of(d))) is None


def _report_of(d: Any) -> str:
    from bundler.evalbook.derive import report_result

    return report_result([(d.result, d.evidence_complete)]).value


def test_statuses_given_with_nothing_known_admits_the_unscored_ranking() -> None:
    agg = {"rule": "pass_rate", "threshold": 0.5}
    every = statuses_given(
        defects=False, aggregation=agg, coverage=None, score=None, score_known=False
    )
    assert {s.value for s in every} == ALL
    one = statuses_given(
        defects=False,
        aggregation=agg,
        coverage=Coverage(4, 4, 0),
        score=0.5,
        score_known=True,
    )
    assert one == {CheckStatus.PASS}
