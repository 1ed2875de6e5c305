"""Human-readable renderings of results (console text and Markdown); no Click here.

Every value interpolated below may come from a bundle, a store, a run or a proof, so each
passes ``textsafe.shown`` (console) or ``textsafe.shown_md`` (Markdown) on its way in;
only the labels written here are literal. Untrusted values never go inside a Markdown
code span, where backslash escapes do not apply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bundler.textsafe import shown, shown_md
from bundler.verify import Claim, State, Verification

Escape = Callable[[Any], str]


def _claim_line(c: Claim, esc: Escape = shown) -> str:
    bits = [f"[{c.group}] {esc(c.subject)}: {esc(c.detail or c.state.value)}"]
    if c.path:
        bits.append(f"path {esc(c.path)}")
    if c.expected is not None:
        bits.append(f"expected {esc(c.expected)}")
    if c.observed is not None:
        bits.append(f"observed {esc(c.observed)}")
    return "; ".join(bits)


def _label(key: Any) -> str:
    return f"{shown(key) + ':':<12}"


def verification_text(v: Verification, *, max_failures: int = 50) -> str:
    """The console summary of SPEC section 5 (labels Bundle, Report, Anchor, Verdict...)."""
    lines = [f"Bundle:      {shown(v.source)}"]
    if v.verdict.value == "error":
        lines += ["Verdict:     ERROR (no verdict possible)", f"Error:       {shown(v.error)}"]
        return "\n".join(lines) + "\n"
    digest = v.bundle_digest or "(run directory in place: no bundle)"
    lines.append(f"Digest:      {shown(digest)}")
    lines.append(f"Report:      {shown(v.report_id)}  {shown(v.report_digest)}")
    for key, value in v.summary.get("labels", []):
        lines.append(f"{_label(key)} {shown(value)}")
    lines.append(f"Anchor:      {shown(v.anchor.describe())}")
    lines.append(f"Verdict:     {v.verdict.value.upper()}" + ("  (--strict)" if v.strict else ""))
    counts = v.counts()
    lines.append(f"Proven:      {counts['proven']}")
    lines.append(f"Unprovable:  {counts['unprovable']}")
    for reason, n in v.unprovable_by_reason().items():
        lines.append(f"  {shown(reason)}: {n}")
    lines.append(f"Failed:      {counts['failed']}")
    failures = v.failures()
    for c in failures[:max_failures]:
        lines.append("  - " + _claim_line(c))
    if len(failures) > max_failures:
        lines.append(f"  ... and {len(failures) - max_failures} more (see --json)")
    return "\n".join(lines) + "\n"


def verification_markdown(v: Verification) -> str:
    """verification.md: the same facts as ``verification_text``, and every claim."""
    out = [f"# Verification of {shown_md(v.source)}", ""]
    out.append(f"- **Verdict:** {v.verdict.value}" + (" (strict)" if v.strict else ""))
    if v.error:
        out.append(f"- **Error:** {shown_md(v.error)}")
        return "\n".join(out) + "\n"
    out += [
        f"- **Bundle digest:** {shown_md(v.bundle_digest)}",
        f"- **Report:** {shown_md(v.report_id)} {shown_md(v.report_digest)}",
        f"- **Anchor:** {shown_md(v.anchor.describe())}",
    ]
    for key, value in v.summary.get("labels", []):
        out.append(f"- **{shown_md(key)}:** {shown_md(value)}")
    counts = v.counts()
    out += ["", "| state | claims |", "|---|---|"]
    out += [f"| {k} | {n} |" for k, n in counts.items()]
    if v.unprovable_by_reason():
        out += ["", "## Unprovable, by reason", "", "| reason | claims |", "|---|---|"]
        out += [f"| {shown_md(r)} | {n} |" for r, n in v.unprovable_by_reason().items()]
    failures = v.failures()
    if failures:
        out += ["", "## Failed claims", ""]
        out += [f"- {_claim_line(c, shown_md)}" for c in failures]
    out += [
        "",
        "## All claims",
        "",
        "| group | subject | state | reason / detail |",
        "|---|---|---|---|",
    ]
    for c in v.claims:
        note = c.reason if c.state is State.UNPROVABLE else (c.detail or "")
        out.append(f"| {c.group} | {shown_md(c.subject)} | {c.state.value} | {shown_md(note)} |")
    return "\n".join(out) + "\n"


def export_text(summary: dict[str, Any]) -> str:
    """The export summary on stderr: what went into the bundle and what is listed."""
    counts = summary["counts"]
    lines = [
        f"Exported:    {shown(summary['report_id'])} -> {shown(summary['path'])}",
        f"Bundle:      {shown(summary['bundle_digest'])}",
        f"Report:      {shown(summary['report_digest'])}",
        f"Archive:     {summary['archive_size']} bytes, {shown(summary['archive_sha256'])}",
        f"Contents:    {counts['checks']} checks, {counts['cases_exported']}/{counts['cases_total']} cases, "
        f"{counts['scorers']} scorers, {counts['datasets']} datasets, {counts['examples']} examples, "
        f"{counts['payloads']} payloads",
        f"Unavailable: {counts['unavailable']}",
    ]
    lines += [f"  {shown(r)}: {n}" for r, n in summary["unavailable_by_reason"].items()]
    lines.append(f"Redacted:    {counts['redacted']}")
    lines += [f"  {shown(r)}: {n}" for r, n in summary["redacted_by_reason"].items()]
    return "\n".join(lines) + "\n"


def inspect_text(info: dict[str, Any]) -> str:
    """What ``inspect`` prints: the bundle's own statements, escaped, and no proof."""
    by = info["principal"] or info["exporter"]
    lines = [
        f"Bundle:      {shown(info['source'])}",
        f"Schema:      {shown(info['schema'])}",
        f"Digest:      {shown(info['bundle_digest'])}",
        f"Exported at: {shown(info['exported_at'])} by {shown(by)}",
    ]
    for key, value in info.get("labels", []):
        lines.append(f"{_label(key)} {shown(value)}")
    lines.append(f"Files:       {info['files']} ({info['bytes']} bytes)")
    lines.append(f"Unavailable: {sum(info['unavailable_by_reason'].values())}")
    lines += [f"  {shown(r)}: {n}" for r, n in info["unavailable_by_reason"].items()]
    lines.append(f"Redacted:    {sum(info['redacted_by_reason'].values())}")
    lines += [f"  {shown(r)}: {n}" for r, n in info["redacted_by_reason"].items()]
    if "signatures" in info:
        lines.append(f"Signatures:  {len(info['signatures'])} stored beside the object (not checked)")
        lines += [f"  {shown(key)}" for key in info["signatures"]]
    lines.append("(inspect reads safely but proves nothing; run verify for the proof)")
    return "\n".join(lines) + "\n"


def export_eb_text(summary: dict[str, Any]) -> str:
    """The summary of an eval-banana export (stderr); the run id comes from the run."""
    counts = summary["counts"]
    lines = [
        f"Exported:    run {shown(summary['run_id'])} -> {shown(summary['path'])}",
        f"Bundle:      {shown(summary['bundle_digest'])}",
        f"Report:      {shown(summary['report_digest'])} (report.json)",
        f"Archive:     {summary['archive_size']} bytes, {shown(summary['archive_sha256'])}",
        f"Contents:    {counts['checks']} checks, {counts['run_files']} run files, "
        f"{counts['definition_files']} definition files",
        f"Unavailable: {counts['unavailable']}",
    ]
    lines += [f"  {shown(r)}: {n}" for r, n in summary["unavailable_by_reason"].items()]
    return "\n".join(lines) + "\n"
