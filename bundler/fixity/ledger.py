"""The fixity ledger (SPEC section 13): an SQLite database of the bundles an archive
holds and of every check made on them.

One row per bundle the ledger knows (``bundles``) and one PREMIS-style event per check
(``events``), plus one row per run (``runs``). Only the ``fixity`` process writes it,
one transaction per batch of results, in WAL mode, so a run killed at any point loses
at most the checks in flight and the next run does not re-check what it finished. The
schema version is ``PRAGMA user_version``; ``migrate`` brings an older ledger forward
and refuses a newer one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bundler.core.errors import InputError

SCHEMA_VERSION = 1
DEFAULT_LEDGER = "evalbook-fixity.sqlite"

# Levels in order: a check at a level stands for every level below it.
LEVELS = ("object", "full")

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

# Step n brings a ledger at user_version n to n + 1.
_MIGRATIONS: tuple[Callable[[sqlite3.Connection], object], ...] = (
    lambda conn: conn.executescript(_V1),
)
assert len(_MIGRATIONS) == SCHEMA_VERSION


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

    def last_at(self, level: str) -> str | None:
        """The time of the last check at ``level`` or above (None: never)."""
        return self.last_full if level == "full" else self.last_object


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


def migrate(conn: sqlite3.Connection, *, where: str) -> None:
    """Bring the ledger's schema to ``SCHEMA_VERSION``; InputError for a newer one."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise InputError(
            f"{where}: ledger schema version {version} is newer than this tool's "
            f"{SCHEMA_VERSION}; use a newer evalbook-bundle"
        )
    while version < SCHEMA_VERSION:
        with conn:
            _MIGRATIONS[version](conn)
            version += 1
            conn.execute(f"PRAGMA user_version = {version}")


class Ledger:
    """An open ledger. Raises InputError (exit 3) when the file is not a ledger."""

    def __init__(self, path: Path, *, tool_version: str) -> None:
        self.path = path
        self.tool_version = tool_version
        where = str(path)
        try:
            self._conn = sqlite3.connect(path, isolation_level=None, timeout=30)
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._conn.isolation_level = "DEFERRED"
            migrate(self._conn, where=where)
            self._conn.execute("SELECT count(*) FROM bundles").fetchone()
        except sqlite3.Error as exc:
            raise InputError(f"{where}: not a readable fixity ledger ({exc})") from exc

    def close(self) -> None:
        self._conn.close()

    def known(self, source: str) -> dict[str, KnownBundle]:
        """Every bundle the ledger knows under ``source``, by key."""
        rows = self._conn.execute(
            "SELECT key, size, sha256, bundle_digest, report_id, first_seen, last_object, "
            "last_full, last_outcome FROM bundles WHERE source = ?",
            (source,),
        )
        return {row[0]: KnownBundle(*row) for row in rows}

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

        A bundle seen for the first time gets its row (size, SHA-256, bundle digest as
        observed); a known bundle keeps what was first recorded, so later checks compare
        with it. A check that could not read the bundle (``error``) is an event but does
        not count as a check at its level.
        """
        with self._conn:
            for ev in events:
                self._conn.execute(
                    "INSERT INTO bundles (source, key, size, sha256, bundle_digest, report_id, "
                    "first_seen) VALUES (?,?,?,?,?,?,?) ON CONFLICT (source, key) DO UPDATE SET "
                    "sha256 = coalesce(bundles.sha256, excluded.sha256), "
                    "bundle_digest = coalesce(bundles.bundle_digest, excluded.bundle_digest), "
                    "report_id = coalesce(bundles.report_id, excluded.report_id)",
                    (
                        source,
                        ev.key,
                        ev.size or 0,
                        ev.sha256 if ev.outcome == "pass" else None,
                        ev.bundle_digest if ev.outcome == "pass" else None,
                        ev.report_id if ev.outcome == "pass" else None,
                        ev.time,
                    ),
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
                        ev.key,
                    ),
                )
                self._conn.execute(
                    "INSERT INTO events (source, key, time, level, outcome, detail, "
                    "tool_version, run_id) VALUES (?,?,?,?,?,?,?,?)",
                    (
                        source,
                        ev.key,
                        ev.time,
                        ev.level,
                        ev.outcome,
                        ev.detail,
                        self.tool_version,
                        run_id,
                    ),
                )

    def shares(
        self, source: str, level: str, cutoffs: Iterable[tuple[str, str]]
    ) -> dict[str, float]:
        """For each (name, ISO time) cutoff: the share of the bundles present under
        ``source`` (not last found missing) checked at ``level`` or above since then."""
        column = "last_full" if level == "full" else "last_object"
        total = self._conn.execute(
            "SELECT count(*) FROM bundles WHERE source = ? AND "
            "coalesce(last_outcome, '') != 'missing'",
            (source,),
        ).fetchone()[0]
        result: dict[str, float] = {}
        for name, since in cutoffs:
            if not total:
                result[name] = 0.0
                continue
            n = self._conn.execute(
                f"SELECT count(*) FROM bundles WHERE source = ? AND "
                f"coalesce(last_outcome, '') != 'missing' AND {column} >= ?",
                (source, since),
            ).fetchone()[0]
            result[name] = round(n / total, 6)
        return result

    def event_count(self, run_id: str | None = None) -> int:
        if run_id is None:
            return int(self._conn.execute("SELECT count(*) FROM events").fetchone()[0])
        return int(
            self._conn.execute(
                "SELECT count(*) FROM events WHERE run_id = ?", (run_id,)
            ).fetchone()[0]
        )
