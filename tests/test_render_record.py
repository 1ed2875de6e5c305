"""render reads a record as untrusted input (SPEC 14): schema-checked, re-derived, bounded.

By class: every field a record's items decide (verdict, each count, the unprovable
reasons, the strict forecast, eval-banana totals and result, audit counts, fixity counts)
is contradicted one at a time and must be refused, exit 3, naming the field; records
generated from the schemas, extremes included, either render or are refused, never raise;
the file path (streamed) and the in-memory path give the same page.
"""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path
from typing import Any

import pytest
import records
import schema_strategies
from conftest import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundler.core import canonical
from bundler.core.errors import CanonicalJSONError, InputError, SchemaError
from bundler.core.schemas import load_schema, validate
from bundler.report.page import render_record
from bundler.report.record import sift_path, sift_value

# (record maker, JSON pointer the refusal names, edit that contradicts the items)
Edit = tuple[str, str, Any]


def _set(path: str, value: Any) -> Any:
    def edit(r: dict[str, Any]) -> None:
        *parents, last = path.split("/")
        target = r
        for p in parents:
            target = target[int(p)] if isinstance(target, list) else target[p]
        target[last] = value

    return edit


def _bump(path: str) -> Any:
    def edit(r: dict[str, Any]) -> None:
        *parents, last = path.split("/")
        target = r
        for p in parents:
            target = target[p]
        target[last] += 1

    return edit


CONTRADICTIONS: list[Edit] = [
    ("verification", "/verdict", _set("verdict", "verified")),
    ("verification", "/counts/proven", _bump("counts/proven")),
    ("verification", "/counts/unprovable", _bump("counts/unprovable")),
    ("verification", "/counts/failed", _bump("counts/failed")),
    ("verification", "/unprovable_by_reason", _set("unprovable_by_reason", {"case_limit": 1})),
    ("verification", "/strict_forecast", _set("strict_forecast", "FAILED (9 claims)")),
    ("verification", "/strict", _set("strict", True)),
    ("verified", "/verdict", _set("verdict", "failed")),
    ("verified", "/strict_forecast", _set("strict_forecast", None)),
    ("eb", "/report_result", _set("report_result", "pass")),
    ("eb", "/summary/checks", _set("summary/checks/0/score", 1)),
    ("eb", "/summary/checks", _set("summary/checks/2/status", "passed")),
    *[
        ("eb", f"/summary/recomputed/{name}", _set(f"summary/recomputed/{name}", value))
        for name, value in [
            ("total_checks", 4),
            ("passed_checks", 0),
            ("failed_checks", 2),
            ("errored_checks", 0),
            ("points_earned", 3),
            ("total_points", 2),
            ("percentage", 100.0),
            ("meets_threshold", True),
            ("run_passed", True),
        ]
    ],
    *[
        ("audit", f"/counts/{name}", _bump(f"counts/{name}"))
        for name in (
            "checks",
            "agree",
            "disagree",
            "not_rederivable",
            "informational",
            "disagreements",
            "errors",
        )
    ],
    ("audit", "/errors", lambda r: r["checks"][0].update(errors=[])),
    ("audit", "/verification/verdict", _set("verification/counts/failed", 2)),
    ("fixity", "/checked", _bump("checked")),
    ("fixity", "/exit_code", _set("exit_code", 0)),
    ("fixity", "/counts/fail", lambda r: (_bump("counts/fail")(r), _bump("checked")(r))),
    ("fixity", "/counts/missing", lambda r: (_bump("counts/missing")(r), _bump("checked")(r))),
    ("fixity", "/counts/error", lambda r: (_bump("counts/error")(r), _bump("checked")(r))),
]


def _make(name: str) -> dict[str, Any]:
    if name == "verified":
        return records.consistent(
            records.verification(claims=[records.claim("proven"), records.claim("unprovable")])
        )
    if name == "eb":
        return records.eb_verification()
    return getattr(records, name)()


@pytest.mark.parametrize("name", ["verification", "verified", "eb", "audit", "fixity"])
def test_each_base_record_renders(name: str) -> None:
    render_record(_make(name))


@pytest.mark.parametrize(("name", "pointer", "edit"), CONTRADICTIONS)
def test_a_record_that_contradicts_itself_is_refused(name: str, pointer: str, edit: Any) -> None:
    record = _make(name)
    edit(record)
    with pytest.raises(InputError) as caught:
        render_record(record)
    message = caught.value.message
    assert f"record: {pointer}:" in message, message
    assert "\n" not in message


def test_refused_by_the_cli_exit_3_one_line_no_page(tmp_path: Path) -> None:
    record = records.verification(verdict="verified")  # its claims hold one failed claim
    source = tmp_path / "v.json"
    source.write_bytes(canonical.dumps(record))
    out = tmp_path / "v.html"
    proc = run_cli("render", str(source), "--html", str(out))
    assert proc.returncode == 3
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1 and "/verdict" in lines[0] and str(source) in lines[0], lines
    assert not out.exists()


def test_fixity_problems_that_outnumber_counts_are_refused() -> None:
    """The problems list exactly this run's bundles that did not pass (failures of
    earlier runs are in ``carried``): counts that say all passed beside a listed failure
    contradict the record."""
    record = records.fixity(counts={"pass": 3, "fail": 0, "missing": 0, "error": 0})
    with pytest.raises(InputError, match="/counts/fail: says 0, but the problems list 1"):
        render_record(record)


def test_fixity_carried_failure_did_not_pass() -> None:
    # Only a run that checks a part of the source (here --limit 3) leaves one unchecked.
    record = records.fixity(
        selection={"sample": None, "older_than_seconds": None, "limit": 3, "limit_bytes": None},
        counts={"pass": 3, "fail": 0, "missing": 0, "error": 0},
        problems=[],
        carried=[
            {
                "key": "old.tar.zst",
                "outcome": "fail",
                "detail": "x",
                "found": "2026-11-01T00:00:00.000000Z",
                "run_id": "r",
            }
        ],
    )
    page = render_record(record)[1].decode()
    assert "FAILED" in page and "✓ PASSED" not in page


@pytest.mark.parametrize(
    ("edit", "pointer"),
    [
        (_set("summary", {"labels": [["a", "b", "c"]]}), "/summary/labels/0"),
        (_set("summary", {"checks": []}), "/summary"),
        (_set("claims/0/state", "maybe"), "/claims/0/state"),
        (_set("counts", {"proven": -1, "unprovable": 1, "failed": 1}), "/counts/proven"),
    ],
)
def test_a_record_that_breaks_its_schema_is_refused_naming_the_field(
    edit: Any, pointer: str
) -> None:
    record = records.verification()
    edit(record)
    with pytest.raises(SchemaError) as caught:
        render_record(record)
    assert f"record: {pointer}:" in caught.value.message, caught.value.message


def test_schema_error_in_a_late_item_names_its_index(tmp_path: Path) -> None:
    record = records.verification()
    proven = records.claim("proven")
    record["claims"] = [proven] * 2500 + [dict(proven, group=99)] + [records.claim("failed")]
    path = tmp_path / "v.json"
    path.write_bytes(canonical.dumps(record))
    with pytest.raises(SchemaError) as caught:
        sift_path(path)
    assert f"{path}: /claims/2500/" in caught.value.message, caught.value.message


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"[]",
        b'{"schema": "evalbook.verification.v1"',
        b'{"claims": [{"a": "unterminated}]}',
        b'{"a": 1} {"b": 2}',
        b'{"a": 1, "a": 2}',
        b'{"claims": [' + b"[" * 100 + b"]" * 100 + b"]}",
        b'{"schema": "evalbook.inspect.v1"}',
        b'{"claims": [1, 2,]}',
        b'{"x": "\xff"}',
        b'{"x": 1e999}',
    ],
)
def test_malformed_files_are_refused_in_one_line(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(data)
    with pytest.raises(InputError) as caught:
        sift_path(path)
    assert str(path) in caught.value.message and "\n" not in caught.value.message


def test_extremes_in_free_values_render(tmp_path: Path) -> None:
    """The attacker's records: coverage 1e308 / -1e308 in an audit field (the schema
    admits any value there), and every extreme in the interval and threshold."""
    record = records.audit()
    fields = record["checks"][0]["fields"]
    fields[1] = records.field("coverage", "agree", {"expected": 1e308, "executed": -1e308})
    fields[2] = records.field("score", "agree", -1e308)
    fields[3] = records.field("aggregation", "agree", {"rule": "mean", "threshold": 1e308})
    fields.append(records.field("interval", "agree", {"low": 5e-324, "high": 1e308}))
    record = records.consistent(record)
    path = tmp_path / "a.json"
    path.write_bytes(canonical.dumps(record))
    out = tmp_path / "a.html"
    proc = run_cli("render", str(path), "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    assert render_record(sift_path(path))[1] == out.read_bytes() == render_record(record)[1]


def _strategy(name: str) -> st.SearchStrategy[Any]:
    schema = load_schema(name)
    return schema_strategies.from_schema(schema, schema)


KIND_SCHEMAS = ["verification", "audit", "fixity-summary"]
_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)


@pytest.mark.parametrize("name", KIND_SCHEMAS)
def test_any_generated_record_renders_or_is_refused(name: str) -> None:
    @_SETTINGS
    @given(_strategy(name))
    def check(record: Any) -> None:
        with contextlib.suppress(InputError):
            render_record(record)

    check()


@pytest.mark.parametrize("name", KIND_SCHEMAS)
def test_any_schema_valid_consistent_record_renders(name: str) -> None:
    """No record the schema admits makes render raise: made consistent, every generated
    record that is schema-valid renders, and its page says the derived verdict."""
    seen = []

    @_SETTINGS
    @given(_strategy(name))
    def check(record: Any) -> None:
        record = records.consistent(record)
        try:
            validate(name, record, source="generated")
        except SchemaError:
            return
        try:
            canonical.loads(canonical.dumps(record), source="generated")
        except CanonicalJSONError:
            # No file can hold it (SPEC 2: e.g. a float spelled as an integer past
            # 2^53): render refuses it in one line, from memory as from a file.
            return
        seen.append(1)
        kind, page = render_record(record)
        text = page.decode()
        if kind == "verification" and record["verdict"] != "error":
            assert record["verdict"].upper() in text
        assert "<script" not in text

    check()
    assert len(seen) >= 10, len(seen)


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.sampled_from(["verification", "audit", "fixity-summary"]).flatmap(
        lambda n: _strategy(n).map(records.consistent)
    )
)
def test_file_and_memory_give_the_same_page(tmp_path_factory: Any, record: Any) -> None:
    path = tmp_path_factory.mktemp("rec") / "r.json"
    try:
        data = canonical.dumps(record)
    except Exception:
        return
    path.write_bytes(data)
    try:
        expected = render_record(record)
    except InputError as exc:
        with pytest.raises(InputError) as caught:
            sift_path(path)
        assert caught.value.message.split(": ", 1)[1] == exc.message.split(": ", 1)[1]
        return
    assert render_record(sift_path(path)) == expected


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Any:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, (*path, i))
    else:
        yield path


def _outcome(render: Any) -> str | None:
    try:
        render()
    except InputError as exc:
        return exc.message.split(": ", 1)[1]
    return None


# Floats the file reader sees as integers past 2^53 (JCS spells integral floats under
# 1e21 without an exponent), the largest and smallest finite floats, and ordinary ones.
HUGE_FLOATS = [2.0**53, 1e20, 1e21, 1e308, -1e308]


@pytest.mark.parametrize("kind", ["verification", "audit"])
def test_file_and_memory_agree_on_huge_floats_in_every_field(kind: str, tmp_path: Path) -> None:
    base = records.consistent(getattr(records, kind)())
    path = tmp_path / "r.json"
    for where in list(_leaves(base)):
        for value in HUGE_FLOATS:
            record = copy.deepcopy(base)
            target = record
            for step in where[:-1]:
                target = target[step]
            target[where[-1]] = value
            path.write_bytes(canonical.dumps(record))
            memory = _outcome(lambda r=record: render_record(r))
            on_file = _outcome(lambda: render_record(sift_path(path)))
            assert memory == on_file, (where, value, memory, on_file)


def test_kept_items_are_bounded_and_the_rest_counted() -> None:
    record = records.verification()
    failed = records.claim("failed")
    record["claims"] = [dict(failed, subject=f"case {i}") for i in range(3000)]
    record = records.consistent(record)
    sifted = sift_value(copy.deepcopy(record))
    assert sifted.facts.failed.total == 3000 and len(sifted.facts.failed.items) == 1000
    assert "and 2000 more failed claims" in render_record(sifted)[1].decode()
    assert json.loads(json.dumps(record)) == record  # the record itself is not changed
