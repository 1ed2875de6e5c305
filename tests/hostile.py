"""Builders of well-formed and hostile bundle archives, byte by byte.

Everything here writes raw bytes under the caller's control (any type flag, any name,
any numeric field, wrong checksums, pax records of any shape, zstd frames with chosen
header fields) so tests can build exactly the archive an attacker would send. Import
as ``import hostile`` from tests (the tests directory is on ``sys.path`` under pytest).
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterable, Sequence
from typing import Any

import zstandard

BLOCK = 512
RECORD = 10240
MTIME = 1764460800  # 2025-11-30T00:00:00Z
ZSTD_MAGIC = (0xFD2FB528).to_bytes(4, "little")
SKIPPABLE_MAGIC = (0x184D2A50).to_bytes(4, "little")
ZSTD_BLOCK_MAX = 128 * 1024


def _b(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def _octal_field(value: int, width: int) -> bytes:
    return b"%0*o\0" % (width - 1, value)


def header(
    name: str | bytes,
    *,
    typeflag: bytes = b"0",
    size: int = 0,
    mode: int | None = None,
    mtime: int = MTIME,
    uid: int = 0,
    gid: int = 0,
    linkname: str | bytes = b"",
    prefix: str | bytes = b"",
    magic: bytes = b"ustar\0",
    version: bytes = b"00",
    size_field: bytes | None = None,
    checksum: int | None = None,
) -> bytes:
    """One 512-byte ustar header; ``size_field``/``checksum`` override computed values."""
    if mode is None:
        mode = 0o755 if typeflag == b"5" else 0o644
    raw_name = _b(name)
    raw_prefix = _b(prefix)
    raw_link = _b(linkname)
    assert len(raw_name) <= 100 and len(raw_prefix) <= 155 and len(raw_link) <= 100
    fields = [
        raw_name.ljust(100, b"\0"),
        _octal_field(mode, 8),
        _octal_field(uid, 8),
        _octal_field(gid, 8),
        size_field if size_field is not None else _octal_field(size, 12),
        _octal_field(mtime, 12),
        b" " * 8,
        typeflag,
        raw_link.ljust(100, b"\0"),
        magic,
        version,
        b"\0" * 32,
        b"\0" * 32,
        _octal_field(0, 8),
        _octal_field(0, 8),
        raw_prefix.ljust(155, b"\0"),
        b"\0" * 12,
    ]
    block = b"".join(fields)
    assert len(block) == BLOCK, len(block)
    value = sum(block) if checksum is None else checksum
    return block[:148] + b"%06o\0 " % value + block[156:]


def pad(data: bytes) -> bytes:
    """``data`` zero-padded to a multiple of 512 bytes."""
    return data + bytes(-len(data) % BLOCK)


def file_member(name: str | bytes, data: bytes = b"", **fields: Any) -> bytes:
    """Header, content and padding of a regular file (extra header fields allowed)."""
    return header(name, size=len(data), **fields) + pad(data)


def dir_member(name: str | bytes, **fields: Any) -> bytes:
    """Header of a directory member; the name gets a trailing slash if it lacks one."""
    raw = _b(name)
    if not raw.endswith(b"/"):
        raw += b"/"
    return header(raw, typeflag=b"5", **fields)


def pax_record(key: str | bytes, value: str | bytes) -> bytes:
    """One correctly sized ``<len> <key>=<value>\\n`` record."""
    body = b" " + _b(key) + b"=" + _b(value) + b"\n"
    length = len(body) + 1
    while len(str(length).encode()) + len(body) != length:
        length += 1
    return str(length).encode() + body


def pax_member(
    records: Iterable[tuple[str | bytes, str | bytes]] | bytes,
    *,
    typeflag: bytes = b"x",
    size: int | None = None,
) -> bytes:
    """A pax extended (or, with typeflag ``g``, global) header with its data."""
    data = records if isinstance(records, bytes) else b"".join(pax_record(k, v) for k, v in records)
    declared = len(data) if size is None else size
    return header("././@PaxHeader", typeflag=typeflag, size=declared) + pad(data)


def end_of_archive(length: int) -> bytes:
    """Two zero blocks plus zero padding to the 10,240-byte record, for a body of ``length``."""
    total = length + 2 * BLOCK
    return bytes(2 * BLOCK + (-total % RECORD))


def tar(members: Sequence[bytes], *, end: bool = True) -> bytes:
    """Concatenate members and (unless ``end`` is false) the end marker and padding."""
    body = b"".join(members)
    return body + end_of_archive(len(body)) if end else body


def tar_with_tarfile(
    entries: Sequence[tuple[str, bytes | None]],
    *,
    fmt: int = tarfile.PAX_FORMAT,
    mtime: int = MTIME,
) -> bytes:
    """A tar built by the standard library: ``(name, None)`` is a directory."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as archive:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.mtime = mtime
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if data is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                archive.addfile(info)
            else:
                info.mode = 0o644
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# ---------------------------------------------------------------------------------- zstd


def zstd(
    data: bytes,
    *,
    level: int = 3,
    checksum: bool = True,
    window_log: int | None = None,
) -> bytes:
    """One streaming zstd frame (content size unknown), as the exporter writes them."""
    if window_log is None:
        compressor = zstandard.ZstdCompressor(level=level, write_checksum=checksum)
    else:
        params = zstandard.ZstdCompressionParameters.from_level(
            level, window_log=window_log, write_checksum=int(checksum)
        )
        compressor = zstandard.ZstdCompressor(compression_params=params)
    cobj = compressor.compressobj()
    return cobj.compress(data) + cobj.flush()


def skippable_frame(payload: bytes = b"hidden") -> bytes:
    """A zstd skippable frame carrying ``payload``."""
    return SKIPPABLE_MAGIC + len(payload).to_bytes(4, "little") + payload


def frame_header(
    *,
    window_log: int | None = 17,
    content_size: int | None = None,
    checksum: bool = True,
    dict_id: int | None = None,
) -> bytes:
    """A zstd frame header; ``window_log=None`` makes a single-segment frame."""
    single = window_log is None
    fcs_flag, fcs = 0, b""
    if content_size is not None:
        fcs_flag, fcs = 3, content_size.to_bytes(8, "little")
    elif single:
        raise ValueError("a single-segment frame needs a content size")
    did_flag, did = 0, b""
    if dict_id is not None:
        did_flag, did = 3, dict_id.to_bytes(4, "little")
    descriptor = (fcs_flag << 6) | (int(single) << 5) | (int(checksum) << 2) | did_flag
    window = b"" if window_log is None else bytes([(window_log - 10) << 3])
    return ZSTD_MAGIC + bytes([descriptor]) + window + did + fcs


def raw_block(data: bytes, *, last: bool = False) -> bytes:
    """A zstd raw block (stored bytes, at most 128 KiB)."""
    assert len(data) <= ZSTD_BLOCK_MAX
    return ((len(data) << 3) | int(last)).to_bytes(3, "little") + data


def rle_block(byte: int, count: int, *, last: bool = False) -> bytes:
    """A zstd RLE block: 4 bytes that decompress to ``count`` copies of ``byte``."""
    assert 0 < count <= ZSTD_BLOCK_MAX
    return ((count << 3) | (1 << 1) | int(last)).to_bytes(3, "little") + bytes([byte])


def raw_blocks(data: bytes) -> bytes:
    """``data`` as a run of non-final raw blocks."""
    return b"".join(
        raw_block(data[i : i + ZSTD_BLOCK_MAX]) for i in range(0, len(data), ZSTD_BLOCK_MAX)
    )


def rle_run(count: int, byte: int = 0) -> bytes:
    """``count`` copies of ``byte`` as a run of non-final RLE blocks (4 bytes per 128 KiB)."""
    full, rest = divmod(count, ZSTD_BLOCK_MAX)
    run = rle_block(byte, ZSTD_BLOCK_MAX) * full
    return run + (rle_block(byte, rest) if rest else b"")


def close_frame(*, checksum: bytes | None = b"\0\0\0\0") -> bytes:
    """An empty last block and (unless None) four checksum bytes.

    Builders here cannot compute XXH64, so the checksum is a placeholder: frames that
    end with it are only useful when the reader must stop before it (bombs, caps) or
    when a bad checksum is the point.
    """
    return raw_block(b"", last=True) + (checksum or b"")


def zero_bomb(total: int) -> bytes:
    """A zstd frame of ``total`` zero bytes in RLE blocks: 10 GiB is about 330 KB.

    Decompressed, it is a zero block, then an end-of-archive marker, then far more zero
    padding than the 10,240-byte record allows.
    """
    return frame_header() + rle_run(total) + close_frame()


def member_bomb(total: int, *, member_size: int = 64 * 1024 * 1024) -> bytes:
    """A zstd frame of a tar whose files are ``member_size`` zeros each, ``total`` in all.

    Every header passes the tar rules, so only the byte cap can stop it; 10 GiB in
    64 MiB members is about 400 KB.
    """
    head = dir_member("bomb")
    parts = [frame_header(), raw_blocks(head)]
    count = total // member_size + 1
    for i in range(count):
        parts.append(raw_blocks(header(f"bomb/f{i:06d}", size=member_size)))
        parts.append(rle_run(member_size))
    parts.append(close_frame())
    return b"".join(parts)


# ------------------------------------------------------------- hostile bundle families
#
# Each family (SPEC 5, Resources) is a real exported bundle with one part made as
# costly as the caps allow and then some: every digest is resealed (tests/repack.py)
# where the reader gets that far, so only a cap can stop it. Built streaming: none of
# them is held in memory whole.

FLOATS_BYTES = 26 * 1024 * 1024
CASE_LINES = 260_000
EMPTY_MEMBERS = 320_000
NESTING = 100_000
HUGE_STRING_BYTES = 31 * 1024 * 1024


def _streamed(prefix: bytes, unit: bytes, count: int, suffix: bytes) -> tuple[int, Any]:
    """A streamed member: ``prefix``, ``count`` copies of ``unit``, ``suffix``."""
    per = max(1, (1 << 20) // max(1, len(unit)))

    def chunks() -> Iterable[bytes]:
        yield prefix
        left = count
        while left:
            n = min(left, per)
            yield unit * n
            left -= n
        yield suffix

    return len(prefix) + len(unit) * count + len(suffix), chunks


def floats_bundle(clean: Any, out: Any) -> Any:
    """bundle.json with ~26 MB of floats in front of the real keys (under the byte cap)."""
    import repack

    eb = repack.open_bundle(clean)
    doc = eb.files.pop("data/bundle.json")
    unit = b"0.5,"
    eb.streamed["data/bundle.json"] = _streamed(
        b'{"aa":[', unit, FLOATS_BYTES // len(unit), b"0.5]," + doc[1:]
    )
    return repack.write_bundle(eb, out, bundle_json=False, head=False)


def case_lines_bundle(clean: Any, out: Any) -> Any:
    """One case file of 260,000 copies of a real case line (20,000 is the limit)."""
    import repack

    eb = repack.open_bundle(clean)
    path = next(p for p in eb.files if p.startswith("data/cases/") and eb.files[p])
    line = eb.lines(path)[0] + b"\n"
    del eb.files[path]
    eb.streamed[path] = _streamed(b"", line, CASE_LINES, b"")
    return repack.write_bundle(eb, out, bundle_json=False, head=False)


def nesting_bundle(clean: Any, out: Any) -> Any:
    """bundle.json that opens 100,000 arrays before its real keys."""
    import repack

    eb = repack.open_bundle(clean)
    doc = eb.files["data/bundle.json"]
    eb.files["data/bundle.json"] = b'{"aa":' + b"[" * NESTING + b"]" * NESTING + b"," + doc[1:]
    return repack.write_bundle(eb, out, bundle_json=False, head=False)


def huge_string_bundle(clean: Any, out: Any) -> Any:
    """bundle.json holding one 31 MiB string, just under the 32 MiB document cap."""
    import repack

    eb = repack.open_bundle(clean)
    doc = eb.files.pop("data/bundle.json")
    eb.streamed["data/bundle.json"] = _streamed(
        b'{"aa":"', b"a" * 4096, HUGE_STRING_BYTES // 4096, b'",' + doc[1:]
    )
    return repack.write_bundle(eb, out, bundle_json=False, head=False)


def empty_members_bundle(
    out: Any, count: int = EMPTY_MEMBERS, *, top: str = "evalbook-bundle-r1"
) -> Any:
    """A tar.zst of ``count`` empty regular files under data/blobs/sha256/, streamed."""
    compressor = zstandard.ZstdCompressor(level=1, write_checksum=True)
    with open(out, "wb") as fh, compressor.stream_writer(fh, closefd=False) as z:
        body = 0
        for name in (top, f"{top}/data", f"{top}/data/blobs", f"{top}/data/blobs/sha256"):
            z.write(dir_member(name))
            body += BLOCK
        batch: list[bytes] = []
        for i in range(count):
            batch.append(header(f"{i:064x}", prefix=f"{top}/data/blobs/sha256"))
            if len(batch) == 2048:
                z.write(b"".join(batch))
                batch = []
        z.write(b"".join(batch))
        body += count * BLOCK
        z.write(end_of_archive(body))
    return out


def long_names_bundle(
    out: Any, count: int, name_bytes: int, *, dirs: bool = False, top: str = "evalbook-bundle-r1"
) -> Any:
    """A tar.zst of ``count`` empty members (directories with ``dirs``) whose full names
    are ``name_bytes`` long each, in a chain of 255-byte directories, streamed."""
    compressor = zstandard.ZstdCompressor(level=1, write_checksum=True)
    body = 0
    with open(out, "wb") as fh, compressor.stream_writer(fh, closefd=False) as z:
        chain = [top, f"{top}/data", f"{top}/data/blobs"]
        base = chain[-1]
        while name_bytes - len(base) - 1 > 255:
            base += "/" + "d" * 255
            chain.append(base)
        for name in chain:
            member = pax_member([("path", name + "/")]) + header("d/", typeflag=b"5")
            z.write(member)
            body += len(member)
        fill = name_bytes - len(base) - 1
        batch: list[bytes] = []
        for i in range(count):
            name = base + "/" + (f"{i:08d}" + "f" * 255)[:fill]
            if dirs:
                member = pax_member([("path", name + "/")]) + header("d/", typeflag=b"5")
            else:
                member = pax_member([("path", name)]) + header("f")
            batch.append(member)
            body += len(member)
            if len(batch) == 1024:
                z.write(b"".join(batch))
                batch = []
        z.write(b"".join(batch))
        z.write(end_of_archive(body))
    return out


def chain_name_bytes(name_bytes: int, top: str = "evalbook-bundle-r1") -> int:
    """The name bytes ``long_names_bundle`` spends on its directory chain."""
    chain = [top, f"{top}/data", f"{top}/data/blobs"]
    base = chain[-1]
    while name_bytes - len(base) - 1 > 255:
        base += "/" + "d" * 255
        chain.append(base)
    return sum(len(c) for c in chain)


def unlisted_members_bundle(
    clean: Any,
    out: Any,
    count: int,
    name_bytes: int,
    fill: str = "x",
    depth: int = 1,
    lead: str = "",
) -> Any:
    """A real bundle with ``count`` empty files of ``name_bytes``-byte names added under
    data/, in no manifest and named by nothing: each is two failed claims (BagIt's
    listing and the bundle's own), so a small archive within every cap of the reader
    (members, name bytes) gives a record of as many failed claims with long subjects as
    a bundle can: about 120,000 and 100 MB of JSON at 61,000 names of 540 bytes. ``fill``
    pads the names: ``"`` makes every padding byte two in the record's JSON. ``depth``
    directories of 250 bytes of it hold the files (16: names of about 4 KB). ``lead``
    begins each file's name: one character past Latin-1 (U+0100) makes a JavaScript
    engine hold every such name, quotes and all, at two bytes a character."""
    import repack

    eb = repack.open_bundle(clean)
    tar = repack.tar_bytes(eb)
    while tar.endswith(b"\0" * BLOCK):
        tar = tar[:-BLOCK]
    width = len(fill.encode())
    base = f"{eb.top}/data/m"
    members = [pax_member([("path", f"{base}/")]) + header("d/", typeflag=b"5")]
    for level in range(depth):  # a segment holds at most 255 bytes
        base += "/" + (fill * (250 // width) if level == 0 else f"{level:02d}" + fill * (248 // width))
        members.append(pax_member([("path", base + "/")]) + header("d/", typeflag=b"5"))
    room = min(name_bytes - len(base.encode()) - 1, 250)
    for i in range(count):
        stem = lead + f"{i:08d}"
        name = base + "/" + stem + fill * ((room - len(stem.encode())) // width)
        members.append(pax_member([("path", name)]) + header("f"))
    body = tar + b"".join(members)
    data = body + end_of_archive(len(body))
    with open(out, "wb") as fh:
        fh.write(zstandard.ZstdCompressor(level=3, write_checksum=True).compress(data))
    return out


def full_bundle_json(
    clean: Any,
    out: Any,
    shape: str,
    count: int,
    *,
    lead: str = "",
    fill: str = '"',
    canonical: bool = True,
    bad: str = "",
) -> Any:
    """A real bundle whose bundle.json, schema-valid and near its 32 MiB cap, lists as
    much as the cap lets it, every digest of the bag resealed (manifest, bag-info, head,
    tag manifest): what a verifier must read whole before it can say anything.

    ``shape``: "outputs", ``count`` unavailable outputs (payload_at_sso) no case uses,
    each a failed claim; "details", ``count`` unavailable examples whose ref is ``lead``
    and 2,000 ``fill`` and whose detail is four times that (one character outside
    Latin-1 in ``lead`` makes every such string two bytes a character in V8);
    "payloads", ``count`` payload entries the bag lacks. ``canonical=False`` stores it
    with spaces and every non-ASCII character escaped: the strict reader's path, not
    the native one. ``bad``: "last" or "all" of the listed entries given a digest of
    the wrong type (the document then breaks its schema: no verdict possible)."""
    import json

    import repack

    eb = repack.open_bundle(clean)
    b = eb.bundle
    if shape == "outputs":
        b["unavailable"] += [
            {"kind": "output", "ref": f"sha256:{i:064x}", "digest": f"sha256:{i:064x}",
             "reason": "payload_at_sso", "detail": None}
            for i in range(count)
        ]
    elif shape == "details":
        text = lead + fill * 2000
        b["unavailable"] += [
            {"kind": "example", "ref": f"ds-qa@1/{i}{text}", "digest": None,
             "reason": "missing_from_store", "detail": text * 4}
            for i in range(count)
        ]
    elif shape == "payloads":
        b["payloads"] += [
            {"digest": f"sha256:{i:064x}", "path": f"data/blobs/sha256/{i:064x}", "size": 1}
            for i in range(count)
        ]
    else:
        raise ValueError(shape)
    b["unavailable"].sort(key=lambda e: (e["kind"], e["ref"]))
    if bad:
        for entry in b["unavailable"][-1:] if bad == "last" else b["unavailable"]:
            entry["digest"] = 5
    if canonical:
        eb.set_bundle(b)
    else:
        eb.files[repack.BUNDLE] = json.dumps(
            b, sort_keys=True, separators=(", ", ": "), ensure_ascii=True
        ).encode()
    return repack.write_bundle(eb, out, bundle_json=False, head=canonical)


def bad_case_lines_bundle(clean: Any, out: Any, count: int = 19_980) -> Any:
    """A real bundle whose first case file holds ``count`` case lines (under the 20,000
    the contract allows), every one canonical JSON that breaks the case schema (its
    output an object of the wrong shape), bundle.json and every digest resealed: a
    verifier that explains each line's rejection spends a millisecond a line."""
    import json

    import repack

    eb = repack.open_bundle(clean)
    path = next(p for p in eb.files if p.startswith("data/cases/") and eb.files[p])
    case = json.loads(eb.lines(path)[0])
    case["output"] = {"kind": "output", "digest": 5, "size": -1, "location": "x", "extra": True}
    line = json.dumps(case, sort_keys=True, separators=(",", ":")).encode()
    eb.set_lines(path, [line] * count)
    return repack.write_bundle(eb, out)
