"""The auditor: re-deriving an issued report's verdict from its verified bag and
comparing (SPEC section 12).

``audit_contents`` takes a bag the verifier proved (``bundler.bundles.audit`` reads and
verifies a bundle first). Over it it re-derives every check with
``derive.derive_check`` (from the bundled suite's aggregation and dataset, the dataset
manifest's examples and the exported cases) and the report with
``derive.derive_report``, and compares what was issued with what was derived. The
result is an ``Audit`` (``bundler.evalbook.audit``): per check and for the report, each
field issued vs derived, every disagreement with both values, every item that cannot
be re-derived with the reason, and the errors (defects of the inputs) that derivation
found. Nothing here raises for a bad bundle; ``audit_contents`` raises InputError only
when a document the verifier proved cannot be parsed at all.

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
  bootstrap draws) is checked against ``bounds.BOUNDS`` before anything is parsed or
  derived; beyond its bound the check (or its interval) is not re-derivable, with a
  one-line reason naming the field and the bound. Case files are parsed a line at a
  time.
- Strictness and the verdict line. A report whose result was not re-derived never
  reads a bare CONSISTENT (``NOT RE-DERIVED (...)`` with the reason); under
  ``--strict`` any item not re-derived fails the audit (exit 1, JSON verdict still
  ``consistent``).
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

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from bundler.core.claims import Verification
from bundler.core.errors import InputError
from bundler.evalbook.audit import (
    Audit,
    AuditVerdict,
    CheckAudit,
    CheckFacts,
    Comparison,
    Derived,
    Disagreement,
    DisagreementKind,
    Field,
    FieldAudit,
    IssuedValue,
    Outcome,
    ReportAudit,
    ReportFacts,
    _json_equal,
    numbers_agree,
)
from bundler.evalbook.bounds import BoundScope, bound_violations
from bundler.evalbook.contract import BUNDLE_SCHEMA
from bundler.evalbook.derive import derive_check, derive_report
from bundler.evalbook.group_audit import GroupAudit, MemberValue, audit_groups
from bundler.evalbook.group_rule import mean_aggregation
from bundler.evalbook.stats import BOOTSTRAP_METHOD, DEFAULT_RESAMPLES, MAX_RESAMPLES
from bundler.evalbook.verdicts import (
    DerivedCheck,
    Interval,
    NotRederivable,
    ProblemCode,
)


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


def comparison_of(name: Field) -> Comparison:
    """How issued values of field ``name`` are compared with the derived one."""
    return Comparison.TOLERANCE if name in _TOLERANT else Comparison.EXACT


def _grouped(issued: Sequence[IssuedValue]) -> list[list[IssuedValue]]:
    """The issued values grouped by JSON equality, in order of first appearance."""
    groups: list[list[IssuedValue]] = []
    for item in issued:
        group = next((g for g in groups if _json_equal(g[0].value, item.value)), None)
        if group is None:
            groups.append([item])
        else:
            group.append(item)
    return groups


def disagreement_count(name: Field, issued: Sequence[Any], derived: Derived | None) -> int:
    """How many disagreements ``_compare`` finds between these issued values and the
    derived one: the rule a saved audit record's outcomes are checked against."""
    groups = _grouped([IssuedValue("", value) for value in issued])
    agree = _TOLERANT.get(name, _json_equal)
    found = int(len(groups) > 1)
    if derived is not None:
        found += sum(1 for g in groups if not agree(g[0].value, derived.value))
    return found


def field_disagreements_json(
    check_id: str | None, name: Field, issued: Sequence[IssuedValue], derived: Derived | None
) -> list[dict[str, Any]]:
    """The disagreements ``_compare`` finds for one field, as an audit record lists them
    but for ``detail`` (its words rest on derivation facts a record does not keep): what
    a saved record's ``disagreements`` are checked against, item by item."""
    found = _compare(check_id, name, issued, derived).disagreements
    return [{k: v for k, v in d.to_json().items() if k != "detail"} for d in found]


def _compare(
    check_id: str | None,
    name: Field,
    issued: Sequence[IssuedValue],
    derived: Derived | None,
    facts: CheckFacts | ReportFacts | None = None,
) -> FieldAudit:
    """Compare issued documents with each other and, if given, with the derived value."""
    comparison = comparison_of(name)
    agree = _TOLERANT.get(name, _json_equal)
    groups = _grouped(issued)
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
        # For the group audit: each check's suite aggregation and derivation, and each
        # group member's value once computed.
        self._derived: dict[str, tuple[Any, DerivedCheck]] = {}
        self._members: dict[str, MemberValue | str | None] = {}

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
        beyond its bound (``bounds.BOUNDS``) is a reason, and nothing is parsed.
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
        groups = self.groups(suite_checks, entries)
        has_disagreement = any(
            f.outcome is Outcome.DISAGREE
            for f in report.fields + tuple(x for c in checks for x in c.fields)
        ) or any(f.outcome is Outcome.DISAGREE for g in groups or () for f in g.all_fields())
        return Audit(
            verification.source,
            AuditVerdict.INCONSISTENT if has_disagreement else AuditVerdict.CONSISTENT,
            verification,
            None,
            report,
            checks,
            groups,
        )

    # -- lm-eval groups (SPEC 16) ------------------------------------------------------

    def groups(
        self, suite_checks: dict[str, dict[str, Any]] | str, entries: dict[str, Any]
    ) -> tuple[GroupAudit, ...] | None:
        """The body's ``subject.run.groups`` audited, or None when it records none."""
        subject = self.body.get("subject")
        run = subject.get("run") if isinstance(subject, dict) else None
        if not isinstance(run, dict) or "groups" not in run:
            return None

        def member(check_id: str) -> MemberValue | str | None:
            if check_id not in self._members:
                self._members[check_id] = self.group_member(check_id, suite_checks, entries)
            return self._members[check_id]

        return audit_groups(
            run["groups"], member, self.body_path, run.get("tasks"), len(self.body["checks"])
        )

    def group_member(
        self,
        check_id: str,
        suite_checks: dict[str, dict[str, Any]] | str,
        entries: dict[str, Any],
    ) -> MemberValue | str | None:
        """A group's task check as the bundle gives it: SPEC 12's mean of its cases (the
        value the import held the runner's to) and its dataset's examples; the reason it
        cannot be re-derived; or None when the bundle holds no such check."""
        if isinstance(suite_checks, str):
            return suite_checks
        suite_check = suite_checks.get(check_id)
        if suite_check is None:
            return None
        entry = entries.get(check_id)
        blocked = self.blockers(check_id, suite_check, None, entry, None)
        if blocked is not None:
            return f"check {check_id}: {blocked}"
        assert entry is not None
        aggregation = suite_check.get("aggregation")
        raw = aggregation.get("repeats") if isinstance(aggregation, Mapping) else None
        repeats = 1 if raw is None else raw
        if isinstance(repeats, bool) or not isinstance(repeats, int):
            return f"check {check_id}: its aggregation's repeats {raw!r} is not a count"
        expected = self.expected_examples(suite_check["dataset"])
        assert isinstance(expected, list)
        mean_rule = mean_aggregation(repeats)
        done = self._derived.get(check_id)
        if done is not None and _json_equal(done[0], mean_rule):
            derived = done[1]
        else:
            dataset = suite_check["dataset"]
            derived = derive_check(
                mean_rule,
                dataset_id=dataset["id"],
                dataset_version=dataset["version"],
                expected_example_ids=expected,
                cases=_parse_lines(self.kept, entry["cases"]["path"]),
            )
        if derived.problems:
            return f"check {check_id}: its cases give no mean ({derived.problems[0].message})"
        return MemberValue(derived.score, len(expected))

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
            self._derived[check_id] = (aggregation, derived)
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
        the examples and cases counted) is checked against ``bounds.BOUNDS`` here,
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
        a case); checks are served in report order until ``bounds.MAX_BOOTSTRAP_DRAWS``.
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
