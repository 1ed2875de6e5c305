"""SPEC 5 and 16: an mmlu-sized lm-eval run stays within the resource bounds through the
whole chain, and its store grows linearly with the run.

A run of 57 tasks and 14,042 documents in all (MMLU's test split) under one group,
built by ``lmsynth`` with distinct documents and recomputed hashes, is imported,
exported and verified by the console script, each measured on its own (``measure``):
under 300 MB of memory and a CPU budget (CPU, not wall: the suite shares two cores).
Every run file is in the evidence of every check (SPEC 16) through the check's first
case; every other case names only the run files that hold it (the results file and its
own task's samples file), so the case files grow with the documents, not with
documents x tasks: ten times the documents make about ten times the store.
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
        first, second = json.loads(f.readline()), json.loads(f.readline())
    every = [names[e["digest"]] for e in first["evidence"] if e["kind"] == "artifact"]
    assert every[0].startswith("results_") and sorted(every[1:]) == sorted(samples)
    held = [names[e["digest"]] for e in second["evidence"] if e["kind"] == "artifact"]
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


def test_the_store_grows_linearly_with_the_documents(tmp_path: Path) -> None:
    """20 tasks of 15 documents, then of 150: when every case named every samples file
    the store grew as documents x tasks; now each further document costs the store a
    constant multiple of its bytes, whatever the number of tasks."""
    sizes, runs = [], []
    for docs in (15, 150):
        run = tmp_path / f"run{docs}"
        results, samples = lmsynth.write_group_run(run, [docs] * 20, prefix="t")
        runs.append(_size(run))
        done = _cli(
            "import-lm-eval",
            *lmsynth.import_args(results, samples),
            "--store",
            str(tmp_path / f"store{docs}"),
            "--principal",
            "a",
            "-q",
        )
        assert done.code == 0, done.stderr
        assert done.peak_bytes < 300 * MB, done.peak_bytes
        sizes.append(_size(tmp_path / f"store{docs}"))
    # Each further document adds about 3.4 times its bytes to the store (its sample kept
    # as evidence, two cases naming two run files); naming all 21 run files in every case
    # made it about 7.
    per_byte = (sizes[1] - sizes[0]) / (runs[1] - runs[0])
    assert per_byte < 5, (sizes, runs, per_byte)
