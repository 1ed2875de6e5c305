"""Small schema-valid records of each kind, and ``consistent`` to make any generated
record agree with itself (its verdict, outcome and counts as its items give them).
Import as ``import records`` from tests."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

from bundler.core.claims import SIGNER_SUBJECT
from bundler.evalbanana.results import recompute_totals
from bundler.evalbanana.run import CheckStatus
from bundler.evalbook.audit import TOLERANCE_RULE, Derived, Field
from bundler.evalbook.auditor import comparison_of, disagreement_count
from bundler.evalbook.derive import report_result
from bundler.evalbook.verdicts import CheckResult
from bundler.evalbook.verdicts import CheckStatus as CheckStatus_
from bundler.report import audit_values, ties
from bundler.report import record as rec

D = "sha256:" + "1" * 64


def claim(state: str, group: int = 8, name: str = "cases", **kw: Any) -> dict[str, Any]:
    return {
        "group": group,
        "group_name": name,
        "subject": kw.pop("subject", f"case {state}"),
        "state": state,
        "path": kw.pop("path", "data/cases/x.jsonl"),
        "expected": kw.pop("expected", D),
        "observed": kw.pop("observed", D),
        "reason": kw.pop("reason", "payload_at_sso" if state == "unprovable" else None),
        "detail": kw.pop("detail", "digest differs" if state == "failed" else None),
    }


def verification(**over: Any) -> dict[str, Any]:
    record = {
        "schema": "evalbook.verification.v1",
        "tool": {"name": "evalbook-bundle", "version": "0.1.0"},
        "verified_at": "2026-11-30T00:00:00Z",
        "source": "bundle.tar.zst",
        "archive": {"sha256": "0" * 64, "size": 10},
        "verdict": "failed",
        "bundle_schema": "evalbook.reproducibility_bundle.v1",
        "bundle_digest": D,
        "report_id": "rpt-old",
        "report_digest": D,
        "report_result": "pass",
        "report_issued_at": "2026-11-01T00:00:00Z",
        "envelope": {
            "status": "superseded",
            "superseded_by": "rpt-clean",
            "superseded_at": "2026-11-02T00:00:00Z",
            "reason": "a typo",
        },
        "anchor": {
            "expected_bundle_digest": None,
            "expected_report_digest": None,
            "signer": None,
            "self_consistent_only": True,
            "description": "self-consistency only",
        },
        "strict": False,
        "counts": {"proven": 1, "unprovable": 1, "failed": 1},
        "unprovable_by_reason": {"payload_at_sso": 1},
        "strict_forecast": None,
        "error": None,
        "summary": {},
        "claims": [claim("proven"), claim("unprovable"), claim("failed")],
    }
    record.update(over)
    return record


EB_CHECKS = [
    {"check_id": "fails", "status": "failed", "score": 0},
    {"check_id": "fails: decoy", "status": "passed", "score": 1},
    {"check_id": "judge", "status": "error", "score": 0},
]


def eb_summary(checks: list[dict[str, Any]], threshold: float = 0.5) -> dict[str, Any]:
    totals = recompute_totals([CheckStatus(c["status"]) for c in checks], threshold)
    return {
        "mode": "bundle",
        "labels": [["Run ID", "run-1"]],
        "run_id": "run-1",
        "pass_threshold": threshold,
        "checks": checks,
        "recomputed": {k: getattr(totals, k) for k in totals.__dataclass_fields__},
        "cases_tree": None,
    }


def eb_verification() -> dict[str, Any]:
    summary = eb_summary(copy.deepcopy(EB_CHECKS))
    record = verification(
        verdict="verified",
        bundle_schema="evalbook.eval_banana_bundle.v1",
        report_id="run-1",
        report_result="fail",
        envelope=None,
        summary=summary,
        unprovable_by_reason={},
        claims=[
            claim("proven", 7, "checks", subject="check fails: result file"),
            claim("proven", 7, "checks", subject="check fails: decoy: result file"),
        ],
    )
    record["claims"] += proof_claims(record)
    record["counts"] = {"proven": len(record["claims"]), "unprovable": 0, "failed": 0}
    return record


def field(name: str, outcome: str, value: Any = 1, derived_value: Any = None) -> dict[str, Any]:
    derived = None if outcome == "not_rederivable" else {"value": value}
    if outcome == "disagree":
        derived = {"value": derived_value}
    reason = "because" if outcome in ("not_rederivable", "informational") else None
    return {
        "field": name,
        "outcome": outcome,
        "issued": [{"document": "body.json", "value": value}],
        "derived": derived,
        "comparison": comparison_of(Field(name)).value,
        "reason": reason,
    }


def audit(**over: Any) -> dict[str, Any]:
    check = {
        "check_id": "acc",
        "required": True,
        "fields": [
            # A listed error makes the derived status error (SPEC 12).
            field("status", "disagree", "pass", "error"),
            field("coverage", "agree", {"expected": 10, "executed": 7, "missing": 3}),
            field("score", "agree", 0.7),
            field("aggregation", "agree", {"rule": "pass_rate", "threshold": 0.8}),
        ],
        "errors": [{"code": "missing_score", "message": "a case has no score"}],
    }
    record = {
        "schema": "evalbook.audit.v1",
        "source": "bundle.tar.zst",
        "verdict": "inconsistent",
        "exit_code": 1,
        "error": None,
        "verification": {
            "verdict": "verified",
            "bundle_schema": "evalbook.reproducibility_bundle.v1",
            "bundle_digest": D,
            "report_id": "rpt-old",
            "report_digest": D,
            "anchor": "self-consistency only",
            "counts": {"proven": 3, "unprovable": 0, "failed": 0},
            "report_result": "pass",
            "report_issued_at": "2026-11-01T00:00:00Z",
            "envelope": {
                "status": "superseded",
                "superseded_by": "rpt-clean",
                "superseded_at": "2026-11-02T00:00:00Z",
                "reason": "a typo",
            },
        },
        "anchor": {
            "expected_bundle_digest": None,
            "expected_report_digest": None,
            "signer": None,
            "self_consistent_only": True,
            "description": "self-consistency only",
        },
        "tolerance": {"value": 1e-12, "rule": TOLERANCE_RULE},
        "counts": {
            "checks": 1,
            "agree": 3,
            "disagree": 1,
            "not_rederivable": 1,
            "informational": 0,
            "disagreements": 1,
            "errors": 1,
        },
        # The report's result rests on its required checks' derived results and evidence,
        # which this record does not carry: not re-derived.
        "report": {"report_id": "rpt-old", "fields": [field("result", "not_rederivable", "pass")]},
        "checks": [check],
        "disagreements": [
            {
                "scope": "check",
                "check_id": "acc",
                "field": "status",
                "kind": "issued_vs_derived",
                "issued": [{"document": "body.json", "value": "pass"}],
                "derived": {"value": "error"},
                "comparison": "exact",
                "detail": "issued pass, derived error",
            }
        ],
        "not_rederivable": [
            {"scope": "report", "check_id": None, "fields": ["result"], "reason": "because"}
        ],
        "errors": [{"check_id": "acc", "code": "missing_score", "message": "a case has no score"}],
        "tool": {"name": "evalbook-bundle", "version": "0.1.0"},
        "audited_at": "2026-11-30T00:00:00Z",
        "archive": None,
    }
    record.update(over)
    return record


def fixity(**over: Any) -> dict[str, Any]:
    record = {
        "schema": "evalbook.fixity_summary.v1",
        "tool": {"name": "evalbook-bundle", "version": "0.1.0"},
        "run_id": "20261130T000000Z-0123abcd",
        "source": "s3://archive/eval",
        "level": "full",
        "selection": {
            "sample": None,
            "older_than_seconds": None,
            "limit": None,
            "limit_bytes": None,
        },
        "started": "2026-11-30T00:00:00.000000Z",
        "finished": "2026-11-30T00:01:00.000000Z",
        "wall_seconds": 60.0,
        "listed": 3,
        "checked": 3,
        "counts": {"pass": 2, "fail": 1, "missing": 0, "error": 0},
        "bytes_read": 100,
        "problems": [{"key": "reports/bundles/x.tar.zst", "outcome": "fail", "detail": "altered"}],
        "shares": {"30d": 1.0, "90d": 1.0, "365d": 1.0},
        "ledger": "evalbook-fixity.sqlite",
        "record": None,
        "record_sha256": None,
        "record_url": None,
        "signature": None,
        "carried": [],
        "record_chain_sha256": None,
        "interrupted": None,
        "exit_code": 1,
    }
    record.update(over)
    return record


# ---- making any record agree with itself -----------------------------------------------


_GOOD_TEXT = {
    ("tool", "version"): "0.1.0",
    ("report_id",): "rpt-x",
    ("report_issued_at",): "2026-11-01T00:00:00Z",
    ("envelope", "superseded_at"): "2026-11-02T00:00:00Z",
}


def _consistent_formats(r: dict[str, Any]) -> None:
    for path, pattern, _rule, bundle_schema in rec._VERIFICATION_FORMATS:
        if bundle_schema is not None and r.get("bundle_schema") != bundle_schema:
            continue
        holder = r
        for key in path[:-1]:
            holder = holder.get(key) if isinstance(holder, dict) else None
        if not isinstance(holder, dict):
            continue
        value = holder.get(path[-1])
        if value is not None and not (isinstance(value, str) and pattern.fullmatch(value)):
            holder[path[-1]] = _GOOD_TEXT[path]


def _consistent_anchor(r: dict[str, Any]) -> None:
    anchor = r["anchor"]
    signer = ties._signer_of(r.get("signatures", []))
    anchor["signer"] = signer
    r["claims"] = [c for c in r["claims"] if c["subject"] not in ties.ANCHOR_SUBJECTS]
    if r["verdict"] == "error":
        pass
    else:
        for key, subject, observed in (
            ("expected_bundle_digest", ties.EXPECT_BUNDLE_SUBJECT, "bundle_digest"),
            ("expected_report_digest", ties.EXPECT_REPORT_SUBJECT, "report_digest"),
        ):
            if anchor[key] is not None:
                anchor[key] = r[observed]
            if anchor[key] is not None:
                r["claims"].append(
                    claim(
                        "proven",
                        2,
                        "bundle",
                        subject=subject,
                        expected=anchor[key],
                        observed=anchor[key],
                    )
                )
        if signer is not None:
            r["claims"].append(
                claim("proven", 2, "bundle", subject=SIGNER_SUBJECT, expected=None, observed=signer)
            )
    anchor["self_consistent_only"] = not (
        anchor["expected_bundle_digest"] or anchor["expected_report_digest"] or signer
    )


def _consistent_envelope(report_id: Any, issued_at: Any, envelope: Any) -> None:
    """A superseded envelope names another report by its identifier, not before issue."""
    if not isinstance(envelope, dict) or envelope.get("status") != "superseded":
        return
    if envelope.get("superseded_by") == report_id:
        envelope["superseded_by"] = f"{report_id}-successor"[:128]
    if any(True for _ in ties.envelope_contradictions(report_id, issued_at, envelope)):
        envelope["superseded_at"] = issued_at


def _consistent_proofs(r: dict[str, Any]) -> None:
    """The claims that prove the facts the record shows (``ties.PROOFS``), holding them."""
    if r["verdict"] == "error":
        return
    kind = r.get("bundle_schema")
    subjects = {p.subject for p in ties.PROOFS}
    r["claims"] = [c for c in r["claims"] if c["subject"] not in subjects]
    for path, kinds, _rule in ties.ABSENT:
        if kind in kinds:
            r[path[0]] = None
    failing = any(c["state"] == "failed" for c in r["claims"])
    if kind == ties.EVALBOOK_BUNDLE and r.get("envelope") is None and not failing:
        r["envelope"] = {
            "status": "current",
            "superseded_by": None,
            "superseded_at": None,
            "reason": None,
        }
    if kind == ties.EVALBOOK_BUNDLE:
        _consistent_envelope(r.get("report_id"), r.get("report_issued_at"), r.get("envelope"))
    for proof in ties.PROOFS:
        # A verified record proves each fact it shows: none of them is null.
        name = proof.pointer[0]
        if kind in proof.kinds and len(proof.pointer) == 1 and r.get(name) is None and not failing:
            r[name] = {"report_id": "rpt-x"}.get(name, D)
    r["claims"] += proof_claims(r)


def proof_claims(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Proven claims holding each fact of ``r`` that ``ties.PROOFS`` ties to a claim."""
    made = []
    for proof in ties.PROOFS:
        value = ties._at(r, proof.pointer)
        if r.get("bundle_schema") not in proof.kinds or value is None:
            continue
        sides = {"expected": None, "observed": None, proof.side: proof.spelling.format(value)}
        made.append(claim("proven", 3, "report", subject=proof.subject, **sides))
    return made


def _consistent_summary(r: dict[str, Any]) -> None:
    """An eval-banana record's summary of the mode its kind writes, whole, naming the run."""
    kind = r.get("bundle_schema")
    if r["verdict"] == "error" or kind not in (None, "evalbook.eval_banana_bundle.v1"):
        return
    mode = "bundle" if kind else "run_directory"
    summary = r["summary"]
    checks = summary.get("checks") if isinstance(summary.get("checks"), list) else []
    unique = list({c["check_id"]: c for c in checks}.values())
    whole = {**eb_summary(unique, summary.get("pass_threshold", 0.5)), **summary}
    whole.update(mode=mode, run_id=r["report_id"], checks=unique)
    r["summary"] = whole


def _consistent_verification(r: dict[str, Any]) -> None:
    if r["verdict"] == "error":
        r["claims"] = []
        r["bundle_schema"] = r["bundle_digest"] = None
        r["error"] = r["error"] or "unreadable"
    else:
        r["error"] = None
    _consistent_formats(r)
    # The anchor last of the three: it copies the digests it was checked against, and a
    # kind without a bundle (a run directory) has none once the proofs are made.
    _consistent_proofs(r)
    _consistent_anchor(r)
    for c in r["claims"]:
        if c["state"] == "unprovable" and c["reason"] is None:
            c["reason"] = "case_limit"
        if c["state"] == "proven" and c["expected"] is not None and c["observed"] is not None:
            c["observed"] = c["expected"]
    states = Counter(c["state"] for c in r["claims"])
    if r["strict"] and states["unprovable"]:
        r["strict"] = False
    if r["verdict"] != "error":
        r["verdict"] = "failed" if states["failed"] else "verified"
    if "exit_code" in r:
        allowed = rec._VERIFICATION_EXIT[r["verdict"]]
        if r["exit_code"] not in allowed:
            r["exit_code"] = allowed[0]
    r["counts"] = {s: states[s] for s in ("proven", "unprovable", "failed")}
    r["unprovable_by_reason"] = dict(
        Counter(c["reason"] for c in r["claims"] if c["state"] == "unprovable")
    )
    n = states["unprovable"]
    forecast = None
    if not r["strict"] and r["verdict"] == "verified" and n:
        forecast = f"FAILED ({n} unprovable {'claim' if n == 1 else 'claims'} would fail)"
    r["strict_forecast"] = forecast
    summary = {k: v for k, v in r["summary"].items() if k in ties.SUMMARY_KEYS}
    if r["bundle_schema"] == ties.EVALBOOK_BUNDLE:
        summary = {}
    r["summary"] = summary
    _consistent_summary(r)
    summary = r["summary"]
    checks = summary.get("checks")
    if isinstance(checks, list) or "recomputed" in summary:
        # Each check once, whatever the verdict (an error record's summary is not made
        # whole above, and render refuses a check listed twice in any record).
        checks = (
            list({c["check_id"]: c for c in checks}.values()) if isinstance(checks, list) else []
        )
        if "checks" in summary:
            summary["checks"] = checks
        for c in checks:
            c["score"] = 1 if c["status"] == "passed" else 0
        threshold = summary.get("pass_threshold", 0.5)
        r["summary"] = {**summary, **eb_summary(checks, threshold)}
        r["summary"]["labels"] = summary.get("labels", [])
        totals = recompute_totals([CheckStatus(c["status"]) for c in checks], threshold)
        if r["verdict"] != "error":
            r["report_result"] = "pass" if totals.run_passed else "fail"
    kind = r.get("bundle_schema")
    if r["verdict"] != "error" and kind in (None, "evalbook.eval_banana_bundle.v1"):
        r["summary"].update(mode="bundle" if kind else "run_directory", run_id=r["report_id"])


# A value of the right shape for each audited field whose values the page charts.
_GOOD_VALUE = {
    "coverage": {"expected": 1, "executed": 1, "missing": 0},
    "interval": None,
    "score": None,
    "aggregation": {"rule": "pass_rate", "threshold": 0.5},
}


def _consistent_field(f: dict[str, Any]) -> int:
    """Make one field's comparison, values and outcome agree; its disagreements."""
    if f["outcome"] not in ("agree", "disagree"):
        return 0
    f["comparison"] = comparison_of(Field(f["field"])).value
    shape = audit_values.VALUE_SHAPES.get(f["field"])
    if shape is not None:
        for v in f["issued"]:
            if shape(v["value"], False) is not None:
                v["value"] = copy.deepcopy(_GOOD_VALUE[f["field"]])
        d = f["derived"]
        if isinstance(d, dict) and shape(d["value"], True) is not None:
            d["value"] = copy.deepcopy(_GOOD_VALUE[f["field"]])
    derived = f["derived"]
    n = disagreement_count(
        Field(f["field"]),
        [v["value"] for v in f["issued"]],
        Derived(derived["value"]) if isinstance(derived, dict) else None,
    )
    f["outcome"] = "disagree" if n else "agree"
    return n


def _consistent_status(c: dict[str, Any]) -> None:
    """Make a check's derived status one SPEC 12's rule gives over its derived values,
    and its derived result the one that status gives."""
    derived = audit_values._derived_fields(c["fields"])
    status = derived.get("status")
    if status is not None:
        holder = c["fields"][status[0]]["derived"]
        others = {**c, "fields": [f for f in c["fields"] if f["field"] != "result"]}
        for s in CheckStatus_:
            holder["value"] = s.value
            if audit_values.check_status_contradiction(others) is None:
                break
    result = derived.get("result")
    if result is not None:
        holder = c["fields"][result[0]]["derived"]
        if status is not None:
            value = c["fields"][status[0]]["derived"]["value"]
            holder["value"] = CheckResult.from_status(CheckStatus_(value)).value
        elif not any(holder["value"] == x.value for x in CheckResult):
            holder["value"] = "inconclusive"


def _consistent_report_result(r: dict[str, Any]) -> None:
    """Make the report's derived result the one its required checks' give, or mark it
    not re-derived when one of them has no derived result to rest on."""
    report = r["report"]
    if not isinstance(report, dict):
        return
    facts = audit_values.ReportResultFacts()
    for c in r["checks"]:
        facts.add(c)
    while (at := audit_values._derived_fields(report["fields"]).get("result")) is not None:
        f = report["fields"][at[0]]
        if facts.underived is None:
            f["derived"]["value"] = report_result(facts.pairs).value
            return
        f.update(outcome="not_rederivable", derived=None, reason=f["reason"] or "because")


def _consistent_audit(r: dict[str, Any]) -> None:
    # lm-eval groups have rules of their own (their fields counted with the others, each
    # aggregate re-derived from its tasks): tests/test_audit_groups.py makes those records.
    r.pop("groups", None)
    if r["verdict"] == "error":
        r.update(report=None, checks=[], disagreements=[], not_rederivable=[], errors=[])
        r["error"] = r["error"] or "unreadable"
        r["exit_code"] = 3
    fields = [f for f in (r["report"] or {}).get("fields", [])]
    fields += [f for c in r["checks"] for f in c["fields"]]
    for f in fields:
        _consistent_field(f)  # the shapes first: the status rule reads them
    for c in r["checks"]:
        _consistent_status(c)
    _consistent_report_result(r)
    for f in fields:
        _consistent_field(f)
    # The disagreements the fields give, in the auditor's order, each with some words.
    owners = [(None, f) for f in (r["report"] or {}).get("fields", [])]
    owners += [(c["check_id"], f) for c in r["checks"] for f in c["fields"]]
    r["disagreements"] = [
        {**d, "detail": "issued and derived differ"}
        for check_id, f in owners
        if f["outcome"] in ("agree", "disagree")
        for d in audit_values.expected_disagreements(check_id, f)
    ]
    if r["verdict"] != "error":
        r["verdict"] = "inconsistent" if r["disagreements"] else "consistent"
        r["exit_code"] = 1 if r["disagreements"] else 0
        r["error"] = None
        if r["report"] is None:
            r["report"] = {"report_id": "rpt-x", "fields": []}
    r["errors"] = [
        {"check_id": c["check_id"], "code": e["code"], "message": e["message"]}
        for c in r["checks"]
        for e in c["errors"]
    ]
    outcomes = Counter(f["outcome"] for f in fields)
    r["counts"] = {
        "checks": len(r["checks"]),
        "agree": outcomes["agree"],
        "disagree": outcomes["disagree"],
        "not_rederivable": outcomes["not_rederivable"],
        "informational": outcomes["informational"],
        "disagreements": len(r["disagreements"]),
        "errors": len(r["errors"]),
    }
    r["tolerance"] = {"value": 1e-12, "rule": TOLERANCE_RULE}
    v = r["verification"]
    if isinstance(v, dict):
        failed = v["counts"]["failed"]
        if v["verdict"] != "error":
            v["verdict"] = "failed" if failed else "verified"
        _consistent_formats(v)
        verified = v["verdict"] == "verified" and v.get("bundle_schema") == ties.EVALBOOK_BUNDLE
        if verified and v.get("envelope") is None:
            v["envelope"] = {
                "status": "current",
                "superseded_by": None,
                "superseded_at": None,
                "reason": None,
            }
        _consistent_envelope(v.get("report_id"), v.get("report_issued_at"), v.get("envelope"))
        report = r["report"]
        if isinstance(report, dict):
            report["report_id"] = v["report_id"]
            for f in report["fields"]:
                if f["field"] == "result" and f["issued"]:
                    v["report_result"] = f["issued"][0]["value"]
                    for issued in f["issued"]:
                        issued["value"] = v["report_result"]
    anchor = r["anchor"]
    if isinstance(v, dict):
        if "signatures" in v:
            anchor["signer"] = ties._signer_of(v["signatures"])
        if v["verdict"] == "verified":
            for key, observed in (
                ("expected_bundle_digest", "bundle_digest"),
                ("expected_report_digest", "report_digest"),
            ):
                if anchor[key] is not None:
                    anchor[key] = v[observed]
        v["anchor"] = anchor["description"]
    anchor["self_consistent_only"] = not (
        anchor["expected_bundle_digest"] or anchor["expected_report_digest"] or anchor["signer"]
    )


def _consistent_fixity(r: dict[str, Any]) -> None:
    seen: set[str] = set()
    problems = []
    for p in r["problems"]:
        if p["key"] not in seen:
            seen.add(p["key"])
            problems.append(p)
    r["problems"] = problems
    carried = []
    for c in r.get("carried", []):
        if c["key"] not in seen:
            seen.add(c["key"])
            carried.append(c)
    if "carried" in r:
        r["carried"] = carried
    selection = r.get("selection")
    full = isinstance(selection, dict) and all(
        selection.get(k) is None for k in ("sample", "limit", "limit_bytes")
    )
    if carried and r.get("interrupted") is None and full:
        selection["limit"] = 1  # only a part of the source leaves failures unchecked
    listed = Counter(p["outcome"] for p in problems)
    for outcome in ("fail", "missing", "error"):
        r["counts"][outcome] = listed[outcome]
    r["checked"] = sum(r["counts"].values())
    present = sum(r["counts"][k] for k in ("pass", "fail", "error"))
    if isinstance(r.get("listed"), int) and r["listed"] < present:
        r["listed"] = present
    if r.get("interrupted") not in (None, "SIGINT", "SIGTERM"):
        r["interrupted"] = None
    if "exit_code" in r:
        facts = rec.FixityFacts()
        facts.by_outcome = listed
        facts.kept["carried"].total = len(r.get("carried", []))
        r["exit_code"] = facts.exit_code(r)[0]
    last = 0.0
    for period in ("30d", "90d", "365d"):
        share = r["shares"][period]
        if not (audit_values.is_number(share) and last <= share <= 1):
            share = max(last, min(1.0, share)) if audit_values.is_number(share) else last
            r["shares"][period] = share
        last = share


def consistent(record: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``record`` whose verdict, outcome and counts follow from its items."""
    r = copy.deepcopy(record)
    {
        "evalbook.verification.v1": _consistent_verification,
        "evalbook.audit.v1": _consistent_audit,
        "evalbook.fixity_summary.v1": _consistent_fixity,
    }[r["schema"]](r)
    return r
