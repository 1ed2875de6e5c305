"""One escaping function for every untrusted string printed for a person (SPEC section 5).

Text that comes from a bundle, a store, a run directory or a proof file may hold control
characters, ESC sequences, carriage returns, bidirectional controls or invisible
characters that would redraw a terminal or forge a line in a Markdown report. ``shown``
writes each such character as a visible escape (``\\x1b``, ``\\r``, ``\\u202e``), and a
backslash as ``\\\\`` so an escape in the input cannot pass for one we wrote. Every human
rendering (console and Markdown) passes untrusted text through it; JSON output keeps the
exact string (JSON itself escapes control characters).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

# Categories never shown as themselves: controls (Cc), format characters such as the
# bidirectional controls and zero-width joiners (Cf), line and paragraph separators (Zl,
# Zp), surrogates (Cs), private use (Co) and unassigned code points (Cn).
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
# Spaces other than the ordinary one look like one and can hide text alignment tricks.
# (Unicode category Zs less U+0020; a test keeps this list equal to the category.)
_ODD_SPACES = frozenset(
    "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u202f\u205f\u3000"
)
# Fast path: printable ASCII without a backslash needs no escaping.
_PLAIN = re.compile(r"[\x20-\x5b\x5d-\x7e]*")


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
    return unicodedata.category(ch) in _HIDDEN_CATEGORIES or ch in _ODD_SPACES


def shown(value: Any) -> str:
    """``value`` as text safe to print: every invisible or controlling character escaped."""
    text = value if isinstance(value, str) else str(value)
    if _PLAIN.fullmatch(text):
        return text
    return "".join(_escape(ch) if _hidden(ch) else ch for ch in text)


def shown_md(value: Any) -> str:
    """``shown`` for a Markdown table cell or inline text: also neutralises ``|``, ``<``,
    backticks and the characters that start emphasis or links, so a value cannot close
    the cell, open an HTML tag or forge formatting."""
    text = shown(value)
    out = []
    for ch in text:
        if ch in "|`*_[]<>#!":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)
