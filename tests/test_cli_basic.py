"""The small commands (SPEC sections 2, 7 and 8): digest, canonicalize, --help, --version.

Every expected value is written out by hand here (canonical bytes, framed bytes) and
hashed with hashlib; the commands run as the installed console script.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import struct
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli

# One document exercising the JCS rules: key order by UTF-16 code units (U+FF61 sorts
# after U+1F600 there, though not in UTF-8), ECMAScript number forms, and escaping of
# only '"', '\' and U+0000..U+001F (with the short forms for \t).
MESSY = (
    b'{\n  "z": 1.0,\n  "a": {"y": "\\u00e9", "b": [1e21, 1E20, -0.0, 0.5, 1e-7, 0.000001, 5e-324,'
    b' 1.5e300, 9007199254740991]},\n  "\\u20ac": "x\\ty\\u001f\\/\\u2028\\\\\\"",\n'
    b'  "\\ud83d\\ude00": true,\n  "\\uff61": null,\n  "": [],\n  "A": {}\n}\n'
)
CANONICAL = (
    '{"":[],"A":{},"a":{"b":[1e+21,100000000000000000000,0,0.5,1e-7,0.000001,5e-324,1.5e+300,'
    '9007199254740991],"y":"\u00e9"},"z":1,"\u20ac":"x\\ty\\u001f/\u2028\\\\\\"",'
    '"\U0001f600":true,"\uff61":null}'
).encode("utf-8")
SCORER_TAG = "evalbook/scorer-version-sha256/v1"


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def assert_one_line_error(
    proc: subprocess.CompletedProcess[bytes], *, code: int, names: str, rule: str | None = None
) -> None:
    """Exit ``code``, empty stdout, exactly one stderr line naming ``names`` and the rule."""
    stderr = proc.stderr.decode()
    assert proc.returncode == code, stderr
    assert proc.stdout == b""
    assert len(stderr.splitlines()) == 1 and stderr.endswith("\n"), stderr
    assert names in stderr, stderr
    if rule is not None:
        rest = stderr.replace(names, "")
        assert re.search(rule, rest, re.IGNORECASE), f"rule /{rule}/ not in {stderr!r}"


@pytest.fixture
def messy(tmp_path: Path) -> Path:
    path = tmp_path / "messy.json"
    path.write_bytes(MESSY)
    return path


def test_the_test_document_parses_as_intended() -> None:
    # Guard the hand-written constants: same value, different bytes.
    assert json.loads(MESSY) == json.loads(CANONICAL)
    assert MESSY != CANONICAL


# ------------------------------------------------------------------------ digest


def test_digest_raw_is_sha256_of_the_bytes(messy: Path) -> None:
    for args in (["digest", "--raw", str(messy)], ["digest", str(messy)]):
        proc = run_cli(*args)
        assert proc.returncode == 0, proc.stderr.decode()
        assert proc.stdout.decode() == sha(MESSY) + "\n"
        assert proc.stderr == b""


def test_digest_raw_from_stdin() -> None:
    data = b"\x00\xffnot json at all\r\n"
    proc = run_cli("digest", "--raw", "-", input=data)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode() == sha(data) + "\n"


def test_digest_json_is_sha256_of_the_canonical_bytes(messy: Path) -> None:
    proc = run_cli("digest", "--canonical", str(messy))
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode() == sha(CANONICAL) + "\n"
    assert sha(CANONICAL) != sha(MESSY)
    stdin = run_cli("digest", "--canonical", "-", input=MESSY)
    assert stdin.stdout == proc.stdout


def test_digest_json_of_canonical_bytes_equals_their_raw_digest(tmp_path: Path) -> None:
    # Without 1e20, whose canonical form is an integer beyond 2^53 that cannot be read back.
    canonical = CANONICAL.replace(b"100000000000000000000,", b"")
    path = tmp_path / "c.json"
    path.write_bytes(canonical)
    raw = run_cli("digest", "--raw", str(path))
    as_json = run_cli("digest", "--canonical", str(path))
    assert raw.stdout == as_json.stdout == (sha(canonical) + "\n").encode()


def test_canonicalize_writes_exactly_the_jcs_bytes(messy: Path) -> None:
    proc = run_cli("canonicalize", str(messy))
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == CANONICAL  # no trailing newline, nothing else
    assert proc.stderr == b""
    assert run_cli("canonicalize", "-", input=MESSY).stdout == CANONICAL


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        (b"[1.0, 100, 1e2, 0.1, -1.5e-10, 1e300]", b"[1,100,100,0.1,-1.5e-10,1e+300]"),
        (b'  "plain"  ', b'"plain"'),
        (b'{"b": {"d": 1, "c": 2}, "a": [{"y": 1, "x": 2}]}', b'{"a":[{"x":2,"y":1}],"b":{"c":2,"d":1}}'),
        (b'"\\u0000\\b\\f\\n\\r\\u007f"', b'"\\u0000\\b\\f\\n\\r\x7f"'),
        ("[\"\u00e9\", \"\\u00e9\"]".encode(), "[\"\u00e9\",\"\u00e9\"]".encode()),
        (b"[-9007199254740991, 9007199254740991]", b"[-9007199254740991,9007199254740991]"),
        (b"[" * 64 + b"]" * 64, b"[" * 64 + b"]" * 64),
    ],
)
def test_canonicalize_small_documents(tmp_path: Path, text: bytes, canonical: bytes) -> None:
    path = tmp_path / "doc.json"
    path.write_bytes(text)
    proc = run_cli("canonicalize", str(path))
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == canonical


def framed_by_hand(tag: str, components: list[tuple[str, bytes]]) -> bytes:
    out = tag.encode("ascii") + b"\x00"
    for name, content in components:
        raw = name.encode("utf-8")
        out += struct.pack(">Q", len(raw)) + raw + struct.pack(">Q", len(content)) + content
    return out


def test_digest_framed(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    a.write_bytes(b'{"scorer_id":"x"}')
    b.write_bytes("caf\u00e9\n".encode())
    c.write_bytes(b"")
    # "files/\u00e9.txt" is 11 characters but 12 bytes: lengths are of the UTF-8 bytes.
    components = [("scorer.json", a.read_bytes()), ("files/\u00e9.txt", b.read_bytes()), ("files/empty", b"")]
    framed = framed_by_hand(SCORER_TAG, components)
    assert framed[len(SCORER_TAG) + 1 + 8 + 11 : len(SCORER_TAG) + 1 + 8 + 11 + 8] == struct.pack(">Q", 17)
    proc = run_cli("digest", "--framed", SCORER_TAG, f"scorer.json={a}", f"files/\u00e9.txt={b}", f"files/empty={c}")
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode() == sha(framed) + "\n"

    # The order given is the order hashed.
    swapped = run_cli("digest", "--framed", SCORER_TAG, f"files/\u00e9.txt={b}", f"scorer.json={a}", f"files/empty={c}")
    assert swapped.stdout.decode() == sha(framed_by_hand(SCORER_TAG, [components[1], components[0], components[2]])) + "\n"
    assert swapped.stdout != proc.stdout


def test_digest_framed_binds_the_split_between_name_and_content(tmp_path: Path) -> None:
    # Without the length prefixes these two would hash the same bytes.
    one, two = tmp_path / "one", tmp_path / "two"
    one.write_bytes(b"bc")
    two.write_bytes(b"c")
    first = run_cli("digest", "--framed", "t/v1", f"a={one}")
    second = run_cli("digest", "--framed", "t/v1", f"ab={two}")
    assert first.stdout.decode() == sha(framed_by_hand("t/v1", [("a", b"bc")])) + "\n"
    assert second.stdout.decode() == sha(framed_by_hand("t/v1", [("ab", b"c")])) + "\n"
    assert first.stdout != second.stdout


def test_digest_framed_from_stdin(tmp_path: Path) -> None:
    proc = run_cli("digest", "--framed", "t/v1", "input=-", input=b"streamed")
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode() == sha(framed_by_hand("t/v1", [("input", b"streamed")])) + "\n"


def test_digest_framed_recomputes_a_pinned_scorer_digest(fixture_store: Path) -> None:
    base = fixture_store / "scorers/sc-judge/3"
    proc = run_cli(
        "digest", "--framed", SCORER_TAG,
        f"scorer.json={base / 'scorer.json'}",
        f"files/prompt.md={base / 'files/prompt.md'}",
        f"files/rubric/criteria.txt={base / 'files/rubric/criteria.txt'}",
    )
    assert proc.returncode == 0, proc.stderr.decode()
    body = json.loads((fixture_store / "reports/rpt-clean/body.json").read_bytes())
    pinned = next(c["scorer_ref"]["digest"] for c in body["checks"] if c["scorer_ref"]["id"] == "sc-judge")
    assert proc.stdout.decode() == pinned + "\n"


# ------------------------------------------------------------------- bad input

BAD_JSON = [
    ("truncated", b'{"a": ', r"json"),
    ("trailing", b"{} x", r"json"),
    ("empty", b"", r"json"),
    ("duplicate-keys", b'{"a": 1, "b": 2, "a": 1}', r"duplicate"),
    ("nan", b'{"a": NaN}', r"nan|finite|not valid json"),
    ("infinity", b"[-Infinity]", r"infinit|finite|not valid json"),
    ("overflow", b"[1e400]", r"infinit|finite|range|overflow"),
    ("big-integer", b"[9007199254740992]", r"integer|2\^53|range|safe"),
    ("lone-surrogate", b'["\\ud800"]', r"surrogate"),
    ("invalid-utf8", b'["\xff"]', r"utf-?8"),
    ("bom", b'\xef\xbb\xbf{"a":1}', r"bom|byte order mark"),
    ("too-deep", b"[" * 65 + b"]" * 65, r"depth|deep|nest"),
]


@pytest.mark.parametrize(("label", "data", "rule"), BAD_JSON, ids=[b[0] for b in BAD_JSON])
def test_canonicalize_rejects_bad_input_naming_the_file(tmp_path: Path, label: str, data: bytes, rule: str) -> None:
    path = tmp_path / f"{label}.json"
    path.write_bytes(data)
    assert_one_line_error(run_cli("canonicalize", str(path)), code=3, names=str(path), rule=rule)


@pytest.mark.parametrize(("label", "data", "rule"), BAD_JSON, ids=[b[0] for b in BAD_JSON])
def test_digest_json_rejects_bad_input_naming_stdin(label: str, data: bytes, rule: str) -> None:
    assert_one_line_error(run_cli("digest", "--canonical", "-", input=data), code=3, names="<stdin>", rule=rule)


def test_unreadable_inputs(tmp_path: Path) -> None:
    missing = tmp_path / "absent.json"
    assert_one_line_error(run_cli("digest", "--raw", str(missing)), code=3, names=str(missing), rule="read|no such")
    assert_one_line_error(run_cli("digest", "--canonical", str(missing)), code=3, names=str(missing))
    assert_one_line_error(run_cli("canonicalize", str(missing)), code=3, names=str(missing))
    assert_one_line_error(run_cli("canonicalize", str(tmp_path)), code=3, names=str(tmp_path))
    assert_one_line_error(
        run_cli("digest", "--framed", "t/v1", f"x={missing}"), code=3, names=str(missing), rule="read|no such"
    )


@pytest.mark.parametrize(
    "args",
    [
        ["digest", "--framed", "t/v1"],  # no components
        ["digest", "--framed", "t/v1", "no-separator"],
        ["digest", "--framed", "t/v1", "=file"],  # empty name
        ["digest", "--framed", "t/\u00e9", "a=-"],  # the tag is ASCII
        ["digest"],
        ["digest", "-", "-"],  # stdin once
        ["digest", "--framed", "t/v1", "--canonical", "a=-"],
        ["canonicalize"],
        ["no-such-command"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    proc = run_cli(*args, input=b"")
    assert proc.returncode == 2, proc.stderr.decode()
    assert proc.stdout == b""
    assert proc.stderr.strip()


# ------------------------------------------------------------- help and version

# The main options of each command of SPEC section 7, as its --help must show them.
MAIN_OPTIONS = {
    "reports": ["--store", "--json", "--endpoint-url", "--quiet"],
    "export": ["--store", "--report", "--principal", "--out", "--exported-at", "--level", "--strict", "--upload"],
    "verify": ["--expect-bundle-digest", "--expect-report-digest", "--strict", "--json", "--output-dir",
               "--max-bytes", "--html"],
    "inspect": ["--json"],
    "extract": ["--expect-bundle-digest", "--expect-report-digest", "--strict", "--max-bytes"],
    "upload": ["--retain-until"],
    "list": ["--report", "--json"],
    "download": [],
    "export-eb": ["--project", "--out", "--exported-at", "--level", "--strict", "--json"],
    "sign": ["--key"],
    "prove": ["--case", "--out"],
    "check-proof": ["--allowed-signers", "--expect-bundle-digest"],
    "audit": ["--json", "--output-dir", "--html"],
    "render": ["--html", "--json", "--quiet"],
    "digest": ["--canonical", "--json", "--raw", "--framed"],
    "canonicalize": [],
    "import-inspect": ["--store", "--task", "--dataset", "--decision", "--report-id", "--check", "--json"],
    "import-lm-eval": ["--samples", "--store", "--task", "--decision", "--report-id", "--check", "--json"],
    "fixity": ["--level", "--ledger", "--sample", "--older-than", "--limit", "--limit-bytes",
               "--workers", "--scheduler", "--record", "--key", "--json"],
}


def registered_commands() -> list[str]:
    proc = run_cli("--help")
    assert proc.returncode == 0
    text = proc.stdout.decode()
    section = text.split("Commands:", 1)[1]
    names = []
    for line in section.splitlines():
        match = re.match(r"^  ([a-z][a-z-]*)(\s|$)", line)
        if match:
            names.append(match.group(1))
        elif line.strip() and not line.startswith("   "):
            break
    return names


def test_top_level_help() -> None:
    proc = run_cli("--help")
    assert proc.returncode == 0
    text = proc.stdout.decode()
    assert "Usage:" in text and "--version" in text
    assert "Exit codes" in text
    assert proc.stderr == b""
    assert run_cli("-h").stdout == proc.stdout


def test_every_registered_command_has_a_working_help() -> None:
    commands = registered_commands()
    assert {"export", "verify", "digest", "canonicalize"} <= set(commands)
    unknown = sorted(set(commands) - set(MAIN_OPTIONS))
    assert unknown == [], f"commands not in SPEC section 7 (add their options here): {unknown}"
    for command in commands:
        proc = run_cli(command, "--help")
        assert proc.returncode == 0, (command, proc.stderr.decode())
        text = proc.stdout.decode()
        assert f"evalbook-bundle {command}" in text, text
        for option in MAIN_OPTIONS[command]:
            assert re.search(re.escape(option) + r"\b", text), f"{command} --help lacks {option}"
        assert "Exit codes" in text, command


def test_every_spec_command_is_registered() -> None:
    missing = sorted(set(MAIN_OPTIONS) - set(registered_commands()))
    assert missing == [], f"SPEC section 7 commands missing from the CLI: {missing}"


def test_version() -> None:
    proc = run_cli("--version")
    assert proc.returncode == 0
    assert proc.stderr == b""
    version = importlib.metadata.version("evalbook-bundle")
    assert proc.stdout.decode() == f"evalbook-bundle, version {version}\n"
