"""SPEC 5 and 16: an mmlu-sized lm-eval run stays within the resource bounds through the
whole chain, and its store grows linearly with the run.

A run of 57 tasks and 14,042 documents in all (MMLU's test split) under one group,
built by ``lmsynth`` with distinct documents and recomputed hashes, is imported,
exported and verified by the console script, each measured on its own (``measure``):
under 300 MB of memory and a CPU budget (CPU, not wall: the suite shares two cores).
A case's evidence names only the run files that hold it (the results file and its own
task's samples file), so the case files do not grow with the number of tasks: the
store of 1,000 one-group tasks is no more than a constant times the run's bytes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import lmsynth
import measure
import pytest

MB = 1024 * 1024


def _cli(*args: str, deadline: float = 120) -> measure.Measured:
    return measure.spawn_measured([sys.executable, "-m", "bundler", *args], deadline=deadline)


def _size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def mmlu(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    tmp = tmp_path_factory.mktemp("mmlu")
    results, samples = lmsynth.write_group_run(tmp / "run", lmsynth.mmlu_sizes(), metrics=("acc",))
    store = tmp / "store"
    imported = _cli(
        "import-lm-eval",
        *lmsynth.import_args(results, samples),
        "--store",
        str(store),
        "--principal",
        "alice",
        "--json",
    )
    return {"tmp": tmp, "store": store, "samples": samples, "imported": imported}


def test_an_mmlu_sized_run_imports_exports_and_verifies_within_bounds(
    mmlu: dict[str, object],
) -> None:
    imported = mmlu["imported"]
    assert isinstance(imported, measure.Measured)
    assert imported.code == 0, imported.stderr
    assert imported.peak_bytes < 300 * MB, imported.peak_bytes
    assert imported.cpu < 30, imported.cpu
    record = json.loads(imported.stdout)
    tmp, store = Path(str(mmlu["tmp"])), Path(str(mmlu["store"]))
    report = store / "reports" / record["report_id"]
    assert len(record["checks"]) == 57
    # Each case names the results file and its own task's samples file, never the others.
    samples = {p.name for p in mmlu["samples"]}  # type: ignore[attr-defined]
    body = json.loads((report / "body.json").read_bytes())
    names = {f["digest"]: f["name"] for f in body["subject"]["files"]}
    with (report / "cases" / "mmlu_subject_000.acc.none.jsonl").open("rb") as f:
        first = json.loads(f.readline())
    held = [names[e["digest"]] for e in first["evidence"] if e["kind"] == "artifact"]
    assert held[0].startswith("results_") and held[1:] == [
        n for n in sorted(samples) if n.startswith("samples_mmlu_subject_000_")
    ]
    bundle = tmp / "mmlu.tar.zst"
    exported = _cli(
        "export",
        "--store",
        str(store),
        "--report",
        record["report_id"],
        "--principal",
        "alice",
        "--exported-at",
        "2030-01-01T00:00:00Z",
        "--out",
        str(bundle),
    )
    assert exported.code == 0, exported.stderr
    assert exported.peak_bytes < 300 * MB, exported.peak_bytes
    assert exported.cpu < 20, exported.cpu
    verified = _cli("verify", str(bundle), "--json")
    assert verified.code == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["verdict"] == "verified"
    assert verified.peak_bytes < 300 * MB, verified.peak_bytes
    assert verified.cpu < 20, verified.cpu


def test_the_store_grows_linearly_with_the_tasks(tmp_path: Path) -> None:
    """300 tasks of 3 documents: when every case named every samples file, the store
    was some 50 times the run (and 140 times at 1,000 tasks); now a small multiple."""
    results, samples = lmsynth.write_group_run(tmp_path / "run", [3] * 300, prefix="t")
    run_bytes = _size(tmp_path / "run")
    done = _cli(
        "import-lm-eval",
        *lmsynth.import_args(results, samples),
        "--store",
        str(tmp_path / "store"),
        "--principal",
        "a",
        "-q",
    )
    assert done.code == 0, done.stderr
    assert done.peak_bytes < 300 * MB, done.peak_bytes
    assert _size(tmp_path / "store") < 6 * run_bytes, (_size(tmp_path / "store"), run_bytes)


def test_a_task_file_of_every_scorer_is_created_once(tmp_path: Path) -> None:
    """Each --task file is a file of every scorer; the store holds one file per distinct
    content, linked into each scorer (creating files is most of an import's time), and
    different contents stay different files."""
    results, samples = lmsynth.write_group_run(tmp_path / "run", [2] * 3, prefix="t")
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for i in range(200):
        (tasks / f"t{i:03d}.yaml").write_text(f"task: {i % 150}\n")  # 50 repeat a content
    store = tmp_path / "store"
    args = [a for i in range(200) for a in ("--task", str(tasks / f"t{i:03d}.yaml"))]
    done = _cli(
        "import-lm-eval", *lmsynth.import_args(results, samples), "--store", str(store),
        "--principal", "a", "-q", *args,
    )  # fmt: skip
    assert done.code == 0, done.stderr
    scorers = sorted((store / "scorers").iterdir())
    assert len(scorers) == 3
    inodes: dict[int, bytes] = {}
    for scorer in scorers:
        for i in range(200):
            f = scorer / "1" / "files" / f"t{i:03d}.yaml"
            assert f.read_bytes() == f"task: {i % 150}\n".encode()
            inode = f.stat().st_ino
            assert inodes.setdefault(inode, f.read_bytes()) == f.read_bytes()
    assert len(inodes) == 150  # one file per distinct content, in all three scorers
