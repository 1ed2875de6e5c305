"""The `evalbook-bundle` command line (SPEC section 7). The only module that imports Click.

Each command parses its options into a config object, calls one library function and
prints the result: results on stdout (JSON with --json), status, progress and errors on
stderr. Errors become exit codes in one place, ``main``.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, NoReturn, TypeVar

import click
import orjson

from bundler import __version__, canonical
from bundler.archive_reader import DEFAULT_MAX_BYTES
from bundler.digests import bytes_digest, framed_digest, json_digest
from bundler.errors import (
    BundlerError,
    InputError,
    StorageError,
    UsageError,
    VerificationFailed,
)
from bundler.textsafe import shown

EPILOG_EXIT = (
    "Exit codes: 0 success/verified, 1 verification failed or --strict found something "
    "missing, 2 usage error, 3 input error, 4 permission denied, 5 object storage error."
)


# --------------------------------------------------------------------------- plumbing


def _emit_json(value: Any) -> None:
    """One result as one line of JSON Lines (SPEC 7), so `jq` reads one or many alike."""
    sys.stdout.buffer.write(orjson.dumps(value) + b"\n")
    sys.stdout.flush()


def _say(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


class _ProgressLine:
    """A one-line progress display on stderr, only when stderr is a terminal."""

    def __init__(self, enabled: bool, label: str) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.label = label
        self._last = 0.0

    def update(self, text: Callable[[], str]) -> None:
        """Redraw with ``text()`` at most ten times a second; ``text`` is called only then."""
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last > 0.1:
            self._last = now
            sys.stderr.write(f"\r{self.label}: {text()}\x1b[K")
            sys.stderr.flush()

    def done(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def _bytes_progress(line: _ProgressLine) -> Callable[[int], None] | None:
    """A byte-count callback for ``line``; None when nothing is shown, to save the calls."""
    if not line.enabled:
        return None
    return lambda n: line.update(lambda: _human_bytes(n))


def _human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{n} B"
        value /= 1024
    return f"{n} B"


# RFC 3339 date-time with whole seconds and a zone, ASCII digits only (no week dates,
# ordinal dates, fractions or other spellings datetime.fromisoformat would also take).
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[Zz]|[+-][0-9]{2}:[0-9]{2})",
    re.ASCII,
)
# The archive's tar headers hold the export time as a ustar mtime: 11 octal digits of
# seconds since 1970-01-01T00:00:00Z (SPEC section 7).
ARCHIVE_TIME_MIN = 0
ARCHIVE_TIME_MAX = 8**11 - 1  # 2242-03-16T12:56:31Z


def _parse_timestamp(value: str, option: str) -> datetime:
    """RFC 3339 with Z or an offset, whole seconds; returned in UTC.

    Raises UsageError (exit 2) naming ``option`` for anything else; never another error.
    """
    text = value.strip()
    if not _RFC3339.fullmatch(text):
        raise UsageError(
            f"{option} {value!r}: not an RFC 3339 timestamp with whole seconds and a zone "
            "(e.g. 2026-11-30T00:00:00Z)"
        )
    try:
        moment = datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
        return moment.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise UsageError(f"{option} {value!r}: not a valid time ({exc})") from exc


def _archive_time(seconds: int, source: str) -> datetime:
    """``seconds`` since the epoch as a UTC time, if a ustar mtime field can hold it."""
    if not ARCHIVE_TIME_MIN <= seconds <= ARCHIVE_TIME_MAX:
        raise UsageError(
            f"{source}: out of range; the archive records times from "
            f"1970-01-01T00:00:00Z to 2242-03-16T12:56:31Z ({ARCHIVE_TIME_MAX} seconds, the "
            "most a ustar mtime field holds)"
        )
    return datetime.fromtimestamp(seconds, UTC)


def _exported_at(value: str | None) -> datetime:
    """The export time from --exported-at, else $SOURCE_DATE_EPOCH, else now (SPEC 7).

    Raises UsageError (exit 2) naming the option or the variable when the value is not a
    time or lies outside what the archive's tar headers can hold.
    """
    if value is not None:
        moment = _parse_timestamp(value, "--exported-at")
        # Whole seconds (the pattern has no fraction), so the float is exact.
        return _archive_time(int(moment.timestamp()), f"--exported-at {value!r}")
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is not None:
        if not re.fullmatch(r"[0-9]{1,20}", epoch, re.ASCII):
            raise UsageError(
                f"SOURCE_DATE_EPOCH={epoch!r}: not a whole number of seconds since 1970-01-01"
            )
        return _archive_time(int(epoch), f"SOURCE_DATE_EPOCH={epoch}")
    return _archive_time(int(time.time()), "the current time (set --exported-at)")


def _time_source(value: str | None) -> str:
    """What gave the export time, as messages that refuse it name it."""
    if value is not None:
        return "--exported-at"
    if os.environ.get("SOURCE_DATE_EPOCH") is not None:
        return "SOURCE_DATE_EPOCH"
    return "the current time (set --exported-at)"


@contextmanager
def _input_stream(path: str) -> Iterator[BinaryIO]:
    if path == "-":
        yield sys.stdin.buffer
        return
    try:
        fh = open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
    with fh:
        yield fh


def _read_input(path: str) -> bytes:
    with _input_stream(path) as fh:
        return fh.read()


def _source_name(path: str) -> str:
    return "<stdin>" if path == "-" else path


class _ArchiveOrUrl(click.ParamType[Any]):
    """A local archive path (as ``click.Path`` gives it) or an s3:// URL kept as the
    string it is (a Path would squash its ``//``)."""

    name = "BUNDLE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.startswith("s3://"):
            return value
        return click.Path(path_type=Path).convert(value, param, ctx)


# --------------------------------------------------------------------------- commands


F = TypeVar("F", bound=Callable[..., Any])


def _archive_options(command: F) -> F:
    """--exported-at and --level, shared by export and export-eb."""
    command = click.option(
        "--level",
        type=click.IntRange(1, 19),
        default=3,
        show_default=True,
        help="zstd level (1-19 keep the window within 8 MiB).",
    )(command)
    return click.option(
        "--exported-at",
        help="RFC 3339 UTC time recorded in the bundle (default $SOURCE_DATE_EPOCH, else now).",
    )(command)


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EPILOG_EXIT)
@click.version_option(__version__, prog_name="evalbook-bundle")
@click.option("--verbose", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """Reproducibility bundles of EvalBook reports and eval-banana runs.

    Export an issued report with everything its verdict rests on into one deterministic
    .tar.zst that is also a BagIt bag, verify it offline, keep it in S3-compatible
    storage, sign its head and prove single cases.
    """
    ctx.obj = {"verbose": verbose}


@cli.command(epilog=EPILOG_EXIT)
@click.option(
    "--store", "store_root", required=True, help="Store root: a directory or s3://bucket/prefix."
)
@click.option("--report", "report_id", required=True, help="The report id to export.")
@click.option(
    "--principal",
    envvar="EVALBOOK_PRINCIPAL",
    help="Exporting principal (default $EVALBOOK_PRINCIPAL); needs report.export.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="Archive path (default ./evalbook-bundle-<report_id>.tar.zst); never overwritten.",
)
@_archive_options
@click.option(
    "--strict",
    is_flag=True,
    help="Fail (exit 1, nothing written) if anything would be unavailable.",
)
@click.option(
    "--sign-key",
    type=click.Path(path_type=Path),
    help="OpenSSH Ed25519 private key: embed bundle-head.json.sig (passphrase from $EVALBOOK_SIGN_PASSPHRASE).",
)
@click.option("--upload", "upload_to", help="Upload the new archive to s3://bucket/prefix.")
@click.option("--endpoint-url", help="S3 endpoint (default $AWS_ENDPOINT_URL_S3).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary on stdout.")
@click.option("--quiet", is_flag=True, help="No progress or summary on stderr.")
def export(
    store_root: str,
    report_id: str,
    principal: str | None,
    out: Path | None,
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
    redacted with its reason. stdout: "<bundle digest>  <path>".
    """
    from bundler.export import ExportConfig, Progress, export_bundle

    if not principal:
        raise UsageError("no principal: give --principal or set EVALBOOK_PRINCIPAL")
    moment = _exported_at(exported_at)
    signer = _signer(sign_key, quiet) if sign_key is not None else None
    config = ExportConfig(
        store_root,
        report_id,
        principal,
        moment,
        out,
        level,
        strict,
        signer,
        endpoint_url,
        exported_at_source=_time_source(exported_at),
    )
    line = _ProgressLine(not quiet, "export")

    def on_progress(p: Progress) -> None:
        line.update(lambda: f"{p.files} files, {p.cases} cases, {_human_bytes(p.bytes)}")

    try:
        result = export_bundle(config, on_progress if line.enabled else None)
    finally:
        line.done()
    summary = result.summary()
    if upload_to is not None:
        summary["upload"] = _upload(result.path, upload_to, endpoint_url, quiet)
    if as_json:
        _emit_json(summary)
    else:
        click.echo(f"{result.bundle_digest}  {shown(result.path)}")
    if not quiet:
        from bundler.render import export_text

        _say(export_text(summary))


def _verify_options(
    expect_bundle_digest: str | None,
    expect_report_digest: str | None,
    strict: bool,
    max_bytes: int,
    allowed_signers: Path | None = None,
    identity: str | None = None,
    signature: Path | None = None,
) -> Any:
    from bundler.digests import parse_digest
    from bundler.verify import VerifyOptions

    for flag, value in (
        ("--expect-bundle-digest", expect_bundle_digest),
        ("--expect-report-digest", expect_report_digest),
    ):
        if value is not None:
            try:
                parse_digest(value, source=flag)
            except BundlerError as exc:
                raise UsageError(exc.message) from exc
    check = None
    sig_text = None
    if signature is not None:
        sig_text = _read_input(str(signature)).decode("utf-8", "replace")
    if allowed_signers is not None:
        check = _signature_checker(allowed_signers, identity)
    elif identity is not None or signature is not None:
        raise UsageError("--identity and --signature need --allowed-signers")
    return VerifyOptions(
        expect_bundle_digest, expect_report_digest, strict, max_bytes, check, sig_text
    )


def _first_sidecar(location: str, endpoint_url: str | None) -> str | None:
    """The first intact signature beside a bundle (``ARCHIVE.sig``, or stored beside an
    ``s3://`` object), for prove and extract; None when there is none."""
    from bundler.proof import MAX_SIGNATURE_BYTES

    for candidate in _sidecar_signatures(location, endpoint_url):
        if candidate.problem is not None and not location.startswith("s3://"):
            raise InputError(candidate.problem)  # a local sidecar that is no signature file
        if candidate.problem is None and len(candidate.text) <= MAX_SIGNATURE_BYTES:
            return candidate.text
    return None


@contextmanager
def _bundle_stream(location: str, endpoint_url: str | None) -> Iterator[BinaryIO | None]:
    """For s3:// locations, a stream that checks the object's sha256 at EOF."""
    if not location.startswith("s3://"):
        yield None
        return
    from bundler import storage

    config = storage.StorageConfig(endpoint_url=endpoint_url)
    with storage.open_verified(storage.parse_s3_url(location), config=config) as stream:
        try:
            yield stream
        except StorageError:
            raise
        except BundlerError as exc:
            # Bytes altered at rest can make the archive unreadable before its end; the
            # digest of the whole object tells that apart from a bundle stored broken.
            try:
                stream.drain()
            except storage.AlteredAtRest as altered:
                raise altered from exc
            raise


VERIFY_HELP = """Verify bundles offline: every digest the bundle can prove.

BUNDLE is a .tar.zst archive, an extracted bag directory, or s3://bucket/key. Each claim
ends proven, unprovable (listed as unavailable or redacted, with the reason) or failed.
Verdict verified/failed/error gives exit 0/1/3 (the worst over several bundles). Without
--expect-bundle-digest, --expect-report-digest or a signature the result shows
self-consistency only. For eval-banana run directories, pass RUN_DIR with --project.
"""


@cli.command(help=VERIFY_HELP, epilog=EPILOG_EXIT)
@click.argument("bundles", nargs=-1, required=True)
@click.option(
    "--expect-bundle-digest", help="Trust anchor: the bundle digest you expect (sha256:...)."
)
@click.option(
    "--expect-report-digest", help="Trust anchor: the report digest you expect (sha256:...)."
)
@click.option(
    "--allowed-signers",
    type=click.Path(path_type=Path),
    help="OpenSSH allowed_signers file: check the head signature.",
)
@click.option("--identity", help="Signer identity to require (with --allowed-signers).")
@click.option(
    "--signature",
    help="A signature file or s3:// object to check instead of the bundle's own "
    "(default: embedded, <archive>.sig and its countersignatures, or those stored beside "
    "an s3:// bundle).",
)
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
    max_bytes: int,
    endpoint_url: str | None,
    quiet: bool,
) -> None:
    from bundler import storage
    from bundler.render import verification_markdown, verification_text

    if output_dir is not None and len(bundles) > 1:
        raise UsageError("--output-dir takes a single BUNDLE")
    if signature is not None and allowed_signers is None:
        raise UsageError("--identity and --signature need --allowed-signers")
    for location in bundles:
        if location.startswith("s3://"):
            storage.parse_s3_url(location)
    options = _verify_options(
        expect_bundle_digest,
        expect_report_digest,
        strict,
        max_bytes,
        None,
        identity if allowed_signers is None else None,
    )
    signers = _SignatureSet(allowed_signers, identity) if allowed_signers is not None else None
    explicit = _explicit_signature(signature, endpoint_url) if signature is not None else None
    codes: list[int] = []
    tally: dict[str, int] = {}
    for location in bundles:
        outcomes: list[_SignatureOutcome] = []
        result, code, kind = _verify_one(
            location,
            options,
            project_root=project_root,
            signers=signers,
            explicit=explicit,
            outcomes=outcomes,
            endpoint_url=endpoint_url,
            quiet=quiet,
        )
        codes.append(code)
        tally[kind] = tally.get(kind, 0) + 1
        if as_json:
            data = result.to_json()
            if len(bundles) > 1:
                sys.stdout.buffer.write(orjson.dumps(data) + b"\n")
                sys.stdout.flush()
            else:
                _emit_json(data)
        if not quiet:
            if kind == "altered":
                _say(_altered_text(result))
            else:
                _say(verification_text(result) + _signatures_text(outcomes))
        if output_dir is not None:
            from bundler.outputs import write_output_dir

            write_output_dir(
                output_dir,
                {
                    "verification.json": orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2)
                    + b"\n",
                    "verification.md": verification_markdown(result).encode("utf-8"),
                },
            )
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
    signers: _SignatureSet | None,
    explicit: _SignatureCandidate | None,
    outcomes: list[_SignatureOutcome],
    endpoint_url: str | None,
    quiet: bool,
) -> tuple[Any, int, str]:
    """Verify one BUNDLE of ``verify``: (result, exit code, kind of result).

    Never raises for one bundle's trouble, so that every bundle of a run is checked: a
    storage failure is a result with verdict error and exit code 5, an archive altered
    at rest a failed result (exit 1) naming the key and both digests.
    """
    from dataclasses import replace

    from bundler import storage
    from bundler.verify import Verdict, Verification, verify_bundle

    if project_root is not None:
        from bundler import ebverify

        result = ebverify.verify_run_dir(Path(location), project_root, options)
        return result, result.exit_code, _kind(result)
    line = _ProgressLine(not quiet, "verify")
    try:
        opts = options
        if signers is not None:
            found = (
                [explicit] if explicit is not None else _sidecar_signatures(location, endpoint_url)
            )
            opts = replace(
                options,
                check_signature=signers.checker(found, outcomes, embedded=explicit is None),
                signature_text=None,
            )
        with _bundle_stream(location, endpoint_url) as stream:
            result = verify_bundle(location, opts, stream=stream, progress=_bytes_progress(line))
            if stream is not None:
                result = _verified_stored(location, stream, result)
    except storage.AlteredAtRest as exc:
        outcomes.clear()
        return _altered_result(location, exc, options.strict), 1, "altered"
    except StorageError as exc:
        outcomes.clear()
        failed = Verification(
            source=location, verdict=Verdict.ERROR, error=exc.message, strict=options.strict
        )
        return failed, 5, "storage"
    except (InputError, UsageError) as exc:
        outcomes.clear()
        failed = Verification(
            source=location, verdict=Verdict.ERROR, error=exc.message, strict=options.strict
        )
        return failed, 3, "error"
    finally:
        line.done()
    result = _list_signatures(result, outcomes)
    return result, result.exit_code, _kind(result)


def _kind(result: Any) -> str:
    return {"verified": "verified", "failed": "failed", "error": "error"}[result.verdict.value]


def _altered_text(result: Any) -> str:
    claim = result.claims[0]
    return (
        f"Bundle:      {shown(result.source)}\n"
        "Verdict:     FAILED (the stored archive was altered at rest)\n"
        f"Failed:      1\n  - {shown(claim.detail)}\n"
    )


@cli.command(epilog=EPILOG_EXIT)
@click.argument("bundle")
@click.option("--json", "as_json", is_flag=True, help="Print the facts as JSON on stdout.")
@click.option("--max-bytes", type=click.IntRange(1), default=DEFAULT_MAX_BYTES, show_default=True)
@click.option("--endpoint-url", help="S3 endpoint for s3:// bundles.")
def inspect(bundle: str, as_json: bool, max_bytes: int, endpoint_url: str | None) -> None:
    """Show what a bundle holds, read through the safe reader, without the proof."""
    from bundler.render import inspect_text
    from bundler.verify import inspect_bundle

    with _bundle_stream(bundle, endpoint_url) as stream:
        info = inspect_bundle(bundle, max_bytes=max_bytes, stream=stream)
    if bundle.startswith("s3://"):
        # Signatures travel with the stored bundle (SPEC 6): name them, unchecked.
        from bundler import storage

        info["signatures"] = [
            f"s3://{sig.bucket}/{sig.key}"
            for sig in storage.stored_signatures(bundle, config=_storage_config(endpoint_url))
        ]
    if as_json:
        info = {k: v for k, v in info.items() if k != "labels"}
        _emit_json(info)
    else:
        click.echo(inspect_text(info), nl=False)


@cli.command(epilog=EPILOG_EXIT)
@click.argument("bundle")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--expect-bundle-digest", help="Trust anchor: the bundle digest you expect.")
@click.option("--expect-report-digest", help="Trust anchor: the report digest you expect.")
@click.option("--strict", is_flag=True, help="Unprovable claims fail too.")
@click.option("--max-bytes", type=click.IntRange(1), default=DEFAULT_MAX_BYTES, show_default=True)
@click.option("--endpoint-url", help="S3 endpoint for s3:// bundles.")
@click.option(
    "--allowed-signers",
    type=click.Path(path_type=Path),
    help="OpenSSH allowed_signers file: the head signature (embedded, or the sidecar "
    "beside the archive or the stored object) must verify, or nothing is extracted.",
)
@click.option("--identity", help="With --allowed-signers: the principal that must have signed.")
@click.option("--quiet", is_flag=True)
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
    quiet: bool,
) -> None:
    """Verify while extracting BUNDLE into DIRECTORY (absent or empty).

    Only regular files and directories are written, each created exclusively without
    following links and with fixed modes; unless the bundle verifies, everything written
    is removed again.
    """
    from bundler.render import verification_text
    from bundler.verify import extract_bundle

    options = _verify_options(
        expect_bundle_digest, expect_report_digest, strict, max_bytes, allowed_signers, identity
    )
    sidecar = _first_sidecar(bundle, endpoint_url)
    if sidecar is not None and options.check_signature is not None:
        options = replace(options, signature_text=sidecar)
    with _bundle_stream(bundle, endpoint_url) as stream:
        result = extract_bundle(bundle, directory, options, stream=stream)
    if result.exit_code == 0 and sidecar is not None:
        # Beside the bag, not inside it (a tag file the tag manifest does not list would
        # make the extracted bag fail): ssh-keygen -Y verify -s DIR/bundle-head.json.sig
        # < DIR/<bag>/bundle-head.json.
        from bundler.outputs import write_new_file

        write_new_file(directory / "bundle-head.json.sig", sidecar.encode("ascii", "replace"))
    if not quiet:
        _say(verification_text(result))
        if result.exit_code == 0:
            _say(f"Extracted:   {shown(str(directory))}\n")
            if sidecar is not None:
                _say(f"Signature:   {shown(str(directory / 'bundle-head.json.sig'))} (the sidecar)\n")
        else:
            _say(f"Extracted:   nothing (removed what was written to {directory})\n")
    sys.exit(result.exit_code)


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


@cli.command(epilog=EPILOG_EXIT)
@click.argument("bundle", type=_ArchiveOrUrl())
@click.option(
    "--key",
    "key_path",
    required=True,
    type=click.Path(path_type=Path),
    help="OpenSSH Ed25519 private key (passphrase from $EVALBOOK_SIGN_PASSPHRASE).",
)
@click.option("--endpoint-url", help="S3 endpoint for s3:// bundles.")
@click.option("--quiet", is_flag=True)
def sign(bundle: Path | str, key_path: Path, endpoint_url: str | None, quiet: bool) -> None:
    """Verify BUNDLE, then sign its bundle-head.json into the sidecar BUNDLE.sig.

    The archive is never rewritten and an existing sidecar is never replaced. Auditors
    check the signature with `ssh-keygen -Y verify -n evalbook-bundle-head-v1` or with
    `verify --allowed-signers`. For an s3:// BUNDLE the signature is stored beside the
    archive, as a countersignature when one is there already (none is replaced).
    """
    from bundler.proof import sign_bundle, write_sidecar

    if isinstance(bundle, str):
        _sign_stored(bundle, key_path, endpoint_url, quiet)
        return
    if not bundle.exists() and not bundle.is_symlink():
        raise InputError(f"{bundle}: not found (no such file); nothing to sign")
    if bundle.is_dir():
        raise InputError(f"{bundle}: is a directory; sign takes a .tar.zst bundle archive")
    sidecar = Path(str(bundle) + ".sig")
    if sidecar.exists() or sidecar.is_symlink():
        raise InputError(f"{sidecar}: already exists; refusing to overwrite")
    signature, result = sign_bundle(str(bundle), _signer(key_path, quiet))
    target = write_sidecar(bundle, signature)
    click.echo(shown(target))
    if not quiet:
        _say(
            f"Signed:      head of {shown(result.bundle_digest)} ({shown(result.report_id)}) "
            f"-> {shown(target)}\n"
        )


@cli.command(epilog=EPILOG_EXIT)
@click.argument("bundle")
@click.option(
    "--case",
    "case_id",
    required=True,
    help="The case id to prove (for eval-banana bundles, the check id).",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="Write the proof here (never overwritten); default stdout.",
)
@click.option("--endpoint-url", help="S3 endpoint for s3:// bundles.")
def prove(bundle: str, case_id: str, out: Path | None, endpoint_url: str | None) -> None:
    """Write a proof that one case belongs to BUNDLE (evalbook.case_proof.v1).

    The proof holds the bundle head, its signature (embedded or the BUNDLE.sig sidecar),
    the case and its RFC 6962 audit path; `check-proof` checks it without the bundle.
    A bundle that does not verify exits 1, one that cannot be read 3.
    """
    from bundler.proof import proof_file_bytes, prove_case

    sidecar = _first_sidecar(bundle, endpoint_url)
    with _bundle_stream(bundle, endpoint_url) as stream:
        proof = prove_case(bundle, case_id, stream=stream, sidecar_signature=sidecar)
    data = proof_file_bytes(proof)
    if out is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        from bundler.outputs import write_new_file

        write_new_file(out, data)
        _say(
            f"Proof:       case {shown(case_id)} at leaf {proof['leaf_index']} of "
            f"{proof['head']['cases_tree']['tree_size']} -> {shown(out)}\n"
        )


@cli.command(
    "check-proof", epilog="Exit codes: 0 proven, 1 not proven, 2 usage error, 3 malformed proof."
)
@click.argument("proof_file")
@click.option(
    "--allowed-signers",
    type=click.Path(path_type=Path),
    help="OpenSSH allowed_signers: check the head signature.",
)
@click.option("--identity", help="Signer identity to require (with --allowed-signers).")
@click.option("--expect-bundle-digest", help="The bundle digest the head must name.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
def check_proof_cmd(
    proof_file: str,
    allowed_signers: Path | None,
    identity: str | None,
    expect_bundle_digest: str | None,
    as_json: bool,
) -> None:
    """Check a case proof without the bundle: leaf, audit path, root, head and anchor.

    Any layout of the same JSON is the same proof. Only a valid signature on the head
    (--allowed-signers) anchors it; --expect-bundle-digest without one is not proven.
    """
    from dataclasses import asdict

    from bundler.digests import parse_digest
    from bundler.proof import check_proof, read_proof_file

    if identity is not None and allowed_signers is None:
        raise UsageError("--identity needs --allowed-signers")
    if expect_bundle_digest is not None:
        try:
            parse_digest(expect_bundle_digest, source="--expect-bundle-digest")
        except BundlerError as exc:
            raise UsageError(exc.message) from exc
    checker = _signature_checker(allowed_signers, identity) if allowed_signers is not None else None
    result = check_proof(
        read_proof_file(proof_file),
        source=_source_name(proof_file),
        check_signature=checker,
        expect_bundle_digest=expect_bundle_digest,
    )
    if as_json:
        _emit_json({"proven": True, **asdict(result)})
    _say(
        f"Proven:      case {shown(result.case_id)} is leaf {result.leaf_index} of "
        f"{result.tree_size} in bundle {result.bundle_digest} ({shown(result.report_id)})\n"
        f"Anchor:      {shown(result.anchor)}\n"
    )


@cli.command("export-eb", epilog=EPILOG_EXIT)
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--project",
    "project_root",
    required=True,
    type=click.Path(path_type=Path),
    help="eval-banana project root the run's definitions are found under.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="Archive path (default ./eval-banana-bundle-<run_id>.tar.zst); never overwritten.",
)
@_archive_options
@click.option(
    "--strict",
    is_flag=True,
    help="Fail (exit 1, nothing written) if any definition would be unavailable.",
)
@click.option(
    "--sign-key",
    type=click.Path(path_type=Path),
    help="OpenSSH Ed25519 private key: embed bundle-head.json.sig (passphrase from $EVALBOOK_SIGN_PASSPHRASE).",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary on stdout.")
@click.option("--quiet", is_flag=True, help="No progress or summary on stderr.")
def export_eb(
    run_dir: Path,
    project_root: Path,
    out: Path | None,
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
    holding symbolic links is refused (exit 3). stdout: "<bundle digest>  <path>".
    """
    from bundler.export import Progress
    from bundler.export_eb import EbExportConfig, export_eb_bundle
    from bundler.render import export_eb_text

    moment = _exported_at(exported_at)
    signer = _signer(sign_key, quiet) if sign_key is not None else None
    config = EbExportConfig(
        run_dir,
        project_root,
        moment,
        out,
        level,
        strict,
        signer,
        exported_at_source=_time_source(exported_at),
    )
    line = _ProgressLine(not quiet, "export-eb")

    def on_progress(p: Progress) -> None:
        line.update(lambda: f"{p.files} files, {_human_bytes(p.bytes)}")

    try:
        result = export_eb_bundle(config, on_progress if line.enabled else None)
    finally:
        line.done()
    summary = result.summary()
    if as_json:
        _emit_json(summary)
    else:
        click.echo(f"{result.bundle_digest}  {shown(result.path)}")
    if not quiet:
        _say(export_eb_text(summary))


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


# ------------------------------------------------------------ signing, storage hooks


def _signer(key_path: Path, quiet: bool) -> Callable[[bytes], str]:
    from bundler import sshsig

    passphrase = os.environ.get("EVALBOOK_SIGN_PASSPHRASE")
    key = sshsig.load_private_key(key_path, passphrase=passphrase.encode() if passphrase else None)
    warning = sshsig.key_permissions_warning(key_path)
    if warning:  # a security warning is shown even with --quiet
        _say(f"warning: {shown(warning)}\n")
    return lambda message: sshsig.sign(message, key)


def _signature_checker(
    allowed_signers: Path, identity: str | None
) -> Callable[[bytes, str | None], str]:
    from bundler import sshsig

    allowed = sshsig.load_allowed_signers(allowed_signers)

    def check(head: bytes, signature_text: str | None) -> str:
        if signature_text is None:
            raise sshsig.SignatureError("no signature: neither bundle-head.json.sig nor a sidecar")
        try:
            verified = sshsig.verify(head, signature_text, allowed, identity=identity)
        except sshsig.SignatureError as exc:
            # The claim is already called "signature"; sshsig names its source the same.
            raise sshsig.SignatureError(exc.message.removeprefix("signature: ")) from exc
        return f"{verified.principal}, key {verified.fingerprint}"

    return check


def _storage_config(endpoint_url: str | None) -> Any:
    from bundler import storage

    return storage.StorageConfig(endpoint_url=endpoint_url)


_NotVerified = VerificationFailed  # a bundle a command must verify first does not (exit 1)


# Local signature files beside an archive: ARCHIVE.sig and ARCHIVE.sig.<hex>, the names
# `download` gives the stored ones (docs/format.md, storage).
_LOCAL_COUNTERSIGNATURE = re.compile(r"\.sig\.[0-9a-f]{64}")


@dataclass(frozen=True)
class _SignatureCandidate:
    source: str  # where it was found, as printed
    text: str
    problem: str | None = None  # why it cannot verify before it is checked


@dataclass(frozen=True)
class _SignatureOutcome:
    source: str
    signer: str | None  # "ID, key SHA256:..." when it verified
    detail: str | None  # why not, otherwise


def _local_signatures(archive: str) -> list[_SignatureCandidate]:
    """ARCHIVE.sig, then ARCHIVE.sig.<hex> in name order; none for a directory."""
    path = Path(archive)
    if not path.is_file():
        return []
    names = [path.name + ".sig"]
    with contextlib.suppress(OSError):
        names += sorted(
            entry.name
            for entry in os.scandir(path.parent)
            if entry.name.startswith(path.name)
            and _LOCAL_COUNTERSIGNATURE.fullmatch(entry.name[len(path.name) :])
        )
    from bundler.proof import MAX_SIGNATURE_BYTES, read_bounded

    found = []
    for name in names:
        candidate = path.with_name(name)
        if not os.path.lexists(candidate):
            continue
        try:
            # Regular files only, opened without blocking: a FIFO cannot hang verify.
            data = read_bounded(str(candidate), limit=MAX_SIGNATURE_BYTES, what="signature")
        except InputError as exc:
            found.append(_SignatureCandidate(str(candidate), "", exc.message))
            continue
        found.append(_SignatureCandidate(str(candidate), data.decode("utf-8", "replace")))
    return found


def _sidecar_signatures(location: str, endpoint_url: str | None) -> list[_SignatureCandidate]:
    """The signatures stored or lying beside a bundle (not the embedded one)."""
    if not location.startswith("s3://"):
        return _local_signatures(location)
    from bundler import storage

    return [
        _SignatureCandidate(sig.url, sig.text, sig.problem)
        for sig in storage.stored_signatures(location, config=_storage_config(endpoint_url))
    ]


def _explicit_signature(value: str, endpoint_url: str | None) -> _SignatureCandidate:
    """``--signature`` as a file, ``-`` (stdin) or an s3:// URL."""
    if value.startswith("s3://"):
        from bundler import storage

        stored = storage.read_signature(value, config=_storage_config(endpoint_url))
        return _SignatureCandidate(stored.url, stored.text)
    return _SignatureCandidate(_source_name(value), _read_input(value).decode("utf-8", "replace"))


class _SignatureSet:
    """Checks every signature of a bundle against one allowed_signers file.

    Several signers may sign one bundle (the exporter, auditors countersigning), so the
    head is anchored when at least one signature verifies; every outcome is kept, to be
    listed with the result.
    """

    def __init__(self, allowed_signers: Path, identity: str | None) -> None:
        from bundler import sshsig

        self.allowed = sshsig.load_allowed_signers(allowed_signers)
        self.identity = identity

    def checker(
        self,
        candidates: list[_SignatureCandidate],
        outcomes: list[_SignatureOutcome],
        *,
        embedded: bool,
    ) -> Callable[[bytes, str | None], str]:
        """A ``VerifyOptions.check_signature`` that checks the embedded signature (when
        ``embedded``) and ``candidates``, appending each outcome to ``outcomes``."""
        from bundler import sshsig
        from bundler.export import HEAD_SIG_FILE

        def check(head: bytes, embedded_text: str | None) -> str:
            found = list(candidates)
            if embedded and embedded_text is not None:
                found.insert(0, _SignatureCandidate(HEAD_SIG_FILE, embedded_text))
            if not found:
                raise sshsig.SignatureError(
                    "no signature: neither bundle-head.json.sig nor a sidecar"
                )
            for candidate in found:
                outcomes.append(self._check_one(head, candidate))
            signers = [o.signer for o in outcomes if o.signer is not None]
            if signers:
                return " and ".join(dict.fromkeys(signers))
            raise sshsig.SignatureError(
                f"none of {len(outcomes)} signature(s) verifies: "
                + "; ".join(f"{o.source}: {o.detail}" for o in outcomes)
            )

        return check

    def _check_one(self, head: bytes, candidate: _SignatureCandidate) -> _SignatureOutcome:
        from bundler import sshsig

        if candidate.problem is not None:
            return _SignatureOutcome(candidate.source, None, candidate.problem)
        try:
            verified = sshsig.verify(
                head, candidate.text, self.allowed, identity=self.identity, source=candidate.source
            )
        except BundlerError as exc:
            return _SignatureOutcome(
                candidate.source, None, exc.message.removeprefix(f"{candidate.source}: ")
            )
        return _SignatureOutcome(
            candidate.source, f"{verified.principal}, key {verified.fingerprint}", None
        )


def _list_signatures(result: Any, outcomes: list[_SignatureOutcome]) -> Any:
    """``result`` with its signature claim naming every signature and its state."""
    from dataclasses import replace

    if not outcomes:
        return result
    good = sum(o.signer is not None for o in outcomes)
    listing = f"{good} of {len(outcomes)} signature(s) verify: " + "; ".join(
        f"{o.source}: verified ({o.signer})"
        if o.signer
        else f"{o.source}: not verified ({o.detail})"
        for o in outcomes
    )
    claims = tuple(
        replace(c, detail=listing) if c.group == 2 and c.subject == "signature" else c
        for c in result.claims
    )
    return replace(result, claims=claims)


def _signatures_text(outcomes: list[_SignatureOutcome]) -> str:
    if not outcomes:
        return ""
    good = sum(o.signer is not None for o in outcomes)
    lines = [f"Signatures:  {len(outcomes)} ({good} verified)"]
    for o in outcomes:
        state = f"verified: {o.signer}" if o.signer else f"not verified: {o.detail}"
        lines.append(f"  - {shown(o.source)}: {shown(state)}")
    return "\n".join(lines) + "\n"


def _altered_result(location: str, exc: Any, strict: bool) -> Any:
    """A failed verification for an archive altered at rest (SPEC section 6)."""
    from bundler.verify import Claim, State, Verdict, Verification

    claim = Claim(
        2,
        f"stored archive {exc.url} holds the bytes recorded for it",
        State.FAILED,
        expected=exc.recorded,
        observed=exc.observed,
        detail=exc.message,
    )
    return Verification(source=location, verdict=Verdict.FAILED, strict=strict, claims=(claim,))


def _check_stored_key(location: str, result: Any) -> Any:
    """``result`` with a claim that the archive's key names the bundle it holds."""
    from dataclasses import replace

    from bundler import storage
    from bundler.verify import Claim, State, Verdict

    named = storage.key_names(storage.parse_s3_url(location).key)
    if named is None or result.bundle_digest is None:
        return result
    report_id, digest = named
    subject = "storage key names the bundle it holds"
    if (report_id, digest) == (result.report_id, result.bundle_digest):
        claim = Claim(2, subject, State.PROVEN, expected=digest, observed=result.bundle_digest)
        return replace(result, claims=(*result.claims, claim))
    claim = Claim(
        2,
        subject,
        State.FAILED,
        expected=f"{report_id} {digest}",
        observed=f"{result.report_id} {result.bundle_digest}",
        detail=f"{location}: altered at rest: the key names bundle {digest} of {report_id}, "
        f"but the archive holds bundle {result.bundle_digest} of {result.report_id}",
    )
    return replace(result, verdict=Verdict.FAILED, claims=(*result.claims, claim))


def _verified_stored(location: str, stream: Any, result: Any) -> Any:
    """After verifying a stored archive: read what the verifier left, so that bytes
    altered at rest raise AlteredAtRest even when they made the archive unreadable,
    then check that the key names the bundle."""
    if not stream.verified:
        stream.drain()
    return _check_stored_key(location, result)


# Exit code over several bundles (SPEC section 5): a failed bundle first, then one that
# could not be read, then one whose storage failed; never hidden behind each other.
_EXIT_RANK = {1: 3, 3: 2, 5: 1, 0: 0}


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
    from bundler.verify import Verdict, VerifyOptions, read_and_verify

    location = storage.parse_s3_url(destination)
    storage.check_archive_prefix(location)
    result, _ = read_and_verify(str(path), VerifyOptions())
    if result.verdict is Verdict.ERROR:
        raise InputError(f"{path}: cannot be read as a bundle ({result.error}); refusing to upload")
    if result.verdict is not Verdict.VERIFIED or result.bundle_digest is None:
        detail = "; ".join(f"{c.subject}: {c.detail}" for c in result.failures()[:3])
        raise _NotVerified(f"{path}: bundle does not verify ({detail}); refusing to upload")
    line = _ProgressLine(not quiet, "upload")
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
            sidecars=[Path(c.source) for c in _local_signatures(str(path))],
            progress=_bytes_progress(line),
        )
    finally:
        line.done()
    info: dict[str, Any] = uploaded.as_dict()
    if not quiet:
        state = "already archived" if uploaded.status.value == "already_archived" else "uploaded"
        _say(
            f"Upload:      {state}: {shown(uploaded.url)} ({uploaded.size} bytes, checksum {uploaded.checksum_algorithm})\n"
        )
        for sig in uploaded.signatures:
            state = "already stored" if sig.status.value == "already_archived" else "stored"
            _say(f"Signature:   {state}: {shown(sig.url)}\n")
    return info


def _sign_stored(url: str, key_path: Path, endpoint_url: str | None, quiet: bool) -> None:
    """``sign s3://...``: verify the stored bundle, sign its head, and add the signature
    beside the archive (a countersignature when it is signed already)."""
    from bundler import storage
    from bundler.proof import head_of
    from bundler.verify import Verdict, VerifyOptions, read_and_verify

    location = storage.parse_s3_url(url)
    sign = _signer(key_path, quiet)
    with _bundle_stream(url, endpoint_url) as stream:
        result, contents = read_and_verify(url, VerifyOptions(), stream=stream)
        if stream is not None:
            result = _verified_stored(url, stream, result)
    if result.verdict is Verdict.ERROR or contents is None:
        raise InputError(f"{url}: cannot be read as a bundle ({result.error}); refusing to sign")
    if result.verdict is not Verdict.VERIFIED:
        detail = "; ".join(f"{c.subject}: {c.detail}" for c in result.failures()[:3])
        raise _NotVerified(f"{url}: bundle does not verify ({detail}); refusing to sign")
    stored = storage.add_signature(
        location, sign(head_of(contents)).encode("ascii"), config=_storage_config(endpoint_url)
    )
    click.echo(shown(stored.url))
    if not quiet:
        state = "already stored" if stored.status.value == "already_archived" else "stored"
        _say(
            f"Signed:      head of {shown(result.bundle_digest)} ({shown(result.report_id)}) "
            f"-> {shown(stored.url)} ({state})\n"
        )


@cli.command(epilog=EPILOG_EXIT)
@click.argument("bundle", type=click.Path(path_type=Path, dir_okay=False))
@click.argument("destination")
@click.option("--retain-until", help="S3 Object Lock: keep the object until this RFC 3339 time.")
@click.option(
    "--retention-mode",
    type=click.Choice(["GOVERNANCE", "COMPLIANCE"]),
    help="Object Lock mode (with --retain-until; default GOVERNANCE).",
)
@click.option("--endpoint-url", help="S3 endpoint (default $AWS_ENDPOINT_URL_S3).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@click.option("--quiet", is_flag=True)
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
    identical archive already there is reported as already archived. A sidecar
    BUNDLE.sig is stored beside it. Credentials come from the standard AWS chain.
    """
    if retention_mode is not None and retain_until is None:
        raise UsageError("--retention-mode needs --retain-until")
    until = _parse_timestamp(retain_until, "--retain-until") if retain_until is not None else None
    info = _upload(bundle, destination, endpoint_url, quiet, until, retention_mode)
    if as_json:
        _emit_json(info)
    else:
        click.echo(f"s3://{info['bucket']}/{info['key']}")


@cli.command("list", epilog=EPILOG_EXIT)
@click.argument("prefix")
@click.option("--report", "report_id", help="Only the bundles of this report id.")
@click.option("--endpoint-url", help="S3 endpoint (default $AWS_ENDPOINT_URL_S3).")
@click.option("--json", "as_json", is_flag=True, help="JSON Lines on stdout, one bundle per line.")
def list_cmd(prefix: str, report_id: str | None, endpoint_url: str | None, as_json: bool) -> None:
    """List the bundles stored under s3://bucket/prefix (report id, digest, size, time,
    and how many signatures are stored beside each; they are not checked here)."""
    from bundler import storage

    location = storage.parse_s3_url(prefix)
    count = 0
    for item in storage.list_bundles(
        location, report_id=report_id, config=_storage_config(endpoint_url)
    ):
        count += 1
        if as_json:
            sys.stdout.buffer.write(orjson.dumps(item.as_dict()) + b"\n")
        else:
            signed = f"signed({len(item.signature_keys)})" if item.signed else "unsigned"
            click.echo(
                f"{shown(item.report_id)}  {item.bundle_digest}  {item.size:>12}  "
                f"{item.last_modified.isoformat()}  {signed:<10}  "
                f"s3://{location.bucket}/{shown(item.key)}"
            )
    if not as_json:
        _say(f"{count} bundle(s)\n")


@cli.command(epilog=EPILOG_EXIT)
@click.argument("source")
@click.argument("path")
@click.option("--endpoint-url", help="S3 endpoint (default $AWS_ENDPOINT_URL_S3).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@click.option("--quiet", is_flag=True)
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
                src, sys.stdout.buffer, config=config, progress=_bytes_progress(line)
            )
        finally:
            line.done()
        if not quiet:
            _say(
                f"Download:    {shown(result.url)} -> stdout ({result.size} bytes, sha256 matches metadata)\n"
            )
        return
    target = storage.download_path(src, path)
    try:
        result = storage.download_bundle(src, target, config=config, progress=_bytes_progress(line))
    finally:
        line.done()
    if as_json:
        _emit_json(result.as_dict())
    else:
        click.echo(shown(result.path))
    if not quiet:
        _say(
            f"Download:    {shown(result.url)} -> {shown(result.path)} ({result.size} bytes, sha256 matches metadata)\n"
        )
        for sig_path in result.signature_paths:
            _say(f"Signature:   {shown(sig_path)}\n")


# ------------------------------------------------------------------------------ main


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where SIGINT raises KeyboardInterrupt.

    A KeyboardInterrupt, so every ``finally`` and ``except BaseException`` that cleans up
    after SIGINT (temporary ``*.partial`` files, half-extracted directories) runs for
    SIGTERM too; ``main`` then exits 143 instead of 130.
    """


def _on_sigterm(signum: int, frame: object) -> None:
    # One is enough: a second SIGTERM must not cut the cleanup the first one started.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()


class _EscapedStderr:
    """stderr for Click's own messages, which quote arguments: each line passes ``shown``."""

    def write(self, text: str) -> int:
        sys.stderr.write("\n".join(shown(line) for line in text.split("\n")))
        return len(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return False


def _interrupted(exc: BaseException) -> NoReturn:
    terminated = isinstance(exc, Terminated) or isinstance(exc.__cause__, Terminated)
    _say(f"evalbook-bundle: {'terminated' if terminated else 'interrupted'}\n")
    sys.exit(143 if terminated else 130)


def main(argv: list[str] | None = None) -> NoReturn:
    """Run the CLI; BundlerError and Click errors become exit codes here only.

    Error messages name files and values from bundles, stores and runs, so they are
    printed through ``textsafe.shown``. SIGTERM is handled as SIGINT is: the same cleanup
    runs, then the exit code is 143 (SIGINT: 130).
    """
    args = sys.argv[1:] if argv is None else argv
    verbose = "--verbose" in args
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:  # a terminal that is not UTF-8 gets escapes, not a crash
            reconfigure(errors="backslashreplace")
    previous = None
    # ValueError: not the main thread (an embedding test); signals stay as they are.
    with contextlib.suppress(ValueError):
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        cli.main(args=args, prog_name="evalbook-bundle", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort as exc:
        _interrupted(exc)
    except KeyboardInterrupt as exc:  # outside Click's own handling (before or after it)
        _interrupted(exc)
    except click.ClickException as exc:
        exc.show(file=_EscapedStderr())  # type: ignore[arg-type]
        sys.exit(2 if isinstance(exc, click.UsageError | click.BadParameter) else exc.exit_code)
    except BundlerError as exc:
        if verbose:  # the traceback quotes the message too
            _say("".join(shown(line) + "\n" for line in traceback.format_exc().splitlines()))
        _say(f"evalbook-bundle: error: {shown(exc.message)}\n")
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(1)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    sys.exit(0)
