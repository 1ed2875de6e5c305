"""The member-name rules' fast path gives the full checks' answer for every name.

``names.name_problem`` settles names of plain ASCII segments with one regular expression
and sends everything else to the full checks; both the exporter and the reader call it,
so a fast path that accepted one name too many would let a hostile archive through.
"""

from __future__ import annotations

import itertools
import random

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
