"""SPEC 16 and 12: an imported report re-derives under ``audit``, by class.

Every check's score, status and result, and the report's result and reasons, are what
SPEC 12 derives from the cases, over every aggregation rule a decision may give, with
and without a threshold, for both runners, and for an Inspect scorer that reports a
dispersion metric beside its mean. The runner's own value of the metric is kept in the
check's observations. (A header that disagrees with its samples is refused instead:
tests/test_import_hostile.py, every way.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from test_import_hostile import build_zip, edit_json
from test_importers import (
    EXPORTED_AT,
    INSPECT_LOG,
    LM_RESULTS,
    LM_SAMPLES,
    agg,
    body_of,
    decision,
)

from bundler.bundles.audit import audit_bundle
from bundler.core.claims import VerifyOptions
from bundler.evalbook.audit import AuditVerdict
from bundler.evalbook.export import ExportConfig, export_bundle
from bundler.importers.importing import ImportConfig, Runner, import_run

# (runner, a check it gives, its repeats, the score its samples give under mean)
RUNS = {
    "inspect": (Runner.INSPECT, "match.accuracy", 2, 2.5 / 3),
    "lm-eval": (Runner.LM_EVAL, "fixture_mc.acc.none", 1, 1 / 3),
}
RULES = ["all_pass", "pass_rate", "mean", "min"]


def _files(runner: Runner) -> tuple[Path, ...]:
    return (INSPECT_LOG,) if runner is Runner.INSPECT else (LM_RESULTS, *LM_SAMPLES)


def _import_and_audit(
    runner: Runner, run_files: tuple[Path, ...], d: Path | None, tmp: Path
) -> tuple[dict[str, Any], Any]:
    store = tmp / "store"
    result = import_run(ImportConfig(runner, run_files, store, (), (), d, None, "alice"))
    bundle = tmp / "b.tar.zst"
    export_bundle(ExportConfig(str(store), result.report_id, "alice", EXPORTED_AT, out=bundle))
    audit = audit_bundle(str(bundle), VerifyOptions())
    return body_of(store, result.report_id), audit


@pytest.mark.parametrize("name", sorted(RUNS))
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("threshold", [None, 0.0, 0.3, 0.9])
@pytest.mark.parametrize("required", [True, False])
def test_every_rule_imports_what_audit_derives(
    name: str, rule: str, threshold: float | None, required: bool, tmp_path: Path
) -> None:
    runner, check_id, repeats, _ = RUNS[name]
    d = decision(
        tmp_path / "d.json",
        {check_id: {"required": required, "aggregation": agg(rule, threshold, repeats)}},
    )
    body, audit = _import_and_audit(runner, _files(runner), d, tmp_path)
    assert audit.verdict is AuditVerdict.CONSISTENT, audit.disagreements
    check = next(c for c in body["checks"] if c["check_id"] == check_id)
    if rule == "all_pass":
        assert check["score"] is None  # a yes or no, not a number (SPEC 12)
    # The runner's own value is kept whatever the rule.
    assert {"metric": check_id.split(".")[1], "value": pytest.approx(RUNS[name][3])} in check[
        "observations"
    ]
    if body["result"] != "pass":
        assert body["reasons"], "a verdict other than pass gives its reasons"


@pytest.mark.parametrize("name", sorted(RUNS))
def test_without_a_decision_the_score_is_the_mean_and_audit_agrees(
    name: str, tmp_path: Path
) -> None:
    runner, check_id, _, mean = RUNS[name]
    body, audit = _import_and_audit(runner, _files(runner), None, tmp_path)
    assert audit.verdict is AuditVerdict.CONSISTENT
    check = next(c for c in body["checks"] if c["check_id"] == check_id)
    assert check["score"] == pytest.approx(mean)
    assert body["reasons"] == ["no decision rule given"]


@pytest.mark.parametrize("metric", ["std", "var", "bootstrap_stderr"])
def test_an_inspect_dispersion_metric_is_an_observation_not_a_check(
    metric: str, tmp_path: Path
) -> None:
    def add(h: Any) -> None:
        h["results"]["scores"][0]["metrics"][metric] = {"name": metric, "value": 0.2887}

    log = tmp_path / "std.eval"
    log.write_bytes(build_zip(edit_json("header.json", add)))
    body, audit = _import_and_audit(Runner.INSPECT, (log,), None, tmp_path)
    assert audit.verdict is AuditVerdict.CONSISTENT
    assert [c["check_id"] for c in body["checks"]] == ["match.accuracy", "short_answer.accuracy"]
    assert {"metric": metric, "value": 0.2887} in body["checks"][0]["observations"]


def test_a_decision_with_no_required_check_says_why_it_is_inconclusive(tmp_path: Path) -> None:
    d = tmp_path / "d.json"
    d.write_text(json.dumps({"schema": "evalbook.decision.v1", "checks": {}}))
    body, audit = _import_and_audit(Runner.INSPECT, (INSPECT_LOG,), d, tmp_path)
    assert audit.verdict is AuditVerdict.CONSISTENT
    assert body["result"] == "inconclusive"
    assert body["reasons"] == ["the decision requires no check"]
    assert all("the decision gives no rule" in c["explanation"] for c in body["checks"])


def test_a_passing_check_with_incomplete_evidence_gives_its_reason(tmp_path: Path) -> None:
    # One sample errored in both epochs: the check passes, the report is inconclusive.
    d = decision(
        tmp_path / "d.json",
        {"match.accuracy": {"required": True, "aggregation": agg("mean", 0.5, 2)}},
    )
    body, _ = _import_and_audit(Runner.INSPECT, (INSPECT_LOG,), d, tmp_path)
    assert body["result"] == "inconclusive"
    assert body["reasons"] == [
        "check match.accuracy: evidence incomplete (1 of 4 examples missing, or a case "
        "without an output)"
    ]


@pytest.mark.parametrize(("given", "epochs"), [(1, 2), (3, 2)])
def test_a_decision_whose_repeats_are_not_the_runs_is_refused(
    given: int, epochs: int, tmp_path: Path
) -> None:
    d = decision(
        tmp_path / "d.json",
        {"match.accuracy": {"required": True, "aggregation": agg("mean", 0.5, given)}},
    )
    store = tmp_path / "store"
    done = run_cli(
        "import-inspect",
        str(INSPECT_LOG),
        "--store",
        str(store),
        "--principal",
        "a",
        "--decision",
        str(d),
    )
    err = done.stderr.decode()
    assert done.returncode == 3 and err.count("\n") == 1, err
    assert f"d.json: checks.match.accuracy.aggregation.repeats: {given}" in err
    assert f"gives {epochs} repeats" in err
    assert not store.exists()


@pytest.mark.parametrize("length", [127, 128, 129, 300])
def test_a_long_scorer_name_keeps_its_metric_and_never_cuts_silently(
    length: int, tmp_path: Path
) -> None:
    from bundler.importers.model import is_identifier, to_identifier

    name = "m" * length

    def rename(h: Any) -> None:
        h["results"]["scores"][0]["name"] = name

    def rename_sample(s: Any) -> None:
        if s.get("scores") and "match" in s["scores"]:  # an errored sample has no score
            s["scores"][name] = s["scores"].pop("match")

    import test_import_hostile as hostile

    members = edit_json("header.json", rename)
    log = tmp_path / "long.eval"
    rebuilt = []
    for m in members:
        if m.name.startswith("samples/"):
            value = json.loads(m.data)
            rename_sample(value)
            m = hostile.replace(m, data=json.dumps(value).encode())
        rebuilt.append(m)
    log.write_bytes(build_zip(rebuilt))
    body, audit = _import_and_audit(Runner.INSPECT, (log,), None, tmp_path)
    assert audit.verdict is AuditVerdict.CONSISTENT
    check_id = body["checks"][0]["check_id"]
    assert check_id == to_identifier(f"{name}.accuracy") and is_identifier(check_id)
    if length + len(".accuracy") <= 128:
        assert check_id == f"{name}.accuracy"
    else:
        assert len(check_id) == 128 and check_id[-17] == "-"
        assert check_id != to_identifier(f"{name}.accuracz")  # the whole name counts
