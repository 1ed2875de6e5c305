"""Re-derivation of check and report verdicts from cases and the suite (SPEC section 12).

Pure functions on data as parsed from the store documents: `derive_check` takes a
suite check's `aggregation`, the dataset version it names with that version's manifest
example ids, the check's cases (SPEC 3.3) and the issued interval's parameters, and
returns what the check's coverage, status, result, score, interval, assurance and
evidence completeness must be. `derive_report` combines derived checks into the
report's result, evidence completeness, coverage and assurance. Nothing here reads
files or raises on bad data: every defect of the inputs is a `Problem` in the result.
The vocabulary and the result types are in `bundler.evalbook.verdicts`, the bounds
on the numbers that size the work in `bundler.evalbook.bounds`.

Choices where SPEC section 12 leaves room, each tested:

- Slots. A case fills the slot (example_id, repeat). Cases of one slot that agree on
  status and score are one repeat; if they differ in other fields (case_id, output,
  assurance) each still counts for assurance and evidence, so the weaker assurance and
  a missing output are never hidden. Cases that disagree on status or score are a
  conflicting duplicate: the slot is an unscored `error` and the check is `error`.
- Counted cases are the cases that name an expected example and a repeat in
  1..repeats, whatever their status (the seed: "a check's [assurance] is the weakest of
  its cases"); an identical duplicate counts once, and repeating it changes neither a
  weakest level nor "every output present". A check's assurance is the weakest over
  them, null when there are none. Evidence is complete when no example is missing and
  every counted case has a non-null output (with no missing example every counted case
  is a scored one).
- Defects are problems and make the derived status `error`, which takes precedence over
  "already failed": a case naming an example outside the manifest (another dataset,
  another version, or an unknown example_id) or a repeat outside 1..repeats, a
  malformed case (unknown status or assurance, a non-numeric score, missing fields), a
  conflicting duplicate, a scored case without a score under `mean` or `min`, an
  unknown rule, a missing or non-numeric threshold for pass_rate, mean or min, a
  `min_coverage` outside 0..1, a `min_samples` that is not an integer >= 0, a
  `repeats` that is not an integer >= 1. Defective cases are left out of the counts.
  With an invalid aggregation no score or interval is derived; with an invalid
  `repeats` no example counts as executed.
- Defaults: `repeats` 1 (SPEC), `min_coverage` 0 and `min_samples` 0 when absent or
  null. A threshold given to `all_pass` is ignored.
- Score: the rule's value over the executed examples, whatever the status (an
  insufficient-coverage check still reports what it measured); null when no example is
  executed and always null for `all_pass`, whose outcome is a yes/no, not a number.
  `passes` (all_pass and pass_rate) is the number of passing repeats it rests on.
- `min`: already failed when any scored repeat, executed example or not, has a score
  strictly below the threshold; otherwise it meets the threshold when its value is >=
  the threshold. `all_pass` is already failed by any scored fail, executed example or
  not. For pass_rate and mean the optimistic value counts every unscored repeat of
  every expected example as a pass with score 1, literally as SPEC states, even where
  scores could exceed 1; it is computed like the value, over all expected examples
  (an executed example's mean summed exactly as the value's, so with nothing unscored
  the optimistic value is the value; another example's as the correctly rounded sum of
  its scores and one per other repeat, so no example costs more than its cases).
- Bounds (``bounds.BOUNDS``, ``bounds.bound_violations``): numbers that size the work
  are checked before use. ``repeats`` or ``min_samples`` above 20,000 (the most cases a bundle
  holds) are defects here (``invalid_repeats``, ``invalid_min_samples``) and are
  reported by the audit as not re-derivable before derivation; resamples above
  ``stats.MAX_RESAMPLES``, a level above ``stats.MAX_LEVEL`` or a seed above 2^128 - 1
  make the interval ``NotRederivable``. Only the slots that have cases are held, and
  only executed examples are expanded repeat by repeat, so the cost is that of the
  cases and the examples, never examples x repeats.
- Values and thresholds compare as floating-point numbers (the value is what the check
  reports as its score); only `min_coverage` is exact (`bundler.evalbook.stats`).
- With no expected example the check is `inconclusive` (nothing executed, no unscored
  repeat) and its evidence is vacuously complete. A report with no required check is
  `inconclusive` (SPEC 12: it decides nothing), with vacuously complete evidence and null
  assurance.
- No threshold: `pass_rate`, `mean` or `min` with a null or absent threshold is no
  decision, not a defect: the status is `inconclusive` (basis `no_threshold`) and the
  value is still measured (SPEC 12, for runs imported without a decision, SPEC 16).
- Intervals. No interval is derived when the issued check has none. `wilson` is
  re-derived for pass_rate with repeats 1, and
  `bootstrap-percentile/philox4x64-10/t7` for pass_rate and mean; any other method,
  a rule or repeat count the method does not apply to, an invalid level, seed or
  resamples, an invalid aggregation, or no executed example give `NotRederivable` with
  the reason. The interval is over the same executed examples as the score.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import assert_never

from bundler.evalbook.bounds import BOUNDS, BoundScope, bound_violations
from bundler.evalbook.stats import (
    BOOTSTRAP_METHOD,
    DEFAULT_RESAMPLES,
    BootstrapStatistic,
    bootstrap_interval,
    exact_fraction,
    meets_min_coverage,
    wilson_interval,
)
from bundler.evalbook.verdicts import (
    UNSCORED_STATUS_RANKING,
    AggregationRule,
    Assurance,
    BasisKind,
    CheckResult,
    CheckStatus,
    Coverage,
    DerivedCheck,
    DerivedReport,
    Interval,
    NotRederivable,
    Problem,
    ProblemCode,
    ReportResult,
    StatusBasis,
    highest_unscored_status,
    weakest_assurance,
)

WILSON_METHOD = "wilson"

_STATUS_BY_VALUE = {s.value: s for s in CheckStatus}
_ASSURANCE_BY_VALUE = {a.value: a for a in Assurance}


@dataclass(frozen=True)
class Aggregation:
    """A validated suite check `aggregation`."""

    rule: AggregationRule
    threshold: float | None
    min_coverage: float
    min_samples: int
    repeats: int


@dataclass(frozen=True)
class _Case:
    label: str
    dataset_id: str
    version: int
    example_id: str
    repeat: int
    status: CheckStatus
    score: float | None
    assurance: Assurance
    has_output: bool


@dataclass(frozen=True)
class _Slot:
    status: CheckStatus
    score: float | None


def _as_int(value: object) -> int | None:
    """``value`` if it is a JSON integer (booleans are not), else None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _as_number(value: object) -> float | None:
    """``value`` as a float if it is a finite JSON number (booleans are not), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _parse_aggregation(
    aggregation: Mapping[str, object],
) -> tuple[Aggregation | None, int | None, list[Problem]]:
    """The aggregation if valid, its repeats if valid, and every defect found."""
    problems: list[Problem] = []

    raw_repeats = aggregation.get("repeats")
    repeats = 1 if raw_repeats is None else _as_int(raw_repeats)
    beyond = BOUNDS["aggregation.repeats"].violation(repeats)
    if repeats is None or repeats < 1 or beyond is not None:
        repeats = None
        problems.append(
            Problem(
                ProblemCode.INVALID_REPEATS,
                beyond or f"aggregation.repeats: must be an integer >= 1, got {raw_repeats!r}",
            )
        )

    raw_rule = aggregation.get("rule")
    rule = next((r for r in AggregationRule if r.value == raw_rule), None)
    if rule is None:
        problems.append(
            Problem(
                ProblemCode.UNKNOWN_RULE,
                f"aggregation.rule: unknown rule {raw_rule!r} "
                "(want all_pass, pass_rate, mean or min)",
            )
        )

    threshold: float | None = None
    raw_threshold = aggregation.get("threshold")
    if rule is not None and rule is not AggregationRule.ALL_PASS:
        threshold = _as_number(raw_threshold)
        # No threshold (null or absent) is no decision: the check is inconclusive
        # (SPEC 12, the runs an importer of SPEC 16 brings in without a decision).
        if raw_threshold is not None and threshold is None:
            problems.append(
                Problem(
                    ProblemCode.INVALID_THRESHOLD,
                    f"aggregation.threshold: must be a finite number, got {raw_threshold!r}",
                )
            )

    raw_min_coverage = aggregation.get("min_coverage")
    min_coverage = 0.0 if raw_min_coverage is None else _as_number(raw_min_coverage)
    if min_coverage is None or not 0 <= exact_fraction(min_coverage) <= 1:
        problems.append(
            Problem(
                ProblemCode.INVALID_MIN_COVERAGE,
                f"aggregation.min_coverage: must be a number in 0..1, got {raw_min_coverage!r}",
            )
        )

    raw_min_samples = aggregation.get("min_samples")
    min_samples = 0 if raw_min_samples is None else _as_int(raw_min_samples)
    beyond = BOUNDS["aggregation.min_samples"].violation(min_samples)
    if min_samples is None or min_samples < 0 or beyond is not None:
        min_samples = None
        problems.append(
            Problem(
                ProblemCode.INVALID_MIN_SAMPLES,
                beyond
                or f"aggregation.min_samples: must be an integer >= 0, got {raw_min_samples!r}",
            )
        )

    if problems or rule is None or repeats is None or min_coverage is None or min_samples is None:
        return None, repeats, problems
    return Aggregation(rule, threshold, min_coverage, min_samples, repeats), repeats, problems


def _parse_case(raw: object, position: int) -> _Case | Problem:
    """A case with the fields derivation needs, or the problem that makes it unusable."""
    label = f"case #{position}"
    if not isinstance(raw, Mapping):
        return Problem(ProblemCode.MALFORMED_CASE, f"{label}: not a JSON object")
    case_id = raw.get("case_id")
    if isinstance(case_id, str):
        label = f"case {case_id!r}"

    def malformed(field: str, rule: str) -> Problem:
        return Problem(
            ProblemCode.MALFORMED_CASE, f"{label}: {field} {rule}, got {raw.get(field)!r}"
        )

    example = raw.get("example")
    if not isinstance(example, Mapping):
        return malformed("example", "must be an object")
    dataset_id = example.get("dataset_id")
    version = _as_int(example.get("version"))
    example_id = example.get("example_id")
    if not isinstance(dataset_id, str) or version is None or not isinstance(example_id, str):
        return malformed("example", "must hold dataset_id, integer version and example_id")
    repeat = _as_int(raw.get("repeat"))
    if repeat is None:
        return malformed("repeat", "must be an integer")
    raw_status = raw.get("status")
    status = _STATUS_BY_VALUE.get(raw_status) if isinstance(raw_status, str) else None
    if status is None:
        return malformed("status", "must be a check status")
    raw_score = raw.get("score")
    score = _as_number(raw_score)
    if raw_score is not None and score is None:
        return malformed("score", "must be a finite number or null")
    raw_assurance = raw.get("assurance")
    assurance = _ASSURANCE_BY_VALUE.get(raw_assurance) if isinstance(raw_assurance, str) else None
    if assurance is None:
        return malformed("assurance", "must be an assurance level")
    return _Case(
        label=label,
        dataset_id=dataset_id,
        version=version,
        example_id=example_id,
        repeat=repeat,
        status=status,
        score=score,
        assurance=assurance,
        has_output=raw.get("output") is not None,
    )


def _mean_of(scores: Iterable[float], count: int) -> float:
    """Sum left to right, then divide: the order SPEC 12 fixes for means."""
    total = 0.0
    for score in scores:
        total += score
    return total / count


def derive_check(
    aggregation: Mapping[str, object],
    *,
    dataset_id: str,
    dataset_version: int,
    expected_example_ids: Iterable[str],
    cases: Iterable[object],
    interval: Mapping[str, object] | None = None,
) -> DerivedCheck:
    """Re-derive one check from its suite aggregation, dataset version and cases.

    ``aggregation`` is the suite check's `aggregation` object; ``dataset_id`` and
    ``dataset_version`` the dataset version it names, whose manifest lists
    ``expected_example_ids``; ``cases`` the check's case objects (SPEC 3.3) in any
    order; ``interval`` the issued check's `interval` object, whose method, level, seed
    and resamples say which interval to recompute (None: no interval is derived).

    Never raises on bad data: each defect is a `Problem` of the result and makes its
    status `error` (see the module docstring for the rules applied).
    """
    expected_ids = sorted(set(expected_example_ids))
    expected_set = set(expected_ids)
    parsed, repeats, problems = _parse_aggregation(aggregation)

    by_slot: dict[tuple[str, int], list[_Case]] = {}
    for position, raw in enumerate(cases):
        case = _parse_case(raw, position)
        if isinstance(case, Problem):
            problems.append(case)
            continue
        if (
            case.dataset_id != dataset_id
            or case.version != dataset_version
            or case.example_id not in expected_set
        ):
            problems.append(
                Problem(
                    ProblemCode.UNEXPECTED_EXAMPLE,
                    f"{case.label}: example {case.example_id!r} of dataset "
                    f"{case.dataset_id!r} version {case.version} is not an expected example "
                    f"of dataset {dataset_id!r} version {dataset_version}",
                )
            )
            continue
        if case.repeat < 1 or (repeats is not None and case.repeat > repeats):
            problems.append(
                Problem(
                    ProblemCode.REPEAT_OUT_OF_RANGE,
                    f"{case.label}: repeat {case.repeat} is outside 1..{repeats}",
                )
            )
            continue
        by_slot.setdefault((case.example_id, case.repeat), []).append(case)

    needs_scores = parsed is not None and parsed.rule in (AggregationRule.MEAN, AggregationRule.MIN)
    counted: list[_Case] = []
    slots: dict[tuple[str, int], _Slot] = {}
    for key in sorted(by_slot):
        # Identical cases, and cases agreeing on status and score, are one repeat;
        # each still counts for assurance and evidence, where identical ones change
        # nothing.
        slot_cases = by_slot[key]
        counted.extend(slot_cases)
        outcomes = {(case.status, case.score) for case in slot_cases}
        first = slot_cases[0]
        if len(outcomes) > 1:
            problems.append(
                Problem(
                    ProblemCode.CONFLICTING_DUPLICATE,
                    f"{first.label}: example {key[0]!r} repeat {key[1]} has cases with "
                    "different status or score",
                )
            )
            slots[key] = _Slot(CheckStatus.ERROR, None)
        elif needs_scores and first.status.scored and first.score is None:
            problems.append(
                Problem(
                    ProblemCode.MISSING_SCORE,
                    f"{first.label}: a {first.status.value} case of a mean or min check "
                    "needs a score",
                )
            )
            slots[key] = _Slot(CheckStatus.ERROR, None)
        else:
            slots[key] = _Slot(first.status, first.score)

    assurance = weakest_assurance(case.assurance for case in counted)
    outputs_complete = all(case.has_output for case in counted)

    # Without a valid repeat count the repeats an example needs are unknown, so no
    # example can count as executed.
    table = _Table.of(expected_ids, repeats or 0, slots)
    executed_ids = table.executed_ids
    coverage = Coverage(len(expected_ids), len(executed_ids), len(expected_ids) - len(executed_ids))
    evidence_complete = coverage.missing == 0 and outputs_complete

    if parsed is None:
        return DerivedCheck(
            status=CheckStatus.ERROR,
            result=CheckResult.ERROR,
            coverage=coverage,
            score=None,
            passes=None,
            interval=None if interval is None else NotRederivable("the aggregation is invalid"),
            assurance=assurance,
            evidence_complete=evidence_complete,
            problems=tuple(problems),
            basis=StatusBasis(BasisKind.DEFECTS, repeats=repeats, defects=len(problems)),
            cases=len(counted),
        )

    outcome = _aggregate(parsed, table, executed_ids)
    unscored = highest_unscored_status(table.unscored_statuses())
    status, kind = decide_status(
        defects=bool(problems),
        aggregation=parsed,
        coverage=coverage,
        already_failed=outcome.already_failed,
        meets_threshold=outcome.meets_threshold,
        unscored=unscored,
    )
    if kind not in _SHORT_KINDS:
        unscored = None
    basis = StatusBasis(
        kind,
        rule=parsed.rule,
        threshold=parsed.threshold,
        value=outcome.value,
        best=outcome.best,
        passes=outcome.passes,
        counted=len(executed_ids) * parsed.repeats,
        fails=outcome.fails,
        min_coverage=parsed.min_coverage,
        min_samples=parsed.min_samples,
        repeats=parsed.repeats,
        unscored=unscored,
        defects=len(problems),
    )

    return DerivedCheck(
        status=status,
        result=CheckResult.from_status(status),
        coverage=coverage,
        score=outcome.value,
        passes=outcome.passes,
        interval=None if interval is None else _derive_interval(interval, parsed, outcome),
        assurance=assurance,
        evidence_complete=evidence_complete,
        problems=tuple(problems),
        basis=basis,
        cases=len(counted),
    )


_SHORT_KINDS = frozenset(
    {BasisKind.NOTHING_EXECUTED, BasisKind.BELOW_MIN_COVERAGE, BasisKind.BELOW_MIN_SAMPLES}
)


def meets_threshold(value: float | None, threshold: float | None) -> bool:
    """A rule's value meets its threshold: both present and value >= threshold (SPEC 12)."""
    return value is not None and threshold is not None and value >= threshold


def decide_status(
    *,
    defects: bool,
    aggregation: Aggregation | None,
    coverage: Coverage,
    already_failed: bool,
    meets_threshold: bool,
    unscored: CheckStatus | None,
) -> tuple[CheckStatus, BasisKind]:
    """SPEC 12's status rule, and which of its branches decided.

    ``defects``: the inputs have a defect (or ``aggregation`` is None: invalid);
    ``already_failed`` and ``meets_threshold`` as the rule's value gives them;
    ``unscored`` the highest-ranked status among the unscored repeats (None: none).
    The one place the rule lives: ``derive_check`` and a saved audit record's check
    (``statuses_given``) both come here.
    """
    if defects or aggregation is None:
        return CheckStatus.ERROR, BasisKind.DEFECTS
    if aggregation.rule is not AggregationRule.ALL_PASS and aggregation.threshold is None:
        return CheckStatus.INCONCLUSIVE, BasisKind.NO_THRESHOLD
    if already_failed:
        return CheckStatus.FAIL, BasisKind.ALREADY_FAILED
    if coverage.executed == 0:
        short: BasisKind | None = BasisKind.NOTHING_EXECUTED
    elif not meets_min_coverage(coverage.executed, coverage.expected, aggregation.min_coverage):
        short = BasisKind.BELOW_MIN_COVERAGE
    elif coverage.executed < aggregation.min_samples:
        short = BasisKind.BELOW_MIN_SAMPLES
    else:
        short = None
    if short is not None:
        return unscored or CheckStatus.INCONCLUSIVE, short
    return (CheckStatus.PASS if meets_threshold else CheckStatus.FAIL), BasisKind.THRESHOLD


def statuses_given(
    *,
    defects: bool,
    aggregation: Mapping[str, object],
    coverage: Coverage | None,
    score: float | None,
    score_known: bool,
) -> frozenset[CheckStatus]:
    """Every status ``decide_status`` can give when only what an audit record keeps of
    a check is known: whether derivation found defects, the suite check's
    ``aggregation``, the derived ``coverage`` (None: not re-derived) and the derived
    ``score`` (``score_known`` False: not re-derived).

    What the record does not keep is tried at every value it can take: whether the
    check already failed, whether an all_pass check met its rule, the highest-ranked
    unscored status. Coverage narrows them: with no expected example nothing is scored
    or unscored; with every expected example executed every repeat is scored, so the
    optimistic value is the value (already failed exactly when the threshold is not
    met) and no repeat is unscored.
    """
    parsed, _, problems = _parse_aggregation(aggregation)
    if defects or problems or parsed is None:
        return frozenset({CheckStatus.ERROR})
    if parsed.rule is AggregationRule.ALL_PASS or not score_known:
        meets_options: tuple[bool, ...] = (False, True)
    else:
        meets_options = (meets_threshold(score, parsed.threshold),)
    unscored_options: tuple[CheckStatus | None, ...] = (None, *UNSCORED_STATUS_RANKING)
    coverages = (
        [coverage]
        if coverage is not None
        else [Coverage(1, 0, 1), Coverage(1, 1, 0), Coverage(2**53, 1, 2**53 - 1)]
    )
    found: set[CheckStatus] = set()
    for cov in coverages:
        for meets in meets_options:
            if cov.expected == 0:
                failed_options: tuple[bool, ...] = (False,)
                unscored_here: tuple[CheckStatus | None, ...] = (None,)
            elif cov.missing == 0:
                failed_options, unscored_here = (not meets,), (None,)
            else:
                failed_options, unscored_here = (False, True), unscored_options
            for already_failed in failed_options:
                for unscored in unscored_here:
                    status, _ = decide_status(
                        defects=False,
                        aggregation=parsed,
                        coverage=cov,
                        already_failed=already_failed,
                        meets_threshold=meets,
                        unscored=unscored,
                    )
                    found.add(status)
    return frozenset(found)


@dataclass(frozen=True)
class _Outcome:
    value: float | None
    passes: int | None
    meets_threshold: bool
    already_failed: bool
    # The optimistic value (pass_rate, mean) or the lowest scored score (min); the
    # scored repeats that failed.
    best: float | None
    fails: int
    # Per executed example, in example_id order: passing repeats and mean score.
    example_passes: tuple[int, ...]
    example_means: tuple[float, ...]


@dataclass(frozen=True)
class _Table:
    """The slots of a check's expected examples, holding only the slots that have cases.

    Nothing here loops over ``repeats`` for an example that is not executed, so the cost
    is that of the cases and the examples, whatever the repeat count.
    """

    expected_ids: tuple[str, ...]  # sorted
    repeats: int  # 0 when the repeat count is invalid: no slot is expected
    present: Mapping[str, Mapping[int, _Slot]]  # example_id -> repeat -> slot
    executed_ids: tuple[str, ...]

    @classmethod
    def of(
        cls, expected_ids: Sequence[str], repeats: int, slots: Mapping[tuple[str, int], _Slot]
    ) -> _Table:
        present: dict[str, dict[int, _Slot]] = {}
        if repeats:
            for (example_id, repeat), slot in slots.items():
                present.setdefault(example_id, {})[repeat] = slot
        executed = tuple(
            e
            for e in expected_ids
            if len(present.get(e, ())) == repeats
            and repeats > 0
            and all(s.status.scored for s in present[e].values())
        )
        return cls(tuple(expected_ids), repeats, present, executed)

    @property
    def slot_count(self) -> int:
        return len(self.expected_ids) * self.repeats

    def present_slots(self) -> list[_Slot]:
        return [slot for row in self.present.values() for slot in row.values()]

    def row(self, example_id: str) -> list[_Slot]:
        """An executed example's slots in repeat order (every repeat has one)."""
        row = self.present[example_id]
        return [row[r] for r in range(1, self.repeats + 1)]

    def optimistic_mean(self, example_id: str) -> float:
        """The mean of an example's repeats with every unscored one counted as score 1.

        An executed example's is its mean, summed exactly as the value's is, so with
        nothing unscored the optimistic value is the value itself; another example's is
        the correctly rounded sum (``math.fsum``) of its scores and one per other repeat,
        so no example costs more than its cases.
        """
        row = self.present.get(example_id)
        if not row:
            return 1.0
        scores = [s.score for s in row.values() if s.status.scored and s.score is not None]
        if len(scores) == self.repeats:
            return _mean_of(_scores(self.row(example_id)), self.repeats)
        return math.fsum([*scores, float(self.repeats - len(scores))]) / self.repeats

    def unscored_statuses(self) -> list[CheckStatus]:
        """The statuses of unscored slots; ``missing`` for a slot without a case."""
        slots = self.present_slots()
        statuses = [s.status for s in slots if not s.status.scored]
        if len(slots) < self.slot_count:
            statuses.append(CheckStatus.MISSING)
        return statuses


def _aggregate(aggregation: Aggregation, table: _Table, executed_ids: Sequence[str]) -> _Outcome:
    """The rule's value over executed examples and whether it already failed."""
    repeats = aggregation.repeats
    rule = aggregation.rule
    threshold = aggregation.threshold
    executed = [table.row(e) for e in executed_ids]
    scored = [s for s in table.present_slots() if s.status.scored]
    unscored = table.slot_count - len(scored)
    example_passes = tuple(sum(s.status is CheckStatus.PASS for s in row) for row in executed)
    example_means: tuple[float, ...] = ()
    passes: int | None = None
    value: float | None = None
    best: float | None = None
    fails = sum(s.status is CheckStatus.FAIL for s in scored)
    if rule is AggregationRule.ALL_PASS:
        passes = sum(example_passes)
        already_failed = any(s.status is CheckStatus.FAIL for s in scored)
        meets = passes == len(executed) * repeats
    elif rule is AggregationRule.PASS_RATE:
        passes = sum(example_passes)
        if executed:
            value = passes / (len(executed) * repeats)
        optimistic_passes = sum(s.status is CheckStatus.PASS for s in scored) + unscored
        if table.slot_count > 0:
            best = optimistic_passes / table.slot_count
        already_failed = best is not None and threshold is not None and best < threshold
        meets = meets_threshold(value, threshold)
    elif rule is AggregationRule.MEAN:
        example_means = tuple(_mean_of(_scores(row), repeats) for row in executed)
        if executed:
            value = _mean_of(example_means, len(executed))
        optimistic = [table.optimistic_mean(e) for e in table.expected_ids]
        if optimistic:
            best = _mean_of(optimistic, len(optimistic))
        already_failed = best is not None and threshold is not None and best < threshold
        meets = meets_threshold(value, threshold)
    elif rule is AggregationRule.MIN:
        if executed:
            value = min(score for row in executed for score in _scores(row))
        best = min(_scores(scored), default=None)
        already_failed = best is not None and threshold is not None and best < threshold
        meets = meets_threshold(value, threshold)
    else:
        assert_never(rule)
    return _Outcome(
        value, passes, meets, already_failed, best, fails, example_passes, example_means
    )


def _scores(slots: Iterable[_Slot]) -> list[float]:
    """The scores of scored slots (validated non-null for mean and min)."""
    return [s.score for s in slots if s.status.scored and s.score is not None]


def _derive_interval(
    spec: Mapping[str, object], aggregation: Aggregation, outcome: _Outcome
) -> Interval | NotRederivable:
    """Recompute the issued interval's method at its level, or say why not."""
    method = spec.get("method")
    if method not in (WILSON_METHOD, BOOTSTRAP_METHOD):
        return NotRederivable(
            f"interval method {method!r} is not one this tool re-derives "
            f"({WILSON_METHOD}, {BOOTSTRAP_METHOD})"
        )
    beyond = [b.reason for b in bound_violations(None, spec) if b.scope is BoundScope.INTERVAL]
    if beyond:
        return NotRederivable("; ".join(beyond))
    raw_level = spec.get("level")
    level = _as_number(raw_level)
    if level is None or not 0 < level < 1:
        return NotRederivable(
            f"interval level {raw_level!r} is not a number strictly between 0 and 1"
        )
    executed = len(outcome.example_passes)
    if method == WILSON_METHOD:
        if aggregation.rule is not AggregationRule.PASS_RATE or aggregation.repeats != 1:
            return NotRederivable("wilson applies only to pass_rate with repeats = 1")
        if executed == 0:
            return NotRederivable("no executed example to compute an interval over")
        return Interval(*wilson_interval(sum(outcome.example_passes), executed, level))
    raw_seed = spec.get("seed")
    seed = _as_int(raw_seed)
    if seed is None or seed < 0:
        return NotRederivable(f"interval seed {raw_seed!r} is not an integer in 0..2^128-1")
    raw_resamples = spec.get("resamples")
    resamples = DEFAULT_RESAMPLES if raw_resamples is None else _as_int(raw_resamples)
    if resamples is None or resamples < 1:
        return NotRederivable(f"interval resamples {raw_resamples!r} is not an integer >= 1")
    if executed == 0:
        return NotRederivable("no executed example to compute an interval over")
    if aggregation.rule is AggregationRule.PASS_RATE:
        low, high = bootstrap_interval(
            outcome.example_passes,
            statistic=BootstrapStatistic.PASS_RATE,
            seed=seed,
            level=level,
            resamples=resamples,
            repeats=aggregation.repeats,
        )
    elif aggregation.rule is AggregationRule.MEAN:
        low, high = bootstrap_interval(
            outcome.example_means,
            statistic=BootstrapStatistic.MEAN,
            seed=seed,
            level=level,
            resamples=resamples,
        )
    else:
        return NotRederivable(f"{BOOTSTRAP_METHOD} applies only to pass_rate and mean")
    return Interval(low, high)


def report_result(required: Iterable[tuple[CheckResult, bool]]) -> ReportResult:
    """SPEC 12's report result from each required check's (result, evidence complete).

    Fail if one fails, else error if one is in error, else pass if there is one and
    every one passed with complete evidence, else inconclusive. It depends only on
    which pairs occur, so a caller may pass each distinct pair once.
    """
    pairs = set(required)
    results = {result for result, _ in pairs}
    if CheckResult.FAIL in results:
        return ReportResult.FAIL
    if CheckResult.ERROR in results:
        return ReportResult.ERROR
    if pairs and pairs == {(CheckResult.PASS, True)}:
        return ReportResult.PASS
    return ReportResult.INCONCLUSIVE


def derive_report(checks: Iterable[tuple[bool, DerivedCheck]]) -> DerivedReport:
    """Combine derived checks, each with its `required` flag, into the report's verdict.

    Only required checks count: the result is fail if one fails, else error if one is
    in error, else pass if there is one and every one passed with complete evidence, else
    inconclusive;
    coverage sums theirs; assurance is the weakest of theirs, None if any is None (or
    there is none).
    """
    required = [check for is_required, check in checks if is_required]
    result = report_result((c.result, c.evidence_complete) for c in required)
    levels = [check.assurance for check in required]
    assurance = (
        None
        if not levels or any(level is None for level in levels)
        else weakest_assurance(level for level in levels if level is not None)
    )
    return DerivedReport(
        result=result,
        evidence_complete=all(check.evidence_complete for check in required),
        coverage=Coverage(
            expected=sum(c.coverage.expected for c in required),
            executed=sum(c.coverage.executed for c in required),
            missing=sum(c.coverage.missing for c in required),
        ),
        assurance=assurance,
    )
