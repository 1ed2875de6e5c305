"""An imported run as the documents of an EvalBook store (SPEC 3, 12 and 16).

One function, ``build_documents``, for both runners: datasets, scorer versions, the
suite, check results, cases, evidence manifests, the report body and envelope, all
stored canonical, all a pure function of the run, the given files and the options.
Identifiers name one content forever: each id ends in 16 hex digits of the digest of
the document's content without its own id, so different content never shares an id and
the same content always gets the same one. Statuses, coverage, evidence completeness,
assurance, the report's result and each check's score are derived with SPEC 12's own
code (``evalbook.derive``), so ``audit`` re-derives exactly what the import wrote. The
runner's own value of each metric is kept in the check's observations, and it must be
what SPEC 12 derives from the samples under the no-decision rule (the mean over examples
of the mean of their repeats): a header that disagrees with its samples, or a metric that
is not that mean, refuses the import. Every document is checked against its store
schema before anything is committed, so the store holds nothing its readers refuse.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bundler.core import canonical, schemas
from bundler.core.digests import json_digest
from bundler.core.errors import CanonicalJSONError, InputError, SchemaError
from bundler.core.version import TOOL_NAME, __version__
from bundler.evalbook.compare import _json_equal, numbers_agree
from bundler.evalbook.contract import MAX_EVIDENCE_REFS
from bundler.evalbook.derive import derive_check, derive_report
from bundler.evalbook.scorers import scorer_file_order, scorer_version_digest
from bundler.evalbook.verdicts import DerivedCheck
from bundler.importers.decision import Decision, no_threshold
from bundler.importers.digestwriter import Stager
from bundler.importers.lmgroups import rederive_groups
from bundler.importers.model import ImportedCheck, ImportedFile, ImportedRun, to_identifier
from bundler.importers.storewriter import PayloadRef

ASSURANCE = "reported"
NO_DECISION = "no decision rule given"
VERSION = 1
MAX_CASES = 20_000 * 8  # cases a report may hold at import (export cuts at 20,000)


@dataclass(frozen=True)
class TaskFile:
    """A file given with ``--task``: a scorer version's file, bound by its framed digest."""

    name: str
    data: bytes
    entry: ImportedFile


@dataclass(frozen=True)
class BuiltReport:
    report_id: str
    body_digest: str
    result: str
    checks: list[tuple[str, str]]  # (check_id, status)


def _tagged_id(base: str, value: Any) -> str:
    """``<base>-<16 hex of the JSON digest of value>``, within the identifier rules."""
    tail = json_digest(value).removeprefix("sha256:")[:16]
    return f"{to_identifier(base)[:100]}-{tail}"


def _valid_until(run: ImportedRun, hours: int) -> str:
    """``issued_at`` + ``hours``; refused, naming the run's field, past year 9999."""
    moment = datetime.strptime(run.issued_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    try:
        return (moment + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")
    except OverflowError as exc:
        raise InputError(
            f"{run.issued_at_where}: {run.issued_at} + {hours} validity hours (the report's "
            "valid_until) is past 9999-12-31T23:59:59Z; import refused"
        ) from exc


def _checked(run: ImportedRun, schema: str, relpath: str, value: Any) -> bytes:
    """``value`` stored canonical, once it meets the store schema its readers apply."""
    try:
        schemas.validate(schema, value, source=f"{run.files[0].path}: the imported {relpath}")
    except SchemaError as exc:
        raise InputError(f"{exc}; import refused") from exc
    return _stored(run, relpath, value)


def _stored(run: ImportedRun, relpath: str, value: Any) -> bytes:
    """``value`` stored canonical, once the store's strict reader would read it back: a
    number of the run such as 1e19 is written as an integer that reader refuses
    (``canonical.check_readable``), and export would then refuse the report."""
    data = canonical.dumps(value)
    try:
        canonical.check_readable(data, source=f"{run.files[0].path}: the imported {relpath}")
    except CanonicalJSONError as exc:
        raise InputError(
            f"{exc.message} (a number of the run the store's readers cannot hold); import refused"
        ) from None
    return data


def _case_id(check_id: str, example_id: str, repeat: int) -> str:
    case_id = f"{check_id}.{example_id}.{repeat}"
    if len(case_id) <= 128:
        return case_id
    tail = hashlib.sha256(f"{example_id}\x00{repeat}".encode()).hexdigest()[:24]
    return f"{check_id[:100]}.{tail}"


def build_documents(
    run: ImportedRun,
    writer: Stager,
    *,
    task_files: list[TaskFile],
    decision: Decision | None,
    report_id: str | None,
) -> BuiltReport:
    """Stage every document of ``run`` in ``writer``; return the report's id and result.

    Raises InputError for a run that cannot become a report (too many cases, a runner's
    value that is not what SPEC 12 derives from its samples, a document its store
    schema refuses, a validity past year 9999).
    """
    if sum(len(c.cases) for c in run.checks) > MAX_CASES:
        raise InputError(f"the run gives more than {MAX_CASES} cases; import refused")
    file_refs = [writer.put_file_payload(Path(f.path), f.digest, f.size) for f in run.files]

    datasets: dict[str, tuple[str, str, list[str]]] = {}  # key -> (id, digest, example ids)
    for key, dataset in sorted(run.datasets.items()):
        examples: list[dict[str, Any]] = [
            {"example_id": eid, "digest": d, "size": n}
            for eid, (d, n) in sorted(dataset.examples.items())
        ]
        dataset_id = _tagged_id(dataset.name, examples)
        manifest = {"dataset_id": dataset_id, "version": VERSION, "examples": examples}
        base = f"datasets/{dataset_id}/{VERSION}"
        writer.put_document(
            f"{base}/manifest.json",
            _checked(run, "dataset-manifest", f"{base}/manifest.json", manifest),
        )
        for e in examples:
            writer.place_example(e["digest"], f"{base}/examples/{e['example_id']}.json")
        datasets[key] = (dataset_id, json_digest(manifest), [e["example_id"] for e in examples])

    scorers: dict[str, dict[str, Any]] = {}  # key -> scorer_ref
    ordered = scorer_file_order(t.name for t in task_files)
    by_name = {t.name: t for t in task_files}
    for key, scorer in sorted(run.scorers.items()):
        descriptor = {
            "version": VERSION,
            "kind": "deterministic",
            "entrypoint": scorer.entrypoint,
            "runtime": scorer.runtime,
            "config": {
                **scorer.config,
                "kind": "not recorded by the runner; deterministic is assumed",
                "task_files": "given" if task_files else "not given",
            },
            "judge": None,
            "files": ordered,
        }
        files = [(f"files/{name}", by_name[name].data) for name in ordered]
        scorer_id = _tagged_id(
            scorer.name, [descriptor, [[n, hashlib.sha256(d).hexdigest()] for n, d in files]]
        )
        descriptor = {"scorer_id": scorer_id, **descriptor}
        base = f"scorers/{scorer_id}/{VERSION}"
        data = _checked(run, "scorer", f"{base}/scorer.json", descriptor)
        writer.put_document(f"{base}/scorer.json", data)
        for name, content in files:
            writer.put_document(f"{base}/{name}", content)
        digest = scorer_version_digest(data, files)
        scorers[key] = {"id": scorer_id, "version": VERSION, "digest": digest}

    checks_out = _build_checks(run, writer, datasets, scorers, file_refs, decision)
    validity = decision.validity_hours if decision is not None else 8760
    decision_rule = {
        "rule": "threshold" if decision is not None else "none",
        "alpha": None,
        "margin": None,
        "correction": None,
    }
    suite = {
        "version": VERSION,
        "status": "active",
        "validity_hours": validity,
        "decision_rule": decision_rule,
        "checks": [c["suite"] for c in checks_out],
    }
    suite_id = _tagged_id(run.report_base, suite)
    suite = {"suite_id": suite_id, **suite}
    suite_path = f"suites/{suite_id}/{VERSION}.json"
    writer.put_document(suite_path, _checked(run, "suite", suite_path, suite))

    derived = derive_report((c["required"], c["derived"]) for c in checks_out)
    reasons = _reasons(checks_out, decision, derived.result.value)
    run_identity = run.run
    if run.groups:
        # A group's aggregate is no check (no samples of its own): it is re-derived from
        # its tasks' means and recorded with the rule it matches (lmgroups).
        means = {c["body"]["check_id"]: c["mean"] for c in checks_out}
        run_identity = {**run.run, "groups": rederive_groups(run.groups, means)}
    subject = {
        "importer": {"tool": TOOL_NAME, "version": __version__},
        "runner": run.runner,
        "run": run_identity,
        "files": [f.subject_entry() for f in run.files],
        "task_files": [t.entry.subject_entry() for t in task_files],
        "decision": None
        if decision is None
        else {"name": decision.name, "digest": decision.digest},
    }
    body: dict[str, Any] = {
        "schema_version": "1.0",
        "producer": run.producer.value,
        "organization": run.organization,
        "project": run.project,
        "report_id": "",
        "evaluation_id": run.evaluation_id,
        "subject": subject,
        "suite_ref": {"id": suite_id, "version": VERSION, "digest": json_digest(suite)},
        "dataset_refs": [
            {"id": d[0], "version": VERSION, "digest": d[1]} for _, d in sorted(datasets.items())
        ],
        "mode": "imported",
        "execution_mode": run.runner["name"],
        "decision_rule": decision_rule,
        "result": derived.result.value,
        "evidence_complete": derived.evidence_complete,
        "reasons": reasons,
        "checks": [c["body"] for c in checks_out],
        "coverage": {
            "expected": derived.coverage.expected,
            "executed": derived.coverage.executed,
            "missing": derived.coverage.missing,
        },
        "issued_at": run.issued_at,
        "valid_until": _valid_until(run, validity),
    }
    body["report_id"] = report_id or _tagged_id(run.report_base, body)
    rid = body["report_id"]
    body_bytes = _checked(run, "report-body", f"reports/{rid}/body.json", body)
    writer.put_document(f"reports/{rid}/body.json", body_bytes)
    envelope = {
        "status": "current",
        "superseded_at": None,
        "superseded_by": None,
        "superseded_reason": None,
        "url": None,
    }
    writer.put_document(f"reports/{rid}/envelope.json", _stored(run, "envelope", envelope))
    for c in checks_out:
        check_id = c["body"]["check_id"]
        path = f"reports/{rid}/checks/{check_id}.json"
        writer.put_document(path, _checked(run, "check-result", path, c["result"]))
        writer.put_document(f"reports/{rid}/cases/{check_id}.jsonl", c["cases"])
    return BuiltReport(
        rid,
        "sha256:" + hashlib.sha256(body_bytes).hexdigest(),
        derived.result.value,
        [(c["body"]["check_id"], c["body"]["status"]) for c in checks_out],
    )


def _no_rule_note(chosen: bool, decision: Decision | None) -> str:
    if chosen:
        return ""
    return f"; {NO_DECISION}" if decision is None else "; the decision gives no rule for this check"


def _reasons(checks_out: list[dict[str, Any]], decision: Decision | None, result: str) -> list[str]:
    """Why the report's result is what it is: every verdict but pass gives a reason."""
    if decision is None:
        return [NO_DECISION]
    required = [c for c in checks_out if c["required"]]
    if not required:
        return ["the decision requires no check"]
    reasons = [
        f"check {c['body']['check_id']}: {c['body']['result']}"
        for c in required
        if c["body"]["result"] != "pass"
    ]
    if result != "pass":
        reasons += [
            f"check {c['body']['check_id']}: evidence incomplete "
            f"({c['derived'].coverage.missing} of {c['derived'].coverage.expected} examples "
            "missing, or a case without an output)"
            for c in required
            if c["body"]["result"] == "pass" and not c["derived"].evidence_complete
        ]
    return reasons


def _runner_value_problem(
    check: ImportedCheck,
    dataset_id: str,
    example_ids: list[str],
    cases: list[dict[str, Any]],
    derived: DerivedCheck | None,
) -> tuple[str | None, float | None]:
    """Why the runner's own value of the metric is not what SPEC 12 derives from the
    check's cases under the no-decision rule (the mean), or None when it is; and that
    mean. ``derived`` is the check's derivation when its aggregation is that rule."""
    mean = derived or derive_check(
        no_threshold(check.repeats),
        dataset_id=dataset_id,
        dataset_version=VERSION,
        expected_example_ids=example_ids,
        cases=cases,
    )
    if mean.problems:
        return f"its samples cannot be derived ({mean.problems[0].message})", None
    if numbers_agree(check.value, mean.score):
        return None, mean.score
    return (
        f"{check.value!r} is not what its samples give, {mean.score!r} (SPEC 12's mean over "
        "the examples whose every repeat was scored, of the mean of their repeats)"
    ), mean.score


def _build_checks(
    run: ImportedRun,
    writer: Stager,
    datasets: dict[str, tuple[str, str, list[str]]],
    scorers: dict[str, dict[str, Any]],
    file_refs: list[PayloadRef],
    decision: Decision | None,
) -> list[dict[str, Any]]:
    out = []
    for check in run.checks:
        # The run files that hold this check's cases: those of the whole run and its own
        # dataset's (lm-eval: its task's samples file), in the subject's order.
        run_file_refs = [
            r.as_case_ref("artifact")
            for f, r in zip(run.files, file_refs, strict=True)
            if f.holds is None or f.holds == check.dataset
        ]
        chosen = decision.checks.get(check.check_id) if decision is not None else None
        required = chosen.required if chosen is not None else False
        aggregation = chosen.aggregation if chosen is not None else no_threshold(check.repeats)
        dataset_id, _, example_ids = datasets[check.dataset]
        lines = []
        cases = []
        evidence_keys: set[tuple[str, str]] = set()
        for case in check.cases:
            # A case's own evidence holds the sample's input and the model's outputs, so
            # it is kind output (redacted with outputs); only run files are artifacts.
            evidence = [r.as_case_ref("output") for r in case.evidence] + run_file_refs
            value = {
                "assurance": ASSURANCE,
                "case_id": _case_id(check.check_id, case.example_id, case.repeat),
                "check_id": check.check_id,
                "evidence": evidence,
                "example": {
                    "dataset_id": dataset_id,
                    "example_id": case.example_id,
                    "version": VERSION,
                },
                "output": None if case.output is None else case.output.as_case_ref("output"),
                "repeat": case.repeat,
                "score": case.score,
                "status": case.status.value,
            }
            cases.append(value)
            lines.append(_stored(run, f"case file of {check.check_id}", value))
            if case.output is not None:
                evidence_keys.add((case.output.digest, "output"))
            for ref in evidence:
                evidence_keys.add((str(ref["digest"]), str(ref["kind"])))
        derived = derive_check(
            aggregation,
            dataset_id=dataset_id,
            dataset_version=VERSION,
            expected_example_ids=example_ids,
            cases=cases,
        )
        if derived.problems:
            raise InputError(
                f"check {check.check_id}: {derived.problems[0].message}; import refused"
            )
        same_rule = _json_equal(aggregation, no_threshold(check.repeats))
        problem, mean = _runner_value_problem(
            check, dataset_id, example_ids, cases, derived if same_rule else None
        )
        if problem is not None:
            raise InputError(f"{check.value_where}: {problem}; import refused")
        ordered = sorted(evidence_keys)
        if len(ordered) <= MAX_EVIDENCE_REFS:
            evidence_refs = [{"digest": d, "kind": k} for d, k in ordered]
        else:
            manifest = {
                "schema": "evalbook.evidence_manifest.v1",
                "check_id": check.check_id,
                "evidence": [{"digest": d, "kind": k} for d, k in ordered],
            }
            data = _stored(run, f"evidence manifest of {check.check_id}", manifest)
            digest = json_digest(manifest)
            writer.put_document(f"blobs/sha256/{digest.removeprefix('sha256:')}", data)
            evidence_refs = [{"digest": digest, "kind": "manifest"}]
        coverage = {
            "expected": derived.coverage.expected,
            "executed": derived.coverage.executed,
            "missing": derived.coverage.missing,
        }
        assurance = None if derived.assurance is None else derived.assurance.value
        body = {
            "check_id": check.check_id,
            "required": required,
            "status": derived.status.value,
            "result": derived.result.value,
            "scorer_ref": scorers[check.scorer],
            "assurance": assurance,
            "evidence_refs": evidence_refs,
            "score": derived.score,
            "explanation": check.explanation + _no_rule_note(chosen is not None, decision),
            "coverage": coverage,
            "observations": [*check.observations, {"metric": check.metric, "value": check.value}],
            "slices": [],
        }
        result = {
            "check_id": check.check_id,
            "required": required,
            "aggregation": aggregation,
            "status": derived.status.value,
            "result": derived.result.value,
            "score": derived.score,
            "interval": None,
            "coverage": coverage,
            "assurance": assurance,
            "slices": [],
        }
        out.append(
            {
                "required": required,
                "derived": derived,
                "body": body,
                "result": result,
                "cases": b"".join(line + b"\n" for line in lines),
                "mean": mean,
                "suite": {
                    "check_id": check.check_id,
                    "required": required,
                    "scorer": {"id": scorers[check.scorer]["id"], "version": VERSION},
                    "dataset": {"id": dataset_id, "version": VERSION},
                    "aggregation": aggregation,
                },
            }
        )
    return out
