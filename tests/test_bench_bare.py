"""bench/bench_bare.py does the work its bound claims: every member found and hashed,
every file read, tarred and compressed, so that `make bench`'s bound rows measure it."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
from pathlib import Path

import zstandard

from bundler.archive.bag_reader import open_members

BARE = Path(__file__).resolve().parents[1] / "bench" / "bench_bare.py"


def test_walk_finds_every_file_and_hashes_the_archive(bundles: dict[str, Path]) -> None:
    for archive in (bundles["rpt-clean/alice"], bundles["rpt-every-reason/bob"]):
        proc = subprocess.run(
            [sys.executable, str(BARE), "walk", str(archive)],
            capture_output=True,
            text=True,
            check=True,
        )
        files, digest = proc.stdout.split()
        regular = sum(1 for member, _ in open_members(str(archive)) if not member.is_dir)
        assert int(files) == regular
        assert digest == hashlib.sha256(archive.read_bytes()).hexdigest()


def test_pack_writes_a_tar_of_every_listed_file(fixture_store: Path, tmp_path: Path) -> None:
    names = sorted(
        str(p.relative_to(fixture_store)) for p in fixture_store.rglob("*.json") if p.is_file()
    )
    listing = tmp_path / "files.txt"
    listing.write_text("\n".join(names) + "\n")
    out = tmp_path / "bare.tar.zst"
    proc = subprocess.run(
        [sys.executable, str(BARE), "pack", str(fixture_store), str(listing), str(out), "3"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(proc.stdout) == len(names)
    raw = zstandard.ZstdDecompressor().decompressobj().decompress(out.read_bytes())
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
        members = tar.getmembers()
        assert [m.name for m in members] == names
        for member in members:
            extracted = tar.extractfile(member)
            assert extracted is not None
            assert extracted.read() == (fixture_store / member.name).read_bytes()


def test_wrong_arguments_get_the_usage_line() -> None:
    proc = subprocess.run(
        [sys.executable, str(BARE), "walk"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == "usage: bench_bare.py walk ARCHIVE | pack STORE LIST OUT LEVEL"
