"""A bundle path that is not UTF-8, through every command that writes JSON (SPEC 7).

Python holds such a path as text with lone surrogates, which JSON Lines cannot carry;
every --json line and saved record writes it as the console shows it (``\\udcff``),
one rule in bundler/core/jsonout.py, never a traceback.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import run_cli

NAME = b"b\xff\xfe.tar.zst"
SHOWN = "b\\udcff\\udcfe.tar.zst"

COMMANDS = {
    "verify": lambda b, d: ["verify", b, "--json"],
    "verify --output-dir": lambda b, d: ["verify", b, "--json", "--output-dir", str(d / "o")],
    "inspect": lambda b, d: ["inspect", b, "--json"],
    "audit": lambda b, d: ["audit", b, "--json"],
    "extract": lambda b, d: ["extract", b, str(d / "x"), "--json"],
    "digest": lambda b, d: ["digest", b, "--json"],
    "prove": lambda b, d: ["prove", b, "--case", "no-such-case", "--json"],
    "import-inspect --check": lambda b, d: ["import-inspect", "--check", b, "--json"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_json_line_names_a_non_utf8_path_as_shown(
    bundles: dict[str, Path], tmp_path: Path, command: str
) -> None:
    target = os.fsdecode(os.path.join(os.fsencode(tmp_path), NAME))
    shutil.copyfile(bundles["rpt-clean/alice"], target)
    done = run_cli(*COMMANDS[command](target, tmp_path))
    assert b"Traceback" not in done.stderr, done.stderr[-600:]
    assert done.returncode in (0, 1, 3), done.stderr[-600:]
    lines = done.stdout.splitlines()
    assert lines, done.stderr
    for line in lines:
        assert SHOWN in json.dumps(json.loads(line)).replace("\\\\", "\\")
    for saved in (tmp_path / "o").glob("*.json") if (tmp_path / "o").exists() else []:
        assert SHOWN in saved.read_text().replace("\\\\", "\\")
