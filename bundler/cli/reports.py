"""reports: the reports a store holds (SPEC 7)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from bundler.cli.app import cli
from bundler.cli.common import _emit_json, _endpoint_option, _note, _quiet_option
from bundler.core.errors import InputError
from bundler.core.textsafe import shown

if TYPE_CHECKING:
    from bundler.evalbook.store import ReportEntry

HEADER = ("REPORT", "RESULT", "ISSUED AT", "ENVELOPE")


@cli.command(
    examples=[
        "evalbook-bundle reports --store fixtures/stores/main",
        "evalbook-bundle reports --store s3://evalbook/store --json",
        "evalbook-bundle reports --store STORE --json | jq -r .report_id",
    ]
)
@click.option(
    "--store",
    "store_root",
    required=True,
    metavar="ROOT",
    help="Store root: a directory or s3://bucket/prefix.",
)
@_endpoint_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="JSON Lines on stdout, one report per line (schema evalbook.reports_line.v1).",
)
@_quiet_option
def reports(store_root: str, endpoint_url: str | None, as_json: bool, quiet: bool) -> None:
    """List the reports a store holds: id, result, issued_at and envelope status.

    One line per directory under reports/, sorted by report id (bytewise): the report
    body's result and issued_at (SPEC 3.1), and its envelope's status, current or
    superseded by which report (SPEC 3.2). The human form ends with a count line. A
    report whose body or envelope is missing, unreadable or invalid still gets its
    line, naming the problem; the others are listed on, and the command then exits 3.
    A store root that does not exist exits 3; object storage errors exit 5.
    """
    from bundler.api.bundles import reports as list_reports

    listing = list_reports(store_root, endpoint_url=endpoint_url)
    entries = listing.entries
    bad = listing.problems
    if as_json:
        for line in listing.to_json():
            _emit_json(line)
        _note(_count(len(entries), bad) + "\n")
    else:
        rows = [_row(e) for e in entries]
        widths = [max(len(r[i]) for r in [HEADER, *rows]) for i in range(len(HEADER))]
        lines = [_aligned(HEADER, widths, "PROBLEM" if bad else "")]
        for entry, row in zip(entries, rows, strict=True):
            lines.append(_aligned(row, widths, "; ".join(shown(p) for p in entry.problems)))
        lines.append(_count(len(entries), bad))
        click.echo("\n".join(lines))
    if bad:
        raise InputError(
            f"{store_root}: {bad} of {len(entries)} report(s) could not be read "
            "(each is named in the listing)"
        )


def _row(entry: ReportEntry) -> tuple[str, str, str, str]:
    """The four columns of one report, untrusted text escaped."""
    if entry.status is None:
        envelope = "-"
    elif entry.superseded_by is not None:
        envelope = f"{shown(entry.status)} by {shown(entry.superseded_by)}"
    else:
        envelope = shown(entry.status)
    return (
        shown(entry.report_id),
        shown(entry.result) if entry.result is not None else "-",
        shown(entry.issued_at) if entry.issued_at is not None else "-",
        envelope,
    )


def _aligned(cells: tuple[str, ...], widths: list[int], last: str) -> str:
    text = "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True))
    return (text + "  " + last if last else text).rstrip()


def _count(total: int, bad: int) -> str:
    text = f"{total} report" if total == 1 else f"{total} reports"
    return f"{text} ({bad} unreadable)" if bad else text
