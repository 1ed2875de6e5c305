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

What the page shows comes from ``record.sift_value`` (or ``sift_path`` for ``render``): a
record that breaks its schema or contradicts itself is refused before any page is made,
and the verdict, outcome and counts on the page are the ones the record's own items give.
Tables come from the record's fields, never from splitting its texts. Commands to copy
quote names as a POSIX shell reads them back (``textsafe.shell_word``); a name holding an
invisible character is given as a variable, with the name shown escaped beside it.

The words reuse the console's: reasons from ``evalbook.listing.explain_reason``, the
verdict notes and the interval methods from ``report.render`` and ``report.audit``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import jinja2
import markupsafe

from bundler.core.claims import GROUPS
from bundler.core.textsafe import shell_word, shown
from bundler.evalbook.audit import TOLERANCE_RULE, format_value
from bundler.evalbook.listing import explain_reason
from bundler.report.audit import ASSURANCE_RULE, METHOD_WORDS, PAGE_NUMBERS_NOTE
from bundler.report.record import KINDS, MAX_KEPT_ITEMS, Sifted, sift_value
from bundler.report.ties import eb_totals

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
# Per-claim rows on the page (failed first, then unprovable); the rest are counted and
# named in the JSON record, so a 20,000-case bundle's page stays small.
MAX_LISTED_CLAIMS = MAX_KEPT_ITEMS

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
        return value  # a macro's output or a command line: already escaped, piece by piece
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


def _sifted(record: Mapping[str, Any] | Sifted) -> Sifted:
    return record if isinstance(record, Sifted) else sift_value(record)


def render_record(record: Mapping[str, Any] | Sifted) -> tuple[str, bytes]:
    """(kind, page) for any of the three records.

    Raises InputError (exit 3) for a record that breaks its schema or contradicts itself.
    """
    sifted = _sifted(record)
    page = {"verification": verification_page, "audit": audit_page, "fixity": fixity_page}
    return sifted.kind, page[sifted.kind](sifted)


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


# ---- commands to copy ----------------------------------------------------------------


class _Command:
    """A command line built from literal words and names quoted for the shell.

    A name with an invisible character cannot be shown both visibly and literally: it
    becomes ``"$VAR"``, and a comment line before the commands shows it escaped.
    """

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.lines: list[str] = []

    def name(self, value: Any, var: str) -> str:
        text = str(value)
        word = shell_word(text)
        if word is not None:
            return word
        note = f"# set {var} to the name shown here escaped (it holds invisible characters): {shown(text)}"
        if note not in self.notes:
            self.notes.append(note)
        return f'"${var}"'

    def add(self, *words: str) -> None:
        self.lines.append(" ".join(words))

    def run(self, words: list[str], operand: str, *tail: str) -> None:
        """A command whose operand (a file name, a URL) comes last, after ``--``: a name
        that starts with ``-`` is then read as a name, never as an option."""
        self.add(*words, "--", operand, *tail)

    def markup(self) -> list[markupsafe.Markup]:
        return [markupsafe.Markup.escape(line) for line in [*self.notes, *self.lines]]


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


def _groups(facts: Any) -> list[dict[str, Any]]:
    return [
        {
            "group": g,
            "name": GROUPS.get(g, "unknown"),
            "proven": facts.groups[g]["proven"],
            "unprovable": facts.groups[g]["unprovable"],
            "failed": facts.groups[g]["failed"],
        }
        for g in sorted(facts.groups)
    ]


def _eb(head: Mapping[str, Any]) -> dict[str, Any]:
    """eval-banana facts from the record's structure: each check's status and score, and
    the totals and labels its statuses give (never the record's own words for them)."""
    summary = head.get("summary") or {}
    totals = eb_totals(summary)
    run_id = (
        summary.get("run_id") if isinstance(summary.get("run_id"), str) else head.get("report_id")
    )
    labels: list[tuple[str, str]] = []
    if summary.get("mode") == "run_directory":
        from bundler.evalbanana.summary import IN_PLACE_NOTE

        labels.append(("Checked", IN_PLACE_NOTE))
    if totals is None:
        labels.append(("Run ID", str(run_id)))
    else:
        from bundler.evalbanana.results import summary_lines

        # Our own lines: each label is a literal before the first ": ".
        for line in summary_lines(str(run_id), totals):
            label, value = line.split(": ", 1)
            labels.append((label, value))
    return {
        "labels": labels,
        "totals": totals,
        "threshold": summary.get("pass_threshold"),
        "checks": [
            {"check_id": c["check_id"], "status": c["status"], "score": c["score"]}
            for c in summary.get("checks") or []
        ],
    }


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


# What a page made from a record can and cannot say (SPEC 14): render holds a record to
# its own items, it does not re-run the checks the record reports.
RECORD_NOTE = (
    "This page shows a saved result. Its verdict, counts and the facts above are held to "
    "the result's own items (they agree with each other), but a page cannot re-check a "
    "signature or re-derive values from the bundle's cases: a result forged consistently "
    "reads the same. Verify (or audit) the bundle itself to check who signed it and what "
    "it derives."
)


def _trust(anchor: Any, verdict: str | None, signatures: Any = None) -> dict[str, Any]:
    trust = _anchor_trust(anchor, verdict)
    trust["lines"] = [*trust["lines"], *_signature_lines(signatures)]
    trust["note"] = RECORD_NOTE
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


def _report_facts(
    report_id: Any, result: Any, issued_at: Any, envelope: Any, known: bool = True
) -> dict[str, Any]:
    """The report facts a verification page and an audit page both show, from the same
    fields: id, result, issued_at, envelope status and supersession."""
    return {
        "known": known,
        "report_id": report_id,
        "result": result,
        "issued_at": issued_at,
        "envelope": envelope if isinstance(envelope, Mapping) else None,
    }


def verification_page(record: Mapping[str, Any] | Sifted) -> bytes:
    """The page of one verification record (``Verification.to_json()``)."""
    sifted = _sifted(record)
    head, facts = sifted.head, sifted.facts
    verdict = facts.verdict(head)
    failed = [_claim_view(c) for c in facts.failed.items]
    unprovable = [_claim_view(c) for c in facts.unprovable.items]
    listed_unprovable = unprovable[: max(0, MAX_LISTED_CLAIMS - len(failed))]
    by_reason = dict(sorted(facts.by_reason.items()))
    counts = facts.counts()
    tool = head.get("tool") or {}
    archive = head.get("archive")
    source = head.get("source")
    anchor = head.get("anchor") or {}
    cmd = _Command()
    bundle = cmd.name(source, "BUNDLE")
    words = ["evalbook-bundle", "verify"]
    if _g(head.get("summary"), "mode") == "run_directory":
        # A run directory is checked against its project, which the record does not name.
        cmd.notes.append(
            "# set PROJECT to the eval-banana project directory the run was checked against"
        )
        words += ["--project", '"$PROJECT"']
    if _g(anchor, "expected_bundle_digest"):
        words += ["--expect-bundle-digest", cmd.name(anchor["expected_bundle_digest"], "DIGEST")]
    if _g(anchor, "expected_report_digest"):
        words += ["--expect-report-digest", cmd.name(anchor["expected_report_digest"], "DIGEST")]
    if _g(anchor, "signer"):
        words += ["--allowed-signers", "allowed_signers"]
    if head.get("strict"):
        words.append("--strict")
    cmd.run(words, bundle)
    if archive:
        # Read from standard input: sha256sum takes a file named "-" for its input.
        cmd.add("sha256sum", "<", bundle, "  #", str(archive.get("sha256")))
    cmd.run([*words, "--json"], bundle, ">", "verification.json")
    cmd.add("evalbook-bundle", "render", "verification.json", "--html", "verification.html")
    is_eb = (
        head.get("bundle_schema") == "evalbook.eval_banana_bundle.v1"
        or _g(head.get("summary"), "mode") is not None
    )
    return _render(
        "verification.html.j2",
        title=f"Verification: {verdict}",
        r=head,
        verdict=verdict,
        verdict_words=_VERDICT_WORDS.get(verdict, ""),
        strict_forecast=facts.strict_forecast(head),
        trust=_trust(anchor, verdict, head.get("signatures")),
        counts=counts,
        groups=_groups(facts),
        inputs=[_claim_view(c) for c in facts.inputs.items],
        inputs_more=facts.inputs.more,
        failed=failed,
        failed_total=facts.failed.total,
        unprovable=listed_unprovable,
        unprovable_total=facts.unprovable.total,
        reasons=[
            {"reason": r, "count": n, "words": explain_reason(r)} for r, n in by_reason.items()
        ],
        reason_chart=_bars(by_reason.items()),
        state_chart=_bars([(s, counts[s]) for s in ("proven", "unprovable", "failed")]),
        report=_report_facts(
            head.get("report_id"),
            head.get("report_result"),
            head.get("report_issued_at"),
            head.get("envelope"),
        ),
        is_eb=is_eb,
        unproven=facts.proofs.unproven(head),
        eb=_eb(head) if is_eb else None,
        tool=tool,
        archive=archive,
        commands=cmd.markup(),
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


def _disagreement_view(d: Mapping[str, Any]) -> dict[str, Any]:
    """A disagreement as its values give it (``record`` held them to its field's), and
    the record's own words for it, shown as the record's."""
    derived = d.get("derived")
    if d.get("kind") == "between_documents":
        compared = "the issued documents differ: " + _issued_text(d)
    else:
        compared = (
            f"issued {_issued_text(d)} ({', '.join(str(v.get('document')) for v in d.get('issued') or [])}); "
            f"derived {format_value(derived.get('value')) if isinstance(derived, Mapping) else '-'}; "
            + (
                "compared within tolerance"
                if d.get("comparison") == "tolerance"
                else "compared exactly"
            )
        )
    return {
        "scope": d.get("scope"),
        "check_id": d.get("check_id"),
        "field": d.get("field"),
        # An lm-eval group's disagreement names its group, aggregate and task (SPEC 16).
        "group": d.get("group"),
        "metric": d.get("metric"),
        "filter": d.get("filter"),
        "task": d.get("task"),
        "compared": compared,
        "detail": d.get("detail"),
    }


def _value_of(field: Mapping[str, Any] | None) -> Any:
    if field is None:
        return None
    derived = field.get("derived")
    if isinstance(derived, Mapping) and derived.get("value") is not None:
        return derived.get("value")
    issued = field.get("issued") or []
    return issued[0].get("value") if issued else None


# Numbers a chart places: anything further from zero is shown as text only.
_CHARTABLE = 1e12


def _num(x: Any) -> float | None:
    """A number a chart can place (finite, not huge), else None."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    value = float(x)
    return value if math.isfinite(value) and abs(value) <= _CHARTABLE else None


def _count(x: Any) -> int | None:
    """A count a coverage bar can draw: an integer from 0 to 2^53 - 1, else None."""
    if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= 2**53 - 1:
        return None
    return x


def _coverage(coverage: Any, aggregation: Any) -> dict[str, Any] | None:
    expected, executed = _count(_g(coverage, "expected")), _count(_g(coverage, "executed"))
    if expected is None or executed is None or executed > expected:
        return None
    return {
        "expected": expected,
        "executed": executed,
        "missing": expected - executed,
        "pct": round(100 * executed / expected, 2) if expected else 0.0,
        "min_coverage": _g(aggregation, "min_coverage"),
    }


def _value_chart(
    score: float, threshold: float | None, interval: Any, aggregation: Any
) -> dict[str, Any]:
    low, high = _num(_g(interval, "low")), _num(_g(interval, "high"))
    nums = [x for x in (score, threshold, low, high) if x is not None]
    top = max(1.0, *nums)
    bottom = min(0.0, *nums)
    span = (top - bottom) or 1.0

    def x(v: float) -> float:
        return round(20 + 560 * (v - bottom) / span, 2)

    return {
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


def _check_view(check: Mapping[str, Any]) -> dict[str, Any]:
    fields = {str(f.get("field")): f for f in check.get("fields") or [] if isinstance(f, Mapping)}
    aggregation = _value_of(fields.get("aggregation"))
    score = _num(_value_of(fields.get("score")))
    raw_threshold = _g(aggregation, "threshold")
    threshold = _num(raw_threshold)
    value = None
    if score is not None and (raw_threshold is None or threshold is not None):
        value = _value_chart(score, threshold, _value_of(fields.get("interval")), aggregation)
    status = fields.get("status")
    return {
        "check_id": check.get("check_id"),
        "required": bool(check.get("required")),
        "status_issued": _issued_text(status) if status else "not issued",
        "status_derived": _field_view(status)["derived"] if status else "-",
        "status_outcome": _field_view(status)["outcome"] if status else "-",
        "coverage": _coverage(_value_of(fields.get("coverage")), aggregation),
        "value": value,
        "fields": [_field_view(f) for f in fields.values()],
        "errors": [dict(e) for e in check.get("errors") or [] if isinstance(e, Mapping)],
    }


def _group_view(group: Mapping[str, Any]) -> dict[str, Any]:
    """One lm-eval group of an audit record (SPEC 16): every recorded field, its
    aggregate's and task's names in the field column."""
    rows: list[tuple[str, Any]] = [("", f) for f in group.get("fields") or []]
    for a in group.get("aggregates") or []:
        rows += [(f"{_g(a, 'metric')},{_g(a, 'filter')}: ", f) for f in _g(a, "fields") or []]
    fields = []
    for where, f in rows:
        view = _field_view(f)
        task = _g(f, "task")
        view["field"] = f"{where}{view['field']}" + ("" if task is None else f" {task}")
        fields.append(view)
    return {"group": group.get("group"), "fields": fields}


def audit_page(record: Mapping[str, Any] | Sifted) -> bytes:
    """The page of one audit record (``audit --json``)."""
    sifted = _sifted(record)
    head, facts = sifted.head, sifted.facts
    verdict = str(head.get("verdict"))
    verification = head.get("verification") or {}
    report = head.get("report") or {}
    checks = [_check_view(c) for c in facts.kept["checks"].items]
    methods = sorted(
        {
            c["value"]["method"]
            for c in checks
            if c["value"] and isinstance(c["value"]["method"], str)
        }
    )
    anchor = head.get("anchor") or _g(verification, "anchor") or {}
    cmd = _Command()
    bundle = cmd.name(head.get("source"), "BUNDLE")
    words = ["evalbook-bundle", "audit"]
    if _g(anchor, "expected_bundle_digest"):
        words += ["--expect-bundle-digest", cmd.name(anchor["expected_bundle_digest"], "DIGEST")]
    if _g(anchor, "expected_report_digest"):
        words += ["--expect-report-digest", cmd.name(anchor["expected_report_digest"], "DIGEST")]
    if _g(anchor, "signer"):
        words += ["--allowed-signers", "allowed_signers"]
    cmd.run(words, bundle)
    cmd.run([*words, "--json"], bundle, ">", "audit.json")
    cmd.add("evalbook-bundle", "render", "audit.json", "--html", "audit.html")
    outcomes = facts.outcomes
    return _render(
        "audit.html.j2",
        title=f"Audit: {verdict}",
        r=head,
        verdict=verdict,
        verdict_words=_VERDICT_WORDS.get(verdict, ""),
        trust=_trust(anchor, verdict, _g(verification, "signatures")),
        verification=verification,
        report=_report_facts(
            _g(verification, "report_id"),
            _g(verification, "report_result"),
            _g(verification, "report_issued_at"),
            _g(verification, "envelope"),
            known="report_issued_at" in verification,
        ),
        report_id=report.get("report_id"),
        report_fields=[
            _field_view(f) for f in report.get("fields") or [] if isinstance(f, Mapping)
        ],
        checks=checks,
        checks_more=facts.kept["checks"].more,
        groups=[_group_view(g) for g in head.get("groups") or [] if isinstance(g, Mapping)],
        outcome_chart=_bars(
            (o.replace("_", " "), outcomes[o])
            for o in ("agree", "disagree", "not_rederivable", "informational")
        ),
        disagreements=[_disagreement_view(d) for d in facts.kept["disagreements"].items],
        disagreements_total=facts.kept["disagreements"].total,
        not_rederivable=facts.kept["not_rederivable"].items,
        not_rederivable_total=facts.kept["not_rederivable"].total,
        errors=facts.kept["errors"].items,
        errors_total=facts.kept["errors"].total,
        methods=[
            (m, METHOD_WORDS.get(m, "a method this tool does not re-derive")) for m in methods
        ],
        assurance_rule=ASSURANCE_RULE,
        rounding=PAGE_NUMBERS_NOTE,
        tolerance=TOLERANCE_RULE,
        commands=cmd.markup(),
    )


# ---- fixity -------------------------------------------------------------------------


def fixity_page(record: Mapping[str, Any] | Sifted) -> bytes:
    """The page of one ``fixity --json`` summary."""
    sifted = _sifted(record)
    summary, facts = sifted.head, sifted.facts
    counts = summary["counts"]
    outcomes = [(k, int(counts[k])) for k in ("pass", "fail", "missing", "error")]
    shares = summary["shares"]
    share_rows = [
        (f"within {words}", round(100 * float(shares[key]), 1))
        for key, words in (("30d", "30 days"), ("90d", "90 days"), ("365d", "365 days"))
    ]
    failing = facts.failing(summary)
    carried = facts.kept["carried"].total
    verdict = "passed" if failing == 0 else "failed"
    level = summary.get("level")
    cmd = _Command()
    source = cmd.name(summary.get("source"), "SOURCE")
    words = ["evalbook-bundle", "fixity", "--level", cmd.name(level, "LEVEL")]
    if summary.get("ledger"):
        words += ["--ledger", cmd.name(summary.get("ledger"), "LEDGER")]
    cmd.run(words, source)
    cmd.run([*words, "--json"], source, ">", "fixity.json")
    cmd.add("evalbook-bundle", "render", "fixity.json", "--html", "fixity.html")
    return _render(
        "fixity.html.j2",
        title=f"Fixity: {verdict}",
        r=summary,
        verdict=verdict,
        verdict_words=(
            "every bundle checked still holds its bytes"
            + (" and verifies" if level == "full" else "")
            if failing == 0
            else f"{failing - carried} bundle(s) checked in this run did not pass"
            + (f"; {carried} failure(s) from earlier runs are still open" if carried else "")
        ),
        outcomes=outcomes,
        outcome_chart=_bars(outcomes),
        shares=share_rows,
        share_chart=_bars(share_rows, total=100),
        problems=facts.kept["problems"].items,
        problems_total=facts.kept["problems"].total,
        carried=facts.kept["carried"].items,
        carried_total=facts.kept["carried"].total,
        tool=summary.get("tool") or {},
        commands=cmd.markup(),
    )
