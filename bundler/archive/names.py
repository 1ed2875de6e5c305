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


def name_problem(name: str) -> str | None:
    """Why ``name`` (without a trailing '/') cannot be a member name, or None."""
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
