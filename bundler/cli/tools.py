"""digest and canonicalize: recompute digests by hand."""

from __future__ import annotations

import sys

import click

from bundler import canonical
from bundler.cli.app import cli
from bundler.cli.common import EPILOG_EXIT, _read_input, _source_name
from bundler.digests import bytes_digest, framed_digest, json_digest
from bundler.errors import (
    UsageError,
)


@cli.command(epilog=EPILOG_EXIT)
@click.argument("file", required=False)
@click.option("--json", "mode", flag_value="json", help="JSON digest: sha256 of the RFC 8785 form.")
@click.option(
    "--raw", "mode", flag_value="raw", default=True, help="Digest of the bytes (default)."
)
@click.option(
    "--framed",
    "framed_tag",
    metavar="TAG",
    help="Framed digest v1 with TAG over NAME=FILE components.",
)
@click.argument("components", nargs=-1)
@click.option("--as-json", "as_json", is_flag=True, hidden=True)
def digest(
    file: str | None, mode: str, framed_tag: str | None, components: tuple[str, ...], as_json: bool
) -> None:
    """Print a digest (sha256:...) of FILE or - (stdin).

    \b
    digest FILE|-            sha256 of the bytes
    digest --json FILE|-     JSON digest (rejects what RFC 8785 rejects)
    digest --framed TAG NAME=FILE [NAME=FILE ...]   framed digest v1, in the order given
    """
    if framed_tag is not None:
        parts = ([file] if file else []) + list(components)
        if not parts:
            raise UsageError("--framed needs NAME=FILE components")
        pairs = []
        for part in parts:
            name, sep, path = part.partition("=")
            if not sep or not name:
                raise UsageError(f"{part!r}: components are NAME=FILE")
            pairs.append((name, _read_input(path)))
        try:
            framed_tag.encode("ascii")
        except UnicodeEncodeError as exc:
            raise UsageError("the framed digest TAG is ASCII") from exc
        click.echo(framed_digest(framed_tag, pairs))
        return
    if file is None or components:
        raise UsageError("give exactly one FILE (or - for stdin)")
    data = _read_input(file)
    if mode == "json":
        click.echo(json_digest(canonical.loads(data, source=_source_name(file))))
    else:
        click.echo(bytes_digest(data))


@cli.command(epilog=EPILOG_EXIT)
@click.argument("file")
def canonicalize(file: str) -> None:
    """Write the RFC 8785 (JCS) bytes of the JSON in FILE (or -) to stdout, nothing else."""
    data = _read_input(file)
    out = canonical.dumps(canonical.loads(data, source=_source_name(file)))
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
