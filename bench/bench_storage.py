"""What the integrity checks of ``bundler.storage`` cost against plain boto3 transfers.

Starts a local SeaweedFS server (as the tests do), writes a random (incompressible,
like a zstd archive) file, then times, in the same run and against the same server:

- ``upload_bundle`` (hash pass, checksummed conditional upload, confirming HEAD)
  against boto3's ``upload_file``;
- ``download_bundle`` (hash while writing, fsync, link into place) against boto3's
  ``download_file``.

Each is repeated (median of 3 by default) and reported in MB/s with the ratio of wall
times (target: our checks add under 15%). ``run(size_mb=500) -> dict`` is importable;
``python bench/bench_storage.py --size-mb 100 --json`` prints the dict as JSON.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from s3_server import start_server

from bundler import storage

MB = 1_000_000
SETTLE_S = 1.5
_WRITE_CHUNK = 8 * 1024 * 1024


def _write_random(path: Path, size: int) -> None:
    with open(path, "wb") as fh:
        left = size
        while left:
            n = min(_WRITE_CHUNK, left)
            fh.write(os.urandom(n))
            left -= n


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _digest(tag: str) -> str:
    return "sha256:" + hashlib.sha256(tag.encode()).hexdigest()


def run(size_mb: int = 500, *, repeats: int = 3, workdir: Path | None = None) -> dict[str, Any]:
    """Benchmark a ``size_mb`` MB file; return times, MB/s and ratios (ours / boto3)."""
    base = Path(tempfile.mkdtemp(prefix="bench-storage-", dir=workdir))
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    os.environ["AWS_ACCESS_KEY_ID"] = "bench-" + secrets.token_hex(4)
    os.environ["AWS_SECRET_ACCESS_KEY"] = secrets.token_hex(20)
    server = None
    try:
        server = start_server(base / "server")
        config = storage.StorageConfig(endpoint_url=server.endpoint)
        plain = boto3.client(
            "s3",
            endpoint_url=server.endpoint,
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}),
        )
        bucket = "bench"
        plain.create_bucket(Bucket=bucket)
        size = size_mb * MB
        load_before = list(os.getloadavg())
        source = base / "archive.tar.zst"
        _write_random(source, size)
        out = base / "out"
        out.mkdir()

        times: dict[str, list[float]] = {
            "ours_upload": [],
            "boto3_upload": [],
            "ours_download": [],
            "boto3_download": [],
        }
        for i in range(repeats):
            tag = f"run{i}"
            ours_dest = out / f"ours-{tag}.tar.zst"
            plain_dest = out / f"plain-{tag}.tar.zst"
            plain_key = f"plain/{tag}.tar.zst"
            ours_key = storage.bundle_key(tag, "bench", _digest(tag))

            steps: list[tuple[str, Callable[[], object]]] = [
                (
                    "ours_upload",
                    functools.partial(
                        storage.upload_bundle,
                        source,
                        storage.S3Location(bucket, tag),
                        bundle_digest=_digest(tag),
                        report_id="bench",
                        report_digest=_digest("report"),
                        config=config,
                    ),
                ),
                (
                    "boto3_upload",
                    functools.partial(plain.upload_file, str(source), bucket, plain_key),
                ),
                (
                    "ours_download",
                    functools.partial(
                        storage.download_bundle,
                        storage.S3Location(bucket, ours_key),
                        ours_dest,
                        config=config,
                    ),
                ),
                (
                    "boto3_download",
                    functools.partial(plain.download_file, bucket, plain_key, str(plain_dest)),
                ),
            ]
            # Alternate who goes first, so neither side always meets a server still
            # busy with the other's writes.
            if i % 2:
                steps = [steps[1], steps[0], steps[3], steps[2]]
            for name, action in steps:
                # The server keeps working for a moment after a large write; let it
                # settle so no step pays for the one before it.
                time.sleep(SETTLE_S)
                times[name].append(_timed(action))
            for path in (ours_dest, plain_dest):
                if path.stat().st_size != size:
                    raise RuntimeError(f"{path}: wrong size after download")
                path.unlink()
            for key in (ours_key, plain_key):
                plain.delete_object(Bucket=bucket, Key=key)

        medians = {name: statistics.median(values) for name, values in times.items()}
        return {
            "size_mb": size_mb,
            "repeats": repeats,
            "seconds": times,
            "median_seconds": medians,
            "mb_per_s": {name: size / MB / secs for name, secs in medians.items()},
            "ratio_upload": medians["ours_upload"] / medians["boto3_upload"],
            "ratio_download": medians["ours_download"] / medians["boto3_download"],
            "full_object_checksum": storage.checksums._full_object_crc().name,
            "load_average_before": load_before,
            "load_average_after": list(os.getloadavg()),
            "config": {
                "multipart_threshold": config.multipart_threshold,
                "part_size": config.part_size,
                "max_concurrency": config.max_concurrency,
            },
        }
    finally:
        if server is not None:
            server.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(base, ignore_errors=True)


def _print_table(result: dict[str, Any]) -> None:
    rate = result["mb_per_s"]
    secs = result["median_seconds"]
    print(
        f"{result['size_mb']} MB, median of {result['repeats']} "
        f"(full-object checksum {result['full_object_checksum']})"
    )
    for op in ("upload", "download"):
        ours, plain = f"ours_{op}", f"boto3_{op}"
        ratio = result[f"ratio_{op}"]
        print(
            f"  {op:8}  ours {rate[ours]:7.1f} MB/s ({secs[ours]:.2f} s)   "
            f"boto3 {rate[plain]:7.1f} MB/s ({secs[plain]:.2f} s)   "
            f"ratio {ratio:.2f} ({(ratio - 1) * 100:+.0f}% wall time)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    result = run(args.size_mb, repeats=args.repeats)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print_table(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
