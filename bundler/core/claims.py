"""The verifier's result model (SPEC section 5): claims, their states and the verdict.

``Claim`` is one thing the verifier checked (proven, unprovable with its reason, or
failed with path, expected and observed), ``Claims`` collects them, ``Verification`` is
the whole result with its anchor, archive facts and JSON form, ``VerifyOptions`` what a
caller asks for, and ``apply_strict`` what ``--strict`` does to unprovable claims. Both
bundle kinds' verifiers, the audit, the renderings and the CLI share this model; it
holds no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from bundler.core.frozen import freeze, thaw
from bundler.core.limits import DEFAULT_MAX_BYTES
from bundler.core.signatures import NOT_ANCHORED, SignatureCheck, SignatureSource
from bundler.core.version import TOOL_NAME, __version__

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


class State(StrEnum):
    PROVEN = "proven"
    UNPROVABLE = "unprovable"
    FAILED = "failed"


class Verdict(StrEnum):
    VERIFIED = "verified"
    FAILED = "failed"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Claim:
    """One thing the verifier checked and how it ended (slots: a bundle.json within its
    cap gives 150,000 of them)."""

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


# The claims that check an anchor (SPEC 5, 11.3): a record's anchor is only as good as
# the claim behind it, so every writer and every reader of records names them from here.
EXPECT_BUNDLE_SUBJECT = "bundle digest equals --expect-bundle-digest"
EXPECT_REPORT_SUBJECT = "report digest equals --expect-report-digest"
SIGNER_SUBJECT = "signature"
# The claims that prove the other facts a record shows (SPEC 14): the bundle digest, the
# report (or run) id and digest, the envelope's status. ``report.ties`` holds a record's
# fields to them.
BUNDLE_DOCUMENT_SUBJECT = "bundle.json is schema-valid and stored canonical"
TOP_DIRECTORY_SUBJECT = "top directory names the report or run"
REPORT_BODY_SUBJECT = "report body sha256"
ENVELOPE_STATUS_SUBJECT = "envelope status"
EB_REPORT_SUBJECT = "report.json sha256"
RUN_REPORT_SUBJECT = "report.json is a valid eval-banana report"


@dataclass(frozen=True)
class Anchor:
    """What the result is anchored to, beyond the bundle's own consistency."""

    expected_bundle_digest: str | None = None
    expected_report_digest: str | None = None
    signer: str | None = None  # "ID, key SHA256:..." when a signature was checked
    # Keys of valid signatures checked without an allowed_signers file: reported, never
    # an anchor (anyone can sign with a key of their own).
    keys: tuple[str, ...] = ()

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
            text = "none: this result shows self-consistency only, not who made the bundle"
            if self.keys:
                text += f"; signed by key {' and key '.join(self.keys)} ({NOT_ANCHORED})"
            return text
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
    # When the report was issued (EvalBook: the body's ``issued_at``; eval-banana: the run's
    # ``completed_at``), None when it could not be read.
    report_issued_at: str | None = None
    envelope: Envelope | None = None  # EvalBook bundles whose envelope is schema-valid
    archive: ArchiveFacts | None = None  # None for a bag directory or a run directory
    # Every signature checked (embedded, sidecar, stored), each with its state (SPEC 11.3).
    signatures: tuple[SignatureCheck, ...] = ()
    verified_at: str = field(default_factory=_now)
    # Why no verdict, when that was not the bundle's doing: object storage failed (exit 5,
    # SPEC 8), or the stored object's bytes no longer hash to their record (failed, 1).
    storage_failed: bool = False
    altered_at_rest: bool = False

    def __post_init__(self) -> None:
        # Frozen through and through: ``summary`` cannot drift from ``to_json()``.
        object.__setattr__(self, "summary", freeze(self.summary))

    @property
    def exit_code(self) -> int:
        if self.storage_failed and self.verdict is Verdict.ERROR:
            return 5
        return {Verdict.VERIFIED: 0, Verdict.FAILED: 1, Verdict.ERROR: 3}[self.verdict]

    def __repr__(self) -> str:
        counts = self.counts()
        return (
            f"Verification(source={self.source!r}, verdict={self.verdict.value!r}, "
            f"bundle_digest={self.bundle_digest!r}, report_id={self.report_id!r}, "
            f"proven={counts['proven']}, unprovable={counts['unprovable']}, "
            f"failed={counts['failed']})"
        )

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

    def to_json(self, *, claims: bool = True) -> dict[str, Any]:
        """The verification record (SPEC 5); ``claims=False`` leaves the claims list
        empty, for a writer that writes them a batch at a time (``cli.common``)."""
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
            "report_issued_at": self.report_issued_at,
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
            "summary": thaw(self.summary),
            "claims": [c.to_json() for c in self.claims] if claims else [],
            # SPEC 7: the process's exit code and the input, in every record (a failing
            # command's included), so a JSON Lines reader needs nothing else.
            "exit_code": self.exit_code,
            "input": self.source,
            "signatures": [s.to_json() for s in self.signatures],
        }


def _claims(n: int) -> str:
    return "claim" if n == 1 else "claims"


@dataclass(frozen=True)
class StoredObject:
    """A bundle read from object storage: its URL, and the SHA-256 recorded at upload
    (the ``sha256`` metadata; None for an object copied in by another tool)."""

    url: str
    recorded_sha256: str | None
    unrecorded: str | None = None  # why nothing is recorded: missing or malformed metadata


@dataclass(frozen=True)
class VerifyOptions:
    expect_bundle_digest: str | None = None
    expect_report_digest: str | None = None
    strict: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    # The allowed_signers lines (``sshsig.AllowedSigner``) that anchor a signature; None
    # when no file was given: every signature is still checked, none anchors.
    allowed_signers: tuple[Any, ...] | None = None
    identity: str | None = None  # with allowed_signers: the principal that must have signed
    # Signatures beside the bundle (sidecar files, stored objects, or the one named by
    # --signature), checked with the embedded one (SPEC 11.3).
    sidecars: tuple[SignatureSource, ...] = ()
    # Set for a stored bundle: its key must name the bundle it holds (SPEC 6).
    stored: StoredObject | None = None


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
        if observed is None and expected is not None and detail == "digest differs":
            # Nothing was there to hash: the item is missing, not different.
            detail = "missing: no such file in the bundle, so nothing to hash"
        self.failed(group, subject, detail, path=path, expected=expected, observed=observed)
        return False


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
