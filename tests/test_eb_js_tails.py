"""Both verifiers derive the same stdout tail of an eval-banana check (SPEC 10, 15).

The Node verifier finds the bounded tail from the stdout file's bytes (validated a chunk
at a time, the last 2,000 code points located by their lead bytes) instead of decoding
the whole file. A run whose tails export-eb (Python's rule) recorded verifies in Node at
every length around the cut and with every UTF-8 width at the cut, and a tail one code
point off fails in both.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import repack
from test_ebverify import extract, reseal
from test_export_eb import FLAT_RUN, PROJECT, copy_run, do_export, edit_check

from bundler.bundles.verify import verify_bundle
from bundler.core.claims import Verdict, VerifyOptions
from bundler.evalbanana import run as eb

ROOT = Path(__file__).resolve().parent.parent
WIDTHS = {"ascii": "a", "two": "\u00e9", "three": "\u20ac", "four": "\U0001f600", "bom": "\ufeff"}


def _node(bundle: Path) -> dict:
    proc = subprocess.run(
        ["node", str(ROOT / "js" / "verify-bundle.mjs"), str(bundle), "--json"],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.stderr == b"" or proc.returncode in (0, 1), proc.stderr.decode()
    return json.loads(proc.stdout)


def _resealed(out: Path, bag: Path, to: Path) -> Path:
    """The extracted and edited ``bag`` of ``out`` with every digest resealed, packed as
    ``out`` was (its files as they now are, nothing recomputed by the packer)."""
    reseal(bag, tree=True)
    packed = repack.open_bundle(out)
    packed.files = {
        p.relative_to(bag).as_posix(): p.read_bytes() for p in sorted(bag.rglob("*")) if p.is_file()
    }
    return repack.write_bundle(
        packed,
        to,
        bundle_json=False,
        manifest=False,
        bag_info=False,
        head=False,
        tagmanifest=False,
    )


def _text(width: str, length: int) -> str:
    # The width under test at every third code point, so the cut meets it and ASCII.
    ch = WIDTHS[width]
    return "".join(ch if i % 3 != 1 else "z" for i in range(length))


@pytest.mark.parametrize("length", [1999, 2000, 2001, 5000])
@pytest.mark.parametrize("width", sorted(WIDTHS))
def test_node_derives_the_tail_python_recorded(width: str, length: int, tmp_path: Path) -> None:
    run = copy_run(tmp_path, FLAT_RUN)
    stem = eb.check_stem("passes")
    text = _text(width, length)
    (run / "checks" / f"{stem}.stdout.txt").write_bytes(text.encode("utf-8"))
    edit_check(run, "passes", lambda c: c.update(stdout=eb.bounded_tail(text, stem=stem)))
    out = tmp_path / "b.tar.zst"
    do_export(run, PROJECT, out)
    result = _node(out)
    assert result["verdict"] == "verified", [c for c in result["claims"] if c["state"] != "proven"]


@pytest.mark.parametrize("width", ["four", "two"])
def test_a_tail_one_code_point_off_fails_in_both(width: str, tmp_path: Path) -> None:
    run = copy_run(tmp_path, FLAT_RUN)
    stem = eb.check_stem("passes")
    text = _text(width, 2001)
    (run / "checks" / f"{stem}.stdout.txt").write_bytes(text.encode("utf-8"))
    edit_check(run, "passes", lambda c: c.update(stdout=eb.bounded_tail(text, stem=stem)))
    out = tmp_path / "b.tar.zst"
    do_export(run, PROJECT, out)
    bag = extract(out, tmp_path / "x")
    # The recorded tail keeps one code point too many (the 2,001st from the end).
    wrong = eb.bounded_tail(text, stem=stem)
    wrong = wrong[: wrong.index("\n") + 1] + text[-2001:]
    for name in ("report.json", f"checks/{stem}.json"):
        path = bag / "data" / "run" / name
        value = json.loads(path.read_bytes())
        check = (
            value
            if name.startswith("checks/")
            else next(c for c in value["checks"] if c["check_id"] == "passes")
        )
        check["stdout"] = wrong
        path.write_text(json.dumps(value, indent=2, ensure_ascii=False), encoding="utf-8")
    tampered = _resealed(out, bag, tmp_path / "t.tar.zst")
    py = verify_bundle(str(tampered), VerifyOptions())
    assert py.verdict is Verdict.FAILED
    assert any("stdout" in c.subject for c in py.failures()), py.failures()
    result = _node(tampered)
    assert result["verdict"] == "failed"
    assert any("stdout" in c["subject"] and c["state"] == "failed" for c in result["claims"]), (
        result["claims"]
    )


def _tampered_totals(out: Path, tmp_path: Path) -> Path:
    """The bundle with the run's passed_checks one off its statuses, every digest resealed."""
    bag = extract(out, tmp_path / "x")
    path = bag / "data" / "run" / "report.json"
    value = json.loads(path.read_bytes())
    value["passed_checks"] += 1
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False), encoding="utf-8")
    return _resealed(out, bag, tmp_path / "t.tar.zst")


@pytest.mark.parametrize("tamper", [False, True])
@pytest.mark.parametrize("name", ["default", "flat"])
def test_node_record_of_a_run_is_the_python_summary_and_render_reads_it(
    name: str, tamper: bool, tmp_path: Path
) -> None:
    # SPEC 15: the record the Node verifier (and the page) writes is one `render` accepts;
    # the eval-banana summary is the same facts, field for field, as Python's.
    from test_export_eb import RUNS

    out = tmp_path / "b.tar.zst"
    do_export(copy_run(tmp_path, RUNS[name]), PROJECT, out)
    if tamper:
        out = _tampered_totals(out, tmp_path)
    node = _node(out)
    assert node["verdict"] == ("failed" if tamper else "verified")
    python = subprocess.run(
        [sys.executable, "-m", "bundler", "verify", str(out), "--json"], capture_output=True, timeout=120
    )
    assert node["summary"] == json.loads(python.stdout)["summary"]
    assert set(node["summary"]) >= {"checks", "recomputed", "pass_threshold", "cases_tree"}
    record = tmp_path / "node.json"
    record.write_text(json.dumps(node))
    page = tmp_path / "page.html"
    done = subprocess.run(
        [sys.executable, "-m", "bundler", "render", str(record), "--html", str(page), "-q"],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert node["summary"]["run_id"].encode() in page.read_bytes()


@pytest.mark.parametrize("removed", ["yaml", "script"])
def test_a_definition_file_removed_fails_the_same_claims_in_both(
    removed: str, tmp_path: Path
) -> None:
    """A check's YAML (or its script) taken out of the bag, every digest resealed: both
    verifiers fail the same claims. Without the YAML nothing names a script, so neither
    says bundle.json maps another script (a claim no file could decide)."""
    from test_export_eb import RUNS

    out = tmp_path / "b.tar.zst"
    do_export(copy_run(tmp_path, RUNS["default"]), PROJECT, out)
    bag = extract(out, tmp_path / "x")
    pattern = "eval_checks/fails.yaml" if removed == "yaml" else "scripts/fails.py"
    victim = next(p for p in bag.rglob("*") if p.as_posix().endswith(pattern))
    victim.unlink()
    tampered = _resealed(out, bag, tmp_path / "t.tar.zst")
    py = verify_bundle(str(tampered), VerifyOptions())
    node = _node(tampered)
    assert py.verdict is Verdict.FAILED and node["verdict"] == "failed"
    ours = {(c.group, c.subject, c.path) for c in py.failures()}
    theirs = {(c["group"], c["subject"], c["path"]) for c in node["claims"] if c["state"] == "failed"}
    assert ours == theirs
    maps_other = [s for _, s, _ in ours if "bundle.json's script is the one its YAML names" in s]
    assert (maps_other == []) == (removed == "yaml"), ours
