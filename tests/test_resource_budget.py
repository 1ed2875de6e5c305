"""Resource budget (SPEC 5, Resources; issue 13 Deliver 4): every command, as a subprocess,
on the hostile input of each family, stays under 300 MB of memory and, for inputs under
100 MB, under 10 s.

Each command runs as ``[sys.executable, "-m", "bundler", ...]`` under a small launcher
process that waits for it with ``os.wait4``: the peak RSS is the child's own (the
launcher is a fresh interpreter, so no inherited peak of this test process counts), and
the launcher kills a child that outlives the deadline (a hang is a failure, not a stuck
test run). The hostile inputs are built once per module, streamed (tests/hostile.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import hostile
import measure
import pytest
import records

from bundler.core import canonical

REPO = Path(__file__).resolve().parents[1]
EB_FIXTURES = REPO / "fixtures" / "eval-banana"
EB_PROJECT = EB_FIXTURES / "project"
EB_RUN = EB_FIXTURES / "runs" / "flat"

BUDGET_BYTES = 300 * 1000 * 1000
BUDGET_SECONDS = 10.0
TIMED_INPUTS_BELOW = 100 * 1000 * 1000
DEADLINE_SECONDS = 120


@dataclass(frozen=True)
class Run:
    code: int
    wall: float
    cpu: float
    peak_bytes: int
    killed: bool
    stderr: str


def run_measured(args: list[str], cwd: Path) -> Run:
    """Run ``python -m bundler ARGS`` in ``cwd`` and measure it (see the module docstring)."""
    cmd = [sys.executable, "-m", "bundler", *args]
    m = measure.spawn_measured(
        cmd, deadline=DEADLINE_SECONDS, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=cwd
    )
    return Run(m.code, m.wall, m.cpu, m.peak_bytes, m.killed, m.stderr.decode("utf-8", "replace"))


def assert_within_budget(run: Run, input_bytes: int, *, codes: tuple[int, ...] = (1, 3)) -> None:
    detail = (
        f"exit {run.code}, {run.peak_bytes / 1e6:.0f} MB, {run.wall:.1f} s wall, {run.cpu:.1f} s CPU: {run.stderr[-400:]}"
    )
    assert not run.killed, f"still running after {DEADLINE_SECONDS} s ({detail})"
    assert "Traceback" not in run.stderr, detail
    assert run.code in codes, detail
    assert run.peak_bytes < BUDGET_BYTES, detail
    if input_bytes < TIMED_INPUTS_BELOW:
        # CPU, not wall: the suite shares two cores with other work.
        assert run.cpu < BUDGET_SECONDS, detail


# ------------------------------------------------------------------- hostile bundles

BUNDLE_FAMILIES: dict[str, Callable[[Path, Path], object]] = {
    "floats": hostile.floats_bundle,
    "case_lines": hostile.case_lines_bundle,
    "empty_members": lambda _clean, out: hostile.empty_members_bundle(out),
    "nesting": hostile.nesting_bundle,
    "huge_string": hostile.huge_string_bundle,
}


def _decompressed_size(path: Path) -> int:
    import zstandard

    total = 0
    with open(path, "rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as reader:
        while chunk := reader.read(1 << 20):
            total += len(chunk)
    return total


@pytest.fixture(scope="module")
def hostile_bundles(
    bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Path, int]]:
    """Each family's archive and its size (the larger of file and tar stream)."""
    out = tmp_path_factory.mktemp("hostile-bundles")
    made = {}
    for name, build in BUNDLE_FAMILIES.items():
        path = out / f"{name}.tar.zst"
        build(bundles["rpt-clean/alice"], path)
        made[name] = (path, max(path.stat().st_size, _decompressed_size(path)))
    return made


BUNDLE_COMMANDS: dict[str, Callable[[Path, Path], list[str]]] = {
    "verify": lambda bundle, cwd: ["verify", str(bundle)],
    "inspect": lambda bundle, cwd: ["inspect", str(bundle)],
    "extract": lambda bundle, cwd: ["extract", str(bundle), str(cwd / "extracted")],
    "prove": lambda bundle, cwd: ["prove", str(bundle), "--case", "accuracy-00000"],
    "audit": lambda bundle, cwd: ["audit", str(bundle)],
}


@pytest.mark.parametrize("command", sorted(BUNDLE_COMMANDS))
@pytest.mark.parametrize("family", sorted(BUNDLE_FAMILIES))
def test_bundle_commands_stay_within_budget(
    family: str, command: str, hostile_bundles: dict[str, tuple[Path, int]], tmp_path: Path
) -> None:
    bundle, size = hostile_bundles[family]
    run = run_measured(BUNDLE_COMMANDS[command](bundle, tmp_path), tmp_path)
    assert_within_budget(run, size)


# ------------------------------------------------------------------------ proofs


def _proof_families(clean_proof: dict[str, object]) -> dict[str, bytes]:
    def with_case(extra: dict[str, object]) -> bytes:
        proof = json.loads(json.dumps(clean_proof))
        proof["case"] = {**proof["case"], **extra}  # type: ignore[dict-item]
        return canonical.dumps(proof) + b"\n"

    floats = b"[" + b"0.5," * (26 * 1024 * 1024 // 4) + b"0.5]"
    proof_bytes = canonical.dumps(clean_proof)
    return {
        "huge_case": with_case({"padding": "a" * (26 * 1024 * 1024)}),
        "floats_case": proof_bytes[:-1] + b',"zz":' + floats + b"}\n",
        "nesting": b'{"aa":' + b"[" * 100_000 + b"]" * 100_000 + b"," + proof_bytes[1:] + b"\n",
    }


@pytest.fixture(scope="module")
def hostile_proofs(
    bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("hostile-proofs")
    clean = out / "clean.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "bundler",
            "prove",
            str(bundles["rpt-clean/alice"]),
            "--case",
            "accuracy-00000",
            "--out",
            str(clean),
        ],
        check=True,
        capture_output=True,
        cwd=REPO,
    )
    proofs = {}
    for name, data in _proof_families(json.loads(clean.read_bytes())).items():
        proofs[name] = out / f"{name}.json"
        proofs[name].write_bytes(data)
    return proofs


@pytest.mark.parametrize("family", ["huge_case", "floats_case", "nesting"])
def test_check_proof_stays_within_budget(
    family: str, hostile_proofs: dict[str, Path], tmp_path: Path
) -> None:
    path = hostile_proofs[family]
    run = run_measured(["check-proof", str(path)], tmp_path)
    assert_within_budget(run, path.stat().st_size)


# ------------------------------------------------------------------------ stores


STORE_FAMILIES: dict[str, Callable[[Path], None]] = {}


def _store_family(name: str) -> Callable[[Callable[[Path], None]], Callable[[Path], None]]:
    def register(build: Callable[[Path], None]) -> Callable[[Path], None]:
        STORE_FAMILIES[name] = build
        return build

    return register


@_store_family("floats")
def _floats_store(store: Path) -> None:
    body = store / "reports" / "rpt-clean" / "body.json"
    data = body.read_bytes()
    body.write_bytes(b'{"aa":[' + b"0.5," * (26 * 1024 * 1024 // 4) + b"0.5]," + data[1:])


@_store_family("case_lines")
def _case_lines_store(store: Path) -> None:
    cases = sorted((store / "reports" / "rpt-clean" / "cases").glob("*.jsonl"))[0]
    line = cases.read_bytes().splitlines(keepends=True)[0]
    with open(cases, "wb") as fh:
        for _ in range(260_000 // 1000):
            fh.write(line * 1000)


@_store_family("nesting")
def _nesting_store(store: Path) -> None:
    body = store / "reports" / "rpt-clean" / "body.json"
    data = body.read_bytes()
    body.write_bytes(b'{"aa":' + b"[" * 100_000 + b"]" * 100_000 + b"," + data[1:])


@_store_family("huge_string")
def _huge_string_store(store: Path) -> None:
    body = store / "reports" / "rpt-clean" / "body.json"
    data = body.read_bytes()
    body.write_bytes(b'{"aa":"' + b"a" * (60 * 1024 * 1024) + b'",' + data[1:])


@pytest.mark.parametrize("family", sorted(STORE_FAMILIES))
def test_export_stays_within_budget(family: str, fixture_store: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(fixture_store, store)
    STORE_FAMILIES[family](store)
    size = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
    # Cases beyond the 20,000th are listed under case_limit, not refused (SPEC 4.3).
    codes = (0,) if family == "case_lines" else (1, 3)
    run = run_measured(
        [
            "export",
            "--store",
            str(store),
            "--report",
            "rpt-clean",
            "--principal",
            "alice",
            "--exported-at",
            "2026-11-30T00:00:00Z",
            "--out",
            str(tmp_path / "out.tar.zst"),
            "--quiet",
        ],
        tmp_path,
    )
    assert_within_budget(run, size, codes=codes)


# ------------------------------------------------------------------ eval-banana runs


@pytest.mark.parametrize("apparent", [96 * 1000 * 1000, 128 * 1024 * 1024])
@pytest.mark.parametrize("command", ["export-eb", "verify"])
def test_sparse_report_json_stays_within_budget(
    command: str, apparent: int, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(EB_RUN, run_dir)
    with open(run_dir / "report.json", "r+b") as fh:
        fh.truncate(apparent)  # a hole: no disk blocks, ``apparent`` bytes of zeros to read
    args = (
        ["export-eb", str(run_dir), "--project", str(EB_PROJECT), "--out", str(tmp_path / "o")]
        if command == "export-eb"
        else ["verify", str(run_dir), "--project", str(EB_PROJECT)]
    )
    run = run_measured(args, tmp_path)
    assert_within_budget(run, apparent)


# ------------------------------------------------------------------- records render reads


def _large_verification_record(path: Path, cases: int, absent: int) -> None:
    """The shape verify writes for ``cases`` cases with ``absent`` payloads each listed as
    unprovable (about 60 MB for 20,000 x 10), written a line at a time."""
    import orjson

    digest = "sha256:" + "ab" * 32
    head = {
        "schema": "evalbook.verification.v1",
        "tool": {"name": "evalbook-bundle", "version": "0.1.0"},
        "verified_at": "2026-11-30T00:00:00Z",
        "source": "large.tar.zst",
        "archive": {"sha256": "0" * 64, "size": 1},
        "verdict": "verified",
        "bundle_schema": "evalbook.reproducibility_bundle.v1",
        "bundle_digest": digest,
        "report_id": "rpt-large",
        "report_digest": digest,
        "report_result": "pass",
        "report_issued_at": "2026-11-01T00:00:00Z",
        "envelope": {
            "status": "current",
            "superseded_by": None,
            "superseded_at": None,
            "reason": None,
        },
        "anchor": {
            "expected_bundle_digest": None,
            "expected_report_digest": None,
            "signer": None,
            "self_consistent_only": True,
            "description": "self-consistency only",
        },
        "strict": False,
        "counts": {"proven": cases, "unprovable": cases * absent, "failed": 0},
        "unprovable_by_reason": {"payload_at_sso": cases * absent},
        "strict_forecast": f"FAILED ({cases * absent} unprovable claims would fail)",
        "error": None,
        "summary": {},
    }
    # The claims that prove the facts the page shows (render ties each fact to one).
    proofs = records.proof_claims(head)
    head["counts"]["proven"] += len(proofs)
    with path.open("wb") as out:
        out.write(orjson.dumps(head)[:-1] + b',"claims":[')
        out.write(b"".join(orjson.dumps(c) + b"," for c in proofs))
        for i in range(cases):
            case = f"accuracy-{i:05d}"
            proven = {
                "group": 8,
                "group_name": "cases",
                "subject": f"case {case} line is canonical and schema-valid",
                "state": "proven",
                "path": "data/cases/accuracy.jsonl",
                "expected": None,
                "observed": None,
                "reason": None,
                "detail": None,
            }
            out.write((b"," if i else b"") + orjson.dumps(proven))
            for j in range(absent):
                claim = {
                    "group": 8,
                    "group_name": "cases",
                    "subject": f"case {case} payload {j} output digest",
                    "state": "unprovable",
                    "path": None,
                    "expected": digest,
                    "observed": None,
                    "reason": "payload_at_sso",
                    "detail": "the payload is kept at the store's SSO location",
                }
                out.write(b"," + orjson.dumps(claim))
        out.write(b"]}")


def test_render_of_a_sixty_megabyte_record_stays_within_budget(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """render streams the record: 20,000 cases with ten absent payloads each."""
    root = tmp_path_factory.mktemp("large-record")
    record = root / "verification.json"
    _large_verification_record(record, cases=20_000, absent=10)
    size = record.stat().st_size
    assert size > 50 * 1000 * 1000, size
    run = run_measured(["render", str(record), "--html", str(root / "page.html")], root)
    assert_within_budget(run, size, codes=(0,))
    page = (root / "page.html").read_text()
    assert "and 199000 more unprovable claims" in page.replace("\u00a0", " ")
