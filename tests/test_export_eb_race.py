"""export-eb writes only bytes it checked (threat model: files changed during the command).

The consistency check (``check_run``) and the definition resolution read the run and the
project once; export-eb then reads each run file again to write it. A file swapped in
between (``mv`` over it, as a local process racing the tool would) must never reach a
bundle whose own verifier rejects it: the second read must give the size and sha256 the
check saw, or the export is refused (exit 3, "<file>: changed during export; export
again", nothing at the target, no temporary file left). Definitions are written from
the very bytes that were hashed, so a swap after they were read changes nothing. The
one file ``export`` of an EvalBook store reads twice (an imported run file, streamed)
is held to the digest of its first read.

The swap happens deterministically between the two reads (a hook on ``plan_export``),
through the API and through the command line (the hook installed by ``sitecustomize``
in the subprocess), for every kind of file; one run races a real swapping thread.
"""

from __future__ import annotations

import json
import os
import textwrap
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import run_cli
from test_export_eb import (
    FLAT_RUN,
    PROJECT,
    bag_files,
    copy_project,
    copy_run,
    do_export,
    edit_check,
)
from test_import_groups import RESULTS, SAMPLES, TASKS

from bundler.bundles.verify import verify_bundle
from bundler.core.claims import Verdict, VerifyOptions
from bundler.core.errors import InputError, StoreError
from bundler.evalbanana import export as eb_export
from bundler.evalbanana import run as eb
from bundler.evalbook import export as store_export

# Each kind of run file: how to find it in a copy of the flat run, and whether the
# consistency check reads its bytes (else only its presence and size are checked).
PASSES = eb.check_stem("passes")
FAILS = eb.check_stem("fails")
JUDGE = eb.check_stem("judge")
RUN_FILES = {
    "report.json": ("report.json", True),
    "result": (f"checks/{PASSES}.json", True),
    "stdout": (f"checks/{PASSES}.stdout.txt", True),
    "stderr": (f"checks/{FAILS}.stderr.txt", True),
    "report.md": ("report.md", False),
    "prompt": (f"checks/{JUDGE}.prompt.txt", False),
    "evidence": (f"checks/{PASSES}/trace.log", False),
}
CHANGES = ("same_size", "other_size")


def _changed(data: bytes, change: str) -> bytes:
    """Other bytes: the same length with the last byte altered, or one byte longer."""
    if change == "same_size":
        return data[:-1] + bytes([data[-1] ^ 0x01]) if data else b"x"
    return data + b" "


def _swap(path: Path, data: bytes) -> None:
    """Replace ``path`` by a new file holding ``data``, as ``mv`` does (a new inode)."""
    fresh = path.with_name(path.name + ".swap")
    fresh.write_bytes(data)
    os.replace(fresh, path)


def _run(tmp_path: Path) -> Path:
    run = copy_run(tmp_path, FLAT_RUN)
    evidence = run / RUN_FILES["evidence"][0]
    evidence.parent.mkdir()
    evidence.write_bytes(b"evidence of the check\n")
    return run


def _after_plan(monkeypatch: pytest.MonkeyPatch, act: Callable[[], None]) -> None:
    """Run ``act`` once the plan (the check's reads) is made, before any file is written."""
    planned = eb_export.plan_export

    def hooked(run_dir: Path, project_root: Path) -> eb_export._Plan:
        plan = planned(run_dir, project_root)
        act()
        return plan

    monkeypatch.setattr(eb_export, "plan_export", hooked)


@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("kind", sorted(RUN_FILES))
def test_a_run_file_changed_between_check_and_write(
    kind: str, change: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _run(tmp_path)
    rel, content_checked = RUN_FILES[kind]
    path = run / rel
    before = path.read_bytes()
    _after_plan(monkeypatch, lambda: _swap(path, _changed(before, change)))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "b.tar.zst"
    if content_checked or change == "other_size":
        with pytest.raises(InputError) as caught:
            do_export(run, PROJECT, out)
        assert caught.value.message == f"{path}: changed during export; export again"
        assert list(out_dir.iterdir()) == [], "a refused export left a file"
        return
    # Checked for presence and size only, and the size is the one checked: the bundle
    # holds the bytes read to write it, and its verifier accepts them.
    do_export(run, PROJECT, out)
    _, files = bag_files(out)
    assert files["data/run/" + rel] == path.read_bytes() != before
    assert verify_bundle(str(out), VerifyOptions()).verdict is Verdict.VERIFIED


@pytest.mark.parametrize("which", ["yaml", "script"])
def test_a_definition_changed_after_it_was_hashed_is_not_what_is_written(
    which: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Definitions are read once: the bytes hashed are the bytes written, whatever the
    # project holds by the time the archive is written.
    run = _run(tmp_path)
    project = copy_project(tmp_path)
    yaml = next(p for p in sorted(project.rglob("*.yaml")) if b"script_path" in p.read_bytes())
    script_line = next(
        line for line in yaml.read_text().splitlines() if line.startswith("script_path")
    )
    script = yaml.parent / script_line.split(":", 1)[1].strip().strip("'\"")
    path = yaml if which == "yaml" else script
    before = path.read_bytes()
    _after_plan(monkeypatch, lambda: _swap(path, _changed(before, "same_size")))
    out = tmp_path / "b.tar.zst"
    do_export(run, project, out)
    _, files = bag_files(out)
    bundled = [data for name, data in files.items() if name.startswith("data/definitions/")]
    assert before in bundled and path.read_bytes() not in bundled
    assert verify_bundle(str(out), VerifyOptions()).verdict is Verdict.VERIFIED


_HOOK = """
import os
from pathlib import Path
from bundler.evalbanana import export

_planned = export.plan_export

def _hooked(run_dir, project_root):
    plan = _planned(run_dir, project_root)
    path = Path(os.environ["EB_RACE_FILE"])
    fresh = path.with_name(path.name + ".swap")
    fresh.write_bytes(bytes.fromhex(os.environ["EB_RACE_BYTES"]))
    os.replace(fresh, path)
    return plan

export.plan_export = _hooked
"""


@pytest.mark.parametrize("kind", ["report.json", "result", "stdout", "stderr"])
def test_the_command_line_refuses_a_file_changed_during_export(kind: str, tmp_path: Path) -> None:
    run = _run(tmp_path)
    path = run / RUN_FILES[kind][0]
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(textwrap.dedent(_HOOK))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    env = {
        "PYTHONPATH": str(hook),
        "EB_RACE_FILE": str(path),
        "EB_RACE_BYTES": _changed(path.read_bytes(), "same_size").hex(),
    }
    proc = run_cli(
        "export-eb",
        str(run),
        "--project",
        str(PROJECT),
        "--out",
        str(out_dir / "b.tar.zst"),
        "--quiet",
        env=env,
    )
    stderr = proc.stderr.decode()
    assert proc.returncode == 3, stderr
    assert stderr.strip().splitlines() == [
        f"evalbook-bundle: error: {path}: changed during export; export again"
    ]
    assert list(out_dir.iterdir()) == []


def test_a_real_race_never_gives_a_bundle_its_verifier_rejects(tmp_path: Path) -> None:
    # A thread swaps the 4 MiB stdout of a check between its recorded content and one
    # that differs in its last bytes while export-eb runs as a subprocess, repeatedly:
    # each export either writes a bundle that verifies or is refused with exit 3.
    run = _run(tmp_path)
    stem = PASSES
    good = b"x" * (4 * 2**20) + b"the end\n"
    bad = good[:-4] + b"END\n"
    stdout = run / "checks" / f"{stem}.stdout.txt"
    stdout.write_bytes(good)
    tail = eb.bounded_tail(good.decode(), stem=stem)
    edit_check(run, "passes", lambda c: c.update(stdout=tail))
    stop = threading.Event()

    def racer() -> None:
        while not stop.is_set():
            for data in (good, bad):
                _swap(stdout, data)
                stop.wait(0.005)

    thread = threading.Thread(target=racer)
    thread.start()
    outcomes = []
    try:
        for i in range(6):
            out = tmp_path / f"b{i}.tar.zst"
            proc = run_cli(
                "export-eb", str(run), "--project", str(PROJECT), "--out", str(out), "--quiet"
            )
            stderr = proc.stderr.decode()
            assert proc.returncode in (0, 3) and "Traceback" not in stderr, stderr
            if proc.returncode == 0:
                result = verify_bundle(str(out), VerifyOptions())
                assert result.verdict is Verdict.VERIFIED, [c.detail for c in result.failures()]
                _, files = bag_files(out)
                assert files[f"data/run/checks/{stem}.stdout.txt"] == good
            else:
                assert not out.exists() and len(stderr.strip().splitlines()) == 1, stderr
            outcomes.append(proc.returncode)
    finally:
        stop.set()
        thread.join()
    assert len(outcomes) == 6


def test_store_export_refuses_a_run_file_changed_between_its_two_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ``export`` of an EvalBook store reads twice only the run files of an imported
    # report (streamed whatever their size): hashed to decide, then streamed and hashed
    # again as written. A file swapped in between refuses the export, nothing written.
    store = tmp_path / "store"
    args = ["import-lm-eval", str(RESULTS)]
    for s in SAMPLES:
        args += ["--samples", str(s)]
    for t in TASKS:
        args += ["--task", str(t)]
    done = run_cli(*args, "--store", str(store), "--principal", "alice", "--json")
    assert done.returncode == 0, done.stderr
    report_id = json.loads(done.stdout)["report_id"]
    hashed = store_export._Collector._stream_digest
    swapped: list[str] = []

    def hook(self: store_export._Collector, relpath: str) -> tuple[str | None, int]:
        observed = hashed(self, relpath)
        if not swapped:
            path = store / relpath
            _swap(path, _changed(path.read_bytes(), "same_size"))
            swapped.append(relpath)
        return observed

    monkeypatch.setattr(store_export._Collector, "_stream_digest", hook)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    config = store_export.ExportConfig(
        str(store), report_id, "alice", datetime(2026, 12, 31, tzinfo=UTC), out=out_dir / "b"
    )
    with pytest.raises(StoreError, match="changed while it was exported; export refused"):
        store_export.export_bundle(config)
    assert swapped and list(out_dir.iterdir()) == []


@pytest.mark.parametrize("kind", ["result", "report.json"])
def test_verify_in_place_refuses_a_file_changed_between_its_reads(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Verify in place reads the check files again for the case tree, and report.json and
    # the check files for the size rule's value count: a file swapped after the
    # consistency check is an error (exit 3) naming it, never a verdict over two
    # different sets of bytes.
    from bundler.evalbanana import verify as eb_verify

    run = _run(tmp_path)
    path = run / RUN_FILES[kind][0]
    before = path.read_bytes()
    checked = eb_verify.check_run

    def hooked(*args: object, **kw: object) -> object:
        findings = checked(*args, **kw)  # type: ignore[arg-type]
        _swap(path, _changed(before, "same_size"))
        return findings

    monkeypatch.setattr(eb_verify, "check_run", hooked)
    result = eb_verify.verify_run_dir(run, PROJECT, VerifyOptions())
    assert result.verdict is Verdict.ERROR
    assert result.error == f"{path}: changed during verification; verify again"
