"""Storing a bundle archive, and its signatures, without ever overwriting anything.

``upload_bundle``: one pass hashes the archive, then a conditional single PUT
(``If-None-Match: *``) with a SHA-256 checksum or a multipart upload with per-part and
full-object checksums, the metadata naming the bundle, optional retention, and a HEAD
confirming what the server stored; a key already taken is compared with ours and either
reported as already archived or refused. The signature sidecars are written here too,
by the rules ``add_signature`` shares.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import botocore.exceptions as bexc

from bundler.core.digests import PREFIX as DIGEST_PREFIX
from bundler.core.digests import parse_digest
from bundler.core.errors import InputError, OutputError, StorageError, VerificationFailed
from bundler.core.signatures import MAX_SIDECAR_BYTES, sidecar_taken
from bundler.storage.checksums import _b64_hex, _Crc, _full_object_crc, _Hashed
from bundler.storage.config import (
    CHUNK,
    MiB,
    StorageConfig,
    _Conn,
    _connect,
    _error_code,
    _explain,
    _is_precondition_failed,
)
from bundler.storage.layout import (
    META_BUNDLE_DIGEST,
    META_HEAD_SIGNATURE,
    META_REPORT_DIGEST,
    META_REPORT_ID,
    META_SHA256,
    S3Location,
    _check_report_id,
    bundle_key,
    signature_keys,
)
from bundler.storage.objects import _get, _head, _open_reader
from bundler.storage.retention import (
    _check_lock_configuration,
    _confirm_retention,
    _Retention,
    _retention,
    _retention_params,
)

MAX_PARTS = 10_000
CONTENT_TYPE = "application/zstd"


def _part_size_for(size: int, configured: int) -> int:
    needed = -(-size // MAX_PARTS)
    if needed <= configured:
        return configured
    return -(-needed // MiB) * MiB


def _hash_file(path: Path, *, part_size: int | None, crc: _Crc) -> _Hashed:
    """One pass over the file: SHA-256, full-object CRC and, when ``part_size`` is
    given, the CRC of each part. Raises InputError when the file cannot be read or
    changes size while it is read."""
    sha = hashlib.sha256()
    full = 0
    parts: list[int] = []
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    total = 0
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise InputError(f"{path}: not a regular file")
            expected = st.st_size
            step = part_size or expected or 1
            while True:
                part_crc = 0
                part_len = 0
                while part_len < step:
                    n = fh.readinto(view[: min(CHUNK, step - part_len)])
                    if not n:
                        break
                    chunk = view[:n]
                    sha.update(chunk)
                    part_crc = crc.compute(chunk, part_crc)
                    part_len += n
                if part_len:
                    parts.append(part_crc)
                    full = crc.combine(full, part_crc, part_len)
                    total += part_len
                if part_len < step:
                    break
    except FileNotFoundError as exc:
        raise InputError(f"{path}: no such file") from exc
    except IsADirectoryError as exc:
        raise InputError(f"{path}: not a regular file") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
    if total != expected:
        raise InputError(f"{path}: file changed size while being read ({expected} -> {total})")
    return _Hashed(
        size=total,
        sha256_hex=sha.hexdigest(),
        crc=crc,
        full_crc=full,
        part_size=part_size or total,
        part_crcs=tuple(parts) if part_size else (),
    )


class UploadStatus(enum.Enum):
    """What ``upload_bundle`` did with an archive (or its signature sidecar)."""

    UPLOADED = "uploaded"
    ALREADY_ARCHIVED = "already_archived"


@dataclass(frozen=True)
class UploadResult:
    """The outcome of an upload, as confirmed by a HEAD of the stored object.

    ``identical`` is true when the stored archive has our SHA-256 and size. An
    ``already_archived`` bundle may be stored as different archive bytes (another zstd
    level of the same bundle shares the key, SPEC section 6); then ``identical`` is
    false and ``stored_sha256`` names the stored archive.
    """

    status: UploadStatus
    bucket: str
    key: str
    size: int
    sha256: str
    bundle_digest: str
    report_id: str
    report_digest: str
    identical: bool
    stored_size: int
    stored_sha256: str | None
    checksum_algorithm: str | None
    checksum: str | None
    multipart: bool  # whether this call sent a multipart upload
    part_count: int
    retention_mode: str | None = None
    retain_until: datetime | None = None
    signatures: tuple[SignatureUpload, ...] = ()

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    @property
    def sidecar_key(self) -> str | None:
        """The key of the first signature this call stored or found, if any."""
        return self.signatures[0].key if self.signatures else None

    @property
    def sidecar_status(self) -> UploadStatus | None:
        return self.signatures[0].status if self.signatures else None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping (enums as their strings, times in RFC 3339)."""
        return {
            "status": self.status.value,
            "url": self.url,
            "bucket": self.bucket,
            "key": self.key,
            "size": self.size,
            "sha256": self.sha256,
            "bundle_digest": self.bundle_digest,
            "report_id": self.report_id,
            "report_digest": self.report_digest,
            "identical": self.identical,
            "stored_size": self.stored_size,
            "stored_sha256": self.stored_sha256,
            "checksum_algorithm": self.checksum_algorithm,
            "checksum": self.checksum,
            "multipart": self.multipart,
            "part_count": self.part_count,
            "retention_mode": self.retention_mode,
            "retain_until": self.retain_until.isoformat() if self.retain_until else None,
            "sidecar_key": self.sidecar_key,
            "sidecar_status": self.sidecar_status.value if self.sidecar_status else None,
            "signatures": [sig.as_dict() for sig in self.signatures],
        }


@dataclass(frozen=True)
class SignatureUpload:
    """Where one signature of a stored bundle is, and whether this call wrote it."""

    bucket: str
    key: str
    status: UploadStatus

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def as_dict(self) -> dict[str, Any]:
        return {"url": self.url, "key": self.key, "status": self.status.value}


def _stored_checksum(
    head: Mapping[str, Any], hashed: _Hashed, multipart: bool
) -> tuple[str, str | None]:
    if multipart:
        return hashed.crc.name, head.get(hashed.crc.param)
    return "SHA256", head.get("ChecksumSHA256")


def _any_checksum(head: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The strongest checksum a HEAD reports, as (algorithm, base64 value)."""
    for algorithm in ("SHA256", "CRC64NVME", "CRC32C", "CRC32"):
        value = head.get(f"Checksum{algorithm}")
        if value is not None:
            return algorithm, str(value)
    return None, None


def _expected_checksum(hashed: _Hashed, multipart: bool) -> str:
    return hashed.crc.encode(hashed.full_crc) if multipart else _b64_hex(hashed.sha256_hex)


def _confirm_stored(
    conn: _Conn,
    loc: S3Location,
    hashed: _Hashed,
    metadata: Mapping[str, str],
    *,
    multipart: bool,
    retention: _Retention | None,
) -> tuple[str, str, dict[str, Any]]:
    """HEAD the object we just wrote and check size, metadata, checksum, retention."""
    head = _head(conn, loc, "confirming the upload")
    if head is None:
        raise conn.fail(loc.url, "confirming the upload", detail="object not found after upload")
    stored = "the object was stored but "
    if int(head.get("ContentLength", -1)) != hashed.size:
        raise conn.fail(
            loc.url,
            "confirming the upload",
            detail=f"{stored}its size is {head.get('ContentLength')}, not {hashed.size}",
        )
    got_meta = {k.lower(): v for k, v in head.get("Metadata", {}).items()}
    for name, value in metadata.items():
        if got_meta.get(name) != value:
            raise conn.fail(
                loc.url,
                "confirming the upload",
                detail=f"{stored}its {name!r} metadata is {got_meta.get(name)!r}, not {value!r}",
            )
    algorithm, got = _stored_checksum(head, hashed, multipart)
    want = _expected_checksum(hashed, multipart)
    if got is None:
        raise conn.fail(
            loc.url,
            "confirming the upload",
            detail=f"{stored}the server did not confirm a {algorithm} checksum "
            "(it may not support S3 checksums); check it with a download",
        )
    if got != want:
        raise conn.fail(
            loc.url,
            "confirming the upload",
            detail=f"{stored}its {algorithm} checksum is {got}, not {want}",
        )
    if multipart and head.get("ChecksumType", "FULL_OBJECT") != "FULL_OBJECT":
        raise conn.fail(
            loc.url,
            "confirming the upload",
            detail=f"{stored}its checksum type is {head.get('ChecksumType')}, not FULL_OBJECT",
        )
    if retention is not None:
        _confirm_retention(conn, loc, head, retention)
    return algorithm, got, head


def _put_single(
    conn: _Conn,
    loc: S3Location,
    path: Path,
    hashed: _Hashed,
    metadata: Mapping[str, str],
    retention: _Retention | None,
) -> bool:
    """Single conditional PUT with a SHA-256 checksum. False when the key is taken."""
    try:
        with open(path, "rb") as body:
            conn.client.put_object(
                Bucket=loc.bucket,
                Key=loc.key,
                Body=body,
                ContentLength=hashed.size,
                ContentType=CONTENT_TYPE,
                ChecksumAlgorithm="SHA256",
                ChecksumSHA256=_b64_hex(hashed.sha256_hex),
                IfNoneMatch="*",
                Metadata=dict(metadata),
                **_retention_params(retention),
            )
    except bexc.ClientError as exc:
        if _is_precondition_failed(exc):
            return False
        raise conn.fail(loc.url, "upload", exc) from exc
    except bexc.BotoCoreError as exc:
        raise conn.fail(loc.url, "upload", exc) from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
    return True


def _put_multipart(
    conn: _Conn,
    loc: S3Location,
    path: Path,
    hashed: _Hashed,
    metadata: Mapping[str, str],
    retention: _Retention | None,
    *,
    concurrency: int,
    progress: Callable[[int], None] | None,
) -> bool:
    """Multipart upload with per-part checksums and a full-object checksum, completed
    conditionally. False when the key is taken. The upload is aborted on any failure."""
    crc = hashed.crc
    params: dict[str, Any] = {
        "Bucket": loc.bucket,
        "Key": loc.key,
        "ContentType": CONTENT_TYPE,
        "ChecksumAlgorithm": crc.name,
        "ChecksumType": "FULL_OBJECT",
        "Metadata": dict(metadata),
        **_retention_params(retention),
    }
    try:
        created = conn.client.create_multipart_upload(**params)
    except (bexc.ClientError, bexc.BotoCoreError) as exc:
        raise conn.fail(loc.url, "starting the multipart upload", exc) from exc
    upload_id = created["UploadId"]
    try:
        parts = _send_parts(conn, loc, path, hashed, upload_id, concurrency, progress)
        try:
            complete: dict[str, Any] = {
                "Bucket": loc.bucket,
                "Key": loc.key,
                "UploadId": upload_id,
                "MultipartUpload": {"Parts": parts},
                "ChecksumType": "FULL_OBJECT",
                "MpuObjectSize": hashed.size,
                "IfNoneMatch": "*",
                crc.param: crc.encode(hashed.full_crc),
            }
            conn.client.complete_multipart_upload(**complete)
        except bexc.ClientError as exc:
            if _is_precondition_failed(exc):
                _abort(conn, loc, upload_id)
                return False
            raise conn.fail(loc.url, "completing the multipart upload", exc) from exc
        except bexc.BotoCoreError as exc:
            raise conn.fail(loc.url, "completing the multipart upload", exc) from exc
    except BaseException as exc:
        note = _abort(conn, loc, upload_id)
        if note and isinstance(exc, StorageError):
            raise StorageError(f"{exc.message}; {note}") from exc.__cause__
        raise
    return True


def _send_parts(
    conn: _Conn,
    loc: S3Location,
    path: Path,
    hashed: _Hashed,
    upload_id: str,
    concurrency: int,
    progress: Callable[[int], None] | None,
) -> list[dict[str, Any]]:
    crc = hashed.crc
    count = len(hashed.part_crcs)

    def send(fd: int, number: int) -> tuple[int, dict[str, Any], int]:
        offset = (number - 1) * hashed.part_size
        length = min(hashed.part_size, hashed.size - offset)
        data = os.pread(fd, length, offset)
        if len(data) != length:
            raise InputError(f"{path}: file shrank during upload")
        want = crc.encode(hashed.part_crcs[number - 1])
        params: dict[str, Any] = {
            "Bucket": loc.bucket,
            "Key": loc.key,
            "UploadId": upload_id,
            "PartNumber": number,
            "Body": data,
            "ContentLength": length,
            "ChecksumAlgorithm": crc.name,
            crc.param: want,
        }
        try:
            answer: dict[str, Any] = dict(conn.client.upload_part(**params))
        except (bexc.ClientError, bexc.BotoCoreError) as exc:
            raise conn.fail(loc.url, f"uploading part {number} of {count}", exc) from exc
        echoed = answer.get(crc.param)
        if echoed is not None and echoed != want:
            raise conn.fail(
                loc.url,
                f"uploading part {number} of {count}",
                detail=f"the server recorded {crc.name} {echoed}, not {want}",
            )
        return number, {"PartNumber": number, "ETag": answer["ETag"], crc.param: want}, length

    done: dict[int, dict[str, Any]] = {}
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
    try:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="s3-part") as pool:
            # Submitting lazily keeps at most `concurrency` parts in memory.
            pending: set[Future[tuple[int, dict[str, Any], int]]] = set()
            numbers = iter(range(1, count + 1))
            try:
                while True:
                    while len(pending) < concurrency:
                        number = next(numbers, None)
                        if number is None:
                            break
                        pending.add(pool.submit(send, fd, number))
                    if not pending:
                        break
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in finished:
                        number, part, length = future.result()
                        done[number] = part
                        if progress is not None:
                            progress(length)
            finally:
                for future in pending:
                    future.cancel()
    finally:
        os.close(fd)
    return [done[n] for n in sorted(done)]


def _abort(conn: _Conn, loc: S3Location, upload_id: str) -> str:
    """Abort a multipart upload; return a note when that failed too."""
    try:
        conn.client.abort_multipart_upload(Bucket=loc.bucket, Key=loc.key, UploadId=upload_id)
    except (bexc.ClientError, bexc.BotoCoreError) as exc:
        return (
            f"the incomplete multipart upload {upload_id} could not be aborted "
            f"({_explain(exc, conn.endpoint, loc.url)}); a bucket lifecycle rule or a later "
            "abort removes it"
        )
    return ""


def _stored_sha256(conn: _Conn, loc: S3Location, head: Mapping[str, Any]) -> str:
    """The SHA-256 of the object's bytes: the SHA-256 checksum the server verified over
    the whole object when it reports one, else the hash of its bytes read back."""
    stored = head.get("ChecksumSHA256")
    if stored is not None and head.get("ChecksumType", "FULL_OBJECT") == "FULL_OBJECT":
        try:
            return DIGEST_PREFIX + base64.b64decode(str(stored), validate=True).hex()
        except ValueError:
            pass
    answer = _get(conn, loc, "reading back the existing object")
    if answer is None:
        raise conn.fail(loc.url, "upload", detail="the object vanished while being compared")
    sha = hashlib.sha256()
    with _open_reader(conn, loc, answer, None) as reader:
        while chunk := reader.read_chunk(CHUNK):
            sha.update(chunk)
    return DIGEST_PREFIX + sha.hexdigest()


def _compare_existing(
    conn: _Conn,
    loc: S3Location,
    hashed: _Hashed,
    bundle_digest: str,
    existing_bundle: Callable[[str], str | None] | None,
) -> tuple[bool, dict[str, Any]]:
    """Decide whether the object already at ``loc`` is this archive or another archive
    of this bundle; raise when it is neither. Metadata proves nothing (SPEC 6): the
    stored bytes (or a SHA-256 checksum the server verified over them) must be ours, or
    ``existing_bundle`` must find that they verify as this same bundle.

    Returns (identical bytes, HEAD answer). Raises VerificationFailed (exit 1) naming
    the key when anything else is there; it is left alone.
    """
    head = _head(conn, loc, "checking the existing object")
    if head is None:
        raise conn.fail(
            loc.url,
            "upload",
            detail="the key is taken but the object cannot be read back; refusing to overwrite",
        )
    size = int(head.get("ContentLength", -1))
    observed = _stored_sha256(conn, loc, head) if size == hashed.size else None
    if observed == hashed.sha256:
        return True, head
    if existing_bundle is not None and existing_bundle(loc.url) == bundle_digest:
        return False, head
    raise VerificationFailed(
        conn.scrub(
            f"{loc.url}: the key is taken by other bytes ({size} bytes, sha256 "
            f"{observed or 'not computed'}; ours {hashed.size} bytes, {hashed.sha256}) that "
            f"are not an archive of bundle {bundle_digest}; left alone, nothing uploaded"
        )
    )


def upload_bundle(
    path: Path,
    dest: S3Location,
    *,
    bundle_digest: str,
    report_id: str,
    report_digest: str,
    config: StorageConfig,
    retain_until: datetime | None = None,
    retention_mode: str | None = None,
    sidecars: Sequence[Path] = (),
    progress: Callable[[int], None] | None = None,
    head_signed: bool = False,
    existing_bundle: Callable[[str], str | None] | None = None,
) -> UploadResult:
    """Store the archive at ``path`` under the prefix ``dest`` without ever overwriting.

    The key is ``bundle_key(dest.key, report_id, bundle_digest)``. The archive is hashed
    once (SHA-256, plus a CRC for multipart uploads), then written conditionally with
    checksums the server recomputes, then confirmed with a HEAD. When the key is taken
    by the same bundle (its bytes, or a SHA-256 checksum the server verified over them,
    are this archive's, or ``existing_bundle(url)`` verifies them as this bundle) the
    result is ``already_archived`` and nothing is written; any other object there is
    refused (VerificationFailed, exit 1) and left alone. ``head_signed`` records in the
    ``head-signature`` metadata that the archive embeds a valid head signature, so that
    ``list`` can count it without reading the archive. Each of ``sidecars`` (signature files) is stored
    beside the archive by ``add_signature``'s rules: a signature already stored there is
    already archived, a new one is added, none replaces another.
    ``retain_until`` applies S3 Object Lock retention (``retention_mode`` GOVERNANCE,
    the default, or COMPLIANCE) to what this call writes; an object already archived
    keeps the retention it has, which the result reports. When the sidecar fails
    after the archive was stored, the error says so and a repeated call completes it.
    ``progress`` receives the number of bytes each completed request stored.

    Raises UsageError or DigestError for bad arguments, InputError when a file cannot be
    read, StorageError (exit 5) for everything the storage side refuses or cannot do.
    """
    _check_report_id(report_id)
    parse_digest(bundle_digest, source="bundle digest")
    parse_digest(report_digest, source="report digest")
    retention = _retention(retain_until, retention_mode)
    loc = S3Location(dest.bucket, bundle_key(dest.key, report_id, bundle_digest))
    crc = _full_object_crc()

    try:
        size = path.stat().st_size
    except FileNotFoundError as exc:
        raise InputError(f"{path}: no such file") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
    multipart = size >= config.multipart_threshold
    part_size = _part_size_for(size, config.part_size) if multipart else None
    hashed = _hash_file(path, part_size=part_size, crc=crc)
    if hashed.size != size:
        raise InputError(f"{path}: file changed size while being read ({size} -> {hashed.size})")
    signatures = [_read_sidecar(path) for path in sidecars]

    conn = _connect(config)
    if retention is not None:
        _check_lock_configuration(conn, loc)
    metadata = {
        META_BUNDLE_DIGEST: bundle_digest,
        META_REPORT_ID: report_id,
        META_REPORT_DIGEST: report_digest,
        META_SHA256: hashed.sha256,
    }
    if head_signed:
        metadata[META_HEAD_SIGNATURE] = "embedded"

    # A HEAD first spares sending the archive when it is already there; without read
    # permission (403) the conditional write alone decides.
    existing: dict[str, Any] | None
    try:
        existing = _head(conn, loc, "checking for an existing object")
    except StorageError as exc:
        cause = exc.__cause__
        if not (isinstance(cause, bexc.ClientError) and _error_code(cause)[2] == 403):
            raise
        existing = None

    stored: tuple[str, str, dict[str, Any]] | None = None
    if existing is None:
        if multipart:
            written = _put_multipart(
                conn,
                loc,
                path,
                hashed,
                metadata,
                retention,
                concurrency=config.max_concurrency,
                progress=progress,
            )
        else:
            written = _put_single(conn, loc, path, hashed, metadata, retention)
            if written and progress is not None:
                progress(hashed.size)
        if written:
            stored = _confirm_stored(
                conn, loc, hashed, metadata, multipart=multipart, retention=retention
            )

    algorithm: str | None
    checksum: str | None
    if stored is not None:
        algorithm, checksum, head = stored
        status = UploadStatus.UPLOADED
        identical = True
    else:
        identical, head = _compare_existing(conn, loc, hashed, bundle_digest, existing_bundle)
        status = UploadStatus.ALREADY_ARCHIVED
        algorithm, checksum = _any_checksum(head)
        multipart = False

    stored_signatures: list[SignatureUpload] = []
    for data in signatures:
        try:
            stored_signatures.append(
                _store_signature(conn, loc, data, bundle_digest=bundle_digest, retention=retention)
            )
        except (StorageError, OutputError) as exc:
            # The same class (a taken name is the input's, exit 3; the service's failure
            # 5), saying that the archive itself is stored.
            raise type(exc)(
                f"{exc.message} (the archive itself is stored at {loc.url})"
            ) from exc.__cause__

    got = {k.lower(): v for k, v in head.get("Metadata", {}).items()}
    until = head.get("ObjectLockRetainUntilDate")
    return UploadResult(
        status=status,
        bucket=loc.bucket,
        key=loc.key,
        size=hashed.size,
        sha256=hashed.sha256,
        bundle_digest=bundle_digest,
        report_id=report_id,
        report_digest=report_digest,
        identical=identical,
        stored_size=int(head.get("ContentLength", -1)),
        stored_sha256=got.get(META_SHA256),
        checksum_algorithm=algorithm,
        checksum=checksum,
        multipart=multipart,
        part_count=len(hashed.part_crcs) if multipart else 0,
        retention_mode=head.get("ObjectLockMode"),
        retain_until=until if isinstance(until, datetime) else None,
        signatures=tuple(stored_signatures),
    )


def _read_sidecar(path: Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise InputError(f"{path}: not a regular file")
            data = fh.read(MAX_SIDECAR_BYTES + 1)
    except FileNotFoundError as exc:
        raise InputError(f"{path}: no such file") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
    if len(data) > MAX_SIDECAR_BYTES:
        raise InputError(f"{path}: larger than {MAX_SIDECAR_BYTES} bytes (not a signature?)")
    return data


def _put_sidecar(
    conn: _Conn,
    loc: S3Location,
    data: bytes,
    *,
    bundle_digest: str,
    retention: _Retention | None,
) -> UploadStatus | None:
    """Write ``data`` at ``loc`` only if the key is free. None when another object
    (not these bytes) holds the key; nothing is ever replaced."""
    sha_hex = hashlib.sha256(data).hexdigest()
    crc = _full_object_crc()
    hashed = _Hashed(len(data), sha_hex, crc, crc.compute(data, 0), len(data), ())
    metadata = {META_BUNDLE_DIGEST: bundle_digest, META_SHA256: hashed.sha256}
    try:
        conn.client.put_object(
            Bucket=loc.bucket,
            Key=loc.key,
            Body=data,
            ContentType="application/octet-stream",
            ChecksumAlgorithm="SHA256",
            ChecksumSHA256=_b64_hex(sha_hex),
            IfNoneMatch="*",
            Metadata=metadata,
            **_retention_params(retention),
        )
    except bexc.ClientError as exc:
        if not _is_precondition_failed(exc):
            raise conn.fail(loc.url, "storing the signature", exc) from exc
        head = _head(conn, loc, "checking the existing signature")
        if head is None:
            raise conn.fail(
                loc.url,
                "storing the signature",
                detail="the key is taken but the object cannot be read back; refusing to overwrite",
            ) from exc
        # The bytes decide, not the metadata (SPEC 6): a signature is small, read it back.
        if (
            int(head.get("ContentLength", -1)) == len(data)
            and _stored_sha256(conn, loc, {}) == hashed.sha256
        ):
            return UploadStatus.ALREADY_ARCHIVED
        return None
    except bexc.BotoCoreError as exc:
        raise conn.fail(loc.url, "storing the signature", exc) from exc
    _confirm_stored(conn, loc, hashed, metadata, multipart=False, retention=retention)
    return UploadStatus.UPLOADED


def _store_signature(
    conn: _Conn,
    archive: S3Location,
    data: bytes,
    *,
    bundle_digest: str,
    retention: _Retention | None,
) -> SignatureUpload:
    """Store one signature beside ``archive`` (see ``signature_keys``).

    A second signer finds ``<key>.sig`` taken by other bytes and takes the key named by
    its own bytes, so countersignatures never contend for a key and none is replaced.
    """
    for key in signature_keys(archive.key, data):
        loc = S3Location(archive.bucket, key)
        status = _put_sidecar(conn, loc, data, bundle_digest=bundle_digest, retention=retention)
        if status is not None:
            return SignatureUpload(archive.bucket, key, status)
    raise sidecar_taken(loc.url)
