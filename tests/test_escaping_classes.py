"""One escaping rule (SPEC 5) for console, Markdown and page, over the whole of each class.

Every code point of every class SPEC 5 names as invisible (categories Cc, Cf, Co, Cs, Cn,
Zl, Zp; variation selectors U+FE00-U+FE0F and U+E0100-U+E01EF; tag characters
U+E0000-U+E007F; the Hangul and Braille blanks) is escaped by ``shown``; none of them
reaches the console text, a Markdown cell or the auditor's page raw; and ``hidden``, the
one function all three ask, says so for each. Not a sample: each class in full.
"""

from __future__ import annotations

import html
import sys
import unicodedata

import pytest
import records

from bundler.core.textsafe import hidden, shown, shown_md
from bundler.report.page import render_record

CATEGORIES = ("Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp")
RANGES = {
    "variation selectors": range(0xFE00, 0xFE0F + 1),
    "variation selectors supplement": range(0xE0100, 0xE01EF + 1),
    "tags": range(0xE0000, 0xE007F + 1),
    "Hangul blanks": [0x115F, 0x1160, 0x3164, 0xFFA0],
    "Braille blank": [0x2800],
}
_BY_CATEGORY: dict[str, list[int]] = {c: [] for c in CATEGORIES}
for _code in range(sys.maxunicode + 1):
    _cat = unicodedata.category(chr(_code))
    if _cat in _BY_CATEGORY:
        _BY_CATEGORY[_cat].append(_code)
CLASSES: dict[str, list[int]] = {**_BY_CATEGORY, **{k: list(v) for k, v in RANGES.items()}}


def _escape_of(code: int) -> str:
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_every_code_point_of_the_class_is_escaped(name: str) -> None:
    codes = CLASSES[name]
    assert codes, name
    text = "".join(chr(c) for c in codes)
    assert shown(text) == "".join(_escape_of(c) for c in codes), name
    assert shown("a" + text[:64] + "b") == "a" + shown(text[:64]) + "b"
    assert all(hidden(chr(c)) for c in codes[:: max(1, len(codes) // 4096)]), name


def _text_of_class(name: str) -> str:
    # Surrogates cannot be encoded in a page or a record; shown still escapes them (above).
    return "".join(chr(c) for c in CLASSES[name] if not 0xD800 <= c <= 0xDFFF)


@pytest.mark.parametrize("name", sorted(set(CLASSES) - {"Cs"}))
def test_no_member_reaches_markdown_or_the_page_raw(name: str) -> None:
    text = _text_of_class(name)
    for out in (shown(text), shown_md(text)):
        assert not any(hidden(ch) for ch in out if ch != "\\"), name
    record = records.verification()
    record["claims"][2]["detail"] = text
    record["envelope"]["reason"] = "rpt-clean" + text[:64]  # a successor is an identifier
    page = render_record(record)[1].decode("utf-8")
    raw = set(page) & set(text)
    assert not raw - {"\n"}, (name, sorted(hex(ord(c)) for c in raw)[:5])
    visible = html.unescape(page)
    assert shown(text) in visible
    assert "rpt-clean" + shown(text[:64]) in visible


def test_ordinary_letters_marks_and_symbols_are_not_escaped() -> None:
    """The rule escapes only its classes: every assigned letter, mark, number,
    punctuation and symbol (but the listed blanks and selectors) draws itself."""
    # Default-ignorable marks that draw nothing: the combining grapheme joiner, the Khmer
    # inherent vowels and the Mongolian variation selectors.
    blank_marks = {0x34F, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F}
    listed = {c for name in RANGES for c in RANGES[name]} | blank_marks
    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        cat = unicodedata.category(ch)
        if cat[0] in "LMNPS" and code not in listed and ch != "\\":
            assert not hidden(ch), hex(code)
