"""Differential run: random mutations of real bundles, verified by both verifiers.

    python conformance/differential.py [--n N] [--seed S] [--out DIR]

Exports the fixture bundles, then N times: takes one, applies one random mutation
(a byte of the tar changed; a JSON value of a document replaced, dropped, added or
retyped and every digest resealed; a file dropped or added and resealed; a case line
duplicated or swapped), writes the archive, and verifies it with the Python verifier
(in process) and the JavaScript verifier (one Node process for the whole run,
js/scripts/batch.mjs). The two must agree on the exit code and on the set of failed
claims as (group, path) (docs/format.md, "The same claim"). Every disagreement is kept
under --out with both results; exit 1 if there is any. Deterministic for a seed.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import repack  # noqa: E402

from bundler.bundles.verify import verify_bundle  # noqa: E402
from bundler.core import canonical  # noqa: E402
from bundler.core.claims import VerifyOptions  # noqa: E402
from bundler.core.errors import CanonicalJSONError  # noqa: E402


SOURCES = [("rpt-clean", "alice"), ("rpt-every-reason", "bob"), ("rpt-evidence-manifest", "alice"),
           ("rpt-sso-traces", "bob"), ("rpt-retention", "alice")]
VALUES: list[Any] = [None, True, False, 0, 1, -1, 1.5, 2**53, "", "x", "sha256:" + "0" * 64, [], {}, [1], {"a": 1},
                     "data/report/body.json", "inline", "sso", "payload_at_sso", "missing_from_store", 20000, 262145]


def python_result(path: Path) -> dict[str, Any]:
    r = verify_bundle(str(path), VerifyOptions())
    code = {"verified": 0, "failed": 1, "error": 3}[r.verdict.value]
    failed = sorted({(c.group, c.path or "") for c in r.claims if c.state.value == "failed"})
    return {"exit_code": code, "failed": failed, "error": r.error}


def leaves(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            out += leaves(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += leaves(v, (*at, i))
    return out


def set_at(value: Any, at: tuple[Any, ...], new: Any, rng: random.Random) -> Any:
    if not at:
        return new
    parent = value
    for k in at[:-1]:
        parent = parent[k]
    key = at[-1]
    op = rng.random()
    if op < 0.15 and isinstance(parent, dict):
        del parent[key]
    elif op < 0.25 and isinstance(parent, list):
        parent.insert(key, parent[key])
    elif op < 0.3 and isinstance(parent, dict):
        parent[rng.choice(["extra", "path", "digest", "kind"]) + ("" if rng.random() < 0.5 else "_x")] = new
    else:
        parent[key] = new
    return value


def mutate(eb: repack.EditableBag, rng: random.Random) -> tuple[str, dict[str, bool]]:
    """Change ``eb`` in place; returns a description and what to reseal."""
    kind = rng.random()
    everything = {}
    nothing = {"bundle_json": False, "manifest": False, "bag_info": False, "head": False, "tagmanifest": False}
    json_files = [p for p in eb.files if p.endswith(".json") and not p.startswith("data/datasets/")]
    if kind < 0.55:
        path = rng.choice(json_files)
        value = canonical.loads(eb.files[path], source=path)
        at = rng.choice(leaves(value))
        value = set_at(value, at, rng.choice(VALUES), rng)
        try:
            eb.files[path] = canonical.dumps(value)
        except CanonicalJSONError:
            eb.files[path] = json.dumps(value).encode()
        reseal = everything if path != "data/bundle.json" else {"bundle_json": False}
        return f"json {path} {list(at)[:6]}", reseal
    if kind < 0.7:
        cases = [p for p in eb.files if p.startswith("data/cases/")]
        if cases:
            path = rng.choice(cases)
            lines = eb.lines(path)
            if lines:
                i = rng.randrange(len(lines))
                if rng.random() < 0.5:
                    lines.insert(i, lines[i])
                else:
                    j = rng.randrange(len(lines))
                    lines[i], lines[j] = lines[j], lines[i]
                eb.set_lines(path, lines)
                return f"case lines {path}", everything
    if kind < 0.8:
        path = rng.choice(list(eb.files))
        if rng.random() < 0.5 and path not in ("data/bundle.json",):
            del eb.files[path]
            return f"drop {path}", rng.choice([everything, {"bundle_json": False}])
        new = rng.choice(["data/extra.json", "data/blobs/sha256/" + "1" * 64, "extra.txt", "data/cases/x.jsonl"])
        eb.files[new] = b"{}\n"
        return f"add {new}", rng.choice([everything, {"bundle_json": False}])
    path = rng.choice(list(eb.files))
    data = bytearray(eb.files[path])
    if data:
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        eb.files[path] = bytes(data)
    return f"bit {path}", rng.choice([nothing, everything, {"bundle_json": False}])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", default=str(ROOT / "conformance" / "build" / "differential"))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    out = Path(args.out)
    work = Path(tempfile.mkdtemp(prefix="differential-"))
    node = subprocess.Popen(["node", str(ROOT / "js" / "scripts" / "batch.mjs")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, bufsize=1)
    disagreements = 0
    outcomes: dict[int, int] = {}
    started = time.monotonic()
    try:
        sources = []
        for report, principal in SOURCES:
            path = work / f"{report}-{principal}.tar.zst"
            subprocess.run([sys.executable, "-m", "bundler", "export", "--store", str(ROOT / "fixtures" / "stores" / "main"),
                            "--report", report, "--principal", principal, "--exported-at", "2026-11-30T00:00:00Z",
                            "--out", str(path)], check=True, capture_output=True)
            sources.append(repack.open_bundle(path))
        for i in range(args.n):
            eb = rng.choice(sources).copy()
            what, reseal = mutate(eb, rng)
            path = work / "m.tar.zst"
            try:
                repack.write_bundle(eb, path, **reseal)
            except Exception:  # the edit broke what resealing reads: write it unsealed
                try:
                    repack.write_bundle(eb, path, bundle_json=False, head=False, bag_info=False)
                except Exception:
                    continue
            py = python_result(path)
            assert node.stdin is not None and node.stdout is not None
            node.stdin.write(json.dumps({"path": str(path)}) + "\n")
            js = json.loads(node.stdout.readline())
            js_failed = sorted({(g, p) for g, p in js["failed"]})
            outcomes[py["exit_code"]] = outcomes.get(py["exit_code"], 0) + 1
            if py["exit_code"] != js["exit_code"] or py["failed"] != js_failed:
                disagreements += 1
                out.mkdir(parents=True, exist_ok=True)
                keep = out / f"case-{i:06d}.tar.zst"
                shutil.copyfile(path, keep)
                (out / f"case-{i:06d}.json").write_text(json.dumps(
                    {"mutation": what, "python": py, "node": {**js, "failed": js_failed}}, indent=1))
                print(f"DISAGREE {i}: {what}: python {py['exit_code']} {py['failed'][:4]} {py['error'] or ''}"
                      f" | node {js['exit_code']} {js_failed[:4]} {js.get('error') or ''}", flush=True)
            if (i + 1) % 1000 == 0:
                print(f"{i + 1} mutations, {disagreements} disagreements, {time.monotonic() - started:.0f} s", flush=True)
    finally:
        if node.stdin:
            node.stdin.close()
        node.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    print(f"differential: {args.n} mutations (exit codes {dict(sorted(outcomes.items()))}), "
          f"{disagreements} disagreements between the verifiers")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
