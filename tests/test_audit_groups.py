"""SPEC 12 and 16: `audit` re-derives the lm-eval group aggregates a report body records.

A bundle of the real group run (fixtures/runners/lm-eval/group-run: ``acc`` weighted by
size, ``acc_norm`` unweighted) and one of a nested group are imported, exported and
audited CONSISTENT, every recorded group field agreeing. Then each recorded field of a
group is changed and the bundle re-sealed (every digest that pins the body recomputed,
so it verifies): the group's leaf tasks and size, and per aggregate its value, rule,
derived mean, and each task's score and size, a task added, removed or renamed, a value
moved to the other rule's, records of the wrong shape. Each is a disagreement naming the
group, the aggregate, the task and the field, through the installed console script: in
``--json``, in the console, in audit.md, and in the audit record, whose ``render``
re-derives the failing verdict (and refuses the record forged to say consistent).
A report without groups audits as before, with no ``groups`` key.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import repack
from conftest import run_cli
from test_import_groups import GROUP, REAL, TASKS, _add_outer, _weighted, args_of
from test_importers import EXPORTED_AT, _reseal

LEAVES = ["fixture_mc", "fixture_mc2"]
OUTER = "fixture_outer"


def _bundle(results: dict[str, Any], tmp: Path) -> Path:
    store = tmp / "store"
    args = args_of(results, tmp)
    for t in TASKS:
        args += ["--task", str(t)]
    done = run_cli("import-lm-eval", *args, "--store", str(store), "--principal", "a", "--json")
    assert done.returncode == 0, done.stderr
    report_id = json.loads(done.stdout)["report_id"]
    bundle = tmp / "group.tar.zst"
    done = run_cli(
        "export",
        "--store",
        str(store),
        "--report",
        report_id,
        "--principal",
        "a",
        "--exported-at",
        EXPORTED_AT.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "--out",
        str(bundle),
    )
    assert done.returncode == 0, done.stderr
    return bundle


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _bundle(copy.deepcopy(REAL), tmp_path_factory.mktemp("real"))


@pytest.fixture(scope="module")
def nested(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An outer group over fixture_group alone: lm-eval averages over its leaf tasks."""
    results = copy.deepcopy(REAL)
    _add_outer(results, [GROUP], {"sample_len": 5, "acc,none": _weighted("acc,none", LEAVES)})
    return _bundle(results, tmp_path_factory.mktemp("nested"))


def _audit(bundle: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    done = run_cli("audit", str(bundle), "--json", *extra)
    assert done.stderr == b"" or done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def _fields(record: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for g in record["groups"]:
        out += g["fields"]
        for a in g["aggregates"]:
            out += a["fields"]
    return out


@pytest.mark.parametrize("which", ["real", "nested"])
def test_the_imported_group_bundles_audit_consistent(
    which: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    bundle: Path = request.getfixturevalue(which)
    code, record = _audit(bundle)
    assert code == 0 and record["verdict"] == "consistent", record["disagreements"]
    names = [g["group"] for g in record["groups"]]
    assert names == ([GROUP, OUTER] if which == "nested" else [GROUP])
    fields = _fields(record)
    assert fields and all(f["outcome"] == "agree" for f in fields)
    compared = {(f["field"], f["task"]) for f in fields}
    for name in ("tasks", "sample_len", "value", "rule", "derived"):
        assert (name, None) in compared
    for task in LEAVES:
        assert ("score", task) in compared and ("size", task) in compared
    counted = record["counts"]["agree"]
    assert counted >= len(fields)  # the group fields are counted with the checks'
    path = tmp_path / "audit.json"
    path.write_bytes(json.dumps(record).encode())
    done = run_cli("render", str(path), "--html", str(tmp_path / "audit.html"))
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "audit.html").read_text()
    assert "Groups (lm-eval)" in page and GROUP in page


def test_a_report_without_groups_has_no_groups_key(tmp_path: Path) -> None:
    """The reports of runs without groups audit byte for byte as before: no key added."""
    results = copy.deepcopy(REAL)
    for key in ("group_subtasks", "groups"):
        results[key] = {}
    for table in ("results", "versions", "n-shot", "higher_is_better"):
        results[table].pop(GROUP, None)
    code, record = _audit(_bundle(results, tmp_path))
    assert code == 0 and "groups" not in record
    assert all(d["scope"] != "group" for d in record["disagreements"])


Edit = Callable[[list[dict[str, Any]]], None]


def _agg(groups: list[dict[str, Any]], group: str, metric: str) -> dict[str, Any]:
    g = next(g for g in groups if g["group"] == group)
    a: dict[str, Any] = next(a for a in g["aggregates"] if a["metric"] == metric)
    return a


def _task(groups: list[dict[str, Any]], group: str, metric: str, task: str) -> dict[str, Any]:
    t: dict[str, Any] = next(t for t in _agg(groups, group, metric)["tasks"] if t["task"] == task)
    return t


def _other_rule(a: dict[str, Any]) -> None:
    """The value the other rule gives, as a liar who knows both would write."""
    scores = [t["score"] for t in a["tasks"]]
    sizes = [t["size"] for t in a["tasks"]]
    weighted = sum(s * n for s, n in zip(scores, sizes, strict=True)) / sum(sizes)
    a["value"] = sum(scores) / len(scores) if a["rule"] == "weight_by_size" else weighted


def _edits(group: str, metric: str) -> dict[str, tuple[Edit, set[tuple[str | None, str]]]]:
    """name -> (the change, the (task, field) disagreements it must give)."""
    return {
        "value": (
            lambda gs: _agg(gs, group, metric).update(value=0.123),
            {(None, "value"), (None, "rule")},
        ),
        "value by 1e-9": (
            lambda gs: _agg(gs, group, metric).update(
                value=_agg(gs, group, metric)["value"] + 1e-9
            ),
            {(None, "value"), (None, "rule")},
        ),
        "value the other rule's": (
            lambda gs: _other_rule(_agg(gs, group, metric)),
            {(None, "rule"), (None, "derived")},
        ),
        "value a string": (
            lambda gs: _agg(gs, group, metric).update(value="0.4"),
            {(None, "value"), (None, "rule")},
        ),
        "derived": (lambda gs: _agg(gs, group, metric).update(derived=0.9), {(None, "derived")}),
        "derived null": (
            lambda gs: _agg(gs, group, metric).update(derived=None),
            {(None, "derived")},
        ),
        "rule": (
            lambda gs: _agg(gs, group, metric).update(
                rule="unweighted"
                if _agg(gs, group, metric)["rule"] != "unweighted"
                else "weight_by_size"
            ),
            {(None, "rule")},
        ),
        "rule unknown": (
            lambda gs: _agg(gs, group, metric).update(rule="median"),
            {(None, "rule")},
        ),
        "task score": (
            lambda gs: _task(gs, group, metric, "fixture_mc").update(score=0.75),
            {("fixture_mc", "score")},
        ),
        "task score true": (
            lambda gs: _task(gs, group, metric, "fixture_mc2").update(score=True),
            {("fixture_mc2", "score")},
        ),
        "task size": (
            lambda gs: _task(gs, group, metric, "fixture_mc2").update(size=20),
            {("fixture_mc2", "size")},
        ),
        "task size a string": (
            lambda gs: _task(gs, group, metric, "fixture_mc").update(size="3"),
            {("fixture_mc", "size")},
        ),
        "task removed": (
            lambda gs: _agg(gs, group, metric)["tasks"].pop(),
            {(None, "tasks")},
        ),
        "task added": (
            lambda gs: _agg(gs, group, metric)["tasks"].append(
                {
                    "task": "fixture_x",
                    "check_id": f"fixture_x.{metric}.none",
                    "size": 1,
                    "score": 1.0,
                }
            ),
            {(None, "tasks")},
        ),
        "task renamed": (
            lambda gs: _task(gs, group, metric, "fixture_mc").update(task="fixture_mc3"),
            {(None, "tasks")},
        ),
        "task check renamed": (
            lambda gs: _task(gs, group, metric, "fixture_mc").update(check_id="fixture_mc.acc.x"),
            {(None, "tasks")},
        ),
        "tasks reordered": (
            lambda gs: _agg(gs, group, metric)["tasks"].reverse(),
            {(None, "tasks")},
        ),
    }


CASES = [
    (bundle, group, metric, name)
    for bundle, group, metrics in (
        ("real", GROUP, ("acc", "acc_norm")),  # weighted by size, and unweighted
        ("nested", OUTER, ("acc",)),
    )
    for metric in metrics
    for name in _edits(group, metric)
]


@pytest.mark.parametrize(("which", "group", "metric", "name"), CASES)
def test_a_changed_aggregate_field_is_a_named_disagreement(
    which: str, group: str, metric: str, name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    edit, want = _edits(group, metric)[name]
    forged = _forge(request.getfixturevalue(which), edit, tmp_path)
    code, record = _audit(forged)
    assert code == 1 and record["verdict"] == "inconsistent"
    found = {
        (d["task"], d["field"])
        for d in record["disagreements"]
        if d["scope"] == "group" and d["group"] == group
    }
    assert found == want, record["disagreements"]
    for d in record["disagreements"]:
        assert d["scope"] == "group" and d["metric"] == metric and d["filter"] == "none"
        assert d["check_id"] is None and d["kind"] == "issued_vs_derived"
        assert d["detail"].startswith(f"group {group!r} aggregate {metric},none")
    _shown_everywhere(forged, record, group, want, tmp_path)


@pytest.mark.parametrize(
    ("name", "edit", "want"),
    [
        ("leaf tasks", lambda gs: gs[-1]["tasks"].append("fixture_mc9"), {(None, "tasks")}),
        ("leaf tasks dropped", lambda gs: gs[-1].update(tasks=["fixture_mc"]), {(None, "tasks")}),
        ("sample_len", lambda gs: gs[-1].update(sample_len=6), {(None, "sample_len")}),
        ("sample_len a string", lambda gs: gs[-1].update(sample_len="5"), {(None, "sample_len")}),
        ("entry not an object", lambda gs: gs.append(["x"]), {(None, "entry")}),
        ("entry twice", lambda gs: gs.append(copy.deepcopy(gs[-1])), {(None, "entry")}),
        (
            "aggregate not an object",
            lambda gs: gs[-1]["aggregates"].append(7),
            {(None, "entry")},
        ),
        (
            "aggregate no task reports",
            lambda gs: gs[-1]["aggregates"].append(
                {**copy.deepcopy(gs[-1]["aggregates"][0]), "metric": "f1", "tasks": []}
            ),
            {(None, "value"), (None, "rule"), (None, "derived")},
        ),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_a_changed_group_field_is_a_named_disagreement(
    name: str, edit: Edit, want: set[tuple[str | None, str]], real: Path, tmp_path: Path
) -> None:
    forged = _forge(real, edit, tmp_path)
    code, record = _audit(forged)
    assert code == 1 and record["verdict"] == "inconsistent"
    found = {(d["task"], d["field"]) for d in record["disagreements"] if d["scope"] == "group"}
    assert found == want, record["disagreements"]
    assert all(d["scope"] == "group" for d in record["disagreements"])


def test_groups_not_a_list_is_a_disagreement(real: Path, tmp_path: Path) -> None:
    eb = repack.open_bundle(real)
    eb.edit_json("data/report/body.json", lambda b: b["subject"]["run"].update(groups={"x": 1}))
    _reseal(eb)
    forged = repack.write_bundle(eb, tmp_path / "forged.tar.zst")
    code, record = _audit(forged)
    assert code == 1
    (d,) = record["disagreements"]
    assert (d["scope"], d["group"], d["field"]) == ("group", None, "entry")


def test_a_cycle_is_not_rederivable_not_a_crash(real: Path, tmp_path: Path) -> None:
    """A body whose recorded subtasks contain the group itself (the import refuses it):
    the leaf tasks cannot be derived; said, with the reason, and --strict fails."""
    forged = _forge(real, lambda gs: gs[-1]["subtasks"].append(GROUP), tmp_path)
    code, record = _audit(forged)
    assert code == 0 and record["verdict"] == "consistent"
    items = [n for n in record["not_rederivable"] if n["scope"] == "group"]
    assert {n["metric"] for n in items} == {None, "acc", "acc_norm"}  # the group, each aggregate
    assert all(n["group"] == GROUP and "contains itself" in n["reason"] for n in items)
    code, record = _audit(forged, "--strict")
    assert code == 1


def _forge(bundle: Path, edit: Edit, tmp: Path) -> Path:
    eb = repack.open_bundle(bundle)
    eb.edit_json("data/report/body.json", lambda b: edit(b["subject"]["run"]["groups"]))
    _reseal(eb)
    forged = repack.write_bundle(eb, tmp / "forged.tar.zst")
    assert run_cli("verify", str(forged)).returncode == 0  # it verifies: only audit sees it
    return forged


def _shown_everywhere(
    forged: Path,
    record: dict[str, Any],
    group: str,
    want: set[tuple[str | None, str]],
    tmp: Path,
) -> None:
    """The console and audit.md name each disagreement; the record renders, its verdict
    re-derived as inconsistent, and the same record claiming consistent is refused."""
    done = run_cli("audit", str(forged), "--output-dir", str(tmp / "out"))
    assert done.returncode == 1
    console = done.stdout.decode()
    md = (tmp / "out" / "audit.md").read_text()
    assert "Verdict:     INCONSISTENT" in console
    for task, field in want:
        where = f"group {group!r} aggregate "
        line = next(
            (
                x
                for x in console.splitlines()
                if x.startswith("  - " + where) and f" {field}: " in x
            ),
            None,
        )
        assert line is not None, console
        if task is not None:
            assert f"task {task} {field}:" in line
        assert any(x.startswith("- " + where) and f" {field}: " in x for x in md.splitlines())
    path = tmp / "audit.json"
    path.write_bytes(json.dumps(record).encode())
    done = run_cli("render", str(path), "--html", str(tmp / "audit.html"))
    assert done.returncode == 0, done.stderr
    page = (tmp / "audit.html").read_text()
    assert "DISAGREES" in page and "Groups (lm-eval)" in page
    lie = {**record, "verdict": "consistent", "exit_code": 0, "disagreements": []}
    lie["counts"] = {**record["counts"], "disagreements": 0}
    path.write_bytes(json.dumps(lie).encode())
    done = run_cli("render", str(path), "--html", str(tmp / "lie.html"))
    assert done.returncode == 3
    assert b"/disagreements" in done.stderr or b"/verdict" in done.stderr, done.stderr
