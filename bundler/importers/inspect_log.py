"""Reading an Inspect AI ``.eval`` log into an ``ImportedRun`` (SPEC 16).

The log is a zip (read strictly by ``ziplog``, never extracted) whose members are
``header.json`` (log ``version`` 2, the only version read), ``samples/<id>_epoch_<n>.json``
(one per sample and epoch), ``summaries.json``, ``reductions.json`` and the journal
``_journal/start.json`` and ``_journal/summaries/<n>.json``; any other member is
refused. Samples are read one at a time and their payloads staged at once, so memory
holds the cases' references, not the samples.

Mapping (docs/format.md has the whole table): a check per (scorer, metric), the metric
``stderr`` going into the check's observations; a case per sample, epoch and scorer,
``repeat`` being the epoch; the example is the sample's id, input, target, choices and
metadata; the output the sample's ``output``; its evidence the sample's messages,
events, attachments and score record; the score Inspect's own value (C, I, P, N as 1, 0,
0.5, 0; numbers and booleans as they are); an errored sample is a case with status
``error`` and no score, never dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from bundler.core import canonical
from bundler.core.errors import CanonicalJSONError, InputError
from bundler.importers.digestwriter import Stager
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
from bundler.importers.ziplog import ZipLog

LOG_VERSIONS = frozenset({2})
# Metrics of dispersion, not scores: observations of the scorer's checks (SPEC 16: "a
# metric's standard error is not a check"). Every other metric is a check, whose value
# must be what SPEC 12 derives from the samples (documents.py refuses it otherwise).
DISPERSION_METRICS = frozenset({"stderr", "std", "var", "bootstrap_stderr"})
_SAMPLE = re.compile(r"\Asamples/(.+)_epoch_([1-9][0-9]{0,5})\.json\Z")
_KNOWN = re.compile(
    r"\A(header\.json|summaries\.json|reductions\.json|_journal/start\.json"
    r"|_journal/summaries/[0-9]{1,9}\.json|samples/.+_epoch_[1-9][0-9]{0,5}\.json)\Z"
)
SCORE_LETTERS = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
MAX_EPOCHS = 20_000
# The members the mapping does not use, in all: Inspect's summaries and journal repeat
# each sample's summary (a kilobyte or two), about 100 MB for the 20,000 samples a
# bundle can hold; this leaves twice that and keeps reading them to seconds.
MAX_UNUSED_BYTES = 256 * 1024 * 1024
# JSON values in one member (a sample, the header): parsed whole, so bounded to keep the
# import under SPEC 5's 300 MB (a member of a million dense values peaks near 200 MB).
MAX_MEMBER_VALUES = 1_000_000


def _json(log: ZipLog, name: str) -> Any:
    try:
        return canonical.loads(
            log.read(name), source=f"{log.file.name}: member {name}", max_values=MAX_MEMBER_VALUES
        )
    except CanonicalJSONError as exc:
        raise InputError(str(exc)) from exc


def _field(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj or not isinstance(obj[key], kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise InputError(f"{where}: {key}: missing or not a {names}")
    return obj[key]


def score_value(value: Any, where: str) -> float:
    """Inspect's own score value as a number: C, I, P, N as 1, 0, 0.5, 0."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return value
    if isinstance(value, str) and value in SCORE_LETTERS:
        return SCORE_LETTERS[value]
    raise InputError(
        f"{where}: score value {value!r} is not C, I, P, N, a number or a boolean; import refused"
    )


def _completed_at(stats: dict[str, Any], where: str) -> str:
    key = f"{where}: stats.completed_at"
    if stats.get("completed_at") is None:
        raise InputError(f"{key}: missing (the run did not complete)")
    text = stats["completed_at"]
    if not isinstance(text, str):
        raise InputError(f"{key}: not a string (an ISO 8601 time with a time zone)")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InputError(f"{key}: not an ISO 8601 time") from exc
    if moment.tzinfo is None:
        raise InputError(f"{key}: has no time zone")
    return issued_at_text(moment, key)


def read_inspect_log(
    log_file: RunFile,
    writer: Stager,
    *,
    dataset_files: list[ImportedFile],
    progress: Callable[[int], None] | None = None,
) -> ImportedRun:
    """The run the log records; payloads and example bodies staged in ``writer``.

    Raises InputError (exit 3) for an unsafe container, an unknown log version or
    member, a sample or score that cannot be mapped.
    """
    where = log_file.name
    log = ZipLog.open(log_file)
    for name in log.names():
        if _KNOWN.match(name) is None:
            raise InputError(f"{where}: member {name!r} is not a member of an Inspect log")
    if "header.json" not in log.members:
        raise InputError(f"{where}: no header.json (not a finished Inspect log)")
    header = _json(log, "header.json")
    if not isinstance(header, dict):
        raise InputError(f"{where}: header.json: not a JSON object")
    version = header.get("version")
    # type(...) is int: 2.0 and true are not log version 2.
    if type(version) is not int or version not in LOG_VERSIONS:
        raise InputError(
            f"{where}: header.json: log version {version!r} is not one this importer reads "
            f"({', '.join(map(str, sorted(LOG_VERSIONS)))})"
        )
    # The members the mapping does not use (summaries, reductions, the journal) are run
    # input too: each is read as strictly as the rest, then dropped; their declared
    # sizes are held to a cap of their own first (2 GiB of journal within the log's
    # caps took 13 s to read and drop).
    unused = [n for n in log.names() if n != "header.json" and _SAMPLE.match(n) is None]
    declared = sum(log.members[n].size for n in unused)
    if declared > MAX_UNUSED_BYTES:
        raise InputError(
            f"{where}: its summaries, reductions and journal declare {declared} bytes, "
            f"over the {MAX_UNUSED_BYTES}-byte cap (refused before decompressing them)"
        )
    for name in unused:
        _json(log, name)
    hwhere = f"{where}: header.json"
    status = _field(header, "status", str, hwhere)
    if status != "success":
        raise InputError(f"{hwhere}: status {status!r}: only a finished run (success) is imported")
    ev = _field(header, "eval", dict, hwhere)
    results = _field(header, "results", dict, hwhere)
    stats = _field(header, "stats", dict, hwhere)
    config = _field(ev, "config", dict, f"{hwhere}: eval")
    epochs = config.get("epochs", 1)
    if not isinstance(epochs, int) or isinstance(epochs, bool) or not 1 <= epochs <= MAX_EPOCHS:
        raise InputError(f"{hwhere}: eval.config.epochs: must be an integer in 1..{MAX_EPOCHS}")
    task = _field(ev, "task", str, f"{hwhere}: eval")
    dataset_info = _field(ev, "dataset", dict, f"{hwhere}: eval")
    sample_ids = _field(dataset_info, "sample_ids", list, f"{hwhere}: eval.dataset")
    raw_ids = [str(s) for s in sample_ids]
    if len(set(raw_ids)) != len(raw_ids):
        raise InputError(f"{hwhere}: eval.dataset.sample_ids: an id appears twice")
    example_ids = unique_identifiers(raw_ids, what="sample ids", source=hwhere)

    # Checks: a (scorer, metric) each, in the header's order; stderr is an observation.
    scores = _field(results, "scores", list, f"{hwhere}: results")
    scorer_names: list[str] = []
    check_specs: list[tuple[str, str, float | None, list[Any], str]] = []
    for i, entry in enumerate(scores):
        swhere = f"{hwhere}: results.scores[{i}]"
        name = _field(entry, "name", str, swhere)
        metrics = _field(entry, "metrics", dict, swhere)
        if name in scorer_names:
            raise InputError(f"{swhere}: scorer {name!r} appears twice")
        scorer_names.append(name)
        observations = []
        for metric_name, metric in sorted(metrics.items()):
            value = metric.get("value") if isinstance(metric, dict) else None
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float)
            ):
                raise InputError(f"{swhere}: metrics.{metric_name}.value: not a number")
            if metric_name in DISPERSION_METRICS:
                observations.append({"metric": metric_name, "value": value})
        for metric_name, metric in metrics.items():
            if metric_name not in DISPERSION_METRICS:
                check_specs.append(
                    (
                        name,
                        metric_name,
                        metric.get("value"),
                        observations,
                        f"{swhere}.metrics.{metric_name}.value",
                    )
                )
    if not check_specs:
        raise InputError(f"{hwhere}: results.scores: no scorer metric to import")
    check_ids = unique_joined_identifiers(
        [(s, m) for s, m, _, _, _ in check_specs], what="checks", source=hwhere
    )
    checks = [
        ImportedCheck(
            check_id=check_ids[(s, m)],
            scorer=s,
            dataset="dataset",
            metric=m,
            value=v,
            explanation=(
                f"inspect_ai scorer {s}, metric {m}: the runner's value, over {epochs} "
                f"epoch{'s' if epochs != 1 else ''}"
            ),
            repeats=epochs,
            value_where=value_where,
            observations=list(obs),
        )
        for s, m, v, obs, value_where in check_specs
    ]

    # Samples, one at a time.
    examples: dict[str, tuple[str, int]] = {}
    example_bodies: dict[str, str] = {}
    seen: set[tuple[str, int]] = set()
    sample_members = sorted(
        (n for n in log.names() if n.startswith("samples/")), key=lambda n: n.encode("utf-8")
    )
    for count, name in enumerate(sample_members, 1):
        m = _SAMPLE.match(name)
        assert m is not None
        swhere = f"{where}: member {name}"
        sample = _json(log, name)
        if not isinstance(sample, dict):
            raise InputError(f"{swhere}: a sample is a JSON object")
        sid = sample.get("id")
        epoch = sample.get("epoch")
        if isinstance(sid, bool) or not isinstance(sid, str | int) or str(sid) not in example_ids:
            raise InputError(f"{swhere}: id {sid!r} is not in the header's sample_ids")
        if not isinstance(epoch, int) or isinstance(epoch, bool) or not 1 <= epoch <= epochs:
            raise InputError(f"{swhere}: epoch {epoch!r} is not in 1..{epochs}")
        if m.group(1) != str(sid) or int(m.group(2)) != epoch:
            raise InputError(f"{swhere}: its name does not match its id {sid!r} and epoch {epoch}")
        example_id = example_ids[str(sid)]
        if (example_id, epoch) in seen:
            raise InputError(f"{swhere}: sample {sid!r} epoch {epoch} appears twice")
        seen.add((example_id, epoch))
        body = {k: sample.get(k) for k in ("id", "input", "target", "choices", "metadata")}
        body_bytes = canonical.dumps(body)
        digest = writer.put_example(body_bytes)
        if example_id in example_bodies and example_bodies[example_id] != digest:
            raise InputError(
                f"{swhere}: sample {sid!r} differs from its other epochs in its input, target, "
                "choices or metadata"
            )
        example_bodies[example_id] = digest
        examples[example_id] = (digest, len(body_bytes))
        errored = sample.get("error") is not None
        output = (
            None
            if sample.get("output") is None
            else writer.put_payload(canonical.dumps(sample["output"]))
        )
        sample_scores = sample.get("scores") or {}
        if not isinstance(sample_scores, dict):
            raise InputError(f"{swhere}: scores: not an object")
        for scorer_name in sample_scores:
            if scorer_name not in scorer_names:
                raise InputError(
                    f"{swhere}: scores.{scorer_name}: a scorer the header's results.scores "
                    "does not name; import refused"
                )
        evidence = writer.put_payload(
            canonical.dumps(
                {
                    "sample": {"id": sid, "epoch": epoch, "uuid": sample.get("uuid")},
                    "messages": sample.get("messages"),
                    "events": sample.get("events"),
                    "attachments": sample.get("attachments"),
                    "scores": sample_scores,
                    "error": sample.get("error"),
                    "limit": sample.get("limit"),
                }
            )
        )
        for check in checks:
            record = sample_scores.get(check.scorer)
            if errored or record is None:
                status, score = CaseStatus.ERROR, None
            else:
                if not isinstance(record, dict) or "value" not in record:
                    raise InputError(f"{swhere}: scores.{check.scorer}: no value")
                score = score_value(record["value"], f"{swhere}: scores.{check.scorer}")
                status = CaseStatus.PASS if score >= 1 else CaseStatus.FAIL
            check.cases.append(ImportedCase(example_id, epoch, status, score, output, (evidence,)))
        if progress is not None:
            progress(count)
    for raw_id in raw_ids:
        for epoch in range(1, epochs + 1):
            if (example_ids[raw_id], epoch) not in seen:
                raise InputError(
                    f"{hwhere}: eval.dataset.sample_ids: sample {raw_id!r} epoch {epoch} has no "
                    f"member samples/{raw_id}_epoch_{epoch}.json (every sample of every epoch "
                    "is imported, errored ones too); import refused"
                )
    model = ev.get("model")
    packages = ev.get("packages") if isinstance(ev.get("packages"), dict) else {}
    run_info = {
        "eval_id": ev.get("eval_id"),
        "run_id": ev.get("run_id"),
        "task": task,
        "task_id": ev.get("task_id"),
        "task_version": ev.get("task_version"),
        "task_file": ev.get("task_file"),
        "model": model,
        "created": ev.get("created"),
        "completed_at": stats.get("completed_at"),
        "epochs": epochs,
        "log_version": version,
        "headline": results.get("headline"),
    }
    runtime = f"inspect_ai {packages.get('inspect_ai', 'unknown')}"
    scorer_configs = {s.get("name"): s for s in ev.get("scorers") or [] if isinstance(s, dict)}
    scorers = {
        name: ImportedScorer(
            name=name,
            entrypoint=str(ev.get("task_file") or task),
            runtime=runtime,
            config={
                "runner": "inspect_ai",
                "task": task,
                "scorer": name,
                "options": (scorer_configs.get(name) or {}).get("options"),
                "metrics": (scorer_configs.get(name) or {}).get("metrics"),
            },
        )
        for name in scorer_names
    }
    dataset_name = str(dataset_info.get("name") or task)
    return ImportedRun(
        producer=Producer.INSPECT,
        evaluation_id=str(ev.get("eval_id") or ""),
        project=task,
        organization="inspect_ai",
        issued_at=_completed_at(stats, hwhere),
        issued_at_where=f"{hwhere}: stats.completed_at",
        run=run_info,
        runner={"name": "inspect_ai", "version": packages.get("inspect_ai")},
        files=[
            ImportedFile(
                Role.LOG, log_file.path.name, log_file.sha256, log_file.size, str(log_file.path)
            ),
            *dataset_files,
        ],
        scorers=scorers,
        datasets={"dataset": ImportedDataset(dataset_name, examples)},
        checks=checks,
        report_base=f"inspect-{to_identifier(task)}",
    )
