"""As many failed claims as a bundle can give, within SPEC 5's bounds, in every writer of
the verification record (SPEC 5, 7, 15).

A real bundle with 61,000 empty files of 540-byte names added under data/ (in no
manifest, named by nothing) is a 140 KB archive within every cap of both readers, and
gives 122,001 failed claims with long subjects: a record of about 100 MB of JSON. Both
verifiers, each way they write the record (the human summary, ``--json``, Python's
``--output-dir``), must say failed (exit 1) under 300 MB of memory and 10 s of CPU, and
the record they write must hold every claim.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import hostile
import measure
import pytest

ROOT = Path(__file__).resolve().parent.parent
BUDGET_BYTES = measure.BUDGET_BYTES
BUDGET_SECONDS = measure.BUDGET_SECONDS
NAMES = 61_000
FAILED = 2 * NAMES + 1  # each name twice (BagIt's listing, the bundle's), and the oxum


@pytest.fixture(scope="module")
def many(bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("many-failed") / "many.tar.zst"
    return hostile.unlisted_members_bundle(bundles["rpt-clean/alice"], out, NAMES, 540)


# Names that cost each writer most: '"' is two bytes in JSON, a CJK character three in
# UTF-8 and takes every text through the escaping of non-ASCII (a walk a character at a
# time took Python's verification.md to 14 s), and Markdown's specials are each escaped
# in verification.md (a replacement run as Python code for each: 60 s).
FILLS = {"quotes": '"', "cjk": "\u6f22", "markdown": "*_[]()|<>&"}


@pytest.fixture(scope="module", params=sorted(FILLS))
def many_filled(
    request: pytest.FixtureRequest,
    bundles: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    out = tmp_path_factory.mktemp("many-filled") / f"{request.param}.tar.zst"
    return hostile.unlisted_members_bundle(
        bundles["rpt-clean/alice"], out, NAMES, 540, fill=FILLS[request.param]
    )


PYTHON = [sys.executable, "-m", "bundler", "verify"]
NODE = ["node", str(ROOT / "js" / "verify-bundle.mjs")]
WAYS = {
    "python summary": (PYTHON, []),
    "python --json": (PYTHON, ["--json"]),
    "python --output-dir": (PYTHON, ["--output-dir", "{out}", "-q"]),
    "node summary": (NODE, []),
    "node --json": (NODE, ["--json"]),
}


@pytest.mark.parametrize("way", sorted(WAYS))
def test_every_record_writer_stays_within_budget(many: Path, way: str, tmp_path: Path) -> None:
    _within_budget(many, way, tmp_path)


@pytest.mark.parametrize("way", ["python --output-dir", "node --json"])
def test_the_costliest_names_stay_within_budget(many_filled: Path, way: str, tmp_path: Path) -> None:
    _within_budget(many_filled, way, tmp_path)


def _within_budget(many: Path, way: str, tmp_path: Path, failed: int = FAILED) -> None:
    command, options = WAYS[way]
    out = tmp_path / "out"
    args = [o.replace("{out}", str(out)) for o in options]
    run = measure.within_budget([*command, str(many), *args], way, 1)
    if "--json" in way:
        record = json.loads(run.stdout)
        assert record["counts"]["failed"] == failed == len(
            [c for c in record["claims"] if c["state"] == "failed"]
        )
        assert record["exit_code"] == 1
    elif "--output-dir" in way:
        record = json.loads((out / "verification.json").read_bytes())
        assert len(record["claims"]) == record["counts"]["proven"] + failed
        markdown = (out / "verification.md").read_text()
        assert markdown.count(" | failed | ") == failed  # one table row each
    else:
        assert b"FAILED" in run.stdout


@pytest.mark.parametrize("options", [[], ["--json"]], ids=["summary", "json"])
def test_node_gives_back_each_bundle_before_the_next(
    many: Path, options: list[str], tmp_path: Path
) -> None:
    """Several such bundles in one run stay within the bound of one: each bundle's memory
    is collected before the next is read (one collection too early kept 75 MB of the
    last record: two bundles peaked at 327 MB)."""
    copies = []
    for i in range(2):
        copy = tmp_path / f"many{i}.tar.zst"
        copy.write_bytes(many.read_bytes())
        copies.append(str(copy))
    run = measure.spawn_measured([*NODE, *copies, *options], deadline=180)
    detail = f"exit {run.code}, peak {run.peak_bytes // 2**20} MiB: {run.stderr[-300:]!r}"
    assert run.code == 1 and not run.killed, detail
    assert run.peak_bytes < BUDGET_BYTES, detail
    if options:
        lines = run.stdout.splitlines()
        assert len(lines) == 2 and all(json.loads(x)["counts"]["failed"] == FAILED for x in lines)
    else:
        assert run.stdout.count(b"Verdict:     FAILED") == 2
        assert run.stdout.count(b"... and 121951 more (see --json)") == 2


@pytest.mark.parametrize("command", [PYTHON, NODE], ids=["python", "node"])
def test_a_slow_reader_of_the_output_costs_no_memory(
    many: Path, command: list[str], tmp_path: Path
) -> None:
    """The record goes to a pipe as its reader takes it, never queued in memory (Node
    queues a stream's writes to a pipe: a reader that waited took it to 800 MB)."""
    out = tmp_path / "taken"
    script = f'{" ".join(map(repr, command))} {str(many)!r} --json | (sleep 3; cat > {str(out)!r})'
    run = measure.spawn_measured(["sh", "-c", script], deadline=180)
    detail = f"exit {run.code}, peak {run.peak_bytes // 2**20} MiB: {run.stderr[-300:]!r}"
    assert run.code == 0 and not run.killed, detail  # the shell's: cat's
    assert run.peak_bytes < BUDGET_BYTES, detail
    assert json.loads(out.read_bytes())["counts"]["failed"] == FAILED


@pytest.fixture(scope="module")
def long_names(bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8,000 names of about 4 KB (16 directories deep) of Markdown's specials."""
    out = tmp_path_factory.mktemp("long-names") / "long.tar.zst"
    return hostile.unlisted_members_bundle(
        bundles["rpt-clean/alice"], out, 8000, 4096, fill=FILLS["markdown"], depth=16
    )


@pytest.mark.parametrize("shape", ["many", "long"])
def test_the_page_of_such_a_record_is_written_within_budget(
    many_filled: Path, long_names: Path, shape: str, tmp_path: Path
) -> None:
    """`render --html` of the record a verifier wrote (the page lists 1,000 claims; the
    record's claims are walked in runs bounded by bytes: unbounded, a run of 1,000 long
    items was matched and refused for each item in turn, 60 s)."""
    bundle = many_filled if shape == "many" else long_names
    record = tmp_path / "record.json"
    done = measure.spawn_measured([*PYTHON, str(bundle), "--json"], deadline=120)
    assert done.code == 1, done.stderr[-300:]
    record.write_bytes(done.stdout)
    page = tmp_path / "page.html"
    run = measure.spawn_measured(
        [sys.executable, "-m", "bundler", "render", str(record), "--html", str(page), "-q"],
        deadline=120,
    )
    detail = f"exit {run.code}, {run.cpu:.1f} s CPU, peak {run.peak_bytes // 2**20} MiB"
    assert run.code == 0 and not run.killed, detail + run.stderr[-300:].decode(errors="replace")
    assert run.peak_bytes < BUDGET_BYTES and run.cpu < BUDGET_SECONDS, detail
    assert page.stat().st_size > 0


def test_long_names_of_markdown_specials_stay_within_budget(long_names: Path, tmp_path: Path) -> None:
    _within_budget(long_names, "python --output-dir", tmp_path, failed=16_001)
