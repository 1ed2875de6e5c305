"""verify, inspect and extract."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

import click
import orjson

from bundler.cli.app import cli
from bundler.cli.common import (
    _anchor_options,
    _bytes_progress,
    _emit_json,
    _endpoint_option,
    _max_bytes_option,
    _ProgressLine,
    _quiet_option,
    _say,
    _storage_config,
    _verify_options,
)
from bundler.cli.render import _html_option, refuse_existing, write_page
from bundler.cli.signatures import _with_sidecars
from bundler.cli.stored import _altered_result, _bundle_stream, _verified_stored
from bundler.core.errors import (
    InputError,
    StorageError,
    UsageError,
)
from bundler.core.textsafe import shown

VERIFY_HELP = """Verify bundles offline: every digest the bundle can prove.

BUNDLE is a .tar.zst archive, an extracted bag directory, or s3://bucket/key. Each claim
ends proven, unprovable (listed as unavailable or redacted, with the reason) or failed.
Verdict verified/failed/error gives exit 0/1/3 (the worst over several bundles). Without
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
    type=click.Path(path_type=Path),
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
    type=click.Path(path_type=Path),
    help="Write verification.json and verification.md here (absent or empty).",
)
@_html_option("Write the auditor's page of the result to FILE (one BUNDLE; never overwritten).")
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
    html: Path | None,
    max_bytes: int,
    endpoint_url: str | None,
    quiet: bool,
) -> None:
    from bundler import storage
    from bundler.report.render import verification_markdown, verification_text

    if output_dir is not None and len(bundles) > 1:
        raise UsageError("--output-dir takes a single BUNDLE")
    if html is not None and len(bundles) > 1:
        raise UsageError("--html takes a single BUNDLE")
    refuse_existing(html)
    for location in bundles:
        if location.startswith("s3://"):
            storage.stored_bundle_location(location)
    options = _verify_options(
        expect_bundle_digest,
        expect_report_digest,
        strict,
        max_bytes,
        allowed_signers,
        identity,
        signature,
    )
    codes: list[int] = []
    tally: dict[str, int] = {}
    for location in bundles:
        result, code, kind = _verify_one(
            location,
            options,
            project_root=project_root,
            signature=signature,
            endpoint_url=endpoint_url,
            quiet=quiet,
        )
        codes.append(code)
        tally[kind] = tally.get(kind, 0) + 1
        human = _altered_text(result) if kind == "altered" else verification_text(result)
        if as_json:
            # SPEC 5: with --json, stdout holds the one JSON line per bundle and nothing
            # else; the human summary is a note on stderr (off with --quiet).
            _emit_json(result.to_json())
            if not quiet:
                _say(human)
        else:
            # The summary is the result: on stdout, whatever --quiet says.
            sys.stdout.write(human)
            sys.stdout.flush()
        if output_dir is not None:
            from bundler.core.outputs import write_output_dir

            write_output_dir(
                output_dir,
                {
                    "verification.json": orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2)
                    + b"\n",
                    "verification.md": verification_markdown(result).encode("utf-8"),
                },
            )
        if html is not None:
            write_page(html, result.to_json())
            if not quiet:
                _say(f"Wrote:       {shown(str(html))} (verification page)\n")
    if len(bundles) > 1:
        order = ("verified", "failed", "altered", "error", "storage")
        words = {
            "verified": "verified",
            "failed": "failed",
            "altered": "altered at rest (failed)",
            "error": "could not be read",
            "storage": "storage failed (not checked)",
        }
        parts = [f"{tally[k]} {words[k]}" for k in order if tally.get(k)]
        line = f"Totals:      {len(bundles)} bundles: " + ", ".join(parts) + "\n"
        if as_json:
            if not quiet:
                _say(line)
        else:
            sys.stdout.write(line)
            sys.stdout.flush()
    if len(bundles) > 1:
        # SPEC 5: 1 if any failed, else 3 if any could not be checked (a storage failure
        # included), else 0.
        codes = [3 if c == 5 else c for c in codes]
    sys.exit(max(codes, key=lambda c: _EXIT_RANK[c]))


def _verify_one(
    location: str,
    options: Any,
    *,
    project_root: Path | None,
    signature: str | None,
    endpoint_url: str | None,
    quiet: bool,
) -> tuple[Any, int, str]:
    """Verify one BUNDLE of ``verify``: (result, exit code, kind of result).

    Never raises for one bundle's trouble, so that every bundle of a run is checked: a
    storage failure is a result with verdict error and exit code 5, an archive altered
    at rest a failed result (exit 1) naming the key and both digests.
    """
    from bundler import storage
    from bundler.bundles.verify import verify_bundle
    from bundler.core.claims import Verdict, Verification

    if project_root is not None:
        from bundler.evalbanana import verify as ebverify

        result = ebverify.verify_run_dir(Path(location), project_root, options)
        return result, result.exit_code, _kind(result)
    line = _ProgressLine(not quiet, "verify", total=_archive_size(location))
    try:
        opts = _with_sidecars(options, location, endpoint_url, signature)
        with _bundle_stream(location, endpoint_url) as stream:
            if stream is not None:
                line.set_total(getattr(stream, "size", None) or None)  # the object's size
            result = verify_bundle(location, opts, stream=stream, progress=_bytes_progress(line))
            if stream is not None:
                result = _verified_stored(location, stream, result)
    except storage.AlteredAtRest as exc:
        return _altered_result(location, exc, options.strict), 1, "altered"
    except StorageError as exc:
        failed = Verification(
            source=location, verdict=Verdict.ERROR, error=exc.message, strict=options.strict
        )
        return failed, 5, "storage"
    except (InputError, UsageError) as exc:
        failed = Verification(
            source=location, verdict=Verdict.ERROR, error=exc.message, strict=options.strict
        )
        return failed, 3, "error"
    finally:
        line.done()
    return result, result.exit_code, _kind(result)


def _archive_size(location: str) -> int | None:
    """The size of a local archive, the total of the progress bar (which counts the
    archive's compressed bytes); None for a directory or an s3:// URL (its size comes
    with the object)."""
    if location.startswith("s3://"):
        return None
    try:
        info = os.stat(location)
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def _kind(result: Any) -> str:
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
    from bundler.bundles.inspect import inspect_bundle
    from bundler.report.render import inspect_text

    with _bundle_stream(bundle, endpoint_url) as stream:
        info = inspect_bundle(bundle, max_bytes=max_bytes, stream=stream)
        if stream is not None:
            _verified_stored(bundle, stream, None)
            _inspected_stored(stream, info)
    if bundle.startswith("s3://"):
        # Signatures travel with the stored bundle (SPEC 6): name them, unchecked.
        from bundler import storage

        info["signatures"] = [
            f"s3://{sig.bucket}/{sig.key}"
            for sig in storage.stored_signatures(bundle, config=_storage_config(endpoint_url))
        ]
    if as_json:
        facts = {k: v for k, v in info.items() if k not in ("labels", "schema")}
        _emit_json({"schema": "evalbook.inspect.v1", "bundle_schema": info.get("schema"), **facts})
    else:
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
@click.argument("directory", type=click.Path(path_type=Path))
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
    type=click.Path(path_type=Path),
    help="OpenSSH allowed_signers file: the head signature (embedded, or the sidecar "
    "beside the archive or the stored object) must verify, or nothing is extracted.",
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
    from bundler.bundles.extract import extract_bundle
    from bundler.report.render import verification_text

    options = _verify_options(
        expect_bundle_digest, expect_report_digest, strict, max_bytes, allowed_signers, identity
    )
    if bundle.startswith("s3://"):
        from bundler import storage

        storage.stored_bundle_location(bundle)
    options = _with_sidecars(options, bundle, endpoint_url)
    line = _ProgressLine(not quiet, "verify", total=_archive_size(bundle))
    try:
        with _bundle_stream(bundle, endpoint_url) as stream:
            if stream is not None:
                line.set_total(getattr(stream, "size", None) or None)
            result = extract_bundle(
                bundle, directory, options, stream=stream, progress=_bytes_progress(line)
            )
            if stream is not None:
                result = _verified_stored(bundle, stream, result)
                if result.exit_code != 0:
                    _remove_extracted(directory)
    finally:
        line.done()
    written: list[Path] = []
    if result.exit_code == 0:
        written = _write_extracted_sidecars(directory, options.sidecars, result.signatures)
    # The summary is the result (on stdout, whatever --quiet says), unless --json asks
    # for the verification record instead.
    text = verification_text(result)
    if result.exit_code == 0:
        text += f"Extracted:   {shown(str(directory))}\n"
        for path in written:
            text += f"Signature:   {shown(str(path))} (a sidecar, where verify of the bag looks)\n"
    else:
        text += f"Extracted:   nothing (removed what was written to {shown(str(directory))})\n"
    if as_json:
        _emit_json(result.to_json())  # the verification record; the summary is a note
        if not quiet:
            _say(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    sys.exit(result.exit_code)


def _inspected_stored(stream: Any, info: dict[str, Any]) -> None:
    """A stored bundle is judged by its bytes (SPEC 6): the key must name the bundle
    inspect read (else exit 1, altered at rest); an object without sha256 metadata is
    inspected all the same, with a warning that nothing recorded its bytes."""
    from bundler.bundles.stored import stored_claims, stored_of
    from bundler.core.claims import State
    from bundler.core.errors import VerificationFailed

    stored = stored_of(stream)
    if stored is None:
        return
    for claim in stored_claims(stored, info.get("report_id"), info.get("bundle_digest")):
        if claim.state is State.FAILED:
            raise VerificationFailed(str(claim.detail))
        if claim.state is State.UNPROVABLE:
            _say(f"warning: {shown(claim.detail)}\n")


def _write_extracted_sidecars(directory: Path, sidecars: Any, checks: Any) -> list[Path]:
    """Beside the extracted bag, not inside it (a tag file the tag manifest does not list
    would make the bag fail): ``<bag>.sig``, ``<bag>.sig.<hex>``, where ``verify`` of the
    bag looks (SPEC 11.3). Only sidecars that verify over the head are written."""
    from bundler.bundles.signatures import sidecar_name
    from bundler.core.outputs import write_new_file

    good = {
        c.where for c in checks if (not c.embedded and c.good) or c.state.value == "not_allowed"
    }
    keep = [s for s in sidecars if s.where in good and s.problem is None]
    bags = [p for p in directory.iterdir() if p.is_dir() and not p.is_symlink()]
    if not keep or len(bags) != 1:
        return []
    written = []
    for n, source in enumerate(keep):
        data = source.text.encode("utf-8")
        target = directory / sidecar_name(bags[0].name, data, first_free=n == 0)
        write_new_file(target, data)
        written.append(target)
    return written


def _remove_extracted(directory: Path) -> None:
    """Remove a bag extracted from a stored object that turned out altered at rest."""
    import shutil

    shutil.rmtree(directory, ignore_errors=True)


# Exit code over several bundles (SPEC section 5): a failed bundle first, then one that
# could not be read, then one whose storage failed; never hidden behind each other.
_EXIT_RANK = {1: 3, 3: 2, 5: 1, 0: 0}
