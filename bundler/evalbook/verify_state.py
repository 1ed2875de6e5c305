"""What one EvalBook verification holds while it checks its claim groups.

``VerifierState`` is the bag read, bundle.json, the options, the claims collected so
far, the listing of unavailable and redacted items, and what earlier groups learnt
(the report body, the files named, the cases' payload references, the examples the
cases use); with the helpers every group uses. The claim groups (``verify_documents``,
``verify_cases``, ``verify_coherence``) are mixins over it; ``verify`` runs them in order.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from bundler.archive.bag_reader import BagContents
from bundler.core.claims import Claims, Envelope, VerifyOptions
from bundler.evalbook.contract import READ_BODY

PAYLOAD_KINDS = {"output", "trace", "artifact"}


@dataclass
class _Listing:
    """The unavailable and redacted entries as bundle.json holds them, indexed, never
    copied (a bundle.json within its cap lists 150,000). A redacted entry has no
    ``detail``: read it with ``.get``."""

    count: int
    by_kind: dict[str, dict[str, dict[str, Any]]]  # kind -> ref -> the first entry
    payloads: dict[str, dict[str, Any]]  # digest -> the first payload entry of that ref

    @classmethod
    def of(cls, bundle: dict[str, Any]) -> _Listing:
        by_kind: dict[str, dict[str, dict[str, Any]]] = {}
        payloads: dict[str, dict[str, Any]] = {}
        for e in itertools.chain(bundle["unavailable"], bundle["redacted"]):
            by_kind.setdefault(e["kind"], {}).setdefault(e["ref"], e)
            if e["kind"] in PAYLOAD_KINDS and e["digest"] == e["ref"]:
                payloads.setdefault(e["ref"], e)
        return cls(len(bundle["unavailable"]) + len(bundle["redacted"]), by_kind, payloads)

    def get(self, kind: str, ref: str) -> dict[str, Any] | None:
        return self.by_kind.get(kind, {}).get(ref)

    def payload(self, digest: str) -> dict[str, Any] | None:
        return self.payloads.get(digest)


class VerifierState:
    """The state and helpers the EvalBook claim groups share."""

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
                detail=entry.get("detail"),
            )
        else:
            self.claims.failed(
                group,
                subject,
                "neither in the bundle nor listed as unavailable or redacted",
                path=path,
            )
