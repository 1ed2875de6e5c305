"""Every fact a page shows is tied to the item that proves it (SPEC 14; report/ties.py).

Records written by the real ``verify --json``, ``audit --json`` and ``fixity --json``,
each edited so that one shown field contradicts the items that prove it, are refused by
the installed ``render``: exit 3, one line naming the file and the field, no page. The
same records unedited render. Also: the escaping of refusals, the index a refusal
names, ``render -q``, and that no command leaves an output directory behind when another
of its outputs is refused.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from pages import AUDIT_STORE, EB_DIR, EXPORTED_AT, MAIN_STORE, Results, make_results

from bundler.core.claims import BUNDLE_DOCUMENT_SUBJECT, ENVELOPE_STATUS_SUBJECT
from bundler.evalbook.audit import TOLERANCE_RULE

Edit = Callable[[dict[str, Any]], None]
OTHER = "sha256:" + "ab" * 32
T = "2026-01-01T00:00:00.000000Z"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Real records of every kind the page shows, by name."""
    root = tmp_path_factory.mktemp("ties")
    results: Results = make_results(root / "pages")
    found = {
        name: json.loads(path.read_bytes())
        for name, path in (
            ("verified", results.verified),
            ("tampered", results.tampered),
            ("audit", results.audit),
            ("eb", results.eb),
            ("fixity", results.fixity),
        )
    }
    for report, store in (("rpt-superseded", MAIN_STORE), ("rpt-clean", MAIN_STORE)):
        out = root / f"{report}.tar.zst"
        done = run_cli(
            "export", "--store", str(store), "--report", report, "--principal", "alice",
            "--exported-at", EXPORTED_AT, "--out", str(out), "-q",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()
        found[report] = json.loads(run_cli("verify", str(out), "--json").stdout)
    found["audit-superseded"] = json.loads(
        run_cli("audit", str(root / "rpt-superseded.tar.zst"), "--json").stdout
    )
    run_dir = sorted((EB_DIR / "runs" / "default").iterdir())[0]
    done = run_cli("verify", str(run_dir), "--project", str(EB_DIR / "project"), "--json")
    assert done.returncode == 0, done.stderr.decode()
    found["run"] = json.loads(done.stdout)
    # Signed, checked against an allowed signer.
    key = root / "alice"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "x", "-f", str(key)],
        capture_output=True,
        check=True,
    )
    signed = root / "signed.tar.zst"
    shutil.copyfile(root / "rpt-clean.tar.zst", signed)
    assert run_cli("sign", str(signed), "--key", str(key)).returncode == 0
    allowed = root / "allowed_signers"
    allowed.write_text("alice " + (root / "alice.pub").read_text(), encoding="utf-8")
    done = run_cli("verify", str(signed), "--allowed-signers", str(allowed), "--json")
    assert done.returncode == 0, done.stderr.decode()
    found["signed"] = json.loads(done.stdout)
    assert AUDIT_STORE.is_dir()
    return found


def _render(
    tmp_path: Path, record: dict[str, Any], *args: str
) -> subprocess.CompletedProcess[bytes]:
    source = tmp_path / "record.json"
    source.write_text(json.dumps(record), encoding="utf-8")
    out = tmp_path / "page.html"
    if out.exists():
        out.unlink()
    return run_cli("render", str(source), "--html", str(out), *args)


def _refused(tmp_path: Path, record: dict[str, Any], pointer: str) -> str:
    proc = _render(tmp_path, record)
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"record.json: {pointer}:" in lines[0], lines[0]
    assert not (tmp_path / "page.html").exists()
    return lines[0]


def _renders(tmp_path: Path, record: dict[str, Any]) -> str:
    proc = _render(tmp_path, record)
    assert proc.returncode == 0, proc.stderr.decode()
    return (tmp_path / "page.html").read_text(encoding="utf-8")


# ---- edits: each makes one shown field contradict what proves it ----------------------


def _claim(record: dict[str, Any], subject: str) -> dict[str, Any]:
    return next(c for c in record["claims"] if c["subject"] == subject)


def _drop_claim(subject: str) -> Edit:
    def edit(r: dict[str, Any]) -> None:
        gone = _claim(r, subject)
        r["claims"].remove(gone)
        r["counts"][gone["state"]] -= 1

    return edit


def _set(path: str, value: Any) -> Edit:
    def edit(r: dict[str, Any]) -> None:
        *head, last = path.split("/")
        holder = r
        for key in head:
            holder = holder[int(key)] if isinstance(holder, list) else holder[key]
        holder[int(last) if isinstance(holder, list) else last] = copy.deepcopy(value)

    return edit


def _both(*edits: Edit) -> Edit:
    def edit(r: dict[str, Any]) -> None:
        for e in edits:
            e(r)

    return edit


CURRENT = {"status": "current", "superseded_by": None, "superseded_at": None, "reason": None}
SUPERSEDED = {
    "status": "superseded",
    "superseded_by": "rpt-x",
    "superseded_at": None,
    "reason": None,
}


def _fail_signature(r: dict[str, Any]) -> None:
    c = _claim(r, "signature")
    c.update(state="failed", detail="bad")
    r["counts"]["proven"] -= 1
    r["counts"]["failed"] += 1
    r.update(verdict="failed", exit_code=1)


def _swap_disagreement(r: dict[str, Any]) -> None:
    d = r["disagreements"][0]
    d["issued"][0]["value"], d["derived"]["value"] = d["derived"]["value"], d["issued"][0]["value"]


def _duplicate_eb_check(r: dict[str, Any]) -> None:
    r["summary"]["checks"].append(dict(r["summary"]["checks"][0]))


def _carried(key: str, times: int = 1, limited: bool = True) -> Edit:
    def edit(r: dict[str, Any]) -> None:
        if limited:
            r["selection"]["limit"] = 5
        r["carried"] = [
            {"key": key, "outcome": "fail", "found": T, "run_id": "r1", "detail": "x"}
        ] * times
        r["exit_code"] = 1

    return edit


EDITS: list[tuple[str, str, str, Edit]] = [
    # (record, what, pointer refused, edit)
    ("rpt-superseded", "envelope current", "/envelope/status", _set("envelope", CURRENT)),
    ("rpt-superseded", "envelope null", "/envelope/status", _set("envelope", None)),
    ("rpt-clean", "envelope superseded", "/envelope/status", _set("envelope", SUPERSEDED)),
    (
        "rpt-clean",
        "no envelope claim, null",
        "/envelope/status",
        _both(_drop_claim(ENVELOPE_STATUS_SUBJECT), _set("envelope", None)),
    ),
    ("verified", "bundle digest", "/bundle_digest", _set("bundle_digest", OTHER)),
    ("verified", "report digest", "/report_digest", _set("report_digest", OTHER)),
    ("verified", "report id", "/report_id", _set("report_id", "rpt-other")),
    ("verified", "no bundle proof", "/bundle_digest", _drop_claim(BUNDLE_DOCUMENT_SUBJECT)),
    ("tampered", "bundle digest", "/bundle_digest", _set("bundle_digest", OTHER)),
    ("tampered", "report digest", "/report_digest", _set("report_digest", OTHER)),
    ("signed", "signature failed", "/anchor/signer", _fail_signature),
    ("eb", "run id", "/summary/run_id", _set("summary/run_id", "x")),
    ("eb", "empty summary", "/summary/mode", _set("summary", {})),
    ("eb", "mode", "/summary/mode", _set("summary/mode", "run_directory")),
    ("eb", "duplicate check", "/summary/checks/9/check_id", _duplicate_eb_check),
    ("eb", "bundle digest", "/bundle_digest", _set("bundle_digest", OTHER)),
    ("eb", "report digest", "/report_digest", _set("report_digest", OTHER)),
    (
        "eb",
        "kind EvalBook",
        "/report_issued_at",
        _set("bundle_schema", "evalbook.reproducibility_bundle.v1"),
    ),
    (
        "verified",
        "kind eval-banana",
        "/report_id",
        _set("bundle_schema", "evalbook.eval_banana_bundle.v1"),
    ),
    ("run", "a bundle digest", "/bundle_digest", _set("bundle_digest", OTHER)),
    ("run", "report digest", "/report_digest", _set("report_digest", OTHER)),
    ("run", "mode", "/summary/mode", _set("summary/mode", "bundle")),
    (
        "audit",
        "field of a disagreement",
        "/disagreements/1",
        _both(
            _set("disagreements/1/field", "score"), _set("disagreements/1/derived", {"value": 0.1})
        ),
    ),
    ("audit", "issued and derived swapped", "/disagreements/0", _swap_disagreement),
    ("audit", "check id", "/disagreements/1", _set("disagreements/1/check_id", "nonexistent")),
    (
        "audit",
        "kind",
        "/disagreements/1",
        _both(
            _set("disagreements/1/kind", "between_documents"), _set("disagreements/1/derived", None)
        ),
    ),
    ("audit", "comparison", "/disagreements/1", _set("disagreements/1/comparison", "tolerance")),
    ("audit", "check renamed", "/disagreements/1", _set("checks/0/check_id", "other")),
    ("audit", "report id", "/report/report_id", _set("report/report_id", "rpt-other")),
    (
        "audit",
        "report result",
        "/verification/report_result",
        _set("verification/report_result", "inconclusive"),
    ),
    ("audit", "envelope null", "/verification/envelope", _set("verification/envelope", None)),
    ("audit", "tolerance rule", "/tolerance/rule", _set("tolerance/rule", "anything")),
    (
        "audit",
        "too many",
        "/disagreements",
        _both(_set("verdict", "consistent"), _set("exit_code", 0)),
    ),
    ("fixity", "carried is a problem", "/carried/0/key", _carried("tampered.tar.zst")),
    ("fixity", "carried twice", "/carried/1/key", _carried("gone.tar.zst", 2)),
    ("fixity", "carried by a full run", "/carried", _carried("gone.tar.zst", 1, False)),
    ("fixity", "listed short", "/listed", _set("listed", 1)),
]


@pytest.mark.parametrize(
    ("name", "pointer", "edit"),
    [(n, p, e) for n, _w, p, e in EDITS],
    ids=[f"{n}-{w}" for n, w, _p, _e in EDITS],
)
def test_a_shown_field_its_items_contradict_is_refused(
    tmp_path: Path, made: dict[str, dict[str, Any]], name: str, pointer: str, edit: Edit
) -> None:
    record = copy.deepcopy(made[name])
    edit(record)
    _refused(tmp_path, record, pointer)


@pytest.mark.parametrize("name", ["verified", "tampered", "audit", "eb", "fixity", "rpt-superseded",
                                  "rpt-clean", "audit-superseded", "run", "signed"])  # fmt: skip
def test_the_records_the_tool_writes_render(
    tmp_path: Path, made: dict[str, dict[str, Any]], name: str
) -> None:
    page = _renders(tmp_path, made[name])
    assert "(not proven" not in page or name == "tampered"
    assert "cannot re-check a signature or re-derive values" in page or name == "fixity"


# ---- the envelope's successor: every spelling, every kind carrying one ---------------

SUCCESSORS = [
    ("blank", " "),
    ("empty", ""),
    ("zero width", "\u200b"),
    ("bidi", "\u202erpt-clean"),
    ("trailing space", "rpt-clean "),
    ("dot", "."),
    ("dotdot", ".."),
    ("slash", "a/b"),
    ("too long", "r" * 129),
    ("itself", None),  # the record's own report id
]


@pytest.mark.parametrize("spelling", [s for _, s in SUCCESSORS], ids=[n for n, _ in SUCCESSORS])
@pytest.mark.parametrize("name", ["rpt-superseded", "audit-superseded"])
def test_a_successor_not_naming_another_report_is_refused(
    tmp_path: Path, made: dict[str, dict[str, Any]], name: str, spelling: str | None
) -> None:
    record = copy.deepcopy(made[name])
    where = record if name == "rpt-superseded" else record["verification"]
    assert where["envelope"]["status"] == "superseded"
    where["envelope"]["superseded_by"] = where["report_id"] if spelling is None else spelling
    prefix = "" if where is record else "/verification"
    line = _refused(tmp_path, record, f"{prefix}/envelope/superseded_by")
    assert "\\\\u" not in line  # escaped once


@pytest.mark.parametrize("name", ["rpt-superseded", "audit-superseded"])
@pytest.mark.parametrize(
    ("at", "ok"),
    [
        ("2026-10-19T00:00:00Z", False),
        ("2026-10-20T09:29:59.999Z", False),
        ("2026-10-20T09:30:00Z", True),
        ("2026-10-20T09:30:00.5Z", True),
        ("2027-01-01T00:00:00Z", True),
    ],
)
def test_a_supersession_before_issue_is_refused(
    tmp_path: Path, made: dict[str, dict[str, Any]], name: str, at: str, ok: bool
) -> None:
    record = copy.deepcopy(made[name])
    where = record if name == "rpt-superseded" else record["verification"]
    assert where["report_issued_at"] == "2026-10-20T09:30:00Z"
    where["envelope"]["superseded_at"] = at
    if ok:
        _renders(tmp_path, record)
    else:
        prefix = "" if where is record else "/verification"
        _refused(tmp_path, record, f"{prefix}/envelope/superseded_at")


# ---- what the page says ---------------------------------------------------------------


def test_a_failed_record_without_a_proof_shows_the_fact_unproven(
    tmp_path: Path, made: dict[str, dict[str, Any]]
) -> None:
    record = copy.deepcopy(made["tampered"])
    _drop_claim(BUNDLE_DOCUMENT_SUBJECT)(record)
    page = _renders(tmp_path, record)
    start = page.index("<dt>bundle digest</dt>")
    assert "(not proven: no claim of this result observed it)" in page[start : start + 300]


def test_the_audit_page_shows_disagreements_from_their_values(
    tmp_path: Path, made: dict[str, dict[str, Any]]
) -> None:
    record = copy.deepcopy(made["audit"])
    record["disagreements"][1]["detail"] = "all fine"
    page = _renders(tmp_path, record)
    box = page[page.index('id="disagreement-2"') :]
    box = box[: box.index("</div>")]
    assert "issued pass (data/report/body.json, data/checks/accuracy.json); derived fail" in box
    assert "in the record's words" in box and "all fine" in box
    assert "shown in full, as the record holds them" in page
    assert "shown rounded" not in page
    assert f"agree when {TOLERANCE_RULE}".replace("<", "&lt;") in page
    assert "the audit re-derives it below" in page and "VERIFIED means" not in page


# ---- refusals: escaped once, the right index, the real length -------------------------


@pytest.mark.parametrize(
    ("path", "value", "shown"),
    [
        ("verdict", "verified\n", "'verified\\x0a'"),
        ("tool/name", "\u202e", "'\\u202e'"),
        ("verified_at", "\u202e", "'\\u202e'"),
        ("strict_forecast", "x\u202e", "'x\\u202e'"),
    ],
)
def test_a_refusal_escapes_the_value_once(
    tmp_path: Path, made: dict[str, dict[str, Any]], path: str, value: str, shown: str
) -> None:
    record = copy.deepcopy(made["verified"])
    _set(path, value)(record)
    line = _refused(tmp_path, record, "/" + path)
    assert shown in line and "\\\\" not in line


@pytest.mark.parametrize("index", [0, 1, 7, 40])
def test_a_duplicate_key_names_its_own_item(
    tmp_path: Path, made: dict[str, dict[str, Any]], index: int
) -> None:
    record = made["verified"]
    parts = [json.dumps(c) for c in record["claims"]]
    parts[index] = parts[index][:-1] + ', "state": "proven"}'
    text = json.dumps({**record, "claims": "@"}).replace('"@"', "[" + ", ".join(parts) + "]")
    (tmp_path / "record.json").write_text(text, encoding="utf-8")
    proc = run_cli("render", str(tmp_path / "record.json"), "--html", str(tmp_path / "p.html"))
    err = proc.stderr.decode()
    assert proc.returncode == 3 and f"/claims/{index}:" in err and "duplicate" in err, err
    assert not (tmp_path / "p.html").exists()


def test_a_list_too_long_names_its_length_and_the_bounding_field(
    tmp_path: Path, made: dict[str, dict[str, Any]]
) -> None:
    record = copy.deepcopy(made["audit"])
    record.update(verdict="consistent", exit_code=0)
    n = len(record["disagreements"])
    line = _refused(tmp_path, record, "/disagreements")
    assert f"has {n} items, at most 0 allowed when /verdict is 'consistent'" in line


# ---- quiet, and outputs checked before any is made --------------------------------------


def test_render_quiet_prints_nothing(tmp_path: Path, made: dict[str, dict[str, Any]]) -> None:
    proc = _render(tmp_path, made["verified"], "-q")
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""
    proc = _render(tmp_path, made["verified"])
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr.startswith(b"Wrote:")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "b.tar.zst"
    done = run_cli(
        "export", "--store", str(MAIN_STORE), "--report", "rpt-clean", "--principal", "alice",
        "--exported-at", EXPORTED_AT, "--out", str(out), "-q",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    return out


def _html_refused(tmp_path: Path, how: str) -> str:
    """An --html value refused before any work, of each kind."""
    if how == "existing file":
        (tmp_path / "exists.html").write_text("x", encoding="utf-8")
        return str(tmp_path / "exists.html")
    if how == "missing directory":
        return str(tmp_path / "nowhere" / "p.html")
    if how == "dangling link":
        (tmp_path / "link.html").symlink_to(tmp_path / "absent")
        return str(tmp_path / "link.html")
    assert how == "not a directory"
    (tmp_path / "file").write_text("x", encoding="utf-8")
    return str(tmp_path / "file") + "/"


@pytest.mark.parametrize("command", ["verify", "audit"])
@pytest.mark.parametrize(
    "how", ["existing file", "missing directory", "dangling link", "not a directory"]
)
def test_a_refused_output_leaves_no_output_directory(
    tmp_path: Path, bundle: Path, command: str, how: str
) -> None:
    html = _html_refused(tmp_path, how)
    before = sorted(p.name for p in tmp_path.iterdir())
    proc = run_cli(command, str(bundle), "--output-dir", str(tmp_path / "od"), "--html", html)
    err = proc.stderr.decode()
    assert proc.returncode in (2, 3), err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert not (tmp_path / "od").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("command", ["verify", "audit", "extract"])
def test_a_refused_option_leaves_no_output_directory(
    tmp_path: Path, bundle: Path, command: str
) -> None:
    target = (
        ["--output-dir", str(tmp_path / "od")] if command != "extract" else [str(tmp_path / "od")]
    )
    proc = run_cli(command, str(bundle), *target, "--allowed-signers", str(tmp_path / "absent"))
    assert proc.returncode in (2, 3), proc.stderr.decode()
    assert not (tmp_path / "od").exists()


def test_an_existing_page_in_a_directory_is_refused_as_a_file_is(
    tmp_path: Path, made: dict[str, dict[str, Any]]
) -> None:
    (tmp_path / "d").mkdir()
    source = tmp_path / "v.json"
    source.write_text(json.dumps(made["rpt-clean"]), encoding="utf-8")
    (tmp_path / "d" / "rpt-clean.verification.html").write_text("x", encoding="utf-8")
    (tmp_path / "f.html").write_text("x", encoding="utf-8")
    in_dir = run_cli("render", str(source), "--html", str(tmp_path / "d")).stderr.decode()
    as_file = run_cli("render", str(source), "--html", str(tmp_path / "f.html")).stderr.decode()
    rule = "already exists; an output is never written over anything"
    assert f"--html: {tmp_path / 'd' / 'rpt-clean.verification.html'}: {rule}" in in_dir
    assert f"--html: {tmp_path / 'f.html'}: {rule}" in as_file


def test_a_page_inside_the_new_output_directory_is_checked_once_it_exists(
    tmp_path: Path, bundle: Path
) -> None:
    od = tmp_path / "od"
    proc = run_cli("verify", str(bundle), "--output-dir", str(od), "--html", f"{od}/sub/p.html")
    assert proc.returncode == 3 and "Traceback" not in proc.stderr.decode()
    assert not od.exists()
    proc = run_cli("verify", str(bundle), "--output-dir", str(od), "--html", f"{od}/p.html", "-q")
    assert proc.returncode == 0, proc.stderr.decode()
    assert sorted(p.name for p in od.iterdir()) == [
        "p.html",
        "verification.json",
        "verification.md",
    ]
