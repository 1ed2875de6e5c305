"""What `evalbook-bundle fixity` (SPEC section 13) achieves against a real object store.

Starts a local SeaweedFS server (as the tests do), stores N bundles of a few hundred KB
under one archive prefix (each exported from a small synthetic store with its own
``exported_at``, so each has its own bundle digest and key; cached under bench/.cache/),
then measures, in the same run, each with a fresh ledger:

- ``--level full`` with ``--workers 1``, ``--workers 2`` and on a two-worker Dask
  cluster on loopback (skipped with a note when ``distributed`` is not installed);
- ``--level object`` against ``full``, both with 2 workers;
  these runs alternate for ``rounds`` rounds; walls are medians, ratios the medians of
  each round's ratio;
- a shell loop of ``evalbook-bundle verify s3://KEY`` over a subset of the keys (scaled
  per bundle), the baseline a keeper would otherwise script;
- the ledger's writes: N results recorded in batches through ``bundler.fixity.ledger``
  (writes/s, and their share of the wall time of the 2-worker full run);
- the fixity process's peak RSS with a ledger of 100,000 bundles.

``run(bundles=1000) -> dict`` is importable (bench/run.py --fixity calls it);
``python bench/bench_fixity.py --bundles 200`` prints the table and the dict as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / "bench" / ".cache"
BIN = str(Path(sys.executable).parent / "evalbook-bundle")
TIME = "/usr/bin/time"
BUCKET = "bench"
PREFIX = "archive"
SHELL_SUBSET = 100
LEDGER_ROWS = 100_000
LEDGER_BATCH = 25

sys.path.insert(0, str(REPO / "tests"))

TARGETS = {
    "two_workers_vs_one": 1.8,
    "one_worker_vs_shell_loop": 5.0,
    "object_vs_full": 2.0,
    "ledger_share": 0.05,
    "peak_rss_mb": 200,
}


def _bundles_dir(count: int) -> tuple[Path, list[dict[str, Any]]]:
    """``count`` distinct archives of one synthetic report, generated once and cached."""
    from bundler.evalbook.export import ExportConfig, export_bundle
    from bundler.testing.fixturegen import build_large_store

    store = CACHE / "fixity-store"
    if not (store / ".complete").exists():
        shutil.rmtree(store, ignore_errors=True)
        build_large_store(store, cases=60, checks=2, payload_bytes=600_000, sso_payloads=0)
        (store / ".complete").write_text("ok\n")
    out = CACHE / "fixity-bundles"
    out.mkdir(parents=True, exist_ok=True)
    index_path = out / "index.json"
    index: list[dict[str, Any]] = json.loads(index_path.read_text()) if index_path.exists() else []
    index = [e for e in index if (out / e["file"]).exists()]
    if len(index) < count:
        print(f"  exporting {count - len(index)} bundles into {out} ...", flush=True)
    base = datetime(2026, 11, 30, tzinfo=UTC)
    while len(index) < count:
        i = len(index)
        path = out / f"b{i:06d}.tar.zst"
        path.unlink(missing_ok=True)
        result = export_bundle(
            ExportConfig(str(store), "rpt-large", "alice", base + timedelta(seconds=i), path)
        )
        index.append(
            {
                "file": path.name,
                "report_id": result.report_id,
                "bundle_digest": result.bundle_digest,
                "report_digest": result.report_digest,
                "sha256": result.archive_sha256,
                "size": result.archive_size,
            }
        )
        if i % 200 == 199:
            index_path.write_text(json.dumps(index))
    index_path.write_text(json.dumps(index))
    return out, index[:count]


def _process_cpu_s(pid: int) -> float:
    """User + system seconds a running process (and the children it reaped) has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    # utime, stime, cutime, cstime: fields 14-17 of proc(5), 12-15 after the name.
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _timed(cmd: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> dict[str, Any]:
    """Wall seconds, CPU seconds (the command and the children it waited for), peak RSS
    (MiB) and the --json summary of one command."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        start = time.perf_counter()
        proc = subprocess.run(
            [TIME, "-f", "%M %U %S", "-o", out.name, *cmd],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        wall = time.perf_counter() - start
        if proc.returncode not in ok:
            raise SystemExit(f"bench: {cmd!r} failed ({proc.returncode}): {proc.stderr[-2000:]}")
        rss_kb, user, system = out.read().strip().splitlines()[-1].split()
    summary = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else None
    return {
        "wall_s": wall,
        "cpu_s": float(user) + float(system),
        "peak_rss_mb": int(rss_kb) / 1024,
        "summary": summary,
    }


def _fixity(
    source: str,
    work: Path,
    name: str,
    env: dict[str, str],
    *extra: str,
    ok: tuple[int, ...] = (0,),
    seed: Path | None = None,
) -> dict[str, Any]:
    """One timed run on a fresh ledger, or on a copy of ``seed`` (a ledger that already
    holds a passing full check of every bundle: level object compares with it, where a
    fresh ledger would make every first check full, SPEC 13.1)."""
    ledger = work / f"{name}.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{ledger}{suffix}").unlink(missing_ok=True)
    if seed is not None:
        shutil.copyfile(seed, ledger)
    cmd = [BIN, "fixity", source, "--ledger", str(ledger), "--json", "-q", *extra]
    result = _timed(cmd, env, ok)
    summary = result.pop("summary") or {}
    result["counts"] = summary.get("counts")
    result["bytes_read"] = summary.get("bytes_read", 0)
    result["summary_wall_s"] = summary.get("wall_seconds")
    return result


@contextlib.contextmanager
def _cluster(work: Path, env: dict[str, str]) -> Iterator[str]:
    """A Dask scheduler and two single-threaded workers on 127.0.0.1 (tests/dask_cluster.py)."""
    from dask_cluster import local_cluster

    with local_cluster(work, env) as (address, _):
        yield address


def _ledger_writes(work: Path, index: list[dict[str, Any]]) -> dict[str, Any]:
    """Record one pass result per bundle, in batches as a run does; writes/s."""
    from bundler.fixity.check import now_iso
    from bundler.fixity.ledger import Event, Ledger

    path = work / "ledger-writes.sqlite"
    ledger = Ledger(path, tool_version="bench")
    source = f"s3://{BUCKET}/{PREFIX}"
    events = [
        Event(
            key=f"{PREFIX}/reports/bundles/{e['report_id']}/{e['bundle_digest'][7:]}.tar.zst",
            time=now_iso(),
            level="full",
            outcome="pass",
            detail="verified",
            size=e["size"],
            sha256=e["sha256"],
            bundle_digest=e["bundle_digest"],
            report_id=e["report_id"],
        )
        for e in index
    ]
    ledger.start_run("bench-writes", source, "full", "{}", now_iso())
    start = time.perf_counter()
    for i in range(0, len(events), LEDGER_BATCH):
        ledger.record(source, "bench-writes", events[i : i + LEDGER_BATCH])
    seconds = time.perf_counter() - start
    ledger.close()
    return {
        "rows": len(events),
        "batch": LEDGER_BATCH,
        "seconds": seconds,
        "writes_per_s": len(events) / seconds if seconds else float("inf"),
    }


def _big_ledger_rss(
    work: Path, bundles_dir: Path, index: list[dict[str, Any]], env: dict[str, str]
) -> dict[str, Any]:
    """Peak RSS of fixity over a directory of a few bundles whose ledger knows 100,000."""
    from bundler.fixity.ledger import Event, Ledger

    root = work / "rss-archive"
    root.mkdir()
    for e in index[:5]:
        shutil.copyfile(bundles_dir / e["file"], root / e["file"])
    ledger_path = work / "ledger-100k.sqlite"
    ledger = Ledger(ledger_path, tool_version="bench")
    source = os.path.abspath(root)
    old = (datetime.now(UTC) - timedelta(days=400)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    start = time.perf_counter()
    batch: list[Event] = []
    for i in range(LEDGER_ROWS):
        batch.append(
            Event(
                key=f"gone/{i:06d}.tar.zst",
                time=old,
                level="full",
                outcome="pass",
                detail="verified",
                size=300_000,
                sha256="sha256:" + f"{i:064x}",
                bundle_digest="sha256:" + f"{i + 1:064x}",
                report_id="rpt-large",
            )
        )
        if len(batch) == 5000:
            ledger.record(source, "bench-fill", batch)
            batch = []
    if batch:
        ledger.record(source, "bench-fill", batch)
    ledger.close()
    fill_s = time.perf_counter() - start
    # The known-but-unlisted bundles come out missing: exit 1 is the expected outcome.
    cmd = [BIN, "fixity", str(root), "--ledger", str(ledger_path), "--json", "-q"]
    result = _timed([*cmd, "--limit", "100", "--workers", "1"], env, ok=(0, 1))
    summary = result.pop("summary") or {}
    return {
        "ledger_rows": LEDGER_ROWS,
        "fill_s": fill_s,
        "wall_s": result["wall_s"],
        "peak_rss_mb": result["peak_rss_mb"],
        "counts": summary.get("counts"),
    }


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def run(bundles: int = 1000, *, rounds: int = 3, workdir: Path | None = None) -> dict[str, Any]:
    """Measure fixity over ``bundles`` stored bundles; return the figures and ratios."""
    import boto3
    from botocore.config import Config
    from s3_server import start_server

    bundles_dir, index = _bundles_dir(bundles)
    total_bytes = sum(e["size"] for e in index)
    work = Path(tempfile.mkdtemp(prefix="bench-fixity-", dir=workdir))
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "bench-" + secrets.token_hex(4),
        "AWS_SECRET_ACCESS_KEY": secrets.token_hex(20),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "TMPDIR")}
    server = None
    results: dict[str, Any] = {
        "bundles": bundles,
        "bytes": total_bytes,
        "mean_bundle_bytes": total_bytes / bundles,
    }
    try:
        os.environ["AWS_ACCESS_KEY_ID"] = env["AWS_ACCESS_KEY_ID"]
        os.environ["AWS_SECRET_ACCESS_KEY"] = env["AWS_SECRET_ACCESS_KEY"]
        os.environ["TMPDIR"] = str(work)  # SeaweedFS puts its sockets in TMPDIR
        server = start_server(work / "server")
        env["AWS_ENDPOINT_URL_S3"] = server.endpoint
        client = boto3.client(
            "s3",
            endpoint_url=server.endpoint,
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}),
        )
        client.create_bucket(Bucket=BUCKET)
        start = time.perf_counter()
        keys = []
        for e in index:
            key = f"{PREFIX}/reports/bundles/{e['report_id']}/{e['bundle_digest'][7:]}.tar.zst"
            client.put_object(
                Bucket=BUCKET,
                Key=key,
                Body=(bundles_dir / e["file"]).read_bytes(),
                ContentType="application/octet-stream",
                Metadata={
                    "bundle-digest": e["bundle_digest"],
                    "report-id": e["report_id"],
                    "report-digest": e["report_digest"],
                    "sha256": e["sha256"],
                },
            )
            keys.append(key)
        results["upload_s"] = time.perf_counter() - start
        print(
            f"  stored {bundles} bundles ({total_bytes / 1e6:.1f} MB) in {results['upload_s']:.1f} s",
            flush=True,
        )
        source = f"s3://{BUCKET}/{PREFIX}"

        seed = work / "seed.sqlite"

        def measure(name: str, *extra: str) -> dict[str, Any]:
            assert server is not None and server.pid is not None
            if name.startswith("object") and not seed.exists():
                _fixity(source, work, "seed-run", env, "--level", "full")
                shutil.copyfile(work / "seed-run.sqlite", seed)
            server_before = _process_cpu_s(server.pid)
            r = _fixity(
                source, work, name, env, *extra, seed=seed if name.startswith("object") else None
            )
            # The two cores are shared by fixity (with its helper processes) and the
            # server: their CPU over the wall says how busy the machine was, which
            # bounds what a second worker can add.
            r["server_cpu_s"] = _process_cpu_s(server.pid) - server_before
            r["cores_busy"] = (r["cpu_s"] + r["server_cpu_s"]) / r["wall_s"]
            r["bundles_per_s"] = bundles / r["wall_s"]
            r["mb_per_s"] = total_bytes / 1e6 / r["wall_s"]
            print(
                f"  {name}: {r['wall_s']:.2f} s, {r['bundles_per_s']:.0f} bundles/s, "
                f"{r['mb_per_s']:.1f} MB/s, CPU {r['cpu_s']:.1f} s + server "
                f"{r['server_cpu_s']:.1f} s ({r['cores_busy']:.2f} cores busy), "
                f"peak RSS {r['peak_rss_mb']:.0f} MiB, {r['counts']}",
                flush=True,
            )
            if r["counts"] is None or r["counts"].get("pass") != bundles:
                raise SystemExit(f"bench: fixity {name} did not pass every bundle: {r['counts']}")
            return r

        # The runs alternate, round after round, and each figure is the median of its
        # rounds: this machine's speed drifts by tens of percent over minutes, so only
        # runs taken side by side compare.
        plan = [
            ("full_w1", ("--level", "full", "--workers", "1")),
            ("full_w2", ("--level", "full", "--workers", "2")),
            ("object_w2", ("--level", "object", "--workers", "2")),
        ]
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in plan}
        for round_no in range(rounds):
            print(f"  round {round_no + 1} of {rounds}", flush=True)
            for name, extra in plan:
                runs[name].append(measure(name, *extra))
        # The cluster's processes (idle or not) take CPU from whatever runs beside them,
        # so the local runs above ran without it; the cluster is started for its own.
        try:
            import distributed  # noqa: F401
        except ImportError:
            print("  note: distributed is not installed; the cluster part is skipped", flush=True)
        else:
            with _cluster(work, env) as address:
                runs["full_dask2"] = [
                    measure("full_dask2", "--level", "full", "--scheduler", address)
                    for _ in range(rounds)
                ]
        for name, taken in runs.items():
            results[name] = {
                **min(
                    taken, key=lambda r: abs(r["wall_s"] - _median([t["wall_s"] for t in taken]))
                ),
                "wall_s": _median([t["wall_s"] for t in taken]),
                "walls_s": [t["wall_s"] for t in taken],
            }
            results[name]["bundles_per_s"] = bundles / results[name]["wall_s"]
            results[name]["mb_per_s"] = total_bytes / 1e6 / results[name]["wall_s"]

        def pairs(a: str, b: str) -> list[float]:
            return [x["wall_s"] / y["wall_s"] for x, y in zip(runs[a], runs[b], strict=True)]

        paired = {
            "two_workers_vs_one": pairs("full_w1", "full_w2"),
            "object_vs_full": pairs("full_w2", "object_w2"),
        }
        if "full_dask2" in runs:  # not side by side: the medians' ratio
            paired["dask2_vs_one"] = [
                _median([r["wall_s"] for r in runs["full_w1"]])
                / _median([r["wall_s"] for r in runs["full_dask2"]])
            ]
        results["paired_ratios"] = paired

        subset = keys[:SHELL_SUBSET]
        script = "\n".join(
            f"{BIN} verify s3://{BUCKET}/{k} --quiet >/dev/null || exit 1" for k in subset
        )
        start = time.perf_counter()
        proc = subprocess.run(
            ["bash", "-c", script], env=env, capture_output=True, text=True, check=False
        )
        shell_s = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"bench: the verify loop failed: {proc.stderr[-2000:]}")
        results["shell_loop"] = {
            "keys": len(subset),
            "wall_s": shell_s,
            "per_bundle_s": shell_s / len(subset),
            "scaled_wall_s": shell_s / len(subset) * bundles,
        }
        print(f"  shell verify loop: {shell_s / len(subset) * 1000:.0f} ms per bundle", flush=True)

        results["ledger_writes"] = _ledger_writes(work, index)
        results["big_ledger"] = _big_ledger_rss(work, bundles_dir, index, env)
        print(
            f"  ledger: {results['ledger_writes']['writes_per_s']:.0f} writes/s; with "
            f"{LEDGER_ROWS} bundles known, peak RSS {results['big_ledger']['peak_rss_mb']:.0f} MiB",
            flush=True,
        )
    finally:
        if server is not None:
            server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(work, ignore_errors=True)

    paired = results["paired_ratios"]
    ratios: dict[str, float] = {
        "two_workers_vs_one": _median(paired["two_workers_vs_one"]),
        "one_worker_vs_shell_loop": results["shell_loop"]["scaled_wall_s"]
        / results["full_w1"]["wall_s"],
        "object_vs_full": _median(paired["object_vs_full"]),
        "ledger_share": results["ledger_writes"]["seconds"] / results["full_w2"]["wall_s"],
        "peak_rss_mb": results["big_ledger"]["peak_rss_mb"],
    }
    if "dask2_vs_one" in paired:
        ratios["dask2_vs_one"] = _median(paired["dask2_vs_one"])
    results["ratios"] = ratios
    results["targets"] = TARGETS
    results["targets_met"] = {
        k: (v < TARGETS[k] if k in ("ledger_share", "peak_rss_mb") else v >= TARGETS[k])
        for k, v in ratios.items()
        if k in TARGETS
    }
    return results


def print_table(r: dict[str, Any]) -> None:
    ratios, met = r["ratios"], r["targets_met"]
    print(
        f"\nfixity: {r['bundles']} bundles of {r['mean_bundle_bytes'] / 1e3:.0f} KB on a local "
        f"SeaweedFS, {os.cpu_count()} CPUs"
    )
    print(
        f"{'run':<28} {'wall s':>8} {'bundles/s':>10} {'MB/s':>8} {'RSS MiB':>8} "
        f"{'CPU s':>7} {'server s':>9} {'cores busy':>11}"
    )
    for name in ("full_w1", "full_w2", "full_dask2", "object_w2"):
        if name in r:
            x = r[name]
            print(
                f"{name:<28} {x['wall_s']:>8.2f} {x['bundles_per_s']:>10.1f} "
                f"{x['mb_per_s']:>8.1f} {x['peak_rss_mb']:>8.0f} "
                + (
                    # The cluster's workers are not fixity's children: their CPU is not in it.
                    f"{'':>7} {x['server_cpu_s']:>9.1f} {'':>11}"
                    if name == "full_dask2"
                    else f"{x['cpu_s']:>7.1f} {x['server_cpu_s']:>9.1f} {x['cores_busy']:>11.2f}"
                )
            )
    s = r["shell_loop"]
    print(
        f"{'verify loop (scaled)':<28} {s['scaled_wall_s']:>8.2f} {1 / s['per_bundle_s']:>10.1f} "
        f"{r['mean_bundle_bytes'] / 1e6 / s['per_bundle_s']:>8.1f}"
    )
    lw = r["ledger_writes"]
    print(f"ledger writes: {lw['writes_per_s']:.0f}/s in batches of {lw['batch']}")
    print(f"\n{'measure':<36} {'value':>10}  {'target':<10} result")
    rows = [
        ("2 local workers vs 1", "two_workers_vs_one", ">= 1.8x", "x"),
        ("1 worker vs verify shell loop", "one_worker_vs_shell_loop", ">= 5x", "x"),
        ("object vs full (2 workers)", "object_vs_full", ">= 2x", "x"),
        ("ledger share of wall (full, 2 w)", "ledger_share", "< 5%", "%"),
        ("peak RSS, 100,000-bundle ledger", "peak_rss_mb", "< 200 MiB", "MiB"),
    ]
    for label, key, target, unit in rows:
        v = ratios[key]
        shown = (
            f"{v * 100:.2f}%" if unit == "%" else f"{v:.0f} MiB" if unit == "MiB" else f"{v:.2f}x"
        )
        print(f"{label:<36} {shown:>10}  {target:<10} {'met' if met[key] else 'MISSED'}")
    if "dask2_vs_one" in ratios:
        print(f"{'Dask, 2 workers vs 1 local':<36} {ratios['dask2_vs_one']:>9.2f}x  (no target)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bundles", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="Alternating rounds (medians).")
    parser.add_argument("--json", action="store_true", help="Also print the figures as JSON.")
    args = parser.parse_args()
    results = run(args.bundles, rounds=args.rounds)
    print_table(results)
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
