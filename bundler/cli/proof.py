"""sign, prove and check-proof."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

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
    _verify_options,
)
from bundler.cli.signatures import _with_sidecars
from bundler.cli.storage import _sign_stored
from bundler.cli.stored import _bundle_stream, _verified_stored
from bundler.core.claims import VerifyOptions
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
    """Verify BUNDLE, then sign its bundle-head.json into a sidecar beside it.

    The first sidecar is BUNDLE.sig, each further signer's BUNDLE.sig.<sha256 of the
    signature>, locally as beside an s3:// object; the archive is never rewritten and
    no sidecar is replaced. A key that has signed the head already (embedded or in a
    sidecar) writes nothing: "already signed", exit 0. Auditors check the signature
    with `ssh-keygen -Y verify -n evalbook-bundle-head-v1` or `verify --allowed-signers`.
    """
    if isinstance(bundle, str):
        info = _sign_stored(bundle, key_path, endpoint_url, quiet)
    else:
        if not bundle.exists() and not bundle.is_symlink():
            raise InputError(f"{bundle}: not found (no such file); nothing to sign")
        if bundle.is_dir():
            raise InputError(f"{bundle}: is a directory; sign takes a .tar.zst bundle archive")
        info = _sign_local(bundle, key_path, quiet)
    if as_json:
        _emit_json(info)
        return
    state = {
        "stored": "",
        "already_stored": " (already stored)",
        "already_signed": " (already signed by this key: nothing written)",
    }[info["state"]]
    click.echo(
        f"Signed:      head of {shown(info['bundle_digest'])} ({shown(info['report_id'])})\n"
        f"Signature:   {shown(info['signature'])}{state}"
    )


def _sign_local(bundle: Path, key_path: Path, quiet: bool) -> dict[str, Any]:
    """``sign ARCHIVE``: verify it (every signature present checked), then add this key's
    signature as ``ARCHIVE.sig``, or ``ARCHIVE.sig.<hex>`` when that is taken (a
    countersignature, SPEC 11.3); nothing when the key has signed already."""
    from bundler.bundles.proof import sign_verified, signed_already
    from bundler.bundles.signatures import sidecar_name
    from bundler.core.outputs import write_new_file

    signature, result = sign_verified(
        str(bundle), _signer(key_path, quiet), _with_sidecars(VerifyOptions(), str(bundle), None)
    )
    info: dict[str, Any] = {
        "schema": "evalbook.signed.v1",
        "bundle": str(bundle),
        "bundle_digest": result.bundle_digest,
        "report_id": result.report_id,
    }
    already = signed_already(result, signature)
    if already is not None:
        return {**info, "signature": already, "state": "already_signed"}
    data = signature.encode("ascii")
    first = Path(sidecar_name(str(bundle), data, first_free=True))
    free = not os.path.lexists(first)
    target = Path(sidecar_name(str(bundle), data, first_free=free))
    write_new_file(target, data)
    return {**info, "signature": str(target), "state": "stored"}


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
    type=click.Path(path_type=Path),
    help="OpenSSH allowed_signers file: some signature must verify by an allowed signer, "
    "and the proof carries the first that does.",
)
@click.option(
    "--identity",
    help="With --allowed-signers: the signer whose signature the proof carries, among several.",
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
    from bundler.bundles.proof import prove_case
    from bundler.core.limits import DEFAULT_MAX_BYTES
    from bundler.trust.proof import proof_file_bytes

    target = None if out is None else _out_in_directory(out, f"{case_id}.proof.json", "--out")
    options = _verify_options(None, None, False, DEFAULT_MAX_BYTES, allowed_signers, identity)
    options = _with_sidecars(options, bundle, endpoint_url)
    with _bundle_stream(bundle, endpoint_url) as stream:
        proof = prove_case(bundle, case_id, options=options, stream=stream)
        if stream is not None:
            _verified_stored(bundle, stream, None)
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
