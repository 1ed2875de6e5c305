"""Strict reader of an EvalBook store root (SPEC section 3).

A store root is read through a ``StoreSource``: a local directory here, an ``s3://``
prefix through ``bundler.storage.S3StoreSource``. The reader knows every path it needs
(nothing is listed), validates each document against its schema and the
stored-canonical rule where SPEC requires it, and reports a bad file as one
``StoreError`` line naming the file (and line, for JSON Lines). Absent items return
``None`` so the exporter can list them; only payloads are streamed.
"""

from __future__ import annotations

import difflib
import errno
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from bundler.archive import bag_reader
from bundler.core import canonical, schemas
from bundler.core.digests import bytes_digest
from bundler.core.envelope import supersession_problem
from bundler.core.errors import CanonicalJSONError, InputError, StoreError
from bundler.evalbook.contract import INLINE_PAYLOAD_MAX_BYTES, MAX_EVIDENCE_REFS
from bundler.evalbook.scorers import scorer_file_order, scorer_version_digest

IDENTIFIER_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
# Store documents are indexes and descriptors; a cap keeps a hostile store from
# exhausting memory. Case files are streamed line by line and capped per line.
# The bundle reader's own cap: a document no bundle can hold is refused from its size.
MAX_DOCUMENT_BYTES = bag_reader.MAX_DOCUMENT_BYTES
MAX_CASE_LINE_BYTES = 16 * 1024 * 1024
CHUNK = 1024 * 1024
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def check_identifier(value: str, *, what: str, source: str, param: str | None = None) -> str:
    """Return ``value`` if it is a valid store identifier, else raise StoreError (naming
    ``param`` when ``source`` is a parameter of the library)."""
    if not isinstance(value, str) or IDENTIFIER_RE.match(value) is None:
        raise StoreError(
            f"{source}: invalid {what} {value!r} "
            "(identifiers match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$)",
            param=param,
        )
    return value


def check_relative_path(value: str, *, source: str) -> str:
    """A scorer file path: identifier segments joined by '/', nothing that escapes."""
    segments = value.split("/") if isinstance(value, str) else []
    if not segments or any(IDENTIFIER_RE.match(s) is None for s in segments):
        raise StoreError(
            f"{source}: invalid file path {value!r} "
            "(each segment must be an identifier; no '..', '.', empty segments or '\\')"
        )
    return value


class StoreSource(Protocol):
    """Where store files come from. ``relpath`` is a validated POSIX relative path."""

    def describe(self, relpath: str) -> str:
        """The file's name for messages (a path or an s3:// URL)."""
        ...

    def read_bytes(self, relpath: str, *, max_size: int) -> bytes | None:
        """The whole file, or None when absent; StoreError when over ``max_size``."""
        ...

    def open_stream(self, relpath: str) -> tuple[BinaryIO, int] | None:
        """A stream of the file and its size, or None when absent."""
        ...

    def list_names(self, reldir: str, *, limit: int) -> list[str]:
        """The names directly under the directory ``reldir`` (files and directories
        alike), in no particular order; empty when it is absent. StoreError when there
        are more than ``limit``."""
        ...


class LocalStoreSource:
    """A store root on the local file system.

    Every directory must resolve inside the root (a symlink that points out of the store
    is refused); files must be regular files, not symlinks or special files.
    """

    def __init__(self, root: Path) -> None:
        if not root.exists() and not root.is_symlink():
            raise StoreError(f"{root}: store root does not exist")
        if not root.is_dir():
            raise StoreError(f"{root}: store root is not a directory")
        self.root = root
        self._root_text = os.path.join(str(root), "")
        self._real_root = root.resolve()
        self._dirs: dict[str, bool] = {}  # relative directory -> exists (inside the root)

    def describe(self, relpath: str) -> str:
        return str(self.root / relpath)

    def _directory_ok(self, reldir: str) -> bool:
        """Whether a directory exists; StoreError when it resolves outside the root.

        Checked once per directory, so reading 20,000 payloads costs 20,000 opens, not
        20,000 full path resolutions.
        """
        known = self._dirs.get(reldir)
        if known is not None:
            return known
        path = self.root / reldir
        try:
            real = path.resolve(strict=True)
        except FileNotFoundError:
            self._dirs[reldir] = False
            return False
        except (OSError, RuntimeError) as exc:
            raise StoreError(f"{path}: cannot resolve ({exc})") from exc
        if not real.is_relative_to(self._real_root):
            raise StoreError(f"{path}: resolves outside the store root (symlink escape)")
        self._dirs[reldir] = real.is_dir()
        return self._dirs[reldir]

    def _open_fd(self, relpath: str) -> int | None:
        """Open a regular file without following a final symlink; None when absent.

        A symlinked file is refused outright (whether or not it points outside the
        store): evidence is read from regular files only. Returns a raw descriptor:
        an export opens 20,000 files or more, and a buffered file object per file was
        a measurable share of it.
        """
        reldir, _, _ = relpath.rpartition("/")
        if not self._directory_ok(reldir):
            return None
        path = self._root_text + relpath
        # O_NONBLOCK: opening a FIFO planted in the store must not hang the export; it has
        # no effect on reading a regular file.
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise StoreError(
                    f"{self.describe(relpath)}: is a symbolic link (store files must be "
                    "regular files)"
                ) from exc
            raise StoreError(f"{self.describe(relpath)}: cannot read ({exc.strerror})") from exc
        return fd

    def _regular_size(self, fd: int, relpath: str) -> int:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StoreError(f"{self.describe(relpath)}: not a regular file")
        return info.st_size

    def read_bytes(self, relpath: str, *, max_size: int) -> bytes | None:
        fd = self._open_fd(relpath)
        if fd is None:
            return None
        try:
            size = self._regular_size(fd, relpath)
            if size > max_size:
                raise StoreError(f"{self.describe(relpath)}: larger than {max_size} bytes")
            # One read sized from fstat (plus one byte, to see a file that grew), then
            # more only if the file grew or the read came back short.
            parts: list[bytes] = []
            got = 0
            want = size + 1
            while True:
                try:
                    chunk = os.read(fd, want)
                except OSError as exc:
                    raise StoreError(
                        f"{self.describe(relpath)}: cannot read ({exc.strerror})"
                    ) from exc
                if not chunk:
                    break
                parts.append(chunk)
                got += len(chunk)
                if got > max_size:
                    raise StoreError(f"{self.describe(relpath)}: larger than {max_size} bytes")
                want = max(CHUNK, size + 1 - got)
        finally:
            os.close(fd)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def open_stream(self, relpath: str) -> tuple[BinaryIO, int] | None:
        fd = self._open_fd(relpath)
        if fd is None:
            return None
        try:
            size = self._regular_size(fd, relpath)
        except BaseException:
            os.close(fd)
            raise
        return os.fdopen(fd, "rb"), size

    def list_names(self, reldir: str, *, limit: int) -> list[str]:
        # The directory is checked like any other (inside the root, never a symlink
        # escape); its entries are only named here, never followed or opened.
        if not self._directory_ok(reldir):
            return []
        path = self.root / reldir
        names: list[str] = []
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    if len(names) >= limit:
                        raise StoreError(f"{path}: more than {limit} entries")
                    names.append(entry.name)
        except OSError as exc:
            raise StoreError(f"{path}: cannot list ({exc.strerror})") from exc
        return names


def open_source(root: str, *, endpoint_url: str | None = None) -> StoreSource:
    """A store source for a local directory or an ``s3://bucket/prefix`` root."""
    if root.startswith("s3://"):
        from bundler import storage  # boto3 is imported only when a bucket is used

        return storage.S3StoreSource.from_url(
            root, config=storage.StorageConfig(endpoint_url=endpoint_url)
        )
    return LocalStoreSource(Path(root))


@dataclass(frozen=True)
class Document:
    """A store JSON document: its exact bytes and the parsed value."""

    relpath: str
    data: bytes
    value: Any

    @property
    def sha256(self) -> str:
        return bytes_digest(self.data)


@dataclass(frozen=True)
class CaseLine:
    """One case: its 1-based line number, canonical bytes (no newline) and value."""

    line: int
    data: bytes
    value: dict[str, Any]


@dataclass(frozen=True)
class ScorerFile:
    relpath: str  # relative to the scorer version directory, e.g. "files/judge.txt"
    data: bytes


@dataclass(frozen=True)
class ScorerVersion:
    scorer_id: str
    version: int
    descriptor: Document
    files: tuple[ScorerFile, ...]
    digest: str | None  # None when a listed file is missing
    missing_file: str | None

    @property
    def relpath(self) -> str:
        return f"scorers/{self.scorer_id}/{self.version}"


class Store:
    """Typed, validated access to one store root."""

    def __init__(self, source: StoreSource) -> None:
        self.source = source

    # -- generic documents ---------------------------------------------------------

    def _parse(
        self, relpath: str, data: bytes, *, schema: str | None, stored_canonical: bool
    ) -> Any:
        where = self.source.describe(relpath)
        try:
            # Bounded before parsing by the bundle reader's value cap: parsing costs far
            # more memory than the bytes.
            if stored_canonical:
                value = canonical.loads_canonical(
                    data, source=where, max_values=canonical.MAX_VALUES
                )
            else:
                value = canonical.loads(data, source=where, max_values=canonical.MAX_VALUES)
        except CanonicalJSONError as exc:
            raise StoreError(exc.message) from exc
        if schema is not None:
            schemas.validate(schema, value, source=where)
        return value

    def document(
        self, relpath: str, *, schema: str | None, stored_canonical: bool
    ) -> Document | None:
        """Read, parse and validate a JSON document; None when the file is absent."""
        data = self.source.read_bytes(relpath, max_size=MAX_DOCUMENT_BYTES)
        if data is None:
            return None
        return Document(
            relpath,
            data,
            self._parse(relpath, data, schema=schema, stored_canonical=stored_canonical),
        )

    # -- the stores ----------------------------------------------------------------

    def access(self) -> dict[str, frozenset[str]]:
        """Principals and their permissions from ``access.json`` (required)."""
        doc = self.document("access.json", schema="access", stored_canonical=False)
        if doc is None:
            raise StoreError(
                f"{self.source.describe('access.json')}: missing (who may export is unknown)"
            )
        return {p: frozenset(perms) for p, perms in doc.value["principals"].items()}

    def report_body(self, report_id: str) -> Document:
        """The issued report body; InputError when the report does not exist."""
        check_identifier(report_id, what="report id", source="report_id", param="report_id")
        relpath = f"reports/{report_id}/body.json"
        doc = self.document(relpath, schema="report-body", stored_canonical=True)
        if doc is None:
            near = self._near_report_ids(report_id)
            hint = f"; did you mean {' or '.join(map(repr, near))}?" if near else ""
            # The report id names the missing report, not the store: a library call
            # reads report_id, the command line --report (``BundlerError.relabel``).
            raise InputError(
                f"report_id {report_id!r}: no such report in the store "
                f"({self.source.describe(relpath)} is absent){hint}",
                param="report_id",
            )
        if doc.value["report_id"] != report_id:
            raise StoreError(
                f"{self.source.describe(relpath)}: report_id {doc.value['report_id']!r} "
                f"does not match its directory {report_id!r}"
            )
        return doc

    def _near_report_ids(self, report_id: str) -> list[str]:
        """The ids of a local store's reports closest to a mistyped one (at most three)."""
        root = getattr(self.source, "root", None)
        if not isinstance(root, Path):
            return []
        try:
            with os.scandir(root / "reports") as entries:
                names = [e.name for _, e in zip(range(100_000), entries, strict=False)]
        except OSError:
            return []
        return difflib.get_close_matches(report_id, names, n=3, cutoff=0.6)

    def envelope(self, report_id: str) -> Document:
        relpath = f"reports/{report_id}/envelope.json"
        doc = self.document(relpath, schema="envelope", stored_canonical=False)
        if doc is None:
            raise StoreError(
                f"{self.source.describe(relpath)}: missing (every report has an envelope)"
            )
        return doc

    def check_supersession(self, report_id: str, body: Document, envelope: Document) -> None:
        """Raises StoreError when the envelope names the report itself as its successor
        or a supersession before the report's issue (``core.envelope``)."""
        problem = supersession_problem(
            body.value.get("report_id"), body.value.get("issued_at"), envelope.value
        )
        if problem is not None:
            where = self.source.describe(f"reports/{report_id}/envelope.json")
            raise StoreError(f"{where}: /{problem[0]}: {problem[1]} (SPEC 3.2)")

    def reports(self, progress: Callable[[int, int], None] | None = None) -> list[ReportEntry]:
        """Every report under ``reports/``, sorted by id (bytewise), with its result,
        ``issued_at`` and envelope status (SPEC 3.1, 3.2).

        A report that cannot be read whole is still listed, with its problems named (a
        name that is not an identifier, a body or envelope that is missing, unreadable or
        invalid); the rest are read on. The reader's caps and safe opens apply to every
        file. ``progress`` gets (reports read, reports listed). Raises StoreError when
        the directory cannot be listed or holds more than ``MAX_LISTED_REPORTS``
        entries, StorageError when object storage fails.
        """
        names = self.source.list_names("reports", limit=MAX_LISTED_REPORTS)
        names.sort(key=_name_bytes)
        entries: list[ReportEntry] = []
        for done, name in enumerate(names, start=1):
            entry = self._report_entry(name)
            if entry is not None:
                entries.append(entry)
            if progress is not None:
                progress(done, len(names))
        return entries

    def _report_entry(self, name: str) -> ReportEntry | None:
        """The listing of ``reports/<name>``; None for the archive area (SPEC 6)."""
        if IDENTIFIER_RE.match(name) is None:
            return ReportEntry(
                name,
                problems=(
                    f"{self.source.describe('reports/' + name)}: not a report id "
                    "(identifiers match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$)",
                ),
            )
        where_body = self.source.describe(f"reports/{name}/body.json")
        where_envelope = self.source.describe(f"reports/{name}/envelope.json")
        body, body_problem = self._listed_document(
            f"reports/{name}/body.json", schema="report-body", stored_canonical=True
        )
        envelope, envelope_problem = self._listed_document(
            f"reports/{name}/envelope.json", schema="envelope", stored_canonical=False
        )
        nothing = body is None and envelope is None and body_problem == envelope_problem is None
        if nothing:
            if name == ARCHIVE_AREA:
                return None  # reports/bundles/ of an archive prefix that is the store root
            return ReportEntry(
                name,
                problems=(
                    f"{self.source.describe('reports/' + name)}: holds neither body.json nor "
                    "envelope.json (not a report)",
                ),
            )
        problems: list[str] = []
        result = issued_at = None
        if body_problem is not None:
            problems.append(body_problem)
        elif body is None:
            problems.append(f"{where_body}: missing (every report has a body)")
        elif body.value["report_id"] != name:
            problems.append(
                f"{where_body}: report_id {body.value['report_id']!r} does not match its "
                f"directory {name!r}"
            )
        else:
            result, issued_at = body.value["result"], body.value["issued_at"]
        if envelope_problem is not None:
            problems.append(envelope_problem)
        elif envelope is None:
            problems.append(f"{where_envelope}: missing (every report has an envelope)")
        else:
            value = envelope.value
            return ReportEntry(
                name,
                result,
                issued_at,
                value["status"],
                value["superseded_by"],
                value["superseded_at"],
                value["superseded_reason"],
                tuple(problems),
            )
        return ReportEntry(name, result, issued_at, problems=tuple(problems))

    def _listed_document(
        self, relpath: str, *, schema: str, stored_canonical: bool
    ) -> tuple[Document | None, str | None]:
        """A document for the listing, or the one-line problem that keeps it out."""
        try:
            doc = self.document(relpath, schema=schema, stored_canonical=stored_canonical)
        except InputError as exc:
            return None, exc.message
        return doc, None

    def check_result(self, report_id: str, check_id: str) -> Document | None:
        relpath = f"reports/{report_id}/checks/{check_id}.json"
        doc = self.document(relpath, schema="check-result", stored_canonical=False)
        if doc is not None and doc.value["check_id"] != check_id:
            raise StoreError(
                f"{self.source.describe(relpath)}: check_id {doc.value['check_id']!r} "
                f"does not match its file name"
            )
        return doc

    def iter_cases(
        self, report_id: str, check_id: str, *, parse_first: int | None = None
    ) -> Iterator[CaseLine] | None:
        """Stream the cases of one check, validating each line; None when absent.

        With ``parse_first``, only that many lines are parsed and validated; the rest
        (cases cut by ``case_limit``, never exported) are only counted, yielded with
        an empty value, so a store of millions of lines costs a read, not a parse.
        """
        relpath = f"reports/{report_id}/cases/{check_id}.jsonl"
        opened = self.source.open_stream(relpath)
        if opened is None:
            return None
        return self._case_lines(relpath, opened[0], check_id, parse_first)

    def _case_lines(
        self, relpath: str, stream: BinaryIO, check_id: str, parse_first: int | None
    ) -> Iterator[CaseLine]:
        where = self.source.describe(relpath)
        with stream:
            for number, raw in enumerate(_iter_lines(stream, where), start=1):
                line_where = f"{where}:{number}"
                if not raw:
                    raise StoreError(f"{line_where}: empty line (one case per line)")
                if parse_first is not None and number > parse_first:
                    yield CaseLine(number, b"", {})
                    continue
                try:
                    value = canonical.loads_canonical(raw, source=line_where)
                except CanonicalJSONError as exc:
                    raise StoreError(exc.message) from exc
                schemas.validate("case", value, source=line_where)
                if value["check_id"] != check_id:
                    raise StoreError(
                        f"{line_where}: case check_id {value['check_id']!r} does not match file {check_id!r}"
                    )
                if (problem := payload_ref_problem(value)) is not None:
                    raise StoreError(f"{line_where}: {problem}")
                yield CaseLine(number, raw, value)

    def suite(self, suite_id: str, version: int) -> Document | None:
        return self.document(
            f"suites/{suite_id}/{version}.json", schema="suite", stored_canonical=True
        )

    def scorer(self, scorer_id: str, version: int) -> ScorerVersion | None:
        """A scorer version with its framed digest (SPEC 3.5); None when absent."""
        base = f"scorers/{scorer_id}/{version}"
        desc = self.document(f"{base}/scorer.json", schema="scorer", stored_canonical=True)
        if desc is None:
            return None
        where = self.source.describe(f"{base}/scorer.json")
        paths = [check_relative_path(p, source=where) for p in desc.value["files"]]
        files: list[ScorerFile] = []
        missing: str | None = None
        for path in scorer_file_order(paths):
            data = self.source.read_bytes(f"{base}/files/{path}", max_size=MAX_DOCUMENT_BYTES)
            if data is None:
                missing = f"files/{path}"
                break
            files.append(ScorerFile(f"files/{path}", data))
        digest = (
            None
            if missing
            else scorer_version_digest(desc.data, [(f.relpath, f.data) for f in files])
        )
        return ScorerVersion(scorer_id, version, desc, tuple(files), digest, missing)

    def dataset_manifest(self, dataset_id: str, version: int) -> Document | None:
        doc = self.document(
            f"datasets/{dataset_id}/{version}/manifest.json",
            schema="dataset-manifest",
            stored_canonical=True,
        )
        if doc is not None:
            ids = [e["example_id"] for e in doc.value["examples"]]
            if ids != sorted(ids) or len(set(ids)) != len(ids):
                raise StoreError(
                    f"{self.source.describe(doc.relpath)}: examples must be unique and sorted by example_id"
                )
        return doc

    def retention(self, dataset_id: str, version: int) -> dict[str, dict[str, Any]]:
        """example_id -> retention line, for bodies that retention removed."""
        relpath = f"datasets/{dataset_id}/{version}/retention.jsonl"
        opened = self.source.open_stream(relpath)
        if opened is None:
            return {}
        where = self.source.describe(relpath)
        removed: dict[str, dict[str, Any]] = {}
        with opened[0] as stream:
            for number, raw in enumerate(_iter_lines(stream, where), start=1):
                line_where = f"{where}:{number}"
                try:
                    value = canonical.loads(raw, source=line_where)
                except CanonicalJSONError as exc:
                    raise StoreError(exc.message) from exc
                schemas.validate("retention-line", value, source=line_where)
                removed[value["example_id"]] = value
        return removed

    def example(self, dataset_id: str, version: int, example_id: str) -> bytes | None:
        return self.source.read_bytes(
            f"datasets/{dataset_id}/{version}/examples/{example_id}.json",
            max_size=MAX_DOCUMENT_BYTES,
        )

    def blob(self, hex_digest: str, *, max_size: int) -> bytes | None:
        """An inline payload or evidence manifest from ``blobs/``; None when absent.

        Raises StoreError for a file larger than ``max_size``.
        """
        return self.source.read_bytes(f"blobs/sha256/{hex_digest}", max_size=max_size)

    def parse_evidence_manifest(self, doc: Document) -> dict[str, Any]:
        """Validate an evidence manifest whose digest already matched (SPEC 3.1)."""
        value = self._parse(
            doc.relpath, doc.data, schema="evidence-manifest", stored_canonical=False
        )
        keys = [(e["digest"], e["kind"]) for e in value["evidence"]]
        if keys != sorted(set(keys)):
            raise StoreError(
                f"{self.source.describe(doc.relpath)}: evidence entries must be unique "
                "and sorted by (digest, kind)"
            )
        if len(keys) <= MAX_EVIDENCE_REFS:
            raise StoreError(
                f"{self.source.describe(doc.relpath)}: an evidence manifest stands for more "
                f"than {MAX_EVIDENCE_REFS} evidence items, this one has {len(keys)}"
            )
        return dict(value)


REPORTS_LINE_SCHEMA = "evalbook.reports_line.v1"
# One listing holds the names of at most this many entries of reports/.
MAX_LISTED_REPORTS = 100_000
# SPEC 6 keeps archives under <prefix>/reports/bundles/; a store root that is also an
# archive prefix has that directory beside its reports.
ARCHIVE_AREA = "bundles"


@dataclass(frozen=True)
class ReportEntry:
    """One report as ``reports`` lists it; a field is None when its document is bad."""

    report_id: str  # the directory name, as found (it may not be an identifier)
    result: str | None = None
    issued_at: str | None = None
    status: str | None = None  # the envelope's: current | superseded
    superseded_by: str | None = None
    superseded_at: str | None = None
    superseded_reason: str | None = None
    problems: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The ``reports --json`` line (schemas/reports-line.schema.json)."""
        envelope = None
        if self.status is not None:
            envelope = {
                "status": self.status,
                "superseded_by": self.superseded_by,
                "superseded_at": self.superseded_at,
                "superseded_reason": self.superseded_reason,
            }
        return {
            "schema": REPORTS_LINE_SCHEMA,
            "report_id": _json_text(self.report_id),
            "result": self.result,
            "issued_at": self.issued_at,
            "envelope": envelope,
            "problems": [_json_text(p) for p in self.problems],
        }


def _name_bytes(name: str) -> bytes:
    """A directory entry's name as the bytes it has on disk (for bytewise order)."""
    try:
        return name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogatepass")


def _json_text(text: str) -> str:
    """``text`` as valid Unicode: an undecodable file name's bytes become ``\\xNN``."""
    return _name_bytes(text).decode("utf-8", "backslashreplace")


def payload_ref_problem(case: dict[str, Any]) -> str | None:
    """Why a case's payload references break SPEC 3.3's size rule, or None.

    ``inline`` payloads are at most 262,144 bytes and ``sso`` ones larger; the verifier's
    claim 11 holds bundles to the same rule.
    """
    refs = ([case["output"]] if case["output"] else []) + case["evidence"]
    for ref in refs:
        if ref["location"] == "inline" and ref["size"] > INLINE_PAYLOAD_MAX_BYTES:
            return f"payload {ref['digest']} of {ref['size']} bytes is over the inline limit"
        if ref["location"] == "sso" and ref["size"] <= INLINE_PAYLOAD_MAX_BYTES:
            return (
                f"payload {ref['digest']} of {ref['size']} bytes at SSO is within the inline limit"
            )
    return None


def _iter_lines(stream: BinaryIO, where: str) -> Iterator[bytes]:
    """Split a JSON Lines stream on LF; a final line without LF is accepted."""
    pending = b""
    while True:
        chunk = stream.read(CHUNK)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        yield from lines
        if len(pending) > MAX_CASE_LINE_BYTES:
            raise StoreError(f"{where}: a line longer than {MAX_CASE_LINE_BYTES} bytes")
    if pending:
        yield pending
