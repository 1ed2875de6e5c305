"""The library's functions for object storage and fixity (SPEC 6, 13; ``upload``,
``list``, ``download``, ``fixity`` and ``sign s3://``). Credentials come from the
standard AWS chain; ``endpoint_url`` (default ``$AWS_ENDPOINT_URL_S3``) picks the
service."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bundler.api import params
from bundler.api.results import BundleListing, DownloadResult, Progress, SignResult, UploadResult
from bundler.core.errors import ParameterError

OnProgress = Callable[[Progress], None]


def _config(endpoint_url: object) -> Any:
    from bundler import storage

    return storage.StorageConfig(endpoint_url=params.endpoint(endpoint_url))


def _chunks(report: OnProgress | None, total: int | None) -> tuple[Any, Any]:
    """(per-chunk callback, size callback) feeding ``report`` a running count."""
    if report is None:
        return None, None
    state: list[Any] = [0, total]

    def on_chunk(n: int) -> None:
        state[0] += n
        report(Progress(state[0], state[1]))

    def on_size(size: int | None) -> None:
        state[1] = size

    return on_chunk, on_size


def upload(
    bundle: str | os.PathLike[str],
    prefix: str,
    *,
    retain_until: Any = None,
    retention_mode: str | None = None,
    endpoint_url: str | None = None,
    on_progress: OnProgress | None = None,
) -> UploadResult:
    """Verify a bundle archive, then store it under ``s3://bucket/prefix`` without ever
    overwriting (``upload``), with the signatures beside it (``<archive>.sig*``) that
    are signatures over its head. A key already holding these bytes, or bytes that
    verify as this same bundle, is reported as already archived; anything else there
    is refused (VerificationFailed, 1) and left alone: metadata proves nothing. ``retain_until``
    (aware datetime or RFC 3339 text) sets S3 Object Lock retention.

    Raises ParameterError (2), VerificationFailed (1) when the bundle does not verify,
    InputError (3) when it cannot be read, StorageError (5) when the service fails.
    """
    from bundler import storage
    from bundler.api.anchors import raise_unless_verified
    from bundler.bundles.signatures import good_sidecars, left_behind, with_sidecars
    from bundler.bundles.stored_bytes import existing_bundle
    from bundler.bundles.verify import read_and_verify
    from bundler.core.claims import VerifyOptions

    archive = params.existing_input(params.path(bundle, "bundle"), "bundle", directory_ok=False)
    location = storage.parse_s3_url(params.archive_prefix(prefix, "prefix"))
    until = params.optional_time(retain_until, "retain_until")
    mode = None
    if retention_mode is not None:
        mode = params.choice(retention_mode, "retention_mode", ("GOVERNANCE", "COMPLIANCE"))
        if until is None:
            raise ParameterError("retention_mode", "needs retain_until")
    config = _config(endpoint_url)
    if on_progress is not None and not callable(on_progress):
        raise ParameterError("on_progress", "expected a callable")
    options = with_sidecars(VerifyOptions(), str(archive))
    with params.reading("bundle"):
        result, _ = read_and_verify(str(archive), options)
    raise_unless_verified(result, "upload")
    on_chunk, _ = _chunks(on_progress, archive.stat().st_size)
    uploaded = storage.upload_bundle(
        archive,
        location,
        bundle_digest=str(result.bundle_digest),
        report_id=str(result.report_id),
        report_digest=str(result.report_digest),
        config=config,
        retain_until=until,
        retention_mode=mode,
        # Only the sidecars that are signatures over this head travel with it.
        sidecars=[Path(s.where) for s in good_sidecars(options, result.signatures)],
        head_signed=any(c.embedded and c.good for c in result.signatures),
        existing_bundle=existing_bundle(config.endpoint_url),
        progress=on_chunk,
    )
    info = uploaded.as_dict()
    skipped = left_behind(options, result.signatures)
    if skipped:
        info["skipped_signatures"] = [{"url": where, "reason": why} for where, why in skipped]
    return UploadResult(
        {"schema": "evalbook.upload.v1", **info},
        url=info["url"],
        status=info["status"],
        size=info["size"],
        sha256=info["sha256"],
    )


def list_bundles(
    prefix: str, *, report_id: str | None = None, endpoint_url: str | None = None
) -> BundleListing:
    """The bundles stored under ``s3://bucket/prefix`` (``list``), in key order: report
    id, digest, size, time and the signatures stored beside each (not checked).
    Raises ParameterError (2), StorageError (5)."""
    from bundler import storage

    location = storage.parse_s3_url(params.archive_prefix(prefix, "prefix"))
    rid = None if report_id is None else params.identifier(report_id, "report_id", "report id")
    listed = tuple(storage.list_bundles(location, report_id=rid, config=_config(endpoint_url)))
    items = tuple({"schema": "evalbook.list_line.v1", **item.as_dict()} for item in listed)
    return BundleListing(items, 0, listed)


def download(
    url: str,
    dest: str | os.PathLike[str],
    *,
    endpoint_url: str | None = None,
    on_progress: OnProgress | None = None,
) -> DownloadResult:
    """Download ``s3://bucket/key`` to ``dest`` (``download``) only if its bytes hash to
    their recorded SHA-256 and the bundle they hold is the one the key names (SPEC 6),
    with the intact signatures stored beside it (one too large, one of too many or
    altered is left behind, named in ``skipped_signatures``, never blocking). An object
    without sha256 metadata is placed only when its bytes verify. A ``dest`` that is a
    directory (or ends in /) receives the object under its own name; nothing is
    overwritten. Raises AlteredAtRest or VerificationFailed (1) when the bytes do not
    match or hold another bundle, StorageError (5), OutputError (3) when the file
    exists."""
    from bundler import storage
    from bundler.bundles.stored_bytes import judge_download

    src = storage.parse_s3_url(params.stored_object(params.s3_url(url, "url"), "url"))
    # As every output (SPEC 7): an existing directory, or a name ending in / that is
    # one, receives the default name; a dir/ that does not exist is refused, not made.
    where = params.output(dest, "dest")
    config = _config(endpoint_url)
    if on_progress is not None and not callable(on_progress):
        raise ParameterError("on_progress", "expected a callable")
    target = storage.download_path(src, str(where))
    on_chunk, on_size = _chunks(on_progress, None)
    verified: dict[str, Any] = {}
    with params.reading("url", output="dest"):
        result = storage.download_bundle(
            src,
            target,
            config=config,
            progress=on_chunk,
            on_size=on_size,
            accept=judge_download(url, verified),
        )
    result = dataclasses.replace(result, **verified)
    info = result.as_dict()
    return DownloadResult(
        {"schema": "evalbook.download.v1", **info},
        url=info["url"],
        path=Path(info["path"]),
        size=info["size"],
        sha256=info["sha256"],
    )


def sign_stored(url: str, sign: Callable[[bytes], str], endpoint_url: str | None) -> SignResult:
    """``sign s3://...``: verify the stored bundle (every signature beside it checked),
    sign its head, and add the signature beside the archive (a countersignature when it
    is signed already); nothing when this key has signed it already."""
    from bundler import storage
    from bundler.bundles.proof import sign_verified, signed_already
    from bundler.bundles.signatures import with_sidecars
    from bundler.bundles.stored import bundle_stream, verified_stored
    from bundler.core.claims import VerifyOptions

    location = storage.stored_bundle_location(url)
    options = with_sidecars(VerifyOptions(), url, endpoint_url=endpoint_url)
    with bundle_stream(url, endpoint_url) as stream:
        signature, result = sign_verified(url, sign, options, stream=stream)
        if stream is not None:
            verified_stored(url, stream, result)
    already = signed_already(result, signature)
    if already is not None:
        target, state = already, "already_signed"
    else:
        stored = storage.add_signature(
            location,
            signature.encode("ascii"),
            config=storage.StorageConfig(endpoint_url=endpoint_url),
            bundle_digest=result.bundle_digest,
        )
        target = stored.url
        state = "already_stored" if stored.status.value == "already_archived" else "stored"
    record = {
        "schema": "evalbook.signed.v1",
        "bundle": url,
        "bundle_digest": result.bundle_digest,
        "report_id": result.report_id,
        "signature": target,
        "state": state,
    }
    return SignResult(
        record,
        bundle=url,
        bundle_digest=result.bundle_digest,
        report_id=result.report_id,
        signature=target,
        state=state,
    )
