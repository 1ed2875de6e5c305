"""Synthetic lm-eval group runs of any size, built from the committed group fixture.

``write_group_run(out, sizes)`` writes one ``results_<date>.json`` and one samples file
per task (``sizes[i]`` documents for task ``i``) under one group, as lm-eval 0.4 writes
an mmlu-style run: every document distinct, its ``doc_hash``, ``prompt_hash``,
``target_hash`` and the ``task_hashes`` recomputed, each task's values the means of its
samples and the group's ``acc`` weighted by size (``acc_norm`` unweighted), with
``sample_len`` and ``sample_count``. ``metrics`` picks the per-document metrics (real
MMLU reports ``acc`` alone; the fixture's tasks report ``acc`` and ``acc_norm``);
``pad`` lengthens every prompt, so a run can be made as heavy per line as a real one.
Import as ``import lmsynth`` from tests.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GROUP_RUN = ROOT / "fixtures" / "runners" / "lm-eval" / "group-run"
RESULTS = next(GROUP_RUN.glob("results_*.json"))
DATE = RESULTS.name.removeprefix("results_").removesuffix(".json")
MMLU_DOCUMENTS = 14_042  # the test split of MMLU's 57 subjects


def mmlu_sizes(tasks: int = 57, documents: int = MMLU_DOCUMENTS) -> list[int]:
    """``documents`` spread over ``tasks`` as evenly as whole numbers allow."""
    base, extra = divmod(documents, tasks)
    return [base + (1 if i < extra else 0) for i in range(tasks)]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _line(task: str, doc_id: int, metrics: tuple[str, ...], pad: int) -> dict[str, Any]:
    label = (doc_id * 7 + len(task)) % 4
    question = f"{task} question {doc_id}: which choice is right?" + " filler" * pad
    doc = {
        "question": question,
        "subject": task,
        "choices": [f"choice {k} of {doc_id}" for k in range(4)],
        "answer": label,
    }
    args = {
        f"gen_args_{k}": {"arg_0": question + "\nAnswer:", "arg_1": f" {c}"}
        for k, c in enumerate(doc["choices"])
    }
    logliks = [[str(-1.0 - ((doc_id + k) % 5) / 10), "False"] for k in range(4)]
    guess = max(range(4), key=lambda k: float(logliks[k][0]))
    target = str(label)
    line: dict[str, Any] = {
        "doc_id": doc_id,
        "doc": doc,
        "target": target,
        "arguments": args,
        "resps": [[x] for x in logliks],
        "filtered_resps": logliks,
        "filter": "none",
        "metrics": list(metrics),
        "doc_hash": _sha(json.dumps(doc, indent=2, ensure_ascii=False)),
        "prompt_hash": _sha(args["gen_args_0"]["arg_0"]),
        "target_hash": _sha(target),
    }
    for m in metrics:
        line[m] = 1.0 if (guess == label) != (m == "acc_norm" and doc_id % 3 == 0) else 0.0
    return line


def write_group_run(
    out: Path,
    sizes: list[int],
    *,
    metrics: tuple[str, ...] = ("acc", "acc_norm"),
    group: str = "mmlu",
    prefix: str = "mmlu_subject_",
    pad: int = 0,
) -> tuple[Path, list[Path]]:
    """Write the run under ``out``; return its results file and samples files."""
    out.mkdir(parents=True, exist_ok=True)
    base = json.loads(RESULTS.read_bytes())
    r = copy.deepcopy(base)
    for key in (
        "results",
        "groups",
        "group_subtasks",
        "configs",
        "versions",
        "n-shot",
        "higher_is_better",
        "n-samples",
        "task_hashes",
    ):
        r[key] = {}
    tasks = [f"{prefix}{i:03d}" for i in range(len(sizes))]
    means: dict[str, list[float]] = {m: [] for m in metrics}
    samples = []
    for task, size in zip(tasks, sizes, strict=True):
        lines = [_line(task, j, metrics, pad) for j in range(size)]
        path = out / f"samples_{task}_{DATE}.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        samples.append(path)
        entry: dict[str, Any] = {"name": task, "alias": f" - {task}", "sample_len": size}
        for m in metrics:
            mean = sum(x[m] for x in lines) / size
            means[m].append(mean)
            entry[f"{m},none"] = mean
            entry[f"{m}_stderr,none"] = 0.01
        r["results"][task] = entry
        config = copy.deepcopy(base["configs"]["fixture_mc"])
        config["task"] = task
        r["configs"][task] = config
        r["versions"][task] = 1.0
        r["n-shot"][task] = 0
        r["higher_is_better"][task] = {m: True for m in metrics}
        r["n-samples"][task] = {"original": size, "effective": size}
        r["task_hashes"][task] = _sha(
            "".join(x["doc_hash"] + x["prompt_hash"] + x["target_hash"] for x in lines)
        )
    total = sum(sizes)
    agg: dict[str, Any] = {"alias": group, "name": group, "sample_len": total}
    for m in metrics:
        if m == "acc":
            agg[f"{m},none"] = sum(v * n for v, n in zip(means[m], sizes, strict=True)) / total
        else:
            agg[f"{m},none"] = sum(means[m]) / len(sizes)
        agg[f"{m}_stderr,none"] = 0.003
    agg["sample_count"] = {f"{m},none": total for m in metrics}
    r["results"][group] = agg
    r["groups"][group] = copy.deepcopy(agg)
    r["group_subtasks"][group] = tasks
    r["versions"][group] = "2"
    r["n-shot"][group] = 0
    r["higher_is_better"][group] = {m: True for m in metrics}
    results = out / RESULTS.name
    results.write_text(json.dumps(r, indent=2))
    return results, samples


def import_args(results: Path, samples: list[Path]) -> list[str]:
    args = [str(results)]
    for s in samples:
        args += ["--samples", str(s)]
    return args
