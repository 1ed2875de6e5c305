"""`make bench` (--import): importing an Inspect log of 20,000 samples and exporting it,
against reading the same log with Inspect's own ``read_eval_log``, in one run.

The log is built from the committed fixture log (fixtures/runners/inspect/logs): its
header, journal and one real sample serve as templates for 20,000 samples (ids
``s00000``.., one epoch, the fixture's first scorer only, so one case each, inputs and outputs varied, C and I alternating), written as
Inspect writes them: a zip of zstd members (method 93). Each sample is about as large
as the fixture's (9 KB of JSON with messages and events), so the log holds about 180 MB
of JSON in about 40 MB of file.

Measured, each once per run with /usr/bin/time (wall clock and peak RSS):

- ``evalbook-bundle import-inspect LOG --store S``  (target: peak RSS under 300 MB)
- ``evalbook-bundle export --store S --report R``    (target: peak RSS under 300 MB)
- ``python -c 'read_eval_log(LOG)'`` in the runner's virtualenv ($RUNNERS_VENV, or
  .venv-runners made by ``make runner-fixtures RUNNERS_VENV=.venv-runners``): the time
  any reader of this log pays; skipped, and said so, when no virtualenv has inspect_ai.

The ratio printed is import time / read_eval_log time.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

import zstandard

REPO = Path(__file__).resolve().parents[1]
BIN = str(Path(sys.executable).parent / "evalbook-bundle")
TIME = "/usr/bin/time"
SAMPLES = 20_000
PEAK_TARGET_MB = 300


def _template() -> dict[str, bytes]:
    sys.path.insert(0, str(REPO))
    from bundler.importers.runfile import open_run_file
    from bundler.importers.ziplog import ZipLog

    log = next((REPO / "fixtures" / "runners" / "inspect" / "logs").glob("*.eval"))
    f = open_run_file(log, role="log")
    try:
        z = ZipLog.open(f)
        return {name: z.read(name) for name in z.names()}
    finally:
        f.close()


def build_log(path: Path, samples: int = SAMPLES) -> None:
    """Write an Inspect log of ``samples`` samples (one epoch) at ``path``."""
    members = _template()
    header = json.loads(members["header.json"])
    sample = json.loads(members["samples/add-2_epoch_1.json"])
    # One scorer (the fixture's first): a case per sample and scorer, so 20,000 samples
    # are the contract's 20,000 cases (SPEC 4); with both of the fixture's scorers the
    # import would rightly refuse a report no export could write.
    kept = header["results"]["scores"][0]["name"]
    header["eval"]["scorers"] = [s for s in header["eval"]["scorers"] if s["name"] == kept]
    header["results"]["scores"] = header["results"]["scores"][:1]
    sample["scores"] = {kept: sample["scores"][kept]}
    reductions = [r for r in json.loads(members["reductions.json"]) if r["scorer"] == kept]
    ids = [f"s{i:05d}" for i in range(samples)]
    header["eval"]["dataset"].update(samples=samples, sample_ids=ids)
    header["eval"]["config"]["epochs"] = 1
    header["results"].update(total_samples=samples, completed_samples=samples)
    # C and I alternate, so each scorer's accuracy is what Inspect would compute.
    passed = (samples + 1) // 2
    accuracy = passed / samples
    stderr = (accuracy * (1 - accuracy) / (samples - 1)) ** 0.5 if samples > 1 else 0.0
    for score in header["results"]["scores"]:
        score["metrics"]["accuracy"]["value"] = accuracy
        score["metrics"]["stderr"]["value"] = stderr
        score.update(scored_samples=samples, unscored_samples=0)
    compressor = zstandard.ZstdCompressor(level=3)
    with path.open("wb") as out:
        central = bytearray()
        count = 0

        def add(name: str, data: bytes) -> None:
            nonlocal count
            raw = compressor.compress(data)
            crc = zlib.crc32(data)
            encoded = name.encode()
            offset = out.tell()
            out.write(
                struct.pack(
                    "<4sHHHHHIIIHH",
                    b"PK\x03\x04",
                    63,
                    0,
                    93,
                    0,
                    0x21,
                    crc,
                    len(raw),
                    len(data),
                    len(encoded),
                    0,
                )
                + encoded
                + raw
            )
            central.extend(
                struct.pack(
                    "<4sHHHHHHIIIHHHHHII",
                    b"PK\x01\x02",
                    63,
                    63,
                    0,
                    93,
                    0,
                    0x21,
                    crc,
                    len(raw),
                    len(data),
                    len(encoded),
                    0,
                    0,
                    0,
                    0,
                    0,
                    offset,
                )
                + encoded
            )
            count += 1

        add("_journal/start.json", members["_journal/start.json"])
        for i, sid in enumerate(ids):
            s = dict(sample)
            s["id"] = sid
            s["epoch"] = 1
            s["input"] = f"What is {i} + {i}? Answer with a number."
            s["target"] = str(2 * i)
            s["uuid"] = f"uuid-{sid}"
            s["scores"] = {
                k: dict(v, value="C" if i % 2 == 0 else "I") for k, v in sample["scores"].items()
            }
            s["output"] = dict(sample["output"], completion=str(2 * i + i % 2))
            add(f"samples/{sid}_epoch_1.json", json.dumps(s).encode())
        add("reductions.json", json.dumps(reductions).encode())
        add("header.json", json.dumps(header).encode())
        cd_offset = out.tell()
        out.write(central)
        out.write(
            struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, count, count, len(central), cd_offset, 0)
        )


def timed(cmd: list[str], cwd: Path) -> dict[str, Any]:
    """Wall clock and peak RSS of ``cmd`` (GNU time's %e and %M)."""
    fmt = "%e %M"
    proc = subprocess.run(
        [TIME, "-f", fmt, *cmd], cwd=cwd, capture_output=True, text=True, check=False
    )
    last = proc.stderr.strip().splitlines()[-1].split()
    if proc.returncode != 0:
        raise SystemExit(f"bench: {' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr}")
    return {"seconds": float(last[0]), "peak_rss_mb": int(last[1]) / 1024, "stdout": proc.stdout}


def runner_python() -> str | None:
    for venv in (os.environ.get("RUNNERS_VENV"), str(REPO / ".venv-runners")):
        if venv and Path(venv, "bin", "python").is_file():
            probe = subprocess.run(
                [f"{venv}/bin/python", "-c", "import inspect_ai"], capture_output=True, check=False
            )
            if probe.returncode == 0:
                return f"{venv}/bin/python"
    return None


def run(samples: int = SAMPLES) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp_name:
        tmp = Path(tmp_name)
        log = tmp / "big.eval"
        build_log(log, samples)
        figures: dict[str, Any] = {"samples": samples, "log_bytes": log.stat().st_size}
        imported = timed(
            [BIN, "import-inspect", str(log), "--store", "store", "--principal", "alice", "--json"],
            tmp,
        )
        report_id = json.loads(imported.pop("stdout"))["report_id"]
        figures["import"] = imported
        exported = timed(
            [
                BIN,
                "export",
                "--store",
                "store",
                "--report",
                report_id,
                "--principal",
                "alice",
                "--exported-at",
                "2030-01-01T00:00:00Z",
                "--out",
                "big.tar.zst",
                "--quiet",
            ],
            tmp,
        )
        exported.pop("stdout")
        figures["export"] = exported
        figures["bundle_bytes"] = (tmp / "big.tar.zst").stat().st_size
        python = runner_python()
        if python is None:
            figures["read_eval_log"] = None
        else:
            baseline = timed(
                [
                    python,
                    "-c",
                    "import sys; from inspect_ai.log import "
                    "read_eval_log; log = read_eval_log(sys.argv[1]); "
                    "print(len(log.samples))",
                    str(log),
                ],
                tmp,
            )
            assert baseline.pop("stdout").strip() == str(samples)
            figures["read_eval_log"] = baseline
        shutil.rmtree(tmp / "store", ignore_errors=True)
    return figures


def print_table(f: dict[str, Any]) -> None:
    print(
        f"\nimport of an Inspect log: {f['samples']} samples, {f['log_bytes'] / 1e6:.0f} MB log, "
        f"{f['bundle_bytes'] / 1e6:.0f} MB bundle"
    )
    for name in ("import", "export"):
        r = f[name]
        met = "met" if r["peak_rss_mb"] < PEAK_TARGET_MB else "MISSED"
        print(
            f"  {name:<28} {r['seconds']:>7.1f} s  peak {r['peak_rss_mb']:>6.0f} MB  "
            f"(< {PEAK_TARGET_MB} MB: {met})"
        )
    base = f["read_eval_log"]
    if base is None:
        print(
            "  read_eval_log                 not measured: no virtualenv with inspect_ai "
            "(RUNNERS_VENV)"
        )
    else:
        print(
            f"  {'inspect read_eval_log':<28} {base['seconds']:>7.1f} s  peak "
            f"{base['peak_rss_mb']:>6.0f} MB"
        )
        print(
            f"  import / read_eval_log       {f['import']['seconds'] / base['seconds']:>7.2f}x time, "
            f"{f['import']['peak_rss_mb'] / base['peak_rss_mb']:.2f}x memory"
        )


if __name__ == "__main__":
    result = run(int(sys.argv[1]) if len(sys.argv) > 1 else SAMPLES)
    print_table(result)
    print(json.dumps(result, indent=2))
