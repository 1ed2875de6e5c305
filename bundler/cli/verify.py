"""verify, inspect and extract."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import sys
from pathlib import Path
from typing import Any

import click

from bundler.cli.app import cli
from bundler.cli.common import (
    RecordSpool,
    _anchor_options,
    _emit_json,
    _emit_verification,
    _endpoint_option,
    _LocalPath,
    _max_bytes_option,
    _note,
    _ProgressLine,
    _quiet_option,
    _say,
    verification_chunks,
)
from bundler.cli.render import _html_option
from bundler.core.errors import (
    UsageError,
)
from bundler.core.sizes import regular_size
from bundler.core.textsafe import shown

VERIFY_HELP = """Verify bundles offline: every digest the bundle can prove.

BUNDLE is a .tar.zst archive, an extracted bag directory, or s3://bucket/key. Each claim
ends proven, unprovable (listed as unavailable or redacted, with the reason) or failed.
Verdict verified/failed/error gives exit 0/1/3 (over several bundles: 1 if any failed,
else 3 if any could not be checked, else 0). Without
--expect-bundle-digest, --expect-report-digest or a signature the result shows
self-consistency only. For eval-banana run directories, pass RUN_DIR with --project.
"""


@cli.command(
    help=VERIFY_HELP,
    examples=[
        "evalbook-bundle verify evalbook-bundle-rpt-x.tar.zst",
        "evalbook-bundle verify bundle.tar.zst --expect-bundle-digest sha256:...",
        "evalbook-bundle verify bundle.tar.zst --allowed-signers allowed_signers "
        "--identity alice@example.org",
        "evalbook-bundle verify --json *.tar.zst | jq -r '[.source, .verdict] | @tsv'",
        "evalbook-bundle verify s3://archive/eval/reports/bundles/rpt-x/HEX.tar.zst "
        "--output-dir out/",
        "evalbook-bundle verify RUN_DIR --project fixtures/eval-banana/project",
    ],
)
@click.argument("bundles", nargs=-1, required=True)
@_anchor_options
@click.option(
    "--project",
    "project_root",
    type=_LocalPath(),
    help="eval-banana project root, to verify a run directory in place.",
)
@click.option("--strict", is_flag=True, help="Unprovable claims fail too.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Full result on stdout (JSON Lines for several bundles).",
)
@click.option(
    "--output-dir",
    type=_LocalPath(),
    help="Write verification.json and verification.md here (absent or empty); several "
    "bundles write <report_id>.verification.json and .md each.",
)
@_html_option(
    "Write the auditor's page of the result to FILE (never overwritten), or into a "
    "directory as <report_id>.verification.html (one page per BUNDLE)."
)
@_max_bytes_option
@_endpoint_option
@_quiet_option
def verify(
    bundles: tuple[str, ...],
    expect_bundle_digest: str | None,
    expect_report_digest: str | None,
    allowed_signers: Path | None,
    identity: str | None,
    signature: str | None,
    project_root: Path | None,
    strict: bool,
    as_json: bool,
    output_dir: Path | None,
    html: str | None,
    max_bytes: int,
    endpoint_url: str | None,
    quiet: bool,
) -> None:
    from bundler.api.anchors import anchors

    if (signature is not None or identity is not None) and allowed_signers is None:
        raise UsageError("--identity and --signature need --allowed-signers")
    several = len(bundles) > 1
    if signature is not None and several:
        # A signature is over one bundle's head: named for several, it would be checked
        # against each and anchor at most one (the Node command refuses it alike).
        raise UsageError("--signature takes a single BUNDLE")
    for location in bundles:
        if location.startswith("s3://"):
            from bundler import storage

            storage.stored_bundle_location(location)  # a URL naming no object: exit 2
    found = anchors(
        expect_bundle_digest=expect_bundle_digest,
        expect_report_digest=expect_report_digest,
        allowed_signers=allowed_signers,
        identity=identity,
        signature=_signature_argument(signature),
        strict=strict,
        max_bytes=max_bytes,
        endpoint_url=endpoint_url,
    )
    from bundler.core.outputs import check_output_dir
    from bundler.core.outputs import output_dir as made_dir

    # Every output is checked before any is created (SPEC 5: a refused command leaves
    # nothing behind, not even an empty directory).
    if output_dir is not None:
        check_output_dir(output_dir)  # absent or empty, before any work
    if html is not None and several and not _names_directory(html):
        raise UsageError("--html FILE takes a single BUNDLE; give a directory for several")
    from bundler.api import params

    # A page inside the output directory is checked once that directory exists (a
    # refusal then removes it again); any other page, before anything is created.
    inside = html is not None and output_dir is not None and _within(html, output_dir)
    if html is not None and not inside:
        params.output(html, "html")  # before any work: a usable file or directory
    with contextlib.ExitStack() as made:
        if output_dir is not None:
            made.enter_context(made_dir(output_dir))
        if html is not None and inside:
            params.output(html, "html")
        code = _verify_each(bundles, found, project_root, as_json, output_dir, html, quiet, several)
    sys.exit(code)


def _within(html: str, directory: Path) -> bool:
    """Whether the page ``html`` names ``directory`` or a path beneath it."""
    page = Path(os.path.abspath(html))
    home = Path(os.path.abspath(directory))
    return page == home or home in page.parents


def _verify_each(
    bundles: tuple[str, ...],
    found: Any,
    project_root: Path | None,
    as_json: bool,
    output_dir: Path | None,
    html: str | None,
    quiet: bool,
    several: bool,
) -> int:
    """Verify each bundle, print and write its results; the process's exit code."""
    from bundler.api.bundles import verify_one
    from bundler.api.pages import page_target
    from bundler.cli.invoked import option_text
    from bundler.report.render import verification_markdown_chunks, verification_text

    names = _OutputNames()
    codes: list[int] = []
    tally: dict[str, int] = {}
    records = RecordSpool() if as_json else None  # printed once the exit code is known
    for location in bundles:
        line = _ProgressLine(not quiet, "verify")
        try:
            result = verify_one(location, found, project=project_root, on_progress=line.callback())
        finally:
            line.done()
        kind = _kind(result)
        codes.append(result.exit_code)
        tally[kind] = tally.get(kind, 0) + 1
        if as_json:
            # SPEC 7: with --json, stdout holds the one JSON line per bundle and nothing
            # else, and stderr no human summary: only the error of a bundle with no verdict.
            # Each line carries the process's exit code, known once every bundle is done.
            assert records is not None
            records.add(result)
            _say_error(result)
        else:
            # The summary is the result: on stdout, whatever --quiet says.
            human = _altered_text(result) if kind == "altered" else verification_text(result)
            sys.stdout.write(option_text(human))
            sys.stdout.flush()
            _say_error(result)  # and the error of a bundle with no verdict, on stderr
        stem = names.stem(result.report_id, several)
        if output_dir is not None:
            from bundler.core.outputs import write_new_file

            prefix = "" if stem is None else f"{stem}."
            saved = itertools.chain(verification_chunks(result, indent=True), [b"\n"])
            write_new_file(output_dir / f"{prefix}verification.json", saved)
            write_new_file(
                output_dir / f"{prefix}verification.md",
                (chunk.encode("utf-8") for chunk in verification_markdown_chunks(result)),
            )
        if html is not None:
            from bundler.api.pages import page_name, write_page

            shown_record = result.to_json()
            # One default name for every page (``page_name``, as render gives it); with
            # several bundles, the numbered stem keeps two of one report apart.
            name = page_name(shown_record) if stem is None else f"{stem}.verification.html"
            target = page_target(html, name)
            write_page(target, shown_record)
            _note(f"Wrote:       {shown(str(target))} (verification page)\n")
        # Let this bundle's result go before the next is verified: one result of 120,000
        # claims is 80 MB, and two need not be alive at once.
        del result
    if several:
        order = ("verified", "failed", "altered", "error", "storage")
        words = {
            "verified": "verified",
            "failed": "failed",
            "altered": "altered at rest (failed)",
            "error": "could not be read",
            "storage": "storage failed (not checked)",
        }
        parts = [f"{tally[k]} {words[k]}" for k in order if tally.get(k)]
        totals = f"Totals:      {len(bundles)} bundles: " + ", ".join(parts) + "\n"
        if not as_json:
            sys.stdout.write(totals)
            sys.stdout.flush()
        # SPEC 5: 1 if any failed, else 3 if any could not be checked (a storage failure
        # included), else 0.
        codes = [3 if c == 5 else c for c in codes]
    code = max(codes, key=lambda c: _EXIT_RANK[c])
    if records is not None:
        records.emit(code)
    return code


def _say_error(result: Any) -> None:
    """The error of a bundle that could not be checked, on stderr (with or without
    --json; the human summary on stdout names it too)."""
    if result.error is not None and result.verdict.value == "error":
        from bundler.cli.invoked import option_text

        _say(f"evalbook-bundle: error: {shown(option_text(result.error))}\n")


def _names_directory(path: str) -> bool:
    """An output option naming a directory: an existing one, or a name ending in /."""
    return Path(path).is_dir() or path.endswith("/")


def _signature_argument(value: str | None) -> str | bytes | None:
    """``--signature``: ``-`` is standard input (read here), anything else a file or URL."""
    if value == "-":
        from bundler.core.signatures import MAX_SIDECAR_BYTES
        from bundler.trust.proof import read_bounded

        # Bounded as a signature file is: never more than one byte past the cap is read.
        return read_bounded("-", limit=MAX_SIDECAR_BYTES, what="signature")
    return value


class _OutputNames:
    """The names of the files several bundles write into one directory (SPEC 5): by
    report id, a second bundle of the same report id numbered, an unreadable bundle
    (no report id) by its position."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.position = 0

    def stem(self, report_id: str | None, several: bool) -> str | None:
        self.position += 1
        if not several:
            return None
        base = (
            report_id
            if report_id is not None and _SAFE_NAME.fullmatch(report_id)
            else f"bundle-{self.position}"
        )
        stem, n = base, 1
        while stem in self.used:
            n += 1
            stem = f"{base}-{n}"
        self.used.add(stem)
        return stem


_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,150}", re.ASCII)


def _archive_size(location: str) -> int | None:
    """The size of a local archive, the total of the progress bar (which counts the
    archive's compressed bytes); None for a directory or an s3:// URL (its size comes
    with the object)."""
    return None if location.startswith("s3://") else regular_size(location)


def _kind(result: Any) -> str:
    if result.altered_at_rest:
        return "altered"
    if result.storage_failed:
        return "storage"
    return {"verified": "verified", "failed": "failed", "error": "error"}[result.verdict.value]


def _altered_text(result: Any) -> str:
    claim = result.claims[0]
    return (
        f"Bundle:      {shown(result.source)}\n"
        "Verdict:     FAILED (the stored archive was altered at rest)\n"
        f"Failed:      1\n  - {shown(claim.detail)}\n"
    )


@cli.command(
    examples=[
        "evalbook-bundle inspect evalbook-bundle-rpt-x.tar.zst",
        "evalbook-bundle inspect s3://archive/eval/reports/bundles/rpt-x/HEX.tar.zst",
        "evalbook-bundle inspect --json bundle.tar.zst | jq .unavailable",
    ]
)
@click.argument("bundle")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout: the facts.")
@_max_bytes_option
@_endpoint_option
@_quiet_option
def inspect(
    bundle: str, as_json: bool, max_bytes: int, endpoint_url: str | None, quiet: bool
) -> None:
    """Show what a bundle holds, read through the safe reader, without the proof."""
    from bundler.api.bundles import inspect as inspect_bundle
    from bundler.report.render import inspect_text

    if bundle.startswith("s3://"):
        from bundler import storage

        storage.stored_bundle_location(bundle)  # a URL naming no object: exit 2
    result = inspect_bundle(bundle, max_bytes=max_bytes, endpoint_url=endpoint_url)
    for warning in result.warnings:
        _say(f"warning: {shown(warning)}\n")
    if as_json:
        _emit_json(result.to_json())
    else:
        info = {**result.to_json(), "schema": result.bundle_schema}
        info["labels"] = result.labels
        click.echo(inspect_text(info), nl=False)


@cli.command(
    examples=[
        "evalbook-bundle extract evalbook-bundle-rpt-x.tar.zst bag/",
        "evalbook-bundle extract bundle.tar.zst bag/ --allowed-signers allowed_signers",
        "ssh-keygen -Y verify -f allowed_signers -I alice@example.org "
        "-n evalbook-bundle-head-v1 -s bag/evalbook-bundle-rpt-x.sig "
        "< bag/evalbook-bundle-rpt-x/bundle-head.json",
    ]
)
@click.argument("bundle")
@click.argument("directory", type=_LocalPath())
@click.option(
    "--expect-bundle-digest", help="Trust anchor: the bundle digest you expect (sha256:...)."
)
@click.option(
    "--expect-report-digest", help="Trust anchor: the report digest you expect (sha256:...)."
)
@click.option("--strict", is_flag=True, help="Unprovable claims fail too (nothing extracted).")
@_max_bytes_option
@_endpoint_option
@click.option(
    "--allowed-signers",
    type=_LocalPath(),
    help="OpenSSH allowed_signers file: some head signature (embedded, or a sidecar "
    "beside the archive or the stored object) must verify by an allowed signer, or "
    "nothing is extracted.",
)
@click.option("--identity", help="With --allowed-signers: the principal that must have signed.")
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object on stdout: the verification record."
)
@_quiet_option
def extract(
    bundle: str,
    directory: Path,
    expect_bundle_digest: str | None,
    expect_report_digest: str | None,
    strict: bool,
    max_bytes: int,
    endpoint_url: str | None,
    allowed_signers: Path | None,
    identity: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Verify while extracting BUNDLE into DIRECTORY (absent or empty).

    Only regular files and directories are written, each created exclusively without
    following links and with fixed modes; unless the bundle verifies, everything written
    is removed again.
    """
    from bundler.api.bundles import extract as extract_bundle
    from bundler.api.bundles import extracted_sidecars
    from bundler.cli.invoked import option_text
    from bundler.report.render import verification_text

    if bundle.startswith("s3://"):
        from bundler import storage

        storage.stored_bundle_location(bundle)  # a URL naming no object: exit 2
    line = _ProgressLine(not quiet, "verify")
    try:
        result = extract_bundle(
            bundle,
            directory,
            expect_bundle_digest=expect_bundle_digest,
            expect_report_digest=expect_report_digest,
            allowed_signers=allowed_signers,
            identity=identity,
            strict=strict,
            max_bytes=max_bytes,
            endpoint_url=endpoint_url,
            on_progress=line.callback(),
        )
    finally:
        line.done()
    if as_json:
        _emit_verification(result)  # the verification record; no human summary (SPEC 7)
        _say_error(result)
        sys.exit(result.exit_code)
    # The summary is the result (on stdout, whatever --quiet says).
    text = option_text(verification_text(result))
    if result.exit_code == 0:
        text += f"Extracted:   {shown(str(directory))}\n"
        for path in extracted_sidecars(directory):
            text += f"Signature:   {shown(str(path))} (a sidecar, where verify of the bag looks)\n"
    else:
        text += f"Extracted:   nothing (removed what was written to {shown(str(directory))})\n"
    sys.stdout.write(text)
    sys.stdout.flush()
    sys.exit(result.exit_code)


# Exit code over several bundles (SPEC section 5): a failed bundle first, then one that
# could not be read, then one whose storage failed; never hidden behind each other.
_EXIT_RANK = {1: 3, 3: 2, 5: 1, 0: 0}
