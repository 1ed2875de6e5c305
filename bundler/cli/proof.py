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
    _out_in_directory,
    _quiet_option,
    _say,
    _signature_checker,
    _signer,
    _source_name,
)
from bundler.cli.storage import _sign_stored
from bundler.cli.stored import _bundle_stream, _first_sidecar
from bundler.core.errors import (
    BundlerError,
    InputError,
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
    """Verify BUNDLE, then sign its bundle-head.json into the sidecar BUNDLE.sig.

    The archive is never rewritten and an existing sidecar is never replaced. Auditors
    check the signature with `ssh-keygen -Y verify -n evalbook-bundle-head-v1` or with
    `verify --allowed-signers`. For an s3:// BUNDLE the signature is stored beside the
    archive, as a countersignature when one is there already (none is replaced).
    """
    from bundler.bundles.proof import sign_bundle
    from bundler.trust.proof import write_sidecar

    if isinstance(bundle, str):
        info = _sign_stored(bundle, key_path, endpoint_url, quiet)
    else:
        if not bundle.exists() and not bundle.is_symlink():
            raise InputError(f"{bundle}: not found (no such file); nothing to sign")
        if bundle.is_dir():
            raise InputError(f"{bundle}: is a directory; sign takes a .tar.zst bundle archive")
        sidecar = Path(str(bundle) + ".sig")
        if sidecar.exists() or sidecar.is_symlink():
            raise InputError(f"{sidecar}: already exists; refusing to overwrite")
        signature, result = sign_bundle(str(bundle), _signer(key_path, quiet))
        target = write_sidecar(bundle, signature)
        info = {
            "schema": "evalbook.signed.v1",
            "bundle": str(bundle),
            "bundle_digest": result.bundle_digest,
            "report_id": result.report_id,
            "signature": str(target),
            "state": "stored",
        }
    if as_json:
        _emit_json(info)
        return
    state = "" if info["state"] == "stored" else " (already stored)"
    click.echo(
        f"Signed:      head of {shown(info['bundle_digest'])} ({shown(info['report_id'])})\n"
        f"Signature:   {shown(info['signature'])}{state}"
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
    as_json: bool,
    quiet: bool,
) -> None:
    """Write a proof that one case belongs to BUNDLE (evalbook.case_proof.v1).

    The proof holds the bundle head, its signature (embedded or the BUNDLE.sig sidecar),
    the case and its RFC 6962 audit path; `check-proof` checks it without the bundle.
    A bundle that does not verify exits 1, one that cannot be read 3. The proof is one
    line of canonical JSON.
    """
    from bundler.bundles.proof import prove_case
    from bundler.trust.proof import proof_file_bytes

    target = None if out is None else _out_in_directory(out, f"{case_id}.proof.json", "--out")
    sidecar = _first_sidecar(bundle, endpoint_url)
    with _bundle_stream(bundle, endpoint_url) as stream:
        proof = prove_case(bundle, case_id, stream=stream, sidecar_signature=sidecar)
    data = proof_file_bytes(proof)
    if target is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    from bundler.core.outputs import write_new_file

    write_new_file(target, data)
    tree_size = proof["head"]["cases_tree"]["tree_size"]
    if as_json:
        _emit_json(
            {
                "schema": "evalbook.proof_written.v1",
                "case_id": case_id,
                "leaf_index": proof["leaf_index"],
                "tree_size": tree_size,
                "bundle_digest": proof["head"].get("bundle_digest"),
                "out": str(target),
            }
        )
        return
    click.echo(
        f"Proof:       case {shown(case_id)} at leaf {proof['leaf_index']} of {tree_size} "
        f"-> {shown(target)}"
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
    type=click.Path(path_type=Path),
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
    from bundler.core.digests import parse_digest
    from bundler.trust.proof import NotProven, check_proof, read_proof_file

    if identity is not None and allowed_signers is None:
        raise UsageError("--identity needs --allowed-signers")
    if expect_bundle_digest is not None:
        try:
            parse_digest(expect_bundle_digest, source="--expect-bundle-digest")
        except BundlerError as exc:
            raise UsageError(exc.message) from exc
    checker = _signature_checker(allowed_signers, identity) if allowed_signers is not None else None
    data = read_proof_file(proof_file)
    try:
        result = check_proof(
            data,
            source=_source_name(proof_file),
            check_signature=checker,
            expect_bundle_digest=expect_bundle_digest,
        )
    except NotProven as exc:
        if not as_json:
            raise  # told on stderr by main, as every failure is
        _emit_json(
            {
                "schema": "evalbook.proof_check.v1",
                "source": _source_name(proof_file),
                "proven": False,
                "reason": exc.message,
            }
        )
        _say(f"evalbook-bundle: error: {shown(exc.message)}\n")
        sys.exit(exc.exit_code)
    anchor = {
        "signer": result.signer,
        "expected_bundle_digest": expect_bundle_digest,
        "self_consistent_only": result.signer is None,
        "description": result.anchor,
    }
    if as_json:
        _emit_json(
            {
                "schema": "evalbook.proof_check.v1",
                "source": _source_name(proof_file),
                "proven": True,
                "case_id": result.case_id,
                "leaf_index": result.leaf_index,
                "tree_size": result.tree_size,
                "bundle_digest": result.bundle_digest,
                "report_id": result.report_id,
                "anchored": result.anchored,
                "anchor": anchor,
            }
        )
        return
    click.echo(
        f"Proven:      case {shown(result.case_id)} is leaf {result.leaf_index} of "
        f"{result.tree_size} in bundle {result.bundle_digest} ({shown(result.report_id)})\n"
        f"Anchor:      {shown(result.anchor)}"
    )
