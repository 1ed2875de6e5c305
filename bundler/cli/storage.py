"""upload, list and download."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from bundler.cli.app import cli
from bundler.cli.common import (
    _chunk_progress,
    _emit_json,
    _endpoint_option,
    _LocalPath,
    _note,
    _parse_timestamp,
    _ProgressLine,
    _quiet_option,
    _say,
    _storage_config,
)
from bundler.core.errors import (
    UsageError,
)
from bundler.core.textsafe import shown


def _upload_text(info: dict[str, Any]) -> str:
    """The human form of an upload result (``_upload``'s dict), for stdout."""
    state = "already archived" if info["status"] == "already_archived" else "uploaded"
    lines = [
        f"Upload:      {state}: {shown(info['url'])} "
        f"({info['size']} bytes, checksum {shown(info['checksum_algorithm'])})"
    ]
    for sig in info.get("signatures", []):
        sig_state = "already stored" if sig["status"] == "already_archived" else "stored"
        lines.append(f"Signature:   {sig_state}: {shown(sig['url'])}")
    return "\n".join(lines) + "\n"


@cli.command(
    examples=[
        "evalbook-bundle upload evalbook-bundle-rpt-x.tar.zst s3://archive/eval",
        "evalbook-bundle upload bundle.tar.zst s3://archive/eval --retain-until 2033-01-01T00:00:00Z",
        "AWS_ENDPOINT_URL_S3=http://127.0.0.1:8333 evalbook-bundle upload bundle.tar.zst "
        "s3://archive/eval --json | jq -r .key",
    ]
)
@click.argument("bundle", type=_LocalPath(dir_okay=False))
@click.argument("destination")
@click.option(
    "--retain-until",
    metavar="TIME",
    help="S3 Object Lock: keep the object until this RFC 3339 time (bucket needs Object Lock).",
)
@click.option(
    "--retention-mode",
    type=click.Choice(["GOVERNANCE", "COMPLIANCE"]),
    help="Object Lock mode (with --retain-until; default GOVERNANCE).",
)
@_endpoint_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout: what was stored.")
@_quiet_option
def upload(
    bundle: Path,
    destination: str,
    retain_until: str | None,
    retention_mode: str | None,
    endpoint_url: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Verify BUNDLE, then store it under s3://bucket/prefix without ever overwriting.

    The key is <prefix>/reports/bundles/<report_id>/<bundle-digest-hex>.tar.zst; an
    identical archive already there is reported as already archived. The signatures
    beside it (BUNDLE.sig, BUNDLE.sig.<hex>) are stored beside the object. Credentials
    come from the standard AWS chain.
    """
    from bundler.api.stored import upload as upload_bundle

    if retention_mode is not None and retain_until is None:
        raise UsageError("--retention-mode needs --retain-until")
    until = _parse_timestamp(retain_until, "--retain-until") if retain_until is not None else None
    line = _ProgressLine(not quiet, "upload")
    try:
        stored = upload_bundle(
            bundle,
            destination,
            retain_until=until,
            retention_mode=retention_mode,
            endpoint_url=endpoint_url,
            on_progress=line.callback(),
        )
    finally:
        line.done()
    for skipped in stored.to_json().get("skipped_signatures", []):
        _say(f"warning: {shown(skipped['url'])}: not stored ({shown(skipped['reason'])})\n")
    if as_json:
        _emit_json(stored.to_json())
    else:
        click.echo(_upload_text(stored.to_json()), nl=False)


@cli.command(
    "list",
    examples=[
        "evalbook-bundle list s3://archive/eval",
        "evalbook-bundle list s3://archive/eval --report rpt-x",
        "evalbook-bundle list s3://archive/eval --json | jq -r 'select(.signed|not) | .key'",
    ],
)
@click.argument("prefix")
@click.option("--report", "report_id", help="Only the bundles of this report id.")
@_endpoint_option
@click.option("--json", "as_json", is_flag=True, help="JSON Lines on stdout, one bundle per line.")
@_quiet_option
def list_cmd(
    prefix: str, report_id: str | None, endpoint_url: str | None, as_json: bool, quiet: bool
) -> None:
    """List the bundles stored under s3://bucket/prefix (report id, digest, size, time,
    and how many signatures are stored beside each; they are not checked here).

    One bundle per line on stdout; the count goes to stderr.
    """
    from bundler.api.stored import list_bundles

    listing = list_bundles(prefix, report_id=report_id, endpoint_url=endpoint_url)
    if as_json:
        for item in listing.to_json():
            _emit_json(item)
    else:
        bucket = storage_bucket(prefix)
        rows: list[tuple[str, ...]] = [
            (
                shown(item["report_id"]),
                item["bundle_digest"],
                str(item["size"]),
                item["last_modified"],
                f"signed({item['signatures']})" if item["signed"] else "unsigned",
                f"s3://{bucket}/{shown(item['key'])}",
            )
            for item in listing.items
        ]
        click.echo(_table(_LIST_HEADER, rows, right=(2,)), nl=False)
    _note(f"{len(listing)} bundle{'' if len(listing) == 1 else 's'}\n")


_LIST_HEADER = ("REPORT", "BUNDLE DIGEST", "SIZE", "LAST MODIFIED", "SIGNED", "KEY")


def storage_bucket(prefix: str) -> str:
    from bundler import storage

    return storage.parse_s3_url(prefix).bucket


def _table(
    header: tuple[str, ...], rows: list[tuple[str, ...]], right: tuple[int, ...] = ()
) -> str:
    """Columns aligned to their widest cell (as ``reports`` prints them), numbers to the
    right; nothing but the header when there are no rows."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        parts = [
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    return "".join(line(r) + "\n" for r in [header, *rows])


@cli.command(
    examples=[
        "evalbook-bundle download s3://archive/eval/reports/bundles/rpt-x/HEX.tar.zst .",
        "evalbook-bundle download s3://archive/eval/reports/bundles/rpt-x/HEX.tar.zst copy.tar.zst",
        "evalbook-bundle download s3://archive/eval/reports/bundles/rpt-x/HEX.tar.zst - | "
        "zstd -dc | tar -t",
    ]
)
@click.argument("source")
@click.argument("path")
@_endpoint_option
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object on stdout: what was written where."
)
@_quiet_option
def download(source: str, path: str, endpoint_url: str | None, as_json: bool, quiet: bool) -> None:
    """Download s3://bucket/key to PATH, only if its bytes hash to its sha256 metadata.

    As with `aws s3 cp`: a PATH that is a directory (or ends in /) receives the object
    under its own name, and - writes it to stdout (the exit code then says whether the
    bytes matched). A file streams to a temporary file beside it and is renamed into
    place after the SHA-256 matches, with every signature stored beside the object
    (<key>.sig, <key>.sig.<hex>) as PATH.sig, PATH.sig.<hex>; nothing is overwritten.
    Bytes that no longer match their recorded SHA-256 were altered at rest: exit 1,
    and nothing is left at PATH.
    """
    from bundler import storage
    from bundler.api.stored import download as download_bundle

    if path == "-":
        if as_json:
            raise UsageError("--json needs a PATH: with -, stdout carries the object's bytes")
        src = storage.stored_bundle_location(source)
        line = _ProgressLine(not quiet, "download")
        try:
            result = storage.stream_bundle(
                src,
                sys.stdout.buffer,
                config=_storage_config(endpoint_url),
                progress=_chunk_progress(line),
                on_size=line.set_total,
            )
        finally:
            line.done()
        if not quiet:
            _say(
                f"Download:    {shown(result.url)} -> stdout ({result.size} bytes, "
                "sha256 matches metadata)\n"
            )
        return
    line = _ProgressLine(not quiet, "download")
    try:
        got = download_bundle(source, path, endpoint_url=endpoint_url, on_progress=line.callback())
    finally:
        line.done()
    info = got.to_json()
    for skipped in info.get("skipped_signatures", []):
        _say(f"warning: {shown(skipped['url'])}: left behind ({shown(skipped['reason'])})\n")
    if as_json:
        _emit_json(info)
        return
    lines = [
        f"Download:    {shown(got.url)} -> {shown(str(got.path))} ({got.size} bytes, "
        "sha256 matches metadata)"
    ]
    lines += [f"Signature:   {shown(sig_path)}" for sig_path in info["signature_paths"]]
    click.echo("\n".join(lines))
