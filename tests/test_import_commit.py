"""SPEC 16's "all of a report's documents appear, or none" held through the import's
commit into an existing store (``importers/storewriter.py``):

- a signal (SIGINT, SIGTERM, SIGHUP) that arrives while the commit moves files waits
  until the report is whole, then ends the command (exit 130 or 143): the store holds
  the whole report (export succeeds, a re-import writes nothing) or nothing of it;
- a store directory swapped for a symbolic link while the commit runs is never written
  through: the commit is refused and what it had placed is taken back;
- a re-import that has to put back files the report needs says so ("Repaired"), and a
  report directory that differs from the import's is refused naming what differs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

from bundler.core.errors import StoreError
from bundler.evalbook.export import ExportConfig, export_bundle
from bundler.importers import storewriter
from bundler.importers.importing import ImportConfig, Runner, import_run

ROOT = Path(__file__).resolve().parent.parent
RUNNERS = ROOT / "fixtures" / "runners"
INSPECT_LOG = next((RUNNERS / "inspect" / "logs").glob("*.eval"))
INSPECT_TASK = RUNNERS / "inspect" / "arithmetic_task.py"
LM_RUN = RUNNERS / "lm-eval" / "run"
LM_RESULTS = next(LM_RUN.glob("results_*.json"))
LM_SAMPLES = sorted(LM_RUN.glob("samples_*.jsonl"))
EXPORTED_AT = datetime(2030, 1, 1, tzinfo=UTC)
SIGNAL_EXIT = {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 143}
LEVELS = ["blobs", "blobs/sha256", "datasets", "scorers", "suites", "reports"]


@pytest.fixture(scope="module")
def base_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding another report (the lm-eval fixture run), every area present."""
    store = tmp_path_factory.mktemp("base") / "store"
    done = run_cli(
        "import-lm-eval",
        str(LM_RESULTS),
        *[a for s in LM_SAMPLES for a in ("--samples", str(s))],
        "--store",
        str(store),
        "--principal",
        "alice",
    )
    assert done.returncode == 0, done.stderr
    return store


def files_of(store: Path, moved: dict[str, str] | None = None) -> dict[str, bytes]:
    """Every file of the store (not through a link), by path; a directory moved to
    ``moved[name]`` inside the store is counted where it was."""
    out: dict[str, bytes] = {}
    back = {v: k for k, v in (moved or {}).items()}
    for dirpath, _dirs, files in os.walk(store):
        for f in files:
            path = Path(dirpath) / f
            if path.is_symlink():
                continue
            rel = path.relative_to(store).as_posix()
            for new, old in back.items():
                if rel.startswith(new + "/"):
                    rel = old + rel[len(new) :]
            out[rel] = path.read_bytes()
    return out


def no_staging(store: Path) -> bool:
    return not any(p.name.startswith(".evalbook-import-") for p in store.iterdir())


def inspect_config(store: Path, tmp: Path, **kw: Any) -> ImportConfig:
    dataset = tmp / "extra.jsonl"
    dataset.write_bytes(b'{"x": 1}\n')
    return ImportConfig(
        Runner.INSPECT,
        (INSPECT_LOG,),
        store,
        task_files=(INSPECT_TASK,),
        dataset_files=(dataset,),
        principal="alice",
        **kw,
    )


def assert_whole(store: Path, report_id: str, tmp: Path) -> None:
    """The report is whole: a re-import writes nothing, and export succeeds."""
    again = import_run(inspect_config(store, tmp))
    assert again.report_id == report_id
    assert again.outcome == "unchanged" and again.files_written == 0
    out = tmp / f"{report_id}.tar.zst"
    export_bundle(ExportConfig(str(store), report_id, "alice", EXPORTED_AT, out=out))
    assert out.stat().st_size > 0


# ------------------------------------------------------------------ moments of the commit

# Where a test acts inside the commit: as the first file moves (every existing directory
# already opened), and just before the report directory is renamed into place.
MOMENTS = {
    "first-move": (storewriter.StoreWriter, "_move_all"),
    "before-the-report": (storewriter._Tree, "check_in_place"),
}


def at_moment(monkeypatch: pytest.MonkeyPatch, moment: str, action: Any) -> list[int]:
    cls, name = MOMENTS[moment]
    real = getattr(cls, name)
    fired: list[int] = []

    def wrapper(self: Any, *args: Any, **kw: Any) -> Any:
        if not fired:
            fired.append(1)
            action()
        return real(self, *args, **kw)

    monkeypatch.setattr(cls, name, wrapper)
    return fired


@contextmanager
def signal_raises(signum: int) -> Iterator[None]:
    """The signal's handler raises KeyboardInterrupt, as the command line's does."""

    def raising(_n: int, _f: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signum, raising)
    try:
        yield
    finally:
        signal.signal(signum, previous)


# ------------------------------------------------------------------ signals


@pytest.mark.parametrize("fresh", [False, True], ids=["existing-store", "new-store"])
@pytest.mark.parametrize("moment", list(MOMENTS))
@pytest.mark.parametrize("signame", list(SIGNAL_EXIT))
def test_a_signal_during_the_commit_waits_until_the_report_is_whole(
    signame: str,
    moment: str,
    fresh: bool,
    base_store: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = tmp_path / "store"
    if not fresh:
        shutil.copytree(base_store, store)
    before = files_of(store) if not fresh else {}
    signum = getattr(signal, signame)
    fired = at_moment(monkeypatch, moment, lambda: signal.raise_signal(signum))
    with signal_raises(signum), pytest.raises(KeyboardInterrupt):
        import_run(inspect_config(store, tmp_path))
    assert fired
    monkeypatch.undo()
    assert no_staging(store)
    new = [p.name for p in (store / "reports").iterdir() if p.name.startswith("inspect-")]
    assert len(new) == 1, new
    after = files_of(store)
    assert {k: after.get(k) for k in before} == before
    assert_whole(store, new[0], tmp_path)


def _task_args(tmp_path: Path, count: int) -> list[str]:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    args: list[str] = []
    for i in range(count):
        f = tasks / f"t{i:05d}.yaml"
        f.write_bytes(b"%d\n" % i)
        args += ["--task", str(f)]
    return args


# The real command, its commit slowed (a pause after each file or directory it places),
# so that a signal or a swap sent once the first new scorer directory appears lands
# while the commit runs, not after it.
SLOW_COMMIT = """
import sys, time
from bundler.importers import storewriter
real = storewriter._Tree.placed
def placed(self, *args):
    real(self, *args)
    time.sleep(0.1)
storewriter._Tree.placed = placed
from bundler.cli import main
main(sys.argv[1:])
"""


def _start_import(store: Path, task_args: list[str]) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "EVALBOOK_PRINCIPAL"}
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            SLOW_COMMIT,
            "import-inspect",
            str(INSPECT_LOG),
            "--store",
            str(store),
            *task_args,
            "-q",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def _wait_for_new_scorer(store: Path, proc: subprocess.Popen[bytes]) -> bool:
    """Return True once the commit has placed a new scorer directory (the commit runs),
    False when the import ended first."""
    before = set(os.listdir(store / "scorers"))
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if set(os.listdir(store / "scorers")) - before:
            return True
        time.sleep(0.0005)
    return False


@pytest.mark.parametrize("delay", [0.0, 0.02], ids=["at-once", "a-moment-later"])
@pytest.mark.parametrize("signame", list(SIGNAL_EXIT))
def test_a_signal_to_the_command_during_the_commit_leaves_the_whole_report_or_nothing(
    signame: str, delay: float, base_store: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    shutil.copytree(base_store, store)
    before = files_of(store)
    task_args = _task_args(tmp_path, 200)
    proc = _start_import(store, task_args)
    assert _wait_for_new_scorer(store, proc), "the import ended before its commit was seen"
    time.sleep(delay)
    proc.send_signal(getattr(signal, signame))
    _out, err = proc.communicate(timeout=120)
    # The signal took effect once the report was whole.
    assert proc.returncode == SIGNAL_EXIT[signame], err
    assert err.strip() == (
        b"evalbook-bundle: interrupted" if signame == "SIGINT" else b"evalbook-bundle: terminated"
    ), err
    assert no_staging(store)
    after = files_of(store)
    assert {k: after.get(k) for k in before} == before
    new = [p.name for p in (store / "reports").iterdir() if p.name.startswith("inspect-")]
    assert len(new) == 1, new
    again = run_cli("import-inspect", str(INSPECT_LOG), "--store", str(store), *task_args, "--json")
    assert again.returncode == 0, again.stderr
    result = json.loads(again.stdout)
    assert result["outcome"] == "unchanged" and result["files_written"] == 0
    out = tmp_path / "x.tar.zst"
    export_bundle(ExportConfig(str(store), new[0], "alice", EXPORTED_AT, out=out))
    assert out.stat().st_size > 0


# ------------------------------------------------------------------ a link swapped in


@pytest.mark.parametrize("moment", list(MOMENTS))
@pytest.mark.parametrize("level", LEVELS)
def test_a_directory_swapped_for_a_link_during_the_commit_is_never_written_through(
    level: str, moment: str, base_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    shutil.copytree(base_store, store)
    before = files_of(store)
    outside = tmp_path / "outside"
    outside.mkdir()
    moved = "moved-" + level.replace("/", "-")

    def swap() -> None:
        os.rename(store / level, store / moved)
        os.symlink(outside, store / level)

    fired = at_moment(monkeypatch, moment, swap)
    with pytest.raises(StoreError) as info:
        import_run(inspect_config(store, tmp_path))
    assert fired
    assert list(outside.iterdir()) == []
    assert f"{store}/{level}: moved or replaced during the import" in info.value.message
    # Nothing of this import is left, in the directory moved away either.
    assert files_of(store, {level: moved}) == before
    assert no_staging(store)


@pytest.mark.parametrize("level", LEVELS)
def test_a_link_swapped_in_while_the_command_commits_is_never_written_through(
    level: str, base_store: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    shutil.copytree(base_store, store)
    before = files_of(store)
    outside = tmp_path / "outside"
    outside.mkdir()
    moved = "moved-" + level.replace("/", "-")
    proc = _start_import(store, _task_args(tmp_path, 200))
    assert _wait_for_new_scorer(store, proc), "the import ended before its commit was seen"
    os.rename(store / level, store / moved)
    os.symlink(outside, store / level)
    _out, err = proc.communicate(timeout=120)
    assert list(outside.iterdir()) == []
    assert no_staging(store)
    assert proc.returncode == 3, err
    assert err.count(b"\n") == 1 and b"moved or replaced during the import" in err, err
    assert files_of(store, {level: moved}) == before


# ------------------------------------------------------------------ a re-import


def _import_args(store: Path, tmp_path: Path) -> list[str]:
    dataset = tmp_path / "extra.jsonl"
    dataset.write_bytes(b'{"x": 1}\n')
    return [
        "import-inspect",
        str(INSPECT_LOG),
        "--store",
        str(store),
        "--task",
        str(INSPECT_TASK),
        "--dataset",
        str(dataset),
        "--principal",
        "alice",
    ]


def _victims(store: Path, what: str) -> list[Path]:
    if what == "blob":
        return sorted((store / "blobs" / "sha256").iterdir())[:1]
    if what == "task-file":
        return sorted(store.glob(f"scorers/*/1/files/{INSPECT_TASK.name}"))[:1]
    if what == "example":
        return sorted(store.glob("datasets/*/1/examples/*.json"))[:1]
    assert what == "all-three"
    return [v for w in ("blob", "task-file", "example") for v in _victims(store, w)]


def _imported(tmp_path: Path) -> tuple[Path, list[str], str]:
    """A store with the fixture imported once: the store, the import's arguments, the id."""
    store = tmp_path / "store"
    args = _import_args(store, tmp_path)
    first = run_cli(*args, "--json")
    assert first.returncode == 0, first.stderr
    return store, args, json.loads(first.stdout)["report_id"]


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("what", ["blob", "task-file", "example", "all-three"])
def test_a_reimport_that_puts_back_missing_files_says_repaired(
    what: str, as_json: bool, tmp_path: Path
) -> None:
    store, args, rid = _imported(tmp_path)
    whole = files_of(store)
    victims = _victims(store, what)
    assert victims
    for v in victims:
        v.unlink()
    done = run_cli(*args, *(["--json"] if as_json else []))
    assert done.returncode == 0, done.stderr
    n = len(victims)
    if as_json:
        result = json.loads(done.stdout)
        assert result["outcome"] == "repaired" and result["written"] is False
        assert result["files_written"] == n
    else:
        line = done.stdout.decode().splitlines()[0]
        files = "1 missing file it needs was" if n == 1 else f"{n} missing files it needs were"
        assert line == f"Repaired:  report {rid} was already in {store}; {files} written"
        assert b"nothing written" not in done.stdout
    assert files_of(store) == whole
    again = run_cli(*args)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(b"Unchanged:") and b"nothing written" in again.stdout


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("delete-case-file", "with cases/match.accuracy.jsonl missing"),
        ("append-to-body", "with other bytes at body.json"),
        ("extra-file", "with an extra file cases/zz.jsonl"),
        ("case-file-a-link", "with cases/match.accuracy.jsonl not a regular file"),
        (
            "two-changes",
            "with other bytes at body.json, cases/match.accuracy.jsonl missing",
        ),
    ],
)
def test_a_report_directory_that_differs_is_refused_naming_what_differs(
    change: str, expected: str, tmp_path: Path
) -> None:
    store, args, rid = _imported(tmp_path)
    report = store / "reports" / rid
    case = report / "cases" / "match.accuracy.jsonl"
    if change in ("append-to-body", "two-changes"):
        with (report / "body.json").open("ab") as f:
            f.write(b" ")
    if change in ("delete-case-file", "two-changes"):
        case.unlink()
    if change == "extra-file":
        (report / "cases" / "zz.jsonl").write_bytes(b"{}\n")
    if change == "case-file-a-link":
        target = tmp_path / "elsewhere.jsonl"
        target.write_bytes(case.read_bytes())
        case.unlink()
        case.symlink_to(target)
    before = files_of(store)
    done = run_cli(*args)
    err = done.stderr.decode()
    assert done.returncode == 3, err
    assert err.count("\n") == 1, err
    assert f"reports/{rid}: the store holds a report with this id, {expected} (" in err, err
    assert "different report" not in err
    assert files_of(store) == before
    assert no_staging(store)


def test_a_reimport_of_many_tasks_keeps_few_directories_open(tmp_path: Path) -> None:
    """The commit opens every directory a path passes through, and a run of 300 tasks has
    some 2,000 of them in the store: at most ``_Tree.MAX_OPEN`` descriptors per tree are
    kept, so a re-import (unchanged, then repairing a file in each of 40 datasets) runs
    under a descriptor limit of 700 (the run's 301 files are held open too)."""
    import resource

    import lmsynth

    results, samples = lmsynth.write_group_run(tmp_path / "run", [3] * 300, prefix="t")
    store = tmp_path / "store"
    args = [
        "import-lm-eval",
        *lmsynth.import_args(results, samples),
        "--store",
        str(store),
        "--principal",
        "a",
        "--json",
    ]
    first = run_cli(*args)
    assert first.returncode == 0, first.stderr

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (700, 700))

    exe = shutil.which("evalbook-bundle", path=str(Path(sys.executable).parent))
    assert exe is not None
    for victims in (0, 40):
        for examples in sorted((store / "datasets").iterdir())[:victims]:
            next((examples / "1" / "examples").iterdir()).unlink()
        done = subprocess.run(
            [exe, *args], capture_output=True, preexec_fn=limited, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["files_written"] == victims
        assert result["outcome"] == ("repaired" if victims else "unchanged")


# ------------------------------------------------------------------ killed imports


def test_an_import_killed_outright_leaves_nothing_the_next_one_keeps(
    base_store: Path, tmp_path: Path
) -> None:
    # A SIGKILL leaves a staging directory (nothing can run on that signal). The next
    # import into the store removes it: no process holds its lock. A live import's
    # staging (locked), a young one (maybe not locked yet) and a link are left alone.
    import fcntl

    store = tmp_path / "store"
    shutil.copytree(base_store, store, symlinks=True)
    old = time.time() - 2 * storewriter.STALE_AFTER

    def staging(name: str, age: float = old) -> Path:
        d = store / (storewriter.STAGING_PREFIX + name)
        (d / "files" / "blobs").mkdir(parents=True)
        (d / "files" / "blobs" / "x").write_bytes(b"left by a killed import")
        os.utime(d, (age, age))
        return d

    dead = staging("dead" * 4)
    live = staging("1111" * 4)
    young = staging("2222" * 4, time.time())
    (store / (storewriter.STAGING_PREFIX + "3333" * 4)).symlink_to(live)
    held = os.open(live, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        done = import_run(inspect_config(store, tmp_path))
    finally:
        os.close(held)
    assert done.outcome in ("imported", "written") or done.files_written > 0
    assert not dead.exists()
    assert live.is_dir() and young.is_dir()
    assert (store / (storewriter.STAGING_PREFIX + "3333" * 4)).is_symlink()
    # A directory of the prefix but not the staging form is the user's, never swept.
    theirs = store / (storewriter.STAGING_PREFIX + "notes")
    theirs.mkdir()
    os.utime(theirs, (old, old))
    import_run(inspect_config(store, tmp_path))
    assert theirs.is_dir()


def test_a_real_sigkill_mid_import_is_swept_by_the_next(base_store: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(base_store, store, symlinks=True)
    # Stopped (SIGSTOP) once its staging directory is there, then killed: what a
    # machine losing the process mid-import leaves.
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bundler",
            "import-inspect",
            str(INSPECT_LOG),
            "--store",
            str(store),
            "--principal",
            "alice",
            "--task",
            str(INSPECT_TASK),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while no_staging(store) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    proc.send_signal(signal.SIGSTOP)
    left = [p for p in store.iterdir() if p.name.startswith(storewriter.STAGING_PREFIX)]
    proc.kill()
    proc.wait()
    assert left, "the import finished before it could be stopped"
    old = time.time() - 2 * storewriter.STALE_AFTER
    for p in left:
        if p.exists():
            os.utime(p, (old, old))
    import_run(inspect_config(store, tmp_path))
    assert no_staging(store)


def test_an_import_that_fails_in_a_store_it_made_keeps_what_another_import_put_there(
    tmp_path: Path,
) -> None:
    # A makes the new store and is refused (or interrupted) after B has imported a whole
    # report into it: B's report stays, and so does the store; only A's own staging and
    # what is empty go.
    store = tmp_path / "new-store"
    a = storewriter.StoreWriter(store)
    assert a.created_root
    b = import_run(inspect_config(store, tmp_path))
    assert (store / "reports").is_dir()
    before = files_of(store)
    a.abort()
    assert store.is_dir() and no_staging(store)
    assert files_of(store) == before
    assert_whole(store, b.report_id, tmp_path)
    # Alone, a refused import that made the store leaves nothing.
    alone = tmp_path / "alone"
    storewriter.StoreWriter(alone).abort()
    assert not alone.exists()
