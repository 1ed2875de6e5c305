"""The last gaps of one voice on the command line (SPEC 5, 7): ``exit_code`` and
``input`` in every failure record, ``--json`` without the human summary, output
directories for ``--html`` and for several bundles, and messages that say what is so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EXPORTED_AT, REPO, run_cli
from s3_server import Server

import bundler
from bundler.core.schemas import validate
from bundler.report.render import export_eb_text, export_text

STORE = REPO / "fixtures" / "stores" / "main"


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("gaps")
    found = {}
    for report in ("rpt-clean", "rpt-superseded"):
        found[report] = bundler.export(
            STORE, report, principal="alice", out=out, exported_at=EXPORTED_AT
        ).path
    garbage = out / "garbage.tar.zst"
    garbage.write_bytes(b"not a bundle at all")
    found["garbage"] = garbage
    return found


@pytest.mark.parametrize("command", ["verify", "extract"])
def test_an_unreadable_bundle_record_carries_exit_code_and_input(
    command: str, archives: dict[str, Path], tmp_path: Path
) -> None:
    garbage = str(archives["garbage"])
    extra = [str(tmp_path / "bag")] if command == "extract" else []
    done = run_cli(command, "--json", garbage, *extra)
    assert done.returncode == 3
    (line,) = done.stdout.decode().splitlines()
    record = json.loads(line)
    validate("verification", record, source=command)
    assert (record["verdict"], record["exit_code"], record["input"]) == ("error", 3, garbage)
    # stderr: the error, once, and no human summary.
    (error,) = done.stderr.decode().splitlines()
    assert error.startswith("evalbook-bundle: error: ") and "Verdict:" not in error
    assert not (tmp_path / "bag").exists()


def test_every_verify_record_carries_the_process_exit_code(archives: dict[str, Path]) -> None:
    # SPEC 7: every object a failing command prints carries the process's exit code;
    # each bundle's own outcome is its verdict.
    paths = [str(archives["rpt-clean"]), str(archives["garbage"])]
    done = run_cli("verify", "--json", *paths)
    records = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert [(r["exit_code"], r["input"]) for r in records] == [(3, paths[0]), (3, paths[1])]
    assert [r["verdict"] for r in records] == ["verified", "error"]
    assert done.returncode == 3


@pytest.mark.parametrize("command", ["export", "verify"])
def test_json_prints_no_human_summary_on_stderr(
    command: str, archives: dict[str, Path], tmp_path: Path
) -> None:
    if command == "export":
        args = ["export", "--store", str(STORE), "--report", "rpt-clean", "--principal", "alice"]
        args += ["--out", str(tmp_path), "--exported-at", "2026-11-30T00:00:00Z"]
    else:
        args = ["verify", str(archives["rpt-clean"])]
    done = run_cli(*args, "--json")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b""
    assert len(done.stdout.decode().splitlines()) == 1


def test_html_into_a_directory_writes_the_default_name(
    archives: dict[str, Path], tmp_path: Path
) -> None:
    pages = tmp_path / "pages"
    pages.mkdir()
    done = run_cli("verify", str(archives["rpt-clean"]), "--html", f"{pages}/", "-q")
    assert done.returncode == 0, done.stderr.decode()
    # One default name for a page, whoever writes it: render's <report_id>.<kind>.html.
    assert sorted(p.name for p in pages.iterdir()) == ["rpt-clean.verification.html"]
    record = tmp_path / "v.json"
    record.write_bytes(run_cli("verify", "--json", str(archives["rpt-clean"])).stdout)
    others = tmp_path / "others"
    others.mkdir()
    done = run_cli("render", str(record), "--html", str(others), "--json")
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout)["out"] == str(others / "rpt-clean.verification.html")
    # Never over an existing page; a directory that does not exist is a usage error.
    again = run_cli("render", str(record), "--html", str(pages))
    assert again.returncode == 3 and "already exists" in again.stderr.decode()
    missing = run_cli("render", str(record), "--html", f"{tmp_path}/absent/")
    assert missing.returncode == 2 and "--html" in missing.stderr.decode()


def test_several_bundles_write_one_pair_each_named_by_report_id(
    archives: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    bundles = [archives["rpt-clean"], archives["rpt-superseded"], archives["garbage"]]
    done = run_cli("verify", *map(str, bundles), "--output-dir", str(out), "--html", f"{out}/")
    assert done.returncode == 3, done.stderr.decode()
    stems = ["rpt-clean", "rpt-superseded", "bundle-3"]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{s}.verification.{ext}" for s in stems for ext in ("json", "md", "html")
    )
    for stem, path in zip(stems, bundles, strict=True):
        record = json.loads((out / f"{stem}.verification.json").read_bytes())
        assert record["input"] == str(path)
    # An --output-dir with contents is refused before any work.
    refused = run_cli("verify", *map(str, bundles), "--output-dir", str(out))
    assert refused.returncode == 3 and "not empty" in refused.stderr.decode()
    assert refused.stdout == b""


def test_a_bundle_digest_mismatch_says_where_the_digest_is_printed(
    archives: dict[str, Path],
) -> None:
    wrong = "sha256:" + "0" * 64
    done = run_cli("verify", "--json", "--expect-bundle-digest", wrong, str(archives["rpt-clean"]))
    assert done.returncode == 1
    (failure,) = [c for c in json.loads(done.stdout)["claims"] if c["state"] == "failed"]
    assert "Bundle digest:" in failure["detail"] and "first word" not in failure["detail"]


def test_a_deleted_file_is_missing_not_different(archives: dict[str, Path], tmp_path: Path) -> None:
    bag = tmp_path / "bag"
    assert bundler.extract(archives["rpt-clean"], bag).exit_code == 0
    (top,) = bag.iterdir()
    blob = sorted((top / "data" / "blobs" / "sha256").iterdir())[0]
    blob.unlink()
    result = bundler.verify(top)
    failed = [c for c in result.claims if c.path == f"data/blobs/sha256/{blob.name}"]
    assert failed and all(c.detail != "digest differs" for c in failed)
    assert any((c.detail or "").startswith("missing") for c in failed), failed


def test_inspect_says_whether_the_bundle_is_signed(
    archives: dict[str, Path], tmp_path: Path
) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    copy = tmp_path / "b.tar.zst"
    copy.write_bytes(archives["rpt-clean"].read_bytes())
    unsigned = run_cli("inspect", str(copy))
    assert "Signed:      no" in unsigned.stdout.decode()
    key = tmp_path / "key"
    key.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    key.chmod(0o600)
    assert run_cli("sign", str(copy), "--key", str(key)).returncode == 0
    signed = run_cli("inspect", str(copy))
    assert "Signed:      yes: 1 signature beside it (not checked" in signed.stdout.decode()
    assert json.loads(run_cli("inspect", "--json", str(copy)).stdout)["signed"] is True


@pytest.mark.parametrize("n", [1, 2])
def test_summaries_count_in_the_singular_for_one(n: int) -> None:
    counts = dict.fromkeys(
        ("checks", "cases_exported", "cases_total", "scorers", "datasets", "examples",
         "payloads", "unavailable", "redacted", "run_files", "definition_files"),
        n,
    )
    summary = {
        "report_id": "r", "run_id": "r", "path": "p", "report_digest": "d", "archive_size": 1,
        "counts": counts, "unavailable_by_reason": {}, "redacted_by_reason": {},
    }
    text = export_text(summary) + export_eb_text(summary)
    for unit in ("check", "scorer", "dataset", "example", "payload", "run file"):
        word = unit if n == 1 else unit + "s"
        assert f"{n} {word}," in text or f"{n} {word}\n" in text, (unit, text)
    if n == 1:
        assert "1 scorers" not in text and "1 checks" not in text


def test_a_library_error_is_shown_under_the_option(tmp_path: Path) -> None:
    done = run_cli("reports", "--store", str(tmp_path / "absent"))
    assert done.returncode == 3
    assert done.stderr.decode().startswith(f"evalbook-bundle: error: --store: {tmp_path}/absent")
    done = run_cli("fixity", str(tmp_path), "--sample", "9/3", "--ledger", str(tmp_path / "l"))
    assert done.returncode == 2 and "--sample" in done.stderr.decode()


def test_list_aligns_its_columns(
    archives: dict[str, Path], s3_server: Server, bucket: str
) -> None:
    endpoint = ["--endpoint-url", s3_server.endpoint]
    for report in ("rpt-clean", "rpt-superseded"):
        done = run_cli("upload", str(archives[report]), f"s3://{bucket}/a", *endpoint)
        assert done.returncode == 0, done.stderr.decode()
    done = run_cli("list", f"s3://{bucket}/a", *endpoint)
    assert done.returncode == 0, done.stderr.decode()
    header, *rows = done.stdout.decode().splitlines()
    assert header.split() == ["REPORT", "BUNDLE", "DIGEST", "SIZE", "LAST", "MODIFIED", "SIGNED", "KEY"]
    assert len(rows) == 2
    # Each column starts at the same offset on every line.
    starts = [header.index(name) for name in ("BUNDLE DIGEST", "LAST MODIFIED", "SIGNED", "KEY")]
    for row in rows:
        for start in starts:
            assert row[start - 2 : start] == "  " and row[start] != " ", (row, start)
    assert done.stderr.decode() == "2 bundles\n"
