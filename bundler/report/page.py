"""The auditor's page (SPEC section 14): one self-contained, inert HTML file per result.

``verification_page``, ``audit_page`` and ``fixity_page`` render the JSON records the
commands print (``Verification.to_json()``, the audit record, ``fixity --json``'s
summary), so ``render RESULT.json --html`` and ``verify --html`` give the same bytes for
the same record. The page depends on nothing but the record: no time of rendering, no
path of the machine.

Safety: the templates are Jinja2 with autoescape on, and the environment's ``finalize``
passes every interpolated value through ``textsafe.shown`` first, so every string from
a record (which holds what a bundle said) is shown with its invisible and bidirectional
characters visibly escaped, then HTML-escaped, in element text, attributes and SVG alike.
Nothing here marks a string safe. The Content-Security-Policy forbids every fetch but
inline styles and data: images, and the page holds no script.

The words reuse the console's: reasons from ``evalbook.listing.explain_reason``, the
verdict notes and the interval methods from ``report.render`` and ``report.audit``.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import jinja2
import markupsafe

from bundler.core.claims import GROUPS
from bundler.core.textsafe import shown
from bundler.evalbook.audit import format_value
from bundler.evalbook.listing import explain_reason
from bundler.report.audit import ASSURANCE_RULE, METHOD_WORDS, ROUNDING_NOTE

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
# Per-claim rows on the page (failed first, then unprovable); the rest are counted and
# named in the JSON record, so a 20,000-case bundle's page stays small.
MAX_LISTED_CLAIMS = 1000
VERIFICATION_SCHEMA = "evalbook.verification.v1"
AUDIT_SCHEMA = "evalbook.audit.v1"
FIXITY_SCHEMA = "evalbook.fixity_summary.v1"
KINDS = {VERIFICATION_SCHEMA: "verification", AUDIT_SCHEMA: "audit", FIXITY_SCHEMA: "fixity"}

_VERDICT_WORDS = {
    "verified": "every claim the bundle makes was checked; none failed",
    "failed": "at least one claim failed: the bundle does not hold what it says",
    "error": "no verdict possible: the archive could not be read safely",
    "consistent": "the issued report follows from the bundle's own cases and suite",
    "inconsistent": "at least one issued value disagrees with what the bundle re-derives",
}


def _finalize(value: Any) -> Any:
    """Every interpolated value, through ``shown``: nothing reaches the page unescaped."""
    if value is None or isinstance(value, jinja2.Undefined):
        return ""
    if isinstance(value, markupsafe.Markup):
        return value  # a macro's output: already finalized and escaped, piece by piece
    if isinstance(value, bool | int | float):
        return value
    return shown(value)


_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("bundler.report", "templates"),
    autoescape=True,
    finalize=_finalize,
    undefined=jinja2.ChainableUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


def _render(template: str, **context: Any) -> bytes:
    return _ENV.get_template(template).render(csp=CSP, **context).encode("utf-8")


def record_kind(record: Mapping[str, Any]) -> str | None:
    """``verification``, ``audit`` or ``fixity`` from a record's ``schema``; else None."""
    schema = record.get("schema")
    return KINDS.get(schema) if isinstance(schema, str) else None


def render_record(record: Mapping[str, Any]) -> tuple[str, bytes]:
    """(kind, page) for any of the three records; raises ValueError for anything else."""
    kind = record_kind(record)
    if kind == "verification":
        return kind, verification_page(record)
    if kind == "audit":
        return kind, audit_page(record)
    if kind == "fixity":
        return kind, fixity_page(record)
    raise ValueError(
        "not a verification, audit or fixity summary record (schema must be one of "
        + ", ".join(KINDS)
        + ")"
    )


# ---- charts: bars as data, drawn by the template's SVG macros -----------------------


def _bars(rows: Iterable[tuple[str, int | float]], *, total: float | None = None) -> dict[str, Any]:
    """A bar chart's rows as (label, value, width in percent of the largest or total)."""
    items = list(rows)
    top = total if total else max((v for _, v in items), default=0) or 1
    return {
        "rows": [
            {"label": label, "value": value, "pct": round(100 * value / top, 2)}
            for label, value in items
        ],
        "height": 26 * max(len(items), 1) + 8,
    }


def _q(text: Any) -> str:
    return shlex.quote(str(text))


# ---- verification -------------------------------------------------------------------


def _g(mapping: Any, key: str) -> Any:
    return mapping.get(key) if isinstance(mapping, Mapping) else None


def _claim_view(c: Mapping[str, Any]) -> dict[str, Any]:
    reason = c.get("reason")
    return {
        "group": c.get("group"),
        "group_name": c.get("group_name"),
        "subject": c.get("subject"),
        "state": c.get("state"),
        "path": c.get("path"),
        "expected": c.get("expected"),
        "observed": c.get("observed"),
        "reason": reason,
        "reason_words": explain_reason(reason) if reason else None,
        "detail": c.get("detail"),
    }


def _groups(claims: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    counts: dict[int, Counter[str]] = {}
    for c in claims:
        counts.setdefault(int(c.get("group") or 0), Counter())[str(c.get("state"))] += 1
    return [
        {
            "group": g,
            "name": GROUPS.get(g, "unknown"),
            "proven": counts[g]["proven"],
            "unprovable": counts[g]["unprovable"],
            "failed": counts[g]["failed"],
        }
        for g in sorted(counts)
    ]


def _inputs(claims: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Suite, scorers and dataset manifests with their pinned digests (groups 4-6)."""
    rows = []
    for c in claims:
        group, subject = c.get("group"), str(c.get("subject") or "")
        if group in (4, 5) or (group == 6 and subject.startswith("dataset ")):
            rows.append(_claim_view(c))
    return rows


def _eb_checks(claims: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """eval-banana: each check's claims, by check id in the order they appear."""
    by_check: dict[str, Counter[str]] = {}
    for c in claims:
        subject = str(c.get("subject") or "")
        if not subject.startswith("check ") or ": " not in subject:
            continue
        check_id = subject[len("check ") :].split(": ", 1)[0]
        by_check.setdefault(check_id, Counter())[str(c.get("state"))] += 1
    return [
        {"check_id": k, "proven": v["proven"], "unprovable": v["unprovable"], "failed": v["failed"]}
        for k, v in by_check.items()
    ]


_SIGNATURE_WORDS = {
    "verified": "verified, signed by {identity}, key {key}",
    "valid": "valid, signed by key {key} (not anchored: pass --allowed-signers to check who)",
    "not_allowed": "valid but not allowed: {reason}",
    "invalid": "does not verify: {reason}",
}


def _signature_lines(signatures: Any) -> list[str]:
    """One line per signature checked (SPEC 11.3), each with its state."""
    lines = []
    for sig in signatures if isinstance(signatures, list) else []:
        if not isinstance(sig, Mapping):
            continue
        words = _SIGNATURE_WORDS.get(str(sig.get("state")), "{reason}")
        where = f"{sig.get('where')} ({'embedded' if sig.get('embedded') else 'sidecar'})"
        lines.append(
            f"Signature {where}: "
            + words.format(
                identity=sig.get("identity"), key=sig.get("key"), reason=sig.get("reason")
            )
        )
    return lines


def _trust(anchor: Any, verdict: str | None, signatures: Any = None) -> dict[str, Any]:
    trust = _anchor_trust(anchor, verdict)
    trust["lines"] = [*trust["lines"], *_signature_lines(signatures)]
    return trust


def _anchor_trust(anchor: Any, verdict: str | None) -> dict[str, Any]:
    signer = _g(anchor, "signer")
    bundle_digest = _g(anchor, "expected_bundle_digest")
    report_digest = _g(anchor, "expected_report_digest")
    if isinstance(anchor, str):
        return {"level": "stated", "lines": [anchor]}
    lines = []
    if signer:
        lines.append(f"Signed by {signer}")
    if bundle_digest:
        lines.append(f"Expected bundle digest {bundle_digest}")
    if report_digest:
        lines.append(f"Expected report digest {report_digest}")
    if verdict == "error":
        return {"level": "none", "lines": ["None: no verdict was possible"]}
    if not lines:
        return {
            "level": "self",
            "lines": [
                "Self-consistency only: no expected digest and no signature anchors this "
                "result, so it shows the bundle agrees with itself, not who made it"
            ],
        }
    return {"level": "anchored", "lines": lines}


def verification_page(record: Mapping[str, Any]) -> bytes:
    """The page of one verification record (``Verification.to_json()``)."""
    claims = [c for c in record.get("claims") or [] if isinstance(c, Mapping)]
    verdict = str(record.get("verdict"))
    failed = [_claim_view(c) for c in claims if c.get("state") == "failed"]
    unprovable = [_claim_view(c) for c in claims if c.get("state") == "unprovable"]
    listed_failed = failed[:MAX_LISTED_CLAIMS]
    listed_unprovable = unprovable[: max(0, MAX_LISTED_CLAIMS - len(listed_failed))]
    by_reason = dict(record.get("unprovable_by_reason") or {})
    summary = record.get("summary") or {}
    tool = record.get("tool") or {}
    archive = record.get("archive")
    source = record.get("source")
    anchor = record.get("anchor") or {}
    command = ["evalbook-bundle", "verify", _q(source)]
    if _g(anchor, "expected_bundle_digest"):
        command += ["--expect-bundle-digest", _q(anchor["expected_bundle_digest"])]
    if _g(anchor, "expected_report_digest"):
        command += ["--expect-report-digest", _q(anchor["expected_report_digest"])]
    if _g(anchor, "signer"):
        command += ["--allowed-signers", "allowed_signers"]
    if record.get("strict"):
        command.append("--strict")
    commands = [" ".join(command)]
    if archive:
        commands.append(f"sha256sum {_q(source)}   # {archive.get('sha256')}")
    commands.append(" ".join(command) + " --json > verification.json")
    commands.append("evalbook-bundle render verification.json --html verification.html")
    recomputed = _g(summary, "recomputed")
    is_eb = _g(summary, "mode") is not None
    return _render(
        "verification.html.j2",
        title=f"Verification: {verdict}",
        r=record,
        verdict=verdict,
        verdict_words=_VERDICT_WORDS.get(verdict, ""),
        trust=_trust(anchor, verdict, record.get("signatures")),
        counts=record.get("counts") or {},
        groups=_groups(claims),
        inputs=_inputs(claims),
        failed=listed_failed,
        failed_total=len(failed),
        unprovable=listed_unprovable,
        unprovable_total=len(unprovable),
        reasons=[
            {"reason": r, "count": n, "words": explain_reason(r)} for r, n in by_reason.items()
        ],
        reason_chart=_bars(by_reason.items()),
        state_chart=_bars(
            [
                (s, int((record.get("counts") or {}).get(s, 0)))
                for s in ("proven", "unprovable", "failed")
            ]
        ),
        envelope=record.get("envelope"),
        is_eb=is_eb,
        labels=[(str(k), str(v)) for k, v in (_g(summary, "labels") or [])],
        recomputed=recomputed if isinstance(recomputed, Mapping) else None,
        eb_checks=_eb_checks(claims) if is_eb else [],
        tool=tool,
        archive=archive,
        commands=commands,
    )


# ---- audit --------------------------------------------------------------------------


def _issued_text(field: Mapping[str, Any]) -> str:
    issued = field.get("issued") or []
    if not issued:
        return "not issued"
    distinct: list[tuple[Any, list[str]]] = []
    for v in issued:
        for group in distinct:
            if group[0] == v.get("value"):
                group[1].append(str(v.get("document")))
                break
        else:
            distinct.append((v.get("value"), [str(v.get("document"))]))
    if len(distinct) == 1:
        return format_value(distinct[0][0])
    return "; ".join(f"{format_value(value)} ({', '.join(docs)})" for value, docs in distinct)


def _field_view(f: Mapping[str, Any]) -> dict[str, Any]:
    derived = f.get("derived")
    return {
        "field": f.get("field"),
        "outcome": str(f.get("outcome") or "").replace("_", " "),
        "issued": _issued_text(f),
        "derived": "-" if not isinstance(derived, Mapping) else format_value(derived.get("value")),
        "reason": f.get("reason"),
    }


def _value_of(field: Mapping[str, Any] | None) -> Any:
    if field is None:
        return None
    derived = field.get("derived")
    if isinstance(derived, Mapping) and derived.get("value") is not None:
        return derived.get("value")
    issued = field.get("issued") or []
    return issued[0].get("value") if issued else None


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def _check_view(check: Mapping[str, Any]) -> dict[str, Any]:
    fields = {str(f.get("field")): f for f in check.get("fields") or [] if isinstance(f, Mapping)}
    coverage = _value_of(fields.get("coverage"))
    aggregation = _value_of(fields.get("aggregation"))
    interval = _value_of(fields.get("interval"))
    score = _num(_value_of(fields.get("score")))
    threshold = _num(_g(aggregation, "threshold"))
    expected = _num(_g(coverage, "expected"))
    executed = _num(_g(coverage, "executed"))
    low, high = _num(_g(interval, "low")), _num(_g(interval, "high"))
    cov = None
    if expected is not None and executed is not None:
        cov = {
            "expected": int(expected),
            "executed": int(executed),
            "missing": int(expected - executed),
            "pct": round(100 * executed / expected, 2) if expected else 0.0,
            "min_coverage": _g(aggregation, "min_coverage"),
        }
    value = None
    if score is not None:
        nums = [x for x in (score, threshold, low, high) if x is not None]
        top = max(1.0, *nums)
        bottom = min(0.0, *nums)
        span = (top - bottom) or 1.0

        def x(v: float) -> float:
            return round(20 + 560 * (v - bottom) / span, 2)

        value = {
            "score": format_value(score),
            "score_x": x(score),
            "threshold": None if threshold is None else format_value(threshold),
            "threshold_x": None if threshold is None else x(threshold),
            "low": None if low is None else format_value(low),
            "high": None if high is None else format_value(high),
            "low_x": None if low is None else x(low),
            "high_x": None if high is None else x(high),
            "bottom": format_value(bottom),
            "top": format_value(top),
            "meets": threshold is None or score >= threshold,
            "rule": _g(aggregation, "rule"),
            "method": _g(interval, "method"),
            "level": _g(interval, "level"),
        }
    status = fields.get("status")
    return {
        "check_id": check.get("check_id"),
        "required": bool(check.get("required")),
        "status_issued": _issued_text(status) if status else "not issued",
        "status_derived": _field_view(status)["derived"] if status else "-",
        "status_outcome": _field_view(status)["outcome"] if status else "-",
        "coverage": cov,
        "value": value,
        "fields": [_field_view(f) for f in fields.values()],
        "errors": [dict(e) for e in check.get("errors") or [] if isinstance(e, Mapping)],
    }


def audit_page(record: Mapping[str, Any]) -> bytes:
    """The page of one audit record (``audit --json``)."""
    verdict = str(record.get("verdict"))
    verification = record.get("verification") or {}
    report = record.get("report") or {}
    checks = [_check_view(c) for c in record.get("checks") or [] if isinstance(c, Mapping)]
    methods = sorted(
        {
            c["value"]["method"]
            for c in checks
            if c["value"] and isinstance(c["value"]["method"], str)
        }
    )
    source = record.get("source")
    anchor = record.get("anchor") or _g(verification, "anchor") or {}
    command = f"evalbook-bundle audit {_q(source)}"
    outcomes = Counter(
        str(f.get("outcome"))
        for scope in [report, *(record.get("checks") or [])]
        if isinstance(scope, Mapping)
        for f in scope.get("fields") or []
        if isinstance(f, Mapping)
    )
    return _render(
        "audit.html.j2",
        title=f"Audit: {verdict}",
        r=record,
        verdict=verdict,
        verdict_words=_VERDICT_WORDS.get(verdict, ""),
        trust=_trust(anchor, verdict, _g(verification, "signatures")),
        verification=verification,
        report_id=report.get("report_id"),
        report_fields=[
            _field_view(f) for f in report.get("fields") or [] if isinstance(f, Mapping)
        ],
        checks=checks,
        outcome_chart=_bars(
            (o.replace("_", " "), outcomes[o])
            for o in ("agree", "disagree", "not_rederivable", "informational")
        ),
        disagreements=[d for d in record.get("disagreements") or [] if isinstance(d, Mapping)],
        not_rederivable=[n for n in record.get("not_rederivable") or [] if isinstance(n, Mapping)],
        errors=[e for e in record.get("errors") or [] if isinstance(e, Mapping)],
        methods=[
            (m, METHOD_WORDS.get(m, "a method this tool does not re-derive")) for m in methods
        ],
        assurance_rule=ASSURANCE_RULE,
        rounding=ROUNDING_NOTE,
        tolerance=_g(record.get("tolerance"), "rule"),
        commands=[
            command,
            command + " --json > audit.json",
            "evalbook-bundle render audit.json --html audit.html",
        ],
    )


# ---- fixity -------------------------------------------------------------------------


def fixity_page(summary: Mapping[str, Any]) -> bytes:
    """The page of one ``fixity --json`` summary."""
    counts = summary.get("counts") or {}
    outcomes = [(k, int(counts.get(k) or 0)) for k in ("pass", "fail", "missing", "error")]
    shares = summary.get("shares") or {}
    share_rows = []
    for key, words in (("30d", "30 days"), ("90d", "90 days"), ("365d", "365 days")):
        value = _num(shares.get(key))
        share_rows.append((f"within {words}", round(100 * value, 1) if value is not None else 0.0))
    failing = sum(n for k, n in outcomes if k != "pass")
    verdict = "passed" if failing == 0 else "failed"
    source = summary.get("source")
    level = summary.get("level")
    command = f"evalbook-bundle fixity {_q(source)} --level {_q(level)}"
    if summary.get("ledger"):
        command += f" --ledger {_q(summary.get('ledger'))}"
    return _render(
        "fixity.html.j2",
        title=f"Fixity: {verdict}",
        r=summary,
        verdict=verdict,
        verdict_words=(
            "every bundle checked still holds its bytes"
            + (" and verifies" if level == "full" else "")
            if failing == 0
            else f"{failing} bundle(s) did not pass"
        ),
        outcomes=outcomes,
        outcome_chart=_bars(outcomes),
        shares=share_rows,
        share_chart=_bars(share_rows, total=100),
        problems=[p for p in summary.get("problems") or [] if isinstance(p, Mapping)],
        tool=summary.get("tool") or {},
        commands=[
            command,
            command + " --json > fixity.json",
            "evalbook-bundle render fixity.json --html fixity.html",
        ],
    )
