"""`reports --store`: the reports a store holds, through the installed CLI (SPEC 3, 7, 8).

Local directory stores (the committed fixtures, and hostile copies of them) and an
s3:// store on the real SeaweedFS server.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import REPO, run_cli
from s3_server import Server

from bundler.core import schemas

MAIN = REPO / "fixtures" / "stores" / "main"
AUDIT = REPO / "fixtures" / "stores" / "audit"
MAIN_IDS = [
    "rpt-clean",
    "rpt-every-reason",
    "rpt-evidence-manifest",
    "rpt-retention",
    "rpt-scorer-drift",
    "rpt-sso-traces",
    "rpt-superseded",
]


def _lines(stdout: bytes) -> list[dict[str, Any]]:
    """The JSON lines of ``reports --json``, each validated against its schema."""
    rows = []
    for raw in stdout.splitlines():
        row = orjson.loads(raw)
        if row.get("schema") == "evalbook.error.v1":
            continue  # a failure described as JSON, after the listing
        schemas.validator_for("reports-line").validate(row)
        rows.append(row)
    return rows


def _copy(store: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "store"
    shutil.copytree(store, dest, symlinks=True)
    return dest


def _body(store: Path, report_id: str) -> Path:
    return store / "reports" / report_id / "body.json"


# ------------------------------------------------------------------ the fixture stores


def test_main_store_human() -> None:
    done = run_cli("reports", "--store", str(MAIN))
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b""
    lines = done.stdout.decode().splitlines()
    assert lines[0].split() == ["REPORT", "RESULT", "ISSUED", "AT", "ENVELOPE"]
    assert lines[-1] == "7 reports"
    rows = lines[1:-1]
    assert [r.split()[0] for r in rows] == MAIN_IDS
    by_id = {r.split()[0]: r.split() for r in rows}
    assert by_id["rpt-clean"] == ["rpt-clean", "pass", "2026-10-20T09:30:00Z", "current"]
    assert by_id["rpt-every-reason"][1] == "error"
    assert by_id["rpt-sso-traces"][1] == "inconclusive"
    assert by_id["rpt-superseded"][3:] == ["superseded", "by", "rpt-clean"]
    # aligned columns: every column starts where its header does
    for header in ("RESULT", "ISSUED AT", "ENVELOPE"):
        at = lines[0].index(header)
        assert all(r[at - 2 : at] == "  " and r[at] != " " for r in rows), header


def test_main_store_json_matches_the_documents() -> None:
    done = run_cli("reports", "--store", str(MAIN), "--json")
    assert done.returncode == 0, done.stderr.decode()
    rows = _lines(done.stdout)
    assert [r["report_id"] for r in rows] == MAIN_IDS
    for row in rows:
        body = orjson.loads(_body(MAIN, row["report_id"]).read_bytes())
        envelope = orjson.loads(
            (MAIN / "reports" / row["report_id"] / "envelope.json").read_bytes()
        )
        assert row["result"] == body["result"]
        assert row["issued_at"] == body["issued_at"]
        assert row["envelope"] == {k: envelope[k] for k in row["envelope"]}
        assert row["problems"] == []
    superseded = rows[MAIN_IDS.index("rpt-superseded")]["envelope"]
    assert superseded == {
        "status": "superseded",
        "superseded_by": "rpt-clean",
        "superseded_at": "2026-10-21T08:00:00Z",
        "superseded_reason": "re_evaluation",
    }
    assert done.stderr == b""  # SPEC 7: with --json, no human count on stderr
    quiet = run_cli("reports", "--store", str(MAIN), "--json", "-q")
    assert quiet.returncode == 0 and quiet.stderr == b"" and quiet.stdout == done.stdout


def test_audit_store_human_and_json() -> None:
    human = run_cli("reports", "--store", str(AUDIT), "--quiet")
    assert human.returncode == 0, human.stderr.decode()
    ids = sorted(p.name for p in (AUDIT / "reports").iterdir())
    lines = human.stdout.decode().splitlines()
    assert [line.split()[0] for line in lines[1:-1]] == ids
    assert lines[-1] == f"{len(ids)} reports"
    rows = _lines(run_cli("reports", "--store", str(AUDIT), "--json").stdout)
    assert [r["report_id"] for r in rows] == ids
    assert {r["envelope"]["status"] for r in rows} == {"current"}


def test_help_names_every_option_and_has_examples() -> None:
    done = run_cli("reports", "--help")
    assert done.returncode == 0
    text = done.stdout.decode()
    for option in ("--store", "--endpoint-url", "--json", "-q, --quiet"):
        assert option in text
    assert "Examples:" in text and "evalbook-bundle reports --store" in text
    assert "exits 3" in text


# ----------------------------------------------------------------- empty and missing


def test_empty_store_lists_nothing(tmp_path: Path) -> None:
    for root in (tmp_path / "bare", tmp_path / "with-reports", tmp_path / "with-access"):
        root.mkdir()
    (tmp_path / "with-reports" / "reports").mkdir()
    (tmp_path / "with-access" / "access.json").write_text('{"principals": {}}')
    for root in (tmp_path / "with-reports", tmp_path / "with-access"):
        done = run_cli("reports", "--store", str(root))
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode().splitlines()[-1] == "0 reports"
        as_json = run_cli("reports", "--store", str(root), "--json", "-q")
        assert as_json.returncode == 0 and as_json.stdout == b""
    # A directory holding neither reports/ nor access.json is no store (SPEC 3): saying
    # "0 reports" would hide a mistyped --store.
    bare = run_cli("reports", "--store", str(tmp_path / "bare"))
    assert bare.returncode == 3 and bare.stdout == b""
    assert bare.stderr.decode().splitlines() == [
        f"evalbook-bundle: error: --store: {tmp_path / 'bare'}: not a store "
        "(no access.json and no reports/ in it)"
    ]


def test_missing_store_root_is_one_line_exit_3(tmp_path: Path) -> None:
    absent = tmp_path / "nowhere"
    done = run_cli("reports", "--store", str(absent))
    assert done.returncode == 3
    assert done.stdout == b""
    assert done.stderr.decode().splitlines() == [
        f"evalbook-bundle: error: --store: {absent}: not found (does not exist)"
    ]


def test_store_option_is_required() -> None:
    done = run_cli("reports")
    assert done.returncode == 2
    assert b"--store" in done.stderr


# --------------------------------------------------------------- unreadable reports


def test_unreadable_body_gets_its_line_and_exit_3(tmp_path: Path) -> None:
    store = _copy(MAIN, tmp_path)
    body = _body(store, "rpt-retention")
    body.write_bytes(b'{"not": "a report"')
    done = run_cli("reports", "--store", str(store))
    assert done.returncode == 3
    lines = done.stdout.decode().splitlines()
    assert [line.split()[0] for line in lines[1:-1]] == MAIN_IDS  # the others are listed
    assert lines[-1] == "7 reports (1 unreadable)"
    assert lines[0].split()[-1] == "PROBLEM"
    broken = next(line for line in lines if line.startswith("rpt-retention "))
    assert broken.split()[1:4] == ["-", "-", "current"]
    assert str(body) in broken
    clean = next(line for line in lines if line.startswith("rpt-clean "))
    assert clean.split() == ["rpt-clean", "pass", "2026-10-20T09:30:00Z", "current"]
    errors = done.stderr.decode().splitlines()
    assert len(errors) == 1
    assert errors[0].startswith(f"evalbook-bundle: error: {store}: 1 of 7 report(s)")

    as_json = run_cli("reports", "--store", str(store), "--json", "-q")
    assert as_json.returncode == 3
    rows = {r["report_id"]: r for r in _lines(as_json.stdout)}
    assert list(rows) == MAIN_IDS
    row = rows["rpt-retention"]
    assert row["result"] is None and row["issued_at"] is None
    assert row["envelope"]["status"] == "current"
    assert len(row["problems"]) == 1 and row["problems"][0].startswith(str(body))
    assert all(r["problems"] == [] for k, r in rows.items() if k != "rpt-retention")


def test_invalid_body_and_missing_envelope_are_named(tmp_path: Path) -> None:
    store = _copy(MAIN, tmp_path)
    body = orjson.loads(_body(store, "rpt-clean").read_bytes())
    body["result"] = "maybe"
    _body(store, "rpt-clean").write_bytes(orjson.dumps(body, option=orjson.OPT_SORT_KEYS))
    (store / "reports" / "rpt-retention" / "envelope.json").unlink()
    other = orjson.loads(_body(store, "rpt-scorer-drift").read_bytes())
    other["report_id"] = "rpt-somewhere-else"
    _body(store, "rpt-scorer-drift").write_bytes(orjson.dumps(other, option=orjson.OPT_SORT_KEYS))
    done = run_cli("reports", "--store", str(store), "--json", "-q")
    assert done.returncode == 3
    rows = {r["report_id"]: r for r in _lines(done.stdout)}
    assert "/result" in rows["rpt-clean"]["problems"][0]
    assert "report-body" in rows["rpt-clean"]["problems"][0]
    retention = rows["rpt-retention"]
    assert retention["result"] == "pass" and retention["envelope"] is None
    assert retention["problems"] == [
        f"{store}/reports/rpt-retention/envelope.json: missing (every report has an envelope)"
    ]
    assert "does not match its directory" in rows["rpt-scorer-drift"]["problems"][0]
    assert rows["rpt-scorer-drift"]["result"] is None
    assert "3 of 7 report(s)" in done.stderr.decode()


def test_hostile_store_neither_hangs_nor_crashes(tmp_path: Path) -> None:
    store = _copy(MAIN, tmp_path)
    reports = store / "reports"
    outside = tmp_path / "outside"
    shutil.copytree(reports / "rpt-clean", outside)
    # A FIFO as the body: opening it must not block.
    _body(store, "rpt-clean").unlink()
    os.mkfifo(_body(store, "rpt-clean"))
    # A body that is a symbolic link (to a good body), and a report directory that
    # is a link out of the store.
    _body(store, "rpt-retention").unlink()
    _body(store, "rpt-retention").symlink_to(outside / "body.json")
    (reports / "rpt-escape").symlink_to(outside)
    # A body far over the document cap (sparse: no disk used), never read.
    huge = _body(store, "rpt-scorer-drift")
    with huge.open("r+b") as fh:
        fh.truncate(64 * 1024 * 1024)
    # Names that are not identifiers, one of them not even UTF-8, and a plain file.
    (reports / ".hidden").mkdir()
    (reports / "with space").mkdir()
    os.mkdir(os.fsencode(reports) + b"/bad-\xff")
    (reports / "README.md").write_text("not a report\n")
    (reports / "a\x1b[31mred").mkdir()

    done = run_cli("reports", "--store", str(store), timeout=60)
    assert done.returncode == 3, done.stderr.decode()
    text = done.stdout.decode("utf-8")
    assert "\x1b" not in text and "\\x1b" in text  # untrusted names escaped
    lines = text.splitlines()
    assert lines[-1] == "13 reports (9 unreadable)"
    as_json = run_cli("reports", "--store", str(store), "--json", "-q", timeout=60)
    assert as_json.returncode == 3
    rows = {r["report_id"]: r for r in _lines(as_json.stdout)}
    problems = {k: " ".join(r["problems"]) for k, r in rows.items() if r["problems"]}
    assert "not a regular file" in problems["rpt-clean"]
    assert "symbolic link" in problems["rpt-retention"]
    assert "outside the store root" in problems["rpt-escape"]
    assert "larger than" in problems["rpt-scorer-drift"]
    for name in (".hidden", "with space", "bad-\\xff", "a\x1b[31mred"):
        assert "not a report id" in problems[name], name
    assert problems["README.md"] == (
        f"{reports}/README.md: holds neither body.json nor envelope.json (not a report)"
    )
    assert len(problems) == 9
    # bytewise order of the names as stored
    order = [r["report_id"] for r in _lines(as_json.stdout)]
    assert order[0] == ".hidden" and order[1] == "README.md"
    assert order.index("bad-\\xff") > order.index("a\x1b[31mred")
    assert [k for k in order if k.startswith("rpt-")] == sorted(
        k for k in order if k.startswith("rpt-")
    )


def test_archive_area_beside_the_reports_is_not_a_report(tmp_path: Path) -> None:
    """reports/bundles/ is where archives live under a prefix (SPEC 6), not a report."""
    store = _copy(MAIN, tmp_path)
    area = store / "reports" / "bundles" / "rpt-clean"
    area.mkdir(parents=True)
    (area / ("0" * 64 + ".tar.zst")).write_bytes(b"archive")
    done = run_cli("reports", "--store", str(store), "--json", "-q")
    assert done.returncode == 0, done.stderr.decode()
    assert [r["report_id"] for r in _lines(done.stdout)] == MAIN_IDS


# ------------------------------------------------------------------------ s3:// store


def _upload_store(raw: Any, bucket: str, prefix: str, root: Path) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            raw.put_object(
                Bucket=bucket,
                Key=f"{prefix}/{path.relative_to(root).as_posix()}",
                Body=path.read_bytes(),
            )


@pytest.mark.s3
def test_s3_store_lists_as_the_local_one(
    s3_server: Server, raw: Any, bucket: str, tmp_path: Path
) -> None:
    endpoint = ["--endpoint-url", s3_server.endpoint]
    _upload_store(raw, bucket, "stores/main", MAIN)
    url = f"s3://{bucket}/stores/main"
    local = run_cli("reports", "--store", str(MAIN), "--json", "-q")
    remote = run_cli("reports", "--store", url, *endpoint, "--json", "-q")
    assert remote.returncode == 0, remote.stderr.decode()
    assert remote.stdout == local.stdout
    human = run_cli("reports", "--store", url + "/", *endpoint)
    assert human.returncode == 0, human.stderr.decode()
    assert human.stdout == run_cli("reports", "--store", str(MAIN)).stdout

    # An archive stored under the same prefix (SPEC 6 layout) is not a report; a body
    # that is not JSON is named with its s3:// URL, and the rest are still listed.
    raw.put_object(
        Bucket=bucket, Key=f"stores/main/reports/bundles/rpt-clean/{'0' * 64}.tar.zst", Body=b"x"
    )
    raw.put_object(Bucket=bucket, Key="stores/main/reports/rpt-clean/body.json", Body=b"{")
    broken = run_cli("reports", "--store", url, *endpoint, "--json", "-q")
    assert broken.returncode == 3
    rows = {r["report_id"]: r for r in _lines(broken.stdout)}
    assert list(rows) == MAIN_IDS
    assert rows["rpt-clean"]["problems"][0].startswith(f"{url}/reports/rpt-clean/body.json: ")
    assert rows["rpt-superseded"]["envelope"]["superseded_by"] == "rpt-clean"

    # A prefix holding nothing is no store (SPEC 3): exit 3, not "0 reports".
    empty = run_cli("reports", "--store", f"s3://{bucket}/nothing-here", *endpoint)
    assert empty.returncode == 3 and empty.stdout == b""
    assert "not a store" in empty.stderr.decode()


@pytest.mark.s3
def test_s3_missing_bucket_is_a_storage_error(s3_server: Server) -> None:
    done = run_cli(
        "reports", "--store", "s3://no-such-bucket-here/x", "--endpoint-url", s3_server.endpoint
    )
    assert done.returncode == 5
    assert done.stdout == b""
    errors = done.stderr.decode().splitlines()
    assert len(errors) == 1 and "no-such-bucket-here" in errors[0]
