"""Listing the bundle archives under a prefix.

``list_bundles`` pages through the keys lazily, keeps those that follow the archive
layout, and counts each archive's signature objects (which sort right after it) into
its ``ListedBundle`` without reading them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import botocore.exceptions as bexc

from bundler.core.digests import PREFIX as DIGEST_PREFIX
from bundler.storage.config import StorageConfig, _Conn, _connect
from bundler.storage.layout import (
    _COUNTERSIGNATURE_RE,
    _IDENTIFIER_RE,
    ARCHIVE_SUFFIX,
    META_HEAD_SIGNATURE,
    SIDECAR_SUFFIX,
    S3Location,
    _bundles_prefix,
    _check_report_id,
)
from bundler.storage.objects import _head


@dataclass(frozen=True)
class ListedBundle:
    """One archive found under a prefix."""

    report_id: str
    bundle_digest: str
    key: str
    size: int
    last_modified: datetime
    signature_keys: tuple[str, ...] = ()  # stored beside it; not checked here
    # The archive embeds a head signature, as upload recorded (``head-signature``).
    embedded_signature: bool = False

    @property
    def signed(self) -> bool:
        return bool(self.signature_keys) or self.embedded_signature

    @property
    def signature_count(self) -> int:
        """The embedded signature and the sidecars alike (SPEC 6)."""
        return len(self.signature_keys) + int(self.embedded_signature)

    def as_dict(self) -> dict[str, Any]:
        return {
            "report_id": self.report_id,
            "bundle_digest": self.bundle_digest,
            "key": self.key,
            "size": self.size,
            "last_modified": self.last_modified.isoformat(),
            "signed": self.signed,
            "signatures": self.signature_count,
            "embedded_signature": self.embedded_signature,
            "signature_keys": list(self.signature_keys),
        }


def list_bundles(
    prefix_loc: S3Location, *, report_id: str | None = None, config: StorageConfig
) -> Iterator[ListedBundle]:
    """The archives under ``prefix_loc`` (optionally of one report), in key order.

    Lists ``config.page_size`` keys per request, lazily; keys that do not follow the
    bundle layout are skipped, and each archive's signature objects (``<key>.sig`` and
    ``<key>.sig.<hex>``, which sort right after it) are counted into its
    ``signature_keys`` without being read. Raises UsageError
    for an invalid report id at once, StorageError while iterating when listing fails.
    """
    if report_id is not None:
        _check_report_id(report_id)
    prefix = _bundles_prefix(prefix_loc.key, report_id)
    layout = re.compile(
        re.escape(_bundles_prefix(prefix_loc.key, None))
        + r"([^/]+)/([0-9a-f]{64})"
        + re.escape(ARCHIVE_SUFFIX)
        + r"\Z"
    )
    conn = _connect(config)
    return _iter_bundles(conn, prefix_loc.bucket, prefix, layout, config.page_size)


def _iter_bundles(
    conn: _Conn, bucket: str, prefix: str, layout: re.Pattern[str], page_size: int
) -> Iterator[ListedBundle]:
    url = f"s3://{bucket}/{prefix}"
    paginator = conn.client.get_paginator("list_objects_v2")
    pages = paginator.paginate(
        Bucket=bucket, Prefix=prefix, PaginationConfig={"PageSize": page_size}
    )
    # Keys arrive in byte order, so an archive's signatures follow it directly: hold
    # each archive back until a key that is not one of its signatures.
    pending: ListedBundle | None = None
    signatures: list[str] = []
    try:
        for page in pages:
            for item in page.get("Contents", []):
                key = item.get("Key", "")
                if pending is not None and key.startswith(pending.key + SIDECAR_SUFFIX):
                    rest = key[len(pending.key) :]
                    if rest == SIDECAR_SUFFIX or _COUNTERSIGNATURE_RE.fullmatch(rest):
                        signatures.append(key)
                        continue
                match = layout.match(key)
                if match is None or _IDENTIFIER_RE.match(match.group(1)) is None:
                    continue
                if pending is not None:
                    yield _finished(conn, bucket, pending, signatures)
                pending, signatures = (
                    ListedBundle(
                        report_id=match.group(1),
                        bundle_digest=DIGEST_PREFIX + match.group(2),
                        key=key,
                        size=int(item.get("Size", 0)),
                        last_modified=item["LastModified"],
                    ),
                    [],
                )
    except (bexc.ClientError, bexc.BotoCoreError) as exc:
        raise conn.fail(url, "listing", exc) from exc
    if pending is not None:
        yield _finished(conn, bucket, pending, signatures)


@dataclass(frozen=True)
class ListedObject:
    """One ``*.tar.zst`` object under ``<prefix>/reports/bundles/``, in the archive
    layout or not (``in_layout``)."""

    key: str
    size: int
    in_layout: bool
    last_modified: datetime | None = None  # when the object was last written


def list_archive_objects(
    prefix_loc: S3Location, *, config: StorageConfig
) -> Iterator[ListedObject]:
    """Every ``*.tar.zst`` key under ``<prefix>/reports/bundles/``, in key order, lazily,
    including keys outside the layout that ``list_bundles`` skips (for fixity, which
    must count every archive an archive holds). StorageError while iterating when
    listing fails."""
    prefix = _bundles_prefix(prefix_loc.key, None)
    layout = re.compile(
        re.escape(prefix) + r"([^/]+)/([0-9a-f]{64})" + re.escape(ARCHIVE_SUFFIX) + r"\Z"
    )
    conn = _connect(config)
    url = f"s3://{prefix_loc.bucket}/{prefix}"
    paginator = conn.client.get_paginator("list_objects_v2")
    pages = paginator.paginate(
        Bucket=prefix_loc.bucket, Prefix=prefix, PaginationConfig={"PageSize": config.page_size}
    )
    try:
        for page in pages:
            for item in page.get("Contents", []):
                key = str(item.get("Key", ""))
                if not key.endswith(ARCHIVE_SUFFIX):
                    continue
                match = layout.match(key)
                in_layout = match is not None and _IDENTIFIER_RE.match(match.group(1)) is not None
                yield ListedObject(
                    key, int(item.get("Size", 0)), in_layout, item.get("LastModified")
                )
    except (bexc.ClientError, bexc.BotoCoreError) as exc:
        raise conn.fail(url, "listing", exc) from exc


def _finished(conn: _Conn, bucket: str, item: ListedBundle, signatures: list[str]) -> ListedBundle:
    """``item`` with its sidecars and whether upload recorded an embedded signature
    (one HEAD: listings carry no metadata)."""
    head = _head(conn, S3Location(bucket, item.key), "reading its metadata")
    meta = {k.lower(): v for k, v in (head or {}).get("Metadata", {}).items()}
    return dataclasses.replace(
        item,
        signature_keys=tuple(signatures),
        embedded_signature=meta.get(META_HEAD_SIGNATURE) == "embedded",
    )
