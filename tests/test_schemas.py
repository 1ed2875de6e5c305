"""The JSON Schemas of SPEC sections 3 and 4.2 and the validator that applies them."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from bundler.core import schemagen, schemakeywords, schemas
from bundler.core.errors import InputError, SchemaError
from bundler.core.textsafe import shown

# Store and bundle documents; the result schemas (verification, audit, case-proof,
# eb-bundle) are tested beside the commands that write them.
ALL = tuple(n for n in schemas.SCHEMA_NAMES if n not in {"case-proof", "verification", "audit", "eb-bundle", "reports-line", "export-summary", "export-eb-summary"})
SOURCE = "store/reports/rep_01/doc.json"


def digest(label: str) -> str:
    return "sha256:" + hashlib.sha256(label.encode()).hexdigest()


D_SUITE = digest("suite")
D_DATASET = digest("dataset")
D_SCORER = digest("scorer")
D_OUT = digest("output")
D_TRACE = digest("trace")
D_ART = digest("artifact")
D_MANIFEST = digest("manifest")

AGGREGATION = {
    "rule": "pass_rate",
    "threshold": 0.9,
    "min_coverage": 0.8,
    "min_samples": 10,
    "repeats": 1,
}


def report_body() -> dict[str, Any]:
    return {
        "schema_version": "1.0",
        "producer": "svc_evalbook",
        "organization": "org_acme",
        "project": "checkout-api",
        "report_id": "rep_01J9Z3",
        "evaluation_id": "eval_01J9Z2",
        "subject": {"kind": "commit", "repository": "acme/checkout", "sha": "9f2c1e0"},
        "suite_ref": {"id": "checkout-quality", "version": 3, "digest": D_SUITE},
        "dataset_refs": [{"id": "checkout-prompts", "version": 7, "digest": D_DATASET}],
        "mode": "gate",
        "execution_mode": "isolated",
        "decision_rule": {
            "rule": "all_required_pass",
            "alpha": 0.05,
            "margin": None,
            "correction": "holm",
        },
        "result": "pass",
        "evidence_complete": True,
        "reasons": ["all required checks passed"],
        "checks": [
            {
                "check_id": "answer-accuracy",
                "required": True,
                "status": "pass",
                "result": "pass",
                "scorer_ref": {"id": "exact-match", "version": 2, "digest": D_SCORER},
                "assurance": "independently_observed",
                "evidence_refs": [
                    {"kind": "output", "digest": D_OUT},
                    {"kind": "trace", "digest": D_TRACE},
                    {"kind": "artifact", "digest": D_ART},
                ],
                "score": 0.96,
                "explanation": None,
                "coverage": {"expected": 50, "executed": 50, "missing": 0},
                "observations": [{"note": "two retries"}, 3, "free text"],
                "slices": [{"slice": "locale=de", "result": "pass", "score": 0.94}],
            },
            {
                "check_id": "tone",
                "required": False,
                "status": "abstained",
                "result": "inconclusive",
                "scorer_ref": {"id": "tone-judge", "version": 1, "digest": D_SCORER},
                "assurance": None,
                "evidence_refs": [{"kind": "manifest", "digest": D_MANIFEST}],
                "score": None,
                "explanation": "judge abstained on 30 of 50 examples",
                "coverage": {"expected": 50, "executed": 20, "missing": 30},
                "observations": [],
                "slices": [],
            },
        ],
        "coverage": {"expected": 50, "executed": 50, "missing": 0},
        "issued_at": "2026-11-29T12:00:00.123Z",
        "valid_until": "2026-12-06T12:00:00.123Z",
    }


def envelope() -> dict[str, Any]:
    return {
        "status": "superseded",
        "superseded_by": "rep_01JA00",
        "superseded_at": "2026-11-30T08:15:00Z",
        "superseded_reason": "re_evaluation",
        "url": "https://evalbook.example/reports/rep_01J9Z3",
    }


def check_result() -> dict[str, Any]:
    return {
        "check_id": "answer-accuracy",
        "required": True,
        "aggregation": dict(AGGREGATION),
        "status": "pass",
        "result": "pass",
        "score": 0.96,
        "interval": {
            "level": 0.95,
            "method": "wilson",
            "low": 0.8654,
            "high": 0.9889,
            "resamples": None,
            "seed": None,
        },
        "coverage": {"expected": 50, "executed": 50, "missing": 0},
        "assurance": "independently_observed",
        "slices": [{"slice": "locale=de", "result": "pass"}],
    }


def case() -> dict[str, Any]:
    return {
        "case_id": "case-000042",
        "check_id": "answer-accuracy",
        "example": {"dataset_id": "checkout-prompts", "version": 7, "example_id": "ex-0042"},
        "repeat": 1,
        "status": "pass",
        "score": 1,
        "assurance": "independently_observed",
        "output": {"kind": "output", "digest": D_OUT, "size": 1834, "location": "inline"},
        "evidence": [
            {
                "kind": "trace",
                "digest": D_TRACE,
                "size": 90211,
                "location": "traces",
                "trace_id": "tr_7f3a",
            },
            {"kind": "artifact", "digest": D_ART, "size": 5_000_000, "location": "sso"},
        ],
    }


def suite() -> dict[str, Any]:
    return {
        "suite_id": "checkout-quality",
        "version": 3,
        "status": "active",
        "validity_hours": 168,
        "decision_rule": {
            "rule": "all_required_pass",
            "alpha": None,
            "margin": None,
            "correction": None,
        },
        "checks": [
            {
                "check_id": "answer-accuracy",
                "required": True,
                "scorer": {"id": "exact-match", "version": 2},
                "dataset": {"id": "checkout-prompts", "version": 7},
                "aggregation": dict(AGGREGATION),
            }
        ],
    }


def scorer() -> dict[str, Any]:
    return {
        "scorer_id": "tone-judge",
        "version": 1,
        "kind": "model_judge",
        "entrypoint": "judge.py:score",
        "runtime": "python3.11",
        "config": {"temperature": 0, "labels": ["polite", "rude"]},
        "judge": {"agent_type": "chat", "model": "judge-large", "reasoning_effort": None},
        "files": ["judge.py", "prompts/system.txt", "prompts/v2/rubric.md"],
    }


def dataset_manifest() -> dict[str, Any]:
    return {
        "dataset_id": "checkout-prompts",
        "version": 7,
        "examples": [
            {"example_id": "ex-0001", "digest": digest("ex-0001"), "size": 412},
            {"example_id": "ex-0042", "digest": digest("ex-0042"), "size": 0},
        ],
    }


def retention_line() -> dict[str, Any]:
    return {"example_id": "ex-0001", "removed_at": "2026-10-01T00:00:00Z", "policy": "pii-90d"}


def access() -> dict[str, Any]:
    return {
        "principals": {
            "alice": ["report.export", "dataset.read_body"],
            "svc.exporter-1": ["report.export"],
            "bob": [],
        }
    }


def evidence_manifest() -> dict[str, Any]:
    entries = [{"kind": "output", "digest": digest(f"out-{i}")} for i in range(25)]
    entries.append({"kind": "trace", "digest": D_TRACE})
    entries.sort(key=lambda entry: (entry["digest"], entry["kind"]))
    return {
        "schema": "evalbook.evidence_manifest.v1",
        "check_id": "answer-accuracy",
        "evidence": entries,
    }


def bundle() -> dict[str, Any]:
    return {
        "schema": "evalbook.reproducibility_bundle.v1",
        "exported_at": "2026-11-30T00:00:00Z",
        "exporter": {
            "tool": "evalbook-bundle",
            "version": "0.1.0",
            "principal": "alice",
            "permissions": ["dataset.read_body", "report.export"],
        },
        "limits": {"max_cases": 20000, "inline_payload_max_bytes": 262144},
        "report": {
            "report_id": "rep_01J9Z3",
            "evaluation_id": "eval_01J9Z2",
            "digest": digest("body"),
            "path": "data/report/body.json",
            "envelope": {
                "path": "data/report/envelope.json",
                "digest": digest("envelope"),
                "status": "current",
            },
        },
        "suite": {
            "suite_id": "checkout-quality",
            "version": 3,
            "digest": D_SUITE,
            "path": "data/suite/checkout-quality/3.json",
        },
        "scorers": [
            {
                "scorer_id": "exact-match",
                "version": 2,
                "digest": D_SCORER,
                "path": "data/scorers/exact-match/2",
            }
        ],
        "datasets": [
            {
                "dataset_id": "checkout-prompts",
                "version": 7,
                "digest": D_DATASET,
                "path": "data/datasets/checkout-prompts/7/manifest.json",
                "examples": [
                    {
                        "example_id": "ex-0042",
                        "digest": digest("ex-0042"),
                        "path": "data/datasets/checkout-prompts/7/examples/ex-0042.json",
                    },
                    {"example_id": "ex-0001", "digest": digest("ex-0001"), "path": None},
                ],
            }
        ],
        "checks": [
            {
                "check_id": "answer-accuracy",
                "digest": digest("check"),
                "path": "data/checks/answer-accuracy.json",
                "cases": {
                    "path": "data/cases/answer-accuracy.jsonl",
                    "digest": digest("cases"),
                    "total": 20050,
                    "exported": 20000,
                },
            },
            {
                "check_id": "tone",
                "digest": None,
                "path": None,
                "cases": {"path": None, "digest": None, "total": 0, "exported": 0},
            },
        ],
        "payloads": [
            {"digest": D_OUT, "size": 1834, "path": f"data/blobs/sha256/{D_OUT[7:]}"},
            {"digest": D_MANIFEST, "size": 300000, "path": f"data/blobs/sha256/{D_MANIFEST[7:]}"},
        ],
        "unavailable": [
            {
                "kind": "artifact",
                "ref": D_ART,
                "digest": D_ART,
                "reason": "payload_at_sso",
                "detail": None,
            },
            {
                "kind": "scorer",
                "ref": "tone-judge@1",
                "digest": D_SCORER,
                "reason": "scorer_digest_mismatch",
                "detail": digest("observed"),
            },
            {
                "kind": "cases",
                "ref": "answer-accuracy",
                "digest": None,
                "reason": "case_limit",
                "detail": "50",
            },
            {
                "kind": "check",
                "ref": "tone",
                "digest": None,
                "reason": "missing_from_store",
                "detail": None,
            },
        ],
        "redacted": [
            {"kind": "trace", "ref": D_TRACE, "digest": D_TRACE, "reason": "trace_capture_policy"}
        ],
        "cases_tree": {"tree_size": 20000, "root": hashlib.sha256(b"root").hexdigest()},
    }


VALID: dict[str, Callable[[], dict[str, Any]]] = {
    "report-body": report_body,
    "envelope": envelope,
    "check-result": check_result,
    "case": case,
    "suite": suite,
    "scorer": scorer,
    "dataset-manifest": dataset_manifest,
    "retention-line": retention_line,
    "access": access,
    "evidence-manifest": evidence_manifest,
    "bundle": bundle,
}

# Other valid shapes: the other branch of each nullable object and conditional.
# fmt: off
MORE_VALID: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    ("envelope", lambda d: d.update(status="current", superseded_by=None,
                                    superseded_at=None, superseded_reason=None, url=None)),
    ("check-result", lambda d: d.update(interval=None, assurance=None, score=None)),
    ("check-result", lambda d: d["interval"].update(
        method="bootstrap-percentile/philox4x64-10/t7", resamples=2000, seed=42)),
    ("check-result", lambda d: d["aggregation"].update(
        rule="min", threshold=None, min_coverage=None, min_samples=None, repeats=3)),
    ("case", lambda d: d.update(output=None, evidence=[], score=None, status="timeout")),
    ("case", lambda d: d["output"].update(size=262144)),
    ("scorer", lambda d: d.update(kind="deterministic", judge=None, files=[])),
    ("scorer", lambda d: d.update(kind="human_review", judge=None, config=None)),
    ("scorer", lambda d: d.update(kind="harness_judge")),
    ("report-body", lambda d: d.update(subject="plain string subject", dataset_refs=[])),
    ("report-body", lambda d: d["checks"][0].update(evidence_refs=[])),
    ("report-body", lambda d: d["checks"][0].update(
        evidence_refs=[{"kind": "output", "digest": digest(str(i))} for i in range(20)])),
    ("suite", lambda d: d.update(checks=[], status="retired")),
    ("bundle", lambda d: d["suite"].update(path=None)),
    ("bundle", lambda d: d.update(scorers=[], datasets=[], checks=[], payloads=[],
                                  unavailable=[], redacted=[])),
    ("access", lambda d: d.update(principals={})),
    ("evidence-manifest", lambda d: d.update(evidence=[])),
    ("retention-line", lambda d: d.update(removed_at="2026-10-01T00:00:00.5Z")),
]
# fmt: on


# --- helpers -------------------------------------------------------------------------


def _parent(doc: Any, pointer: str) -> tuple[Any, str | int]:
    parts = pointer.split("/")[1:]
    node = doc
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = parts[-1]
    return node, (int(last) if isinstance(node, list) else last)


def setp(pointer: str, value: Any) -> Callable[[Any], None]:
    def mutate(doc: Any) -> None:
        node, key = _parent(doc, pointer)
        node[key] = copy.deepcopy(value)

    return mutate


def delp(pointer: str) -> Callable[[Any], None]:
    def mutate(doc: Any) -> None:
        node, key = _parent(doc, pointer)
        del node[key]

    return mutate


def rejection(name: str, doc: Any) -> str:
    with pytest.raises(SchemaError) as info:
        schemas.validate(name, doc, source=SOURCE)
    return str(info.value)


def assert_agree(name: str, doc: Any) -> bool:
    """The compiled check and the reference validator give the same answer."""
    reference = bool(schemas.validator_for(name).is_valid(doc))
    fast = schemas._fast_check(name)
    assert fast is not None
    assert fast(doc) is reference, f"compiled check and reference disagree on {doc!r}"
    return reference


# --- the schema files ----------------------------------------------------------------


def test_every_schema_file_is_listed() -> None:
    on_disk = sorted(
        entry.name.removesuffix(".schema.json")
        for entry in schemas.schema_dir().iterdir()
        if entry.name.endswith(".schema.json")
    )
    assert on_disk == sorted((*schemas.SCHEMA_NAMES, *schemas.OUTPUT_SCHEMA_NAMES))
    assert sorted(VALID) == sorted(ALL)


@pytest.mark.parametrize("name", ALL)
def test_schema_is_valid_draft_2020_12(name: str) -> None:
    document = schemas.load_schema(name)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(document)
    assert schemas.schema_path(name).name == f"{name}.schema.json"
    assert json.loads(schemas.schema_path(name).read_text(encoding="utf-8")) == document


def test_schema_ids_are_distinct() -> None:
    ids = [schemas.load_schema(name)["$id"] for name in ALL]
    assert len(set(ids)) == len(ids)


def test_unknown_schema_name() -> None:
    with pytest.raises(KeyError):
        schemas.schema_path("nope")
    with pytest.raises(KeyError):
        schemas.validate("nope", {}, source=SOURCE)


def _subschemas(node: Any, where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        yield where, node
        for key, value in node.items():
            if key not in ("enum", "const", "required"):
                yield from _subschemas(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _subschemas(value, f"{where}/{index}")


# Objects whose SPEC entry leaves room: slices carry more than {slice, result}, and a
# payload ref has trace_id only at location traces.
OPEN_OBJECTS = {"/$defs/slice"}
OPTIONAL_MEMBERS = {"/$defs/payload_ref": {"trace_id"}}


@pytest.mark.parametrize("name", ALL)
def test_objects_are_closed_and_fields_required(name: str) -> None:
    for where, node in _subschemas(schemas.load_schema(name)):
        kinds = node.get("type")
        is_object = kinds == "object" or (isinstance(kinds, list) and "object" in kinds)
        if not is_object or "properties" not in node:
            continue
        if where in OPEN_OBJECTS:
            assert "additionalProperties" not in node, where
        else:
            assert node.get("additionalProperties") is False, f"{name}{where}"
        optional = OPTIONAL_MEMBERS.get(where, set())
        assert set(node["required"]) == set(node["properties"]) - optional, f"{name}{where}"


@pytest.mark.parametrize("name", ALL)
def test_descriptions_only_on_leaf_and_conditional_subschemas(name: str) -> None:
    # A description is printed as the reason when its subschema fails, so an object
    # schema with one would hide which member is wrong.
    for where, node in _subschemas(schemas.load_schema(name)):
        if "description" in node:
            assert "properties" not in node and "items" not in node, f"{name}{where}"


def test_shared_definitions_are_identical_across_files() -> None:
    seen: dict[str, tuple[str, Any]] = {}
    for name in ALL:
        for key, value in schemas.load_schema(name).get("$defs", {}).items():
            if key in seen:
                assert value == seen[key][1], f"$defs/{key} differs in {name} and {seen[key][0]}"
            else:
                seen[key] = (name, value)
    assert {"identifier", "digest", "version", "timestamp"} <= set(seen)


def test_vocabularies_match_spec() -> None:
    defs = schemas.load_schema("report-body")["$defs"]
    check = defs["report_check"]["properties"]
    assert defs["check_status"]["enum"] == [
        "pass",
        "fail",
        "error",
        "timeout",
        "cancelled",
        "skipped",
        "unsupported",
        "abstained",
        "inconclusive",
        "missing",
        "stale",
    ]
    assert defs["check_result"]["enum"] == [
        "pass",
        "fail",
        "error",
        "inconclusive",
        "missing",
        "stale",
    ]
    assert check["evidence_refs"]["maxItems"] == 20
    bundle_props = schemas.load_schema("bundle")["properties"]
    unavailable = bundle_props["unavailable"]["items"]["properties"]
    assert set(unavailable["reason"]["enum"]) == {
        "payload_at_sso",
        "removed_by_retention",
        "scorer_version_missing",
        "scorer_digest_mismatch",
        "case_limit",
        "digest_mismatch",
        "missing_from_store",
    }
    assert set(unavailable["kind"]["enum"]) == {
        "report",
        "suite",
        "scorer",
        "dataset",
        "example",
        "check",
        "cases",
        "output",
        "trace",
        "artifact",
        "evidence_manifest",
    }


# --- valid documents -----------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_valid_document(name: str) -> None:
    doc = VALID[name]()
    schemas.validate(name, doc, source=SOURCE)
    assert assert_agree(name, doc)


@pytest.mark.parametrize(("name", "mutate"), MORE_VALID)
def test_more_valid_documents(name: str, mutate: Callable[[dict[str, Any]], None]) -> None:
    doc = VALID[name]()
    mutate(doc)
    schemas.validate(name, doc, source=SOURCE)
    assert assert_agree(name, doc)


def test_validate_does_not_change_the_document() -> None:
    doc = bundle()
    before = copy.deepcopy(doc)
    schemas.validate("bundle", doc, source=SOURCE)
    assert doc == before


# --- invalid documents ---------------------------------------------------------------

UPPER = "sha256:" + hashlib.sha256(b"x").hexdigest().upper()
UPPER_HEX = (
    "sha256:"
    + hashlib.sha256(b"x").hexdigest()[:10].upper()
    + (hashlib.sha256(b"x").hexdigest()[10:])
)

# (schema, label, mutation, JSON pointer in the message, text the reason must contain)
# fmt: off
INVALID: list[tuple[str, str, Callable[[Any], None], str, str]] = [
    # report body
    ("report-body", "missing field", delp("/valid_until"), "(root)", "'valid_until'"),
    ("report-body", "missing check field", delp("/checks/0/scorer_ref"), "/checks/0",
     "'scorer_ref' is a required property"),
    ("report-body", "extra field", setp("/verdict", "pass"), "(root)", "'verdict'"),
    ("report-body", "extra check field", setp("/checks/1/weight", 2), "/checks/1", "'weight'"),
    ("report-body", "wrong schema_version", setp("/schema_version", "1.1"), "/schema_version",
     "'1.0'"),
    ("report-body", "wrong producer", setp("/producer", "svc_other"), "/producer",
     "is not one of ['svc_evalbook', 'evalbook-bundle/import-inspect'"),
    ("report-body", "wrong result", setp("/result", "passed"), "/result", "'passed'"),
    ("report-body", "wrong check status", setp("/checks/0/status", "passed"),
     "/checks/0/status", "is not one of ['pass', 'fail'"),
    ("report-body", "status is not a result", setp("/checks/0/result", "timeout"),
     "/checks/0/result", "'timeout'"),
    ("report-body", "wrong assurance", setp("/checks/0/assurance", "verified"),
     "/checks/0/assurance", "'verified'"),
    ("report-body", "uppercase digest", setp("/suite_ref/digest", UPPER), "/suite_ref/digest",
     "digest"),
    ("report-body", "partly uppercase digest", setp("/checks/0/evidence_refs/1/digest",
                                                    UPPER_HEX),
     "/checks/0/evidence_refs/1/digest", "digest"),
    ("report-body", "digest with newline", setp("/suite_ref/digest", D_SUITE + "\n"),
     "/suite_ref/digest", "digest"),
    ("report-body", "md5 digest", setp("/suite_ref/digest", "md5:" + "0" * 32),
     "/suite_ref/digest", "digest"),
    ("report-body", "short digest", setp("/suite_ref/digest", D_SUITE[:-1]),
     "/suite_ref/digest", "digest"),
    ("report-body", "identifier with slash", setp("/report_id", "rep/01"), "/report_id",
     "identifier"),
    ("report-body", "identifier ..", setp("/suite_ref/id", ".."), "/suite_ref/id",
     "identifier"),
    ("report-body", "identifier .", setp("/checks/0/check_id", "."), "/checks/0/check_id",
     "identifier"),
    ("report-body", "identifier with NUL", setp("/checks/0/check_id", "a\x00b"),
     "/checks/0/check_id", "identifier"),
    ("report-body", "identifier too long", setp("/report_id", "r" * 129), "/report_id",
     "identifier"),
    ("report-body", "empty identifier", setp("/report_id", ""), "/report_id", "identifier"),
    ("report-body", "version 0", setp("/suite_ref/version", 0), "/suite_ref/version",
     "minimum"),
    ("report-body", "version as string", setp("/dataset_refs/0/version", "7"),
     "/dataset_refs/0/version", "integer"),
    ("report-body", "timestamp without Z", setp("/issued_at", "2026-11-29T12:00:00+00:00"),
     "/issued_at", "RFC 3339"),
    ("report-body", "timestamp month 13", setp("/issued_at", "2026-13-29T12:00:00Z"),
     "/issued_at", "RFC 3339"),
    ("report-body", "negative coverage", setp("/coverage/missing", -1), "/coverage/missing",
     "minimum"),
    ("report-body", "21 evidence refs", setp(
        "/checks/0/evidence_refs",
        [{"kind": "output", "digest": digest(str(i))} for i in range(21)]),
     "/checks/0/evidence_refs", "has 21 items, at most 20"),
    ("report-body", "manifest beside another ref", setp(
        "/checks/1/evidence_refs",
        [{"kind": "manifest", "digest": D_MANIFEST}, {"kind": "output", "digest": D_OUT}]),
     "/checks/1/evidence_refs", "manifest"),
    ("report-body", "two manifests", setp(
        "/checks/1/evidence_refs",
        [{"kind": "manifest", "digest": D_MANIFEST}, {"kind": "manifest", "digest": D_OUT}]),
     "/checks/1/evidence_refs", "manifest"),
    ("report-body", "unknown evidence kind", setp("/checks/0/evidence_refs/0/kind", "log"),
     "/checks/0/evidence_refs/0/kind", "'log'"),
    ("report-body", "slice result outside vocabulary", setp("/checks/0/slices/0/result", "ok"),
     "/checks/0/slices/0/result", "'ok'"),
    ("report-body", "slice without result", delp("/checks/0/slices/0/result"),
     "/checks/0/slices/0", "'result'"),
    ("report-body", "score as string", setp("/checks/0/score", "0.96"), "/checks/0/score",
     "number or null"),
    ("report-body", "evidence_complete as int", setp("/evidence_complete", 1),
     "/evidence_complete", "boolean"),
    ("report-body", "alpha as string", setp("/decision_rule/alpha", "0.05"),
     "/decision_rule/alpha", "number or null"),
    # envelope
    ("envelope", "missing field", delp("/url"), "(root)", "'url'"),
    ("envelope", "extra field", setp("/expires_at", None), "(root)", "'expires_at'"),
    ("envelope", "wrong status", setp("/status", "active"), "/status", "'active'"),
    ("envelope", "bad superseded_at", setp("/superseded_at", "yesterday"), "/superseded_at",
     "RFC 3339"),
    # check result
    ("check-result", "missing field", delp("/interval"), "(root)", "'interval'"),
    ("check-result", "extra field", setp("/digest", D_OUT), "(root)", "'digest'"),
    ("check-result", "wrong aggregation rule", setp("/aggregation/rule", "median"),
     "/aggregation/rule", "'median'"),
    ("check-result", "missing repeats", delp("/aggregation/repeats"), "/aggregation",
     "'repeats'"),
    ("check-result", "min_coverage 1.5", setp("/aggregation/min_coverage", 1.5),
     "/aggregation/min_coverage", "maximum"),
    ("check-result", "negative min_samples", setp("/aggregation/min_samples", -1),
     "/aggregation/min_samples", "minimum"),
    ("check-result", "repeats 0", setp("/aggregation/repeats", 0), "/aggregation/repeats",
     "minimum"),
    ("check-result", "interval level 1", setp("/interval/level", 1), "/interval/level",
     "maximum"),
    ("check-result", "interval level 0", setp("/interval/level", 0), "/interval/level",
     "minimum"),
    ("check-result", "unknown interval method", setp("/interval/method", "percentile"),
     "/interval/method", "'percentile'"),
    ("check-result", "interval missing seed", delp("/interval/seed"), "/interval", "'seed'"),
    ("check-result", "fractional resamples", setp("/interval/resamples", 2000.5),
     "/interval/resamples", "integer or null"),
    ("check-result", "wrong status", setp("/status", "ok"), "/status", "'ok'"),
    ("check-result", "bad identifier", setp("/check_id", "a/../b"), "/check_id", "identifier"),
    # case
    ("case", "missing field", delp("/assurance"), "(root)", "'assurance'"),
    ("case", "extra field", setp("/digest", D_OUT), "(root)", "'digest'"),
    ("case", "wrong status", setp("/status", "passed"), "/status", "'passed'"),
    ("case", "null assurance", setp("/assurance", None), "/assurance", "None"),
    ("case", "uppercase digest", setp("/output/digest", UPPER), "/output/digest", "digest"),
    ("case", "bad case_id", setp("/case_id", "x" * 200), "/case_id", "identifier"),
    ("case", "example id with slash", setp("/example/example_id", "../ex"),
     "/example/example_id", "identifier"),
    ("case", "example missing version", delp("/example/version"), "/example", "'version'"),
    ("case", "trace_id on an inline payload", setp("/output/trace_id", "tr_1"), "/output",
     "trace_id is allowed only at location 'traces'"),
    ("case", "trace_id on an sso payload", setp("/evidence/1/trace_id", "tr_1"),
     "/evidence/1", "trace_id is allowed only"),
    ("case", "traces payload without trace_id", delp("/evidence/0/trace_id"), "/evidence/0",
     "needs a trace_id"),
    ("case", "bad trace_id", setp("/evidence/0/trace_id", "tr/1"), "/evidence/0/trace_id",
     "identifier"),
    ("case", "negative size", setp("/output/size", -1), "/output/size", "minimum"),
    ("case", "inline payload over the limit", setp("/output/size", 262145), "/output/size",
     "262,144"),
    ("case", "sso payload under the limit", setp("/evidence/1/size", 262144),
     "/evidence/1/size", "262,144"),
    ("case", "unknown location", setp("/output/location", "s3"), "/output/location", "'s3'"),
    ("case", "manifest is not a payload kind", setp("/output/kind", "manifest"),
     "/output/kind", "'manifest'"),
    ("case", "repeat 0", setp("/repeat", 0), "/repeat", "minimum"),
    ("case", "repeat as bool", setp("/repeat", True), "/repeat", "integer"),
    ("case", "output as string", setp("/output", "x" * 500), "/output",
     "is not of type null or object"),
    # suite
    ("suite", "missing field", delp("/validity_hours"), "(root)", "'validity_hours'"),
    ("suite", "extra field", setp("/checks/0/weight", 1), "/checks/0", "'weight'"),
    ("suite", "wrong status", setp("/status", "archived"), "/status", "'archived'"),
    ("suite", "validity_hours 0", setp("/validity_hours", 0), "/validity_hours", "minimum"),
    ("suite", "min_coverage 1.5", setp("/checks/0/aggregation/min_coverage", 1.5),
     "/checks/0/aggregation/min_coverage", "maximum"),
    ("suite", "scorer pin with digest", setp("/checks/0/scorer/digest", D_SCORER),
     "/checks/0/scorer", "'digest'"),
    ("suite", "bad dataset id", setp("/checks/0/dataset/id", "data sets"),
     "/checks/0/dataset/id", "identifier"),
    # scorer
    ("scorer", "missing field", delp("/files"), "(root)", "'files'"),
    ("scorer", "extra field", setp("/digest", D_SCORER), "(root)", "'digest'"),
    ("scorer", "wrong kind", setp("/kind", "llm_judge"), "/kind", "'llm_judge'"),
    ("scorer", "file path with ..", setp("/files/1", "prompts/../../etc/passwd"), "/files/1",
     "relative path"),
    ("scorer", "file path ..", setp("/files/0", ".."), "/files/0", "relative path"),
    ("scorer", "file path with . segment", setp("/files/0", "./judge.py"), "/files/0",
     "relative path"),
    ("scorer", "absolute file path", setp("/files/0", "/judge.py"), "/files/0",
     "relative path"),
    ("scorer", "file path with empty segment", setp("/files/1", "prompts//system.txt"),
     "/files/1", "relative path"),
    ("scorer", "file path with trailing slash", setp("/files/1", "prompts/"), "/files/1",
     "relative path"),
    ("scorer", "file path with backslash", setp("/files/0", "prompts\\system.txt"),
     "/files/0", "relative path"),
    ("scorer", "file path with NUL", setp("/files/0", "judge\x00.py"), "/files/0",
     "relative path"),
    ("scorer", "empty file path", setp("/files/0", ""), "/files/0", "relative path"),
    ("scorer", "duplicate file", setp("/files", ["judge.py", "judge.py"]), "/files",
     "items 0 and 1 are equal"),
    ("scorer", "judge missing for a model judge", setp("/judge", None), "/judge",
     "has a judge"),
    ("scorer", "judge on a deterministic scorer", setp("/kind", "deterministic"), "/judge",
     "judge is null"),
    ("scorer", "judge missing reasoning_effort", delp("/judge/reasoning_effort"), "/judge",
     "'reasoning_effort'"),
    ("scorer", "bad scorer id", setp("/scorer_id", "-tone"), "/scorer_id", "identifier"),
    # dataset manifest
    ("dataset-manifest", "missing field", delp("/examples/1/size"), "/examples/1", "'size'"),
    ("dataset-manifest", "extra field", setp("/examples/0/path", "x"), "/examples/0", "'path'"),
    ("dataset-manifest", "uppercase digest", setp("/examples/0/digest", UPPER),
     "/examples/0/digest", "digest"),
    ("dataset-manifest", "negative size", setp("/examples/0/size", -5), "/examples/0/size",
     "minimum"),
    ("dataset-manifest", "bad example id", setp("/examples/0/example_id", "ex\x00"),
     "/examples/0/example_id", "identifier"),
    ("dataset-manifest", "version 0", setp("/version", 0), "/version", "minimum"),
    # retention line
    ("retention-line", "missing field", delp("/policy"), "(root)", "'policy'"),
    ("retention-line", "extra field", setp("/digest", D_OUT), "(root)", "'digest'"),
    ("retention-line", "bad example id", setp("/example_id", "a/b"), "/example_id",
     "identifier"),
    ("retention-line", "date only", setp("/removed_at", "2026-10-01"), "/removed_at",
     "RFC 3339"),
    ("retention-line", "lowercase z", setp("/removed_at", "2026-10-01T00:00:00z"),
     "/removed_at", "RFC 3339"),
    # access
    ("access", "missing field", delp("/principals"), "(root)", "'principals'"),
    ("access", "extra field", setp("/roles", {}), "(root)", "'roles'"),
    ("access", "principal with slash", lambda d: d["principals"].update({"team/alice": []}),
     "/principals", "'team/alice'"),
    ("access", "principal too long", setp("/principals/" + "p" * 129, []), "/principals",
     "identifier"),
    ("access", "uppercase permission", setp("/principals/alice/0", "Report.Export"),
     "/principals/alice/0", "permission"),
    ("access", "permission without dot", setp("/principals/alice/0", "export"),
     "/principals/alice/0", "permission"),
    ("access", "duplicate permission", setp("/principals/bob", ["report.export"] * 2),
     "/principals/bob", "items 0 and 1 are equal"),
    ("access", "permissions as string", setp("/principals/bob", "report.export"),
     "/principals/bob", "array"),
    # evidence manifest
    ("evidence-manifest", "missing field", delp("/check_id"), "(root)", "'check_id'"),
    ("evidence-manifest", "extra field", setp("/evidence/0/size", 1), "/evidence/0", "'size'"),
    ("evidence-manifest", "wrong schema", setp("/schema", "evalbook.evidence_manifest.v2"),
     "/schema", "evalbook.evidence_manifest.v1"),
    ("evidence-manifest", "manifest inside a manifest", setp("/evidence/0/kind", "manifest"),
     "/evidence/0/kind", "'manifest'"),
    ("evidence-manifest", "uppercase digest", setp("/evidence/3/digest", UPPER),
     "/evidence/3/digest", "digest"),
    ("evidence-manifest", "duplicate entry", lambda d: d["evidence"].append(
        dict(d["evidence"][4])), "/evidence", "items 4 and 26 are equal"),
    ("evidence-manifest", "bad check id", setp("/check_id", "a b"), "/check_id", "identifier"),
    # bundle
    ("bundle", "missing field", delp("/cases_tree"), "(root)", "'cases_tree'"),
    ("bundle", "missing nested field", delp("/checks/0/cases/exported"), "/checks/0/cases",
     "'exported'"),
    ("bundle", "extra field", setp("/signature", None), "(root)", "'signature'"),
    ("bundle", "wrong schema", setp("/schema", "evalbook.reproducibility_bundle.v2"),
     "/schema", "evalbook.reproducibility_bundle.v1"),
    ("bundle", "exported_at with fractional seconds",
     setp("/exported_at", "2026-11-30T00:00:00.5Z"), "/exported_at", "whole seconds"),
    ("bundle", "exported_at with offset", setp("/exported_at", "2026-11-30T00:00:00+01:00"),
     "/exported_at", "whole seconds"),
    ("bundle", "other max_cases", setp("/limits/max_cases", 19999), "/limits/max_cases",
     "20000"),
    ("bundle", "other inline limit", setp("/limits/inline_payload_max_bytes", 262145),
     "/limits/inline_payload_max_bytes", "262144"),
    ("bundle", "wrong envelope status", setp("/report/envelope/status", "expired"),
     "/report/envelope/status", "'expired'"),
    ("bundle", "uppercase report digest", setp("/report/digest", UPPER), "/report/digest",
     "digest"),
    ("bundle", "uppercase payload digest", setp("/payloads/0/digest", UPPER_HEX),
     "/payloads/0/digest", "digest"),
    ("bundle", "uppercase nullable digest", setp("/checks/0/digest", UPPER),
     "/checks/0/digest", "digest"),
    ("bundle", "nullable digest as number", setp("/checks/0/cases/digest", 5),
     "/checks/0/cases/digest", "is not of type null or string"),
    ("bundle", "bad principal", setp("/exporter/principal", "al/ice"), "/exporter/principal",
     "identifier"),
    ("bundle", "duplicate permission", setp("/exporter/permissions",
                                            ["report.export", "report.export"]),
     "/exporter/permissions", "items 0 and 1 are equal"),
    ("bundle", "bad report id", setp("/report/report_id", "r" * 129), "/report/report_id",
     "identifier"),
    ("bundle", "path outside data/", setp("/report/path", "report/body.json"), "/report/path",
     "bag path"),
    ("bundle", "path with ..", setp("/payloads/0/path", "data/blobs/../../etc/passwd"),
     "/payloads/0/path", "bag path"),
    ("bundle", "path with empty segment", setp("/checks/0/path", "data//checks/a.json"),
     "/checks/0/path", "bag path"),
    ("bundle", "path with backslash", setp("/checks/0/cases/path", "data\\cases\\a.jsonl"),
     "/checks/0/cases/path", "bag path"),
    ("bundle", "absolute path", setp("/suite/path", "/data/suite/x/3.json"), "/suite/path",
     "bag path"),
    ("bundle", "bare data/", setp("/scorers/0/path", "data/"), "/scorers/0/path", "bag path"),
    ("bundle", "negative payload size", setp("/payloads/1/size", -1), "/payloads/1/size",
     "minimum"),
    ("bundle", "negative total", setp("/checks/0/cases/total", -1), "/checks/0/cases/total",
     "minimum"),
    ("bundle", "unknown unavailable reason", setp("/unavailable/0/reason", "lost"),
     "/unavailable/0/reason", "'lost'"),
    ("bundle", "unknown unavailable kind", setp("/unavailable/0/kind", "definition"),
     "/unavailable/0/kind", "'definition'"),
    ("bundle", "unavailable without detail", delp("/unavailable/0/detail"), "/unavailable/0",
     "'detail'"),
    ("bundle", "scorer_digest_mismatch detail not a digest",
     setp("/unavailable/1/detail", "changed"), "/unavailable/1/detail", "observed digest"),
    ("bundle", "case_limit detail not a count", setp("/unavailable/2/detail", "fifty"),
     "/unavailable/2/detail", "number of cases"),
    ("bundle", "case_limit detail null", setp("/unavailable/2/detail", None),
     "/unavailable/2/detail", "number of cases"),
    ("bundle", "unknown redaction reason", setp("/redacted/0/reason", "policy"),
     "/redacted/0/reason", "'policy'"),
    ("bundle", "redaction without digest", setp("/redacted/0/digest", None),
     "/redacted/0/digest", "digest"),
    ("bundle", "uppercase tree root", setp("/cases_tree/root", "AB" * 32), "/cases_tree/root",
     "64 lowercase hex"),
    ("bundle", "tree root with prefix", setp("/cases_tree/root", D_OUT), "/cases_tree/root",
     "64 lowercase hex"),
    ("bundle", "negative tree size", setp("/cases_tree/tree_size", -1),
     "/cases_tree/tree_size", "minimum"),
    ("bundle", "example path absent key", delp("/datasets/0/examples/1/path"),
     "/datasets/0/examples/1", "'path'"),
]
# fmt: on


@pytest.mark.parametrize(
    ("name", "mutate", "pointer", "fragment"),
    [pytest.param(n, m, p, f, id=f"{n}: {label}") for n, label, m, p, f in INVALID],
)
def test_invalid_document(
    name: str, mutate: Callable[[Any], None], pointer: str, fragment: str
) -> None:
    doc = VALID[name]()
    mutate(doc)
    message = rejection(name, doc)
    assert message.startswith(f"{SOURCE}: {pointer}: "), message
    assert message.endswith(f" (schema {name})"), message
    assert fragment in message, message
    # Values are quoted as they are and escaped once where the message is shown.
    assert "\n" not in shown(message)
    assert assert_agree(name, doc) is False


def test_every_schema_has_the_generic_rejections() -> None:
    labels: dict[str, set[str]] = {name: set() for name in ALL}
    for name, label, *_ in INVALID:
        labels[name].add(label)
    for name in ALL:
        assert {"missing field", "extra field"} <= labels[name], name


def test_schema_error_is_an_input_error() -> None:
    doc = case()
    doc["status"] = "passed"
    with pytest.raises(InputError) as info:
        schemas.validate("case", doc, source="cases/answer-accuracy.jsonl:7")
    assert isinstance(info.value, SchemaError)
    assert info.value.exit_code == 3
    assert str(info.value).startswith("cases/answer-accuracy.jsonl:7: /status: ")


def test_root_that_is_not_an_object() -> None:
    message = rejection("case", ["not", "an", "object"])
    reason = "['not', 'an', 'object'] is not of type object"
    assert message == f"{SOURCE}: (root): {reason} (schema case)"


def test_huge_values_are_truncated_in_messages() -> None:
    doc = case()
    doc["case_id"] = "z" * 10_000
    message = rejection("case", doc)
    assert len(message) < 400
    assert "zzz..." in message
    doc = case()
    doc["example"] = ["e" * 5_000]
    message = rejection("case", doc)
    assert len(message) < 400
    assert message.startswith(f"{SOURCE}: /example: ")


def test_pointer_escapes_slash_and_tilde() -> None:
    doc = access()
    doc["principals"]["alice"] = ["report.export", 7]
    assert rejection("access", doc).startswith(f"{SOURCE}: /principals/alice/1: ")
    assert schemas.json_pointer(["a/b", "c~d", 0]) == "/a~1b/c~0d/0"
    assert schemas.json_pointer([]) == "(root)"


def test_most_relevant_error_is_reported() -> None:
    # A missing member at the top says more than a wrong value deep inside.
    doc = case()
    del doc["status"]
    doc["output"]["digest"] = UPPER
    message = rejection("case", doc)
    assert message.startswith(f"{SOURCE}: (root): 'status' is a required property")


# --- keyword semantics ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "python"),
    [
        ("^a$", "^a\\Z"),
        ("^[$]$", "^[$]\\Z"),
        ("^\\$$", "^\\$\\Z"),
        ("^[^\\]$]+$", "^[^\\]$]+\\Z"),
        ("(/|$)", "(/|\\Z)"),
    ],
)
def test_ecma_dollar_is_end_of_string(pattern: str, python: str) -> None:
    assert schemakeywords._ecma_regex(pattern) == python


def test_digest_with_trailing_newline_is_rejected_by_both_paths() -> None:
    schema = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
    check = schemagen.compile_schema(schema)
    assert check is not None
    reference = schemas.reference_validator_class()(schema)
    for value, ok in [(D_OUT, True), (D_OUT + "\n", False), ("\n" + D_OUT, False)]:
        assert check(value) is ok
        assert reference.is_valid(value) is ok


@pytest.mark.parametrize(
    ("items", "unique"),
    [
        ([1, 1.0], False),
        ([1, True], True),
        ([0, False], True),
        ([{"a": 1}, {"a": 1.0}], False),
        ([{"a": 1}, {"a": True}], True),
        ([[1, "x"], [1, "x"]], False),
        ([[1, "x"], ["x", 1]], True),
        ([None, None], False),
        ([{"a": [1, {"b": None}]}, {"a": [1, {"b": None}]}], False),
        ([], True),
    ],
)
def test_unique_items_uses_json_equality(items: list[Any], unique: bool) -> None:
    schema = {"type": "array", "uniqueItems": True}
    check = schemagen.compile_schema(schema)
    assert check is not None
    assert check(items) is unique
    assert schemas.reference_validator_class()(schema).is_valid(items) is unique
    # The stock implementation agrees on what is equal.
    assert Draft202012Validator(schema).is_valid(items) is unique


def test_unique_items_scales_to_large_manifests() -> None:
    entries = [{"kind": "output", "digest": digest(str(i))} for i in range(30_000)]
    doc = {**evidence_manifest(), "evidence": entries}
    start = time.perf_counter()
    schemas.validate("evidence-manifest", doc, source=SOURCE)
    errors = list(schemas._unique_items(None, True, [*entries, dict(entries[7])], {}))
    elapsed = time.perf_counter() - start
    assert [error.message[:27] for error in errors] == ["items 7 and 30000 are equal"]
    # Comparing every pair, as the stock keyword does for objects, takes minutes here.
    assert elapsed < 10
    small = {**evidence_manifest(), "evidence": [*entries[:2000], dict(entries[3])]}
    assert "/evidence: items 3 and 2000 are equal" in rejection("evidence-manifest", small)


def test_compiler_refuses_unknown_keywords() -> None:
    assert schemagen.compile_schema({"patternProperties": {"^a": True}}) is None
    assert schemagen.compile_schema({"$ref": "https://example.org/other.json"}) is None
    assert schemagen.compile_schema({"prefixItems": [True]}) is None


def test_every_schema_compiles() -> None:
    for name in ALL:
        assert schemas._fast_check(name) is not None, name


# --- the compiled check agrees with the reference ------------------------------------

_INTERESTING_STRINGS = sorted(
    {
        D_OUT,
        UPPER,
        D_OUT + "\n",
        "",
        ".",
        "..",
        "a/b",
        "a\x00",
        "x" * 129,
        "rep_1",
        "2026-11-30T00:00:00Z",
        "2026-11-30T00:00:00.5Z",
        "2026-11-30",
        "data/blobs/sha256/ab",
        "data/../x",
        "judge.py",
        "prompts/../x",
        "report.export",
        "Report.Export",
        "evalbook.reproducibility_bundle.v1",
        "evalbook.evidence_manifest.v1",
        "1.0",
        "svc_evalbook",
        "manifest",
        "traces",
        "inline",
        "sso",
        "output",
        "trace",
        "artifact",
        "current",
        "superseded",
        "wilson",
        "bootstrap",
        "model_judge",
        "deterministic",
        "case_limit",
        "50",
        "scorer_digest_mismatch",
        "ab" * 32,
    }
)


def _vocabulary() -> list[Any]:
    words: set[Any] = set()
    for name in ALL:
        for _, node in _subschemas(schemas.load_schema(name)):
            for key in ("enum", "const"):
                if key in node:
                    values = node[key] if key == "enum" else [node[key]]
                    words.update(v for v in values if isinstance(v, (str, int)))
    return sorted(words, key=repr)


_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, -1, 2, 20000, 262144, 262145, 2**53 - 1]),
    st.sampled_from([0.0, 0.5, 1.0, 1.5, -0.5, 0.95]),
    st.sampled_from(_INTERESTING_STRINGS),
    st.sampled_from(_vocabulary()),
    st.text(max_size=5),
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["kind", "digest", "x", "id"]), inner, max_size=3)
    ),
    max_leaves=6,
)


def _locations(doc: Any, where: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield where
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _locations(value, (*where, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from _locations(value, (*where, index))


@st.composite
def _mutated(draw: st.DrawFn) -> tuple[str, Any]:
    name = draw(st.sampled_from(ALL))
    doc: Any = VALID[name]()
    for _ in range(draw(st.integers(1, 3))):
        locations = list(_locations(doc))
        where = draw(st.sampled_from(locations))
        # "borrow" copies a value from somewhere in a valid document: plausible shapes
        # keep many mutants valid, which probes "compiled accepts, reference rejects".
        action = draw(st.sampled_from(["set", "delete", "add", "borrow", "borrow"]))
        if not where:
            if action == "set":
                doc = draw(_VALUES)
            continue
        parent = doc
        for step in where[:-1]:
            parent = parent[step]
        key = where[-1]
        if action == "set":
            parent[key] = draw(_VALUES)
        elif action == "borrow":
            donor = VALID[draw(st.sampled_from([name, *ALL]))]()
            spot = draw(st.sampled_from(list(_locations(donor))))
            value = donor
            for step in spot:
                value = value[step]
            parent[key] = value
        elif action == "delete":
            del parent[key]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "trace_id", "kind", "detail"]))] = draw(_VALUES)
        else:
            parent.append(draw(_VALUES))
    return name, doc


@settings(
    max_examples=800,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(_mutated())
def test_compiled_check_agrees_with_reference(sample: tuple[str, Any]) -> None:
    name, doc = sample
    valid = assert_agree(name, doc)
    if valid:
        schemas.validate(name, doc, source=SOURCE)
    else:
        message = rejection(name, doc)
        # A value is quoted as it is (escaped once, where the message is shown), so the
        # message is one line once shown.
        assert re.match(
            rf"^{re.escape(SOURCE)}: (\(root\)|(/[^/ ]*)+): .+ \(schema {name}\)$",
            shown(message),
        ), message


def _grid() -> Iterator[tuple[str, Any]]:
    """Documents around every conditional rule, valid and invalid alike."""
    for location in ["inline", "sso", "traces", "blob"]:
        for size in [0, 262144, 262145, -1]:
            for trace_id in [None, "tr_1", "tr/1"]:
                for kind in ["output", "trace", "manifest"]:
                    ref: dict[str, Any] = {
                        "kind": kind,
                        "digest": D_OUT,
                        "size": size,
                        "location": location,
                    }
                    if trace_id is not None:
                        ref["trace_id"] = trace_id
                    doc = case()
                    doc["evidence"] = [ref]
                    yield "case", doc
                    doc = case()
                    doc["output"] = dict(ref)
                    yield "case", doc
    for count in [0, 1, 2, 20, 21]:
        for manifest_at in [None, 0, count - 1]:
            refs = [{"kind": "output", "digest": digest(str(i))} for i in range(count)]
            if manifest_at is not None and 0 <= manifest_at < count:
                refs[manifest_at] = {"kind": "manifest", "digest": D_MANIFEST}
            doc = report_body()
            doc["checks"][0]["evidence_refs"] = refs
            yield "report-body", doc
    for kind in ["deterministic", "model_judge", "harness_judge", "human_review", "other"]:
        for judge in [None, scorer()["judge"], {}, "judge"]:
            doc = scorer()
            doc["kind"] = kind
            doc["judge"] = judge
            yield "scorer", doc
    reasons = [*bundle()["unavailable"], {"reason": "lost"}]
    for entry in reasons:
        for detail in [None, "50", "0", "050", digest("x"), UPPER, 50]:
            doc = bundle()
            doc["unavailable"] = [{**bundle()["unavailable"][0], **entry, "detail": detail}]
            yield "bundle", doc


def test_compiled_check_agrees_on_conditionals() -> None:
    outcomes = {True: 0, False: 0}
    for name, doc in _grid():
        outcomes[assert_agree(name, doc)] += 1
    assert outcomes[True] > 40 and outcomes[False] > 40, outcomes


# --- cost ----------------------------------------------------------------------------


def test_twenty_thousand_cases_validate_quickly() -> None:
    lines = []
    for index in range(20_000):
        doc = case()
        doc["case_id"] = f"case-{index:06d}"
        doc["example"]["example_id"] = f"ex-{index // 2:05d}"
        doc["repeat"] = 1 + index % 2
        lines.append(doc)
    start = time.perf_counter()
    for doc in lines:
        schemas.validate("case", doc, source="cases/answer-accuracy.jsonl")
    elapsed = time.perf_counter() - start
    # About a second on one shared core; the reference validator alone needs ~25 s.
    assert elapsed < 10, f"20,000 cases took {elapsed:.1f} s"


@pytest.mark.parametrize(("bad", "named"), [([2999], 2999), ([1500], 1500), (range(3000), 0), ([7, 2000], 7)])
def test_the_first_entry_that_breaks_an_array_schema_is_the_one_named(bad: Any, named: int) -> None:
    # The explanation gives each entry to the compiled check of the items schema first
    # and explains the first it refuses: jsonschema walking 150,000 valid entries to
    # reach the one that was not took 20 s.
    doc = bundle()
    entries = [
        {"kind": "output", "ref": f"sha256:{i:064x}", "digest": f"sha256:{i:064x}",
         "reason": "payload_at_sso", "detail": None}
        for i in range(3000)
    ]
    for i in bad:
        entries[i]["digest"] = 5
    doc["unavailable"] = entries
    message = rejection("bundle", doc)
    assert message.startswith(f"{SOURCE}: /unavailable/{named}/digest: 5 is not of type"), message
    assert assert_agree("bundle", doc) is False
