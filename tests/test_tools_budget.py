"""`digest` and `canonicalize` within SPEC 5's bounds whatever the input: bytes are
digested as they stream (a file of any size in a megabyte of memory), a JSON document is
read to the bundle reader's 32 MiB cap and refused past it, a framed component streams
too. A 400 MB file took `digest` to 430 MB and `digest --canonical` to 1.25 GB."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import measure

from bundler.core.digests import framed_digest

CLI = [sys.executable, "-m", "bundler"]
SIZE = 400 * 1024 * 1024


def _sparse(tmp_path: Path) -> Path:
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(SIZE)
    return big


def test_bytes_and_framed_components_stream_within_budget(tmp_path: Path) -> None:
    big = _sparse(tmp_path)
    small = tmp_path / "small"
    small.write_bytes(b"x\n")
    zeros = hashlib.sha256()
    block = bytes(1 << 20)
    for _ in range(SIZE >> 20):
        zeros.update(block)
    run = measure.within_budget([*CLI, "digest", str(big)], "digest of 400 MB", 0)
    assert run.stdout.decode().strip() == "sha256:" + zeros.hexdigest()
    run = measure.within_budget(
        [*CLI, "digest", "--framed", "t", f"a={big}", f"b={small}"], "framed 400 MB", 0
    )
    # The reference, over the same components held whole (in this process, not the command).
    expected = framed_digest("t", [("a", bytes(SIZE)), ("b", b"x\n")])
    assert run.stdout.decode().strip() == expected


def test_a_json_document_past_the_cap_is_refused_within_budget(tmp_path: Path) -> None:
    big = _sparse(tmp_path)
    for cmd in (["digest", "--canonical", str(big)], ["canonicalize", str(big)]):
        run = measure.within_budget([*CLI, *cmd], " ".join(cmd[:2]), 3)
        assert run.stderr.count(b"\n") == 1 and b"33554432 bytes" in run.stderr, run.stderr
