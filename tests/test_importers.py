"""SPEC 16: real Inspect AI and lm-eval runs (fixtures/runners, made offline by
regenerate.sh) imported as store reports, then the whole chain: export as a principal
with and without dataset.read_body, verify, audit, prove one sample, the page, and
``--check`` re-deriving every document (and naming each one an attacker changed, with
every digest re-sealed)."""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import repack
import zstandard
from conftest import run_cli

from bundler.core import canonical
from bundler.core.claims import Verdict, VerifyOptions
from bundler.core.digests import SCORER_TAG, framed_digest, json_digest
from bundler.core.errors import InputError
from bundler.evalbook.export import ExportConfig, export_bundle
from bundler.importers.importing import ImportConfig, Runner, import_run
from bundler.importers.recheck import recheck_bundle

ROOT = Path(__file__).resolve().parent.parent
RUNNERS = ROOT / "fixtures" / "runners"
INSPECT_LOG = next((RUNNERS / "inspect" / "logs").glob("*.eval"))
INSPECT_TASK = RUNNERS / "inspect" / "arithmetic_task.py"
LM_RUN = RUNNERS / "lm-eval" / "run"
LM_RESULTS = next(LM_RUN.glob("results_*.json"))
LM_SAMPLES = sorted(LM_RUN.glob("samples_*.jsonl"))
LM_TASKS = sorted((RUNNERS / "lm-eval" / "tasks").glob("*.yaml"))
EXPORTED_AT = datetime(2030, 1, 1, tzinfo=UTC)  # after the recorded runs completed


def inspect_args(store: Path, *extra: str) -> list[str]:
    return [
        "import-inspect",
        str(INSPECT_LOG),
        "--store",
        str(store),
        "--task",
        str(INSPECT_TASK),
        *extra,
    ]


def lm_args(store: Path, *extra: str) -> list[str]:
    args = ["import-lm-eval", str(LM_RESULTS)]
    for s in LM_SAMPLES:
        args += ["--samples", str(s)]
    for t in LM_TASKS:
        args += ["--task", str(t)]
    return [*args, "--store", str(store), *extra]


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Both runs imported by the real console script into one store, and exported by
    alice (every permission) and bob (no dataset.read_body)."""
    tmp = tmp_path_factory.mktemp("imported")
    store = tmp / "store"
    out: dict[str, Any] = {"store": store, "tmp": tmp}
    for name, args in (
        ("inspect", inspect_args(store, "--principal", "alice", "--json")),
        ("lm-eval", lm_args(store, "--json")),
    ):
        done = run_cli(*args)
        assert done.returncode == 0, done.stderr
        out[name] = json.loads(done.stdout)
        assert out[name]["written"] is True
    access = json.loads((store / "access.json").read_bytes())
    access["principals"]["bob"] = ["report.export"]
    (store / "access.json").write_bytes(canonical.dumps(access))
    for name in ("inspect", "lm-eval"):
        for principal in ("alice", "bob"):
            path = tmp / f"{name}-{principal}.tar.zst"
            export_bundle(
                ExportConfig(str(store), out[name]["report_id"], principal, EXPORTED_AT, out=path)
            )
            out[f"{name}/{principal}"] = path
    return out


def body_of(store: Path, report_id: str) -> dict[str, Any]:
    return json.loads((store / "reports" / report_id / "body.json").read_bytes())


def cases_of(store: Path, report_id: str, check_id: str) -> list[dict[str, Any]]:
    lines = (store / "reports" / report_id / "cases" / f"{check_id}.jsonl").read_bytes()
    return [json.loads(line) for line in lines.splitlines()]


# ------------------------------------------------------------------ the mapping


def test_inspect_run_maps_checks_cases_examples_and_provenance(imported: dict[str, Any]) -> None:
    store, rid = imported["store"], imported["inspect"]["report_id"]
    body = body_of(store, rid)
    assert body["producer"] == "evalbook-bundle/import-inspect"
    assert body["result"] == "inconclusive" and body["reasons"] == ["no decision rule given"]
    assert [c["check_id"] for c in body["checks"]] == ["match.accuracy", "short_answer.accuracy"]
    log_digest = "sha256:" + hashlib.sha256(INSPECT_LOG.read_bytes()).hexdigest()
    subject = body["subject"]
    assert subject["runner"] == {"name": "inspect_ai", "version": "0.3.285"}
    assert subject["files"] == [
        {
            "role": "log",
            "name": INSPECT_LOG.name,
            "digest": log_digest,
            "size": INSPECT_LOG.stat().st_size,
        }
    ]
    assert subject["task_files"][0]["name"] == INSPECT_TASK.name
    header = subject["run"]
    assert header["task"] == "arithmetic" and header["model"] == "mockllm/model"
    assert body["issued_at"] == datetime.fromisoformat(header["completed_at"]).astimezone(
        UTC
    ).strftime("%Y-%m-%dT%H:%M:%SZ")
    for check in body["checks"]:
        assert check["status"] == check["result"] == "inconclusive" and not check["required"]
        assert check["assurance"] == "reported"
        assert check["observations"][0]["metric"] == "stderr"
        # Four samples, one of which errored in both epochs.
        assert check["coverage"] == {"expected": 4, "executed": 3, "missing": 1}
    assert body["checks"][0]["score"] == pytest.approx(2.5 / 3)
    cases = cases_of(store, rid, "match.accuracy")
    assert len(cases) == 8 and {c["repeat"] for c in cases} == {1, 2}
    boom = [c for c in cases if c["example"]["example_id"] == "boom"]
    assert [(c["status"], c["score"]) for c in boom] == [("error", None), ("error", None)]
    by_slot = {(c["example"]["example_id"], c["repeat"]): c for c in cases}
    # mul-1: "42" then "forty two" (match is numeric): C then I, as Inspect scored them.
    assert (by_slot[("mul-1", 1)]["score"], by_slot[("mul-1", 2)]["score"]) == (1, 0)
    assert all(c["assurance"] == "reported" for c in cases)
    # The log itself is an artifact of every case, with its digest and size.
    run_ref = {
        "kind": "artifact",
        "digest": log_digest,
        "size": INSPECT_LOG.stat().st_size,
        "location": "inline" if INSPECT_LOG.stat().st_size <= 262144 else "sso",
    }
    assert all(run_ref in c["evidence"] for c in cases)
    manifest = json.loads(next((store / "datasets").glob("*/1/manifest.json")).read_bytes())
    example = json.loads(next((store / "datasets").glob("*/1/examples/add-2.json")).read_bytes())
    assert [e["example_id"] for e in manifest["examples"]] == ["add-1", "add-2", "boom", "mul-1"]
    assert example == {
        "choices": None,
        "id": "add-2",
        "input": "What is 7 + 5? Answer with a number.",
        "metadata": {"difficulty": "easy", "source": "hand-written"},
        "target": "12",
    }


def test_lm_eval_run_maps_tasks_metrics_filters_and_hashes(imported: dict[str, Any]) -> None:
    store, rid = imported["store"], imported["lm-eval"]["report_id"]
    body = body_of(store, rid)
    assert body["producer"] == "evalbook-bundle/import-lm-eval"
    assert [c["check_id"] for c in body["checks"]] == [
        "fixture_gen.exact_match.take-first",
        "fixture_gen.exact_match.majority",
        "fixture_mc.acc.none",
        "fixture_mc.acc_norm.none",
    ]
    results = json.loads(LM_RESULTS.read_bytes())
    assert body["subject"]["run"]["task_hashes"] == results["task_hashes"]
    assert [f["role"] for f in body["subject"]["files"]] == ["results", "samples", "samples"]
    stamp = datetime.fromtimestamp(
        int(results["date"] + float(results["total_evaluation_time_seconds"])), UTC
    )
    assert body["issued_at"] == stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    mc = next(c for c in body["checks"] if c["check_id"] == "fixture_mc.acc.none")
    assert mc["score"] == results["results"]["fixture_mc"]["acc,none"]
    assert {
        "metric": "acc_stderr",
        "value": results["results"]["fixture_mc"]["acc_stderr,none"],
    } in mc["observations"]
    gen = next(c for c in body["checks"] if c["check_id"] == "fixture_gen.exact_match.majority")
    assert {"metric": "runner_repeats", "value": 2} in gen["observations"]
    cases = cases_of(store, rid, "fixture_gen.exact_match.majority")
    assert len(cases) == 3 and all(c["repeat"] == 1 for c in cases)


def test_reimport_changes_nothing_and_says_so(imported: dict[str, Any], tmp_path: Path) -> None:
    store = imported["store"]
    before = snapshot(store)
    for args in (inspect_args(store), lm_args(store)):
        done = run_cli(*args)
        assert done.returncode == 0, done.stderr
        assert b"Unchanged:" in done.stdout and b"nothing written" in done.stdout
    assert snapshot(store) == before


def test_import_is_deterministic_byte_for_byte(imported: dict[str, Any], tmp_path: Path) -> None:
    again = tmp_path / "again"
    import_run(ImportConfig(Runner.INSPECT, (INSPECT_LOG,), again, (INSPECT_TASK,), principal="x"))
    import_run(ImportConfig(Runner.LM_EVAL, (LM_RESULTS, *LM_SAMPLES), again, tuple(LM_TASKS)))
    first = {k: v for k, v in snapshot(imported["store"]).items() if k != "access.json"}
    second = {k: v for k, v in snapshot(again).items() if k != "access.json"}
    assert first == second


# --------------------------------------------------------------- the decision


def decision(path: Path, checks: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"schema": "evalbook.decision.v1", "checks": checks}))
    return path


def agg(rule: str, threshold: float | None, repeats: int, **kw: Any) -> dict[str, Any]:
    return {
        "rule": rule,
        "threshold": threshold,
        "min_coverage": kw.get("min_coverage"),
        "min_samples": kw.get("min_samples"),
        "repeats": repeats,
    }


@pytest.mark.parametrize(("threshold", "status"), [(0.3, "pass"), (0.5, "fail")])
def test_a_decision_makes_checks_required_and_audit_rederives_it(
    threshold: float, status: str, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    d = decision(
        tmp_path / "decision.json",
        {
            "fixture_mc.acc.none": {"required": True, "aggregation": agg("mean", threshold, 1)},
            "fixture_gen.exact_match.majority": {
                "required": False,
                "aggregation": agg("pass_rate", 0.5, 1),
            },
        },
    )
    result = import_run(
        ImportConfig(
            Runner.LM_EVAL, (LM_RESULTS, *LM_SAMPLES), store, tuple(LM_TASKS), (), d, None, "alice"
        )
    )
    checks = dict(result.checks)
    assert checks["fixture_mc.acc.none"] == status
    assert checks["fixture_gen.exact_match.majority"] == "fail"  # exact_match 0 of 3
    assert checks["fixture_mc.acc_norm.none"] == "inconclusive"  # not in the decision
    assert result.result == status
    body = body_of(store, result.report_id)
    assert (
        body["subject"]["decision"]["digest"]
        == "sha256:" + hashlib.sha256(d.read_bytes()).hexdigest()
    )
    bundle = tmp_path / "b.tar.zst"
    export_bundle(ExportConfig(str(store), result.report_id, "alice", EXPORTED_AT, out=bundle))
    done = run_cli("audit", str(bundle), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    fields = {f["field"]: f for f in json.loads(done.stdout)["report"]["fields"]}
    assert fields["result"]["derived"] == {"value": status}
    assert fields["result"]["outcome"] == "agree"


@pytest.mark.parametrize(
    ("checks", "message"),
    [
        (
            {"no.such.check": {"required": True, "aggregation": agg("mean", 0.5, 1)}},
            "no such check in this run",
        ),
        (
            {"fixture_mc.acc.none": {"required": "yes", "aggregation": agg("mean", 0.5, 1)}},
            "required: must be true or false",
        ),
        (
            {"fixture_mc.acc.none": {"required": True, "aggregation": agg("median", 0.5, 1)}},
            "rule must be one of",
        ),
        (
            {"fixture_mc.acc.none": {"required": True, "aggregation": {"rule": "mean"}}},
            "missing key 'threshold'",
        ),
        (
            {"fixture_mc.acc.none": {"required": True, "aggregation": agg("mean", 0.5, 0)}},
            "repeats must be",
        ),
        (
            {
                "fixture_mc.acc.none": {
                    "required": True,
                    "aggregation": agg("mean", 0.5, 1, min_coverage=2),
                }
            },
            "min_coverage",
        ),
        *[
            (
                {"fixture_mc.acc.none": {"required": True, "aggregation": agg("mean", v, 1)}},
                "decision.json: checks.fixture_mc.acc.none.aggregation: integer "
                f"{int(v)} is outside -(2^53-1)..2^53-1",
            )
            for v in (1e19, -9.2e18, 9007199254740993.0, 1e20)
        ],
    ],
)
def test_a_bad_decision_is_refused_and_nothing_is_written(
    checks: dict[str, Any], message: str, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    d = decision(tmp_path / "decision.json", checks)
    done = run_cli(*lm_args(store, "--decision", str(d), "--principal", "alice"))
    assert done.returncode == 3
    assert message in done.stderr.decode() and done.stderr.count(b"\n") == 1
    assert str(d) in done.stderr.decode()  # the path as given, not its base name alone
    assert not store.exists()


# ------------------------------------------------------------------ the chain


@pytest.mark.parametrize("name", ["inspect", "lm-eval"])
def test_both_bundles_verify_and_audit_with_and_without_read_body(
    imported: dict[str, Any], name: str
) -> None:
    from bundler.bundles.verify import verify_bundle

    for principal in ("alice", "bob"):
        path = imported[f"{name}/{principal}"]
        result = verify_bundle(str(path), VerifyOptions())
        assert result.verdict is Verdict.VERIFIED, [
            c for c in result.claims if c.state.value == "failed"
        ]
        bundle = repack.open_bundle(path).bundle
        run_files = {
            f["digest"]
            for f in body_of(imported["store"], imported[name]["report_id"])["subject"]["files"]
        }
        payloads = {p["digest"] for p in bundle["payloads"]}
        redacted = {r["digest"]: r for r in bundle["redacted"]}
        if principal == "alice":
            assert run_files <= payloads and not redacted and not bundle["unavailable"]
        else:
            # bob: run files, outputs (messages included) and examples withheld, digests kept.
            assert not run_files & payloads
            for digest in run_files:
                assert redacted[digest]["kind"] == "artifact"
                assert redacted[digest]["reason"] == "no_dataset_read_body"
            assert {r["kind"] for r in bundle["redacted"]} == {"artifact", "example", "output"}
            assert not payloads
        done = run_cli("audit", str(path))
        assert done.returncode == 0, done.stdout + done.stderr
        assert b"Disagreements: 0" in done.stdout


def test_prove_one_sample_and_render_the_page(imported: dict[str, Any], tmp_path: Path) -> None:
    path = imported["inspect/alice"]
    case_id = "match.accuracy.mul-1.2"
    proof = tmp_path / "proof.json"
    done = run_cli("prove", str(path), "--case", case_id, "--out", str(proof))
    assert done.returncode == 0, done.stderr
    assert json.loads(proof.read_bytes())["case"]["case_id"] == case_id
    done = run_cli("check-proof", str(proof))
    assert done.returncode == 0, done.stderr
    page = tmp_path / "page.html"
    done = run_cli("audit", str(path), "--html", str(page))
    assert done.returncode == 0, done.stderr
    html = page.read_text()
    assert "match.accuracy" in html and "inconclusive" in html


# ------------------------------------------------------------------ --check


@pytest.mark.parametrize(
    ("name", "command"), [("inspect", "import-inspect"), ("lm-eval", "import-lm-eval")]
)
def test_check_confirms_an_untouched_bundle_and_cannot_rederive_a_redacted_one(
    imported: dict[str, Any], name: str, command: str
) -> None:
    done = run_cli(command, "--check", str(imported[f"{name}/alice"]), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(done.stdout)
    assert record["matches"] is True and record["compared"] > 10
    done = run_cli(command, "--check", str(imported[f"{name}/bob"]))
    assert done.returncode == 3
    assert b"cannot be re-derived" in done.stderr and b"no_dataset_read_body" in done.stderr
    other = "import-lm-eval" if command == "import-inspect" else "import-inspect"
    done = run_cli(other, "--check", str(imported[f"{name}/alice"]))
    assert done.returncode == 3 and b"not an import this command can check" in done.stderr


def _reseal(eb: repack.EditableBag) -> None:
    """What an attacker does after an edit: every digest that pins the edited document,
    up to the report body, recomputed, so the bundle verifies again."""
    files = eb.files
    for path in [
        p for p in files if p.endswith("/manifest.json") and p.startswith("data/datasets/")
    ]:
        base = path.rsplit("/", 1)[0]

        def fix(m: dict[str, Any], base: str = base) -> None:
            for e in m["examples"]:
                example = files.get(f"{base}/examples/{e['example_id']}.json")
                if example is not None:
                    e["digest"] = "sha256:" + hashlib.sha256(example).hexdigest()
                    e["size"] = len(example)

        eb.edit_json(path, fix)
    bundle = eb.bundle

    def fix_body(body: dict[str, Any]) -> None:
        body["suite_ref"]["digest"] = json_digest(eb.json(bundle["suite"]["path"]))
        for ref in body["dataset_refs"]:
            d = next(d for d in bundle["datasets"] if d["dataset_id"] == ref["id"])
            ref["digest"] = json_digest(eb.json(d["path"]))
        for check in body["checks"]:
            s = next(s for s in bundle["scorers"] if s["scorer_id"] == check["scorer_ref"]["id"])
            descriptor = eb.json(f"{s['path']}/scorer.json")
            components = [("scorer.json", files[f"{s['path']}/scorer.json"])]
            components += [
                (f"files/{f}", files[f"{s['path']}/files/{f}"]) for f in sorted(descriptor["files"])
            ]
            check["scorer_ref"]["digest"] = framed_digest(SCORER_TAG, components)

    eb.edit_json("data/report/body.json", fix_body)


def _first(eb: repack.EditableBag, prefix: str, suffix: str = "") -> str:
    return next(p for p in eb.paths() if p.startswith(prefix) and p.endswith(suffix))


def _edit_json(eb: repack.EditableBag, path: str, **changes: Any) -> str:
    eb.edit_json(path, lambda value: value.update(changes))
    return path


def _edit_case_score(eb: repack.EditableBag) -> str:
    path = _first(eb, "data/cases/")
    lines = eb.lines(path)
    case = json.loads(lines[0])
    case["score"] = 0.25 if case["score"] != 0.25 else 0.5
    eb.set_lines(path, [canonical.dumps(case), *lines[1:]])
    return path


def _edit_output(eb: repack.EditableBag) -> str:
    """A forged model output: the blob replaced and every case that points at it too."""
    case = json.loads(eb.lines(_first(eb, "data/cases/"))[0])
    old = case["output"]["digest"]
    data = b'{"completion":"forged"}'
    new = "sha256:" + hashlib.sha256(data).hexdigest()
    del eb.files[f"data/blobs/sha256/{old[7:]}"]
    eb.files[f"data/blobs/sha256/{new[7:]}"] = data
    for path in [p for p in eb.paths() if p.startswith("data/cases/")]:
        lines = []
        for line in eb.lines(path):
            c = json.loads(line)
            if c["output"] is not None and c["output"]["digest"] == old:
                c["output"].update(digest=new, size=len(data))
            lines.append(canonical.dumps(c))
        eb.set_lines(path, lines)
    renamed = {old: new}
    for path in [
        p
        for p in eb.paths()
        if p.startswith("data/blobs/") and b'"evidence_manifest' in eb.files[p]
    ]:
        manifest = eb.json(path)
        entries = [
            dict(e, digest=new if e["digest"] == old else e["digest"]) for e in manifest["evidence"]
        ]
        manifest["evidence"] = sorted(entries, key=lambda e: (e["digest"], e["kind"]))
        data = canonical.dumps(manifest)
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        del eb.files[path]
        eb.files[f"data/blobs/sha256/{digest[7:]}"] = data
        renamed[f"sha256:{path.rsplit('/', 1)[1]}"] = digest

    def fix_refs(body: dict[str, Any]) -> None:
        for check in body["checks"]:
            for ref in check["evidence_refs"]:
                ref["digest"] = renamed.get(ref["digest"], ref["digest"])
            check["evidence_refs"].sort(key=lambda r: (r["digest"], r["kind"]))

    eb.edit_json("data/report/body.json", fix_refs)
    return f"data/blobs/sha256/{new[7:]}"


def _edit_scorer_file(eb: repack.EditableBag) -> str:
    path = next(p for p in eb.paths() if p.startswith("data/scorers/") and "/files/" in p)
    eb.files[path] += b"\n# forged\n"
    return path


def _edit_example(eb: repack.EditableBag) -> str:
    path = next(p for p in eb.paths() if "/examples/" in p)
    eb.set_json(path, {"forged": eb.json(path)})
    return path


def _edit_scorer_past_the_task_cap(eb: repack.EditableBag) -> str:
    """A scorer of more files than an import takes (``MAX_TASK_FILES``): the one --check
    re-imports from, listed in its descriptor and resealed, so the bundle verifies."""
    from bundler.importers.importing import MAX_TASK_FILES

    base = eb.bundle["scorers"][0]["path"]
    added = [f"x{i:05d}.yaml" for i in range(MAX_TASK_FILES + 1)]
    for name in added:
        eb.files[f"{base}/files/{name}"] = b"x\n"
    eb.edit_json(
        f"{base}/scorer.json", lambda d: d.update(files=sorted([*d["files"], *added]))
    )
    return f"{base}/files"


def _edit_scorer_subdirectory(eb: repack.EditableBag) -> str:
    """A scorer file in a subdirectory (an import writes task files side by side), listed
    in its descriptor and resealed, so the bundle verifies."""
    base = eb.bundle["scorers"][0]["path"]
    eb.files[f"{base}/files/sub/task.py"] = b"print('x')\n"
    eb.edit_json(
        f"{base}/scorer.json", lambda d: d.update(files=sorted([*d["files"], "sub/task.py"]))
    )
    return f"{base}/files"


EDITS: dict[str, Callable[[repack.EditableBag], str]] = {
    "report body": lambda eb: _edit_json(eb, "data/report/body.json", project="forged"),
    "envelope": lambda eb: _edit_json(
        eb, "data/report/envelope.json", url="https://forged.example"
    ),
    "suite": lambda eb: _edit_json(eb, _first(eb, "data/suite/"), validity_hours=1),
    "scorer descriptor": lambda eb: _edit_json(
        eb, _first(eb, "data/scorers/", "scorer.json"), runtime="forged"
    ),
    "scorer file": _edit_scorer_file,
    "scorer files past the task cap": _edit_scorer_past_the_task_cap,
    "scorer file in a subdirectory": _edit_scorer_subdirectory,
    "example": _edit_example,
    "check result": lambda eb: _edit_json(eb, _first(eb, "data/checks/"), score=0.123),
    "cases": _edit_case_score,
    "output payload": _edit_output,
}


# Every kind on the Inspect bundle; on the lm-eval bundle the kinds its mapping differs in.
TAMPERED = [("inspect", kind) for kind in sorted(EDITS)] + [
    ("lm-eval", kind) for kind in ("cases", "example", "output payload", "report body")
]


@pytest.mark.parametrize(("name", "kind"), TAMPERED)
def test_check_names_each_tampered_document_kind(
    imported: dict[str, Any], name: str, kind: str, tmp_path: Path
) -> None:
    eb = repack.open_bundle(imported[f"{name}/alice"])
    edited = EDITS[kind](eb)
    _reseal(eb)
    forged = repack.write_bundle(eb, tmp_path / "forged.tar.zst")
    result = recheck_bundle(str(forged), Runner.INSPECT if name == "inspect" else Runner.LM_EVAL)
    named = {d.path for d in result.differences}
    assert result.exit_code == 1
    assert edited in named, (kind, named)
    assert "data/bundle.json" not in named  # it verified: --check compared documents


@pytest.mark.parametrize("kind", ["check result", "cases", "suite"])
def test_check_of_a_bundle_that_does_not_verify_names_the_failed_documents(
    imported: dict[str, Any], kind: str, tmp_path: Path
) -> None:
    """An edit not re-sealed fails the verifier, which runs beside the re-import: its
    failed claims are named by their paths, and the comparison's answer is not given."""
    eb = repack.open_bundle(imported["inspect/alice"])
    edited = EDITS[kind](eb)
    forged = repack.write_bundle(eb, tmp_path / "forged.tar.zst", bundle_json=False)
    result = recheck_bundle(str(forged), Runner.INSPECT)
    assert result.exit_code == 1
    named = {d.path for d in result.differences}
    assert edited in named, named
    assert all("does not verify" in d.problem for d in result.differences)
    assert result.verified is False and result.to_json()["verified"] is False
    done = run_cli("import-inspect", "--check", str(forged))
    assert done.returncode == 1
    assert f"Differs:   {edited}: the bundle does not verify" in done.stdout.decode()
    assert "Verified:  no" in done.stdout.decode() and b"Mismatch" not in done.stdout
    assert done.stderr == b"evalbook-bundle: the bundle does not verify\n"


def test_check_gives_the_verifiers_failure_before_its_own_refusal(
    imported: dict[str, Any], tmp_path: Path
) -> None:
    """A report body made to name another producer, not re-sealed: the comparison alone
    would refuse the bundle as no import of this runner (exit 3); the verifier has
    failed it, and that is the answer (exit 1)."""
    eb = repack.open_bundle(imported["inspect/alice"])
    _edit_json(eb, "data/report/body.json", producer="someone-else")
    forged = repack.write_bundle(eb, tmp_path / "forged.tar.zst", bundle_json=False)
    result = recheck_bundle(str(forged), Runner.INSPECT)
    assert result.exit_code == 1
    assert all("does not verify" in d.problem for d in result.differences)


def test_check_of_an_unreadable_bundle_exits_3(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tar.zst"
    bad.write_bytes(b"not a bundle")
    with pytest.raises(InputError):
        recheck_bundle(str(bad), Runner.INSPECT)
    done = run_cli("import-inspect", "--check", str(bad))
    assert done.returncode == 3 and done.stderr.count(b"\n") == 1
    assert os.listdir(tmp_path) == ["bad.tar.zst"]


@pytest.mark.parametrize("name", ["inspect", "lm-eval"])
def test_check_of_an_extracted_bag_directory_compares_alike(
    imported: dict[str, Any], name: str, tmp_path: Path
) -> None:
    """A bag directory is extracted (and verified) first, then read as the archive is."""
    bag = tmp_path / "bag"
    assert run_cli("extract", str(imported[f"{name}/alice"]), str(bag)).returncode == 0
    top = next(bag.iterdir())
    runner = Runner.INSPECT if name == "inspect" else Runner.LM_EVAL
    from_archive = recheck_bundle(str(imported[f"{name}/alice"]), runner)
    from_directory = recheck_bundle(str(top), runner)
    assert from_archive.exit_code == from_directory.exit_code == 0
    assert from_archive.compared == from_directory.compared > 10


def test_check_takes_out_a_run_file_placed_before_the_body(
    imported: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Member order is no claim: a bundle whose run file comes before the report body
    (the exporter writes the body first) is read a second time for it, and matches."""
    eb = repack.open_bundle(imported["inspect/alice"])
    body = eb.json("data/report/body.json")
    run_file = "data/blobs/sha256/" + body["subject"]["files"][0]["digest"].removeprefix("sha256:")
    assert run_file in eb.files
    exporters_order = repack.member_order
    monkeypatch.setattr(
        repack,
        "member_order",
        lambda bag: [run_file, *(p for p in exporters_order(bag) if p != run_file)],
    )
    reordered = repack.write_bundle(eb, tmp_path / "reordered.tar.zst")
    with zstandard.open(reordered, "rb") as raw, tarfile.open(fileobj=raw, mode="r|") as tar:
        first = next(m for m in tar if m.isfile())
    assert first.name.partition("/")[2] == run_file
    result = recheck_bundle(str(reordered), Runner.INSPECT)
    assert result.exit_code == 0, result.differences


def test_check_reads_only_the_bytes_it_verified(imported: dict[str, Any], tmp_path: Path) -> None:
    """Every read of the archive after the verifier's is hashed whole and held to the
    digest the verifier read: other bytes at the path (a file replaced meanwhile) are
    refused, nothing compared."""
    from bundler.importers import recheck

    path = str(imported["inspect/alice"])
    held = recheck._Held(path, path, "0" * 64)
    with pytest.raises(InputError, match="changed while it was checked"):
        held.read(tmp_path, lambda data: {})


# ------------------------------------------- claims 10 and 11 on run files (SPEC 16)


def test_run_file_bundles_verify_as_the_contract_says(tmp_path: Path) -> None:
    """scripts/runner_bundles.py (the recipe any verifier can be run against): the
    legitimate imported bundles verify, one with a run file from SSO, and each listing
    of a run file against the rule fails, digests re-sealed."""
    import importlib.util

    from bundler.bundles.verify import verify_bundle

    spec = importlib.util.spec_from_file_location(
        "runner_bundles", ROOT / "scripts" / "runner_bundles.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected = module.build(tmp_path / "bundles")
    assert len(expected) == 11  # three runs by alice and bob, five listings against the rule
    for name, e in sorted(expected.items()):
        result = verify_bundle(str(tmp_path / "bundles" / name), VerifyOptions())
        assert (result.verdict.value, result.exit_code) == (e["verdict"], e["exit_code"]), name
        if e["verdict"] == "failed":
            groups = {c.group for c in result.claims if c.state.value == "failed"}
            assert groups <= {10, 11}, (name, groups)


@pytest.mark.parametrize(
    "entry",
    [
        {"digest": "sha256:../../../../../../etc/hostname", "name": "log.eval"},
        {"digest": "sha256:" + "0" * 64, "name": "../escape.eval"},
        {"digest": "sha256:" + "0" * 64, "name": "a\x00b"},
        {"digest": "sha256:" + "0" * 64, "name": "/abs"},
        {"digest": "sha256:" + "0" * 64, "name": "sub/x"},
        {"digest": "sha256:" + "0" * 64, "name": ""},
        {"digest": "sha256:" + "0" * 64, "name": "."},
        {"digest": 7, "name": "log.eval"},
    ],
)
def test_check_refuses_a_subject_that_names_paths(
    imported: dict[str, Any], entry: dict[str, Any], tmp_path: Path
) -> None:
    """--check writes the run files by the names and reads them by the digests the
    report's subject gives: a bundle whose subject would lead it outside is refused."""
    eb = repack.open_bundle(imported["inspect/alice"])
    eb.edit_json(
        "data/report/body.json",
        lambda body: body["subject"]["files"][0].update(role="log", **entry),
    )
    forged = repack.write_bundle(eb, tmp_path / "forged.tar.zst")
    field = "name" if isinstance(entry["digest"], str) and "/" not in entry["digest"] else "digest"
    with pytest.raises(InputError, match=rf"body\.json: subject\.files\[0\]\.{field}"):
        recheck_bundle(str(forged), Runner.INSPECT)


def test_the_verifier_beside_check_ends_with_it_even_when_it_is_killed(
    imported: dict[str, Any],
) -> None:
    """--check's verifier runs in a child process told to end with --check: SIGKILL of
    --check (no cleanup runs) still ends the child, never a verifier left running on its
    own."""
    import signal
    import subprocess
    import sys
    import time

    import proctable

    check = subprocess.Popen(
        [sys.executable, "-m", "bundler", "import-inspect", "--check", str(imported["inspect/alice"])],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def children() -> list[proctable.Proc]:
        return [
            p
            for p in proctable.processes()
            if p.ppid == check.pid and b"verifier_child" in p.cmdline
        ]

    deadline = time.monotonic() + 20
    found: list[proctable.Proc] = []
    while not found and check.poll() is None and time.monotonic() < deadline:
        found = children()
        time.sleep(0.01)
    assert found, "the verifier never started beside --check"
    # It is told whose death ends it (tests/test_orphans.py holds the mechanism).
    assert str(check.pid).encode() in found[0].cmdline.split(b"\0")
    check.send_signal(signal.SIGKILL)
    check.wait()
    pid = found[0].pid
    deadline = time.monotonic() + 5
    while any(p.pid == pid for p in proctable.processes()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(p.pid == pid and b"verifier_child" in p.cmdline for p in proctable.processes())


@pytest.mark.parametrize(
    "edit",
    [
        ("samples", b'"doc_hash": "'),
        ("results", b'"acc,none": '),
    ],
    ids=["doc_hash", "results value"],
)
def test_check_names_run_files_the_importer_refuses_as_a_difference(
    imported: dict[str, Any], edit: tuple[str, bytes], tmp_path: Path
) -> None:
    """Run files tampered in the store before the export, every digest that names them
    rewritten (the bundle verifies): --check re-imports them, the importer refuses them,
    and that is a difference (exit 1) naming the file's place in the bundle, never
    "cannot be read" (3) nor the temporary copy's name."""
    import shutil

    role, old = edit
    store = tmp_path / "store"
    shutil.copytree(imported["store"], store)
    rid = imported["lm-eval"]["report_id"]
    body = body_of(store, rid)
    entry = next(f for f in body["subject"]["files"] if f["role"] == role)
    hex_old = entry["digest"].removeprefix("sha256:")
    path = next(
        p
        for p in (store / "blobs" / "sha256" / hex_old, store / "sso" / "sha256" / hex_old)
        if p.exists()
    )
    data = path.read_bytes()
    assert old in data
    # One character of the value after ``old`` changed in place (a hash's first hex
    # digit; a metric's first decimal), the length kept.
    at = data.index(old) + len(old) + (0 if role == "samples" else 2)
    changed = data[:at] + (b"1" if data[at : at + 1] != b"1" else b"2") + data[at + 1 :]
    assert changed != data and len(changed) == len(data)
    hex_new = hashlib.sha256(changed).hexdigest()
    path.unlink()
    (path.parent / hex_new).write_bytes(changed)
    for f in (store / "reports" / rid).rglob("*"):
        if f.is_file() and hex_old.encode() in f.read_bytes():
            f.write_bytes(f.read_bytes().replace(hex_old.encode(), hex_new.encode()))
    bundle = tmp_path / "b.tar.zst"
    export_bundle(ExportConfig(str(store), rid, "alice", EXPORTED_AT, out=bundle))
    assert run_cli("verify", str(bundle), "-q").returncode == 0
    result = recheck_bundle(str(bundle), Runner.LM_EVAL)
    assert result.exit_code == 1, result
    [difference] = result.differences
    assert difference.path.endswith(hex_new)
    assert "do not import" in difference.problem and "evalbook-check-" not in difference.problem
    done = run_cli("import-lm-eval", "--check", str(bundle), "--json")
    assert done.returncode == 1 and json.loads(done.stdout)["differences"][0]["path"] == difference.path


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--task", "task.py"),
        ("--dataset", "data.json"),
        ("--decision", "decision.json"),
        ("--report-id", "rpt-x"),
        ("--principal", "carol"),
        ("--report-id", ""),
        ("--principal", ""),
    ],
)
def test_check_refuses_options_it_would_not_use(
    imported: dict[str, Any], option: str, value: str, tmp_path: Path
) -> None:
    """--check re-imports with the files and the report id the bundle holds: a task,
    dataset or decision file, a report id or a principal given beside it would seem to be
    checked and is not, so it is a usage error (exit 2), one line; with --json the error
    record's input is the bundle. A principal from $EVALBOOK_PRINCIPAL is no such claim."""
    given = str(tmp_path / value) if "." in value else value
    if "." in value:
        (tmp_path / value).write_text("{}")
    bundle = str(imported["inspect/alice"])
    args = ("import-inspect", "--check", bundle, option, given)
    done = run_cli(*args)
    assert done.returncode == 2 and done.stderr.count(b"\n") == 1, done.stderr
    assert f"takes no {option}".encode() in done.stderr
    record = json.loads(run_cli(*args, "--json").stdout)
    assert (record["exit_code"], record["input"]) == (2, bundle)
    if option == "--principal":
        done = run_cli("import-inspect", "--check", bundle, "-q", env={"EVALBOOK_PRINCIPAL": "x"})
        assert done.returncode == 0, done.stderr


def test_check_sweeps_what_a_killed_check_left_and_nothing_else(
    imported: dict[str, Any], tmp_path: Path
) -> None:
    """A --check killed outright leaves its temporary directory (a copy of the run
    files); the next --check removes it once it is a minute old and unlocked. A live
    one's (locked), a young one, another user's name and a link are left alone."""
    import fcntl
    import signal
    import subprocess
    import sys
    import time

    import proctable

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {"TMPDIR": str(tmp)}
    bundle = str(imported["inspect/alice"])
    check = subprocess.Popen(
        [sys.executable, "-m", "bundler", "import-inspect", "--check", bundle],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(
        p.ppid == check.pid and b"verifier_child" in p.cmdline for p in proctable.processes()
    ):
        time.sleep(0.01)
    check.send_signal(signal.SIGKILL)
    check.wait()
    [killed] = [p for p in tmp.iterdir() if p.name.startswith("evalbook-check-")]
    live, young = tmp / "evalbook-check-live0000", tmp / "evalbook-check-young000"
    other, link = tmp / "evalbook-check-notes", tmp / "evalbook-check-link0000"
    for d in (live, young, other):
        d.mkdir()
    link.symlink_to(killed)
    old = time.time() - 120
    for d in (killed, live, other):
        os.utime(d, (old, old))
    holder = os.open(live, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        done = run_cli("import-inspect", "--check", bundle, "-q", env=env)
        assert done.returncode == 0, done.stderr
    finally:
        os.close(holder)
    assert sorted(p.name for p in tmp.iterdir()) == sorted(
        p.name for p in (live, young, other, link)
    )


@pytest.mark.parametrize("principal", ["alice", "carol"])
def test_an_import_says_when_the_store_does_not_grant_its_principal(
    imported: dict[str, Any], principal: str, tmp_path: Path
) -> None:
    """An import changes no access.json it did not create: into a store that exists (or
    that a concurrent import made first), a principal the store does not grant is said
    on stderr and in --json, never silently left without access."""
    import shutil

    store = tmp_path / "store"
    shutil.copytree(imported["store"], store)
    before = (store / "access.json").read_bytes()
    done = run_cli(*inspect_args(store, "--principal", principal, "-q"))
    assert done.returncode == 0, done.stderr
    said = b"warning: " in done.stderr and b"does not grant carol report.export" in done.stderr
    assert said == (principal == "carol"), done.stderr
    record = json.loads(run_cli(*inspect_args(store, "--principal", principal, "--json")).stdout)
    assert record["not_granted"] == (principal if principal == "carol" else None)
    assert (store / "access.json").read_bytes() == before


def test_a_local_write_that_fails_is_one_line_and_exit_3_never_a_difference(
    imported: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full temporary directory (any OSError no layer below named) is an error, exit
    3, one line and with --json one evalbook.error.v1 record: never a traceback, never
    exit 1, which would say the bundle differs."""
    import errno

    from bundler.cli.app import main
    from bundler.importers import recheck

    def full(content: Any, targets: list[Path]) -> None:
        for _ in content:
            if targets:
                raise OSError(errno.ENOSPC, "No space left on device", str(targets[0]))

    monkeypatch.setattr(recheck, "_write", full)
    with pytest.raises(SystemExit) as ended:
        main(["import-inspect", "--check", str(imported["inspect/alice"]), "--json"])
    assert ended.value.code == 3
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "No space left on device" in err and "Traceback" not in err
    record = json.loads(out)
    assert (record["schema"], record["exit_code"]) == ("evalbook.error.v1", 3)


@pytest.mark.parametrize(
    "access",
    [b'{"principals":[1]}', b"[]", b'{"principals":{"a":"report.export"}}', b"not json", b""],
)
def test_an_access_json_of_any_shape_grants_nothing_and_raises_nothing(
    access: bytes, tmp_path: Path
) -> None:
    """Whether the store grants the importing principal is read from a file an import
    did not write: any shape but a list of permissions is no grant, never an error."""
    from bundler.importers.importing import _grants

    (tmp_path / "access.json").write_bytes(access)
    assert _grants(tmp_path, "a") is False
    (tmp_path / "access.json").write_bytes(b'{"principals":{"a":["report.export"]}}')
    assert _grants(tmp_path, "a") is True
