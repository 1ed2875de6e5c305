"""The bag-level claims every bundle kind shares (SPEC section 5, groups 1 and 2).

``check_bag_frame`` checks bundle.json (stored canonical, its digest, the bundle head)
and the BagIt frame (bagit.txt, the manifests, the tag files, Payload-Oxum, bag-info.txt
exactly as bundle.json gives it, the top directory). ``parse_kept`` reads a kept JSON
file for any claim. The EvalBook verifier and the eval-banana verifier both build on it.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from bundler.archive import bag
from bundler.archive.bag_reader import BagContents
from bundler.core import canonical
from bundler.core.claims import (
    BUNDLE_DOCUMENT_SUBJECT,
    EXPECT_BUNDLE_SUBJECT,
    TOP_DIRECTORY_SUBJECT,
    Claims,
    VerifyOptions,
)
from bundler.core.digests import bytes_digest
from bundler.core.errors import ArchiveError, CanonicalJSONError
from bundler.trust.head import HEAD_FILE, TAG_FILES, bag_info_bytes, bundle_head

_OXUM_RE = re.compile(r"([0-9]{1,20})\.([0-9]{1,20})")


def _unexpected_bundle_detail(source: str, expected: str) -> str:
    """Why --expect-bundle-digest did not match: often the archive's sha256sum was given."""
    where = (
        "the bundle digest is the Bundle-Digest line of bag-info.txt, and what export "
        'prints on its "Bundle digest:" line (the second; the first names the archive)'
    )
    path = Path(source)
    if not source.startswith("s3://") and path.is_file():
        hasher = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                hasher.update(chunk)
        if expected == "sha256:" + hasher.hexdigest():
            return (
                "the digest given is the archive file's SHA-256 (what sha256sum prints), "
                f"not the bundle digest; {where}"
            )
    return f"the bundle is not the one expected ({where}, not the archive's sha256sum)"


def check_bagit(
    contents: BagContents, claims: Claims, bundle: dict[str, Any], *, bundle_digest: str
) -> None:
    """Claim group 1 for any of our bags: bagit.txt, the manifests, the tag files,
    Payload-Oxum, and bag-info.txt exactly as bundle.json gives it (so no tag file
    escapes the bundle digest)."""
    files = contents.files
    for path in sorted(p for p in files if not p.startswith("data/")):
        if "/" in path:
            claims.failed(
                1,
                "only the known tag files, at the bag root",
                "file outside data/ below the bag root (it would escape the bundle digest)",
                path=path,
            )
        elif path not in TAG_FILES:
            claims.failed(
                1, "only the known tag files", "unexpected file at the bag root", path=path
            )
    for path in sorted(
        d for d in contents.directories if d != "data" and not d.startswith("data/")
    ):
        claims.failed(
            1,
            "only the known tag files, at the bag root",
            "directory outside data/ (nothing but data/ and the tag files may be in a bag)",
            path=path + "/",
        )
    if contents.kept.get(bag.BAGIT) == bag.BAGIT_TXT:
        claims.proven(1, "bagit.txt declares BagIt 1.0, UTF-8", path=bag.BAGIT)
    else:
        claims.failed(
            1,
            "bagit.txt declares BagIt 1.0, UTF-8",
            "missing or different from the BagIt 1.0 declaration",
            path=bag.BAGIT,
        )
    manifests: dict[str, dict[str, str]] = {}
    for name in (bag.MANIFEST, bag.TAG_MANIFEST):
        data = contents.kept.get(name)
        if data is None:
            claims.failed(1, f"{name} present", "missing", path=name)
            manifests[name] = {}
            continue
        try:
            manifests[name] = bag.parse_manifest(data, source=name)
        except ArchiveError as exc:
            claims.failed(1, f"{name} well-formed", exc.message, path=name)
            manifests[name] = {}
    data_files = {p for p in files if p.startswith("data/")}
    listed = manifests[bag.MANIFEST]
    _match_manifest(claims, listed, data_files, files, bag.MANIFEST)
    tag_files = {p for p in files if not p.startswith("data/") and p != bag.TAG_MANIFEST}
    _match_manifest(claims, manifests[bag.TAG_MANIFEST], tag_files, files, bag.TAG_MANIFEST)
    info_bytes = contents.kept.get(bag.BAG_INFO)
    if info_bytes is None:
        claims.failed(1, "bag-info.txt present", "missing", path=bag.BAG_INFO)
        return
    try:
        info = bag.parse_bag_info(info_bytes, source=bag.BAG_INFO)
    except ArchiveError as exc:
        claims.failed(1, "bag-info.txt well-formed", exc.message, path=bag.BAG_INFO)
        return
    payload_bytes = sum(files[p].size for p in data_files)
    oxum = bag.payload_oxum(payload_bytes, len(data_files))
    declared = info.get("Payload-Oxum")
    # Expected is what bag-info.txt declares, observed what the bag holds.
    claims.compare(
        1,
        "Payload-Oxum",
        declared,
        oxum,
        path=bag.BAG_INFO,
        detail="the data/ files present do not add up to the Payload-Oxum bag-info.txt declares",
    )
    # bag-info.txt as bundle.json determines it, with the Payload-Oxum it declares (that
    # one is held against the files above): a missing or extra data/ file fails there,
    # not here.
    declared_match = _OXUM_RE.fullmatch(declared or "")
    if declared_match is not None:
        payload_bytes, file_count = int(declared_match[1]), int(declared_match[2])
    else:
        file_count = len(data_files)
    claims.compare(
        1,
        "bag-info Bundle-Digest",
        bundle_digest,
        info.get("Bundle-Digest"),
        path=bag.BAG_INFO,
        detail="Bundle-Digest is not the digest of bundle.json",
    )
    expected_info = bag_info_bytes(bundle, bundle_digest, payload_bytes, file_count)
    claims.compare(
        1,
        "bag-info.txt is what bundle.json gives",
        bytes_digest(expected_info),
        bytes_digest(info_bytes),
        path=bag.BAG_INFO,
        detail="bag-info.txt differs from the one bundle.json determines",
    )


def _match_manifest(
    claims: Claims, listed: dict[str, str], present: set[str], files: dict[str, Any], name: str
) -> None:
    bad = []
    for path in sorted(listed):
        if path not in files:
            claims.failed(
                1,
                f"{name} entry",
                "listed but not in the bag",
                path=path,
                expected="sha256:" + listed[path],
            )
        elif files[path].sha256 != listed[path]:
            claims.failed(
                1,
                f"{name} entry",
                "file does not match its manifest digest",
                path=path,
                expected="sha256:" + listed[path],
                observed="sha256:" + files[path].sha256,
            )
            bad.append(path)
    for path in sorted(present - set(listed)):
        claims.failed(
            1,
            f"{name} entry",
            f"file is not listed in {name}",
            path=path,
            observed="sha256:" + files[path].sha256,
        )
        bad.append(path)
    if not bad and set(listed) <= set(files):
        claims.proven(1, f"{name}: {len(listed)} files match")


def check_bundle_document(
    contents: BagContents, claims: Claims, bundle: dict[str, Any], options: VerifyOptions
) -> str:
    """Claim group 2: bundle.json stored canonical, its digest, the bundle head. Returns the digest."""
    data = contents.kept["data/bundle.json"]
    canonical_bytes = canonical.dumps(bundle)
    digest = bytes_digest(canonical_bytes)
    if canonical_bytes == data:
        claims.proven(
            2,
            BUNDLE_DOCUMENT_SUBJECT,
            path="data/bundle.json",
            observed=digest,
        )
    else:
        claims.failed(
            2,
            "bundle.json is stored canonical",
            "bytes differ from the JCS form",
            path="data/bundle.json",
        )
    if options.expect_bundle_digest is not None:
        claims.compare(
            2,
            EXPECT_BUNDLE_SUBJECT,
            options.expect_bundle_digest,
            digest,
            path="data/bundle.json",
            detail=_unexpected_bundle_detail(contents.source, options.expect_bundle_digest),
        )
    head = contents.kept.get(HEAD_FILE)
    if head is None:
        claims.failed(2, "bundle-head.json present", "missing", path=HEAD_FILE)
    else:
        expected_head = canonical.dumps(bundle_head(bundle, digest))
        if head == expected_head:
            claims.proven(2, "bundle-head.json agrees with bundle.json", path=HEAD_FILE)
        else:
            claims.failed(
                2,
                "bundle-head.json agrees with bundle.json",
                "head differs from the one bundle.json gives",
                path=HEAD_FILE,
                expected=bytes_digest(expected_head),
                observed=bytes_digest(head),
            )
    return digest


def check_bag_frame(
    contents: BagContents,
    claims: Claims,
    bundle: dict[str, Any],
    options: VerifyOptions,
    *,
    expected_top: str,
) -> str:
    """Claims every bundle kind shares: bundle.json (2), BagIt and the top directory (1).

    Returns the bundle digest.
    """
    digest = check_bundle_document(contents, claims, bundle, options)
    check_bagit(contents, claims, bundle, bundle_digest=digest)
    claims.compare(
        1,
        TOP_DIRECTORY_SUBJECT,
        expected_top,
        contents.top,
        detail="top directory does not match the bundle's id",
    )
    return digest


def parse_kept(
    contents: BagContents, path: str, *, canonical_required: bool
) -> tuple[Any, str | None]:
    """(value, problem) of a kept JSON file; value None when it does not parse."""
    data = contents.kept.get(path)
    if data is None:
        return None, "missing from the bag"
    try:
        value = (
            canonical.loads_canonical(data, source=path)
            if canonical_required
            else canonical.loads(data, source=path)
        )
    except CanonicalJSONError as exc:
        return None, exc.message
    return value, None
