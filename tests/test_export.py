"""Export (SPEC sections 3, 4, 7 and 8): what goes in, what is listed, and how it is written.

Expected lists are reasoned from the fixture generator (bundler/fixturegen.py), and the
digests they name are recomputed here with hashlib from the store's files. Archives are
our own output, so ``tarfile`` and ``tar`` are fine to read them with.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tarfile
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import bagit
import pytest
import rfc8785
import zstandard
from conftest import CLI, EXPORTED_AT, SCENARIOS, run_cli, wait_for_temporary

from bundler.bundles.verify import verify_bundle
from bundler.core.claims import VerifyOptions
from bundler.testing.fixturegen import build_large_store

EXPORTED_AT_TEXT = "2026-11-30T00:00:00Z"
EXPORTED_AT_EPOCH = int(EXPORTED_AT.timestamp())
PRINCIPALS = ("alice", "bob")
U = "unavailable"
R = "redacted"
NO_BODY = "no_dataset_read_body"
INLINE_MAX = 262_144


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------------- utilities


def cli_exe() -> list[str]:
    exe = shutil.which("evalbook-bundle", path=str(Path(sys.executable).parent))
    return [exe] if exe else list(CLI)


class Archive:
    """One of our archives, decompressed and read with tarfile (trusted output)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.raw = path.read_bytes()
        decompressor = zstandard.ZstdDecompressor().decompressobj()
        self.tar_bytes = decompressor.decompress(self.raw)
        self.infos: list[tarfile.TarInfo] = []
        self.files: dict[str, bytes] = {}
        with tarfile.open(fileobj=io.BytesIO(self.tar_bytes), mode="r:") as tar:
            self.pax_global = dict(tar.pax_headers)
            for info in tar:
                self.infos.append(info)
                fh = tar.extractfile(info) if info.isfile() else None
                if fh is not None:
                    self.files[info.name] = fh.read()
        self.top = self.infos[0].name.rstrip("/")

    def data(self, relpath: str) -> bytes:
        return self.files[f"{self.top}/{relpath}"]

    def has(self, relpath: str) -> bool:
        return f"{self.top}/{relpath}" in self.files

    def data_paths(self) -> set[str]:
        prefix = f"{self.top}/"
        return {n[len(prefix):] for n in self.files if n.startswith(prefix + "data/")}

    @property
    def bundle(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.data("data/bundle.json"))
        return value


def read_json(path: Path) -> Any:
    return json.loads(path.read_bytes())


def cases_on_disk(store: Path, report_id: str, check_id: str) -> list[dict[str, Any]]:
    path = store / f"reports/{report_id}/cases/{check_id}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def framed_scorer_digest(store: Path, scorer_id: str, version: int) -> str:
    base = store / "scorers" / scorer_id / str(version)
    descriptor = (base / "scorer.json").read_bytes()
    h = hashlib.sha256(b"evalbook/scorer-version-sha256/v1\x00")
    components = [("scorer.json", descriptor)]
    for p in sorted(json.loads(descriptor)["files"], key=lambda p: p.encode()):
        components.append((f"files/{p}", (base / "files" / p).read_bytes()))
    for name, content in components:
        raw = name.encode()
        h.update(struct.pack(">Q", len(raw)) + raw + struct.pack(">Q", len(content)) + content)
    return "sha256:" + h.hexdigest()


def export_cli(store: Path, report_id: str, *extra: str, principal: str | None = "alice",
               env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    args = ["export", "--store", str(store), "--report", report_id]
    if principal is not None:
        args += ["--principal", principal]
    return run_cli(*args, *extra, env=env, cwd=cwd)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".partial"))


# ------------------------------------------------- expected lists, reasoned by hand
#
# rpt-clean / rpt-superseded: accuracy (12 qa cases), helpfulness (12 qa), safety (8 sf),
#   one inline output each, all distinct: alice lists nothing; bob has 12 + 8 example
#   bodies and 32 outputs redacted.
# rpt-evidence-manifest: 12 qa cases, each with an output and an artifact (24 evidence
#   items, so evidence_refs is a manifest). bob: 12 examples and 12 outputs redacted; the
#   artifacts are not case outputs and stay.
# rpt-sso-traces: 6 qa cases each with a trace; case 1's output is at SSO (present there),
#   case 3's output is an SSO ref whose bytes exist nowhere. alice: 2 payload_at_sso,
#   6 traces redacted. bob: redaction wins for the SSO outputs: 6 outputs, 6 examples,
#   6 traces redacted.
# rpt-retention: 6 ds-retained cases, 2 bodies removed by retention. bob: all 6 examples
#   and 6 outputs redacted (redaction wins over retention).
# rpt-scorer-drift: sc-legacy@2 deleted, sc-drift@1's prompt changed after pinning;
#   legacy and judged have 12 qa cases each (24 outputs, 12 distinct examples).
# rpt-every-reason: accuracy (8 cases: #0 output at SSO, #1 a trace, #2 an artifact whose
#   blob was corrupted, #3 an artifact whose blob was deleted, #4 on example qa-9999 that
#   the manifest lacks), recall (6 ds-retained cases, 2 bodies removed, scorer
#   sc-legacy@2), judged (12 qa cases, scorer sc-drift@1), latency (check result and
#   cases deleted). bob: examples qa-0000..0011 and rt-0000..0005 (18) and 8 + 6 + 12
#   outputs redacted; qa-9999 has no manifest digest to redact under, so it stays
#   missing_from_store; artifacts are not outputs, so their problems stay listed.

EVERY_REASON_COMMON = {
    (U, "artifact", "digest_mismatch"): 1,
    (U, "artifact", "missing_from_store"): 1,
    (U, "cases", "missing_from_store"): 1,
    (U, "check", "missing_from_store"): 1,
    (U, "example", "missing_from_store"): 1,
    (U, "scorer", "scorer_digest_mismatch"): 1,
    (U, "scorer", "scorer_version_missing"): 1,
    (R, "trace", "trace_capture_policy"): 1,
}
EXPECTED: dict[tuple[str, str], dict[tuple[str, str, str], int]] = {
    ("rpt-clean", "alice"): {},
    ("rpt-clean", "bob"): {(R, "example", NO_BODY): 20, (R, "output", NO_BODY): 32},
    ("rpt-superseded", "alice"): {},
    ("rpt-superseded", "bob"): {(R, "example", NO_BODY): 20, (R, "output", NO_BODY): 32},
    ("rpt-evidence-manifest", "alice"): {},
    ("rpt-evidence-manifest", "bob"): {(R, "example", NO_BODY): 12, (R, "output", NO_BODY): 12},
    ("rpt-sso-traces", "alice"): {(U, "output", "payload_at_sso"): 2, (R, "trace", "trace_capture_policy"): 6},
    ("rpt-sso-traces", "bob"): {
        (R, "example", NO_BODY): 6, (R, "output", NO_BODY): 6, (R, "trace", "trace_capture_policy"): 6,
    },
    ("rpt-retention", "alice"): {(U, "example", "removed_by_retention"): 2},
    ("rpt-retention", "bob"): {(R, "example", NO_BODY): 6, (R, "output", NO_BODY): 6},
    ("rpt-scorer-drift", "alice"): {
        (U, "scorer", "scorer_version_missing"): 1, (U, "scorer", "scorer_digest_mismatch"): 1,
    },
    ("rpt-scorer-drift", "bob"): {
        (U, "scorer", "scorer_version_missing"): 1, (U, "scorer", "scorer_digest_mismatch"): 1,
        (R, "example", NO_BODY): 12, (R, "output", NO_BODY): 24,
    },
    ("rpt-every-reason", "alice"): {
        **EVERY_REASON_COMMON,
        (U, "example", "removed_by_retention"): 2,
        (U, "output", "payload_at_sso"): 1,
    },
    ("rpt-every-reason", "bob"): {
        **EVERY_REASON_COMMON,
        (R, "example", NO_BODY): 18,
        (R, "output", NO_BODY): 26,
    },
}
# Payload blobs in the bundle (outputs, artifacts, evidence manifests), by the same reasoning.
EXPECTED_PAYLOADS = {
    ("rpt-clean", "alice"): 32, ("rpt-clean", "bob"): 0,
    ("rpt-superseded", "alice"): 32, ("rpt-superseded", "bob"): 0,
    ("rpt-evidence-manifest", "alice"): 25, ("rpt-evidence-manifest", "bob"): 13,
    ("rpt-sso-traces", "alice"): 4, ("rpt-sso-traces", "bob"): 0,
    ("rpt-retention", "alice"): 6, ("rpt-retention", "bob"): 0,
    ("rpt-scorer-drift", "alice"): 24, ("rpt-scorer-drift", "bob"): 0,
    ("rpt-every-reason", "alice"): 25, ("rpt-every-reason", "bob"): 0,
}
ALL_BUNDLES = [(r, p) for r in SCENARIOS for p in PRINCIPALS]


def test_expectations_cover_every_scenario() -> None:
    assert set(EXPECTED) == set(ALL_BUNDLES) == set(EXPECTED_PAYLOADS)


@pytest.fixture(scope="module")
def archives(bundles: dict[str, Path]) -> dict[tuple[str, str], Archive]:
    return {(r, p): Archive(bundles[f"{r}/{p}"]) for r, p in ALL_BUNDLES}


@pytest.mark.parametrize(("report_id", "principal"), ALL_BUNDLES)
def test_listed_items_are_exactly_as_expected(
    archives: dict[tuple[str, str], Archive], report_id: str, principal: str
) -> None:
    bundle = archives[(report_id, principal)].bundle
    observed = Counter((U, e["kind"], e["reason"]) for e in bundle["unavailable"])
    observed += Counter((R, e["kind"], e["reason"]) for e in bundle["redacted"])
    assert dict(observed) == EXPECTED[(report_id, principal)]
    assert len(bundle["payloads"]) == EXPECTED_PAYLOADS[(report_id, principal)]
    assert bundle["exporter"]["principal"] == principal


@pytest.mark.parametrize(("report_id", "principal"), ALL_BUNDLES)
def test_each_item_listed_once_and_never_also_included(
    archives: dict[tuple[str, str], Archive], report_id: str, principal: str
) -> None:
    archive = archives[(report_id, principal)]
    bundle = archive.bundle
    listed = bundle["unavailable"] + bundle["redacted"]
    keys = [(e["kind"], e["ref"]) for e in listed]
    assert len(keys) == len(set(keys)), "an item is listed twice"
    payload_digests = {p["digest"] for p in bundle["payloads"]}
    listed_digests = [e["ref"] for e in listed if e["kind"] in {"output", "artifact", "trace", "evidence_manifest"}]
    assert len(listed_digests) == len(set(listed_digests)), "one payload listed under two kinds"
    paths = archive.data_paths()
    for entry in listed:
        kind, ref = entry["kind"], entry["ref"]
        if kind in {"output", "artifact", "trace", "evidence_manifest"}:
            assert ref == entry["digest"]
            assert ref not in payload_digests
            assert f"data/blobs/sha256/{ref.removeprefix('sha256:')}" not in paths
        elif kind == "example":
            dataset, example_id = ref.split("/")
            dataset_id, version = dataset.split("@")
            assert f"data/datasets/{dataset_id}/{version}/examples/{example_id}.json" not in paths
            named = [e for d in bundle["datasets"] if (d["dataset_id"], str(d["version"])) == (dataset_id, version)
                     for e in d["examples"] if e["example_id"] == example_id]
            assert all(e["path"] is None for e in named)
        elif kind == "scorer":
            scorer_id, version = ref.split("@")
            assert not any(p.startswith(f"data/scorers/{scorer_id}/{version}/") for p in paths)
            assert (scorer_id, version) not in {(s["scorer_id"], str(s["version"])) for s in bundle["scorers"]}
        elif kind == "check":
            assert f"data/checks/{ref}.json" not in paths
        elif kind == "cases" and entry["reason"] != "case_limit":
            assert f"data/cases/{ref}.jsonl" not in paths
        else:
            raise AssertionError(f"unexpected listed kind {kind!r}")
    if principal == "bob":
        assert not any("/examples/" in p for p in paths)
        assert bundle["redacted"] and all(e["digest"] for e in bundle["redacted"])


@pytest.mark.parametrize(("report_id", "principal"), ALL_BUNDLES)
def test_every_reference_is_in_the_bundle_or_listed(
    fixture_store: Path, archives: dict[tuple[str, str], Archive], report_id: str, principal: str
) -> None:
    """An accounting made from the store's own files, independent of the exporter."""
    archive = archives[(report_id, principal)]
    bundle = archive.bundle
    listed = {(e["kind"], e["ref"]) for e in bundle["unavailable"] + bundle["redacted"]}
    listed_refs = {ref for _, ref in listed}
    body = read_json(fixture_store / f"reports/{report_id}/body.json")
    payloads = {p["digest"]: p for p in bundle["payloads"]}
    for p in bundle["payloads"]:
        blob = archive.data(p["path"])
        assert sha(blob) == p["digest"] and len(blob) == p["size"]
    for check in body["checks"]:
        check_id = check["check_id"]
        assert archive.has(f"data/checks/{check_id}.json") or ("check", check_id) in listed
        for case in cases_on_disk(fixture_store, report_id, check_id):
            for ref in ([case["output"]] if case["output"] else []) + case["evidence"]:
                assert (ref["digest"] in payloads) != (ref["digest"] in listed_refs), ref
            ex = case["example"]
            item = f"{ex['dataset_id']}@{ex['version']}/{ex['example_id']}"
            in_bundle = archive.has(f"data/datasets/{ex['dataset_id']}/{ex['version']}/examples/{ex['example_id']}.json")
            assert in_bundle != (("example", item) in listed), item
        scored = {ref["digest"] for case in cases_on_disk(fixture_store, report_id, check_id)
                  for ref in ([case["output"]] if case["output"] else []) + case["evidence"]}
        for ref in check["evidence_refs"]:
            if ref["kind"] == "manifest":
                assert ref["digest"] in payloads
            else:
                # Accounted for through the check's cases, or the cases are listed as absent.
                assert ref["digest"] in scored or ("cases", check_id) in listed, ref
        scorer = check["scorer_ref"]
        exported = {(s["scorer_id"], s["version"], s["digest"]) for s in bundle["scorers"]}
        assert ((scorer["id"], scorer["version"], scorer["digest"]) in exported) != (
            ("scorer", f"{scorer['id']}@{scorer['version']}") in listed
        )
    # Every file under data/ that the bundle holds comes from the store unchanged.
    for p in archive.data_paths():
        if p.startswith("data/scorers/") or p.startswith("data/datasets/") or p.startswith("data/blobs/"):
            source = fixture_store / p.removeprefix("data/")
        elif p.startswith("data/suite/"):
            source = fixture_store / "suites" / p.removeprefix("data/suite/")
        elif p.startswith(("data/checks/", "data/cases/")):
            source = fixture_store / f"reports/{report_id}" / p.removeprefix("data/")
        elif p.startswith("data/report/"):
            source = fixture_store / f"reports/{report_id}" / p.removeprefix("data/report/")
        else:
            assert p == "data/bundle.json"
            continue
        assert archive.data(p) == source.read_bytes(), p


def test_every_reason_entries_in_detail(fixture_store: Path, archives: dict[tuple[str, str], Archive]) -> None:
    bundle = archives[("rpt-every-reason", "alice")].bundle
    entries = {(e["kind"], e["ref"]): e for e in bundle["unavailable"]}
    body = read_json(fixture_store / "reports/rpt-every-reason/body.json")
    pins = {c["scorer_ref"]["id"]: c["scorer_ref"]["digest"] for c in body["checks"]}

    corrupted = sha(b"artifact whose blob will be corrupted")
    entry = dict(entries[("artifact", corrupted)])
    # SPEC leaves digest_mismatch's detail open; when given it is the observed digest.
    assert entry.pop("detail") in (None, sha(b"artifact whose blob WAS corrupted"))
    assert entry == {"kind": "artifact", "ref": corrupted, "digest": corrupted, "reason": "digest_mismatch"}
    deleted = sha(b"artifact whose blob will be deleted")
    assert entries[("artifact", deleted)]["reason"] == "missing_from_store"
    assert entries[("check", "latency")] == {
        "kind": "check", "ref": "latency", "digest": None, "reason": "missing_from_store", "detail": None,
    }
    assert entries[("cases", "latency")]["reason"] == "missing_from_store"
    assert entries[("example", "ds-qa@1/qa-9999")]["reason"] == "missing_from_store"
    assert entries[("example", "ds-qa@1/qa-9999")]["digest"] is None

    accuracy = cases_on_disk(fixture_store, "rpt-every-reason", "accuracy")
    sso = [c["output"]["digest"] for c in accuracy if c["output"]["location"] == "sso"]
    assert len(sso) == 1
    assert (fixture_store / "sso/sha256" / sso[0].removeprefix("sha256:")).stat().st_size > INLINE_MAX
    assert entries[("output", sso[0])]["reason"] == "payload_at_sso"

    retention = (fixture_store / "datasets/ds-retained/1/retention.jsonl").read_bytes().splitlines()
    manifest = read_json(fixture_store / "datasets/ds-retained/1/manifest.json")
    digests = {e["example_id"]: e["digest"] for e in manifest["examples"]}
    for line in retention:
        example_id = json.loads(line)["example_id"]
        entry = entries[("example", f"ds-retained@1/{example_id}")]
        assert (entry["reason"], entry["digest"]) == ("removed_by_retention", digests[example_id])

    observed = framed_scorer_digest(fixture_store, "sc-drift", 1)
    assert observed != pins["sc-drift"]
    assert entries[("scorer", "sc-drift@1")] == {
        "kind": "scorer", "ref": "sc-drift@1", "digest": pins["sc-drift"],
        "reason": "scorer_digest_mismatch", "detail": observed,
    }
    assert not (fixture_store / "scorers/sc-legacy/2").exists()
    assert entries[("scorer", "sc-legacy@2")] == {
        "kind": "scorer", "ref": "sc-legacy@2", "digest": pins["sc-legacy"],
        "reason": "scorer_version_missing", "detail": None,
    }
    trace = sha((fixture_store / "traces/trace-every.json").read_bytes())
    assert bundle["redacted"] == [{"kind": "trace", "ref": trace, "digest": trace, "reason": "trace_capture_policy"}]
    # sc-exact is intact and exported; the check result of latency is not.
    assert [(s["scorer_id"], s["version"]) for s in bundle["scorers"]] == [("sc-exact", 1)]
    latency = next(c for c in bundle["checks"] if c["check_id"] == "latency")
    assert latency["path"] is None and latency["cases"]["path"] is None


def test_sso_and_trace_entries(fixture_store: Path, archives: dict[tuple[str, str], Archive]) -> None:
    cases = cases_on_disk(fixture_store, "rpt-sso-traces", "accuracy")
    sso = {c["output"]["digest"] for c in cases if c["output"]["location"] == "sso"}
    traces = {sha((fixture_store / f"traces/trace-{i:03d}.json").read_bytes()) for i in range(6)}
    alice = archives[("rpt-sso-traces", "alice")].bundle
    assert {e["ref"] for e in alice["unavailable"]} == sso
    assert {e["ref"] for e in alice["redacted"]} == traces
    bob = archives[("rpt-sso-traces", "bob")].bundle
    assert bob["unavailable"] == []
    assert {e["ref"] for e in bob["redacted"] if e["kind"] == "output"} >= sso
    for archive in (archives[("rpt-sso-traces", "alice")], archives[("rpt-sso-traces", "bob")]):
        assert not any(p.startswith("data/traces") for p in archive.data_paths())


def test_superseded_envelope_is_exported(fixture_store: Path, archives: dict[tuple[str, str], Archive]) -> None:
    archive = archives[("rpt-superseded", "alice")]
    envelope = (fixture_store / "reports/rpt-superseded/envelope.json").read_bytes()
    assert archive.data("data/report/envelope.json") == envelope
    assert archive.bundle["report"]["envelope"] == {
        "path": "data/report/envelope.json", "digest": sha(envelope), "status": "superseded",
    }


def test_evidence_manifest_is_exported_for_both(fixture_store: Path, archives: dict[tuple[str, str], Archive]) -> None:
    body = read_json(fixture_store / "reports/rpt-evidence-manifest/body.json")
    [ref] = body["checks"][0]["evidence_refs"]
    assert ref["kind"] == "manifest"
    for principal in PRINCIPALS:
        archive = archives[("rpt-evidence-manifest", principal)]
        blob = archive.data(f"data/blobs/sha256/{ref['digest'].removeprefix('sha256:')}")
        assert sha(blob) == ref["digest"]
        assert json.loads(blob)["check_id"] == "accuracy"


@pytest.mark.parametrize(("report_id", "principal"), ALL_BUNDLES)
def test_fixture_bundles_verify(bundles: dict[str, Path], report_id: str, principal: str) -> None:
    result = verify_bundle(str(bundles[f"{report_id}/{principal}"]), VerifyOptions())
    assert result.verdict.value == "verified", [c.to_json() for c in result.failures()][:3]
    listed = sum(EXPECTED[(report_id, principal)].values())
    assert (result.counts()["unprovable"] > 0) == (listed > 0)


# --------------------------------------------------------------------------- BagIt


def extract_with_tar(archive: Path, dest: Path) -> Path:
    dest.mkdir()
    subprocess.run(["tar", "--zstd", "-xf", str(archive), "-C", str(dest)], check=True, capture_output=True)
    [top] = list(dest.iterdir())
    return top


@pytest.mark.parametrize(("report_id", "principal"), ALL_BUNDLES)
def test_bagit_validates_every_fixture_bundle(
    bundles: dict[str, Path], tmp_path: Path, report_id: str, principal: str
) -> None:
    top = extract_with_tar(bundles[f"{report_id}/{principal}"], tmp_path / "x")
    assert top.name == f"evalbook-bundle-{report_id}"
    bag = bagit.Bag(str(top))
    bag.validate()
    assert bag.version_info == (1, 0)
    assert bag.algorithms == ["sha256"]
    assert bag.info["Bundle-Digest"] == sha((top / "data/bundle.json").read_bytes())
    assert bag.info["Bagging-Date"] == "2026-11-30"


@pytest.mark.parametrize("relpath", ["data/report/body.json", "data/bundle.json", "LAST_BLOB"])
def test_bagit_detects_one_changed_payload_byte(bundles: dict[str, Path], tmp_path: Path, relpath: str) -> None:
    top = extract_with_tar(bundles["rpt-clean/alice"], tmp_path / "x")
    if relpath == "LAST_BLOB":
        relpath = sorted(p.relative_to(top).as_posix() for p in (top / "data/blobs/sha256").iterdir())[-1]
    target = top / relpath
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01  # same size, so Payload-Oxum still agrees
    target.write_bytes(bytes(data))
    with pytest.raises(bagit.BagValidationError):
        bagit.Bag(str(top)).validate()


def test_bagit_detects_a_changed_tag_file(bundles: dict[str, Path], tmp_path: Path) -> None:
    top = extract_with_tar(bundles["rpt-clean/alice"], tmp_path / "x")
    info = top / "bag-info.txt"
    info.write_bytes(info.read_bytes().replace(b"Bagging-Date: 2026-11-30", b"Bagging-Date: 2026-11-29"))
    with pytest.raises(bagit.BagValidationError):
        bagit.Bag(str(top)).validate()


# ------------------------------------------------------------------- determinism


def test_same_exported_at_gives_identical_archives_across_processes(fixture_store: Path, tmp_path: Path) -> None:
    outs = []
    for name, extra, env in [
        ("a", ["--exported-at", EXPORTED_AT_TEXT], None),
        ("b", ["--exported-at", EXPORTED_AT_TEXT], None),
        ("c", [], {"SOURCE_DATE_EPOCH": str(EXPORTED_AT_EPOCH)}),
        ("d", [], {"SOURCE_DATE_EPOCH": str(EXPORTED_AT_EPOCH)}),
        ("e", ["--exported-at", "2026-11-30T01:00:00+01:00"], None),  # the same instant
    ]:
        (tmp_path / name).mkdir()
        out = tmp_path / name / "bundle.tar.zst"
        proc = export_cli(fixture_store, "rpt-every-reason", "--out", str(out), "--quiet", *extra, env=env)
        assert proc.returncode == 0, proc.stderr.decode()
        outs.append(out.read_bytes())
    assert all(o == outs[0] for o in outs[1:])
    assert Archive(tmp_path / "a/bundle.tar.zst").bundle["exported_at"] == EXPORTED_AT_TEXT


def test_different_exported_at_gives_different_bytes(fixture_store: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "one.tar.zst", tmp_path / "two.tar.zst"
    assert export_cli(fixture_store, "rpt-clean", "--out", str(first), "--exported-at", EXPORTED_AT_TEXT).returncode == 0
    proc = export_cli(fixture_store, "rpt-clean", "--out", str(second), env={"SOURCE_DATE_EPOCH": str(EXPORTED_AT_EPOCH + 1)})
    assert proc.returncode == 0, proc.stderr.decode()
    assert first.read_bytes() != second.read_bytes()
    assert Archive(second).bundle["exported_at"] == "2026-11-30T00:00:01Z"
    assert {i.mtime for i in Archive(second).infos} == {EXPORTED_AT_EPOCH + 1}


def test_exported_at_is_now_without_a_source(
    fixture_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)  # run_cli passes our environment on
    out = tmp_path / "now.tar.zst"
    before = int(time.time())
    proc = export_cli(fixture_store, "rpt-clean", "--out", str(out), env={})
    after = int(time.time())
    assert proc.returncode == 0, proc.stderr.decode()
    exported = datetime.strptime(Archive(out).bundle["exported_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert before <= int(exported.timestamp()) <= after


def _frames(raw: bytes) -> Iterator[tuple[int, int]]:
    """(offset, size) of each frame, each found by decompressing it to its end."""
    offset = 0
    while offset < len(raw):
        length = _frame_length(raw[offset:])
        yield offset, length
        offset += length


def _frame_length(data: bytes) -> int:
    decompressor = zstandard.ZstdDecompressor().decompressobj()
    decompressor.decompress(data)
    assert decompressor.eof
    return len(data) - len(decompressor.unused_data)


@pytest.mark.parametrize("level", [3, 19])
def test_zstd_frame_parameters(fixture_store: Path, export: Any, level: int) -> None:
    result = export(fixture_store, "rpt-every-reason", level=level)
    raw = result.path.read_bytes()
    assert raw[:4] == b"\x28\xb5\x2f\xfd"  # a zstd frame, not a skippable one
    params = zstandard.get_frame_parameters(raw)
    assert params.has_checksum
    assert params.window_size <= 8 * 1024 * 1024
    assert params.dict_id == 0
    assert list(_frames(raw)) == [(0, len(raw))], "exactly one frame and nothing after it"
    assert result.archive_sha256 == sha(raw) and result.archive_size == len(raw)


def test_level_changes_bytes_but_not_the_bundle(fixture_store: Path, export: Any) -> None:
    fast = export(fixture_store, "rpt-clean", level=1)
    slow = export(fixture_store, "rpt-clean", level=19)
    assert fast.path.read_bytes() != slow.path.read_bytes()
    assert fast.bundle_digest == slow.bundle_digest
    assert Archive(fast.path).tar_bytes == Archive(slow.path).tar_bytes


def test_members_are_normalised(bundles: dict[str, Path]) -> None:
    for key in ("rpt-every-reason/alice", "rpt-clean/bob"):
        archive = Archive(bundles[key])
        assert archive.pax_global == {}
        top = archive.top
        assert archive.infos[0].isdir() and archive.infos[0].name.rstrip("/") == top
        names = [i.name.rstrip("/") for i in archive.infos]
        assert len(names) == len(set(names))
        for info in archive.infos:
            assert info.name == top or info.name.startswith(top + "/")
            assert info.isfile() or info.isdir()
            assert info.mode == (0o755 if info.isdir() else 0o644), info.name
            assert (info.uid, info.gid, info.uname, info.gname) == (0, 0, "", ""), info.name
            assert info.mtime == EXPORTED_AT_EPOCH, info.name
        tags = {n.removeprefix(top + "/") for n in archive.files if n.count("/") == 1}
        assert {"bagit.txt", "bag-info.txt", "manifest-sha256.txt", "tagmanifest-sha256.txt"} <= tags
        assert archive.data("bagit.txt") == b"BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n"
        # The tar stream ends on a whole 10,240-byte record.
        assert len(archive.tar_bytes) % 10240 == 0


def test_store_location_does_not_change_the_archive(fixture_store: Path, store_copy: Path, export: Any) -> None:
    here = export(fixture_store, "rpt-every-reason", principal="bob")
    there = export(store_copy, "rpt-every-reason", principal="bob")
    assert here.path.read_bytes() == there.path.read_bytes()


def test_bundle_json_is_stored_canonical(archives: dict[tuple[str, str], Archive]) -> None:
    for archive in archives.values():
        raw = archive.data("data/bundle.json")
        assert bytes(rfc8785.dumps(json.loads(raw))) == raw


# ------------------------------------------------------------------- safe output


def test_default_output_name_in_the_working_directory(fixture_store: Path, tmp_path: Path) -> None:
    proc = export_cli(fixture_store, "rpt-clean", "--exported-at", EXPORTED_AT_TEXT, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evalbook-bundle-rpt-clean.tar.zst"]
    out = tmp_path / "evalbook-bundle-rpt-clean.tar.zst"
    assert proc.stdout.decode().startswith(f"Archive:         {out}\n")


def test_existing_target_is_refused_and_untouched(fixture_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "evalbook-bundle-rpt-clean.tar.zst"
    out.write_bytes(b"precious bytes that must survive")
    os.utime(out, (1_000_000_000, 1_000_000_000))
    proc = export_cli(fixture_store, "rpt-clean", "--exported-at", EXPORTED_AT_TEXT, cwd=tmp_path)
    assert proc.returncode == 3
    assert proc.stdout == b""
    assert str(out) in proc.stderr.decode() or out.name in proc.stderr.decode()
    assert out.read_bytes() == b"precious bytes that must survive"
    assert out.stat().st_mtime == 1_000_000_000
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


@pytest.mark.parametrize("dangling", [True, False])
def test_symlink_target_is_refused(fixture_store: Path, tmp_path: Path, dangling: bool) -> None:
    elsewhere = tmp_path / "elsewhere.tar.zst"
    if not dangling:
        elsewhere.write_bytes(b"victim")
    out = tmp_path / "link.tar.zst"
    out.symlink_to(elsewhere)
    proc = export_cli(fixture_store, "rpt-clean", "--out", str(out), "--exported-at", EXPORTED_AT_TEXT)
    assert proc.returncode == 3, proc.stderr.decode()
    assert "symlink" in proc.stderr.decode()
    assert out.is_symlink() and os.readlink(out) == str(elsewhere)
    assert elsewhere.exists() != dangling
    if not dangling:
        assert elsewhere.read_bytes() == b"victim"
    assert leftovers(tmp_path) == []


def test_directory_as_target_receives_the_default_name(fixture_store: Path, tmp_path: Path) -> None:
    """As with cp, an --out that is a directory gets the default file name inside it."""
    target = tmp_path / "a-directory"
    target.mkdir()
    proc = export_cli(fixture_store, "rpt-clean", "--out", str(target), "--exported-at", EXPORTED_AT_TEXT)
    assert proc.returncode == 0, proc.stderr.decode()
    assert [p.name for p in target.iterdir()] == ["evalbook-bundle-rpt-clean.tar.zst"]
    assert leftovers(tmp_path) == []


def test_archive_that_cannot_be_written_is_one_line_and_leaves_nothing(
    fixture_store: Path, tmp_path: Path
) -> None:
    """A write failure of the archive itself (here the file size limit, as a full disk
    would) is exit 3 with one line naming the target, and no partial file is left."""
    import resource

    def small_files() -> None:
        # Python ignores SIGXFSZ, so an oversized write fails with EFBIG instead.
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    out = tmp_path / "bundle.tar.zst"
    args = ["export", "--store", str(fixture_store), "--report", "rpt-clean", "--principal"]
    proc = subprocess.run(
        [*cli_exe(), *args, "alice", "--out", str(out), "--exported-at", EXPORTED_AT_TEXT],
        capture_output=True,
        preexec_fn=small_files,
        check=False,
    )
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert len(err.splitlines()) == 1, err
    assert str(out) in err and "cannot write the archive" in err and "File too large" in err
    assert not out.exists()
    assert leftovers(tmp_path) == []


def test_missing_parent_directory_is_refused(fixture_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "no-such-dir" / "bundle.tar.zst"
    proc = export_cli(fixture_store, "rpt-clean", "--out", str(out), "--exported-at", EXPORTED_AT_TEXT)
    assert proc.returncode == 3
    assert "no-such-dir" in proc.stderr.decode()
    assert len(proc.stderr.decode().splitlines()) == 1
    assert not (tmp_path / "no-such-dir").exists()


@pytest.mark.slow
def test_sigkill_mid_write_leaves_nothing_at_the_target(large_store: Path, tmp_path: Path) -> None:
    # The 20,050-case store takes seconds to export: long enough to kill the writer mid-way.
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "evalbook-bundle-rpt-large.tar.zst"
    cmd = [*cli_exe(), "export", "--store", str(large_store), "--report", "rpt-large", "--principal", "alice",
           "--out", str(target), "--exported-at", EXPORTED_AT_TEXT, "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_temporary(out_dir, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL, "the export finished before it could be killed"
    assert not target.exists()
    assert [p.name for p in out_dir.iterdir() if not p.name.startswith(".")] == []


def test_leftover_temporary_file_does_not_block_the_next_export(fixture_store: Path, tmp_path: Path) -> None:
    # What a killed export leaves behind: a hidden temporary beside the target.
    target = tmp_path / "evalbook-bundle-rpt-clean.tar.zst"
    stale = tmp_path / f".{target.name}.abc123.partial"
    stale.write_bytes(b"half an archive")
    proc = export_cli(fixture_store, "rpt-clean", "--out", str(target), "--exported-at", EXPORTED_AT_TEXT)
    assert proc.returncode == 0, proc.stderr.decode()
    assert target.is_file() and Archive(target).bundle["report"]["report_id"] == "rpt-clean"
    assert stale.read_bytes() == b"half an archive"


# ------------------------------------------------------------------------ --strict


def test_strict_fails_when_something_is_unavailable(fixture_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "strict.tar.zst"
    proc = export_cli(fixture_store, "rpt-sso-traces", "--out", str(out), "--strict", "--exported-at", EXPORTED_AT_TEXT)
    assert proc.returncode == 1, proc.stderr.decode()
    assert proc.stdout == b""
    assert "payload_at_sso" in proc.stderr.decode()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("report_id", "principal"), [("rpt-clean", "alice"), ("rpt-clean", "bob"),
                                                      ("rpt-evidence-manifest", "bob")])
def test_strict_passes_when_nothing_is_unavailable(
    fixture_store: Path, tmp_path: Path, report_id: str, principal: str
) -> None:
    # Redactions are not unavailability: bob's export stays valid under --strict.
    out = tmp_path / "strict.tar.zst"
    proc = export_cli(fixture_store, report_id, "--out", str(out), "--strict", "--exported-at", EXPORTED_AT_TEXT,
                      principal=principal)
    assert proc.returncode == 0, proc.stderr.decode()
    assert out.is_file()


# --------------------------------------------------------------------- permission


@pytest.mark.parametrize("principal", ["mallory", "carol"])
def test_principal_without_export_right_is_refused(fixture_store: Path, tmp_path: Path, principal: str) -> None:
    out = tmp_path / "denied.tar.zst"
    proc = export_cli(fixture_store, "rpt-clean", "--out", str(out), principal=principal)
    assert proc.returncode == 4, proc.stderr.decode()
    assert proc.stdout == b""
    assert principal in proc.stderr.decode()
    assert len(proc.stderr.decode().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_no_principal_is_a_usage_error(fixture_store: Path, tmp_path: Path) -> None:
    proc = export_cli(fixture_store, "rpt-clean", "--out", str(tmp_path / "x.tar.zst"), principal=None)
    assert proc.returncode == 2, proc.stderr.decode()
    assert "principal" in proc.stderr.decode().lower()
    assert list(tmp_path.iterdir()) == []


def test_principal_from_the_environment(fixture_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "env.tar.zst"
    proc = export_cli(fixture_store, "rpt-clean", "--out", str(out), "--exported-at", EXPORTED_AT_TEXT,
                      principal=None, env={"EVALBOOK_PRINCIPAL": "alice"})
    assert proc.returncode == 0, proc.stderr.decode()
    exporter = Archive(out).bundle["exporter"]
    assert exporter["principal"] == "alice"
    assert exporter["permissions"] == sorted(read_json(fixture_store / "access.json")["principals"]["alice"])


def test_environment_principal_is_checked_too(fixture_store: Path, tmp_path: Path) -> None:
    proc = export_cli(fixture_store, "rpt-clean", "--out", str(tmp_path / "x.tar.zst"),
                      principal=None, env={"EVALBOOK_PRINCIPAL": "carol"})
    assert proc.returncode == 4
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------- bad input


def test_unknown_report_id(fixture_store: Path, tmp_path: Path) -> None:
    proc = export_cli(fixture_store, "rpt-nowhere", "--out", str(tmp_path / "x.tar.zst"))
    assert proc.returncode == 3
    assert proc.stdout == b""
    assert "rpt-nowhere" in proc.stderr.decode()
    assert len(proc.stderr.decode().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_store_document_failing_its_schema(store_copy: Path, tmp_path: Path) -> None:
    path = store_copy / "reports/rpt-clean/envelope.json"
    envelope = read_json(path)
    envelope["status"] = "revoked"
    path.write_bytes(bytes(rfc8785.dumps(envelope)))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    proc = export_cli(store_copy, "rpt-clean", "--out", str(out_dir / "x.tar.zst"))
    assert proc.returncode == 3
    stderr = proc.stderr.decode()
    assert str(path) in stderr and "status" in stderr.replace(str(path), "")
    assert len(stderr.splitlines()) == 1
    assert list(out_dir.iterdir()) == []


def test_blob_not_matching_its_name_is_listed_not_included(store_copy: Path, export: Any) -> None:
    first = cases_on_disk(store_copy, "rpt-clean", "safety")[0]["output"]
    blob = store_copy / "blobs/sha256" / first["digest"].removeprefix("sha256:")
    blob.write_bytes(blob.read_bytes() + b" (edited)")
    result = export(store_copy, "rpt-clean")
    [entry] = result.bundle["unavailable"]
    assert entry.pop("detail") in (None, sha(blob.read_bytes()))
    assert entry == {"kind": "output", "ref": first["digest"], "digest": first["digest"], "reason": "digest_mismatch"}
    assert first["digest"] not in {p["digest"] for p in result.bundle["payloads"]}
    assert not Archive(result.path).has(f"data/blobs/sha256/{first['digest'].removeprefix('sha256:')}")
    assert len(result.bundle["payloads"]) == 31


def test_example_body_not_matching_its_manifest_is_listed(store_copy: Path, export: Any) -> None:
    path = store_copy / "datasets/ds-safety/2/examples/sf-0002.json"
    path.write_bytes(b'{"input":"rewritten"}')
    manifest = read_json(store_copy / "datasets/ds-safety/2/manifest.json")
    expected = next(e["digest"] for e in manifest["examples"] if e["example_id"] == "sf-0002")
    result = export(store_copy, "rpt-clean")
    [entry] = result.bundle["unavailable"]
    assert entry.pop("detail") in (None, sha(b'{"input":"rewritten"}'))
    assert entry == {"kind": "example", "ref": "ds-safety@2/sf-0002", "digest": expected, "reason": "digest_mismatch"}
    assert not Archive(result.path).has("data/datasets/ds-safety/2/examples/sf-0002.json")


def test_case_on_an_example_the_manifest_lacks(store_copy: Path, export: Any) -> None:
    path = store_copy / "reports/rpt-clean/cases/accuracy.jsonl"
    lines = path.read_bytes().splitlines()
    case = json.loads(lines[4])
    case["example"]["example_id"] = "qa-0500"
    lines[4] = bytes(rfc8785.dumps(case))
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    result = export(store_copy, "rpt-clean")
    entries = [e for e in result.bundle["unavailable"] if e["kind"] == "example"]
    assert [(e["ref"], e["digest"], e["reason"]) for e in entries] == [("ds-qa@1/qa-0500", None, "missing_from_store")]
    assert not any("qa-0500" in p for p in Archive(result.path).data_paths())


def test_missing_dataset_manifest_is_listed(store_copy: Path, export: Any) -> None:
    (store_copy / "datasets/ds-safety/2/manifest.json").unlink()
    result = export(store_copy, "rpt-clean")
    kinds = Counter((e["kind"], e["reason"]) for e in result.bundle["unavailable"])
    # The manifest, and every example the safety cases used (no manifest to check them by).
    assert kinds == {("dataset", "missing_from_store"): 1, ("example", "missing_from_store"): 8}


@pytest.mark.parametrize("value", ["2026-11-30", "yesterday", "2026-11-30T00:00:00", "2026-11-30T00:00:00.5Z",
                                   "2026-13-01T00:00:00Z"])
def test_exported_at_must_be_rfc3339(fixture_store: Path, tmp_path: Path, value: str) -> None:
    proc = export_cli(fixture_store, "rpt-clean", "--out", str(tmp_path / "x.tar.zst"), "--exported-at", value)
    assert proc.returncode == 2, (value, proc.stderr.decode())
    assert proc.stdout == b""
    assert list(tmp_path.iterdir()) == []


def test_source_date_epoch_must_be_a_number(fixture_store: Path, tmp_path: Path) -> None:
    proc = export_cli(fixture_store, "rpt-clean", "--out", str(tmp_path / "x.tar.zst"),
                      env={"SOURCE_DATE_EPOCH": "last tuesday"})
    assert proc.returncode == 2
    assert "SOURCE_DATE_EPOCH" in proc.stderr.decode()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("level", ["0", "22"])
def test_level_outside_1_to_19_is_a_usage_error(fixture_store: Path, tmp_path: Path, level: str) -> None:
    proc = export_cli(fixture_store, "rpt-clean", "--out", str(tmp_path / "x.tar.zst"), "--level", level)
    assert proc.returncode == 2
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------ summary


def test_stdout_names_the_archive_its_bundle_digest_and_its_sha256(
    fixture_store: Path, tmp_path: Path
) -> None:
    out = tmp_path / "b.tar.zst"
    proc = export_cli(fixture_store, "rpt-every-reason", "--out", str(out), "--exported-at", EXPORTED_AT_TEXT)
    assert proc.returncode == 0, proc.stderr.decode()
    archive = Archive(out)
    digest = sha(archive.data("data/bundle.json"))
    file_hex = hashlib.sha256(out.read_bytes()).hexdigest()
    lines = proc.stdout.decode().splitlines()
    # Labelled, never "<hex>  <path>": that would read as sha256sum output, and is not.
    assert lines[:3] == [
        f"Archive:         {out}",
        f"Bundle digest:   {digest}   (JSON digest of data/bundle.json; verify --expect-bundle-digest)",
        f"Archive SHA-256: {file_hex}   (sha256sum of the file)",
    ]
    assert lines[3].startswith("Exported:    rpt-every-reason")  # the summary is the result too
    assert proc.stderr == b""


def test_json_summary(fixture_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "b.tar.zst"
    proc = export_cli(fixture_store, "rpt-every-reason", "--out", str(out), "--exported-at", EXPORTED_AT_TEXT,
                      "--json", "--quiet")
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stderr == b""
    summary = json.loads(proc.stdout)
    archive = Archive(out)
    assert summary["path"] == str(out)
    assert summary["bundle_digest"] == sha(archive.data("data/bundle.json"))
    assert summary["report_digest"] == sha((fixture_store / "reports/rpt-every-reason/body.json").read_bytes())
    assert summary["unavailable_by_reason"] == {
        "digest_mismatch": 1, "missing_from_store": 4, "payload_at_sso": 1, "removed_by_retention": 2,
        "scorer_digest_mismatch": 1, "scorer_version_missing": 1,
    }
    assert summary["redacted_by_reason"] == {"trace_capture_policy": 1}
    counts = summary["counts"]
    assert isinstance(counts, dict)
    assert counts["unavailable"] == 10 and counts["redacted"] == 1
    assert counts["payloads"] == 25
    assert counts["checks"] == 4
    assert counts["cases_exported"] == counts["cases_total"] == 8 + 6 + 12


# --------------------------------------------------------------------- case limit


@pytest.fixture(scope="session")
def large_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One report of 20,050 cases over 4 checks (read-only by convention)."""
    store = tmp_path_factory.mktemp("case-limit") / "store"
    started = time.perf_counter()
    build_large_store(store, cases=20_050, checks=4, payload_bytes=0)
    print(f"\ncase_limit store: built in {time.perf_counter() - started:.1f} s")
    return store


@pytest.fixture(scope="session")
def case_limit_export(large_store: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The large store exported once in a child process, with its time and peak RSS."""
    store = large_store
    out = tmp_path_factory.mktemp("case-limit-out") / "bundle.tar.zst"
    # A fresh interpreter measures its own child alone: RUSAGE_CHILDREN in this process
    # would also count every earlier subprocess of the test session.
    measure = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True)\n"
        "elapsed = time.perf_counter() - t\n"
        "sys.stderr.buffer.write(p.stderr)\n"
        "print(p.returncode, elapsed, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    cmd = [*cli_exe(), "export", "--store", str(store), "--report", "rpt-large", "--principal", "alice",
           "--out", str(out), "--exported-at", EXPORTED_AT_TEXT, "--quiet", "--json"]
    proc = subprocess.run([sys.executable, "-c", measure, *cmd], capture_output=True, timeout=600, check=False)
    code, elapsed, max_rss_kib = proc.stdout.decode().split()
    assert code == "0", proc.stderr.decode()
    print(f"\ncase_limit export: {float(elapsed):.1f} s, peak RSS {int(max_rss_kib) / 1024:.0f} MiB, "
          f"archive {out.stat().st_size} bytes")
    return {"store": store, "out": out, "seconds": float(elapsed), "max_rss_kib": int(max_rss_kib)}


@pytest.mark.slow
def test_case_limit(case_limit_export: dict[str, Any]) -> None:
    store, out = case_limit_export["store"], case_limit_export["out"]
    archive = Archive(out)
    bundle = archive.bundle
    # 20,050 cases over 4 checks: ceil(20050 / 4) = 5013 per check, the last gets 5011.
    # After 3 x 5013 = 15039, the budget of 20,000 leaves 4961 for check-3: 50 are cut.
    assert [(c["check_id"], c["cases"]["total"], c["cases"]["exported"]) for c in bundle["checks"]] == [
        ("check-0", 5013, 5013), ("check-1", 5013, 5013), ("check-2", 5013, 5013), ("check-3", 5011, 4961),
    ]
    assert sum(c["cases"]["exported"] for c in bundle["checks"]) == 20_000
    limited = [e for e in bundle["unavailable"] if e["reason"] == "case_limit"]
    assert limited == [{"kind": "cases", "ref": "check-3", "digest": None, "reason": "case_limit", "detail": "50"}]
    # The other entries are the three outputs the generator puts at SSO.
    assert Counter(e["reason"] for e in bundle["unavailable"]) == {"case_limit": 1, "payload_at_sso": 3}

    source = (store / "reports/rpt-large/cases/check-3.jsonl").read_bytes().splitlines()
    exported = archive.data("data/cases/check-3.jsonl").splitlines()
    assert exported == source[:4961]
    assert sha(archive.data("data/cases/check-3.jsonl")) == bundle["checks"][3]["cases"]["digest"]
    payloads = {p["digest"] for p in bundle["payloads"]}
    cut = {json.loads(line)["output"]["digest"] for line in source[4961:]}
    assert len(cut) == 50 and not cut & payloads
    # 20,000 exported outputs less 3 at SSO, plus one evidence manifest per check.
    assert len(payloads) == 20_000 - 3 + 4
    assert bundle["cases_tree"]["tree_size"] == 20_000


@pytest.mark.slow
def test_case_limit_bundle_verifies(case_limit_export: dict[str, Any]) -> None:
    result = verify_bundle(str(case_limit_export["out"]), VerifyOptions())
    assert result.verdict.value == "verified", [c.to_json() for c in result.failures()][:3]
    assert result.unprovable_by_reason().get("case_limit", 0) >= 1


@pytest.mark.slow
def test_case_limit_export_memory_stays_bounded(case_limit_export: dict[str, Any]) -> None:
    # Payloads stream; only the 20,000 kept case lines and the indexes are in memory.
    assert case_limit_export["max_rss_kib"] < 512 * 1024


def test_exponential_sizes_give_many_small_outputs_and_the_same_total(tmp_path: Path) -> None:
    """The benchmark's small-files shape: output sizes vary about their mean."""
    from bundler.testing.fixturegen import build_large_store

    sizes = {}
    for kind in ("fixed", "exponential"):
        root = tmp_path / kind
        build_large_store(root, cases=400, checks=2, payload_bytes=400 * 20_000, sizes=kind)
        sizes[kind] = sorted(p.stat().st_size for p in (root / "blobs" / "sha256").iterdir())
    fixed, spread = sizes["fixed"], sizes["exponential"]
    assert len(set(fixed[:-3])) == 1  # all alike but the three SSO payloads
    small = [s for s in spread if s < 20_000]
    assert 0.5 < len(small) / len(spread) < 0.75  # about 1 - 1/e below the mean
    assert 0.8 < sum(spread[:-3]) / sum(fixed[:-3]) < 1.2
    with pytest.raises(ValueError, match="sizes"):
        build_large_store(tmp_path / "bad", cases=4, checks=1, sizes="uniform")


def test_a_store_failure_while_payloads_are_written_is_one_line_and_leaves_nothing(
    fixture_store: Path, tmp_path: Path
) -> None:
    # The tar reaches zstd through a buffered writer: an error in the middle of the
    # payloads must still end as the store's one-line error (exit 3), with nothing
    # reported later from the writer's cleanup and nothing at the target.
    out = tmp_path / "out.tar.zst"
    script = f"""
import gc, sys
from bundler.core.errors import StoreError
from bundler.evalbook import store
from bundler.cli.app import main
calls = 0
original = store.Store.blob
def blob(self, *args, **kwargs):
    global calls
    calls += 1
    if calls == 2:
        raise StoreError("blobs/sha256/x: cannot read (Input/output error)")
    return original(self, *args, **kwargs)
store.Store.blob = blob
try:
    main(["export", "--store", {str(fixture_store)!r}, "--report", "rpt-clean",
          "--principal", "alice", "--out", {str(out)!r}, "--quiet"])
except SystemExit as exc:
    code = exc.code
gc.collect()
print("exit", code, "blob calls", calls)
"""
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=120
    )
    assert proc.stdout.strip().splitlines()[-1].startswith("exit 3 blob calls 2"), proc.stdout
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "cannot read (Input/output error)" in proc.stderr
    assert "Exception ignored" not in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []
