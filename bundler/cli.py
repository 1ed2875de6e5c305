"""The `evalbook-bundle` command line (SPEC section 7). The only module that imports Click.

Each command parses its options into a config object, calls one library function and
prints the result: results on stdout (JSON with --json), status, progress and errors on
stderr. Errors become exit codes in one place, ``main``.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, NoReturn, TypeVar

import click
import orjson

from bundler import __version__, canonical
from bundler.archive_reader import DEFAULT_MAX_BYTES
from bundler.digests import bytes_digest, framed_digest, json_digest
from bundler.errors import BundlerError, InputError, UsageError

EPILOG_EXIT = (
    "Exit codes: 0 success/verified, 1 verification failed or --strict found something "
    "missing, 2 usage error, 3 input error, 4 permission denied, 5 object storage error."
)


# --------------------------------------------------------------------------- plumbing


def _emit_json(value: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n")
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


def _parse_timestamp(value: str) -> datetime:
    """RFC 3339 with Z or an offset, whole seconds; returned in UTC."""
    text = value.strip()
    if len(text) < 20 or text[10] not in "Tt" or "." in text:
        raise click.BadParameter(
            f"{value!r} is not an RFC 3339 timestamp with whole seconds (e.g. 2026-11-30T00:00:00Z)"
        )
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError as exc:
        raise click.BadParameter(f"{value!r} is not an RFC 3339 timestamp ({exc})") from exc
    if moment.tzinfo is None:
        raise click.BadParameter(f"{value!r} has no time zone (use Z or an offset)")
    return moment.astimezone(UTC)


def _exported_at(value: str | None) -> datetime:
    if value is not None:
        return _parse_timestamp(value)
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is not None:
        if not epoch.isdigit():
            raise UsageError(f"SOURCE_DATE_EPOCH={epoch!r} is not a whole number of seconds")
        return datetime.fromtimestamp(int(epoch), UTC)
    return datetime.now(UTC).replace(microsecond=0)


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
        store_root, report_id, principal, moment, out, level, strict, signer, endpoint_url
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
        click.echo(f"{result.bundle_digest}  {result.path}")
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


@contextmanager
def _bundle_stream(location: str, endpoint_url: str | None) -> Iterator[BinaryIO | None]:
    """For s3:// locations, a stream that checks the object's sha256 at EOF."""
    if not location.startswith("s3://"):
        yield None
        return
    from bundler import storage

    config = storage.StorageConfig(endpoint_url=endpoint_url)
    with storage.open_verified(storage.parse_s3_url(location), config=config) as stream:
        yield stream


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
    type=click.Path(path_type=Path),
    help="A sidecar signature (default: embedded, or <archive>.sig).",
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
    signature: Path | None,
    project_root: Path | None,
    strict: bool,
    as_json: bool,
    output_dir: Path | None,
    max_bytes: int,
    endpoint_url: str | None,
    quiet: bool,
) -> None:
    from bundler.render import verification_markdown, verification_text
    from bundler.verify import Verification, verify_bundle

    if output_dir is not None and len(bundles) > 1:
        raise UsageError("--output-dir takes a single BUNDLE")
    options = _verify_options(
        expect_bundle_digest,
        expect_report_digest,
        strict,
        max_bytes,
        allowed_signers,
        identity,
        signature,
    )
    worst = 0
    for location in bundles:
        result: Verification
        if project_root is not None:
            from bundler import ebverify

            result = ebverify.verify_run_dir(Path(location), project_root, options)
        else:
            opts = options
            if (
                allowed_signers is not None
                and signature is None
                and not location.startswith("s3://")
            ):
                sidecar = Path(location + ".sig")
                if sidecar.is_file():
                    from dataclasses import replace

                    opts = replace(options, signature_text=sidecar.read_text("utf-8", "replace"))
            line = _ProgressLine(not quiet, "verify")
            try:
                with _bundle_stream(location, endpoint_url) as stream:
                    result = verify_bundle(
                        location, opts, stream=stream, progress=_bytes_progress(line)
                    )
            finally:
                line.done()
        worst = max(worst, result.exit_code, key=lambda c: {0: 0, 1: 1, 3: 2}[c])
        if as_json:
            data = result.to_json()
            if len(bundles) > 1:
                sys.stdout.buffer.write(orjson.dumps(data) + b"\n")
            else:
                _emit_json(data)
        if not quiet:
            _say(verification_text(result))
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
    sys.exit(worst)


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
@click.option("--quiet", is_flag=True)
def extract(
    bundle: str,
    directory: Path,
    expect_bundle_digest: str | None,
    expect_report_digest: str | None,
    strict: bool,
    max_bytes: int,
    endpoint_url: str | None,
    quiet: bool,
) -> None:
    """Verify while extracting BUNDLE into DIRECTORY (absent or empty).

    Only regular files and directories are written, each created exclusively without
    following links and with fixed modes; unless the bundle verifies, everything written
    is removed again.
    """
    from bundler.render import verification_text
    from bundler.verify import extract_bundle

    options = _verify_options(expect_bundle_digest, expect_report_digest, strict, max_bytes)
    with _bundle_stream(bundle, endpoint_url) as stream:
        result = extract_bundle(bundle, directory, options, stream=stream)
    if not quiet:
        _say(verification_text(result))
        if result.exit_code == 0:
            _say(f"Extracted:   {directory}\n")
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
@click.argument("bundle", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--key",
    "key_path",
    required=True,
    type=click.Path(path_type=Path),
    help="OpenSSH Ed25519 private key (passphrase from $EVALBOOK_SIGN_PASSPHRASE).",
)
@click.option("--quiet", is_flag=True)
def sign(bundle: Path, key_path: Path, quiet: bool) -> None:
    """Verify BUNDLE, then sign its bundle-head.json into the sidecar BUNDLE.sig.

    The archive is never rewritten and an existing sidecar is never replaced. Auditors
    check the signature with `ssh-keygen -Y verify -n evalbook-bundle-head-v1` or with
    `verify --allowed-signers`.
    """
    from bundler.proof import sign_bundle, write_sidecar

    sidecar = Path(str(bundle) + ".sig")
    if sidecar.exists() or sidecar.is_symlink():
        raise InputError(f"{sidecar}: already exists; refusing to overwrite")
    signature, result = sign_bundle(str(bundle), _signer(key_path, quiet))
    target = write_sidecar(bundle, signature)
    click.echo(str(target))
    if not quiet:
        _say(f"Signed:      head of {result.bundle_digest} ({result.report_id}) -> {target}\n")


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
    """
    from bundler.proof import prove_case

    sidecar = None
    if not bundle.startswith("s3://") and Path(bundle + ".sig").is_file():
        sidecar = Path(bundle + ".sig").read_text("ascii", "replace")
    with _bundle_stream(bundle, endpoint_url) as stream:
        proof = prove_case(bundle, case_id, stream=stream, sidecar_signature=sidecar)
    data = canonical.dumps(proof) + b"\n"
    if out is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        from bundler.outputs import write_new_file

        write_new_file(out, data)
        _say(
            f"Proof:       case {case_id} at leaf {proof['leaf_index']} of {proof['head']['cases_tree']['tree_size']} -> {out}\n"
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
    """Check a case proof without the bundle: leaf, audit path, root, head and anchor."""
    from dataclasses import asdict

    from bundler.proof import check_proof

    if identity is not None and allowed_signers is None:
        raise UsageError("--identity needs --allowed-signers")
    if expect_bundle_digest is not None:
        _verify_options(expect_bundle_digest, None, False, DEFAULT_MAX_BYTES)
    checker = _signature_checker(allowed_signers, identity) if allowed_signers is not None else None
    result = check_proof(
        _read_input(proof_file),
        source=_source_name(proof_file),
        check_signature=checker,
        expect_bundle_digest=expect_bundle_digest,
    )
    if as_json:
        _emit_json({"proven": True, **asdict(result)})
    _say(
        f"Proven:      case {result.case_id} is leaf {result.leaf_index} of {result.tree_size} in bundle "
        f"{result.bundle_digest} ({result.report_id})\nAnchor:      {result.anchor}\n"
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
    from bundler.export_eb import EbExportConfig, export_eb_bundle, export_text

    moment = _exported_at(exported_at)
    signer = _signer(sign_key, quiet) if sign_key is not None else None
    config = EbExportConfig(run_dir, project_root, moment, out, level, strict, signer)
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
        click.echo(f"{result.bundle_digest}  {result.path}")
    if not quiet:
        _say(export_text(summary))


AUDIT_HELP = """Re-derive an issued report's verdict from a bundle (SPEC section 12).

BUNDLE is a .tar.zst archive, an extracted bag directory, or s3://bucket/key. The bundle is
verified first; unless it verifies nothing is audited (exit 3). Every check is then
re-derived from the exported cases, the suite and the dataset manifests and compared with
the report body and the check results: exit 0 consistent, 1 at least one disagreement,
3 error. Items that cannot be re-derived are listed with their reason.
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
    "--strict", is_flag=True, help="Unprovable claims fail the verification, and so the audit."
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
        _say(f"warning: {warning}\n")
    return lambda message: sshsig.sign(message, key)


def _signature_checker(
    allowed_signers: Path, identity: str | None
) -> Callable[[bytes, str | None], str]:
    from bundler import sshsig

    allowed = sshsig.load_allowed_signers(allowed_signers)

    def check(head: bytes, signature_text: str | None) -> str:
        if signature_text is None:
            raise sshsig.SignatureError("no signature: neither bundle-head.json.sig nor a sidecar")
        verified = sshsig.verify(head, signature_text, allowed, identity=identity)
        return f"{verified.principal}, key {verified.fingerprint}"

    return check


def _storage_config(endpoint_url: str | None) -> Any:
    from bundler import storage

    return storage.StorageConfig(endpoint_url=endpoint_url)


def _upload(
    path: Path,
    destination: str,
    endpoint_url: str | None,
    quiet: bool,
    retain_until: datetime | None = None,
    retention_mode: str | None = None,
) -> dict[str, Any]:
    """Verify the archive, then upload it (and its sidecar signature, if any)."""
    from bundler import storage
    from bundler.verify import VerifyOptions, read_verified

    location = storage.parse_s3_url(destination)
    result, _ = read_verified(str(path), VerifyOptions(), action="upload")
    if result.bundle_digest is None:
        raise InputError(f"{path}: not a bundle archive (no bundle digest); refusing to upload")
    sidecar = Path(str(path) + ".sig")
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
            sidecar=sidecar if sidecar.is_file() else None,
            progress=_bytes_progress(line),
        )
    finally:
        line.done()
    info: dict[str, Any] = uploaded.as_dict()
    if not quiet:
        state = "already archived" if uploaded.status.value == "already_archived" else "uploaded"
        _say(
            f"Upload:      {state}: {uploaded.url} ({uploaded.size} bytes, checksum {uploaded.checksum_algorithm})\n"
        )
    return info


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
    until = _parse_timestamp(retain_until) if retain_until is not None else None
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
    """List the bundles stored under s3://bucket/prefix (report id, digest, size, time)."""
    from bundler import storage

    count = 0
    for item in storage.list_bundles(
        storage.parse_s3_url(prefix), report_id=report_id, config=_storage_config(endpoint_url)
    ):
        count += 1
        if as_json:
            sys.stdout.buffer.write(orjson.dumps(item.as_dict()) + b"\n")
        else:
            click.echo(
                f"{item.report_id}  {item.bundle_digest}  {item.size:>12}  {item.last_modified.isoformat()}  s3://{storage.parse_s3_url(prefix).bucket}/{item.key}"
            )
    if not as_json:
        _say(f"{count} bundle(s)\n")


@cli.command(epilog=EPILOG_EXIT)
@click.argument("source")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--endpoint-url", help="S3 endpoint (default $AWS_ENDPOINT_URL_S3).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@click.option("--quiet", is_flag=True)
def download(source: str, path: Path, endpoint_url: str | None, as_json: bool, quiet: bool) -> None:
    """Download s3://bucket/key to PATH, only if its bytes hash to its sha256 metadata.

    The object streams to a temporary file beside PATH and is renamed into place after
    the SHA-256 matches; a mismatch exits 5 and leaves nothing at PATH. PATH is never
    overwritten. A sidecar signature (<key>.sig) comes along as PATH.sig.
    """
    from bundler import storage

    line = _ProgressLine(not quiet, "download")
    try:
        result = storage.download_bundle(
            storage.parse_s3_url(source),
            path,
            config=_storage_config(endpoint_url),
            progress=_bytes_progress(line),
        )
    finally:
        line.done()
    if as_json:
        _emit_json(result.as_dict())
    else:
        click.echo(str(result.path))
    if not quiet:
        _say(
            f"Download:    {result.url} -> {result.path} ({result.size} bytes, sha256 matches metadata)\n"
        )


# ------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> NoReturn:
    """Run the CLI; BundlerError and Click errors become exit codes here only."""
    args = sys.argv[1:] if argv is None else argv
    verbose = "--verbose" in args
    try:
        cli.main(args=args, prog_name="evalbook-bundle", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        _say("evalbook-bundle: aborted\n")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show(file=sys.stderr)
        sys.exit(2 if isinstance(exc, click.UsageError | click.BadParameter) else exc.exit_code)
    except BundlerError as exc:
        if verbose:
            traceback.print_exc()
        _say(f"evalbook-bundle: error: {exc.message}\n")
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(1)
    sys.exit(0)
