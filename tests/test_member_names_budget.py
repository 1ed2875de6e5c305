"""Member names cost the reader the same whatever their length (issue 28, deliverable 4).

The reader remembers each name by a 16-byte digest (``names.MemberNames``) and refuses
more than 65,536 members or 32 MiB of names in all; the exporter's ``BagWriter`` asks
the same ledger. Each command that walks members runs, as a measured subprocess
(``measure.py``: the child's own peak RSS), on archives at and one past each cap: the
longest names the byte cap admits, the most members the count cap admits, and the
40,000 names of 3,900 bytes that took ``verify`` to 365 MB.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import hostile
import measure
import pytest

from bundler.archive import names

REPO = Path(__file__).resolve().parents[1]
BUDGET_BYTES = 300 * 1000 * 1000
CAP = names.MAX_NAMES_TOTAL_BYTES
LONG = names.MAX_NAME_BYTES
SHORT = 120
BYTES_RULE = f"member names over {CAP} bytes in all"
COUNT_RULE = f"more than max_members={names.MAX_MEMBERS} members"


def _at_byte_cap(extra: int) -> tuple[int, int]:
    count = (CAP - hostile.chain_name_bytes(LONG)) // LONG
    return count + extra, LONG


def _at_count_cap(extra: int) -> tuple[int, int]:
    # Names of SHORT bytes need no directory chain: top, data and data/blobs only.
    return names.MAX_MEMBERS - 3 + extra, SHORT


SHAPES: dict[str, tuple[tuple[int, int], str | None]] = {
    "longest names, at the byte cap": (_at_byte_cap(0), None),
    "longest names, one past the byte cap": (_at_byte_cap(1), BYTES_RULE),
    "most members, at the count cap": (_at_count_cap(0), None),
    "most members, one past the count cap": (_at_count_cap(1), COUNT_RULE),
    "40,000 names of 3,900 bytes": ((40_000, 3_900), BYTES_RULE),
}

COMMANDS = {
    "verify": lambda bundle, cwd: ["verify", str(bundle)],
    "inspect": lambda bundle, cwd: ["inspect", str(bundle)],
    "extract": lambda bundle, cwd: ["extract", str(bundle), str(cwd / "out")],
    "prove": lambda bundle, cwd: ["prove", str(bundle), "--case", "c-00000"],
    "audit": lambda bundle, cwd: ["audit", str(bundle)],
}


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("long-names")
    made = {}
    for i, (shape, ((count, length), _)) in enumerate(SHAPES.items()):
        made[shape] = hostile.long_names_bundle(out / f"{i}.tar.zst", count, length)
    return made


# 65,536 members take every command through the same reader and read_bag; verify stands
# for the others there, so the module stays within the suite's time. The member-count
# cap's other walkers (extract, which also writes each member, among them) are measured by
# test_resource_budget.py's empty_members family.
COUNT_SHAPE_COMMANDS = ("verify",)
CASES = [
    (shape, command)
    for shape in SHAPES
    for command in sorted(COMMANDS)
    if "count cap" not in shape or command in COUNT_SHAPE_COMMANDS
]


@pytest.mark.parametrize(("shape", "command"), CASES)
def test_walking_members_stays_within_budget(
    shape: str, command: str, archives: dict[str, Path], tmp_path: Path
) -> None:
    cmd = [sys.executable, "-m", "bundler", *COMMANDS[command](archives[shape], tmp_path)]
    run = measure.spawn_measured(
        cmd, deadline=120, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=tmp_path
    )
    # audit reports an unreadable bundle in its verdict on stdout; the others on stderr.
    stderr = (run.stdout + run.stderr).decode("utf-8", "replace")
    detail = f"exit {run.code}, {run.peak_bytes / 1e6:.0f} MB, {run.wall:.1f} s: {stderr[-300:]}"
    assert not run.killed, detail
    assert "Traceback" not in stderr, detail
    assert run.code == 3, detail
    assert run.peak_bytes < BUDGET_BYTES, detail
    rule = SHAPES[shape][1]
    if rule is None:
        assert BYTES_RULE not in stderr and COUNT_RULE not in stderr, detail
    else:
        assert rule in stderr, detail
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def _name(first: str, length: int) -> str:
    """A valid name of ``length`` bytes starting with ``first``: 255-byte segments."""
    name = first
    while len(name) < length:
        name += "/" if len(name.rpartition("/")[2]) == 255 else "a"
    if name.endswith("/"):
        name = name[:-2] + "/b"
    return name


@pytest.mark.parametrize("length", [1, 255, 1000, LONG])
def test_the_ledger_admits_exactly_the_byte_cap(length: int) -> None:
    ledger = names.MemberNames(max_total_bytes=3 * length)
    for i in range(3):
        assert ledger.claim(_name(str(i), length)) is None
    assert ledger.total_bytes == 3 * length
    refused = ledger.claim(_name("9", length))
    assert refused is not None and refused[0].startswith(f"member names over {3 * length} bytes")


def test_the_ledger_keeps_digests_not_names() -> None:
    ledger = names.MemberNames()
    assert ledger.claim("top", is_dir=True) is None
    long = _name("top/x", LONG)
    assert ledger.claim(long, tag=512) is None
    assert ledger.claim(long.upper(), tag=1024) == (
        "collides with an earlier member after NFC and case folding",
        512,
    )
    assert ledger.claim(long, tag=1024) == ("duplicate name", 512)
    assert ledger.has_directory("top") and not ledger.has_directory(long)
    assert ledger.members == 2 and ledger.total_bytes == 3 + LONG
