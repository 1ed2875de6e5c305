"""The vocabulary of verdicts and what derivation returns (SPEC 3.1, 3.3 and 12).

Check and case statuses with the ranking of unscored ones, check and report results,
assurance levels weakest first, aggregation rules, the defects (``Problem``) that make
a derived status ``error``, and the results of ``derive``: ``DerivedCheck`` (with the
``StatusBasis`` naming the rule that decided its status), ``DerivedReport``,
``Coverage``, ``Interval`` and ``NotRederivable``. Data and the two small rules over
it (``weakest_assurance``, ``highest_unscored_status``); nothing here derives.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class CheckStatus(enum.Enum):
    """A check's or a case's status (SPEC 3.1)."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    UNSUPPORTED = "unsupported"
    ABSTAINED = "abstained"
    INCONCLUSIVE = "inconclusive"
    MISSING = "missing"
    STALE = "stale"

    @property
    def scored(self) -> bool:
        """True for pass and fail, the statuses that score a repeat."""
        return self in (CheckStatus.PASS, CheckStatus.FAIL)


# Highest first: the status that explains an unscored check (SPEC 12).
UNSCORED_STATUS_RANKING: tuple[CheckStatus, ...] = (
    CheckStatus.ERROR,
    CheckStatus.TIMEOUT,
    CheckStatus.CANCELLED,
    CheckStatus.UNSUPPORTED,
    CheckStatus.STALE,
    CheckStatus.SKIPPED,
    CheckStatus.ABSTAINED,
    CheckStatus.INCONCLUSIVE,
    CheckStatus.MISSING,
)


class CheckResult(enum.Enum):
    """A check's result (SPEC 3.1)."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    INCONCLUSIVE = "inconclusive"
    MISSING = "missing"
    STALE = "stale"

    @classmethod
    def from_status(cls, status: CheckStatus) -> CheckResult:
        """pass, fail, error, missing and stale map to themselves, the rest to inconclusive."""
        try:
            return cls(status.value)
        except ValueError:
            return cls.INCONCLUSIVE


class ReportResult(enum.Enum):
    """A report's result (SPEC 3.1)."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    INCONCLUSIVE = "inconclusive"


class Assurance(enum.Enum):
    """How a case was observed, weakest first (SPEC 3.1)."""

    DEVELOPMENT_UNISOLATED = "development_unisolated"
    REPORTED = "reported"
    INDEPENDENTLY_OBSERVED = "independently_observed"
    HUMAN_ATTESTED = "human_attested"
    PLATFORM_VERIFIED = "platform_verified"

    @property
    def rank(self) -> int:
        """0 for the weakest level, 4 for the strongest."""
        return _ASSURANCE_RANK[self]


_ASSURANCE_RANK = {level: rank for rank, level in enumerate(Assurance)}


def weakest_assurance(levels: Iterable[Assurance]) -> Assurance | None:
    """The weakest of ``levels``, or None when there are none."""
    return min(levels, key=lambda level: level.rank, default=None)


def highest_unscored_status(statuses: Iterable[CheckStatus]) -> CheckStatus | None:
    """The highest-ranked unscored status among ``statuses`` (pass and fail ignored)."""
    present = set(statuses)
    return next((status for status in UNSCORED_STATUS_RANKING if status in present), None)


class AggregationRule(enum.Enum):
    """How a check's repeats are aggregated (SPEC 3.3)."""

    ALL_PASS = "all_pass"
    PASS_RATE = "pass_rate"
    MEAN = "mean"
    MIN = "min"


class ProblemCode(enum.Enum):
    """Defects of a check's inputs that make its derived status `error`."""

    UNKNOWN_RULE = "unknown_rule"
    MISSING_THRESHOLD = "missing_threshold"
    INVALID_THRESHOLD = "invalid_threshold"
    INVALID_MIN_COVERAGE = "invalid_min_coverage"
    INVALID_MIN_SAMPLES = "invalid_min_samples"
    INVALID_REPEATS = "invalid_repeats"
    MALFORMED_CASE = "malformed_case"
    UNEXPECTED_EXAMPLE = "unexpected_example"
    REPEAT_OUT_OF_RANGE = "repeat_out_of_range"
    CONFLICTING_DUPLICATE = "conflicting_duplicate"
    MISSING_SCORE = "missing_score"


@dataclass(frozen=True)
class Problem:
    """One defect, with a one-line message naming the field or case and the rule broken."""

    code: ProblemCode
    message: str


@dataclass(frozen=True)
class Coverage:
    """Expected examples, executed ones, and the difference (SPEC 12)."""

    expected: int
    executed: int
    missing: int


@dataclass(frozen=True)
class Interval:
    """A re-derived interval."""

    low: float
    high: float


@dataclass(frozen=True)
class NotRederivable:
    """An item the audit cannot recompute, and why; never a disagreement."""

    reason: str


class BasisKind(enum.Enum):
    """Which of SPEC 12's status rules decided a derived check's status."""

    DEFECTS = "defects"  # a defect of the inputs: error
    ALREADY_FAILED = "already_failed"  # fail whatever is missing
    NOTHING_EXECUTED = "nothing_executed"
    BELOW_MIN_COVERAGE = "below_min_coverage"
    BELOW_MIN_SAMPLES = "below_min_samples"
    NO_THRESHOLD = "no_threshold"  # no threshold: no decision, inconclusive (SPEC 12, 16)
    THRESHOLD = "threshold"  # the value compared with the threshold (all_pass: every repeat)


@dataclass(frozen=True)
class StatusBasis:
    """The rule that decided a derived status and the numbers it compared.

    ``value`` is the rule's value over the executed examples (the score); ``best`` is,
    for an already failed pass_rate or mean, the value with every unscored repeat counted
    as a pass (score 1), and for an already failed min the lowest scored score;
    ``passes`` of ``counted`` repeats (executed examples x repeats) passed; ``fails``
    scored repeats failed, executed example or not; ``unscored`` is the highest-ranked
    unscored status when coverage or samples fall short (None: inconclusive).
    """

    kind: BasisKind
    rule: AggregationRule | None = None
    threshold: float | None = None
    value: float | None = None
    best: float | None = None
    passes: int | None = None
    counted: int = 0
    fails: int = 0
    min_coverage: float = 0.0
    min_samples: int = 0
    repeats: int | None = None
    unscored: CheckStatus | None = None
    defects: int = 0


@dataclass(frozen=True)
class DerivedCheck:
    """What one check's result must say, given its cases and suite check.

    ``basis`` says which rule decided the status, with its numbers; ``cases`` is the
    number of counted cases the assurance is the weakest over.
    """

    status: CheckStatus
    result: CheckResult
    coverage: Coverage
    score: float | None
    passes: int | None
    interval: Interval | NotRederivable | None
    assurance: Assurance | None
    evidence_complete: bool
    problems: tuple[Problem, ...]
    basis: StatusBasis | None = None
    cases: int = 0


@dataclass(frozen=True)
class DerivedReport:
    """What the report body must say about its verdict, given its derived checks."""

    result: ReportResult
    evidence_complete: bool
    coverage: Coverage
    assurance: Assurance | None
