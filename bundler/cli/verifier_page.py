"""verifier-page: write the offline verifier page (SPEC section 15).

The page is the JavaScript verifier of ``js/`` built into one self-contained HTML file
(``make js``); the package carries the built file as data and writes it unchanged, so
the page an auditor opens is byte for byte the committed ``js/dist/verify-bundle.html``.
"""

from __future__ import annotations

import hashlib
import sys
from importlib.resources import files

import click

from bundler.cli.app import cli
from bundler.cli.common import _emit_json, _out_in_directory, _quiet_option
from bundler.core.errors import OutputError
from bundler.core.outputs import write_new_file
from bundler.core.textsafe import shown

PAGE_NAME = "verify-bundle.html"


def page_bytes() -> bytes:
    """The built page, as the package carries it."""
    return files("bundler.report").joinpath("templates", PAGE_NAME).read_bytes()


@cli.command(
    "verifier-page",
    help="Write the offline verifier page: one HTML file that verifies a bundle in the "
    "browser (drop a .tar.zst on it), with no request of any kind (SPEC 15).",
    examples=["evalbook-bundle verifier-page --out verify.html"],
)
@click.option("--out", "out", required=True, help="The file to write (never overwritten).")
@click.option(
    "--json", "as_json", is_flag=True, help='One JSON object: {"schema", "out", "sha256"}.'
)
@_quiet_option
def verifier_page(out: str, as_json: bool, quiet: bool) -> None:
    path = _out_in_directory(out, PAGE_NAME, "--out")
    if path.exists() or path.is_symlink():
        raise OutputError(
            f"--out: {path}: already exists; an output is never written over anything"
        )
    data = page_bytes()
    write_new_file(path, data)
    digest = hashlib.sha256(data).hexdigest()
    line = f"Wrote:       {shown(str(path))} ({len(data)} bytes, SHA-256 {digest})\n"
    if as_json:
        _emit_json({"schema": "evalbook.verifier_page.v1", "out": str(path), "sha256": digest})
    elif not quiet:
        sys.stdout.write(line)
