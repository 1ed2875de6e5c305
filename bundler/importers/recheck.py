"""``import-inspect --check BUNDLE`` / ``import-lm-eval --check BUNDLE`` (SPEC 16).

An auditor checks the importer without trusting whoever ran it: the bundle is verified
while it is extracted to a temporary directory, the run files it carries (named by the
report's subject) are imported again, with the task files its scorer versions hold and
the report id it names, into a temporary store, and every document of the bundle is
compared byte for byte with the document the run gives. Each one that differs, or that
one side has and the other lacks, is named. A bundle whose run files are redacted or
unavailable cannot be re-derived, and the result says so.
"""

from __future__ import annotations

import filecmp
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundler.core import canonical
from bundler.core.digests import is_digest
from bundler.core.errors import InputError
from bundler.importers.importing import (
    MAX_TASK_FILES,
    ImportConfig,
    Runner,
    import_run,
    is_file_name,
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
    further.
    """
    with tempfile.TemporaryDirectory(prefix="evalbook-check-") as tmp:
        bag = Path(tmp) / "bag"
        # Extracted (and verified) by the extract command in its own process: the
        # verifier's memory is returned before the import takes its own (SPEC 5).
        done = subprocess.run(
            [sys.executable, "-m", "bundler", "extract", bundle, str(bag), "--json", "-q"],
            capture_output=True,
            check=False,
        )
        if done.returncode == 1:
            record = json.loads(done.stdout.splitlines()[-1])
            failed = record.get("counts", {}).get("failed")
            return RecheckResult(
                bundle,
                None,
                0,
                [
                    Difference(
                        "data/bundle.json", f"the bundle does not verify ({failed} failed claims)"
                    )
                ],
            )
        if done.returncode != 0:
            message = done.stderr.decode("utf-8", "replace").strip().splitlines()
            why = message[-1].removeprefix("evalbook-bundle: error: ") if message else "unreadable"
            raise InputError(f"{bundle}: cannot be read as a bundle ({why})")
        top = next(bag.iterdir())
        return _compare(bundle, top, runner, Path(tmp))


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


def _load(path: Path) -> Any:
    return canonical.loads(path.read_bytes(), source=str(path), max_values=canonical.MAX_VALUES)


def _compare(bundle: str, top: Path, runner: Runner, tmp: Path) -> RecheckResult:
    manifest = _small(_load(top / "data/bundle.json"))
    body = _load(top / "data/report/body.json")
    report_id = body["report_id"]
    if body.get("producer") != PRODUCER[runner].value:
        raise InputError(
            f"{bundle}: its report's producer is {body.get('producer')!r}, not "
            f"{PRODUCER[runner].value!r}: not an import this command can check"
        )
    subject = body.get("subject")
    files = subject.get("files") if isinstance(subject, dict) else None
    if not isinstance(files, list):
        raise InputError(f"{bundle}: the report's subject names no run files")
    run_dir = tmp / "run"
    run_dir.mkdir()
    paths: dict[str, list[Path]] = {}
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
        assert isinstance(digest, str)
        source = top / "data/blobs/sha256" / digest.removeprefix("sha256:")
        if not source.is_file():
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
                not_rederivable=f"run file {name} is not in the bundle{why}: the run cannot be "
                "re-derived",
            )
        target = run_dir / name
        shutil.copyfile(source, target)
        paths.setdefault(str(entry.get("role")), []).append(target)
    tasks: list[Path] = []
    for scorer in manifest["scorers"][:1]:
        files_dir = top / scorer["path"] / "files"
        if files_dir.is_dir():
            task_dir = tmp / "tasks"
            task_dir.mkdir()
            names = sorted(f.name for f in files_dir.iterdir())
            if len(names) > MAX_TASK_FILES:
                # No import writes a scorer of more files: the bundle is not what one gives.
                where = f"{scorer['path']}/files"
                problem = (
                    f"holds {len(names)} files; an import takes at most {MAX_TASK_FILES} "
                    "task files, so no run gives this scorer"
                )
                return RecheckResult(bundle, report_id, 1, [Difference(where, problem)])
            for name in names:
                shutil.copyfile(files_dir / name, task_dir / name)
                tasks.append(task_dir / name)
    if runner is Runner.INSPECT:
        run_files = tuple(paths.get(Role.LOG.value, []))
    else:
        run_files = tuple(
            paths.get(Role.RESULTS.value, []) + sorted(paths.get(Role.SAMPLES.value, []))
        )
    decision = paths.get(Role.DECISION.value, [None])[0]
    store = tmp / "store"
    import_run(
        ImportConfig(
            runner,
            run_files,
            store,
            task_files=tuple(tasks),
            dataset_files=tuple(paths.get(Role.DATASET.value, [])),
            decision=decision,
            report_id=report_id,
            principal="check",
        )
    )
    limited = {e["ref"] for e in manifest["unavailable"] if e.get("reason") == "case_limit"}
    cut = {
        c["cases"]["path"]: c["cases"]["total"]
        for c in manifest["checks"]
        if c["check_id"] in limited and c["cases"]["path"] is not None
    }
    differences: list[Difference] = []
    compared = 0
    in_bundle = sorted(
        p.relative_to(top).as_posix()
        for p in (top / "data").rglob("*")
        if p.is_file() and p.relative_to(top).as_posix() != "data/bundle.json"
    )
    for path in in_bundle:
        compared += 1
        candidates = [store / rel for rel in _store_path(path, report_id)]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            differences.append(Difference(path, "the run gives no such document"))
            continue
        if not path.startswith("data/cases/"):
            # Compared in chunks: a run file may be far larger than any document.
            if not filecmp.cmp(found, top / path, shallow=False):
                differences.append(Difference(path, _describe(found, top / path)))
            continue
        held = (top / path).read_bytes()
        given = found.read_bytes()
        if path in cut:
            # Export cut this check's cases at 20,000 (listed case_limit): the bundle
            # holds the first lines, and the run must give as many as the bundle counts.
            total = cut[path]
            lines = given.count(b"\n")
            if lines != total:
                differences.append(
                    Difference(path, f"the run gives {lines} cases, the bundle counts {total}")
                )
                continue
            given = b"".join(line + b"\n" for line in given.split(b"\n")[: held.count(b"\n")])
        if given != held:
            differences.append(Difference(path, _describe(found, top / path)))
    expected = {
        f"data/checks/{p.stem}.json"
        for p in (store / "reports" / report_id / "checks").glob("*.json")
    }
    for path in sorted(expected - set(in_bundle)):
        if not any(
            c["check_id"] + ".json" == path.rsplit("/", 1)[1] and c["path"] is None
            for c in manifest["checks"]
        ):
            differences.append(Difference(path, "the run gives this document; the bundle lacks it"))
    return RecheckResult(bundle, report_id, compared, differences)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1024 * 1024):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def _describe(given: Path, held: Path) -> str:
    return (
        f"differs from what the run gives (the run gives {_sha256(given)}, "
        f"the bundle holds {_sha256(held)})"
    )
