"""Run the conformance corpus against one or more verifiers (SPEC 15).

    python conformance/run.py CORPUS_DIR RUNNER [RUNNER...] [--jobs N] [--json]

Each RUNNER is an executable that follows the runner protocol of conformance/README.md.
For each verifier it prints how many cases agree with the expectation and each case
that does not; then every case where the verifiers disagree with one another (exit
code, verdict, or the set of failed claims as (group, path)). Exit 0 when every
verifier agrees with every expectation, 1 otherwise. Uses only the standard library.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


def run_case(runner: str, corpus: Path, case: dict[str, Any]) -> dict[str, Any]:
    argv = [runner, case["command"], case["input"], *case["args"], "--json"]
    try:
        proc = subprocess.run(argv, cwd=corpus, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"exit_code": None, "record": None, "stderr": "timed out after 120 s"}
    record = None
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        if line.strip():
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            break
    return {"exit_code": proc.returncode, "record": record, "stderr": proc.stderr.decode("utf-8", "replace")[-400:]}


def failed_claims(record: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not record:
        return []
    return [c for c in record.get("claims", []) if c.get("state") == "failed"]


def problems(case: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """What differs from the expectation (empty: the case agrees)."""
    e = case["expect"]
    out = []
    if got["exit_code"] != e["exit_code"]:
        out.append(f"exit code {got['exit_code']}, expected {e['exit_code']}")
    record = got["record"]
    if case["command"] == "check-proof":
        return out
    if record is None:
        return out + ["no JSON record on stdout"]
    if "verdict" in e and record.get("verdict") != e["verdict"]:
        out.append(f"verdict {record.get('verdict')}, expected {e['verdict']}")
    failed = failed_claims(record)
    for want in e.get("failed", []):
        if not any(c["group"] == want["group"] and (want["path"] is None or c["path"] == want["path"]) for c in failed):
            out.append(f"no failed claim of group {want['group']}" + (f" at {want['path']}" if want["path"] else ""))
    if e.get("no_other_failures") and failed:
        out.append("unexpected failed claims: " + "; ".join(f"[{c['group']}] {c['subject']}" for c in failed[:3]))
    if "failed_groups" in e:
        groups = sorted({c["group"] for c in failed})
        if groups != e["failed_groups"]:
            out.append(f"failed groups {groups}, expected {e['failed_groups']}")
    if "unprovable_reasons" in e:
        reasons = sorted({c["reason"] for c in record.get("claims", []) if c["state"] == "unprovable"})
        if reasons != e["unprovable_reasons"]:
            out.append(f"unprovable reasons {reasons}, expected {e['unprovable_reasons']}")
    for reason in e.get("failed_reasons_include", []):
        if not any(c.get("reason") == reason for c in failed):
            out.append(f"no failed claim with reason {reason}")
    return out


def claim_key(got: dict[str, Any]) -> tuple[Any, ...]:
    """What two verifiers must agree on (SPEC 15; docs/format.md "The same claim")."""
    record = got["record"] or {}
    failed = sorted({(c["group"], c["path"] or "") for c in failed_claims(record)})
    unprovable = sorted({(c["group"], c["path"] or "", c["reason"]) for c in record.get("claims", []) if c.get("state") == "unprovable"})
    return (got["exit_code"], record.get("verdict"), tuple(failed), tuple(unprovable))


def main(argv: list[str]) -> int:
    jobs = 4
    as_json = False
    args = []
    it = iter(argv)
    for a in it:
        if a == "--jobs":
            jobs = int(next(it))
        elif a == "--json":
            as_json = True
        else:
            args.append(a)
    corpus = Path(args[0]).resolve()
    runners = [str(Path(r).resolve()) for r in args[1:]]
    cases = json.loads((corpus / "manifest.json").read_text())["cases"]
    results: dict[str, list[dict[str, Any]]] = {}
    with ThreadPoolExecutor(jobs) as pool:
        for runner in runners:
            results[runner] = list(pool.map(lambda c, r=runner: run_case(r, corpus, c), cases))
    ok = True
    summary: dict[str, Any] = {"cases": len(cases), "runners": {}, "disagreements": []}
    for runner in runners:
        name = Path(runner).name
        bad = []
        for case, got in zip(cases, results[runner]):
            p = problems(case, got)
            if p:
                bad.append({"id": case["id"], "problems": p, "stderr": got["stderr"].strip().splitlines()[-1:] })
        agree = len(cases) - len(bad)
        ok = ok and not bad
        summary["runners"][name] = {"agree": agree, "disagree": bad}
        if not as_json:
            print(f"{name}: {agree} of {len(cases)} cases agree with the expectation")
            for b in bad:
                print(f"  {b['id']}: {'; '.join(b['problems'])}  {b['stderr']}")
    if len(runners) > 1:
        for i, case in enumerate(cases):
            keys = {Path(r).name: claim_key(results[r][i]) for r in runners}
            if len(set(keys.values())) > 1:
                summary["disagreements"].append({"id": case["id"], "by_runner": {k: repr(v) for k, v in keys.items()}})
        if not as_json:
            print(f"verifiers disagree with one another on {len(summary['disagreements'])} of {len(cases)} cases")
            for d in summary["disagreements"]:
                print(f"  {d['id']}")
                for k, v in d["by_runner"].items():
                    print(f"    {k}: {v[:300]}")
    if as_json:
        print(json.dumps(summary))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
