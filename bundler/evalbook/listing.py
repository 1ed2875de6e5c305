"""Claim 10's listing rules in one table (SPEC sections 4.3 and 5).

A bundle may say of an item that it is unavailable or redacted; the verifier then counts
the item's claim as unprovable instead of failed. So a listing is a claim of its own,
and it is accepted only when it is exactly what an exporter following the contract
would have written for that item in that bundle:

- the entry names an item the report, a manifest or an exported case refers to, by its
  one canonical ``ref`` (``<id>@<version>`` with the version in ASCII digits and no
  leading zero, ``<dataset>@<version>/<example>``, a check id, a payload digest): refs
  are compared as strings against the spellings built from the parsed documents, never
  parsed themselves;
- the item is not also in the bundle, and is listed once (payloads are one item per
  digest, whatever kind they are listed as);
- its reason is one the contract gives for its kind (``REASONS``), and the situation the
  reason describes holds (``_Check``'s method for that reason);
- its ``digest`` is the one the report or manifest pins for it, and a ``*_mismatch``
  entry's observed digest differs from the pinned one.

``listing_problems`` is the only place these rules live; the verifier reports each
problem as a failed claim of group 10.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from bundler.core.digests import is_digest
from bundler.evalbook.contract import INLINE_PAYLOAD_MAX_BYTES, is_run_file

INLINE_MAX = INLINE_PAYLOAD_MAX_BYTES
PAYLOAD_KINDS = frozenset({"output", "trace", "artifact"})

# (group, kind) -> the reasons an item of that kind can be listed for (SPEC 4.3;
# docs/format.md "What goes in, what is listed"). A trace body is always redacted under
# its kind "trace", whatever kind the case gave it; an evidence manifest is always
# exported, so only its absence or its bytes can keep it out.
REASONS: dict[tuple[str, str], frozenset[str]] = {
    ("unavailable", "suite"): frozenset({"missing_from_store", "digest_mismatch"}),
    ("unavailable", "scorer"): frozenset(
        {"scorer_version_missing", "scorer_digest_mismatch", "missing_from_store"}
    ),
    ("unavailable", "dataset"): frozenset({"missing_from_store", "digest_mismatch"}),
    ("unavailable", "example"): frozenset(
        {"removed_by_retention", "missing_from_store", "digest_mismatch"}
    ),
    ("redacted", "example"): frozenset({"no_dataset_read_body"}),
    ("unavailable", "check"): frozenset({"missing_from_store"}),
    ("unavailable", "cases"): frozenset({"case_limit", "missing_from_store"}),
    ("unavailable", "output"): frozenset(
        {"payload_at_sso", "missing_from_store", "digest_mismatch"}
    ),
    ("unavailable", "artifact"): frozenset(
        {"payload_at_sso", "missing_from_store", "digest_mismatch"}
    ),
    ("redacted", "output"): frozenset({"no_dataset_read_body"}),
    # Only a run file of an imported report (SPEC 16), as _body checks.
    ("redacted", "artifact"): frozenset({"no_dataset_read_body"}),
    ("redacted", "trace"): frozenset({"trace_capture_policy"}),
    ("unavailable", "evidence_manifest"): frozenset({"missing_from_store", "digest_mismatch"}),
}
MISMATCH_REASONS = frozenset({"digest_mismatch", "scorer_digest_mismatch"})

# Every reason an item can be listed for, in words for an auditor who has not read the
# contract (SPEC 4.3 and 10.1; docs/format.md). verify and export print each reason
# with its count and these words, on the console and in Markdown alike.
REASON_EXPLANATIONS: dict[str, str] = {
    "payload_at_sso": (
        "the payload is over 262,144 bytes and kept in the store's large-object area (SSO), "
        "which bundles do not carry, so its digest is listed, not its bytes"
    ),
    "removed_by_retention": (
        "the dataset's retention policy removed the example body (named in retention.jsonl), "
        "so only its digest remains"
    ),
    "scorer_version_missing": ("the scorer version the report pins no longer exists in the store"),
    "scorer_digest_mismatch": (
        "the pinned scorer version exists but now hashes differently from the digest the "
        "report pins (the observed digest is in the detail), so it is left out"
    ),
    "case_limit": (
        "the check has cases beyond the bundle's limit of 20,000 cases (counted over checks "
        "in report order); those cases are counted, not included"
    ),
    "digest_mismatch": (
        "the stored bytes no longer match the digest that refers to them, so the exporter "
        "left them out rather than write bytes that cannot prove anything"
    ),
    "missing_from_store": (
        "the item is referred to but was absent from the store the bundle was exported from"
    ),
    "no_dataset_read_body": (
        "the exporting principal may not read dataset example bodies (lacks "
        "dataset.read_body), so the examples, case outputs and imported run files are listed, "
        "not included"
    ),
    "trace_capture_policy": (
        "trace bodies stay in the tracing system by policy and are never exported; only "
        "their digests are listed"
    ),
    "definition_missing": (
        "the check's definition (its YAML or the script it names) was not found under the "
        "project root"
    ),
    "definition_digest_mismatch": (
        "the check's definition no longer gives the check_definition_sha256 the run "
        "recorded (it changed after the run; the observed digest is in the detail)"
    ),
    "no_recorded_sha256": (
        "the stored object carries no sha256 metadata (it was copied in by another tool), "
        "so its bytes were verified as they are but cannot be shown to be the ones uploaded"
    ),
}


def explain_reason(reason: str) -> str:
    """The words for a listing reason; a reason the contract does not know says so."""
    return REASON_EXPLANATIONS.get(reason, "a reason this contract does not define")


@dataclass
class PayloadUse:
    """How the exported cases refer to one payload digest, in export order."""

    kinds: list[str] = field(default_factory=list)
    locations: set[str] = field(default_factory=set)


@dataclass
class BundleFacts:
    """What the verifier established about the bundle, that the listing is held against."""

    bundle: dict[str, Any]
    report: dict[str, Any] | None
    read_body: bool
    files: Mapping[str, Any]  # bag-relative path -> file info, for presence
    payload_uses: Mapping[str, PayloadUse]  # digest -> uses by exported cases
    examples_used: Mapping[str, tuple[str, int, str]]  # canonical ref -> (dataset, version, id)
    # (dataset_id, version) -> {example_id: digest} for manifests that verified
    manifests: Mapping[tuple[str, int], Mapping[str, str]]


def item_key(entry: Mapping[str, Any]) -> tuple[str, str]:
    """The identity of a listed item: a payload is one item per digest, whatever its kind."""
    if entry["kind"] in PAYLOAD_KINDS or entry["kind"] == "evidence_manifest":
        return ("payload", entry["ref"])
    return (entry["kind"], entry["ref"])


def ref_of(item_id: str, version: int) -> str:
    """The one canonical spelling of a versioned item's ref."""
    return f"{item_id}@{version}"


def listing_problems(facts: BundleFacts) -> Iterator[tuple[dict[str, Any], str]]:
    """Each listed entry that contradicts the bundle, with the rule it breaks."""
    check = _Check(facts)
    # The refs seen, by item_key's first part: the ref strings of bundle.json itself,
    # not a tuple per entry (a bundle.json within its cap lists 150,000).
    seen: dict[str, set[str]] = {}
    groups = (("unavailable", facts.bundle["unavailable"]), ("redacted", facts.bundle["redacted"]))
    for group, entries in groups:
        for raw in entries:
            entry = dict(raw, group=group)
            entry.setdefault("detail", None)
            kind, ref = item_key(entry)
            refs = seen.setdefault(kind, set())
            if ref in refs:
                yield entry, "the item is listed more than once"
                continue
            refs.add(ref)
            problem = check.problem(entry)
            if problem is not None:
                yield entry, problem


class _Check:
    def __init__(self, facts: BundleFacts) -> None:
        self.f = facts
        report = facts.report or {}
        checks = report.get("checks", [])
        self.scorer_pins: dict[str, list[str]] = {}
        for c in checks:
            ref = c["scorer_ref"]
            self.scorer_pins.setdefault(ref_of(ref["id"], ref["version"]), []).append(ref["digest"])
        self.dataset_pins = {
            ref_of(r["id"], r["version"]): r["digest"] for r in report.get("dataset_refs", [])
        }
        suite_ref = report.get("suite_ref")
        self.suite_pin = (
            {ref_of(suite_ref["id"], suite_ref["version"]): suite_ref["digest"]}
            if suite_ref
            else {}
        )
        self.manifest_checks = {
            r["digest"]: c["check_id"]
            for c in checks
            for r in c["evidence_refs"]
            if r["kind"] == "manifest"
        }
        self.bundle_checks = {c["check_id"]: c for c in facts.bundle["checks"]}
        self.payloads = {p["digest"] for p in facts.bundle["payloads"]}

    def problem(self, e: dict[str, Any]) -> str | None:
        if self.f.report is None:
            return "the report body did not verify, so no listing can be held against it"
        allowed = REASONS.get((e["group"], e["kind"]))
        if allowed is None:
            return f"an item of kind {e['kind']} cannot be {e['group']}"
        if e["reason"] not in allowed:
            return (
                f"{e['reason']} does not apply to an item of kind {e['kind']} "
                f"(the contract allows: {', '.join(sorted(allowed))})"
            )
        method = getattr(self, f"kind_{e['kind']}")
        problem: str | None = method(e)
        if problem is None and e["reason"] in MISMATCH_REASONS:
            observed = e["detail"]
            if not is_digest(observed):
                problem = f"{e['reason']} must record the observed digest in detail"
            elif observed == e["digest"]:
                problem = f"{e['reason']}, yet the observed digest is the pinned one"
        return problem

    # Each kind_* method checks the item exists under that exact ref, is not in the
    # bundle, carries the pinned digest, and that the reason's situation holds.

    def _pinned(self, e: dict[str, Any], pins: Mapping[str, str], what: str) -> str | None:
        if e["ref"] not in pins:
            return f"not {what} (refs are written {{id}}@{{version}}, ASCII digits)"
        if e["digest"] != pins[e["ref"]]:
            return "the listed digest is not the one the report pins"
        return None

    def kind_suite(self, e: dict[str, Any]) -> str | None:
        if problem := self._pinned(e, self.suite_pin, "the report's suite"):
            return problem
        if self.f.bundle["suite"]["path"] is not None:
            return "listed, yet the suite is in the bundle"
        return None

    def kind_dataset(self, e: dict[str, Any]) -> str | None:
        if problem := self._pinned(e, self.dataset_pins, "among the report's dataset_refs"):
            return problem
        if any(
            ref_of(d["dataset_id"], d["version"]) == e["ref"] for d in self.f.bundle["datasets"]
        ):
            return "listed, yet the dataset manifest is in the bundle"
        return None

    def kind_scorer(self, e: dict[str, Any]) -> str | None:
        pins = self.scorer_pins.get(e["ref"])
        if pins is None:
            return "no report check pins this scorer version (refs are written {id}@{version})"
        if e["digest"] != pins[0]:
            return "the listed digest is not the one the report pins"
        if any(ref_of(s["scorer_id"], s["version"]) == e["ref"] for s in self.f.bundle["scorers"]):
            return "listed, yet the scorer is in the bundle"
        if e["reason"] == "scorer_digest_mismatch" and e["detail"] in pins:
            return "scorer_digest_mismatch, yet the observed digest is a pinned one"
        return None

    def kind_example(self, e: dict[str, Any]) -> str | None:
        used = self.f.examples_used.get(e["ref"])
        if used is None:
            return (
                "no exported case uses this example "
                "(refs are written {dataset}@{version}/{example_id}, ASCII digits)"
            )
        dataset_id, version, example_id = used
        entry = next(
            (
                x
                for d in self.f.bundle["datasets"]
                if (d["dataset_id"], d["version"]) == (dataset_id, version)
                for x in d["examples"]
                if x["example_id"] == example_id
            ),
            None,
        )
        if entry is not None and entry["path"] is not None:
            return "listed, yet the example body is in the bundle"
        in_bundle = any(
            (d["dataset_id"], d["version"]) == (dataset_id, version)
            for d in self.f.bundle["datasets"]
        )
        manifest = self.f.manifests.get((dataset_id, version))
        if not in_bundle or (manifest is not None and example_id not in manifest):
            # No manifest entry: there is no body, so nothing to redact or to have removed.
            if e["reason"] != "missing_from_store" or e["digest"] is not None:
                return "an example without a manifest entry is missing_from_store with no digest"
            return None
        if manifest is None:
            return None  # the manifest failed its own claim; nothing to hold the entry against
        if e["digest"] != manifest[example_id]:
            return "the listed digest is not the one the dataset manifest pins"
        if e["reason"] == "no_dataset_read_body":
            if self.f.read_body:
                return "the exporter's recorded permissions include dataset.read_body"
        elif not self.f.read_body:
            return "without dataset.read_body an example body is redacted, not unavailable"
        return None

    def kind_check(self, e: dict[str, Any]) -> str | None:
        entry = self.bundle_checks.get(e["ref"])
        if entry is None:
            return "not a check of the report"
        if e["digest"] is not None:
            return "a check result has no pinned digest: the listed digest must be null"
        if entry["path"] is not None:
            return "listed, yet the check result is in the bundle"
        return None

    def kind_cases(self, e: dict[str, Any]) -> str | None:
        entry = self.bundle_checks.get(e["ref"])
        if entry is None:
            return "not a check of the report"
        if e["digest"] is not None:
            return "a case file has no pinned digest: the listed digest must be null"
        cases = entry["cases"]
        if e["reason"] == "case_limit":
            cut = cases["total"] - cases["exported"]
            if cut <= 0:
                return "case_limit, yet every case of the check was exported"
            if e["detail"] != str(cut):
                return f"case_limit detail must be the number of cases left out ({cut})"
            return None
        if cases["path"] is not None:
            return "listed, yet the case file is in the bundle"
        return None

    def _payload(self, e: dict[str, Any]) -> str | None:
        if e["ref"] != e["digest"] or not is_digest(e["ref"]):
            return "a payload is listed by its digest, as ref and digest alike"
        if e["ref"] in self.payloads or f"data/blobs/sha256/{e['ref'][7:]}" in self.f.files:
            return "listed, yet the payload is in the bundle"
        return None

    def kind_evidence_manifest(self, e: dict[str, Any]) -> str | None:
        if problem := self._payload(e):
            return problem
        if e["ref"] not in self.manifest_checks:
            return "no report check refers to this evidence manifest"
        return None

    def _case_payload(self, e: dict[str, Any]) -> tuple[PayloadUse | None, str | None]:
        if problem := self._payload(e):
            return None, problem
        if e["ref"] in self.manifest_checks:
            return None, "an evidence manifest is always exported; list it as evidence_manifest"
        use = self.f.payload_uses.get(e["ref"])
        if use is None:
            return None, "no exported case refers to this payload"
        return use, None

    def kind_trace(self, e: dict[str, Any]) -> str | None:
        use, problem = self._case_payload(e)
        if use is None:
            return problem
        if "trace" not in use.kinds and "traces" not in use.locations:
            return "no case refers to it as a trace or stores it in traces"
        return None

    def kind_output(self, e: dict[str, Any]) -> str | None:
        return self._body(e)

    def kind_artifact(self, e: dict[str, Any]) -> str | None:
        return self._body(e)

    def _body(self, e: dict[str, Any]) -> str | None:
        """An output or artifact body: the exporter's one decision per digest."""
        use, problem = self._case_payload(e)
        if use is None:
            return problem
        if "trace" in use.kinds or "traces" in use.locations:
            return "a payload a case stores as a trace is redacted as kind trace"
        producer = (self.f.report or {}).get("producer")
        run_file = any(is_run_file(producer, kind) for kind in use.kinds)
        if e["reason"] == "no_dataset_read_body":
            if self.f.read_body:
                return "the exporter's recorded permissions include dataset.read_body"
            # The exporter's order: an output is redacted as one; else a run file as an
            # artifact (SPEC 16); nothing else is redacted for dataset.read_body.
            expected = "output" if "output" in use.kinds else "artifact" if run_file else None
            if expected is None:
                return "only case outputs and imported run files are redacted for dataset.read_body"
            if e["kind"] != expected:
                return f"redacted as {e['kind']}, but its cases make it an {expected}"
            return None
        if "output" in use.kinds and not self.f.read_body:
            return "without dataset.read_body a case output is redacted, not unavailable"
        if run_file and not self.f.read_body:
            return "without dataset.read_body an imported run file is redacted, not unavailable"
        if run_file and e["reason"] == "payload_at_sso":
            return "an imported run file is exported whatever its size, never payload_at_sso"
        if e["kind"] != use.kinds[0]:
            return f"listed as {e['kind']}, but its first use in the cases is as {use.kinds[0]}"
        if e["reason"] == "payload_at_sso":
            if "inline" in use.locations:
                return "a case payload stored inline cannot be payload_at_sso"
            return None
        if "inline" not in use.locations and not run_file:
            return "only inline payloads are taken from the store's blobs"
        return None
