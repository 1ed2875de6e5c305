"""The fixity ledger (SPEC sections 13 and 13.1): an SQLite database of the bundles an
archive holds and of every check made on them.

One row per bundle the ledger knows (``bundles``) and one PREMIS-style event per check
(``events``), plus one row per run (``runs``). Only the ``fixity`` process writes it,
one transaction per batch of results, in WAL mode, so a run killed at any point loses
at most the checks in flight and the next run does not re-check what it finished.

A bundle's ``verdict`` is its latest conclusive outcome (``pass``, ``fail``,
``missing``, or ``retired`` by the keeper); an ``error`` (nothing could be read) never
changes it, so a failure stays on record until a later check passes it or the keeper
retires it.

The ledger is checked before anything touches it (``inspect``, on a read-only
connection): a file that is not a ledger this tool wrote, or one of a newer schema, is
refused without one byte changed. The schema version is ``PRAGMA user_version`` and the
file is marked with ``PRAGMA application_id``; ``Ledger`` brings a version 1 ledger
forward on its first write.

Keys, details and the keeper's reasons are kept as they are: text, or, for a local file
name that is not UTF-8 (``surrogateescape`` in Python) and a detail naming one, a BLOB
of the exact bytes. They are escaped once, where they are shown, never in the ledger.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bundler.core.errors import InputError

SCHEMA_VERSION = 2
# "EBFX": marks a file as this tool's ledger (version 1 ledgers carry 0).
APPLICATION_ID = 0x45424658
DEFAULT_LEDGER = "evalbook-fixity.sqlite"

# Levels in order: a check at a level stands for every level below it.
LEVELS = ("object", "full")
# Outcomes that settle a bundle's verdict; "error" says nothing about the bundle.
CONCLUSIVE = ("pass", "fail", "missing")
OPEN_VERDICTS = ("fail", "missing")
RETIRED = "retired"

_V1 = """
CREATE TABLE bundles (
    source TEXT NOT NULL,
    key TEXT NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT,
    bundle_digest TEXT,
    report_id TEXT,
    first_seen TEXT NOT NULL,
    last_checked TEXT,
    last_level TEXT,
    last_outcome TEXT,
    last_object TEXT,
    last_full TEXT,
    PRIMARY KEY (source, key)
);
CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    key TEXT NOT NULL,
    time TEXT NOT NULL,
    level TEXT NOT NULL,
    outcome TEXT NOT NULL,
    detail TEXT NOT NULL,
    tool_version TEXT NOT NULL,
    run_id TEXT NOT NULL
);
CREATE INDEX events_by_bundle ON events (source, key, time);
CREATE INDEX events_by_run ON events (run_id);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    level TEXT NOT NULL,
    selection TEXT NOT NULL,
    started TEXT NOT NULL,
    finished TEXT,
    counts TEXT
);
"""

# Version 2: the verdict that survives errors and runs (SPEC 13.1), retirement, and what
# each check read.
_V2 = f"""
ALTER TABLE bundles ADD COLUMN verdict TEXT;
ALTER TABLE bundles ADD COLUMN verdict_since TEXT;
ALTER TABLE bundles ADD COLUMN verdict_detail TEXT;
ALTER TABLE bundles ADD COLUMN verdict_run TEXT;
ALTER TABLE bundles ADD COLUMN retired_sha256 TEXT;
ALTER TABLE bundles ADD COLUMN retired_size INTEGER;
ALTER TABLE events ADD COLUMN size INTEGER;
ALTER TABLE events ADD COLUMN bytes_read INTEGER;
ALTER TABLE events ADD COLUMN sha256 TEXT;
UPDATE bundles SET
    verdict = (SELECT e.outcome FROM events e WHERE e.source = bundles.source
               AND e.key = bundles.key AND e.outcome IN ('pass', 'fail', 'missing')
               ORDER BY e.time DESC, e.id DESC LIMIT 1),
    verdict_since = (SELECT e.time FROM events e WHERE e.source = bundles.source
               AND e.key = bundles.key AND e.outcome IN ('pass', 'fail', 'missing')
               ORDER BY e.time DESC, e.id DESC LIMIT 1),
    verdict_detail = (SELECT e.detail FROM events e WHERE e.source = bundles.source
               AND e.key = bundles.key AND e.outcome IN ('pass', 'fail', 'missing')
               ORDER BY e.time DESC, e.id DESC LIMIT 1),
    verdict_run = (SELECT e.run_id FROM events e WHERE e.source = bundles.source
               AND e.key = bundles.key AND e.outcome IN ('pass', 'fail', 'missing')
               ORDER BY e.time DESC, e.id DESC LIMIT 1);
CREATE INDEX bundles_open ON bundles (source, verdict);
PRAGMA application_id = {APPLICATION_ID};
"""

# Step n brings a ledger at user_version n to n + 1, in one transaction.
_MIGRATIONS = (_V1, _V2)
assert len(_MIGRATIONS) == SCHEMA_VERSION

# The columns of each table, by version: anything else is not this tool's ledger.
_V1_COLUMNS = {
    "bundles": [
        "source",
        "key",
        "size",
        "sha256",
        "bundle_digest",
        "report_id",
        "first_seen",
        "last_checked",
        "last_level",
        "last_outcome",
        "last_object",
        "last_full",
    ],
    "events": [
        "id",
        "source",
        "key",
        "time",
        "level",
        "outcome",
        "detail",
        "tool_version",
        "run_id",
    ],
    "runs": ["run_id", "source", "level", "selection", "started", "finished", "counts"],
}
_V2_COLUMNS = {
    "bundles": _V1_COLUMNS["bundles"]
    + [
        "verdict",
        "verdict_since",
        "verdict_detail",
        "verdict_run",
        "retired_sha256",
        "retired_size",
    ],
    "events": _V1_COLUMNS["events"] + ["size", "bytes_read", "sha256"],
    "runs": _V1_COLUMNS["runs"],
}
_COLUMNS_BY_VERSION = {1: (_V1_COLUMNS, 0), 2: (_V2_COLUMNS, APPLICATION_ID)}
# The indexes each version has; a ledger holds no trigger, view or other index.
_V1_INDEXES = ("events_by_bundle", "events_by_run")
_INDEXES_BY_VERSION = {1: _V1_INDEXES, 2: (*_V1_INDEXES, "bundles_open")}


def db_key(key: str) -> str | bytes:
    """A key (or a detail, a reason) as the ledger stores it: text, or the exact bytes of
    a name that is not UTF-8."""
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return key.encode("utf-8", "surrogateescape")
    return key


def py_key(value: str | bytes) -> str:
    """A key as the ledger stored it, back as a (``surrogateescape``) str."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


@dataclass(frozen=True)
class KnownBundle:
    """What the ledger recorded for one bundle."""

    key: str
    size: int
    sha256: str | None
    bundle_digest: str | None
    report_id: str | None
    first_seen: str
    last_object: str | None  # last check at level object or above
    last_full: str | None
    last_outcome: str | None
    verdict: str | None = None  # latest conclusive outcome, or "retired"
    verdict_since: str | None = None  # when that verdict was first reached
    verdict_detail: str | None = None
    retired_sha256: str | None = None  # the bytes the keeper retired
    retired_size: int | None = None

    def last_at(self, level: str) -> str | None:
        """The time of the last check at ``level`` or above (None: never)."""
        return self.last_full if level == "full" else self.last_object

    @property
    def has_baseline(self) -> bool:
        """Whether a check passed it once: its SHA-256 was taken from an archive that
        verified, so level ``object`` has something true to compare with."""
        return self.sha256 is not None

    @property
    def due_first(self) -> bool:
        """Its latest outcome is fail, missing or error: checked again before any other."""
        return self.verdict in OPEN_VERDICTS or self.last_outcome == "error"


@dataclass(frozen=True)
class OpenFailure:
    """A bundle whose latest conclusive outcome is fail or missing (SPEC 13.1)."""

    key: str
    outcome: str
    found: str  # when the run that found it checked it
    detail: str
    run_id: str | None


@dataclass(frozen=True)
class Event:
    """One check's outcome, as the ledger records it."""

    key: str
    time: str
    level: str
    outcome: str
    detail: str
    size: int | None = None
    sha256: str | None = None
    bundle_digest: str | None = None
    report_id: str | None = None
    bytes_read: int = 0
    baseline: bool = False  # a pass at first sight: its digests become the baseline


def _refuse(where: str, why: str) -> InputError:
    return InputError(f"{where}: {why}; refusing to use it as the fixity ledger")


def inspect(path: Path) -> int | None:
    """Check that ``path`` is a ledger this tool can use, without changing one byte of
    it; its schema version, or None when there is no file yet. InputError (exit 3)
    naming the file otherwise: a file that is not SQLite or is corrupt, a newer schema
    version, foreign, missing or extra tables or columns, a view in place of a table."""
    where = str(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _refuse(where, f"cannot read it ({exc.strerror})") from exc
    if not os.path.isfile(path):
        raise _refuse(where, "not a regular file")
    if info.st_size == 0:
        return 0  # what sqlite makes first of a new ledger: one a run killed at once left
    try:
        conn = _read_only(path)
    except sqlite3.Error as exc:
        raise _refuse(where, f"cannot open it ({exc})") from exc
    try:
        return _inspect(conn, where)
    except sqlite3.Error as exc:
        raise _refuse(where, f"not a readable SQLite database ({exc})") from exc
    finally:
        conn.close()


def _read_only(path: Path) -> sqlite3.Connection:
    """A connection that changes nothing beside ``path`` either: read-only, by URI, and,
    while no write-ahead log is beside it (every write of a finished run is then in
    the file itself), ``immutable``, so SQLite creates no ``-wal`` or ``-shm`` file for
    a ledger that may yet be refused. A log left by a killed run is read as it is."""
    wal = os.path.lexists(f"{path}-wal")
    uri = "file:" + _uri_path(path) + ("?mode=ro" if wal else "?mode=ro&immutable=1")
    return sqlite3.connect(uri, uri=True, isolation_level=None)


def _uri_path(path: Path) -> str:
    from urllib.parse import quote

    return quote(os.path.abspath(path))


def _inspect(conn: sqlite3.Connection, where: str) -> int:
    check = conn.execute("PRAGMA quick_check").fetchall()
    if check != [("ok",)]:
        first = str(check[0][0]) if check else "no answer"
        raise _refuse(where, f"corrupt (quick_check: {first[:200]})")
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
    definitions = {
        (str(kind), str(name)): sql
        for kind, name, sql in conn.execute("SELECT type, name, sql FROM sqlite_master")
        if not str(name).startswith("sqlite_")
    }
    schema = list(definitions)
    objects = {name: kind for kind, name in schema if kind in ("table", "view")}
    if version > SCHEMA_VERSION and app_id in (0, APPLICATION_ID):
        raise InputError(
            f"{where}: ledger schema version {version} is newer than this tool's "
            f"{SCHEMA_VERSION}; use a newer evalbook-bundle (the file was not changed)"
        )
    if version == 0 and app_id == 0 and not objects:
        return 0  # an empty database: a new ledger whose first transaction never ended
    if version not in _COLUMNS_BY_VERSION:
        held = ", ".join(repr(name) for name in sorted(objects)[:5]) or "nothing"
        raise _refuse(where, f"not a fixity ledger (schema version {version}; it holds {held})")
    columns, expected_id = _COLUMNS_BY_VERSION[version]
    if app_id != expected_id:
        raise _refuse(where, f"not a fixity ledger (application id {app_id:#x})")
    for table, names in columns.items():
        kind = objects.get(table)
        if kind is None:
            raise _refuse(where, f"table {table!r} is missing")
        if kind != "table":
            raise _refuse(where, f"{table!r} is a {kind}, not a table")
        found = [str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")]
        if found != names:
            raise _refuse(where, f"table {table!r} is not this tool's (columns {found})")
    # Every other object is foreign: a trigger would run inside this tool's own
    # transactions (and could undo a verdict), an index or a view is none of ours.
    ours = {("table", name) for name in columns} | {
        ("index", name) for name in _INDEXES_BY_VERSION[version]
    }
    extra = sorted(set(schema) - ours)
    if extra:
        kind, name = extra[0]
        raise _refuse(where, f"holds {kind} {name!r}, which a ledger never has")
    missing = sorted(ours - set(schema))
    if missing:
        kind, name = missing[0]
        raise _refuse(where, f"{kind} {name!r} is missing")
    # The same names are not enough: a table's definition could carry a CHECK that
    # refuses a fail, a DEFAULT, another collation; an index could be partial. Each
    # definition must be the one this tool's own steps give (whitespace aside).
    expected = _definitions(version)
    for kind, name in sorted(ours):
        if _spaced(definitions[(kind, name)]) != _spaced(expected[(kind, name)]):
            raise _refuse(where, f"{kind} {name!r} is not defined as this tool defines it")
    return version


def _spaced(sql: object) -> str:
    return " ".join(str(sql).split())


@functools.cache
def _definitions(version: int) -> dict[tuple[str, str], object]:
    """The ``sqlite_master`` definitions a ledger at ``version`` holds, from this tool's
    own migration steps run on an empty database."""
    conn = sqlite3.connect(":memory:")
    try:
        for step in _MIGRATIONS[:version]:
            conn.executescript(step)
        return {
            (str(kind), str(name)): sql
            for kind, name, sql in conn.execute("SELECT type, name, sql FROM sqlite_master")
            if not str(name).startswith("sqlite_")
        }
    finally:
        conn.close()


def verdicts(path: Path, source: str) -> dict[str, str | None]:
    """Each bundle's verdict under ``source`` (a version 1 ledger: its last outcome),
    read without changing the file; for refusing a ``--retire`` before anything is
    written. The ledger must have passed ``inspect``."""
    conn = _read_only(path)
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        column = "verdict" if version >= 2 else "last_outcome"
        if version < 1:
            return {}
        rows = conn.execute(f"SELECT key, {column} FROM bundles WHERE source = ?", (source,))
        return {py_key(key): verdict for key, verdict in rows}
    except sqlite3.Error as exc:
        raise _refuse(str(path), f"not a readable SQLite database ({exc})") from exc
    finally:
        conn.close()


class Ledger:
    """A ledger open for writing: created when absent, brought to ``SCHEMA_VERSION``
    when older. Raises InputError (exit 3), before changing anything, when the file is
    not a ledger this tool can use (see ``inspect``)."""

    def __init__(self, path: Path, *, tool_version: str) -> None:
        self.path = path
        self.tool_version = tool_version
        where = str(path)
        version = inspect(path) or 0
        try:
            self._conn = sqlite3.connect(path, isolation_level=None, timeout=30)
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            while version < SCHEMA_VERSION:
                script = _MIGRATIONS[version]
                version += 1
                try:
                    self._conn.executescript(
                        f"BEGIN IMMEDIATE;\n{script}\nPRAGMA user_version = {version};\nCOMMIT;"
                    )
                except sqlite3.Error:
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                    raise
            self._conn.isolation_level = "DEFERRED"
        except sqlite3.Error as exc:
            raise InputError(f"{where}: not a usable fixity ledger ({exc})") from exc

    def close(self) -> None:
        self._conn.close()

    def known(self, source: str) -> dict[str, KnownBundle]:
        """Every bundle the ledger knows under ``source``, by key."""
        rows = self._conn.execute(
            "SELECT key, size, sha256, bundle_digest, report_id, first_seen, last_object, "
            "last_full, last_outcome, verdict, verdict_since, verdict_detail, retired_sha256, "
            "retired_size "
            "FROM bundles WHERE source = ?",
            (source,),
        )
        known = {}
        for row in rows:
            values = list(row)
            values[11] = None if values[11] is None else py_key(values[11])  # verdict_detail
            known[py_key(row[0])] = KnownBundle(py_key(row[0]), *values[1:])
        return known

    def open_failures(self, source: str) -> list[OpenFailure]:
        """Every bundle of ``source`` whose verdict is fail or missing, oldest found first."""
        rows = self._conn.execute(
            "SELECT key, verdict, verdict_since, verdict_detail, verdict_run FROM bundles "
            "WHERE source = ? AND verdict IN ('fail', 'missing') ORDER BY verdict_since, key",
            (source,),
        )
        return [OpenFailure(py_key(r[0]), r[1], r[2], py_key(r[3] or ""), r[4]) for r in rows]

    def start_run(self, run_id: str, source: str, level: str, selection: str, started: str) -> None:
        with self._conn:
            self._conn.execute(
                "INSERT INTO runs (run_id, source, level, selection, started) VALUES (?,?,?,?,?)",
                (run_id, source, level, selection, started),
            )

    def finish_run(self, run_id: str, finished: str, counts: str) -> None:
        with self._conn:
            self._conn.execute(
                "UPDATE runs SET finished = ?, counts = ? WHERE run_id = ?",
                (finished, counts, run_id),
            )

    def record(self, source: str, run_id: str, events: Sequence[Event]) -> None:
        """Record one batch of checks in one transaction.

        A bundle seen for the first time gets its row; its SHA-256, bundle digest and
        report id are the baseline once a check at first sight passes (never from a
        check that failed). A known bundle keeps its baseline, so later checks compare
        with it. ``error`` (nothing could be read) is an event, but changes neither the
        verdict nor the time of the last check at its level.
        """
        with self._conn:
            for ev in events:
                self._record_one(source, run_id, ev)

    def _record_one(self, source: str, run_id: str, ev: Event) -> None:
        key = db_key(ev.key)
        sets_baseline = ev.baseline and ev.outcome == "pass"
        self._conn.execute(
            "INSERT INTO bundles (source, key, size, first_seen) VALUES (?,?,?,?) "
            "ON CONFLICT (source, key) DO NOTHING",
            (source, key, ev.size or 0, ev.time),
        )
        if sets_baseline:
            self._conn.execute(
                "UPDATE bundles SET size = ?, sha256 = ?, bundle_digest = ?, report_id = ?, "
                "retired_sha256 = NULL, retired_size = NULL WHERE source = ? AND key = ?",
                (ev.size or 0, ev.sha256, ev.bundle_digest, ev.report_id, source, key),
            )
        checked = ev.outcome != "error"
        self._conn.execute(
            "UPDATE bundles SET last_checked = ?, last_level = ?, last_outcome = ?, "
            "last_object = CASE WHEN ? THEN ? ELSE last_object END, "
            "last_full = CASE WHEN ? THEN ? ELSE last_full END "
            "WHERE source = ? AND key = ?",
            (
                ev.time,
                ev.level,
                ev.outcome,
                checked,
                ev.time,
                checked and ev.level == "full",
                ev.time,
                source,
                key,
            ),
        )
        if ev.outcome in CONCLUSIVE:
            # The time it was found stays while the verdict does not change; a retired
            # bundle stays retired while it holds the bytes it was retired with. ``IS``,
            # never ``=``: a bundle with no verdict yet (only errors before, or a key
            # whose failure read no bytes, sha256 NULL) must not make the guard NULL,
            # which would drop the verdict and forget the failure.
            self._conn.execute(
                "UPDATE bundles SET "
                "verdict_since = CASE WHEN verdict IS ? THEN verdict_since ELSE ? END, "
                "verdict_run = CASE WHEN verdict IS ? THEN verdict_run ELSE ? END, "
                "verdict_detail = ?, verdict = ? WHERE source = ? AND key = ? AND NOT ("
                "verdict IS 'retired' AND ? != 'pass' AND (? = 'missing' OR retired_sha256 IS ?))",
                (
                    ev.outcome,
                    ev.time,
                    ev.outcome,
                    run_id,
                    db_key(ev.detail),
                    ev.outcome,
                    source,
                    key,
                    ev.outcome,
                    ev.outcome,
                    ev.sha256,
                ),
            )
        self._conn.execute(
            "INSERT INTO events (source, key, time, level, outcome, detail, tool_version, "
            "run_id, size, bytes_read, sha256) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                source,
                key,
                ev.time,
                ev.level,
                ev.outcome,
                db_key(ev.detail),
                self.tool_version,
                run_id,
                ev.size,
                ev.bytes_read,
                ev.sha256,
            ),
        )

    def retire(self, source: str, key: str, reason: str, time: str, run_id: str) -> OpenFailure:
        """Retire a bundle whose verdict is fail or missing: a ``retired`` event with the
        keeper's reason. InputError when the ledger holds no such failure of ``key``."""
        row = self._conn.execute(
            "SELECT verdict, verdict_since, verdict_detail, verdict_run FROM bundles "
            "WHERE source = ? AND key = ?",
            (source, db_key(key)),
        ).fetchone()
        if row is None or row[0] not in OPEN_VERDICTS:
            state = "not in the ledger" if row is None else f"its latest outcome is {row[0]}"
            raise InputError(
                f"--retire: {key}: nothing to retire under {source} ({state}); only a bundle "
                "whose latest outcome is fail or missing can be retired"
            )
        observed = self._conn.execute(
            "SELECT sha256, size FROM events WHERE source = ? AND key = ? AND outcome IN "
            "('fail', 'missing') ORDER BY time DESC, id DESC LIMIT 1",
            (source, db_key(key)),
        ).fetchone()
        with self._conn:
            self._conn.execute(
                "UPDATE bundles SET verdict = 'retired', verdict_since = ?, "
                "verdict_detail = ?, verdict_run = ?, retired_sha256 = ?, retired_size = ? "
                "WHERE source = ? AND key = ?",
                (
                    time,
                    db_key(reason),
                    run_id,
                    observed[0] if observed else None,
                    observed[1] if observed and row[0] == "fail" else None,
                    source,
                    db_key(key),
                ),
            )
            self._conn.execute(
                "INSERT INTO events (source, key, time, level, outcome, detail, tool_version, "
                "run_id, size, bytes_read, sha256) VALUES (?,?,?,?,?,?,?,?,NULL,0,NULL)",
                (
                    source,
                    db_key(key),
                    time,
                    "object",
                    RETIRED,
                    db_key(reason),
                    self.tool_version,
                    run_id,
                ),
            )
        return OpenFailure(key, str(row[0]), str(row[1]), py_key(row[2] or ""), row[3])

    def shares(
        self, source: str, level: str, cutoffs: Iterable[tuple[str, str]], keys: Iterable[str]
    ) -> dict[str, float]:
        """For each (name, ISO time) cutoff: the share of ``keys`` (every bundle the
        listing found, SPEC 13.1) checked at ``level`` or above since then."""
        known = self.known(source)
        times = [(known[k].last_at(level) if k in known else None) or "" for k in keys]
        result: dict[str, float] = {}
        for name, since in cutoffs:
            n = sum(1 for t in times if t and t >= since)
            result[name] = round(n / len(times), 6) if times else 0.0
        return result

    def event_count(self, run_id: str | None = None) -> int:
        if run_id is None:
            return int(self._conn.execute("SELECT count(*) FROM events").fetchone()[0])
        return int(
            self._conn.execute(
                "SELECT count(*) FROM events WHERE run_id = ?", (run_id,)
            ).fetchone()[0]
        )
