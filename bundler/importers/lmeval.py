"""Reading an lm-evaluation-harness run into an ``ImportedRun`` (SPEC 16).

A run is one ``results_<date>.json`` and, per task, one ``samples_<task>_<date>.jsonl``
(written with ``--log_samples``). lm-eval hashes its inputs but never its outputs; its
own hashes are recomputed here and a mismatch refuses the import:

- ``doc_hash``: SHA-256 of ``json.dumps(doc, indent=2, ensure_ascii=False)``;
- ``prompt_hash``: of the first request's context (``arguments.gen_args_0.arg_0``);
- ``target_hash``: of ``str(target)``;
- ``task_hashes[task]``: of the three hashes of every sample line, concatenated in file
  order.

Mapping (docs/format.md has the whole table): a check per (task, metric, filter), the
metric's ``_stderr`` going into the check's observations; a case per document and
filter; the example is the document; the output the filtered responses; the evidence
the request arguments, all responses and lm-eval's three hashes; the score lm-eval's own
per-document value of the metric. A group's aggregate is no check: it is re-derived from
its tasks' checks (``lmgroups``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from bundler.core import canonical
from bundler.core.errors import CanonicalJSONError, InputError
from bundler.evalbook.group_rule import member_check_id
from bundler.importers.digestwriter import Stager
from bundler.importers.lmgroups import group_names, read_groups
from bundler.importers.model import (
    CaseStatus,
    ImportedCase,
    ImportedCheck,
    ImportedDataset,
    ImportedFile,
    ImportedRun,
    ImportedScorer,
    Producer,
    Role,
    issued_at_text,
    to_identifier,
    unique_identifiers,
    unique_joined_identifiers,
)
from bundler.importers.runfile import RunFile

MAX_RESULTS_BYTES = 32 * 1024 * 1024
MAX_LINE_BYTES = 16 * 1024 * 1024
MAX_LINES = 200_000
MAX_MEMBER_VALUES = 1_000_000  # JSON values in one line or the results file (SPEC 5)
_SAMPLES_NAME = re.compile(r"\Asamples_(.+)_(\d{4}-\d{2}-\d{2}T[0-9.:-]+)\.jsonl\Z")
_RESULTS_NAME = re.compile(r"\Aresults_(\d{4}-\d{2}-\d{2}T[0-9.:-]+)\.json\Z")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _lines(f: RunFile) -> Iterator[tuple[int, bytes]]:
    """The file's lines, each at most MAX_LINE_BYTES, at most MAX_LINES of them (each
    chunk is scanned once: no copying of what remains per line)."""
    pending = b""
    number = 0
    for chunk in f.chunks():
        buffer = pending + chunk
        start = 0
        while (cut := buffer.find(b"\n", start)) >= 0:
            number += 1
            if number > MAX_LINES:
                raise InputError(f"{f.name}: more than {MAX_LINES} lines")
            if cut - start > MAX_LINE_BYTES:
                raise InputError(f"{f.name}:{number}: a line longer than {MAX_LINE_BYTES} bytes")
            yield number, buffer[start:cut]
            start = cut + 1
        pending = buffer[start:]
        if len(pending) > MAX_LINE_BYTES:
            raise InputError(f"{f.name}:{number + 1}: a line longer than {MAX_LINE_BYTES} bytes")
    if pending:
        number += 1
        if number > MAX_LINES:
            raise InputError(f"{f.name}: more than {MAX_LINES} lines")
        yield number, pending


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _issued_at(date: Any, total: Any, where: str) -> str:
    if not _number(date):
        raise InputError(f"{where}: date: missing or not a number (seconds since the epoch)")
    try:
        seconds = float(total)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}: total_evaluation_time_seconds: not a number") from exc
    end = date + seconds
    if not math.isfinite(end) or not 0 <= end < 253402300800 or seconds < 0:
        raise InputError(f"{where}: date + total_evaluation_time_seconds: out of range")
    return issued_at_text(datetime.fromtimestamp(math.floor(end), UTC), where)


def read_lm_eval_run(
    results_file: RunFile,
    samples_files: list[RunFile],
    writer: Stager,
) -> ImportedRun:
    """The run the files record; payloads and example bodies staged in ``writer``.

    Raises InputError (exit 3) for a malformed file, a samples file that names no task
    of the results, a task without its samples, or a hash that does not recompute.
    """
    where = results_file.name
    try:
        results = canonical.loads(
            results_file.read_all(cap=MAX_RESULTS_BYTES),
            source=where,
            max_values=MAX_MEMBER_VALUES,
        )
    except CanonicalJSONError as exc:
        raise InputError(str(exc)) from exc
    if not isinstance(results, dict):
        raise InputError(f"{where}: a results file is a JSON object")
    for key, kind in (
        ("results", dict),
        ("configs", dict),
        ("task_hashes", dict),
        ("config", dict),
    ):
        if not isinstance(results.get(key), kind):
            raise InputError(f"{where}: {key}: missing or not an object")
    if _RESULTS_NAME.match(results_file.path.name) is None:
        raise InputError(f"{where}: not named results_<date>.json as lm-eval names it")
    issued_at = _issued_at(results.get("date"), results.get("total_evaluation_time_seconds"), where)
    tasks = sorted(results["configs"])
    if not tasks:
        raise InputError(f"{where}: configs: no task")
    by_task: dict[str, RunFile] = {}
    for f in samples_files:
        m = _SAMPLES_NAME.match(f.path.name)
        if m is None or m.group(1) not in results["configs"]:
            raise InputError(
                f"{f.name}: not named samples_<task>_<date>.jsonl for a task of {where}"
            )
        if m.group(1) in by_task:
            raise InputError(f"{f.name}: a second samples file for task {m.group(1)!r}")
        by_task[m.group(1)] = f
    for task in tasks:
        if task not in by_task:
            raise InputError(f"{where}: task {task!r} has no samples file (give it with --samples)")
    # Nothing hidden: every entry of results is a task the import maps or a group whose
    # aggregate it re-derives (lmgroups), and every task hash names a task.
    groups = group_names(results, where)
    for key in ("results", "task_hashes"):
        for task in results[key]:
            if task not in results["configs"] and (key == "task_hashes" or task not in groups):
                raise InputError(
                    f"{where}: {key}.{task}: a task with no entry in configs and no samples "
                    "file"
                    + ("" if key == "task_hashes" else ", and no group of group_subtasks")
                    + "; import refused"
                )

    unique_identifiers(tasks, what="tasks", source=where)
    checks: list[ImportedCheck] = []
    datasets: dict[str, ImportedDataset] = {}
    scorers: dict[str, ImportedScorer] = {}
    model = results["config"].get("model")
    version = results.get("lm_eval_version")
    for task in tasks:
        t_checks, dataset = _read_task(task, results, by_task[task], writer, where)
        checks.extend(t_checks)
        datasets[task] = dataset
        config = results["configs"][task]
        source = (
            (config.get("metadata") or {}).get("config_source")
            if isinstance(config, dict)
            else None
        )
        scorers[task] = ImportedScorer(
            name=task,
            entrypoint=str(source or task),
            runtime=f"lm-eval {version}",
            config={
                "runner": "lm-evaluation-harness",
                "task": task,
                "task_config": config,
                "version": (results.get("versions") or {}).get(task),
                "n-shot": (results.get("n-shot") or {}).get(task),
            },
        )
    unique_joined_identifiers(
        [(c.scorer, c.metric, c.filter) for c in checks], what="checks", source=where
    )
    imported_groups = read_groups(results, checks, datasets, where)
    files = [
        ImportedFile(
            Role.RESULTS,
            results_file.path.name,
            results_file.sha256,
            results_file.size,
            str(results_file.path),
        ),
        *(
            ImportedFile(Role.SAMPLES, f.path.name, f.sha256, f.size, str(f.path), holds=task)
            for task, f in sorted(by_task.items(), key=lambda item: item[1].path.name)
        ),
    ]
    model_name = str(results.get("model_name") or model or "model")
    return ImportedRun(
        producer=Producer.LM_EVAL,
        evaluation_id=f"{model_name}@{results.get('date')}",
        project=",".join(tasks),
        organization="lm-evaluation-harness",
        issued_at=issued_at,
        issued_at_where=f"{where}: date + total_evaluation_time_seconds",
        run={
            "model": model,
            "model_args": results["config"].get("model_args"),
            "model_name": results.get("model_name"),
            "tasks": tasks,
            "date": results.get("date"),
            "total_evaluation_time_seconds": results.get("total_evaluation_time_seconds"),
            "random_seed": results["config"].get("random_seed"),
            "git_hash": results.get("git_hash"),
            "task_hashes": results["task_hashes"],
        },
        runner={"name": "lm-evaluation-harness", "version": version},
        files=files,
        scorers=scorers,
        datasets=datasets,
        checks=checks,
        report_base=f"lm-eval-{to_identifier(str(model or 'model'))}",
        groups=imported_groups,
    )


# Keys of a task's results that describe it rather than measure it; every other key is
# ``<metric>,<filter>`` (a metric without a filter would be dropped, so it is refused).
_DESCRIPTIVE_KEYS = frozenset({"alias", "name", "sample_len", "sample_count"})


def _read_task(
    task: str, results: dict[str, Any], f: RunFile, writer: Stager, where: str
) -> tuple[list[ImportedCheck], ImportedDataset]:
    values = results["results"].get(task)
    if not isinstance(values, dict):
        raise InputError(f"{where}: results.{task}: missing or not an object")
    config = results["configs"][task]
    runner_repeats = config.get("repeats", 1) if isinstance(config, dict) else 1
    specs: list[tuple[str, str]] = []
    for key in values:
        metric, sep, filt = key.partition(",")
        if not sep:
            if key not in _DESCRIPTIVE_KEYS:
                raise InputError(
                    f"{where}: results.{task}.{key}: not <metric>,<filter> (lm-eval names every "
                    f"metric with its filter; the descriptive keys are "
                    f"{', '.join(sorted(_DESCRIPTIVE_KEYS))}); import refused"
                )
        elif not metric.endswith("_stderr"):
            specs.append((metric, filt))
        elif f"{metric.removesuffix('_stderr')},{filt}" not in values:
            raise InputError(
                f"{where}: results.{task}.{key}: a standard error without its metric "
                f"{metric.removesuffix('_stderr')},{filt} (lm-eval writes them together, and "
                "it could not be recorded); import refused"
            )
    checks: dict[tuple[str, str], ImportedCheck] = {}
    for metric, filt in specs:
        value = values[f"{metric},{filt}"]
        if value is not None and not _number(value):
            raise InputError(f"{where}: results.{task}.{metric},{filt}: not a number")
        observations: list[Any] = [{"metric": "runner_repeats", "value": runner_repeats}]
        if f"{metric}_stderr,{filt}" in values:
            observations.append(
                {"metric": f"{metric}_stderr", "value": values[f"{metric}_stderr,{filt}"]}
            )
        checks[(metric, filt)] = ImportedCheck(
            check_id=member_check_id(task, metric, filt),
            scorer=task,
            dataset=task,
            metric=metric,
            value=value,
            explanation=f"lm-eval task {task}, metric {metric}, filter {filt}: the runner's value",
            repeats=1,
            value_where=f"{where}: results.{task}.{metric},{filt}",
            observations=observations,
            filter=filt,
        )
    examples: dict[str, tuple[str, int]] = {}
    seen: set[tuple[str, str]] = set()
    concatenated = hashlib.sha256()
    for number, line in _lines(f):
        lwhere = f"{f.name}:{number}"
        try:
            s = canonical.loads(line, source=lwhere, max_values=MAX_MEMBER_VALUES)
        except CanonicalJSONError as exc:
            raise InputError(str(exc)) from exc
        if not isinstance(s, dict):
            raise InputError(f"{lwhere}: a sample line is a JSON object")
        for key in ("doc_hash", "prompt_hash", "target_hash", "filter"):
            if not isinstance(s.get(key), str):
                raise InputError(f"{lwhere}: {key}: missing or not a string")
        doc_id = s.get("doc_id")
        if not isinstance(doc_id, int) or isinstance(doc_id, bool) or doc_id < 0:
            raise InputError(f"{lwhere}: doc_id: missing or not an integer >= 0")
        if "doc" not in s or "target" not in s:
            raise InputError(f"{lwhere}: doc or target missing")
        args = s.get("arguments")
        first = args.get("gen_args_0") if isinstance(args, dict) else None
        context = first.get("arg_0") if isinstance(first, dict) else None
        if not isinstance(context, str):
            raise InputError(f"{lwhere}: arguments.gen_args_0.arg_0: missing or not a string")
        recomputed = {
            "doc_hash": _sha(json.dumps(s["doc"], indent=2, ensure_ascii=False)),
            "prompt_hash": _sha(context),
            "target_hash": _sha(_python_str(s["target"])),
        }
        for key, value in recomputed.items():
            if s[key] != value:
                raise InputError(
                    f"{lwhere}: {key} {s[key]!r} does not recompute (the line gives {value}); "
                    "import refused"
                )
        concatenated.update((s["doc_hash"] + s["prompt_hash"] + s["target_hash"]).encode())
        example_id = str(doc_id)
        filt = s["filter"]
        if (example_id, filt) in seen:
            raise InputError(f"{lwhere}: document {doc_id} appears twice for filter {filt!r}")
        seen.add((example_id, filt))
        body = canonical.dumps(s["doc"])
        digest = writer.put_example(body)
        if example_id in examples and examples[example_id][0] != digest:
            raise InputError(f"{lwhere}: document {doc_id} differs from an earlier line's")
        examples[example_id] = (digest, len(body))
        output = writer.put_payload(
            canonical.dumps({"filter": filt, "filtered_resps": s.get("filtered_resps")})
        )
        evidence = writer.put_payload(
            canonical.dumps(
                {
                    "doc_id": doc_id,
                    "filter": filt,
                    "target": s["target"],
                    "arguments": args,
                    "resps": s.get("resps"),
                    "doc_hash": s["doc_hash"],
                    "prompt_hash": s["prompt_hash"],
                    "target_hash": s["target_hash"],
                }
            )
        )
        metrics = s.get("metrics")
        if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
            raise InputError(f"{lwhere}: metrics: missing or not a list of names")
        for metric in metrics:
            check = checks.get((metric, filt))
            if check is None:
                raise InputError(
                    f"{lwhere}: metric {metric!r} with filter {filt!r} is not in the results of "
                    f"task {task!r}"
                )
            value = s.get(metric)
            if isinstance(value, bool):
                value = 1.0 if value else 0.0
            if not _number(value) or not math.isfinite(value):
                raise InputError(
                    f"{lwhere}: {metric}: the per-document value {value!r} is not a number "
                    "(corpus-level metrics are not imported)"
                )
            status = CaseStatus.PASS if value >= 1 else CaseStatus.FAIL
            check.cases.append(ImportedCase(example_id, 1, status, value, output, (evidence,)))
    task_hash = results["task_hashes"].get(task)
    if task_hash != concatenated.hexdigest():
        raise InputError(
            f"{where}: task_hashes.{task} {task_hash!r} does not recompute from {f.name} "
            f"(the samples give {concatenated.hexdigest()}); import refused"
        )
    return list(checks.values()), ImportedDataset(task, examples)


def _python_str(value: Any) -> str:
    """``str(value)`` as Python prints the value lm-eval hashed (a parsed JSON value)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "True" if value else "False"
    if value is None:
        return "None"
    if isinstance(value, int | float):
        return repr(value)
    return str(value)
