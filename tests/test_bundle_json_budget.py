"""A bundle.json as large as its cap allows, schema-valid, within SPEC 5's bounds in both
verifiers (SPEC 5, 15).

bundle.json is the one document a verifier must read whole before it can say anything,
and the reader admits it up to 32 MiB: 150,000 listed items from a 330 KB archive, or
1,500 listed examples whose refs and details are long strings outside Latin-1 (two bytes
a character in V8) from a 21 KB one. Each such bundle says failed (exit 1) in both
verifiers, under 300 MB of memory and 10 s of CPU, with the same counts; stored canonical
(the native reader's path) and not (the strict reader's, whose strings are escapes).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import hostile
import measure
import pytest

ROOT = Path(__file__).resolve().parent.parent

# name -> (shape, count, options of hostile.full_bundle_json)
SHAPES = {
    "outputs": ("outputs", 150_000, {}),
    "outputs, not canonical": ("outputs", 140_000, {"canonical": False}),
    "details of quotes": ("details", 1_500, {"lead": "\u0100"}),
    "details of quotes, not canonical": ("details", 1_500, {"lead": "\u0100", "canonical": False}),
    "details of CJK": ("details", 1_000, {"lead": "\u0100", "fill": "\u6f22"}),
    "payloads": ("payloads", 150_000, {}),
}
WAYS = {
    "python summary": [sys.executable, "-m", "bundler", "verify"],
    "python --json": [sys.executable, "-m", "bundler", "verify", "--json"],
    "node summary": ["node", str(ROOT / "js" / "verify-bundle.mjs")],
    "node --json": ["node", str(ROOT / "js" / "verify-bundle.mjs"), "--json"],
}


def _built(bundles: dict[str, Path], out: Path, specs: dict[str, tuple]) -> dict[str, Path]:
    """hostile.full_bundle_json of each (shape, count, options), by name."""
    made = {}
    for i, (name, (shape, count, options)) in enumerate(specs.items()):
        made[name] = out / f"{i}.tar.zst"
        hostile.full_bundle_json(bundles["rpt-clean/alice"], made[name], shape, count, **options)
    return made


@pytest.fixture(scope="module")
def full(bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _built(bundles, tmp_path_factory.mktemp("full-bundle-json"), SHAPES)


@pytest.mark.parametrize("way", sorted(WAYS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_full_bundle_json_stays_within_budget(
    full: dict[str, Path], shape: str, way: str
) -> None:
    run = measure.within_budget([*WAYS[way], str(full[shape])], f"{shape}, {way}", 1)
    if "--json" in way:
        counts = json.loads(run.stdout)["counts"]
        listed = SHAPES[shape][1] * (2 if SHAPES[shape][0] == "payloads" else 1)
        assert counts["failed"] >= listed, counts


# A bundle.json that breaks its schema in one listed entry of 150,000 (the last), or in
# every one: no verdict possible, said within the bounds. Python's explanation of the
# rejection walked every entry with the reference validator first: 20 to 32 s.
BROKEN = {
    "last entry": ("outputs", 150_000, {"bad": "last"}),
    "every entry": ("outputs", 150_000, {"bad": "all"}),
}


@pytest.fixture(scope="module")
def broken(bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _built(bundles, tmp_path_factory.mktemp("broken-bundle-json"), BROKEN)


@pytest.mark.parametrize("way", sorted(WAYS))
@pytest.mark.parametrize("which", list(BROKEN))
def test_a_schema_break_among_many_entries_is_named_within_budget(
    broken: dict[str, Path], which: str, way: str
) -> None:
    run = measure.within_budget([*WAYS[way], str(broken[which])], f"{which}, {way}", 3)
    stderr = run.stderr.decode(errors="replace")
    detail = f"{which}, {way}: {stderr[-300:]}"
    # The reason, naming the entry, in the record (--json) or the summary; never a trace.
    said = run.stdout.decode(errors="replace") + stderr
    assert "malformed bundle.json" in said and "/unavailable/" in said.replace(
        "$.unavailable[", "/unavailable/"
    ), detail
    assert "Traceback" not in said and len(stderr.strip().splitlines()) <= 1, detail


@pytest.mark.parametrize("shape", list(SHAPES))
def test_both_verifiers_give_the_same_claims(full: dict[str, Path], shape: str) -> None:
    records = []
    for way in ("python --json", "node --json"):
        run = measure.spawn_measured([*WAYS[way], str(full[shape])], deadline=120)
        assert run.code == 1, f"{shape}, {way}: exit {run.code}"
        records.append(json.loads(run.stdout))
    python, node = records
    assert python["counts"] == node["counts"]
    assert python["bundle_digest"] == node["bundle_digest"]

    def failed(record: dict) -> list[tuple]:
        return sorted(
            (c["subject"], c["path"], c["detail"])
            for c in record["claims"]
            if c["state"] == "failed"
        )

    assert failed(python) == failed(node)


def test_the_summaries_cut_long_texts_and_the_record_keeps_them(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    # A listed ref of 2,000 quotes and a detail of 8,000: each summary line shows at
    # most 1,000 characters of one text, marked as cut; the record holds every character.
    path = hostile.full_bundle_json(
        bundles["rpt-clean/alice"], tmp_path / "long.tar.zst", "details", 3, lead="\U0001f600"
    )
    for way in ("python summary", "node summary"):
        run = measure.spawn_measured([*WAYS[way], str(path)], deadline=60)
        lines = run.stdout.decode().splitlines()
        cut = [line for line in lines if "... (cut: --json gives it whole)" in line]
        assert run.code == 1 and len(cut) >= 3, (way, lines[-8:])
        assert max(map(len, lines)) < 3 * 1100, way  # three texts on a line at most
    for way in ("python --json", "node --json"):
        record = json.loads(measure.spawn_measured([*WAYS[way], str(path)], deadline=60).stdout)
        subjects = [
            c["subject"] for c in record["claims"] if c["subject"].startswith("listed example")
        ]
        assert len(subjects) == 3 and all(s.count('"') == 2000 for s in subjects), way


def test_every_case_line_broken_is_counted_within_budget(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    # 19,980 case lines, each breaking the case schema: the claim names three and counts
    # the rest. Explaining every line through the reference validator took Python 10 to
    # 13 s; both verifiers must count the same.
    path = hostile.bad_case_lines_bundle(bundles["rpt-clean/alice"], tmp_path / "cases.tar.zst")
    details = []
    for way in ("python --json", "node --json"):
        run = measure.within_budget([*WAYS[way], str(path)], way, 1)
        record = json.loads(run.stdout)
        details += [
            c["detail"]
            for c in record["claims"]
            if c["state"] == "failed" and "canonical and schema-valid" in c["subject"]
        ]
    assert len(details) == 2, details
    assert all(d.endswith("(+19977 more)") for d in details), [d[-40:] for d in details]
