"""Build the bundles of the committed runner fixtures (SPEC 16), legitimate and tampered,
deterministically, for any verifier to be run against:

    python scripts/runner_bundles.py OUTDIR

writes into OUTDIR (absent or empty) one ``.tar.zst`` per case and ``expected.json``:
``{name: {"verdict", "exit_code", "why"}}``, the outcome SPEC 5 and 16 give (written
from the contract, not from a verifier's output). The legitimate ones are the three runs
imported (lm-eval's second one of a group task; the Inspect one also with a dataset file over 262,144 bytes, so one run file
sits at SSO and is exported all the same), exported by alice (every permission) and bob
(no dataset.read_body: run files, examples and outputs withheld, digests kept). The
tampered ones re-seal every digest (tests/repack.py), so only the rules of claims 10 and
11 on run files can catch them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import repack  # noqa: E402

from bundler.core import canonical  # noqa: E402
from bundler.evalbook.export import ExportConfig, export_bundle  # noqa: E402
from bundler.importers.importing import ImportConfig, Runner, import_run  # noqa: E402

RUNNERS = REPO / "fixtures" / "runners"
EXPORTED_AT = datetime(2030, 1, 1, tzinfo=UTC)


def _dataset_file(tmp: Path) -> Path:
    """A deterministic JSON Lines dataset file over 262,144 bytes."""
    path = tmp / "arithmetic-large.jsonl"
    lines = [
        json.dumps({"id": f"x{i:05d}", "input": f"What is {i} + {i}?", "target": str(2 * i)})
        for i in range(6000)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _run_file(eb: repack.EditableBag) -> str:
    digest: str = eb.json("data/report/body.json")["subject"]["files"][0]["digest"]
    return digest


def _relist(
    group: str, reason: str, kind: str = "artifact"
) -> Callable[[repack.EditableBag], None]:
    def edit(eb: repack.EditableBag) -> None:
        digest = _run_file(eb)
        eb.files.pop(f"data/blobs/sha256/{digest[7:]}", None)
        b = eb.bundle
        b["redacted"] = [r for r in b["redacted"] if r["digest"] != digest]
        entry: dict[str, Any] = {"kind": kind, "ref": digest, "digest": digest, "reason": reason}
        if group == "unavailable":
            entry["detail"] = None
        b[group] = sorted([*b[group], entry], key=lambda e: (e["kind"], e["ref"]))
        eb.set_bundle(b)

    return edit


def _as_svc(eb: repack.EditableBag) -> None:
    eb.edit_json("data/report/body.json", lambda body: body.update(producer="svc_evalbook"))


def build(out: Path) -> dict[str, dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        raise SystemExit(f"{out}: not empty")
    work = out / ".work"
    work.mkdir()
    store = work / "store"
    log = next((RUNNERS / "inspect" / "logs").glob("*.eval"))
    inspect = import_run(
        ImportConfig(
            Runner.INSPECT,
            (log,),
            store,
            (RUNNERS / "inspect" / "arithmetic_task.py",),
            (_dataset_file(work),),
            principal="alice",
        )
    )
    lm_run = RUNNERS / "lm-eval" / "run"
    lm = import_run(
        ImportConfig(
            Runner.LM_EVAL,
            (next(lm_run.glob("results_*.json")), *sorted(lm_run.glob("samples_*.jsonl"))),
            store,
            tuple(sorted((RUNNERS / "lm-eval" / "tasks").glob("*.yaml"))),
        )
    )
    group_run = RUNNERS / "lm-eval" / "group-run"
    lm_group = import_run(
        ImportConfig(
            Runner.LM_EVAL,
            (next(group_run.glob("results_*.json")), *sorted(group_run.glob("samples_*.jsonl"))),
            store,
            tuple(sorted((RUNNERS / "lm-eval" / "tasks").glob("*.yaml"))),
        )
    )
    access = json.loads((store / "access.json").read_bytes())
    access["principals"]["bob"] = ["report.export"]
    (store / "access.json").write_bytes(canonical.dumps(access))
    expected: dict[str, dict[str, Any]] = {}
    for name, report_id in (
        ("imported-inspect", inspect.report_id),
        ("imported-lm-eval", lm.report_id),
        ("imported-lm-eval-group", lm_group.report_id),
    ):
        for principal in ("alice", "bob"):
            path = out / f"{name}-{principal}.tar.zst"
            export_bundle(ExportConfig(str(store), report_id, principal, EXPORTED_AT, out=path))
            expected[path.name] = {
                "verdict": "verified",
                "exit_code": 0,
                "why": "an imported run exported as the contract says"
                + (
                    "; run files, examples and outputs redacted (no_dataset_read_body)"
                    if principal == "bob"
                    else "; its run files in the bundle, one from SSO"
                ),
            }
    attacks = {
        "imported-run-file-payload-at-sso": (
            "alice",
            _relist("unavailable", "payload_at_sso"),
            "a run file is exported whatever its size (claim 10)",
        ),
        "imported-run-file-redacted-with-read-body": (
            "alice",
            _relist("redacted", "no_dataset_read_body"),
            "the exporter held dataset.read_body (claim 10)",
        ),
        "imported-run-file-unavailable-for-bob": (
            "bob",
            _relist("unavailable", "missing_from_store"),
            "without dataset.read_body a run file is redacted (claim 10)",
        ),
        "imported-run-file-redacted-as-output": (
            "bob",
            _relist("redacted", "no_dataset_read_body", "output"),
            "the cases make it an artifact (claim 10)",
        ),
        "imported-leniency-for-svc-report": (
            "bob",
            _as_svc,
            "only an importer's report has run files (claim 10)",
        ),
    }
    for name, (principal, edit, why) in attacks.items():
        eb = repack.open_bundle(out / f"imported-inspect-{principal}.tar.zst")
        edit(eb)
        path = out / f"{name}.tar.zst"
        repack.write_bundle(eb, path)
        expected[path.name] = {"verdict": "failed", "exit_code": 1, "why": why}
    import shutil

    shutil.rmtree(work)
    (out / "expected.json").write_text(json.dumps(expected, indent=2, sort_keys=True) + "\n")
    return expected


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python scripts/runner_bundles.py OUTDIR")
    for name, e in build(Path(sys.argv[1])).items():
        print(f"{name}: {e['verdict']} (exit {e['exit_code']})")
