"""digest and canonicalize: recompute digests by hand."""

from __future__ import annotations

import hashlib
import sys
from typing import Any

import click

from bundler.archive.bag_reader import MAX_DOCUMENT_BYTES
from bundler.cli.app import cli
from bundler.cli.common import F, _emit_json, _input_chunks, _read_input, _say, _source_name
from bundler.core import canonical
from bundler.core.digests import PREFIX, FramedHasher, bytes_digest, json_digest
from bundler.core.errors import InputError, UsageError
from bundler.core.sizes import regular_size
from bundler.core.textsafe import shown


def _quiet_option(command: F) -> F:
    return click.option("-q", "--quiet", is_flag=True, help="Nothing on stderr but errors.")(
        command
    )


@cli.command(
    examples=[
        "evalbook-bundle digest archive.tar.zst",
        "evalbook-bundle digest --canonical body.json envelope.json",
        "cat body.json | evalbook-bundle digest --canonical -",
        "evalbook-bundle digest --json *.json | jq -r .digest",
        "evalbook-bundle digest --framed evalbook/scorer-version-sha256/v1 scorer.json=scorer.json files/x.py=x.py",
    ]
)
@click.argument("files", nargs=-1)
@click.option(
    "--canonical",
    "mode",
    flag_value="canonical",
    help="JSON digest: sha256 of the RFC 8785 (JCS) form; rejects what JCS rejects.",
)
@click.option(
    "--raw", "mode", flag_value="raw", default=True, help="sha256 of the bytes (the default)."
)
@click.option(
    "--framed",
    "framed_tag",
    metavar="TAG",
    help="Framed digest v1 with TAG over the NAME=FILE components given, in that order.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object per digest on stdout (JSON Lines)."
)
@_quiet_option
def digest(
    files: tuple[str, ...], mode: str, framed_tag: str | None, as_json: bool, quiet: bool
) -> None:
    """Print the digest (sha256:...) of each FILE, or of - (stdin).

    One FILE prints its digest alone; several print "DIGEST  FILE" lines. A FILE that
    cannot be read (or, with --canonical, is not JSON) is reported and the rest are still
    digested; the exit code is then 3.
    """
    if framed_tag is not None:
        if mode == "canonical":
            raise UsageError("--framed and --canonical: choose one")
        _framed(framed_tag, files, as_json)
        return
    if not files:
        raise UsageError("give a FILE (or - for stdin)")
    if files.count("-") > 1:
        raise UsageError("- (stdin) can be given once")
    failed = 0
    for file in files:
        try:
            if mode == "canonical":
                value = json_digest(_json_document(file))
            else:
                # Streamed: a file of any size is digested in a megabyte of memory.
                hasher = hashlib.sha256()
                for chunk in _input_chunks(file):
                    hasher.update(chunk)
                value = PREFIX + hasher.hexdigest()
        except InputError as exc:
            if len(files) == 1:
                raise
            failed += 1
            _say(f"evalbook-bundle: error: {shown(exc.message)}\n")
            if as_json:
                _emit_json(_error_line("digest", exc, file))
            continue
        if as_json:
            _emit_json(
                {
                    "schema": "evalbook.digest.v1",
                    "source": _source_name(file),
                    "kind": mode,
                    "digest": value,
                }
            )
        elif len(files) == 1:
            click.echo(value)
        else:
            click.echo(f"{value}  {shown(_source_name(file))}")
    if failed:
        sys.exit(3)


def _regular_size(path: str) -> int | None:
    """The size of the regular file at ``path`` (None: ``-``, another kind of file, or
    one that cannot be looked at, whose read then says why)."""
    return None if path == "-" else regular_size(path)


def _json_document(file: str) -> Any:
    """The JSON of FILE (or -), parsed strictly, at most as large as a document the bundle
    reader takes (32 MiB) and with as many values: what memory allows (SPEC 5)."""
    data = _read_input(file, limit=MAX_DOCUMENT_BYTES, what="a JSON document")
    return canonical.loads(data, source=_source_name(file), max_values=canonical.MAX_VALUES)


def _error_line(command: str, exc: InputError, file: str) -> dict[str, Any]:
    """One input's failure among several, in the shape ``main`` gives a failed command."""
    return {
        "schema": "evalbook.error.v1",
        "command": command,
        "error": exc.message,
        "exit_code": exc.exit_code,
        "input": _source_name(file),
    }


def _framed(tag: str, parts: tuple[str, ...], as_json: bool) -> None:
    if not parts:
        raise UsageError("--framed needs NAME=FILE components")
    try:
        tag.encode("ascii")
    except UnicodeEncodeError as exc:
        raise UsageError("--framed: the TAG is ASCII") from exc
    pairs = []
    for part in parts:
        name, sep, path = part.partition("=")
        if not sep or not name:
            raise UsageError(f"{part!r}: --framed components are NAME=FILE")
        pairs.append((name, path))
    hasher = FramedHasher(tag)
    for name, path in pairs:
        # A regular file streams, sized by its metadata; standard input, a pipe or a
        # device has no size to frame it by, so it is read whole, to the cap.
        size = _regular_size(path)
        if size is None:
            hasher.add(name, _read_input(path, limit=MAX_DOCUMENT_BYTES, what="a component"))
            continue
        hasher.begin(name, size)
        read = 0
        try:
            for chunk in _input_chunks(path):
                hasher.update(chunk)
                read += len(chunk)
        except ValueError:
            read = -1  # longer than its size a moment ago
        if read != size:
            raise InputError(f"{path}: changed while it was read; nothing digested")
    value = hasher.digest()
    if as_json:
        _emit_json(
            {
                "schema": "evalbook.digest.v1",
                "source": None,
                "kind": "framed",
                "tag": tag,
                "components": [name for name, _ in pairs],
                "digest": value,
            }
        )
    else:
        click.echo(value)


@cli.command(
    examples=[
        "evalbook-bundle canonicalize body.json | sha256sum",
        "evalbook-bundle canonicalize - < body.json > body.jcs",
        "evalbook-bundle canonicalize --json body.json | jq -r .digest",
    ]
)
@click.argument("file")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='One JSON object on stdout: the JCS text as a string ("canonical") and its digest.',
)
@_quiet_option
def canonicalize(file: str, as_json: bool, quiet: bool) -> None:
    """Write the RFC 8785 (JCS) bytes of the JSON in FILE (or -) to stdout, nothing else.

    sha256 of these bytes is the JSON digest `digest --canonical` prints.
    """
    out = canonical.dumps(_json_document(file))
    if as_json:
        _emit_json(
            {
                "schema": "evalbook.canonical.v1",
                "source": _source_name(file),
                "canonical": out.decode("utf-8"),
                "digest": bytes_digest(out),
            }
        )
        return
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
