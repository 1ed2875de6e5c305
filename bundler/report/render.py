"""Human-readable renderings of results (console text and Markdown); no Click here.

Every value interpolated below may come from a bundle, a store, a run or a proof, so each
passes ``textsafe.shown`` (console) or ``textsafe.shown_md`` (Markdown) on its way in;
only the labels written here are literal. Untrusted values never go inside a Markdown
code span, where backslash escapes do not apply.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from bundler.core.claims import GROUPS, Claim, State, Verification
from bundler.core.signatures import SignatureCheck
from bundler.core.textsafe import shown, shown_clipped, shown_md
from bundler.core.version import TOOL_NAME, __version__
from bundler.evalbook.listing import explain_reason

Escape = Callable[[Any], str]


def _claim_line(c: Claim, esc: Escape = shown) -> str:
    bits = [f"[{c.group} {GROUPS[c.group]}] {esc(c.subject)}: {esc(c.detail or c.state.value)}"]
    if c.path:
        bits.append(f"path {esc(c.path)}")
    if c.expected is not None:
        bits.append(f"expected {esc(c.expected)}")
    if c.observed is not None:
        bits.append(f"observed {esc(c.observed)}")
    return "; ".join(bits)


def _label(key: Any) -> str:
    return f"{shown(key) + ':':<12}"


def _n(count: int, unit: str) -> str:
    """``57 claims``, ``1 claim``: every count says what it counts."""
    return f"{count} {unit if count == 1 else unit + 's'}"


def _reason_line(reason: str, count: int, unit: str, esc: Escape = shown) -> str:
    """One reason, its count and what it means (the words are ``listing``'s table)."""
    return f"{esc(reason)}: {_n(count, unit)} - {esc(explain_reason(reason))}"


def _archive_fact(v: Verification) -> str | None:
    if v.archive is None:
        return None
    return f"{v.archive.size} bytes, SHA-256 {v.archive.sha256}  (sha256sum of the file)"


def _result_fact(v: Verification, esc: Escape) -> str | None:
    """The report's own result: what the report says, which verify does not vouch for."""
    if v.report_result is None or _is_eb(v):
        return None
    if v.report_result == "pass":
        return f"{esc(v.report_result)}  (the report's own result, as issued)"
    return (
        f"{esc(v.report_result)}  (the report's own result, as issued; VERIFIED means the "
        "bundle holds exactly what the report refers to, not that the evaluation passed)"
    )


def _envelope_fact(v: Verification, esc: Escape) -> str | None:
    env = v.envelope
    if env is None:
        return None
    if env.status != "superseded":
        return f"{esc(env.status)}  (not superseded when exported)"
    return (
        f"superseded by {esc(env.superseded_by)} at {esc(env.superseded_at)}, "
        f"reason {esc(env.reason)}  (the report no longer gates; the bundle still proves "
        "what it was)"
    )


def _is_eb(v: Verification) -> bool:
    """An eval-banana result: its own pass/fail is told as the run's gate instead."""
    return v.summary.get("mode") is not None


def _run_result_fact(v: Verification) -> str | None:
    """eval-banana: the run's own pass/fail gate, told apart from the bundle's integrity."""
    recomputed = v.summary.get("recomputed")
    if not isinstance(recomputed, dict):
        return None
    what = "the run directory is" if v.kind is None else "the bundle holds"
    if recomputed.get("run_passed"):
        return "the run passed its own gate (passed: yes)"
    return (
        "the run did not pass its own gate (passed: no); VERIFIED below means "
        f"{what} exactly what the run wrote, not that the run passed"
    )


def _strict_facts(v: Verification) -> tuple[str | None, dict[str, int]]:
    """The --strict line and, when --strict was applied, the reasons it failed claims for."""
    if v.strict:
        by_reason = v.strict_failed_by_reason()
        n = sum(by_reason.values())
        if not n:
            return "applied (--strict): no unprovable claims to fail", {}
        return f"applied (--strict): {_n(n, 'unprovable claim')} counted as failed", by_reason
    return v.strict_forecast(), {}


def _checked_fact(v: Verification) -> str:
    return f"{v.verified_at} by {TOOL_NAME} {__version__}"


def signatures_lines(checks: Sequence[SignatureCheck]) -> list[str]:
    """Every signature checked and its state, as raw lines (the caller escapes them):
    ``Signatures:  2 (1 verified, 1 valid)`` then ``  - WHERE (embedded): STATE``."""
    if not checks:
        return []
    tally = Counter(c.state.value for c in checks)
    counts = ", ".join(f"{n} {state.replace('_', ' ')}" for state, n in sorted(tally.items()))
    lines = [f"Signatures:  {len(checks)} ({counts})"]
    for c in checks:
        where = f"{c.where} (embedded)" if c.embedded else f"{c.where} (sidecar)"
        lines.append(f"  - {where}: {c.describe()}")
    return lines


def verification_text(v: Verification, *, max_failures: int = 50) -> str:
    """The console summary of SPEC section 5 (labels Bundle, Report, Anchor, Verdict...)."""
    lines = [f"Bundle:      {shown(v.source)}"]
    archive = _archive_fact(v)
    if archive is not None:
        lines.append(f"Archive:     {archive}")
    if v.verdict.value == "error":
        lines += ["Verdict:     ERROR (no verdict possible)", f"Error:       {shown_clipped(v.error)}"]
        lines.append(f"Checked at:  {_checked_fact(v)}")
        return "\n".join(lines) + "\n"
    if v.bundle_digest is None:
        lines.append("Digest:      (run directory in place: no bundle)")
    else:
        lines.append(
            f"Digest:      {shown(v.bundle_digest)}  (bundle digest: JSON digest of data/bundle.json)"
        )
    lines.append(f"Report:      {shown(v.report_id)}  {shown(v.report_digest)}")
    result = _result_fact(v, shown)
    if result is not None:
        lines.append(f"Result:      {result}")
    envelope = _envelope_fact(v, shown)
    if envelope is not None:
        lines.append(f"Envelope:    {envelope}")
    for key, value in v.summary.get("labels", []):
        lines.append(f"{_label(key)} {shown(value)}")
    run_result = _run_result_fact(v)
    if run_result is not None:
        lines.append(f"Run result:  {run_result}")
    lines.append(f"Anchor:      {shown(v.anchor.describe())}")
    lines += [shown(line) for line in signatures_lines(v.signatures)]
    lines.append(f"Verdict:     {v.verdict.value.upper()}" + ("  (--strict)" if v.strict else ""))
    strict_line, strict_reasons = _strict_facts(v)
    if strict_line is not None:
        lines.append(("Strict:      " if v.strict else "With --strict: ") + strict_line)
    counts = v.counts()
    lines.append(f"Proven:      {_n(counts['proven'], 'claim')}")
    lines.append(f"Unprovable:  {_n(counts['unprovable'], 'claim')}")
    for reason, n in v.unprovable_by_reason().items():
        lines.append("  " + _reason_line(reason, n, "claim"))
    lines.append(f"Failed:      {_n(counts['failed'], 'claim')}")
    for reason, n in strict_reasons.items():
        lines.append("  --strict, " + _reason_line(reason, n, "claim"))
    failures = v.failures()
    for c in failures[:max_failures]:
        lines.append("  - " + _claim_line(c, shown_clipped))
    if len(failures) > max_failures:
        lines.append(f"  ... and {len(failures) - max_failures} more (see --json)")
    lines.append(f"Checked at:  {_checked_fact(v)}")
    return "\n".join(lines) + "\n"


def verification_markdown(v: Verification) -> str:
    """verification.md: the same facts as ``verification_text``, and every claim."""
    return "".join(verification_markdown_chunks(v))


_LINES_PER_PIECE = 1000  # claim lines a piece of verification.md


def verification_markdown_chunks(v: Verification) -> Iterator[str]:
    """``verification_markdown`` in pieces, the claims a thousand lines at a time: a
    hostile bundle's 130,000 failed claims make about 100 MB of it, never held whole."""
    out = [f"# Verification of {shown_md(v.source)}", ""]
    out.append(f"- **Verdict:** {v.verdict.value}" + (" (strict)" if v.strict else ""))
    archive = _archive_fact(v)
    if archive is not None:
        out.append(f"- **Archive:** {archive}")
    out.append(f"- **Checked at:** {_checked_fact(v)}")
    if v.error:
        out.append(f"- **Error:** {shown_md(v.error)}")
        yield "\n".join(out) + "\n"
        return
    strict_line, strict_reasons = _strict_facts(v)
    if strict_line is not None:
        out.append(("- **Strict:** " if v.strict else "- **With --strict:** ") + strict_line)
    if v.bundle_digest is None:
        out.append("- **Bundle digest:** none (run directory in place: no bundle)")
    else:
        out.append(
            f"- **Bundle digest:** {shown_md(v.bundle_digest)} (JSON digest of data/bundle.json)"
        )
    out.append(f"- **Report:** {shown_md(v.report_id)} {shown_md(v.report_digest)}")
    result = _result_fact(v, shown_md)
    if result is not None:
        out.append(f"- **Result:** {result}")
    envelope = _envelope_fact(v, shown_md)
    if envelope is not None:
        out.append(f"- **Envelope:** {envelope}")
    out.append(f"- **Anchor:** {shown_md(v.anchor.describe())}")
    for line in signatures_lines(v.signatures):
        if line.startswith("Signatures:"):
            out.append(f"- **Signatures:** {shown_md(line.partition(':')[2].strip())}")
        else:
            out.append(f"  - {shown_md(line.strip().removeprefix('- '))}")
    for key, value in v.summary.get("labels", []):
        out.append(f"- **{shown_md(key)}:** {shown_md(value)}")
    run_result = _run_result_fact(v)
    if run_result is not None:
        out.append(f"- **Run result:** {run_result}")
    counts = v.counts()
    out += ["", "| state | claims |", "|---|---|"]
    out += [f"| {k} | {n} |" for k, n in counts.items()]
    for title, by_reason in (
        ("Unprovable, by reason", v.unprovable_by_reason()),
        ("Failed under --strict, by reason", strict_reasons),
    ):
        if by_reason:
            out += ["", f"## {title}", "", "| reason | claims | meaning |", "|---|---|---|"]
            out += [
                f"| {shown_md(r)} | {n} | {shown_md(explain_reason(r))} |"
                for r, n in by_reason.items()
            ]
    failures = v.failures()
    if failures:
        out += ["", "## Failed claims", ""]
    yield "\n".join(out) + "\n"
    for start in range(0, len(failures), _LINES_PER_PIECE):
        lines = [
            f"- {_claim_line(c, shown_md)}" for c in failures[start : start + _LINES_PER_PIECE]
        ]
        yield "\n".join(lines) + "\n"
    yield "\n## All claims\n\n| group | subject | state | reason / detail |\n|---|---|---|---|\n"
    claims = v.claims
    for start in range(0, len(claims), _LINES_PER_PIECE):
        lines = []
        for c in claims[start : start + _LINES_PER_PIECE]:
            note = c.reason if c.state is State.UNPROVABLE else (c.detail or "")
            lines.append(
                f"| {c.group} {GROUPS[c.group]} | {shown_md(c.subject)} | {c.state.value} "
                f"| {shown_md(note)} |"
            )
        yield "\n".join(lines) + "\n"


def export_result_text(summary: dict[str, Any]) -> str:
    """What export and export-eb print first on stdout: the archive and its two numbers.

    The bundle digest (what ``verify --expect-bundle-digest`` takes) is not the file's
    SHA-256 (what ``sha256sum`` prints); both are named, so neither passes for the other.
    """
    hex_sha = str(summary["archive_sha256"]).removeprefix("sha256:")
    return (
        f"Archive:         {shown(summary['path'])}\n"
        f"Bundle digest:   {shown(summary['bundle_digest'])}"
        "   (JSON digest of data/bundle.json; verify --expect-bundle-digest)\n"
        f"Archive SHA-256: {shown(hex_sha)}   (sha256sum of the file)\n"
    )


def _listed_lines(by_reason: dict[str, int]) -> list[str]:
    return ["  " + _reason_line(r, n, "item") for r, n in by_reason.items()]


def export_text(summary: dict[str, Any]) -> str:
    """The export summary: what went into the bundle and what is listed, with why."""
    counts = summary["counts"]
    lines = [
        f"Exported:    {shown(summary['report_id'])} -> {shown(summary['path'])}",
        f"Report:      {shown(summary['report_digest'])}",
        f"Size:        {summary['archive_size']} bytes",
        f"Contents:    {_n(counts['checks'], 'check')}, "
        f"{counts['cases_exported']}/{_n(counts['cases_total'], 'case')}, "
        f"{_n(counts['scorers'], 'scorer')}, {_n(counts['datasets'], 'dataset')}, "
        f"{_n(counts['examples'], 'example')}, {_n(counts['payloads'], 'payload')}",
        f"Unavailable: {_n(counts['unavailable'], 'item')}",
    ]
    lines += _listed_lines(summary["unavailable_by_reason"])
    lines.append(f"Redacted:    {_n(counts['redacted'], 'item')}")
    lines += _listed_lines(summary["redacted_by_reason"])
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
    beside = info.get("signatures", [])
    if info.get("embedded_signature") or beside:
        where = (["bundle-head.json.sig inside"] if info.get("embedded_signature") else []) + (
            [f"{_n(len(beside), 'signature')} beside it"] if beside else []
        )
        lines.append(
            f"Signed:      yes: {', '.join(where)} (not checked; verify --allowed-signers checks)"
        )
    else:
        lines.append("Signed:      no (no signature inside the bundle or beside it)")
    lines += [f"  {shown(key)}" for key in beside]
    lines.append("(inspect reads safely but proves nothing; run verify for the proof)")
    return "\n".join(lines) + "\n"


def export_eb_text(summary: dict[str, Any]) -> str:
    """The summary of an eval-banana export; the run id comes from the run."""
    counts = summary["counts"]
    lines = [
        f"Exported:    run {shown(summary['run_id'])} -> {shown(summary['path'])}",
        f"Report:      {shown(summary['report_digest'])} (report.json)",
        f"Size:        {summary['archive_size']} bytes",
        f"Contents:    {_n(counts['checks'], 'check')}, {_n(counts['run_files'], 'run file')}, "
        f"{_n(counts['definition_files'], 'definition file')}",
    ]
    if not summary.get("run_passed", True):
        lines.append(
            "Run result:  the run did not pass its own gate (passed: no); the bundle holds "
            "exactly what the run wrote"
        )
    lines.append(f"Unavailable: {_n(counts['unavailable'], 'item')}")
    lines += _listed_lines(summary["unavailable_by_reason"])
    return "\n".join(lines) + "\n"
