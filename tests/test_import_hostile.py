"""SPEC 16 hostile runs, by class: every refusal is one line naming the file and the rule,
exit 3, and nothing written to the store (the store directory is not even created);
SPEC 5's memory and time bounds hold on each family.

The Inspect logs are built byte by byte (``ZipBuilder``) from the members of the real
fixture log, so each case differs from a log the importer accepts in one rule only; the
control case, the rebuilt log unchanged, imports.
"""

from __future__ import annotations

import hashlib
import json
import random
import struct
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import measure
import pytest
import zstandard

from bundler.cli import main
from bundler.importers.runfile import open_run_file
from bundler.importers.ziplog import MAX_MEMBER_BYTES, MAX_MEMBERS, ZipLog

ROOT = Path(__file__).resolve().parent.parent
RUNNERS = ROOT / "fixtures" / "runners"
INSPECT_LOG = next((RUNNERS / "inspect" / "logs").glob("*.eval"))
LM_RUN = RUNNERS / "lm-eval" / "run"
LM_RESULTS = next(LM_RUN.glob("results_*.json"))
LM_SAMPLES = sorted(LM_RUN.glob("samples_*.jsonl"))


# ------------------------------------------------------------------ building zips


@dataclass(frozen=True)
class Member:
    name: str
    data: bytes
    method: int = 93
    flags: int = 0
    # Overrides, to make one field lie.
    raw: bytes | None = None  # the compressed bytes as stored
    crc: int | None = None
    usize: int | None = None
    local_name: str | None = None
    local_method: int | None = None
    local_crc: int | None = None


def _compress(m: Member) -> bytes:
    if m.raw is not None:
        return m.raw
    if m.method == 0:
        return m.data
    if m.method == 8:
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        return c.compress(m.data) + c.flush()
    return zstandard.ZstdCompressor(level=3).compress(m.data)


def build_zip(
    members: list[Member],
    *,
    gap: bytes = b"",
    trailing: bytes = b"",
    comment: bytes = b"",
    count: int | None = None,
    overlap: bool = False,
) -> bytes:
    out = bytearray()
    central = bytearray()
    offsets: list[int] = []
    for i, m in enumerate(members):
        raw = _compress(m)
        crc = zlib.crc32(m.data) if m.crc is None else m.crc
        usize = len(m.data) if m.usize is None else m.usize
        offset = offsets[0] if overlap and i == 1 else len(out)
        offsets.append(offset)
        name = m.name.encode("utf-8")
        lname = (m.local_name if m.local_name is not None else m.name).encode("utf-8")
        lcrc = crc if m.local_crc is None else m.local_crc
        lmethod = m.method if m.local_method is None else m.local_method
        if not (overlap and i == 1):
            out += (
                struct.pack(
                    "<4sHHHHHIIIHH",
                    b"PK\x03\x04",
                    20,
                    m.flags,
                    lmethod,
                    0,
                    0x21,
                    lcrc,
                    len(raw),
                    usize,
                    len(lname),
                    0,
                )
                + lname
                + raw
            )
            if i == 0:
                out += gap
        central += (
            struct.pack(
                "<4sHHHHHHIIIHHHHHII",
                b"PK\x01\x02",
                20,
                20,
                m.flags,
                m.method,
                0,
                0x21,
                crc,
                len(raw),
                usize,
                len(name),
                0,
                0,
                0,
                0,
                0,
                offset,
            )
            + name
        )
    cd_offset = len(out)
    n = len(members) if count is None else count
    out += central
    out += (
        struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, n, n, len(central), cd_offset, len(comment))
        + comment
    )
    return bytes(out) + trailing


def _fixture_members() -> list[Member]:
    f = open_run_file(INSPECT_LOG, role="log")
    try:
        log = ZipLog.open(f)
        ordered = sorted(log.members.values(), key=lambda m: m.header_offset)
        return [Member(m.name, log.read(m.name)) for m in ordered]
    finally:
        f.close()


MEMBERS = _fixture_members()


def edit(
    members: list[Member], name: str, change: Callable[[Member], Member | None]
) -> list[Member]:
    out = []
    for m in members:
        if m.name == name:
            new = change(m)
            if new is not None:
                out.append(new)
        else:
            out.append(m)
    return out


def edit_json(name: str, change: Callable[[Any], None]) -> list[Member]:
    def apply(m: Member) -> Member:
        value = json.loads(m.data)
        change(value)
        return replace(m, data=json.dumps(value).encode())

    return edit(MEMBERS, name, apply)


SAMPLE = "samples/add-2_epoch_1.json"


def _unsized(data: bytes) -> bytes:
    """A zstd frame whose header does not declare its content size."""
    return zstandard.ZstdCompressor(write_content_size=False).compress(data)


def _bomb() -> bytes:
    """256 MiB of zeros in one zstd frame of a few KB, without a content size."""
    c = zstandard.ZstdCompressor(level=1, write_content_size=False)
    chunk = bytes(1024 * 1024)
    out = c.compressobj()
    return b"".join([*(out.compress(chunk) for _ in range(256)), out.flush()])


ZEROS = bytes(20 * 1024 * 1024)


def _set_accuracy(value: Any) -> Callable[[Any], None]:
    return lambda h: h["results"]["scores"][0]["metrics"]["accuracy"].update(value=value)


def _set_score(value: Any) -> Callable[[Any], None]:
    return lambda s: s["scores"]["match"].update(value=value)


def _set_completed(value: Any) -> list[Member]:
    return edit_json("header.json", lambda h: h["stats"].update(completed_at=value))


def _dot_collision() -> list[Member]:
    """Scorers ``a.b`` (metric ``c``) and ``a`` (metric ``b.c``): both ``a.b.c``."""

    def header(h: Any) -> None:
        first, second = h["results"]["scores"][:2]
        first["name"] = "a.b"
        first["metrics"] = {"c": first["metrics"]["accuracy"]}
        second["name"] = "a"
        second["metrics"] = {"b.c": second["metrics"]["accuracy"]}

    return edit_json("header.json", header)


# name -> (the log's bytes, a phrase the one-line error must hold)
def _bad_json(name: str, spelling: bytes) -> list[Member]:
    return edit(MEMBERS, name, lambda m: replace(m, data=spelling))


# What the strict reader refuses (SPEC 2), in each member the mapping does not use.
_UNUSED_MEMBERS = ("summaries.json", "reductions.json", "_journal/start.json")
_BAD_JSON = {
    "trailing data": (b'{"a": 1} x', "trailing data"),
    "duplicate key": (b'{"a": 1, "a": 2}', "duplicate"),
    "NaN": (b'{"a": NaN}', "NaN"),
    "integer past 2^53": (b'{"a": 9007199254740993}', "outside"),
    "BOM": (b'\xef\xbb\xbf{"a": 1}', "byte order mark"),
    "lone surrogate": (b'{"a": "\\ud800"}', "surrogate"),
}

INSPECT_CASES: dict[str, tuple[Callable[[], bytes], str]] = {
    **{
        f"{member} {label}": (
            (lambda m, b: lambda: build_zip(_bad_json(m, b)))(member, bad),
            phrase,
        )
        for member in _UNUSED_MEMBERS
        for label, (bad, phrase) in _BAD_JSON.items()
    },
    **{
        f"scorer option {label}": (
            (
                lambda v: (
                    lambda: build_zip(
                        edit_json(
                            "header.json",
                            lambda h: h["eval"]["scorers"][0]["options"].update(limit=v),
                        )
                    )
                )
            )(value),
            "is outside -(2^53-1)..2^53-1 (a number of the run the store's readers cannot hold)",
        )
        for label, value in (("1e19", 1e19), ("-9.2e18", -9.2e18))
    },
    # the container
    "not a zip": (lambda: b"PK\x03\x04 not really a zip at all" * 10, "end-of-central-directory"),
    "truncated": (lambda: build_zip(MEMBERS)[:-100], "end-of-central-directory"),
    "comment": (lambda: build_zip(MEMBERS, comment=b"hi"), "without a comment"),
    "trailing bytes": (lambda: build_zip(MEMBERS, trailing=b"\0" * 30), "end-of-central-directory"),
    "gap between members": (lambda: build_zip(MEMBERS, gap=b"hidden"), "leaves a gap"),
    "overlapping members": (lambda: build_zip(MEMBERS, overlap=True), "overlaps"),
    "duplicate name": (lambda: build_zip([*MEMBERS, MEMBERS[-1]]), "appears twice"),
    "absolute name": (lambda: build_zip([*MEMBERS, Member("/etc/passwd", b"x")]), "absolute"),
    "dot-dot name": (
        lambda: build_zip([*MEMBERS, Member("samples/../header.json", b"x")]),
        "unsafe segment",
    ),
    "backslash name": (lambda: build_zip([*MEMBERS, Member("samples\\x.json", b"x")]), "backslash"),
    "non-NFC name": (
        lambda: build_zip(
            [*MEMBERS, Member("samples/cafe\u0301_epoch_1.json", b"{}", flags=0x800)]
        ),
        "not NFC",
    ),
    "control name": (
        lambda: build_zip([*MEMBERS, Member("samples/a\x1b[2J_epoch_1.json", b"{}")]),
        "control character",
    ),
    "local name disagrees": (
        lambda: build_zip(
            edit(MEMBERS, SAMPLE, lambda m: replace(m, local_name="samples/add-9_epoch_1.json"))
        ),
        "disagree on its name",
    ),
    "local method disagrees": (
        lambda: build_zip(edit(MEMBERS, SAMPLE, lambda m: replace(m, local_method=8))),
        "disagree on its method",
    ),
    "local crc disagrees": (
        lambda: build_zip(edit(MEMBERS, SAMPLE, lambda m: replace(m, local_crc=1))),
        "sizes or CRC",
    ),
    "crc wrong": (
        lambda: build_zip(edit(MEMBERS, SAMPLE, lambda m: replace(m, crc=1, local_crc=1))),
        "CRC-32",
    ),
    "encrypted": (
        lambda: build_zip(edit(MEMBERS, SAMPLE, lambda m: replace(m, flags=1))),
        "encryption",
    ),
    "unknown method": (
        lambda: build_zip(edit(MEMBERS, SAMPLE, lambda m: replace(m, method=12, raw=m.data))),
        "compression method 12",
    ),
    "stored sizes differ": (
        lambda: build_zip(
            edit(MEMBERS, SAMPLE, lambda m: replace(m, method=0, usize=len(m.data) + 1))
        ),
        "sizes",
    ),
    "member over the cap": (
        lambda: build_zip(
            [
                *MEMBERS,
                Member(
                    "samples/big_epoch_1.json", b"{}", usize=MAX_MEMBER_BYTES + 1, raw=b"x" * 100
                ),
            ]
        ),
        "over the",
    ),
    "ratio bomb": (
        lambda: build_zip([*MEMBERS, Member("samples/bomb_epoch_1.json", ZEROS)]),
        "ratio cap",
    ),
    # Each member within its own caps (size, ratio), their declared sizes over the
    # log's in all: refused from the directory, before a byte is decompressed (the
    # stored bytes are not even zstd).
    "members over the total cap": (
        lambda: build_zip(
            [
                *MEMBERS,
                *(
                    Member(
                        f"samples/s{i}_epoch_1.json",
                        b"{}",
                        usize=MAX_MEMBER_BYTES,
                        raw=b"x" * 40_000,
                    )
                    for i in range(70)
                ),
            ]
        ),
        "declare more than 2147483648 bytes in all",
    ),
    # Members the mapping does not use (the journal), 288 MiB declared: their own cap.
    "journal over its cap": (
        lambda: build_zip(
            [
                *MEMBERS,
                *(
                    Member(
                        f"_journal/summaries/{i}.json",
                        b"{}",
                        usize=MAX_MEMBER_BYTES,
                        raw=b"x" * 40_000,
                    )
                    for i in range(100, 109)
                ),
            ]
        ),
        "summaries, reductions and journal declare",
    ),
    "expands past its size": (
        lambda: build_zip(
            edit(MEMBERS, SAMPLE, lambda m: replace(m, usize=100, raw=_unsized(m.data)))
        ),
        "beyond its declared",
    ),
    "shorter than its size": (
        lambda: build_zip(
            edit(MEMBERS, SAMPLE, lambda m: replace(m, usize=len(m.data) + 5, raw=_unsized(m.data)))
        ),
        "decompresses to",
    ),
    "corrupt zstd": (
        lambda: build_zip(
            edit(MEMBERS, SAMPLE, lambda m: replace(m, raw=b"\x28\xb5\x2f\xfdgarbage"))
        ),
        "zstd",
    ),
    "small member, huge frame": (
        lambda: build_zip(
            edit(
                MEMBERS, SAMPLE, lambda m: replace(m, usize=60_000, crc=0, local_crc=0, raw=_bomb())
            )
        ),
        "expands beyond its declared 60000",
    ),
    "frame header lies": (
        lambda: build_zip(
            edit(
                MEMBERS,
                SAMPLE,
                lambda m: replace(
                    m, usize=len(m.data) - 1, raw=zstandard.ZstdCompressor().compress(m.data)
                ),
            )
        ),
        "its zstd frame declares",
    ),
    "two frames": (
        lambda: build_zip(
            edit(
                MEMBERS,
                SAMPLE,
                lambda m: replace(m, raw=zstandard.ZstdCompressor().compress(m.data) * 2),
            )
        ),
        "bytes after its zstd frame",
    ),
    "too many members": (lambda: build_zip(MEMBERS, count=MAX_MEMBERS + 1), "over the cap"),
    "zip64 count": (lambda: build_zip(MEMBERS, count=0xFFFF), "zip64"),
    # the log inside
    "unknown member": (
        lambda: build_zip([*MEMBERS, Member("notes.txt", b"x")]),
        "not a member of an Inspect log",
    ),
    "no header": (
        lambda: build_zip(edit(MEMBERS, "header.json", lambda m: None)),
        "no header.json",
    ),
    "unknown version": (
        lambda: build_zip(edit_json("header.json", lambda h: h.update(version=3))),
        "log version 3",
    ),
    "no version": (
        lambda: build_zip(edit_json("header.json", lambda h: h.pop("version"))),
        "log version None",
    ),
    "unfinished run": (
        lambda: build_zip(edit_json("header.json", lambda h: h.update(status="started"))),
        "only a finished run",
    ),
    "header not JSON": (
        lambda: build_zip(edit(MEMBERS, "header.json", lambda m: replace(m, data=b"{nope"))),
        "header.json",
    ),
    "NaN in header": (
        lambda: build_zip(
            edit(
                MEMBERS,
                "header.json",
                lambda m: replace(
                    m, data=m.data.replace(b'"version":', b'"version": NaN, "was":', 1)
                ),
            )
        ),
        "NaN",
    ),
    "duplicate key": (
        lambda: build_zip(
            edit(MEMBERS, "header.json", lambda m: replace(m, data=b'{"version": 2, "version": 2}'))
        ),
        "duplicate",
    ),
    "sample of no id": (
        lambda: build_zip(edit_json(SAMPLE, lambda s: s.update(id="stranger"))),
        "not in the header's sample_ids",
    ),
    "epoch out of range": (
        lambda: build_zip(edit_json(SAMPLE, lambda s: s.update(epoch=3))),
        "not in 1..2",
    ),
    "name disagrees with sample": (
        lambda: build_zip(edit_json(SAMPLE, lambda s: s.update(epoch=2))),
        "does not match its id",
    ),
    "score of no kind": (
        lambda: build_zip(edit_json(SAMPLE, lambda s: s["scores"]["match"].update(value={"a": 1}))),
        "score value",
    ),
    "epochs disagree": (
        lambda: build_zip(edit_json(SAMPLE, lambda s: s.update(target="13"))),
        "differs from its other epochs",
    ),
    "ids collide": (
        lambda: build_zip(
            edit_json(
                "header.json", lambda h: h["eval"]["dataset"].update(sample_ids=["a b", "a_b"])
            )
        ),
        "both become identifier",
    ),
    # Ids become member names of the bundle, which must differ after case folding.
    "ids collide after case folding": (
        lambda: build_zip(
            edit_json("header.json", lambda h: h["eval"]["dataset"].update(sample_ids=["A", "a"]))
        ),
        "one name once case is folded",
    ),
    # A header that disagrees with its samples, every way (SPEC 16: the result is derived
    # as SPEC 12 does, so audit re-derives it; a runner's value that is not what its
    # samples give is refused rather than written).
    **{
        f"header metric {label}": (
            (lambda v: lambda: build_zip(edit_json("header.json", _set_accuracy(v))))(value),
            "accuracy.value: ",
        )
        for label, value in (("lies", 0.1), ("null", None), ("zero", 0), ("above one", 1.5))
    },
    **{
        f"sample value {label}": (
            (lambda v: lambda: build_zip(edit_json(SAMPLE, _set_score(v))))(value),
            "is not what its samples give",
        )
        for label, value in (("P", "P"), ("N", "N"), ("I", "I"), ("-5", -5), ("1e308", 1e308))
    },
    "sample scores null": (
        lambda: build_zip(edit_json(SAMPLE, lambda s: s.update(scores=None))),
        "is not what its samples give",
    ),
    "sample error set": (
        lambda: build_zip(edit_json(SAMPLE, lambda s: s.update(error={"message": "x"}))),
        "is not what its samples give",
    ),
    "sample member missing": (
        lambda: build_zip(edit(MEMBERS, SAMPLE, lambda m: None)),
        "has no member samples/add-2_epoch_1.json",
    ),
    "sample scorer not in header": (
        lambda: build_zip(edit_json(SAMPLE, lambda s: s["scores"].update(extra={"value": "C"}))),
        "scores.extra: a scorer the header",
    ),
    "metric that is not a mean": (
        lambda: build_zip(
            edit_json(
                "header.json",
                lambda h: h["results"]["scores"][0]["metrics"].update(
                    f1={"name": "f1", "value": 0.4, "params": {}}
                ),
            )
        ),
        "metrics.f1.value: 0.4 is not what its samples give",
    ),
    # Header values the report cannot hold.
    "completed in year 9999": (
        lambda: build_zip(_set_completed("9999-12-31T23:59:59+00:00")),
        "after 2242-03-16T12:56:31Z",
    ),
    "completed after the last time an archive records": (
        lambda: build_zip(_set_completed("2243-01-01T00:00:00+00:00")),
        "after 2242-03-16T12:56:31Z",
    ),
    "completed at year 1": (
        lambda: build_zip(_set_completed("0001-01-01T00:00:00+01:00")),
        "out of range in UTC",
    ),
    "completed before 1970": (
        lambda: build_zip(_set_completed("1969-12-31T23:59:59+00:00")),
        "before 1970",
    ),
    "completed an integer": (
        lambda: build_zip(_set_completed(1800000000)),
        "stats.completed_at: not a string",
    ),
    "header a list": (
        lambda: build_zip(edit(MEMBERS, "header.json", lambda m: replace(m, data=b"[]"))),
        "header.json: not a JSON object",
    ),
    "header null": (
        lambda: build_zip(edit(MEMBERS, "header.json", lambda m: replace(m, data=b"null"))),
        "header.json: not a JSON object",
    ),
    "version a float": (
        lambda: build_zip(edit_json("header.json", lambda h: h.update(version=2.0))),
        "log version 2.0",
    ),
    "empty task": (
        lambda: build_zip(edit_json("header.json", lambda h: h["eval"].update(task=""))),
        "/project: '' should be non-empty",
    ),
    "check ids collide through a dot": (
        lambda: build_zip(_dot_collision()),
        "both become identifier 'a.b.c'",
    ),
}


def refuse(args: list[str], store: Path, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--store", str(store), "--principal", "alice"])
    captured = capsys.readouterr()
    assert exit_info.value.code == 3, captured.err
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("evalbook-bundle: error: ")
    assert not store.exists()
    return captured.err


def test_the_rebuilt_log_imports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "control.eval"
    log.write_bytes(build_zip(MEMBERS))
    with pytest.raises(SystemExit) as exit_info:
        main(["import-inspect", str(log), "--store", str(tmp_path / "s"), "--principal", "a"])
    assert exit_info.value.code == 0, capsys.readouterr().err
    assert (tmp_path / "s" / "reports").is_dir()


@pytest.mark.parametrize("case", sorted(INSPECT_CASES))
def test_a_hostile_inspect_log_is_refused(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, phrase = INSPECT_CASES[case]
    log = tmp_path / "hostile.eval"
    log.write_bytes(make())
    err = refuse(["import-inspect", str(log)], tmp_path / "store", capsys)
    assert phrase in err and "hostile.eval" in err, err


def test_a_refusal_in_an_existing_store_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    with pytest.raises(SystemExit):
        main(
            [
                "import-lm-eval",
                str(LM_RESULTS),
                *[a for s in LM_SAMPLES for a in ("--samples", str(s))],
                "--store",
                str(store),
                "--principal",
                "a",
            ]
        )
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    log = tmp_path / "hostile.eval"
    log.write_bytes(INSPECT_CASES["crc wrong"][0]())
    with pytest.raises(SystemExit) as exit_info:
        main(["import-inspect", str(log), "--store", str(store)])
    assert exit_info.value.code == 3
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in store.iterdir()) == sorted(
        {p.relative_to(store).parts[0] for p in before}
    )


# ------------------------------------------------------------------ lm-eval


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def lm_case(
    change_lines: Callable[[list[dict[str, Any]]], None] | None = None,
    change_results: Callable[[dict[str, Any]], None] | None = None,
    *,
    rehash: bool = True,
    samples_name: str | None = None,
    drop_samples: bool = False,
) -> Callable[[Path], list[str]]:
    def make(tmp: Path) -> list[str]:
        results = json.loads(LM_RESULTS.read_bytes())
        paths = []
        for i, s in enumerate(LM_SAMPLES):
            lines = [json.loads(line) for line in s.read_bytes().splitlines()]
            if i == 0 and change_lines is not None:
                change_lines(lines)
                if rehash:
                    task = s.name.split("_20")[0].removeprefix("samples_")
                    results["task_hashes"][task] = _sha(
                        "".join(x["doc_hash"] + x["prompt_hash"] + x["target_hash"] for x in lines)
                    )
            name = samples_name if (i == 0 and samples_name) else s.name
            p = tmp / name
            p.write_text("".join(json.dumps(x) + "\n" for x in lines))
            if not (drop_samples and i == 0):
                paths.append(p)
        if change_results is not None:
            change_results(results)
        r = tmp / LM_RESULTS.name
        r.write_text(json.dumps(results))
        return [str(r), *[a for p in paths for a in ("--samples", str(p))]]

    return make


def _first(change: Callable[[dict[str, Any]], None]) -> Callable[[list[dict[str, Any]]], None]:
    return lambda lines: change(lines[0])


LM_CASES: dict[str, tuple[Callable[[Path], list[str]], str]] = {
    "doc_hash": (lm_case(_first(lambda s: s.update(doc_hash=_sha("forged")))), "doc_hash"),
    "doc changed": (lm_case(_first(lambda s: s["doc"].update(question="forged?"))), "doc_hash"),
    "prompt_hash": (
        lm_case(_first(lambda s: s["arguments"]["gen_args_0"].update(arg_0="forged"))),
        "prompt_hash",
    ),
    "target_hash": (lm_case(_first(lambda s: s.update(target="forged"))), "target_hash"),
    "task_hashes": (
        lm_case(change_results=lambda r: r["task_hashes"].update(fixture_gen=_sha("x"))),
        "task_hashes.fixture_gen",
    ),
    "a line dropped": (lm_case(lambda lines: lines.pop(), rehash=False), "does not recompute"),
    "metric not a number": (
        lm_case(_first(lambda s: s.update(exact_match="high"))),
        "not a number",
    ),
    "metric unknown": (lm_case(_first(lambda s: s.update(metrics=["bleu"]))), "not in the results"),
    "document twice": (lm_case(lambda lines: lines.append(dict(lines[0]))), "appears twice"),
    "no context": (lm_case(_first(lambda s: s.update(arguments={}))), "gen_args_0"),
    "samples misnamed": (
        lm_case(samples_name="samples_other_task.jsonl"),
        "not named samples_<task>_<date>.jsonl",
    ),
    "samples missing": (lm_case(drop_samples=True), "has no samples file"),
    "results not an object": (lm_case(change_results=lambda r: r.clear()), "results: missing"),
    "no date": (lm_case(change_results=lambda r: r.pop("date")), "date"),
    # results that disagree with their samples, or that the import would drop
    **{
        f"results value {label}": (
            (
                lambda v: lm_case(
                    change_results=lambda r: r["results"]["fixture_gen"].update(
                        {"exact_match,take-first": v}
                    )
                )
            )(value),
            "results.fixture_gen.exact_match,take-first: ",
        )
        for label, value in (("lies", 0.99), ("null", None), ("one", 1))
    },
    "results value a string": (
        lm_case(
            change_results=lambda r: r["results"]["fixture_gen"].update(
                {"exact_match,take-first": "0.3"}
            )
        ),
        "results_",  # the results file is named
    ),
    **{
        f"per-document value {label}": (
            (lambda v: lm_case(_first(lambda s: s.update({s["metrics"][0]: v}))))(value),
            "is not what its samples give",
        )
        for label, value in (("2.0", 2.0), ("true", True), ("-1", -1))
    },
    "results metric with no samples": (
        lm_case(
            change_results=lambda r: r["results"]["fixture_gen"].update({"exact_match,n/o ne": 0.5})
        ),
        "exact_match,n/o ne: 0.5 is not what its samples give, None",
    ),
    "results task with no samples": (
        lm_case(change_results=lambda r: r["results"].update(ghost={"acc,none": 1.0})),
        "results.ghost: a task with no entry in configs",
    ),
    "task hash of no task": (
        lm_case(change_results=lambda r: r["task_hashes"].update(ghost=_sha("x"))),
        "task_hashes.ghost: a task with no entry in configs",
    ),
    **{
        f"stderr {label}": (
            (
                lambda v: lm_case(
                    change_results=lambda r: r["results"]["fixture_mc"].update(
                        {"acc_stderr,none": v}
                    )
                )
            )(value),
            "is outside -(2^53-1)..2^53-1 (a number of the run the store's readers cannot hold)",
        )
        for label, value in (
            ("1e19", 1e19),
            ("9.2e18", 9.2e18),
            ("2^53", 9007199254740993.0),
            ("-1e20", -1e20),
        )
    },
    "results metric without a filter": (
        lm_case(change_results=lambda r: r["results"]["fixture_gen"].update(bleu=0.5)),
        "results.fixture_gen.bleu: not <metric>,<filter>",
    ),
}


@pytest.mark.parametrize("case", sorted(LM_CASES))
def test_a_hostile_lm_eval_run_is_refused(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, phrase = LM_CASES[case]
    args = make(tmp_path)
    err = refuse(["import-lm-eval", *args], tmp_path / "store", capsys)
    assert phrase in err, err


def test_a_symlinked_or_special_run_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = tmp_path / "link.eval"
    link.symlink_to(INSPECT_LOG)
    assert "symbolic link" in refuse(["import-inspect", str(link)], tmp_path / "s1", capsys)
    assert "not a regular file" in refuse(
        ["import-inspect", str(tmp_path)], tmp_path / "s2", capsys
    )


# ------------------------------------------------------------------ SPEC 5 bounds


def _dense_sample() -> bytes:
    """A sample whose events are just under the per-member cap of JSON values, as dense
    and incompressible as JSON gets: the largest member the importer parses."""
    from bundler.importers.inspect_log import MAX_MEMBER_VALUES

    rng = random.Random(0)
    events = [rng.randbytes(6).hex() for _ in range(MAX_MEMBER_VALUES - 10_000)]
    return build_zip(edit_json(SAMPLE, lambda s: s.update(events=events)))


def _too_many_values() -> bytes:
    from bundler.importers.inspect_log import MAX_MEMBER_VALUES

    events = b"[" + b",".join([b"0"] * (MAX_MEMBER_VALUES + 1)) + b"]"
    return build_zip(
        edit(
            MEMBERS,
            SAMPLE,
            lambda m: replace(
                m, data=m.data.replace(b'"events":', b'"events":' + events + b',"was":', 1)
            ),
        )
    )


@pytest.mark.parametrize(
    ("family", "make", "code"),
    [
        ("inflation", INSPECT_CASES["ratio bomb"][0], 3),
        ("size", INSPECT_CASES["member over the cap"][0], 3),
        ("count", INSPECT_CASES["too many members"][0], 3),
        ("layout", INSPECT_CASES["overlapping members"][0], 3),
        ("values", _too_many_values, 3),
        ("small member, huge frame", INSPECT_CASES["small member, huge frame"][0], 3),
        ("dense member, accepted", _dense_sample, 0),
    ],
)
def test_hostile_families_stay_within_memory_and_time(
    family: str, make: Callable[[], bytes], code: int, tmp_path: Path
) -> None:
    log = tmp_path / "hostile.eval"
    log.write_bytes(make())
    run = measure.spawn_measured(
        [
            sys.executable,
            "-m",
            "bundler",
            "import-inspect",
            str(log),
            "--store",
            str(tmp_path / "store"),
            "--principal",
            "a",
        ],
        deadline=60,
    )
    assert run.code == code, run.stderr
    assert run.peak_bytes < 300 * 1024 * 1024, family
    # CPU, not wall: the suite shares two cores with other work.
    assert run.cpu < 10, family
    assert (tmp_path / "store").exists() is (code == 0)


def test_an_lm_eval_line_over_the_cap_stays_within_memory_and_time(tmp_path: Path) -> None:
    from bundler.importers.lmeval import MAX_LINE_BYTES

    results = tmp_path / LM_RESULTS.name
    results.write_bytes(LM_RESULTS.read_bytes())
    samples = []
    for s in LM_SAMPLES:
        target = tmp_path / s.name
        target.write_bytes(s.read_bytes())
        samples += ["--samples", str(target)]
    with (tmp_path / LM_SAMPLES[0].name).open("ab") as f:
        f.write(b'{"doc": "' + b"x" * (MAX_LINE_BYTES + 1) + b'"}\n')
    run = measure.spawn_measured(
        [
            sys.executable,
            "-m",
            "bundler",
            "import-lm-eval",
            str(results),
            *samples,
            "--store",
            str(tmp_path / "store"),
            "--principal",
            "a",
        ],
        deadline=60,
    )
    assert run.code == 3, run.stderr
    assert b"a line longer than" in run.stderr
    assert run.peak_bytes < 300 * 1024 * 1024
    assert run.cpu < 10  # CPU, not wall: the suite shares two cores
    assert not (tmp_path / "store").exists()


# ------------------------------------------------------------------ names, options, store


NON_UTF8 = b"r\xff"


def _non_utf8_args(tmp: Path, which: str) -> list[str]:
    """Import arguments where the file named by ``which`` has a name that is not UTF-8."""
    import os

    d = os.fsencode(tmp)
    if which == "log":
        path = d + b"/" + NON_UTF8 + b".eval"
        Path(os.fsdecode(path)).write_bytes(INSPECT_LOG.read_bytes())
        return ["import-inspect", os.fsdecode(path)]
    if which == "task":
        path = d + b"/t\xff.py"
        Path(os.fsdecode(path)).write_bytes(b"pass\n")
        return ["import-inspect", str(INSPECT_LOG), "--task", os.fsdecode(path)]
    if which == "decision":
        path = d + b"/d\xff.json"
        Path(os.fsdecode(path)).write_text('{"schema": "evalbook.decision.v1", "checks": {}}')
        return ["import-inspect", str(INSPECT_LOG), "--decision", os.fsdecode(path)]
    if which == "dataset":
        path = d + b"/data\xff.jsonl"
        Path(os.fsdecode(path)).write_bytes(b"{}\n")
        return ["import-inspect", str(INSPECT_LOG), "--dataset", os.fsdecode(path)]
    samples = [*LM_SAMPLES]
    bad = d + b"/samples_fixture_gen_\xff.jsonl"
    Path(os.fsdecode(bad)).write_bytes(samples[0].read_bytes())
    args = ["import-lm-eval", str(LM_RESULTS), "--samples", os.fsdecode(bad)]
    return [*args, "--samples", str(samples[1])]


@pytest.mark.parametrize("which", ["log", "task", "decision", "dataset", "samples"])
def test_a_file_name_that_is_not_utf8_is_one_line_exit_3(which: str, tmp_path: Path) -> None:
    from conftest import run_cli

    store = tmp_path / "store"
    done = run_cli(*_non_utf8_args(tmp_path, which), "--store", str(store), "--principal", "a")
    err = done.stderr.decode()
    assert done.returncode == 3, err
    assert err.count("\n") == 1 and "not UTF-8" in err and "Traceback" not in err, err
    assert not store.exists()


@pytest.mark.parametrize(
    "report_id", ["", ".", "..", "a/b", "-x", "x" * 129, "\u00e9", "a b", "a\x1b"]
)
def test_a_report_id_that_is_not_an_identifier_is_a_usage_error(
    report_id: str, tmp_path: Path
) -> None:
    from conftest import run_cli

    store = tmp_path / "store"
    done = run_cli(
        "import-inspect",
        str(INSPECT_LOG),
        "--store",
        str(store),
        "--principal",
        "a",
        "--report-id",
        report_id,
    )
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert err.count("\n") == 1 and "--report-id" in err and "not an identifier" in err
    assert not store.exists()


@pytest.mark.parametrize(
    "inner", ["reports", "blobs", "blobs/sha256", "datasets", "scorers", "suites"]
)
def test_a_symlink_inside_an_existing_store_is_never_written_through(
    inner: str, tmp_path: Path
) -> None:
    from conftest import run_cli

    store = tmp_path / "store"
    store.mkdir()
    (store / "access.json").write_text('{"principals": {"a": ["report.export"]}}')
    outside = tmp_path / "outside"
    outside.mkdir()
    link = store / inner
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside)
    done = run_cli("import-inspect", str(INSPECT_LOG), "--store", str(store))
    err = done.stderr.decode()
    assert done.returncode == 3, err
    assert err.count("\n") == 1 and "symbolic link inside the store" in err, err
    assert list(outside.iterdir()) == []
    assert not any(p.name.startswith(".evalbook-import-") for p in store.iterdir())


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("step", ["close", "abort"])
def test_a_signal_during_cleanup_waits_until_it_is_done(
    step: str, signame: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    import signal

    from bundler.importers import storewriter

    signum = getattr(signal, signame)

    def raising(_n: int, _f: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signum, raising)
    real_rmtree = shutil.rmtree
    calls: list[str] = []

    def rmtree_with_a_signal(path: Any, *args: Any, **kw: Any) -> None:
        if not calls:  # the first removal is where the signal arrives
            signal.raise_signal(signum)
        calls.append(str(path))
        real_rmtree(path, *args, **kw)

    try:
        monkeypatch.setattr(storewriter.shutil, "rmtree", rmtree_with_a_signal)
        root = tmp_path / "new-store"
        writer = storewriter.StoreWriter(root)
        writer.put_payload(b"x" * 10)
        with pytest.raises(KeyboardInterrupt):
            getattr(writer, step)()
    finally:
        signal.signal(signum, previous)
    assert not writer.staging.exists()
    # abort removes the root this import created; close (after a commit) keeps it.
    assert root.exists() is (step == "close")


@pytest.mark.parametrize("count", [4096, 4097], ids=["at-the-cap", "past-it"])
def test_task_files_are_capped_before_anything_is_read(count: int, tmp_path: Path) -> None:
    """Each --task file is a file of every scorer: 4,096 of them are taken, one more is a
    usage error (exit 2, one line naming --task and the cap) before any file is read, and
    no store appears."""
    from conftest import run_cli

    from bundler.importers.importing import MAX_TASK_FILES

    assert MAX_TASK_FILES == 4096
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    args: list[str] = []
    for i in range(count):
        f = tasks / f"t{i:05d}.yaml"
        if i != count - 1:  # the last is never written: past the cap it is never opened
            f.write_bytes(b"%d\n" % i)
        args += ["--task", str(f)]
    store = tmp_path / "store"
    lm = [str(LM_RESULTS)] + [a for s in LM_SAMPLES for a in ("--samples", str(s))]
    if count == 4096:
        (tasks / f"t{count - 1:05d}.yaml").write_bytes(b"last\n")
    done = run_cli("import-lm-eval", *lm, "--store", str(store), "--principal", "a", *args)
    err = done.stderr.decode()
    if count == 4096:
        assert done.returncode == 0, err
        return
    assert done.returncode == 2, err
    assert err.count("\n") == 1 and "--task: 4097 files given; at most 4096" in err, err
    assert not store.exists()


@pytest.mark.parametrize("count", [256, 257], ids=["at-the-cap", "past-it"])
def test_dataset_files_are_capped_before_anything_is_read(count: int, tmp_path: Path) -> None:
    """Each --dataset file is held open during the import: 256 are taken, one more is a
    usage error (exit 2, one line naming --dataset and the cap), nothing is written."""
    from conftest import run_cli

    from bundler.importers.importing import MAX_DATASET_FILES

    assert MAX_DATASET_FILES == 256
    data = tmp_path / "data"
    data.mkdir()
    args: list[str] = []
    for i in range(count):
        f = data / f"d{i:03d}.jsonl"
        f.write_bytes(b'{"i": %d}\n' % i)
        args += ["--dataset", str(f)]
    store = tmp_path / "store"
    done = run_cli(
        "import-inspect", str(INSPECT_LOG), "--store", str(store), "--principal", "a", *args
    )
    err = done.stderr.decode()
    if count == 256:
        assert done.returncode == 0, err
        return
    assert done.returncode == 2, err
    assert err.count("\n") == 1 and "--dataset: 257 files given; at most 256" in err, err
    assert not store.exists()


@pytest.mark.parametrize("option", ["--task", "--dataset", "--decision"])
@pytest.mark.parametrize("what", ["missing", "a directory"])
def test_a_bad_given_file_names_its_option(option: str, what: str, tmp_path: Path) -> None:
    from conftest import run_cli

    bad = tmp_path / "given.json"
    if what == "a directory":
        bad.mkdir()
    store = tmp_path / "store"
    done = run_cli(
        "import-inspect", str(INSPECT_LOG), "--store", str(store), "--principal", "a",
        option, str(bad),
    )  # fmt: skip
    err = done.stderr.decode()
    assert done.returncode == 3, err
    assert err.count("\n") == 1 and f"{bad}: " in err and f"{option} file" in err, err
    assert not store.exists()
