"""Pages built from the record's structure, never from its text (SPEC 14).

- The eval-banana check table has one row per check, from its own status and score: a
  check named ``fails: decoy`` is its own row, ``fails`` says FAILED, ``judge`` ERRORED.
- An audit page carries the same report facts as a verification page, from the same
  fields (id, result, issued_at, envelope, superseded_by, superseded_at).
- Ids and texts holding every separator, quote and invisible class show escaped, add no
  element, and the reproduce commands read back with ``shlex.split`` as the file named.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import records
from conftest import run_cli
from schema_strategies import TRICKY_TEXT
from test_page import Page, assert_inert

from bundler.core.textsafe import hidden, shown
from bundler.report.page import render_record


def _rows(page: str, heading: str) -> list[list[str]]:
    """The body rows (cell texts) of the first table after ``heading``."""
    start = page.index(heading)
    body = page[page.index("<tbody>", start) : page.index("</tbody>", start)]
    return [
        [
            html.unescape(re.sub(r"<[^>]+>", "", cell))
            for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)
        ]
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


def test_eval_banana_checks_from_status_and_score() -> None:
    page = render_record(records.eb_verification())[1].decode()
    rows = _rows(page, "Check by check")
    assert rows == [
        ["fails", "FAILED", "0"],
        ["fails: decoy", "passed", "1"],
        ["judge", "ERRORED", "0"],
    ]
    facts = dict((r[0], r[1]) for r in _rows(page, "score and pass rule"))
    assert facts["Score"] == "1/3" and facts["Passed"] == "no"
    assert facts["checks"] == "1 passed, 1 failed, 1 errored, of 3"


def _report_block(page: str) -> str:
    start = page.index('<h2 id="report-h">')
    return page[page.index("<dl", start) : page.index("</dl>", start)]


@pytest.mark.parametrize("status", ["superseded", "current"])
def test_audit_and_verification_pages_show_the_same_report_facts(status: str) -> None:
    envelope = {
        "status": status,
        "superseded_by": "rpt-clean" if status == "superseded" else None,
        "superseded_at": "2026-11-02T00:00:00Z" if status == "superseded" else None,
        "reason": "a typo\U000e0100" if status == "superseded" else None,
    }
    v = records.consistent(records.verification(envelope=envelope))
    a = records.audit()
    a["verification"]["envelope"] = envelope
    v_page = render_record(v)[1].decode()
    a_page = render_record(a)[1].decode()

    # The same facts; the notes beside them say what each page's verdict means.
    def facts(page: str) -> str:
        return re.sub(r" \([^()]*\)", "", _report_block(page))

    assert facts(v_page) == facts(a_page)
    assert "as issued; the audit re-derives it below" in _report_block(a_page)
    block = html.unescape(_report_block(a_page))
    assert "issued_at" in block and "2026-11-01T00:00:00Z" in block
    if status == "superseded":
        assert "superseded_by" in block and "rpt-clean" in block
        assert "superseded_at" in block and "2026-11-02T00:00:00Z" in block
        assert "a typo\\U000e0100" in block and "a typo\U000e0100" not in a_page


# Every separator and quote, and one member of each invisible class.
VALUES = sorted(set(TRICKY_TEXT) - {""} | {"a\\b.tar.zst", "x y", "$(rm -rf ~)", "a'b", 'a"b'})


def _plant(value: str) -> list[tuple[str, dict[str, Any]]]:
    eb = records.eb_verification()
    eb["source"] = value
    eb["summary"]["checks"][1]["check_id"] = value
    eb["claims"][0]["subject"] = value
    # Report ids (and an eval-banana run's id, and a successor's) are identifiers, so a
    # record holding another is refused: the free texts beside them carry the value.
    v = records.verification(source=value)
    v["envelope"]["reason"] = value
    v["claims"][2]["detail"] = value
    v["claims"][1]["path"] = value
    a = records.audit(source=value)
    a["verification"]["envelope"]["reason"] = value
    a["disagreements"][0]["detail"] = value
    f = records.fixity(source=value, ledger=value)
    f["problems"][0]["key"] = value
    f["problems"][0]["detail"] = value
    return [("eb", eb), ("verification", v), ("audit", a), ("fixity", f)]


_BENIGN = {name: render_record(r)[1] for name, r in _plant("benign")}


@pytest.mark.parametrize("value", VALUES, ids=ascii)
def test_every_separator_quote_and_invisible_class_shows_escaped(value: str) -> None:
    for name, record in _plant(value):
        page = render_record(record)[1]
        parsed = assert_inert(page)
        assert parsed.tags == Page(_BENIGN[name].decode()).tags, name
        text = page.decode()
        assert not any(hidden(ch) for ch in text if ch not in "\n\\"), name
        visible = html.unescape(text)
        assert shown(value) in visible, name


def _commands(page: str) -> list[str]:
    start = page.index('<pre class="cmd">') + len('<pre class="cmd">')
    return html.unescape(page[start : page.index("</pre>", start)]).splitlines()


@pytest.mark.parametrize("value", VALUES, ids=ascii)
def test_reproduce_commands_read_back_as_the_file_named(value: str) -> None:
    for name, record in _plant(value):
        lines = _commands(render_record(record)[1].decode())
        first = next(line for line in lines if not line.startswith("#"))
        argv = shlex.split(first)
        # The operand comes last, after "--", so that no name is read as an option.
        assert argv[-2] == "--", (name, argv)
        operand = argv[-1]
        if any(hidden(ch) for ch in value if ch != "\\"):
            assert operand in ("$BUNDLE", "$SOURCE"), (name, argv)
            assert lines[0].startswith("# set ") and lines[0].endswith(shown(value))
        else:
            assert operand == value, (name, argv)
            if name == "fixity":
                assert argv[argv.index("--ledger") + 1] == value


# ---- the commands reproduce the result when run -----------------------------------------


def _run_commands(page: str, cwd: Path, env: dict[str, str]) -> list[Any]:
    """Run each command of the page (but render) in ``cwd``, the program and the shell
    variables the comments ask for taken from ``env``; the processes in order."""
    done = []
    for line in _commands(page):
        if line.startswith("#") or " render " in line:
            continue
        words = shlex.split(line.split("  #")[0])
        if ">" in words:
            words = words[: words.index(">")]
        words = [env.get(w[1:], w) if w.startswith("$") else w for w in words]
        if words[0] == "evalbook-bundle":
            done.append(run_cli(*words[1:], cwd=cwd))
        else:
            assert words[-2] == "<", words
            data = (cwd / words[-1]).read_bytes()
            done.append(
                subprocess.run(words[:-2], input=data, cwd=cwd, capture_output=True, check=False)
            )
    return done


@pytest.mark.parametrize("name", ["-rf.tar.zst", "--help", "-", "a b.tar.zst", "--json"])
def test_the_verify_commands_reproduce_a_name_that_looks_like_an_option(
    tmp_path: Path, bundles: dict[str, Path], name: str
) -> None:
    shutil.copyfile(bundles["rpt-clean/alice"], tmp_path / name)
    proc = run_cli("verify", "--json", "--", name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    page = render_record(json.loads(proc.stdout))[1].decode()
    done = _run_commands(page, tmp_path, {})
    assert len(done) == 3
    for p in done:
        assert p.returncode == 0, p.stderr.decode()
    assert hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() in done[1].stdout.decode()
    assert json.loads(done[2].stdout)["verdict"] == "verified"


def test_the_audit_commands_reproduce_a_name_that_looks_like_an_option(
    tmp_path: Path, bundles: dict[str, Path]
) -> None:
    shutil.copyfile(bundles["rpt-clean/alice"], tmp_path / "-x.tar.zst")
    proc = run_cli("audit", "--json", "--", "-x.tar.zst", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    page = render_record(json.loads(proc.stdout))[1].decode()
    done = _run_commands(page, tmp_path, {})
    assert [p.returncode for p in done] == [0, 0]
    assert json.loads(done[1].stdout)["verdict"] == "consistent"


def test_the_run_directory_commands_name_the_project(tmp_path: Path) -> None:
    from test_export_eb import PROJECT, RUNS

    run = next(iter(sorted(RUNS.values())))
    proc = run_cli("verify", str(run), "--project", str(PROJECT), "--json")
    assert proc.returncode == 0, proc.stderr.decode()
    page = render_record(json.loads(proc.stdout))[1].decode()
    assert "# set PROJECT to" in page
    done = _run_commands(page, tmp_path, {"PROJECT": str(PROJECT)})
    assert len(done) == 2
    for p in done:
        assert p.returncode == 0, p.stderr.decode()
    assert json.loads(done[1].stdout)["verdict"] == "verified"
