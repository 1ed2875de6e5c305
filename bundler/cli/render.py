"""render: the auditor's page of a saved result (SPEC section 14), and the --html option
verify and audit share."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from bundler.cli.app import cli
from bundler.cli.common import F, _emit_json, _quiet_option, _say
from bundler.core.errors import InputError, OutputError
from bundler.core.textsafe import shown

# A saved record is at most what verify writes for a 20,000-case bundle, many times over.
MAX_RECORD_BYTES = 512 * 1024 * 1024
_RECORD_SCHEMAS = {"verification": "verification", "audit": "audit", "fixity": "fixity-summary"}

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
            type=click.Path(path_type=Path, dir_okay=False),
            help=help_text,
        )(command)

    return add


def refuse_existing(path: Path | None) -> None:
    """Before any work: an existing --html FILE (or link) is refused, never overwritten."""
    if path is not None and (path.exists() or path.is_symlink()):
        raise OutputError(f"{path}: already exists; refusing to overwrite (--html)")


def write_page(path: Path, record: dict[str, Any]) -> str:
    """Render ``record`` and write it to ``path``; returns the record's kind."""
    from bundler.core.outputs import write_new_file
    from bundler.report.page import render_record

    kind, page = render_record(record)
    write_new_file(path, page)
    return kind


def _load_record(path: Path) -> dict[str, Any]:
    from bundler.core import canonical
    from bundler.core.schemas import validate
    from bundler.report.page import KINDS, record_kind

    try:
        size = path.stat().st_size
        if size > MAX_RECORD_BYTES:
            raise InputError(f"{path}: {size} bytes, over the {MAX_RECORD_BYTES}-byte cap")
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    value = canonical.loads(data, source=str(path))
    kind = record_kind(value) if isinstance(value, dict) else None
    if kind is None:
        raise InputError(
            f"{path}: not a verification, audit or fixity summary record "
            f"(its schema field must be one of {', '.join(KINDS)})"
        )
    validate(_RECORD_SCHEMAS[kind], value, source=str(path))
    assert isinstance(value, dict)
    return value


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
@click.argument("result", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--html",
    "html",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="The page to write (must not exist; never overwritten).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='One JSON object on stdout: {"schema", "out", "kind"}.',
)
@_quiet_option
def render(result: Path, html: Path, as_json: bool, quiet: bool) -> None:
    refuse_existing(html)
    record = _load_record(result)
    kind = write_page(html, record)
    if as_json:
        _emit_json({"schema": "evalbook.rendered.v1", "out": str(html), "kind": kind})
        if not quiet:
            _say(f"Wrote:       {shown(str(html))} ({kind} page)\n")
    else:
        sys.stdout.write(f"Wrote:       {shown(str(html))} ({kind} page)\n")
        sys.stdout.flush()
