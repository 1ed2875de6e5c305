"""EvalBook claim groups 7 to 10: the checks, the cases, the payloads, the evidence and
the accounting.

Check results and case files against bundle.json and the report (7), each case line
canonical and schema-valid and the case tree's root recomputed, each payload a case
refers to present or listed (8), each evidence reference of the report among the
check's cases or its evidence manifest (9), and every file and listed item accounted
for (10, ``evalbook.listing``). Filling ``case_refs`` and ``examples_used`` as it goes.
"""

from __future__ import annotations

from typing import Any

from bundler.core import canonical, schemas
from bundler.core.errors import CanonicalJSONError, SchemaError
from bundler.evalbook.bagcheck import parse_kept
from bundler.evalbook.contract import MAX_EVIDENCE_REFS
from bundler.evalbook.listing import BundleFacts, PayloadUse, listing_problems, ref_of
from bundler.evalbook.verify_state import VerifierState
from bundler.trust.merkle import TreeBuilder

# The problems of a case file its claim names (the Node verifier names as many); the
# rest are counted.
SHOWN_PROBLEMS = 3


class CaseClaims(VerifierState):
    """Claim groups 7 (checks), 8 (cases, payloads), 9 (evidence) and 10 (accounting)."""

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
        problems: list[str] = []
        parsed = []
        for number, raw in enumerate(lines, start=1):
            where = f"{cases['path']}:{number}"
            tree.append(raw)
            try:
                value = canonical.loads_canonical(raw, source=where)
                if len(problems) < SHOWN_PROBLEMS:
                    schemas.validate("case", value, source=where)
                elif not schemas.is_valid("case", value):
                    # Counted, not explained: the claim names the first three only.
                    problems.append(f"{where}: breaks the case schema")
                    continue
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
                "; ".join(problems[:SHOWN_PROBLEMS])
                + (
                    f" (+{len(problems) - SHOWN_PROBLEMS} more)"
                    if len(problems) > SHOWN_PROBLEMS
                    else ""
                ),
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
                    detail=listed.get("detail"),
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
        # Each check's case outputs and evidence, in one pass over the references: per
        # check, a scan of them all would cost checks x references.
        scored_by_check: dict[str, set[tuple[str, str]]] = {}
        for d, uses in self.case_refs.items():
            for kind, _, cid, _ in uses:
                scored_by_check.setdefault(cid, set()).add((kind, d))
        for check in self.report["checks"]:
            check_id = check["check_id"]
            scored = scored_by_check.get(check_id, set())
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
                            detail=listed.get("detail"),
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
                f"accounting: {self.listing.count} listed items agree with the bundle; every file is named",
            )
