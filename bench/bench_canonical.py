"""Throughput of canonical.dumps beside orjson.dumps on a large realistic document.

The document is deterministic (seeded) and shaped like the data the bundler handles.
By bytes: about 45% evaluation cases (ids, digests, statuses, nested example, output
and evidence objects, integers, booleans, scores that are floats, integral floats such
as 0.0 and 1.0, integers or null, latencies, free text with non-ASCII characters and
escapes), 20% a file manifest (path, digest, size, kind) and 35% dataset examples
(prompt and answer text, temperature 0.0, metadata). About 40 bytes of JCS per value.

The three serialisers are timed in turn within each repeat, so that a change of load
on a shared machine affects them alike; medians are reported.

    python bench/bench_canonical.py            # human-readable summary
    python bench/bench_canonical.py --json     # the result dict as JSON
    python bench/bench_canonical.py --size-mb 10 --repeats 3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bundler.core import canonical

_WORDS = [
    "the",
    "model",
    "answer",
    "is",
    "correct",
    "because",
    "reference",
    "matches",
    "score",
    "judge",
    "résumé",
    "naïve",
    "日本語",
    "данные",
    "Ωmega",
    "emoji 😀",
    "“quoted”",
    'say "hi"',
    "tab\there",
    "line\nbreak",
    "path\\to",
    "ok",
    "fails",
    "partial",
]
_STATUSES = ["pass", "fail", "error", "timeout", "skipped", "abstained", "inconclusive"]
_ASSURANCE = ["reported", "independently_observed", "platform_verified"]


def _digest(seed: int, salt: str) -> str:
    return "sha256:" + hashlib.sha256(f"{salt}:{seed}".encode()).hexdigest()


def _case(rng: random.Random, index: int) -> dict[str, Any]:
    text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 60)))
    roll = rng.random()
    score: float | int | None
    if roll < 0.45:
        score = rng.random()
    elif roll < 0.65:
        score = rng.choice([0.0, 1.0])
    elif roll < 0.85:
        score = rng.randint(0, 1)
    else:
        score = None
    evidence = [
        {
            "kind": rng.choice(["output", "trace", "artifact"]),
            "digest": _digest(index * 7 + j, "evidence"),
            "size": rng.randint(1, 262_144),
            "location": "inline",
        }
        for j in range(rng.randint(0, 3))
    ]
    return {
        "case_id": f"case-{index:08d}",
        "check_id": f"check-{index % 37:03d}",
        "example": {
            "dataset_id": "qa-core",
            "version": 3,
            "example_id": f"ex-{index % 5000:06d}",
        },
        "repeat": 1 + index % 3,
        "status": rng.choice(_STATUSES),
        "score": score,
        "assurance": rng.choice(_ASSURANCE),
        "output": {
            "kind": "output",
            "digest": _digest(index, "output"),
            "size": rng.randint(10, 262_144),
            "location": "inline",
        },
        "evidence": evidence,
        "observations": [
            {
                "explanation": text,
                "tokens": rng.randint(1, 8192),
                "latency_ms": round(rng.uniform(0.5, 9000.0), 3),
                "passed": rng.random() < 0.7,
            }
        ],
    }


def _manifest_entry(rng: random.Random, index: int) -> dict[str, Any]:
    hexdigest = hashlib.sha256(f"blob:{index}".encode()).hexdigest()
    return {
        "path": f"data/blobs/sha256/{hexdigest}",
        "digest": "sha256:" + hexdigest,
        "size": rng.randint(1, 262_144),
        "kind": rng.choice(["output", "trace", "artifact"]),
    }


def _example(rng: random.Random, index: int) -> dict[str, Any]:
    prompt = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(20, 200)))
    answer = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 40)))
    return {
        "example_id": f"ex-{index:06d}",
        "input": {"prompt": prompt, "system": "Answer briefly.", "temperature": 0.0},
        "expected": {"answer": answer, "aliases": [answer.upper()[:20]]},
        "metadata": {
            "difficulty": round(rng.random(), 2),
            "source": rng.choice(["curated", "synthetic", "user"]),
            "tokens": rng.randint(10, 4000),
            "tags": rng.sample(["math", "code", "qa", "safety", "long", "multilingual"], 2),
        },
    }


def build_document(size_mb: int = 50, seed: int = 8785) -> dict[str, Any]:
    """A deterministic document of about ``size_mb`` MB (10^6 bytes) of JCS output.

    By bytes, about 45% evaluation cases, 20% a file manifest (path, digest, size) and
    35% dataset examples (prompt and answer text, metadata).
    """
    rng = random.Random(seed)
    target = size_mb * 1_000_000
    parts: dict[str, list[dict[str, Any]]] = {"cases": [], "files": [], "examples": []}
    makers = {"cases": _case, "files": _manifest_entry, "examples": _example}
    shares = {"cases": 0.45, "files": 0.20, "examples": 0.35}
    for name, share in shares.items():
        size = 0
        while size < target * share:
            item = makers[name](rng, len(parts[name]))
            parts[name].append(item)
            size += len(orjson.dumps(item)) + 1
    return {
        "schema": "evalbook.bench.v1",
        "report": {"report_id": "rep-0001", "digest": _digest(0, "report"), "alpha": 0.05},
        **parts,
    }


def _count_values(value: Any) -> int:
    if isinstance(value, dict):
        return len(value) + sum(_count_values(v) for v in value.values())
    if isinstance(value, list):
        return len(value) + sum(_count_values(v) for v in value)
    return 0


def run(size_mb: int = 50, repeats: int = 5) -> dict[str, Any]:
    """Time canonical.dumps and orjson.dumps (median of ``repeats``) on one document.

    Wall-clock figures are the headline; CPU-time figures are given too because on a
    shared machine other processes stretch wall-clock time.
    """
    document = build_document(size_mb)
    size = len(canonical.dumps(document))
    contenders: dict[str, Callable[[], object]] = {
        "canonical": lambda: canonical.dumps(document),
        "orjson": lambda: orjson.dumps(document),
        "orjson_sorted": lambda: orjson.dumps(document, option=orjson.OPT_SORT_KEYS),
    }
    wall: dict[str, list[float]] = {name: [] for name in contenders}
    cpu: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            start_wall, start_cpu = time.perf_counter(), time.process_time()
            fn()
            wall[name].append(time.perf_counter() - start_wall)
            cpu[name].append(time.process_time() - start_cpu)
    values = _count_values(document)
    result: dict[str, Any] = {
        "document_bytes": size,
        "document_values": values,
        "bytes_per_value": round(size / values, 1),
        "repeats": repeats,
    }
    for name in contenders:
        wall_s, cpu_s = statistics.median(wall[name]), statistics.median(cpu[name])
        result[f"{name}_dumps_seconds"] = round(wall_s, 4)
        result[f"{name}_dumps_mb_per_s"] = round(size / wall_s / 1e6, 1)
        result[f"{name}_dumps_cpu_seconds"] = round(cpu_s, 4)
        result[f"{name}_dumps_cpu_mb_per_s"] = round(size / cpu_s / 1e6, 1)
    result["canonical_over_orjson_time_ratio"] = round(
        result["canonical_dumps_seconds"] / result["orjson_dumps_seconds"], 2
    )
    result["canonical_over_orjson_cpu_ratio"] = round(
        result["canonical_dumps_cpu_seconds"] / result["orjson_dumps_cpu_seconds"], 2
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the result dict as JSON")
    args = parser.parse_args(argv)
    result = run(args.size_mb, args.repeats)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
        return 0
    print(
        f"document: {result['document_bytes'] / 1e6:.1f} MB, "
        f"{result['bytes_per_value']} bytes per value, median of {args.repeats}"
    )
    for name, label in [
        ("canonical", "canonical.dumps"),
        ("orjson", "orjson.dumps"),
        ("orjson_sorted", "orjson sorted"),
    ]:
        print(
            f"{label:16} {result[f'{name}_dumps_mb_per_s']:8.1f} MB/s "
            f"({result[f'{name}_dumps_seconds']:.3f} s wall; "
            f"{result[f'{name}_dumps_cpu_mb_per_s']:.1f} MB/s of CPU time)"
        )
    print(
        f"time ratio canonical/orjson: {result['canonical_over_orjson_time_ratio']:.2f} wall, "
        f"{result['canonical_over_orjson_cpu_ratio']:.2f} CPU"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
