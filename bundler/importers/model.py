"""What an importer reads out of a run, before it becomes store documents (SPEC 16).

Each importer (``inspect_log``, ``lmeval``) turns a runner's files into one
``ImportedRun``; ``documents`` alone turns an ``ImportedRun`` into the documents of an
EvalBook store. So the mapping to the store (identifiers, digests, derivation) is
written once for both runners.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from bundler.core.errors import InputError
from bundler.core.times import ARCHIVE_TIME_MAX
from bundler.evalbook.group_rule import MAX_IDENTIFIER as MAX_IDENTIFIER
from bundler.evalbook.group_rule import to_identifier as to_identifier
from bundler.importers.storewriter import PayloadRef

_IDENTIFIER = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")


class Producer(StrEnum):
    """The report body's ``producer`` of an imported run (SPEC 3.1, 16)."""

    INSPECT = "evalbook-bundle/import-inspect"
    LM_EVAL = "evalbook-bundle/import-lm-eval"


PRODUCERS = frozenset(p.value for p in Producer)


class Role(StrEnum):
    """What an imported file is, as the report's subject names it."""

    LOG = "log"  # an Inspect .eval log
    RESULTS = "results"  # an lm-eval results_*.json
    SAMPLES = "samples"  # an lm-eval samples_*.jsonl
    DATASET = "dataset"  # a file given with --dataset
    DECISION = "decision"  # the file given with --decision
    TASK = "task"  # a file given with --task (a scorer version's file, not an artifact)


EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)


def issued_at_text(moment: datetime, where: str) -> str:
    """A run's completion time as the body's ``issued_at`` (RFC 3339 UTC, whole seconds,
    ``Z``), refused (naming ``where``) when before 1970 or not representable in UTC."""
    try:
        utc = moment.astimezone(UTC)
    except (OverflowError, ValueError) as exc:
        raise InputError(f"{where}: {moment.isoformat()} is out of range in UTC") from exc
    if utc < EARLIEST:
        raise InputError(f"{where}: {utc.isoformat()} is before 1970-01-01T00:00:00Z")
    if utc.timestamp() > ARCHIVE_TIME_MAX:
        # A bundle is exported at or after its report's issued_at, and an archive's times
        # end there: a report issued later could never be exported.
        raise InputError(
            f"{where}: {utc.isoformat()} is after 2242-03-16T12:56:31Z, the last time a "
            "bundle can record (a report issued later could never be exported)"
        )
    return utc.strftime("%Y-%m-%dT%H:%M:%SZ")


def is_identifier(value: str) -> bool:
    return _IDENTIFIER.match(value) is not None


def unique_identifiers(raws: list[str], *, what: str, source: str) -> dict[str, str]:
    """Map each raw name to its identifier; refuse two names that give the same one."""
    parts = unique_joined_identifiers([(raw,) for raw in raws], what=what, source=source)
    return {key[0]: ident for key, ident in parts.items()}


def unique_joined_identifiers(
    keys: list[tuple[str, ...]], *, what: str, source: str
) -> dict[tuple[str, ...], str]:
    """Map each key (a check's scorer and metric, or task, metric and filter) to the
    identifier of its parts joined by ``.``; refuse two different keys that give the
    same identifier, whether through ``_`` for a character outside the alphabet or
    through a ``.`` inside a part (``a.b`` + ``c`` and ``a`` + ``b.c``)."""
    out: dict[tuple[str, ...], str] = {}
    seen: dict[str, tuple[str, ...]] = {}
    for key in keys:
        ident = to_identifier(".".join(key))
        # Keyed by the folded form: a bundle's member names must differ after case
        # folding (SPEC 5), so A.x and a.x would make a report no export can bundle.
        folded = ident.lower()
        if folded in seen and seen[folded] != key:
            raise InputError(
                f"{source}: {what} {_shown(seen[folded])} and {_shown(key)} both become "
                f"identifier {out[seen[folded]]!r}"
                + (
                    f" or {ident!r} (one name once case is folded)"
                    if out[seen[folded]] != ident
                    else ""
                )
                + " (each character outside A-Z a-z 0-9 . _ - becomes _, parts are joined "
                "by .); import refused"
            )
        seen[folded] = key
        out[key] = ident
    return out


def _shown(key: tuple[str, ...]) -> str:
    return repr(key[0]) if len(key) == 1 else "(" + ", ".join(map(repr, key)) + ")"


@dataclass(frozen=True)
class ImportedFile:
    """A file of the run, kept byte for byte: its role, base name, digest and size."""

    role: Role
    name: str
    digest: str
    size: int
    path: str  # where to read it from during this import (never recorded)
    # The dataset (lm-eval: the task) whose cases alone this file holds, as a samples
    # file holds one task's; None for a file of the whole run (a log, a results,
    # dataset or decision file). A case's evidence names the files of the whole run
    # and those holding its own dataset, never the others: so a case's size does not
    # grow with the number of tasks, nor the store with tasks x documents.
    holds: str | None = None

    def subject_entry(self) -> dict[str, Any]:
        return {
            "role": self.role.value,
            "name": self.name,
            "digest": self.digest,
            "size": self.size,
        }


class CaseStatus(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"


@dataclass(frozen=True)
class ImportedCase:
    """One sample and epoch (Inspect) or one document and filter (lm-eval)."""

    example_id: str
    repeat: int
    status: CaseStatus
    score: float | None
    output: PayloadRef | None  # the model's output, None when the runner recorded none
    evidence: tuple[PayloadRef, ...]  # this case's own evidence (its run files are added)


@dataclass
class ImportedCheck:
    """A (scorer, metric) of Inspect or a (task, metric, filter) of lm-eval."""

    check_id: str
    scorer: str  # key into ImportedRun.scorers
    dataset: str  # key into ImportedRun.datasets
    metric: str
    value: float | None  # the runner's own value of the metric
    explanation: str
    repeats: int
    value_where: str  # the file and field the runner's value was read from, for errors
    observations: list[Any] = field(default_factory=list)
    filter: str = ""  # lm-eval's filter ("" for Inspect)
    cases: list[ImportedCase] = field(default_factory=list)


@dataclass(frozen=True)
class ImportedScorer:
    """A scorer as the run names it; the task files given are its version's files."""

    name: str
    entrypoint: str
    runtime: str
    config: Any


@dataclass
class ImportedDataset:
    name: str
    examples: dict[str, tuple[str, int]]  # example_id -> (digest, size) of its staged body


@dataclass
class ImportedRun:
    producer: Producer
    evaluation_id: str
    project: str
    organization: str
    issued_at: str  # RFC 3339 UTC, whole seconds, Z
    issued_at_where: str  # the file and field it was read from, for errors
    run: dict[str, Any]  # the run's own identity, for the subject
    runner: dict[str, Any]  # {"name", "version"}
    files: list[ImportedFile]  # run files (and --dataset files): artifacts of the cases they hold
    scorers: dict[str, ImportedScorer]
    datasets: dict[str, ImportedDataset]
    checks: list[ImportedCheck]
    report_base: str  # the readable part of the default report id
    # lm-eval groups: aggregates over checks, re-derived once the checks are (lmgroups)
    groups: list[ImportedGroup] = field(default_factory=list)


# lm-eval groups: a group's aggregates over its leaf tasks' checks (importers.lmgroups).
@dataclass(frozen=True)
class Member:
    """One leaf task's check in a group aggregate, with the task's size."""

    task: str
    check_id: str
    size: int


@dataclass(frozen=True)
class GroupAggregate:
    metric: str
    filter: str
    value: float  # the runner's
    stderr: Any  # as recorded: a number, "N/A", or None when absent
    where: str  # file and field of the value, for errors
    members: tuple[Member, ...]


@dataclass(frozen=True)
class ImportedGroup:
    name: str
    subtasks: list[str]  # group_subtasks[name], as recorded
    tasks: list[str]  # its leaf tasks, in lm-eval's order
    identity: dict[str, Any]  # alias, version, n-shot, higher_is_better, sample_len
    aggregates: list[GroupAggregate]
