"""Open a bundle we exported into an editable map, and write it back as a valid-looking
archive, so tests can make "deep" changes that keep BagIt and bundle.json self-consistent.

``open_bundle`` reads a trusted archive into an ``EditableBag``: the top directory name,
the tar mtime and ``{bag-relative path: bytes}`` in archive order. Tests edit ``files``
(or the parsed ``bundle``), then ``write_bundle`` writes a ``.tar.zst`` with
``bundler.archive.tarwriter.TarWriter`` and zstd (content checksum on) in the exporter's member
order, recomputing on request (all by default): the cross-references inside bundle.json
(digests, sizes, counts, the payload list, the case tree), manifest-sha256.txt, the
Payload-Oxum, Bundle-Digest and Report-Digest of bag-info.txt, bundle-head.json and
tagmanifest-sha256.txt. The listings (``unavailable``/``redacted``) are never touched:
tests edit those themselves.

Also here: the uncompressed tar of an archive, the header offsets of a tar, and a patch
of a member's mode field, for tests that work at the byte level. Import as ``import
repack`` from tests (the tests directory is on ``sys.path`` under pytest).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zstandard

from bundler.archive import bag
from bundler.archive.reader import iter_archive
from bundler.archive.tarwriter import BLOCK, TarWriter
from bundler.core import canonical
from bundler.core.digests import SCORER_TAG, bytes_digest, framed_digest, json_digest
from bundler.core.errors import CanonicalJSONError
from bundler.trust.head import HEAD_FILE, HEAD_SIG_FILE, bundle_head
from bundler.trust.merkle import TreeBuilder

BUNDLE = "data/bundle.json"
# A member too large to hold: its size and a factory of its content chunks (called once
# to hash it, once to write it).
Streamed = tuple[int, Callable[[], Iterable[bytes]]]


@dataclass
class EditableBag:
    """One bag held in memory: ``files`` maps bag-relative paths to their bytes."""

    top: str
    mtime: int
    files: dict[str, bytes] = field(default_factory=dict)
    streamed: dict[str, Streamed] = field(default_factory=dict)

    @property
    def bundle(self) -> dict[str, Any]:
        """A fresh parse of data/bundle.json (edit it, then ``set_bundle``)."""
        value = canonical.loads(self.files[BUNDLE], source=BUNDLE)
        assert isinstance(value, dict)
        return value

    def set_bundle(self, value: dict[str, Any]) -> None:
        self.files[BUNDLE] = canonical.dumps(value)

    def json(self, path: str) -> Any:
        return canonical.loads(self.files[path], source=path)

    def set_json(self, path: str, value: Any) -> None:
        """Store ``value`` at ``path`` in canonical form."""
        self.files[path] = canonical.dumps(value)

    def edit_json(self, path: str, change: Callable[[Any], None]) -> None:
        """Parse ``path``, let ``change`` mutate the value, store it canonical again."""
        value = self.json(path)
        change(value)
        self.set_json(path, value)

    def lines(self, path: str) -> list[bytes]:
        """The lines of a JSON Lines file, without their newlines."""
        return self.files[path].splitlines()

    def set_lines(self, path: str, lines: list[bytes]) -> None:
        self.files[path] = b"".join(line + b"\n" for line in lines)

    def copy(self) -> EditableBag:
        return EditableBag(self.top, self.mtime, dict(self.files), dict(self.streamed))

    def paths(self) -> list[str]:
        """Every file of the bag: held ones in reading order, then streamed ones."""
        return [*self.files, *(p for p in self.streamed if p not in self.files)]

    def size(self, path: str) -> int:
        return self.streamed[path][0] if path in self.streamed else len(self.files[path])

    def sha256_hex(self, path: str) -> str:
        if path not in self.streamed:
            return hashlib.sha256(self.files[path]).hexdigest()
        hasher = hashlib.sha256()
        for chunk in self.streamed[path][1]():
            hasher.update(chunk)
        return hasher.hexdigest()


# ------------------------------------------------------------------------------ reading


def open_bundle(path: Path) -> EditableBag:
    """Read an archive we exported (through the strict reader) into an EditableBag."""
    with open(path, "rb") as fh:
        return _read(iter_archive(fh, source=str(path)))


def open_tar(tar: bytes) -> EditableBag:
    """Read an uncompressed bundle tar into an EditableBag."""
    from bundler.archive.reader import iter_members

    return _read(iter_members(io.BytesIO(tar), source="<tar>"))


def _read(members: Iterator[Any]) -> EditableBag:
    result: EditableBag | None = None
    for member, chunks in members:
        if result is None:
            result = EditableBag(member.path, member.mtime)
            continue
        data = b"".join(chunks)
        if not member.is_dir:
            result.files[member.path[len(result.top) + 1 :]] = data
    assert result is not None, "empty archive"
    return result


def decompress(data: bytes) -> bytes:
    """The tar inside a trusted .tar.zst."""
    with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as reader:
        return reader.read()


def compress(tar: bytes, *, level: int = 3) -> bytes:
    """One zstd frame with the content checksum, streamed as the exporter writes it."""
    compressor = zstandard.ZstdCompressor(level=level, write_checksum=True)
    cobj = compressor.compressobj()
    return cobj.compress(tar) + cobj.flush()


def archive_tar(path: Path) -> bytes:
    return decompress(path.read_bytes())


# ----------------------------------------------------------------------- recomputing


def _sha(data: bytes) -> str:
    return bytes_digest(data)


def _case_lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def refresh_bundle_json(eb: EditableBag) -> None:
    """Make bundle.json agree with the files: digests, sizes, counts, payloads, case tree.

    What an attacker who edits files would do to keep bundle.json consistent with them;
    the report's own references (suite_ref, scorer_ref, dataset_refs) are left alone,
    and so are the ``unavailable`` and ``redacted`` listings.
    """
    b = eb.bundle
    files = eb.files
    report = b["report"]
    report["digest"] = _sha(files[report["path"]])
    envelope = report["envelope"]
    envelope["digest"] = _sha(files[envelope["path"]])
    envelope["status"] = eb.json(envelope["path"])["status"]
    suite = b["suite"]
    if suite["path"] is not None and suite["path"] in files:
        suite["digest"] = json_digest(eb.json(suite["path"]))
    for scorer in b["scorers"]:
        descriptor_path = f"{scorer['path']}/scorer.json"
        descriptor = eb.json(descriptor_path)
        components = [("scorer.json", files[descriptor_path])]
        for rel in sorted(descriptor["files"], key=lambda p: p.encode("utf-8")):
            components.append((f"files/{rel}", files[f"{scorer['path']}/files/{rel}"]))
        scorer["digest"] = framed_digest(SCORER_TAG, components)
    for dataset in b["datasets"]:
        if dataset["path"] in files:
            dataset["digest"] = json_digest(eb.json(dataset["path"]))
        for example in dataset["examples"]:
            if example["path"] is not None and example["path"] in files:
                example["digest"] = _sha(files[example["path"]])
    tree = TreeBuilder()
    for check in b["checks"]:
        if check["path"] is not None and check["path"] in files:
            check["digest"] = _sha(files[check["path"]])
        cases = check["cases"]
        if cases["path"] is None or cases["path"] not in files:
            continue
        data = files[cases["path"]]
        cases["digest"] = _sha(data)
        lines = _case_lines(data)
        cases["total"] += len(lines) - cases["exported"]
        cases["exported"] = len(lines)
        for line in lines:
            tree.append(line)
    b["cases_tree"] = {"tree_size": tree.size, "root": tree.root().hex()}
    blobs = [p for p in files if p.startswith("data/blobs/sha256/")]
    b["payloads"] = sorted(
        ({"digest": _sha(files[p]), "size": len(files[p]), "path": p} for p in blobs),
        key=lambda p: p["digest"],
    )
    eb.set_bundle(b)


def refresh_tag_files(
    eb: EditableBag,
    *,
    manifest: bool = True,
    bag_info: bool = True,
    head: bool = True,
    tagmanifest: bool = True,
) -> None:
    """Recompute the tag files from the data/ files and bundle.json, as asked."""
    files = eb.files
    data_files = {p: eb.sha256_hex(p) for p in eb.paths() if p.startswith("data/")}
    if manifest:
        files[bag.MANIFEST] = bag.manifest(data_files)
    if bag_info:
        info = bag.parse_bag_info(files[bag.BAG_INFO], source=bag.BAG_INFO)
        total = sum(eb.size(p) for p in data_files)
        info["Payload-Oxum"] = bag.payload_oxum(total, len(data_files))
        if BUNDLE in files:
            # The digests follow bundle.json only while it is one we can read.
            info["Bundle-Digest"] = bytes_digest(files[BUNDLE])
            with contextlib.suppress(CanonicalJSONError, KeyError, TypeError):
                info["Report-Digest"] = canonical.loads(files[BUNDLE], source=BUNDLE)["report"][
                    "digest"
                ]
        files[bag.BAG_INFO] = bag.bag_info(list(info.items()))
    if head:
        bundle_bytes = files[BUNDLE]
        value = canonical.loads(bundle_bytes, source=BUNDLE)
        files[HEAD_FILE] = canonical.dumps(bundle_head(value, bytes_digest(bundle_bytes)))
    if tagmanifest:
        tags = {
            p: eb.sha256_hex(p)
            for p in eb.paths()
            if not p.startswith("data/") and p != bag.TAG_MANIFEST
        }
        files[bag.TAG_MANIFEST] = bag.manifest(tags)


# ------------------------------------------------------------------------------ writing


def _rank(path: str) -> int:
    """Position of a bag file's group in the exporter's member order (export.py)."""
    parts = path.split("/")
    if path == "data/report/body.json":
        return 0
    if path == "data/report/envelope.json":
        return 1
    if path.startswith("data/suite/"):
        return 2
    if path.startswith("data/scorers/"):
        return 3
    if path.startswith("data/datasets/"):
        return 7 if len(parts) > 5 and parts[4] == "examples" else 4
    if path.startswith("data/checks/"):
        return 5
    if path.startswith("data/cases/"):
        return 6
    if path.startswith("data/blobs/"):
        return 8
    if path == BUNDLE:
        return 10
    if path.startswith("data/"):
        return 9
    tag_order = [bag.BAGIT, bag.BAG_INFO, bag.MANIFEST, HEAD_FILE, HEAD_SIG_FILE]
    if path in tag_order:
        return 11 + tag_order.index(path)
    if path == bag.TAG_MANIFEST:
        return 17
    return 16


def member_order(eb: EditableBag) -> list[str]:
    """The bag's files in the exporter's order; within a group, as they were read or added."""
    paths = eb.paths()
    position = {p: i for i, p in enumerate(paths)}
    return sorted(paths, key=lambda p: (_rank(p), position[p]))


def tar_bytes(eb: EditableBag) -> bytes:
    """The uncompressed tar of ``eb``, directories just before their first member."""
    sink = io.BytesIO()
    write_members(eb, sink)
    return sink.getvalue()


def write_members(eb: EditableBag, sink: Any) -> None:
    """Write the tar of ``eb`` to ``sink`` (anything with ``write``), streamed members too."""
    writer = TarWriter(sink, mtime=eb.mtime)
    writer.add_dir(eb.top)
    made = {eb.top}
    for path in member_order(eb):
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            directory = eb.top + "/" + "/".join(parts[:i])
            if directory not in made:
                writer.add_dir(directory)
                made.add(directory)
        if path in eb.streamed:
            size, chunks = eb.streamed[path]
            writer.add_file_chunks(f"{eb.top}/{path}", size, chunks())
        else:
            writer.add_file(f"{eb.top}/{path}", eb.files[path])
    writer.close()


def repack(
    eb: EditableBag,
    *,
    bundle_json: bool = True,
    manifest: bool = True,
    bag_info: bool = True,
    head: bool = True,
    tagmanifest: bool = True,
) -> bytes:
    """Recompute what is asked (everything by default) and return the uncompressed tar.

    ``eb`` itself is updated with the recomputed files.
    """
    if bundle_json:
        refresh_bundle_json(eb)
    refresh_tag_files(eb, manifest=manifest, bag_info=bag_info, head=head, tagmanifest=tagmanifest)
    return tar_bytes(eb)


def write_bundle(
    eb: EditableBag,
    path: Path,
    *,
    modes: Mapping[str, int] | None = None,
    level: int = 3,
    **recompute: bool,
) -> Path:
    """Write ``eb`` as a .tar.zst at ``path`` (see ``repack`` for ``recompute``).

    ``modes`` overrides the mode field of named members (full archive names). Streamed
    members are written through to the file without being held in memory.
    """
    if eb.streamed:
        assert not modes, "modes cannot be patched into a streamed archive"
        if recompute.get("bundle_json", True):
            refresh_bundle_json(eb)
        refresh_tag_files(
            eb,
            **{k: v for k, v in recompute.items() if k != "bundle_json"},
        )
        compressor = zstandard.ZstdCompressor(level=level, write_checksum=True)
        with open(path, "wb") as fh, compressor.stream_writer(fh, closefd=False) as zout:
            write_members(eb, zout)
        return path
    tar = repack(eb, **recompute)
    if modes:
        tar = set_modes(tar, modes)
    path.write_bytes(compress(tar, level=level))
    return path


def write_tar(tar: bytes, path: Path, *, level: int = 3) -> Path:
    """Compress an (edited) uncompressed tar into ``path``."""
    path.write_bytes(compress(tar, level=level))
    return path


# ------------------------------------------------------------------- byte-level tools


@dataclass(frozen=True)
class HeaderBlock:
    offset: int
    name: str
    typeflag: bytes
    size: int


def _field(block: bytes, start: int, end: int) -> bytes:
    return block[start:end].split(b"\0", 1)[0]


def header_blocks(tar: bytes) -> list[HeaderBlock]:
    """Every header block of a well-formed ustar/pax tar we wrote, pax headers included.

    A pax header's ``path`` record names the member that follows it.
    """
    blocks = []
    offset = 0
    pending: str | None = None
    while offset + BLOCK <= len(tar):
        block = tar[offset : offset + BLOCK]
        if not block.strip(b"\0"):
            break
        size = int(block[124:136].rstrip(b"\0 ") or b"0", 8)
        typeflag = block[156:157]
        name = _field(block, 0, 100)
        prefix = _field(block, 345, 500)
        full = (prefix + b"/" + name if prefix else name).decode("utf-8")
        if typeflag == b"x":
            body = tar[offset + BLOCK : offset + BLOCK + size]
            for record in body.split(b"\n"):
                key, _, value = record.partition(b" ")[2].partition(b"=")
                if key == b"path":
                    pending = value.decode("utf-8")
        elif pending is not None:
            full, pending = pending, None
        blocks.append(HeaderBlock(offset, full.rstrip("/"), typeflag, size))
        offset += BLOCK + size + (-size % BLOCK)
    return blocks


def set_modes(tar: bytes, modes: Mapping[str, int]) -> bytes:
    """``tar`` with the mode field of the named members rewritten (checksum updated)."""
    out = bytearray(tar)
    found = set()
    for h in header_blocks(tar):
        if h.typeflag != b"x" and h.name in modes:
            block = bytearray(out[h.offset : h.offset + BLOCK])
            block[100:108] = b"%07o\0" % modes[h.name]
            block[148:156] = b" " * 8
            block[148:156] = b"%06o\0 " % sum(block)
            out[h.offset : h.offset + BLOCK] = block
            found.add(h.name)
    missing = set(modes) - found
    assert not missing, f"no such members: {sorted(missing)}"
    return bytes(out)
