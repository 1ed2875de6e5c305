"""export and export-eb: write a bundle from a store or an eval-banana run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from bundler.cli.app import cli
from bundler.cli.common import (
    F,
    _archive_options,
    _emit_json,
    _endpoint_option,
    _LocalPath,
    _ProgressLine,
    _quiet_option,
    _say,
    _sign_key_option,
)
from bundler.cli.storage import _upload_text
from bundler.core.errors import (
    UsageError,
)
from bundler.core.textsafe import shown


def _bundle_options(*, out_help: str, strict_help: str) -> Callable[[F], F]:
    """--out, --exported-at, --level, --strict and --key, in that order, as export and
    export-eb take them; the help of --out names the archive, that of --strict what it
    refuses."""

    def apply(command: F) -> F:
        command = _sign_key_option(command)
        command = click.option("--strict", is_flag=True, help=strict_help)(command)
        command = _archive_options(command)
        return click.option("--out", type=click.Path(path_type=str), help=out_help)(command)

    return apply


def _summary_options(command: F) -> F:
    """--json and -q/--quiet, as export and export-eb take them."""
    command = _quiet_option(command)
    return click.option(
        "--json", "as_json", is_flag=True, help="One JSON object on stdout: the summary."
    )(command)


@cli.command(
    examples=[
        "evalbook-bundle reports --store fixtures/stores/main",
        "evalbook-bundle export --store fixtures/stores/main --report rpt-clean --principal bob",
        "evalbook-bundle export --store s3://evalbook/store --report rpt-x --principal bob "
        "--key ~/.ssh/id_ed25519 --out bundles/",
        "EVALBOOK_PRINCIPAL=bob evalbook-bundle export --store STORE --report rpt-x "
        "--upload s3://archive/eval --json | jq -r .bundle_digest",
    ]
)
@click.option(
    "--store", "store_root", required=True, help="Store root: a directory or s3://bucket/prefix."
)
@click.option("--report", "report_id", required=True, help="The report id to export.")
@click.option(
    "--principal",
    envvar="EVALBOOK_PRINCIPAL",
    help="Exporting principal (default $EVALBOOK_PRINCIPAL); needs report.export.",
)
@_bundle_options(
    out_help="Archive path, or a directory to write evalbook-bundle-<report_id>.tar.zst into "
    "(default: the current directory); never overwritten.",
    strict_help="Fail (exit 1, nothing written) if anything would be unavailable.",
)
@click.option(
    "--upload",
    "upload_to",
    metavar="S3_PREFIX",
    help="Then upload the new archive to s3://bucket/prefix (as the upload command does).",
)
@_endpoint_option
@_summary_options
def export(
    store_root: str,
    report_id: str,
    principal: str | None,
    out: str | None,
    exported_at: str | None,
    level: int,
    strict: bool,
    sign_key: Path | None,
    upload_to: str | None,
    endpoint_url: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Export one issued report into a reproducibility bundle.

    The bundle holds the report body and envelope, the frozen suite, the pinned scorer
    versions, the dataset manifests and the examples the cases used, every check result,
    the cases and their payloads; what cannot be included is listed under unavailable or
    redacted with its reason. stdout: the archive, its bundle digest and its file
    SHA-256 on labelled lines, then the summary (--json: one JSON object).
    """
    from bundler.api.exporting import export as export_report
    from bundler.report.render import export_result_text, export_text

    if not principal:
        raise UsageError("no principal: give --principal or set EVALBOOK_PRINCIPAL")
    _warn_key(sign_key)
    line = _ProgressLine(not quiet, "export")
    try:
        result = export_report(
            store_root,
            report_id,
            principal=principal,
            out=_out_path(out),
            exported_at=exported_at,
            level=level,
            strict=strict,
            key=sign_key,
            upload=upload_to,
            endpoint_url=endpoint_url,
            on_progress=line.callback(),
        )
    finally:
        line.done()
    summary = result.to_json()
    if as_json:
        _emit_json(summary)  # SPEC 7: with --json, no human summary on stderr
    else:
        # The result, on stdout whatever --quiet says: the archive, its bundle digest and
        # its file SHA-256 (named apart: this is not sha256sum output), then the summary.
        uploaded = _upload_text(summary["upload"]) if "upload" in summary else ""
        click.echo(export_result_text(summary) + export_text(summary) + uploaded, nl=False)


def _warn_key(key: Path | None) -> None:
    """The security warning for a signing key others can read: shown even with --quiet."""
    if key is None:
        return
    from bundler.api.bundles import key_warning

    warning = key_warning(key)
    if warning:
        _say(f"warning: {shown(warning)}\n")


@cli.command(
    "export-eb",
    examples=[
        "evalbook-bundle export-eb fixtures/eval-banana/runs/RUN --project fixtures/eval-banana/project",
        "evalbook-bundle export-eb RUN_DIR --project . --key ~/.ssh/id_ed25519 --out bundles/",
        "evalbook-bundle verify eval-banana-bundle-RUN.tar.zst",
    ],
)
@click.argument("run_dir", type=_LocalPath())
@click.option(
    "--project",
    "project_root",
    required=True,
    type=_LocalPath(),
    help="eval-banana project root the run's definitions are found under.",
)
@_bundle_options(
    out_help="Archive path, or a directory to write eval-banana-bundle-<run_id>.tar.zst into "
    "(default: the current directory); never overwritten.",
    strict_help="Fail (exit 1, nothing written) if any definition would be unavailable.",
)
@_summary_options
def export_eb(
    run_dir: Path,
    project_root: Path,
    out: str | None,
    exported_at: str | None,
    level: int,
    strict: bool,
    sign_key: Path | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Export an eval-banana run directory into an eval-banana bundle (SPEC 10.1).

    The bundle holds every file of RUN_DIR under data/run/, and each check's YAML and
    referenced script (found under --project through the recorded project_root) under
    data/definitions/; a definition that is missing or no longer gives the recorded
    check_definition_sha256 is listed under unavailable. An inconsistent run or one
    holding symbolic links is refused (exit 3). stdout: the archive, its bundle digest
    and its file SHA-256 on labelled lines, then the summary (--json: one JSON object).
    """
    from bundler.api.exporting import export_eb as export_run
    from bundler.report.render import export_eb_text, export_result_text

    _warn_key(sign_key)
    line = _ProgressLine(not quiet, "export-eb")
    try:
        result = export_run(
            run_dir,
            project=project_root,
            out=_out_path(out),
            exported_at=exported_at,
            level=level,
            strict=strict,
            key=sign_key,
            on_progress=line.callback(),
        )
    finally:
        line.done()
    summary = result.to_json()
    if as_json:
        _emit_json(summary)  # SPEC 7: with --json, no human summary on stderr
    else:
        click.echo(export_result_text(summary) + export_eb_text(summary), nl=False)


def _out_path(out: str | None) -> Path | None:
    """``--out`` as given; a path ending in / must be an existing directory (as for
    ``cp``), which then receives the default file name.

    Raises UsageError (exit 2) naming the option otherwise.
    """
    if out is None:
        return None
    if not out:
        raise UsageError("--out '': an empty path")
    if out.endswith("/") and not Path(out).is_dir():
        raise UsageError(f"--out {out!r}: no such directory (a path ending in / names one)")
    return Path(out)
