"""upload, list and download."""

from __future__ import annotations

import dataclasses
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import click
import orjson

from bundler.cli.app import cli
from bundler.cli.common import (
    _chunk_progress,
    _emit_json,
    _endpoint_option,
    _parse_timestamp,
    _ProgressLine,
    _quiet_option,
    _say,
    _signer,
    _storage_config,
)
from bundler.cli.signatures import _NotVerified, _with_sidecars
from bundler.cli.stored import _bundle_stream, _verified_stored
from bundler.core.errors import (
    InputError,
    UsageError,
)
from bundler.core.textsafe import shown


def _upload(
    path: Path,
    destination: str,
    endpoint_url: str | None,
    quiet: bool,
    retain_until: datetime | None = None,
    retention_mode: str | None = None,
) -> dict[str, Any]:
    """Verify the archive, then upload it with the signatures beside it (ARCHIVE.sig,
    ARCHIVE.sig.<hex>), each added to those already stored, none replaced.

    Raises UsageError for a destination that is a key rather than a prefix, _NotVerified
    (exit 1) when the bundle fails verification, InputError (exit 3) when it cannot be
    read at all.
    """
    from bundler import storage
    from bundler.bundles.verify import read_and_verify
    from bundler.core.claims import Verdict, VerifyOptions

    location = storage.parse_s3_url(destination)
    storage.check_archive_prefix(location)
    options = _with_sidecars(VerifyOptions(), str(path), None)
    result, _ = read_and_verify(str(path), options)
    if result.verdict is Verdict.ERROR:
        raise InputError(f"{path}: cannot be read as a bundle ({result.error}); refusing to upload")
    if result.verdict is not Verdict.VERIFIED or result.bundle_digest is None:
        detail = "; ".join(f"{c.subject}: {c.detail}" for c in result.failures()[:3])
        raise _NotVerified(f"{path}: bundle does not verify ({detail}); refusing to upload")
    line = _ProgressLine(not quiet, "upload", total=path.stat().st_size)
    try:
        uploaded = storage.upload_bundle(
            path,
            location,
            bundle_digest=result.bundle_digest,
            report_id=str(result.report_id),
            report_digest=str(result.report_digest),
            config=_storage_config(endpoint_url),
            retain_until=retain_until,
            retention_mode=retention_mode,
            sidecars=_valid_sidecars(options.sidecars, result.signatures),
            head_signed=any(c.embedded and c.good for c in result.signatures),
            existing_bundle=_existing_bundle(endpoint_url),
            progress=_chunk_progress(line),
        )
    finally:
        line.done()
    info: dict[str, Any] = uploaded.as_dict()
    return info


def _valid_sidecars(sidecars: Any, checks: Any) -> list[Path]:
    """The sidecars beside the archive that verify over its head: only those travel."""
    good = {c.where for c in checks if not c.embedded and c.good}
    return [Path(s.where) for s in sidecars if s.where in good and s.problem is None]


def _existing_bundle(endpoint_url: str | None) -> Any:
    """For upload: the bundle digest the bytes already at a key verify to (None when
    they do not verify), so that "already archived" rests on bytes, not metadata."""

    def check(url: str) -> str | None:
        from bundler.bundles.verify import read_and_verify
        from bundler.core.claims import Verdict, VerifyOptions

        with _bundle_stream(url, endpoint_url) as stream:
            result, _ = read_and_verify(url, VerifyOptions(), stream=stream)
            if stream is not None:
                _verified_stored(url, stream, result)
        return result.bundle_digest if result.verdict is Verdict.VERIFIED else None

    return check


def _judge_download(url: str, verified: dict[str, Any]) -> Any:
    """For download: the bytes are placed only when the bundle they hold is the one the
    key names (SPEC 6), and, for an object without sha256 metadata (nothing recorded to
    compare), only when they verify. ``verified`` receives the bundle facts read from
    the bytes, which replace what the metadata says."""

    def accept(path: Path, recorded: str | None) -> None:
        from bundler.bundles.stored import KEY_SUBJECT
        from bundler.bundles.verify import read_and_verify
        from bundler.core.claims import StoredObject, Verdict, VerifyOptions

        options = VerifyOptions(stored=StoredObject(url, recorded))
        result, _ = read_and_verify(str(path), options)
        if result.verdict is Verdict.ERROR:
            if recorded is None:
                raise InputError(f"{url}: cannot be read as a bundle ({result.error})")
            return  # the recorded bytes arrived; what they hold is verify's to say
        failed = [c for c in result.failures() if c.subject == KEY_SUBJECT]
        if failed or (recorded is None and result.verdict is not Verdict.VERIFIED):
            detail = "; ".join(str(c.detail) for c in (failed or result.failures())[:3])
            raise _NotVerified(f"{url}: {detail}; nothing downloaded")
        verified.update(
            bundle_digest=result.bundle_digest,
            report_id=result.report_id,
            report_digest=result.report_digest,
        )

    return accept


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


def _sign_stored(url: str, key_path: Path, endpoint_url: str | None, quiet: bool) -> dict[str, Any]:
    """``sign s3://...``: verify the stored bundle (every signature beside it checked),
    sign its head, and add the signature beside the archive (a countersignature when it
    is signed already); nothing when this key has signed it already."""
    from bundler import storage
    from bundler.bundles.proof import sign_verified, signed_already
    from bundler.core.claims import VerifyOptions

    location = storage.stored_bundle_location(url)
    sign = _signer(key_path, quiet)
    options = _with_sidecars(VerifyOptions(), url, endpoint_url)
    with _bundle_stream(url, endpoint_url) as stream:
        signature, result = sign_verified(url, sign, options, stream=stream)
        if stream is not None:
            _verified_stored(url, stream, result)
    info: dict[str, Any] = {
        "schema": "evalbook.signed.v1",
        "bundle": url,
        "bundle_digest": result.bundle_digest,
        "report_id": result.report_id,
    }
    already = signed_already(result, signature)
    if already is not None:
        return {**info, "signature": already, "state": "already_signed"}
    stored = storage.add_signature(
        location,
        signature.encode("ascii"),
        config=_storage_config(endpoint_url),
        bundle_digest=result.bundle_digest,
    )
    state = "already_stored" if stored.status.value == "already_archived" else "stored"
    return {**info, "signature": stored.url, "state": state}


@cli.command(
    examples=[
        "evalbook-bundle upload evalbook-bundle-rpt-x.tar.zst s3://archive/eval",
        "evalbook-bundle upload bundle.tar.zst s3://archive/eval --retain-until 2033-01-01T00:00:00Z",
        "AWS_ENDPOINT_URL_S3=http://127.0.0.1:8333 evalbook-bundle upload bundle.tar.zst "
        "s3://archive/eval --json | jq -r .key",
    ]
)
@click.argument("bundle", type=click.Path(path_type=Path, dir_okay=False))
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
    if retention_mode is not None and retain_until is None:
        raise UsageError("--retention-mode needs --retain-until")
    until = _parse_timestamp(retain_until, "--retain-until") if retain_until is not None else None
    info = _upload(bundle, destination, endpoint_url, quiet, until, retention_mode)
    if as_json:
        _emit_json({"schema": "evalbook.upload.v1", **info})
    else:
        click.echo(_upload_text(info), nl=False)


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
    from bundler import storage

    location = storage.parse_s3_url(prefix)
    count = 0
    for item in storage.list_bundles(
        location, report_id=report_id, config=_storage_config(endpoint_url)
    ):
        count += 1
        if as_json:
            line = {"schema": "evalbook.list_line.v1", **item.as_dict()}
            sys.stdout.buffer.write(orjson.dumps(line) + b"\n")
        else:
            signed = f"signed({item.signature_count})" if item.signed else "unsigned"
            click.echo(
                f"{shown(item.report_id)}  {item.bundle_digest}  {item.size:>12}  "
                f"{item.last_modified.isoformat()}  {signed:<10}  "
                f"s3://{location.bucket}/{shown(item.key)}"
            )
    sys.stdout.flush()
    if not quiet:
        _say(f"{count} bundle(s)\n")


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

    src = storage.parse_s3_url(source)
    config = _storage_config(endpoint_url)
    line = _ProgressLine(not quiet, "download")
    if path == "-":
        if as_json:
            raise UsageError("--json needs a PATH: with -, stdout carries the object's bytes")
        try:
            result = storage.stream_bundle(
                src,
                sys.stdout.buffer,
                config=config,
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
    target = storage.download_path(src, path)
    verified: dict[str, Any] = {}
    try:
        result = storage.download_bundle(
            src,
            target,
            config=config,
            progress=_chunk_progress(line),
            on_size=line.set_total,
            accept=_judge_download(source, verified),
        )
    finally:
        line.done()
    result = dataclasses.replace(result, **verified)
    for url, reason in result.skipped_signatures:
        _say(f"warning: {shown(url)}: left behind ({shown(reason)})\n")
    if as_json:
        _emit_json({"schema": "evalbook.download.v1", **result.as_dict()})
        return
    lines = [
        f"Download:    {shown(result.url)} -> {shown(result.path)} ({result.size} bytes, "
        "sha256 matches metadata)"
    ]
    lines += [f"Signature:   {shown(sig_path)}" for sig_path in result.signature_paths]
    click.echo("\n".join(lines))
