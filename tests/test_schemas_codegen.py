"""The generated acceptance checks of bundler.core.schemas agree with the reference validator.

The check compiled from each schema must answer exactly what the jsonschema reference
answers for JSON documents: mutants of valid documents of every schema, a table of small
schemas per keyword, and random schemas with random instances. Its source must depend on
the schema alone and hold no value taken from the schema or the document.
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import io
import json
import os
import subprocess
import sys
import tokenize
import types
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from test_schemas import MORE_VALID, VALID, digest

from bundler.core import schemagen, schemas
from bundler.core.errors import SchemaError

SOURCE = "store/doc.json"

# --- valid documents of the result schemas -------------------------------------------
# The store and bundle documents come from test_schemas; these four are written by
# verify, audit, prove and export-eb, shown here trimmed to a few entries each.


def verification() -> dict[str, Any]:
    return {
        "schema": "evalbook.verification.v1",
        "tool": {"name": "evalbook-bundle", "version": "0.1.0"},
        "verified_at": "2026-12-01T09:30:00Z",
        "source": "bundles/rpt-every-reason.tar.zst",
        "archive": {"sha256": digest("archive").removeprefix("sha256:"), "size": 7441},
        "verdict": "verified",
        "bundle_schema": "evalbook.reproducibility_bundle.v1",
        "bundle_digest": digest("bundle"),
        "report_id": "rpt-every-reason",
        "report_digest": digest("report"),
        "report_result": "error",
        "report_issued_at": "2026-10-20T09:30:00Z",
        "envelope": {
            "status": "superseded",
            "superseded_by": "rpt-clean",
            "superseded_at": "2026-10-21T08:00:00Z",
            "reason": "re_evaluation",
        },
        "anchor": {
            "expected_bundle_digest": None,
            "expected_report_digest": digest("report"),
            "signer": None,
            "self_consistent_only": False,
            "description": "expected report digest given on the command line",
        },
        "strict": False,
        "counts": {"proven": 2, "unprovable": 2, "failed": 0},
        "unprovable_by_reason": {"scorer_digest_mismatch": 1, "missing_from_store": 1},
        "strict_forecast": "FAILED (2 unprovable claims would fail)",
        "error": None,
        "summary": {},
        "claims": [
            {
                "group": 1,
                "group_name": "bagit",
                "subject": "bagit.txt declares BagIt 1.0, UTF-8",
                "state": "proven",
                "path": "bagit.txt",
                "expected": None,
                "observed": None,
                "reason": None,
                "detail": None,
            },
            {
                "group": 2,
                "group_name": "bundle",
                "subject": "bundle.json is schema-valid and stored canonical",
                "state": "proven",
                "path": "data/bundle.json",
                "expected": None,
                "observed": digest("bundle"),
                "reason": None,
                "detail": None,
            },
            {
                "group": 5,
                "group_name": "scorers",
                "subject": "scorer sc-drift@1",
                "state": "unprovable",
                "path": None,
                "expected": digest("scorer"),
                "observed": None,
                "reason": "scorer_digest_mismatch",
                "detail": digest("observed"),
            },
            {
                "group": 7,
                "group_name": "checks",
                "subject": "check result latency",
                "state": "unprovable",
                "path": None,
                "expected": None,
                "observed": None,
                "reason": "missing_from_store",
                "detail": None,
            },
        ],
    }


def verification_error() -> dict[str, Any]:
    doc = verification()
    doc.update(
        verdict="error",
        error="bundles/x.tar.zst: not a zstd frame",
        bundle_schema=None,
        bundle_digest=None,
        report_id=None,
        report_digest=None,
        counts={"proven": 0, "unprovable": 0, "failed": 0},
        unprovable_by_reason={},
        strict_forecast=None,
        report_result=None,
        report_issued_at=None,
        envelope=None,
        archive=None,
        claims=[],
    )
    return doc


def export_summary() -> dict[str, Any]:
    return {
        "schema": "evalbook.export_summary.v1",
        "path": "evalbook-bundle-rpt-every-reason.tar.zst",
        "report_id": "rpt-every-reason",
        "bundle_digest": digest("bundle"),
        "report_digest": digest("report"),
        "archive_sha256": digest("archive"),
        "archive_size": 7441,
        "exported_at": "2026-11-30T00:00:00Z",
        "counts": {
            "scorers": 1,
            "datasets": 2,
            "examples": 0,
            "checks": 4,
            "cases_total": 26,
            "cases_exported": 26,
            "payloads": 0,
            "unavailable": 7,
            "redacted": 45,
        },
        "unavailable_by_reason": {"digest_mismatch": 1, "missing_from_store": 4},
        "redacted_by_reason": {"no_dataset_read_body": 44, "trace_capture_policy": 1},
    }


def export_summary_uploaded() -> dict[str, Any]:
    doc = export_summary()
    doc["upload"] = {"status": "uploaded", "url": "s3://archive/eval/reports/bundles/x"}
    return doc


def export_eb_summary() -> dict[str, Any]:
    return {
        "schema": "evalbook.export_eb_summary.v1",
        "path": "eval-banana-bundle-20261130_022618_e23eabf2.tar.zst",
        "run_id": "20261130_022618_e23eabf2",
        "bundle_digest": digest("bundle"),
        "report_digest": digest("report"),
        "archive_sha256": digest("archive"),
        "archive_size": 8711,
        "exported_at": "2026-11-30T03:00:00Z",
        "run_passed": False,
        "counts": {"checks": 9, "run_files": 20, "definition_files": 13, "unavailable": 1},
        "unavailable_by_reason": {"definition_missing": 1},
    }


def _field(name: str, outcome: str, issued: Any, derived: Any) -> dict[str, Any]:
    return {
        "field": name,
        "outcome": outcome,
        "issued": [{"document": "data/report/body.json", "value": issued}],
        "derived": None if derived is None else {"value": derived},
        "comparison": "exact",
        "reason": None,
    }


def audit() -> dict[str, Any]:
    return {
        "schema": "evalbook.audit.v1",
        "source": "bundles/audit-inconsistent.tar.zst",
        "verdict": "inconsistent",
        "exit_code": 1,
        "error": None,
        "verification": {
            "verdict": "verified",
            "bundle_schema": "evalbook.reproducibility_bundle.v1",
            "bundle_digest": digest("bundle"),
            "report_id": "rpt-audit",
            "report_digest": digest("report"),
            "anchor": "none: this result shows self-consistency only",
            "counts": {"proven": 57, "unprovable": 0, "failed": 0},
            "report_result": "pass",
            "report_issued_at": "2026-10-20T09:30:00Z",
            "envelope": {
                "status": "current",
                "superseded_by": None,
                "superseded_at": None,
                "reason": None,
            },
        },
        "anchor": {
            "expected_bundle_digest": None,
            "expected_report_digest": None,
            "signer": "alice, key SHA256:x",
            "self_consistent_only": False,
            "description": "signed by alice, key SHA256:x",
        },
        "tool": {"name": "evalbook-bundle", "version": "0.1.0"},
        "audited_at": "2026-12-01T09:30:00Z",
        "archive": {"sha256": digest("archive").removeprefix("sha256:"), "size": 9000},
        "tolerance": {"value": 1e-12, "rule": "|issued - derived| <= 1e-12 x max(1, |issued|, |derived|)"},
        "counts": {
            "checks": 1,
            "agree": 2,
            "disagree": 1,
            "not_rederivable": 1,
            "informational": 1,
            "disagreements": 1,
            "errors": 1,
        },
        "report": {
            "report_id": "rpt-audit",
            "fields": [
                _field("checks", "agree", ["accuracy"], None),
                _field("result", "disagree", "pass", "fail"),
                {
                    **_field("score", "informational", 0.5, 0.25),
                    "comparison": "tolerance",
                    "reason": "score of a skipped check",
                },
            ],
        },
        "checks": [
            {
                "check_id": "accuracy",
                "required": True,
                "fields": [
                    _field("required", "agree", True, None),
                    {**_field("interval", "not_rederivable", None, None), "reason": "bootstrap"},
                ],
                "errors": [{"code": "missing_score", "message": "case c-1 has no score"}],
            }
        ],
        "disagreements": [
            {
                "scope": "report",
                "check_id": None,
                "field": "result",
                "kind": "issued_vs_derived",
                "issued": [{"document": "data/report/body.json", "value": "pass"}],
                "derived": {"value": "fail"},
                "comparison": "exact",
                "detail": "report result: issued pass (report body); derived fail",
            },
            {
                "scope": "check",
                "check_id": "accuracy",
                "field": "status",
                "kind": "between_documents",
                "issued": [
                    {"document": "data/report/body.json", "value": "pass"},
                    {"document": "data/checks/accuracy.json", "value": "fail"},
                ],
                "derived": None,
                "comparison": "exact",
                "detail": "check accuracy status: report body and check result differ",
            },
        ],
        "not_rederivable": [
            {
                "scope": "check",
                "check_id": "accuracy",
                "fields": ["interval", "score"],
                "reason": "bootstrap intervals are not re-derived",
            }
        ],
        "errors": [{"check_id": "accuracy", "code": "missing_score", "message": "no score"}],
    }


def audit_error() -> dict[str, Any]:
    doc = audit()
    doc.update(
        verdict="error",
        exit_code=3,
        error="bundle did not verify",
        verification=None,
        audited_at=None,
        archive=None,
        report=None,
        checks=[],
        disagreements=[],
        not_rederivable=[],
        errors=[],
    )
    return doc


def case_proof() -> dict[str, Any]:
    return {
        "schema": "evalbook.case_proof.v1",
        "head": {
            "schema": "evalbook.bundle_head.v1",
            "bundle_digest": digest("bundle"),
            "report_id": "rpt-clean",
            "report_digest": digest("report"),
            "exported_at": "2026-11-30T00:00:00Z",
            "cases_tree": {"tree_size": 32, "root": digest("root")[7:]},
        },
        "head_signature": "-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n",
        "case": {"case_id": "accuracy-00003", "status": "pass"},
        "leaf_index": 3,
        "audit_path": [digest(f"node-{i}")[7:] for i in range(5)],
    }


def case_proof_with_bytes() -> dict[str, Any]:
    doc = case_proof()
    doc.update(head_signature=None, audit_path=[], case_bytes="eyJhIjoxfQ==")
    return doc


def _eb_check(check_id: str, status: str) -> dict[str, Any]:
    stem = f"{check_id}-{digest(check_id)[7:]}"
    return {
        "check_id": check_id,
        "stem": stem,
        "status": status,
        "check_definition_sha256": digest(f"definition {check_id}"),
        "result": f"data/run/checks/{stem}.json",
        "stdout": f"data/run/checks/{stem}.stdout.txt",
        "stderr": None,
        "prompt": None,
        "definition": f"data/definitions/eval_checks/{check_id}.yaml",
        "script": None,
    }


def eb_bundle() -> dict[str, Any]:
    return {
        "schema": "evalbook.eval_banana_bundle.v1",
        "exported_at": "2026-11-30T00:00:00Z",
        "exporter": {"tool": "evalbook-bundle", "version": "0.1.0"},
        "run": {
            "run_id": "20261130_022618_e23eabf2",
            "digest": digest("run"),
            "path": "data/run/report.json",
            "project_root": "/srv/eb/project",
            "run_passed": False,
        },
        "files": [
            {"path": "data/definitions/eval_checks/crlf.yaml", "digest": digest("a"), "size": 170},
            {"path": "data/run/report.json", "digest": digest("run"), "size": 0},
        ],
        "checks": [_eb_check("crlf-inline", "passed"), _eb_check("exact-limit", "failed")],
        "unavailable": [
            {
                "kind": "definition",
                "ref": "checks/gone.yaml",
                "digest": digest("gone"),
                "reason": "definition_digest_mismatch",
                "detail": digest("observed"),
            },
            {
                "kind": "definition",
                "ref": "checks/missing.yaml",
                "digest": digest("missing"),
                "reason": "definition_missing",
                "detail": None,
            },
        ],
        "redacted": [],
        "cases_tree": {"tree_size": 9, "root": digest("root")[7:]},
    }


def reports_line() -> dict[str, Any]:
    return {
        "schema": "evalbook.reports_line.v1",
        "report_id": "rpt-superseded",
        "result": "pass",
        "issued_at": "2026-10-20T09:30:00Z",
        "envelope": {
            "status": "superseded",
            "superseded_by": "rpt-clean",
            "superseded_at": "2026-10-21T08:00:00Z",
            "superseded_reason": "re_evaluation",
        },
        "problems": [],
    }


def reports_line_unreadable() -> dict[str, Any]:
    return {
        "schema": "evalbook.reports_line.v1",
        "report_id": "rpt-broken",
        "result": None,
        "issued_at": None,
        "envelope": None,
        "problems": ["store/reports/rpt-broken/body.json: not a regular file"],
    }


def _variants(name: str) -> list[Callable[[], Any]]:
    base = VALID[name]

    def variant(mutate: Callable[[dict[str, Any]], None]) -> Callable[[], Any]:
        def build() -> Any:
            doc = base()
            mutate(doc)
            return doc

        return build

    return [base, *(variant(m) for n, m in MORE_VALID if n == name)]


SEEDS: dict[str, list[Callable[[], Any]]] = {name: _variants(name) for name in VALID}
SEEDS.update(
    {
        "verification": [verification, verification_error],
        "audit": [audit, audit_error],
        "case-proof": [case_proof, case_proof_with_bytes],
        "eb-bundle": [eb_bundle],
        "export-summary": [export_summary, export_summary_uploaded],
        "export-eb-summary": [export_eb_summary],
        "reports-line": [reports_line, reports_line_unreadable],
    }
)


def reference_accepts(name: str, doc: Any) -> bool:
    return bool(schemas.validator_for(name).is_valid(doc))


def test_every_schema_has_valid_seeds() -> None:
    assert sorted(SEEDS) == sorted(schemas.SCHEMA_NAMES)
    for name, builders in SEEDS.items():
        for build in builders:
            doc = build()
            errors = list(schemas.validator_for(name).iter_errors(doc))
            assert not errors, f"{name}: {[e.message for e in errors[:3]]}"
            # The stock implementation agrees: the seeds hold no ECMA-only corner.
            assert Draft202012Validator(schemas.load_schema(name)).is_valid(doc), name
            check = schemas._fast_check(name)
            assert check is not None and check(doc) is True, name


# --- mutants of valid documents -------------------------------------------------------


def _schema_nodes(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for key, value in node.items():
            if key not in ("enum", "const", "required"):
                yield from _schema_nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _schema_nodes(value)


@functools.cache
def _words(name: str) -> tuple[list[str], list[str]]:
    """The member names and the enum/const strings of schema ``name``."""
    members: set[str] = {"extra", "x"}
    vocabulary: set[str] = set()
    for node in _schema_nodes(schemas.load_schema(name)):
        properties = node.get("properties")
        if isinstance(properties, dict):
            members.update(properties)
        members.update(k for k in node.get("required", []) if isinstance(k, str))
        values = node.get("enum", [])
        if "const" in node:
            values = [*values, node["const"]]
        vocabulary.update(v for v in values if isinstance(v, str))
    return sorted(members), sorted(vocabulary)


def _locations(doc: Any, where: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield where
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _locations(value, (*where, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from _locations(value, (*where, index))


def _get(doc: Any, where: tuple[Any, ...]) -> Any:
    for step in where:
        doc = doc[step]
    return doc


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


_POOL: list[Any] = [None, True, False, 0, 1, -1, 1.0, 2.5, "", "x", [], {}, [1], {"x": 1}]
_EDGES: list[Any] = [-1, 0, 1, 2, 10, 11, 20, 21, 64, 65, 262144, 262145, 2**53, 0.5, 1e-12, -0.0]
_TEXTS: list[str] = [
    "",
    "a",
    "a b",
    "\n",
    "x" * 128,
    "x" * 129,
    "ok\x00",
    "data/run/checks/a",
    "data/definitions/a",
    "data/../x",
    "2026-11-30T00:00:00Z",
    "2026-13-30T00:00:00Z",
    "eyJ9",
    "=",
]
# Strings whose length in code points differs from their length in bytes or UTF-16 units.
_WIDE = ["é", "e\u0301", "😀", "日本"]


def _replacement(draw: st.DrawFn, name: str, doc: Any, target: Any) -> Any:
    members, vocabulary = _words(name)
    action = draw(
        st.sampled_from(
            [
                "retype",
                "bool",
                "float",
                "newline",
                "unicode",
                "edge",
                "word",
                "text",
                "borrow",
                "borrow",
                "extra",
                "drop-inner",
            ]
        )
    )
    if action == "retype":
        return draw(st.sampled_from([v for v in _POOL if _json_type(v) != _json_type(target)]))
    if action == "bool":
        return draw(st.booleans())
    if action == "float":
        if isinstance(target, int) and not isinstance(target, bool):
            return float(target)
        return draw(st.sampled_from([1.0, 0.0, 3.0, 0.5]))
    if action == "newline" and isinstance(target, str):
        return draw(st.sampled_from([target + "\n", "\n" + target, target + "\r\n"]))
    if action == "unicode" and isinstance(target, str):
        wide = draw(st.sampled_from(_WIDE))
        size = max(len(target) + draw(st.integers(-1, 1)), 0)
        return (wide * size)[:size] if len(wide) == 1 else target + wide
    if action == "edge":
        return draw(st.sampled_from(_EDGES))
    if action == "word" and vocabulary:
        return draw(st.sampled_from(vocabulary))
    if action == "text":
        return draw(st.sampled_from(_TEXTS))
    if action == "extra" and isinstance(target, dict):
        grown = dict(target)
        key = draw(st.sampled_from(members))
        grown[key] = copy.deepcopy(_get(doc, draw(st.sampled_from(list(_locations(doc))))))
        return grown
    if action == "extra" and isinstance(target, list):
        extra = (
            copy.deepcopy(draw(st.sampled_from(target))) if target else draw(st.sampled_from(_POOL))
        )
        return [*target, extra]
    if action == "drop-inner" and isinstance(target, dict) and target:
        key = draw(st.sampled_from(sorted(target)))
        return {k: v for k, v in target.items() if k != key}
    if action == "drop-inner" and isinstance(target, list) and target:
        index = draw(st.integers(0, len(target) - 1))
        return target[:index] + target[index + 1 :]
    # "borrow", and any action that does not fit the target: a value from elsewhere in a
    # valid document of the same kind, so that many mutants keep a plausible shape.
    donor = draw(st.sampled_from(SEEDS[name]))()
    return _get(donor, draw(st.sampled_from(list(_locations(donor)))))


@st.composite
def mutants(draw: st.DrawFn, name: str) -> Any:
    doc = draw(st.sampled_from(SEEDS[name]))()
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(list(_locations(doc))))
        target = _get(doc, where)
        new = copy.deepcopy(_replacement(draw, name, doc, target))
        if not where:
            doc = new
        else:
            _get(doc, where[:-1])[where[-1]] = new
    return doc


@pytest.mark.parametrize("name", schemas.SCHEMA_NAMES)
def test_mutants_agree_with_reference(name: str) -> None:
    check = schemas._fast_check(name)
    assert check is not None
    outcomes: Counter[bool] = Counter()

    @settings(
        max_examples=200,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(mutants(name))
    def agree(doc: Any) -> None:
        valid = reference_accepts(name, doc)
        assert check(doc) is valid, f"compiled check says {not valid} for {doc!r}"
        if not valid:
            with pytest.raises(SchemaError):
                schemas.validate(name, doc, source=SOURCE)
        outcomes[valid] += 1

    agree()
    # Both answers must be exercised, or the comparison proves little.
    assert outcomes[True] >= 5 and outcomes[False] >= 50, outcomes


# --- one keyword at a time ------------------------------------------------------------

ECMA = "ecma"  # rows where JSON Schema's ECMA-262 "$" differs from Python's re.search

# (schema, instance, valid?) with the answer worked out from the 2020-12 specification.
# fmt: off
KEYWORD_TABLE: list[tuple[Any, ...]] = [
    ({"type": "integer"}, 1, True),
    ({"type": "integer"}, 1.0, True),
    ({"type": "integer"}, -0.0, True),
    ({"type": "integer"}, 1e300, True),
    ({"type": "integer"}, 2**70, True),
    ({"type": "integer"}, 1.5, False),
    ({"type": "integer"}, True, False),
    ({"type": "integer"}, "1", False),
    ({"type": "integer"}, None, False),
    ({"type": "number"}, 1, True),
    ({"type": "number"}, 0.5, True),
    ({"type": "number"}, False, False),
    ({"type": "number"}, "0.5", False),
    ({"type": "boolean"}, True, True),
    ({"type": "boolean"}, 0, False),
    ({"type": "null"}, None, True),
    ({"type": "null"}, False, False),
    ({"type": "null"}, "", False),
    ({"type": "string"}, "", True),
    ({"type": "string"}, 1, False),
    ({"type": "array"}, [], True),
    ({"type": "array"}, {}, False),
    ({"type": "array"}, "ab", False),
    ({"type": "object"}, {}, True),
    ({"type": "object"}, [], False),
    ({"type": ["string", "null"]}, None, True),
    ({"type": ["string", "null"]}, "a", True),
    ({"type": ["string", "null"]}, 0, False),
    ({"type": ["integer", "boolean"]}, True, True),
    ({"type": ["integer", "boolean"]}, 2.0, True),
    ({"type": ["integer", "boolean"]}, 2.5, False),
    ({"enum": ["a", "b"]}, "a", True),
    ({"enum": ["a", "b"]}, "c", False),
    ({"enum": ["a", "b"]}, None, False),
    ({"enum": ["a", "b"]}, ["a"], False),
    ({"enum": [1, None]}, 1.0, True),
    ({"enum": [1, None]}, True, False),
    ({"enum": [1, None]}, None, True),
    ({"enum": [1, None]}, "1", False),
    ({"enum": [False]}, 0, False),
    ({"enum": [False]}, False, True),
    ({"enum": [[1, {"a": True}]]}, [1.0, {"a": True}], True),
    ({"enum": [[1, {"a": True}]]}, [1, {"a": 1}], False),
    ({"enum": [[1, {"a": True}]]}, [{"a": True}, 1], False),
    ({"const": "x"}, "x", True),
    ({"const": "x"}, "x\n", False),
    ({"const": "x"}, ["x"], False),
    ({"const": 0}, 0.0, True),
    ({"const": 0}, -0.0, True),
    ({"const": 0}, False, False),
    ({"const": None}, None, True),
    ({"const": None}, False, False),
    ({"const": {"a": [1]}}, {"a": [1.0]}, True),
    ({"const": {"a": [1]}}, {"a": [True]}, False),
    ({"const": {"a": [1]}}, {"a": [1], "b": 1}, False),
    ({"pattern": "^a$"}, "a", True),
    ({"pattern": "^a$"}, "a\n", False, ECMA),
    ({"pattern": "^a$"}, "ba", False),
    ({"pattern": "^a$"}, 7, True),
    ({"pattern": "b"}, "abc", True),
    ({"pattern": "b"}, "ac", False),
    ({"pattern": "^[$]$"}, "$", True),
    ({"pattern": "^.{2}$"}, "😀😀", True),
    ({"pattern": "^.{2}$"}, "😀", False),
    ({"minLength": 2}, "ab", True),
    ({"minLength": 2}, "a", False),
    ({"minLength": 2}, "😀😀", True),
    ({"minLength": 2}, "😀", False),
    ({"minLength": 2}, 5, True),
    ({"minLength": 2}, ["a"], True),
    ({"maxLength": 1}, "é", True),
    ({"maxLength": 1}, "e\u0301", False),
    ({"maxLength": 1}, "😀", True),
    ({"maxLength": 1}, "ab", False),
    ({"maxLength": 1}, "", True),
    ({"minimum": 1}, 1, True),
    ({"minimum": 1}, 1.0, True),
    ({"minimum": 1}, 0.999, False),
    ({"minimum": 1}, True, True),
    ({"minimum": 1}, "0", True),
    ({"maximum": 1.5}, 1.5, True),
    ({"maximum": 1.5}, 2, False),
    ({"maximum": 1.5}, False, True),
    ({"maximum": 9007199254740992}, 2**53, True),
    ({"maximum": 9007199254740992}, 2**53 + 1, False),
    ({"exclusiveMinimum": 0}, 0, False),
    ({"exclusiveMinimum": 0}, 0.0, False),
    ({"exclusiveMinimum": 0}, 1e-9, True),
    ({"exclusiveMinimum": 0}, None, True),
    ({"exclusiveMaximum": 1}, 1, False),
    ({"exclusiveMaximum": 1}, 0.5, True),
    ({"required": ["a", "b"]}, {"a": 1, "b": 2}, True),
    ({"required": ["a", "b"]}, {"a": 1}, False),
    ({"required": ["a", "b"]}, ["a", "b"], True),
    ({"required": ["a"]}, {"a": None}, True),
    ({"required": ["a"]}, {"b": None}, False),
    ({"properties": {"a": {"type": "integer"}}}, {"a": 1}, True),
    ({"properties": {"a": {"type": "integer"}}}, {"a": "1"}, False),
    ({"properties": {"a": {"type": "integer"}}}, {}, True),
    ({"properties": {"a": {"type": "integer"}}}, {"b": "1"}, True),
    ({"properties": {"a": {"type": "integer"}}}, [1], True),
    ({"properties": {"a": False}}, {"a": None}, False),
    ({"properties": {"a": False}}, {}, True),
    ({"properties": {"a": True}, "additionalProperties": False}, {"a": 1}, True),
    ({"properties": {"a": True}, "additionalProperties": False}, {"a": 1, "b": 1}, False),
    ({"properties": {"a": True}, "additionalProperties": False}, {}, True),
    ({"additionalProperties": False}, {}, True),
    ({"additionalProperties": False}, {"a": 1}, False),
    ({"additionalProperties": {"type": "string"}}, {"x": "y"}, True),
    ({"additionalProperties": {"type": "string"}}, {"x": 1}, False),
    ({"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
     {"a": 1, "b": "x"}, True),
    ({"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
     {"a": "x"}, False),
    ({"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
     {"b": 1}, False),
    ({"type": "object", "properties": {"a": True, "b": True}, "required": ["a", "b"],
      "additionalProperties": False}, {"a": 1, "b": 2}, True),
    ({"type": "object", "properties": {"a": True, "b": True}, "required": ["a", "b"],
      "additionalProperties": False}, {"a": 1}, False),
    ({"type": "object", "properties": {"a": True, "b": True}, "required": ["a", "b"],
      "additionalProperties": False}, {"a": 1, "b": 2, "c": 3}, False),
    ({"type": "object", "properties": {"a": True}, "required": ["a", "b"],
      "additionalProperties": False}, {"a": 1}, False),
    ({"propertyNames": {"pattern": "^[a-z]+$"}}, {"ab": 1}, True),
    ({"propertyNames": {"pattern": "^[a-z]+$"}}, {"Ab": 1}, False),
    ({"propertyNames": {"pattern": "^[a-z]+$"}}, {"ab\n": 1}, False, ECMA),
    ({"propertyNames": {"maxLength": 1}}, {"ab": 1}, False),
    ({"propertyNames": False}, {}, True),
    ({"propertyNames": False}, {"a": 1}, False),
    ({"items": {"type": "integer"}}, [1, 2], True),
    ({"items": {"type": "integer"}}, [1, "2"], False),
    ({"items": {"type": "integer"}}, [True], False),
    ({"items": {"type": "integer"}}, [], True),
    ({"items": {"type": "integer"}}, "12", True),
    ({"items": False}, [], True),
    ({"items": False}, [1], False),
    ({"minItems": 1}, [], False),
    ({"minItems": 1}, [0], True),
    ({"minItems": 1}, "", True),
    ({"maxItems": 1}, [1, 2], False),
    ({"maxItems": 1}, "ab", True),
    ({"uniqueItems": True}, [1, 1.0], False),
    ({"uniqueItems": True}, [1, True], True),
    ({"uniqueItems": True}, [0, False, None], True),
    ({"uniqueItems": True}, [{"a": 1}, {"a": 1}], False),
    ({"uniqueItems": True}, [[1], [True]], True),
    ({"uniqueItems": True}, "aa", True),
    ({"uniqueItems": False}, [1, 1], True),
    ({"contains": {"const": 2}}, [1, 2], True),
    ({"contains": {"const": 2}}, [1], False),
    ({"contains": {"const": 2}}, [], False),
    ({"contains": {"const": 2}}, "2", True),
    ({"contains": True}, [], False),
    ({"contains": True}, [None], True),
    ({"allOf": [{"type": "integer"}, {"minimum": 2}]}, 2, True),
    ({"allOf": [{"type": "integer"}, {"minimum": 2}]}, 1, False),
    ({"allOf": [{"type": "integer"}, {"minimum": 2}]}, 2.5, False),
    ({"anyOf": [{"type": "null"}, {"type": "string", "minLength": 1}]}, None, True),
    ({"anyOf": [{"type": "null"}, {"type": "string", "minLength": 1}]}, "", False),
    ({"anyOf": [{"type": "null"}, {"type": "string", "minLength": 1}]}, "a", True),
    ({"anyOf": [{"type": "null"}, {"type": "string", "minLength": 1}]}, 0, False),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, -1, True),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, 1, False),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, 0.5, True),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, -0.5, False),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, "x", True),
    ({"oneOf": [{"type": "integer"}, {"type": "integer"}]}, 1, False),
    ({"not": {"type": "string"}}, 1, True),
    ({"not": {"type": "string"}}, "a", False),
    ({"not": {"items": {"type": "string"}}}, [1], True),
    ({"not": {"items": {"type": "string"}}}, ["a"], False),
    *[
        ({"if": {"properties": {"k": {"const": "a"}}, "required": ["k"]},
          "then": {"required": ["x"]}, "else": {"not": {"required": ["x"]}}}, doc, valid)
        for doc, valid in [({"k": "a", "x": 1}, True), ({"k": "a"}, False), ({"k": "b"}, True),
                           ({"k": "b", "x": 1}, False), ({}, True), ({"x": 1}, False)]
    ],
    ({"if": {"minimum": 5}, "then": {"maximum": 10}}, 7, True),
    ({"if": {"minimum": 5}, "then": {"maximum": 10}}, 11, False),
    ({"if": {"minimum": 5}, "then": {"maximum": 10}}, 3, True),
    ({"if": {"minimum": 5}, "then": {"maximum": 10}}, "x", True),
    ({"if": {"type": "string"}, "else": {"type": "integer"}}, 1.5, False),
    ({"if": {"type": "string"}, "else": {"type": "integer"}}, "s", True),
    ({"if": False, "then": False}, 1, True),
    ({"then": False}, 1, True),
    ({"else": False}, 1, True),
    ({"$defs": {"pos": {"type": "integer", "minimum": 1}}, "$ref": "#/$defs/pos"}, 1, True),
    ({"$defs": {"pos": {"type": "integer", "minimum": 1}}, "$ref": "#/$defs/pos"}, 0, False),
    ({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "maxLength": 2}, "ab", True),
    ({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "maxLength": 2}, "abc", False),
    ({"$defs": {"tree": {"type": "array", "items": {"$ref": "#/$defs/tree"}}},
      "$ref": "#/$defs/tree"}, [[], [[]]], True),
    ({"$defs": {"tree": {"type": "array", "items": {"$ref": "#/$defs/tree"}}},
      "$ref": "#/$defs/tree"}, [[], [1]], False),
    (True, {"anything": [1]}, True),
    (False, None, False),
    ({}, "anything", True),
    ({"title": "t", "description": "d", "$comment": "c", "type": "null"}, None, True),
]
# fmt: on


def _rows() -> Iterator[Any]:
    for row in KEYWORD_TABLE:
        schema, instance, valid = row[:3]
        ecma = len(row) > 3
        yield pytest.param(schema, instance, valid, ecma, id=f"{json.dumps(schema)} {instance!r}")


def _contexts(schema: Any, instance: Any) -> Iterator[tuple[dict[str, Any], Any]]:
    """``schema`` as a document, then wrapped so that it is compiled as an expression
    (inside ``anyOf``, inside a double ``not``) and as a function of its own (under
    ``items`` inside ``not``), each with an instance valid exactly when ``instance`` is."""
    if not isinstance(schema, dict):
        schema = {"allOf": [schema]}
    defs = {"$defs": schema["$defs"]} if "$defs" in schema else {}
    inner = {key: value for key, value in schema.items() if key != "$defs"}
    yield schema, instance
    yield {"anyOf": [inner, False], **defs}, instance
    yield {"not": {"not": inner}, **defs}, instance
    yield {"not": {"items": {"not": inner}}, **defs}, [instance]


@pytest.mark.parametrize(("schema", "instance", "valid", "ecma"), list(_rows()))
def test_keyword_table(schema: Any, instance: Any, valid: bool, ecma: bool) -> None:
    for document, value in _contexts(schema, instance):
        Draft202012Validator.check_schema(document)
        check = schemagen.compile_schema(document)
        assert check is not None, document
        assert check(value) is valid, document
        assert schemas.reference_validator_class()(document).is_valid(value) is valid, document
        # The stock implementation reads "$" as Python does; everything else is the same.
        assert Draft202012Validator(document).is_valid(value) is (valid != ecma), document


def test_every_keyword_is_in_the_table() -> None:
    used: set[str] = set()
    for row in KEYWORD_TABLE:
        for node in _schema_nodes(row[0]):
            used.update(node)
    assert used >= schemagen._KEYWORDS


@pytest.mark.parametrize(
    "schema",
    [
        {"patternProperties": {"^a": True}},
        {"format": "date-time"},
        {"prefixItems": [True]},
        {"items": [{"type": "string"}]},
        {"type": "float"},
        {"type": ["string", 1]},
        {"enum": "a"},
        {"minLength": "2"},
        {"minimum": True},
        {"required": "a"},
        {"required": [1]},
        {"properties": {"a": 1}},
        {"uniqueItems": 1},
        {"anyOf": {"type": "null"}},
        {"pattern": "("},
        {"pattern": 1},
        {"if": True, "then": 1},
        {"$ref": "#"},
        {"$ref": "#/$defs/missing", "$defs": {}},
        {"$ref": "#/$defs/a~1b", "$defs": {"a~1b": True, "a/b": True}},
        {"$ref": "#/$defs/a%25", "$defs": {"a%25": True, "a%": True}},
        {"properties": {"a": {"$id": "urn:other", "$defs": {"x": True}}}},
        {
            "$ref": "#/$defs/a",
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"dependentRequired": {}}},
        },
        {"$ref": "#/$defs/leaf", "$defs": {"leaf": {"type": "string", "format": "uri"}}},
    ],
    ids=json.dumps,
)
def test_unknown_constructs_are_refused(schema: dict[str, Any]) -> None:
    assert schemagen.generate_check(schema) is None
    assert schemagen.compile_schema(schema) is None


def test_unused_definitions_are_not_compiled() -> None:
    schema = {"type": "string", "$defs": {"other": {"format": "uri"}}}
    check = schemagen.compile_schema(schema)
    assert check is not None and check("x") is True and check(1) is False


# --- random schemas -------------------------------------------------------------------

_KEYS = ["a", "b", "c"]
_SCALARS = [None, True, False, 0, 1, -1, 2, 1.0, 2.5, -0.5, "", "a", "ab", "a\n", "é", "😀😀", "b"]
_JSON = st.recursive(
    st.sampled_from(_SCALARS),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=3)
    ),
    max_leaves=8,
)
_TYPES = ["null", "boolean", "integer", "number", "string", "array", "object"]


@functools.cache
def _leaf_keywords(refs: tuple[str, ...]) -> st.SearchStrategy[dict[str, Any]]:
    options = [
        st.builds(lambda t: {"type": t}, st.sampled_from(_TYPES)),
        st.builds(
            lambda t: {"type": t},
            st.lists(st.sampled_from(_TYPES), min_size=1, max_size=3, unique=True),
        ),
        st.builds(lambda v: {"enum": v}, st.lists(_JSON, min_size=1, max_size=3)),
        st.builds(lambda v: {"const": v}, _JSON),
        st.builds(
            lambda p: {"pattern": p}, st.sampled_from(["^a", "b$", "^a+$", "^[a-c]*$", "é", "^.$"])
        ),
        st.builds(
            lambda k, n: {k: n},
            st.sampled_from(["minLength", "maxLength", "minItems", "maxItems"]),
            st.integers(0, 3),
        ),
        st.builds(
            lambda k, n: {k: n},
            st.sampled_from(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]),
            st.sampled_from([-1, 0, 1, 1.5, 2]),
        ),
        st.builds(
            lambda r: {"required": r}, st.lists(st.sampled_from(_KEYS), max_size=3, unique=True)
        ),
        st.builds(lambda u: {"uniqueItems": u}, st.booleans()),
    ]
    if refs:
        reference = st.builds(lambda r: {"$ref": f"#/$defs/{r}"}, st.sampled_from(refs))
        options += [reference, reference]
    return st.one_of(options)


def _merge(fragments: list[dict[str, Any]]) -> dict[str, Any]:
    schema: dict[str, Any] = {}
    for fragment in fragments:
        schema.update(fragment)
    return schema


@functools.cache
def _schemas(depth: int, refs: tuple[str, ...], below: tuple[str, ...]) -> st.SearchStrategy[Any]:
    """Random schemas; ``refs`` may be used here, ``below`` once inside a member or item."""
    leaf = st.booleans() | _leaf_keywords(refs).map(lambda f: _merge([f]))
    if depth <= 0:
        return leaf
    same = _schemas(depth - 1, refs, below)
    deeper = _schemas(depth - 1, below, below)
    fragments = st.one_of(
        _leaf_keywords(refs),
        st.builds(
            lambda p, a: {"properties": p, **({} if a is None else {"additionalProperties": a})},
            st.dictionaries(st.sampled_from(_KEYS), deeper, max_size=3),
            st.none() | st.booleans() | deeper,
        ),
        st.builds(lambda s: {"additionalProperties": s}, deeper),
        st.builds(lambda s: {"propertyNames": s}, deeper),
        st.builds(lambda s: {"items": s}, deeper),
        st.builds(lambda s: {"contains": s}, deeper),
        st.builds(lambda s: {"not": s}, same),
        st.builds(
            lambda k, s: {k: s},
            st.sampled_from(["allOf", "anyOf", "oneOf"]),
            st.lists(same, min_size=1, max_size=3),
        ),
        st.builds(
            lambda c, t, e: {
                "if": c,
                **({} if t is None else {"then": t}),
                **({} if e is None else {"else": e}),
            },
            same,
            st.none() | same,
            st.none() | same,
        ),
    )
    combined = st.lists(fragments, min_size=1, max_size=3).map(_merge)
    # Mostly composite: one_of alone would pick the leaf half of the time.
    return st.integers(0, 3).flatmap(lambda pick: leaf if pick == 0 else combined)


@st.composite
def random_documents(draw: st.DrawFn) -> dict[str, Any]:
    leaf = draw(_schemas(2, (), ()))
    # "node" may refer to itself only below a member or an item, so that every
    # recursion consumes a level of the instance.
    node = draw(_schemas(3, ("leaf",), ("leaf", "node")))
    root = draw(_schemas(3, ("leaf", "node"), ("leaf", "node")))
    if not isinstance(root, dict):
        root = {"allOf": [root]}
    return {**root, "$defs": {"leaf": leaf, "node": node}}


@settings(
    max_examples=800,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(random_documents(), st.lists(_JSON, min_size=1, max_size=6))
def test_random_schemas_agree_with_reference(
    document: dict[str, Any], instances: list[Any]
) -> None:
    Draft202012Validator.check_schema(document)
    check = schemagen.compile_schema(document)
    assert check is not None
    reference = schemas.reference_validator_class()(document)
    for instance in instances:
        assert check(instance) is reference.is_valid(instance), instance


# --- depth and recursion --------------------------------------------------------------


def _deep(keyword: str, leaf: Any) -> tuple[Any, Any]:
    """A schema 40 levels deep under ``keyword`` and an instance as deep, ``leaf`` inside."""
    # 40 levels: beyond Python's 20 nested loops, and its indentation limit if inlined.
    schema: Any = {"type": "integer"}
    instance = leaf
    for _ in range(40):
        if keyword == "properties":
            schema, instance = {"properties": {"a": schema}}, {"a": instance}
        elif keyword == "additionalProperties":
            schema, instance = {"additionalProperties": schema}, {"k": instance}
        elif keyword == "items":
            schema, instance = {"items": schema}, [instance]
        else:
            schema = {keyword: schema}
    return schema, instance


@pytest.mark.parametrize("keyword", ["properties", "additionalProperties", "items", "not"])
def test_deep_schemas_compile_and_agree(keyword: str) -> None:
    schema, _ = _deep(keyword, None)
    check = schemagen.compile_schema(schema)
    assert check is not None
    reference = schemas.reference_validator_class()(schema)
    outcomes = set()
    for leaf in [1, "x", None, 2.5]:
        _, instance = _deep(keyword, leaf)
        valid = reference.is_valid(instance)
        assert check(instance) is valid, leaf
        outcomes.add(valid)
    assert outcomes == {True, False}


def test_recursion_past_the_stack_is_left_to_the_reference() -> None:
    schema = {
        "$defs": {"tree": {"type": "array", "items": {"$ref": "#/$defs/tree"}}},
        "$ref": "#/$defs/tree",
    }
    check = schemagen.compile_schema(schema)
    assert check is not None
    deep: list[Any] = []
    for _ in range(50_000):
        deep = [deep]
    assert check(deep) is False
    assert check([[], [[]]]) is True


def test_wide_one_of_compiles() -> None:
    schema = {"oneOf": [{"const": i} for i in range(300)]}
    check = schemagen.compile_schema(schema)
    assert check is not None
    assert check(299) is True and check(300) is False


# --- the source ---------------------------------------------------------------------

HOSTILE = [
    "'); import os; os.system('x') #",
    '"""',
    "{v}",
    "{c}",
    "\n    return True\n",
    "__import__",
    "x",
    "_missing",
    "_c0",
    "\\",
    "日本",
    "",
]


def hostile_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {word: {"enum": [word, f"{word}!"], "maxLength": 1e308} for word in HOSTILE},
        "required": [HOSTILE[0], HOSTILE[4]],
        "propertyNames": {"not": {"const": "\"'"}},
        "additionalProperties": {"pattern": "^(x|'|\")$", "minimum": -(2**80)},
        "$defs": {word: {"const": word} for word in HOSTILE},
        "anyOf": [{"$ref": f"#/$defs/{HOSTILE[2]}"}, {"properties": {"x": {"$ref": "#/$defs/x"}}}],
    }


def _tokens(source: str) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(source).readline))


def _code_constants(code: types.CodeType) -> Iterator[Any]:
    for value in code.co_consts:
        if isinstance(value, types.CodeType):
            yield from _code_constants(value)
        else:
            yield value


# Python keywords, and the builtins and methods the generated checks call; every other
# name is generated and starts with "_", apart from the parameter "x".
_SOURCE_WORDS = {
    "def",
    "return",
    "if",
    "else",
    "for",
    "in",
    "break",
    "pass",
    "try",
    "except",
    "not",
    "and",
    "or",
    "is",
    "True",
    "False",
    "None",
    "x",
    "isinstance",
    "len",
    "type",
    "int",
    "float",
    "bool",
    "str",
    "list",
    "dict",
    "RecursionError",
    "keys",
    "values",
    "items",
    "get",
    "is_integer",
}


@pytest.mark.parametrize("name", [*schemas.SCHEMA_NAMES, "(hostile)"])
def test_source_holds_no_schema_value(name: str) -> None:
    schema = hostile_schema() if name == "(hostile)" else schemas.load_schema(name)
    generated = schemagen.generate_check(schema)
    assert generated is not None
    tokens = _tokens(generated.source)
    assert not [t for t in tokens if t.type == tokenize.STRING]
    assert {t.string for t in tokens if t.type == tokenize.NUMBER} <= {"0", "1"}
    names = {t.string for t in tokens if t.type == tokenize.NAME}
    assert {n for n in names if not n.startswith("_")} <= _SOURCE_WORDS
    code = compile(generated.source, "<schema test>", "exec")
    assert not [c for c in _code_constants(code) if isinstance(c, (str, bytes))]


def test_hostile_schema_values_stay_constants() -> None:
    schema = hostile_schema()
    generated = schemagen.generate_check(schema)
    assert generated is not None
    for word in HOSTILE:
        assert word in generated.constants.values()
    # Words that could only come from the schema (quotes, braces, backslash, non-ASCII).
    for word in [HOSTILE[0], HOSTILE[1], HOSTILE[2], HOSTILE[3], HOSTILE[5], "\\", "日本"]:
        assert word not in generated.source, word
    check = generated.build("hostile")
    reference = schemas.reference_validator_class()(schema)
    instances: list[Any] = [
        {HOSTILE[0]: HOSTILE[0], HOSTILE[4]: HOSTILE[4], "x": "{v}"},
        {HOSTILE[0]: HOSTILE[0], HOSTILE[4]: HOSTILE[4], "x": "x"},
        {HOSTILE[0]: HOSTILE[0], HOSTILE[4]: HOSTILE[4]},
        {HOSTILE[0]: HOSTILE[0], HOSTILE[4]: HOSTILE[4], "'": "'"},
        {HOSTILE[0]: HOSTILE[0], HOSTILE[4]: HOSTILE[4], "\"'": "'"},
        {HOSTILE[0]: "no", HOSTILE[4]: HOSTILE[4], "x": "{v}"},
        {HOSTILE[0]: HOSTILE[0]},
        "{v}",
    ]
    outcomes = [reference.is_valid(doc) for doc in instances]
    assert True in outcomes and False in outcomes
    for doc, valid in zip(instances, outcomes, strict=True):
        assert check(doc) is valid, doc


def test_source_does_not_depend_on_documents_checked() -> None:
    schema = schemas.load_schema("case")
    before = schemagen.generate_check(schema)
    check = schemagen.compile_schema(schema)
    assert before is not None and check is not None
    for doc in [*(build() for build in SEEDS["case"]), {"case_id": "'); x('"}, ["{v}"], "\n"]:
        check(doc)
    after = schemagen.generate_check(schema)
    assert after is not None
    assert after.source == before.source
    assert list(after.constants) == list(before.constants)


def _comparable(constants: Any) -> list[tuple[str, Any]]:
    """The constants table with compiled patterns and helpers shown by what they are."""
    shown: list[tuple[str, Any]] = []
    for key, value in constants.items():
        owner = getattr(value, "__self__", None)
        if owner is not None and hasattr(owner, "pattern"):
            value = ("pattern", owner.pattern)
        elif callable(value):
            value = ("function", value.__name__)
        shown.append((key, value))
    return shown


def test_generation_is_deterministic() -> None:
    for name in schemas.SCHEMA_NAMES:
        first = schemagen.generate_check(schemas.load_schema(name))
        second = schemagen.generate_check(copy.deepcopy(schemas.load_schema(name)))
        assert first is not None and second is not None
        assert first.source == second.source, name
        assert _comparable(first.constants) == _comparable(second.constants), name


_PRINT_SOURCES = """
import hashlib
from bundler.core import schemagen, schemas
for name in schemas.SCHEMA_NAMES:
    print(name, hashlib.sha256(schemagen.generate_check(schemas.load_schema(name)).source.encode()).hexdigest())
"""


def test_generation_does_not_depend_on_hash_seed() -> None:
    outputs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run(
            [sys.executable, "-c", _PRINT_SOURCES],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1]
    local = "".join(
        f"{name} {hashlib.sha256(g.source.encode()).hexdigest()}\n"
        for name in schemas.SCHEMA_NAMES
        if (g := schemagen.generate_check(schemas.load_schema(name))) is not None
    )
    assert outputs[0] == local


def test_closed_object_is_one_key_set_comparison() -> None:
    generated = schemagen.generate_check(schemas.load_schema("case"))
    assert generated is not None
    tree = ast.parse(generated.source)
    entry = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_check")
    comparisons = [
        node
        for node in ast.walk(entry)
        if isinstance(node, ast.Compare)
        and isinstance(node.left, ast.Call)
        and isinstance(node.left.func, ast.Attribute)
        and node.left.func.attr == "keys"
        and isinstance(node.ops[0], ast.Eq)
    ]
    # The case itself and its example: closed objects whose members are all required.
    assert len(comparisons) == 2
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    # The document, plus payload_ref: the one definition that refers to others.
    assert names == ["_check", "_d0"]
