"""The auditor's page (SPEC 14) without a browser: inert, escaped, deterministic, small.

Every page is parsed with html.parser; the tests fail on anything that could fetch
(``src``, ``href``, ``url(``, ``@import``), on any script, on an element a hostile
record adds, and on a bidirectional or invisible character reaching the page raw.
"""

from __future__ import annotations

import json
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from pages import Results, kinds, make_results

from bundler.core.schemas import validate
from bundler.report.page import CSP, audit_page, fixity_page, render_record, verification_page

HOSTILE = (
    '<script>alert(1)</script>"><img src=x onerror=alert(1)></style>'
    '<a href="javascript:alert(1)">x</a><svg><foreignObject><p>f</p></foreignObject></svg>'
    "\u202eevil\u200bhidden"
)
# Keys whose values choose the page's structure (the record's kind and the vocabulary
# the templates branch on); every other string of a record is free text.
STRUCTURAL = {"schema", "state", "verdict", "outcome", "field", "scope", "kind", "status"}
# Keys whose values the record's schema constrains (patterns, enums, constants), or that
# the record's own items tie together (an anchor and the claim that checked it, an audit
# field's values and its outcome, a fixity problem's key listed once, the spelling of a
# version or a timestamp): a record must be schema-valid and agree with itself to be
# rendered at all (SPEC 14), so these keep their values.
CONSTRAINED = {
    "version",
    "report_issued_at",
    "signer",
    "description",
    "anchor",
    "identity",
    "key",
    "expected",
    "observed",
    "value",
    "verified_at",
    "found",
    # An aggregation's rule: a check's derived status rests on it (SPEC 12's rule).
    "rule",
    "audited_at",
    "bundle_digest",
    "report_digest",
    "expected_bundle_digest",
    "expected_report_digest",
    "sha256",
    "record_sha256",
    "run_id",
    "started",
    "finished",
    "check_id",
    "report_id",
    "name",
    "reason",
    "group_name",
    "code",
    "mode",
    "bundle_schema",
    "report_result",
    "superseded_at",
    "strict_forecast",
    "sample",
    "level",
    "comparison",
    # The claims that prove a shown fact are found by subject (report/ties.py), and a
    # successor is a report identifier.
    "subject",
    "superseded_by",
}


class Page(HTMLParser):
    """Every start tag with its attributes, the text, and the CSP meta of one page."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: Counter[str] = Counter()
        self.attrs: list[tuple[str, str, str | None]] = []
        self.text: list[str] = []
        self.styles: list[str] = []
        self.csp: list[str] = []
        self._in_style = False
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        self.attrs += [(tag, k, v) for k, v in attrs]
        self._in_style = tag == "style"
        d = dict(attrs)
        if tag == "meta" and (d.get("http-equiv") or "").lower() == "content-security-policy":
            self.csp.append(d.get("content") or "")

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        (self.styles if self._in_style else self.text).append(data)


def assert_inert(html: bytes) -> Page:
    text = html.decode("utf-8")
    page = Page(text)
    assert page.csp == [CSP]
    assert page.tags["script"] == 0 and "<script" not in text.lower()
    for tag, name, value in page.attrs:
        assert name not in ("src", "href", "srcset", "action", "formaction", "xlink:href"), (
            tag,
            name,
            value,
        )
        assert not name.startswith("on"), (tag, name)
        assert "url(" not in (value or "").lower(), (tag, name, value)
    css = "".join(page.styles).lower()
    assert "url(" not in css and "@import" not in css
    for forbidden in ("iframe", "object", "embed", "link", "img", "foreignobject", "base", "form"):
        assert page.tags[forbidden] == 0, forbidden
    return page


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Results:
    return make_results(tmp_path_factory.mktemp("pages"))


def load(path: Path) -> dict[str, Any]:
    value = json.loads(path.read_bytes())
    assert isinstance(value, dict)
    return value


@pytest.mark.parametrize("name", ["verified", "tampered", "audit", "eb", "fixity"])
def test_each_kind_renders_inert_and_says_its_verdict(
    results: Results, name: str, tmp_path: Path
) -> None:
    out = tmp_path / "page.html"
    proc = run_cli("render", str(kinds(results)[name]), "--html", str(out), "--json")
    assert proc.returncode == 0, proc.stderr.decode()
    line = json.loads(proc.stdout)
    validate("rendered", line, source="render --json")
    assert line["out"] == str(out)
    assert line["kind"] == {
        "verified": "verification",
        "tampered": "verification",
        "eb": "verification",
    }.get(name, name)
    page = assert_inert(out.read_bytes())
    text = " ".join(page.text)
    expected = {
        "verified": "VERIFIED",
        "tampered": "FAILED",
        "audit": "INCONSISTENT",
        "eb": "VERIFIED",
        "fixity": "FAILED",
    }[name]
    assert expected in text
    assert page.tags["svg"] >= 1
    roles = [v for tag, k, v in page.attrs if tag == "svg" and k == "role"]
    assert roles == ["img"] * page.tags["svg"]
    assert page.tags["title"] == page.tags["svg"] + 1  # the page's and one per chart
    assert page.tags["desc"] == page.tags["svg"]
    assert "@media print" in out.read_text()


def test_verification_page_content_in_reading_order(results: Results) -> None:
    record = load(results.tampered)
    text = " ".join(Page(verification_page(record).decode()).text)
    order = [
        "Self-consistency only",
        "FAILED",
        "rpt-clean",
        "Suite, scorers and datasets",
        "Claim groups",
        "manifest-sha256.txt entry",
        "cases_tree root",
        "evalbook-bundle 0.1.0",
        record["verified_at"],
        record["archive"]["sha256"],
        "evalbook-bundle verify",
    ]
    positions = [text.index(s) for s in order]
    assert positions == sorted(positions)
    for c in record["claims"]:
        if c["state"] == "failed":
            assert c["expected"] in text and c["observed"] in text


def test_unprovable_reasons_explained_in_words(results: Results) -> None:
    from bundler.evalbook.listing import explain_reason

    record = load(results.verified)
    text = " ".join(Page(verification_page(record).decode()).text)
    assert record["unprovable_by_reason"]
    for reason in record["unprovable_by_reason"]:
        assert explain_reason(reason) in text


def test_audit_page_shows_issued_vs_derived_and_the_rule(results: Results) -> None:
    record = load(results.audit)
    text = " ".join(Page(audit_page(record).decode()).text)
    assert "issued pass; derived fail" in text
    assert "executed 12 of 12" in text
    assert "threshold 0.75" in text and "interval [" in text
    for d in record["disagreements"]:
        assert d["detail"] in text


def test_eval_banana_page_shows_score_rule_and_checks(results: Results) -> None:
    record = load(results.eb)
    text = " ".join(Page(verification_page(record).decode()).text)
    assert "6/9" in text and "66.7%" in text and "run passed: no" in text
    assert "Check by check" in text and "missing-script" in text


def test_fixity_page_shows_outcomes_shares_and_failures(results: Results) -> None:
    record = load(results.fixity)
    text = " ".join(Page(fixity_page(record).decode()).text)
    assert "tampered.tar.zst" in text and "within 365 days" in text
    assert record["problems"][0]["detail"] in text


def _replace_strings(value: Any, new: str, key: str | None = None) -> Any:
    if isinstance(value, dict):
        return {k: _replace_strings(v, new, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_strings(v, new, key) for v in value]
    if isinstance(value, str) and key not in STRUCTURAL and key not in CONSTRAINED:
        return new
    return value


@pytest.mark.parametrize("name", ["verified", "tampered", "audit", "eb", "fixity"])
def test_hostile_text_shows_escaped_and_adds_no_element(results: Results, name: str) -> None:
    record = load(kinds(results)[name])
    benign = render_record(_replace_strings(record, "benign text"))[1]
    _, hostile = render_record(_replace_strings(record, HOSTILE))
    page = assert_inert(hostile)
    assert page.tags == Page(benign.decode()).tags
    raw = hostile.decode()
    assert "\u202e" not in raw and "\u200b" not in raw
    text = "".join(page.text)
    assert "<script>alert(1)</script>" in text  # shown as text, visibly
    assert "\\u202eevil\\u200bhidden" in text
    assert "&lt;script&gt;" in raw


def test_render_equals_verify_html(results: Results, tmp_path: Path) -> None:
    out = tmp_path / "od"
    page = tmp_path / "verify.html"
    proc = run_cli(
        "verify", str(results.tampered_archive), "--output-dir", str(out), "--html", str(page), "-q"
    )
    assert proc.returncode == 1
    assert proc.stdout  # the result stays on stdout under -q
    rendered = tmp_path / "render.html"
    assert (
        run_cli("render", str(out / "verification.json"), "--html", str(rendered)).returncode == 0
    )
    assert rendered.read_bytes() == page.read_bytes()
    again = tmp_path / "again.html"
    assert (
        run_cli("render", str(out / "verification.json"), "--html", str(again), "-q").returncode
        == 0
    )
    assert again.read_bytes() == page.read_bytes()


def test_audit_html_equals_render_of_audit_json(results: Results, tmp_path: Path) -> None:
    archive = results.root / "audit.tar.zst"
    page = tmp_path / "audit.html"
    proc = run_cli("audit", str(archive), "--output-dir", str(tmp_path / "od"), "--html", str(page))
    assert proc.returncode == 1
    assert render_record(load(tmp_path / "od" / "audit.json"))[1] == page.read_bytes()


def test_same_record_same_bytes(results: Results) -> None:
    for path in kinds(results).values():
        record = load(path)
        assert render_record(record) == render_record(json.loads(json.dumps(record)))


def test_refusals(results: Results, tmp_path: Path) -> None:
    existing = tmp_path / "exists.html"
    existing.write_bytes(b"keep")
    proc = run_cli("render", str(results.verified), "--html", str(existing))
    assert proc.returncode == 3 and existing.read_bytes() == b"keep"
    assert b"already exists" in proc.stderr and b"--html" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    proc = run_cli("verify", str(results.tampered_archive), "--html", str(existing))
    assert proc.returncode == 3 and existing.read_bytes() == b"keep"
    other = tmp_path / "other.json"
    other.write_text('{"schema": "evalbook.inspect.v1"}')
    proc = run_cli("render", str(other), "--html", str(tmp_path / "x.html"))
    assert proc.returncode == 3 and b"not a verification, audit or fixity" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and not (tmp_path / "x.html").exists()
    proc = run_cli(
        "render", str(results.root / "ledger.sqlite"), "--html", str(tmp_path / "x.html")
    )
    assert proc.returncode == 3 and len(proc.stderr.splitlines()) == 1
    proc = run_cli(
        "verify",
        str(results.tampered_archive),
        str(results.tampered_archive),
        "--html",
        str(tmp_path / "y.html"),
    )
    assert proc.returncode == 2 and not (tmp_path / "y.html").exists()


@pytest.mark.slow
def test_twenty_thousand_case_page_under_two_megabytes(tmp_path: Path) -> None:
    from bundler.testing.fixturegen import build_large_store

    build_large_store(tmp_path / "store", cases=20_050, checks=4, payload_bytes=0)
    archive = tmp_path / "large.tar.zst"
    proc = run_cli(
        "export",
        "--store",
        str(tmp_path / "store"),
        "--report",
        "rpt-large",
        "--principal",
        "alice",
        "--exported-at",
        "2026-11-30T00:00:00Z",
        "--out",
        str(archive),
        "-q",
    )
    assert proc.returncode == 0, proc.stderr.decode()
    page = tmp_path / "large.html"
    proc = run_cli("verify", str(archive), "--html", str(page), "-q")
    assert proc.returncode == 0, proc.stderr.decode()
    size = page.stat().st_size
    assert size < 2 * 1024 * 1024, size
    assert_inert(page.read_bytes())


def test_many_failed_claims_stay_under_two_megabytes(results: Results) -> None:
    """Per-claim detail is bounded: 25,000 failed and unprovable claims, a small page."""
    record = load(results.tampered)
    failed = next(c for c in record["claims"] if c["state"] == "failed")
    unprovable = dict(failed, state="unprovable", reason="payload_at_sso", detail=None)
    record["claims"] = [dict(failed, subject=f"payload {i:064x}") for i in range(20_000)] + [
        dict(unprovable, subject=f"payload {i:064x}") for i in range(5_000)
    ]
    record["counts"] = {"proven": 0, "unprovable": 5_000, "failed": 20_000}
    record["unprovable_by_reason"] = {"payload_at_sso": 5_000}
    page = verification_page(record)
    assert len(page) < 2 * 1024 * 1024, len(page)
    text = " ".join(assert_inert(page).text)
    assert "and 19000 more failed claims" in text
    assert "and 5000 more unprovable claims" in text
