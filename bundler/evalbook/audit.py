"""Audit: re-deriving an issued report's verdict from its bundle (SPEC section 12).

``audit_bundle`` runs the verifier first (``verify.read_and_verify``); unless the
verdict is ``verified`` the audit is an error carrying the verification's reason: exit
1 when the bundle failed verification (SPEC 8, as ``verify``), 3 when it could not be
read. Over the verified bag it re-derives every check with ``derive.derive_check``
(from the bundled suite's aggregation and dataset, the dataset manifest's examples and
the exported cases) and the report with ``derive.derive_report``, and compares what
was issued with what was derived. The result is an ``Audit``: per check and for the
report, each field issued vs derived, every disagreement with both values, every item
that cannot be re-derived with the reason, and the errors (defects of the inputs) that
derivation found. Nothing here raises for a bad bundle; ``audit_contents`` raises
InputError only when a document the verifier proved cannot be parsed at all.

Choices where SPEC section 12 leaves room:

- Issued documents. A check's status, result, score, coverage and assurance are
  issued twice, in the report body's ``checks`` entry and in the check result file;
  its interval only in the check result. Each is compared with the derived value, and
  the two issued documents with each other: two documents that disagree are a
  disagreement of kind ``between_documents`` even when one of them is right. The
  ``required`` flag (report body, check result, suite) and the aggregation (suite,
  check result) are compared between documents only; derivation uses the suite's. The
  report's checks must be the suite's checks (as sets of ids).
- Numbers. Scores and interval bounds agree when |issued - derived| <= 1e-12 x max(1,
  |issued|, |derived|): an absolute tolerance of 1e-12 for values within [-1, 1] (every
  pass rate, and scores on the usual 0..1 scale), relative beyond. Two issued
  documents must carry the same number exactly; everything else compares exactly, as
  JSON values.
- Report assurance. The report body has no assurance field, so the report's assurance
  is derived (the weakest of its required checks, SPEC 12) and shown as
  informational. Comparing it with the weakest issued check assurance would only
  repeat a check-level disagreement, which is reported already. A check's evidence
  completeness is informational for the same reason (no issued field).
- Errors. A defect that derivation finds (a case naming an example outside the
  manifest, a repeat outside 1..repeats, a conflicting duplicate, an aggregation rule
  outside the vocabulary, a missing threshold, a min_coverage outside 0..1, ...) is
  listed as an error of that check and makes its derived status ``error``, as SPEC 12
  rules for conflicting duplicates. It does not by itself decide the exit code: the
  comparison does. A check issued as anything but ``error`` despite the defect is a
  disagreement (exit 1); a check the issuer already reported as ``error`` is
  consistent (exit 0, errors still listed). "No audit possible" is exit 1 when the
  bundle failed verification and 3 when it could not be read or is not an EvalBook
  report bundle.
- Bounds before use. Every number that sizes the work (repeats, min_samples, the
  examples and cases counted in their bytes, resamples, level, seed, and the bundle's
  bootstrap draws) is checked against ``derive.BOUNDS`` before anything is parsed or
  derived; beyond its bound the check (or its interval) is not re-derivable, with a
  one-line reason naming the field and the bound. Case files are parsed a line at a
  time.
- Strictness and the verdict line. A report whose result was not re-derived never
  reads a bare CONSISTENT (``NOT RE-DERIVED (...)`` with the reason); under
  ``--strict`` any item not re-derived fails the audit (exit 1, JSON verdict still
  ``consistent``).
- Output. Every console line passes ``textsafe.shown`` and every untrusted Markdown
  value ``textsafe.shown_md``.
- Not re-derivable, never a disagreement: every field of a check whose cases were cut
  by ``case_limit`` (bundle.json ``cases.total`` > ``cases.exported``), whose case file,
  dataset manifest or suite is not in the bundle, or that the suite does not define;
  slices (no store records slice membership), and with non-empty slices the check's
  status and result (a failed required slice fails the check); the score and interval
  of a check whose aggregation is invalid (and its coverage when ``repeats`` is
  invalid); an interval whose method, parameters or rule derivation does not handle,
  or whose issued form is not in the bundle. A report field is not re-derivable when a
  required check's field it rests on is not.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import orjson

from bundler.core import canonical
from bundler.core.errors import BundlerError, InputError
from bundler.core.textsafe import shown, shown_md
from bundler.evalbook.bounds import BoundScope, bound_violations
from bundler.evalbook.derive import WILSON_METHOD, derive_check, derive_report
from bundler.evalbook.export import BUNDLE_SCHEMA
from bundler.evalbook.stats import BOOTSTRAP_METHOD, DEFAULT_RESAMPLES, MAX_RESAMPLES
from bundler.evalbook.verdicts import (
    AggregationRule,
    Assurance,
    BasisKind,
    DerivedCheck,
    Interval,
    NotRederivable,
    Problem,
    ProblemCode,
    StatusBasis,
)
from bundler.evalbook.verify import (
    Anchor,
    Claim,
    State,
    Verdict,
    Verification,
    VerifyOptions,
    read_and_verify,
)

AUDIT_SCHEMA = "evalbook.audit.v1"
TOLERANCE = 1e-12
TOLERANCE_RULE = "|issued - derived| <= 1e-12 x max(1, |issued|, |derived|)"
REPORT_BODY = "report body"


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


class Outcome(enum.Enum):
    """How one field's comparison ended."""

    AGREE = "agree"
    DISAGREE = "disagree"
    NOT_REDERIVABLE = "not_rederivable"
    INFORMATIONAL = "informational"


class Comparison(enum.Enum):
    """How values were compared: exactly as JSON, or numbers within TOLERANCE_RULE."""

    EXACT = "exact"
    TOLERANCE = "tolerance"


class DisagreementKind(enum.Enum):
    """An issued value differs from the derived one, or two issued documents differ."""

    ISSUED_VS_DERIVED = "issued_vs_derived"
    BETWEEN_DOCUMENTS = "between_documents"


@dataclass(frozen=True)
class IssuedValue:
    """A value as one document (a bag-relative path) carries it."""

    document: str
    value: Any

    def to_json(self) -> dict[str, Any]:
        return {"document": self.document, "value": self.value}


@dataclass(frozen=True)
class Derived:
    """A derived value (``value`` may itself be null: a derived null)."""

    value: Any


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

    @property
    def disagreements(self) -> tuple[Disagreement, ...]:
        """Every disagreement: the report's first, then the checks' in report order."""
        return tuple(d for _, f in self._all_fields() for d in f.disagreements)

    @property
    def not_rederivable(self) -> tuple[NotRederivableItem, ...]:
        """Fields that cannot be re-derived, grouped per check (or report) and reason."""
        grouped: dict[tuple[str | None, str], list[Field]] = {}
        for check_id, f in self._all_fields():
            if f.outcome is Outcome.NOT_REDERIVABLE:
                grouped.setdefault((check_id, f.reason or "unknown"), []).append(f.field)
        return tuple(
            NotRederivableItem(check_id, tuple(fields), reason)
            for (check_id, reason), fields in grouped.items()
        )

    @property
    def errors(self) -> tuple[tuple[str, Problem], ...]:
        """(check_id, problem) for every defect derivation found."""
        return tuple((c.check_id, p) for c in self.checks for p in c.errors)

    def counts(self) -> dict[str, int]:
        outcomes = [f.outcome for _, f in self._all_fields()]
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
            },
            "anchor": _anchor_json(self.anchor),
            "tolerance": {"value": TOLERANCE, "rule": TOLERANCE_RULE},
            "counts": self.counts(),
            "report": None if self.report is None else self.report.to_json(),
            "checks": [c.to_json() for c in self.checks],
            "disagreements": [d.to_json() for d in self.disagreements],
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


# ------------------------------------------------------------------------ entry points


def audit_bundle(
    location: str,
    options: VerifyOptions,
    *,
    stream: BinaryIO | None = None,
    progress: Callable[[int], None] | None = None,
) -> Audit:
    """Verify the bundle at ``location`` (archive, bag directory, or ``stream``), then audit it.

    ``progress`` receives the bytes read so far, as in ``verify.verify_bundle``. Never
    raises for a bad bundle: a verdict other than ``verified``, a bundle that is not an
    EvalBook report bundle, or a document that cannot be parsed give an ``Audit`` with
    verdict ``error`` and the one-line reason.
    """
    verification, contents = read_and_verify(location, options, stream=stream, progress=progress)
    if verification.verdict is not Verdict.VERIFIED or contents is None:
        return Audit(location, AuditVerdict.ERROR, verification, _verification_reason(verification))
    try:
        return audit_contents(verification, contents.kept)
    except BundlerError as exc:
        return Audit(location, AuditVerdict.ERROR, verification, exc.message)


def _verification_reason(v: Verification) -> str:
    if v.verdict is Verdict.ERROR:
        return f"the bundle could not be verified: {v.error}"
    failed = [c for c in v.claims if c.state is State.FAILED]
    first = f"; first: {_claim_text(failed[0])}" if failed else ""
    return f"verification failed ({len(failed)} claim(s) failed){first}; nothing was audited"


def _claim_text(c: Claim) -> str:
    text = f"[{c.group}] {c.subject}: {c.detail or c.state.value}"
    return text + (f" ({c.path})" if c.path else "")


def audit_contents(verification: Verification, kept: Mapping[str, bytes]) -> Audit:
    """Audit a bag already verified: ``kept`` maps bag-relative paths to document bytes.

    Returns verdict ``error`` for a bundle that is not an EvalBook report bundle.
    Raises InputError when a document named by bundle.json cannot be parsed as JSON.
    """
    source = verification.source
    bundle = _parse(kept, "data/bundle.json")
    if not isinstance(bundle, dict) or bundle.get("schema") != BUNDLE_SCHEMA:
        schema = bundle.get("schema") if isinstance(bundle, dict) else None
        return Audit(
            source,
            AuditVerdict.ERROR,
            verification,
            f"data/bundle.json: schema {schema!r} is not {BUNDLE_SCHEMA}; only EvalBook report "
            "bundles have a verdict to re-derive",
        )
    return _Auditor(bundle, kept).run(verification)


def _parse(kept: Mapping[str, bytes], path: str) -> Any:
    data = kept.get(path)
    if data is None:
        raise InputError(f"{path}: named by bundle.json but not in the bag")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from exc


def _line_count(data: bytes) -> int:
    """Lines of a JSON Lines file (the last may lack its newline)."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _parse_lines(kept: Mapping[str, bytes], path: str) -> Iterator[Any]:
    """The case objects of a JSON Lines file, in line order, one parsed at a time.

    Derivation keeps only the few fields it needs of each case, so memory holds one
    parsed case at a time, not the file as objects.
    """
    data = kept.get(path)
    if data is None:
        raise InputError(f"{path}: named by bundle.json but not in the bag")
    start = 0
    number = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        number += 1
        try:
            yield orjson.loads(data[start:end])
        except orjson.JSONDecodeError as exc:
            raise InputError(f"{path}: line {number} is not valid JSON ({exc})") from exc
        start = end + 1


# ------------------------------------------------------------------------- comparing


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: numbers by value (1 == 1.0), booleans only equal booleans."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def numbers_agree(issued: Any, derived: Any) -> bool:
    """Two numbers (or nulls) within TOLERANCE_RULE; null agrees only with null."""
    if issued is None or derived is None:
        return issued is None and derived is None
    if not (_is_number(issued) and _is_number(derived)):
        return False
    a, b = float(issued), float(derived)
    if not (math.isfinite(a) and math.isfinite(b)):
        return a == b
    return abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))


def _intervals_agree(issued: Any, derived: Any) -> bool:
    if issued is None or derived is None:
        return issued is None and derived is None
    if not isinstance(issued, dict) or not isinstance(derived, dict):
        return False
    others = {k: v for k, v in issued.items() if k not in ("low", "high")}
    derived_others = {k: v for k, v in derived.items() if k not in ("low", "high")}
    return (
        _json_equal(others, derived_others)
        and numbers_agree(issued.get("low"), derived.get("low"))
        and numbers_agree(issued.get("high"), derived.get("high"))
    )


_TOLERANT = {Field.SCORE: numbers_agree, Field.INTERVAL: _intervals_agree}


def _compare(
    check_id: str | None,
    name: Field,
    issued: Sequence[IssuedValue],
    derived: Derived | None,
    facts: CheckFacts | ReportFacts | None = None,
) -> FieldAudit:
    """Compare issued documents with each other and, if given, with the derived value."""
    comparison = Comparison.TOLERANCE if name in _TOLERANT else Comparison.EXACT
    agree = _TOLERANT.get(name, _json_equal)
    groups: list[list[IssuedValue]] = []
    for item in issued:
        group = next((g for g in groups if _json_equal(g[0].value, item.value)), None)
        if group is None:
            groups.append([item])
        else:
            group.append(item)
    found: list[Disagreement] = []
    if len(groups) > 1:
        found.append(
            Disagreement(
                check_id,
                name,
                DisagreementKind.BETWEEN_DOCUMENTS,
                tuple(issued),
                None,
                Comparison.EXACT,
            )
        )
    if derived is not None:
        found += [
            Disagreement(
                check_id,
                name,
                DisagreementKind.ISSUED_VS_DERIVED,
                tuple(g),
                derived,
                comparison,
                facts,
            )
            for g in groups
            if not agree(g[0].value, derived.value)
        ]
    return FieldAudit(
        name,
        Outcome.DISAGREE if found else Outcome.AGREE,
        tuple(issued),
        derived,
        comparison,
        disagreements=tuple(found),
    )


def _not_rederivable(name: Field, issued: Sequence[IssuedValue], reason: str) -> FieldAudit:
    comparison = Comparison.TOLERANCE if name in _TOLERANT else Comparison.EXACT
    return FieldAudit(name, Outcome.NOT_REDERIVABLE, tuple(issued), None, comparison, reason)


def _informational(
    name: Field, issued: Sequence[IssuedValue], derived: Any, reason: str
) -> FieldAudit:
    return FieldAudit(
        name, Outcome.INFORMATIONAL, tuple(issued), Derived(derived), Comparison.EXACT, reason
    )


# ------------------------------------------------------------------------ the auditor

_AGGREGATION_PROBLEMS = frozenset(
    {
        ProblemCode.UNKNOWN_RULE,
        ProblemCode.MISSING_THRESHOLD,
        ProblemCode.INVALID_THRESHOLD,
        ProblemCode.INVALID_MIN_COVERAGE,
        ProblemCode.INVALID_MIN_SAMPLES,
        ProblemCode.INVALID_REPEATS,
    }
)
# Per-check fields issued in the report body's entry and the check result file.
_SHARED_FIELDS = (Field.COVERAGE, Field.STATUS, Field.RESULT, Field.SCORE, Field.ASSURANCE)
_DERIVED_FIELDS = (*_SHARED_FIELDS, Field.INTERVAL)
# The check fields each report field rests on.
_REPORT_NEEDS = {
    Field.RESULT: (Field.RESULT, Field.EVIDENCE_COMPLETE),
    Field.EVIDENCE_COMPLETE: (Field.EVIDENCE_COMPLETE,),
    Field.COVERAGE: (Field.COVERAGE,),
    Field.ASSURANCE: (Field.ASSURANCE,),
}


@dataclass
class _CheckState:
    """What the report derivation needs from one check."""

    check_id: str
    required: bool
    derived: DerivedCheck | None
    blocked: dict[Field, str] = field(default_factory=dict)  # field -> why not re-derivable


class _Auditor:
    def __init__(self, bundle: dict[str, Any], kept: Mapping[str, bytes]) -> None:
        self.bundle = bundle
        self.kept = kept
        self.body_path: str = bundle["report"]["path"]
        self.body = _parse(kept, self.body_path)
        self.unavailable = {(e["kind"], e["ref"]): e for e in bundle["unavailable"]}
        self.suite_path: str | None = bundle["suite"]["path"]
        self.suite: Any = None if self.suite_path is None else _parse(kept, self.suite_path)
        self._manifests: dict[tuple[str, int], list[str] | str] = {}
        self._draws = 0  # bootstrap index draws spent so far

    def listed_reason(self, kind: str, ref: str, what: str) -> str:
        entry = self.unavailable.get((kind, ref))
        if entry is None:
            return f"{what} is not in the bundle"
        detail = f", {entry['detail']}" if entry.get("detail") else ""
        return f"{what} is not in the bundle ({entry['reason']}{detail})"

    def suite_checks(self) -> dict[str, dict[str, Any]] | str:
        """check_id -> suite check, or why the suite cannot be used."""
        ref = self.bundle["suite"]
        item = f"{ref['suite_id']}@{ref['version']}"
        if self.suite is None:
            return self.listed_reason("suite", item, f"the suite {item}")
        checks = self.suite.get("checks") if isinstance(self.suite, dict) else None
        if not isinstance(checks, list):
            return f"the suite {item} has no list of checks"
        return {
            c["check_id"]: c
            for c in checks
            if isinstance(c, dict) and isinstance(c.get("check_id"), str)
        }

    def expected_examples(self, dataset: Any) -> list[str] | str:
        """The example ids of the dataset version a suite check names, or why unknown.

        The examples are counted in the manifest's bytes before it is parsed: a count
        beyond its bound (``derive.BOUNDS``) is a reason, and nothing is parsed.
        """
        if not isinstance(dataset, dict) or not isinstance(dataset.get("id"), str):
            return "the suite check names no dataset"
        version = dataset.get("version")
        if isinstance(version, bool) or not isinstance(version, int):
            return "the suite check names no dataset version"
        key = (dataset["id"], version)
        if key not in self._manifests:
            item = f"{key[0]}@{key[1]}"
            entry = next(
                (d for d in self.bundle["datasets"] if (d["dataset_id"], d["version"]) == key), None
            )
            if entry is None:
                self._manifests[key] = self.listed_reason("dataset", item, f"the dataset {item}")
            else:
                # Canonical JSON escapes every quote inside a string, so this pattern
                # occurs once per example entry and nowhere else.
                count = self.kept.get(entry["path"], b"").count(b'"example_id"')
                beyond = bound_violations(None, None, examples=count)
                if beyond:
                    self._manifests[key] = f"the dataset {item}: " + beyond[0].reason
                else:
                    manifest = _parse(self.kept, entry["path"])
                    self._manifests[key] = [e["example_id"] for e in manifest["examples"]]
        return self._manifests[key]

    def run(self, verification: Verification) -> Audit:
        suite_checks = self.suite_checks()
        entries = {c["check_id"]: c for c in self.bundle["checks"]}
        states: list[_CheckState] = []
        audits: list[CheckAudit] = []
        for body_check in self.body["checks"]:
            check_id = body_check["check_id"]
            suite_check = None
            if isinstance(suite_checks, str):
                missing_suite: str | None = suite_checks
            else:
                suite_check = suite_checks.get(check_id)
                missing_suite = None if suite_check else f"the suite defines no check {check_id}"
            audit, state = self.audit_check(
                body_check, suite_check, missing_suite, entries.get(check_id)
            )
            audits.append(audit)
            states.append(state)
        report = ReportAudit(
            self.body["report_id"], tuple(self.report_fields(suite_checks, states))
        )
        checks = tuple(audits)
        has_disagreement = any(
            f.outcome is Outcome.DISAGREE
            for f in report.fields + tuple(x for c in checks for x in c.fields)
        )
        return Audit(
            verification.source,
            AuditVerdict.INCONSISTENT if has_disagreement else AuditVerdict.CONSISTENT,
            verification,
            None,
            report,
            checks,
        )

    # -- one check ---------------------------------------------------------------------

    def audit_check(
        self,
        body_check: dict[str, Any],
        suite_check: dict[str, Any] | None,
        missing_suite: str | None,
        entry: dict[str, Any] | None,
    ) -> tuple[CheckAudit, _CheckState]:
        check_id: str = body_check["check_id"]
        body_doc = self.body_path
        result_path = entry["path"] if entry is not None else None
        result = _parse(self.kept, result_path) if result_path is not None else None
        suite_doc = self.suite_path or "suite"

        required_issued = [IssuedValue(body_doc, body_check["required"])]
        if result is not None and result_path is not None:
            required_issued.append(IssuedValue(result_path, result["required"]))
        if suite_check is not None:
            required_issued.append(IssuedValue(suite_doc, suite_check.get("required")))
        fields = [_compare(check_id, Field.REQUIRED, required_issued, None)]
        suite_required = suite_check.get("required") if suite_check is not None else None
        required = (
            suite_required if isinstance(suite_required, bool) else bool(body_check["required"])
        )

        aggregation: Any = suite_check.get("aggregation") if suite_check is not None else None
        if suite_check is not None and result is not None and result_path is not None:
            fields.append(
                _compare(
                    check_id,
                    Field.AGGREGATION,
                    [
                        IssuedValue(suite_doc, aggregation),
                        IssuedValue(result_path, result["aggregation"]),
                    ],
                    None,
                )
            )

        def issued(name: Field) -> list[IssuedValue]:
            values = []
            if name is not Field.INTERVAL:
                values.append(IssuedValue(body_doc, body_check[name.value]))
            if result is not None and result_path is not None:
                values.append(IssuedValue(result_path, result[name.value]))
            return values

        blocked = self.blockers(check_id, suite_check, missing_suite, entry, result)
        derived: DerivedCheck | None = None
        blocked_fields: dict[Field, str] = {}
        interval: Any = None
        if blocked is not None:
            blocked_fields = dict.fromkeys((*_DERIVED_FIELDS, Field.EVIDENCE_COMPLETE), blocked)
        else:
            assert suite_check is not None and entry is not None
            dataset = suite_check["dataset"]
            expected = self.expected_examples(dataset)
            assert isinstance(expected, list)
            interval = result.get("interval") if result is not None else None
            over_budget = self.bootstrap_budget(interval, entry["cases"]["path"])
            derived = derive_check(
                aggregation if isinstance(aggregation, Mapping) else {},
                dataset_id=dataset["id"],
                dataset_version=dataset["version"],
                expected_example_ids=expected,
                cases=_parse_lines(self.kept, entry["cases"]["path"]),
                interval=None if over_budget else interval,
            )
            blocked_fields = self.partial_blockers(derived, body_check, result)
            if over_budget is not None:
                blocked_fields.setdefault(Field.INTERVAL, over_budget)

        for name in _DERIVED_FIELDS:
            values = issued(name)
            if name in blocked_fields:
                fields.append(_not_rederivable(name, values, blocked_fields[name]))
            elif derived is not None:
                facts = CheckFacts(derived, interval if isinstance(interval, Mapping) else None)
                fields.append(
                    _compare(
                        check_id,
                        name,
                        values,
                        Derived(_derived_value(name, derived, result)),
                        facts,
                    )
                )
        if Field.EVIDENCE_COMPLETE in blocked_fields:
            fields.append(
                _not_rederivable(
                    Field.EVIDENCE_COMPLETE, [], blocked_fields[Field.EVIDENCE_COMPLETE]
                )
            )
        elif derived is not None:
            fields.append(
                _informational(
                    Field.EVIDENCE_COMPLETE,
                    [],
                    derived.evidence_complete,
                    "no document issues a check's evidence completeness; the report's rests on it",
                )
            )
        slices = [IssuedValue(body_doc, body_check["slices"])]
        if result is not None and result_path is not None:
            slices.append(IssuedValue(result_path, result["slices"]))
        if any(v.value for v in slices):
            fields.append(
                _not_rederivable(Field.SLICES, slices, "no store records slice membership")
            )

        audit = CheckAudit(check_id, required, tuple(fields), derived.problems if derived else ())
        return audit, _CheckState(check_id, required, derived, blocked_fields)

    def blockers(
        self,
        check_id: str,
        suite_check: dict[str, Any] | None,
        missing_suite: str | None,
        entry: dict[str, Any] | None,
        result: Any,
    ) -> str | None:
        """Why nothing of the check can be re-derived, or None.

        Every number of the check's inputs that sizes the work (repeats, min_samples,
        the examples and cases counted) is checked against ``derive.BOUNDS`` here,
        before anything is parsed or derived.
        """
        if suite_check is None:
            return missing_suite or f"the suite defines no check {check_id}"
        if entry is None:
            return f"bundle.json lists no check {check_id}"
        cases = entry["cases"]
        if cases["path"] is None:
            return self.listed_reason("cases", check_id, f"the case file of {check_id}")
        if cases["total"] > cases["exported"]:
            cut = cases["total"] - cases["exported"]
            listed = self.unavailable.get(("cases", check_id))
            reason = listed["reason"] if listed is not None else "case_limit"
            return f"{reason}: {cut} of {cases['total']} cases were not exported"
        aggregation = suite_check.get("aggregation")
        interval = result.get("interval") if isinstance(result, dict) else None
        beyond = [
            b.reason
            for b in bound_violations(
                aggregation if isinstance(aggregation, Mapping) else None,
                interval if isinstance(interval, Mapping) else None,
                cases=_line_count(self.kept.get(cases["path"], b"")),
            )
            if b.scope is BoundScope.CHECK
        ]
        if beyond:
            return "; ".join(beyond)
        expected = self.expected_examples(suite_check.get("dataset"))
        if isinstance(expected, str):
            return expected
        return None

    def bootstrap_budget(self, interval: Any, cases_path: str) -> str | None:
        """Spend this check's bootstrap index draws from the bundle's budget, or say why not.

        The draws are bounded by resamples x the check's cases (each executed example has
        a case); checks are served in report order until ``derive.MAX_BOOTSTRAP_DRAWS``.
        """
        if not isinstance(interval, Mapping) or interval.get("method") != BOOTSTRAP_METHOD:
            return None
        raw = interval.get("resamples")
        resamples = DEFAULT_RESAMPLES if raw is None else raw
        if isinstance(resamples, bool) or not isinstance(resamples, int):
            return None  # a defect derivation names
        if not 1 <= resamples <= MAX_RESAMPLES:
            return None  # beyond its own bound: derivation names it
        requested = resamples * _line_count(self.kept.get(cases_path, b""))
        beyond = bound_violations(None, None, draws=self._draws + requested)
        if beyond:
            return beyond[0].reason
        self._draws += requested
        return None

    def partial_blockers(
        self,
        derived: DerivedCheck,
        body_check: dict[str, Any],
        result: dict[str, Any] | None,
    ) -> dict[Field, str]:
        """Fields of a derived check that still cannot be compared, with the reason."""
        blocked: dict[Field, str] = {}
        codes = {p.code for p in derived.problems}
        if codes & _AGGREGATION_PROBLEMS:
            reason = "the suite check's aggregation is invalid (see the check's errors)"
            blocked[Field.SCORE] = reason
            blocked[Field.INTERVAL] = reason
            if ProblemCode.INVALID_REPEATS in codes:
                blocked[Field.COVERAGE] = reason
                blocked[Field.EVIDENCE_COMPLETE] = reason
        if Field.INTERVAL not in blocked:
            if result is None:
                blocked[Field.INTERVAL] = self.listed_reason(
                    "check", body_check["check_id"], "the check result holding the issued interval"
                )
            elif isinstance(derived.interval, NotRederivable):
                blocked[Field.INTERVAL] = derived.interval.reason
        if body_check["slices"] or (result is not None and result["slices"]):
            reason = (
                "a failed required slice fails the check, and no store records slice membership"
            )
            blocked.setdefault(Field.STATUS, reason)
            blocked.setdefault(Field.RESULT, reason)
        return blocked

    # -- the report --------------------------------------------------------------------

    def report_fields(
        self, suite_checks: dict[str, dict[str, Any]] | str, states: Sequence[_CheckState]
    ) -> list[FieldAudit]:
        body = self.body
        fields: list[FieldAudit] = []
        if isinstance(suite_checks, dict):
            fields.append(
                _compare(
                    None,
                    Field.CHECKS,
                    [
                        IssuedValue(self.body_path, sorted(c["check_id"] for c in body["checks"])),
                        IssuedValue(self.suite_path or "suite", sorted(suite_checks)),
                    ],
                    None,
                )
            )
        required = [s for s in states if s.required]
        derivable = all(s.derived is not None for s in required)
        report = (
            derive_report((True, s.derived) for s in required if s.derived is not None)
            if derivable
            else None
        )
        for name, needs in _REPORT_NEEDS.items():
            blocker = next(
                (
                    f"required check {s.check_id}: {s.blocked[need]}"
                    for s in required
                    for need in needs
                    if need in s.blocked
                ),
                None,
            )
            issued = (
                [] if name is Field.ASSURANCE else [IssuedValue(self.body_path, body[name.value])]
            )
            if blocker is not None or report is None:
                fields.append(
                    _not_rederivable(
                        name, issued, blocker or "a required check is not re-derivable"
                    )
                )
                continue
            if name is Field.ASSURANCE:
                fields.append(
                    _informational(
                        name,
                        issued,
                        None if report.assurance is None else report.assurance.value,
                        "the report body carries no assurance; derived as the weakest of the "
                        "required checks, each compared above",
                    )
                )
                continue
            value: Any
            if name is Field.RESULT:
                value = report.result.value
            elif name is Field.EVIDENCE_COMPLETE:
                value = report.evidence_complete
            else:
                value = _coverage_json(report.coverage)
            facts = ReportFacts(
                tuple((s.check_id, s.derived) for s in required if s.derived is not None)
            )
            fields.append(_compare(None, name, issued, Derived(value), facts))
        return fields


def _coverage_json(coverage: Any) -> dict[str, int]:
    return {
        "expected": coverage.expected,
        "executed": coverage.executed,
        "missing": coverage.missing,
    }


def _derived_value(name: Field, derived: DerivedCheck, result: dict[str, Any] | None) -> Any:
    if name is Field.COVERAGE:
        return _coverage_json(derived.coverage)
    if name is Field.STATUS:
        return derived.status.value
    if name is Field.RESULT:
        return derived.result.value
    if name is Field.SCORE:
        return derived.score
    if name is Field.ASSURANCE:
        return None if derived.assurance is None else derived.assurance.value
    if name is Field.INTERVAL:
        issued = result.get("interval") if result is not None else None
        if isinstance(derived.interval, Interval) and isinstance(issued, dict):
            return {**issued, "low": derived.interval.low, "high": derived.interval.high}
        return None
    raise ValueError(f"{name.value} is not a derived check field")


# ------------------------------------------------------------------------- rendering

# The interval methods this tool re-derives, in words (SPEC 12), for the summaries.
METHOD_WORDS: dict[str, str] = {
    WILSON_METHOD: (
        "the Wilson score interval of a pass rate with 1 repeat per example, without "
        "continuity correction, at the recorded level (z from the inverse normal: 1.96 at "
        "95%); exactly 0 below with no pass, exactly 1 above when every example passed"
    ),
    BOOTSTRAP_METHOD: (
        "a percentile bootstrap over the executed examples (sorted by example_id): each of "
        "the recorded resamples (default 2000) draws as many examples with replacement, "
        "the draws taken from the Philox4x64-10 random stream keyed by the recorded seed; "
        "the interval is the type 7 percentiles (numpy's default) of the resampled pass "
        "rates or means at (1 - level)/2 and 1 - (1 - level)/2"
    ),
}
# The assurance levels (SPEC 3.1), weakest first, in words.
ASSURANCE_WORDS: dict[Assurance, str] = {
    Assurance.DEVELOPMENT_UNISOLATED: "run on a development setup without isolation",
    Assurance.REPORTED: "as the runner reported it, observed by no one else",
    Assurance.INDEPENDENTLY_OBSERVED: "observed by a party independent of the runner",
    Assurance.HUMAN_ATTESTED: "attested by a person",
    Assurance.PLATFORM_VERIFIED: "verified by the evaluation platform itself",
}
ASSURANCE_RULE = (
    "a check's is the weakest over its counted cases, the report's the weakest of its "
    "required checks"
)
ISSUED_INCONSISTENT = "Issued report inconsistent"
ISSUED_INCONSISTENT_WORDS = (
    "defects in the bundle's own documents that make a check's derived status error; "
    "the audit itself ran"
)
NOT_ANCHORED = "none: the bundle failed verification, so nothing anchors it"
ROUNDING_NOTE = "shown rounded (in full with --json)"

_FIRST_PRECISION = 3  # significant digits a person reads
_FULL_PRECISION = 17  # enough to tell any two doubles apart


def _num(x: float | int, p: int | None) -> str:
    """A number: in full (``p`` None), else ``p`` significant digits below 1 and ``p``
    decimals from 1 up, trailing zeros dropped."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    if p is None or not math.isfinite(x):
        return repr(x)
    if x == 0:
        return "0"
    text = f"{x:.{p}f}" if abs(x) >= 1 else f"{x:.{p}g}"
    if "e" not in text and "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _numbers_of(a: Any, b: Any) -> Iterator[tuple[float, float]]:
    """The pairs of numbers at the same place of ``a`` and ``b`` (scores, bounds)."""
    if _is_number(a) and _is_number(b):
        yield float(a), float(b)
    elif isinstance(a, dict) and isinstance(b, dict):
        for key in a.keys() & b.keys():
            yield from _numbers_of(a[key], b[key])


def _precision(pairs: Iterable[tuple[Any, Any]], short: bool) -> int | None:
    """The fewest significant digits (from 3) at which every two different numbers of
    ``pairs`` look different; None (full precision) unless ``short``."""
    if not short:
        return None
    numbers = [(x, y) for a, b in pairs for x, y in _numbers_of(a, b) if x != y]
    for p in range(_FIRST_PRECISION, _FULL_PRECISION + 1):
        if all(_num(x, p) != _num(y, p) for x, y in numbers):
            return p
    return _FULL_PRECISION


def format_value(value: Any, p: int | None = None) -> str:
    """A value as a person reads it: numbers in full precision (``p`` None) or at ``p``
    digits (``_num``), coverage and intervals in words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _num(value, p)
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"expected", "executed", "missing"}:
        return (
            f"{value['expected']} expected, {value['executed']} executed, "
            f"{value['missing']} missing"
        )
    if isinstance(value, dict) and "low" in value and "high" in value:
        low, high = format_value(value["low"], p), format_value(value["high"], p)
        extra = [str(value[k]) for k in ("method",) if value.get(k) is not None]
        if value.get("level") is not None:
            extra.append(f"level {format_value(value['level'])}")
        if value.get("seed") is not None:
            extra.append(f"seed {value['seed']}")
        if value.get("resamples") is not None:
            extra.append(f"{value['resamples']} resamples")
        return f"[{low}, {high}]" + (f" ({', '.join(extra)})" if extra else "")
    text: str = canonical.dumps(value).decode("utf-8")
    return text


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


def _issued_text(f: FieldAudit, p: int | None = None) -> str:
    if not f.issued:
        return "not issued"
    distinct: list[tuple[Any, list[str]]] = []
    for v in f.issued:
        group = next((g for g in distinct if _json_equal(g[0], v.value)), None)
        if group is None:
            distinct.append((v.value, [_doc_label(v.document)]))
        else:
            group[1].append(_doc_label(v.document))
    if len(distinct) == 1:
        return format_value(distinct[0][0], p)
    return "; ".join(f"{format_value(value, p)} ({', '.join(docs)})" for value, docs in distinct)


def _field_precision(f: FieldAudit) -> int | None:
    pairs = [(a.value, b.value) for a in f.issued for b in f.issued]
    if f.derived is not None:
        pairs += [(v.value, f.derived.value) for v in f.issued]
    return _precision(pairs, short=True)


def _field_line(f: FieldAudit) -> str:
    p = _field_precision(f)
    issued = f"issued {_issued_text(f, p)}" if f.issued else "not issued"
    text = f"  {f.field.value + ':':<18} {issued}"
    if f.outcome is Outcome.NOT_REDERIVABLE:
        return f"{text}; not re-derivable: {f.reason}"
    if f.derived is not None:
        text += f"; derived {format_value(f.derived.value, p)}"
    marker = {
        Outcome.AGREE: "agrees",
        Outcome.DISAGREE: "DISAGREES",
        Outcome.INFORMATIONAL: "informational",
    }[f.outcome]
    return f"{text}  [{marker}]"


def _header_lines(audit: Audit) -> list[str]:
    lines = [f"Bundle:      {audit.source}"]
    v = audit.verification
    if v is not None and v.bundle_digest is not None:
        lines.append(f"Digest:      {v.bundle_digest}")
    if v is not None and v.report_id is not None:
        lines.append(f"Report:      {v.report_id}  {v.report_digest}")
    return lines


def _verdict_text(audit: Audit) -> str:
    """The verdict line: never a bare CONSISTENT for a report result not re-derived."""
    counts = audit.counts()
    if audit.verdict is AuditVerdict.ERROR:
        if audit.verification_failed:
            return "ERROR (the bundle failed verification; no audit possible)"
        return "ERROR (no audit possible)"
    blocker = audit.report_result_blocker
    notes = []
    if audit.verdict is AuditVerdict.CONSISTENT and blocker is not None:
        text = "NOT RE-DERIVED"
        notes.append(f"the report's result was not re-derived: {blocker}")
        notes.append("no disagreement in what was re-derived")
    else:
        text = audit.verdict.value.upper()
        if blocker is not None:
            notes.append(f"the report's result was not re-derived: {blocker}")
    if counts["disagreements"]:
        notes.append(f"{counts['disagreements']} disagreement(s)")
    if audit.not_rederivable:
        notes.append(f"{len(audit.not_rederivable)} item(s) not re-derivable")
    if counts["errors"]:
        notes.append(f"issued report inconsistent: {counts['errors']} defect(s)")
    if audit.strict_failure:
        notes.append("--strict: what was not re-derived fails the audit")
    return text + (f" ({'; '.join(notes)})" if notes else "")


def _interval_methods(audit: Audit) -> list[str]:
    """The interval methods the audited checks issue, in order of appearance."""
    methods: dict[str, None] = {}
    for check in audit.checks:
        f = check.get(Field.INTERVAL)
        for v in f.issued if f is not None else ():
            if isinstance(v.value, dict) and isinstance(v.value.get("method"), str):
                methods.setdefault(v.value["method"], None)
    return list(methods)


def _method_words(method: str) -> str:
    return METHOD_WORDS.get(
        method,
        "not a method this tool re-derives (it re-derives "
        + " and ".join(METHOD_WORDS)
        + "), so such an interval is not re-derivable",
    )


def _terms(audit: Audit) -> list[tuple[str, list[tuple[str, str]]]]:
    """The words once per summary: each interval method used, the assurance levels and
    how numbers are compared, as (title, [(term, words)])."""
    terms: list[tuple[str, list[tuple[str, str]]]] = []
    methods = _interval_methods(audit)
    if methods:
        terms.append(
            (
                "Intervals:   [low, high] (method, level); the methods used here",
                [(m, _method_words(m)) for m in methods],
            )
        )
    if audit.checks:
        terms.append(
            (
                f"Assurance:   levels weakest first; {ASSURANCE_RULE}",
                [(a.value, ASSURANCE_WORDS[a]) for a in Assurance],
            )
        )
    return terms


def audit_text(audit: Audit, signatures: Sequence[str] = ()) -> str:
    """The console summary: Bundle, Report, Anchor, Verdict, each check issued vs derived,
    the words for the methods and levels used, then Disagreements (each with the rule and
    the numbers that decide it), Not re-derivable and Issued report inconsistent.

    ``signatures`` are lines naming each signature checked (printed after the anchor).
    """
    lines = _header_lines(audit)
    if audit.verdict is not AuditVerdict.ERROR:
        lines.append(f"Anchor:      {audit.anchor.describe()}")
    elif audit.verification_failed:
        lines.append(f"Anchor:      {NOT_ANCHORED}")
    lines += signatures
    lines.append(f"Verdict:     {_verdict_text(audit)}")
    if audit.verdict is AuditVerdict.ERROR:
        lines.append(f"Error:       {audit.error}")
        return _shown_lines(lines)
    if audit.report is not None:
        lines.append(f"Report {audit.report.report_id}:")
        lines += [_field_line(f) for f in audit.report.fields]
    for check in audit.checks:
        lines.append(f"Check {check.check_id} ({'required' if check.required else 'optional'}):")
        lines += [_field_line(f) for f in check.fields]
        lines += [f"  defect: {p.code.value}: {p.message}" for p in check.errors]
    for title, entries in _terms(audit):
        lines.append(title)
        lines += [f"  {term}: {words}" for term, words in entries]
    lines.append(f"Numbers:     {ROUNDING_NOTE}; scores and bounds agree when {TOLERANCE_RULE}")
    disagreements = audit.disagreements
    lines.append(f"Disagreements: {len(disagreements)}")
    lines += [f"  - {d.describe(short=True)}" for d in disagreements]
    items = audit.not_rederivable
    lines.append(f"Not re-derivable: {len(items)}")
    lines += [f"  - {n.describe()}" for n in items]
    errors = audit.errors
    lines.append(f"{ISSUED_INCONSISTENT}: {len(errors)} ({ISSUED_INCONSISTENT_WORDS})")
    lines += [f"  - check {check_id}: {p.code.value}: {p.message}" for check_id, p in errors]
    return _shown_lines(lines)


def _shown_lines(lines: Iterable[str]) -> str:
    """Every line through ``textsafe.shown``: the lines carry ids, values, reasons and
    messages from the bundle, and none of them may redraw the terminal or forge a line
    (a newline inside a value is shown escaped, so one finding stays one line)."""
    return "".join(shown(line) + "\n" for line in lines)


def _md(text: Any) -> str:
    """Untrusted text for a Markdown cell or line: ``textsafe.shown_md``."""
    return shown_md(text)


def audit_markdown(audit: Audit, signatures: Sequence[str] = ()) -> str:
    """The audit as a Markdown page (written as audit.md by ``--output-dir``)."""
    out = [f"# Audit of {_md(audit.source)}", "", f"- **Verdict:** {_md(_verdict_text(audit))}"]
    v = audit.verification
    if v is not None and v.bundle_digest is not None:
        out.append(f"- **Bundle digest:** {_md(v.bundle_digest)}")
    if v is not None and v.report_id is not None:
        out.append(f"- **Report:** {_md(v.report_id)} {_md(v.report_digest)}")
    signed = [
        f"- **Signatures:** {_md(line.partition(':')[2].strip())}"
        if line.startswith("Signatures:")
        else f"  - {_md(line.strip().removeprefix('- '))}"
        for line in signatures
    ]
    if audit.verdict is AuditVerdict.ERROR:
        if audit.verification_failed:
            out.append(f"- **Anchor:** {_md(NOT_ANCHORED)}")
            out += signed
        out.append(f"- **Error:** {_md(audit.error)}")
        return "\n".join(out) + "\n"
    out.append(f"- **Anchor:** {_md(audit.anchor.describe())}")
    out += signed
    out.append(f"- **Numbers compared:** {_md(TOLERANCE_RULE)} ({_md(ROUNDING_NOTE)})")
    sections: list[tuple[str, Iterable[FieldAudit]]] = []
    if audit.report is not None:
        sections.append((f"Report {_md(audit.report.report_id)}", audit.report.fields))
    for check in audit.checks:
        kind = "required" if check.required else "optional"
        sections.append((f"Check {_md(check.check_id)} ({kind})", check.fields))
    for title, fields in sections:
        out += [
            "",
            f"## {title}",
            "",
            "| field | issued | derived | outcome |",
            "|---|---|---|---|",
        ]
        for f in fields:
            p = _field_precision(f)
            derived = "-" if f.derived is None else format_value(f.derived.value, p)
            outcome = f.outcome.value.replace("_", " ")
            if f.reason:
                outcome += f": {f.reason}"
            out.append(
                f"| {f.field.value} | {_md(_issued_text(f, p))} | {_md(derived)} | {_md(outcome)} |"
            )
    out += ["", "## Terms", ""]
    for title, entries in _terms(audit):
        name, _, words = title.partition(":")
        out.append(f"- **{_md(name)}:** {_md(words.strip())}")
        out += [f"  - **{_md(term)}:** {_md(text)}" for term, text in entries]
    out += ["", f"## Disagreements ({len(audit.disagreements)})", ""]
    out += [f"- {_md(d.describe(short=True))}" for d in audit.disagreements] or ["None."]
    out += ["", f"## Not re-derivable ({len(audit.not_rederivable)})", ""]
    out += [f"- {_md(n.describe())}" for n in audit.not_rederivable] or ["None."]
    out += [
        "",
        f"## {ISSUED_INCONSISTENT} ({len(audit.errors)})",
        "",
        _md(ISSUED_INCONSISTENT_WORDS[:1].upper() + ISSUED_INCONSISTENT_WORDS[1:]) + ".",
        "",
    ]
    out += [f"- check {_md(c)}: {p.code.value}: {_md(p.message)}" for c, p in audit.errors] or [
        "None."
    ]
    return "\n".join(out) + "\n"
