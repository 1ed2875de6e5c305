"""The audit's result (SPEC section 12): what was issued, what was derived, how each
comparison ended.

An ``Audit`` holds, for the report (``ReportAudit``) and per check (``CheckAudit``),
each field (``FieldAudit``) with the value each document issues (``IssuedValue``), the
derived value (``Derived``) and the ``Outcome``; every ``Disagreement`` with both values
and what the derived value rests on (``CheckFacts``, ``ReportFacts``); the items not
re-derivable with their reasons; the verdict and the exit code; ``to_json`` follows
schemas/audit.schema.json. A disagreement's one line (``Disagreement.describe``, the
JSON ``detail``) names the rule and the numbers that decide the derived value; the
words for it (``format_value``, ``basis_text`` and their helpers) live here, so the JSON
and the renderings (``bundler.report.audit``) say the same. The comparison that builds
an ``Audit`` is ``bundler.evalbook.auditor``; reading and verifying a bundle first is
``bundler.bundles.audit``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bundler.core.claims import Anchor, Verdict, Verification
from bundler.core.version import TOOL_NAME, __version__
from bundler.evalbook.compare import (
    REPORT_BODY as REPORT_BODY,
)
from bundler.evalbook.compare import (
    TOLERANCE as TOLERANCE,
)
from bundler.evalbook.compare import (
    TOLERANCE_RULE as TOLERANCE_RULE,
)
from bundler.evalbook.compare import (
    Comparison as Comparison,
)
from bundler.evalbook.compare import (
    Derived as Derived,
)
from bundler.evalbook.compare import (
    IssuedValue as IssuedValue,
)
from bundler.evalbook.compare import (
    Outcome as Outcome,
)
from bundler.evalbook.compare import (
    _is_number as _is_number,
)
from bundler.evalbook.compare import (
    _json_equal as _json_equal,
)
from bundler.evalbook.compare import (
    _num as _num,
)
from bundler.evalbook.compare import (
    _precision as _precision,
)
from bundler.evalbook.compare import (
    format_value as format_value,
)
from bundler.evalbook.compare import (
    numbers_agree as numbers_agree,
)
from bundler.evalbook.derive import WILSON_METHOD
from bundler.evalbook.group_audit import (
    GroupAudit,
    GroupFieldAudit,
    GroupNotRederivable,
    group_not_rederivable,
)
from bundler.evalbook.stats import DEFAULT_RESAMPLES
from bundler.evalbook.verdicts import (
    AggregationRule,
    BasisKind,
    DerivedCheck,
    Problem,
    StatusBasis,
)

AUDIT_SCHEMA = "evalbook.audit.v1"


class AuditVerdict(enum.Enum):
    """Consistent (exit 0), inconsistent (exit 1) or error: no audit possible (exit 3)."""

    CONSISTENT = "consistent"
    INCONSISTENT = "inconsistent"
    ERROR = "error"


class Field(enum.Enum):
    """What is compared, for a check or for the report."""

    CHECKS = "checks"
    REQUIRED = "required"
    AGGREGATION = "aggregation"
    COVERAGE = "coverage"
    STATUS = "status"
    RESULT = "result"
    SCORE = "score"
    INTERVAL = "interval"
    ASSURANCE = "assurance"
    EVIDENCE_COMPLETE = "evidence_complete"
    SLICES = "slices"


class DisagreementKind(enum.Enum):
    """An issued value differs from the derived one, or two issued documents differ."""

    ISSUED_VS_DERIVED = "issued_vs_derived"
    BETWEEN_DOCUMENTS = "between_documents"


@dataclass(frozen=True)
class CheckFacts:
    """What a check's derived values rest on: the derivation and the issued interval's
    parameters (method, level, seed, resamples), to say which rule decided a value."""

    derived: DerivedCheck
    interval: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ReportFacts:
    """What the report's derived values rest on: its required checks, in report order."""

    required: tuple[tuple[str, DerivedCheck], ...]


@dataclass(frozen=True)
class Disagreement:
    """One disagreement, with every value involved and what the derived value rests on."""

    check_id: str | None  # None: the report
    field: Field
    kind: DisagreementKind
    issued: tuple[IssuedValue, ...]
    derived: Derived | None
    comparison: Comparison
    facts: CheckFacts | ReportFacts | None = None

    @property
    def scope(self) -> str:
        return "report" if self.check_id is None else "check"

    def describe(self, *, short: bool = False) -> str:
        """One line: what differs, the rule and the numbers that decide the derived value,
        and the issued value with the documents issuing it.

        ``short`` rounds floats for a person (three significant digits, more where two
        numbers that differ would otherwise look alike); otherwise every number is in
        full precision, as the JSON ``detail`` carries it.
        """
        where = "report" if self.check_id is None else f"check {self.check_id}"
        if self.kind is DisagreementKind.BETWEEN_DOCUMENTS:
            p = _precision([(a.value, b.value) for a in self.issued for b in self.issued], short)
            sides = "; ".join(
                f"{_doc_label(v.document)} {format_value(v.value, p)}" for v in self.issued
            )
            return f"{where} {self.field.value}: the issued documents differ: {sides}"
        docs = " and ".join(_doc_label(v.document) for v in self.issued)
        issued = self.issued[0].value
        if self.derived is None:
            return f"{where} {self.field.value}: issued {format_value(issued)} ({docs})"
        derived = self.derived.value
        p = _precision([(issued, derived), *_compared_numbers(self.facts)], short)
        why = _explain(self.field, self.facts, issued, derived, p)
        if why is None:
            why = f"derived {format_value(derived, p)}"
        return f"{where} {self.field.value}: {why} (issued: {format_value(issued, p)}, in {docs})"

    def to_json(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "check_id": self.check_id,
            "field": self.field.value,
            "kind": self.kind.value,
            "issued": [v.to_json() for v in self.issued],
            "derived": None if self.derived is None else {"value": self.derived.value},
            "comparison": self.comparison.value,
            "detail": self.describe(),
        }


@dataclass(frozen=True)
class FieldAudit:
    """One field of a check or of the report: issued values, derived value, outcome."""

    field: Field
    outcome: Outcome
    issued: tuple[IssuedValue, ...]
    derived: Derived | None
    comparison: Comparison
    reason: str | None = None
    disagreements: tuple[Disagreement, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "field": self.field.value,
            "outcome": self.outcome.value,
            "issued": [v.to_json() for v in self.issued],
            "derived": None if self.derived is None else {"value": self.derived.value},
            "comparison": self.comparison.value,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class NotRederivableItem:
    """Fields of a check (or of the report) that cannot be re-derived, and why."""

    check_id: str | None
    fields: tuple[Field, ...]
    reason: str

    def describe(self) -> str:
        where = "report" if self.check_id is None else f"check {self.check_id}"
        return f"{where} ({', '.join(f.value for f in self.fields)}): {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {
            "scope": "report" if self.check_id is None else "check",
            "check_id": self.check_id,
            "fields": [f.value for f in self.fields],
            "reason": self.reason,
        }


@dataclass(frozen=True)
class CheckAudit:
    """One check: every field compared, and the defects derivation found."""

    check_id: str
    required: bool
    fields: tuple[FieldAudit, ...]
    errors: tuple[Problem, ...] = ()

    def get(self, name: Field) -> FieldAudit | None:
        return next((f for f in self.fields if f.field is name), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "check_id": self.check_id,
            "required": self.required,
            "fields": [f.to_json() for f in self.fields],
            "errors": [{"code": p.code.value, "message": p.message} for p in self.errors],
        }


@dataclass(frozen=True)
class ReportAudit:
    """The report's fields compared."""

    report_id: str
    fields: tuple[FieldAudit, ...]

    def get(self, name: Field) -> FieldAudit | None:
        return next((f for f in self.fields if f.field is name), None)

    def to_json(self) -> dict[str, Any]:
        return {"report_id": self.report_id, "fields": [f.to_json() for f in self.fields]}


@dataclass(frozen=True)
class Audit:
    """The whole audit of one bundle; ``to_json`` follows schemas/audit.schema.json."""

    source: str
    verdict: AuditVerdict
    verification: Verification | None = None
    error: str | None = None
    report: ReportAudit | None = None
    checks: tuple[CheckAudit, ...] = ()
    # lm-eval groups the body records (``evalbook.group_audit``); None when it records none
    groups: tuple[GroupAudit, ...] | None = None

    @property
    def verification_failed(self) -> bool:
        """True when the bundle was read but failed verification (SPEC 8: exit 1)."""
        v = self.verification
        return self.verdict is AuditVerdict.ERROR and v is not None and v.verdict is Verdict.FAILED

    @property
    def strict(self) -> bool:
        return self.verification is not None and self.verification.strict

    @property
    def anchor(self) -> Anchor:
        """What the audited bundle is anchored to (the verification's, as ``verify`` has it)."""
        return self.verification.anchor if self.verification is not None else Anchor()

    @property
    def report_result_blocker(self) -> str | None:
        """Why the report's result was not re-derived, or None when it was."""
        if self.report is None:
            return None
        result = self.report.get(Field.RESULT)
        if result is None or result.outcome is not Outcome.NOT_REDERIVABLE:
            return None
        return result.reason or "unknown"

    @property
    def strict_failure(self) -> bool:
        """``--strict``: an audit that left an issued field un-re-derived fails (exit 1)."""
        return (
            self.verdict is AuditVerdict.CONSISTENT and self.strict and bool(self.not_rederivable)
        )

    @property
    def exit_code(self) -> int:
        """0 consistent; 1 a disagreement, a failed verification or a ``--strict`` gap;
        3 when the bundle could not be read or is not a report bundle."""
        if self.verdict is AuditVerdict.ERROR:
            return 1 if self.verification_failed else 3
        if self.verdict is AuditVerdict.INCONSISTENT or self.strict_failure:
            return 1
        return 0

    def _all_fields(self) -> list[tuple[str | None, FieldAudit]]:
        items: list[tuple[str | None, FieldAudit]] = []
        if self.report is not None:
            items += [(None, f) for f in self.report.fields]
        for check in self.checks:
            items += [(check.check_id, f) for f in check.fields]
        return items

    def _group_fields(self) -> list[GroupFieldAudit]:
        return [f for g in self.groups or () for f in g.all_fields()]

    @property
    def disagreements(self) -> tuple[Disagreement | GroupFieldAudit, ...]:
        """Every disagreement: the report's first, then the checks' in report order, then
        the groups' (a group field that disagrees is one disagreement)."""
        found: list[Disagreement | GroupFieldAudit] = [
            d for _, f in self._all_fields() for d in f.disagreements
        ]
        found += [f for f in self._group_fields() if f.outcome is Outcome.DISAGREE]
        return tuple(found)

    @property
    def not_rederivable(self) -> tuple[NotRederivableItem | GroupNotRederivable, ...]:
        """Fields that cannot be re-derived, grouped per check (or report) and reason."""
        grouped: dict[tuple[str | None, str], list[Field]] = {}
        for check_id, f in self._all_fields():
            if f.outcome is Outcome.NOT_REDERIVABLE:
                grouped.setdefault((check_id, f.reason or "unknown"), []).append(f.field)
        items: tuple[NotRederivableItem | GroupNotRederivable, ...] = tuple(
            NotRederivableItem(check_id, tuple(fields), reason)
            for (check_id, reason), fields in grouped.items()
        )
        return items + group_not_rederivable(self.groups or ())

    @property
    def errors(self) -> tuple[tuple[str, Problem], ...]:
        """(check_id, problem) for every defect derivation found."""
        return tuple((c.check_id, p) for c in self.checks for p in c.errors)

    def counts(self) -> dict[str, int]:
        outcomes = [f.outcome for _, f in self._all_fields()]
        outcomes += [f.outcome for f in self._group_fields()]
        return {
            "checks": len(self.checks),
            "agree": outcomes.count(Outcome.AGREE),
            "disagree": outcomes.count(Outcome.DISAGREE),
            "not_rederivable": outcomes.count(Outcome.NOT_REDERIVABLE),
            "informational": outcomes.count(Outcome.INFORMATIONAL),
            "disagreements": len(self.disagreements),
            "errors": len(self.errors),
        }

    def to_json(self) -> dict[str, Any]:
        v = self.verification
        return {
            "schema": AUDIT_SCHEMA,
            "source": self.source,
            "input": self.source,
            "verdict": self.verdict.value,
            "exit_code": self.exit_code,
            "error": self.error,
            "verification": None
            if v is None
            else {
                "verdict": v.verdict.value,
                "bundle_schema": v.kind,
                "bundle_digest": v.bundle_digest,
                "report_id": v.report_id,
                "report_digest": v.report_digest,
                "anchor": v.anchor.describe(),
                "counts": v.counts(),
                # The report facts a verification page shows, from the same fields.
                "report_result": v.report_result,
                "report_issued_at": v.report_issued_at,
                "envelope": None if v.envelope is None else v.envelope.to_json(),
                "signatures": [c.to_json() for c in v.signatures],
            },
            "anchor": _anchor_json(self.anchor),
            # The audit reads the bundle once, in its verification: the same time and bytes.
            "tool": {"name": TOOL_NAME, "version": __version__},
            "audited_at": None if v is None else v.verified_at,
            "archive": None if v is None or v.archive is None else v.archive.to_json(),
            "tolerance": {"value": TOLERANCE, "rule": TOLERANCE_RULE},
            "counts": self.counts(),
            "report": None if self.report is None else self.report.to_json(),
            "checks": [c.to_json() for c in self.checks],
            **({} if self.groups is None else {"groups": [g.to_json() for g in self.groups]}),
            "disagreements": [
                d.disagreement_json() if isinstance(d, GroupFieldAudit) else d.to_json()
                for d in self.disagreements
            ],
            "not_rederivable": [n.to_json() for n in self.not_rederivable],
            "errors": [
                {"check_id": check_id, "code": p.code.value, "message": p.message}
                for check_id, p in self.errors
            ],
        }


def _anchor_json(anchor: Anchor) -> dict[str, Any]:
    """The anchor object of ``verify --json`` (schemas/verification.schema.json)."""
    return {
        "expected_bundle_digest": anchor.expected_bundle_digest,
        "expected_report_digest": anchor.expected_report_digest,
        "signer": anchor.signer,
        "self_consistent_only": anchor.self_consistent_only,
        "description": anchor.describe(),
    }


# ------------------------------------------------------------------------- describing

ISSUED_INCONSISTENT = "Issued report inconsistent"


def _bounds(value: Any, p: int | None) -> str:
    if isinstance(value, dict) and "low" in value and "high" in value:
        return f"[{format_value(value['low'], p)}, {format_value(value['high'], p)}]"
    return format_value(value, p)


def _compared_numbers(facts: CheckFacts | ReportFacts | None) -> list[tuple[Any, Any]]:
    """The numbers a rule compared, which must look different when they differ."""
    if not isinstance(facts, CheckFacts) or facts.derived.basis is None:
        return []
    b = facts.derived.basis
    pairs: list[tuple[Any, Any]] = [(b.value, b.threshold), (b.best, b.threshold)]
    coverage = facts.derived.coverage
    if b.kind is BasisKind.BELOW_MIN_COVERAGE and coverage.expected:
        pairs.append((coverage.executed / coverage.expected, b.min_coverage))
    return pairs


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def basis_text(b: StatusBasis, coverage: Any, p: int | None = None) -> str:
    """The rule of SPEC 12 that decided a derived status, with the numbers it compared."""
    rule = b.rule.value if b.rule is not None else "the rule"
    t = format_value(b.threshold, p)
    if b.kind is BasisKind.DEFECTS:
        return (
            f"{_plural(b.defects, 'defect')} in the check's inputs (see {ISSUED_INCONSISTENT})"
            " make the status error"
        )
    nothing_unscored = coverage.missing == 0 and b.best == b.value
    if b.kind is BasisKind.ALREADY_FAILED and not (
        nothing_unscored and b.rule in (AggregationRule.PASS_RATE, AggregationRule.MEAN)
    ):
        whatever = "so it fails whatever is missing"
        if b.rule is AggregationRule.ALL_PASS:
            return f"all_pass: {_plural(b.fails, 'scored repeat')} failed, {whatever}"
        if b.rule is AggregationRule.MIN:
            return f"min: a scored repeat's score {format_value(b.best, p)} < threshold {t}, {whatever}"
        counted_as = "a pass" if b.rule is AggregationRule.PASS_RATE else "score 1"
        return (
            f"{rule} at best {format_value(b.best, p)} (every unscored repeat counted as "
            f"{counted_as}) < threshold {t}, {whatever}"
        )
    if b.kind in (
        BasisKind.NOTHING_EXECUTED,
        BasisKind.BELOW_MIN_COVERAGE,
        BasisKind.BELOW_MIN_SAMPLES,
    ):
        if b.kind is BasisKind.NOTHING_EXECUTED:
            short = f"no example executed (0 of {coverage.expected})"
        elif b.kind is BasisKind.BELOW_MIN_COVERAGE:
            ratio = coverage.executed / coverage.expected
            short = (
                f"coverage {coverage.executed} of {coverage.expected} = {format_value(ratio, p)}"
                f" < min_coverage {format_value(b.min_coverage, p)} (compared exactly)"
            )
        else:
            short = f"{coverage.executed} executed < min_samples {b.min_samples}"
        if b.unscored is None:
            return f"{short}; no repeat is unscored, so inconclusive"
        return (
            f"{short}; the highest-ranked status among the unscored repeats is {b.unscored.value}"
        )
    if b.kind is BasisKind.NO_THRESHOLD:
        return f"{rule} {format_value(b.value, p)} with no threshold: no decision, so inconclusive"
    # The value against the threshold.
    op = ">=" if b.value is not None and b.threshold is not None and b.value >= b.threshold else "<"
    if b.rule is AggregationRule.ALL_PASS:
        return f"all_pass: {b.passes} of {_plural(b.counted, 'repeat')} passed"
    v = format_value(b.value, p)
    if b.rule is AggregationRule.PASS_RATE:
        return f"pass_rate {v} ({b.passes} of {_plural(b.counted, 'repeat')} passed) {op} threshold {t}"
    if b.rule is AggregationRule.MEAN:
        return f"mean {v} over {_plural(coverage.executed, 'executed example')} {op} threshold {t}"
    return f"min {v} over {_plural(b.counted, 'repeat')} {op} threshold {t}"


def _score_text(derived: DerivedCheck, p: int | None) -> str:
    b = derived.basis
    value = format_value(derived.score, p)
    if b is None or b.rule is None:
        return f"derived {value}"
    if b.rule is AggregationRule.ALL_PASS:
        return "all_pass gives a yes or no, no score → null"
    executed = derived.coverage.executed
    if derived.score is None:
        return f"no example executed, so no {b.rule.value} → null"
    if b.rule is AggregationRule.PASS_RATE:
        return (
            f"pass_rate = {b.passes} passes / ({executed} executed x "
            f"{_plural(b.repeats or 1, 'repeat')}) = {value}"
        )
    if b.rule is AggregationRule.MEAN:
        return (
            f"mean over {_plural(executed, 'executed example')} of each one's mean over its "
            f"{_plural(b.repeats or 1, 'repeat')} = {value}"
        )
    return f"min over {_plural(b.counted, 'counted repeat')} = {value}"


def _interval_text(facts: CheckFacts, derived: Any, p: int | None) -> str:
    spec = facts.interval or {}
    method = spec.get("method")
    level = format_value(spec.get("level"))
    bounds = _bounds(derived, p)
    b = facts.derived.basis
    executed = facts.derived.coverage.executed
    if method == WILSON_METHOD:
        passes = b.passes if b is not None else None
        return f"wilson at level {level} over {passes} passes of {executed} → {bounds}"
    resamples = spec.get("resamples")
    resamples = DEFAULT_RESAMPLES if resamples is None else resamples
    statistic = b.rule.value if b is not None and b.rule is not None else "the statistic"
    return (
        f"{method} at level {level}, seed {spec.get('seed')}, {resamples} resamples of the "
        f"{statistic} over {_plural(executed, 'executed example')} → {bounds}"
    )


def _check_explanation(name: Field, facts: CheckFacts, derived: Any, p: int | None) -> str | None:
    d = facts.derived
    coverage = d.coverage
    if name is Field.STATUS and d.basis is not None:
        return f"{basis_text(d.basis, coverage, p)} → {derived}"
    if name is Field.RESULT and d.basis is not None:
        return f"{basis_text(d.basis, coverage, p)} → status {d.status.value} → result {derived}"
    if name is Field.SCORE:
        return _score_text(d, p)
    if name is Field.COVERAGE:
        repeats = d.basis.repeats if d.basis is not None else None
        rule = (
            f"an example counts as executed when each of its {_plural(repeats, 'repeat')} has "
            "a pass or fail case"
            if repeats
            else "no valid repeat count, so no example counts as executed"
        )
        return (
            f"{coverage.executed} of {coverage.expected} expected examples executed, "
            f"{coverage.missing} missing ({rule}) → {format_value(derived)}"
        )
    if name is Field.ASSURANCE:
        if d.cases == 0:
            return "no counted case → null"
        return f"the weakest over the check's {_plural(d.cases, 'counted case')} → {derived}"
    if name is Field.INTERVAL and derived is not None:
        return _interval_text(facts, derived, p)
    return None


def _report_explanation(name: Field, facts: ReportFacts, derived: Any) -> str | None:
    required = facts.required
    if name is Field.COVERAGE:
        return f"the sum over {_plural(len(required), 'required check')} → {format_value(derived)}"
    incomplete = next((cid for cid, d in required if not d.evidence_complete), None)
    if name is Field.EVIDENCE_COMPLETE:
        if incomplete is not None:
            return f"required check {incomplete} has incomplete evidence → false"
        return f"every required check ({len(required)}) has complete evidence → true"
    if name is Field.RESULT:
        for result in ("fail", "error"):
            cid = next((c for c, d in required if d.result.value == result), None)
            if cid is not None:
                return f"required check {cid} is {result} → {derived}"
        other = next((c for c, d in required if d.result.value != "pass"), None)
        if other is not None:
            value = next(d.result.value for c, d in required if c == other)
            return f"required check {other} is {value}, none fail or error → {derived}"
        if incomplete is not None:
            return (
                f"every required check passed, but {incomplete}'s evidence is incomplete "
                f"→ {derived}"
            )
        return f"every required check ({len(required)}) passed with complete evidence → {derived}"
    return None


def _explain(
    name: Field, facts: CheckFacts | ReportFacts | None, issued: Any, derived: Any, p: int | None
) -> str | None:
    """The rule and the numbers that decide ``derived``, ending in ``→ derived``."""
    if isinstance(facts, CheckFacts):
        return _check_explanation(name, facts, derived, p)
    if isinstance(facts, ReportFacts):
        return _report_explanation(name, facts, derived)
    return None


def _doc_label(document: str) -> str:
    if document == "data/report/body.json":
        return REPORT_BODY
    if document.startswith("data/checks/"):
        return "check result"
    if document.startswith("data/suite/"):
        return "suite"
    return document
