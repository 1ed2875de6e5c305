"""The strict archive reader: well-formed bundles round-trip, hostile ones are refused."""

from __future__ import annotations

import io
import itertools
import json
import os
import random
import subprocess
import sys
import tarfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import hostile
import pytest
import zstandard

from bundler.archive import reader as archive_reader
from bundler.archive import zstdframe
from bundler.archive.reader import CHUNK_BYTES, MAX_PAX_BYTES, Member, iter_archive, iter_members
from bundler.archive.zstdframe import ZstdStream
from bundler.core.errors import ArchiveError, InputError
from bundler.core.limits import DEFAULT_MAX_BYTES
from bundler.core.textsafe import quoted, shown

SOURCE = "evil.tar.zst"
TOP = "evalbook-bundle-r1"
REPO = Path(__file__).resolve().parent.parent


# The most one decompressor call may produce: a batch of full-size zstd blocks.
FEED_MAX = zstdframe._BLOCKS_PER_FEED * 128 * 1024


def read_all(
    data: bytes, *, compressed: bool = True, max_bytes: int = DEFAULT_MAX_BYTES
) -> list[tuple[Member, bytes]]:
    """Iterate a whole archive, draining every member."""
    stream = io.BytesIO(data)
    members = (
        iter_archive(stream, source=SOURCE, max_bytes=max_bytes)
        if compressed
        else iter_members(stream, source=SOURCE, max_bytes=max_bytes)
    )
    return [(member, b"".join(content)) for member, content in members]


def drain_all(data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
    """Iterate a whole compressed archive, reading and dropping every chunk."""
    for _, content in iter_archive(io.BytesIO(data), source=SOURCE, max_bytes=max_bytes):
        for _ in content:
            pass


def refused(data: bytes, *fragments: str, frame: bool = False, **kw: int) -> str:
    """Assert reading ``data`` raises ArchiveError naming the source and each fragment.

    ``data`` is a tar that gets compressed, or with ``frame`` the compressed archive.
    """
    with pytest.raises(ArchiveError) as info:
        drain_all(data if frame else hostile.zstd(data), **kw)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{SOURCE}: "), message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


def refused_zstd(frame: bytes, *fragments: str, **kw: int) -> str:
    """As `refused`, for bytes that are already the compressed archive."""
    return refused(frame, *fragments, frame=True, **kw)


def bundle_tar(*members: bytes) -> bytes:
    """The top directory, then ``members``, then the end marker."""
    return hostile.tar([hostile.dir_member(TOP), *members])


# ------------------------------------------------------------------------ well-formed


LONG_NAME = f"{TOP}/data/scorers/" + "s" * 120 + "/1/files/" + "f" * 60 + ".py"
BIG = random.Random(20251130).randbytes(5_000_000)
WELL_FORMED: list[tuple[str, bytes | None]] = [
    (TOP, None),
    (f"{TOP}/bagit.txt", b"BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n"),
    (f"{TOP}/data", None),
    (f"{TOP}/data/bundle.json", b'{"schema":"evalbook.reproducibility_bundle.v1"}'),
    (f"{TOP}/data/empty", b""),
    (f"{TOP}/data/r\u00e9sum\u00e9.txt", "caf\u00e9\n".encode()),
    (f"{TOP}/data/scorers", None),
    (f"{TOP}/data/scorers/" + "s" * 120, None),
    (f"{TOP}/data/scorers/" + "s" * 120 + "/1", None),
    (f"{TOP}/data/scorers/" + "s" * 120 + "/1/files", None),
    (LONG_NAME, b"print('long')\n"),
    (f"{TOP}/data/big.bin", BIG),
    (f"{TOP}/data/exact-block", bytes(range(256)) * 2),
]


def check_round_trip(result: list[tuple[Member, bytes]]) -> None:
    assert [m.path for m, _ in result] == [name for name, _ in WELL_FORMED]
    for (member, content), (_, expected) in zip(result, WELL_FORMED, strict=True):
        assert member.is_dir == (expected is None)
        assert member.mtime == hostile.MTIME
        if expected is None:
            assert (member.size, member.mode, content) == (0, 0o755, b"")
        else:
            assert (member.size, member.mode) == (len(expected), 0o644)
            assert content == expected


@pytest.mark.parametrize("level", [1, 19])
def test_tarfile_pax_archive_round_trips(level: int) -> None:
    raw = hostile.tar_with_tarfile(WELL_FORMED)
    assert b"path=" + LONG_NAME.encode() in raw  # the long name really needs a pax record
    check_round_trip(read_all(hostile.zstd(raw, level=level)))


def test_own_builder_archive_round_trips_uncompressed() -> None:
    members = []
    for name, data in WELL_FORMED:
        pax = [("path", name + ("/" if data is None else ""))]
        if data is None:
            members.append(hostile.pax_member(pax) + hostile.dir_member("x"))
        else:
            members.append(hostile.pax_member(pax) + hostile.file_member("x", data))
    check_round_trip(read_all(hostile.tar(members), compressed=False))


def test_ustar_prefix_names_are_joined() -> None:
    raw = hostile.tar_with_tarfile(WELL_FORMED, fmt=tarfile.USTAR_FORMAT)
    assert b"path=" not in raw  # no pax records: long names live in prefix + name
    assert LONG_NAME.encode() not in raw  # split between the prefix and name fields
    check_round_trip(read_all(hostile.zstd(raw)))


def test_pax_mtime_with_fraction_and_ignored_keys() -> None:
    data = bundle_tar(
        hostile.pax_member([("mtime", "1700000000.75"), ("atime", "1"), ("comment", "hi")])
        + hostile.file_member(f"{TOP}/a", b"x")
    )
    ((_, _), (member, content)) = read_all(data, compressed=False)
    assert (member.mtime, content) == (1700000000, b"x")


def test_single_segment_frame_with_content_size_is_accepted() -> None:
    raw = hostile.tar_with_tarfile(WELL_FORMED[:6])
    frame = zstandard.ZstdCompressor(level=3, write_checksum=True).compress(raw)
    assert frame[4] & 0x20  # single-segment flag
    assert [m.path for m, _ in read_all(frame)] == [n for n, _ in WELL_FORMED[:6]]


def test_undrained_content_is_skipped_and_stale_iterators_refuse() -> None:
    raw = hostile.zstd(hostile.tar_with_tarfile(WELL_FORMED))
    seen = []
    stale = None
    for member, content in iter_archive(io.BytesIO(raw), source=SOURCE):
        seen.append(member.path)
        if member.path.endswith("big.bin"):
            first = next(content)
            assert first == BIG[: len(first)] and 0 < len(first) <= CHUNK_BYTES
            stale = content
        elif member.path.endswith("exact-block"):
            assert b"".join(content) == bytes(range(256)) * 2
    assert seen == [name for name, _ in WELL_FORMED]
    assert stale is not None
    with pytest.raises(RuntimeError, match="after advancing"):
        next(stale)


def test_content_comes_in_bounded_chunks() -> None:
    raw = hostile.zstd(hostile.tar_with_tarfile(WELL_FORMED))
    for member, content in iter_archive(io.BytesIO(raw), source=SOURCE):
        sizes = [len(chunk) for chunk in content]
        assert all(0 < s <= CHUNK_BYTES for s in sizes)
        assert sum(sizes) == member.size


def test_zstd_stream_reads_exact_bytes() -> None:
    payload = BIG[:700_000] + bytes(900_000)
    stream = ZstdStream(io.BytesIO(hostile.zstd(payload, level=19)), source=SOURCE)
    out = bytearray()
    while chunk := stream.read(50_000):
        assert len(chunk) <= 50_000
        out += chunk
    assert bytes(out) == payload and stream.bytes_out == len(payload)
    assert stream.read(10) == b""


def test_archive_error_is_an_input_error() -> None:
    assert issubclass(ArchiveError, InputError) and ArchiveError.exit_code == 3


# -------------------------------------------------------------------- hostile: names


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        (f"{TOP}/../x", "'..' path segment"),
        (f"{TOP}/a/../../x", "'..' path segment"),
        (f"/{TOP}/x", "absolute path"),
        (f"{TOP}/a\\..\\x", "backslash"),
        (f"{TOP}//x", "empty path segment"),
        (f"{TOP}/./x", "'.' path segment"),
        (f"{TOP}/e\u0301.txt", "not NFC"),
        (f"{TOP}/a\x1b[2Jb", "control character"),
        ("elsewhere/x", "outside the top-level directory"),
        (TOP + "x", "outside the top-level directory"),
        (f"{TOP}/missing/x", "parent directory"),
        (f"{TOP}/x/", "regular file name ends with '/'"),
        (f"{TOP}/" + "n" * 256, "segment longer than 255"),
    ],
)
def test_bad_names_are_refused(name: str, rule: str) -> None:
    pax = hostile.pax_member([("path", name)])
    message = refused(bundle_tar(pax + hostile.file_member("x", b"data")), rule)
    # Names the member as it is; shown() escapes it once, where the message is shown
    # (repr escaped it in the message too, and a control came out as \\x1b).
    assert quoted(name) in message
    if "\x1b" in name:
        assert "\\x1b" in shown(message) and "\\\\x1b" not in shown(message)


def test_name_not_utf8_is_refused() -> None:
    refused(bundle_tar(hostile.file_member(TOP.encode() + b"/\xff", b"")), "not UTF-8", "\\xff")


def test_nul_in_pax_path_is_refused() -> None:
    pax = hostile.pax_member([("path", f"{TOP}/a\0b")])
    refused(bundle_tar(pax + hostile.file_member("x", b"")), "NUL byte in name")


def test_name_field_with_bytes_after_nul_is_refused() -> None:
    raw = (TOP + "/a").encode() + b"\0hidden"
    refused(bundle_tar(hostile.file_member(raw, b"")), "after the NUL in the name")


def test_first_member_must_be_the_top_directory() -> None:
    refused(hostile.tar([hostile.file_member("a.txt", b"x")]), "'a.txt'", "first member")
    refused(
        hostile.tar([hostile.dir_member("a"), hostile.dir_member("a/b"), hostile.dir_member("c")]),
        "'c'",
        "outside the top-level directory 'a'",
    )


@pytest.mark.parametrize(
    ("first", "second", "rule"),
    [
        (
            hostile.file_member(f"{TOP}/README", b"a"),
            hostile.file_member(f"{TOP}/readme", b"b"),
            "collides with an earlier member after NFC and case folding "
            "(the member whose header is at offset 512)",
        ),
        (
            hostile.file_member(f"{TOP}/a", b"one"),
            hostile.file_member(f"{TOP}/a", b"two"),
            "duplicate name",
        ),
        (hostile.dir_member(f"{TOP}/Data"), hostile.file_member(f"{TOP}/data", b"x"), "collides"),
        (
            hostile.file_member(f"{TOP}/data", b"x"),
            hostile.dir_member(f"{TOP}/data"),
            "duplicate name",
        ),
        (
            hostile.file_member(f"{TOP}/stra\u00dfe", b"x"),
            hostile.file_member(f"{TOP}/STRASSE", b"y"),
            "collides",
        ),
        (
            hostile.file_member(f"{TOP}/\u00c5", b"x"),
            hostile.file_member(f"{TOP}/\u00e5", b"y"),
            "collides",
        ),
    ],
)
def test_duplicate_and_colliding_names_are_refused(first: bytes, second: bytes, rule: str) -> None:
    refused(bundle_tar(first, second), rule, f"header at offset {512 + len(first)}")


def test_a_file_is_not_a_parent_directory() -> None:
    refused(
        bundle_tar(hostile.file_member(f"{TOP}/a", b"x"), hostile.file_member(f"{TOP}/a/b", b"y")),
        f"'{TOP}/a/b'",
        "parent directory",
    )


# --------------------------------------------------------------- hostile: member types


@pytest.mark.parametrize(
    ("typeflag", "rule"),
    [
        (b"1", "hard link"),
        (b"2", "symbolic link"),
        (b"3", "character device"),
        (b"4", "block device"),
        (b"6", "FIFO"),
        (b"7", "contiguous file"),
        (b"g", "pax global header"),
        (b"L", "GNU long name"),
        (b"K", "GNU long link name"),
        (b"S", "GNU sparse member"),
        (b"V", "GNU volume header"),
        (b"Z", "unknown member type b'Z'"),
        (b"A", "unknown member type b'A'"),
    ],
)
def test_member_types_other_than_file_and_directory_are_refused(typeflag: bytes, rule: str) -> None:
    member = hostile.header(f"{TOP}/thing", typeflag=typeflag, linkname="/etc/passwd")
    refused(bundle_tar(member), f"'{TOP}/thing'", "offset 512", rule)


def test_symlink_then_file_written_through_it_stops_at_the_symlink() -> None:
    link = hostile.header(f"{TOP}/link", typeflag=b"2", linkname="/etc")
    through = hostile.file_member(f"{TOP}/link/passwd", b"root::0:0::/:/bin/sh\n")
    message = refused(bundle_tar(link, through), f"'{TOP}/link'", "symbolic link")
    assert "passwd" not in message


def test_directory_with_data_is_refused() -> None:
    block = hostile.header(f"{TOP}/d/", typeflag=b"5", size=10) + hostile.pad(b"0123456789")
    refused(bundle_tar(block), f"'{TOP}/d/'", "directory with 10 bytes of data")


def test_pax_global_header_is_refused() -> None:
    glob = hostile.pax_member([("path", f"{TOP}/x")], typeflag=b"g")
    refused(bundle_tar(glob, hostile.file_member(f"{TOP}/a", b"")), "pax global header")


def test_gnu_long_name_from_tarfile_is_refused() -> None:
    gnu = hostile.tar_with_tarfile([(LONG_NAME, b"x")], fmt=tarfile.GNU_FORMAT)
    assert gnu[156:157] == b"L"
    refused(hostile.dir_member(TOP) + gnu, "GNU long name record", "offset 512")


def test_gnu_magic_is_refused() -> None:
    raw = hostile.tar_with_tarfile([(TOP, None)], fmt=tarfile.GNU_FORMAT)
    refused(raw, f"member '{TOP}/' (header at offset 0)", "not a POSIX ustar header")


def test_link_name_on_a_regular_file_is_refused() -> None:
    refused(
        bundle_tar(hostile.file_member(f"{TOP}/a", b"", linkname="/etc/passwd")),
        "link name set on a non-link member",
    )


# ------------------------------------------------------------------ hostile: pax records


def test_pax_path_override_to_parent_is_refused() -> None:
    pax = hostile.pax_member([("path", "../x")])
    refused(bundle_tar(pax + hostile.file_member(f"{TOP}/ok", b"x")), "'../x'", "'..' path segment")


def test_huge_pax_header_is_refused_before_reading_it() -> None:
    pax = hostile.header("././@PaxHeader", typeflag=b"x", size=1 << 30)
    refused(bundle_tar(pax), "offset 512", "oversize pax record")
    big = hostile.pax_member([("comment", "c" * MAX_PAX_BYTES)])
    refused(bundle_tar(big + hostile.file_member(f"{TOP}/a", b"")), "oversize pax record")


def test_pax_size_disagreeing_with_header_is_refused() -> None:
    pax = hostile.pax_member([("size", "99999999999")])
    refused(
        bundle_tar(pax + hostile.file_member(f"{TOP}/a", b"abc")),
        f"'{TOP}/a'",
        "pax size 99999999999 disagrees with header size 3",
    )


@pytest.mark.parametrize(
    "records",
    [
        [
            ("GNU.sparse.major", "1"),
            ("GNU.sparse.minor", "0"),
            ("GNU.sparse.name", f"{TOP}/a"),
            ("GNU.sparse.realsize", "1000000"),
        ],
        [
            ("GNU.sparse.size", "1000000"),
            ("GNU.sparse.numblocks", "1"),
            ("GNU.sparse.offset", "0"),
            ("GNU.sparse.numbytes", "1"),
        ],
    ],
)
def test_pax_sparse_member_is_refused(records: list[tuple[str, str]]) -> None:
    pax = hostile.pax_member(records)
    refused(bundle_tar(pax + hostile.file_member(f"{TOP}/a", b"x")), "sparse member", "offset 512")


@pytest.mark.parametrize(
    ("data", "rule"),
    [
        (b"30 path=evalbook-bundle-r1/a\n", "length does not match"),
        (b"99 path=x\n", "length does not match"),
        (b"10 path=xy", "length does not match"),
        (b"010 path=x\n", "malformed pax record"),
        (b"x path=y\n", "malformed pax record"),
        (b"12 path:xyz\n", "malformed pax record"),
        (b"9 =value\n", "malformed pax record"),
        (hostile.pax_record("path", "a") + hostile.pax_record("path", "b"), "duplicate pax key"),
        (hostile.pax_record("linkpath", "/etc"), "unsupported pax key 'linkpath'"),
        (hostile.pax_record("hdrcharset", "BINARY"), "unsupported pax key 'hdrcharset'"),
        (hostile.pax_record("uname", "root"), "unsupported pax key 'uname'"),
        (hostile.pax_record("path", ""), "empty pax path record"),
        (hostile.pax_record("size", "-1"), "pax size is not a decimal number"),
        (hostile.pax_record("mtime", "1e9"), "pax mtime is not a number"),
        (hostile.pax_record("path", "ok") + b"\0\0", "malformed pax record"),
    ],
)
def test_malformed_pax_records_are_refused(data: bytes, rule: str) -> None:
    pax = hostile.pax_member(data)
    refused(bundle_tar(pax + hostile.file_member(f"{TOP}/a", b"x")), "offset 512", rule)


def test_pax_header_must_precede_a_member() -> None:
    pax = hostile.pax_member([("path", f"{TOP}/a")])
    refused(bundle_tar(pax), "offset 512", "pax header not followed by a member")
    refused(bundle_tar(pax + pax + hostile.file_member("x")), "pax header follows another")


# --------------------------------------------------------------- hostile: header fields


def test_base256_sizes_are_refused() -> None:
    negative = hostile.header(f"{TOP}/a", size_field=b"\xff" * 12)
    refused(bundle_tar(negative), "offset 512", "base-256 size")
    positive = hostile.header(f"{TOP}/a", size_field=b"\x80" + bytes(10) + b"\x05")
    refused(bundle_tar(positive + hostile.pad(b"hello")), "offset 512", "base-256 size")


@pytest.mark.parametrize("field", [b"0000000001x\0", b"           \0", b"-0000000001\0"])
def test_non_octal_size_is_refused(field: bytes) -> None:
    refused(
        bundle_tar(hostile.header(f"{TOP}/a", size_field=field)),
        "offset 512",
        "size field is not an octal number",
    )


def test_bad_header_checksum_mid_archive_is_refused() -> None:
    first = hostile.file_member(f"{TOP}/a", b"one")
    second = hostile.file_member(f"{TOP}/b", b"two")
    good = hostile.header(f"{TOP}/c", size=5)
    bad = hostile.header(f"{TOP}/c", size=5, checksum=sum(good) + 1)
    offset = 512 + len(first) + len(second)
    refused(
        bundle_tar(first, second, bad + hostile.pad(b"three")),
        f"offset {offset}",
        "bad header checksum",
    )
    refused(
        bundle_tar(first, second, good[:20] + b"X" + good[21:] + hostile.pad(b"three")),
        f"offset {offset}",
        "bad header checksum",
    )


def test_nonzero_member_padding_is_refused() -> None:
    member = hostile.header(f"{TOP}/a", size=3) + b"abc" + b"hidden".ljust(509, b"\0")
    refused(bundle_tar(member), f"'{TOP}/a'", "nonzero bytes in the block padding")


# ---------------------------------------------------------- hostile: end of the archive


def test_truncated_tar_is_refused() -> None:
    whole = bundle_tar(hostile.file_member(f"{TOP}/a", BIG[:5000]))
    refused(whole[:2000], "truncated tar", f"member '{TOP}/a'")
    refused(whole[:700], "truncated tar", "inside a header")
    refused(whole[: 512 * 12], "truncated tar", "without an end-of-archive marker")


def test_missing_end_marker_is_refused() -> None:
    body = hostile.tar([hostile.dir_member(TOP), hostile.file_member(f"{TOP}/a", b"x")], end=False)
    refused(body, "truncated tar", "without an end-of-archive marker")
    refused(body + bytes(512), "truncated tar", "end-of-archive marker")


def test_data_after_end_marker_is_refused() -> None:
    whole = bundle_tar(hostile.file_member(f"{TOP}/a", b"x"))
    marker = 512 * 3
    smuggled = whole[: marker + 1024] + hostile.file_member(f"{TOP}/evil", b"x")
    smuggled += bytes(len(whole) - len(smuggled))
    assert len(smuggled) == len(whole)
    refused(smuggled, f"offset {marker + 1024}", "data after the end-of-archive marker")
    refused(whole + bytes(hostile.RECORD), "data after the end-of-archive marker and its record")
    refused(whole + b"\x01", "data after the end-of-archive marker and its record")
    lone = whole[: marker + 512] + b"\x01" + whole[marker + 513 :]
    refused(lone, "zero block not followed by a second zero block")


def test_short_record_padding_is_refused() -> None:
    whole = bundle_tar(hostile.file_member(f"{TOP}/a", b"x"))
    refused(whole[:-512], "truncated tar", "record padding")


# ------------------------------------------------------------------ hostile: zstd layer


GOOD_TAR = bundle_tar(hostile.file_member(f"{TOP}/a", BIG[:300_000]))


def test_truncated_zstd_stream_is_refused() -> None:
    frame = hostile.zstd(GOOD_TAR)
    refused_zstd(frame[:-1], "truncated zstd stream", "content checksum")
    refused_zstd(frame[: len(frame) // 2], "truncated zstd stream")
    refused_zstd(frame[:5], "truncated zstd stream", "frame header")
    refused_zstd(b"", "empty input")


def test_bad_zstd_checksum_is_refused() -> None:
    frame = bytearray(hostile.zstd(GOOD_TAR))
    frame[-1] ^= 0x01
    refused_zstd(bytes(frame), "bad zstd content checksum", f"byte {len(frame) - 4}")


def test_second_frame_is_refused() -> None:
    frame = hostile.zstd(GOOD_TAR)
    refused_zstd(frame + hostile.zstd(b"more"), "second zstd frame", f"byte {len(frame)}")


def test_skippable_frames_are_refused() -> None:
    frame = hostile.zstd(GOOD_TAR)
    refused_zstd(hostile.skippable_frame() + frame, "skippable zstd frame", "byte 0")
    refused_zstd(frame + hostile.skippable_frame(), "skippable zstd frame follows")


@pytest.mark.parametrize("tail", [b"\0", b"junk", b"\0" * 4096])
def test_trailing_bytes_are_refused(tail: bytes) -> None:
    frame = hostile.zstd(GOOD_TAR)
    refused_zstd(frame + tail, "trailing bytes after the zstd frame", f"byte {len(frame)}")


def test_missing_checksum_flag_is_refused() -> None:
    refused_zstd(hostile.zstd(GOOD_TAR, checksum=False), "no content checksum flag")


def test_window_over_8_mib_is_refused() -> None:
    refused_zstd(hostile.zstd(GOOD_TAR, level=3, window_log=24), "window of 16777216 bytes")
    patched = bytearray(hostile.zstd(GOOD_TAR))
    assert not patched[4] & 0x20
    patched[5] = (27 - 10) << 3  # the frame decodes fine with a 128 MiB window
    refused_zstd(bytes(patched), "window of 134217728 bytes exceeds 8388608")
    single = hostile.frame_header(window_log=None, content_size=9 * 1024 * 1024)
    refused_zstd(single + hostile.rle_run(1024) + hostile.close_frame(), "single-segment")


def test_window_of_exactly_8_mib_is_accepted() -> None:
    frame = hostile.zstd(GOOD_TAR, level=19)
    assert frame[5] == (23 - 10) << 3
    assert len(read_all(frame)) == 2


def test_dictionary_id_is_refused() -> None:
    frame = hostile.frame_header(dict_id=0x1234) + hostile.raw_blocks(GOOD_TAR)
    refused_zstd(frame + hostile.close_frame(), "dictionary ID")


@pytest.mark.parametrize(
    ("data", "rule"),
    [
        (b"\x1f\x8b\x08\x00" + bytes(20), "not a zstd frame"),
        (GOOD_TAR, "not a zstd frame"),
        (hostile.ZSTD_MAGIC + b"\x0c", "reserved bit"),
    ],
)
def test_non_zstd_input_is_refused(data: bytes, rule: str) -> None:
    refused_zstd(data, rule, "byte")


def test_corrupt_zstd_blocks_are_refused() -> None:
    reserved = hostile.frame_header() + (0b110).to_bytes(3, "little")
    refused_zstd(reserved, "reserved block type")
    oversized = hostile.frame_header() + ((200_000 << 3) | 0).to_bytes(3, "little")
    refused_zstd(oversized, "exceeds the block maximum")
    garbage = hostile.frame_header() + ((50 << 3) | 0b100).to_bytes(3, "little") + bytes(50)
    refused_zstd(garbage, "corrupt zstd block")


# ------------------------------------------------------------------------------ caps


CAP = 256 * 1024 * 1024
TEN_GIB = 10 * 1024**3


def test_zero_bomb_is_stopped_by_the_padding_rule_before_the_cap() -> None:
    bomb = hostile.zero_bomb(TEN_GIB)
    assert len(bomb) < 400_000
    stream = ZstdStream(io.BytesIO(bomb), source=SOURCE, max_bytes=CAP)
    started = time.monotonic()
    with pytest.raises(ArchiveError, match="offset 10240: data after the end-of-archive marker"):
        for _ in iter_members(stream, source=SOURCE, max_bytes=CAP):
            pass
    assert time.monotonic() - started < 1
    assert stream.bytes_out <= 10240 + FEED_MAX


def test_zstd_cap_stops_a_bomb_fast() -> None:
    stream = ZstdStream(io.BytesIO(hostile.zero_bomb(TEN_GIB)), source=SOURCE, max_bytes=CAP)
    started = time.monotonic()
    with pytest.raises(ArchiveError, match=f"more than max_bytes={CAP} decompressed bytes"):
        while stream.read(CHUNK_BYTES):
            pass
    assert time.monotonic() - started < 5
    assert CAP < stream.bytes_out <= CAP + FEED_MAX


def test_member_bomb_is_stopped_at_the_cap() -> None:
    bomb = hostile.member_bomb(TEN_GIB)
    assert len(bomb) < 500_000
    started = time.monotonic()
    message = refused_zstd(bomb, f"max_bytes={CAP}", max_bytes=CAP)
    assert time.monotonic() - started < 5
    assert "bomb/f" in message


def test_zstd_layer_cap_applies_even_when_the_tar_layer_is_uncapped() -> None:
    stream = ZstdStream(io.BytesIO(hostile.member_bomb(TEN_GIB)), source=SOURCE, max_bytes=CAP)
    with pytest.raises(ArchiveError, match=f"zstd stream at byte .*max_bytes={CAP}"):
        for _, content in iter_members(stream, source=SOURCE):
            for _ in content:
                pass


def test_declared_size_over_the_cap_is_refused_at_the_header() -> None:
    huge = hostile.header(f"{TOP}/a", size=8**11 - 1)
    refused(bundle_tar(huge), f"'{TOP}/a'", "goes past max_bytes=1000000", max_bytes=1_000_000)


def test_member_count_cap() -> None:
    data = bundle_tar(*(hostile.file_member(f"{TOP}/f{i}", b"") for i in range(5)))
    with pytest.raises(ArchiveError, match=f"'{TOP}/f4'.*more than max_members=5"):
        for _ in iter_members(io.BytesIO(data), source=SOURCE, max_members=5):
            pass
    assert len(list(iter_members(io.BytesIO(data), source=SOURCE, max_members=6))) == 6


def test_nonzero_pax_padding_is_refused() -> None:
    pax = hostile.pax_member([("path", f"{TOP}/a")])
    pax = pax[:-1] + b"\x01"
    refused(bundle_tar(pax + hostile.file_member("x")), "offset 512", "nonzero bytes")


def test_tar_cap_applies_to_uncompressed_streams() -> None:
    data = bundle_tar(hostile.file_member(f"{TOP}/a", bytes(4000)))
    with pytest.raises(ArchiveError, match="max_bytes=5000"):
        read_all(data, compressed=False, max_bytes=5000)
    assert len(read_all(data, compressed=False, max_bytes=len(data))) == 2


_BOMB_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from bundler.archive.reader import iter_archive
    from bundler.archive.zstdframe import ZstdStream
    from bundler.core.errors import ArchiveError

    def peak_kib():
        # VmHWM, unlike ru_maxrss, starts afresh at exec instead of inheriting the
        # parent's peak.
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmHWM")

    path, kind, cap = sys.argv[1], sys.argv[2], int(sys.argv[3])
    before = peak_kib()
    started = time.monotonic()
    message = None
    with open(path, "rb") as handle:
        try:
            if kind == "zstd":
                stream = ZstdStream(handle, source="bomb", max_bytes=cap)
                while stream.read(1 << 20):
                    pass
            else:
                for _, content in iter_archive(handle, source="bomb", max_bytes=cap):
                    for _ in content:
                        pass
        except ArchiveError as exc:
            message = str(exc)
    print(json.dumps({
        "message": message,
        "seconds": time.monotonic() - started,
        "before_kib": before,
        "peak_kib": peak_kib(),
    }))
    """
)


@pytest.mark.parametrize(
    ("kind", "build", "cap", "expect"),
    [
        ("zstd", hostile.zero_bomb, 4 * 1024**3, "more than max_bytes"),
        ("archive", hostile.member_bomb, 2 * 1024**3, "max_bytes"),
    ],
)
def test_bomb_peak_memory_stays_flat(
    tmp_path: Path, kind: str, build: Callable[[int], bytes], cap: int, expect: str
) -> None:
    path = tmp_path / "bomb.tar.zst"
    path.write_bytes(build(TEN_GIB))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", _BOMB_SCRIPT, str(path), kind, str(cap)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=env,
        cwd=REPO,
    )
    result = json.loads(done.stdout)
    assert result["message"] is not None and expect in result["message"]
    assert result["seconds"] < 30
    assert result["peak_kib"] < 200 * 1024, result
    assert result["peak_kib"] - result["before_kib"] < 64 * 1024, result


# ------------------------------------------------------------------ robustness (fuzz)


def test_any_single_byte_change_to_the_tar_is_refused_or_harmless() -> None:
    """A flipped byte gives ArchiveError or the same members; never another exception."""
    raw = hostile.tar_with_tarfile([*WELL_FORMED[:6], (f"{TOP}/data/z", b"zz" * 300)])
    original = read_all(raw, compressed=False)
    rng = random.Random(7)
    refusals = 0
    for _ in range(400):
        mutated = bytearray(raw)
        position = rng.randrange(len(raw))
        mutated[position] ^= 1 << rng.randrange(8)
        try:
            result = read_all(bytes(mutated), compressed=False)
        except ArchiveError:
            refusals += 1
            continue
        # Content and pax records carry no tar checksum; the bag manifests cover them.
        assert len(result) == len(original)
    assert refusals > 0


def test_any_single_byte_change_to_the_frame_is_refused_or_harmless() -> None:
    raw = hostile.tar_with_tarfile(WELL_FORMED[:6])
    frame = hostile.zstd(raw, level=3)
    original = read_all(frame)
    rng = random.Random(11)
    for _ in range(300):
        mutated = bytearray(frame)
        position = rng.randrange(len(frame))
        mutated[position] ^= 1 << rng.randrange(8)
        try:
            result = read_all(bytes(mutated))
        except ArchiveError:
            continue
        assert result == original, f"byte {position} changed the content undetected"


def test_plain_header_fast_path_agrees_with_the_full_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whenever the fast path accepts a header, the full parser gives the same result;
    headers are real ones from the writer with random bytes changed."""
    from bundler.archive import reader as archive_reader
    from bundler.archive import tarwriter

    rng = random.Random(11)
    base = [
        tarwriter._header(
            b"top/dir/file%d.json" % i,
            b"" if i % 2 else b"pre/fix",
            size=rng.randint(0, 10**9),
            mode=rng.choice([0o644, 0o755]),
            typeflag=rng.choice([b"0", b"5", b"x"]),
            mtime=1_700_000_000,
        )
        for i in range(40)
    ]
    fast_path = archive_reader._fast_header
    reader = archive_reader._TarReader(io.BytesIO(), "t", 10**12, 10**6)
    accepted = 0
    for _ in range(20_000):
        block = bytearray(rng.choice(base))
        for _ in range(rng.choice([0, 1, 1, 2])):
            pos = rng.choice([rng.randrange(512), rng.randrange(100, 160), rng.randrange(257, 265)])
            block[pos] = rng.choice([0, 0x20, 0x30, 0x37, 0x38, rng.randrange(256)])
        fast = fast_path(bytes(block))
        if fast is None:
            continue
        accepted += 1
        monkeypatch.setattr(archive_reader, "_fast_header", lambda _block: None)
        header = reader._parse_header(bytes(block), 0)
        monkeypatch.setattr(archive_reader, "_fast_header", fast_path)
        assert (header.typeflag, header.raw_name, header.size, header.mtime, header.mode) == fast
    assert accepted > 5_000


# ----------------------------------------------------- chunking never changes a verdict
#
# SPEC 5, Resources: whatever legitimate encoding of the same tar stream a zstd encoder
# produces (block boundaries anywhere in one frame) verifies the same. The reader's
# output, member by member and chunk by chunk, must be a function of the tar alone.


def _checksum_of(tar: bytes) -> bytes:
    # The frame checksum depends on the content only: any encoder's frame carries it.
    return hostile.zstd(tar)[-4:]


def _blocks_frame(tar: bytes, cuts: list[int], *, rle: bool = True, window_log: int = 23) -> bytes:
    """One frame of raw (and, for runs of one byte, RLE) blocks split at ``cuts``."""
    points = sorted({0, len(tar), *(c for c in cuts if 0 < c < len(tar))})
    parts = [hostile.frame_header(window_log=window_log)]
    for start, end in itertools.pairwise(points):
        for at in range(start, end, hostile.ZSTD_BLOCK_MAX):
            piece = tar[at : min(end, at + hostile.ZSTD_BLOCK_MAX)]
            if rle and piece == piece[:1] * len(piece):
                parts.append(hostile.rle_block(piece[0], len(piece)))
            else:
                parts.append(hostile.raw_block(piece))
    parts.append(hostile.close_frame(checksum=_checksum_of(tar)))
    return b"".join(parts)


def _flushed_frame(tar: bytes, sizes: list[int], *, level: int) -> bytes:
    """One frame from zstandard, with a block flush after each piece of ``sizes``."""
    compressor = zstandard.ZstdCompressor(level=level, write_checksum=True)
    cobj = compressor.compressobj()
    out, pos = [], 0
    for size in sizes:
        out.append(cobj.compress(tar[pos : pos + size]))
        out.append(cobj.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK))
        pos += size
    out.append(cobj.compress(tar[pos:]))
    out.append(cobj.flush())
    return b"".join(out)


def _read_contents(data: bytes) -> tuple[dict[str, object], dict[str, bytes], set[str]]:
    from bundler.archive.bag_reader import read_bag

    contents = read_bag(iter_archive(io.BytesIO(data), source=SOURCE), source=SOURCE)
    return dict(contents.files), dict(contents.kept), set(contents.directories)


def _member_chunks(data: bytes) -> list[tuple[str, list[int]]]:
    return [
        (member.path, [len(c) for c in content])
        for member, content in iter_archive(io.BytesIO(data), source=SOURCE)
    ]


@pytest.fixture(scope="module")
def manifest_tar(bundles: dict[str, Path]) -> bytes:
    import repack

    return repack.archive_tar(bundles["rpt-evidence-manifest/alice"])


def _cut_points(tar: bytes) -> dict[str, list[int]]:
    """Block boundaries at every kind of place in the tar."""
    import repack

    headers = repack.header_blocks(tar)
    starts = [h.offset + BLOCK_SIZE for h in headers if h.typeflag != b"5"]
    return {
        "mid-header": [h.offset + k for h in headers for k in (1, 100, 257, 511)],
        "at-header": [h.offset for h in headers],
        "first-bytes": [s + k for s in starts for k in (1, 5, 11, 12, 13)],
        "mid-member": [h.offset + BLOCK_SIZE + h.size // 2 for h in headers if h.size > 1],
        "every-512": list(range(0, len(tar), 512)),
        "every-1": list(range(len(tar))),
        "odd": list(range(0, len(tar), 777)),
    }


BLOCK_SIZE = 512


def test_recompressing_with_raw_and_rle_blocks_anywhere_reads_the_same(
    manifest_tar: bytes, bundles: dict[str, Path]
) -> None:
    reference = _read_contents(bundles["rpt-evidence-manifest/alice"].read_bytes())
    chunks = _member_chunks(bundles["rpt-evidence-manifest/alice"].read_bytes())
    assert any(p.startswith("data/blobs/") for p in reference[1]), "no evidence manifest kept"
    for kind, cuts in _cut_points(manifest_tar).items():
        for rle in (True, False):
            frame = _blocks_frame(manifest_tar, cuts, rle=rle)
            assert _read_contents(frame) == reference, kind
            assert _member_chunks(frame) == chunks, kind


def test_recompressing_with_flushes_at_random_places_reads_the_same(
    manifest_tar: bytes, bundles: dict[str, Path]
) -> None:
    reference = _read_contents(bundles["rpt-evidence-manifest/alice"].read_bytes())
    rng = random.Random(13)
    for _ in range(40):
        sizes = [
            rng.choice([1, 3, 7, 12, 511, 512, 513, 4096, 65536]) for _ in range(rng.randint(1, 60))
        ]
        frame = _flushed_frame(manifest_tar, sizes, level=rng.choice([1, 3, 9, 19]))
        assert _read_contents(frame) == reference


def test_a_random_mix_of_block_kinds_and_sizes_reads_the_same(
    manifest_tar: bytes, bundles: dict[str, Path]
) -> None:
    reference = _read_contents(bundles["rpt-evidence-manifest/alice"].read_bytes())
    rng = random.Random(17)
    for _ in range(30):
        cuts = sorted(rng.sample(range(1, len(manifest_tar)), rng.randint(1, 400)))
        frame = _blocks_frame(
            manifest_tar, cuts, rle=rng.random() < 0.5, window_log=rng.choice([17, 20, 23])
        )
        assert _read_contents(frame) == reference


@pytest.mark.parametrize("key", ["rpt-evidence-manifest/alice", "rpt-every-reason/bob"])
def test_recompressed_bundles_get_the_same_verdict(
    key: str, bundles: dict[str, Path], tmp_path: Path
) -> None:
    import repack

    from bundler.bundles.verify import verify_bundle
    from bundler.core.claims import VerifyOptions

    original = verify_bundle(str(bundles[key]), VerifyOptions())
    tar = repack.archive_tar(bundles[key])
    frames = {
        "bytes": _blocks_frame(tar, list(range(len(tar)))),
        "first-bytes": _blocks_frame(tar, _cut_points(tar)["first-bytes"]),
        "flushed": _flushed_frame(tar, [1, 12, 500] * 50, level=19),
    }
    for name, frame in frames.items():
        path = tmp_path / f"{name}.tar.zst"
        path.write_bytes(frame)
        again = verify_bundle(str(path), VerifyOptions())
        assert again.verdict is original.verdict, (name, [c.to_json() for c in again.failures()])
        assert [(c.subject, c.state) for c in again.claims] == [
            (c.subject, c.state) for c in original.claims
        ], name


# ------------------------------------------------------------------ bag directories


def _write_bag(bundle: Path, parent: Path) -> Path:
    import repack

    eb = repack.open_bundle(bundle)
    root = parent / eb.top
    for rel, data in eb.files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


@pytest.mark.parametrize(
    ("cwd", "spelling"),
    [
        ("parent", "{top}"),
        ("parent", "{top}/"),
        ("parent", "./{top}/"),
        ("parent", "{top}/."),
        ("parent", "{top}/./"),
        ("parent", "{top}/data/.."),
        ("parent", "{top}/data/../"),
        ("parent", "{abs}"),
        ("parent", "{abs}/"),
        ("bag", "."),
        ("bag", "./"),
        ("bag", "../{top}"),
        ("data", ".."),
        ("data", "../"),
        ("data", "../data/.."),
    ],
)
def test_a_bag_directory_verifies_however_it_is_named(
    cwd: str,
    spelling: str,
    bundles: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bundler.bundles.verify import verify_bundle
    from bundler.core.claims import Verdict, VerifyOptions

    root = _write_bag(bundles["rpt-clean/alice"], tmp_path)
    monkeypatch.chdir({"parent": tmp_path, "bag": root, "data": root / "data"}[cwd])
    location = spelling.format(top=root.name, abs=root)
    result = verify_bundle(location, VerifyOptions())
    assert result.verdict is Verdict.VERIFIED, result.error or [
        c.to_json() for c in result.failures()
    ]


def test_a_symlinked_bag_root_is_refused_not_followed(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    from bundler.archive.bag_reader import open_members

    root = _write_bag(bundles["rpt-clean/alice"], tmp_path)
    link = tmp_path / "link"
    link.symlink_to(root.name)
    for spelling in (str(link), f"{link}/"):
        with pytest.raises(InputError, match="symbolic link as the bag directory"):
            list(open_members(spelling))


def test_a_directory_whose_name_is_its_top_is_read_by_the_real_name(
    bundles: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bundler.archive.bag_reader import open_members

    root = _write_bag(bundles["rpt-clean/alice"], tmp_path)
    monkeypatch.chdir(root / "data")
    first = next(iter(open_members("..")))[0]
    assert first.path == root.name and first.is_dir


# ----------------------------------------------- files outside data/ below the bag root


STRAY_PATHS = [
    "sub/bagit.txt",
    "sub/bag-info.txt",
    "sub/manifest-sha256.txt",
    "sub/tagmanifest-sha256.txt",
    "sub/deeper/bundle-head.json",
    "meta/notes.txt",
    "sub/data/bundle.json",
]


@pytest.mark.parametrize("stray", STRAY_PATHS)
def test_a_file_below_the_root_outside_data_is_reported_and_never_extracted(
    stray: str, bundles: dict[str, Path], tmp_path: Path
) -> None:
    import repack

    from bundler.archive.bag_reader import read_bag
    from bundler.archive.safe_extract import SafeExtractor

    eb = repack.open_bundle(bundles["rpt-clean/alice"])
    eb.files[stray] = eb.files.get(stray.rsplit("/", 1)[-1], b"planted\n")
    path = repack.write_bundle(eb, tmp_path / "stray.tar.zst")
    target = tmp_path / "out"
    target.mkdir()
    extractor = SafeExtractor(target)
    try:
        with open(path, "rb") as fh:
            contents = read_bag(iter_archive(fh, source=SOURCE), source=SOURCE, extract=extractor)
        written = sorted(str(p.relative_to(target)) for p in target.rglob("*"))
    finally:
        extractor.close()
    top = stray.split("/")[0]
    assert stray in contents.files
    assert top in contents.directories
    assert stray not in contents.kept
    assert not any(w == f"{eb.top}/{top}" or w.startswith(f"{eb.top}/{top}/") for w in written)
    assert f"{eb.top}/data/bundle.json" in written


@pytest.mark.parametrize("stray", STRAY_PATHS)
def test_a_file_below_the_root_outside_data_fails_the_bundle(
    stray: str, bundles: dict[str, Path], tmp_path: Path
) -> None:
    import repack

    from bundler.bundles.extract import extract_bundle
    from bundler.bundles.verify import verify_bundle
    from bundler.core.claims import Verdict, VerifyOptions

    eb = repack.open_bundle(bundles["rpt-clean/alice"])
    eb.files[stray] = eb.files.get(stray.rsplit("/", 1)[-1], b"planted\n")
    path = repack.write_bundle(eb, tmp_path / "stray.tar.zst")
    result = verify_bundle(str(path), VerifyOptions())
    assert result.verdict is not Verdict.VERIFIED
    target = tmp_path / "out"
    assert extract_bundle(str(path), target, VerifyOptions()).verdict is not Verdict.VERIFIED
    assert not target.exists() or not any(target.iterdir())


# -------------------------------------------------------------------------- reader caps
#
# Each cap is tested at the cap (accepted) and one past it (refused before parsing, one
# line naming the member and the rule), and the exporter's question
# (bag_reader.document_problem) gives the same answer as the reader.


def _bag_tar(files: dict[str, bytes], *, top: str = TOP) -> bytes:
    members = [hostile.dir_member(top)]
    made = {top}
    for rel, data in files.items():
        parts = rel.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = f"{top}/" + "/".join(parts[:i])
            if d not in made:
                members.append(hostile.dir_member(d))
                made.add(d)
        name = f"{top}/{rel}"
        if len(name) > 100:
            head, _, tail = name.rpartition("/")
            members.append(hostile.file_member(tail, data, prefix=head))
        else:
            members.append(hostile.file_member(name, data))
    return hostile.tar(members)


def _read_bag_of(files: dict[str, bytes]) -> object:
    from bundler.archive.bag_reader import read_bag

    data = hostile.zstd(_bag_tar(files), level=1)
    return read_bag(iter_archive(io.BytesIO(data), source=SOURCE), source=SOURCE)


def _refused_bag(files: dict[str, bytes], *fragments: str) -> str:
    with pytest.raises(ArchiveError) as info:
        _read_bag_of(files)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{SOURCE}: "), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


def test_the_caps_derive_from_the_contract() -> None:
    from bundler.archive import bag_reader
    from bundler.core import canonical

    assert archive_reader.MAX_CASES == 20_000 == bag_reader.MAX_CASE_LINES
    assert archive_reader.MAX_MEMBERS >= 3 * archive_reader.MAX_CASES + 5_000
    assert bag_reader.MAX_JSON_VALUES == canonical.MAX_VALUES
    # 20,000 cases of 1 KiB (their lines and bundle.json entries) fit in one document,
    # and the kept documents together stay a small share of the 300 MB budget.
    assert bag_reader.MAX_DOCUMENT_BYTES >= 20_000 * 1024
    assert bag_reader.MAX_DOCUMENT_BYTES < bag_reader.MAX_KEPT_BYTES <= 64 * 1024 * 1024


def _case_line(i: int) -> bytes:
    return b'{"case_id":"c%d"}\n' % i


@pytest.mark.parametrize("split", [1, 2, 7])
def test_case_lines_up_to_the_limit_are_read_and_one_more_is_refused(split: int) -> None:
    from bundler.archive.bag_reader import MAX_CASE_LINES

    per = -(-MAX_CASE_LINES // split)
    files, made = {}, 0
    for k in range(split):
        n = min(per, MAX_CASE_LINES - made)
        files[f"data/cases/check-{k}.jsonl"] = b"".join(_case_line(made + i) for i in range(n))
        made += n
    _read_bag_of(files)
    files["data/cases/check-extra.jsonl"] = _case_line(0)
    _refused_bag(files, "check-extra.jsonl", f"more than {MAX_CASE_LINES} case lines")


def test_a_last_case_line_without_its_newline_counts() -> None:
    from bundler.archive.bag_reader import MAX_CASE_LINES

    body = b"".join(_case_line(i) for i in range(MAX_CASE_LINES))
    _read_bag_of({"data/cases/a.jsonl": body})
    _refused_bag(
        {"data/cases/a.jsonl": body + b'{"case_id":"last"}'}, f"more than {MAX_CASE_LINES}"
    )


def test_hundreds_of_thousands_of_case_lines_are_refused_while_streaming() -> None:
    from bundler.archive.bag_reader import read_bag

    line = _case_line(1)
    tar = _bag_tar({"data/cases/a.jsonl": line * 260_000})
    data = hostile.zstd(tar, level=1)
    started = time.monotonic()
    with pytest.raises(ArchiveError, match="more than 20000 case lines"):
        read_bag(iter_archive(io.BytesIO(data), source=SOURCE), source=SOURCE)
    assert time.monotonic() - started < 5


def _values_document(values: int) -> bytes:
    """A JSON array whose value bound (canonical.value_bound) is exactly ``values``."""
    assert values >= 2
    return b"[" + b"0," * (values - 2) + b"0]"


def test_json_values_up_to_the_cap_are_read_and_one_more_is_refused() -> None:
    from bundler.archive.bag_reader import MAX_JSON_VALUES
    from bundler.core import canonical

    at_cap = _values_document(MAX_JSON_VALUES)
    assert canonical.value_bound(at_cap) == MAX_JSON_VALUES
    _read_bag_of({"data/bundle.json": at_cap})
    _refused_bag(
        {"data/bundle.json": _values_document(MAX_JSON_VALUES + 1)},
        "data/bundle.json",
        f"more than {MAX_JSON_VALUES} values",
        "before parsing",
    )
    half = _values_document(MAX_JSON_VALUES // 2)
    _refused_bag(
        {
            "data/report/body.json": half,
            "data/bundle.json": _values_document(MAX_JSON_VALUES // 2 + 1),
        },
        "data/bundle.json",
        f"more than {MAX_JSON_VALUES} values",
    )


def test_documents_up_to_the_byte_caps_are_read_and_one_byte_more_is_refused() -> None:
    from bundler.archive.bag_reader import MAX_DOCUMENT_BYTES, MAX_KEPT_BYTES

    def doc(size: int) -> bytes:
        return b'"' + b"a" * (size - 2) + b'"'

    _read_bag_of({"data/report/body.json": doc(MAX_DOCUMENT_BYTES)})
    _refused_bag(
        {"data/report/body.json": doc(MAX_DOCUMENT_BYTES + 1)},
        "data/report/body.json",
        f"over the {MAX_DOCUMENT_BYTES}-byte cap",
    )
    rest = MAX_KEPT_BYTES - MAX_DOCUMENT_BYTES
    _read_bag_of({"data/a.json": doc(MAX_DOCUMENT_BYTES), "data/b.json": doc(rest)})
    _refused_bag(
        {"data/a.json": doc(MAX_DOCUMENT_BYTES), "data/b.json": doc(rest + 1)},
        "data/b.json",
        f"exceed {MAX_KEPT_BYTES} bytes in total",
    )


def test_the_member_cap_is_the_default() -> None:
    top = [hostile.dir_member(TOP), hostile.dir_member(f"{TOP}/d")]
    count = archive_reader.MAX_MEMBERS - 2
    files = [hostile.header(f"{TOP}/d/{i:x}") for i in range(count)]
    assert len(list(iter_members(io.BytesIO(hostile.tar(top + files)), source=SOURCE))) == (
        archive_reader.MAX_MEMBERS
    )
    extra = hostile.tar([*top, *files, hostile.header(f"{TOP}/d/extra")])
    with pytest.raises(ArchiveError, match=f"'{TOP}/d/extra'.*more than max_members="):
        for _ in iter_members(io.BytesIO(extra), source=SOURCE):
            pass


def test_document_problem_agrees_with_the_reader() -> None:
    """The exporter asks document_problem; for any sequence of documents it must refuse
    exactly where the reader refuses."""
    from bundler.archive import bag_reader
    from bundler.core import canonical

    rng = random.Random(5)
    cap_v, cap_d, cap_k = 5_000, 40_000, 90_000
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bag_reader, "MAX_JSON_VALUES", cap_v)
        mp.setattr(bag_reader, "MAX_DOCUMENT_BYTES", cap_d)
        mp.setattr(bag_reader, "MAX_KEPT_BYTES", cap_k)
        for _ in range(60):
            files: dict[str, bytes] = {}
            kept = values = 0
            expected: str | None = None
            for i in range(rng.randint(1, 6)):
                rel = f"data/checks/c{i}.json" if rng.random() < 0.8 else f"data/notes{i}.txt"
                n = rng.choice([10, 1000, 3000, cap_v // 2, cap_v])
                data = _values_document(n) if rng.random() < 0.5 else b'"' + b"x" * n * 8 + b'"'
                files[rel] = data
                if expected is None:
                    problem = bag_reader.document_problem(rel, data, kept, values_before=values)
                    if problem is not None:
                        expected = rel
                    kept += len(data)
                    if rel.endswith(".json"):
                        values += canonical.value_bound(data)
            if expected is None:
                _read_bag_of(files)
            else:
                _refused_bag(files, expected)
