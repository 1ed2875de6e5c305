"""One voice on the command line, by class (SPEC 7, 8), through the installed console
script: a huge number is a one-line usage error, never a traceback; with ``--json``
stderr carries no human note; every failing object carries the process's exit code
and the input it concerns; a missing stored object exits 3; output options given a
directory agree on its name and on a directory that does not exist; a directory that
is not a store is no store; a URL given for a local path is named as typed.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import EXPORTED_AT, REPO, run_cli
from s3_server import Server

import bundler

STORE = REPO / "fixtures" / "stores" / "main"
STAMP = EXPORTED_AT.strftime("%Y-%m-%dT%H:%M:%SZ")
HUGE = ("9223372036854775808", "1" + "0" * 40, "9" * 5000)


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("voice")
    found = {}
    for report in ("rpt-clean", "rpt-superseded"):
        found[report] = bundler.export(
            STORE, report, principal="alice", out=out, exported_at=EXPORTED_AT
        ).path
    return found


def _error_object(done: subprocess.CompletedProcess[bytes], code: int) -> dict[str, Any]:
    """The one evalbook.error.v1 line of a failing --json command, and one stderr line."""
    assert done.returncode == code, (done.returncode, done.stderr.decode())
    (line,) = done.stdout.decode().splitlines()
    record = json.loads(line)
    assert record["schema"] == "evalbook.error.v1" and record["exit_code"] == code, record
    err = done.stderr.decode()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("evalbook-bundle: error: "), err
    return record


# --------------------------------------------------------------- huge numbers


@pytest.mark.parametrize("value", HUGE, ids=("2**63", "10**40", "5000 digits"))
@pytest.mark.parametrize(
    ("command", "option"),
    [
        ("fixity", "--limit"),
        ("fixity", "--limit-bytes"),
        ("fixity", "--workers"),
    ],
)
def test_a_huge_number_is_a_one_line_usage_error(
    archives: dict[str, Path], tmp_path: Path, command: str, option: str, value: str
) -> None:
    source = str(tmp_path) if command == "fixity" else str(archives["rpt-clean"])
    extra = ["--ledger", str(tmp_path / "l.sqlite")] if command == "fixity" else []
    done = run_cli(command, source, *extra, option, value, "--json")
    record = _error_object(done, 2)
    assert option in record["error"] and len(record["error"]) < 400
    assert option in done.stderr.decode()
    assert list(tmp_path.iterdir()) == []  # no ledger left behind


# ----------------------------------------------------- --json: no human notes


def test_json_reports_list_audit_and_verify_write_nothing_human_to_stderr(
    archives: dict[str, Path], tmp_path: Path, s3_server: Server, bucket: str
) -> None:
    ep = ["--endpoint-url", s3_server.endpoint]
    up = run_cli("upload", str(archives["rpt-clean"]), f"s3://{bucket}/a", *ep, "-q")
    assert up.returncode == 0, up.stderr.decode()
    pages = tmp_path / "pages"
    pages.mkdir()
    runs = {
        "reports": ["reports", "--json", "--store", str(STORE)],
        "list": ["list", "--json", f"s3://{bucket}/a", *ep],
        "audit": ["audit", "--json", str(archives["rpt-clean"]), "--output-dir",
                  str(tmp_path / "a"), "--html", f"{pages}/"],
        "verify": ["verify", "--json", str(archives["rpt-clean"]), "--output-dir",
                   str(tmp_path / "v"), "--html", f"{pages}/"],
    }  # fmt: skip
    for name, args in runs.items():
        done = run_cli(*args)
        assert done.returncode == 0, (name, done.stderr.decode())
        assert done.stderr == b"", (name, done.stderr.decode())
        assert done.stdout.decode().endswith("\n")
        for line in done.stdout.decode().splitlines():
            json.loads(line)
    # Without --json the human notes are still there.
    human = run_cli("reports", "--store", str(STORE))
    assert human.returncode == 0 and b"reports" in human.stdout + human.stderr


# ------------------------------------------------ exit_code: the process's


def test_several_bundles_each_record_carries_the_process_exit_code(
    archives: dict[str, Path], tmp_path: Path
) -> None:
    paths = [str(archives["rpt-clean"]), str(tmp_path / "nope"), str(archives["rpt-superseded"])]
    done = run_cli("verify", "--json", *paths)
    records = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert done.returncode == 3
    assert [r["exit_code"] for r in records] == [3, 3, 3]
    assert [r["input"] for r in records] == paths
    assert [r["verdict"] for r in records] == ["verified", "error", "verified"]
    good = run_cli("verify", "--json", paths[0], paths[2])
    assert good.returncode == 0
    assert [json.loads(x)["exit_code"] for x in good.stdout.decode().splitlines()] == [0, 0]


# ------------------------------------------------ a missing stored object: 3


@pytest.mark.parametrize("command", ["inspect", "verify", "audit", "extract", "prove", "download"])
def test_a_missing_stored_object_exits_3(
    s3_server: Server, bucket: str, tmp_path: Path, command: str
) -> None:
    url = f"s3://{bucket}/a/reports/bundles/rpt-x/{'cd' * 32}.tar.zst"
    extra = {
        "prove": ["--case", "c-1"],
        "download": [str(tmp_path / "d.tar.zst")],
        "extract": [str(tmp_path / "bag")],
    }
    done = run_cli(command, url, *extra.get(command, []), "--json",
                   "--endpoint-url", s3_server.endpoint)  # fmt: skip
    assert done.returncode == 3, done.stderr.decode()
    (line,) = done.stdout.decode().splitlines()
    record = json.loads(line)
    assert record["exit_code"] == 3 and record["input"] == url
    assert "no such object" in done.stderr.decode() + line
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------ output directories


@pytest.mark.parametrize("command", ["export", "prove", "render", "download", "verify", "audit"])
def test_a_missing_directory_ending_in_slash_is_refused_alike(
    archives: dict[str, Path], tmp_path: Path, command: str
) -> None:
    missing = f"{tmp_path}/newdir/"
    record = tmp_path / "v.json"
    record.write_bytes(run_cli("verify", "--json", str(archives["rpt-clean"])).stdout)
    key = f"s3://bkt/a/reports/bundles/rpt-x/{'cd' * 32}.tar.zst"
    args = {
        "export": ["export", "--store", str(STORE), "--report", "rpt-clean", "--principal",
                   "alice", "--exported-at", STAMP, "--out", missing],
        "prove": ["prove", str(archives["rpt-clean"]), "--case", "c-1", "--out", missing],
        "render": ["render", str(record), "--html", missing],
        "download": ["download", key, missing, "--endpoint-url", "http://127.0.0.1:9"],
        "verify": ["verify", str(archives["rpt-clean"]), "--html", missing],
        "audit": ["audit", str(archives["rpt-clean"]), "--html", missing],
    }[command]  # fmt: skip
    done = run_cli(*args)
    assert done.returncode == 2, done.stderr.decode()
    err = done.stderr.decode()
    assert "no such directory" in err and "Traceback" not in err and len(err.splitlines()) == 1
    assert not Path(missing).exists()


@pytest.mark.parametrize("command", ["verify", "audit"])
def test_html_into_a_directory_takes_the_name_render_gives(
    archives: dict[str, Path], tmp_path: Path, command: str
) -> None:
    pages, rendered = tmp_path / "pages", tmp_path / "rendered"
    pages.mkdir()
    rendered.mkdir()
    done = run_cli(command, str(archives["rpt-clean"]), "--html", f"{pages}/", "-q")
    assert done.returncode == 0, done.stderr.decode()
    record = tmp_path / "r.json"
    record.write_bytes(run_cli(command, "--json", str(archives["rpt-clean"])).stdout)
    assert run_cli("render", str(record), "--html", str(rendered)).returncode == 0
    (page,) = pages.iterdir()
    (same,) = rendered.iterdir()
    assert (
        page.name
        == same.name
        == f"rpt-clean.{'verification' if command == 'verify' else 'audit'}.html"
    )


# ------------------------------------------------ input in failing objects


def test_failing_objects_name_the_input_concerned(tmp_path: Path) -> None:
    export = ["export", "--store", str(STORE), "--report", "rpt-clean", "--json"]
    cases = [
        (["reports", "--json", "--store", str(tmp_path / "nope")], 3, str(tmp_path / "nope")),
        ([*export, "--principal", "alice", "--exported-at", "1969-01-01T00:00:00Z"], 2,
         "1969-01-01T00:00:00Z"),
        ([*export, "--principal", "carol", "--exported-at", STAMP], 4, "carol"),
        (["inspect", "--json", "--bogus", "x"], 2, "--bogus"),
        (["inspect", "--json", "--max-bytes", "lots", "x"], 2, "--max-bytes"),
    ]  # fmt: skip
    for args, code, concerned in cases:
        done = (
            run_cli(*args, "--out", str(tmp_path / "o.tar.zst"))
            if args[0] == "export"
            else (run_cli(*args))
        )
        record = _error_object(done, code)
        assert record["input"] == concerned, (args, record)
    assert not (tmp_path / "o.tar.zst").exists()


def test_usage_error_with_json_is_one_line_on_stderr(tmp_path: Path) -> None:
    done = run_cli("inspect", "--json", "--bogus", str(tmp_path))
    _error_object(done, 2)
    assert b"Usage:" not in done.stderr
    plain = run_cli("inspect", "--bogus", str(tmp_path))
    assert plain.returncode == 2 and b"Usage:" in plain.stderr  # Click's help, without --json


# ------------------------------------------------ stores and prefixes


def test_a_directory_or_prefix_that_is_no_store_is_refused(
    tmp_path: Path, s3_server: Server, bucket: str
) -> None:
    for store in (str(tmp_path), f"s3://{bucket}/nothing-here"):
        done = run_cli("reports", "--store", store, "--endpoint-url", s3_server.endpoint)
        assert done.returncode == 3, done.stderr.decode()
        assert "not a store" in done.stderr.decode() and done.stdout == b""
    key = f"s3://{bucket}/a/reports/bundles/rpt-x/{'cd' * 32}.tar.zst"
    done = run_cli("list", key, "--endpoint-url", s3_server.endpoint)
    assert done.returncode == 2 and b"an archive prefix is needed here" in done.stderr


@pytest.mark.parametrize("url", ["s3://bkt/x.json", "http://example.org/x.json"])
def test_a_url_for_a_local_path_is_named_as_typed(tmp_path: Path, url: str) -> None:
    done = run_cli("render", url, "--html", str(tmp_path / "p.html"))
    assert done.returncode == 2, done.stderr.decode()
    assert url in done.stderr.decode() and "a local path is needed" in done.stderr.decode()
    assert list(tmp_path.iterdir()) == []


def test_a_failing_audit_says_error_in_the_usual_voice(
    archives: dict[str, Path], tmp_path: Path
) -> None:
    bag = tmp_path / "bag"
    assert run_cli("extract", str(archives["rpt-clean"]), str(bag), "-q").returncode == 0
    cases = sorted(bag.rglob("*.jsonl"))[0]
    cases.write_bytes(cases.read_bytes() + b"\n")  # a payload no longer its digest
    (root,) = bag.iterdir()
    done = run_cli("audit", "--json", str(root))
    assert done.returncode == 1, done.stderr.decode()
    err = done.stderr.decode()
    assert err.startswith("evalbook-bundle: error: verification failed (") and "(s)" not in err


@pytest.mark.parametrize("value", HUGE, ids=("2**63", "10**40", "5000 digits"))
@pytest.mark.parametrize("command", ["verify", "inspect", "audit"])
def test_a_huge_max_bytes_is_no_cap_beyond_the_readers_own(
    archives: dict[str, Path], command: str, value: str
) -> None:
    # As the JavaScript verifier reads it (js/test/cli.test.mjs): any size in ASCII digits.
    done = run_cli(command, str(archives["rpt-clean"]), "--max-bytes", value, "--json")
    assert done.returncode == 0, done.stderr
