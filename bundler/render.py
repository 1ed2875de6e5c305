"""Human-readable renderings of results (console text and Markdown); no Click here."""

from __future__ import annotations

from typing import Any

from bundler.verify import Claim, State, Verification


def _claim_line(c: Claim) -> str:
    bits = [f"[{c.group}] {c.subject}: {c.detail or c.state.value}"]
    if c.path:
        bits.append(f"path {c.path}")
    if c.expected is not None:
        bits.append(f"expected {c.expected}")
    if c.observed is not None:
        bits.append(f"observed {c.observed}")
    return "; ".join(bits)


def verification_text(v: Verification, *, max_failures: int = 50) -> str:
    """The console summary of SPEC section 5 (labels Bundle, Report, Anchor, Verdict...)."""
    lines = [f"Bundle:      {v.source}"]
    if v.verdict.value == "error":
        lines += ["Verdict:     ERROR (no verdict possible)", f"Error:       {v.error}"]
        return "\n".join(lines) + "\n"
    lines.append(f"Digest:      {v.bundle_digest or '(run directory in place: no bundle)'}")
    lines.append(f"Report:      {v.report_id}  {v.report_digest}")
    for key, value in v.summary.get("labels", []):
        lines.append(f"{key + ':':<12} {value}")
    lines.append(f"Anchor:      {v.anchor.describe()}")
    lines.append(f"Verdict:     {v.verdict.value.upper()}" + ("  (--strict)" if v.strict else ""))
    counts = v.counts()
    lines.append(f"Proven:      {counts['proven']}")
    lines.append(f"Unprovable:  {counts['unprovable']}")
    for reason, n in v.unprovable_by_reason().items():
        lines.append(f"  {reason}: {n}")
    lines.append(f"Failed:      {counts['failed']}")
    failures = v.failures()
    for c in failures[:max_failures]:
        lines.append("  - " + _claim_line(c))
    if len(failures) > max_failures:
        lines.append(f"  ... and {len(failures) - max_failures} more (see --json)")
    return "\n".join(lines) + "\n"


def verification_markdown(v: Verification) -> str:
    out = [f"# Verification of `{v.source}`", ""]
    out.append(f"- **Verdict:** {v.verdict.value}" + (" (strict)" if v.strict else ""))
    if v.error:
        out.append(f"- **Error:** {v.error}")
        return "\n".join(out) + "\n"
    out += [
        f"- **Bundle digest:** `{v.bundle_digest}`",
        f"- **Report:** `{v.report_id}` `{v.report_digest}`",
        f"- **Anchor:** {v.anchor.describe()}",
    ]
    for key, value in v.summary.get("labels", []):
        out.append(f"- **{key}:** {value}")
    counts = v.counts()
    out += ["", "| state | claims |", "|---|---|"]
    out += [f"| {k} | {n} |" for k, n in counts.items()]
    if v.unprovable_by_reason():
        out += ["", "## Unprovable, by reason", "", "| reason | claims |", "|---|---|"]
        out += [f"| {r} | {n} |" for r, n in v.unprovable_by_reason().items()]
    failures = v.failures()
    if failures:
        out += ["", "## Failed claims", ""]
        out += [f"- {_claim_line(c)}" for c in failures]
    out += [
        "",
        "## All claims",
        "",
        "| group | subject | state | reason / detail |",
        "|---|---|---|---|",
    ]
    for c in v.claims:
        note = c.reason if c.state is State.UNPROVABLE else (c.detail or "")
        out.append(f"| {c.group} | {c.subject} | {c.state.value} | {note} |")
    return "\n".join(out) + "\n"


def export_text(summary: dict[str, Any]) -> str:
    counts = summary["counts"]
    lines = [
        f"Exported:    {summary['report_id']} -> {summary['path']}",
        f"Bundle:      {summary['bundle_digest']}",
        f"Report:      {summary['report_digest']}",
        f"Archive:     {summary['archive_size']} bytes, {summary['archive_sha256']}",
        f"Contents:    {counts['checks']} checks, {counts['cases_exported']}/{counts['cases_total']} cases, "
        f"{counts['scorers']} scorers, {counts['datasets']} datasets, {counts['examples']} examples, "
        f"{counts['payloads']} payloads",
        f"Unavailable: {counts['unavailable']}",
    ]
    lines += [f"  {r}: {n}" for r, n in summary["unavailable_by_reason"].items()]
    lines.append(f"Redacted:    {counts['redacted']}")
    lines += [f"  {r}: {n}" for r, n in summary["redacted_by_reason"].items()]
    return "\n".join(lines) + "\n"


def inspect_text(info: dict[str, Any]) -> str:
    lines = [
        f"Bundle:      {info['source']}",
        f"Schema:      {info['schema']}",
        f"Digest:      {info['bundle_digest']}",
        f"Exported at: {info['exported_at']} by " + (info["principal"] or info["exporter"]),
    ]
    for key, value in info.get("labels", []):
        lines.append(f"{key + ':':<12} {value}")
    lines.append(f"Files:       {info['files']} ({info['bytes']} bytes)")
    lines.append(f"Unavailable: {sum(info['unavailable_by_reason'].values())}")
    lines += [f"  {r}: {n}" for r, n in info["unavailable_by_reason"].items()]
    lines.append(f"Redacted:    {sum(info['redacted_by_reason'].values())}")
    lines += [f"  {r}: {n}" for r, n in info["redacted_by_reason"].items()]
    lines.append("(inspect reads safely but proves nothing; run verify for the proof)")
    return "\n".join(lines) + "\n"
