"""Offline verification of a reproducibility bundle (SPEC section 5).

``verify_bundle`` reads the bundle once (``bag_reader``), then checks the ten claim
groups and returns a ``Verification``: every claim proven, unprovable (listed, with its
reason) or failed (path, expected and observed). It raises only when no verdict is
possible: an unreadable or unsafe archive, or a malformed bundle.json.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, BinaryIO

from bundler.archive import bag
from bundler.archive.bag_reader import BagContents, Extractor, open_members, read_bag
from bundler.archive.reader import DEFAULT_MAX_BYTES, ArchiveTap
from bundler.core import canonical, schemas
from bundler.core.digests import SCORER_TAG, FramedHasher, bytes_digest
from bundler.core.errors import (
    ArchiveError,
    BundlerError,
    CanonicalJSONError,
    InputError,
    OutputError,
    SchemaError,
    StorageError,
    VerificationFailed,
)
from bundler.core.outputs import prepare_output_dir
from bundler.core.version import TOOL_NAME, __version__
from bundler.evalbook.export import BUNDLE_SCHEMA, EXPORT, READ_BODY
from bundler.evalbook.listing import INLINE_MAX, BundleFacts, PayloadUse, listing_problems, ref_of
from bundler.evalbook.store import MAX_EVIDENCE_REFS
from bundler.trust.head import HEAD_FILE, HEAD_SIG_FILE, TAG_FILES, bag_info_bytes, bundle_head
from bundler.trust.merkle import TreeBuilder

GROUPS = {
    1: "bagit",
    2: "bundle",
    3: "report",
    4: "suite",
    5: "scorers",
    6: "datasets",
    7: "checks",
    8: "cases",
    9: "evidence",
    10: "accounting",
    11: "coherence",
}
PAYLOAD_KINDS = {"output", "trace", "artifact"}
_OXUM_RE = re.compile(r"([0-9]{1,20})\.([0-9]{1,20})")


class State(StrEnum):
    PROVEN = "proven"
    UNPROVABLE = "unprovable"
    FAILED = "failed"


class Verdict(StrEnum):
    VERIFIED = "verified"
    FAILED = "failed"
    ERROR = "error"


@dataclass(frozen=True)
class Claim:
    """One thing the verifier checked and how it ended."""

    group: int
    subject: str
    state: State
    path: str | None = None
    expected: str | None = None
    observed: str | None = None
    reason: str | None = None
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "group_name": GROUPS[self.group],
            "subject": self.subject,
            "state": self.state.value,
            "path": self.path,
            "expected": self.expected,
            "observed": self.observed,
            "reason": self.reason,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Anchor:
    """What the result is anchored to, beyond the bundle's own consistency."""

    expected_bundle_digest: str | None = None
    expected_report_digest: str | None = None
    signer: str | None = None  # "ID, key SHA256:..." when a signature was checked

    @property
    def self_consistent_only(self) -> bool:
        return not (self.expected_bundle_digest or self.expected_report_digest or self.signer)

    def describe(self) -> str:
        parts = []
        if self.signer:
            parts.append(f"signed by {self.signer}")
        if self.expected_bundle_digest:
            parts.append(f"expected bundle digest {self.expected_bundle_digest}")
        if self.expected_report_digest:
            parts.append(f"expected report digest {self.expected_report_digest}")
        if not parts:
            return "none: this result shows self-consistency only, not who made the bundle"
        return "; ".join(parts)


@dataclass(frozen=True)
class ArchiveFacts:
    """The archive file verify read: the SHA-256 (hex, as ``sha256sum`` prints it) and
    size of exactly the bytes consumed, which is the whole file."""

    sha256: str
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "size": self.size}


@dataclass(frozen=True)
class Envelope:
    """The report's envelope as the bundle holds it (SPEC 3.2): current or superseded."""

    status: str
    superseded_by: str | None = None
    superseded_at: str | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "superseded_by": self.superseded_by,
            "superseded_at": self.superseded_at,
            "reason": self.reason,
        }


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def archive_facts(tap: ArchiveTap) -> ArchiveFacts | None:
    """What ``tap`` read, once it read a whole archive; None for a bag directory."""
    if not tap.attached or not tap.complete:
        return None
    return ArchiveFacts(tap.sha256, tap.size)


def _archive_after_error(tap: ArchiveTap) -> ArchiveFacts | None:
    """The archive's facts when no verdict was possible: the rest is read, if it can be.

    A StorageError (an object altered at rest shows at its end) propagates.
    """
    if tap.attached and not tap.complete:
        tap.drain_if_readable()
    return archive_facts(tap)


@dataclass(frozen=True)
class Verification:
    source: str
    verdict: Verdict
    kind: str | None = None  # the bundle schema
    bundle_digest: str | None = None
    report_id: str | None = None
    report_digest: str | None = None
    anchor: Anchor = field(default_factory=Anchor)
    strict: bool = False
    claims: tuple[Claim, ...] = ()
    error: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)  # kind-specific facts (eval-banana)
    # The report's own result (EvalBook: the body's ``result``; eval-banana: pass or fail
    # as ``run_passed`` recomputes), None when the report could not be read.
    report_result: str | None = None
    envelope: Envelope | None = None  # EvalBook bundles whose envelope is schema-valid
    archive: ArchiveFacts | None = None  # None for a bag directory or a run directory
    verified_at: str = field(default_factory=_now)

    @property
    def exit_code(self) -> int:
        return {Verdict.VERIFIED: 0, Verdict.FAILED: 1, Verdict.ERROR: 3}[self.verdict]

    def counts(self) -> dict[str, int]:
        counter = Counter(c.state.value for c in self.claims)
        return {s.value: counter.get(s.value, 0) for s in State}

    def unprovable_by_reason(self) -> dict[str, int]:
        counter = Counter(c.reason or "unknown" for c in self.claims if c.state is State.UNPROVABLE)
        return dict(sorted(counter.items()))

    def strict_failed_by_reason(self) -> dict[str, int]:
        """Under ``--strict``: the claims that failed only for being unprovable, by reason."""
        counter = Counter(
            c.reason for c in self.claims if c.state is State.FAILED and c.reason is not None
        )
        return dict(sorted(counter.items()))

    def strict_forecast(self) -> str | None:
        """What ``--strict`` would decide, for a verified result with unprovable claims
        that was not strict; None where --strict would change nothing or was applied."""
        if self.strict or self.verdict is not Verdict.VERIFIED:
            return None
        n = self.counts()["unprovable"]
        if not n:
            return None  # --strict would decide the same
        return f"FAILED ({n} unprovable {_claims(n)} would fail)"

    def failures(self) -> list[Claim]:
        return [c for c in self.claims if c.state is State.FAILED]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "evalbook.verification.v1",
            "tool": {"name": TOOL_NAME, "version": __version__},
            "verified_at": self.verified_at,
            "source": self.source,
            "archive": None if self.archive is None else self.archive.to_json(),
            "verdict": self.verdict.value,
            "bundle_schema": self.kind,
            "bundle_digest": self.bundle_digest,
            "report_id": self.report_id,
            "report_digest": self.report_digest,
            "report_result": self.report_result,
            "envelope": None if self.envelope is None else self.envelope.to_json(),
            "anchor": {
                "expected_bundle_digest": self.anchor.expected_bundle_digest,
                "expected_report_digest": self.anchor.expected_report_digest,
                "signer": self.anchor.signer,
                "self_consistent_only": self.anchor.self_consistent_only,
                "description": self.anchor.describe(),
            },
            "strict": self.strict,
            "counts": self.counts(),
            "unprovable_by_reason": self.unprovable_by_reason(),
            "strict_forecast": self.strict_forecast(),
            "error": self.error,
            "summary": self.summary,
            "claims": [c.to_json() for c in self.claims],
        }


def _claims(n: int) -> str:
    return "claim" if n == 1 else "claims"


@dataclass(frozen=True)
class VerifyOptions:
    expect_bundle_digest: str | None = None
    expect_report_digest: str | None = None
    strict: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    # Called with the head bytes and the signature text (embedded or sidecar); returns the
    # signer description, or raises BundlerError for a bad signature.
    check_signature: Callable[[bytes, str | None], str] | None = None
    signature_text: str | None = None  # a sidecar signature, when given


class Claims:
    """Collects claims; helpers keep each check one line at the call site."""

    def __init__(self) -> None:
        self.items: list[Claim] = []

    def proven(self, group: int, subject: str, **kw: Any) -> None:
        self.items.append(Claim(group, subject, State.PROVEN, **kw))

    def unprovable(self, group: int, subject: str, reason: str, **kw: Any) -> None:
        self.items.append(Claim(group, subject, State.UNPROVABLE, reason=reason, **kw))

    def failed(self, group: int, subject: str, detail: str, **kw: Any) -> None:
        self.items.append(Claim(group, subject, State.FAILED, detail=detail, **kw))

    def compare(
        self,
        group: int,
        subject: str,
        expected: str | None,
        observed: str | None,
        *,
        path: str | None = None,
        detail: str = "digest differs",
    ) -> bool:
        if expected == observed:
            self.proven(group, subject, path=path, expected=expected, observed=observed)
            return True
        self.failed(group, subject, detail, path=path, expected=expected, observed=observed)
        return False


# ------------------------------------------------------------------------------ entry


def verify_bundle(
    location: str,
    options: VerifyOptions,
    *,
    stream: BinaryIO | None = None,
    progress: Callable[[int], None] | None = None,
) -> Verification:
    """Verify an archive, a bag directory or an open archive stream.

    Never raises for a bad bundle: an unsafe or unreadable archive or a malformed
    bundle.json gives verdict ``error`` with the one-line reason.
    """
    return read_and_verify(location, options, stream=stream, progress=progress)[0]


def read_and_verify(
    location: str,
    options: VerifyOptions,
    *,
    stream: BinaryIO | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[Verification, BagContents | None]:
    """Like ``verify_bundle``, also returning what was read (None on verdict error).

    ``progress`` receives a running count: of the archive's (compressed) bytes read,
    whose total is the archive's size; for a bag directory, of the file bytes read.
    The result names the archive read (``archive``: SHA-256 and size of the whole file).
    """
    tap = ArchiveTap(progress)
    try:
        members = open_members(location, max_bytes=options.max_bytes, stream=stream, tap=tap)
        contents = read_bag(members, source=location, progress=_files_progress(tap, progress))
        result = verify_contents(contents, options)
        return replace(result, archive=archive_facts(tap)), contents
    except StorageError:
        raise  # the bucket, not the bundle, failed: exit 5, not a verdict
    except BundlerError as exc:
        return Verification(
            source=location,
            verdict=Verdict.ERROR,
            error=exc.message,
            strict=options.strict,
            archive=_archive_after_error(tap),
        ), None


def _files_progress(
    tap: ArchiveTap, progress: Callable[[int], None] | None
) -> Callable[[int], None] | None:
    """The file-bytes count for a bag directory; an archive's tap reports its own bytes."""
    if progress is None:
        return None

    def on_files(done: int) -> None:
        if not tap.attached:
            progress(done)

    return on_files


def read_verified(
    location: str, options: VerifyOptions, *, action: str, stream: BinaryIO | None = None
) -> tuple[Verification, BagContents]:
    """Read and verify; raise unless the verdict is ``verified``.

    For commands that must not act on a bundle that does not verify (sign, prove,
    upload): VerificationFailed (exit 1) when a claim failed, InputError (exit 3) when
    the bundle cannot be read at all (SPEC 8); the message carries the error or the
    first failed claims.
    """
    result, contents = read_and_verify(location, options, stream=stream)
    if result.verdict is Verdict.ERROR or contents is None:
        raise InputError(
            f"{location}: cannot be read as a bundle ({result.error}); refusing to {action}"
        )
    if result.verdict is not Verdict.VERIFIED:
        detail = "; ".join(f"{c.subject}: {c.detail}" for c in result.failures()[:3])
        raise VerificationFailed(
            f"{location}: bundle does not verify ({detail}); refusing to {action}"
        )
    return result, contents


def verify_contents(contents: BagContents, options: VerifyOptions) -> Verification:
    """Check the claims over a bag already read. Raises BundlerError when no verdict is possible."""
    bundle = _load_bundle(contents)
    if bundle.get("schema") == BUNDLE_SCHEMA:
        claims, facts = _EvalBookVerifier(contents, bundle, options).run()
    else:
        from bundler.evalbanana import verify as ebverify  # eval-banana bundles(SPEC section 10.2)

        claims, facts = ebverify.verify_eb_bundle(contents, bundle, options)
    anchor, signer_claims = _anchor_claims(contents, bundle, options)
    claims.items.extend(signer_claims)
    final = apply_strict(claims.items, options.strict)
    verdict = Verdict.FAILED if any(c.state is State.FAILED for c in final) else Verdict.VERIFIED
    return Verification(
        source=contents.source,
        verdict=verdict,
        kind=bundle["schema"],
        bundle_digest=facts["bundle_digest"],
        report_id=facts["report_id"],
        report_digest=facts["report_digest"],
        anchor=anchor,
        strict=options.strict,
        claims=tuple(final),
        summary=facts.get("summary", {}),
        report_result=facts.get("report_result"),
        envelope=facts.get("envelope"),
    )


def apply_strict(claims: Iterable[Claim], strict: bool) -> list[Claim]:
    """Under ``--strict`` an unprovable claim fails, keeping its reason."""
    if not strict:
        return list(claims)
    return [
        replace(c, state=State.FAILED, detail=f"--strict: unprovable ({c.reason})")
        if c.state is State.UNPROVABLE
        else c
        for c in claims
    ]


def missing_bundle_hint(source: str) -> str:
    """What a directory without data/bundle.json probably is, as "; hint" (or "")."""
    path = Path(source)
    if source.startswith("s3://") or not path.is_dir() or path.is_symlink():
        return ""
    try:
        children = sorted(path.iterdir())
    except OSError:
        return ""
    bags = [c for c in children if c.is_dir() and (c / "bagit.txt").is_file()]
    if len(bags) == 1 and len(children) == 1:
        return (
            f"; this directory holds the bag {bags[0].name}/ (what extract wrote): verify {bags[0]}"
        )
    if (path / "report.json").is_file():
        return (
            "; this looks like an eval-banana run directory: verify it in place with "
            "--project PROJECT_ROOT, or export it with export-eb"
        )
    if (path / "body.json").is_file() and (path / "envelope.json").is_file():
        return (
            "; this looks like a report directory of a store: export it first with "
            f"export --store STORE_ROOT --report {path.name}"
        )
    return ""


def _unexpected_bundle_detail(source: str, expected: str) -> str:
    """Why --expect-bundle-digest did not match: often the archive's sha256sum was given."""
    where = (
        "the bundle digest is the Bundle-Digest line of bag-info.txt and the first "
        "word export prints"
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


def _load_bundle(contents: BagContents) -> dict[str, Any]:
    """bundle.json parsed and schema-valid, or ArchiveError (verdict error)."""
    data = contents.kept.get("data/bundle.json")
    where = f"{contents.source}: data/bundle.json"
    if data is None:
        raise ArchiveError(
            f"{where}: missing (no verdict possible){missing_bundle_hint(contents.source)}"
        )
    try:
        value = canonical.loads(data, source=where)
    except CanonicalJSONError as exc:
        raise ArchiveError(f"malformed bundle.json: {exc.message}") from exc
    if not isinstance(value, dict):
        raise ArchiveError(f"{where}: not a JSON object")
    schema_name = {
        BUNDLE_SCHEMA: "bundle",
        "evalbook.eval_banana_bundle.v1": "eb-bundle",
    }.get(value.get("schema"))  # type: ignore[arg-type]
    if schema_name is None:
        raise ArchiveError(f"{where}: unknown bundle schema {value.get('schema')!r}")
    try:
        schemas.validate(schema_name, value, source=where)
    except SchemaError as exc:
        raise ArchiveError(f"malformed bundle.json: {exc.message}") from exc
    return value


def _anchor_claims(
    contents: BagContents, bundle: dict[str, Any], options: VerifyOptions
) -> tuple[Anchor, list[Claim]]:
    claims = Claims()
    signer = None
    if options.check_signature is not None:
        head = contents.kept.get(HEAD_FILE)
        sig_text = options.signature_text
        if sig_text is None and HEAD_SIG_FILE in contents.kept:
            sig_text = contents.kept[HEAD_SIG_FILE].decode("utf-8", "replace")
        if head is None:
            claims.failed(
                2,
                "signature",
                "bundle-head.json is missing, nothing to check the signature against",
            )
        else:
            try:
                signer = options.check_signature(head, sig_text)
                claims.proven(2, "signature", path=HEAD_FILE, observed=signer)
            except BundlerError as exc:
                claims.failed(2, "signature", exc.message, path=HEAD_SIG_FILE)
    anchor = Anchor(options.expect_bundle_digest, options.expect_report_digest, signer)
    return anchor, claims.items


# ------------------------------------------------------------------- common bag claims


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
            "bundle.json is schema-valid and stored canonical",
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
            "bundle digest equals --expect-bundle-digest",
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
        "top directory names the report or run",
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


# ------------------------------------------------------------------ EvalBook bundles


@dataclass
class _Listing:
    """The unavailable and redacted entries, indexed."""

    entries: list[dict[str, Any]]
    by_key: dict[tuple[str, str], dict[str, Any]]
    by_digest: dict[str, list[dict[str, Any]]]

    @classmethod
    def of(cls, bundle: dict[str, Any]) -> _Listing:
        entries = [dict(e, group="unavailable") for e in bundle["unavailable"]]
        entries += [dict(e, group="redacted", detail=None) for e in bundle["redacted"]]
        by_key: dict[tuple[str, str], dict[str, Any]] = {}
        by_digest: dict[str, list[dict[str, Any]]] = {}
        for e in entries:
            by_key.setdefault((e["kind"], e["ref"]), e)
            if e["digest"] is not None:
                by_digest.setdefault(e["digest"], []).append(e)
        return cls(entries, by_key, by_digest)

    def get(self, kind: str, ref: str) -> dict[str, Any] | None:
        return self.by_key.get((kind, ref))

    def payload(self, digest: str) -> dict[str, Any] | None:
        for e in self.by_digest.get(digest, []):
            if e["kind"] in PAYLOAD_KINDS and e["ref"] == digest:
                return e
        return None


class _EvalBookVerifier:
    def __init__(
        self, contents: BagContents, bundle: dict[str, Any], options: VerifyOptions
    ) -> None:
        self.c = contents
        self.bundle = bundle
        self.options = options
        self.claims = Claims()
        self.listing = _Listing.of(bundle)
        self.report: dict[str, Any] | None = None
        self.envelope: Envelope | None = None  # once the bundled envelope is schema-valid
        self.named: set[str] = {"data/bundle.json"}
        # Filled while checking cases: digest -> [(kind, location, check_id, size)]
        self.case_refs: dict[str, list[tuple[str, str, str, int]]] = {}
        self.examples_used: set[tuple[str, int, str]] = set()
        self.read_body = READ_BODY in bundle["exporter"]["permissions"]
        self.cases_unknown = False  # a named case file is missing from the bag
        self.checks_unknown: set[str] = set()  # the checks whose case file is missing

    def run(self) -> tuple[Claims, dict[str, Any]]:
        digest = check_bag_frame(
            self.c,
            self.claims,
            self.bundle,
            self.options,
            expected_top=f"evalbook-bundle-{self.bundle['report']['report_id']}",
        )
        self.check_report()
        self.check_suite()
        self.check_scorers()
        manifests = self.check_datasets()
        self.check_checks_and_cases()
        self.check_examples(manifests)
        self.check_payloads()
        self.check_evidence_refs()
        self.check_accounting(manifests)
        self.check_coherence()
        return self.claims, {
            "bundle_digest": digest,
            "report_id": self.bundle["report"]["report_id"],
            "report_digest": self.bundle["report"]["digest"],
            "report_result": None if self.report is None else self.report["result"],
            "envelope": self.envelope,
        }

    # -- helpers -----------------------------------------------------------------------

    def file_digest(self, path: str | None) -> str | None:
        """The SHA-256 of a bag file, computed while reading the bag; None when absent.

        For a document read with ``canonical_required`` this is also its JSON digest:
        its bytes are its JCS form.
        """
        if path is None or path not in self.c.files:
            return None
        return "sha256:" + self.c.files[path].sha256

    def present(self, path: str | None) -> bool:
        return path is not None and path in self.c.files

    def listed_or_failed(
        self, group: int, kind: str, ref: str, subject: str, *, path: str | None = None
    ) -> None:
        entry = self.listing.get(kind, ref)
        if entry is not None:
            self.claims.unprovable(
                group,
                subject,
                entry["reason"],
                path=path,
                expected=entry["digest"],
                detail=entry["detail"],
            )
        else:
            self.claims.failed(
                group,
                subject,
                "neither in the bundle nor listed as unavailable or redacted",
                path=path,
            )

    # -- claim 3: report ---------------------------------------------------------------

    def check_report(self) -> None:
        entry = self.bundle["report"]
        path = entry["path"]
        self.named.update({path, entry["envelope"]["path"]})
        observed = self.file_digest(path)
        self.claims.compare(3, "report body sha256", entry["digest"], observed, path=path)
        if self.options.expect_report_digest is not None:
            self.claims.compare(
                3,
                "report digest equals --expect-report-digest",
                self.options.expect_report_digest,
                observed,
                path=path,
                detail="the report is not the one expected",
            )
        value, problem = parse_kept(self.c, path, canonical_required=True)
        if value is None:
            self.claims.failed(
                3, "report body is canonical JSON", problem or "unreadable", path=path
            )
            return
        try:
            schemas.validate("report-body", value, source=path)
        except SchemaError as exc:
            self.claims.failed(3, "report body is schema-valid", exc.message, path=path)
            return
        self.claims.proven(3, "report body is canonical and schema-valid", path=path)
        self.report = value
        if (
            value["report_id"] != entry["report_id"]
            or value["evaluation_id"] != entry["evaluation_id"]
        ):
            self.claims.failed(
                3,
                "report ids agree with bundle.json",
                "report_id or evaluation_id differs",
                path=path,
                expected=entry["report_id"],
                observed=value["report_id"],
            )
        env = entry["envelope"]
        self.claims.compare(
            3, "envelope sha256", env["digest"], self.file_digest(env["path"]), path=env["path"]
        )
        env_value, problem = parse_kept(self.c, env["path"], canonical_required=False)
        if env_value is None or not isinstance(env_value, dict):
            self.claims.failed(3, "envelope is JSON", problem or "not an object", path=env["path"])
        else:
            try:
                schemas.validate("envelope", env_value, source=env["path"])
                self.envelope = Envelope(
                    env_value["status"],
                    env_value["superseded_by"],
                    env_value["superseded_at"],
                    env_value["superseded_reason"],
                )
                self.claims.compare(
                    3,
                    "envelope status",
                    env["status"],
                    env_value["status"],
                    path=env["path"],
                    detail="status differs from bundle.json",
                )
            except SchemaError as exc:
                self.claims.failed(3, "envelope is schema-valid", exc.message, path=env["path"])

    # -- claim 4: suite ----------------------------------------------------------------

    def check_suite(self) -> None:
        if self.report is None:
            return
        ref = self.report["suite_ref"]
        entry = self.bundle["suite"]
        item = f"{ref['id']}@{ref['version']}"
        if (entry["suite_id"], entry["version"], entry["digest"]) != (
            ref["id"],
            ref["version"],
            ref["digest"],
        ):
            self.claims.failed(
                4,
                f"suite {item}",
                "bundle.json's suite differs from the report's suite_ref",
                expected=ref["digest"],
                observed=entry["digest"],
            )
        if entry["path"] is None:
            self.listed_or_failed(4, "suite", item, f"suite {item}")
            return
        self.named.add(entry["path"])
        value, problem = parse_kept(self.c, entry["path"], canonical_required=True)
        if value is None:
            self.claims.failed(
                4,
                f"suite {item}",
                problem or "unreadable",
                path=entry["path"],
                expected=ref["digest"],
            )
            return
        self.claims.compare(
            4,
            f"suite {item} JSON digest",
            ref["digest"],
            self.file_digest(entry["path"]),
            path=entry["path"],
        )
        try:
            schemas.validate("suite", value, source=entry["path"])
        except SchemaError as exc:
            self.claims.failed(11, f"suite {item} is schema-valid", exc.message, path=entry["path"])
            return
        if (value["suite_id"], value["version"]) != (ref["id"], ref["version"]):
            self.claims.failed(
                11,
                f"suite {item} names itself",
                "suite_id or version inside differs from the report's suite_ref",
                path=entry["path"],
                expected=item,
                observed=f"{value['suite_id']}@{value['version']}",
            )

    # -- claim 5: scorers --------------------------------------------------------------

    def check_scorers(self) -> None:
        if self.report is None:
            return
        pinned: dict[str, set[str]] = {}
        for check in self.report["checks"]:
            ref = check["scorer_ref"]
            pinned.setdefault(f"{ref['id']}@{ref['version']}", set()).add(ref["digest"])
        exported = {f"{s['scorer_id']}@{s['version']}": s for s in self.bundle["scorers"]}
        for item in sorted(pinned):
            entry = exported.get(item)
            if entry is None:
                self.listed_or_failed(5, "scorer", item, f"scorer {item}")
                continue
            observed = self.scorer_digest(entry)
            for digest in sorted(pinned[item]):
                self.claims.compare(
                    5, f"scorer {item} framed digest", digest, observed, path=entry["path"]
                )
            if entry["digest"] not in pinned[item]:
                self.claims.failed(
                    5,
                    f"scorer {item}",
                    "bundle.json's scorer digest is not the pinned one",
                    expected=sorted(pinned[item])[0],
                    observed=entry["digest"],
                )
        for item in sorted(set(exported) - set(pinned)):
            self.claims.failed(
                5,
                f"scorer {item}",
                "exported scorer that no report check pins",
                path=exported[item]["path"],
            )

    def scorer_digest(self, entry: dict[str, Any]) -> str | None:
        base = entry["path"]
        desc_path = f"{base}/scorer.json"
        self.named.add(desc_path)
        value, problem = parse_kept(self.c, desc_path, canonical_required=True)
        item = f"{entry['scorer_id']}@{entry['version']}"
        if value is None:
            self.claims.failed(
                5, f"scorer {item} descriptor", problem or "malformed", path=desc_path
            )
            return None
        try:
            schemas.validate("scorer", value, source=desc_path)
        except SchemaError as exc:
            self.claims.failed(
                11, f"scorer {item} descriptor is schema-valid", exc.message, path=desc_path
            )
            return None
        if (value["scorer_id"], value["version"]) != (entry["scorer_id"], entry["version"]):
            self.claims.failed(
                11,
                f"scorer {item} names itself",
                "scorer_id or version inside differs from bundle.json",
                path=desc_path,
                expected=item,
                observed=f"{value['scorer_id']}@{value['version']}",
            )
        hasher = FramedHasher(SCORER_TAG)
        hasher.add("scorer.json", self.c.kept[desc_path])
        for rel in sorted((str(p) for p in value["files"]), key=lambda p: p.encode("utf-8")):
            path = f"{base}/files/{rel}"
            self.named.add(path)
            data = self.c.kept.get(path)
            if data is None:
                self.claims.failed(
                    5,
                    f"scorer {entry['scorer_id']}@{entry['version']} file",
                    "listed in scorer.json but missing",
                    path=path,
                )
                return None
            hasher.add(f"files/{rel}", data)
        return hasher.digest()

    # -- claim 6: datasets -------------------------------------------------------------

    def check_datasets(self) -> dict[tuple[str, int], dict[str, str]]:
        """Dataset manifests; returns (id, version) -> {example_id: digest} for present ones."""
        manifests: dict[tuple[str, int], dict[str, str]] = {}
        if self.report is None:
            return manifests
        refs = {(r["id"], r["version"]): r["digest"] for r in self.report["dataset_refs"]}
        exported = {(d["dataset_id"], d["version"]): d for d in self.bundle["datasets"]}
        for key in sorted(refs):
            item = f"{key[0]}@{key[1]}"
            entry = exported.get(key)
            if entry is None:
                self.listed_or_failed(6, "dataset", item, f"dataset {item}")
                continue
            self.named.add(entry["path"])
            value, problem = parse_kept(self.c, entry["path"], canonical_required=True)
            if value is None:
                self.claims.failed(
                    6,
                    f"dataset {item} manifest",
                    problem or "unreadable",
                    path=entry["path"],
                    expected=refs[key],
                )
                continue
            ok = self.claims.compare(
                6,
                f"dataset {item} manifest JSON digest",
                refs[key],
                self.file_digest(entry["path"]),
                path=entry["path"],
            )
            if entry["digest"] != refs[key]:
                self.claims.failed(
                    6,
                    f"dataset {item}",
                    "bundle.json's digest is not the report's",
                    expected=refs[key],
                    observed=entry["digest"],
                )
            if ok:
                try:
                    schemas.validate("dataset-manifest", value, source=entry["path"])
                    ids = [e["example_id"] for e in value["examples"]]
                    if ids != sorted(set(ids)):
                        self.claims.failed(
                            11,
                            f"dataset {item} manifest",
                            "examples must be unique and sorted by example_id",
                            path=entry["path"],
                        )
                    manifests[key] = {e["example_id"]: e["digest"] for e in value["examples"]}
                except SchemaError as exc:
                    self.claims.failed(
                        6,
                        f"dataset {item} manifest is schema-valid",
                        exc.message,
                        path=entry["path"],
                    )
        for key in sorted(set(exported) - set(refs)):
            self.claims.failed(
                6,
                f"dataset {key[0]}@{key[1]}",
                "exported dataset the report does not reference",
                path=exported[key]["path"],
            )
        return manifests

    def check_examples(self, manifests: dict[tuple[str, int], dict[str, str]]) -> None:
        listed_in_bundle: set[tuple[str, int, str]] = set()
        for d in self.bundle["datasets"]:
            key = (d["dataset_id"], d["version"])
            for e in d["examples"]:
                item = f"{key[0]}@{key[1]}/{e['example_id']}"
                listed_in_bundle.add((key[0], key[1], e["example_id"]))
                if e["path"] is not None:
                    # Named even when its claim fails below, so one bad entry is not also
                    # reported as an unnamed file.
                    self.named.add(e["path"])
                if (
                    key[0],
                    key[1],
                    e["example_id"],
                ) not in self.examples_used and not self.cases_unknown:
                    self.claims.failed(
                        10,
                        f"example {item}",
                        "bundle.json lists an example that no exported case uses",
                        path=e["path"],
                    )
                manifest_digest = manifests.get(key, {}).get(e["example_id"])
                if manifest_digest is None:
                    self.claims.failed(
                        6,
                        f"example {item}",
                        "not in the dataset manifest",
                        expected=None,
                        observed=e["digest"],
                    )
                    continue
                if e["digest"] != manifest_digest:
                    self.claims.failed(
                        6,
                        f"example {item}",
                        "bundle.json's digest differs from the manifest",
                        expected=manifest_digest,
                        observed=e["digest"],
                    )
                if e["path"] is None:
                    self.listed_or_failed(6, "example", item, f"example {item}")
                    continue
                self.claims.compare(
                    6,
                    f"example {item} sha256",
                    manifest_digest,
                    self.file_digest(e["path"]),
                    path=e["path"],
                )
        for ds, version, example_id in sorted(self.examples_used - listed_in_bundle):
            item = f"{ds}@{version}/{example_id}"
            self.listed_or_failed(6, "example", item, f"example {item} used by a case")

    # -- claims 7 and 8: checks and cases ----------------------------------------------

    def check_checks_and_cases(self) -> None:
        if self.report is None:
            return
        report_ids = [c["check_id"] for c in self.report["checks"]]
        bundle_ids = [c["check_id"] for c in self.bundle["checks"]]
        if report_ids != bundle_ids:
            self.claims.failed(
                7,
                "checks in bundle.json follow the report",
                "check ids or order differ",
                expected=",".join(report_ids),
                observed=",".join(bundle_ids),
            )
        report_required = {c["check_id"]: c["required"] for c in self.report["checks"]}
        tree = TreeBuilder()
        remaining = self.bundle["limits"]["max_cases"]
        for entry in self.bundle["checks"]:
            check_id = entry["check_id"]
            if entry["path"] is None:
                self.listed_or_failed(7, "check", check_id, f"check result {check_id}")
            elif not self.present(entry["path"]):
                self.named.add(entry["path"])
                self.claims.failed(
                    7,
                    f"check result {check_id}",
                    "missing from the bag",
                    path=entry["path"],
                    expected=entry["digest"],
                )
            else:
                self.named.add(entry["path"])
                self.claims.compare(
                    7,
                    f"check result {check_id} sha256",
                    entry["digest"],
                    self.file_digest(entry["path"]),
                    path=entry["path"],
                )
                value, problem = parse_kept(self.c, entry["path"], canonical_required=False)
                if value is None:
                    self.claims.failed(
                        7, f"check result {check_id}", problem or "unreadable", path=entry["path"]
                    )
                else:
                    try:
                        schemas.validate("check-result", value, source=entry["path"])
                        if value["check_id"] != check_id:
                            self.claims.failed(
                                7,
                                f"check result {check_id}",
                                "check_id inside differs",
                                path=entry["path"],
                                expected=check_id,
                                observed=value["check_id"],
                            )
                        required = report_required.get(check_id)
                        if required is not None and value["required"] != required:
                            self.claims.failed(
                                7,
                                f"check result {check_id}",
                                "required differs from the report's check",
                                path=entry["path"],
                                expected=str(required).lower(),
                                observed=str(value["required"]).lower(),
                            )
                    except SchemaError as exc:
                        self.claims.failed(
                            7,
                            f"check result {check_id} is schema-valid",
                            exc.message,
                            path=entry["path"],
                        )
            cases = entry["cases"]
            expected_exported = min(cases["total"], remaining)
            remaining -= expected_exported
            if cases["exported"] != expected_exported:
                self.claims.failed(
                    10,
                    f"case count of {check_id}",
                    "exported count does not follow the first-20,000 rule",
                    expected=str(expected_exported),
                    observed=str(cases["exported"]),
                )
            cut = self.listing.get("cases", check_id)
            if cases["total"] > cases["exported"] and (
                cut is None or cut["reason"] != "case_limit"
            ):
                self.claims.failed(
                    10,
                    f"case count of {check_id}",
                    "cases were left out without a case_limit entry",
                    expected=str(cases["total"]),
                    observed=str(cases["exported"]),
                )
            if cases["path"] is None:
                self.listed_or_failed(7, "cases", check_id, f"cases of {check_id}")
                continue
            self.named.add(cases["path"])
            if not self.present(cases["path"]):
                self.check_case_lines(check_id, cases, tree)
                continue
            self.claims.compare(
                7,
                f"cases of {check_id} sha256",
                cases["digest"],
                self.file_digest(cases["path"]),
                path=cases["path"],
            )
            self.check_case_lines(check_id, cases, tree)
        root = tree.root().hex()
        declared = self.bundle["cases_tree"]
        if self.cases_unknown:
            return  # a case file is missing (failed above): there is no tree to recompute
        if tree.size == declared["tree_size"] and root == declared["root"]:
            self.claims.proven(8, "cases_tree root", expected=declared["root"], observed=root)
        else:
            self.claims.failed(
                8,
                "cases_tree root",
                "the Merkle tree of the exported cases differs",
                expected=f"{declared['tree_size']}:{declared['root']}",
                observed=f"{tree.size}:{root}",
            )

    def check_case_lines(self, check_id: str, cases: dict[str, Any], tree: TreeBuilder) -> None:
        data = self.c.kept.get(cases["path"])
        if data is None:
            # Failed here; what its cases referred to is then unknown, so payloads and
            # examples are not also blamed for having no case.
            self.cases_unknown = True
            self.checks_unknown.add(check_id)
            self.claims.failed(
                8,
                f"cases of {check_id}",
                "missing from the bag",
                path=cases["path"],
                expected=cases["digest"],
            )
            return
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        else:
            self.claims.failed(
                8, f"cases of {check_id}", "case file must end with a newline", path=cases["path"]
            )
        problems = []
        parsed = []
        for number, raw in enumerate(lines, start=1):
            where = f"{cases['path']}:{number}"
            tree.append(raw)
            try:
                value = canonical.loads_canonical(raw, source=where)
                schemas.validate("case", value, source=where)
            except (CanonicalJSONError, SchemaError) as exc:
                problems.append(exc.message)
                continue
            if value["check_id"] != check_id:
                problems.append(f"{where}: check_id {value['check_id']!r} is not {check_id!r}")
                continue
            parsed.append(value)
        if len(lines) != cases["exported"]:
            problems.append(f"{len(lines)} lines, bundle.json says {cases['exported']} exported")
        if problems:
            self.claims.failed(
                8,
                f"cases of {check_id} are canonical and schema-valid",
                "; ".join(problems[:3])
                + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""),
                path=cases["path"],
            )
        else:
            self.claims.proven(
                8,
                f"cases of {check_id}: {len(lines)} lines canonical and schema-valid",
                path=cases["path"],
            )
        for case in parsed:
            ex = case["example"]
            self.examples_used.add((ex["dataset_id"], ex["version"], ex["example_id"]))
            refs = ([case["output"]] if case["output"] else []) + case["evidence"]
            for ref in refs:
                self.case_refs.setdefault(ref["digest"], []).append(
                    (ref["kind"], ref["location"], check_id, ref["size"])
                )

    # -- claim 8: payloads -------------------------------------------------------------

    def check_payloads(self) -> None:
        payloads = {p["digest"]: p for p in self.bundle["payloads"]}
        for p in self.bundle["payloads"]:
            self.named.add(p["path"])
            if p["path"] != f"data/blobs/sha256/{p['digest'][7:]}":
                self.claims.failed(
                    8,
                    f"payload {p['digest']}",
                    "payload path does not follow data/blobs/sha256/<hex>",
                    path=p["path"],
                )
            info = self.c.files.get(p["path"])
            if info is not None and info.size != p["size"]:
                self.claims.failed(
                    8,
                    f"payload {p['digest']} size",
                    "size differs from bundle.json",
                    path=p["path"],
                    expected=str(p["size"]),
                    observed=str(info.size),
                )
        manifest_refs = {
            r["digest"]
            for c in (self.report or {}).get("checks", [])
            for r in c["evidence_refs"]
            if r["kind"] == "manifest"
        }
        for p in self.bundle["payloads"]:
            if self.cases_unknown:
                break
            if p["digest"] not in self.case_refs and p["digest"] not in manifest_refs:
                self.claims.failed(
                    10,
                    f"payload {p['digest']}",
                    "in the bundle, but no exported case or evidence manifest refers to it",
                    path=p["path"],
                )
        for digest in sorted(self.case_refs):
            entry = payloads.get(digest)
            listed = self.listing.payload(digest)
            if entry is not None:
                self.claims.compare(
                    8,
                    f"payload {digest}",
                    digest,
                    self.file_digest(entry["path"]),
                    path=entry["path"],
                )
            elif listed is not None:
                self.claims.unprovable(
                    8,
                    f"payload {digest}",
                    listed["reason"],
                    expected=digest,
                    detail=listed["detail"],
                )
            else:
                self.claims.failed(
                    8,
                    f"payload {digest}",
                    "referenced by a case but neither in the bundle nor listed",
                    expected=digest,
                )

    # -- claim 9: evidence refs --------------------------------------------------------

    def check_evidence_refs(self) -> None:
        if self.report is None:
            return
        payloads = {p["digest"]: p for p in self.bundle["payloads"]}
        for check in self.report["checks"]:
            check_id = check["check_id"]
            scored = {
                (kind, d)
                for d, uses in self.case_refs.items()
                for kind, _, cid, _ in uses
                if cid == check_id
            }
            cut = self.listing.get("cases", check_id)
            if check_id in self.checks_unknown:
                continue  # its case file is missing (failed in claim 8)
            for ref in check["evidence_refs"]:
                subject = f"evidence {ref['kind']} {ref['digest']} of {check_id}"
                if ref["kind"] != "manifest":
                    self.evidence_entry(subject, (ref["kind"], ref["digest"]), scored, cut)
                    continue
                entry = payloads.get(ref["digest"])
                if entry is None:
                    # An evidence manifest is always exported: only an evidence_manifest
                    # entry can explain its absence (a payload entry for the same digest
                    # would let a crafted case hide a whole check's evidence).
                    listed = self.listing.get("evidence_manifest", ref["digest"])
                    if listed is not None:
                        self.claims.unprovable(
                            9,
                            subject,
                            listed["reason"],
                            expected=ref["digest"],
                            detail=listed["detail"],
                        )
                    else:
                        self.claims.failed(
                            9,
                            subject,
                            "evidence manifest neither in the bundle nor listed",
                            expected=ref["digest"],
                        )
                    continue
                self.check_evidence_manifest(subject, check_id, entry, scored, cut)

    def evidence_entry(
        self,
        subject: str,
        key: tuple[str, str],
        scored: set[tuple[str, str]],
        cut: dict[str, Any] | None,
    ) -> None:
        if key in scored:
            self.claims.proven(9, subject)
        elif cut is not None:
            self.claims.unprovable(
                9, subject, cut["reason"], detail="may belong to cases not exported"
            )
        else:
            self.claims.failed(
                9,
                subject,
                "not among the outputs and evidence of the check's cases",
                expected=key[1],
            )

    def check_evidence_manifest(
        self,
        subject: str,
        check_id: str,
        entry: dict[str, Any],
        scored: set[tuple[str, str]],
        cut: dict[str, Any] | None,
    ) -> None:
        value, problem = parse_kept(self.c, entry["path"], canonical_required=True)
        if value is None:
            self.claims.failed(
                9, subject, f"evidence manifest unreadable: {problem}", path=entry["path"]
            )
            return
        if self.file_digest(entry["path"]) != entry["digest"]:
            self.claims.failed(
                9,
                subject,
                "evidence manifest JSON digest differs",
                path=entry["path"],
                expected=entry["digest"],
            )
            return
        try:
            schemas.validate("evidence-manifest", value, source=entry["path"])
        except SchemaError as exc:
            self.claims.failed(9, subject, exc.message, path=entry["path"])
            return
        keys = [(e["digest"], e["kind"]) for e in value["evidence"]]
        if keys != sorted(set(keys)):
            self.claims.failed(
                11,
                subject,
                "evidence manifest entries must be unique and sorted by (digest, kind)",
                path=entry["path"],
            )
        if len(keys) <= MAX_EVIDENCE_REFS:
            self.claims.failed(
                11,
                subject,
                f"an evidence manifest stands for more than {MAX_EVIDENCE_REFS} items; "
                f"this one has {len(keys)}",
                path=entry["path"],
            )
        if value["check_id"] != check_id:
            self.claims.failed(
                9,
                subject,
                "evidence manifest names another check",
                path=entry["path"],
                expected=check_id,
                observed=value["check_id"],
            )
            return
        missing = [e for e in value["evidence"] if (e["kind"], e["digest"]) not in scored]
        if not missing:
            self.claims.proven(
                9,
                f"{subject}: {len(value['evidence'])} entries match the cases",
                path=entry["path"],
            )
        elif cut is not None:
            self.claims.unprovable(
                9,
                subject,
                cut["reason"],
                path=entry["path"],
                detail=f"{len(missing)} entries may belong to cases not exported",
            )
        else:
            self.claims.failed(
                9,
                subject,
                f"{len(missing)} manifest entries are not among the check's cases",
                path=entry["path"],
                expected=missing[0]["digest"],
            )

    # -- claim 10: accounting ----------------------------------------------------------

    def check_accounting(self, manifests: dict[tuple[str, int], dict[str, str]]) -> None:
        uses: dict[str, PayloadUse] = {}
        for digest, refs in self.case_refs.items():
            use = uses[digest] = PayloadUse()
            for kind, location, _, _ in refs:
                use.kinds.append(kind)
                use.locations.add(location)
        facts = BundleFacts(
            bundle=self.bundle,
            report=self.report,
            read_body=self.read_body,
            files=self.c.files,
            payload_uses=uses,
            examples_used={
                f"{ref_of(ds, version)}/{example_id}": (ds, version, example_id)
                for ds, version, example_id in self.examples_used
            },
            manifests=manifests,
        )
        ok = True
        for e, problem in listing_problems(facts):
            subject = f"listed {e['kind']} {e['ref']} ({e['reason']})"
            self.claims.failed(10, subject, problem, expected=e["digest"])
            ok = False
        for path in sorted(set(self.c.data_files()) - self.named):
            self.claims.failed(
                10,
                "every file is named by bundle.json",
                "file under data/ that bundle.json does not name",
                path=path,
                observed="sha256:" + self.c.files[path].sha256,
            )
            ok = False
        for path in sorted(p for p in self.named if p not in self.c.files):
            self.claims.failed(
                10,
                "every named file is present",
                "bundle.json names a file the bag lacks",
                path=path,
            )
            ok = False
        if ok:
            self.claims.proven(
                10,
                f"accounting: {len(self.listing.entries)} listed items agree with the bundle; every file is named",
            )

    # -- claim 11: coherence -----------------------------------------------------------

    def contract_paths(self) -> list[tuple[str, str | None, str]]:
        """(what, the path bundle.json gives, the path SPEC 4.1 defines) for each file."""
        b = self.bundle
        out: list[tuple[str, str | None, str]] = [
            ("report body", b["report"]["path"], "data/report/body.json"),
            ("envelope", b["report"]["envelope"]["path"], "data/report/envelope.json"),
        ]
        s = b["suite"]
        out.append(("suite", s["path"], f"data/suite/{s['suite_id']}/{s['version']}.json"))
        for sc in b["scorers"]:
            out.append(("scorer", sc["path"], f"data/scorers/{sc['scorer_id']}/{sc['version']}"))
        for d in b["datasets"]:
            base = f"data/datasets/{d['dataset_id']}/{d['version']}"
            out.append(("dataset manifest", d["path"], f"{base}/manifest.json"))
            for e in d["examples"]:
                out.append(("example", e["path"], f"{base}/examples/{e['example_id']}.json"))
        for c in b["checks"]:
            out.append(("check result", c["path"], f"data/checks/{c['check_id']}.json"))
            out.append(("case file", c["cases"]["path"], f"data/cases/{c['check_id']}.jsonl"))
        return out

    def check_coherence(self) -> None:
        """The documents agree as an exporter following the contract would write them."""
        before = len(self.claims.items)
        # Every file is read at the path the contract defines for it, never at one an
        # untrusted bundle.json merely asserts.
        for what, given, defined in self.contract_paths():
            if given is not None and given != defined:
                self.claims.failed(
                    11,
                    f"{what} at the path the contract defines",
                    "bundle.json puts it elsewhere",
                    path=given,
                    expected=defined,
                    observed=given,
                )
        permissions = self.bundle["exporter"]["permissions"]
        if EXPORT not in permissions:
            self.claims.failed(
                11,
                "recorded permissions",
                "the exporter's recorded permissions lack report.export: no export could "
                "have written this bundle",
                path="data/bundle.json",
            )
        for where, ids in (
            ("the report body", [c["check_id"] for c in (self.report or {}).get("checks", [])]),
            ("bundle.json", [c["check_id"] for c in self.bundle["checks"]]),
        ):
            for check_id, n in sorted(Counter(ids).items()):
                if n > 1:
                    self.claims.failed(
                        11,
                        f"check {check_id} appears once",
                        f"{where} lists check {check_id} {n} times",
                    )
        payload_sizes = {p["digest"]: p["size"] for p in self.bundle["payloads"]}
        for digest in sorted(self.case_refs):
            problems = set()
            for kind, location, check_id, size in self.case_refs[digest]:
                actual = payload_sizes.get(digest)
                if actual is not None and size != actual:
                    problems.add(
                        f"a case of {check_id} gives its {kind} size {size}, the payload "
                        f"has {actual} bytes"
                    )
                if location == "inline" and size > INLINE_MAX:
                    problems.add(
                        f"a case of {check_id} stores {size} bytes inline, over the "
                        f"{INLINE_MAX}-byte limit"
                    )
                if location == "sso" and size <= INLINE_MAX:
                    problems.add(
                        f"a case of {check_id} puts {size} bytes at SSO, which holds only "
                        f"payloads over {INLINE_MAX} bytes"
                    )
            uses = self.case_refs[digest]
            if digest in payload_sizes:
                # In the bundle: taken from blobs/, so some case stores it inline, and
                # none as a trace (a trace body is never exported).
                if not any(location == "inline" for _, location, _, _ in uses):
                    problems.add("in the bundle, yet no case stores it inline")
                if any(kind == "trace" or location == "traces" for kind, location, _, _ in uses):
                    problems.add("in the bundle, yet a case refers to it as a trace")
            for problem in sorted(problems):
                self.claims.failed(11, f"payload {digest} agrees with its case references", problem)
        if len(self.claims.items) == before:
            self.claims.proven(
                11, "coherence: permissions, checks once each, payload references agree"
            )


def inspect_bundle(
    location: str, *, max_bytes: int = DEFAULT_MAX_BYTES, stream: BinaryIO | None = None
) -> dict[str, Any]:
    """What a bundle holds, read through the same safe reader, without the proof.

    Raises BundlerError when the archive is unsafe or bundle.json is malformed.
    """
    contents = read_bag(open_members(location, max_bytes=max_bytes, stream=stream), source=location)
    bundle = _load_bundle(contents)
    by_reason: dict[str, Counter[str]] = {"unavailable": Counter(), "redacted": Counter()}
    for group in by_reason:
        by_reason[group].update(e["reason"] for e in bundle[group])
    info: dict[str, Any] = {
        "source": location,
        "schema": bundle["schema"],
        "bundle_digest": bytes_digest(canonical.dumps(bundle)),
        "exported_at": bundle["exported_at"],
        "principal": bundle["exporter"].get("principal"),
        "exporter": f"{bundle['exporter']['tool']} {bundle['exporter']['version']}",
        "files": len(contents.files),
        "bytes": sum(f.size for f in contents.files.values()),
        "unavailable_by_reason": dict(sorted(by_reason["unavailable"].items())),
        "redacted_by_reason": dict(sorted(by_reason["redacted"].items())),
    }
    if bundle["schema"] == BUNDLE_SCHEMA:
        body, _ = parse_kept(contents, bundle["report"]["path"], canonical_required=False)
        report = body if isinstance(body, dict) else {}
        checks = bundle["checks"]
        info.update(
            report_id=bundle["report"]["report_id"],
            report_digest=bundle["report"]["digest"],
            result=report.get("result"),
            envelope_status=bundle["report"]["envelope"]["status"],
            suite=f"{bundle['suite']['suite_id']}@{bundle['suite']['version']}",
            scorers=[f"{s['scorer_id']}@{s['version']}" for s in bundle["scorers"]],
            datasets=[f"{d['dataset_id']}@{d['version']}" for d in bundle["datasets"]],
            counts={
                "checks": len(checks),
                "cases_total": sum(c["cases"]["total"] for c in checks),
                "cases_exported": sum(c["cases"]["exported"] for c in checks),
                "payloads": len(bundle["payloads"]),
                "examples": sum(1 for d in bundle["datasets"] for e in d["examples"] if e["path"]),
            },
            labels=[
                (
                    "Report",
                    f"{bundle['report']['report_id']} (result {report.get('result')}, "
                    f"envelope {bundle['report']['envelope']['status']})",
                ),
                ("Suite", f"{bundle['suite']['suite_id']}@{bundle['suite']['version']}"),
                (
                    "Scorers",
                    ", ".join(f"{s['scorer_id']}@{s['version']}" for s in bundle["scorers"])
                    or "none",
                ),
                (
                    "Datasets",
                    ", ".join(f"{d['dataset_id']}@{d['version']}" for d in bundle["datasets"])
                    or "none",
                ),
                (
                    "Cases",
                    f"{sum(c['cases']['exported'] for c in checks)} exported of "
                    f"{sum(c['cases']['total'] for c in checks)} in {len(checks)} checks",
                ),
                ("Payloads", str(len(bundle["payloads"]))),
            ],
        )
    else:
        from bundler.evalbanana import verify as ebverify

        info.update(ebverify.inspect_facts(contents, bundle))
    return info


def extract_bundle(
    location: str,
    destination: Path,
    options: VerifyOptions,
    *,
    stream: BinaryIO | None = None,
    progress: Callable[[int], None] | None = None,
) -> Verification:
    """Verify while extracting into ``destination`` (absent or empty, not a symlink).

    Writes only regular files and directories, each created exclusively beneath the
    one descriptor of ``destination`` without following links (bundler.archive.safe_extract),
    with the modes 0666 / 0777 less the umask; unless the verdict is ``verified``,
    everything written (and ``destination`` itself, if this call created it) is removed.
    Raises OutputError when ``destination`` is unusable, when a write fails, or when
    another process replaced or planted an entry beneath it while extracting.
    """
    created = not destination.exists() and not destination.is_symlink()
    prepare_output_dir(destination)
    extractor = Extractor(destination, created=created)
    tap = ArchiveTap(progress)
    try:
        members = open_members(location, max_bytes=options.max_bytes, stream=stream, tap=tap)
        contents = read_bag(
            members, source=location, extract=extractor, progress=_files_progress(tap, progress)
        )
        result = replace(verify_contents(contents, options), archive=archive_facts(tap))
        if result.verdict is Verdict.VERIFIED:
            extractor.check_intact()
    except StorageError:
        _clean(extractor)
        raise
    except OutputError as exc:
        # The extracted copy was raced by another process: the bundle was not judged, and
        # what was written is removed without following any link; what that process
        # moved out of reach or put entries into is left, and the message says so.
        left = _clean(extractor)
        if not left:
            raise
        raise OutputError(
            f"{exc.message}; {len(left)} created entries that process moved or added to "
            f"were left, e.g. {destination if left[0] == '.' else destination / left[0]}"
        ) from exc
    except BundlerError as exc:
        result = Verification(
            source=location,
            verdict=Verdict.ERROR,
            error=exc.message,
            strict=options.strict,
            archive=_archive_after_error(tap),
        )
    except OSError as exc:
        # Archive reads raise ArchiveError; an OSError here is writing the copy (disk
        # full, file size limit): the bundle was not judged, the copy is removed.
        _clean(extractor)
        reason = exc.strerror or str(exc)
        raise OutputError(f"{destination}: cannot write the extracted bag ({reason})") from exc
    except BaseException:
        _clean(extractor)
        raise
    if result.verdict is Verdict.VERIFIED:
        extractor.close()
    else:
        _clean(extractor)
    return result


def _clean(extractor: Extractor) -> list[str]:
    """Remove what ``extractor`` wrote; the created entries that could not be reached."""
    return extractor.remove_all()
