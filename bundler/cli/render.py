"""render: the auditor's page of a saved result (SPEC section 14), and the --html option
verify and audit share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from bundler.cli.app import cli
from bundler.cli.common import F, _emit_json, _LocalPath, _note, _quiet_option
from bundler.core.textsafe import shown

RENDER_HELP = """Write the auditor's page of a saved result: one self-contained HTML file.

RESULT.json is a verification record (verify --json, or verification.json of
--output-dir), an audit record (audit --json, audit.json) or a fixity --json summary;
its "schema" field says which. The page makes no network request, holds no script, shows
every text from the bundle escaped, and prints whole. The same RESULT gives the same
bytes, equal to what verify --html or audit --html wrote for it. FILE must not exist: it
is never overwritten (exit 3).
"""


def _html_option(help_text: str) -> Callable[[F], F]:
    """``--html FILE`` of verify and audit: the page of the result, written once."""

    def add(command: F) -> F:
        return click.option(
            "--html",
            "html",
            type=click.Path(path_type=str),  # a str keeps the trailing / of a directory
            help=help_text,
        )(command)

    return add


@cli.command(
    help=RENDER_HELP,
    examples=[
        "evalbook-bundle render out/verification.json --html verification.html",
        "evalbook-bundle verify bundle.tar.zst --json > v.json; "
        "evalbook-bundle render v.json --html v.html",
        "evalbook-bundle audit bundle.tar.zst --json > a.json; "
        "evalbook-bundle render a.json --html audit.html",
        "evalbook-bundle fixity s3://archive/eval --json > f.json; "
        "evalbook-bundle render f.json --html fixity.html --json",
    ],
)
# Any local path: what is not a readable regular file is refused by the record reader,
# exit 3, like every other bad RESULT (a directory included); a URL is a usage error.
@click.argument("result", type=_LocalPath())
@click.option(
    "--html",
    "html",
    required=True,
    type=click.Path(path_type=str),  # a str keeps the trailing / of a directory
    help="The page to write (must not exist; never overwritten), or a directory that "
    "receives <report_id>.<kind>.html.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='One JSON object on stdout: {"schema", "out", "kind"}.',
)
@_quiet_option
def render(result: Path, html: str, as_json: bool, quiet: bool) -> None:
    from bundler.api.pages import render as render_page

    written = render_page(result, html=html)
    if as_json:
        _emit_json(written.to_json())
    # Where the page went is a note, as verify --html and audit --html give it: on
    # stderr, never with --quiet or --json (``_note`` decides).
    _note(f"Wrote:       {shown(str(written.out))} ({written.kind} page)\n")
