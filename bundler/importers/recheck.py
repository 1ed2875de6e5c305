"""``import-inspect --check BUNDLE`` / ``import-lm-eval --check BUNDLE`` (SPEC 16).

An auditor checks the importer without trusting whoever ran it: the bundle is verified
(by the verifier, in a process of its own, so that its memory is returned before the
re-import takes its own), the run files it carries (named by the report's subject) and
the task files its first scorer version holds are taken out of it, and the run is
imported again with the report id it names, with nothing written (``rederive_run``):
every document the run gives, as a digest. Each file of the bundle's verified payload
manifest is compared with the document the run gives at the same place; each one that
differs, or that one side has and the other lacks, is named. A bundle whose run files
are redacted or unavailable cannot be re-derived, and the result says so.

An archive file is read where it lies: verified, then read twice more (what is small
and the case files' line counts; then the run and task files), each read hashed whole
and held to the digest the verifier gave, so the bytes compared are the bytes verified.
A bag directory or an ``s3://`` URL is first extracted (and verified) into the
temporary directory, and read from there.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundler.archive.bag import parse_manifest
from bundler.archive.bag_reader import MAX_DOCUMENT_BYTES, open_members
from bundler.archive.reader import ArchiveTap, Member
from bundler.core import canonical, leftovers
from bundler.core.digests import is_digest
from bundler.core.errors import BundlerError, InputError
from bundler.importers.importing import (
    MAX_TASK_FILES,
    ImportConfig,
    Rederived,
    Runner,
    is_file_name,
    rederive_run,
)
from bundler.importers.model import Producer, Role

PRODUCER = {Runner.INSPECT: Producer.INSPECT, Runner.LM_EVAL: Producer.LM_EVAL}


@dataclass(frozen=True)
class Difference:
    path: str  # the bundle path (data/...)
    problem: str


@dataclass(frozen=True)
class RecheckResult:
    bundle: str
    report_id: str | None
    compared: int
    differences: list[Difference] = field(default_factory=list)
    not_rederivable: str | None = None
    # False: the verifier failed the bundle (its failed claims are the differences),
    # nothing was compared
    verified: bool = True

    @property
    def exit_code(self) -> int:
        if self.not_rederivable is not None:
            return 3
        return 1 if self.differences else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "evalbook.import_check.v1",
            "bundle": self.bundle,
            "report_id": self.report_id,
            "verified": self.verified,
            "compared": self.compared,
            "matches": self.exit_code == 0,
            "differences": [{"path": d.path, "problem": d.problem} for d in self.differences],
            "not_rederivable": self.not_rederivable,
            "exit_code": self.exit_code,
        }


def _store_path(bundle_path: str, report_id: str) -> list[str]:
    """Where the import writes the document a bundle holds at ``bundle_path``."""
    rel = bundle_path.removeprefix("data/")
    if rel.startswith("report/"):
        return [f"reports/{report_id}/{rel.removeprefix('report/')}"]
    if rel.startswith("suite/"):
        return ["suites/" + rel.removeprefix("suite/")]
    if rel.startswith(("checks/", "cases/")):
        return [f"reports/{report_id}/{rel}"]
    if rel.startswith("blobs/"):
        return [rel, "sso/" + rel.removeprefix("blobs/")]
    return [rel]  # scorers/..., datasets/...


def recheck_bundle(bundle: str, runner: Runner) -> RecheckResult:
    """Re-import the run a bundle carries and compare every document.

    Raises InputError (exit 3) when the bundle cannot be read or is not an import of
    this runner. A bundle that does not verify is a difference (exit 1), never compared
    further: the verifier's verdict comes first, whatever the comparison found.
    """
    # What a --check killed outright left (a copy of its run files) goes first; this
    # one's directory is locked for as long as it exists (core.leftovers).
    leftovers.sweep(tempfile.gettempdir(), _CHECK_NAME)
    lock = None
    try:
        with tempfile.TemporaryDirectory(prefix=_CHECK_PREFIX) as tmp:
            lock = leftovers.hold(tmp)
            return _recheck_in(bundle, runner, Path(tmp))
    finally:
        if lock is not None:
            os.close(lock)


_CHECK_PREFIX = "evalbook-check-"
# tempfile's names: the prefix and eight of [a-z0-9_]
_CHECK_NAME = re.compile(re.escape(_CHECK_PREFIX) + "[a-z0-9_]{8}")


def _recheck_in(bundle: str, runner: Runner, work: Path) -> RecheckResult:
    """``recheck_bundle`` with its temporary directory ``work``."""
    if bundle.startswith("s3://") or not Path(bundle).is_file():
        # A bag directory or a URL is extracted (and verified) first, then read.
        with _Verifier(bundle, work, extract_to=work / "bag") as verifier:
            failed = verifier.verdict()
        if failed is not None:
            return failed
        held = _Held(bundle, str(next((work / "bag").iterdir())), None)
        return _compared(held, runner, work)
    # An archive is verified in a process of its own while this one reads it and
    # re-imports its run (two cores, and each process within its own memory bound);
    # every read here is hashed whole and, once the verifier is done, held to the
    # digest it verified, so the bytes compared are the bytes verified.
    with _Verifier(bundle, work) as verifier:
        held = _Held(bundle, bundle, None, abandon=verifier.abandon)
        try:
            result = _compared(held, runner, work)
        except (InputError, _Abandoned):
            failed = verifier.verdict()
            if failed is not None:
                return failed
            raise
        failed = verifier.verdict()
        if failed is not None:
            return failed
        held.hold_to(verifier.archive_sha256)
        return result


def _compared(held: _Held, runner: Runner, work: Path) -> RecheckResult:
    try:
        return _compare(held, runner, work)
    except BundlerError as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"{held.bundle}: cannot be read as a bundle ({exc.message})") from None


class _Abandoned(Exception):
    """The verifier has failed the bundle: the comparison stops, its answer unneeded."""


class _Verifier:
    """``api.verifier_child`` run on ``bundle``, its short answer written to a file under
    ``work`` (never a pipe this process must drain while it works). Leaving the ``with``
    block ends it if it still runs."""

    def __init__(self, bundle: str, work: Path, extract_to: Path | None = None) -> None:
        self.bundle = bundle
        self.archive_sha256: str | None = None
        command = ["verify", bundle] if extract_to is None else ["extract", bundle, str(extract_to)]
        self._out = open(work / "verifier.out", "w+b")  # noqa: SIM115 - closed in __exit__
        self._err = open(work / "verifier.err", "w+b")  # noqa: SIM115 - closed in __exit__
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bundler.api.verifier_child", str(os.getpid()), *command],
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=self._err,
        )
        self._polled = 0
        self._read: dict[str, Any] | None = None

    def __enter__(self) -> _Verifier:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
        self._out.close()
        self._err.close()

    def abandon(self, _progress: object = None) -> None:
        """Raise _Abandoned once the verifier has ended with anything but a verified
        bundle (the process is looked at every 64th call)."""
        self._polled += 1
        if self._polled % 64 or self._process.poll() is None:
            return
        if self._process.returncode != 0 or self._answer().get("exit_code") != 0:
            raise _Abandoned

    def _answer(self) -> dict[str, Any]:
        """The verifier's one line (empty when it wrote none that reads)."""
        if self._read is None:
            self._out.seek(0)
            lines = self._out.read().splitlines()
            try:
                answer = json.loads(lines[-1]) if lines else None
            except ValueError:
                answer = None
            self._read = answer if isinstance(answer, dict) else {}
        return self._read

    def verdict(self) -> RecheckResult | None:
        """Wait for the verifier: None when the bundle verified (its archive digest
        kept), a result naming the failed claims when it failed; InputError when it
        could not be read."""
        code = self._process.wait()
        answer = self._answer() if code == 0 else {}
        if "exit_code" not in answer:
            self._err.seek(0)
            said = self._err.read().decode("utf-8", "replace").strip().splitlines()
            why = said[-1] if said else f"the verifier ended with status {code}"
            raise InputError(f"{self.bundle}: cannot be read as a bundle ({why})")
        if answer["exit_code"] == 1:
            return RecheckResult(self.bundle, None, 0, _failures(answer), verified=False)
        if answer["exit_code"] != 0:
            why = answer.get("error") or "unreadable"
            raise InputError(f"{self.bundle}: cannot be read as a bundle ({why})")
        self.archive_sha256 = answer.get("archive_sha256")
        return None


def _failures(answer: dict[str, Any]) -> list[Difference]:
    """The verifier's failed claims as differences: the first few by their paths, then
    how many in all."""
    failed = answer.get("failed", 0)
    named = [
        Difference(
            f.get("path") or "data/bundle.json",
            f"the bundle does not verify (claim group {f.get('group')}: {f.get('detail')})",
        )
        for f in answer.get("failures", [])
    ]
    rest = failed - len(named)
    if rest > 0 or not named:
        named.append(
            Difference(
                "data/bundle.json",
                f"the bundle does not verify ({failed} failed claims"
                + (f", {rest} more than those named)" if named else ")"),
            )
        )
    return named


_BODY = "data/report/body.json"
_SMALL = ("data/bundle.json", _BODY, "manifest-sha256.txt")


class _Held:
    """What the verified bundle holds, read from the archive (or extracted bag) at
    ``location``: every read is hashed whole and must give ``sha256``, the digest the
    verifier read."""

    def __init__(
        self,
        bundle: str,
        location: str,
        sha256: str | None,
        abandon: Callable[..., None] | None = None,
    ) -> None:
        self.bundle = bundle
        self.location = location
        self.sha256 = sha256
        # Each archive read's digest, held to the verified one as it ends (``sha256``
        # known) or once the verifier running beside has given it (``hold_to``).
        self.read_digests: list[str] = []
        self.abandon = abandon or (lambda *_: None)
        self.documents: dict[str, bytes] = {}  # the few read whole (_SMALL)
        self.case_lines: dict[str, int] = {}  # data/cases/<check>.jsonl -> its lines
        self.digests: dict[str, str] = {}  # the payload manifest: path -> SHA-256 (hex)
        # data/scorers/<id>/<version> -> where its task files were written, and how many
        # it holds (-1: one in a subdirectory, which no import writes)
        self.task_dirs: dict[str, Path] = {}
        self.task_counts: dict[str, int] = {}
        self.taken: set[str] = set()  # the run files written

    def members(self) -> Iterator[tuple[str, Iterator[bytes]]]:
        """(path below the bag's top directory, content) of every file."""
        tap = ArchiveTap() if self.location == self.bundle else None
        member: Member
        for member, content in open_members(self.location, tap=tap):
            self.abandon()
            if not member.is_dir:
                yield member.path.partition("/")[2], content
        if tap is not None:
            self.read_digests.append(tap.sha256)
            if self.sha256 is not None:
                self.hold_to(self.sha256)

    def hold_to(self, sha256: str | None) -> None:
        """Refuse unless every read of the archive gave ``sha256``, the digest verified."""
        if any(d != sha256 for d in self.read_digests):
            raise InputError(
                f"{self.bundle}: changed while it was checked (its bytes no longer hash to "
                f"the digest verified, sha256:{sha256}); nothing compared"
            )

    def read(self, work: Path, run_files_of: Callable[[bytes], dict[str, list[Path]]]) -> None:
        """One read of every file: bundle.json, the report body and the payload manifest
        whole; the case files' line counts; every scorer version's task files written
        under ``work``; and, once the body has named them (``run_files_of``), the run
        files written where it says. The exporter writes the body first; a run file
        that came before it is taken out by a second read (``take_out``)."""
        run_files: dict[str, list[Path]] = {}
        for rel, content in self.members():
            targets: list[Path] = []
            if rel in _SMALL:
                self.documents[rel] = _whole(content, rel)
                if rel == _BODY:
                    run_files = run_files_of(self.documents[rel])
                continue
            if rel.startswith("data/cases/"):
                self.case_lines[rel] = sum(chunk.count(b"\n") for chunk in content)
                continue
            if rel in run_files:
                targets = run_files[rel]
                self.taken.add(rel)
            task = self._task_target(rel, work)
            if task is not None:
                targets = [*targets, task]
            _write(content, targets)
        for rel in _SMALL:
            if rel not in self.documents:
                raise InputError(f"{self.bundle}: {rel}: missing")

    def _task_target(self, rel: str, work: Path) -> Path | None:
        """Where the scorer file at ``rel`` is written (None: not a scorer file, or one
        past what any import writes)."""
        parts = rel.split("/", 5)
        if len(parts) < 6 or parts[:2] != ["data", "scorers"] or parts[4] != "files":
            return None
        scorer = "/".join(parts[:4])
        count = self.task_counts.get(scorer, 0)
        if count < 0:
            return None
        if not is_file_name(parts[5]):
            self.task_counts[scorer] = -1
            return None
        self.task_counts[scorer] = count + 1
        if count >= MAX_TASK_FILES:
            return None
        if scorer not in self.task_dirs:
            self.task_dirs[scorer] = work / "scorers" / str(len(self.task_dirs))
            self.task_dirs[scorer].mkdir(parents=True)
        return self.task_dirs[scorer] / parts[5]

    def take_out(self, run_files: dict[str, list[Path]]) -> None:
        """A second read, writing the run files the first did not."""
        left = {rel: t for rel, t in run_files.items() if rel not in self.taken}
        if not left:
            return
        for rel, content in self.members():
            _write(content, left.get(rel, []))


def _whole(content: Iterator[bytes], rel: str) -> bytes:
    data = bytearray()
    for chunk in content:
        data += chunk
        if len(data) > MAX_DOCUMENT_BYTES:
            raise InputError(f"{rel}: over {MAX_DOCUMENT_BYTES} bytes")
    return bytes(data)


def _write(content: Iterator[bytes], targets: list[Path]) -> None:
    files = [open(t, "xb") for t in targets]  # noqa: SIM115 - closed below
    try:
        for chunk in content:
            for f, target in zip(files, targets, strict=True):
                try:
                    f.write(chunk)
                except OSError as exc:  # a full temporary directory: name the file
                    raise OSError(exc.errno, exc.strerror, str(target)) from None
    finally:
        failed: OSError | None = None
        for f, target in zip(files, targets, strict=True):
            try:
                f.close()  # flushes: may fail as a write does
            except OSError as exc:
                failed = failed or OSError(exc.errno, exc.strerror, str(target))
        if failed is not None and sys.exc_info()[1] is None:
            raise failed


def _small(bundle: dict[str, Any]) -> dict[str, Any]:
    """What --check needs of bundle.json: the listings, the first scorer, the checks
    (the payload and example lists, the bulk of a large bundle.json, are let go before
    the re-import takes its memory)."""
    return {
        "redacted": bundle["redacted"],
        "unavailable": bundle["unavailable"],
        "scorers": bundle["scorers"][:1],
        "checks": bundle["checks"],
    }


def _load(data: bytes, source: str) -> Any:
    return canonical.loads(data, source=source, max_values=canonical.MAX_VALUES)


def _subject_files(bundle: str, body: Any, work: Path) -> list[tuple[str, str, Path]]:
    """The run files the report's subject names: (digest, role, where it is written),
    each name a plain file name, named once."""
    subject = body.get("subject") if isinstance(body, dict) else None
    files = subject.get("files") if isinstance(subject, dict) else None
    if not isinstance(files, list):
        raise InputError(f"{bundle}: the report's subject names no run files")
    out: list[tuple[str, str, Path]] = []
    for i, entry in enumerate(files):
        digest = entry.get("digest") if isinstance(entry, dict) else None
        name = entry.get("name") if isinstance(entry, dict) else None
        # The digest names a path under data/blobs/ and the name a file written here:
        # anything but a digest and a plain file name is refused.
        if not is_digest(digest):
            raise InputError(
                f"{bundle}: data/report/body.json: subject.files[{i}].digest: not a sha256 "
                "digest; cannot re-derive"
            )
        if not isinstance(name, str) or not is_file_name(name):
            raise InputError(
                f"{bundle}: data/report/body.json: subject.files[{i}].name {name!r}: not a "
                "plain file name (one segment, not . or .., no slash, backslash or control "
                "character); cannot re-derive"
            )
        assert isinstance(digest, str) and isinstance(entry, dict)
        target = work / "run" / name
        if any(t == target for _, _, t in out):
            raise InputError(
                f"{bundle}: data/report/body.json: subject.files[{i}].name {name!r}: named "
                "twice; cannot re-derive"
            )
        out.append((digest, str(entry.get("role")), target))
    return out


def _by(
    subject: list[tuple[str, str, Path]], key: Callable[[str, str], str]
) -> dict[str, list[Path]]:
    """The subject's run-file targets grouped by ``key(digest, role)``."""
    grouped: dict[str, list[Path]] = {}
    for digest, role, target in subject:
        grouped.setdefault(key(digest, role), []).append(target)
    return grouped


def _blob(digest: str) -> str:
    return "data/blobs/sha256/" + digest.removeprefix("sha256:")


def _compare(held: _Held, runner: Runner, work: Path) -> RecheckResult:
    bundle = held.bundle
    (work / "run").mkdir()
    subject: list[tuple[str, str, Path]] = []

    def run_files_of(data: bytes) -> dict[str, list[Path]]:
        body = _load(data, _BODY)
        if isinstance(body, dict) and body.get("producer") != PRODUCER[runner].value:
            raise InputError(
                f"{bundle}: its report's producer is {body.get('producer')!r}, not "
                f"{PRODUCER[runner].value!r}: not an import this command can check"
            )
        subject[:] = _subject_files(bundle, body, work)
        return _by(subject, lambda digest, _role: _blob(digest))

    held.read(work, run_files_of)
    manifest = _small(_load(held.documents["data/bundle.json"], "data/bundle.json"))
    body = _load(held.documents[_BODY], _BODY)
    held.digests = parse_manifest(
        held.documents["manifest-sha256.txt"], source="manifest-sha256.txt"
    )
    report_id = body["report_id"]
    for digest, _, target in subject:
        if _blob(digest) not in held.digests:
            listed = [
                e["reason"]
                for e in manifest["redacted"] + manifest["unavailable"]
                if e.get("digest") == digest
            ]
            why = f" ({listed[0]})" if listed else ""
            return RecheckResult(
                bundle,
                report_id,
                0,
                not_rederivable=f"run file {target.name} is not in the bundle{why}: the run "
                "cannot be re-derived",
            )
    paths = _by(subject, lambda _digest, role: role)
    held.take_out(_by(subject, lambda digest, _role: _blob(digest)))
    tasks: tuple[Path, ...] = ()
    task_places: list[tuple[str, str]] = []
    for scorer in manifest["scorers"][:1]:
        count = held.task_counts.get(scorer["path"], 0)
        if count > MAX_TASK_FILES or count < 0:
            # No import writes a scorer of more files, or of a subdirectory: the bundle
            # is not what a run gives.
            problem = (
                f"holds {count} files; an import takes at most {MAX_TASK_FILES} task files, "
                "so no run gives this scorer"
                if count > 0
                else "holds a file in a subdirectory; an import writes task files side by "
                "side, so no run gives this scorer"
            )
            where = scorer["path"] + "/files"
            return RecheckResult(bundle, report_id, 1, [Difference(where, problem)])
        if scorer["path"] in held.task_dirs:
            tasks = tuple(sorted(held.task_dirs[scorer["path"]].iterdir()))
            task_places = [(str(t), f"{scorer['path']}/files/{t.name}") for t in tasks]
    if runner is Runner.INSPECT:
        run_files = tuple(paths.get(Role.LOG.value, []))
    else:
        run_files = tuple(
            paths.get(Role.RESULTS.value, []) + sorted(paths.get(Role.SAMPLES.value, []))
        )
    limited = {e["ref"] for e in manifest["unavailable"] if e.get("reason") == "case_limit"}
    cut = {
        c["cases"]["path"]: c["cases"]["total"]
        for c in manifest["checks"]
        if c["check_id"] in limited and c["cases"]["path"] is not None
    }
    keep = frozenset(s for path in cut for s in _store_path(path, report_id))
    try:
        given = rederive_run(
            ImportConfig(
                runner,
                run_files,
                work / "store",
                task_files=tasks,
                dataset_files=tuple(paths.get(Role.DATASET.value, [])),
                decision=paths.get(Role.DECISION.value, [None])[0],
                report_id=report_id,
            ),
            keep,
            progress=held.abandon,
        )
    except InputError as exc:
        # The bundle was read and verified; the run files it carries are what the
        # importer refuses (an lm-eval hash that does not recompute, a value the samples
        # do not give): the bundle does not hold what a run gives, exit 1, named by the
        # file's place in the bundle, never by the temporary copy.
        places = [(str(target), _blob(digest)) for digest, _, target in subject] + task_places
        return RecheckResult(bundle, report_id, 0, [_refused(exc.message, places)])
    return RecheckResult(bundle, report_id, *_differences(held, given, manifest, cut))


def _refused(message: str, places: list[tuple[str, str]]) -> Difference:
    """The importer's refusal of the bundle's files as a difference: the temporary
    copies' names in its message (``places``: copy, place) replaced by their places in
    the bundle."""
    named = next((place for copy, place in places if copy in message), None)
    for copy, place in places:
        message = message.replace(copy, place)
    where = named or (places[0][1] if places else "data/report/body.json")
    return Difference(where, f"the run files it carries do not import: {message}")


def _differences(
    held: _Held, given: Rederived, manifest: dict[str, Any], cut: dict[str, int]
) -> tuple[int, list[Difference]]:
    """How many documents were compared, and each that differs."""
    differences: list[Difference] = []
    in_bundle = sorted(p for p in held.digests if p != "data/bundle.json")
    for path in in_bundle:
        candidates = _store_path(path, given.report_id)
        found = next((c for c in candidates if c in given.documents), None)
        if found is None:
            differences.append(Difference(path, "the run gives no such document"))
            continue
        theirs = given.documents[found].sha256
        ours = held.digests[path]
        if path in cut:
            # Export cut this check's cases at 20,000 (listed case_limit): the bundle
            # holds the first lines, and the run must give as many as the bundle counts.
            total = cut[path]
            data = given.kept[found]
            lines = data.count(b"\n")
            if lines != total:
                differences.append(
                    Difference(path, f"the run gives {lines} cases, the bundle counts {total}")
                )
                continue
            first = b"".join(
                line + b"\n" for line in data.split(b"\n")[: held.case_lines.get(path, 0)]
            )
            theirs = hashlib.sha256(first).hexdigest()
        if theirs != ours:
            differences.append(
                Difference(
                    path,
                    f"differs from what the run gives (the run gives sha256:{theirs}, "
                    f"the bundle holds sha256:{ours})",
                )
            )
    checks = f"reports/{given.report_id}/checks/"
    expected = {
        "data/checks/" + p.removeprefix(checks)
        for p in given.documents
        if p.startswith(checks) and p.endswith(".json") and "/" not in p.removeprefix(checks)
    }
    for path in sorted(expected - set(in_bundle)):
        if not any(
            c["check_id"] + ".json" == path.rsplit("/", 1)[1] and c["path"] is None
            for c in manifest["checks"]
        ):
            differences.append(Difference(path, "the run gives this document; the bundle lacks it"))
    return len(in_bundle), differences
