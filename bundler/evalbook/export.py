"""Export one issued report into a reproducibility bundle (SPEC sections 3, 4, 7, 8).

Data flows one way: the store reader yields validated documents, ``_Collector`` decides
for every referenced item whether it goes in or is listed (unavailable or redacted, once
each), and ``BagWriter`` (``bagwriter``) streams the members into a deterministic tar.zst
in one pass. Nothing is written at the target name until the archive is complete and
fsynced.

Member order (documented in docs/format.md, relied on by no reader for correctness):
the top directory, then under data/ the report body and envelope, the suite, the
scorers, the dataset manifests, the check results, the case files, the example bodies,
the payload blobs, and ``bundle.json``; then the tag files bagit.txt, bag-info.txt,
manifest-sha256.txt, bundle-head.json (and bundle-head.json.sig), tagmanifest-sha256.txt.
Directories are written just before their first member.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from bundler.archive import bag_reader
from bundler.archive import reader as archive_reader
from bundler.archive.prefetch import prefetch
from bundler.core import canonical
from bundler.core.digests import bytes_digest, json_digest, parse_digest
from bundler.core.errors import PermissionDenied, StoreError, StrictFailure
from bundler.core.version import TOOL_NAME, __version__
from bundler.evalbook.bagwriter import (
    DEFAULT_LEVEL,
    BagWriter,
    Progress,
    check_not_before,
    format_timestamp,
    resolve_output,
    write_bag_archive,
    write_tag_files,
)
from bundler.evalbook.contract import (
    BUNDLE_SCHEMA,
    EXPORT,
    INLINE_PAYLOAD_MAX_BYTES,
    READ_BODY,
    is_run_file,
)
from bundler.evalbook.store import (
    MAX_DOCUMENT_BYTES,
    CaseLine,
    Document,
    ScorerVersion,
    Store,
    open_source,
)
from bundler.trust.merkle import TreeBuilder

MAX_CASES = archive_reader.MAX_CASES  # the reader's limit: one constant for both sides
# Payload bytes read ahead of the writer (beyond the one being read).
PREFETCH_BYTES = 8 * 1024 * 1024


class Reason(StrEnum):
    """Reasons of SPEC section 4.3, with their exact strings."""

    PAYLOAD_AT_SSO = "payload_at_sso"
    REMOVED_BY_RETENTION = "removed_by_retention"
    SCORER_VERSION_MISSING = "scorer_version_missing"
    SCORER_DIGEST_MISMATCH = "scorer_digest_mismatch"
    CASE_LIMIT = "case_limit"
    DIGEST_MISMATCH = "digest_mismatch"
    MISSING_FROM_STORE = "missing_from_store"
    NO_DATASET_READ_BODY = "no_dataset_read_body"
    TRACE_CAPTURE_POLICY = "trace_capture_policy"


REDACTION_REASONS = frozenset({Reason.NO_DATASET_READ_BODY, Reason.TRACE_CAPTURE_POLICY})


@dataclass(frozen=True)
class ExportConfig:
    store_root: str
    report_id: str
    principal: str
    exported_at: datetime
    out: Path | None = None
    level: int = DEFAULT_LEVEL
    strict: bool = False
    sign: Callable[[bytes], str] | None = None  # signs bundle-head.json bytes (SSHSIG armor)
    endpoint_url: str | None = None  # for an s3:// store root
    # What gave ``exported_at``, for the message that refuses it (SPEC section 7).
    exported_at_source: str = "--exported-at"


@dataclass(frozen=True)
class ExportResult:
    path: Path
    report_id: str
    bundle_digest: str
    report_digest: str
    archive_sha256: str
    archive_size: int
    bundle: dict[str, Any] = field(repr=False)  # the whole bundle.json: not for a repr
    # What ``export --upload`` stored (the upload record), when it was asked to.
    upload: dict[str, Any] | None = field(default=None, repr=False)

    def summary(self) -> dict[str, Any]:
        """The machine-readable summary printed by ``export --json``."""
        summary = export_summary(self)
        if self.upload is not None:
            summary["upload"] = self.upload
        return summary

    def to_json(self) -> dict[str, Any]:
        """The object ``export --json`` prints (schemas/export-summary.schema.json)."""
        return self.summary()


def bag_top(report_id: str) -> str:
    """The bag's top directory in the archive of report ``report_id``."""
    return f"evalbook-bundle-{report_id}"


def archive_name(report_id: str) -> str:
    """Default file name of the archive of report ``report_id``."""
    return f"evalbook-bundle-{report_id}.tar.zst"


# --------------------------------------------------------------------------- collecting


@dataclass
class _PayloadUse:
    """Every way the exported cases refer to one payload digest."""

    digest: str
    size: int
    kinds: list[str] = field(default_factory=list)
    sizes: set[int] = field(default_factory=set)
    locations: set[str] = field(default_factory=set)


@dataclass
class _Ledger:
    """Unavailable and redacted entries, one per item."""

    unavailable: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    redacted: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def list_unavailable(
        self, kind: str, ref: str, digest: str | None, reason: Reason, detail: str | None = None
    ) -> None:
        key = (kind, ref)
        if key not in self.unavailable and key not in self.redacted:
            self.unavailable[key] = {
                "kind": kind,
                "ref": ref,
                "digest": digest,
                "reason": reason.value,
                "detail": detail,
            }

    def redact(self, kind: str, ref: str, digest: str, reason: Reason) -> None:
        key = (kind, ref)
        self.unavailable.pop(key, None)
        self.redacted.setdefault(
            key, {"kind": kind, "ref": ref, "digest": digest, "reason": reason.value}
        )

    def sorted_unavailable(self) -> list[dict[str, Any]]:
        return [self.unavailable[k] for k in sorted(self.unavailable)]

    def sorted_redacted(self) -> list[dict[str, Any]]:
        return [self.redacted[k] for k in sorted(self.redacted)]


@dataclass(frozen=True)
class _ExamplePlan:
    """An example the cases use; ``size`` (from the manifest) is None when it is listed
    instead of read."""

    dataset_id: str
    version: int
    example_id: str
    digest: str
    size: int | None


@dataclass
class _CheckCases:
    check_id: str
    result: Document | None
    lines: list[CaseLine] | None  # None: the case file is absent
    total: int


class _Collector:
    """Decides what goes into the bundle and what is listed, then writes it."""

    def __init__(self, store: Store, body: Document, permissions: frozenset[str]) -> None:
        self.store = store
        self.body = body
        self.report = body.value
        self.read_body = READ_BODY in permissions
        self.ledger = _Ledger()
        self._manifest_checks: dict[str, str] = {}  # evidence manifest digest -> check id
        # Run files of an imported report (SPEC 16): digest -> the area they are read from.
        self.run_files: dict[str, str] = {}

    # -- suite, scorers, datasets ------------------------------------------------------

    def suite(self, writer: BagWriter) -> dict[str, Any]:
        ref = self.report["suite_ref"]
        item = f"{ref['id']}@{ref['version']}"
        doc = self.store.suite(ref["id"], ref["version"])
        path = None
        if doc is None:
            self.ledger.list_unavailable("suite", item, ref["digest"], Reason.MISSING_FROM_STORE)
        elif (observed := json_digest(doc.value)) != ref["digest"]:
            self.ledger.list_unavailable(
                "suite", item, ref["digest"], Reason.DIGEST_MISMATCH, observed
            )
        else:
            path = f"data/suite/{ref['id']}/{ref['version']}.json"
            writer.add(path, doc.data)
        return {
            "suite_id": ref["id"],
            "version": ref["version"],
            "digest": ref["digest"],
            "path": path,
        }

    def scorers(self, writer: BagWriter) -> list[dict[str, Any]]:
        pinned: dict[tuple[str, int], list[str]] = {}
        for check in self.report["checks"]:
            ref = check["scorer_ref"]
            pinned.setdefault((ref["id"], ref["version"]), []).append(ref["digest"])
        exported = []
        for (scorer_id, version), digests in sorted(pinned.items()):
            item = f"{scorer_id}@{version}"
            scorer = self.store.scorer(scorer_id, version)
            if scorer is None:
                self.ledger.list_unavailable(
                    "scorer", item, digests[0], Reason.SCORER_VERSION_MISSING
                )
            elif scorer.digest is None:
                self.ledger.list_unavailable(
                    "scorer", item, digests[0], Reason.MISSING_FROM_STORE, scorer.missing_file
                )
            elif any(d != scorer.digest for d in digests):
                self.ledger.list_unavailable(
                    "scorer", item, digests[0], Reason.SCORER_DIGEST_MISMATCH, scorer.digest
                )
            else:
                exported.append(self._write_scorer(writer, scorer))
        return exported

    @staticmethod
    def _write_scorer(writer: BagWriter, scorer: ScorerVersion) -> dict[str, Any]:
        base = f"data/scorers/{scorer.scorer_id}/{scorer.version}"
        writer.add(f"{base}/scorer.json", scorer.descriptor.data)
        for f in scorer.files:
            writer.add(f"{base}/{f.relpath}", f.data)
        return {
            "scorer_id": scorer.scorer_id,
            "version": scorer.version,
            "digest": scorer.digest,
            "path": base,
        }

    def dataset_manifests(self, writer: BagWriter) -> dict[tuple[str, int], dict[str, Any]]:
        datasets: dict[tuple[str, int], dict[str, Any]] = {}
        for ref in sorted(self.report["dataset_refs"], key=lambda r: (r["id"], r["version"])):
            item = f"{ref['id']}@{ref['version']}"
            doc = self.store.dataset_manifest(ref["id"], ref["version"])
            if doc is None:
                self.ledger.list_unavailable(
                    "dataset", item, ref["digest"], Reason.MISSING_FROM_STORE
                )
                continue
            if (observed := json_digest(doc.value)) != ref["digest"]:
                self.ledger.list_unavailable(
                    "dataset", item, ref["digest"], Reason.DIGEST_MISMATCH, observed
                )
                continue
            path = f"data/datasets/{ref['id']}/{ref['version']}/manifest.json"
            writer.add(path, doc.data)
            datasets[(ref["id"], ref["version"])] = {
                "entry": {
                    "dataset_id": ref["id"],
                    "version": ref["version"],
                    "digest": ref["digest"],
                    "path": path,
                    "examples": [],
                },
                "digests": {e["example_id"]: e["digest"] for e in doc.value["examples"]},
                "sizes": {e["example_id"]: e["size"] for e in doc.value["examples"]},
                "removed": self.store.retention(ref["id"], ref["version"]),
            }
        return datasets

    # -- checks and cases --------------------------------------------------------------

    def read_checks(self) -> list[_CheckCases]:
        """Check results and cases in report order, cut at MAX_CASES exported cases."""
        budget = MAX_CASES
        out = []
        seen: set[str] = set()
        for check in self.report["checks"]:
            if check["check_id"] in seen:
                raise StoreError(
                    f"{self.body.relpath}: lists check {check['check_id']!r} more than once "
                    "(each check appears once in a report); export refused"
                )
            seen.add(check["check_id"])
            check_id = check["check_id"]
            result = self.store.check_result(self.report["report_id"], check_id)
            if result is None:
                self.ledger.list_unavailable("check", check_id, None, Reason.MISSING_FROM_STORE)
            elif result.value["required"] != check["required"]:
                raise StoreError(
                    f"{self.store.source.describe(result.relpath)}: required does not match the report"
                )
            cases = self.store.iter_cases(self.report["report_id"], check_id, parse_first=budget)
            if cases is None:
                self.ledger.list_unavailable("cases", check_id, None, Reason.MISSING_FROM_STORE)
                out.append(_CheckCases(check_id, result, None, 0))
                continue
            kept: list[CaseLine] = []
            total = 0
            case_bytes = 0
            for line in cases:
                total += 1
                if budget > 0:
                    case_bytes += len(line.data) + 1
                    if case_bytes > bag_reader.MAX_DOCUMENT_BYTES:
                        # Refused while reading, before memory grows with the store.
                        raise StoreError(
                            f"reports/{self.report['report_id']}/cases/{check_id}.jsonl: the "
                            f"exported cases would make a case file over the "
                            f"{bag_reader.MAX_DOCUMENT_BYTES}-byte document cap that the "
                            "verifier holds; export refused"
                        )
                    # Only what the export decides on is kept of the parsed case.
                    slim = {k: line.value[k] for k in ("example", "output", "evidence")}
                    kept.append(CaseLine(line.line, line.data, slim))
                    budget -= 1
            if total > len(kept):
                self.ledger.list_unavailable(
                    "cases", check_id, None, Reason.CASE_LIMIT, str(total - len(kept))
                )
            out.append(_CheckCases(check_id, result, kept, total))
        return out

    def write_checks(
        self, writer: BagWriter, checks: list[_CheckCases]
    ) -> tuple[list[dict[str, Any]], TreeBuilder]:
        entries = []
        tree = TreeBuilder()
        for c in checks:
            entry: dict[str, Any] = {"check_id": c.check_id, "digest": None, "path": None}
            if c.result is not None:
                entry["path"] = f"data/checks/{c.check_id}.json"
                entry["digest"] = "sha256:" + writer.add(
                    entry["path"], c.result.data, planned=len(c.result.data)
                )
            entries.append(entry)
        for c, entry in zip(checks, entries, strict=True):
            if c.lines is None:
                entry["cases"] = {"path": None, "digest": None, "total": 0, "exported": 0}
                continue
            data = b"".join(line.data + b"\n" for line in c.lines)
            path = f"data/cases/{c.check_id}.jsonl"
            entry["cases"] = {
                "path": path,
                "digest": "sha256:" + writer.add(path, data, planned=len(data)),
                "total": c.total,
                "exported": len(c.lines),
            }
            for line in c.lines:
                tree.append(line.data)
            writer.count_cases(len(c.lines))
        return entries, tree

    # -- examples and payloads ---------------------------------------------------------

    @staticmethod
    def planned_check_bytes(checks: list[_CheckCases]) -> int:
        """The bytes ``write_checks`` will write: check results and case files."""
        total = 0
        for c in checks:
            if c.result is not None:
                total += len(c.result.data)
            total += sum(len(line.data) + 1 for line in c.lines or ())
        return total

    def plan_examples(
        self,
        checks: list[_CheckCases],
        datasets: dict[tuple[str, int], dict[str, Any]],
    ) -> list[_ExamplePlan]:
        """Every example the exported cases use, in order; those that cannot go in
        (no dataset, not in its manifest, redacted, removed by retention) are listed."""
        used: set[tuple[str, int, str]] = set()
        for c in checks:
            for line in c.lines or ():
                example = line.value["example"]
                used.add((example["dataset_id"], example["version"], example["example_id"]))
        plans: list[_ExamplePlan] = []
        for dataset_id, version, example_id in sorted(used):
            item = f"{dataset_id}@{version}/{example_id}"
            dataset = datasets.get((dataset_id, version))
            if dataset is None:
                self.ledger.list_unavailable(
                    "example",
                    item,
                    None,
                    Reason.MISSING_FROM_STORE,
                    f"dataset {dataset_id}@{version} is not in the bundle",
                )
                continue
            expected = dataset["digests"].get(example_id)
            if expected is None:
                self.ledger.list_unavailable(
                    "example",
                    item,
                    None,
                    Reason.MISSING_FROM_STORE,
                    f"not in the manifest of {dataset_id}@{version}",
                )
                continue
            size = None
            if not self.read_body:
                self.ledger.redact("example", item, expected, Reason.NO_DATASET_READ_BODY)
            elif example_id in dataset["removed"]:
                self.ledger.list_unavailable("example", item, expected, Reason.REMOVED_BY_RETENTION)
            else:
                size = dataset["sizes"][example_id]
            plans.append(_ExamplePlan(dataset_id, version, example_id, expected, size))
        return plans

    def write_examples(
        self,
        writer: BagWriter,
        plans: list[_ExamplePlan],
        datasets: dict[tuple[str, int], dict[str, Any]],
    ) -> None:
        """Read and write the planned examples; a missing or altered one is listed."""
        for plan in plans:
            dataset_id, version, example_id = plan.dataset_id, plan.version, plan.example_id
            item = f"{dataset_id}@{version}/{example_id}"
            expected = plan.digest
            path = None
            if plan.size is not None:
                data = self.store.example(dataset_id, version, example_id)
                if data is None:
                    self.ledger.list_unavailable(
                        "example", item, expected, Reason.MISSING_FROM_STORE
                    )
                elif (observed := bytes_digest(data)) != expected:
                    self.ledger.list_unavailable(
                        "example", item, expected, Reason.DIGEST_MISMATCH, observed
                    )
                else:
                    path = f"data/datasets/{dataset_id}/{version}/examples/{example_id}.json"
                    writer.add(path, data, sha256_hex=parse_digest(expected), planned=plan.size)
                if path is None:
                    writer.unplan(plan.size)
            datasets[(dataset_id, version)]["entry"]["examples"].append(
                {"example_id": example_id, "digest": expected, "path": path}
            )

    def payload_uses(self, checks: list[_CheckCases]) -> dict[str, _PayloadUse]:
        uses: dict[str, _PayloadUse] = {}
        for c in checks:
            for line in c.lines or ():
                refs = [line.value["output"]] if line.value["output"] else []
                for ref in refs + line.value["evidence"]:
                    use = uses.setdefault(ref["digest"], _PayloadUse(ref["digest"], ref["size"]))
                    use.sizes.add(ref["size"])
                    if len(use.sizes) > 1:
                        case_file = f"reports/{self.report['report_id']}/cases/{c.check_id}.jsonl"
                        raise StoreError(
                            f"{self.store.source.describe(case_file)}"
                            f":{line.line}: payload {ref['digest']} is given sizes "
                            f"{', '.join(map(str, sorted(use.sizes)))} by different cases"
                        )
                    use.kinds.append(ref["kind"])
                    use.locations.add(ref["location"])
        return uses

    def plan_payloads(self, uses: dict[str, _PayloadUse]) -> dict[str, str]:
        """The blobs to take (digest -> kind): outputs, artifacts and evidence
        manifests; one decision per digest, and what is not taken is listed.

        Redaction wins over everything; a digest referred to inline anywhere is taken
        from blobs/ (or listed as missing or mismatched when read); one referred to only
        at SSO is ``payload_at_sso``.
        """
        wanted: dict[str, str] = {}  # digest -> its first kind, or "evidence_manifest"
        for digest, use in sorted(uses.items()):
            trace = "trace" in use.kinds or "traces" in use.locations
            if trace:
                self.ledger.redact("trace", digest, digest, Reason.TRACE_CAPTURE_POLICY)
            elif "output" in use.kinds and not self.read_body:
                self.ledger.redact("output", digest, digest, Reason.NO_DATASET_READ_BODY)
            elif any(is_run_file(self.report.get("producer"), k) for k in use.kinds):
                # A run file holds examples and outputs: redacted with them, else exported
                # whatever its size (SPEC 16), streamed by write_run_files.
                if not self.read_body:
                    self.ledger.redact("artifact", digest, digest, Reason.NO_DATASET_READ_BODY)
                else:
                    self.run_files[digest] = "blobs" if "inline" in use.locations else "sso"
            elif "inline" in use.locations:
                wanted[digest] = use.kinds[0]
            else:
                self.ledger.list_unavailable(use.kinds[0], digest, digest, Reason.PAYLOAD_AT_SSO)
        for check in self.report["checks"]:
            for ref in check["evidence_refs"]:
                if ref["kind"] == "manifest":
                    wanted.setdefault(ref["digest"], "evidence_manifest")
                    self._manifest_checks[ref["digest"]] = check["check_id"]
        return wanted

    @staticmethod
    def planned_payload_bytes(uses: dict[str, _PayloadUse], wanted: dict[str, str]) -> int:
        """The bytes of the wanted payloads as the cases give them (evidence manifests,
        of unknown size, are counted when written)."""
        return sum(uses[d].size for d in wanted if d in uses)

    def write_run_files(
        self, writer: BagWriter, uses: dict[str, _PayloadUse]
    ) -> list[dict[str, Any]]:
        """Stream the run files of an imported report into the bundle, whatever their
        size: hashed once to decide (a missing or altered one is listed), then written
        in chunks and hashed again (a file that changed in between refuses the export)."""
        payloads = []
        for digest, area in sorted(self.run_files.items()):
            hex_digest = parse_digest(digest)
            relpath = f"{area}/sha256/{hex_digest}"
            size = uses[digest].size
            observed, actual = self._stream_digest(relpath)
            if observed is None or observed != digest:
                reason = Reason.MISSING_FROM_STORE if observed is None else Reason.DIGEST_MISMATCH
                self.ledger.list_unavailable("artifact", digest, digest, reason, observed)
                writer.unplan(size)
                continue
            if actual != size:
                raise StoreError(
                    f"{self.store.source.describe(relpath)}: the cases give this run file "
                    f"{size} bytes, the store has {actual}; export refused"
                )
            opened = self.store.source.open_stream(relpath)
            if opened is None:
                raise StoreError(f"{self.store.source.describe(relpath)}: vanished during export")
            stream, _ = opened
            with stream:
                path = f"data/blobs/sha256/{hex_digest}"
                writer.add_stream(
                    path,
                    size,
                    iter(functools.partial(stream.read, 1024 * 1024), b""),
                    sha256_hex=hex_digest,
                    planned=size,
                )
            payloads.append({"digest": digest, "size": size, "path": path})
        return payloads

    def _stream_digest(self, relpath: str) -> tuple[str | None, int]:
        opened = self.store.source.open_stream(relpath)
        if opened is None:
            return None, 0
        stream, _ = opened
        h = hashlib.sha256()
        n = 0
        with stream:
            while chunk := stream.read(1024 * 1024):
                h.update(chunk)
                n += len(chunk)
        return "sha256:" + h.hexdigest(), n

    def write_payloads(
        self, writer: BagWriter, uses: dict[str, _PayloadUse], wanted: dict[str, str]
    ) -> list[dict[str, Any]]:
        """Read, check and write the planned blobs; a missing or altered one is listed."""
        payloads = []

        def load(digest: str) -> tuple[tuple[bytes | None, str | None], int]:
            # Runs in the prefetch thread: the read and the hash release the GIL.
            data = self.store.blob(parse_digest(digest), max_size=MAX_DOCUMENT_BYTES)
            if data is None:
                return (None, None), 0
            return (data, bytes_digest(data)), len(data)

        for digest, (data, observed) in prefetch(sorted(wanted), load, budget=PREFETCH_BYTES):
            kind = wanted[digest]
            hex_digest = parse_digest(digest)
            payload_use = uses.get(digest)
            planned = payload_use.size if payload_use is not None else None
            if data is None or observed != digest:
                if data is None:
                    self.ledger.list_unavailable(kind, digest, digest, Reason.MISSING_FROM_STORE)
                else:
                    self.ledger.list_unavailable(
                        kind, digest, digest, Reason.DIGEST_MISMATCH, observed
                    )
                if planned is not None:
                    writer.unplan(planned)
                continue
            if payload_use is not None and len(data) != payload_use.size:
                raise StoreError(
                    f"{self.store.source.describe('blobs/sha256/' + hex_digest)}: the cases give "
                    f"this payload {payload_use.size} bytes, the blob has {len(data)}; export refused"
                )
            if kind == "evidence_manifest":
                manifest = self.store.parse_evidence_manifest(
                    Document(f"blobs/sha256/{hex_digest}", data, None)
                )
                if manifest["check_id"] != self._manifest_checks[digest]:
                    raise StoreError(
                        f"{self.store.source.describe('blobs/sha256/' + hex_digest)}: evidence manifest "
                        f"names check {manifest['check_id']!r}, referenced by {self._manifest_checks[digest]!r}"
                    )
            path = f"data/blobs/sha256/{hex_digest}"
            writer.add(path, data, sha256_hex=hex_digest, planned=planned)
            payloads.append({"digest": digest, "size": len(data), "path": path})
        return payloads


# ------------------------------------------------------------------------------ export


def export_bundle(
    config: ExportConfig, progress: Callable[[Progress], None] | None = None
) -> ExportResult:
    """Export ``config.report_id`` from ``config.store_root`` into a bundle archive.

    Raises PermissionDenied (exit 4) when the principal lacks ``report.export``,
    InputError/StoreError/OutputError (exit 3) for bad input or an unusable output
    path, StrictFailure (exit 1) under ``strict`` when anything would be unavailable.
    Nothing is left at the target name unless the export succeeds.
    """
    store = Store(open_source(config.store_root, endpoint_url=config.endpoint_url))
    access = store.access()
    permissions = access.get(config.principal)
    if permissions is None:
        raise PermissionDenied(
            f"principal {config.principal!r} is not in access.json; export refused",
            param="principal",
        )
    if EXPORT not in permissions:
        raise PermissionDenied(
            f"principal {config.principal!r} lacks {EXPORT}; export refused", param="principal"
        )
    body = store.report_body(config.report_id)
    envelope = store.envelope(config.report_id)
    store.check_supersession(config.report_id, body, envelope)
    check_not_before(
        config.exported_at,
        body.value["issued_at"],
        "the report's issued_at",
        config.exported_at_source,
    )
    target = resolve_output(config.out, archive_name(config.report_id))

    def strict_check(bundle: dict[str, Any]) -> None:
        if config.strict and bundle["unavailable"]:
            reasons = sorted({u["reason"] for u in bundle["unavailable"]})
            raise StrictFailure(
                f"strict: {len(bundle['unavailable'])} item(s) would be unavailable "
                f"({', '.join(reasons)}); nothing written",
                param="strict",
            )

    bundle, archive_sha256, archive_size = write_bag_archive(
        target,
        top=bag_top(config.report_id),
        level=config.level,
        mtime=int(config.exported_at.timestamp()),
        fill=lambda writer: _fill_bag(writer, store, body, envelope, permissions, config),
        progress=progress,
        before_link=strict_check,
    )
    return ExportResult(
        path=target,
        report_id=config.report_id,
        bundle_digest=json_digest(bundle),
        report_digest=bundle["report"]["digest"],
        archive_sha256=archive_sha256,
        archive_size=archive_size,
        bundle=bundle,
    )


def _fill_bag(
    writer: BagWriter,
    store: Store,
    body: Document,
    envelope: Document,
    permissions: frozenset[str],
    config: ExportConfig,
) -> dict[str, Any]:
    """Every member of an EvalBook bundle, in the documented order; returns bundle.json."""
    exported_at = format_timestamp(config.exported_at)
    collector = _Collector(store, body, permissions)
    writer.add("data/report/body.json", body.data)
    writer.add("data/report/envelope.json", envelope.data)
    suite = collector.suite(writer)
    scorers = collector.scorers(writer)
    datasets = collector.dataset_manifests(writer)
    checks = collector.read_checks()
    # Every decision is made before the checks, cases, examples and payloads are
    # written, so the progress total is known from here on.
    uses = collector.payload_uses(checks)
    examples = collector.plan_examples(checks, datasets)
    wanted = collector.plan_payloads(uses)
    writer.plan(
        collector.planned_check_bytes(checks)
        + sum(e.size for e in examples if e.size is not None)
        + collector.planned_payload_bytes(uses, wanted)
        + sum(uses[d].size for d in collector.run_files)
    )
    check_entries, tree = collector.write_checks(writer, checks)
    collector.write_examples(writer, examples, datasets)
    payloads = collector.write_payloads(writer, uses, wanted)
    payloads = sorted(payloads + collector.write_run_files(writer, uses), key=lambda p: p["digest"])
    bundle: dict[str, Any] = {
        "schema": BUNDLE_SCHEMA,
        "exported_at": exported_at,
        "exporter": {
            "tool": TOOL_NAME,
            "version": __version__,
            "principal": config.principal,
            "permissions": sorted(permissions),
        },
        "limits": {
            "max_cases": MAX_CASES,
            "inline_payload_max_bytes": INLINE_PAYLOAD_MAX_BYTES,
        },
        "report": {
            "report_id": config.report_id,
            "evaluation_id": body.value["evaluation_id"],
            "digest": body.sha256,
            "path": "data/report/body.json",
            "envelope": {
                "path": "data/report/envelope.json",
                "digest": envelope.sha256,
                "status": envelope.value["status"],
            },
        },
        "suite": suite,
        "scorers": scorers,
        "datasets": [d["entry"] for _, d in sorted(datasets.items())],
        "checks": check_entries,
        "payloads": payloads,
        "unavailable": collector.ledger.sorted_unavailable(),
        "redacted": collector.ledger.sorted_redacted(),
        "cases_tree": {"tree_size": tree.size, "root": tree.root().hex()},
    }
    bundle_bytes = canonical.dumps(bundle)
    writer.add("data/bundle.json", bundle_bytes)
    write_tag_files(writer, bundle, bundle_bytes, config.sign)
    return bundle


def export_summary(result: ExportResult) -> dict[str, Any]:
    bundle = result.bundle
    by_reason: dict[str, dict[str, int]] = {"unavailable": {}, "redacted": {}}
    for group in ("unavailable", "redacted"):
        for item in bundle[group]:
            by_reason[group][item["reason"]] = by_reason[group].get(item["reason"], 0) + 1
    return {
        "schema": "evalbook.export_summary.v1",
        "path": str(result.path),
        "report_id": result.report_id,
        "bundle_digest": result.bundle_digest,
        "report_digest": result.report_digest,
        "archive_sha256": result.archive_sha256,
        "archive_size": result.archive_size,
        "exported_at": bundle["exported_at"],
        "counts": {
            "scorers": len(bundle["scorers"]),
            "datasets": len(bundle["datasets"]),
            "examples": sum(1 for d in bundle["datasets"] for e in d["examples"] if e["path"]),
            "checks": len(bundle["checks"]),
            "cases_total": sum(c["cases"]["total"] for c in bundle["checks"]),
            "cases_exported": sum(c["cases"]["exported"] for c in bundle["checks"]),
            "payloads": len(bundle["payloads"]),
            "unavailable": len(bundle["unavailable"]),
            "redacted": len(bundle["redacted"]),
        },
        "unavailable_by_reason": dict(sorted(by_reason["unavailable"].items())),
        "redacted_by_reason": dict(sorted(by_reason["redacted"].items())),
    }
