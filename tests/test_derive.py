"""Tests of bundler.evalbook.derive: each rule of SPEC section 12 on small hand-built case sets.

Expected values are worked out by hand in the comments (or written as the SPEC's
formula over literal numbers), never taken from the code under test.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.proportion import proportion_confint

from bundler.evalbook.derive import derive_check, derive_report
from bundler.evalbook.verdicts import (
    UNSCORED_STATUS_RANKING,
    AggregationRule,
    Assurance,
    BasisKind,
    CheckResult,
    CheckStatus,
    Coverage,
    DerivedCheck,
    Interval,
    NotRederivable,
    ProblemCode,
    ReportResult,
    highest_unscored_status,
    weakest_assurance,
)

DATASET = "qa-set"
VERSION = 3
OUTPUT = {"kind": "output", "digest": "sha256:" + "ab" * 32, "size": 12, "location": "inline"}
BOOTSTRAP = "bootstrap-percentile/philox4x64-10/t7"


def case(
    example_id: str,
    repeat: int = 1,
    status: str = "pass",
    score: float | None = None,
    *,
    assurance: str = "platform_verified",
    output: object = OUTPUT,
    dataset_id: str = DATASET,
    version: int = VERSION,
    case_id: str | None = None,
) -> dict[str, Any]:
    return {
        "case_id": case_id or f"{example_id}-{repeat}",
        "check_id": "accuracy",
        "example": {"dataset_id": dataset_id, "version": version, "example_id": example_id},
        "repeat": repeat,
        "status": status,
        "score": score,
        "assurance": assurance,
        "output": output,
        "evidence": [],
    }


def derive(
    rule: str,
    ids: Iterable[str],
    cases: Iterable[Mapping[str, Any]],
    *,
    interval: Mapping[str, Any] | None = None,
    **aggregation: Any,
) -> DerivedCheck:
    return derive_check(
        {"rule": rule, **aggregation},
        dataset_id=DATASET,
        dataset_version=VERSION,
        expected_example_ids=list(ids),
        cases=list(cases),
        interval=interval,
    )


def codes(check: DerivedCheck) -> list[ProblemCode]:
    return [problem.code for problem in check.problems]


# --- vocabularies ---------------------------------------------------------------------


def test_vocabularies_use_the_spec_strings() -> None:
    assert [s.value for s in CheckStatus] == [
        "pass", "fail", "error", "timeout", "cancelled", "skipped", "unsupported",
        "abstained", "inconclusive", "missing", "stale",
    ]  # fmt: skip
    assert [s.value for s in UNSCORED_STATUS_RANKING] == [
        "error", "timeout", "cancelled", "unsupported", "stale", "skipped", "abstained",
        "inconclusive", "missing",
    ]  # fmt: skip
    assert [a.value for a in sorted(Assurance, key=lambda a: a.rank)] == [
        "development_unisolated", "reported", "independently_observed", "human_attested",
        "platform_verified",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("status", "result"),
    [
        ("pass", "pass"), ("fail", "fail"), ("error", "error"), ("missing", "missing"),
        ("stale", "stale"), ("timeout", "inconclusive"), ("cancelled", "inconclusive"),
        ("skipped", "inconclusive"), ("unsupported", "inconclusive"),
        ("abstained", "inconclusive"), ("inconclusive", "inconclusive"),
    ],
)  # fmt: skip
def test_result_from_status(status: str, result: str) -> None:
    assert CheckResult.from_status(CheckStatus(status)).value == result


def test_helpers_pick_weakest_and_highest() -> None:
    assert weakest_assurance([]) is None
    assert (
        weakest_assurance(
            [Assurance.PLATFORM_VERIFIED, Assurance.REPORTED, Assurance.HUMAN_ATTESTED]
        )
        is Assurance.REPORTED
    )
    assert highest_unscored_status([CheckStatus.PASS, CheckStatus.FAIL]) is None
    assert (
        highest_unscored_status([CheckStatus.MISSING, CheckStatus.STALE, CheckStatus.SKIPPED])
        is CheckStatus.STALE
    )


# --- all_pass -------------------------------------------------------------------------


def test_all_pass_complete_and_passing() -> None:
    check = derive("all_pass", "abc", [case("a"), case("b"), case("c")])
    assert check.status is CheckStatus.PASS
    assert check.result is CheckResult.PASS
    assert check.coverage == Coverage(3, 3, 0)
    # all_pass reports no numeric score; 3 passing repeats.
    assert check.score is None
    assert check.passes == 3
    assert check.evidence_complete
    assert check.assurance is Assurance.PLATFORM_VERIFIED
    assert check.problems == ()


def test_all_pass_already_failed_whatever_is_missing() -> None:
    # a fails, b has no case, c timed out: 1 of 3 executed, yet a scored fail decides.
    check = derive(
        "all_pass", "abc", [case("a", status="fail"), case("c", status="timeout")], min_coverage=1.0
    )
    assert check.status is CheckStatus.FAIL
    assert check.coverage == Coverage(3, 1, 2)
    assert not check.evidence_complete


def test_all_pass_fail_in_an_unexecuted_example_still_fails() -> None:
    # repeats 2; a: fail then error (a not executed); b: pass, pass.
    cases = [case("a", 1, "fail"), case("a", 2, "error"), case("b", 1), case("b", 2)]
    check = derive("all_pass", "ab", cases, repeats=2)
    assert check.status is CheckStatus.FAIL
    assert check.coverage == Coverage(2, 1, 1)
    assert check.passes == 2


def test_all_pass_coverage_short_takes_highest_unscored_status() -> None:
    # a passes, b timed out, c skipped: 1/3 < 0.9, timeout outranks skipped.
    cases = [case("a"), case("b", status="timeout"), case("c", status="skipped")]
    check = derive("all_pass", "abc", cases, min_coverage=0.9)
    assert check.status is CheckStatus.TIMEOUT
    assert check.result is CheckResult.INCONCLUSIVE


@pytest.mark.parametrize("index", range(len(UNSCORED_STATUS_RANKING) - 1))
def test_unscored_ranking_pairwise(index: int) -> None:
    higher, lower = UNSCORED_STATUS_RANKING[index], UNSCORED_STATUS_RANKING[index + 1]
    # Nothing executed: the status is the higher-ranked of the two unscored repeats.
    cases = [case("a", status=lower.value), case("b", status=higher.value)]
    assert derive("all_pass", "ab", cases).status is higher
    cases = [case("a", status=higher.value), case("b", status=lower.value)]
    assert derive("all_pass", "ab", cases).status is higher


def test_a_repeat_without_case_is_missing() -> None:
    check = derive("all_pass", "ab", [case("a", status="inconclusive")])
    # inconclusive (case of a) outranks missing (b has no case).
    assert check.status is CheckStatus.INCONCLUSIVE
    check = derive("all_pass", "ab", [])
    assert check.status is CheckStatus.MISSING
    assert check.result is CheckResult.MISSING
    assert check.assurance is None


def test_stale_status_maps_to_stale_result() -> None:
    check = derive("all_pass", "ab", [case("a", status="stale"), case("b", status="skipped")])
    assert check.status is CheckStatus.STALE
    assert check.result is CheckResult.STALE


def test_no_expected_examples_is_inconclusive() -> None:
    check = derive("all_pass", [], [])
    assert check.status is CheckStatus.INCONCLUSIVE
    assert check.coverage == Coverage(0, 0, 0)
    assert check.evidence_complete
    assert check.assurance is None


def test_min_samples_short_with_everything_executed_is_inconclusive() -> None:
    # 2 executed < min_samples 3 and no unscored repeat to explain it.
    check = derive("all_pass", "ab", [case("a"), case("b")], min_samples=3)
    assert check.status is CheckStatus.INCONCLUSIVE
    assert check.evidence_complete


# --- pass_rate ------------------------------------------------------------------------


def test_pass_rate_passes_on_executed_examples_only() -> None:
    # pass, pass, fail, pass, timeout; executed 4 of 5 = 0.8 meets min_coverage 0.8;
    # value 3/4 = 0.75 >= 0.7; optimistic (3 + 1)/5 = 0.8 >= 0.7, not already failed.
    cases = [case("a"), case("b"), case("c", status="fail"), case("d"), case("e", status="timeout")]
    check = derive("pass_rate", "abcde", cases, threshold=0.7, min_coverage=0.8)
    assert check.status is CheckStatus.PASS
    assert check.score == 0.75
    assert check.passes == 3
    assert check.coverage == Coverage(5, 4, 1)
    assert not check.evidence_complete


def test_pass_rate_already_failed() -> None:
    # 10 examples: 5 pass, 3 fail, 2 without case; threshold 0.8.
    # optimistic (5 + 2) / 10 = 0.7 < 0.8: fail, though 8/10 < min_coverage 0.9.
    ids = "abcdefghij"
    statuses = ["pass"] * 5 + ["fail"] * 3
    cases = [case(e, status=s) for e, s in zip(ids, statuses, strict=False)]
    check = derive("pass_rate", ids, cases, threshold=0.8, min_coverage=0.9)
    assert check.status is CheckStatus.FAIL
    assert check.score == 5 / 8


def test_pass_rate_not_yet_failed_is_explained_by_missing() -> None:
    # 7 pass, 1 fail, 2 without case; optimistic (7 + 2) / 10 = 0.9 >= 0.8;
    # 8/10 < 0.9 coverage: status from the unscored repeats, all missing.
    ids = "abcdefghij"
    statuses = ["pass"] * 7 + ["fail"]
    cases = [case(e, status=s) for e, s in zip(ids, statuses, strict=False)]
    check = derive("pass_rate", ids, cases, threshold=0.8, min_coverage=0.9)
    assert check.status is CheckStatus.MISSING
    assert check.score == 7 / 8


def test_pass_rate_over_repeats() -> None:
    # a: p p f (2), b: p p p (3), c: p f f (1) -> 6 / (3 x 3) = 2/3 >= 0.6.
    pattern = {"a": "ppf", "b": "ppp", "c": "pff"}
    cases = [
        case(e, r + 1, "pass" if flag == "p" else "fail")
        for e, flags in pattern.items()
        for r, flag in enumerate(flags)
    ]
    check = derive("pass_rate", "abc", cases, threshold=0.6, repeats=3)
    assert check.status is CheckStatus.PASS
    assert check.passes == 6
    assert check.score == 6 / 9
    # a threshold of 0.7 is above 2/3 with everything executed: already failed.
    assert derive("pass_rate", "abc", cases, threshold=0.7, repeats=3).status is CheckStatus.FAIL


def test_pass_rate_example_with_an_unscored_repeat_is_not_executed() -> None:
    # a: pass, pass; b: pass, abstained -> only a executed; value 2 / (1 x 2) = 1.
    cases = [case("a", 1), case("a", 2), case("b", 1), case("b", 2, "abstained")]
    check = derive("pass_rate", "ab", cases, threshold=0.5, repeats=2, min_coverage=1)
    assert check.coverage == Coverage(2, 1, 1)
    assert check.score == 1.0
    assert check.status is CheckStatus.ABSTAINED


@pytest.mark.parametrize(("executed", "status"), [(7, CheckStatus.PASS), (6, CheckStatus.MISSING)])
def test_min_coverage_is_exact(executed: int, status: CheckStatus) -> None:
    # 25 expected; 7/25 is exactly 0.28 (0.28 x 25 is 7.000000000000001 in floats).
    ids = [f"ex{i:02d}" for i in range(25)]
    cases = [case(e) for e in ids[:executed]]
    check = derive("pass_rate", ids, cases, threshold=0.0, min_coverage=0.28)
    assert check.status is status


def test_min_samples() -> None:
    cases = [case("a"), case("b"), case("c", status="error")]
    assert derive("pass_rate", "abc", cases, threshold=0.5, min_samples=2).status is (
        CheckStatus.PASS
    )
    assert derive("pass_rate", "abc", cases, threshold=0.5, min_samples=3).status is (
        CheckStatus.ERROR
    )


# --- mean -----------------------------------------------------------------------------


def test_mean_over_repeats() -> None:
    # repeats 2: a (0.5, 1.0), b (0.2, 0.4), c (0.9, 0.6).
    scores = {"a": (0.5, 1.0), "b": (0.2, 0.4), "c": (0.9, 0.6)}
    cases = [case(e, r + 1, "pass", s) for e, pair in scores.items() for r, s in enumerate(pair)]
    expected = ((0.5 + 1.0) / 2 + (0.2 + 0.4) / 2 + (0.9 + 0.6) / 2) / 3
    check = derive("mean", "abc", cases, threshold=0.6, repeats=2)
    assert check.score == expected
    assert check.status is CheckStatus.PASS
    assert check.passes is None


def test_mean_is_summed_left_to_right_in_example_id_order() -> None:
    # Cases arrive in reverse; the sum must be (0.1 + 0.2) + 0.3 = 0.6000000000000001.
    cases = [case("c", score=0.3), case("b", score=0.2), case("a", score=0.1)]
    check = derive("mean", "cba", cases, threshold=0.2)
    assert check.score == (0.1 + 0.2 + 0.3) / 3
    assert check.score != math.fsum([0.1, 0.2, 0.3]) / 3
    # 0.20000000000000004 >= 0.2
    assert check.status is CheckStatus.PASS


def test_mean_threshold_compares_with_greater_or_equal() -> None:
    # (0.5 + 0.7) / 2 = 0.6 exactly in floats.
    cases = [case("a", score=0.5), case("b", score=0.7)]
    assert derive("mean", "ab", cases, threshold=0.6).status is CheckStatus.PASS
    assert derive("mean", "ab", cases, threshold=0.61).status is CheckStatus.FAIL


@pytest.mark.parametrize(
    ("threshold", "status"), [(0.8, CheckStatus.TIMEOUT), (0.9, CheckStatus.FAIL)]
)
def test_mean_already_failed(threshold: float, status: CheckStatus) -> None:
    # a 0.5 executed, b no case, c timeout; optimistic (0.5 + 1 + 1) / 3 = 0.8333...
    cases = [case("a", score=0.5), case("c", status="timeout")]
    check = derive("mean", "abc", cases, threshold=threshold, min_coverage=0.5)
    assert check.status is status
    assert check.score == 0.5


# --- min ------------------------------------------------------------------------------


def test_min_meets_threshold_with_equality() -> None:
    cases = [case("a", score=0.9), case("b", score=0.7), case("c", score=0.8)]
    check = derive("min", "abc", cases, threshold=0.7)
    assert check.score == 0.7
    assert check.status is CheckStatus.PASS


def test_min_already_failed_by_an_unexecuted_example() -> None:
    # a: 0.3 then timeout (a not executed); b: 0.9, 0.95. 0.3 < 0.5 decides.
    cases = [
        case("a", 1, "fail", 0.3),
        case("a", 2, "timeout"),
        case("b", 1, "pass", 0.9),
        case("b", 2, "pass", 0.95),
    ]
    check = derive("min", "ab", cases, threshold=0.5, repeats=2, min_coverage=1.0)
    assert check.status is CheckStatus.FAIL
    assert check.score == 0.9


def test_min_below_threshold_without_coverage_is_fail() -> None:
    cases = [case("a", score=0.2), case("b", status="cancelled")]
    check = derive("min", "ab", cases, threshold=0.5, min_coverage=1)
    assert check.status is CheckStatus.FAIL


# --- duplicates, assurance, evidence --------------------------------------------------


def test_identical_duplicates_count_once() -> None:
    # a pass twice (identical), b fail: 1 / 2 = 0.5, not 2 / 3.
    cases = [case("a"), case("a"), case("b", status="fail")]
    check = derive("pass_rate", "ab", cases, threshold=0.5)
    assert check.score == 0.5
    assert check.passes == 1
    assert check.problems == ()
    assert check.status is CheckStatus.PASS


def test_conflicting_duplicates_make_the_check_error() -> None:
    cases = [case("a"), case("a", status="fail", case_id="a-1-again"), case("b")]
    check = derive("pass_rate", "ab", cases, threshold=0.5)
    assert check.status is CheckStatus.ERROR
    assert check.result is CheckResult.ERROR
    assert codes(check) == [ProblemCode.CONFLICTING_DUPLICATE]
    assert check.coverage == Coverage(2, 1, 1)


def test_duplicates_differing_in_score_conflict() -> None:
    cases = [case("a", score=0.5), case("a", score=0.6, case_id="again")]
    assert codes(derive("mean", "a", cases, threshold=0.1)) == [ProblemCode.CONFLICTING_DUPLICATE]


def test_agreeing_duplicates_keep_the_weaker_assurance_and_missing_output() -> None:
    cases = [
        case("a", case_id="first"),
        case("a", case_id="second", assurance="reported", output=None),
        case("b"),
    ]
    check = derive("all_pass", "ab", cases)
    assert check.problems == ()
    assert check.status is CheckStatus.PASS
    assert check.passes == 2
    assert check.assurance is Assurance.REPORTED
    assert not check.evidence_complete


def test_assurance_is_the_weakest_over_every_counted_case() -> None:
    # b's timeout case is counted (not executed, but a case of the check).
    cases = [
        case("a", assurance="human_attested"),
        case("b", status="timeout", assurance="development_unisolated", output=None),
    ]
    check = derive("all_pass", "ab", cases)
    assert check.assurance is Assurance.DEVELOPMENT_UNISOLATED
    # A case outside the expected examples is not counted.
    cases = [case("a", assurance="human_attested"), case("z", assurance="reported")]
    assert derive("all_pass", "a", cases).assurance is Assurance.HUMAN_ATTESTED


def test_evidence_needs_every_output() -> None:
    cases = [case("a"), case("b", output=None)]
    check = derive("all_pass", "ab", cases)
    assert check.status is CheckStatus.PASS
    assert not check.evidence_complete


# --- bad inputs -----------------------------------------------------------------------


def test_case_outside_the_expected_examples() -> None:
    cases = [
        case("a"),
        case("zz"),
        case("b", dataset_id="other"),
        case("b", version=VERSION + 1, case_id="b-v4"),
        case("b"),
    ]
    check = derive("pass_rate", "ab", cases, threshold=0.5)
    assert codes(check) == [ProblemCode.UNEXPECTED_EXAMPLE] * 3
    assert check.status is CheckStatus.ERROR
    assert check.coverage == Coverage(2, 2, 0)
    assert "'zz'" in check.problems[0].message


def test_repeats_outside_range() -> None:
    cases = [case("a", 0), case("a", 1), case("a", 2), case("a", 3)]
    check = derive("all_pass", "a", cases, repeats=2)
    assert codes(check) == [ProblemCode.REPEAT_OUT_OF_RANGE] * 2
    assert check.status is CheckStatus.ERROR
    assert check.coverage == Coverage(1, 1, 0)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda c: c.update(status="passed"),
        lambda c: c.update(score="high"),
        lambda c: c.update(score=True),
        lambda c: c.update(score=float("nan")),
        lambda c: c.update(repeat=True),
        lambda c: c.update(repeat="1"),
        lambda c: c.update(assurance="trusted"),
        lambda c: c.pop("example"),
        lambda c: c["example"].pop("example_id"),
        lambda c: c["example"].update(version="3"),
    ],
)
def test_malformed_cases_are_problems(mutate: Any) -> None:
    bad = case("a", score=0.5)
    mutate(bad)
    check = derive("mean", "ab", [bad, case("b", score=1.0)], threshold=0.5)
    assert codes(check) == [ProblemCode.MALFORMED_CASE]
    assert check.status is CheckStatus.ERROR
    assert check.coverage == Coverage(2, 1, 1)


def test_non_object_case_is_a_problem() -> None:
    check = derive("all_pass", "a", [["not", "a", "case"], case("a")])  # type: ignore[list-item]
    assert codes(check) == [ProblemCode.MALFORMED_CASE]
    assert "case #0" in check.problems[0].message


def test_scored_case_without_score_under_mean_and_min() -> None:
    for rule in ("mean", "min"):
        check = derive(rule, "ab", [case("a", score=None), case("b", score=0.4)], threshold=0.1)
        assert codes(check) == [ProblemCode.MISSING_SCORE]
        assert check.status is CheckStatus.ERROR
    # pass_rate and all_pass only need a status.
    assert derive("pass_rate", "a", [case("a")], threshold=1).problems == ()


@pytest.mark.parametrize(
    ("aggregation", "code"),
    [
        ({"rule": "median", "threshold": 0.5}, ProblemCode.UNKNOWN_RULE),
        ({"threshold": 0.5}, ProblemCode.UNKNOWN_RULE),
        ({"rule": "min", "threshold": "0.5"}, ProblemCode.INVALID_THRESHOLD),
        ({"rule": "min", "threshold": True}, ProblemCode.INVALID_THRESHOLD),
        ({"rule": "all_pass", "min_coverage": 1.5}, ProblemCode.INVALID_MIN_COVERAGE),
        ({"rule": "all_pass", "min_coverage": -0.1}, ProblemCode.INVALID_MIN_COVERAGE),
        ({"rule": "all_pass", "min_coverage": "0.5"}, ProblemCode.INVALID_MIN_COVERAGE),
        ({"rule": "all_pass", "min_samples": -1}, ProblemCode.INVALID_MIN_SAMPLES),
        ({"rule": "all_pass", "min_samples": 2.0}, ProblemCode.INVALID_MIN_SAMPLES),
        ({"rule": "all_pass", "repeats": 0}, ProblemCode.INVALID_REPEATS),
        ({"rule": "all_pass", "repeats": "2"}, ProblemCode.INVALID_REPEATS),
    ],
)
def test_invalid_aggregation_is_an_error_not_an_exception(
    aggregation: dict[str, Any], code: ProblemCode
) -> None:
    check = derive_check(
        aggregation,
        dataset_id=DATASET,
        dataset_version=VERSION,
        expected_example_ids=["a", "b"],
        cases=[case("a"), case("b")],
        interval={"method": "wilson", "level": 0.95},
    )
    assert codes(check) == [code]
    assert check.status is CheckStatus.ERROR
    assert check.result is CheckResult.ERROR
    assert check.score is None
    assert isinstance(check.interval, NotRederivable)
    # Every repeat is known unless repeats itself is invalid.
    executed = 0 if code is ProblemCode.INVALID_REPEATS else 2
    assert check.coverage == Coverage(2, executed, 2 - executed)


def test_all_pass_ignores_a_threshold_and_all_problems_are_reported() -> None:
    assert derive("all_pass", "a", [case("a")], threshold="any").problems == ()
    check = derive_check(
        {"rule": "pass_rate", "min_coverage": 2, "min_samples": -3, "repeats": 0},
        dataset_id=DATASET,
        dataset_version=VERSION,
        expected_example_ids=["a"],
        cases=[case("a", 5), case("q")],
    )
    assert set(codes(check)) == {
        ProblemCode.INVALID_REPEATS,
        ProblemCode.INVALID_MIN_COVERAGE,
        ProblemCode.INVALID_MIN_SAMPLES,
        ProblemCode.UNEXPECTED_EXAMPLE,
    }


def test_problems_block_but_score_is_still_measured() -> None:
    cases = [case("a"), case("b", status="fail"), case("zz")]
    check = derive("pass_rate", "ab", cases, threshold=0.1)
    assert check.status is CheckStatus.ERROR
    assert check.score == 0.5


# --- intervals ------------------------------------------------------------------------


def test_wilson_interval_for_single_repeat_pass_rate() -> None:
    ids = [f"e{i}" for i in range(10)]
    # 8 of 10 pass; an 11th example timed out and is not part of the interval.
    cases = [case(e, status="pass" if i < 8 else "fail") for i, e in enumerate(ids)]
    cases.append(case("e99", status="timeout"))
    check = derive(
        "pass_rate",
        [*ids, "e99"],
        cases,
        threshold=0.5,
        interval={"method": "wilson", "level": 0.9, "low": 0.5, "high": 0.9},
    )
    low, high = proportion_confint(8, 10, alpha=0.1, method="wilson")
    assert isinstance(check.interval, Interval)
    assert abs(check.interval.low - low) <= 1e-12
    assert abs(check.interval.high - high) <= 1e-12


def test_bootstrap_pass_rate_reproduces_the_spec_reference() -> None:
    # Pass counts [3, 2, 3, 0, 1] of 3 repeats over e1..e5; e6 unexecuted.
    counts = {"e1": 3, "e2": 2, "e3": 3, "e4": 0, "e5": 1}
    cases = [case(e, r, "pass" if r <= k else "fail") for e, k in counts.items() for r in (1, 2, 3)]
    cases += [case("e6", 1, "pass"), case("e6", 2, "error")]
    random.Random(4).shuffle(cases)
    spec = {"method": BOOTSTRAP, "level": 0.95, "seed": 42, "resamples": 2000}
    check = derive("pass_rate", [*counts, "e6"], cases, threshold=0.5, repeats=3, interval=spec)
    assert check.score == 9 / 15
    assert isinstance(check.interval, Interval)
    assert abs(check.interval.low - 0.26666666666666666) <= 1e-12
    assert abs(check.interval.high - 0.9333333333333333) <= 1e-12


@pytest.mark.parametrize(
    ("level", "expected"),
    [(0.95, (0.3, 0.78)), (0.99, (0.22995000000000007, 0.8101499999999964))],
)
def test_bootstrap_mean_reproduces_the_spec_reference(
    level: float, expected: tuple[float, float]
) -> None:
    scores = {"e1": 0.9, "e2": 0.4, "e3": 0.75, "e4": 0.1, "e5": 0.6}
    cases = [case(e, score=s) for e, s in reversed(scores.items())]
    # resamples absent: the default 2000.
    spec = {"method": BOOTSTRAP, "level": level, "seed": 42}
    check = derive("mean", scores, cases, threshold=0.5, interval=spec)
    assert isinstance(check.interval, Interval)
    assert abs(check.interval.low - expected[0]) <= 1e-12
    assert abs(check.interval.high - expected[1]) <= 1e-12


@pytest.mark.parametrize(
    ("rule", "aggregation", "spec", "reason"),
    [
        ("pass_rate", {}, {"method": "bootstrap", "level": 0.95, "seed": 1}, "not one"),
        ("pass_rate", {}, {"method": "bca", "level": 0.95}, "not one"),
        ("pass_rate", {"repeats": 3}, {"method": "wilson", "level": 0.95}, "repeats = 1"),
        ("mean", {}, {"method": "wilson", "level": 0.95}, "repeats = 1"),
        ("min", {}, {"method": BOOTSTRAP, "level": 0.95, "seed": 1}, "pass_rate and mean"),
        ("pass_rate", {}, {"method": "wilson", "level": 1.5}, "level"),
        ("pass_rate", {}, {"method": BOOTSTRAP, "level": 0.95}, "seed"),
        ("mean", {}, {"method": BOOTSTRAP, "level": 0.95, "seed": -1}, "seed"),
        ("mean", {}, {"method": BOOTSTRAP, "level": 0.95, "seed": 1, "resamples": 0},
         "resamples"),
    ],
)  # fmt: skip
def test_intervals_not_rederivable(
    rule: str, aggregation: dict[str, Any], spec: dict[str, Any], reason: str
) -> None:
    repeats = aggregation.get("repeats", 1)
    cases = [case(e, r, "pass", 0.5) for e in "ab" for r in range(1, repeats + 1)]
    check = derive(rule, "ab", cases, threshold=0.1, interval=spec, **aggregation)
    assert isinstance(check.interval, NotRederivable)
    assert reason in check.interval.reason
    # An interval that cannot be re-derived is no problem of the check.
    assert check.status is CheckStatus.PASS


def test_interval_without_executed_examples_or_issued_interval() -> None:
    spec = {"method": "wilson", "level": 0.95}
    check = derive("pass_rate", "ab", [case("a", status="timeout")], threshold=0.5, interval=spec)
    assert isinstance(check.interval, NotRederivable)
    assert derive("pass_rate", "a", [case("a")], threshold=0.5).interval is None


# --- report ---------------------------------------------------------------------------


FULL_COVERAGE = Coverage(4, 4, 0)


def check_with(
    result: str,
    *,
    complete: bool = True,
    assurance: Assurance | None = Assurance.PLATFORM_VERIFIED,
    coverage: Coverage = FULL_COVERAGE,
) -> DerivedCheck:
    status = CheckStatus(result if result != "inconclusive" else "skipped")
    return DerivedCheck(
        status=status,
        result=CheckResult.from_status(status),
        coverage=coverage,
        score=None,
        passes=None,
        interval=None,
        assurance=assurance,
        evidence_complete=complete,
        problems=(),
    )


def test_report_fail_beats_error_beats_inconclusive() -> None:
    passing = check_with("pass")
    assert derive_report([(True, check_with("error")), (True, check_with("fail"))]).result is (
        ReportResult.FAIL
    )
    assert derive_report([(True, check_with("error")), (True, passing)]).result is (
        ReportResult.ERROR
    )
    assert derive_report([(True, check_with("missing")), (True, passing)]).result is (
        ReportResult.INCONCLUSIVE
    )
    assert derive_report([(True, check_with("stale")), (True, passing)]).result is (
        ReportResult.INCONCLUSIVE
    )


def test_report_pass_needs_complete_evidence() -> None:
    report = derive_report([(True, check_with("pass")), (True, check_with("pass"))])
    assert report.result is ReportResult.PASS
    assert report.evidence_complete
    report = derive_report([(True, check_with("pass")), (True, check_with("pass", complete=False))])
    assert report.result is ReportResult.INCONCLUSIVE
    assert not report.evidence_complete


def test_report_ignores_optional_checks() -> None:
    report = derive_report(
        [
            (True, check_with("pass", coverage=Coverage(4, 4, 0))),
            (False, check_with("fail", complete=False, assurance=None, coverage=Coverage(9, 1, 8))),
            (True, check_with("pass", assurance=Assurance.REPORTED, coverage=Coverage(3, 3, 0))),
        ]
    )
    assert report.result is ReportResult.PASS
    assert report.evidence_complete
    assert report.coverage == Coverage(7, 7, 0)
    assert report.assurance is Assurance.REPORTED


def test_report_assurance_is_null_if_any_required_is_null() -> None:
    report = derive_report([(True, check_with("pass")), (True, check_with("pass", assurance=None))])
    assert report.assurance is None


def test_report_with_no_required_check() -> None:
    # SPEC 12: a report with no required check decides nothing.
    report = derive_report([(False, check_with("fail"))])
    assert report.result is ReportResult.INCONCLUSIVE
    assert report.evidence_complete
    assert report.coverage == Coverage(0, 0, 0)
    assert report.assurance is None


def test_report_from_derived_checks_end_to_end() -> None:
    # Required check 1: all_pass on a, b (complete, pass). Required check 2: pass_rate
    # with a missing example (pass on coverage, evidence incomplete) -> inconclusive.
    first = derive("all_pass", "ab", [case("a"), case("b", assurance="reported")])
    second = derive("pass_rate", "xyz", [case("x"), case("y")], threshold=0.5, min_coverage=0.5)
    assert first.result is CheckResult.PASS and second.result is CheckResult.PASS
    report = derive_report([(True, first), (True, second)])
    assert report.result is ReportResult.INCONCLUSIVE
    assert not report.evidence_complete
    assert report.coverage == Coverage(5, 4, 1)
    assert report.assurance is Assurance.REPORTED


# --- properties -----------------------------------------------------------------------

EXAMPLE_IDS = [f"ex{i}" for i in range(8)]
STATUSES = [s.value for s in CheckStatus]


@st.composite
def case_sets(draw: st.DrawFn) -> tuple[list[str], int, list[dict[str, Any]]]:
    """Expected ids, repeats, and at most one valid case per slot."""
    ids = draw(st.lists(st.sampled_from(EXAMPLE_IDS), min_size=1, max_size=8, unique=True))
    repeats = draw(st.integers(min_value=1, max_value=3))
    cases = []
    for example_id in ids:
        for repeat in range(1, repeats + 1):
            status = draw(st.one_of(st.none(), st.sampled_from(STATUSES)))
            if status is None:
                continue
            cases.append(
                case(
                    example_id,
                    repeat,
                    status,
                    draw(st.floats(min_value=0, max_value=1)),
                    assurance=draw(st.sampled_from([a.value for a in Assurance])),
                    output=draw(st.sampled_from([OUTPUT, None])),
                )
            )
    return ids, repeats, cases


@settings(max_examples=150, deadline=None)
@given(
    data=case_sets(),
    rule=st.sampled_from(["all_pass", "pass_rate", "mean", "min"]),
    threshold=st.floats(min_value=0, max_value=1),
    seed=st.integers(0, 2**32),
)
def test_derivation_is_stable_and_order_free(
    data: tuple[list[str], int, list[dict[str, Any]]], rule: str, threshold: float, seed: int
) -> None:
    ids, repeats, cases = data
    spec = {
        "method": "wilson" if rule == "pass_rate" and repeats == 1 else BOOTSTRAP,
        "level": 0.9,
        "seed": seed,
        "resamples": 50,
    }

    def run(case_list: list[dict[str, Any]]) -> DerivedCheck:
        return derive(
            rule,
            ids,
            case_list,
            threshold=threshold,
            repeats=repeats,
            min_coverage=0.5,
            interval=spec,
        )

    first = run(cases)
    assert run(cases) == first
    shuffled = list(cases)
    random.Random(seed).shuffle(shuffled)
    assert run(shuffled) == first
    assert first.problems == ()
    assert first.coverage.expected == len(ids)
    assert first.coverage.executed + first.coverage.missing == len(ids)
    if first.status is CheckStatus.PASS:
        assert first.coverage.executed > 0


@settings(max_examples=150, deadline=None)
@given(data=case_sets(), choice=st.integers(min_value=0))
def test_flipping_one_scored_case_moves_the_pass_rate_by_one_repeat(
    data: tuple[list[str], int, list[dict[str, Any]]], choice: int
) -> None:
    ids, repeats, cases = data
    before = derive("pass_rate", ids, cases, threshold=0.5, repeats=repeats)
    slots = {(c["example"]["example_id"], c["repeat"]): c["status"] for c in cases}
    executed = [
        e for e in ids if all(slots.get((e, r)) in ("pass", "fail") for r in range(1, repeats + 1))
    ]
    if not executed:
        assert before.score is None
        return
    target_example = executed[choice % len(executed)]
    target = next(c for c in cases if c["example"]["example_id"] == target_example)
    flipped = [dict(c) for c in cases]
    index = cases.index(target)
    flipped[index]["status"] = "fail" if target["status"] == "pass" else "pass"
    after = derive("pass_rate", ids, flipped, threshold=0.5, repeats=repeats)

    denominator = len(executed) * repeats
    assert before.coverage == after.coverage
    assert before.coverage.executed == len(executed)
    assert before.score is not None and after.score is not None
    # The values are floats of p / D; with D this small the nearest fraction of
    # denominator <= D recovers p / D exactly.
    exact_before = Fraction(before.score).limit_denominator(denominator)
    exact_after = Fraction(after.score).limit_denominator(denominator)
    step = Fraction(1, denominator) if target["status"] == "fail" else -Fraction(1, denominator)
    assert exact_after - exact_before == step


# --- the basis of a status: which rule decided it, with its numbers ------------------


def test_basis_of_a_value_against_its_threshold() -> None:
    ids = "abcd"
    cases = [case(e, status=s) for e, s in zip(ids, ["pass", "pass", "pass", "fail"], strict=True)]
    check = derive("pass_rate", ids, cases, threshold=0.7)
    assert check.status is CheckStatus.PASS
    basis = check.basis
    assert basis is not None and basis.kind is BasisKind.THRESHOLD
    assert basis.rule is AggregationRule.PASS_RATE
    assert (basis.value, basis.threshold, basis.passes, basis.counted) == (0.75, 0.7, 3, 4)
    assert check.cases == 4


def test_basis_of_an_already_failed_pass_rate_holds_its_best_value() -> None:
    # As test_pass_rate_already_failed: (5 + 2) / 10 = 0.7 at best, below 0.8.
    ids = "abcdefghij"
    statuses = ["pass"] * 5 + ["fail"] * 3
    cases = [case(e, status=s) for e, s in zip(ids, statuses, strict=False)]
    basis = derive("pass_rate", ids, cases, threshold=0.8, min_coverage=0.9).basis
    assert basis is not None and basis.kind is BasisKind.ALREADY_FAILED
    assert basis.best == 0.7 and basis.value == 5 / 8 and basis.fails == 3


def test_basis_of_an_already_failed_min_is_the_lowest_scored_score() -> None:
    cases = [
        case("a", 1, "fail", 0.3),
        case("a", 2, "timeout"),
        case("b", 1, "pass", 0.9),
        case("b", 2, "pass", 0.95),
    ]
    basis = derive("min", "ab", cases, threshold=0.5, repeats=2, min_coverage=1.0).basis
    assert basis is not None and basis.kind is BasisKind.ALREADY_FAILED
    assert basis.best == 0.3 and basis.value == 0.9


@pytest.mark.parametrize(
    ("aggregation", "kind", "unscored"),
    [
        ({"min_coverage": 0.9}, BasisKind.BELOW_MIN_COVERAGE, CheckStatus.TIMEOUT),
        ({"min_samples": 9}, BasisKind.BELOW_MIN_SAMPLES, CheckStatus.TIMEOUT),
    ],
)
def test_basis_of_a_gate_names_the_unscored_status(
    aggregation: dict[str, Any], kind: BasisKind, unscored: CheckStatus
) -> None:
    ids = "abcdefghij"
    cases = [case(e) for e in ids[:8]] + [case("i", status="timeout")]
    check = derive("pass_rate", ids, cases, threshold=0.5, **aggregation)
    assert check.basis is not None and check.basis.kind is kind
    assert check.basis.unscored is unscored and check.status is unscored


def test_basis_of_nothing_executed_and_of_defects() -> None:
    check = derive("all_pass", "ab", [case("a", status="skipped")])
    assert check.basis is not None and check.basis.kind is BasisKind.NOTHING_EXECUTED
    assert check.basis.unscored is CheckStatus.SKIPPED
    bad = derive("all_pass", "ab", [case("a"), case("b"), case("z")])
    assert bad.basis is not None and bad.basis.kind is BasisKind.DEFECTS
    assert bad.basis.defects == 1 and bad.status is CheckStatus.ERROR
    invalid = derive("median", "ab", [case("a"), case("b")])
    assert invalid.basis is not None and invalid.basis.kind is BasisKind.DEFECTS


@pytest.mark.parametrize("rule", ["pass_rate", "mean", "min"])
@pytest.mark.parametrize("spelling", [{}, {"threshold": None}])
def test_no_threshold_is_no_decision_inconclusive_with_the_value_measured(
    rule: str, spelling: dict[str, Any]
) -> None:
    # SPEC 12: a check whose aggregation has no threshold (an imported run without a
    # decision, SPEC 16) is inconclusive, whatever its cases say; it is not a defect.
    for cases in ([case("a", score=1), case("b", score=1)], [case("a", status="fail", score=0), case("b", score=1)]):
        check = derive(rule, "ab", cases, **spelling)
        assert check.problems == ()
        assert check.status is CheckStatus.INCONCLUSIVE
        assert check.result is CheckResult.INCONCLUSIVE
        assert check.basis is not None and check.basis.kind is BasisKind.NO_THRESHOLD
        assert check.score is not None


def test_a_report_with_no_required_check_is_inconclusive() -> None:
    passed = derive("pass_rate", "a", [case("a")], threshold=0.5)
    assert passed.result is CheckResult.PASS
    for checks in ([], [(False, passed)]):
        report = derive_report(checks)
        assert report.result is ReportResult.INCONCLUSIVE
        assert report.assurance is None
    assert derive_report([(True, passed)]).result is ReportResult.PASS
