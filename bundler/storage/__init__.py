"""Object storage for bundles and store roots (SPEC section 6).

Archives live at ``<prefix>/reports/bundles/<report_id>/<bundle-digest-hex>.tar.zst``
in any S3-compatible service. Three promises hold for every operation here:

- Nothing is overwritten. Writes are conditional (``If-None-Match: *``); when the key is
  taken, the stored object is compared with ours and either reported as already
  archived (same bundle) or refused.
- Corrupted bytes are refused in transit. A single PUT carries the archive's SHA-256 as
  an S3 checksum, which the server recomputes. A multipart upload carries a checksum
  per part and a full-object CRC64NVME (when ``awscrt`` is installed) or CRC32, which
  the server recomputes over the assembled object; the archive's SHA-256 travels as
  metadata. A HEAD with checksum mode afterwards confirms size, metadata and checksum.
- Nothing downloaded is trusted without re-hashing. Downloads and verified streams
  recompute the SHA-256 and compare it with the ``sha256`` metadata; a download only
  appears at its destination once it matches.

Every failure is one ``StorageError`` (exit 5) line naming the ``s3://`` URL and what
happened; credentials never appear in a message. The one exception is an object whose
bytes no longer hash to its recorded ``sha256``: it was altered at rest, which is a
failed verification (``AlteredAtRest``, exit 1), not a failure of the service.

Signatures of a stored bundle are sidecar objects beside its archive: ``<key>.sig`` for
the first one stored, ``<key>.sig.<hex>`` (the SHA-256 of the signature's bytes) for
each further one, so several signers never contend for one key (docs/format.md).

The package, one module per operation (``from bundler import storage`` gives the public
names below, each module imported on first use of one of its names; the modules import
in this order, each only from those before it):

- ``config``: ``StorageConfig``, the botocore client built from it and reused
  (``make_client``), timeouts and retries, and the mapping of every botocore failure to
  one ``StorageError`` line.
- ``layout``: ``s3://`` URLs and ``S3Location``, the archive key layout (``bundle_key``,
  ``key_names``, ``check_archive_prefix``), the signature keys beside an archive
  (``signature_keys``), the metadata names, and ``download_path``.
- ``checksums``: the full-object CRC (CRC64NVME or CRC32) and the SHA-256 forms the
  writes carry.
- ``retention``: S3 Object Lock retention (``RetentionMode``), asked for and confirmed.
- ``objects``: HEAD and GET of one object, the body reader that checks size and SHA-256,
  and ``AlteredAtRest``.
- ``upload``: ``upload_bundle``, the conditional single PUT, the multipart upload, the
  metadata, the HEAD that confirms a write, and the signature sidecars it stores.
- ``signatures``: ``add_signature``, ``stored_signatures``, ``read_signature``.
- ``listing``: ``list_bundles`` and its ``ListedBundle`` items.
- ``download``: ``download_bundle``, ``stream_bundle``, ``open_verified`` and its
  ``VerifiedStream``.
- ``source``: ``S3StoreSource``, a store root in a bucket for ``bundler.evalbook.store``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bundler.storage.config import StorageConfig, make_client, resolved_config
    from bundler.storage.download import (
        DownloadResult,
        VerifiedStream,
        download_bundle,
        open_verified,
        stream_bundle,
    )
    from bundler.storage.layout import (
        S3Location,
        bundle_key,
        check_archive_prefix,
        download_path,
        key_names,
        parse_s3_url,
        signature_keys,
        stored_bundle_location,
    )
    from bundler.storage.listing import (
        ListedBundle,
        ListedObject,
        list_archive_objects,
        list_bundles,
    )
    from bundler.storage.objects import AlteredAtRest
    from bundler.storage.retention import RetentionMode
    from bundler.storage.signatures import (
        StoredSignature,
        add_signature,
        read_signature,
        stored_signatures,
    )
    from bundler.storage.source import S3StoreSource
    from bundler.storage.upload import SignatureUpload, UploadResult, UploadStatus, upload_bundle

# Each public name and the module that defines it. They are imported on first use
# (PEP 562), so that a command that never touches a bucket (verify of a local file,
# export) does not pay for importing botocore.
_MODULES: dict[str, str] = {
    "AlteredAtRest": "objects",
    "DownloadResult": "download",
    "ListedBundle": "listing",
    "ListedObject": "listing",
    "RetentionMode": "retention",
    "S3Location": "layout",
    "S3StoreSource": "source",
    "SignatureUpload": "upload",
    "StorageConfig": "config",
    "StoredSignature": "signatures",
    "UploadResult": "upload",
    "UploadStatus": "upload",
    "VerifiedStream": "download",
    "add_signature": "signatures",
    "bundle_key": "layout",
    "check_archive_prefix": "layout",
    "download_bundle": "download",
    "download_path": "layout",
    "key_names": "layout",
    "list_archive_objects": "listing",
    "list_bundles": "listing",
    "make_client": "config",
    "open_verified": "download",
    "parse_s3_url": "layout",
    "read_signature": "signatures",
    "resolved_config": "config",
    "signature_keys": "layout",
    "stored_signatures": "signatures",
    "stored_bundle_location": "layout",
    "stream_bundle": "download",
    "upload_bundle": "upload",
}


def __getattr__(name: str) -> object:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "AlteredAtRest",
    "DownloadResult",
    "ListedBundle",
    "ListedObject",
    "RetentionMode",
    "S3Location",
    "S3StoreSource",
    "SignatureUpload",
    "StorageConfig",
    "StoredSignature",
    "UploadResult",
    "UploadStatus",
    "VerifiedStream",
    "add_signature",
    "bundle_key",
    "check_archive_prefix",
    "download_bundle",
    "download_path",
    "key_names",
    "list_archive_objects",
    "list_bundles",
    "make_client",
    "open_verified",
    "parse_s3_url",
    "read_signature",
    "resolved_config",
    "signature_keys",
    "stored_bundle_location",
    "stored_signatures",
    "stream_bundle",
    "upload_bundle",
]
