"""What the keeper can rely on (SPEC 13.1), promise by promise and by class, on local
archives through the CLI: shares of the whole listing, failures carried until passed
or retired, first sight always full, fail for bytes read and wrong, names that are not
UTF-8, ledger refusals that change no byte, runs refused at start that create nothing,
and a summary on SIGINT and SIGTERM with no helper left behind."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import CLI, run_cli

from bundler.core.schemas import validator_for
from bundler.fixity import ledger as ledger_file
from bundler.fixity.select import group_of


def _validate(name: str, value: Any) -> None:
    errors = sorted(str(e) for e in validator_for(name).iter_errors(value))
    assert not errors, errors


def _fixity(*args: str) -> tuple[int, dict[str, Any], str]:
    done = run_cli("fixity", *args, "--workers", "1", "--json", "-q")
    assert b"Traceback" not in done.stderr, done.stderr
    lines = done.stdout.decode().splitlines()
    assert len(lines) == 1, (done.stdout, done.stderr)
    summary = orjson.loads(lines[0])
    _validate("fixity-summary", summary)
    assert summary["exit_code"] == done.returncode
    return done.returncode, summary, done.stderr.decode()


def _archive(root: Path, source: Path, n: int) -> Path:
    root.mkdir(parents=True)
    for i in range(n):
        shutil.copyfile(source, root / f"b{i:02d}.tar.zst")
    return root


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def _sha(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


# The ways bytes at rest go wrong; each is read, and fails (never an error).
DAMAGE = {
    "bit-flip": _flip,
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:-300]),
    "half": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "garbage": lambda p: p.write_bytes(os.urandom(4096)),
    "empty": lambda p: p.write_bytes(b""),
    "appended": lambda p: p.write_bytes(p.read_bytes() + b"\0" * 10),
}


@pytest.fixture(scope="module")
def good(bundles: dict[str, Path]) -> Path:
    return bundles["rpt-clean/alice"]


# ------------------------------------------------------------------------ shares


@pytest.mark.parametrize(
    "narrowing", [("--sample", "0/3"), ("--limit", "2"), ("--limit-bytes", "1")]
)
def test_shares_are_over_the_whole_listing(
    tmp_path: Path, good: Path, narrowing: tuple[str, str]
) -> None:
    root = _archive(tmp_path / "a", good, 9)
    code, summary, _ = _fixity(str(root), "--ledger", str(tmp_path / "l.sqlite"), *narrowing)
    assert code == 0 and summary["listed"] == 9
    expected = round(summary["checked"] / 9, 6)
    assert 0 < summary["checked"] < 9
    assert summary["shares"] == {"30d": expected, "90d": expected, "365d": expected}


# ---------------------------------------------------------- first sight, fail/error


def test_first_sight_is_full_and_damage_read_is_fail_with_what_was_read(
    tmp_path: Path, good: Path
) -> None:
    root = _archive(tmp_path / "a", good, 1)
    for name, damage in DAMAGE.items():
        path = root / f"{name}.tar.zst"
        shutil.copyfile(good, path)
        damage(path)
    ledger, record = tmp_path / "l.sqlite", tmp_path / "run.jsonl"
    for run, level in enumerate(("object", "object", "full")):
        record.unlink(missing_ok=True)
        code, summary, _ = _fixity(
            str(root), "--ledger", str(ledger), "--level", level, "--record", str(record)
        )
        assert code == 1
        assert summary["counts"] == {"pass": 1, "fail": len(DAMAGE), "missing": 0, "error": 0}
        lines = [orjson.loads(x) for x in record.read_bytes().splitlines()[1:-1]]
        for line in lines:
            _validate("fixity-check", line)
            path = root / line["key"]
            # Never seen passing: always full, and what was read is recorded.
            first_sight = run == 0 or line["outcome"] == "fail"
            assert line["level"] == ("full" if first_sight else level), line
            assert line["bytes_read"] == path.stat().st_size
            if line["outcome"] == "fail":
                assert line["sha256"] == _sha(path), line
        assert summary["bytes_read"] == sum(p.stat().st_size for p in root.iterdir())
    with sqlite3.connect(ledger) as conn:
        baselines = dict(conn.execute("SELECT key, sha256 FROM bundles"))
        events = conn.execute(
            "SELECT key, bytes_read, sha256 FROM events WHERE outcome = 'fail'"
        ).fetchall()
    # A corrupt file never becomes its own baseline.
    assert baselines == {"b00.tar.zst": _sha(good), **{f"{n}.tar.zst": None for n in DAMAGE}}
    assert all(
        sha == _sha(root / key) and n == (root / key).stat().st_size for key, n, sha in events
    )


def test_object_level_after_a_pass_compares_with_the_verified_baseline(
    tmp_path: Path, good: Path
) -> None:
    root = _archive(tmp_path / "a", good, len(DAMAGE))
    ledger = tmp_path / "l.sqlite"
    assert _fixity(str(root), "--ledger", str(ledger), "--level", "object")[0] == 0
    paths = sorted(root.iterdir())
    for path, damage in zip(paths, DAMAGE.values(), strict=True):
        damage(path)
    code, summary, _ = _fixity(str(root), "--ledger", str(ledger), "--level", "object")
    assert code == 1
    assert summary["counts"]["fail"] == len(DAMAGE), summary["problems"]
    assert all("altered at rest" in p["detail"] for p in summary["problems"])


# ------------------------------------------------------------- carried failures


def test_failures_are_carried_until_passed_or_retired(tmp_path: Path, good: Path) -> None:
    root = _archive(tmp_path / "a", good, 12)
    ledger = str(tmp_path / "l.sqlite")
    assert _fixity(str(root), "--ledger", ledger)[0] == 0
    rotted, truncated, gone = "b01.tar.zst", "b02.tar.zst", "b03.tar.zst"
    _flip(root / rotted)
    DAMAGE["truncated"](root / truncated)
    (root / gone).unlink()
    code, first, _ = _fixity(str(root), "--ledger", ledger, "--sample", f"{group_of(rotted, 1)}/1")
    assert code == 1 and {p["key"] for p in first["problems"]} == {rotted, truncated, gone}

    # A run whose selection leaves them out still names them, and exits 1.
    others = next(
        k for k in range(4) if all(group_of(x, 4) != k for x in (rotted, truncated, gone))
    )
    code, summary, _ = _fixity(str(root), "--ledger", ledger, "--sample", f"{others}/4")
    assert code == 1 and summary["counts"]["fail"] == summary["counts"]["missing"] == 0
    carried = {c["key"]: c for c in summary["carried"]}
    assert set(carried) == {rotted, truncated, gone}
    assert carried[gone]["outcome"] == "missing" and carried[rotted]["outcome"] == "fail"
    assert all(c["run_id"] == first["run_id"] for c in carried.values())
    human = run_cli("fixity", str(root), "--ledger", ledger, "--sample", f"{others}/4")
    assert human.returncode == 1 and b"Still open:  3" in human.stdout

    # Due first, whatever --older-than says; --limit still applies.
    code, summary, _ = _fixity(str(root), "--ledger", ledger, "--older-than", "30d", "--limit", "2")
    assert code == 1 and summary["checked"] == 2
    assert {p["key"] for p in summary["problems"]} | {c["key"] for c in summary["carried"]} == {
        rotted,
        truncated,
        gone,
    }

    # A later pass clears one; retiring clears the others, with a reason on record.
    shutil.copyfile(good, root / rotted)
    done = run_cli(
        "fixity",
        str(root),
        "--ledger",
        ledger,
        "--retire",
        truncated,
        "--reason",
        "restored from tape next week",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    retired = orjson.loads(done.stdout)
    _validate("fixity-retired", retired)
    assert (retired["key"], retired["outcome"]) == (truncated, "fail")
    assert (
        run_cli(
            "fixity",
            str(root),
            "--ledger",
            ledger,
            "--retire",
            gone,
            "--reason",
            "deleted on purpose",
            "-q",
        ).returncode
        == 0
    )
    code, summary, _ = _fixity(str(root), "--ledger", ledger)
    assert (code, summary["carried"], summary["problems"]) == (0, [], []), summary["problems"]
    assert summary["checked"] == 10  # the retired two, still the same bytes, are not checked
    with sqlite3.connect(ledger) as conn:
        reasons = conn.execute(
            "SELECT key, detail FROM events WHERE outcome = 'retired'"
        ).fetchall()
    assert sorted(reasons) == [
        (truncated, "restored from tape next week"),
        (gone, "deleted on purpose"),
    ]

    # The retired key holding other bytes is a new bundle again: checked full, judged anew.
    shutil.copyfile(good, root / truncated)
    code, summary, _ = _fixity(str(root), "--ledger", ledger, "--older-than", "30d")
    assert (code, summary["checked"]) == (0, 1)


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (("--retire", "b00.tar.zst"), "--reason"),
        (("--reason", "x"), "--retire"),
        (("--retire", "b00.tar.zst", "--reason", " "), "--reason"),
        (("--retire", "b00.tar.zst", "--reason", "x"), "latest outcome is pass"),
        (("--retire", "nope.tar.zst", "--reason", "x"), "not in the ledger"),
    ],
)
def test_retire_refuses_what_cannot_be_retired(
    tmp_path: Path, good: Path, args: tuple[str, ...], why: str
) -> None:
    root = _archive(tmp_path / "a", good, 1)
    ledger = tmp_path / "l.sqlite"
    assert _fixity(str(root), "--ledger", str(ledger))[0] == 0
    before = ledger.read_bytes()
    done = run_cli("fixity", str(root), "--ledger", str(ledger), *args)
    assert done.returncode in (2, 3) and why.encode() in done.stderr, done.stderr
    assert done.stderr.count(b"\n") == 1 and done.stdout == b""
    assert ledger.read_bytes() == before


def test_retire_without_a_ledger_creates_none(tmp_path: Path) -> None:
    done = run_cli(
        "fixity",
        str(tmp_path),
        "--ledger",
        str(tmp_path / "l.sqlite"),
        "--retire",
        "k.tar.zst",
        "--reason",
        "x",
    )
    assert done.returncode == 3 and b"no such ledger" in done.stderr
    assert not (tmp_path / "l.sqlite").exists()


# ------------------------------------------------------------------ local names


def test_a_name_that_is_not_utf8_is_checked_shown_escaped_and_kept_as_bytes(
    tmp_path: Path, good: Path
) -> None:
    root = tmp_path / "a"
    root.mkdir()
    raw_names = [b"caf\xe9.tar.zst", b"\xff\xfe.tar.zst", b"ok.tar.zst"]
    for name in raw_names:
        shutil.copyfile(good, os.path.join(os.fsencode(root), name))
    ledger = tmp_path / "l.sqlite"
    code, summary, _ = _fixity(str(root), "--ledger", str(ledger))
    assert (code, summary["counts"]["pass"]) == (0, 3)
    with sqlite3.connect(ledger) as conn:
        conn.text_factory = bytes
        keys = sorted(row[0] for row in conn.execute("SELECT key FROM bundles"))
    assert keys == sorted(raw_names)
    # --sample groups by the SHA-256 of the exact bytes.
    for name in raw_names:
        text = name.decode("utf-8", "surrogateescape")
        assert group_of(text, 5) == int.from_bytes(hashlib.sha256(name).digest()[:8], "big") % 5
    # Damaged, it is reported escaped, and retired by the key as shown.
    _flip(Path(os.fsdecode(os.path.join(os.fsencode(root), raw_names[1]))))
    human = run_cli("fixity", str(root), "--ledger", str(ledger), "--workers", "1")
    assert human.returncode == 1 and b"Traceback" not in human.stderr
    # With the time it was found (SPEC 13.1), then the key, escaped.
    assert re.search(rb"\n  - fail since [0-9T:.-]+Z: \\udcff\\udcfe\.tar\.zst: ", human.stdout), (
        human.stdout
    )
    code, summary, _ = _fixity(str(root), "--ledger", str(ledger))
    (problem,) = summary["problems"]
    assert problem["key"] == "\\udcff\\udcfe.tar.zst"
    done = run_cli(
        "fixity",
        str(root),
        "--ledger",
        str(ledger),
        "--retire",
        problem["key"],
        "--reason",
        "bad name, bad bytes",
    )
    assert done.returncode == 0, done.stderr
    assert _fixity(str(root), "--ledger", str(ledger))[0] == 0


# ------------------------------------------------------- ledger refusals, nothing made


def _v1_ledger(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.executescript(ledger_file._V1 + "PRAGMA user_version = 1;")


def _foreign(sql: str) -> Any:
    def make(path: Path) -> None:
        with sqlite3.connect(path) as conn:
            conn.executescript(sql)

    return make


def _ours_then(sql: str) -> Any:
    def make(path: Path) -> None:
        _v1_ledger(path)
        with sqlite3.connect(path) as conn:
            conn.executescript(sql)

    return make


def _written_then(sql: str) -> Any:
    """A ledger as a run of this tool leaves it (version 2, WAL mode), then ``sql``."""

    def make(path: Path) -> None:
        ledger_file.Ledger(path, tool_version="0").close()
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.executescript(sql)

    return make


def _redefined(table: str, old: str, new: str) -> Any:
    """A ledger a run wrote, whose ``table`` definition then had ``old`` replaced."""

    def make(path: Path) -> None:
        ledger_file.Ledger(path, tool_version="0").close()
        with contextlib.closing(sqlite3.connect(path)) as conn:
            (sql,) = conn.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
            ).fetchone()
            assert old in sql
            conn.execute("PRAGMA writable_schema = ON")
            conn.execute(
                "UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = ?",
                (sql.replace(old, new), table),
            )
            conn.commit()

    return make


NOT_LEDGERS = {
    # Objects a ledger never holds, each kind: a trigger would run inside this tool's
    # own transactions and could undo a verdict.
    "trigger undoing a verdict": (
        _written_then(
            "CREATE TRIGGER t1 AFTER UPDATE ON bundles WHEN new.verdict IN ('fail','missing') "
            "BEGIN UPDATE bundles SET verdict = 'pass' WHERE rowid = new.rowid; END;"
        ),
        "trigger 't1'",
    ),
    "trigger dropping events": (
        _written_then(
            "CREATE TRIGGER t2 BEFORE INSERT ON events WHEN new.outcome = 'fail' "
            "BEGIN SELECT RAISE(IGNORE); END;"
        ),
        "trigger 't2'",
    ),
    "trigger on runs (version 1)": (
        _ours_then("CREATE TRIGGER t3 AFTER INSERT ON runs BEGIN SELECT 1; END;"),
        "trigger 't3'",
    ),
    "extra index": (_written_then("CREATE INDEX mine ON events (outcome);"), "index 'mine'"),
    "index dropped": (_written_then("DROP INDEX bundles_open;"), "'bundles_open' is missing"),
    "extra view": (_written_then("CREATE VIEW v AS SELECT 1;"), "view 'v'"),
    # The right names with other definitions (written in place, as writable_schema allows).
    "a CHECK refusing a fail": (
        _redefined("bundles", "verdict TEXT", "verdict TEXT CHECK (verdict IS NOT 'fail')"),
        "table 'bundles' is not defined",
    ),
    "a collation on the key": (
        _redefined("bundles", "key TEXT NOT NULL", "key TEXT NOT NULL COLLATE NOCASE"),
        "table 'bundles' is not defined",
    ),
    "a default outcome": (
        _redefined("events", "outcome TEXT NOT NULL", "outcome TEXT NOT NULL DEFAULT 'pass'"),
        "table 'events' is not defined",
    ),
    "a partial index under our name": (
        _written_then(
            "DROP INDEX bundles_open; "
            "CREATE INDEX bundles_open ON bundles (source, verdict) WHERE verdict = 'pass';"
        ),
        "index 'bundles_open' is not defined",
    ),
    # A ledger a run wrote (WAL mode), refused: no -wal or -shm appears beside it.
    "written, then newer": (_written_then("PRAGMA user_version = 3;"), "newer"),
    "written, then negative version": (_written_then("PRAGMA user_version = -1;"), "version -1"),
    "written, then extra table": (_written_then("CREATE TABLE notes (x);"), "notes"),
    "written, then foreign id": (_written_then("PRAGMA application_id = 7;"), "application id"),
    "written, then extra column": (_written_then("ALTER TABLE runs ADD COLUMN x;"), "runs"),
    "foreign bundles table": (_foreign("CREATE TABLE bundles (id INTEGER, name TEXT);"), "bundles"),
    "foreign application": (
        _foreign("CREATE TABLE t (x); PRAGMA application_id = 1234; PRAGMA user_version = 2;"),
        "application id",
    ),
    "newer schema": (_ours_then("PRAGMA user_version = 99;"), "newer"),
    "missing table": (_ours_then("DROP TABLE runs;"), "'runs' is missing"),
    "view for a table": (
        _ours_then("DROP TABLE runs; CREATE VIEW runs AS SELECT 1 AS run_id;"),
        "is a view",
    ),
    "extra table": (_ours_then("CREATE TABLE notes (x);"), "notes"),
    "extra column": (_ours_then("ALTER TABLE events ADD COLUMN x;"), "events"),
    "not sqlite": (lambda p: p.write_bytes(b"hello, this is a text file\n" * 100), "SQLite"),
    "corrupt": (
        lambda p: (_v1_ledger(p), p.write_bytes(p.read_bytes()[:100] + os.urandom(8000))),
        "ledger",
    ),
}


@pytest.mark.parametrize("kind", sorted(NOT_LEDGERS))
def test_a_ledger_not_this_tools_is_refused_without_a_byte_changed(
    tmp_path: Path, good: Path, kind: str
) -> None:
    root = _archive(tmp_path / "a", good, 1)
    ledger = tmp_path / "l.sqlite"
    make, words = NOT_LEDGERS[kind]
    make(ledger)
    before = sorted(os.listdir(tmp_path))
    data = ledger.read_bytes()
    run = ("--record", str(tmp_path / "r.jsonl"), "--workers", "1")
    for extra in (run, ("--retire", "b00.tar.zst", "--reason", "x")):
        done = run_cli("fixity", str(root), "--ledger", str(ledger), *extra)
        assert done.returncode == 3, (kind, done.stderr)
        assert done.stderr.count(b"\n") == 1 and str(ledger).encode() in done.stderr
        assert words.encode() in done.stderr, done.stderr
        assert b"Traceback" not in done.stderr and done.stdout == b""
        assert ledger.read_bytes() == data
        assert sorted(os.listdir(tmp_path)) == before  # no -wal, -shm, record


def test_a_version_1_ledger_is_brought_forward_and_keeps_what_it_knew(
    tmp_path: Path, good: Path
) -> None:
    root = _archive(tmp_path / "a", good, 2)
    ledger = tmp_path / "l.sqlite"
    _v1_ledger(ledger)
    with sqlite3.connect(ledger) as conn:
        conn.execute(
            "INSERT INTO bundles (source, key, size, sha256, first_seen, last_outcome, last_full) "
            "VALUES (?, 'b00.tar.zst', ?, ?, '2020-01-01T00:00:00.000000Z', 'pass', "
            "'2020-01-01T00:00:00.000000Z')",
            (str(root), good.stat().st_size, _sha(good)),
        )
    before = ledger.read_bytes()
    done = run_cli(
        "fixity", str(root), "--ledger", str(ledger), "--retire", "b00.tar.zst", "--reason", "x"
    )
    assert done.returncode == 3 and b"latest outcome is pass" in done.stderr
    assert ledger.read_bytes() == before  # a refused retire does not bring it forward
    _flip(root / "b00.tar.zst")
    code, summary, _ = _fixity(str(root), "--ledger", str(ledger), "--level", "object")
    assert code == 1 and summary["problems"][0]["key"] == "b00.tar.zst"
    assert "altered at rest" in summary["problems"][0]["detail"]  # compared with the v1 baseline
    assert ledger_file.inspect(ledger) == ledger_file.SCHEMA_VERSION


@pytest.mark.parametrize(
    "source",
    ["missing-dir", "a-file.tar.zst", "s3://bucket-only-no-prefix/../x", "s3://"],
)
def test_a_run_that_cannot_start_creates_no_ledger_and_no_record(
    tmp_path: Path, source: str
) -> None:
    (tmp_path / "a-file.tar.zst").write_bytes(b"x")
    before = sorted(os.listdir(tmp_path))
    target = source if source.startswith("s3://") else str(tmp_path / source)
    done = run_cli(
        "fixity",
        target,
        "--ledger",
        str(tmp_path / "new.sqlite"),
        "--record",
        str(tmp_path / "r.jsonl"),
        "--workers",
        "1",
        env={"AWS_ENDPOINT_URL": "http://127.0.0.1:9"},
    )
    assert done.returncode in (2, 3, 5), done.stderr
    assert done.stderr.count(b"\n") == 1 and b"Traceback" not in done.stderr
    assert sorted(os.listdir(tmp_path)) == before


# ------------------------------------------------------------- signals and helpers


def _children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                found.append(int(entry.name))
    return found


def _helpers_of(parent: int) -> list[int]:
    found = []
    for pid in _children(parent):
        try:
            if b"--fixity-helper" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


LEDGER_FILES = {"a", "l.sqlite", "l.sqlite-wal", "l.sqlite-shm"}


def _events(ledger: Path) -> int:
    try:
        with contextlib.closing(sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)) as conn:
            return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])
    except sqlite3.Error:
        return 0


def _start_and_wait(
    tmp_path: Path, good: Path, *extra: str
) -> tuple[subprocess.Popen[bytes], Path, list[int]]:
    root = _archive(tmp_path / "a", good, 400)
    ledger = tmp_path / "l.sqlite"
    proc = subprocess.Popen(
        [*CLI, "fixity", str(root), "--ledger", str(ledger), "--workers", "3", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    helpers: list[int] = []
    while time.monotonic() < deadline and proc.poll() is None:
        if len(helpers) < 2:
            helpers = _helpers_of(proc.pid)
        if helpers and _events(ledger) >= 10:
            break
        time.sleep(0.02)
    assert proc.poll() is None and len(helpers) == 2, "the run ended before it could be stopped"
    return proc, ledger, helpers


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_sigint_and_sigterm_print_the_summary_so_far(
    tmp_path: Path, good: Path, signum: int, code: int
) -> None:
    proc, ledger, helpers = _start_and_wait(
        tmp_path, good, "--json", "-q", "--record", str(tmp_path / "r.jsonl")
    )
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert b"Traceback" not in err and b"stopped by" in err
    summary = orjson.loads(out)
    _validate("fixity-summary", summary)
    assert summary["interrupted"] == signal.Signals(signum).name and summary["exit_code"] == code
    assert 0 < summary["checked"] < 400 and summary["checked"] == _events(ledger)
    footer = orjson.loads((tmp_path / "r.jsonl").read_bytes().splitlines()[-1])
    assert footer["interrupted"] == summary["interrupted"] and footer["counts"] == summary["counts"]
    assert not any(_alive(pid) for pid in helpers)
    # The record (complete, with its footer), the ledger and its journal: nothing else.
    assert {"a", "l.sqlite", "r.jsonl"} <= set(os.listdir(tmp_path)) <= LEDGER_FILES | {"r.jsonl"}


def test_sigkill_leaves_no_helper_and_no_temporary_file(tmp_path: Path, good: Path) -> None:
    proc, _, helpers = _start_and_wait(tmp_path, good, "-q", "--record", str(tmp_path / "r.jsonl"))
    proc.kill()
    proc.communicate()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(pid) for pid in helpers):
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in helpers)
    # The ledger and its own journal files; no record, no hidden temporary file.
    left = sorted(os.listdir(tmp_path))
    assert set(left) <= LEDGER_FILES, left


# ------------------------------------------------ failure memory, retiring, display


@pytest.mark.parametrize("key", ["b.tar.zst", "p/reports/bundles/stray.tar.zst", "\udcff.tar.zst"])
@pytest.mark.parametrize("sha256", [None, "sha256:" + "ab" * 32])
@pytest.mark.parametrize("outcome", ["fail", "missing"])
@pytest.mark.parametrize("before", ["never", "error", "pass"])
def test_every_failure_keeps_its_verdict_whatever_came_before(
    tmp_path: Path, key: str, sha256: str | None, outcome: str, before: str
) -> None:
    """A fail or missing is the bundle's verdict, found now, whether its check read bytes
    (sha256) or not, whatever the row held before: nothing, only errors, or a pass."""
    ledger = ledger_file.Ledger(tmp_path / "l.sqlite", tool_version="0")
    event = ledger_file.Event
    if before == "error":
        ledger.record("s", "r0", [event(key, "2026-01-01T00:00:00.000000Z", "full", "error", "x")])
    elif before == "pass":
        ledger.record(
            "s",
            "r0",
            [
                event(
                    key,
                    "2026-01-01T00:00:00.000000Z",
                    "full",
                    "pass",
                    "ok",
                    size=5,
                    sha256="sha256:" + "cd" * 32,
                    baseline=True,
                )
            ],
        )
    found = "2026-02-01T00:00:00.000000Z"
    ledger.record("s", "r1", [event(key, found, "full", outcome, "d", size=5, sha256=sha256)])
    again = "2026-03-01T00:00:00.000000Z"
    ledger.record("s", "r2", [event(key, again, "full", outcome, "d2", size=5, sha256=sha256)])
    failures = ledger.open_failures("s")
    ledger.close()
    assert [(f.key, f.outcome, f.found, f.run_id) for f in failures] == [
        (key, outcome, found, "r1")
    ]


def _corrupt_named(root: Path, good: Path, name: bytes) -> None:
    path = os.path.join(os.fsencode(root), name)
    shutil.copyfile(good, path)
    _flip(Path(os.fsdecode(path)))


# A name and, beside it, a file whose ASCII name spells that name's escape.
LOOKALIKES = [b"bad\xff", "bad\u202e".encode(), b"bad\x1b", b"bad\n", b"bad\\"]


@pytest.mark.parametrize("raw", LOOKALIKES, ids=repr)
def test_retire_takes_the_key_as_shown_and_never_a_lookalike(
    tmp_path: Path, good: Path, raw: bytes
) -> None:
    from bundler.core.textsafe import shown

    root = tmp_path / "a"
    root.mkdir()
    name = raw + b".tar.zst"
    text = name.decode("utf-8", "surrogateescape")
    lookalike = shown(text).encode("ascii")
    assert lookalike != name
    _corrupt_named(root, good, name)
    _corrupt_named(root, good, lookalike)
    ledger = str(tmp_path / "l.sqlite")
    code, summary, _ = _fixity(str(root), "--ledger", ledger)
    assert code == 1 and {p["key"] for p in summary["problems"]} == {
        shown(text),
        shown(lookalike.decode()),
    }
    for target, other in ((name, lookalike), (lookalike, name)):
        as_shown = shown(target.decode("utf-8", "surrogateescape"))
        done = run_cli(
            "fixity", str(root), "--ledger", ledger, "--retire", as_shown, "--reason", "r"
        )
        assert done.returncode == 0, done.stderr
        with contextlib.closing(sqlite3.connect(ledger)) as conn:
            conn.text_factory = bytes
            verdicts = dict(conn.execute("SELECT key, verdict FROM bundles"))
        assert verdicts[target] == b"retired"
        if target == name:
            assert verdicts[other] == b"fail"


def test_a_failure_checked_again_shows_when_it_was_found(tmp_path: Path, good: Path) -> None:
    root = _archive(tmp_path / "a", good, 3)
    ledger = str(tmp_path / "l.sqlite")
    _flip(root / "b01.tar.zst")
    (root / "gone.tar.zst").write_bytes((root / "b00.tar.zst").read_bytes())
    code, first, _ = _fixity(str(root), "--ledger", ledger)
    assert code == 1
    (root / "gone.tar.zst").unlink()
    code, second, _ = _fixity(str(root), "--ledger", ledger)
    assert code == 1
    found = {p["key"]: p.get("found") for p in second["problems"]}
    assert set(found) == {"b01.tar.zst", "gone.tar.zst"} and all(found.values())
    # Still the time the first run found the failure; the missing one, this run's.
    first_found = {p["key"]: p["found"] for p in first["problems"]}
    assert found["b01.tar.zst"] == first_found["b01.tar.zst"]
    _, third, _ = _fixity(str(root), "--ledger", ledger, "--older-than", "30d", "--limit", "1")
    (problem,) = third["problems"]
    assert problem["found"] == found[problem["key"]]
    human = run_cli("fixity", str(root), "--ledger", ledger, "--workers", "1")
    assert f"  - fail since {found['b01.tar.zst']}: b01.tar.zst: ".encode() in human.stdout


REASONS = [
    "two\nlines",
    "bidi \u202e here",
    "esc \x1b[31m red",
    "back\\slash \\x0a",
    "tab\tand émoji 🙂",
]


@pytest.mark.parametrize("reason", REASONS, ids=repr)
def test_the_retire_reason_is_kept_as_given_and_escaped_only_when_shown(
    tmp_path: Path, good: Path, reason: str
) -> None:
    from bundler.core.textsafe import shown

    root = _archive(tmp_path / "a", good, 2)
    _flip(root / "b00.tar.zst")
    ledger = str(tmp_path / "l.sqlite")
    assert _fixity(str(root), "--ledger", ledger)[0] == 1
    done = run_cli(
        "fixity",
        str(root),
        "--ledger",
        ledger,
        "--retire",
        "b00.tar.zst",
        "--reason",
        reason,
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["reason"] == reason
    with contextlib.closing(sqlite3.connect(ledger)) as conn:
        kept = conn.execute("SELECT detail FROM events WHERE outcome = 'retired'").fetchone()[0]
        verdict = conn.execute(
            "SELECT verdict_detail FROM bundles WHERE verdict = 'retired'"
        ).fetchone()[0]
    assert kept == verdict == reason
    _flip(root / "b01.tar.zst")
    assert _fixity(str(root), "--ledger", ledger)[0] == 1
    human = run_cli(
        "fixity", str(root), "--ledger", ledger, "--retire", "b01.tar.zst", "--reason", reason
    )
    assert human.returncode == 0
    assert f"Reason:      {shown(reason)}\n".encode() in human.stdout


@pytest.mark.parametrize(
    "name", [b"rot\xfe\xfd", "rot\u202e".encode(), b"rot\\x", b"rot\x1b"], ids=repr
)
def test_a_detail_names_the_file_escaped_once_like_its_key(
    tmp_path: Path, good: Path, name: bytes
) -> None:
    from bundler.core.textsafe import shown

    root = tmp_path / "a"
    root.mkdir()
    _corrupt_named(root, good, name + b".tar.zst")
    ledger = str(tmp_path / "l.sqlite")
    path = os.fsdecode(os.path.join(os.fsencode(root), name + b".tar.zst"))
    for _ in range(2):  # checked now, then checked again
        code, summary, _ = _fixity(str(root), "--ledger", ledger)
        assert code == 1
        (problem,) = summary["problems"]
        assert problem["key"] == shown(os.path.basename(path))
        assert problem["detail"].startswith(shown(path) + ": "), problem["detail"]
    others = next(k for k in range(2) if group_of(os.path.basename(path), 2) != k)
    code, summary, _ = _fixity(str(root), "--ledger", ledger, "--sample", f"{others}/2")
    assert code == 1
    (carried,) = summary["carried"]
    assert carried["detail"].startswith(shown(path) + ": "), carried["detail"]


@pytest.mark.parametrize(
    "unused",
    [
        ("--sample", "0/3"),
        ("--record", "r.jsonl"),
        ("--level", "object"),
        ("--older-than", "1d"),
        ("--limit", "1"),
        ("--limit-bytes", "9"),
        ("--workers", "2"),
        ("--scheduler", "tcp://127.0.0.1:1"),
        ("--upload-record",),
        ("--endpoint-url", "http://127.0.0.1:1"),
    ],
)
def test_retire_refuses_options_it_would_ignore(
    tmp_path: Path, good: Path, unused: tuple[str, ...]
) -> None:
    root = _archive(tmp_path / "a", good, 1)
    _flip(root / "b00.tar.zst")
    ledger = tmp_path / "l.sqlite"
    assert _fixity(str(root), "--ledger", str(ledger))[0] == 1
    before = ledger.read_bytes()
    done = run_cli(
        "fixity",
        str(root),
        "--ledger",
        str(ledger),
        "--retire",
        "b00.tar.zst",
        "--reason",
        "x",
        *unused,
    )
    assert done.returncode == 2 and unused[0].encode() in done.stderr, done.stderr
    assert done.stderr.count(b"\n") == 1 and done.stdout == b""
    assert ledger.read_bytes() == before and not (tmp_path / "r.jsonl").exists()


def _flip_other(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x01
    path.write_bytes(bytes(data))


def _flip_other_keep_mtime(path: Path) -> None:
    info = path.stat()
    _flip_other(path)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))  # ctime still moves


# What can happen to a retired bundle's key, and whether it then holds other bytes.
AFTER_RETIRING = {
    "untouched": (lambda p: None, False),
    "same bytes written again": (lambda p: p.write_bytes(p.read_bytes()), False),
    "another byte flipped, same size": (_flip_other, True),
    "flipped, mtime set back": (_flip_other_keep_mtime, True),
}


@pytest.mark.parametrize("change", sorted(AFTER_RETIRING))
@pytest.mark.parametrize("selection", [(), ("--older-than", "30d")])
def test_a_retired_bundle_is_checked_again_once_it_holds_other_bytes(
    tmp_path: Path, good: Path, change: str, selection: tuple[str, ...]
) -> None:
    root = _archive(tmp_path / "a", good, 2)
    ledger = str(tmp_path / "l.sqlite")
    assert _fixity(str(root), "--ledger", ledger)[0] == 0
    victim = root / "b00.tar.zst"
    _flip(victim)
    assert _fixity(str(root), "--ledger", ledger)[0] == 1
    done = run_cli(
        "fixity", str(root), "--ledger", ledger, "--retire", victim.name, "--reason", "r"
    )
    assert done.returncode == 0, done.stderr
    size = victim.stat().st_size
    time.sleep(0.01)
    make, other_bytes = AFTER_RETIRING[change]
    make(victim)
    assert victim.stat().st_size == size
    code, summary, _ = _fixity(str(root), "--ledger", ledger, *selection)
    if other_bytes:
        # Checked again, full (first sight), and its failure is a new one.
        assert code == 1 and [p["key"] for p in summary["problems"]] == [victim.name]
    else:
        assert code == 0 and summary["problems"] == [] and summary["carried"] == []
        assert summary["checked"] == (0 if selection else 1)  # the other bundle only
    # The next run agrees: still retired, or still failing (carried or re-checked).
    code, summary, _ = _fixity(str(root), "--ledger", ledger, *selection)
    assert code == (1 if other_bytes else 0)


# ----------------------------------------------------------- retire, from the library


def test_library_retire_is_fixity_retire(tmp_path: Path, good: Path) -> None:
    """``bundler.retire`` has the meaning and checks of ``fixity --retire KEY --reason
    TEXT``: the same record, the failure no longer carried, a refusal changing no byte."""
    import bundler

    root = _archive(tmp_path / "a", good, 2)
    _flip(root / "b00.tar.zst")
    ledger = tmp_path / "l.sqlite"
    first = bundler.fixity(root, ledger=ledger, workers=1)
    assert first.exit_code == 1 and [p["key"] for p in first.problems] == ["b00.tar.zst"]
    before = ledger.read_bytes()
    with pytest.raises(bundler.InputError) as caught:
        bundler.retire(root, bundle_key="b01.tar.zst", reason="x", ledger=ledger)
    assert caught.value.param == "bundle_key" and caught.value.exit_code == 3
    assert caught.value.message.startswith("bundle_key: b01.tar.zst: nothing to retire")
    assert ledger.read_bytes() == before
    done = bundler.retire(root, bundle_key="b00.tar.zst", reason="restored from tape", ledger=ledger)
    assert isinstance(done, bundler.Retirement)
    record = done.to_json()
    assert (record["key"], record["outcome"], record["reason"]) == (
        "b00.tar.zst",
        "fail",
        "restored from tape",
    )
    # The command line refuses the same retirement again with its own option's name.
    again = run_cli(
        "fixity", str(root), "--ledger", str(ledger), "--retire", "b00.tar.zst", "--reason", "y"
    )
    assert again.returncode == 3
    assert again.stderr.startswith(b"evalbook-bundle: error: --retire: b00.tar.zst: nothing")
    (root / "b00.tar.zst").unlink()
    shutil.copyfile(good, root / "b00.tar.zst")
    assert list(bundler.fixity(root, ledger=ledger, workers=1).carried) == []
