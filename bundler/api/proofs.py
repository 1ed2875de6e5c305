"""The library's functions for single-case proofs and head signatures (SPEC 11;
``prove``, ``check-proof``, ``sign``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bundler.api import params
from bundler.api.bundles import bundle_at, output_path, signer_for
from bundler.api.results import ProofCheckResult, ProofResult, SignResult
from bundler.core.errors import ParameterError


def prove(
    bundle: str | os.PathLike[str],
    case_id: str,
    *,
    out: str | os.PathLike[str] | None = None,
    expect_bundle_digest: str | None = None,
    expect_report_digest: str | None = None,
    allowed_signers: str | os.PathLike[str] | None = None,
    identity: str | None = None,
    endpoint_url: str | None = None,
) -> ProofResult:
    """A proof (``evalbook.case_proof.v1``) that one case belongs to a verified bundle
    (``prove``); written to ``out`` (a file, or a directory that receives
    ``<case_id>.proof.json``; never overwritten) when given.

    Every signature present is checked (SPEC 11.3); the proof carries one head
    signature: with ``allowed_signers`` (and ``identity``, to choose among several
    signers) the first that verifies by an allowed signer, else the first valid one,
    the embedded one before the sidecars. ``expect_bundle_digest`` and
    ``expect_report_digest`` anchor the bundle as for ``verify``: no proof is made of a
    bundle that is not the one expected.

    Raises VerificationFailed (1) when the bundle does not verify (with
    ``allowed_signers``: when no signature verifies by an allowed signer), InputError
    (3) when it cannot be read or holds no such case, OutputError (3) for an existing
    ``out``.
    """
    from bundler.api.anchors import anchors
    from bundler.bundles.proof import prove_case
    from bundler.bundles.stored import verified_stored
    from bundler.trust.proof import proof_file_bytes

    found = anchors(
        expect_bundle_digest=expect_bundle_digest,
        expect_report_digest=expect_report_digest,
        allowed_signers=allowed_signers,
        identity=identity,
        endpoint_url=endpoint_url,
    )
    where = params.stored_object(params.input_location(bundle, "bundle"), "bundle")
    case = params.text(case_id, "case_id")
    target = output_path(out)
    if target is not None and target.is_dir():
        target = _in_directory(target, f"{case}.proof.json", "out")
    endpoint = found.endpoint_url
    options = found.options_for(where)
    with params.reading("bundle"), bundle_at(where, endpoint) as stream:
        proof = prove_case(where, case, options=options, stream=stream)
        if stream is not None:
            verified_stored(where, stream, None)
    tree_size = proof["head"]["cases_tree"]["tree_size"]
    record: dict[str, Any] = proof
    if target is not None:
        from bundler.core.outputs import write_new_file

        with params.reading("out"):
            write_new_file(target, proof_file_bytes(proof))
        record = {
            "schema": "evalbook.proof_written.v1",
            "case_id": case,
            "leaf_index": proof["leaf_index"],
            "tree_size": tree_size,
            "bundle_digest": proof["head"].get("bundle_digest"),
            "out": str(target),
        }
    return ProofResult(
        record,
        case_id=case,
        leaf_index=proof["leaf_index"],
        tree_size=tree_size,
        bundle_digest=proof["head"].get("bundle_digest"),
        out=target,
        proof=proof,
    )


def _in_directory(directory: Path, name: str, param: str) -> Path:
    import re

    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,200}", name, re.ASCII):
        raise ParameterError(
            param, f"{name!r} is not a plain file name; give a file", value=str(directory)
        )
    return directory / name


def _proof_bytes(proof: object) -> tuple[bytes, str]:
    """A proof given as its bytes, its JSON text, a parsed object or a file path."""
    from bundler.trust.proof import read_proof_file

    if isinstance(proof, bytes | bytearray | memoryview):
        return bytes(proof), "<proof>"
    if isinstance(proof, dict):
        import orjson

        try:
            return orjson.dumps(proof), "<proof>"
        except TypeError as exc:
            raise ParameterError("proof", f"not a JSON object ({exc})") from exc
    if isinstance(proof, str) and params.encodable(proof, "proof").lstrip().startswith("{"):
        return proof.encode("utf-8", "surrogateescape"), "<proof>"
    where = params.path(proof, "proof")
    params.existing_input(where, "proof", directory_ok=False)
    return read_proof_file(str(where) if str(where) != "-" else "./-"), str(where)


def check_proof(
    proof: bytes | str | os.PathLike[str] | dict[str, Any],
    *,
    allowed_signers: str | os.PathLike[str] | None = None,
    identity: str | None = None,
    expect_bundle_digest: str | None = None,
    source: str | None = None,
) -> ProofCheckResult:
    """Check a case proof without the bundle: leaf, audit path, root and head
    (``check-proof``). ``proof`` is its bytes, its JSON text (a str beginning with
    ``{``), the parsed object, or a path to the file. Only a valid signature on the head
    (``allowed_signers``, ``identity``) anchors it.

    Raises ParameterError (2), InputError (3) for a malformed proof, NotProven (1) when
    it proves nothing or is not anchored as asked. ``source`` names the proof in
    messages and the record (default: its path, or ``<proof>``).
    """
    from bundler.trust.proof import NotProven
    from bundler.trust.proof import check_proof as check

    signers = params.optional_path(allowed_signers, "allowed_signers")
    who = params.optional_text(identity, "identity")
    expected = params.digest(expect_bundle_digest, "expect_bundle_digest")
    if who is not None and signers is None:
        raise ParameterError("identity", "needs allowed_signers")
    checker = None
    if signers is not None:
        params.existing_input(signers, "allowed_signers", directory_ok=False)
        from bundler.bundles.signatures import load_allowed

        with params.reading("allowed_signers"):
            allowed = load_allowed(signers)

        def checker(head: bytes, text: str | None) -> str:
            # The one check every path uses (SPEC 11.3), on the proof's head signature.
            from bundler.core.signatures import SignatureSource, SignatureState
            from bundler.trust import sshsig
            from bundler.trust.signatures import check_one, signer_of

            if text is None:
                raise sshsig.SignatureError("no signature: the proof's head is unsigned")
            checked = check_one(
                head,
                SignatureSource("signature", text),
                allowed=allowed,  # type: ignore[arg-type]
                identity=who,
            )
            if checked.state is not SignatureState.VERIFIED:
                raise sshsig.SignatureError(str(checked.reason))
            return signer_of(checked)

    data, named = _proof_bytes(proof)
    source = named if source is None else params.text(source, "source")
    try:
        with params.reading("proof"):
            result = check(
                data, source=source, check_signature=checker, expect_bundle_digest=expected
            )
    except NotProven as exc:
        exc.source = source  # its ``to_json()`` names the proof as the record would
        raise
    case = _proof_case(data)
    record = {
        "schema": "evalbook.proof_check.v1",
        "source": source,
        "proven": True,
        "case_id": result.case_id,
        "leaf_index": result.leaf_index,
        "tree_size": result.tree_size,
        "bundle_digest": result.bundle_digest,
        "report_id": result.report_id,
        "anchored": result.anchored,
        "anchor": {
            "signer": result.signer,
            "expected_bundle_digest": expected,
            "self_consistent_only": result.signer is None,
            "description": result.anchor,
        },
    }
    status = case.get("status") if isinstance(case.get("status"), str) else None
    score = case.get("score")
    number = score if isinstance(score, int | float) and not isinstance(score, bool) else None
    if isinstance(number, float) and number.is_integer() and abs(number) < 2**53:
        number = int(number)  # one number, one spelling (JCS): 1.0 and 1e0 are 1
    if status is not None:
        record["case_status"] = status
    if number is not None:
        record["case_score"] = number
    return ProofCheckResult(
        record,
        case_id=result.case_id,
        leaf_index=result.leaf_index,
        tree_size=result.tree_size,
        bundle_digest=result.bundle_digest,
        report_id=result.report_id,
        anchored=result.anchored,
        signer=result.signer,
        anchor=result.anchor,
        case_status=status,
        case_score=None if number is None else float(number),
    )


def _proof_case(data: bytes) -> dict[str, Any]:
    """The case a proven proof shows (its form was checked already)."""
    from bundler.core import canonical
    from bundler.core.errors import BundlerError

    try:
        value = canonical.loads(data, source="<proof>")
    except BundlerError:
        return {}
    case = value.get("case") if isinstance(value, dict) else None
    return case if isinstance(case, dict) else {}


def sign(
    bundle: str | os.PathLike[str],
    *,
    key: str | os.PathLike[str],
    endpoint_url: str | None = None,
) -> SignResult:
    """Verify a bundle (every signature present checked, SPEC 11.3), then sign its
    bundle-head.json (``sign``): into the sidecar ``<archive>.sig``, or
    ``<archive>.sig.<sha256 hex of the signature>`` when that is taken (a
    countersignature), locally as beside a stored ``s3://`` object; none is replaced.
    A key that has signed the head already (embedded or in a sidecar) writes nothing:
    ``state`` ``already_signed``. Raises VerificationFailed (1) when the bundle does
    not verify, InputError (3) when it cannot be read, StorageError (5)."""
    from bundler.bundles.proof import sign_verified, signed_already
    from bundler.bundles.signatures import sidecar_name, with_sidecars
    from bundler.core.claims import VerifyOptions
    from bundler.core.outputs import write_new_file
    from bundler.core.signatures import sidecar_taken

    where = params.stored_object(params.location(bundle, "bundle"), "bundle")
    endpoint = params.endpoint(endpoint_url)
    signer = signer_for(key, required=True)
    if where.startswith("s3://"):
        from bundler.api.stored import sign_stored

        with params.reading("bundle"):
            return sign_stored(where, signer, endpoint)
    archive = Path(where)
    params.existing_input(archive, "bundle", directory_ok=False)
    with params.reading("bundle"):
        signature, result = sign_verified(where, signer, with_sidecars(VerifyOptions(), where))
    record: dict[str, Any] = {
        "schema": "evalbook.signed.v1",
        "bundle": where,
        "bundle_digest": result.bundle_digest,
        "report_id": result.report_id,
    }
    already = signed_already(result, signature)
    if already is not None:
        target, state = already, "already_signed"
    else:
        data = signature.encode("ascii")
        free = not os.path.lexists(sidecar_name(where, data, first_free=True))
        target, state = sidecar_name(where, data, first_free=free), "stored"
        if not free and os.path.lexists(target):
            raise sidecar_taken(target)
        write_new_file(Path(target), data)
    return SignResult(
        {**record, "signature": target, "state": state},
        bundle=where,
        bundle_digest=result.bundle_digest,
        report_id=result.report_id,
        signature=target,
        state=state,
    )
