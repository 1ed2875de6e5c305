"""`make bench`: export, verify and canonicalization against baselines in the same run.

A large synthetic store (one report, 20,000 cases over 4 checks, 20,000 examples, about
1 GB of inline payloads, half text-like and half random, a few SSO payloads) is made by
the fixture generator and cached under bench/.cache/. Each measurement runs several
times (median and range, wall clock; peak RSS from /usr/bin/time):

- export                    vs  tar -cf - <the same files> | zstd -<level> -T1 > file
- verify                    vs  zstd -dc ARCHIVE | openssl dgst -sha256  (decompress + hash floor)
- bagit.py --validate --processes 2 on the extracted bag, as a peer
- bench/bench_bare.py's bare Python exporter and walk, which check nothing, vs the same two
  baselines: the least any Python exporter or verifier on this stack costs (no target)
- canonical.dumps MB/s      vs  orjson.dumps
- audit                     vs  verify (when the audit command exists)
- with --fixity: fixity over --fixity-bundles stored bundles (bench/bench_fixity.py)

Each of these runs for each store shape (``--shape``, repeatable): ``1gb`` (the store
above), ``4gb`` (the same with 4 GB of payloads) and ``small-files`` (20,000 cases with
outputs of exponentially distributed size, 21.5 KB on average: about 430 MB in 25,000
files, as reports mostly look; export and verify have tighter targets there).

The package's bytecode is written first, as installing it would, so no timed run pays
for compiling sources. Prints a table of ratios and writes the same figures as JSON
(bench/results.json, or --json-out PATH). Machines here are noisy: compare ratios, not
seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / "bench" / ".cache"
BIN = str(Path(sys.executable).parent / "evalbook-bundle")
BARE = [sys.executable, str(REPO / "bench" / "bench_bare.py")]
EXPORTED_AT = "2026-11-30T00:00:00Z"
TIME = "/usr/bin/time"

TARGETS = {
    "export_vs_tar_zstd": 1.5,
    "verify_vs_floor": 1.5,
    "verify_vs_bagit": 1.0,
    "peak_rss_mb": 200,
    "canonical_vs_orjson": 0.6,
    "audit_vs_verify": 1.3,
    "node_vs_python_verify": 1.0,
}
# The stores measured: (cases, payload GB, size distribution, targets that differ).
# small-files is what reports mostly look like: many cases with small outputs
# (exponentially distributed, 21.5 KB on average: about 430 MB in 25,000 files).
SHAPES: dict[str, dict[str, Any]] = {
    "1gb": {"cases": 20_000, "payload_gb": 1.0, "sizes": "fixed", "targets": {}},
    "4gb": {"cases": 20_000, "payload_gb": 4.0, "sizes": "fixed", "targets": {}},
    "small-files": {
        "cases": 20_000,
        "payload_gb": 0.43,
        "sizes": "exponential",
        "targets": {"export_vs_tar_zstd": 1.2, "verify_vs_floor": 1.3},
    },
}


def timed(
    cmd: list[str] | str, *, shell: bool = False, cwd: Path | None = None
) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one run of ``cmd``."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        if shell:
            full = [TIME, "-f", "%M", "-o", out.name, "bash", "-o", "pipefail", "-c", str(cmd)]
        else:
            full = [TIME, "-f", "%M", "-o", out.name, *cmd]  # type: ignore[list-item]
        start = time.perf_counter()
        proc = subprocess.run(full, cwd=cwd, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"bench: {cmd!r} failed ({proc.returncode}): {proc.stderr[-2000:]}")
        rss_kb = int(out.read().strip().splitlines()[-1])
    return wall, rss_kb / 1024


def repeat(label: str, runs: int, fn: Any) -> dict[str, Any]:
    walls, rss = [], []
    for i in range(runs):
        wall, peak = fn(i)
        walls.append(wall)
        rss.append(peak)
        print(f"  {label} run {i + 1}/{runs}: {wall:.2f} s, peak RSS {peak:.0f} MiB", flush=True)
    return {
        "median_s": statistics.median(walls),
        "min_s": min(walls),
        "max_s": max(walls),
        "runs": walls,
        "peak_rss_mb": max(rss),
    }


def ensure_store(payload_gb: float, cases: int, sizes: str = "fixed") -> Path:
    suffix = "" if sizes == "fixed" else f"-{sizes}"
    root = CACHE / f"store-{cases}c-{payload_gb:g}gb{suffix}"
    done = root / ".complete"
    if done.exists():
        return root
    if root.exists():
        shutil.rmtree(root)
    print(
        f"generating the benchmark store ({cases} cases, {payload_gb:g} GB of payloads) ...",
        flush=True,
    )
    from bundler.testing.fixturegen import build_large_store

    start = time.perf_counter()
    build_large_store(
        root,
        cases=cases,
        checks=4,
        payload_bytes=int(payload_gb * 1e9),
        sso_payloads=3,
        sizes=sizes,
    )
    done.write_text("ok\n")
    print(f"  generated in {time.perf_counter() - start:.1f} s", flush=True)
    return root


def warm_cache(root: Path) -> None:
    """Read every file of the store once, so that neither the export nor its baseline
    pays for reading from disk (whichever ran first would, with one run)."""
    start = time.perf_counter()
    total = 0
    for directory, _, names in os.walk(root):
        for name in names:
            with open(os.path.join(directory, name), "rb") as fh:
                while chunk := fh.read(1 << 20):
                    total += len(chunk)
    print(
        f"  read {total / 1e9:.2f} GB of store files in {time.perf_counter() - start:.1f} s",
        flush=True,
    )


def store_files_of_bundle(bundle: dict[str, Any]) -> list[str]:
    """The store paths whose bytes the bundle holds, for the tar|zstd baseline."""
    rid = bundle["report"]["report_id"]
    files = [f"reports/{rid}/body.json", f"reports/{rid}/envelope.json"]
    suite = bundle["suite"]
    if suite["path"]:
        files.append(f"suites/{suite['suite_id']}/{suite['version']}.json")
    for s in bundle["scorers"]:
        base = f"scorers/{s['scorer_id']}/{s['version']}"
        files.append(f"{base}/scorer.json")
    for d in bundle["datasets"]:
        base = f"datasets/{d['dataset_id']}/{d['version']}"
        files.append(f"{base}/manifest.json")
        files += [f"{base}/examples/{e['example_id']}.json" for e in d["examples"] if e["path"]]
    for c in bundle["checks"]:
        if c["path"]:
            files.append(f"reports/{rid}/checks/{c['check_id']}.json")
        if c["cases"]["path"]:
            files.append(f"reports/{rid}/cases/{c['check_id']}.jsonl")
    files += [f"blobs/sha256/{p['digest'][7:]}" for p in bundle["payloads"]]
    return files


def measure_shape(name: str, shape: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Export, verify and audit of one store shape against their baselines."""
    print(
        f"shape {name}: {shape['cases']} cases, {shape['payload_gb']:g} GB, {shape['sizes']} sizes"
    )
    store = ensure_store(shape["payload_gb"], shape["cases"], shape["sizes"])
    warm_cache(store)
    work = Path(tempfile.mkdtemp(prefix="evalbook-bench-"))
    results: dict[str, Any] = {
        "params": {
            "shape": name,
            "payload_gb": shape["payload_gb"],
            "cases": shape["cases"],
            "sizes": shape["sizes"],
            "runs": args.runs,
            "level": args.level,
        },
    }
    try:
        print("export", flush=True)

        def export_once(i: int) -> tuple[float, float]:
            out = work / f"export-{i}.tar.zst"
            return timed(
                [
                    BIN,
                    "export",
                    "--store",
                    str(store),
                    "--report",
                    "rpt-large",
                    "--principal",
                    "alice",
                    "--exported-at",
                    EXPORTED_AT,
                    "--level",
                    str(args.level),
                    "--out",
                    str(out),
                    "--quiet",
                ]
            )

        results["export"] = repeat("export", args.runs, export_once)
        archive = work / "export-0.tar.zst"
        results["archive_bytes"] = archive.stat().st_size
        info = subprocess.run(
            [BIN, "inspect", str(archive), "--json"], capture_output=True, check=True
        )
        extracted = work / "bag"
        subprocess.run([BIN, "extract", str(archive), str(extracted), "--quiet"], check=True)
        bag = next(extracted.iterdir())
        bundle = json.loads((bag / "data" / "bundle.json").read_bytes())
        results["payload_bytes_in_bundle"] = sum(p["size"] for p in bundle["payloads"])
        file_list = work / "files.txt"
        file_list.write_text("\n".join(store_files_of_bundle(bundle)) + "\n")

        def baseline_once(i: int) -> tuple[float, float]:
            out = work / f"baseline-{i}.tar.zst"
            return timed(
                f"tar -C {store} -cf - -T {file_list} | zstd -{args.level} -T1 -q -o {out}",
                shell=True,
            )

        print("baseline: tar | zstd", flush=True)
        results["tar_zstd"] = repeat("tar|zstd", args.runs, baseline_once)
        print("bound: the bare Python exporter (bench/bench_bare.py pack)", flush=True)
        results["bound_pack"] = repeat(
            "bench_bare.py pack",
            args.runs,
            lambda i: timed(
                [
                    *BARE,
                    "pack",
                    str(store),
                    str(file_list),
                    str(work / "pack.zst"),
                    str(args.level),
                ]
            ),
        )

        print("verify", flush=True)
        results["verify"] = repeat(
            "verify", args.runs, lambda i: timed([BIN, "verify", str(archive), "--quiet"])
        )
        # The second verifier (SPEC 15): the Node command on the same archive, and on the
        # 1 GB shape the offline page in headless Chromium.
        import bench_js

        print("node js/verify-bundle.mjs", flush=True)
        results["node_verify"] = repeat(
            "node verify", args.runs, lambda i: timed(bench_js.node_command(archive))
        )
        if name in ("1gb", "4gb") and shutil.which("chromium"):
            print("page: js/dist/verify-bundle.html in headless Chromium", flush=True)
            results["page_verify"] = bench_js.page_verify(archive)
            print(f"  page: {results['page_verify']['mb_per_s']:.0f} MB/s", flush=True)
        # The floor hashes with OpenSSL, the SHA-256 that Python's hashlib (and so our
        # verifier) uses; coreutils' sha256sum is several times slower on some CPUs and
        # would make any verifier look fast.
        hasher = "openssl dgst -sha256" if shutil.which("openssl") else "sha256sum"
        results["floor_hasher"] = hasher
        print(f"floor: zstd -dc | {hasher}", flush=True)
        results["decompress_hash"] = repeat(
            f"zstd -dc|{hasher}",
            args.runs,
            lambda i: timed(f"zstd -dc {archive} | {hasher} > /dev/null", shell=True),
        )
        print("bound: the bare Python walk (bench/bench_bare.py walk)", flush=True)
        results["bound_walk"] = repeat(
            "bench_bare.py walk", args.runs, lambda i: timed([*BARE, "walk", str(archive)])
        )
        walked = subprocess.run(
            [*BARE, "walk", str(archive)], capture_output=True, text=True, check=True
        ).stdout.split()
        described = json.loads(info.stdout)
        if int(walked[0]) != described["files"]:
            raise SystemExit(
                f"bench: the bare walk found {walked[0]} files, inspect {described['files']}"
            )
        if not args.skip_bagit:
            bagit = str(Path(sys.executable).parent / "bagit.py")
            print("peer: bagit.py --validate --processes 2", flush=True)
            results["bagit_validate"] = repeat(
                "bagit.py",
                1,
                lambda i: timed(
                    [sys.executable, bagit, "--quiet", "--validate", "--processes", "2", str(bag)]
                ),
            )
        if (
            subprocess.run([BIN, "audit", "--help"], capture_output=True, check=False).returncode
            == 0
        ):
            print("audit", flush=True)
            results["audit"] = repeat(
                "audit", args.runs, lambda i: timed([BIN, "audit", str(archive)])
            )

    finally:
        shutil.rmtree(work, ignore_errors=True)

    targets = {**TARGETS, **shape["targets"]}
    ratios = {
        "export_vs_tar_zstd": results["export"]["median_s"] / results["tar_zstd"]["median_s"],
        "verify_vs_floor": results["verify"]["median_s"] / results["decompress_hash"]["median_s"],
        "peak_rss_mb": max(results["export"]["peak_rss_mb"], results["verify"]["peak_rss_mb"]),
    }
    ratios["node_vs_python_verify"] = (
        results["node_verify"]["median_s"] / results["verify"]["median_s"]
    )
    if "page_verify" in results:
        results["page_mb_per_s"] = results["page_verify"]["mb_per_s"]
    if "bagit_validate" in results:
        ratios["verify_vs_bagit"] = (
            results["verify"]["median_s"] / results["bagit_validate"]["median_s"]
        )
    if "audit" in results:
        ratios["audit_vs_verify"] = results["audit"]["median_s"] / results["verify"]["median_s"]
    # Not targets: how close any Python exporter or verifier on this stack could get.
    results["bounds"] = {
        "pack_vs_tar_zstd": results["bound_pack"]["median_s"] / results["tar_zstd"]["median_s"],
        "walk_vs_floor": results["bound_walk"]["median_s"] / results["decompress_hash"]["median_s"],
    }
    results["ratios"] = ratios
    results["targets"] = {k: targets[k] for k in ratios}
    results["targets_met"] = {
        key: (value < targets[key] if key == "verify_vs_bagit" else value <= targets[key])
        for key, value in ratios.items()
    }
    return results


def print_js_rows(r: dict[str, Any]) -> None:
    """The JavaScript verifier's rows (SPEC 15)."""
    node, py = r["node_verify"], r["verify"]
    ratio = r["ratios"]["node_vs_python_verify"]
    print(
        f"{'node verify vs verify':<30} {node['median_s']:>10.2f} s {py['median_s']:>14.2f} s "
        f"{ratio:>8.2f}x  <= 1.0x     {'met' if ratio <= 1.0 else 'MISSED'}"
    )
    print(f"{'peak RSS node verify':<30} {node['peak_rss_mb']:>10.0f} MiB")
    if "page_verify" in r:
        page = r["page_verify"]
        print(
            f"{'page in Chromium':<30} {page['mb_per_s']:>10.0f} MB/s ({page['seconds']:.1f} s), "
            f"peak RSS {page['peak_rss_mb']:.0f} MiB  >= 60 MB/s "
            f"{'met' if page['mb_per_s'] >= 60 else 'MISSED'}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--shape",
        action="append",
        choices=sorted(SHAPES),
        help="A store shape to measure (repeatable; default: 1gb and small-files).",
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--level", type=int, default=3)
    parser.add_argument("--json-out", type=Path, default=REPO / "bench" / "results.json")
    parser.add_argument("--skip-bagit", action="store_true")
    parser.add_argument(
        "--fixity", action="store_true", help="Also measure fixity (bench/bench_fixity.py)."
    )
    parser.add_argument("--fixity-bundles", type=int, default=1000)
    parser.add_argument(
        "--fixity-only", action="store_true", help="Measure fixity alone (implies --fixity)."
    )
    args = parser.parse_args()
    results: dict[str, Any] = {"machine": machine()}
    if args.fixity_only:
        results["fixity"] = fixity_part(args.fixity_bundles)
        args.json_out.write_text(json.dumps(results, indent=2) + "\n")
        print(f"\nfigures written to {args.json_out}")
        return
    for tool in ("zstd", "tar", "sha256sum", TIME):
        if shutil.which(tool) is None:
            raise SystemExit(f"bench: {tool} is needed (apt-get install zstd time)")
    compile_bytecode()
    results["shapes"] = {
        name: measure_shape(name, SHAPES[name], args)
        for name in (args.shape or ["1gb", "small-files"])
    }
    print("canonicalization", flush=True)
    sys.path.insert(0, str(REPO / "bench"))
    import bench_canonical

    canon = bench_canonical.run(size_mb=50, repeats=max(3, args.runs))
    ratio = canon["canonical_dumps_mb_per_s"] / canon["orjson_dumps_mb_per_s"]
    results["canonical"] = {
        **canon,
        "ratio": ratio,
        "target": TARGETS["canonical_vs_orjson"],
        "met": ratio >= TARGETS["canonical_vs_orjson"],
    }
    if args.fixity:
        results["fixity"] = fixity_part(args.fixity_bundles)
    args.json_out.write_text(json.dumps(results, indent=2) + "\n")
    for shape in results["shapes"].values():
        print_table(shape)
        print_js_rows(shape)
    c = results["canonical"]
    print(
        f"\n{'canonical.dumps vs orjson':<30} {c['canonical_dumps_mb_per_s']:>10.0f} MB/s "
        f"{c['orjson_dumps_mb_per_s']:>12.0f} MB/s {c['ratio']:>8.2f}x  >= 0.6x     "
        f"{'met' if c['met'] else 'MISSED'}"
    )
    if "fixity" in results:
        import bench_fixity

        bench_fixity.print_table(results["fixity"])
    print(f"\nfigures written to {args.json_out}")


def compile_bytecode() -> None:
    """Write the package's bytecode before timing anything, as installing it does.

    With PYTHONDONTWRITEBYTECODE set, every module changed since its bytecode was last
    written would otherwise be compiled again by every timed run (0.1 s a run after an
    edit to the archive and claim modules), which no installed copy pays.
    """
    import compileall

    import bundler

    compileall.compile_dir(Path(bundler.__file__).parent, quiet=1)


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def fixity_part(bundles: int) -> dict[str, Any]:
    """bench/bench_fixity.py over ``bundles`` stored bundles; prints its table."""
    print(f"fixity ({bundles} bundles on a local SeaweedFS)", flush=True)
    sys.path.insert(0, str(REPO / "bench"))
    import bench_fixity

    figures: dict[str, Any] = bench_fixity.run(bundles)
    bench_fixity.print_table(figures)
    return figures


def print_table(r: dict[str, Any]) -> None:
    def row(name: str, ours: str, base: str, ratio: float, target: str, met: bool) -> None:
        print(
            f"{name:<30} {ours:>14} {base:>16} {ratio:>8.2f}x  {target:<10} {'met' if met else 'MISSED'}"
        )

    ratios, met, targets = r["ratios"], r["targets_met"], r["targets"]
    gb = r["payload_bytes_in_bundle"] / 1e9
    print(
        f"\n{r['params']['shape']}: {r['params']['cases']} cases, {gb:.2f} GB of payloads "
        f"({r['params']['sizes']} sizes) in the bundle, zstd level {r['params']['level']}"
    )
    print(f"{'measure':<30} {'ours':>14} {'baseline':>16} {'ratio':>9}  {'target':<10} result")
    row(
        "export vs tar|zstd",
        f"{r['export']['median_s']:.2f} s",
        f"{r['tar_zstd']['median_s']:.2f} s",
        ratios["export_vs_tar_zstd"],
        f"<= {targets['export_vs_tar_zstd']}x",
        met["export_vs_tar_zstd"],
    )
    row(
        f"verify vs zstd -dc|{r.get('floor_hasher', 'sha256sum').split()[0]}",
        f"{r['verify']['median_s']:.2f} s",
        f"{r['decompress_hash']['median_s']:.2f} s",
        ratios["verify_vs_floor"],
        f"<= {targets['verify_vs_floor']}x",
        met["verify_vs_floor"],
    )
    bounds = r["bounds"]
    print(
        f"{'  bound: bare Python exporter':<30} {r['bound_pack']['median_s']:>12.2f} s "
        f"{r['tar_zstd']['median_s']:>14.2f} s {bounds['pack_vs_tar_zstd']:>8.2f}x  "
        "(checks nothing; no target)"
    )
    print(
        f"{'  bound: bare Python walk':<30} {r['bound_walk']['median_s']:>12.2f} s "
        f"{r['decompress_hash']['median_s']:>14.2f} s {bounds['walk_vs_floor']:>8.2f}x  "
        "(checks nothing; no target)"
    )
    if "verify_vs_bagit" in ratios:
        row(
            "verify vs bagit.py --validate",
            f"{r['verify']['median_s']:.2f} s",
            f"{r['bagit_validate']['median_s']:.2f} s",
            ratios["verify_vs_bagit"],
            "< 1x",
            met["verify_vs_bagit"],
        )
    if "audit_vs_verify" in ratios:
        row(
            "audit vs verify",
            f"{r['audit']['median_s']:.2f} s",
            f"{r['verify']['median_s']:.2f} s",
            ratios["audit_vs_verify"],
            "<= 1.3x",
            met["audit_vs_verify"],
        )
    print(
        f"{'peak RSS export / verify':<30} {r['export']['peak_rss_mb']:>10.0f} MiB {r['verify']['peak_rss_mb']:>12.0f} MiB"
        f" {'':>9}  {'<= 200 MiB':<10} {'met' if met['peak_rss_mb'] else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
