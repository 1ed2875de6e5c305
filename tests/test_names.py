"""The member-name rules' fast path gives the full checks' answer for every name.

``names.name_problem`` settles names of plain ASCII segments with one regular expression
and sends everything else to the full checks; both the exporter and the reader call it,
so a fast path that accepted one name too many would let a hostile archive through.
"""

from __future__ import annotations

import itertools
import random

import pytest

from bundler.archive import names

# Every character class the rules treat differently: plain, the dot of "." and "..", the
# separator, backslash, controls (NUL, tab, DEL), a space, non-ASCII (NFC and not NFC),
# and characters outside the fast path's set. (Names reach the rules decoded from UTF-8
# or parsed from JSON, so a lone surrogate never does.)
ALPHABET = [
    "a",
    "Z",
    "0",
    "-",
    "_",
    ".",
    "/",
    "\\",
    "\0",
    "\t",
    "\x7f",
    " ",
    "é",
    "e\u0301",
    ":",
    "*",
    "~",
    "+",
]


def agree(name: str) -> None:
    assert names.name_problem(name) == names._full_name_problem(name), repr(name)


def test_every_short_name_gets_the_full_answer() -> None:
    for length in range(1, 5):
        for letters in itertools.product(ALPHABET, repeat=length):
            agree("".join(letters))


def test_segment_and_name_length_limits_at_their_edges() -> None:
    for size in (254, 255, 256):
        agree("x" * size)
        agree("top/" + "x" * size)
        agree("é" * (size // 2))
    segment = "y" * 200
    for count in range(18, 23):  # around MAX_NAME_BYTES = 4096 in all
        agree("/".join([segment] * count))
        agree("/".join([segment] * count) + "/zz")


def test_random_names() -> None:
    rng = random.Random(19)
    pieces = [*ALPHABET, "..", "./", "/.", "//", "x" * 255, "data/blobs/sha256/"]
    for _ in range(50_000):
        agree("".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))))


def test_unicode14_table_is_the_assigned_code_points() -> None:
    """The committed table is Unicode 14.0.0's assigned code points: equal to this
    Python's when it is 14.0.0 (3.11), and within a later version's (a code point once
    assigned stays assigned)."""
    import unicodedata

    from bundler.archive import unicode14

    table = {
        cp for a, b in zip(unicode14.STARTS, unicode14.ENDS, strict=True) for cp in range(a, b + 1)
    }
    here = {cp for cp in range(0x110000) if unicodedata.category(chr(cp)) != "Cn"}
    if unicodedata.unidata_version == unicode14.UNICODE_VERSION:
        assert table == here
    else:
        assert table < here


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("a\u0378", "U+0378 is not assigned in Unicode 14.0.0"),
        ("\U0001e08f.json", "U+1E08F is not assigned in Unicode 14.0.0"),  # Unicode 15.0
        ("x/\U00010efd", "U+10EFD is not assigned in Unicode 14.0.0"),  # a 15.0 mark
        ("\U000e01f0", "U+E01F0 is not assigned in Unicode 14.0.0"),
        ("\ufdd0", "U+FDD0 is not assigned in Unicode 14.0.0"),  # a noncharacter
        ("\U0010fffd", None),  # private use is assigned
        ("\u1e9e.json", None),
    ],
)
def test_names_with_code_points_unassigned_in_unicode14_are_refused(
    name: str, problem: str | None
) -> None:
    assert names.name_problem(name) == problem


@pytest.mark.parametrize(
    ("a", "b", "collide"),
    [
        ("\u1e9e.json", "ss.json", True),
        ("\u00df", "SS", True),
        ("\u03c2", "\u03a3", True),
        ("\u017f", "s", True),
        ("\ufb01", "FI", True),
        ("\u13a0", "\uab70", True),
        ("\u0131.json", "i.json", False),
        ("\u0130", "i", False),
    ],
)
def test_full_case_folding_pairs(a: str, b: str, collide: bool) -> None:
    member_names = names.MemberNames()
    assert member_names.claim(a) is None
    problem = member_names.claim(b)
    assert (problem is not None) == collide
    if collide:
        assert problem == ("collides with an earlier member after NFC and case folding", 0)
