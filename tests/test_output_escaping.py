"""Output that cannot lie to the reader (issue 13 class 8, SPEC section 5 "Output").

Invariant: every string that comes from a bundle, a store, a run or a proof reaches a
person only through ``bundler.core.textsafe.shown`` (console) or ``shown_md`` (Markdown), so
no control character, ESC, CR, bidirectional control or invisible character from the
input is ever written raw, and no input can start a line of its own.

Tested by class: for each hostile class, bundles whose every free-text field holds it
(listing refs, details and reasons, report explanation, envelope superseded_reason, file
names inside the bag, bundle.json values that end in an error), run by the console
script as a subprocess; stdout, stderr and verification.md must hold no such character.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import repack
from conftest import EXPORTED_AT, REPO, run_cli

from bundler.core.textsafe import shown
from bundler.evalbook.export import ExportConfig, export_bundle

# One member per hostile class; each is embedded in a forged line of summary text.
CLASSES: dict[str, str] = {
    "esc-csi": "\x1b[2J\x1b[H",
    "c1-csi": "\x9b2J\x9d0;title\x9c",
    "cr": "\r",
    "lf": "\n",
    "nul-bel-bs-del": "\x00\x07\x08\x7f",
    "vt-ff-tab": "\x0b\x0c\t",
    "bidi-embed-override": "\u202a\u202b\u202c\u202d\u202e",
    "bidi-isolate": "\u2066\u2067\u2068\u2069",
    "bidi-marks": "\u200e\u200f\u061c",
    "zero-width": "\u200b\u200c\u200d\u2060\ufeff",
    "line-para-separators": "\u2028\u2029",
    "odd-spaces": "\u00a0\u2007\u202f\u3000",
    "soft-hyphen-fillers": "\u00ad\u3164\u115f",
    "tags-private": "\U000e0041\U000e007f\ue000",
}
FORGED = "Verdict:     VERIFIED"


def hostile(cls: str, field: str) -> str:
    payload = CLASSES[cls]
    return f"{field}{payload}{FORGED}{payload}Failed:      0{payload}"


def raw_hostile(text: str) -> list[str]:
    """Characters that must never reach output raw (newlines between lines excepted).

    Defined by Unicode category, independently of textsafe: controls, format characters,
    separators, surrogates, private use, unassigned, spaces other than U+0020, and the
    blank-drawing fillers.
    """
    bad = []
    for ch in text:
        if ch == "\n":
            continue
        cat = unicodedata.category(ch)
        if (
            cat in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
            or (cat == "Zs" and ch != " ")
            or ch in "\u3164\u115f\u1160\uffa0\u034f"
        ):
            bad.append(ch)
    return bad


def assert_clean(
    proc: subprocess.CompletedProcess[bytes], *, stdout: bool = True, traceback: bool = False
) -> str:
    """stdout (when human) and stderr hold no raw hostile character; returns both.

    No traceback either, unless ``traceback`` (``--verbose`` asks for one).
    """
    assert traceback or b"Traceback" not in proc.stderr, proc.stderr.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8")
    out = proc.stdout.decode("utf-8")
    assert raw_hostile(err) == [], err
    if stdout:
        assert raw_hostile(out) == [], out
    for text in (out, err):
        # The forged lines never start a line: only the real summary does.
        forged_starts = [line for line in text.splitlines() if line.startswith(FORGED)]
        assert len(forged_starts) <= 1
        assert not any(line.startswith("Failed:      0") for line in text.splitlines()) or (
            "Verdict:     FAILED" not in text
        )
    return out + err


# ------------------------------------------------------------------ hostile bundles


@pytest.fixture(scope="module")
def base_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """rpt-every-reason exported by bob: every listing reason, so every listing field."""
    from bundler.testing.fixturegen import build_fixture_store

    root = tmp_path_factory.mktemp("escaping")
    build_fixture_store(root / "store")
    out = root / "every-reason.tar.zst"
    export_bundle(
        ExportConfig(str(root / "store"), "rpt-every-reason", "bob", EXPORTED_AT, out=out)
    )
    return out


def _edit_fields(eb: repack.EditableBag, cls: str) -> None:
    b = eb.bundle
    unavailable = b["unavailable"]
    unavailable[0]["ref"] = hostile(cls, "ref") + unavailable[0]["ref"]
    for i, entry in enumerate(unavailable[1:], 1):
        if entry["detail"] is None:  # others hold a digest or a count the schema checks
            entry["detail"] = hostile(cls, f"detail{i}")
    b["redacted"][0]["ref"] = hostile(cls, "redacted-ref")
    b["redacted"][1]["ref"] = b["redacted"][1]["ref"] + hostile(cls, "suffix")
    eb.set_bundle(b)

    def body(value: dict[str, Any]) -> None:
        for check in value["checks"]:
            check["explanation"] = hostile(cls, "explanation")

    eb.edit_json("data/report/body.json", body)

    def envelope(value: dict[str, Any]) -> None:
        value["superseded_reason"] = hostile(cls, "superseded_reason")

    eb.edit_json("data/report/envelope.json", envelope)


def _edit_names(eb: repack.EditableBag, cls: str) -> None:
    # Files bundle.json does not name: their paths are reported, or, for a name the
    # archive reader refuses, the refusal naming the member is.
    eb.files[f"data/unnamed{CLASSES[cls]}.json"] = b"{}"
    eb.files[f"data/blobs/{hostile(cls, 'name')}"] = b"x"


def _edit_schema(eb: repack.EditableBag, cls: str) -> None:
    b = eb.bundle
    b["schema"] = hostile(cls, "schema")
    eb.set_bundle(b)


EDITS: dict[str, Callable[[repack.EditableBag, str], None]] = {
    "fields": _edit_fields,
    "names": _edit_names,
    "schema": _edit_schema,
}


@pytest.fixture(scope="module")
def hostile_bundles(base_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hostile")
    base = repack.open_bundle(base_bundle)
    made = {}
    for cls in CLASSES:
        for kind, edit in EDITS.items():
            eb = base.copy()
            edit(eb, cls)
            made[f"{cls}/{kind}"] = repack.write_bundle(eb, root / f"{cls}-{kind}.tar.zst")
    return made


def _verify_in_process(path: Path) -> Any:
    from bundler.bundles.verify import verify_bundle
    from bundler.core.claims import VerifyOptions

    return verify_bundle(str(path), VerifyOptions())


@pytest.mark.parametrize("cls", list(CLASSES))
def test_verify_console_and_markdown_escape_every_field(
    cls: str, hostile_bundles: dict[str, Path], tmp_path: Path
) -> None:
    # One run writes both: the console summary on stdout and verification.md.
    out_dir = tmp_path / "out"
    proc = run_cli("verify", str(hostile_bundles[f"{cls}/fields"]), "--output-dir", str(out_dir))
    assert proc.returncode == 1, proc.stderr.decode()
    assert_clean(proc)
    md = (out_dir / "verification.md").read_text("utf-8")
    assert raw_hostile(md) == [], md
    # Markdown: a value cannot add a heading or an HTML tag of its own.
    assert sum(1 for line in md.splitlines() if line.startswith("# ")) == 1
    assert "<" not in md.replace("\\<", "")
    record = json.loads((out_dir / "verification.json").read_text("utf-8"))
    assert record["verdict"] == "failed"
    # The other bundles of the class (names the reader refuses, a forged schema value):
    # several at once, as an auditor would.
    others = [str(hostile_bundles[f"{cls}/{kind}"]) for kind in EDITS if kind != "fields"]
    proc = run_cli("verify", *others)
    assert proc.returncode in (1, 3), proc.stderr.decode()
    text = assert_clean(proc)
    assert sum(1 for line in text.splitlines() if line.startswith("Verdict:")) == len(others)


@pytest.mark.parametrize("cls", list(CLASSES))
@pytest.mark.parametrize("kind", [k for k in EDITS if k != "fields"])
def test_markdown_of_every_bundle_is_clean(
    cls: str, kind: str, hostile_bundles: dict[str, Path]
) -> None:
    from bundler.report.render import verification_markdown

    md = verification_markdown(_verify_in_process(hostile_bundles[f"{cls}/{kind}"]))
    assert raw_hostile(md) == [], md


@pytest.mark.parametrize("cls", list(CLASSES))
def test_inspect_escapes_every_field(cls: str, hostile_bundles: dict[str, Path]) -> None:
    proc = run_cli("inspect", str(hostile_bundles[f"{cls}/fields"]))
    assert proc.returncode == 0, proc.stderr.decode()
    assert_clean(proc)
    proc = run_cli("inspect", str(hostile_bundles[f"{cls}/schema"]))
    assert proc.returncode == 3, proc.stderr.decode()
    assert "unknown bundle schema" in assert_clean(proc)


def test_the_hostile_text_does_reach_the_output_escaped(hostile_bundles: dict[str, Path]) -> None:
    # Not clean by silence: the listing refs, the unnamed file and the bad schema are shown.
    proc = run_cli(
        "verify",
        *(str(hostile_bundles[f"esc-csi/{kind}"]) for kind in ("fields", "names", "schema")),
    )
    text = assert_clean(proc)
    assert shown(hostile("esc-csi", "redacted-ref")) in text
    assert "data/blobs/name\\x1b[2J\\x1b[H" in text  # quoted by the reader, escaped once where shown
    assert "\\x1b[2J\\x1b[H" in text and "\x1b" not in text
    # For characters repr leaves alone, the claim's path is shown directly.
    proc = run_cli("verify", str(hostile_bundles["bidi-embed-override/names"]))
    text = assert_clean(proc)
    assert "data/unnamed\\u202a\\u202b\\u202c\\u202d\\u202e.json" in text


def test_markdown_shows_the_escapes_as_the_console_does(hostile_bundles: dict[str, Path]) -> None:
    from bundler.report.render import verification_markdown

    md = verification_markdown(_verify_in_process(hostile_bundles["bidi-embed-override/fields"]))
    # shown_md doubles shown's backslashes: rendered, "\\u202e" reads as \u202e.
    assert "\\\\u202e" in md and "\u202e" not in md


def test_verification_json_keeps_the_exact_strings(hostile_bundles: dict[str, Path]) -> None:
    proc = run_cli("verify", "--json", str(hostile_bundles["esc-csi/fields"]))
    record = json.loads(proc.stdout)
    assert record["verdict"] == "failed"
    assert any("\x1b[2J" in (c["subject"] or "") for c in record["claims"])


# ------------------------------------------------------------- errors and arguments

# Every class at once (argv and the environment cannot hold NUL); textsafe's own tests
# take each character alone.
ARGUMENT_TEXT = "arg" + "".join(CLASSES.values()).replace("\x00", "") + FORGED


def _error_cases(tmp_path: Path, bundle: Path) -> list[tuple[str, ...]]:
    value = ARGUMENT_TEXT
    store = tmp_path / "store"
    (store / "reports").mkdir(parents=True, exist_ok=True)
    out = ("--out", str(tmp_path / "x.tar.zst"))
    return [
        ("export", "--store", str(store), "--report", value, "--principal", "alice", *out),
        ("export", "--store", str(tmp_path / value), "--report", "r", "--principal", "alice", *out),
        (
            "export",
            "--store",
            str(store),
            "--report",
            "r",
            "--principal",
            "alice",
            *out,
            "--exported-at",
            value,
        ),
        ("export", "--store", str(store), "--report", "r", "--principal", value, *out),
        ("sign", str(tmp_path / value), "--key", str(tmp_path / "key")),
        ("digest", str(tmp_path / value)),
        ("--verbose", "digest", str(tmp_path / value)),
        ("digest", "--framed", value, f"{value}={tmp_path / value}"),
        ("verify", str(tmp_path / value)),
        ("inspect", str(tmp_path / value)),
        ("verify", "--max-bytes", value, str(bundle)),
        ("verify", "--expect-bundle-digest", value, str(bundle)),
        (value,),
    ]


@pytest.mark.parametrize("case", range(13))
def test_error_messages_are_escaped(case: int, base_bundle: Path, tmp_path: Path) -> None:
    args = _error_cases(tmp_path, base_bundle)[case]
    proc = run_cli(*args, env={"SOURCE_DATE_EPOCH": "1764460800"})
    assert proc.returncode in (1, 2, 3), (args, proc.stderr.decode())
    text = assert_clean(proc, traceback="--verbose" in args)
    assert text.strip(), args


def test_source_date_epoch_is_escaped_in_its_error(tmp_path: Path) -> None:
    proc = run_cli(
        "export",
        "--store",
        str(tmp_path),
        "--report",
        "r",
        "--principal",
        "alice",
        env={"SOURCE_DATE_EPOCH": "1" + ARGUMENT_TEXT},
    )
    assert proc.returncode == 2, proc.stderr.decode()
    assert "SOURCE_DATE_EPOCH" in assert_clean(proc)


# ------------------------------------------------------------ eval-banana runs in place

EB = REPO / "fixtures" / "eval-banana"


@pytest.mark.parametrize("cls", list(CLASSES))
def test_eval_banana_run_text_is_escaped(cls: str, tmp_path: Path) -> None:
    source = sorted((EB / "runs" / "default").iterdir())[0]
    run = tmp_path / "run"
    shutil.copytree(source, run)
    report_path = run / "report.json"
    report = json.loads(report_path.read_text("utf-8"))
    report["run_id"] = hostile(cls, "run_id")
    for check in report["checks"]:
        check["description"] = hostile(cls, "description")
        check["reason"] = hostile(cls, "reason")
        check["error_detail"] = hostile(cls, "error_detail")
    report_path.write_text(json.dumps(report), "utf-8")
    out_dir = tmp_path / "o"
    proc = run_cli(
        "verify", str(run), "--project", str(EB / "project"), "--output-dir", str(out_dir)
    )
    assert proc.returncode in (1, 3), proc.stderr.decode()
    assert_clean(proc)
    md = (out_dir / "verification.md").read_text("utf-8")
    assert raw_hostile(md) == [], md


def test_a_terminal_that_is_not_utf8_gets_escapes_not_a_crash(
    hostile_bundles: dict[str, Path],
) -> None:
    # CJK or accents from a bundle on an ASCII-only stderr: backslash escapes, exit as usual.
    proc = subprocess.run(
        [sys.executable, "-m", "bundler", "verify", str(hostile_bundles["bidi-isolate/fields"])],
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONIOENCODING": "ascii", "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert proc.returncode == 1, proc.stderr.decode("ascii", "replace")
    assert b"Traceback" not in proc.stderr
