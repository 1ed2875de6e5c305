"""The audit as a person reads it (SPEC section 12): ``audit_text``, the console
summary, and ``audit_markdown``, the page ``audit --output-dir`` writes as audit.md,
with the words for the interval methods and assurance levels they use. Values and the
one-line explanations come from ``bundler.evalbook.audit`` (``format_value``,
``Disagreement.describe``), so a person reads what the JSON says. Every console line
passes ``textsafe.shown`` and every untrusted Markdown value ``textsafe.shown_md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from bundler.core.textsafe import shown, shown_md
from bundler.evalbook.audit import (
    ISSUED_INCONSISTENT,
    TOLERANCE_RULE,
    Audit,
    AuditVerdict,
    Field,
    FieldAudit,
    Outcome,
    _doc_label,
    _precision,
    format_value,
)
from bundler.evalbook.compare import _json_equal
from bundler.evalbook.derive import WILSON_METHOD
from bundler.evalbook.group_audit import GroupFieldAudit
from bundler.evalbook.stats import BOOTSTRAP_METHOD
from bundler.evalbook.verdicts import (
    Assurance,
)

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
ISSUED_INCONSISTENT_WORDS = (
    "defects in the bundle's own documents that make a check's derived status error; "
    "the audit itself ran"
)
NOT_ANCHORED = "none: the bundle failed verification, so nothing anchors it"
ROUNDING_NOTE = "shown rounded (in full with --json)"
# The page shows every number as the record holds it (the console rounds for reading).
PAGE_NUMBERS_NOTE = "shown in full, as the record holds them"


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


def _group_label(f: GroupFieldAudit) -> str:
    return f.field.value + ("" if f.task is None else f" {f.task}")


def _group_value_texts(f: GroupFieldAudit) -> tuple[str, str, str]:
    """(recorded, derived, outcome) of one group field, as a person reads them."""
    issued = f.issued[0].value if f.issued else None
    p = _precision([(issued, f.derived.value)] if f.derived is not None else [], short=True)
    derived = "-" if f.derived is None else format_value(f.derived.value, p)
    if f.outcome is Outcome.NOT_REDERIVABLE:
        outcome = f"not re-derivable: {f.reason}"
    else:
        outcome = "DISAGREES" if f.outcome is Outcome.DISAGREE else f.outcome.value
    return format_value(issued, p), derived, outcome


def _group_lines(audit: Audit) -> list[str]:
    """Each group the body records: its fields, then each aggregate's, recorded vs derived."""
    lines: list[str] = []
    for g in audit.groups or ():
        lines.append(f"Group {g.group if g.group is not None else '(unnamed)'} (lm-eval):")
        sections = [("  ", g.fields)] + [("    ", a.fields) for a in g.aggregates]
        for i, (indent, fields) in enumerate(sections):
            if i:
                a = g.aggregates[i - 1]
                lines.append(f"  aggregate {a.metric},{a.filter}:")
            for f in fields:
                issued, derived, outcome = _group_value_texts(f)
                text = f"{indent}{_group_label(f) + ':':<18} recorded {issued}"
                if f.outcome is Outcome.NOT_REDERIVABLE:
                    lines.append(f"{text}; {outcome}")
                else:
                    lines.append(
                        f"{text}; derived {derived}  [{outcome.replace('agree', 'agrees')}]"
                    )
    return lines


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
    lines += _group_lines(audit)
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
    for g in audit.groups or ():
        name = g.group if g.group is not None else "(unnamed)"
        out += [
            "",
            f"## Group {_md(name)} (lm-eval)",
            "",
            "| aggregate | field | recorded | derived | outcome |",
            "|---|---|---|---|---|",
        ]
        rows: list[tuple[str, GroupFieldAudit]] = [("-", gf) for gf in g.fields]
        rows += [(f"{a.metric},{a.filter}", gf) for a in g.aggregates for gf in a.fields]
        for where, gf in rows:
            issued, derived, outcome = _group_value_texts(gf)
            out.append(
                f"| {_md(where)} | {_md(_group_label(gf))} | {_md(issued)} | {_md(derived)} "
                f"| {_md(outcome)} |"
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
