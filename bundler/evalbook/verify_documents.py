"""EvalBook claim groups 3 to 6: the report, the suite, the scorers and the datasets.

Each pinned document is read where the contract puts it and held against the digest
the report pins: the report body and envelope (3), the suite (4), each scorer
version's framed digest (5, ``evalbook.scorers``), the dataset manifests and the
examples the cases use (6). What is absent must be listed as unavailable or redacted.
"""

from __future__ import annotations

from typing import Any

from bundler.core import schemas
from bundler.core.claims import (
    ENVELOPE_STATUS_SUBJECT,
    EXPECT_REPORT_SUBJECT,
    REPORT_BODY_SUBJECT,
    Envelope,
)
from bundler.core.envelope import supersession_problem
from bundler.core.errors import SchemaError
from bundler.evalbook.bagcheck import parse_kept
from bundler.evalbook.scorers import scorer_file_order, scorer_version_digest
from bundler.evalbook.verify_state import VerifierState


class DocumentClaims(VerifierState):
    """Claim groups 3 (report), 4 (suite), 5 (scorers) and 6 (datasets, examples)."""

    # -- claim 3: report ---------------------------------------------------------------

    def check_report(self) -> None:
        entry = self.bundle["report"]
        path = entry["path"]
        self.named.update({path, entry["envelope"]["path"]})
        observed = self.file_digest(path)
        self.claims.compare(3, REPORT_BODY_SUBJECT, entry["digest"], observed, path=path)
        if self.options.expect_report_digest is not None:
            self.claims.compare(
                3,
                EXPECT_REPORT_SUBJECT,
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
                wrong = supersession_problem(value["report_id"], value.get("issued_at"), env_value)
                if wrong is not None:
                    raise SchemaError(f"{env['path']}: /{wrong[0]}: {wrong[1]}")
                self.envelope = Envelope(
                    env_value["status"],
                    env_value["superseded_by"],
                    env_value["superseded_at"],
                    env_value["superseded_reason"],
                )
                self.claims.compare(
                    3,
                    ENVELOPE_STATUS_SUBJECT,
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
        files: list[tuple[str, bytes]] = []
        for rel in scorer_file_order(str(p) for p in value["files"]):
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
            files.append((f"files/{rel}", data))
        return scorer_version_digest(self.c.kept[desc_path], files)

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
                        "not in the dataset manifest"
                        if key in manifests
                        else "no dataset manifest to find it in (its dataset's claim says why)",
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
