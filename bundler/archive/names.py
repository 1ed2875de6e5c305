"""The rules a member name of a bundle obeys, for the exporter and the reader alike.

The strict reader refuses an archive whose names break these rules (SPEC section 5);
the exporter checks every name it writes with the same functions, so that it refuses a
store that would give such a name (two check ids that differ only in case, scorer files
whose paths collide after NFC and case folding) instead of writing a bundle its own
verifier rejects.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

MAX_NAME_BYTES: Final = 4096
MAX_SEGMENT_BYTES: Final = 255
CONTROL_RE: Final = re.compile("[\x00-\x1f\x7f]")


# A name of segments of 1 to 255 of these ASCII characters, none of them "." or "..",
# breaks none of the rules below: one match settles it. Export writes nearly every name
# in this form; any other name takes the full checks (tests/test_names.py holds the two
# to the same answer).
_PLAIN_SEGMENT: Final = r"(?!\.\.?(?:/|\Z))[A-Za-z0-9._+=@,~-]{1,255}"
_PLAIN_NAME: Final = re.compile(rf"{_PLAIN_SEGMENT}(?:/{_PLAIN_SEGMENT})*")


def name_problem(name: str) -> str | None:
    """Why ``name`` (without a trailing '/') cannot be a member name, or None."""
    if len(name) <= MAX_NAME_BYTES and _PLAIN_NAME.fullmatch(name) is not None:
        return None
    return _full_name_problem(name)


def _full_name_problem(name: str) -> str | None:
    raw = name.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_NAME_BYTES:
        return f"name longer than {MAX_NAME_BYTES} bytes"
    if name.startswith("/"):
        return "absolute path"
    if "\\" in name:
        return "backslash in name"
    if CONTROL_RE.search(name) is not None:
        return "control character in name"
    plain = name.isascii()
    for segment in name.split("/"):
        if segment == "":
            return "empty path segment"
        if segment in (".", ".."):
            return f"{segment!r} path segment"
        if (len(segment) if plain else len(segment.encode("utf-8"))) > MAX_SEGMENT_BYTES:
            return f"path segment longer than {MAX_SEGMENT_BYTES} bytes"
    if not plain and not unicodedata.is_normalized("NFC", name):
        return "name is not NFC-normalised"
    return None


def folded(name: str) -> str:
    """The form two names must not share: NFC after Unicode case folding."""
    return name.lower() if name.isascii() else unicodedata.normalize("NFC", name.casefold())
