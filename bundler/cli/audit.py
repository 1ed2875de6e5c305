"""audit: re-derive the verdict."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson

from bundler.archive_reader import DEFAULT_MAX_BYTES
from bundler.cli.app import cli
from bundler.cli.common import (
    EPILOG_EXIT,
    _bytes_progress,
    _emit_json,
    _ProgressLine,
    _say,
    _verify_options,
)
from bundler.cli.stored import _bundle_stream

AUDIT_HELP = """Re-derive an issued report's verdict from a bundle (SPEC section 12).

BUNDLE is a .tar.zst archive, an extracted bag directory, or s3://bucket/key. The bundle is
verified first; unless it verifies nothing is audited (exit 1 when it fails verification,
3 when it cannot be read). Every check is then re-derived from the exported cases, the
suite and the dataset manifests and compared with the report body and the check results:
exit 0 consistent, 1 at least one disagreement, 3 error. Items that cannot be re-derived
are listed with their reason, and the verdict line says when the report's result is one
of them; with --strict any such item fails the audit (exit 1).
"""


@cli.command(help=AUDIT_HELP, epilog=EPILOG_EXIT)
@click.argument("bundle")
@click.option(
    "--expect-bundle-digest", help="Trust anchor: the bundle digest you expect (sha256:...)."
)
@click.option(
    "--expect-report-digest", help="Trust anchor: the report digest you expect (sha256:...)."
)
@click.option(
    "--strict",
    is_flag=True,
    help="Unprovable claims fail the verification, and anything not re-derived the audit.",
)
@click.option("--json", "as_json", is_flag=True, help="Full result on stdout.")
@click.option(
    "--output-dir",
    type=click.Path(path_type=Path),
    help="Write audit.json and audit.md here (absent or empty).",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(1),
    default=DEFAULT_MAX_BYTES,
    show_default=True,
    help="Cap on decompressed bytes.",
)
@click.option(
    "--endpoint-url", help="S3 endpoint for s3:// bundles (default $AWS_ENDPOINT_URL_S3)."
)
@click.option("--quiet", is_flag=True, help="No summary on stderr.")
def audit(
    bundle: str,
    expect_bundle_digest: str | None,
    expect_report_digest: str | None,
    strict: bool,
    as_json: bool,
    output_dir: Path | None,
    max_bytes: int,
    endpoint_url: str | None,
    quiet: bool,
) -> None:
    from bundler.audit import audit_bundle, audit_markdown, audit_text

    options = _verify_options(expect_bundle_digest, expect_report_digest, strict, max_bytes)
    line = _ProgressLine(not quiet, "audit")
    try:
        with _bundle_stream(bundle, endpoint_url) as stream:
            result = audit_bundle(bundle, options, stream=stream, progress=_bytes_progress(line))
    finally:
        line.done()
    if as_json:
        _emit_json(result.to_json())
    if not quiet:
        _say(audit_text(result))
    if output_dir is not None:
        from bundler.outputs import write_output_dir

        write_output_dir(
            output_dir,
            {
                "audit.json": orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2) + b"\n",
                "audit.md": audit_markdown(result).encode("utf-8"),
            },
        )
    sys.exit(result.exit_code)
