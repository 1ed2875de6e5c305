"""Tag-file text and --max-bytes read alike by both verifiers (SPEC 15, docs/format.md).

A manifest path neither starts nor ends with a space character from one written-out set
(the JavaScript verifier, js/src/bagit.mjs, uses the same); a BOM before the first line
makes it malformed; --max-bytes is ASCII digits only, of any length.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from bundler.archive import bag
from bundler.core.errors import ArchiveError

HEX = "a" * 64
SPACES = [
    "\t", "\x0b", "\x0c", "\r", "\x1c", "\x1d", "\x1e", "\x1f", " ", "\x85", "\xa0",
    "\u1680", "\u2000", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff",
]  # fmt: skip


@pytest.mark.parametrize("space", SPACES, ids=[f"U+{ord(s):04X}" for s in SPACES])
@pytest.mark.parametrize("where", ["start", "end"])
def test_a_path_starting_or_ending_with_a_space_character_is_malformed(
    space: str, where: str
) -> None:
    path = f"{space}data/x" if where == "start" else f"data/x{space}"
    with pytest.raises(ArchiveError, match=r"^m:1: not '<64 lowercase hex>  <path>'$"):
        bag.parse_manifest(f"{HEX}  {path}\n".encode(), source="m")


@pytest.mark.parametrize("space", SPACES, ids=[f"U+{ord(s):04X}" for s in SPACES])
def test_a_space_character_inside_a_path_is_part_of_it(space: str) -> None:
    assert bag.parse_manifest(f"{HEX}  data/a{space}b\n".encode(), source="m") == {
        f"data/a{space}b": HEX
    }


@pytest.mark.parametrize("char", ["\u200b", "\u00ad", "\u180e"])
def test_characters_outside_the_set_are_not_spaces(char: str) -> None:
    assert bag.parse_manifest(f"{HEX}  {char}data/x\n".encode(), source="m") == {
        f"{char}data/x": HEX
    }


def test_a_bom_before_the_first_line_is_malformed() -> None:
    with pytest.raises(ArchiveError, match=r"^m:1: not"):
        bag.parse_manifest(b"\xef\xbb\xbf" + f"{HEX}  data/x\n".encode(), source="m")


@pytest.mark.parametrize(
    "value", ["0", "000", "-5", "+5", "1_000", " 7", "7 ", "1e9", "\u0661\u0662"]
)
def test_max_bytes_is_ascii_digits_only(value: str, tmp_path: object) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bundler", "verify", "absent.tar.zst", "--max-bytes", value],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2, done.stderr
    assert "--max-bytes" in done.stderr
    assert "Traceback" not in done.stderr


def test_max_bytes_of_any_length_is_a_cap() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bundler", "verify", "absent.tar.zst", "--max-bytes", "9" * 24],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 3, done.stderr  # the option is fine; the bundle is absent
