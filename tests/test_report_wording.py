"""What the console, the Markdown and `render` say in the words of the contract:
no Python repr, no "None", one spelling of one id, the exit code of SPEC 8."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli
from test_export_eb import PROJECT, RUNS

from bundler.core.textsafe import shown


def test_a_run_directory_markdown_names_no_bundle_in_words(tmp_path: Path) -> None:
    run = next(iter(sorted(RUNS.values())))
    out = tmp_path / "od"
    proc = run_cli("verify", str(run), "--project", str(PROJECT), "--output-dir", str(out))
    assert proc.returncode == 0, proc.stderr.decode()
    markdown = (out / "verification.md").read_text(encoding="utf-8")
    assert "None" not in markdown
    assert "- **Bundle digest:** none (run directory in place: no bundle)" in markdown


@pytest.mark.parametrize("cid", ["a\r\nb", "x\u2028y", "q'uote", "back\\slash", "e\ufe0f"])
def test_a_check_id_is_spelled_one_way_on_the_console(tmp_path: Path, cid: str) -> None:
    run = tmp_path / "run"
    shutil.copytree(next(iter(sorted(RUNS.values()))), run)
    report = json.loads((run / "report.json").read_text(encoding="utf-8"))
    report["checks"][0]["check_id"] = cid
    (run / "report.json").write_text(json.dumps(report), encoding="utf-8")
    proc = run_cli("verify", str(run), "--project", str(PROJECT))
    text = proc.stdout.decode() + proc.stderr.decode()
    assert proc.returncode in (1, 3), text
    assert "Traceback" not in text
    assert f"'{shown(cid)}'" in text, text
    if repr(cid) != f"'{cid}'":  # Python's repr would spell it another way
        assert shown(repr(cid)) not in text


@pytest.mark.parametrize("kind", ["directory", "missing", "fifo"])
def test_render_of_a_result_that_is_no_file_exits_3_in_one_line(tmp_path: Path, kind: str) -> None:
    import os

    result = tmp_path / "result"
    if kind == "directory":
        result.mkdir()
    elif kind == "fifo":
        os.mkfifo(result)
    proc = run_cli("render", str(result), "--html", str(tmp_path / "p.html"))
    lines = proc.stderr.decode().splitlines()
    assert proc.returncode == 3, lines
    assert len(lines) == 1 and str(result) in lines[0]
    assert not (tmp_path / "p.html").exists()
