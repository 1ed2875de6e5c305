"""Where bundles live in a bucket and what their objects are called (SPEC section 6).

``s3://`` URLs (``parse_s3_url``, ``S3Location``), the archive key
``<prefix>/reports/bundles/<report_id>/<bundle-digest-hex>.tar.zst`` (``bundle_key``,
``key_names``, ``check_archive_prefix``), the keys of the signatures beside an archive
(``signature_keys``: ``<key>.sig``, then ``<key>.sig.<hex>``), the metadata names every
stored archive carries, and where ``download`` puts an object locally
(``download_path``).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from bundler.core.digests import PREFIX as DIGEST_PREFIX
from bundler.core.digests import parse_digest
from bundler.core.errors import UsageError

ARCHIVE_SUFFIX = ".tar.zst"
SIDECAR_SUFFIX = ".sig"

META_BUNDLE_DIGEST = "bundle-digest"
META_REPORT_ID = "report-id"
META_REPORT_DIGEST = "report-digest"
META_SHA256 = "sha256"
# "embedded" when the archive holds a head signature that verified at upload (for list).
META_HEAD_SIGNATURE = "head-signature"

_IDENTIFIER_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
_BUCKET_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{1,254}\Z")
_COUNTERSIGNATURE_RE = re.compile(r"\.sig\.([0-9a-f]{64})\Z")


@dataclass(frozen=True)
class S3Location:
    """A bucket and a key (or key prefix) inside it."""

    bucket: str
    key: str

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def child(self, relpath: str) -> S3Location:
        """The location of ``relpath`` under this location taken as a prefix."""
        prefix = _normalise_prefix(self.key)
        return S3Location(self.bucket, f"{prefix}/{relpath}" if prefix else relpath)


def parse_s3_url(url: str) -> S3Location:
    """Split ``s3://bucket/key`` into bucket and key (the key may be empty).

    Raises UsageError when the URL does not start with ``s3://`` or names no valid
    bucket.
    """
    if not isinstance(url, str) or not url.startswith("s3://"):
        raise UsageError(f"{url!r}: not an s3:// URL (want s3://bucket/prefix)")
    bucket, _, key = url[len("s3://") :].partition("/")
    if not bucket:
        raise UsageError(f"{url!r}: no bucket name (want s3://bucket/prefix)")
    if _BUCKET_RE.match(bucket) is None:
        raise UsageError(f"{url!r}: invalid bucket name {bucket!r}")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in key):
        raise UsageError(f"{url!r}: control character in the key")
    return S3Location(bucket, key)


def object_location(url: str, *, what: str, want: str) -> S3Location:
    """``parse_s3_url`` for a URL that must name one object (``what``, spelled like
    ``want``): a URL with no key (``s3://bucket``, ``s3://bucket/``,
    ``s3://bucket/prefix/``) is a UsageError (exit 2) naming it, before any request."""
    loc = parse_s3_url(url)
    if not loc.key or loc.key.endswith("/"):
        raise UsageError(f"{url!r}: names a bucket or prefix, not {what} (want {want})")
    return loc


def stored_bundle_location(url: str) -> S3Location:
    """``object_location`` for a stored bundle."""
    return object_location(
        url,
        what="a stored bundle",
        want="s3://bucket/<prefix>/reports/bundles/<report_id>/<digest>.tar.zst",
    )


def signature_location(url: str) -> S3Location:
    """``object_location`` for a signature named by URL (``--signature s3://...``)."""
    return object_location(url, what="a signature object", want="s3://bucket/<key>.sig")


def _normalise_prefix(prefix: str) -> str:
    return prefix.strip("/")


def bundle_key(prefix: str, report_id: str, bundle_digest: str) -> str:
    """``<prefix>/reports/bundles/<report_id>/<bundle-digest-hex>.tar.zst``.

    Leading and trailing slashes of ``prefix`` are dropped; an empty prefix gives
    ``reports/bundles/...``. Raises UsageError for an invalid report id and DigestError
    for a malformed bundle digest.
    """
    _check_report_id(report_id)
    hex_digest = parse_digest(bundle_digest, source="bundle digest")
    relpath = f"reports/bundles/{report_id}/{hex_digest}{ARCHIVE_SUFFIX}"
    norm = _normalise_prefix(prefix)
    return f"{norm}/{relpath}" if norm else relpath


def _check_report_id(report_id: str) -> None:
    if not isinstance(report_id, str) or _IDENTIFIER_RE.match(report_id) is None:
        raise UsageError(
            f"invalid report id {report_id!r} "
            "(identifiers match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$)"
        )


_KEY_LAYOUT_RE = re.compile(r"(?:\A|/)reports/bundles/([^/]+)/([0-9a-f]{64})\.tar\.zst\Z")


def key_names(key: str) -> tuple[str, str] | None:
    """The (report id, bundle digest) an archive key names by the layout, or None for
    a key outside the layout."""
    match = _KEY_LAYOUT_RE.search(key)
    if match is None:
        return None
    return match.group(1), DIGEST_PREFIX + match.group(2)


def _bundles_prefix(prefix: str, report_id: str | None) -> str:
    norm = _normalise_prefix(prefix)
    base = f"{norm}/reports/bundles/" if norm else "reports/bundles/"
    return f"{base}{report_id}/" if report_id is not None else base


def check_archive_prefix(dest: S3Location) -> None:
    """Refuse an upload destination that is a key rather than an archive prefix.

    ``upload`` builds the key itself; a destination ending in ``.tar.zst`` or holding
    ``reports/bundles/`` would store the bundle where ``list`` of the real prefix never
    finds it. Raises UsageError naming the prefix to use.
    """
    norm = _normalise_prefix(dest.key)
    padded = f"/{norm}/"
    layout = "/reports/bundles/"
    at = padded.find(layout)
    if at >= 0:
        why = "lies inside the archive layout (<prefix>/reports/bundles/...)"
        prefix = padded[1:at]
    elif norm.endswith(ARCHIVE_SUFFIX):
        why = f"ends in {ARCHIVE_SUFFIX}"
        prefix = norm.rpartition("/")[0]
    else:
        return
    use = f"s3://{dest.bucket}/{prefix}" if prefix else f"s3://{dest.bucket}"
    raise UsageError(
        f"{dest.url}: an archive prefix is needed here, not a key, and this {why}; "
        f"use {use} (the key <prefix>/reports/bundles/<report_id>/<digest>{ARCHIVE_SUFFIX} "
        "is chosen from the bundle)"
    )


def signature_keys(archive_key: str, data: bytes) -> tuple[str, str]:
    """The two keys a signature may take beside ``archive_key``, in the order tried:
    ``<key>.sig`` (the first signature stored for the bundle), then
    ``<key>.sig.<hex>`` with the SHA-256 of the signature's own bytes."""
    first = archive_key + SIDECAR_SUFFIX
    return first, f"{first}.{hashlib.sha256(data).hexdigest()}"


def download_path(src: S3Location, path: str) -> Path:
    """Where ``download SRC PATH`` writes, as ``aws s3 cp`` users expect.

    A PATH that is an existing directory receives the object under its own name (the
    last segment of the key). A PATH ending in ``/`` must be an existing directory, as
    for every output option (SPEC 7): nothing is created but the file. Any other PATH is
    the file to create. ``-`` (stdout) is the caller's to handle. Raises UsageError when
    the key has no usable last segment or ``dir/`` does not exist.
    """
    if path.endswith("/") and not os.path.isdir(path):
        raise UsageError(f"{path!r}: no such directory (a path ending in / names one)")
    if not os.path.isdir(path):
        return Path(path)
    name = src.key.rpartition("/")[2]
    if name in ("", ".", ".."):
        raise UsageError(f"{src.url}: the key has no name to save under in {path}")
    directory = Path(path)
    return directory / name
