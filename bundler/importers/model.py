"""What an importer reads out of a run, before it becomes store documents (SPEC 16).

Each importer (``inspect_log``, ``lmeval``) turns a runner's files into one
``ImportedRun``; ``documents`` alone turns an ``ImportedRun`` into the documents of an
EvalBook store. So the mapping to the store (identifiers, digests, derivation) is
written once for both runners.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bundler.core.errors import InputError
from bundler.importers.storewriter import PayloadRef

_IDENTIFIER = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
_OUTSIDE = re.compile(r"[^A-Za-z0-9._-]")


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


def to_identifier(raw: str) -> str:
    """``raw`` in the identifier alphabet of SPEC 3: each character outside it becomes
    ``_``; a first character that is not a letter or digit gets an ``x`` before it; cut
    to 128 characters. Collisions are the caller's to refuse."""
    name = _OUTSIDE.sub("_", raw)
    if not name or not name[0].isascii() or not name[0].isalnum():
        name = "x" + name
    return name[:128]


def is_identifier(value: str) -> bool:
    return _IDENTIFIER.match(value) is not None


def unique_identifiers(raws: list[str], *, what: str, source: str) -> dict[str, str]:
    """Map each raw name to its identifier; refuse two names that give the same one."""
    out: dict[str, str] = {}
    seen: dict[str, str] = {}
    for raw in raws:
        ident = to_identifier(raw)
        if ident in seen and seen[ident] != raw:
            raise InputError(
                f"{source}: {what} {seen[ident]!r} and {raw!r} both become identifier "
                f"{ident!r}; import refused"
            )
        seen[ident] = raw
        out[raw] = ident
    return out


@dataclass(frozen=True)
class ImportedFile:
    """A file of the run, kept byte for byte: its role, base name, digest and size."""

    role: Role
    name: str
    digest: str
    size: int
    path: str  # where to read it from during this import (never recorded)

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
    evidence: tuple[PayloadRef, ...]  # this case's own evidence (the run files are added)


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
    observations: list[Any] = field(default_factory=list)
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
    run: dict[str, Any]  # the run's own identity, for the subject
    runner: dict[str, Any]  # {"name", "version"}
    files: list[ImportedFile]  # run files (and --dataset files): artifacts of every case
    scorers: dict[str, ImportedScorer]
    datasets: dict[str, ImportedDataset]
    checks: list[ImportedCheck]
    report_base: str  # the readable part of the default report id
