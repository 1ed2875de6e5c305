"""audit: re-derive the verdict."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from bundler.cli.app import cli
from bundler.cli.common import (
    _anchor_options,
    _emit_json,
    _endpoint_option,
    _LocalPath,
    _max_bytes_option,
    _note,
    _ProgressLine,
    _say,
)
from bundler.cli.render import _html_option
from bundler.cli.verify import _signature_argument
from bundler.core import jsonout
from bundler.core.errors import UsageError
from bundler.core.textsafe import shown

AUDIT_HELP = """Re-derive an issued report's verdict from a bundle (SPEC section 12).

BUNDLE is a .tar.zst archive, an extracted bag directory, or s3://bucket/key. The bundle is
verified first; unless it verifies nothing is audited (exit 1 when it fails verification,
3 when it cannot be read). Every check is then re-derived from the exported cases, the
suite and the dataset manifests and compared with the report body and the check results:
exit 0 consistent, 1 at least one disagreement, 3 error. Each disagreement names the rule
and the numbers that decide the derived value. Items that cannot be re-derived are listed
with their reason, and the verdict line says when the report's result is one of them;
with --strict any such item fails the audit (exit 1). The groups of an imported lm-eval
run (the body's subject.run.groups) are re-derived too: each group's leaf tasks and size,
and per aggregate its tasks, their sizes and scores, the rule and the mean, from the
bundle's own checks; a structure the import refuses (a cycle, a name under two groups)
is a disagreement. What no document of the bundle gives (subtasks, stderr, a deleted
groups record) import-lm-eval --check holds to the run files the bundle carries.

The summary goes to stdout (with --json one JSON line instead); progress and notes go to
stderr. Without --expect-bundle-digest, --expect-report-digest or a signature checked
with --allowed-signers the result shows self-consistency only, and the Anchor line says so.
"""


@cli.command(
    help=AUDIT_HELP,
    examples=[
        "evalbook-bundle audit bundle.tar.zst",
        "evalbook-bundle audit bundle.tar.zst --allowed-signers allowed_signers --json "
        "| jq .verdict",
        "evalbook-bundle audit s3://bucket/archive/reports/bundles/rpt/HEX.tar.zst "
        "--output-dir out/",
    ],
)
@click.argument("bundle")
@_anchor_options
@click.option(
    "--strict",
    is_flag=True,
    help="Unprovable claims fail the verification, and anything not re-derived the audit.",
)
@click.option("--json", "as_json", is_flag=True, help="The full result as one JSON line on stdout.")
@click.option(
    "--output-dir",
    type=_LocalPath(),
    help="Write audit.json and audit.md here (absent or empty).",
)
@_html_option("Write the auditor's page of the audit to FILE (never overwritten).")
@_max_bytes_option
@_endpoint_option
@click.option(
    "-q",
    "--quiet",
    is_flag=True,
    help="No progress or notes on stderr; the result still goes to stdout.",
)
def audit(
    bundle: str,
    expect_bundle_digest: str | None,
    expect_report_digest: str | None,
    allowed_signers: Path | None,
    identity: str | None,
    signature: str | None,
    strict: bool,
    as_json: bool,
    output_dir: Path | None,
    html: str | None,
    max_bytes: int,
    endpoint_url: str | None,
    quiet: bool,
) -> None:
    from bundler.api.auditing import audit as audit_bundle
    from bundler.api.pages import page_name, page_target, write_page
    from bundler.evalbook.audit import AuditVerdict
    from bundler.report.audit import audit_markdown, audit_text
    from bundler.report.render import signatures_lines

    if (signature is not None or identity is not None) and allowed_signers is None:
        raise UsageError("--identity and --signature need --allowed-signers")
    if bundle.startswith("s3://"):
        from bundler import storage

        storage.stored_bundle_location(bundle)
    # Every output is checked before any work and before any is created.
    if output_dir is not None:
        from bundler.core.outputs import check_output_dir

        check_output_dir(output_dir)
    if html is not None:
        from bundler.api import params

        params.output(html, "html")  # before any work: a usable file or directory
    line = _ProgressLine(not quiet, "audit")
    try:
        result = audit_bundle(
            bundle,
            expect_bundle_digest=expect_bundle_digest,
            expect_report_digest=expect_report_digest,
            allowed_signers=allowed_signers,
            identity=identity,
            signature=_signature_argument(signature),
            strict=strict,
            max_bytes=max_bytes,
            endpoint_url=endpoint_url,
            on_progress=line.callback(),
        )
    finally:
        line.done()
    checks = result.verification.signatures if result.verification is not None else ()
    signature_lines = signatures_lines(checks)
    if as_json:
        _emit_json(result.to_json())
        if result.verdict is AuditVerdict.ERROR:
            from bundler.cli.invoked import option_text

            _say(
                f"evalbook-bundle: error: {shown(option_text(str(result.error)))}\n"
            )  # never quieted
    else:
        from bundler.cli.invoked import option_text

        sys.stdout.write(option_text(audit_text(result, signature_lines)))
        sys.stdout.flush()
    if output_dir is not None:
        from bundler.core.outputs import write_output_dir

        write_output_dir(
            output_dir,
            {
                "audit.json": jsonout.dumps(result.to_json(), indent=True) + b"\n",
                "audit.md": audit_markdown(result, signature_lines).encode("utf-8"),
            },
        )
        _note(f"Wrote:       {shown(str(output_dir / 'audit.json'))} and audit.md\n")
    if html is not None:
        record = result.to_json()
        target = page_target(html, page_name(record))  # the name render gives it
        write_page(target, record)
        _note(f"Wrote:       {shown(str(target))} (audit page)\n")
    sys.exit(result.exit_code)
