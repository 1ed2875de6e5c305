"""EvalBook claim group 11: the documents agree as a contract-following exporter writes them.

Every file at the path the contract defines for it, the exporter's recorded
permissions allowing an export, each check listed once, and each payload's size and
location agreeing with every case reference to it.
"""

from __future__ import annotations

from collections import Counter

from bundler.evalbook.contract import EXPORT, is_run_file
from bundler.evalbook.listing import INLINE_MAX
from bundler.evalbook.verify_state import VerifierState


class CoherenceClaims(VerifierState):
    """Claim group 11 (coherence)."""

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
                # An imported run file is exported from either area (SPEC 16).
                producer = (self.report or {}).get("producer")
                run_file = any(is_run_file(producer, kind) for kind, _, _, _ in uses)
                if not run_file and not any(location == "inline" for _, location, _, _ in uses):
                    problems.add("in the bundle, yet no case stores it inline")
                if any(kind == "trace" or location == "traces" for kind, location, _, _ in uses):
                    problems.add("in the bundle, yet a case refers to it as a trace")
            for problem in sorted(problems):
                self.claims.failed(11, f"payload {digest} agrees with its case references", problem)
        if len(self.claims.items) == before:
            self.claims.proven(
                11, "coherence: permissions, checks once each, payload references agree"
            )
