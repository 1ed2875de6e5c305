"""Shown fields tied to the items that prove them (SPEC 14).

A page shows only what a record's own items give. The verdict and counts are re-derived
from the items (``report.record``); the other facts a page shows are held here to the
item that proves them, one table per record kind:

- a verification record's bundle digest, report (or run) id, report digest and envelope
  status against the claims that observed them (``PROOFS``): every such claim must hold
  the record's value, and a verified record holds each proof, proven; a failed record
  whose proof is missing shows the field as not proven;
- its eval-banana summary against the record (``summary_contradictions``): the mode its
  kind writes, every fact the page lists check by check, the run id, unique check ids;
- an envelope's supersession (``envelope_contradictions``): a successor named by a
  report identifier (SPEC 3), not the report itself, and not superseded before issue;
- an audit record's report facts against its own fields (``audit_contradictions``): one
  report id, and the result its report body issued.

Each function yields (JSON pointer, rule); ``report.record`` refuses the record at the
first. What no item of a record can prove (who signed, consistently forged values,
times and tool names) is checked for consistency only; the page says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from bundler.core.claims import (
    BUNDLE_DOCUMENT_SUBJECT,
    EB_REPORT_SUBJECT,
    ENVELOPE_STATUS_SUBJECT,
    EXPECT_BUNDLE_SUBJECT,
    EXPECT_REPORT_SUBJECT,
    REPORT_BODY_SUBJECT,
    RUN_REPORT_SUBJECT,
    SIGNER_SUBJECT,
    TOP_DIRECTORY_SUBJECT,
)
from bundler.core.envelope import supersession_problem
from bundler.core.textsafe import quoted

EVALBOOK_BUNDLE = "evalbook.reproducibility_bundle.v1"
EB_BUNDLE = "evalbook.eval_banana_bundle.v1"
RUN_DIRECTORY = None  # bundle_schema of a run directory checked in place
# SPEC 3's identifier grammar (report ids, check ids, ...); never "." or "..".
IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclass(frozen=True)
class Proof:
    """The claim that proves one field a verification page shows.

    ``side`` is the claim's field that holds the value (``expected`` or ``observed``),
    ``spelling`` how the claim spells it (the top directory is ``<prefix><id>``), and
    ``kinds`` the bundle schemas whose verifier makes the claim.
    """

    pointer: tuple[str, ...]
    subject: str
    side: str
    kinds: frozenset[str | None]
    spelling: str = "{}"


PROOFS: tuple[Proof, ...] = (
    Proof(
        ("bundle_digest",),
        BUNDLE_DOCUMENT_SUBJECT,
        "observed",
        frozenset({EVALBOOK_BUNDLE, EB_BUNDLE}),
    ),
    Proof(
        ("report_id",),
        TOP_DIRECTORY_SUBJECT,
        "expected",
        frozenset({EVALBOOK_BUNDLE}),
        "evalbook-bundle-{}",
    ),
    Proof(
        ("report_id",),
        TOP_DIRECTORY_SUBJECT,
        "expected",
        frozenset({EB_BUNDLE}),
        "eval-banana-bundle-{}",
    ),
    Proof(("report_digest",), REPORT_BODY_SUBJECT, "expected", frozenset({EVALBOOK_BUNDLE})),
    Proof(("report_digest",), EB_REPORT_SUBJECT, "expected", frozenset({EB_BUNDLE})),
    Proof(("report_digest",), RUN_REPORT_SUBJECT, "observed", frozenset({RUN_DIRECTORY})),
    Proof(
        ("envelope", "status"), ENVELOPE_STATUS_SUBJECT, "observed", frozenset({EVALBOOK_BUNDLE})
    ),
)
# Fields a kind never has: a run directory checked in place has no bundle, so no digest.
ABSENT: tuple[tuple[tuple[str, ...], frozenset[str | None], str], ...] = (
    (("bundle_digest",), frozenset({RUN_DIRECTORY}), "must be null: a run directory has no bundle"),
)
# Distinct values kept per (subject, side): one is all a consistent record holds.
_MAX_DISTINCT = 4


@dataclass
class Seen:
    """What the claims of one subject hold on one side."""

    values: list[Any] = field(default_factory=list)  # distinct non-null values
    more: bool = False  # more distinct values than kept
    proven: bool = False  # a proven claim holds a non-null value
    first: int | None = None  # index of the first claim of the subject

    def add(self, value: Any, state: str, index: int) -> None:
        if self.first is None:
            self.first = index
        if value is None:
            return
        if state == "proven":
            self.proven = True
        if value not in self.values:
            if len(self.values) < _MAX_DISTINCT:
                self.values.append(value)
            else:
                self.more = True


_WATCHED = {(p.subject, p.side) for p in PROOFS}
_SUBJECTS = {p.subject for p in PROOFS}


class ProofClaims:
    """The claims behind ``PROOFS``, fed one claim at a time."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], Seen] = {key: Seen() for key in _WATCHED}
        self.n = 0

    def add(self, claim: Mapping[str, Any]) -> None:
        subject = claim["subject"]
        if subject in _SUBJECTS:
            for side in ("expected", "observed"):
                seen = self.seen.get((subject, side))
                if seen is not None:
                    seen.add(claim[side], claim["state"], self.n)
        self.n += 1

    def unproven(self, head: Mapping[str, Any]) -> set[str]:
        """The fields (pointers) of this kind whose proof the record lacks: shown as
        not proven (only a failed record may lack one)."""
        return {
            "/" + "/".join(p.pointer)
            for p in PROOFS
            if head.get("bundle_schema") in p.kinds and not self.seen[(p.subject, p.side)].proven
        }

    def contradictions(self, head: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        if head["verdict"] == "error":
            return  # no claim was made: the page shows no report facts
        kind = head.get("bundle_schema")
        for path, kinds, rule in ABSENT:
            if kind in kinds and _at(head, path) is not None:
                yield "/" + "/".join(path), rule
        for proof in PROOFS:
            if kind not in proof.kinds:
                continue
            pointer = "/" + "/".join(proof.pointer)
            value = _at(head, proof.pointer)
            want = None if value is None else proof.spelling.format(value)
            seen = self.seen[(proof.subject, proof.side)]
            wrong = [v for v in seen.values if v != want]
            if wrong or seen.more:
                yield (
                    pointer,
                    f"says {_words(value)}, but claim {quoted(proof.subject)} holds "
                    f"{_words(wrong[0] if wrong else seen.values[0])} ({proof.side}): the "
                    "page shows a field only as the claim that proves it has it",
                )
            elif head["verdict"] == "verified" and not seen.proven:
                yield (
                    pointer,
                    f"says {_words(value)}, but no proven claim {quoted(proof.subject)} holds it "
                    "(a verified record holds the claim that proves each fact it shows)",
                )


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _words(value: Any) -> str:
    return "null" if value is None else quoted(value)


# ---- the eval-banana summary -----------------------------------------------------------

# What summary_of writes for each mode, keyed by the record's bundle_schema; an EvalBook
# bundle's summary is empty (its report facts are report_result and envelope).
_SUMMARY_MODE = {EB_BUNDLE: "bundle", RUN_DIRECTORY: "run_directory"}
SUMMARY_KEYS = ("mode", "labels", "run_id", "pass_threshold", "checks", "recomputed", "cases_tree")


def _pointer(key: str) -> str:
    return "/" + key.replace("~", "~0").replace("/", "~1")


def summary_contradictions(head: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """An eval-banana record's summary against the record: only its facts, the mode
    its kind writes, every fact the page lists, the run's id, each check once, and the
    totals and result its checks' statuses give."""
    summary = head["summary"]
    for key in summary:
        if key not in SUMMARY_KEYS:
            yield f"/summary{_pointer(key)}", "is not a fact the summary holds"
            return
    kind = head.get("bundle_schema")
    if summary and kind == EVALBOOK_BUNDLE:
        yield "/summary", "must be empty for an EvalBook bundle"
        return
    if head["verdict"] != "error" and kind in _SUMMARY_MODE:
        mode = _SUMMARY_MODE[kind]
        if summary.get("mode") != mode:
            yield (
                "/summary/mode",
                f"says {_words(summary.get('mode'))}, but a record of "
                f"{'a run directory' if kind is None else kind} holds a summary of mode "
                f"{quoted(mode)}",
            )
            return
        for key in SUMMARY_KEYS:
            if key not in summary:
                yield (
                    f"/summary/{key}",
                    "is missing: an eval-banana page shows the run check by check",
                )
                return
        if summary["run_id"] != head["report_id"]:
            yield (
                "/summary/run_id",
                f"says {_words(summary['run_id'])}, but the record's report_id (the run's "
                f"id) is {_words(head['report_id'])}",
            )
    yield from _eb_contradictions(head)


def eb_totals(summary: Mapping[str, Any]) -> Any:
    """eval-banana totals recomputed from the record's per-check statuses, or None."""
    from bundler.evalbanana.results import recompute_totals
    from bundler.evalbanana.run import CheckStatus

    checks = summary.get("checks")
    threshold = summary.get("pass_threshold")
    if not isinstance(checks, list) or isinstance(threshold, bool):
        return None
    if not isinstance(threshold, int | float):
        return None
    return recompute_totals([CheckStatus(c["status"]) for c in checks], float(threshold))


def _eb_contradictions(head: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    summary = head["summary"]
    totals = eb_totals(summary)
    if totals is None:
        return
    seen: set[str] = set()
    for i, c in enumerate(summary["checks"]):
        if c["check_id"] in seen:
            yield f"/summary/checks/{i}/check_id", f"{quoted(c['check_id'])} is listed twice"
            return
        seen.add(c["check_id"])
        if c["score"] != (1 if c["status"] == "passed" else 0):
            yield (
                "/summary/checks",
                f"check {quoted(c['check_id'])} is {c['status']} with score {c['score']}",
            )
            return
    recomputed = summary.get("recomputed")
    if isinstance(recomputed, Mapping):
        for name, value in recomputed.items():
            want = getattr(totals, name, None)
            if want is not None and (
                value != want or isinstance(value, bool) != isinstance(want, bool)
            ):
                yield (
                    f"/summary/recomputed/{name}",
                    f"says {quoted(value)}, but the checks' statuses give {quoted(want)}",
                )
    if head["verdict"] != "error":
        result = "pass" if totals.run_passed else "fail"
        if head["report_result"] != result:
            yield (
                "/report_result",
                f"says {head['report_result']}, but the checks' statuses give {result}",
            )


# ---- the envelope --------------------------------------------------------------------


def envelope_contradictions(
    report_id: Any, issued_at: Any, envelope: Any, where: str = ""
) -> Iterator[tuple[str, str]]:
    """A superseded envelope names another report, by SPEC 3's identifier grammar, and
    was not superseded before the report's issue (``core.envelope``). The schemas hold
    the status tie and the successor's spelling; this holds them again for a record
    whose schema check a caller skipped, and adds what needs the report beside it."""
    if not isinstance(envelope, Mapping) or envelope.get("status") != "superseded":
        return
    successor = envelope.get("superseded_by")
    if not (isinstance(successor, str) and IDENTIFIER.fullmatch(successor)):
        yield (
            f"{where}/envelope/superseded_by",
            "must be a report identifier (SPEC 3: [A-Za-z0-9][A-Za-z0-9._-]{0,127})",
        )
        return
    problem = supersession_problem(report_id, issued_at, envelope)
    if problem is not None:
        yield f"{where}/envelope/{problem[0]}", problem[1]


# ---- an audit record's report facts -------------------------------------------------


def audit_contradictions(head: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """The report facts an audit page shows (from ``verification``) against the audit's
    own report fields: one report id, and the result its report body issued."""
    verification = head.get("verification")
    report = head.get("report")
    if not isinstance(verification, Mapping):
        return
    yield from envelope_contradictions(
        verification.get("report_id"),
        verification.get("report_issued_at"),
        verification.get("envelope"),
        "/verification",
    )
    if (
        verification.get("verdict") == "verified"
        and verification.get("bundle_schema") == EVALBOOK_BUNDLE
        and verification.get("envelope") is None
    ):
        yield (
            "/verification/envelope",
            "is null, but a verified EvalBook bundle's envelope was read (its claim "
            f"{ENVELOPE_STATUS_SUBJECT!r} is proven in every verified bundle)",
        )
    if not isinstance(report, Mapping):
        return
    if report["report_id"] != verification["report_id"]:
        yield (
            "/report/report_id",
            f"says {_words(report['report_id'])}, but the verification's report_id is "
            f"{_words(verification['report_id'])}",
        )
    result = verification.get("report_result")
    for f in report["fields"]:
        if f["field"] != "result":
            continue
        for issued in f["issued"]:
            if issued["value"] != result:
                yield (
                    "/verification/report_result",
                    f"says {_words(result)}, but the report issued {_words(issued['value'])} "
                    f"({issued['document']})",
                )
                return


# ---- the trust statement (the anchor) -------------------------------------------------

ANCHOR_SUBJECTS = (EXPECT_BUNDLE_SUBJECT, EXPECT_REPORT_SUBJECT, SIGNER_SUBJECT)


def _signer_of(signatures: Any) -> str | None:
    """The anchor's signer as the signatures give it: each verified signer, once."""
    names = [
        f"{s['identity']}, key {s['key']}"
        for s in signatures
        if isinstance(s, Mapping) and s.get("state") == "verified"
    ]
    return " and ".join(dict.fromkeys(names)) or None


def _self_consistency_contradiction(anchor: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``self_consistent_only`` exactly when the anchor names no digest and no signer."""
    stated = [anchor[k] for k in ("expected_bundle_digest", "expected_report_digest", "signer")]
    if anchor["self_consistent_only"] != (not any(stated)):
        yield (
            "/anchor/self_consistent_only",
            f"says {str(anchor['self_consistent_only']).lower()}, but the anchor "
            + ("names" if any(stated) else "names no")
            + " expected digest or signer",
        )


def anchor_contradictions(
    head: Mapping[str, Any], claims: Mapping[str, list[tuple[Any, Any, str]]]
) -> Iterator[tuple[str, str]]:
    """The anchor (the page's trust statement) against the claims that checked it."""
    anchor = head["anchor"]
    if not isinstance(anchor, Mapping):
        return
    yield from _self_consistency_contradiction(anchor)
    if "signatures" in head and anchor["signer"] != _signer_of(head["signatures"]):
        yield (
            "/anchor/signer",
            f"says {quoted(anchor['signer'])}, but the verified signatures give "
            f"{quoted(_signer_of(head['signatures']))}",
        )
    if head["verdict"] == "error":
        return  # no claim was made: the page states no anchor
    for key, subject, observed_key in (
        ("expected_bundle_digest", EXPECT_BUNDLE_SUBJECT, "bundle_digest"),
        ("expected_report_digest", EXPECT_REPORT_SUBJECT, "report_digest"),
        ("signer", SIGNER_SUBJECT, None),
    ):
        want = anchor[key]
        found = claims[subject]
        if want is None:
            if any(state == "proven" for _, _, state in found) and subject != SIGNER_SUBJECT:
                yield f"/anchor/{key}", f"is null, but a claim {quoted(subject)} was made"
            elif subject == SIGNER_SUBJECT and any(state == "proven" for *_, state in found):
                yield f"/anchor/{key}", "is null, but a proven claim names a signer"
            continue
        match = [
            (expected, observed, state)
            for expected, observed, state in found
            if (expected if subject != SIGNER_SUBJECT else observed) == want
        ]
        if not match:
            yield f"/anchor/{key}", f"says {want}, but no claim {quoted(subject)} checked it"
        elif (head["verdict"] == "verified" or subject == SIGNER_SUBJECT) and not any(
            s == "proven" for *_, s in match
        ):
            yield f"/anchor/{key}", f"says {want}, but its claim {quoted(subject)} is not proven"
        elif observed_key is not None and any(
            state == "proven" and observed != head[observed_key] for _, observed, state in match
        ):
            yield (
                f"/anchor/{key}",
                f"was proven against {match[0][1]}, but the record's {observed_key} is "
                f"{head[observed_key]}",
            )


def audit_anchor_contradictions(
    head: Mapping[str, Any], verification: Any
) -> Iterator[tuple[str, str]]:
    """An audit's anchor against the verification it rests on: the trust statement of
    the audit page is the verification's, and a verified result met its anchor."""
    anchor = head.get("anchor")
    if not isinstance(anchor, Mapping):
        return
    yield from _self_consistency_contradiction(anchor)
    if not isinstance(verification, Mapping):
        return
    if "signatures" in verification and anchor["signer"] != _signer_of(verification["signatures"]):
        yield (
            "/anchor/signer",
            f"says {quoted(anchor['signer'])}, but the verification's verified signatures give "
            f"{quoted(_signer_of(verification['signatures']))}",
        )
    if verification["verdict"] != "verified":
        return
    for key, observed in (
        ("expected_bundle_digest", "bundle_digest"),
        ("expected_report_digest", "report_digest"),
    ):
        if anchor[key] is not None and anchor[key] != verification[observed]:
            yield (
                f"/anchor/{key}",
                f"says {anchor[key]}, but the verified bundle's {observed} is "
                f"{verification[observed]}",
            )
    if verification["anchor"] != anchor["description"]:
        yield "/verification/anchor", "differs from /anchor/description"
