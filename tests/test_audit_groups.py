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
import time
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


def _chain(gs: list[dict[str, Any]], depth: int) -> None:
    """``depth`` groups each holding the next, the last holding the real group."""
    names = [f"chain{i}" for i in range(depth)]
    for i, name in enumerate(names):
        child = names[i + 1] if i + 1 < depth else GROUP
        gs.append(
            {
                **copy.deepcopy(gs[0]),
                "group": name,
                "subtasks": [child],
                "aggregates": [],
                "sample_len": None,
            }
        )


def _cycle(gs: list[dict[str, Any]]) -> None:
    gs[0]["subtasks"].append("zz")
    gs.append({**copy.deepcopy(gs[0]), "group": "zz", "subtasks": [GROUP], "aggregates": []})


def _wide(gs: list[dict[str, Any]]) -> None:
    """Levels of groups each naming the next level twice: the walk doubles per level."""
    gs[0]["subtasks"] = ["lvl0", "lvl0b"]
    for i in range(20):
        nxt = [f"lvl{i + 1}", f"lvl{i + 1}b"] if i < 19 else list(LEAVES)
        for name in (f"lvl{i}", f"lvl{i}b"):
            gs.append({**copy.deepcopy(gs[0]), "group": name, "subtasks": nxt, "aggregates": []})


def _twice(gs: list[dict[str, Any]]) -> None:
    gs.append({**copy.deepcopy(gs[0]), "group": "g2"})


def _same_aggregate(gs: list[dict[str, Any]]) -> None:
    a = copy.deepcopy(gs[0]["aggregates"][0])
    a.update(value=0.41666666666666663, derived=0.41666666666666663, rule="unweighted")
    gs[0]["aggregates"].append(a)


def _hidden(gs: list[dict[str, Any]]) -> None:
    """What the forger hides behind the structure: a wrong value and size."""
    a = gs[0]["aggregates"][0]
    a["value"] = a["derived"] = 0.99
    a["tasks"][0]["score"] = 0.9
    gs[0]["sample_len"] = 77


STRUCTURES: dict[str, tuple[Edit, str, str]] = {
    # name: (the edit, the group whose entry disagrees, a word of the rule)
    "contains itself": (lambda gs: gs[0]["subtasks"].append(GROUP), GROUP, "contains itself"),
    "a 2-cycle": (_cycle, GROUP, "contains itself"),
    "nested 41 deep": (lambda gs: _chain(gs, 41), "chain0", "nested more than 32"),
    "a DAG naming each level twice": (_wide, "lvl0b", "already a subtask of"),
    "a subtask not a name": (
        lambda gs: gs[0]["subtasks"].extend([1, 2]),
        GROUP,
        "is not a name",
    ),
    "a leaf not in the run": (
        lambda gs: (gs[0]["subtasks"].append("nosuch"), gs[0]["tasks"].append("nosuch")),
        GROUP,
        "is not in the run",
    ),
    "a name under two groups": (_twice, "g2", "already a subtask of"),
    "a name twice under one": (
        lambda gs: gs[0]["subtasks"].append("fixture_mc"),
        GROUP,
        "already a subtask of",
    ),
}


@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_a_structure_the_import_refuses_is_a_disagreement(
    name: str, real: Path, tmp_path: Path
) -> None:
    """Only a forged body holds a group structure the import refuses: its group's entry
    disagrees (exit 1, naming the group and the rule), and nothing it hides passes as
    "not re-derivable"."""
    edit, group, rule = STRUCTURES[name]
    forged = _forge(real, lambda gs: (edit(gs), _hidden(gs)), tmp_path)
    code, record = _audit(forged)
    assert code == 1 and record["verdict"] == "inconsistent", record
    entries = [
        d
        for d in record["disagreements"]
        if d["scope"] == "group" and d["field"] == "entry" and d["group"] == group
    ]
    assert entries and rule in entries[0]["detail"], record["disagreements"]
    assert not [n for n in record["not_rederivable"] if n["scope"] == "group"]
    done = run_cli("audit", str(forged))
    assert done.returncode == 1 and rule in done.stdout.decode()


@pytest.mark.parametrize(
    ("name", "edit", "group"),
    [
        ("groups null", lambda b: b["subject"]["run"].update(groups=None), None),
        ("groups a string", lambda b: b["subject"]["run"].update(groups="x"), None),
        ("a group null", lambda b: b["subject"]["run"]["groups"].append(None), None),
        ("an aggregate twice", lambda b: _same_aggregate(b["subject"]["run"]["groups"]), GROUP),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_a_contradictory_record_is_an_entry_disagreement(
    name: str, edit: Callable[[dict[str, Any]], None], group: str | None, real: Path, tmp_path: Path
) -> None:
    eb = repack.open_bundle(real)
    eb.edit_json("data/report/body.json", edit)
    _reseal(eb)
    forged = repack.write_bundle(eb, tmp_path / "forged.tar.zst")
    code, record = _audit(forged)
    assert code == 1 and record["verdict"] == "inconsistent"
    assert any(
        (d["scope"], d["group"], d["field"]) == ("group", group, "entry")
        for d in record["disagreements"]
    ), record["disagreements"]


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


def test_render_refuses_a_record_whose_derived_mean_its_tasks_do_not_give(
    real: Path, tmp_path: Path
) -> None:
    """The record's own task scores and sizes give the aggregate's mean: a record whose
    disagreeing value, rule and derived fields are rewritten to agree (outcome and counts
    made consistent) is refused, naming the field."""
    forged = _forge(real, lambda gs: _agg(gs, GROUP, "acc").update(value=0.45), tmp_path)
    code, record = _audit(forged)
    assert code == 1
    lie = copy.deepcopy(record)
    flipped = 0
    for g in lie["groups"]:
        for a in g["aggregates"]:
            for f in a["fields"]:
                if f["outcome"] == "disagree":
                    f["derived"] = {"value": f["issued"][0]["value"]}
                    f["outcome"] = "agree"
                    flipped += 1
    assert flipped == 2
    lie.update(verdict="consistent", exit_code=0, disagreements=[])
    lie["counts"] = {
        **record["counts"],
        "agree": record["counts"]["agree"] + flipped,
        "disagree": record["counts"]["disagree"] - flipped,
        "disagreements": 0,
    }
    path = tmp_path / "lie.json"
    path.write_bytes(json.dumps(lie).encode())
    done = run_cli("render", str(path), "--html", str(tmp_path / "lie.html"))
    assert done.returncode == 3, done.stderr
    assert b"/groups/0/aggregates/0/fields/" in done.stderr, done.stderr
    assert b"task scores and sizes give" in done.stderr
    assert not (tmp_path / "lie.html").exists()
    path.write_bytes(json.dumps(record).encode())  # the true record renders
    done = run_cli("render", str(path), "--html", str(tmp_path / "true.html"))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("where", ["one group", "over the body", "groups"])
def test_more_records_than_the_checks_give_is_one_disagreement_found_at_once(
    where: str, real: Path, tmp_path: Path
) -> None:
    """The body's 4 checks give a group at most 4 aggregates and the body at most 4 x 33
    groups and aggregates: 20,000 is a forged body, one entry disagreement with the
    count (not the records), fast and small, and every output (--html too) exits 1."""

    def edit(gs: list[dict[str, Any]]) -> None:
        a = gs[0]["aggregates"][0]
        if where == "one group":
            gs[0]["aggregates"] += [{**a, "metric": f"m{i}"} for i in range(20_000)]
        elif where == "over the body":
            for i in range(40):
                g = {**copy.deepcopy(gs[0]), "group": f"x{i}", "subtasks": [], "tasks": []}
                g["aggregates"] = [{**a, "metric": f"m{j}"} for j in range(4)]
                gs.append(g)
        else:
            gs += [{**gs[0], "group": f"x{i}", "subtasks": []} for i in range(20_000)]

    forged = _forge(real, edit, tmp_path)
    started = time.monotonic()
    code, record = _audit(forged)
    assert time.monotonic() - started < 10
    assert code == 1 and record["verdict"] == "inconsistent"
    (d,) = [d for d in record["disagreements"] if d["scope"] == "group"]
    assert d["field"] == "entry" and "more than" in d["detail"], d
    assert len(json.dumps(record)) < 200_000
    done = run_cli("audit", str(forged), "--html", str(tmp_path / "h.html"))
    assert done.returncode == 1, done.stderr


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (("audit",), "are re-derived too"),
        (("import-lm-eval",), "what audit cannot re-derive"),
    ],
)
def test_help_says_what_audit_re_derives_of_the_groups(command: tuple[str, ...], says: str) -> None:
    done = run_cli(*command, "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.decode().split())
    assert says in text
    assert "not compared here" not in text and "not audit, re-derives" not in text
