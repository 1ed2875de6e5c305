"""BagIt 1.0 tag files (RFC 8493) with SHA-256 manifests: building and strict parsing."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from bundler.core.errors import ArchiveError

BAGIT_TXT = b"BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n"
MANIFEST = "manifest-sha256.txt"
TAG_MANIFEST = "tagmanifest-sha256.txt"
BAG_INFO = "bag-info.txt"
BAGIT = "bagit.txt"
# A manifest path neither starts nor ends with a space character. The set is written out,
# not taken from a regex engine's \s (Python's and JavaScript's differ: U+001C-U+001F and
# U+0085 against U+FEFF), so both verifiers read every line alike (js/src/bagit.mjs).
_SPACE = "\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_LINE_RE = re.compile(rf"\A([0-9a-f]{{64}})  ([^{_SPACE}](?:.*[^{_SPACE}])?)\Z", re.DOTALL)
_INFO_RE = re.compile(r"\A([A-Za-z0-9][A-Za-z0-9-]*): (.*)\Z")


def manifest(entries: Mapping[str, str]) -> bytes:
    """``<hex>  <path>`` lines sorted by path (byte order), LF-terminated."""
    lines = [f"{entries[p]}  {p}\n" for p in sorted(entries, key=lambda p: p.encode("utf-8"))]
    return "".join(lines).encode("utf-8")


def bag_info(fields: Sequence[tuple[str, str]]) -> bytes:
    return "".join(f"{k}: {v}\n" for k, v in fields).encode("utf-8")


def payload_oxum(total_bytes: int, file_count: int) -> str:
    return f"{total_bytes}.{file_count}"


def parse_manifest(data: bytes, *, source: str) -> dict[str, str]:
    """path -> hex; rejects anything but sorted-agnostic, unique, well-formed LF lines."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ArchiveError(f"{source}: not UTF-8") from exc
    if text and not text.endswith("\n"):
        raise ArchiveError(f"{source}: last line is not LF-terminated")
    entries: dict[str, str] = {}
    for number, line in enumerate(text.split("\n")[:-1], start=1):
        match = _LINE_RE.match(line)
        if match is None:
            raise ArchiveError(f"{source}:{number}: not '<64 lowercase hex>  <path>'")
        hex_digest, path = match.groups()
        if path in entries:
            raise ArchiveError(f"{source}:{number}: {path} listed twice")
        entries[path] = hex_digest
    return entries


def parse_bag_info(data: bytes, *, source: str) -> dict[str, str]:
    """Label -> value (labels unique; no continuation lines, which we never write)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ArchiveError(f"{source}: not UTF-8") from exc
    fields: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = _INFO_RE.match(line)
        if match is None:
            raise ArchiveError(f"{source}:{number}: not 'Label: value'")
        if match.group(1) in fields:
            raise ArchiveError(f"{source}:{number}: {match.group(1)} given twice")
        fields[match.group(1)] = match.group(2)
    return fields
