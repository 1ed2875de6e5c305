"""The library's functions for bundles on disk (or at an ``s3://`` URL): each is the
implementation of its command (SPEC 7.1), which parses its options, calls it and prints.

Every function checks its parameters first (``bundler.api.params``: a ParameterError
naming the parameter), then works; an error from the work names the file or member and
the rule. Results are frozen, with ``to_json()`` the command's ``--json`` object.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from bundler.api import params
from bundler.api.anchors import Anchors, anchors
from bundler.api.results import (
    InspectResult,
    Progress,
    ProofCheckResult,
    ProofResult,
    RenderResult,
    ReportListing,
    SignResult,
)
from bundler.core import times
from bundler.core.errors import (
    InputError,
    OutputError,
    ParameterError,
    StorageError,
    UsageError,
    VerificationFailed,
)
from bundler.core.limits import DEFAULT_MAX_BYTES

if TYPE_CHECKING:
    from bundler.core.claims import Verification
    from bundler.evalbanana.export import EbExportResult
    from bundler.evalbook.audit import Audit
    from bundler.evalbook.export import ExportResult

OnProgress = Callable[[Progress], None]
PRINCIPAL_ENV = "EVALBOOK_PRINCIPAL"


def _callback(value: object) -> OnProgress | None:
    if value is not None and not callable(value):
        raise ParameterError("on_progress", f"expected a callable, not {type(value).__name__}")
    return cast("OnProgress | None", value)


def _signer(key: object, param: str = "key") -> Callable[[bytes], str] | None:
    """The signing function of an OpenSSH Ed25519 key file (passphrase from
    ``$EVALBOOK_SIGN_PASSPHRASE``); None without a key."""
    if key is None:
        return None
    from bundler.trust import sshsig

    key_path = params.existing_input(params.path(key, param), param, directory_ok=False)
    passphrase = os.environ.get(sshsig.PASSPHRASE_ENV)
    loaded = sshsig.load_private_key(
        key_path, passphrase=passphrase.encode() if passphrase else None
    )
    return lambda message: sshsig.sign(message, loaded)


def key_warning(key: str | os.PathLike[str]) -> str | None:
    """The security warning for a key file others can read, or None."""
    from bundler.trust import sshsig

    return sshsig.key_permissions_warning(Path(key))


def _out(value: object, param: str = "out") -> Path | None:
    """An output path; one ending in / must name an existing directory (as ``cp``)."""
    out = params.optional_path(value, param)
    if out is not None and str(value).endswith("/") and not out.is_dir():
        raise ParameterError(
            param, "no such directory (a path ending in / names one)", value=str(value)
        )
    return out


# ----------------------------------------------------------------------------- export


def export(
    store: str | os.PathLike[str],
    report_id: str,
    *,
    principal: str | None = None,
    out: str | os.PathLike[str] | None = None,
    exported_at: Any = None,
    level: int = 3,
    strict: bool = False,
    key: str | os.PathLike[str] | None = None,
    upload: str | None = None,
    endpoint_url: str | None = None,
    on_progress: OnProgress | None = None,
) -> ExportResult:
    """Export one issued report into a reproducibility bundle (SPEC 4; ``export``).

    ``store`` is a directory or ``s3://bucket/prefix``; ``principal`` (default
    ``$EVALBOOK_PRINCIPAL``) needs ``report.export``. The archive goes to ``out`` (a file,
    or a directory that receives ``evalbook-bundle-<report_id>.tar.zst``; default the
    current directory) and is never overwritten. ``exported_at`` is an aware datetime or
    RFC 3339 text (default ``$SOURCE_DATE_EPOCH``, else now); the same store, report,
    principal and time give the same bytes. ``key`` signs the head inside the bundle;
    ``upload`` then stores it under ``s3://bucket/prefix``.

    Raises ParameterError (2) for a bad parameter or no principal, PermissionDenied (4),
    InputError (3) for a missing or malformed report or an unusable ``out``,
    StrictFailure (1) under ``strict``, VerificationFailed (1) or StorageError (5) from
    ``upload``.
    """
    from bundler.evalbook.export import ExportConfig, export_bundle

    root = params.location(store, "store")
    rid = params.text(report_id, "report_id")
    who = principal if principal is not None else os.environ.get(PRINCIPAL_ENV)
    if not who:
        raise ParameterError("principal", f"none given: pass principal=... or set ${PRINCIPAL_ENV}")
    who = params.text(who, "principal")
    target = _out(out)
    environ = dict(os.environ)
    moment = times.export_time(exported_at, "exported_at", environ, time.time())
    zstd_level = params.integer(level, "level", 1, 19)
    is_strict = params.flag(strict, "strict")
    destination = None if upload is None else params.s3_url(upload, "upload")
    endpoint = params.optional_text(endpoint_url, "endpoint_url")
    report = _callback(on_progress)
    signer = _signer(key)
    config = ExportConfig(
        root,
        rid,
        who,
        moment,
        target,
        zstd_level,
        is_strict,
        signer,
        endpoint,
        exported_at_source=times.time_source(exported_at, "exported_at", environ),
    )

    def forward(p: Any) -> None:
        assert report is not None
        report(Progress(p.bytes, p.total_bytes, f"{p.files} files, {p.cases} cases"))

    result = export_bundle(config, forward if report is not None else None)
    if destination is not None:
        from bundler.api.stored import upload as upload_archive

        uploaded = upload_archive(
            result.path, destination, endpoint_url=endpoint, on_progress=report
        )
        record = uploaded.to_json()
        record.pop("schema", None)  # the export summary carries it as "upload"
        result = replace(result, upload=record)
    return result


def export_eb(
    run_dir: str | os.PathLike[str],
    *,
    project: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    exported_at: Any = None,
    level: int = 3,
    strict: bool = False,
    key: str | os.PathLike[str] | None = None,
    on_progress: OnProgress | None = None,
) -> EbExportResult:
    """Export an eval-banana run directory into an eval-banana bundle (SPEC 10.1;
    ``export-eb``). Parameters as for ``export``; ``project`` is the project root the
    run's definitions are found under. Raises as ``export`` does (no principal: a run
    has no access rules)."""
    from bundler.evalbanana.export import EbExportConfig, export_eb_bundle

    run = params.existing_input(params.path(run_dir, "run_dir"), "run_dir")
    root = params.existing_input(params.path(project, "project"), "project")
    target = _out(out)
    environ = dict(os.environ)
    moment = times.export_time(exported_at, "exported_at", environ, time.time())
    zstd_level = params.integer(level, "level", 1, 19)
    is_strict = params.flag(strict, "strict")
    report = _callback(on_progress)
    signer = _signer(key)
    config = EbExportConfig(
        run,
        root,
        moment,
        target,
        zstd_level,
        is_strict,
        signer,
        exported_at_source=times.time_source(exported_at, "exported_at", environ),
    )

    def forward(p: Any) -> None:
        assert report is not None
        report(Progress(p.bytes, p.total_bytes, f"{p.files} files"))

    return export_eb_bundle(config, forward if report is not None else None)


def reports(store: str | os.PathLike[str], *, endpoint_url: str | None = None) -> ReportListing:
    """The reports a store holds (``reports``): one line each, sorted by report id, a
    report that cannot be read still listed with its problems (``problems`` counts
    them; the command then exits 3). Raises InputError (3) for a store root that does
    not exist, StorageError (5) for object storage."""
    from bundler.evalbook.store import Store, open_source

    root = params.location(store, "store")
    endpoint = params.optional_text(endpoint_url, "endpoint_url")
    entries = Store(open_source(root, endpoint_url=endpoint)).reports()
    return ReportListing(tuple(e.as_dict() for e in entries), sum(1 for e in entries if e.problems))


# ----------------------------------------------------------------------------- verify


@contextmanager
def _stream(location: str, endpoint_url: str | None) -> Iterator[BinaryIO | None]:
    from bundler.bundles.stored import bundle_stream

    with bundle_stream(location, endpoint_url) as stream:
        yield stream


def _archive_size(location: str) -> int | None:
    import stat

    if location.startswith("s3://"):
        return None
    try:
        info = os.stat(location)
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def _bytes(report: OnProgress | None, total: list[int | None]) -> Callable[[int], None] | None:
    if report is None:
        return None
    return lambda done: report(Progress(done, total[0]))


def verify_one(
    location: str,
    found: Anchors,
    *,
    project: Path | None = None,
    on_progress: OnProgress | None = None,
) -> Verification:
    """Verify one bundle whose anchors are checked already. Never raises for the
    bundle's trouble: a storage failure is a result with verdict error (exit 5), an
    archive altered at rest a failed result naming the key and both digests."""
    from bundler import storage
    from bundler.bundles.signatures import list_signatures
    from bundler.bundles.stored import altered_result, verified_stored
    from bundler.bundles.verify import verify_bundle
    from bundler.core.claims import Verdict, Verification

    options = found.options
    if project is not None:
        from bundler.evalbanana import verify as ebverify

        return ebverify.verify_run_dir(Path(location), project, options)
    total: list[int | None] = [_archive_size(location)]
    try:
        params.input_location(location, "bundle")
        opts = found.options_for(location)
        with _stream(location, found.endpoint_url) as stream:
            if stream is not None:
                total[0] = getattr(stream, "size", None) or None
            result = verify_bundle(
                location, opts, stream=stream, progress=_bytes(on_progress, total)
            )
            if stream is not None:
                result = verified_stored(location, stream, result)
    except storage.AlteredAtRest as exc:
        found.outcomes.clear()
        return replace(altered_result(location, exc, options.strict), altered_at_rest=True)
    except StorageError as exc:
        found.outcomes.clear()
        return Verification(
            source=location,
            verdict=Verdict.ERROR,
            error=exc.message,
            strict=options.strict,
            storage_failed=True,
        )
    except (InputError, UsageError) as exc:
        found.outcomes.clear()
        return Verification(
            source=location, verdict=Verdict.ERROR, error=exc.message, strict=options.strict
        )
    return list_signatures(result, found.outcomes)


def verify(
    bundle: str | os.PathLike[str],
    *,
    expect_bundle_digest: str | None = None,
    expect_report_digest: str | None = None,
    allowed_signers: str | os.PathLike[str] | None = None,
    identity: str | None = None,
    signature: str | bytes | os.PathLike[str] | None = None,
    project: str | os.PathLike[str] | None = None,
    strict: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    endpoint_url: str | None = None,
    on_progress: OnProgress | None = None,
) -> Verification:
    """Verify a bundle offline (SPEC 5; ``verify``): an archive, a bag directory, an
    ``s3://`` URL, or with ``project`` an eval-banana run directory.

    The anchors: ``expect_bundle_digest``, ``expect_report_digest``, and
    ``allowed_signers`` (with ``identity``), against which the embedded signature and
    every sidecar are checked (or only ``signature``: its bytes, a file or an s3://
    URL). Never raises for a bad bundle: the verdict is verified, failed or error
    (``exit_code`` 0, 1, 3; 5 when storage failed), with every claim and the anchor.
    Raises ParameterError (2) for a bad parameter, InputError (3) for an unreadable
    allowed_signers or signature file.
    """
    found = anchors(
        expect_bundle_digest=expect_bundle_digest,
        expect_report_digest=expect_report_digest,
        allowed_signers=allowed_signers,
        identity=identity,
        signature=signature,
        strict=strict,
        max_bytes=max_bytes,
        endpoint_url=endpoint_url,
    )
    where = params.location(bundle, "bundle")
    root = params.optional_path(project, "project")
    if root is not None:
        params.existing_input(root, "project")
        params.existing_input(Path(where), "bundle")
    return verify_one(where, found, project=root, on_progress=_callback(on_progress))


def inspect(
    bundle: str | os.PathLike[str],
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    endpoint_url: str | None = None,
) -> InspectResult:
    """What a bundle holds, read through the safe reader, without proving it
    (``inspect``): whether it is signed (embedded, beside it), unchecked.

    Raises InputError (3) for an unreadable or unsafe archive, StorageError (5).
    """
    from bundler.bundles.inspect import inspect_bundle
    from bundler.bundles.signatures import sidecar_signatures

    where = params.input_location(bundle, "bundle")
    cap = params.integer(max_bytes, "max_bytes", 1)
    endpoint = params.optional_text(endpoint_url, "endpoint_url")
    with _stream(where, endpoint) as stream:
        info = inspect_bundle(where, max_bytes=cap, stream=stream)
    beside = [c.source for c in sidecar_signatures(where, endpoint)]
    if where.startswith("s3://") or beside:
        info["signatures"] = beside
    info["signed"] = bool(info["embedded_signature"]) or bool(beside)
    facts = {k: v for k, v in info.items() if k not in ("labels", "schema")}
    record = {"schema": "evalbook.inspect.v1", "bundle_schema": info.get("schema"), **facts}
    return InspectResult(
        record,
        bundle_digest=info.get("bundle_digest"),
        report_id=info.get("report_id"),
        bundle_schema=info.get("schema"),
        signed=bool(info["signed"]),
    )


def inspect_labels(result: InspectResult) -> dict[str, Any]:
    """The facts ``inspect`` prints (the record with the labels of its human form)."""
    return dict(result.record)


def extract(
    bundle: str | os.PathLike[str],
    directory: str | os.PathLike[str],
    *,
    expect_bundle_digest: str | None = None,
    expect_report_digest: str | None = None,
    allowed_signers: str | os.PathLike[str] | None = None,
    identity: str | None = None,
    strict: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    endpoint_url: str | None = None,
    on_progress: OnProgress | None = None,
) -> Verification:
    """Verify while extracting into ``directory`` (absent or empty; ``extract``).

    Only regular files and directories are written, beneath directory descriptors and
    never through a link; unless the result is ``verified`` everything written is
    removed again. A sidecar signature beside the archive is written beside the bag.
    Raises ParameterError (2), OutputError (3) when ``directory`` is unusable.
    """
    from bundler.bundles.extract import extract_bundle
    from bundler.bundles.stored import first_sidecar

    found = anchors(
        expect_bundle_digest=expect_bundle_digest,
        expect_report_digest=expect_report_digest,
        allowed_signers=allowed_signers,
        identity=identity,
        strict=strict,
        max_bytes=max_bytes,
        endpoint_url=endpoint_url,
    )
    where = params.input_location(bundle, "bundle", directory_ok=False)
    target = params.path(directory, "directory")
    report = _callback(on_progress)
    sidecar = first_sidecar(where, found.endpoint_url)
    options = found.options_for(where)
    total: list[int | None] = [_archive_size(where)]
    with _stream(where, found.endpoint_url) as stream:
        if stream is not None:
            total[0] = getattr(stream, "size", None) or None
        result = extract_bundle(
            where, target, options, stream=stream, progress=_bytes(report, total)
        )
    if result.exit_code == 0 and sidecar is not None:
        # Beside the bag, not inside it (a tag file the tag manifest does not list would
        # make the extracted bag fail).
        from bundler.core.outputs import write_new_file

        write_new_file(target / "bundle-head.json.sig", sidecar.encode("ascii", "replace"))
    return result


def audit(
    bundle: str | os.PathLike[str],
    *,
    expect_bundle_digest: str | None = None,
    expect_report_digest: str | None = None,
    allowed_signers: str | os.PathLike[str] | None = None,
    identity: str | None = None,
    signature: str | bytes | os.PathLike[str] | None = None,
    strict: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    endpoint_url: str | None = None,
    on_progress: OnProgress | None = None,
) -> Audit:
    """Verify a bundle, then re-derive its report's verdict from its cases (SPEC 12;
    ``audit``). Anchors as for ``verify``. The verdict is consistent, inconsistent or
    error; nothing is audited unless the bundle verifies. Raises only what ``verify``
    raises."""
    from bundler.bundles.audit import audit_bundle
    from bundler.bundles.signatures import list_signatures

    found = anchors(
        expect_bundle_digest=expect_bundle_digest,
        expect_report_digest=expect_report_digest,
        allowed_signers=allowed_signers,
        identity=identity,
        signature=signature,
        strict=strict,
        max_bytes=max_bytes,
        endpoint_url=endpoint_url,
    )
    where = params.input_location(bundle, "bundle")
    report = _callback(on_progress)
    options = found.options_for(where)
    with _stream(where, found.endpoint_url) as stream:
        result = audit_bundle(where, options, stream=stream, progress=_bytes(report, [None]))
    if result.verification is not None and found.outcomes:
        result = replace(result, verification=list_signatures(result.verification, found.outcomes))
    return result


# --------------------------------------------------------------------- proofs, signing


def prove(
    bundle: str | os.PathLike[str],
    case_id: str,
    *,
    out: str | os.PathLike[str] | None = None,
    endpoint_url: str | None = None,
) -> ProofResult:
    """A proof (``evalbook.case_proof.v1``) that one case belongs to a verified bundle
    (``prove``); written to ``out`` (a file, or a directory that receives
    ``<case_id>.proof.json``; never overwritten) when given.

    Raises VerificationFailed (1) when the bundle does not verify, InputError (3) when
    it cannot be read or holds no such case, OutputError (3) for an existing ``out``.
    """
    from bundler.bundles.proof import prove_case
    from bundler.bundles.stored import first_sidecar
    from bundler.trust.proof import proof_file_bytes

    where = params.input_location(bundle, "bundle")
    case = params.text(case_id, "case_id")
    target = _out(out)
    if target is not None and target.is_dir():
        target = _in_directory(target, f"{case}.proof.json", "out")
    endpoint = params.optional_text(endpoint_url, "endpoint_url")
    sidecar = first_sidecar(where, endpoint)
    with _stream(where, endpoint) as stream:
        proof = prove_case(where, case, stream=stream, sidecar_signature=sidecar)
    tree_size = proof["head"]["cases_tree"]["tree_size"]
    record: dict[str, Any] = proof
    if target is not None:
        from bundler.core.outputs import write_new_file

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
    if isinstance(proof, str) and proof.lstrip().startswith("{"):
        return proof.encode("utf-8", "surrogatepass"), "<proof>"
    where = params.path(proof, "proof")
    params.existing_input(where, "proof", directory_ok=False)
    return read_proof_file(str(where) if str(where) != "-" else "./-"), str(where)


def check_proof(
    proof: bytes | str | os.PathLike[str] | dict[str, Any],
    *,
    allowed_signers: str | os.PathLike[str] | None = None,
    identity: str | None = None,
    expect_bundle_digest: str | None = None,
) -> ProofCheckResult:
    """Check a case proof without the bundle: leaf, audit path, root and head
    (``check-proof``). ``proof`` is its bytes, its JSON text (a str beginning with
    ``{``), the parsed object, or a path to the file. Only a valid signature on the head
    (``allowed_signers``, ``identity``) anchors it.

    Raises ParameterError (2), InputError (3) for a malformed proof, NotProven (1) when
    it proves nothing or is not anchored as asked.
    """
    from bundler.trust.proof import check_proof as check

    signers = params.optional_path(allowed_signers, "allowed_signers")
    who = params.optional_text(identity, "identity")
    expected = params.digest(expect_bundle_digest, "expect_bundle_digest")
    if who is not None and signers is None:
        raise ParameterError("identity", "needs allowed_signers")
    checker = None
    if signers is not None:
        params.existing_input(signers, "allowed_signers", directory_ok=False)
        from bundler.bundles.signatures import SignatureCandidate, SignatureSet

        outcomes: list[Any] = []
        signer_set = SignatureSet(signers, who)

        def checker(head: bytes, text: str | None) -> str:
            from bundler.trust import sshsig

            if text is None:
                raise sshsig.SignatureError("no signature: the proof's head is unsigned")
            outcome = signer_set.check_one(head, SignatureCandidate("signature", text))
            outcomes.append(outcome)
            if outcome.signer is None:
                raise sshsig.SignatureError(str(outcome.detail))
            return outcome.signer

    data, source = _proof_bytes(proof)
    result = check(data, source=source, check_signature=checker, expect_bundle_digest=expected)
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
    """Verify a bundle, then sign its bundle-head.json (``sign``): into the sidecar
    ``<archive>.sig`` (never replaced), or for an ``s3://`` bundle beside the stored
    object (a countersignature when one is there already). Raises VerificationFailed
    (1) when the bundle does not verify, InputError (3) when it cannot be read or the
    sidecar exists, StorageError (5)."""
    from bundler.bundles.proof import sign_bundle
    from bundler.trust.proof import write_sidecar

    where = params.location(bundle, "bundle")
    endpoint = params.optional_text(endpoint_url, "endpoint_url")
    signer = _signer(key)
    assert signer is not None
    if where.startswith("s3://"):
        from bundler.api.stored import sign_stored

        return sign_stored(where, signer, endpoint)
    archive = Path(where)
    params.existing_input(archive, "bundle", directory_ok=False)
    sidecar = Path(str(archive) + ".sig")
    if sidecar.exists() or sidecar.is_symlink():
        raise OutputError(f"{sidecar}: already exists; refusing to overwrite")
    signature, result = sign_bundle(where, signer)
    target = write_sidecar(archive, signature)
    record = {
        "schema": "evalbook.signed.v1",
        "bundle": where,
        "bundle_digest": result.bundle_digest,
        "report_id": result.report_id,
        "signature": str(target),
        "state": "stored",
    }
    return SignResult(
        record,
        bundle=where,
        bundle_digest=result.bundle_digest,
        report_id=result.report_id,
        signature=str(target),
    )


# ------------------------------------------------------------------------------ render

# A saved record is at most what verify writes for a 20,000-case bundle, many times over.
MAX_RECORD_BYTES = 512 * 1024 * 1024
_RECORD_SCHEMAS = {"verification": "verification", "audit": "audit", "fixity": "fixity-summary"}


def load_record(path: Path, param: str = "result") -> dict[str, Any]:
    """A saved verification, audit or fixity record, size-capped, parsed and checked
    against its schema. Raises InputError (3) naming the file."""
    from bundler.core import canonical
    from bundler.core.schemas import validate
    from bundler.report.page import KINDS, record_kind
    from bundler.trust.proof import read_bounded

    params.existing_input(path, param, directory_ok=False)
    data = read_bounded(str(path), limit=MAX_RECORD_BYTES, what="record")
    value = canonical.loads(data, source=str(path))
    kind = record_kind(value) if isinstance(value, dict) else None
    if kind is None:
        raise InputError(
            f"{path}: not a verification, audit or fixity summary record "
            f"(its schema field must be one of {', '.join(KINDS)})"
        )
    validate(_RECORD_SCHEMAS[kind], value, source=str(path))
    assert isinstance(value, dict)
    return value


def page_target(value: object, default_name: str, param: str = "html") -> Path:
    """Where a page goes: a file that must not exist, or a directory (existing, or a
    name ending in /) that receives ``default_name``. Raises ParameterError for a
    directory that does not exist, OutputError (3) for an existing file."""
    target = _out(value, param)
    assert target is not None
    if target.is_dir():
        target = target / default_name
    if target.exists() or target.is_symlink():
        raise OutputError(f"{target}: already exists; refusing to overwrite ({param})")
    return target


def write_page(path: Path, record: dict[str, Any]) -> str:
    """Render ``record`` and write it to ``path`` (never over a file); its kind."""
    from bundler.core.outputs import write_new_file
    from bundler.report.page import render_record

    kind, page = render_record(record)
    write_new_file(path, page)
    return kind


def page_name(record: dict[str, Any]) -> str:
    """The default file name of a record's page: ``<report id>.<kind>.html``, or
    ``<kind>.html`` when the record names no report."""
    from bundler.report.page import record_kind

    kind = record_kind(record) or "record"
    rid = record.get("report_id")
    if rid is None and isinstance(record.get("verification"), dict):
        rid = record["verification"].get("report_id")
    import re

    if isinstance(rid, str) and re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,150}", rid, re.ASCII):
        return f"{rid}.{kind}.html"
    return f"{kind}.html"


def render(
    result: str | os.PathLike[str] | dict[str, Any], *, html: str | os.PathLike[str]
) -> RenderResult:
    """Write the auditor's page of a saved result (SPEC 14; ``render``): ``result`` is a
    verification, audit or fixity summary record, as a file or as the object
    (``Verification.to_json()``...). ``html`` is the page (never overwritten) or a
    directory that receives ``<report id>.<kind>.html``. Raises InputError (3) for a
    record that is not one, OutputError (3) for an existing page."""
    if isinstance(result, dict):
        from bundler.core import canonical
        from bundler.core.errors import BundlerError
        from bundler.core.schemas import validate
        from bundler.report.page import KINDS, record_kind

        try:
            value = canonical.loads(canonical.dumps(result), source="result")
        except BundlerError as exc:
            raise ParameterError("result", exc.message) from exc
        kind = record_kind(value) if isinstance(value, dict) else None
        if kind is None:
            raise ParameterError(
                "result", f"not a record (its schema must be one of {', '.join(KINDS)})"
            )
        validate(_RECORD_SCHEMAS[kind], value, source="result")
        record: dict[str, Any] = value
    else:
        record = load_record(params.path(result, "result"))
    target = page_target(html, page_name(record))
    kind = write_page(target, record)
    return RenderResult(
        {"schema": "evalbook.rendered.v1", "out": str(target), "kind": kind}, out=target, kind=kind
    )


def raise_unless_verified(result: Verification, action: str) -> None:
    """For commands that act only on a verified bundle (SPEC 8)."""
    from bundler.core.claims import Verdict

    if result.verdict is Verdict.ERROR:
        raise InputError(
            f"{result.source}: cannot be read as a bundle ({result.error}); refusing to {action}"
        )
    if result.verdict is not Verdict.VERIFIED:
        detail = "; ".join(f"{c.subject}: {c.detail}" for c in result.failures()[:3])
        raise VerificationFailed(
            f"{result.source}: bundle does not verify ({detail}); refusing to {action}"
        )
