"""One escaping function for every untrusted string printed for a person (SPEC section 5).

Text that comes from a bundle, a store, a run directory or a proof file may hold control
characters, ESC sequences, carriage returns, bidirectional controls or invisible
characters that would redraw a terminal or forge a line in a Markdown report. ``shown``
writes each such character as a visible escape (``\\x1b``, ``\\r``, ``\\u202e``), and a
backslash as ``\\\\`` so an escape in the input cannot pass for one we wrote. Every human
rendering (console and Markdown) passes untrusted text through it; JSON output keeps the
exact string (JSON itself escapes control characters).

What ``shown`` returns holds only characters that draw themselves: printable ASCII, and
non-ASCII letters, marks, digits, punctuation and symbols (accents, CJK, emoji stay as
they are). Never a newline, so a value cannot start a line of its own.
"""

from __future__ import annotations

import functools
import re
import shlex
import unicodedata
from typing import Any

# Categories never shown as themselves: controls (Cc: C0, DEL, C1), format characters
# such as the bidirectional controls, zero-width joiners, soft hyphen and tag characters
# (Cf), line and paragraph separators (Zl, Zp), surrogates (Cs: what surrogateescape
# makes of undecodable file names), private use (Co) and unassigned code points (Cn).
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
# Spaces other than the ordinary one look like one and can hide text alignment tricks.
# (Unicode category Zs less U+0020; a test keeps this list equal to the category.)
_ODD_SPACES = frozenset(
    "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u202f\u205f\u3000"
)
# Default-ignorable code points outside those categories, which draw nothing (Hangul
# fillers, the combining grapheme joiner, Khmer inherent vowels, Mongolian variation
# selectors), and the blank Braille cell, which draws as a space.
_BLANK = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u2800\u3164\uffa0")
# Variation selectors (SPEC 5): they draw nothing, so "rpt-clean" followed by one reads as
# "rpt-clean" while it is another id. Tag characters U+E0000-U+E007F are Cf or Cn above.
# (U+FE00-U+FE0F and U+E0100-U+E01EF, compared in ``_hidden``.)
# Fast path: printable ASCII without a backslash needs no escaping.
_PLAIN = re.compile(r"[\x20-\x5b\x5d-\x7e]*")
# Characters with a meaning in inline Markdown (CommonMark and GFM): backslash escapes,
# emphasis, code spans, links and images, autolinks and inline HTML, entity references
# (``&#x202e;`` would decode to the very control ``shown`` escaped), strikethrough, table
# cells, ATX heading closers. CommonMark lets any ASCII punctuation be backslash-escaped.
_MD_SPECIAL = frozenset("\\`*_{}[]()#!|<>&~")
_MD_ANY = re.compile("[" + re.escape("".join(sorted(_MD_SPECIAL))) + "]")
# What ``shown_md`` escapes: every special character, an underscore only when it does
# not stand between two letters or digits (``[^\W_]`` is what ``str.isalnum`` accepts).
_MD_REPLACED = sorted(_MD_SPECIAL - {"_", "\\"})
# An escaped underscore between two letters or digits (the literal first: searched for
# at C speed, the neighbours looked at only where it stands).
_MD_INNER_UNDERSCORE = re.compile(r"\\_(?=[^\W_])(?<=[^\W_]\\_)")


def _escape(ch: str) -> str:
    if ch == "\\":
        return "\\\\"
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _hidden(ch: str) -> bool:
    if ch == "\\":
        return True
    if " " <= ch <= "~":
        return False
    if ch in _ODD_SPACES or ch in _BLANK:
        return True
    code = ord(ch)
    if 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF:
        return True
    return unicodedata.category(ch) in _HIDDEN_CATEGORIES


def hidden(ch: str) -> bool:
    """Whether ``shown`` writes the one character ``ch`` as an escape (SPEC 5's classes:
    controls, format characters, surrogates, private use, unassigned code points, line and
    paragraph separators, spaces other than U+0020, variation selectors, tag characters,
    the Hangul and Braille blanks), or doubles it (the backslash)."""
    return _hidden(ch)


def shell_word(value: str) -> str | None:
    """``value`` as one POSIX shell word that ``shlex.split`` reads back as ``value``, for
    a command shown to be copied; None when ``value`` holds a character ``shown`` would
    escape (other than a backslash), which no page can show both visibly and literally.

    The word is not passed through ``shown``: a backslash inside single quotes is
    literal, and doubling it would name another file.
    """
    if any(_hidden(ch) for ch in value if ch != "\\"):
        return None
    return shlex.quote(value)


def shown(value: Any) -> str:
    """``value`` as text safe to print: every invisible or controlling character escaped.

    Non-strings are converted with ``str`` first. The result is one line of characters
    that each draw themselves; ``\\`` is doubled so input cannot imitate an escape.
    """
    text = value if isinstance(value, str) else str(value)
    if _PLAIN.fullmatch(text):
        return text
    if len(text) < 64:  # not worth the class _maybe_hidden makes once (60 ms)
        return "".join(map(_shown_char, text))
    # A longer text in one pass at C speed, a call made only for each character that may
    # need an escape: a hostile bundle's 122,000 claims naming 540-byte non-ASCII names
    # took 14 s to write as verification.md walked a character at a time.
    return _maybe_hidden().sub(_escaped_match, text)


# A line of the console summary shows at most this many characters of one untrusted
# text (a claim's subject, detail, path, expected or observed; an error), counted as
# shown, escapes included: the first and the last half of them, cut between whole
# characters and escapes, so that a message's rule, which follows the names it quotes,
# is still read. A listed ref of a million characters made one line of 3 MB, and 300 tag
# characters 3,000 characters of escapes. The record (--json) and verification.md keep
# it whole. The Node verifier cuts the same way (js/src/textsafe.mjs).
CONSOLE_CHARS = 1000
CUT = " ... (cut: --json gives it whole) ... "


def shown_clipped(value: Any) -> str:
    """``shown(value)`` if it is at most ``CONSOLE_CHARS`` characters; else its first
    and last ``CONSOLE_CHARS // 2``, with ``CUT`` between them."""
    text = value if isinstance(value, str) else str(value)
    head: list[str] = []
    size = 0
    for ch in text:
        piece = _shown_char(ch)
        size += len(piece)
        if size > CONSOLE_CHARS:
            break
        head.append(piece)
    else:
        return "".join(head)
    half = CONSOLE_CHARS // 2
    kept, size = 0, 0
    while kept < len(head) and size + len(head[kept]) <= half:
        size += len(head[kept])
        kept += 1
    tail: list[str] = []
    size = 0
    for index in range(len(text) - 1, kept - 1, -1):
        piece = _shown_char(text[index])
        size += len(piece)
        if size > half:
            break
        tail.append(piece)
    return "".join(head[:kept]) + CUT + "".join(reversed(tail))


def _shown_char(ch: str) -> str:
    return _escape(ch) if _hidden(ch) else ch


def _escaped_match(match: re.Match[str]) -> str:
    return _shown_char(match.group())


@functools.cache
def _maybe_hidden() -> re.Pattern[str]:
    """A class of every character below U+10000 that ``_hidden`` escapes (matched by a
    bitmap), and of every one above (asked one by one: a class of ranges beyond the BMP
    is matched by a linear walk). Made at the first text that is not plain ASCII."""
    spans = []
    start = None
    for code in range(0x10001):
        hid = code < 0x10000 and _hidden(chr(code))
        if hid and start is None:
            start = code
        elif not hid and start is not None:
            spans.append(f"\\U{start:08x}-\\U{code - 1:08x}")
            start = None
    return re.compile("[" + "".join(spans) + "\\U00010000-\\U0010ffff]")


def shown_md(value: Any) -> str:
    """``shown`` for Markdown inline text or a table cell, never inside a code span.

    Also backslash-escapes every character with an inline Markdown meaning (``|``, ``<``,
    ``&``, backticks, emphasis and link characters, and the backslashes of ``shown``'s
    own escapes), so a value cannot close the cell, open an HTML tag, decode an entity or
    forge formatting, and the rendered page reads exactly as the console does. An
    underscore between two letters or digits stays (``missing_from_store``): CommonMark
    never reads it as emphasis.
    """
    text = shown(value)
    if _MD_ANY.search(text) is None:  # most texts: nothing to escape
        return text
    # Every step at C speed (a replacement naming the match ran Python code for each:
    # 60 s for the verification.md of names made of these characters; a translate table
    # of two-character values, 11 s). An escape goes before its character, so each
    # underscore keeps its neighbours; the one between two letters or digits is unescaped.
    text = text.replace("\\", "\\\\")  # first: the escapes below add backslashes
    for ch in _MD_REPLACED:
        if ch in text:
            text = text.replace(ch, "\\" + ch)
    if "_" not in text:
        return text
    return _MD_INNER_UNDERSCORE.sub("_", text.replace("_", "\\_"))


def quoted(value: Any) -> str:
    """A value as a message quotes it, for ``shown`` to escape once on the way out: a
    string in single quotes with its characters as they are (``repr`` would escape a
    control once and ``shown`` again: ``\\\\n``); lists and objects likewise, item by
    item; other values as ``repr`` writes them."""
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(quoted(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{quoted(k)}: {quoted(v)}" for k, v in value.items()) + "}"
    return repr(value)
