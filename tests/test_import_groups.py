"""SPEC 16: lm-eval runs of group tasks (mmlu-style), by class.

The real run (fixtures/runners/lm-eval/group-run: the group fixture_group of fixture_mc
and fixture_mc2, ``acc`` weighted by size and ``acc_norm`` not) imports through the
console script, exports, verifies, audits and ``--check``s; its aggregates are
re-derived from the tasks' checks by lm-eval's rule and recorded in the body's
``subject.run.groups``. Every way a group can lie or hide (an aggregate off by a little
or a lot, a subtask not in the run, a cycle, ``results`` without ``groups`` and the
reverse, sizes that the samples do not give) is refused: one line naming the file and
field, exit 3, nothing written. Nested groups aggregate over their leaf tasks, as
lm-eval does.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import measure
import pytest
import repack
from conftest import run_cli
from test_import_hostile import refuse
from test_importers import EXPORTED_AT, _reseal

from bundler.cli import main
from bundler.evalbook.group_rule import MAX_GROUP_DEPTH

ROOT = Path(__file__).resolve().parent.parent
GROUP_RUN = ROOT / "fixtures" / "runners" / "lm-eval" / "group-run"
RESULTS = next(GROUP_RUN.glob("results_*.json"))
SAMPLES = sorted(GROUP_RUN.glob("samples_*.jsonl"))
TASKS = sorted((ROOT / "fixtures" / "runners" / "lm-eval" / "tasks").glob("*.yaml"))
REAL = json.loads(RESULTS.read_bytes())
GROUP = "fixture_group"


def _value(task: str, key: str) -> float:
    v = REAL["results"][task][key]
    assert isinstance(v, float | int)
    return float(v)


def _weighted(key: str, tasks: list[str]) -> float:
    sizes = [REAL["results"][t]["sample_len"] for t in tasks]
    return sum(_value(t, key) * n for t, n in zip(tasks, sizes, strict=True)) / sum(sizes)


def _unweighted(key: str, tasks: list[str]) -> float:
    return sum(_value(t, key) for t in tasks) / len(tasks)


LEAVES = ["fixture_mc", "fixture_mc2"]


def args_of(results: dict[str, Any], tmp: Path, samples: list[Path] | None = None) -> list[str]:
    tmp.mkdir(exist_ok=True)
    r = tmp / RESULTS.name
    r.write_text(json.dumps(results))
    out = [str(r)]
    for s in SAMPLES if samples is None else samples:
        out += ["--samples", str(s)]
    return out


def _set_both(r: dict[str, Any], key: str, value: Any, group: str = GROUP) -> None:
    """Change a group's aggregate as a liar would: in results and groups alike."""
    r["results"][group][key] = value
    r["groups"][group][key] = value


def _add_outer(r: dict[str, Any], outer_children: list[str], values: dict[str, Any]) -> None:
    """An outer group over fixture_group's leaves (5 documents), with the document
    counts lm-eval writes beside an aggregate."""
    r["group_subtasks"]["fixture_outer"] = outer_children
    counts = {k: 5 for k in values if "," in k and not k.split(",")[0].endswith("_stderr")}
    entry = {"alias": "fixture_outer", "name": "fixture_outer", "sample_len": 5, **values}
    entry["sample_count"] = counts
    r["results"]["fixture_outer"] = entry
    r["groups"]["fixture_outer"] = copy.deepcopy(entry)


def _deep(r: dict[str, Any], depth: int) -> None:
    """A chain of groups, each the only subtask of the one before, down to fixture_group."""
    child = GROUP
    for i in range(depth):
        name = f"fixture_nest{i}"
        r["group_subtasks"][name] = [child]
        r["results"][name] = {"alias": name, "name": name}
        child = name


def _drop_subtask(r: dict[str, Any]) -> None:
    for key in ("results", "configs", "task_hashes", "versions", "n-shot", "n-samples"):
        r[key].pop("fixture_mc2", None)


def _both_entries(r: dict[str, Any], key: str, value: Any) -> None:
    r["results"][GROUP][key] = value
    r["groups"][GROUP][key] = value


HOSTILE: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    **{
        f"{metric} off by {label}": (
            (lambda m, d: lambda r: _set_both(r, m, REAL["results"][GROUP][m] + d))(metric, delta),
            f"results.{GROUP}.{metric}: ",
        )
        for metric in ("acc,none", "acc_norm,none")
        for label, delta in (("1e-9", 1e-9), ("0.3", 0.3), ("-0.4", -0.4))
    },
    "aggregate null": (lambda r: _set_both(r, "acc,none", None), f"results.{GROUP}.acc,none: not"),
    "aggregate a string": (
        lambda r: _set_both(r, "acc,none", "0.4"),
        f"results.{GROUP}.acc,none: not a number",
    ),
    "aggregate true": (lambda r: _set_both(r, "acc,none", True), "acc,none: not a number"),
    "results changed, groups not": (
        lambda r: r["results"][GROUP].update({"acc,none": 0.9}),
        f"groups.{GROUP}: differs from results.{GROUP}",
    ),
    "groups changed, results not": (
        lambda r: r["groups"][GROUP].update({"acc,none": 0.9}),
        f"groups.{GROUP}: differs from results.{GROUP}",
    ),
    "results without groups": (
        lambda r: r["groups"].pop(GROUP),
        f"groups.{GROUP}: missing, but results.{GROUP} holds an aggregate",
    ),
    "results without groups key": (
        lambda r: r.pop("groups"),
        f"groups.{GROUP}: missing, but results.{GROUP} holds an aggregate",
    ),
    "groups without results": (
        lambda r: r["results"].pop(GROUP),
        f"results.{GROUP}: missing or not an object",
    ),
    "groups of no group_subtasks": (
        lambda r: r["group_subtasks"].pop(GROUP),
        f"results.{GROUP}: a task with no entry in configs",
    ),
    "groups entry of an unknown group": (
        lambda r: r["groups"].update(ghost={"acc,none": 0.5}),
        "groups.ghost: a group with no group_subtasks entry",
    ),
    "a subtask not in the run": (
        lambda r: r["group_subtasks"][GROUP].append("fixture_ghost"),
        f"group_subtasks.{GROUP}[2]: subtask 'fixture_ghost' is not in the run",
    ),
    "a subtask counted twice": (
        lambda r: r["group_subtasks"][GROUP].append("fixture_mc"),
        f"group_subtasks.{GROUP}[2]: 'fixture_mc' is already a subtask of '{GROUP}'",
    ),
    "a subtask under two groups": (
        lambda r: (
            r["group_subtasks"].update(fixture_other=["fixture_mc2"])
            or r["results"].update(fixture_other={"alias": "o", "name": "fixture_other"})
        ),
        "'fixture_mc2' is already a subtask of 'fixture_group'",
    ),
    "a group containing itself": (
        lambda r: r["group_subtasks"][GROUP].append(GROUP),
        f"group_subtasks.{GROUP}[2]: group '{GROUP}' contains itself",
    ),
    "groups nested too deep": (
        lambda r: _deep(r, MAX_GROUP_DEPTH + 1),
        f"groups nested more than {MAX_GROUP_DEPTH} deep",
    ),
    "a cycle through a nested group": (
        lambda r: (
            _add_outer(r, [GROUP], {"acc,none": _weighted("acc,none", LEAVES)})
            or r["group_subtasks"][GROUP].append("fixture_outer")
        ),
        "contains itself",
    ),
    "nested: outer value not the leaves' mean": (
        lambda r: _add_outer(r, [GROUP], {"acc,none": 0.123}),
        "results.fixture_outer.acc,none: 0.123 is not what its tasks give",
    ),
    "a group that is also a task": (
        lambda r: r["group_subtasks"].update(fixture_mc=["fixture_mc2"]),
        "group_subtasks.fixture_mc: a task of configs with subtasks",
    ),
    "group_subtasks not lists": (
        lambda r: r["group_subtasks"].update({GROUP: "fixture_mc"}),
        f"group_subtasks.{GROUP}: not a list of names",
    ),
    "group_subtasks not an object": (
        lambda r: r.update(group_subtasks=["fixture_mc"]),
        "group_subtasks: not an object",
    ),
    "a task's sample_len lies (the weight)": (
        lambda r: r["results"]["fixture_mc2"].update(sample_len=30),
        "results.fixture_mc2.sample_len: 30, but its samples hold 2 documents",
    ),
    **{
        f"a task's sample_len is {label}": (
            (lambda v: lambda r: r["results"]["fixture_mc2"].update(sample_len=v))(value),
            f"results.fixture_mc2.sample_len: {value!r} is not a count",
        )
        for label, value in (("2.0", 2.0), ("true", True), ("-1", -1), ("a string", "2"))
    },
    "the group's sample_len lies": (
        lambda r: _both_entries(r, "sample_len", 6),
        f"results.{GROUP}.sample_len: 6, but its tasks' samples hold 5",
    ),
    "the group's sample_count lies": (
        lambda r: _both_entries(r, "sample_count", {"acc,none": 5, "acc_norm,none": 4}),
        f"results.{GROUP}.sample_count: ",
    ),
    "an aggregate no task reports": (
        lambda r: _both_entries(r, "bleu,none", 0.5),
        f"results.{GROUP}.bleu,none: none of the group's tasks",
    ),
    "a group key lm-eval does not write": (
        lambda r: _both_entries(r, "score", 0.5),
        f"results.{GROUP}.score: not a key lm-eval writes for a group",
    ),
    "a stderr that is text": (
        lambda r: _both_entries(r, "acc_stderr,none", "wide"),
        f"results.{GROUP}.acc_stderr,none: not a number",
    ),
    "a task hash for the group": (
        lambda r: r["task_hashes"].update({GROUP: "0" * 64}),
        f"task_hashes.{GROUP}: a task with no entry in configs",
    ),
    # Nothing a run records is dropped: each field lm-eval writes for a group (or a
    # task) either is recorded or refuses the import, naming the file and field.
    "a group's stderr without its aggregate": (
        lambda r: _both_entries(r, "bleu_stderr,none", 0.1),
        f"results.{GROUP}.bleu_stderr,none: a standard error without its aggregate",
    ),
    "a task's stderr without its metric": (
        lambda r: r["results"]["fixture_mc"].update({"bleu_stderr,none": 0.1}),
        "results.fixture_mc.bleu_stderr,none: a standard error without its metric",
    ),
    **{
        f"{table} entry for a name not in the run": (
            (lambda t: lambda r: r[t].update(fixture_ghost=r[t]["fixture_mc"]))(table),
            f"{table}.fixture_ghost: names nothing of the run",
        )
        for table in ("versions", "n-shot", "higher_is_better", "n-samples")
    },
    "n-samples entry for a group": (
        lambda r: r["n-samples"].update({GROUP: {"original": 5, "effective": 5}}),
        f"n-samples.{GROUP}: names a group (lm-eval writes none for a group)",
    ),
    "group name differs": (
        lambda r: _both_entries(r, "name", "other"),
        f"results.{GROUP}.name: 'other', not the group's name",
    ),
    "group name missing": (
        lambda r: (r["results"][GROUP].pop("name"), r["groups"][GROUP].pop("name")),
        f"results.{GROUP}.name: None, not the group's name",
    ),
    **{
        f"group {key} missing beside an aggregate": (
            (lambda k: lambda r: (r["results"][GROUP].pop(k), r["groups"][GROUP].pop(k)))(key),
            f"results.{GROUP}.{key}: missing, but the group holds an aggregate",
        )
        for key in ("sample_len", "sample_count")
    },
    "group sample_len a float": (
        lambda r: _both_entries(r, "sample_len", 5.0),
        f"results.{GROUP}.sample_len: 5.0",
    ),
    "task sample_len a float": (
        lambda r: r["results"]["fixture_mc"].update(sample_len=3.0),
        "results.fixture_mc.sample_len: 3.0",
    ),
    "group sample_count a float": (
        lambda r: _both_entries(r, "sample_count", {"acc,none": 5.0, "acc_norm,none": 5}),
        f"results.{GROUP}.sample_count: ",
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_group_that_lies_or_hides_is_refused(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    change, phrase = HOSTILE[case]
    results = copy.deepcopy(REAL)
    change(results)
    err = refuse(["import-lm-eval", *args_of(results, tmp_path)], tmp_path / "store", capsys)
    assert RESULTS.name in err and phrase in err, err


def test_a_group_whose_subtask_is_missing_from_the_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The subtask's config, results, hash and samples file all gone: the group names it."""
    results = copy.deepcopy(REAL)
    _drop_subtask(results)
    samples = [s for s in SAMPLES if "fixture_mc2" not in s.name]
    err = refuse(
        ["import-lm-eval", *args_of(results, tmp_path, samples)], tmp_path / "store", capsys
    )
    assert f"group_subtasks.{GROUP}[1]: subtask 'fixture_mc2' is not in the run" in err


def _import(results: dict[str, Any], tmp: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    store = tmp / "store"
    with pytest.raises(SystemExit) as exit_info:
        main(["import-lm-eval", *args_of(results, tmp), "--store", str(store), "--principal", "a"])
    assert exit_info.value.code == 0, capsys.readouterr().err
    body = json.loads(next((store / "reports").glob("*/body.json")).read_bytes())
    return {g["group"]: g for g in body["subject"]["run"]["groups"]}


def _aggregate(group: dict[str, Any], metric: str) -> dict[str, Any]:
    return next(a for a in group["aggregates"] if a["metric"] == metric)


@pytest.mark.parametrize(
    ("metric", "rule", "other"),
    [("acc", "weight_by_size", "unweighted"), ("acc_norm", "unweighted", "weight_by_size")],
)
def test_weight_by_size_both_ways(
    metric: str, rule: str, other: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real run's two aggregates match one rule each; the run does not record which
    rule the group used, so the value of the other rule imports too, recorded as that
    rule, and one neither rule gives is refused (above)."""
    key = f"{metric},none"
    weighted, unweighted = _weighted(key, LEAVES), _unweighted(key, LEAVES)
    assert abs(weighted - unweighted) > 0.01  # the fixture tells the two apart
    groups = _import(copy.deepcopy(REAL), tmp_path / "real", capsys)
    got = _aggregate(groups[GROUP], metric)
    assert got["rule"] == rule
    assert got["derived"] == pytest.approx(weighted if rule == "weight_by_size" else unweighted)
    assert got["value"] == REAL["results"][GROUP][key]
    results = copy.deepcopy(REAL)
    _set_both(results, key, unweighted if rule == "weight_by_size" else weighted)
    got = _aggregate(_import(results, tmp_path / "other", capsys)[GROUP], metric)
    assert got["rule"] == other


def test_equal_sizes_match_either_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A group of one task (nested in fixture_group: a task has one parent): both of
    lm-eval's rules give its value."""
    results = copy.deepcopy(REAL)
    results["group_subtasks"][GROUP] = ["fixture_solo", "fixture_mc"]
    results["group_subtasks"]["fixture_solo"] = ["fixture_mc2"]
    entry = {
        "alias": "fixture_solo",
        "name": "fixture_solo",
        "sample_len": 2,
        "acc,none": _value("fixture_mc2", "acc,none"),
        "acc_stderr,none": 0.5,
        "sample_count": {"acc,none": 2},
    }
    results["results"]["fixture_solo"] = entry
    results["groups"]["fixture_solo"] = dict(entry)
    got = _aggregate(_import(results, tmp_path, capsys)["fixture_solo"], "acc")
    assert got["rule"].startswith("weight_by_size or unweighted")


@pytest.mark.parametrize("rule", ["weighted", "unweighted"])
def test_nested_groups_aggregate_over_their_leaf_tasks(
    rule: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As lm-eval 0.4.13 does (Group.get_all_tasks(recursive=True)): an outer group of
    fixture_group and nothing else is the mean over fixture_mc and fixture_mc2."""
    results = copy.deepcopy(REAL)
    value = (_weighted if rule == "weighted" else _unweighted)("acc,none", LEAVES)
    _add_outer(
        results,
        [GROUP],
        {"sample_len": 5, "acc,none": value, "acc_stderr,none": "N/A"},
    )
    groups = _import(results, tmp_path, capsys)
    outer = groups["fixture_outer"]
    assert outer["subtasks"] == [GROUP] and outer["tasks"] == LEAVES
    got = _aggregate(outer, "acc")
    assert got["stderr"] == "N/A"
    assert [t["check_id"] for t in got["tasks"]] == ["fixture_mc.acc.none", "fixture_mc2.acc.none"]
    assert got["rule"] == ("weight_by_size" if rule == "weighted" else "unweighted")


def test_a_group_without_an_aggregate_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """lm-eval writes a group with no aggregate_metric_list into results (alias and name)
    and group_subtasks, not into groups."""
    results = copy.deepcopy(REAL)
    results["group_subtasks"][GROUP] = ["fixture_plain", "fixture_mc2"]
    results["group_subtasks"]["fixture_plain"] = ["fixture_mc"]
    results["results"]["fixture_plain"] = {"alias": "fixture_plain", "name": "fixture_plain"}
    groups = _import(results, tmp_path, capsys)
    assert groups["fixture_plain"]["aggregates"] == []
    assert groups["fixture_plain"]["tasks"] == ["fixture_mc"]
    assert groups[GROUP]["tasks"] == ["fixture_mc", "fixture_mc2"]  # through the subgroup


# ------------------------------------------------------------------ the whole chain


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("group-chain")
    store = tmp / "store"
    args = ["import-lm-eval", str(RESULTS)]
    for s in SAMPLES:
        args += ["--samples", str(s)]
    for t in TASKS:
        args += ["--task", str(t)]
    done = run_cli(*args, "--store", str(store), "--principal", "alice", "--json")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    bundle = tmp / "group.tar.zst"
    done = run_cli(
        "export",
        "--store",
        str(store),
        "--report",
        record["report_id"],
        "--principal",
        "alice",
        "--exported-at",
        EXPORTED_AT.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "--out",
        str(bundle),
    )
    assert done.returncode == 0, done.stderr
    return {"store": store, "record": record, "bundle": bundle}


def test_the_real_group_run_imports_with_its_aggregates_rederived(chain: dict[str, Any]) -> None:
    record = chain["record"]
    assert [c["check_id"] for c in record["checks"]] == [
        "fixture_mc.acc.none",
        "fixture_mc.acc_norm.none",
        "fixture_mc2.acc.none",
        "fixture_mc2.acc_norm.none",
    ]  # the group is no check: it has no samples of its own
    body = json.loads((chain["store"] / "reports" / record["report_id"] / "body.json").read_bytes())
    (group,) = body["subject"]["run"]["groups"]
    assert group["group"] == GROUP and group["subtasks"] == LEAVES and group["tasks"] == LEAVES
    assert group["version"] == REAL["versions"][GROUP] and group["sample_len"] == 5
    scores = {c["check_id"]: c["score"] for c in body["checks"]}
    for metric, rule in (("acc", "weight_by_size"), ("acc_norm", "unweighted")):
        got = _aggregate(group, metric)
        assert got["rule"] == rule
        assert got["value"] == REAL["results"][GROUP][f"{metric},none"]
        assert got["stderr"] == REAL["results"][GROUP][f"{metric}_stderr,none"]
        assert [(t["task"], t["size"]) for t in got["tasks"]] == [
            ("fixture_mc", 3),
            ("fixture_mc2", 2),
        ]
        assert all(t["score"] == scores[t["check_id"]] for t in got["tasks"])


def test_the_group_bundle_verifies_audits_and_checks(chain: dict[str, Any]) -> None:
    bundle = str(chain["bundle"])
    done = run_cli("verify", bundle, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    done = run_cli("audit", bundle, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    done = run_cli("import-lm-eval", "--check", bundle, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["matches"] is True


@pytest.mark.parametrize(
    "field", [("rule", "unweighted"), ("derived", 0.41), ("value", 0.41)], ids=lambda f: f[0]
)
def test_check_names_a_forged_group_record(
    chain: dict[str, Any], field: tuple[str, Any], tmp_path: Path
) -> None:
    """A re-sealed bundle whose body says the group aggregate is something else: --check
    re-derives the group by the same rule and names the body."""
    eb = repack.open_bundle(chain["bundle"])
    eb.edit_json(
        "data/report/body.json",
        lambda b: b["subject"]["run"]["groups"][0]["aggregates"][0].update([field]),
    )
    _reseal(eb)
    forged = repack.write_bundle(eb, tmp_path / "forged.tar.zst")
    assert run_cli("verify", str(forged)).returncode == 0  # it verifies: only --check sees it
    done = run_cli("import-lm-eval", "--check", str(forged), "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    named = {d["path"] for d in json.loads(done.stdout)["differences"]}
    assert "data/report/body.json" in named


# ------------------------------------------------------------------ SPEC 5 bounds


def _doubling(r: dict[str, Any]) -> None:
    """40 levels, each group naming the next twice: walked naively, 2^40 visits."""
    for i in range(40):
        name = f"fixture_level{i}"
        r["group_subtasks"][name] = [f"fixture_level{i + 1}"] * 2
        r["results"][name] = {"alias": name, "name": name}
    r["group_subtasks"]["fixture_level40"] = []
    r["results"]["fixture_level40"] = {"alias": "l", "name": "fixture_level40"}


def _wide(r: dict[str, Any]) -> None:
    """An outer group of fixture_group and 50,000 empty groups, its aggregate true."""
    empties = [f"fixture_empty{i}" for i in range(50_000)]
    for name in empties:
        r["group_subtasks"][name] = []
        r["results"][name] = {"alias": name, "name": name}
    _add_outer(r, [GROUP, *empties], {"acc,none": _weighted("acc,none", LEAVES)})


@pytest.mark.parametrize(
    ("shape", "code", "phrase"),
    [(_doubling, 3, b"is already a subtask of"), (_wide, 0, b"")],
    ids=["doubling", "wide"],
)
def test_group_shapes_stay_within_memory_and_time(
    shape: Callable[[dict[str, Any]], None], code: int, phrase: bytes, tmp_path: Path
) -> None:
    results = copy.deepcopy(REAL)
    shape(results)
    run = measure.spawn_measured(
        [
            sys.executable,
            "-m",
            "bundler",
            "import-lm-eval",
            *args_of(results, tmp_path),
            "--store",
            str(tmp_path / "store"),
            "--principal",
            "a",
        ],
        deadline=120,
    )
    assert run.code == code, run.stderr
    assert phrase in run.stderr
    assert run.peak_bytes < 300 * 1024 * 1024
    assert run.cpu < 20, run.cpu  # CPU, not wall: the suite shares two cores
