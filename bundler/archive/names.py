"""The rules a member name of a bundle obeys, for the exporter and the reader alike.

The strict reader refuses an archive whose names break these rules (SPEC section 5);
the exporter checks every name it writes with the same functions, so that it refuses a
store that would give such a name (two check ids that differ only in case, scorer files
whose paths collide after NFC and case folding) instead of writing a bundle its own
verifier rejects.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import re
import unicodedata
from typing import Final

from bundler.archive import unicode14

MAX_NAME_BYTES: Final = 4096
MAX_SEGMENT_BYTES: Final = 255
# The most members a bundle may have (docs/format.md, "Reader caps"): three per exported
# case (its example body, its output, one evidence payload; cases that share them need
# fewer) for the 20,000 cases, and 5,536 more for everything else (directories, tag
# files, documents, scorer files, evidence manifests).
MAX_MEMBERS: Final = 2**16
# The most bytes (UTF-8, top directory included, no trailing '/') all member names of a
# bundle may take together (docs/format.md, "Reader caps"). The verifier keeps each
# file's name to compare it with manifest-sha256.txt, a document of at most 32 MiB that
# spells every data/ file's name plus 67 bytes: names beyond that could not all be listed.
MAX_NAMES_TOTAL_BYTES: Final = 32 * 1024 * 1024
# A name is remembered by a 16-byte BLAKE2b digest, never by its text, so what a member
# costs does not grow with its name. Two names with one digest read as one name: the
# member is refused, never let through, so a digest collision can only refuse.
NAME_KEY_BYTES: Final = 16
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
    if plain:
        return None
    unassigned = first_unassigned(name)
    if unassigned is not None:
        return f"U+{unassigned:04X} is not assigned in Unicode {unicode14.UNICODE_VERSION}"
    if not unicodedata.is_normalized("NFC", name):
        return "name is not NFC-normalised"
    return None


def first_unassigned(name: str) -> int | None:
    """The first code point of ``name`` not assigned in Unicode 14.0.0, or None.

    NFC and case folding are stable only for assigned characters: a code point assigned
    later may compose, reorder or fold differently in another Python or JavaScript engine.
    Refusing such names keeps every verifier's answer the same (docs/format.md).
    """
    # One scan at C speed settles nearly every name: a hostile bundle's 60,000 names of
    # 540 characters cost 12 s of CPU looked up a character at a time, and 2 s a distinct
    # character per name. Only when the scan finds one is the name walked, for the first.
    if _UNASSIGNED_OR_ASTRAL.search(name) is None:
        return None
    # Beyond the BMP, only the distinct characters there are looked up (one emoji in
    # each of 63,000 names: every distinct character of each name took 2 s).
    if _UNASSIGNED_BMP.search(name) is None and all(
        _assigned(ord(char)) for char in set(_ASTRAL.findall(name))
    ):
        return None
    return next(ord(char) for char in name if not _assigned(ord(char)))


def _unassigned_bmp_spans() -> str:
    """The ranges, for a character class, of the code points below U+10000 that
    ``_assigned`` refuses (the gaps between the table's ranges): such a class is matched
    by a bitmap; one of ranges beyond the BMP would be a linear walk, so characters there
    are looked up one by one."""
    gaps = []
    previous_end = -1
    for start, end in zip(unicode14.STARTS, unicode14.ENDS, strict=True):
        if start > 0xFFFF:
            break
        if start > previous_end + 1:
            gaps.append((previous_end + 1, start - 1))
        previous_end = end
    if previous_end < 0xFFFF:
        gaps.append((previous_end + 1, 0xFFFF))
    return "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in gaps)


_ASTRAL: Final = re.compile("[\\U00010000-\\U0010ffff]")
_UNASSIGNED_BMP_SPANS: Final = _unassigned_bmp_spans()
_UNASSIGNED_BMP: Final = re.compile(f"[{_UNASSIGNED_BMP_SPANS}]")
_UNASSIGNED_OR_ASTRAL: Final = re.compile(f"[{_UNASSIGNED_BMP_SPANS}\\U00010000-\\U0010ffff]")


@functools.lru_cache(maxsize=4096)
def _assigned(cp: int) -> bool:
    if cp <= unicode14.ENDS[0]:
        return True
    return cp <= unicode14.ENDS[bisect.bisect_right(unicode14.STARTS, cp) - 1]


def folded(name: str) -> str:
    """The form two names must not share: NFC after Unicode full case folding.

    For names ``name_problem`` accepts (assigned code points only) this is the same in
    every Python from 3.11 on; js/src/names.mjs folds with a table generated from it."""
    return name.lower() if name.isascii() else unicodedata.normalize("NFC", name.casefold())


def _key(text: str) -> bytes:
    return hashlib.blake2b(
        text.encode("utf-8", "surrogatepass"), digest_size=NAME_KEY_BYTES
    ).digest()


class MemberNames:
    """The member names of one bundle, counted as the reader and the exporter count them.

    The one place that decides whether a bundle may hold one more name: the name rules
    (``name_problem``), no name twice exactly or after NFC + case folding, at most
    ``MAX_MEMBERS`` members and ``MAX_NAMES_TOTAL_BYTES`` bytes of names in all. The
    strict reader asks it for every member it reads and the exporter's ``BagWriter`` for
    every member it writes, so the exporter refuses exactly what the reader refuses, in
    the same words.

    What it keeps per member, whatever the name's length: one dict entry from the 16-byte
    digest of the folded name to the 16-byte digest of the name and an 8-byte tag (two
    bytes objects of 49 and 57 bytes, about 150 bytes with the table), and for a
    directory one more 16-byte digest in a set (about 110 bytes). 65,536 members cost
    under 17 MB.
    """

    __slots__ = ("_dirs", "_max_members", "_max_total", "_seen", "members", "total_bytes")

    def __init__(
        self, *, max_members: int = MAX_MEMBERS, max_total_bytes: int = MAX_NAMES_TOTAL_BYTES
    ) -> None:
        self._max_members = max_members
        self._max_total = max_total_bytes
        self._seen: dict[bytes, bytes] = {}
        self._dirs: set[bytes] = set()
        self.members = 0
        self.total_bytes = 0

    def count_problem(self, name_bytes: int) -> str | None:
        """Why one more member of a name of ``name_bytes`` bytes is too many, or None."""
        if self.members >= self._max_members:
            return (
                f"more than max_members={self._max_members} members "
                "(the most a bundle holds, docs/format.md)"
            )
        if self.total_bytes + name_bytes > self._max_total:
            return (
                f"member names over {self._max_total} bytes in all "
                "(the most a bundle holds, docs/format.md)"
            )
        return None

    def claim(self, name: str, *, tag: int = 0, is_dir: bool = False) -> tuple[str, int] | None:
        """Record ``name`` (without a trailing '/'), or say why it cannot be recorded.

        Returns None when recorded, else (rule, tag of the earlier member it repeats or
        collides with, -1 if none). ``tag`` is kept with the name (the reader gives the
        header's offset), so a refusal can point at the earlier member.
        """
        problem = name_problem(name)
        if problem is not None:
            return problem, -1
        exact = _key(name)
        fold = folded(name)
        folded_key = exact if fold == name else _key(fold)
        seen = self._seen.get(folded_key)
        if seen is not None:
            earlier = int.from_bytes(seen[NAME_KEY_BYTES:], "big", signed=True)
            if seen[:NAME_KEY_BYTES] == exact:
                return "duplicate name", earlier
            return "collides with an earlier member after NFC and case folding", earlier
        size = len(name) if name.isascii() else len(name.encode("utf-8", "surrogatepass"))
        problem = self.count_problem(size)
        if problem is not None:
            return problem, -1
        self._seen[folded_key] = exact + tag.to_bytes(8, "big", signed=True)
        self.members += 1
        self.total_bytes += size
        if is_dir:
            self._dirs.add(exact)
        return None

    def tally(self, name_bytes: int) -> str | None:
        """Count a member whose name is checked elsewhere (a bag directory on disk, which
        the file system keeps unique): only the member and byte caps apply."""
        problem = self.count_problem(name_bytes)
        if problem is None:
            self.members += 1
            self.total_bytes += name_bytes
        return problem

    def has_directory(self, name: str) -> bool:
        """Whether ``name`` was claimed as a directory."""
        return _key(name) in self._dirs
