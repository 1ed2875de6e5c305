"""The library's functions for bundles on disk (or at an ``s3://`` URL): each is the
implementation of its command (SPEC 7.1), which parses its options, calls it and prints.

Every function checks its parameters first (``bundler.api.params``: a ParameterError
naming the parameter), then works; an error from the work names the file or member and
the rule. Results are frozen, with ``to_json()`` the command's ``--json`` object.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Literal, cast, overload

from bundler.api import params
from bundler.api.anchors import Anchors, anchors
from bundler.api.results import (
    InspectResult,
    Progress,
    ReportListing,
)
from bundler.core.claims import Verification
from bundler.core.errors import (
    InputError,
    NotFound,
    ParameterError,
    StorageError,
    UsageError,
)
from bundler.core.limits import DEFAULT_MAX_BYTES
from bundler.core.sizes import regular_size

if TYPE_CHECKING:
    from bundler.core.claims import Verification

OnProgress = Callable[[Progress], None]
PRINCIPAL_ENV = "EVALBOOK_PRINCIPAL"


def progress_callback(value: object) -> OnProgress | None:
    if value is not None and not callable(value):
        raise ParameterError("on_progress", f"expected a callable, not {type(value).__name__}")
    return cast("OnProgress | None", value)


@overload
def signer_for(
    key: object, param: str = "key", *, required: Literal[True]
) -> Callable[[bytes], str]: ...
@overload
def signer_for(
    key: object, param: str = "key", *, required: bool = False
) -> Callable[[bytes], str] | None: ...
def signer_for(
    key: object, param: str = "key", *, required: bool = False
) -> Callable[[bytes], str] | None:
    """The signing function of an OpenSSH Ed25519 key file (passphrase from
    ``$EVALBOOK_SIGN_PASSPHRASE``); None without a key, unless ``required`` (then None
    is a wrong type, as any other: ParameterError naming ``param``)."""
    if key is None and not required:
        return None
    loaded = signing_key(key, param)
    from bundler.trust import sshsig

    return lambda message: sshsig.sign(message, loaded)


def signing_key(key: object, param: str = "key") -> Any:
    """The Ed25519 key an OpenSSH private key file holds (passphrase from
    ``$EVALBOOK_SIGN_PASSPHRASE``): the one place a key parameter is read. A file that
    is no usable key is a bad value of the parameter (ParameterError, exit 2, its
    message beginning with ``param``; the command line shows the file's own message)."""
    from bundler.core.errors import UsageError
    from bundler.trust import sshsig

    key_path = params.existing_input(params.path(key, param), param, directory_ok=False)
    passphrase = os.environ.get(sshsig.PASSPHRASE_ENV)
    try:
        return sshsig.load_private_key(
            key_path, passphrase=passphrase.encode() if passphrase else None
        )
    except UsageError as exc:
        refused = ParameterError(param, exc.message)
        refused.bare_message = exc.message  # the option's value is the file it names
        raise refused from exc


def key_warning(key: str | os.PathLike[str]) -> str | None:
    """The security warning for a key file others can read, or None."""
    from bundler.trust import sshsig

    return sshsig.key_permissions_warning(Path(key))


def output_path(value: object, param: str = "out") -> Path | None:
    """An output path (``params.output``), or None."""
    return None if value is None else params.output(value, param)


# ---------------------------------------------------------------------------- reports


def reports(store: str | os.PathLike[str], *, endpoint_url: str | None = None) -> ReportListing:
    """The reports a store holds (``reports``): one line each, sorted by report id, a
    report that cannot be read still listed with its problems (``problems`` counts
    them; the command then exits 3). Raises InputError (3) for a store root that does
    not exist, StorageError (5) for object storage."""
    from bundler.evalbook.store import Store, open_source

    root = params.input_directory(store, "store")
    endpoint = params.endpoint(endpoint_url)
    with params.reading("store"):
        source = open_source(root, endpoint_url=endpoint)
        entries = Store(source).reports()
    if not entries:
        _refuse_non_store(source, root)
    return ReportListing(
        tuple(e.as_dict() for e in entries),
        sum(1 for e in entries if e.problems),
        tuple(entries),
    )


def _refuse_non_store(source: Any, root: str) -> None:
    """An empty listing is an answer only from a store: a root with no reports and no
    access.json (an empty directory, a prefix holding nothing, a bundle's key) is not
    one, and saying "0 reports" would hide the mistake (SPEC 3, 8: exit 3)."""
    from bundler.core.errors import StoreError
    from bundler.evalbook.store import LocalStoreSource

    if isinstance(source, LocalStoreSource) and (source.root / "reports").is_dir():
        return  # an empty reports/ is a store with no reports yet
    found = source.open_stream("access.json")
    if found is not None:
        found[0].close()
        return
    raise StoreError(
        f"store: {root}: not a store (no access.json and no reports/ in it)", param="store"
    )


# ----------------------------------------------------------------------------- verify


@contextmanager
def bundle_at(location: str, endpoint_url: str | None) -> Iterator[BinaryIO | None]:
    from bundler.bundles.stored import bundle_stream

    with bundle_stream(location, endpoint_url) as stream:
        yield stream


def _archive_size(location: str) -> int | None:
    return None if location.startswith("s3://") else regular_size(location)


def bytes_progress(
    report: OnProgress | None, total: list[int | None]
) -> Callable[[int], None] | None:
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
    from bundler.bundles.stored import altered_result, verified_stored
    from bundler.bundles.verify import verify_bundle
    from bundler.core.claims import Verdict, Verification

    options = found.options
    if project is not None:
        from bundler.evalbanana import verify as ebverify

        return ebverify.verify_run_dir(Path(location), project, options)
    total: list[int | None] = [_archive_size(location)]
    try:
        try:
            params.input_location(location, "bundle")
        except InputError as exc:
            # The record names its source already; the rule is what it needs.
            raise InputError(exc.message.removeprefix("bundle: ")) from exc
        opts = found.options_for(location)
        with bundle_at(location, found.endpoint_url) as stream:
            if stream is not None:
                total[0] = getattr(stream, "size", None) or None
            result = verify_bundle(
                location, opts, stream=stream, progress=bytes_progress(on_progress, total)
            )
            if stream is not None:
                result = verified_stored(location, stream, result)
    except storage.AlteredAtRest as exc:
        return replace(altered_result(location, exc, options.strict), altered_at_rest=True)
    except StorageError as exc:
        return Verification(
            source=location,
            verdict=Verdict.ERROR,
            error=exc.message,
            strict=options.strict,
            # A missing object is an input not found (3), not a failed service (5).
            storage_failed=exc.exit_code == 5,
        )
    except (InputError, UsageError) as exc:
        return Verification(
            source=location, verdict=Verdict.ERROR, error=exc.message, strict=options.strict
        )
    return result


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
    URL); every signature present is checked with or without them, and the result's
    ``signatures`` lists each with its state (SPEC 11.3). Never raises for a bad bundle: the verdict is verified, failed or error
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
    where = params.stored_object(params.location(bundle, "bundle"), "bundle")
    root = params.optional_path(project, "project")
    if root is not None:
        params.existing_input(root, "project")
        params.existing_input(Path(where), "bundle")
    return verify_one(where, found, project=root, on_progress=progress_callback(on_progress))


def inspect(
    bundle: str | os.PathLike[str],
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    endpoint_url: str | None = None,
) -> InspectResult:
    """What a bundle holds, read through the safe reader, without proving it
    (``inspect``): whether it is signed (embedded, beside it), unchecked. A stored
    bundle is judged by its bytes: its key must name the bundle they hold.

    Raises InputError (3) for an unreadable or unsafe archive, VerificationFailed (1)
    for a stored object whose key names another bundle, StorageError (5).
    """
    from bundler.bundles.inspect import inspect_bundle
    from bundler.bundles.signatures import sidecars_of
    from bundler.bundles.stored import inspected_stored, verified_stored

    where = params.stored_object(params.input_location(bundle, "bundle"), "bundle")
    cap = params.integer(max_bytes, "max_bytes", 1)
    endpoint = params.endpoint(endpoint_url)
    warnings: list[str] = []
    with params.reading("bundle"), bundle_at(where, endpoint) as stream:
        info = inspect_bundle(where, max_bytes=cap, stream=stream)
        if stream is not None:
            verified_stored(where, stream, None)
            warnings = inspected_stored(stream, info)
    beside = [s.where for s in sidecars_of(where, endpoint)]
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
        labels=tuple((str(k), str(v)) for k, v in info.get("labels", [])),
        warnings=tuple(warnings),
    )


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
    removed again. Every signature beside the archive is checked with the embedded one;
    those over its head are written beside the bag (``<bag>.sig``, ``<bag>.sig.<hex>``),
    where ``verify`` of the bag looks. Raises ParameterError (2), OutputError (3) when
    ``directory`` is unusable.
    """
    from bundler.bundles.extract import extract_bundle
    from bundler.bundles.signatures import good_sidecars, write_beside_bag
    from bundler.bundles.stored import verified_stored

    found = anchors(
        expect_bundle_digest=expect_bundle_digest,
        expect_report_digest=expect_report_digest,
        allowed_signers=allowed_signers,
        identity=identity,
        strict=strict,
        max_bytes=max_bytes,
        endpoint_url=endpoint_url,
    )
    where = params.stored_object(params.location(bundle, "bundle"), "bundle")
    target = params.output(directory, "directory")
    try:
        params.input_location(where, "bundle")
    except InputError as exc:
        from bundler.core.claims import Verdict, Verification

        # As verify: a bundle that cannot be read is a record with verdict error.
        return Verification(
            source=where,
            verdict=Verdict.ERROR,
            error=exc.message.removeprefix("bundle: "),
            strict=found.options.strict,
        )
    report = progress_callback(on_progress)
    options = found.options_for(where)
    total: list[int | None] = [_archive_size(where)]
    existed = target.exists()
    try:
        with (
            params.reading("bundle", output="directory"),
            bundle_at(where, found.endpoint_url) as stream,
        ):
            if stream is not None:
                total[0] = getattr(stream, "size", None) or None
            result = extract_bundle(
                where, target, options, stream=stream, progress=bytes_progress(report, total)
            )
            if stream is not None:
                try:
                    verified_stored(where, stream, result)
                except BaseException:
                    # The stored bytes turned out altered at rest after the bag verified:
                    # what was written is removed, as for a bundle that does not verify.
                    if result.exit_code == 0:
                        _remove_extracted(target, existed)
                    raise
    except NotFound as exc:
        from bundler.core.claims import Verdict, Verification

        # As verify: no such object is a record with verdict error (exit 3).
        return Verification(
            source=where,
            verdict=Verdict.ERROR,
            error=exc.bare_message or exc.message,
            strict=found.options.strict,
        )
    if result.exit_code == 0:
        write_beside_bag(target, good_sidecars(options, result.signatures))
    return result


def _remove_extracted(directory: Path, existed: bool) -> None:
    """Remove a bag extracted from a stored object that turned out altered at rest (and
    ``directory`` itself when this call created it); links are removed, not followed."""
    import shutil

    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    if not existed:
        directory.rmdir()


def extracted_sidecars(directory: str | os.PathLike[str]) -> list[Path]:
    """The signatures ``extract`` wrote beside the bag in ``directory``."""
    from bundler.bundles.signatures import sidecars_beside_bag

    return sidecars_beside_bag(Path(directory))
