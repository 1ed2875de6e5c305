"""A value option given twice is a usage error for every command (SPEC 8, 15).

Click keeps the last of a repeated option silently, so a second ``--expect-bundle-digest``
overrode a pinned digest without a word while the JavaScript verifier refused it. Every
command now refuses it in one place (``bundler.cli.app.Command.parse_args``), before any
work: exit 2, "option --x given twice", nothing written. Flags given twice and options
that take several values stay accepted.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from conftest import run_cli

from bundler.cli.app import _takes_value, cli, repeated_option

SPELLINGS = (
    lambda o: [o, "v1", o, "v2"],
    lambda o: [f"{o}=v1", o, "v2"],
    lambda o: [o, "v1", f"{o}=v2"],
)

CASES = [
    (name, option.opts[0], i % len(SPELLINGS))
    for name, command in sorted(cli.commands.items())
    for i, option in enumerate(
        p for p in command.params if isinstance(p, click.Option) and _takes_value(p)
    )
    if not option.multiple
]


def test_every_command_is_covered() -> None:
    commands = {name for name, _, _ in CASES}
    assert {"verify", "audit", "fixity", "export", "sign", "prove", "check-proof"} <= commands
    assert ("verify", "--expect-bundle-digest") in {(n, o) for n, o, _ in CASES}


@pytest.mark.parametrize(("command", "option", "spelling"), CASES)
def test_value_option_given_twice_is_a_usage_error(
    command: str, option: str, spelling: int, tmp_path: Path
) -> None:
    result = run_cli(command, *SPELLINGS[spelling](option), "x", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.decode().splitlines()[-1] == f"Error: option {option} given twice"
    assert result.stdout == b""
    assert list(tmp_path.iterdir()) == []


def test_with_json_the_error_is_one_json_line(tmp_path: Path) -> None:
    digest = "sha256:" + "0" * 64
    result = run_cli(
        "verify",
        "b.tar.zst",
        "--json",
        "--expect-bundle-digest",
        digest,
        "--expect-bundle-digest",
        digest,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert result.stderr.decode() == (
        "evalbook-bundle: error: option --expect-bundle-digest given twice\n"
    )
    assert b'"exit_code":2' in result.stdout


def test_flags_twice_and_after_double_dash_are_accepted(tmp_path: Path) -> None:
    result = run_cli("verify", "--json", "--json", "-q", "-q", "--", "--max-bytes", "--max-bytes")
    assert result.returncode == 3  # two bundles named "--max-bytes" that do not exist
    assert b"given twice" not in result.stderr


@pytest.mark.parametrize(
    ("args", "repeated"),
    [
        (["--x", "1", "--x", "2"], "--x"),
        (["--x=1", "--x=2"], "--x"),
        (["-x", "1", "--x", "2"], "--x"),
        (["-x1", "-x", "2"], "--x"),
        (["-qx1", "-qx2"], "--x"),
        (["-q", "-q", "--x", "1"], None),
        (["--x", "--x"], None),  # the value of --x is "--x"
        (["--x", "1", "--", "--x", "2"], None),
        (["--m", "1", "--m", "2", "--x", "1"], None),
        (["--flag", "--flag", "--no-flag"], None),
        (["pos", "--x", "1", "pos", "-x", "2"], "--x"),
    ],
)
def test_the_scan_follows_clicks_parser(args: list[str], repeated: str | None) -> None:
    params: list[click.Parameter] = [
        click.Option(["--x", "-x"]),
        click.Option(["-q"], is_flag=True),
        click.Option(["--m"], multiple=True),
        click.Option(["--flag/--no-flag"]),
        click.Argument(["pos"], nargs=-1),
    ]
    assert repeated_option(params, args) == repeated
