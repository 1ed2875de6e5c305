"""sign, prove and check-proof."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from bundler.cli.app import cli
from bundler.cli.common import (
    EPILOG_EXIT,
    _ArchiveOrUrl,
    _emit_json,
    _say,
    _signature_checker,
    _signer,
    _source_name,
)
from bundler.cli.storage import _sign_stored
from bundler.cli.stored import _bundle_stream, _first_sidecar
from bundler.errors import (
    BundlerError,
    InputError,
    UsageError,
)
from bundler.textsafe import shown


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
