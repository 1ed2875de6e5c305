"""The signatures stored beside an archive.

``add_signature`` adds one (a countersignature when the bundle has one) without
replacing any; ``stored_signatures`` reads every one beside an archive and
``read_signature`` one named by URL, each checked against its recorded SHA-256
(``StoredSignature``). Their keys are spelled by ``layout.signature_keys``; the write
itself is the one ``upload_bundle`` uses for its sidecars (``upload._store_signature``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime

import botocore.exceptions as bexc

from bundler.core.digests import PREFIX as DIGEST_PREFIX
from bundler.core.errors import InputError
from bundler.core.signatures import (
    MAX_LISTED,
    MAX_SIDECAR_BYTES,
    MAX_SIDECARS,
    order_sidecars,
    too_many,
)
from bundler.storage.config import _DENIED_CODES, StorageConfig, _Conn, _connect, _error_code
from bundler.storage.layout import (
    _COUNTERSIGNATURE_RE,
    META_BUNDLE_DIGEST,
    META_SHA256,
    SIDECAR_SUFFIX,
    S3Location,
    parse_s3_url,
    signature_location,
)
from bundler.storage.objects import AlteredAtRest, _get, _head_precise, _open_reader
from bundler.storage.retention import _retention
from bundler.storage.upload import SignatureUpload, _store_signature

MAX_SIGNATURES = MAX_SIDECARS  # signature objects read beside one archive


def add_signature(
    archive: S3Location,
    signature: bytes,
    *,
    config: StorageConfig,
    retain_until: datetime | None = None,
    retention_mode: str | None = None,
    bundle_digest: str | None = None,
) -> SignatureUpload:
    """Add a signature (a countersignature, when the bundle has one) beside a stored
    archive, never replacing any signature there.

    The archive must exist; ``bundle_digest`` (the digest its bytes were verified to
    hold) is recorded on the signature object, or, when not given, the archive's
    ``bundle-digest`` metadata. Checking that the signature is one of this bundle's head is
    the caller's job (``sign`` verifies the bundle and signs its head). Raises
    InputError for a signature over 1 MiB, StorageError when the archive is absent or
    the signature cannot be stored.
    """
    if len(signature) > MAX_SIDECAR_BYTES:
        raise InputError(f"signature larger than {MAX_SIDECAR_BYTES} bytes (not a signature?)")
    retention = _retention(retain_until, retention_mode)
    conn = _connect(config)
    head = _head_precise(conn, archive, "adding a signature")
    if head is None:
        raise conn.fail(
            archive.url, "adding a signature", detail="no such object", kind="not_found"
        )
    meta = {k.lower(): v for k, v in head.get("Metadata", {}).items()}
    if bundle_digest is None:
        bundle_digest = meta.get(META_BUNDLE_DIGEST)
    if not isinstance(bundle_digest, str):
        raise conn.fail(
            archive.url,
            "adding a signature",
            detail="the object has no bundle-digest metadata; it was not stored by upload",
        )
    return _store_signature(
        conn, archive, signature, bundle_digest=bundle_digest, retention=retention
    )


@dataclass(frozen=True)
class StoredSignature:
    """One signature object found beside a stored archive.

    ``sha256`` is the SHA-256 of ``data``; ``recorded_sha256`` what the object's
    ``sha256`` metadata (or, for ``<key>.sig.<hex>``, its key) says it should be.
    Whether the signature verifies is for the caller to check against the bundle head.
    """

    bucket: str
    key: str
    data: bytes
    sha256: str
    recorded_sha256: str | None
    refused: str | None = None  # why it was not read at all (too large, one too many)

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    @property
    def suffix(self) -> str:
        """What follows the archive's name: ``.sig`` or ``.sig.<hex>``."""
        return SIDECAR_SUFFIX + self.key.rpartition(SIDECAR_SUFFIX)[2]

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")

    @property
    def problem(self) -> str | None:
        """Why it cannot verify before it is checked (refused, or altered at rest), else None."""
        if self.refused is not None:
            return self.refused
        if self.recorded_sha256 is None or self.recorded_sha256 == self.sha256:
            return None
        return (
            f"altered at rest: its bytes hash to {self.sha256}, but it was stored as "
            f"{self.recorded_sha256}"
        )


def _signature_object_keys(conn: _Conn, archive: S3Location) -> tuple[list[str], int]:
    """The signature keys beside ``archive`` to read: ``<key>.sig`` first, then the
    countersignatures oldest first, at most ``MAX_SIGNATURES`` in all, and how many
    more lie there (not read).

    Which ones are read is never up to whoever writes beside the archive: a
    countersignature's name is the SHA-256 of bytes its writer chooses, so name order
    can be bought with a few thousand tries, but the time the service records for a
    write (``LastModified``) cannot be set by the writer. Objects added later
    therefore never push out signatures already there (``order_sidecars``). Listing
    stops after ``MAX_LISTED`` keys. Without permission to list, only ``<key>.sig`` is
    tried."""
    first = archive.key + SIDECAR_SUFFIX
    pattern = re.compile(re.escape(first) + r"(\.[0-9a-f]{64})?\Z")
    paginator = conn.client.get_paginator("list_objects_v2")
    listed: list[tuple[str, tuple[float, ...]]] = []
    unlisted = 0
    try:
        for page in paginator.paginate(Bucket=archive.bucket, Prefix=first):
            for item in page.get("Contents", []):
                key = str(item.get("Key", ""))
                if pattern.match(key) is None:
                    continue
                if len(listed) >= MAX_LISTED:
                    unlisted = 1
                    break
                when = item.get("LastModified")
                listed.append((key, (when.timestamp() if isinstance(when, datetime) else 0.0,)))
            if unlisted:
                break
    except bexc.ClientError as exc:
        code, _, status = _error_code(exc)
        if code in _DENIED_CODES or status == 403:
            return [first], 0
        raise conn.fail(archive.url, "listing its signatures", exc) from exc
    except bexc.BotoCoreError as exc:
        raise conn.fail(archive.url, "listing its signatures", exc) from exc
    ordered = order_sidecars(listed, first=first)
    return ordered[:MAX_SIGNATURES], len(ordered) - min(len(ordered), MAX_SIGNATURES) + unlisted


def _read_signature_object(conn: _Conn, loc: S3Location) -> StoredSignature | None:
    answer = _get(conn, loc, "reading the signature")
    if answer is None:
        return None
    size = int(answer.get("ContentLength", 0))
    if size > MAX_SIDECAR_BYTES:
        answer["Body"].close()
        return StoredSignature(
            loc.bucket,
            loc.key,
            b"",
            "",
            None,
            refused=f"{size} bytes, over the {MAX_SIDECAR_BYTES} a signature may hold (not read)",
        )
    with _open_reader(conn, loc, answer, None) as reader:
        data = reader.readall()
    meta = {k.lower(): v for k, v in answer.get("Metadata", {}).items()}
    named = _COUNTERSIGNATURE_RE.search(loc.key)
    # A countersignature's key names its bytes; rewriting the object can change its
    # metadata, not its name.
    recorded = DIGEST_PREFIX + named.group(1) if named else meta.get(META_SHA256)
    actual = DIGEST_PREFIX + hashlib.sha256(data).hexdigest()
    return StoredSignature(loc.bucket, loc.key, data, actual, recorded)


def _read_signatures(conn: _Conn, archive: S3Location) -> list[StoredSignature]:
    keys, more = _signature_object_keys(conn, archive)
    found = []
    for key in keys:
        signature = _read_signature_object(conn, S3Location(archive.bucket, key))
        if signature is not None:
            found.append(signature)
    if more:
        refused = too_many(more)
        key = archive.key + SIDECAR_SUFFIX + ".*"
        found.append(StoredSignature(archive.bucket, key, b"", "", None, refused=refused))
    return found


def stored_signatures(archive: S3Location | str, *, config: StorageConfig) -> list[StoredSignature]:
    """Every signature stored beside the archive ``archive`` (an ``s3://`` URL or a
    location), ``<key>.sig`` first, then the countersignatures in key order.

    Each is read whole (at most 64 KiB, at most 64 of them) and checked against its
    recorded SHA-256; a mismatch, an oversized one (not read) or more than 64 (one
    entry for the rest) is reported in ``problem``, never raised, so that nothing
    lying beside a bundle blocks it or hides the other signatures. An empty list when
    there is none. Raises UsageError for a malformed URL, StorageError when the
    service fails.
    """
    loc = parse_s3_url(archive) if isinstance(archive, str) else archive
    return _read_signatures(_connect(config), loc)


def read_signature(url: str, *, config: StorageConfig) -> StoredSignature:
    """The one signature object at ``url`` (for ``--signature s3://...``).

    Raises UsageError for a URL that names no object (``s3://bucket/``), InputError
    when it is absent or over ``MAX_SIDECAR_BYTES``, AlteredAtRest (exit 1) when its
    bytes do not match its recorded SHA-256, StorageError when the service fails.
    """
    loc = signature_location(url)
    conn = _connect(config)
    signature = _read_signature_object(conn, loc)
    if signature is None:
        raise InputError(f"{loc.url}: no such signature object")
    if signature.refused is not None:
        # The one the user named is input that cannot be read, as a local file over the
        # cap is (exit 3); not a neighbour that may be listed and passed over.
        raise InputError(f"{loc.url}: {signature.refused}")
    if signature.problem is not None:
        raise _altered(signature)
    return signature


def _altered(signature: StoredSignature) -> AlteredAtRest:
    return AlteredAtRest(
        f"{signature.url}: {signature.problem}",
        url=signature.url,
        recorded=str(signature.recorded_sha256),
        observed=signature.sha256,
    )
