"""sign, prove and check-proof."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from bundler.cli.app import cli
from bundler.cli.common import (
    _ArchiveOrUrl,
    _emit_json,
    _key_option,
    _LocalPath,
    _out_in_directory,
    _quiet_option,
    _say,
    _source_name,
)
from bundler.core.digests import parse_digest
from bundler.core.errors import (
    BundlerError,
    UsageError,
)
from bundler.core.textsafe import shown


@cli.command(
    examples=[
        "evalbook-bundle sign bundle.tar.zst --key ~/.ssh/id_ed25519",
        "evalbook-bundle sign s3://archive/eval/reports/bundles/rpt-x/HEX.tar.zst --key auditor_key",
        "ssh-keygen -Y verify -f allowed_signers -I alice@example.org "
        "-n evalbook-bundle-head-v1 -s bundle.tar.zst.sig < bundle-head.json",
    ]
)
@click.argument("bundle", type=_ArchiveOrUrl())
@_key_option(required=True)
@click.option(
    "--endpoint-url", help="S3 endpoint for s3:// bundles (default $AWS_ENDPOINT_URL_S3)."
)
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object on stdout: what was signed, where."
)
@_quiet_option
def sign(
    bundle: Path | str, key_path: Path, endpoint_url: str | None, as_json: bool, quiet: bool
) -> None:
    """Verify BUNDLE, then sign its bundle-head.json into a sidecar beside it.

    The first sidecar is BUNDLE.sig, each further signer's BUNDLE.sig.<sha256 of the
    signature>, locally as beside an s3:// object; the archive is never rewritten and
    no sidecar is replaced. A key that has signed the head already (embedded or in a
    sidecar) writes nothing: "already signed", exit 0. Auditors check the signature
    with `ssh-keygen -Y verify -n evalbook-bundle-head-v1` or `verify --allowed-signers`.
    """
    from bundler.api.proofs import sign as sign_bundle
    from bundler.cli.export import _warn_key

    _warn_key(key_path)
    signed = sign_bundle(str(bundle), key=key_path, endpoint_url=endpoint_url)
    if as_json:
        _emit_json(signed.to_json())
        return
    state = {
        "stored": "",
        "already_stored": " (already stored)",
        "already_signed": " (already signed by this key: nothing written)",
    }.get(signed.state, "")
    click.echo(
        f"Signed:      head of {shown(str(signed.bundle_digest))} ({shown(str(signed.report_id))})\n"
        f"Signature:   {shown(signed.signature)}{state}"
    )


@cli.command(
    examples=[
        "evalbook-bundle prove bundle.tar.zst --case case-0042 --out case-0042.proof.json",
        "evalbook-bundle prove bundle.tar.zst --case case-0042 --out proofs/",
        "evalbook-bundle prove bundle.tar.zst --case case-0042 | jq .leaf_index",
    ]
)
@click.argument("bundle")
@click.option(
    "--case",
    "case_id",
    required=True,
    help="The case id to prove (for eval-banana bundles, the check id).",
)
@click.option(
    "--out",
    metavar="PATH",
    help="Write the proof here (never overwritten); a directory receives "
    "<case id>.proof.json; default stdout.",
)
@click.option(
    "--endpoint-url", help="S3 endpoint for s3:// bundles (default $AWS_ENDPOINT_URL_S3)."
)
@click.option(
    "--allowed-signers",
    type=_LocalPath(),
    help="OpenSSH allowed_signers file: some signature must verify by an allowed signer, "
    "and the proof carries the first that does.",
)
@click.option(
    "--identity",
    help="With --allowed-signers: the signer whose signature the proof carries, among several.",
)
@click.option(
    "--expect-bundle-digest",
    help="Trust anchor: the bundle digest you expect (sha256:...); no proof of another bundle.",
)
@click.option(
    "--expect-report-digest",
    help="Trust anchor: the report digest you expect (sha256:...); no proof of another report.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="With --out: one JSON object on stdout saying where the proof went "
    "(without --out the proof itself is the JSON line).",
)
@_quiet_option
def prove(
    bundle: str,
    case_id: str,
    out: str | None,
    endpoint_url: str | None,
    allowed_signers: Path | None,
    identity: str | None,
    expect_bundle_digest: str | None,
    expect_report_digest: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Write a proof that one case belongs to BUNDLE (evalbook.case_proof.v1).

    The proof holds the bundle head, one head signature (the embedded one, or a sidecar
    BUNDLE.sig, BUNDLE.sig.<hex>; with --allowed-signers and --identity, the one by that
    signer), the case and its RFC 6962 audit path; `check-proof` checks it without the
    bundle. A bundle that does not verify exits 1, one that cannot be read 3. The proof
    is one line of canonical JSON.
    """
    from bundler.api.proofs import prove as prove_case
    from bundler.trust.proof import proof_file_bytes

    target = None if out is None else _out_in_directory(out, f"{case_id}.proof.json", "--out")
    proof = prove_case(
        bundle,
        case_id,
        out=target,
        expect_bundle_digest=expect_bundle_digest,
        expect_report_digest=expect_report_digest,
        allowed_signers=allowed_signers,
        identity=identity,
        endpoint_url=endpoint_url,
    )
    if target is None:
        sys.stdout.buffer.write(proof_file_bytes(dict(proof.proof)))
        sys.stdout.flush()
        return
    if as_json:
        _emit_json(proof.to_json())
        return
    click.echo(
        f"Proof:       case {shown(case_id)} at leaf {proof.leaf_index} of {proof.tree_size} "
        f"-> {shown(str(target))}"
    )


@cli.command(
    "check-proof",
    epilog="Exit codes: 0 proven, 1 not proven, 2 usage error, 3 malformed proof.",
    examples=[
        "evalbook-bundle check-proof case-0042.proof.json --allowed-signers allowed_signers",
        "evalbook-bundle check-proof case-0042.proof.json --allowed-signers allowed_signers "
        "--identity alice@example.org --expect-bundle-digest sha256:...",
        "evalbook-bundle check-proof - --json < case-0042.proof.json | jq .proven",
    ],
)
@click.argument("proof_file")
@click.option(
    "--allowed-signers",
    type=_LocalPath(),
    help="OpenSSH allowed_signers file: check the head signature (the only anchor).",
)
@click.option("--identity", help="Signer identity to require (with --allowed-signers).")
@click.option(
    "--expect-bundle-digest",
    help="The bundle digest the signed head must name (needs --allowed-signers).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout, proven or not.")
@_quiet_option
def check_proof_cmd(
    proof_file: str,
    allowed_signers: Path | None,
    identity: str | None,
    expect_bundle_digest: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Check a case proof without the bundle: leaf, audit path, root, head and anchor.

    Any layout of the same JSON is the same proof. Only a valid signature on the head
    (--allowed-signers) anchors it; --expect-bundle-digest without one is not proven.
    """
    from bundler.api.proofs import check_proof
    from bundler.trust.proof import NotProven, read_proof_file

    if identity is not None and allowed_signers is None:
        raise UsageError("--identity needs --allowed-signers")
    if expect_bundle_digest is not None:
        try:
            parse_digest(expect_bundle_digest, source="--expect-bundle-digest")
        except BundlerError as exc:
            raise UsageError(exc.message) from exc
    # Read here: "-" is standard input, which only the command line reads.
    data = read_proof_file(proof_file)
    try:
        result = check_proof(
            data,
            allowed_signers=allowed_signers,
            identity=identity,
            expect_bundle_digest=expect_bundle_digest,
            source=_source_name(proof_file),
        )
    except NotProven as exc:
        if not as_json:
            raise  # told on stderr by main, as every failure is
        from bundler.cli.app import message_of

        # The command names its options where the library names its parameters.
        _emit_json({**exc.to_json(), "reason": message_of(exc), "input": proof_file})
        _say(f"evalbook-bundle: error: {shown(message_of(exc))}\n")
        sys.exit(exc.exit_code)
    if as_json:
        _emit_json(result.to_json())
        return
    case = ""
    if result.case_status is not None:
        score = "" if result.case_score is None else f", score {result.case_score:g}"
        case = f" (status {shown(result.case_status)}{score})"
    click.echo(
        f"Proven:      case {shown(result.case_id)}{case} is leaf {result.leaf_index} of "
        f"{result.tree_size} in bundle {result.bundle_digest} ({shown(result.report_id)})\n"
        f"Anchor:      {shown(result.anchor)}"
    )
