"""`render` refuses a record whose shown fields its own items do not give (SPEC 14).

Every field the page shows is either re-derived from the record's items or checked
against them. By class, through the installed command: the trust statement (anchor)
against the claims and signatures that checked it; each audit field's outcome and
comparison against its issued and derived values, and the values the page charts
against their shape; a fixity summary's counts, exit code and shares against its
problems; exit codes against verdicts; the text fields whose spelling the contract fixes.
Each refusal is exit 3, one line naming the file and the field, and no page. Records the
tool itself writes (anchored by digests, signed, audited) still render.
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
import records
from conftest import run_cli

from bundler.core import canonical
from bundler.core.claims import EXPECT_BUNDLE_SUBJECT, EXPECT_REPORT_SUBJECT, SIGNER_SUBJECT

D0 = "sha256:" + "0" * 64
SIG = {
    "where": "b.tar.zst.sig",
    "embedded": False,
    "state": "verified",
    "key": "SHA256:" + "A" * 43,
    "identity": "alice",
    "reason": None,
}


def _render(tmp_path: Path, record: dict[str, Any]) -> subprocess.CompletedProcess[bytes]:
    source = tmp_path / "record.json"
    source.write_bytes(canonical.dumps(record))
    out = tmp_path / "page.html"
    if out.exists():
        out.unlink()
    return run_cli("render", str(source), "--html", str(out))


def _refused(tmp_path: Path, record: dict[str, Any], pointer: str) -> str:
    proc = _render(tmp_path, record)
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    lines = err.splitlines()
    assert len(lines) == 1, lines
    assert f"record.json: {pointer}:" in lines[0], lines[0]
    assert "Traceback" not in err
    assert not (tmp_path / "page.html").exists()
    return lines[0]


def _renders(tmp_path: Path, record: dict[str, Any]) -> str:
    proc = _render(tmp_path, record)
    assert proc.returncode == 0, proc.stderr.decode()
    return (tmp_path / "page.html").read_text(encoding="utf-8")


# ---- the anchor: the page's trust statement -------------------------------------------


def _anchored(**anchor: Any) -> dict[str, Any]:
    """A consistent verification record whose anchor names what ``anchor`` gives."""
    r = records.verification(claims=[records.claim("proven")])
    r["anchor"].update(anchor)
    if anchor.get("signer"):
        r["signatures"] = [SIG]
    return records.consistent(r)


ANCHOR_FIELDS = [
    ("expected_bundle_digest", D0),
    ("expected_report_digest", D0),
    ("signer", "alice, key SHA256:" + "A" * 43),
]


@pytest.mark.parametrize(("key", "_"), ANCHOR_FIELDS)
def test_a_consistent_anchor_renders_first(tmp_path: Path, key: str, _: Any) -> None:
    record = _anchored(**{key: "x"})
    assert record["anchor"][key] is not None
    page = _renders(tmp_path, record)
    assert page.index("trust") < page.index("VERIFIED")


@pytest.mark.parametrize(("key", "_"), ANCHOR_FIELDS)
@pytest.mark.parametrize(
    "forgery",
    ["claim dropped", "other value", "claim not proven", "anchor dropped", "self-only flag"],
)
def test_an_anchor_its_claims_do_not_give_is_refused(
    tmp_path: Path, key: str, _: Any, forgery: str
) -> None:
    record = _anchored(**{key: "x"})
    subject = {
        "expected_bundle_digest": EXPECT_BUNDLE_SUBJECT,
        "expected_report_digest": EXPECT_REPORT_SUBJECT,
        "signer": SIGNER_SUBJECT,
    }[key]
    pointer = f"/anchor/{key}"
    if forgery == "claim dropped":
        record["claims"] = [c for c in record["claims"] if c["subject"] != subject]
        record = _recount(record)
    elif forgery == "other value":
        record["anchor"][key] = D0 if key != "signer" else "mallory, key SHA256:zzz"
    elif forgery == "claim not proven":
        # the claim failed, yet the record says verified: the verdict is refused first
        for c in record["claims"]:
            if c["subject"] == subject:
                c.update(state="unprovable", reason="case_limit", detail="x")
        record = _recount(record)
    elif forgery == "anchor dropped":
        record["anchor"][key] = None
        record["anchor"]["self_consistent_only"] = True
        if key == "signer":
            record["signatures"] = []
    elif forgery == "self-only flag":
        record["anchor"]["self_consistent_only"] = True
        pointer = "/anchor/self_consistent_only"
    _refused(tmp_path, record, pointer)


def _recount(record: dict[str, Any]) -> dict[str, Any]:
    """Counts, reasons and forecast as the claims give them, the anchor left alone."""
    anchor = copy.deepcopy(record["anchor"])
    sigs = copy.deepcopy(record.get("signatures"))
    claims = copy.deepcopy(record["claims"])
    r = records.consistent(record)
    r["anchor"], r["claims"] = anchor, claims
    if sigs is not None:
        r["signatures"] = sigs
    from collections import Counter

    states = Counter(c["state"] for c in claims)
    r["counts"] = {s: states[s] for s in ("proven", "unprovable", "failed")}
    r["unprovable_by_reason"] = dict(
        Counter(c["reason"] for c in claims if c["state"] == "unprovable")
    )
    n = states["unprovable"]
    r["strict_forecast"] = (
        f"FAILED ({n} unprovable {'claim' if n == 1 else 'claims'} would fail)" if n else None
    )
    return r


def test_the_reviewed_forgery_of_an_expected_digest_is_refused(tmp_path: Path) -> None:
    """A failed anchor claim dropped and the verdict set to verified: the trust box would
    have named a digest nothing checked."""
    record = _anchored(expected_bundle_digest="x")
    record["anchor"]["expected_bundle_digest"] = D0
    record["claims"] = [c for c in record["claims"] if c["subject"] != EXPECT_BUNDLE_SUBJECT]
    line = _refused(tmp_path, _recount(record), "/anchor/expected_bundle_digest")
    assert D0 in line


def test_a_proven_anchor_claim_must_have_found_the_record_digest(tmp_path: Path) -> None:
    record = _anchored(expected_bundle_digest="x")
    for c in record["claims"]:
        if c["subject"] == EXPECT_BUNDLE_SUBJECT:
            c["expected"] = c["observed"] = D0
    record["anchor"]["expected_bundle_digest"] = D0
    _refused(tmp_path, record, "/anchor/expected_bundle_digest")


@pytest.mark.parametrize("which", ["expected", "observed"])
def test_a_proven_claim_shows_one_value(tmp_path: Path, which: str) -> None:
    record = records.consistent(records.verification(claims=[records.claim("proven")]))
    record["claims"][0][which] = D0
    _refused(tmp_path, record, "/claims/0/observed")


# ---- exit codes and spelling of shown fields -------------------------------------------


# The process's code (SPEC 7): a verified bundle may stand in a run another bundle made
# exit 1, 3 or 5, so only codes no run could give beside the verdict are refused.
@pytest.mark.parametrize(
    ("verdict", "bad"),
    [("verified", 2), ("verified", 4), ("failed", 0), ("failed", 3), ("failed", 5)],
)
def test_an_exit_code_its_verdict_does_not_give_is_refused(
    tmp_path: Path, verdict: str, bad: int
) -> None:
    state = "proven" if verdict == "verified" else "failed"
    record = records.consistent(records.verification(claims=[records.claim(state)]))
    assert record["verdict"] == verdict
    record["exit_code"] = bad
    _refused(tmp_path, record, "/exit_code")


def _put(record: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    target = record
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


SPELLED = [
    (("tool", "version"), ["", "x", "1.0 beta", "<b>1</b>", "1.0\u202e"]),
    (("report_id",), ["", " rpt", "rpt x", "-rpt", "rpt\u200b", "a" * 129]),
    (
        ("report_issued_at",),
        ["x", "2026-13-01T00:00:00Z", "2026-01-01 00:00:00Z", "2026-01-01T00:00:00+01:00"],
    ),
    (("envelope", "superseded_at"), ["x", "yesterday", "2026-01-01T25:00:00Z"]),
]


@pytest.mark.parametrize(
    ("path", "value"), [(p, v) for p, values in SPELLED for v in values], ids=ascii
)
def test_a_shown_field_spelled_against_its_contract_is_refused(
    tmp_path: Path, path: tuple[str, ...], value: str
) -> None:
    record = records.consistent(records.verification(claims=[records.claim("proven")]))
    _put(record, path, value)
    _refused(tmp_path, record, "/" + "/".join(path))


@pytest.mark.parametrize(
    ("summary", "pointer"),
    [
        ({"x": {"y": [1, 2]}}, "/summary/x"),
        ({"mode": "bundle"}, "/summary"),
        ({"labels": [["a", "b"]]}, "/summary"),
    ],
    ids=ascii,
)
def test_an_evalbook_record_keeps_its_summary_empty(
    tmp_path: Path, summary: dict[str, Any], pointer: str
) -> None:
    record = records.consistent(records.verification(claims=[records.claim("proven")]))
    record["summary"] = summary
    _refused(tmp_path, record, pointer)


# ---- audit: every field's outcome from its own values ---------------------------------


def _audit_fields(record: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = [(f"/report/fields/{j}", f) for j, f in enumerate(record["report"]["fields"])]
    for i, c in enumerate(record["checks"]):
        out += [(f"/checks/{i}/fields/{j}", f) for j, f in enumerate(c["fields"])]
    return out


def test_flipping_any_outcome_is_refused_by_field(tmp_path: Path) -> None:
    base = records.consistent(records.audit())
    for pointer, _f in _audit_fields(base):
        record = copy.deepcopy(base)
        f = dict(_audit_fields(record))[pointer]
        if f["outcome"] not in ("agree", "disagree"):
            continue
        f["outcome"] = "agree" if f["outcome"] == "disagree" else "disagree"
        # the counts, disagreements and verdict follow the flipped outcome
        fixed = _recount_audit(record)
        _refused(tmp_path, fixed, f"{pointer}/outcome")


def _recount_audit(record: dict[str, Any]) -> dict[str, Any]:
    from collections import Counter

    fields = [f for _, f in _audit_fields(record)]
    outcomes = Counter(f["outcome"] for f in fields)
    n = outcomes["disagree"]
    record["disagreements"] = (record["disagreements"] * max(n, 1))[:n] or (
        [] if not n else [records.audit()["disagreements"][0]] * n
    )
    record["counts"].update(
        agree=outcomes["agree"], disagree=n, disagreements=len(record["disagreements"])
    )
    record["verdict"] = "inconsistent" if n else "consistent"
    record["exit_code"] = 1 if n else 0
    return record


def test_the_reviewed_all_agree_audit_is_refused(tmp_path: Path) -> None:
    record = records.consistent(records.audit())
    for _, f in _audit_fields(record):
        if f["outcome"] == "disagree":
            f["outcome"] = "agree"
    _refused(tmp_path, _recount_audit(record), "/checks/0/fields/0/outcome")


BAD_VALUES = {
    "coverage": [
        ({"expected": 1e308, "executed": -1e308}, "derived"),
        ({"expected": "12", "executed": "x"}, "both"),
        ({"expected": 3, "executed": 5, "missing": -2}, "both"),
        ({"expected": 3, "executed": 5, "missing": 0}, "derived"),
        ({"expected": 5, "executed": 3, "missing": 1}, "derived"),
        ([1, 2], "both"),
    ],
    "interval": [
        ({"low": 0.9, "high": 0.1, "level": 0.95, "method": "wilson"}, "derived"),
        ({"low": 0.1, "high": 0.9, "level": 1e308, "method": "wilson"}, "derived"),
        ({"low": "0.1", "high": 0.9, "level": 0.95, "method": "wilson"}, "both"),
    ],
    "score": [("0.7", "both"), ([0.7], "both"), ({"v": 1}, "both")],
    "aggregation": [({"rule": "pass_rate", "threshold": "0.75"}, "both"), ("x", "both")],
}


GOOD_VALUES = {
    "coverage": {"expected": 12, "executed": 12, "missing": 0},
    "interval": {"low": 0.1, "high": 0.9, "level": 0.95, "method": "wilson"},
}


@pytest.mark.parametrize(
    ("name", "value", "where"),
    [(n, v, w) for n, values in BAD_VALUES.items() for v, w in values],
    ids=ascii,
)
def test_a_value_the_page_charts_must_have_its_shape(
    tmp_path: Path, name: str, value: Any, where: str
) -> None:
    from bundler.evalbook.audit import Field
    from bundler.evalbook.auditor import comparison_of

    record = records.consistent(records.audit())
    issued = value if where == "both" else GOOD_VALUES[name]
    f = {
        "field": name,
        "outcome": "agree",
        "issued": [{"document": "body.json", "value": issued}],
        "derived": {"value": value},
        "comparison": comparison_of(Field(name)).value,
        "reason": None,
    }
    record["checks"][0]["fields"].append(f)
    record["counts"]["agree"] += 1
    j = len(record["checks"][0]["fields"]) - 1
    want = "issued/0/value" if where == "both" else "derived/value"
    _refused(tmp_path, record, f"/checks/0/fields/{j}/{want}")


@pytest.mark.parametrize("name", ["status", "score", "interval", "coverage"])
def test_a_comparison_other_than_the_fields_rule_is_refused(tmp_path: Path, name: str) -> None:
    from bundler.evalbook.audit import Field
    from bundler.evalbook.auditor import comparison_of

    record = records.consistent(records.audit())
    fields = record["checks"][0]["fields"]
    f = next((x for x in fields if x["field"] == name), None)
    if f is None:
        f = {
            "field": name,
            "outcome": "agree",
            "issued": [],
            "derived": None,
            "comparison": "exact",
            "reason": None,
        }
        fields.append(f)
        record["counts"]["agree"] += 1
    rule = comparison_of(Field(name)).value
    f["comparison"] = "tolerance" if rule == "exact" else "exact"
    j = fields.index(f)
    _refused(tmp_path, record, f"/checks/0/fields/{j}/comparison")


@pytest.mark.parametrize("key", ["expected_bundle_digest", "expected_report_digest", "signer"])
def test_an_audit_anchor_its_verification_does_not_give_is_refused(
    tmp_path: Path, key: str
) -> None:
    record = records.consistent(records.audit())
    record["anchor"][key] = D0 if key != "signer" else "alice, key SHA256:abc"
    record["anchor"]["self_consistent_only"] = False
    record["verification"]["signatures"] = []
    _refused(tmp_path, record, f"/anchor/{key}")


# ---- fixity: counts, exit code and shares from the problems ---------------------------


def _problem(key: str, outcome: str) -> dict[str, str]:
    return {"key": key, "outcome": outcome, "detail": "x"}


FIXITY_EDITS: list[tuple[str, str, Callable[[dict[str, Any]], None]]] = [
    *[
        (
            f"counts {o} below the problems",
            f"/counts/{o}",
            lambda r, o=o: r["problems"].append(_problem(f"more-{o}.tar.zst", o)),
        )
        for o in ("fail", "missing", "error")
    ],
    *[
        (f"counts {o} above the problems", f"/counts/{o}", lambda r, o=o: _more(r, o))
        for o in ("fail", "missing", "error")
    ],
    (
        "all passed beside a failure",
        "/counts/fail",
        lambda r: r.update(counts={"pass": 2, "fail": 0, "missing": 0, "error": 0}),
    ),
    (
        "a problem listed twice",
        "/counts/fail",
        lambda r: r["problems"].append(dict(r["problems"][0])),
    ),
    (
        "a key listed twice",
        "/problems/1/key",
        lambda r: (
            r["problems"].append(_problem(r["problems"][0]["key"], "missing")),
            r["counts"].update(missing=1, **{"pass": r["counts"]["pass"] - 1}),
        ),
    ),
    *[
        (
            f"interrupted {sig} exit {code}",
            "/exit_code",
            lambda r, s=sig, c=code: r.update(interrupted=s, exit_code=c),
        )
        for sig, code in [("SIGTERM", 0), ("SIGTERM", 1), ("SIGTERM", 130), ("SIGINT", 143)]
    ],
    ("interrupted by an unknown signal", "/interrupted", lambda r: r.update(interrupted="SIGKILL")),
    ("exit 0 beside a failure", "/exit_code", lambda r: r.update(exit_code=0)),
    ("exit 3 beside a failure", "/exit_code", lambda r: r.update(exit_code=3)),
    (
        "30d above 90d",
        "/shares/90d",
        lambda r: r.update(shares={"30d": 0.9, "90d": 0.5, "365d": 1.0}),
    ),
    (
        "90d above 365d",
        "/shares/365d",
        lambda r: r.update(shares={"30d": 0.1, "90d": 0.9, "365d": 0.5}),
    ),
    (
        "a share above one",
        "/shares/365d",
        lambda r: r.update(shares={"30d": 0.1, "90d": 0.5, "365d": 1.5}),
    ),
    (
        "a negative share",
        "/shares/30d",
        lambda r: r.update(shares={"30d": -0.1, "90d": 0.5, "365d": 1.0}),
    ),
]


def _more(r: dict[str, Any], outcome: str) -> None:
    r["counts"][outcome] += 1
    r["counts"]["pass"] -= 1


@pytest.mark.parametrize(
    ("what", "pointer", "edit"), FIXITY_EDITS, ids=[e[0] for e in FIXITY_EDITS]
)
def test_a_fixity_summary_its_problems_contradict_is_refused(
    tmp_path: Path, what: str, pointer: str, edit: Callable[[dict[str, Any]], None]
) -> None:
    record = records.consistent(records.fixity())
    assert _renders(tmp_path, record)
    edit(record)
    _refused(tmp_path, record, pointer)


@pytest.mark.parametrize(
    ("outcomes", "carried", "interrupted", "code"),
    [
        ((), 0, None, 0),
        (("fail",), 0, None, 1),
        (("missing",), 0, None, 1),
        (("error",), 0, None, 3),
        (("error",), 0, None, 5),
        ((), 1, None, 1),
        (("fail",), 0, "SIGINT", 130),
        ((), 0, "SIGTERM", 143),
    ],
)
def test_every_exit_code_the_items_give_renders(
    tmp_path: Path, outcomes: tuple[str, ...], carried: int, interrupted: str | None, code: int
) -> None:
    record = records.fixity(
        problems=[_problem(f"b{i}.tar.zst", o) for i, o in enumerate(outcomes)],
        counts={"pass": 1, **{o: outcomes.count(o) for o in ("fail", "missing", "error")}},
        carried=[
            {
                "key": "old.tar.zst",
                "outcome": "fail",
                "found": "2026-11-01T00:00:00.000000Z",
                "run_id": "r",
                "detail": "x",
            }
        ][:carried],
        interrupted=interrupted,
        exit_code=code,
    )
    if carried:  # only a run over a part of the source leaves an open failure unchecked
        record["selection"]["sample"] = "0/2"
    record["checked"] = sum(record["counts"].values())
    page = _renders(tmp_path, record)
    assert ("PASSED" in page) == (not outcomes and not carried)


# ---- records the tool writes render ---------------------------------------------------


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory, bundles: dict[str, Path]) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("signed")
    key = root / "alice"
    done = subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "x", "-f", str(key)],
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    bundle = root / "b.tar.zst"
    shutil.copyfile(bundles["rpt-clean/alice"], bundle)
    done = run_cli("sign", str(bundle), "--key", str(key))
    assert done.returncode == 0, done.stderr.decode()
    allowed = root / "allowed_signers"
    allowed.write_text("alice " + (root / "alice.pub").read_text(), encoding="utf-8")
    return bundle, allowed


@pytest.mark.parametrize("command", ["verify", "audit"])
@pytest.mark.parametrize("anchor", ["none", "digests", "signer"])
def test_anchored_records_the_tool_writes_render_and_name_their_anchor(
    tmp_path: Path, signed: tuple[Path, Path], command: str, anchor: str
) -> None:
    bundle, allowed = signed
    plain = json.loads(run_cli("verify", str(bundle), "--json").stdout)
    args: list[str] = []
    if anchor == "digests":
        args = [
            "--expect-bundle-digest",
            plain["bundle_digest"],
            "--expect-report-digest",
            plain["report_digest"],
        ]
    elif anchor == "signer":
        args = ["--allowed-signers", str(allowed)]
    proc = run_cli(command, str(bundle), "--json", *args)
    assert proc.returncode == 0, proc.stderr.decode()
    record = json.loads(proc.stdout)
    page = _renders(tmp_path, record)
    if anchor == "digests":
        assert f"Expected bundle digest {plain['bundle_digest']}" in page
    elif anchor == "signer":
        assert "Signed by alice, key SHA256:" in page
    else:
        assert "Self-consistency only" in page
