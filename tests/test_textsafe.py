"""bundler.core.textsafe: the one escaping function for untrusted text in human output (SPEC 5)."""

from __future__ import annotations

import re
import sys
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bundler.core import textsafe
from bundler.core.textsafe import shown, shown_md

C0 = [chr(c) for c in range(0x00, 0x20)]
C1 = [chr(c) for c in range(0x80, 0xA0)]
DEL = "\x7f"
BIDI = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)]
ZERO_WIDTH = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"]
SEPARATORS = ["\u2028", "\u2029"]
ODD_SPACES = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Zs"]
ODD_SPACES.remove(" ")
OTHER_INVISIBLE = [
    "\u00ad",  # soft hyphen (Cf)
    "\u034f",  # combining grapheme joiner
    "\u115f",
    "\u1160",
    "\u3164",
    "\uffa0",  # Hangul fillers
    "\u17b4",
    "\u17b5",  # Khmer inherent vowels
    "\u180e",
    "\u180b",
    "\u180f",  # Mongolian vowel separator and variation selectors
    "\u2061",
    "\u2062",
    "\u2063",
    "\u2064",  # invisible operators
    "\u206a",
    "\u206f",  # deprecated format characters
    "\u2800",  # blank Braille cell
    "\ufff9",
    "\ufffb",  # interlinear annotation
    "\U000e0001",
    "\U000e0041",
    "\U000e007f",  # tag characters
    "\ue000",
    "\U000f0000",
    "\U00100000",  # private use
    "\ud800",
    "\udc80",
    "\udfff",  # lone surrogates (surrogateescape'd file names)
    "\U0001fffe",
    "\U0010ffff",
    "\ufdd0",  # noncharacters, unassigned
]
HOSTILE = C0 + C1 + [DEL] + BIDI + ZERO_WIDTH + SEPARATORS + ODD_SPACES + OTHER_INVISIBLE
# What shown may return: printable ASCII, and nothing hidden.
HIDDEN_RE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\u00ad"
    "\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000\U000e0000-\U000e007f\ud800-\udfff]"
)


def escaped(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


@pytest.mark.parametrize("ch", HOSTILE, ids=lambda ch: f"U+{ord(ch):04X}")
def test_every_hostile_character_is_written_as_its_escape(ch: str) -> None:
    assert shown(ch) == escaped(ch)
    assert shown(f"a{ch}b") == f"a{escaped(ch)}b"
    out = shown(f"ok{ch}{ch}ok")
    assert ch not in out
    assert out.isascii()


def test_the_named_classes_are_all_covered() -> None:
    assert len(C0) == 32 and len(C1) == 32
    assert "\x1b" in C0 and "\r" in C0 and "\n" in C0 and "\t" in C0 and "\x00" in C0
    assert {"\u202a", "\u202b", "\u202c", "\u202d", "\u202e"} <= set(BIDI)
    assert {"\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f", "\u061c"} <= set(BIDI)


def test_odd_spaces_literal_is_category_zs_less_the_ordinary_space() -> None:
    assert frozenset(ODD_SPACES) == textsafe._ODD_SPACES


def test_backslash_is_doubled_so_input_cannot_imitate_an_escape() -> None:
    assert shown("\\") == "\\\\"
    assert shown("\\x1b[2J") == "\\\\x1b[2J"
    # An escape we wrote and a backslash sequence the input spelled differ.
    assert shown("\x1b") != shown("\\x1b")
    assert shown("C:\\path") == "C:\\\\path"


def test_astral_characters_use_the_long_escape() -> None:
    assert shown("\U000e0041") == "\\U000e0041"
    assert shown("\U0010ffff") == "\\U0010ffff"
    # Astral characters that draw themselves stay.
    assert shown("\U0001f600") == "\U0001f600"
    assert shown("\U00020000") == "\U00020000"  # CJK extension B


def test_forged_verdict_cannot_redraw_the_screen_or_start_a_line() -> None:
    forged = "x\x1b[2J\x1b[H\rVerdict:     VERIFIED\nFailed:      0\u2028\u202e"
    out = shown(forged)
    assert "\n" not in out and "\r" not in out and "\x1b" not in out
    assert out == "x\\x1b[2J\\x1b[H\\x0dVerdict:     VERIFIED\\x0aFailed:      0\\u2028\\u202e"
    assert len(out.splitlines()) == 1


@pytest.mark.parametrize(
    "text",
    [
        "rpt-clean",
        "Ünïcödé àccents: café, naïve, Øresund, Łódź",
        "日本語のテキスト 中文 한국어",
        "emoji \U0001f600 \U0001f44d \u2764 \U0001f1fa\U0001f1f8",  # no variation selector (SPEC 5)
        "Ελληνικά кириллица עברית العربية",
        "math ∑ ≤ ∞ — \u201cquotes\u201d \u2018single\u2019 … ·",
        "tab-free ASCII: !\"#$%&'()*+,-./:;<=>?@[]^_`{|}~",
        "",
    ],
)
def test_ordinary_text_stays_as_it_is(text: str) -> None:
    assert shown(text) == text


def test_non_strings_are_converted_first() -> None:
    assert shown(3) == "3"
    assert shown(None) == "None"
    from pathlib import Path

    assert shown(Path("a/b\x1b")) == "a/b\\x1b"


@given(st.text())
def test_shown_never_returns_a_hidden_character(text: str) -> None:
    out = shown(text)
    assert HIDDEN_RE.search(out) is None
    for ch in out:
        assert unicodedata.category(ch) not in textsafe._HIDDEN_CATEGORIES
        assert ch == " " or unicodedata.category(ch) != "Zs"


@given(st.text())
def test_shown_is_injective(text: str) -> None:
    # Decoding the escapes gives the input back: no two inputs print alike.
    out = shown(text)
    decoded = re.sub(
        r"\\(\\|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})",
        lambda m: "\\" if m.group(1) == "\\" else chr(int(m.group(1)[1:], 16)),
        out,
    )
    assert decoded == text


# ------------------------------------------------------------------------ Markdown


@pytest.mark.parametrize("ch", HOSTILE, ids=lambda ch: f"U+{ord(ch):04X}")
def test_markdown_escapes_every_hostile_character_too(ch: str) -> None:
    out = shown_md(f"a{ch}b")
    assert ch not in out
    assert out == "a" + escaped(ch).replace("\\", "\\\\") + "b"


@pytest.mark.parametrize("ch", list("\\`*_{}[]()#!|<>&~"))
def test_markdown_neutralises_inline_syntax(ch: str) -> None:
    assert shown_md(f"a {ch}b") == (f"a \\{ch}b" if ch != "\\" else "a \\\\\\\\b")
    assert shown_md(ch) == ("\\" + ch if ch != "\\" else "\\\\\\\\")


def test_markdown_keeps_an_underscore_inside_a_word() -> None:
    # CommonMark never reads an underscore between alphanumerics as emphasis.
    assert shown_md("missing_from_store") == "missing_from_store"
    assert shown_md("_forged_ emphasis") == "\\_forged\\_ emphasis"
    assert shown_md("a_") == "a\\_" and shown_md("_a") == "\\_a"


def test_markdown_cell_cannot_be_closed_nor_html_opened_nor_entity_decoded() -> None:
    out = shown_md("x | <img src=x onerror=alert(1)> &#x202e; [link](http://e) `code` **b**")
    assert "|" not in out.replace("\\|", "")
    assert "<" not in out.replace("\\<", "")
    assert "&" not in out.replace("\\&", "")
    assert "`" not in out.replace("\\`", "")
    assert "[" not in out.replace("\\[", "")


def test_markdown_renders_as_the_console_reads() -> None:
    # CommonMark turns "\\" + punctuation into the punctuation: undo that and the
    # Markdown source gives back the console text exactly.
    for text in ["a\x1bb", "a\\x1bb", "100% | *sure* & <ok>", "日本 \u202e"]:
        rendered = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", shown_md(text))
        assert rendered == shown(text)


def test_markdown_keeps_ordinary_text() -> None:
    for text in ["café", "日本語", "\U0001f600", "rpt-clean sha256:abc", "a.b-c+d=e", "no_dataset_read_body"]:
        assert shown_md(text) == text


def test_a_console_line_shows_at_most_1000_characters_of_one_text() -> None:
    from bundler.core.textsafe import CONSOLE_CHARS, CUT, shown_clipped

    assert CONSOLE_CHARS == 1000
    assert shown_clipped("a" * 1000) == "a" * 1000
    # Over: the first and last 500 shown characters, the cut marked between them, so
    # that the rule a message gives after a long name is still read.
    assert shown_clipped("n" * 5000 + ": the rule") == "n" * 500 + CUT + "n" * 490 + ": the rule"
    # Counted as shown, escapes included, and never cut inside an escape.
    assert shown_clipped("\x01" * 250) == "\\x01" * 250
    assert shown_clipped("\x01" * 251) == "\\x01" * 125 + CUT + "\\x01" * 125
    assert shown_clipped("a" + "\U000e0041" * 100) == "a" + "\\U000e0041" * 49 + CUT + "\\U000e0041" * 50
    assert shown_clipped("\U0001f600" * 1001) == "\U0001f600" * 500 + CUT + "\U0001f600" * 500
    assert shown_clipped(None) == "None"
    for ch in ("\\", "\u202e", "\u6f22", "e\u0301", "\U000e0041", "\x7f"):
        out = shown_clipped(ch * 5000)
        head, tail = out.split(CUT)
        assert len(head) <= 500 and len(tail) <= 500, ch
