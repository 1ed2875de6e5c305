"""The exporter never writes what its own verifier rejects (issue class 6; SPEC 5,
Resources: "the exporter never writes a bundle that these caps make its own verifier
reject").

Generated stores, built with ``bundler.testing.fixturegen.StoreBuilder``, carry the adversarial
shapes an honest store can hold on a case-sensitive filesystem: ids that collide after
case folding (check, scorer, dataset, example and suite ids), ids at the 128-character
cap and ids made mostly of dots, scorer file names that collide after case folding or
NFC, a report that lists one check twice, and outputs at every size cap (inline at
262,144 and 262,145 bytes, SSO at and above the limit). For each, export either refuses
with a BundlerError whose exit code is 1 or 3 (never another exception), or writes a
bundle that verifies. Never both export success and verify failure.

The same property is held over the fixture store edited into shapes the verifier's
coherence rules (claim 11) reject: unsorted or repeated manifest entries, evidence
manifests an exporter would not carry, schema-invalid documents whose digests were
repinned, payload refs whose size or location disagrees with the bytes.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_export_eb import PROJECT as EB_PROJECT
from test_export_eb import copy_run, edit_check

from bundler.archive import names
from bundler.archive.bag_reader import MAX_DOCUMENT_BYTES, MAX_KEPT_BYTES, json_values
from bundler.bundles.verify import verify_bundle
from bundler.core import canonical
from bundler.core.claims import Verdict, VerifyOptions
from bundler.core.digests import SCORER_TAG, framed_digest, json_digest
from bundler.core.errors import BundlerError, InputError
from bundler.evalbanana import export as eb_export
from bundler.evalbanana import run as eb
from bundler.evalbanana.budget import EXPORT_WOULD_REFUSE, in_place_words
from bundler.evalbanana.export import EbExportConfig, export_eb_bundle
from bundler.evalbanana.verify import verify_run_dir
from bundler.evalbook.export import ExportConfig, export_bundle
from bundler.testing.fixturegen import CaseSpec, CheckSpec, StoreBuilder

INLINE_MAX = 262_144
EXPORTED_AT = datetime(2026, 11, 30, tzinfo=UTC)
ALL_PASS = {
    "rule": "all_pass",
    "threshold": None,
    "min_coverage": 1,
    "min_samples": 1,
    "repeats": 1,
}
CAP = 128
# fixturegen names a case "<check_id>-<5 digits>": a check id of 122 puts its case ids at the cap.
CHECK_CAP = CAP - len("-00000")

CHECK_IDS = [
    "accuracy",
    "ACCURACY",
    "Accuracy",
    "a" * CHECK_CAP,
    "A" * CHECK_CAP,
    "acc.v2",
    "a" + "." * (CHECK_CAP - 1),
    "x.",
    "bundle.json",
    "a..b",
]
SCORER_IDS = ["sc-a", "SC-A", "sc-a.", "s" * CAP, "S" * CAP]
DATASET_IDS = ["ds", "DS", "ds.1", "d" * CAP]
EXAMPLE_IDS = ["ex-0", "EX-0", "ex.0", "e" * CAP, "E" * CAP, "manifest", "ex-1"]
SUITE_IDS = ["suite", "SUITE", "u" * CAP, "suite."]
REPORT_IDS = ["rpt", "r" * CAP, "rpt.1"]
NFC_E = unicodedata.normalize("NFC", "\u00e9.py")
NFD_E = unicodedata.normalize("NFD", "\u00e9.py")
SCORER_FILES = [
    "score.py",
    "Score.py",
    "SCORE.PY",
    NFC_E,
    NFD_E,
    "lib/util.py",
    "Lib/util.py",
    "lib/Util.py",
    "a.b/c.py",
]
# (size, location) of one output per check; the other outputs are small and inline.
SIZES = [
    (10, "inline"),
    (INLINE_MAX, "inline"),
    (INLINE_MAX + 1, "inline"),
    (INLINE_MAX, "sso"),
    (INLINE_MAX + 1, "sso"),
    (0, "inline"),
]


@dataclass(frozen=True)
class CheckPlan:
    check_id: str
    scorer_id: str
    dataset_id: str
    size: int
    location: str


@dataclass(frozen=True)
class StorePlan:
    report_id: str
    suite_id: str
    principal: str
    checks: tuple[CheckPlan, ...]
    scorer_files: tuple[tuple[str, tuple[str, ...]], ...]  # scorer id -> file names
    examples: tuple[tuple[str, tuple[str, ...]], ...]  # dataset id -> example ids


@st.composite
def store_plans(draw: Any) -> StorePlan:
    checks = tuple(
        CheckPlan(
            draw(st.sampled_from(CHECK_IDS)),
            draw(st.sampled_from(SCORER_IDS)),
            draw(st.sampled_from(DATASET_IDS)),
            *draw(st.sampled_from(SIZES)),
        )
        for _ in range(draw(st.integers(1, 3)))
    )
    scorers = sorted({c.scorer_id for c in checks})
    datasets = sorted({c.dataset_id for c in checks})
    files = st.lists(st.sampled_from(SCORER_FILES), min_size=1, max_size=3, unique=True)
    examples = st.lists(st.sampled_from(EXAMPLE_IDS), min_size=1, max_size=3, unique=True)
    return StorePlan(
        draw(st.sampled_from(REPORT_IDS)),
        draw(st.sampled_from(SUITE_IDS)),
        draw(st.sampled_from(["alice", "bob"])),
        checks,
        tuple((s, tuple(draw(files))) for s in scorers),
        tuple((d, tuple(draw(examples))) for d in datasets),
    )


def plan(
    checks: list[tuple[str, str, str, int, str]],
    *,
    files: dict[str, list[str]] | None = None,
    examples: dict[str, list[str]] | None = None,
    report_id: str = "rpt",
    suite_id: str = "suite",
    principal: str = "alice",
) -> StorePlan:
    """A hand-made plan for the explicit examples below."""
    check_plans = tuple(CheckPlan(*c) for c in checks)
    scorers = sorted({c.scorer_id for c in check_plans})
    datasets = sorted({c.dataset_id for c in check_plans})
    files = files or {}
    examples = examples or {}
    return StorePlan(
        report_id,
        suite_id,
        principal,
        check_plans,
        tuple((s, tuple(files.get(s, ["score.py"]))) for s in scorers),
        tuple((d, tuple(examples.get(d, ["ex-0", "ex-1"]))) for d in datasets),
    )


def build(root: Path, p: StorePlan) -> None:
    b = StoreBuilder(root)
    b.principals = {
        "alice": ["dataset.read_body", "report.export", "report.read"],
        "bob": ["report.export", "report.read"],
    }
    b.access()
    examples = dict(p.examples)
    for dataset_id, ids in p.examples:
        b.dataset(dataset_id, 1, {e: {"input": f"q {e}", "expected": "a"} for e in ids})
    for scorer_id, files in p.scorer_files:
        b.scorer(
            scorer_id,
            1,
            kind="deterministic",
            files={n: f"# {n}\ndef score(o, e):\n    return 1.0\n".encode() for n in files},
        )
    specs = []
    for index, c in enumerate(p.checks):
        cases = []
        for i, example_id in enumerate(examples[c.dataset_id]):
            case = CaseSpec(example_id, 1, "pass", 1, output=f"out {index}/{i}".encode())
            if i == 0:
                case.output = (b"o" * c.size)[: c.size]
                case.output_location = c.location
            cases.append(case)
        specs.append(
            CheckSpec(c.check_id, True, (c.scorer_id, 1), (c.dataset_id, 1), ALL_PASS, cases)
        )
    b.report(p.report_id, suite_id=p.suite_id, suite_version=1, checks=specs)


def export_then_verify(p: StorePlan) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        build(root, p)
        out = Path(tmp) / "bundle.tar.zst"
        try:
            result = export_bundle(
                ExportConfig(str(root), p.report_id, p.principal, EXPORTED_AT, out=out)
            )
        except BundlerError as e:
            assert e.exit_code in (1, 3), f"export refused with exit {e.exit_code}: {e}"
            assert not out.exists(), "a refused export left its archive"
            return
        verification = verify_bundle(str(result.path), VerifyOptions())
        failures = [f"[{c.group}] {c.subject}: {c.detail}" for c in verification.failures()]
        assert verification.verdict is Verdict.VERIFIED, (
            f"export succeeded (exit 0) but verify says {verification.verdict.value}: "
            f"{verification.error or failures}"
        )


EXAMPLES = [
    # check ids colliding after case folding (data/checks/accuracy.json, .../ACCURACY.json)
    plan([("accuracy", "sc-a", "ds", 10, "inline"), ("ACCURACY", "sc-a", "ds", 10, "inline")]),
    # scorer files colliding after case folding, and after NFC
    plan([("accuracy", "sc-a", "ds", 10, "inline")], files={"sc-a": ["Score.py", "score.py"]}),
    plan([("accuracy", "sc-a", "ds", 10, "inline")], files={"sc-a": [NFC_E, NFD_E]}),
    plan(
        [("accuracy", "sc-a", "ds", 10, "inline")], files={"sc-a": ["lib/util.py", "Lib/util.py"]}
    ),
    # a report listing one check twice
    plan([("accuracy", "sc-a", "ds", 10, "inline"), ("accuracy", "sc-a", "ds", 10, "inline")]),
    # sizes at every cap
    plan([("accuracy", "sc-a", "ds", INLINE_MAX, "inline")]),
    plan([("accuracy", "sc-a", "ds", INLINE_MAX + 1, "inline")]),
    plan([("accuracy", "sc-a", "ds", INLINE_MAX, "sso")]),
    plan([("accuracy", "sc-a", "ds", INLINE_MAX + 1, "sso")]),
    plan([("accuracy", "sc-a", "ds", INLINE_MAX + 1, "sso")], principal="bob"),
    # ids at the 128-character cap, and made of dots
    plan(
        [("a" * CHECK_CAP, "s" * CAP, "d" * CAP, 10, "inline")],
        report_id="r" * CAP,
        suite_id="u" * CAP,
        examples={"d" * CAP: ["e" * CAP]},
    ),
    plan(
        [("a" + "." * (CHECK_CAP - 1), "sc-a.", "ds.1", 10, "inline")],
        report_id="rpt.1",
        suite_id="suite.",
        examples={"ds.1": ["ex.0", "manifest"]},
    ),
    # scorer, dataset and example ids colliding after case folding
    plan([("accuracy", "sc-a", "ds", 10, "inline"), ("recall", "SC-A", "ds", 10, "inline")]),
    plan([("accuracy", "sc-a", "ds", 10, "inline"), ("recall", "sc-a", "DS", 10, "inline")]),
    plan([("accuracy", "sc-a", "ds", 10, "inline")], examples={"ds": ["ex-0", "EX-0"]}),
]


def _with_examples(test: Any) -> Any:
    for p in reversed(EXAMPLES):
        test = example(p=p)(test)
    return test


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(p=store_plans())
@_with_examples
def test_export_refuses_or_writes_a_bundle_that_verifies(p: StorePlan) -> None:
    export_then_verify(p)


def test_a_plain_generated_store_exports_and_verifies() -> None:
    """The baseline of the property: the generator's plainest store exports and verifies."""
    start = time.monotonic()
    p = plan([("accuracy", "sc-a", "ds", 10, "inline")])
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp) / "store", p)
        out = Path(tmp) / "bundle.tar.zst"
        result = export_bundle(
            ExportConfig(str(Path(tmp) / "store"), p.report_id, p.principal, EXPORTED_AT, out=out)
        )
        assert verify_bundle(str(result.path), VerifyOptions()).verdict is Verdict.VERIFIED
    assert time.monotonic() - start < 10


# ------------------------------------------- the fixture store, edited where it can be


def _json(path: Path) -> Any:
    return canonical.loads(path.read_bytes(), source=str(path))


def _write(path: Path, value: Any) -> None:
    path.write_bytes(canonical.dumps(value))


def _edit(path: Path, change: Any) -> None:
    value = _json(path)
    change(value)
    _write(path, value)


def _repin_body(store: Path, report_id: str, change: Any) -> None:
    _edit(store / f"reports/{report_id}/body.json", change)


def unsorted_manifest(store: Path) -> str:
    path = store / "datasets/ds-qa/1/manifest.json"
    _edit(path, lambda m: m["examples"].reverse())
    digest = json_digest(_json(path))

    def repin(body: dict[str, Any]) -> None:
        for ref in body["dataset_refs"]:
            if ref["id"] == "ds-qa":
                ref["digest"] = digest

    _repin_body(store, "rpt-clean", repin)
    return "rpt-clean"


def manifest_example_twice(store: Path) -> str:
    path = store / "datasets/ds-qa/1/manifest.json"
    _edit(path, lambda m: m["examples"].insert(1, m["examples"][0]))
    digest = json_digest(_json(path))

    def repin(body: dict[str, Any]) -> None:
        for ref in body["dataset_refs"]:
            if ref["id"] == "ds-qa":
                ref["digest"] = digest

    _repin_body(store, "rpt-clean", repin)
    return "rpt-clean"


def _evidence_manifest(store: Path, change: Any) -> str:
    body = _json(store / "reports/rpt-evidence-manifest/body.json")
    old = body["checks"][0]["evidence_refs"][0]["digest"].removeprefix("sha256:")
    value = _json(store / f"blobs/sha256/{old}")
    change(value)
    data = canonical.dumps(value)
    new = hashlib.sha256(data).hexdigest()
    (store / f"blobs/sha256/{new}").write_bytes(data)
    body["checks"][0]["evidence_refs"][0]["digest"] = "sha256:" + new
    _write(store / "reports/rpt-evidence-manifest/body.json", body)
    return "rpt-evidence-manifest"


def _suite(store: Path, report_id: str, value: Any) -> str:
    body = _json(store / f"reports/{report_id}/body.json")
    ref = body["suite_ref"]
    _write(store / f"suites/{ref['id']}/{ref['version']}.json", value)
    ref["digest"] = json_digest(value)
    _write(store / f"reports/{report_id}/body.json", body)
    return report_id


def scorer_descriptor(store: Path, change: Any) -> str:
    """Edit sc-exact@1's descriptor and repin the framed digest in rpt-clean."""
    base = store / "scorers/sc-exact/1"
    _edit(base / "scorer.json", change)
    descriptor = _json(base / "scorer.json")
    components = [("scorer.json", (base / "scorer.json").read_bytes())]
    for rel in sorted(descriptor["files"], key=lambda p: p.encode()):
        components.append((f"files/{rel}", (base / "files" / rel).read_bytes()))
    digest = framed_digest(SCORER_TAG, components)

    def repin(body: dict[str, Any]) -> None:
        for check in body["checks"]:
            if check["scorer_ref"]["id"] == "sc-exact":
                check["scorer_ref"]["digest"] = digest

    _repin_body(store, "rpt-clean", repin)
    return "rpt-clean"


def case_ref(store: Path, change: Any, report_id: str = "rpt-clean") -> str:
    path = store / f"reports/{report_id}/cases/accuracy.jsonl"
    lines = path.read_bytes().splitlines()
    case = canonical.loads(lines[0])
    change(case)
    lines[0] = canonical.dumps(case)
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return report_id


def output_also_in_blobs(store: Path) -> str:
    """An SSO output whose bytes also sit in blobs/ (the store holds both)."""
    body = store / "sso/sha256"
    for blob in body.iterdir():
        (store / "blobs/sha256" / blob.name).write_bytes(blob.read_bytes())
    return "rpt-sso-traces"


STORE_EDITS: dict[str, Any] = {
    "manifest-unsorted": unsorted_manifest,
    "manifest-example-twice": manifest_example_twice,
    "evidence-manifest-unsorted": lambda s: _evidence_manifest(
        s, lambda m: m["evidence"].reverse()
    ),
    "evidence-manifest-entry-twice": lambda s: _evidence_manifest(
        s, lambda m: m["evidence"].append(m["evidence"][0])
    ),
    "evidence-manifest-of-20": lambda s: _evidence_manifest(
        s, lambda m: m.update(evidence=m["evidence"][:20])
    ),
    "evidence-manifest-other-check": lambda s: _evidence_manifest(
        s, lambda m: m.update(check_id="other")
    ),
    "suite-empty-array": lambda s: _suite(s, "rpt-clean", []),
    "suite-empty-object": lambda s: _suite(s, "rpt-clean", {}),
    "scorer-bad-kind": lambda s: scorer_descriptor(s, lambda d: d.update(kind="oracle")),
    "scorer-extra-field": lambda s: scorer_descriptor(s, lambda d: d.update(extra=1)),
    "check-result-extra-field": lambda s: (
        _edit(s / "reports/rpt-clean/checks/accuracy.json", lambda r: r.update(extra=1)),
        "rpt-clean",
    )[1],
    "envelope-extra-field": lambda s: (
        _edit(s / "reports/rpt-clean/envelope.json", lambda e: e.update(extra=1)),
        "rpt-clean",
    )[1],
    "output-ref-size-too-small": lambda s: case_ref(
        s, lambda c: c["output"].update(size=c["output"]["size"] - 1)
    ),
    "output-ref-size-too-large": lambda s: case_ref(
        s, lambda c: c["output"].update(size=c["output"]["size"] + 1)
    ),
    "output-ref-says-sso-for-an-inline-blob": lambda s: case_ref(
        s, lambda c: c["output"].update(location="sso", size=INLINE_MAX + 1)
    ),
    "sso-output-also-in-blobs": output_also_in_blobs,
    "body-lists-a-check-twice": lambda s: (
        _repin_body(s, "rpt-clean", lambda b: b["checks"].append(b["checks"][0])),
        "rpt-clean",
    )[1],
}


@pytest.mark.parametrize("principal", ["alice", "bob"])
@pytest.mark.parametrize("how", list(STORE_EDITS))
def test_an_edited_fixture_store_is_refused_or_exports_a_bundle_that_verifies(
    store_copy: Path, export: Any, how: str, principal: str
) -> None:
    report_id = STORE_EDITS[how](store_copy)
    try:
        result = export(store_copy, report_id, principal)
    except BundlerError as e:
        assert e.exit_code in (1, 3), f"export refused with exit {e.exit_code}: {e}"
        return
    verification = verify_bundle(str(result.path), VerifyOptions())
    failures = [f"[{c.group}] {c.subject}: {c.detail}" for c in verification.failures()]
    assert verification.verdict is Verdict.VERIFIED, (
        f"export succeeded (exit 0) but verify says {verification.verdict.value}: "
        f"{verification.error or failures}"
    )


# ------------------------------------------- eval-banana run directories, by size
#
# A run exports iff it verifies in place (SPEC 5, Resources; threat model class 6), and
# when both refuse they name the same rule: export and verify RUN --project ask the one
# BundleBudget (evalbanana.budget), export as it writes, verify in place over the sizes and
# documents it has (evalbanana.export.check_exportable). Runs are the fixture run with stdout
# files (sparse, NUL bytes) at and around every size the bundle reader bounds: the
# 2,000-character tail, the 32 MiB document cap, and the 48 MiB of documents in all.

EB_EXPORTED_AT = datetime(2026, 12, 1, tzinfo=UTC)
EB_CAP = MAX_DOCUMENT_BYTES
EB_KEPT = MAX_KEPT_BYTES
EB_LONG = "long-output-with-a-very-long-check-identifier-over-forty"
EB_SECOND = "passes"
# (first stdout, second stdout, whether export refuses)
EB_SIZES: list[tuple[int, int, bool]] = [
    (eb.STDOUT_TAIL_CHARS, 0, False),
    (eb.STDOUT_TAIL_CHARS + 1, 0, False),
    (EB_CAP - 1, 0, False),
    (EB_CAP, 0, False),
    (EB_CAP + 1, 0, True),
    (50 * 1000 * 1000, 0, True),  # the 50 MB stdout of issue 28
    (EB_KEPT // 2 - 2**20, EB_KEPT // 2 - 2**20, False),  # room left for the other documents
    (EB_KEPT // 2, EB_KEPT // 2, True),  # over the documents in all, each under the cap
]


def _eb_stdout(run: Path, check_id: str, size: int) -> None:
    stem = eb.check_stem(check_id)
    path = run / "checks" / f"{stem}.stdout.txt"
    with open(path, "wb") as handle:
        handle.truncate(size)
    tail = eb.bounded_tail(
        "\x00" * size if size <= eb.STDOUT_TAIL_CHARS else "\x00" * (eb.STDOUT_TAIL_CHARS + 1),
        stem=stem,
    )
    edit_check(run, check_id, lambda c: c.update(stdout=tail))


@pytest.mark.parametrize(("first", "second", "refused"), EB_SIZES)
def test_an_eval_banana_run_exports_iff_it_verifies_in_place(
    first: int, second: int, refused: bool, tmp_path: Path
) -> None:
    run = copy_run(tmp_path)
    _eb_stdout(run, EB_LONG, first)
    if second:
        _eb_stdout(run, EB_SECOND, second)
    assert (_eb_agree(run, EB_PROJECT, tmp_path) is not None) is refused


def _eb_agree(run: Path, project: Path, tmp_path: Path) -> str | None:
    """Export ``run`` and verify it in place; assert they agree. Returns export's refusal
    (which verify in place gave, in the same words, exit 3), or None when the run
    exported and both the run in place and its bundle verify."""
    in_place = verify_run_dir(run, project, VerifyOptions())
    out = tmp_path / "b.tar.zst"
    out.unlink(missing_ok=True)
    try:
        export_eb_bundle(EbExportConfig(run, project, EB_EXPORTED_AT, out=out))
    except BundlerError as e:
        assert e.exit_code == 3, f"export refused with exit {e.exit_code}: {e}"
        assert not out.exists(), "a refused export left its archive"
        assert in_place.verdict is Verdict.ERROR, (
            f"export refused ({e}) but verify in place says {in_place.verdict.value}"
        )
        # The same rule in the same words; export adds its own tail, verify none.
        assert isinstance(e, InputError)
        assert in_place.error == EXPORT_WOULD_REFUSE + in_place_words(e), (
            in_place.error,
            e.message,
        )
        assert "nothing written" not in in_place.error, in_place.error
        return e.message
    assert in_place.verdict is Verdict.VERIFIED, in_place.error or [
        c.detail for c in in_place.failures()
    ]
    bundled = verify_bundle(str(out), VerifyOptions())
    assert bundled.verdict is Verdict.VERIFIED, bundled.error or [
        c.detail for c in bundled.failures()
    ]
    return None


# ------------------------------------------- the size rule's caps, at and around each
#
# Each cap of the rule (evalbanana.budget) is met exactly: the largest run it admits is
# found by asking verify in place, then export and verify in place must agree on it and on
# one byte (value, name byte) more, and the one more must be refused naming the cap.


def _evidence(run: Path, check_id: str = EB_SECOND) -> Path:
    directory = run / "checks" / eb.check_stem(check_id)
    directory.mkdir(exist_ok=True)
    return directory


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as handle:
        handle.truncate(size)


def _values_json(path: Path, n: int) -> None:
    """A JSON array of ``n`` zeros: ``json_values`` counts n + 1."""
    path.write_bytes(b"[" + b"0," * (n - 1) + b"0]" if n else b"[]")


def _largest_admitted(set_n: Any, run: Path, lo: int, hi: int) -> int:
    """The largest n in [lo, hi) that verify in place admits (lo admitted, hi refused)."""

    def admitted(n: int) -> bool:
        set_n(n)
        return verify_run_dir(run, EB_PROJECT, VerifyOptions()).verdict is Verdict.VERIFIED

    assert admitted(lo) and not admitted(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if admitted(mid):
            lo = mid
        else:
            hi = mid
    return lo


def test_the_kept_bytes_cap_is_met_exactly_by_export_and_verify_in_place(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    evidence = _evidence(run)
    _sparse(evidence / "big.bin", EB_CAP)
    last = _largest_admitted(lambda n: _sparse(evidence / "more.bin", n), run, 0, EB_CAP)
    assert EB_KEPT - EB_CAP - 2**20 < last < EB_KEPT - EB_CAP
    _sparse(evidence / "more.bin", last)
    assert _eb_agree(run, EB_PROJECT, tmp_path) is None
    _sparse(evidence / "more.bin", last + 1)
    refusal = _eb_agree(run, EB_PROJECT, tmp_path)
    assert refusal is not None and f"exceed {EB_KEPT} bytes in total" in refusal


def test_the_json_values_cap_is_met_exactly_by_export_and_verify_in_place(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    path = _evidence(run) / "values.json"
    last = _largest_admitted(lambda n: _values_json(path, n), run, 0, eb.MAX_JSON_VALUES)
    assert eb.MAX_JSON_VALUES - 100_000 < last < eb.MAX_JSON_VALUES
    _values_json(path, last)
    assert _eb_agree(run, EB_PROJECT, tmp_path) is None
    _values_json(path, last + 1)
    refusal = _eb_agree(run, EB_PROJECT, tmp_path)
    assert refusal is not None
    assert f"JSON documents in the bundle hold more than {eb.MAX_JSON_VALUES} values" in refusal


@pytest.mark.parametrize("extra", [-1, 0, 1])
def test_the_member_name_cap_is_met_exactly_by_export_and_verify_in_place(
    extra: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A member name of 4,096 bytes (the strict reader's cap) and one byte either side, in
    # an evidence directory nested deep enough; the run is named relative to the working
    # directory, as the whole path on disk would pass the system's own limit.
    copy_run(tmp_path)
    monkeypatch.chdir(tmp_path)
    run = Path("run")
    top = f"eval-banana-bundle-{eb.read_run(run).run_id}"
    evidence = _evidence(run).relative_to(run).as_posix()
    prefix = f"{top}/data/run/{evidence}/"
    want = names.MAX_NAME_BYTES + extra - len(prefix)
    depth = (want - 1) // 201  # directories of 200 bytes, then a file of 1 to 201
    rel = "/".join(["d" * 200] * depth + ["f" * (want - 201 * depth)])
    assert len(prefix + rel) == names.MAX_NAME_BYTES + extra
    fd = os.open(run / evidence, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for segment in rel.split("/")[:-1]:
            os.mkdir(segment, dir_fd=fd)
            inner = os.open(segment, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(os.open(rel.split("/")[-1], os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    refusal = _eb_agree(run, EB_PROJECT.resolve(), tmp_path)
    if extra <= 0:
        assert refusal is None
    else:
        assert refusal is not None and f"name longer than {names.MAX_NAME_BYTES} bytes" in refusal


def test_in_place_builds_the_bundle_document_export_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # verify in place counts bundle.json's bytes and values from the document export
    # builds, with unhashed digests: it must be that document, field for field, but for the
    # digests, the tree root and the time, which are as long and hold no separator.
    documents: list[dict[str, Any]] = []
    admit = eb_export._admit_bundle_json

    def spy(budget: Any, bundle: dict[str, Any]) -> bytes:
        documents.append(bundle)
        return admit(budget, bundle)

    monkeypatch.setattr(eb_export, "_admit_bundle_json", spy)
    run = copy_run(tmp_path)
    _eb_stdout(run, EB_LONG, eb.STDOUT_TAIL_CHARS + 1)
    _values_json(_evidence(run) / "a,b:[c]{d}.json", 3)
    assert _eb_agree(run, EB_PROJECT, tmp_path) is None
    in_place, exported = documents
    assert len(canonical.dumps(in_place)) == len(canonical.dumps(exported))
    assert json_values(canonical.dumps(in_place)) == json_values(canonical.dumps(exported))

    def masked(bundle: dict[str, Any]) -> dict[str, Any]:
        files = [dict(f, digest=None) for f in bundle["files"]]
        return dict(bundle, files=files, exported_at=None, cases_tree=None)

    assert masked(in_place) == masked(exported)
    assert in_place["cases_tree"]["tree_size"] == exported["cases_tree"]["tree_size"]
