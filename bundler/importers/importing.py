"""``import-inspect`` and ``import-lm-eval``: one run becomes one report of a store (SPEC 16).

``import_run`` opens every given file safely, reads the run with its runner's reader,
builds the documents (``documents``) and commits them with ``storewriter``: all of the
report's documents appear, or none, and nothing is written to the store when the import
is refused. Importing the same run with the same options again writes nothing and says
so.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from bundler.archive import names
from bundler.core import canonical
from bundler.core.errors import BundlerError, InputError, StoreError, UsageError
from bundler.evalbook.contract import EXPORT, READ_BODY
from bundler.evalbook.store import check_relative_path
from bundler.importers.decision import Decision, check_known, read_decision
from bundler.importers.digestwriter import DigestWriter, Given
from bundler.importers.documents import BuiltReport, TaskFile, build_documents
from bundler.importers.exportable import check_exportable
from bundler.importers.model import ImportedFile, Role, is_identifier
from bundler.importers.runfile import RunFile, open_run_file
from bundler.importers.storewriter import StoreWriter

MAX_TASK_FILE_BYTES = 16 * 1024 * 1024
# Each --task file is a file of every scorer, and every scorer file a bundle member. The
# 65,536-member cap is three members per case for 20,000 cases plus 5,536 for
# directories, tag files, documents, scorer files and evidence manifests; 4,096 task
# files leave 1,440 of those for the rest of a report. (A bundle with fewer cases could
# hold more, but an import that would create tens of thousands of files from a few bytes
# of input breaks SPEC 5's time bound on any disk that costs 100 us a new file.)
MAX_TASK_FILES = 4096
# Each --dataset file is held open from its check to the commit, so that it cannot change
# under the import: 256 stay far under the common limit of 1,024 open files.
MAX_DATASET_FILES = 256
_PRINCIPAL = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
_SAFE_NAME = re.compile(r"\A[^/\\\x00-\x1f\x7f]+\Z")


class Runner(StrEnum):
    INSPECT = "inspect"
    LM_EVAL = "lm-eval"


@dataclass(frozen=True)
class ImportConfig:
    runner: Runner
    run_files: tuple[Path, ...]  # Inspect: the log; lm-eval: results, then samples files
    store: Path
    task_files: tuple[Path, ...] = ()
    dataset_files: tuple[Path, ...] = ()
    decision: Path | None = None
    report_id: str | None = None
    principal: str | None = None


@dataclass(frozen=True)
class ImportResult:
    store: str
    report_id: str
    report_digest: str
    result: str
    written: bool
    files_written: int
    checks: list[tuple[str, str]] = field(default_factory=list)
    # The principal given that the store's access.json does not grant report.export
    # (a store that existed, or that a concurrent import created first): an import
    # changes no access.json it did not create, so the import says so.
    not_granted: str | None = None

    @property
    def outcome(self) -> str:
        """``imported`` (the report was written), ``repaired`` (it was in the store, but
        files it needs were missing and were written) or ``unchanged`` (nothing written)."""
        if self.written:
            return "imported"
        return "repaired" if self.files_written else "unchanged"

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "evalbook.import_result.v1",
            "store": self.store,
            "report_id": self.report_id,
            "report_digest": self.report_digest,
            "result": self.result,
            "written": self.written,
            "outcome": self.outcome,
            "files_written": self.files_written,
            "checks": [{"check_id": c, "status": s} for c, s in self.checks],
            "not_granted": self.not_granted,
        }


def _is_utf8(name: str) -> bool:
    """Whether ``name`` is text (a name that was not UTF-8 on disk holds surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_file_name(name: str) -> bool:
    """A plain file name that can be recorded and written back: UTF-8 text, one segment,
    not ``.`` or ``..``, no slash, backslash or control character, and one a bundle
    member may carry (archive/names.py), so the scorer files' names are ones a bundle can
    hold."""
    return (
        _is_utf8(name)
        and _SAFE_NAME.match(name) is not None
        and name not in (".", "..")
        and names.name_problem(f"x/{name}") is None
    )


def _base_name(path: Path, what: str) -> str:
    """The base name of a file the import records; refused (exit 3), naming the file and
    the rule, when it is not one a report and a bundle can hold."""
    name = path.name
    if not _is_utf8(name):
        raise InputError(f"{path}: the {what}'s name is not UTF-8, so it cannot be recorded")
    if not is_file_name(name):
        raise InputError(
            f"{path}: the {what}'s name cannot be recorded safely (one NFC segment, not . or "
            "..; no slash, backslash or control character)"
        )
    return name


def _scorer_file_name(path: Path, name: str) -> None:
    """A task file is a file of each scorer (``scorers/<id>/<v>/files/<name>``): its name
    must pass the export's own file-path rule (``evalbook.store.check_relative_path``),
    checked before anything is read or written, or the report could never be exported."""
    try:
        check_relative_path(name, source=f"--task {path}")
    except StoreError as exc:
        raise InputError(f"{exc.message}; import refused") from None


def _read_task_files(paths: tuple[Path, ...]) -> list[TaskFile]:
    out: list[TaskFile] = []
    names: set[str] = set()
    for path in paths:
        name = _base_name(path, "task file")
        _scorer_file_name(path, name)
        if name in names:
            raise InputError(f"{path}: a second --task file named {name!r}")
        names.add(name)
        f = open_run_file(path, role="--task file", cap=MAX_TASK_FILE_BYTES)
        try:
            data = f.read_all(cap=MAX_TASK_FILE_BYTES)
        finally:
            f.close()
        entry = ImportedFile(Role.TASK, name, f.sha256, f.size, str(path))
        out.append(TaskFile(name, data, entry))
    return sorted(out, key=lambda t: t.name.encode("utf-8"))


def _check_counts(config: ImportConfig) -> None:
    if config.report_id is not None and not is_identifier(config.report_id):
        raise UsageError(
            f"--report-id {config.report_id!r}: not an identifier (SPEC 3: a letter or digit, "
            "then up to 127 of A-Z a-z 0-9 . _ -)"
        )
    if len(config.task_files) > MAX_TASK_FILES:
        raise UsageError(
            f"--task: {len(config.task_files)} files given; at most {MAX_TASK_FILES} (each is "
            "a file of every scorer, and a bundle's members are bounded)"
        )
    if len(config.dataset_files) > MAX_DATASET_FILES:
        raise UsageError(
            f"--dataset: {len(config.dataset_files)} files given; at most {MAX_DATASET_FILES} "
            "(each is held open while the run is imported)"
        )


@dataclass
class _Opened:
    """The given files of one import, read or held open until it ends."""

    files: list[RunFile]  # the run files, then the dataset files
    dataset_files: list[ImportedFile]
    task_files: list[TaskFile]
    decision: Decision | None


@contextmanager
def _opened(config: ImportConfig) -> Iterator[_Opened]:
    """Every given file opened safely (run files and dataset files held open, so that
    none can change under the import), the task files and the decision read."""
    if config.decision is not None:
        _base_name(config.decision, "decision file")
    decision = read_decision(config.decision) if config.decision is not None else None
    task_files = _read_task_files(config.task_files)
    opened: list[RunFile] = []
    try:
        names: set[str] = set()
        for i, path in enumerate(config.run_files):
            role = (
                "log"
                if config.runner is Runner.INSPECT
                else ("results file" if i == 0 else "samples file")
            )
            name = _base_name(path, role)
            if name in names:
                raise InputError(f"{path}: a second run file named {name!r}")
            names.add(name)
            opened.append(open_run_file(path, role=role))
        dataset_files = []
        for path in config.dataset_files:
            name = _base_name(path, "dataset file")
            if name in names:
                raise InputError(f"{path}: a second file named {name!r}")
            names.add(name)
            f = open_run_file(path, role="--dataset file")
            opened.append(f)
            dataset_files.append(ImportedFile(Role.DATASET, name, f.sha256, f.size, str(path)))
        yield _Opened(opened, dataset_files, task_files, decision)
    finally:
        for f in opened:
            f.close()


def _read_and_build(
    config: ImportConfig,
    opened: _Opened,
    writer: StoreWriter | DigestWriter,
    progress: Callable[[int], None] | None = None,
) -> BuiltReport:
    """Read the run with its runner's reader and build the report's documents, each
    staged with ``writer``."""
    files = opened.files
    if config.runner is Runner.INSPECT:
        from bundler.importers.inspect_log import read_inspect_log

        run = read_inspect_log(
            files[0], writer, dataset_files=opened.dataset_files, progress=progress
        )
    else:
        from bundler.importers.lmeval import read_lm_eval_run

        run = read_lm_eval_run(files[0], files[1 : len(config.run_files)], writer)
        run.files.extend(opened.dataset_files)
    decision = opened.decision
    names = {f.name for f in run.files}
    if decision is not None and config.decision is not None:
        name = _base_name(config.decision, "decision file")
        if name in names:
            raise InputError(f"{config.decision}: a second file named {name!r}")
        run.files.append(
            ImportedFile(Role.DECISION, name, decision.digest, decision.size, str(config.decision))
        )
    check_known(decision, {c.check_id: c.repeats for c in run.checks})
    return build_documents(
        run, writer, task_files=opened.task_files, decision=decision, report_id=config.report_id
    )


_ACCESS_READ = 4 * 1024 * 1024  # what _grants reads of an access.json, at most


def _grants(store: Path, principal: str) -> bool:
    """Whether the store's access.json grants ``principal`` report.export (False when
    it cannot be read as one)."""
    try:
        with open(store / "access.json", "rb") as f:
            data = f.read(_ACCESS_READ + 1)
        if len(data) > _ACCESS_READ:
            return False
        access = canonical.loads(data, source="access.json", max_values=canonical.MAX_VALUES)
    except (OSError, BundlerError):
        return False
    principals = access.get("principals") if isinstance(access, dict) else None
    granted = principals.get(principal) if isinstance(principals, dict) else None
    return isinstance(granted, list) and EXPORT in granted


def rederive_run(
    config: ImportConfig,
    keep: frozenset[str] = frozenset(),
    progress: Callable[[int], None] | None = None,
) -> Rederived:
    """What importing the run of ``config`` gives, document by document, as digests,
    with nothing written (``--check``); ``keep``: store paths whose bytes are held too;
    ``progress`` as for ``import_run`` (it may raise to stop the work).
    Raises as ``import_run`` does for what the run's files cannot give."""
    _check_counts(config)
    with _opened(config) as opened:
        writer = DigestWriter(keep)
        built = _read_and_build(config, opened, writer, progress)
    return Rederived(built.report_id, writer.documents, writer.kept)


@dataclass(frozen=True)
class Rederived:
    report_id: str
    documents: dict[str, Given]  # store path -> what the run gives there
    kept: dict[str, bytes]


def import_run(config: ImportConfig, progress: Callable[[int], None] | None = None) -> ImportResult:
    """Import one run into ``config.store``; return what was written.

    Raises UsageError (exit 2) for a missing principal when the store must be created,
    InputError (exit 3) for any file that cannot be read or mapped, a decision naming an
    unknown check, or a store that already holds other bytes at an id this import gives.
    Nothing is written to the store unless the whole report is.
    """
    principal = config.principal
    if principal is not None and _PRINCIPAL.match(principal) is None:
        raise UsageError(f"--principal {principal!r}: not an identifier (SPEC 3)")
    _check_counts(config)
    store_exists = config.store.exists()
    if not store_exists and principal is None:
        raise UsageError(
            f"{config.store}: the store does not exist, and creating one needs --principal "
            "(or EVALBOOK_PRINCIPAL), the principal its access.json grants"
        )
    with _opened(config) as opened, StoreWriter(config.store) as writer:
        try:
            built = _read_and_build(config, opened, writer, progress)
            # Before anything moves: what the report's export would refuse, refused here.
            check_exportable(writer.staged_files(), built.report_id, opened.files[0].name)
        except OSError as exc:
            # A staged file that cannot be written (a full disk, a failing one): one line
            # naming it; the staging directory goes with the writer, the store untouched.
            where = exc.filename if exc.filename is not None else config.store
            raise StoreError(
                f"{where}: {exc.strerror or exc} while staging the import; nothing was "
                "written to the store; import refused"
            ) from None
        access = None
        if principal is not None:
            access = canonical.dumps({"principals": {principal: sorted([EXPORT, READ_BODY])}})
        committed = writer.commit(f"reports/{built.report_id}", access)
    return ImportResult(
        not_granted=None if principal is None or _grants(config.store, principal) else principal,
        store=str(config.store),
        report_id=built.report_id,
        report_digest=built.body_digest,
        result=built.result,
        written=committed.report_written,
        files_written=committed.files_written,
        checks=built.checks,
    )
