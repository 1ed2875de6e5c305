"""export and export-eb: progress against a known total, and --out naming a directory.

Progress is checked through the library's callback (a real export into tmp_path) and
through the CLI on a pseudo-terminal, where the bar is drawn; --out by subprocess.
"""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
import sys
import tarfile
import threading
from datetime import UTC, datetime
from pathlib import Path

import zstandard
from conftest import EXPORTED_AT, REPO, run_cli

from bundler.evalbanana.export import EbExportConfig, export_eb_bundle
from bundler.evalbook.bagwriter import Progress
from bundler.evalbook.export import ExportConfig, export_bundle

STAMP = EXPORTED_AT.strftime("%Y-%m-%dT%H:%M:%SZ")
EB = REPO / "fixtures" / "eval-banana"
EB_RUN = sorted((EB / "runs" / "default").iterdir())[0]
EB_PROJECT = EB / "project"
EB_STAMP = "2026-11-30T03:00:00Z"  # after the committed runs completed
# Written after every decision is made, so never part of the first total.
LATE_FILES = {
    "data/bundle.json",
    "bagit.txt",
    "bag-info.txt",
    "manifest-sha256.txt",
    "bundle-head.json",
    "tagmanifest-sha256.txt",
}


def _file_sizes(archive: Path) -> dict[str, int]:
    """Bag-relative path -> size of every file member of one of our own archives."""
    raw = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(archive.read_bytes())).read()
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
        return {info.name.split("/", 1)[1]: info.size for info in tar.getmembers() if info.isfile()}


def _check_progress(seen: list[Progress], sizes: dict[str, int]) -> int:
    """The invariants of every export's progress; returns the first known total."""
    assert seen, "no progress reported"
    final = seen[-1]
    assert final.bytes == sum(sizes.values())  # content bytes, every file of the bag
    assert final.total_bytes == final.bytes  # the bar ends full
    assert final.files == sum(1 for p in sizes if p.startswith("data/"))
    assert [p.bytes for p in seen] == sorted(p.bytes for p in seen)
    known = [p for p in seen if p.total_bytes is not None]
    assert known, "the total never became known"
    assert all(p.bytes <= p.total_bytes for p in known if p.total_bytes is not None)
    first = seen.index(known[0])
    assert all(p.total_bytes is not None for p in seen[first:])  # never forgotten again
    assert known[0].total_bytes is not None
    return known[0].total_bytes


def test_export_total_is_known_before_the_payloads(fixture_store: Path, tmp_path: Path) -> None:
    seen: list[Progress] = []
    out = tmp_path / "clean.tar.zst"
    export_bundle(
        ExportConfig(str(fixture_store), "rpt-clean", "alice", EXPORTED_AT, out=out), seen.append
    )
    sizes = _file_sizes(out)
    first_total = _check_progress(seen, sizes)
    # The total is announced once: everything but the files made at the very end.
    assert first_total == sum(s for p, s in sizes.items() if p not in LATE_FILES)
    announced = next(i for i, p in enumerate(seen) if p.total_bytes is not None)
    # ... before a check result, case file, example or blob was written.
    assert seen[announced].files == 1 + 1 + 1 + sum(
        1
        for p in sizes
        if p.startswith(("data/scorers/", "data/datasets/")) and "/examples/" not in p
    )
    payloads = [p for p in sizes if p.startswith("data/blobs/")]
    assert payloads and seen[announced].bytes < first_total - sum(sizes[p] for p in payloads)


def test_export_total_with_items_left_out_still_ends_full(
    fixture_store: Path, tmp_path: Path
) -> None:
    """rpt-every-reason has missing and altered examples and payloads, redactions for
    bob and an evidence manifest: what is not written leaves the total."""
    for principal in ("alice", "bob"):
        seen: list[Progress] = []
        out = tmp_path / f"every-{principal}.tar.zst"
        config = ExportConfig(
            str(fixture_store), "rpt-every-reason", principal, EXPORTED_AT, out=out
        )
        export_bundle(config, seen.append)
        _check_progress(seen, _file_sizes(out))


def test_progress_changes_nothing_written(fixture_store: Path, tmp_path: Path) -> None:
    for report_id in ("rpt-every-reason", "rpt-evidence-manifest"):
        quiet = tmp_path / f"{report_id}-a.tar.zst"
        watched = tmp_path / f"{report_id}-b.tar.zst"
        export_bundle(ExportConfig(str(fixture_store), report_id, "alice", EXPORTED_AT, out=quiet))
        export_bundle(
            ExportConfig(str(fixture_store), report_id, "alice", EXPORTED_AT, out=watched),
            lambda p: None,
        )
        assert quiet.read_bytes() == watched.read_bytes()


def test_export_eb_total_is_the_run_and_its_definitions(tmp_path: Path) -> None:
    seen: list[Progress] = []
    out = tmp_path / "run.tar.zst"
    moment = datetime(2026, 11, 30, 3, tzinfo=UTC)  # after the committed runs completed
    export_eb_bundle(EbExportConfig(EB_RUN, EB_PROJECT, moment, out=out), seen.append)
    sizes = _file_sizes(out)
    first_total = _check_progress(seen, sizes)
    assert seen[0].total_bytes == first_total  # known before the first file is written
    run_bytes = sum(p.stat().st_size for p in EB_RUN.rglob("*") if p.is_file())
    definitions = sum(s for p, s in sizes.items() if p.startswith("data/definitions/"))
    assert first_total == run_bytes + definitions


def _on_a_terminal(*args: str, cwd: Path) -> tuple[int, bytes, str]:
    """Run the CLI with stderr on a pseudo-terminal (so the bar is drawn)."""
    exe = REPO / ".venv" / "bin" / "evalbook-bundle"
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "bundler"]
    main, sub = pty.openpty()
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "160"}
    try:
        done = subprocess.run(
            [*command, *args],
            stdout=subprocess.PIPE,
            stderr=sub,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            timeout=120,
            check=False,
        )
    finally:
        os.close(sub)
        reader.join(timeout=10)
        os.close(main)
    return done.returncode, done.stdout, b"".join(chunks).decode("utf-8", "replace")


def test_export_bar_shows_total_and_percent(fixture_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "bar.tar.zst"
    code, stdout, terminal = _on_a_terminal(
        "export", "--store", str(fixture_store), "--report", "rpt-every-reason",
        "--principal", "alice", "--exported-at", STAMP, "--out", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert code == 0, terminal
    assert str(out).encode() in stdout
    assert "100%" in terminal
    # rich's download column: "<done>/<total> <unit>", the total known
    assert re.search(r"\d+(\.\d+)?/\d+(\.\d+)? (bytes|KiB|MiB)", terminal), terminal
    quiet_code, _, quiet_terminal = _on_a_terminal(
        "export", "--store", str(fixture_store), "--report", "rpt-every-reason",
        "--principal", "alice", "--exported-at", STAMP, "--out", str(tmp_path / "q.tar.zst"),
        "--quiet", cwd=tmp_path,
    )  # fmt: skip
    assert quiet_code == 0 and "%" not in quiet_terminal


# ---------------------------------------------------------------------- --out DIR


def _export(
    store: Path, *extra: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    return run_cli(
        "export", "--store", str(store), "--report", "rpt-clean", "--principal", "alice",
        "--exported-at", STAMP, "--quiet", *extra, cwd=cwd,
    )  # fmt: skip


def test_export_out_directory_gets_the_default_name(fixture_store: Path, tmp_path: Path) -> None:
    reference = tmp_path / "reference.tar.zst"
    assert _export(fixture_store, "--out", str(reference)).returncode == 0
    for spelling in ("plain", "slash/"):
        directory = tmp_path / spelling.rstrip("/")
        directory.mkdir()
        out = str(directory) + ("/" if spelling.endswith("/") else "")
        done = _export(fixture_store, "--out", out)
        assert done.returncode == 0, done.stderr.decode()
        written = directory / "evalbook-bundle-rpt-clean.tar.zst"
        assert sorted(directory.iterdir()) == [written]
        assert written.read_bytes() == reference.read_bytes()
        assert str(written).encode() in done.stdout
    # a relative directory, as `cp x dir/` from the working directory
    (tmp_path / "rel").mkdir()
    done = _export(fixture_store, "--out", "rel/", cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert (tmp_path / "rel" / "evalbook-bundle-rpt-clean.tar.zst").is_file()


def test_export_out_existing_file_in_the_directory_is_not_overwritten(
    fixture_store: Path, tmp_path: Path
) -> None:
    there = tmp_path / "evalbook-bundle-rpt-clean.tar.zst"
    there.write_bytes(b"keep me")
    done = _export(fixture_store, "--out", str(tmp_path) + "/")
    assert done.returncode == 3
    assert there.read_bytes() == b"keep me"
    errors = done.stderr.decode().splitlines()
    assert errors == [f"evalbook-bundle: error: {there}: already exists; refusing to overwrite"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [there.name]  # no temporary left


def test_export_out_slash_that_is_not_a_directory_is_a_usage_error(
    fixture_store: Path, tmp_path: Path
) -> None:
    afile = tmp_path / "afile"
    afile.write_bytes(b"x")
    for out in (str(tmp_path / "missing") + "/", str(afile) + "/"):
        done = _export(fixture_store, "--out", out)
        assert done.returncode == 2, done.stderr.decode()
        errors = done.stderr.decode().splitlines()
        assert len(errors) == 1 and "--out" in errors[0] and repr(out) in errors[0]
        assert "no such directory" in errors[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_export_eb_out_directory_gets_the_default_name(tmp_path: Path) -> None:
    run_id = json.loads((EB_RUN / "report.json").read_bytes())["run_id"]
    target = tmp_path / "bundles"
    target.mkdir()
    common = ["export-eb", str(EB_RUN), "--project", str(EB_PROJECT), "--exported-at", EB_STAMP]
    done = run_cli(*common, "--out", str(target) + "/", "--quiet")
    assert done.returncode == 0, done.stderr.decode()
    written = target / f"eval-banana-bundle-{run_id}.tar.zst"
    assert sorted(target.iterdir()) == [written]
    assert str(written).encode() in done.stdout
    again = run_cli(*common, "--out", str(target), "--quiet")
    assert again.returncode == 3
    assert b"already exists; refusing to overwrite" in again.stderr
    missing = run_cli(*common, "--out", str(tmp_path / "nope") + "/", "--quiet")
    assert missing.returncode == 2
    assert b"--out" in missing.stderr and b"no such directory" in missing.stderr
    assert not (tmp_path / "nope").exists()
