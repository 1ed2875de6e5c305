"""Every bounded integer option states its real range when a value is out of it
(SPEC 13.1 for fixity; every command alike): a 20-digit value, one past the bound and
one below it each get the same one line naming the option and the range the code
enforces, never Python's 2^63-1 in place of a smaller bound."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import run_cli

from bundler.api.params import INT_MAX
from bundler.cli.app import cli
from bundler.cli.common import _Count


def _bounded_options() -> list[tuple[str, str, int, int]]:
    """(command, option, low, high) of every integer option read as a bounded count."""
    out = []
    for name, command in sorted(cli.commands.items()):  # type: ignore[attr-defined]
        for param in command.params:
            if isinstance(param.type, _Count):
                high = INT_MAX if param.type.max is None else int(param.type.max)
                out.append((name, max(param.opts, key=len), int(param.type.min), high))
    return out


OPTIONS = _bounded_options()


def test_the_bounded_options_include_fixity_workers() -> None:
    assert ("fixity", "--workers", 1, 1024) in OPTIONS
    assert ("export", "--level", 1, 19) in OPTIONS


@pytest.mark.parametrize(("command", "option", "low", "high"), OPTIONS)
@pytest.mark.parametrize("which", ["huge", "one past", "below", "negative", "2^63"])
def test_an_out_of_range_value_names_the_real_range(
    command: str, option: str, low: int, high: int, which: str
) -> None:
    value = {
        "huge": "99999999999999999999",
        "one past": str(high + 1),
        "below": str(low - 1),
        "negative": "-5",
        "2^63": str(2**63),
    }[which]
    done = CliRunner().invoke(cli, [command, f"{option}={value}", "x"])
    assert done.exit_code == 2, done.output
    line = done.output.strip().splitlines()[-1]
    assert f"'{option}'" in line and f"is not in the range {low}<=x<={high}." in line, line
    assert str(2**63 - 1) not in line or high == INT_MAX


def test_fixity_workers_through_the_command() -> None:
    done = run_cli("fixity", "--workers", "99999999999999999999", "/nonexistent")
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "'--workers': 99999999999999999999 is not in the range 1<=x<=1024." in err
    assert "9223372036854775807" not in err
