"""The verifier end to end (SPEC sections 5, 7, 8): fixture bundles, trust anchors, output,
hostile archives and hostile bundle.json documents, and ``inspect``.

Expected values come from the fixture store or from the bundle's own bytes hashed here
with hashlib, never from the verifier's output.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hostile
import pytest
import repack
from conftest import SCENARIOS, run_cli
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from pytest_socket import SocketBlockedError, disable_socket, enable_socket

from bundler.archive.bag_reader import MAX_DOCUMENT_BYTES
from bundler.bundles.verify import verify_bundle
from bundler.core import schemas
from bundler.core.claims import State, Verdict, VerifyOptions
from bundler.core.errors import SchemaError
from bundler.evalbook.listing import REASON_EXPLANATIONS

REPO = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((REPO / "schemas" / "verification.schema.json").read_text("utf-8"))
KEYS = [f"{s}/{p}" for s in SCENARIOS for p in ("alice", "bob")]
LABELS = ("Bundle", "Report", "Anchor", "Verdict", "Proven", "Unprovable", "Failed")
SELF_ONLY = "self-consistency only"


# ----------------------------------------------------------------------------- helpers


def validate_verification(doc: Any) -> None:
    """Assert ``doc`` is valid against schemas/verification.schema.json.

    Checked twice: by the project's validator (ECMA-262 patterns) and by the reference
    implementation, so a keyword one of them reads differently cannot hide a problem.
    """
    schemas.validate("verification", doc, source="verification")
    errors = sorted(Draft202012Validator(SCHEMA).iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "; ".join(f"{list(e.path)}: {e.message}" for e in errors[:5])


def listing(path: Path) -> list[dict[str, Any]]:
    """The unavailable and redacted entries of a bundle, read from its bundle.json."""
    bundle = repack.open_bundle(path).bundle
    return [*bundle["unavailable"], *bundle["redacted"]]


def listed_reasons(path: Path) -> set[str]:
    return {e["reason"] for e in listing(path)}


def bundle_digest_of(path: Path) -> str:
    """sha256 of the stored data/bundle.json bytes (stored canonical, so its JSON digest)."""
    return (
        "sha256:" + hashlib.sha256(repack.open_bundle(path).files["data/bundle.json"]).hexdigest()
    )


def report_digest_of(store: Path, report_id: str) -> str:
    return (
        "sha256:"
        + hashlib.sha256((store / "reports" / report_id / "body.json").read_bytes()).hexdigest()
    )


def json_lines(stdout: bytes) -> list[dict[str, Any]]:
    lines = stdout.decode("utf-8").splitlines()
    return [json.loads(line) for line in lines]


def labels(stderr: bytes) -> dict[str, str]:
    """The first value of each `Label: value` line of a console summary."""
    found: dict[str, str] = {}
    for line in stderr.decode("utf-8").splitlines():
        match = re.match(r"^([A-Z][A-Za-z ]*):\s+(.*)$", line)
        if match:
            found.setdefault(match.group(1), match.group(2))
    return found


def error_lines(stderr: bytes) -> list[str]:
    """The error lines on stderr (with --json, the only lines there: SPEC 7)."""
    return [
        line
        for line in stderr.decode("utf-8").splitlines()
        if line.startswith(("Error:", "evalbook-bundle: error: "))
    ]


@pytest.fixture(scope="module")
def tampered(bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """rpt-clean/alice with one unnamed file added under data/ (every manifest recomputed)."""
    eb = repack.open_bundle(bundles["rpt-clean/alice"])
    eb.files["data/notes.txt"] = b"added after export\n"
    return repack.write_bundle(eb, tmp_path_factory.mktemp("tampered") / "tampered.tar.zst")


@pytest.fixture(scope="module")
def hostile_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An archive with a symbolic link member."""
    top = "evalbook-bundle-rpt-clean"
    data = hostile.zstd(
        hostile.tar(
            [
                hostile.dir_member(top),
                hostile.file_member(f"{top}/bagit.txt", b"BagIt-Version: 1.0\n"),
                hostile.header(f"{top}/data", typeflag=b"2", linkname="/etc"),
            ]
        )
    )
    path = tmp_path_factory.mktemp("hostile") / "symlink.tar.zst"
    path.write_bytes(data)
    return path


# ------------------------------------------------------------------ fixture bundles


def test_every_fixture_bundle_verifies_through_the_cli(bundles: dict[str, Path]) -> None:
    paths = [bundles[k] for k in KEYS]
    done = run_cli("verify", "--json", *map(str, paths))
    assert done.returncode == 0, done.stderr.decode()
    results = json_lines(done.stdout)
    assert [r["source"] for r in results] == [str(p) for p in paths]
    for key, path, result in zip(KEYS, paths, results, strict=True):
        validate_verification(result)
        assert result["verdict"] == "verified", (key, result["error"])
        assert result["counts"]["failed"] == 0, key
        assert set(result["unprovable_by_reason"]) == listed_reasons(path), key
        assert result["report_id"] == key.split("/")[0]


@pytest.mark.parametrize("key", KEYS)
def test_every_fixture_bundle_verifies_through_the_api(
    key: str, bundles: dict[str, Path], fixture_store: Path
) -> None:
    path = bundles[key]
    report_id = key.split("/")[0]
    result = verify_bundle(str(path), VerifyOptions())
    assert result.verdict is Verdict.VERIFIED, [c.to_json() for c in result.failures()]
    assert result.exit_code == 0
    assert result.bundle_digest == bundle_digest_of(path)
    assert result.report_id == report_id
    assert result.report_digest == report_digest_of(fixture_store, report_id)
    assert set(result.unprovable_by_reason()) == listed_reasons(path)
    assert all(c.state is not State.FAILED for c in result.claims)
    # Every claim group of SPEC section 5 was exercised.
    assert {c.group for c in result.claims if c.state is State.PROVEN} >= {1, 2, 3, 7, 8, 10}


def test_strict_fails_every_bundle_that_lists_anything(bundles: dict[str, Path]) -> None:
    paths = [bundles[k] for k in KEYS]
    done = run_cli("verify", "--strict", "--json", *map(str, paths))
    results = json_lines(done.stdout)
    expected = {k: ("failed" if listing(bundles[k]) else "verified") for k in KEYS}
    assert {k: r["verdict"] for k, r in zip(KEYS, results, strict=True)} == expected
    assert "failed" in expected.values() and expected["rpt-clean/alice"] == "verified"
    assert done.returncode == 1
    for result in results:
        validate_verification(result)
        assert result["strict"] is True
        assert result["counts"]["unprovable"] == 0
        for claim in result["claims"]:
            if claim["state"] == "failed":
                assert claim["detail"].startswith("--strict"), claim
                assert claim["reason"] in listed_reasons(Path(result["source"]))


def test_strict_passes_a_bundle_with_nothing_listed(bundles: dict[str, Path]) -> None:
    done = run_cli("verify", "--strict", str(bundles["rpt-clean/alice"]))
    assert done.returncode == 0, done.stderr.decode()
    assert labels(done.stdout)["Verdict"].startswith("VERIFIED")


# -------------------------------------------------------------------------- offline


@pytest.fixture
def no_network() -> Iterator[None]:
    disable_socket()
    try:
        yield
    finally:
        enable_socket()


@pytest.mark.usefixtures("no_network")
@pytest.mark.parametrize("key", ["rpt-clean/alice", "rpt-every-reason/bob", "rpt-sso-traces/alice"])
def test_verify_is_offline(key: str, bundles: dict[str, Path]) -> None:
    # The block is in force (pytest-socket warns, then raises).
    with pytest.raises(SocketBlockedError), pytest.warns(UserWarning, match="socket"):
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    result = verify_bundle(str(bundles[key]), VerifyOptions())
    assert result.verdict is Verdict.VERIFIED


# -------------------------------------------------------------- extracted directory


def write_bag_dir(path: Path, parent: Path) -> Path:
    """Write the bag of archive ``path`` into ``parent`` with plain file writes."""
    eb = repack.open_bundle(path)
    root = parent / eb.top
    for rel, data in eb.files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


@pytest.mark.parametrize("key", ["rpt-clean/alice", "rpt-every-reason/bob"])
def test_extracted_bag_directory_verifies(
    key: str, bundles: dict[str, Path], tmp_path: Path
) -> None:
    root = write_bag_dir(bundles[key], tmp_path)
    done = run_cli("verify", "--json", str(root))
    assert done.returncode == 0, done.stderr.decode()
    result = json.loads(done.stdout)
    validate_verification(result)
    assert result["verdict"] == "verified"
    assert result["bundle_digest"] == bundle_digest_of(bundles[key])
    from_archive = verify_bundle(str(bundles[key]), VerifyOptions())
    assert result["counts"] == from_archive.counts()


def test_directory_with_a_symlink_is_refused(bundles: dict[str, Path], tmp_path: Path) -> None:
    root = write_bag_dir(bundles["rpt-clean/alice"], tmp_path)
    (root / "data" / "passwd").symlink_to("/etc/passwd")
    done = run_cli("verify", str(root))
    assert done.returncode == 3
    (line,) = error_lines(done.stdout)
    assert "data/passwd" in line and "symbolic link" in line


def test_directory_replaced_by_a_symlink_is_refused(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    root = write_bag_dir(bundles["rpt-clean/alice"], tmp_path / "real")
    link = tmp_path / "evalbook-bundle-rpt-clean"
    link.symlink_to(root, target_is_directory=True)
    done = run_cli("verify", str(link))
    assert done.returncode == 3
    assert len(error_lines(done.stdout)) == 1


def test_directory_with_a_fifo_is_refused(bundles: dict[str, Path], tmp_path: Path) -> None:
    root = write_bag_dir(bundles["rpt-clean/alice"], tmp_path)
    os.mkfifo(root / "data" / "pipe")
    done = run_cli("verify", str(root), timeout=30)
    assert done.returncode == 3
    (line,) = error_lines(done.stdout)
    assert "data/pipe" in line and "not a regular file" in line


# ---------------------------------------------------------------------- trust anchor


def test_without_an_anchor_the_result_is_self_consistency_only(bundles: dict[str, Path]) -> None:
    done = run_cli("verify", "--json", str(bundles["rpt-clean/alice"]))
    assert done.returncode == 0
    assert done.stderr == b""  # SPEC 7: --json prints no human summary
    anchor = json.loads(done.stdout)["anchor"]
    assert SELF_ONLY in anchor["description"]
    assert anchor["self_consistent_only"] is True
    assert anchor["expected_bundle_digest"] is None and anchor["expected_report_digest"] is None


@pytest.mark.parametrize("flag", ["--expect-bundle-digest", "--expect-report-digest"])
def test_right_anchor_verifies_and_is_printed(
    flag: str, bundles: dict[str, Path], fixture_store: Path
) -> None:
    path = bundles["rpt-clean/bob"]
    digest = (
        bundle_digest_of(path)
        if flag == "--expect-bundle-digest"
        else report_digest_of(fixture_store, "rpt-clean")
    )
    done = run_cli("verify", "--json", flag, digest, str(path))
    assert done.returncode == 0, done.stderr.decode()
    result = json.loads(done.stdout)
    anchor_line = result["anchor"]["description"]
    assert SELF_ONLY not in anchor_line and digest in anchor_line
    validate_verification(result)
    key = "expected_bundle_digest" if flag == "--expect-bundle-digest" else "expected_report_digest"
    assert result["anchor"][key] == digest
    assert result["anchor"]["self_consistent_only"] is False


@pytest.mark.parametrize(
    ("flag", "group"), [("--expect-bundle-digest", 2), ("--expect-report-digest", 3)]
)
def test_wrong_anchor_fails(
    flag: str, group: int, bundles: dict[str, Path], fixture_store: Path
) -> None:
    path = bundles["rpt-clean/alice"]
    # The superseded report has the same checks: a plausible but wrong anchor.
    if flag == "--expect-bundle-digest":
        wrong, right = bundle_digest_of(bundles["rpt-superseded/alice"]), bundle_digest_of(path)
    else:
        wrong, right = (
            report_digest_of(fixture_store, "rpt-superseded"),
            report_digest_of(fixture_store, "rpt-clean"),
        )
    assert wrong != right
    done = run_cli("verify", "--json", flag, wrong, str(path))
    assert done.returncode == 1
    result = json.loads(done.stdout)
    validate_verification(result)
    assert result["verdict"] == "failed"
    (failure,) = [c for c in result["claims"] if c["state"] == "failed"]
    assert (failure["group"], failure["expected"], failure["observed"]) == (group, wrong, right)
    human = run_cli("verify", flag, wrong, str(path))
    assert labels(human.stdout)["Verdict"].startswith("FAILED")


@pytest.mark.parametrize("flag", ["--expect-bundle-digest", "--expect-report-digest"])
@pytest.mark.parametrize(
    "value",
    [
        "sha256:" + "A" * 64,
        "sha512:" + "a" * 64,
        "a" * 64,
        "sha256:" + "a" * 64 + "\n",
    ],
)
def test_malformed_expected_digest_is_a_usage_error(
    flag: str, value: str, bundles: dict[str, Path]
) -> None:
    done = run_cli("verify", flag, value, str(bundles["rpt-clean/alice"]))
    assert done.returncode == 2
    assert done.stdout == b""
    assert flag in done.stderr.decode()


# ---------------------------------------------------------------------------- output


def test_console_summary_has_every_label(bundles: dict[str, Path]) -> None:
    done = run_cli("verify", "--json", str(bundles["rpt-every-reason/bob"]))
    assert done.stderr == b""  # SPEC 7: --json prints no human summary
    result = json.loads(done.stdout)
    human = run_cli("verify", str(bundles["rpt-every-reason/bob"]))
    found = labels(human.stdout)
    assert set(LABELS) <= set(found), found
    assert result["bundle_digest"] in human.stdout.decode()
    assert found["Report"].split() == [result["report_id"], result["report_digest"]]
    assert found["Verdict"] == "VERIFIED"
    for state in ("proven", "unprovable", "failed"):
        n = result["counts"][state]
        assert found[state.capitalize()] == f"{n} claim" + ("" if n == 1 else "s")
    text = human.stdout.decode()
    for reason, count in result["unprovable_by_reason"].items():
        unit = "claim" if count == 1 else "claims"
        assert f"  {reason}: {count} {unit} - {REASON_EXPLANATIONS[reason]}\n" in text
    assert done.stdout.decode().count("\n") == 1  # one bundle, one JSON line (JSON Lines)


def test_console_summary_lists_each_failure(tampered: Path) -> None:
    done = run_cli("verify", str(tampered))
    assert done.returncode == 1
    found = labels(done.stdout)
    assert set(LABELS) <= set(found)
    assert found["Verdict"] == "FAILED" and found["Failed"] == "1 claim"
    failure = [line for line in done.stdout.decode().splitlines() if line.startswith("  - ")]
    assert len(failure) == 1 and "data/notes.txt" in failure[0]
    assert "observed sha256:" + hashlib.sha256(b"added after export\n").hexdigest() in failure[0]


def test_json_of_every_verdict_validates(
    bundles: dict[str, Path], tampered: Path, hostile_archive: Path
) -> None:
    done = run_cli(
        "verify",
        "--json",
        str(bundles["rpt-every-reason/alice"]),
        str(tampered),
        str(hostile_archive),
    )
    results = json_lines(done.stdout)
    assert [r["verdict"] for r in results] == ["verified", "failed", "error"]
    for result in results:
        validate_verification(result)
    error = results[2]
    assert (
        error["claims"] == []
        and error["bundle_digest"] is None
        and "symbolic link" in error["error"]
    )


def test_json_of_eval_banana_results_validates(tmp_path: Path) -> None:
    """The same schema covers eval-banana bundles and run directories checked in place."""
    fixtures = REPO / "fixtures" / "eval-banana"
    run_dir, project = fixtures / "runs" / "flat", fixtures / "project"
    archive = tmp_path / "eb.tar.zst"
    exported = run_cli(
        "export-eb", str(run_dir), "--project", str(project), "--out", str(archive),
        "--exported-at", "2026-11-30T03:00:00Z",
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr.decode()
    in_place = run_cli("verify", "--json", str(run_dir), "--project", str(project))
    bundled = run_cli("verify", "--json", str(archive))
    results = []
    for done in (in_place, bundled):
        assert done.returncode == 0, done.stderr.decode()
        results.append(json.loads(done.stdout))
        validate_verification(results[-1])
    assert [r["verdict"] for r in results] == ["verified", "verified"]
    assert results[0]["bundle_digest"] is None
    assert results[1]["bundle_schema"] == "evalbook.eval_banana_bundle.v1"
    assert results[1]["bundle_digest"] == bundle_digest_of(archive)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(extra=1),
        lambda d: d.update(verdict="ok"),
        lambda d: d.update(bundle_digest="sha256:" + "A" * 64),
        lambda d: d["counts"].update(proven=-1),
        lambda d: d["counts"].pop("failed"),
        lambda d: d["anchor"].update(expected_bundle_digest="sha256:1234"),
        lambda d: d["unprovable_by_reason"].update(made_up_reason=1),
        lambda d: d["claims"][0].update(state="maybe"),
        lambda d: d["claims"][0].update(group_name="accounting"),
        lambda d: d["claims"][0].update(group=11),
        lambda d: d["claims"][0].pop("detail"),
        lambda d: d["claims"][0].update(note="x"),
        lambda d: d.update(error="an error on a verified result"),
        lambda d: d.update(verdict="error"),
        lambda d: next(c for c in d["claims"] if c["state"] == "unprovable").update(reason=None),
    ],
)
def test_schema_is_strict(
    mutate: Callable[[dict[str, Any]], None], bundles: dict[str, Path]
) -> None:
    doc = verify_bundle(str(bundles["rpt-retention/alice"]), VerifyOptions()).to_json()
    validate_verification(doc)
    mutate(doc)
    assert list(Draft202012Validator(SCHEMA).iter_errors(doc)), "schema accepted a mutated result"
    with pytest.raises(SchemaError):
        schemas.validate("verification", doc, source="mutated")


def test_schema_file_is_draft_2020_12() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schemas.load_schema("verification") == SCHEMA


def test_schema_digest_pattern_ends_at_the_end_of_the_string(bundles: dict[str, Path]) -> None:
    doc = verify_bundle(str(bundles["rpt-clean/alice"]), VerifyOptions()).to_json()
    doc["bundle_digest"] += "\n"
    with pytest.raises(SchemaError, match="bundle_digest"):
        schemas.validate("verification", doc, source="verification")


@pytest.mark.parametrize("existing", [False, True])
def test_output_dir_gets_json_and_markdown(
    existing: bool, bundles: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "report"
    if existing:
        out.mkdir()
    done = run_cli(
        "verify", "--json", "--output-dir", str(out), str(bundles["rpt-scorer-drift/bob"])
    )
    assert done.returncode == 0, done.stderr.decode()
    assert sorted(p.name for p in out.iterdir()) == ["verification.json", "verification.md"]
    written = json.loads((out / "verification.json").read_bytes())
    validate_verification(written)
    assert written == json.loads(done.stdout)
    markdown = (out / "verification.md").read_text("utf-8")
    assert written["bundle_digest"] in markdown and "verified" in markdown
    for reason in written["unprovable_by_reason"]:
        assert reason in markdown


def test_output_dir_refuses_existing_contents(bundles: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "report"
    out.mkdir()
    (out / "verification.json").write_bytes(b"keep me\n")
    done = run_cli("verify", "--output-dir", str(out), str(bundles["rpt-clean/alice"]))
    assert done.returncode == 3
    assert "not empty" in done.stderr.decode()
    assert sorted(p.name for p in out.iterdir()) == ["verification.json"]
    assert (out / "verification.json").read_bytes() == b"keep me\n"


def test_output_dir_refuses_a_symlink(bundles: dict[str, Path], tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "report"
    link.symlink_to(target, target_is_directory=True)
    done = run_cli("verify", "--output-dir", str(link), str(bundles["rpt-clean/alice"]))
    assert done.returncode == 3
    assert "symlink" in done.stderr.decode()
    assert list(target.iterdir()) == []


@pytest.mark.parametrize(
    ("which", "code"),
    [
        (["rpt-clean/alice", "rpt-retention/bob"], 0),
        (["rpt-clean/alice", "tampered", "rpt-clean/bob"], 1),
        (["tampered", "hostile", "rpt-clean/alice"], 1),
        (["hostile", "rpt-clean/alice"], 3),
    ],
)
def test_several_bundles_give_json_lines_and_the_worst_exit_code(
    which: list[str], code: int, bundles: dict[str, Path], tampered: Path, hostile_archive: Path
) -> None:
    paths = [{"tampered": tampered, "hostile": hostile_archive}.get(w) or bundles[w] for w in which]
    done = run_cli("verify", "--json", *map(str, paths))
    assert done.returncode == code
    lines = done.stdout.decode().splitlines()
    assert len(lines) == len(paths)
    results = [json.loads(line) for line in lines]
    assert [r["source"] for r in results] == [str(p) for p in paths]
    for result in results:
        validate_verification(result)
    # SPEC 7: no human summary on stderr, only the error of each unreadable bundle.
    assert "Verdict:" not in done.stderr.decode()
    errors = sum(1 for r in results if r["verdict"] == "error")
    assert len(error_lines(done.stderr)) == errors
    # SPEC 7: every line carries the process's exit code; each bundle's own outcome
    # is its verdict.
    assert [r["exit_code"] for r in results] == [code] * len(results)


# ------------------------------------------------------------------- hostile archives


TOP = "evalbook-bundle-rpt-hostile"


def tar_with(*members: bytes) -> bytes:
    """A plausible start of a bundle, then ``members``, compressed."""
    return hostile.zstd(
        hostile.tar(
            [
                hostile.dir_member(TOP),
                hostile.file_member(
                    f"{TOP}/bagit.txt", b"BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n"
                ),
                hostile.dir_member(f"{TOP}/data"),
                *members,
            ]
        )
    )


def flip_last(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0x01])


GIB = 1024**3
HOSTILE_ARCHIVES: dict[str, tuple[Callable[[bytes], bytes], list[str], list[str]]] = {
    # name: (build from a real archive's bytes, message fragments, extra CLI args)
    "dotdot": (
        lambda _: tar_with(hostile.file_member(f"{TOP}/data/../../evil", b"x")),
        [f"'{TOP}/data/../../evil'", "offset 2048", "'..' path segment"],
        [],
    ),
    "dotdot-pax": (
        lambda _: tar_with(
            hostile.pax_member([("path", "../evil")]) + hostile.file_member(f"{TOP}/data/x", b"x")
        ),
        ["'../evil'", "offset", "'..' path segment"],
        [],
    ),
    "absolute": (
        lambda _: tar_with(hostile.file_member("/etc/cron.d/evil", b"* * * * * root sh\n")),
        ["'/etc/cron.d/evil'", "offset 2048", "absolute path"],
        [],
    ),
    "symlink": (
        lambda _: tar_with(
            hostile.header(f"{TOP}/data/link", typeflag=b"2", linkname="/etc/passwd")
        ),
        [f"'{TOP}/data/link'", "offset 2048", "symbolic link"],
        [],
    ),
    "hardlink": (
        lambda _: tar_with(
            hostile.header(f"{TOP}/data/hard", typeflag=b"1", linkname=f"{TOP}/bagit.txt")
        ),
        [f"'{TOP}/data/hard'", "offset 2048", "hard link"],
        [],
    ),
    "char-device": (
        lambda _: tar_with(hostile.header(f"{TOP}/data/tty", typeflag=b"3")),
        [f"'{TOP}/data/tty'", "offset 2048", "character device"],
        [],
    ),
    "block-device": (
        lambda _: tar_with(hostile.header(f"{TOP}/data/sda", typeflag=b"4")),
        [f"'{TOP}/data/sda'", "offset 2048", "block device"],
        [],
    ),
    "pax-global": (
        lambda _: tar_with(
            hostile.pax_member([("path", f"{TOP}/data/x")], typeflag=b"g"),
            hostile.file_member(f"{TOP}/data/y", b"y"),
        ),
        ["offset 2048", "pax global header"],
        [],
    ),
    "truncated-zstd": (
        lambda real: real[: len(real) // 2],
        ["zstd stream", "truncated zstd stream"],
        [],
    ),
    "bad-zstd-checksum": (flip_last, ["byte", "bad zstd content checksum"], []),
    "trailing-bytes": (
        lambda real: real + b"junk",
        ["byte", "trailing bytes after the zstd frame"],
        [],
    ),
    "two-frames": (lambda real: real + hostile.zstd(b"second"), ["byte", "second zstd frame"], []),
    "zstd-bomb": (
        lambda _: hostile.member_bomb(GIB, member_size=64 * 1024 * 1024),
        ["'bomb/f", "--max-bytes=16777216"],
        ["--max-bytes", str(16 * 1024 * 1024)],
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_ARCHIVES))
def test_hostile_archive_is_refused_with_one_error(
    name: str, bundles: dict[str, Path], tmp_path: Path
) -> None:
    build, fragments, extra = HOSTILE_ARCHIVES[name]
    path = tmp_path / f"{name}.tar.zst"
    path.write_bytes(build(bundles["rpt-clean/alice"].read_bytes()))
    started = time.monotonic()
    done = run_cli("verify", "--json", *extra, str(path), timeout=60)
    assert time.monotonic() - started < 5
    assert done.returncode == 3
    (line,) = error_lines(done.stderr)
    assert "\n" not in line
    result = json.loads(done.stdout)
    validate_verification(result)
    assert result["verdict"] == "error"
    for fragment in fragments:
        assert fragment in result["error"], (fragment, result["error"])
        assert fragment in line


# ---------------------------------------------------------- hostile bundle.json documents


def canonical_bundle(bundles: dict[str, Path]) -> bytes:
    return repack.open_bundle(bundles["rpt-clean/alice"]).files["data/bundle.json"]


def _replace_once(data: bytes, old: bytes, new: bytes) -> bytes:
    assert data.count(old) == 1, old
    return data.replace(old, new)


# Each builds bundle.json bytes from the stored canonical ones. Where the document has a
# place the schema allows, the hostile value goes there, so only the JSON rule can catch it.
HOSTILE_DOCUMENTS: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "depth-100": (
        lambda doc: b'{"zz":' + b"[" * 100 + b"]" * 100 + b"," + doc[1:],
        r"depth|deep|nest",
    ),
    "duplicate-key": (
        lambda doc: b'{"schema":"evalbook.reproducibility_bundle.v1",' + doc[1:],
        r"duplicate",
    ),
    "nan": (
        lambda doc: re.sub(rb'"tree_size":\d+', b'"tree_size":NaN', doc, count=1),
        r"nan|not a number|infinit",
    ),
    "integer-beyond-2^53": (
        lambda doc: re.sub(rb'"size":\d+', b'"size":9007199254740993', doc, count=1),
        r"2\^53|2\*\*53|9007199254740991|integer|range",
    ),
    "lone-surrogate": (
        lambda doc: _replace_once(doc, b'"principal":"alice"', b'"principal":"alice\\ud800"'),
        r"surrogate",
    ),
}


def write_hostile_document(bundles: dict[str, Path], document: bytes, path: Path) -> Path:
    """rpt-clean/alice with bundle.json replaced; the BagIt manifests stay consistent."""
    eb = repack.open_bundle(bundles["rpt-clean/alice"])
    eb.files["data/bundle.json"] = document
    return repack.write_bundle(eb, path, bundle_json=False, head=False)


@pytest.mark.parametrize("name", sorted(HOSTILE_DOCUMENTS))
def test_hostile_bundle_json_is_an_error(
    name: str, bundles: dict[str, Path], tmp_path: Path
) -> None:
    build, rule = HOSTILE_DOCUMENTS[name]
    document = build(canonical_bundle(bundles))
    assert document != canonical_bundle(bundles)
    path = write_hostile_document(bundles, document, tmp_path / f"{name}.tar.zst")
    result = verify_bundle(str(path), VerifyOptions())
    assert result.verdict is Verdict.ERROR, [c.to_json() for c in result.failures()]
    assert result.error is not None and "bundle.json" in result.error
    assert re.search(rule, result.error, re.IGNORECASE), result.error
    done = run_cli("verify", str(path))
    assert done.returncode == 3
    assert len(error_lines(done.stdout)) == 1


def huge_document_bundle(bundles: dict[str, Path], path: Path) -> Path:
    """rpt-clean/alice whose bundle.json holds a string over the document cap, streamed."""
    doc = canonical_bundle(bundles)
    head = b'{"padding":"'
    tail = b'",' + doc[1:]
    filler = MAX_DOCUMENT_BYTES + 1
    chunk = b"a" * (1 << 20)

    def chunks() -> Iterator[bytes]:
        yield head
        left = filler
        while left:
            piece = chunk[: min(left, len(chunk))]
            left -= len(piece)
            yield piece
        yield tail

    eb = repack.open_bundle(bundles["rpt-clean/alice"])
    del eb.files["data/bundle.json"]
    eb.streamed["data/bundle.json"] = (len(head) + filler + len(tail), chunks)
    return repack.write_bundle(eb, path, bundle_json=False, head=False)


def test_huge_string_in_bundle_json_is_an_error(bundles: dict[str, Path], tmp_path: Path) -> None:
    path = huge_document_bundle(bundles, tmp_path / "huge.tar.zst")
    assert path.stat().st_size < 2 * 1024 * 1024
    started = time.monotonic()
    done = run_cli("verify", "--json", str(path))
    assert time.monotonic() - started < 5
    assert done.returncode == 3
    result = json.loads(done.stdout)
    assert result["verdict"] == "error"
    assert (
        "data/bundle.json" in result["error"]
        and f"{MAX_DOCUMENT_BYTES}-byte cap" in result["error"]
    )
    assert len(error_lines(done.stderr)) == 1


_PEAK_SCRIPT = textwrap.dedent(
    """
    import sys
    from bundler.cli import main

    def peak_kib():
        # VmHWM starts afresh at exec, unlike ru_maxrss, which inherits the parent's peak.
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmHWM")

    report = sys.argv[1]
    try:
        main(sys.argv[2:])
    except SystemExit as exc:
        code = exc.code
    with open(report, "w") as fh:
        fh.write(f"{code} {peak_kib()}")
    """
)


def tiny_values_bundle(bundles: dict[str, Path], path: Path) -> Path:
    """rpt-clean/alice whose bundle.json, a quarter of the document cap, is all empty objects."""
    doc = canonical_bundle(bundles)
    count = (MAX_DOCUMENT_BYTES // 4) // 3
    eb = repack.open_bundle(bundles["rpt-clean/alice"])
    eb.files["data/bundle.json"] = b'{"zz":[' + b"{}," * count + b"{}]," + doc[1:]
    return repack.write_bundle(eb, path, bundle_json=False, head=False)


def peak_of_verify(path: Path, *args: str) -> tuple[int, int]:
    """(exit code, peak RSS in KiB) of `verify` run in a fresh interpreter."""
    report = path.with_suffix(".peak")
    subprocess.run(
        [sys.executable, "-c", _PEAK_SCRIPT, str(report), "verify", "--quiet", *args, str(path)],
        check=False,
        capture_output=True,
        timeout=120,
        cwd=REPO,
    )
    code, peak_kib = map(int, report.read_text().split())
    return code, peak_kib


def test_peak_memory_of_a_zstd_bomb(tmp_path: Path) -> None:
    path = tmp_path / "bomb.tar.zst"
    path.write_bytes(hostile.member_bomb(4 * GIB))
    code, peak_kib = peak_of_verify(path, "--max-bytes", str(16 * 1024 * 1024))
    assert code == 3
    assert peak_kib < 200 * 1024, f"peak RSS {peak_kib} KiB"


def test_peak_memory_of_a_huge_string(bundles: dict[str, Path], tmp_path: Path) -> None:
    code, peak_kib = peak_of_verify(huge_document_bundle(bundles, tmp_path / "huge.tar.zst"))
    assert code == 3
    assert peak_kib < 200 * 1024, f"peak RSS {peak_kib} KiB"


def test_peak_memory_of_a_bomb_of_document_sized_members(tmp_path: Path) -> None:
    """Members of exactly the document cap are each kept in memory; the default cap applies.

    Each one is under the per-document cap, so only the total of kept bytes and the way
    they are held bound the memory.
    """
    path = tmp_path / "bomb.tar.zst"
    path.write_bytes(hostile.member_bomb(GIB, member_size=MAX_DOCUMENT_BYTES))
    code, peak_kib = peak_of_verify(path)
    assert code == 3
    assert peak_kib < 200 * 1024, f"peak RSS {peak_kib} KiB"


def test_peak_memory_of_a_document_of_tiny_values(bundles: dict[str, Path], tmp_path: Path) -> None:
    """A bundle.json well under the size cap, made of millions of empty objects."""
    code, peak_kib = peak_of_verify(tiny_values_bundle(bundles, tmp_path / "tiny.tar.zst"))
    assert code == 3
    assert peak_kib < 200 * 1024, f"peak RSS {peak_kib} KiB"


# --------------------------------------------------------------------------- inspect


def store_facts(store: Path, report_id: str) -> dict[str, Any]:
    """What the store says about a report, computed here from its files."""
    body = json.loads((store / "reports" / report_id / "body.json").read_bytes())
    cases = []
    for check in body["checks"]:
        path = store / "reports" / report_id / "cases" / f"{check['check_id']}.jsonl"
        if path.exists():
            cases += [json.loads(line) for line in path.read_bytes().splitlines()]
    outputs = {c["output"]["digest"] for c in cases if c["output"]}
    artifacts = {e["digest"] for c in cases for e in c["evidence"] if e["kind"] == "artifact"}
    examples = {
        (c["example"]["dataset_id"], c["example"]["version"], c["example"]["example_id"])
        for c in cases
    }
    return {
        "body": body,
        "cases": len(cases),
        "outputs": outputs,
        "artifacts": artifacts,
        "examples": examples,
    }


def test_inspect_json_of_a_fixture_bundle(bundles: dict[str, Path], fixture_store: Path) -> None:
    facts = store_facts(fixture_store, "rpt-clean")
    body = facts["body"]
    done = run_cli("inspect", "--json", str(bundles["rpt-clean/bob"]))
    assert done.returncode == 0, done.stderr.decode()
    info = json.loads(done.stdout)
    assert info["report_id"] == "rpt-clean"
    assert info["report_digest"] == report_digest_of(fixture_store, "rpt-clean")
    assert info["bundle_digest"] == bundle_digest_of(bundles["rpt-clean/bob"])
    assert info["result"] == body["result"]
    assert info["suite"] == f"{body['suite_ref']['id']}@{body['suite_ref']['version']}"
    assert sorted(info["scorers"]) == sorted(
        {f"{c['scorer_ref']['id']}@{c['scorer_ref']['version']}" for c in body["checks"]}
    )
    assert sorted(info["datasets"]) == sorted(
        f"{r['id']}@{r['version']}" for r in body["dataset_refs"]
    )
    assert info["principal"] == "bob"
    assert info["counts"] == {
        "checks": len(body["checks"]),
        "cases_total": facts["cases"],
        "cases_exported": facts["cases"],
        "payloads": len(facts["artifacts"]),  # bob's outputs are redacted
        "examples": 0,
    }
    assert info["unavailable_by_reason"] == {}
    assert info["redacted_by_reason"] == {
        "no_dataset_read_body": len(facts["examples"]) + len(facts["outputs"])
    }


def test_inspect_json_counts_unavailable_by_reason(
    bundles: dict[str, Path], fixture_store: Path
) -> None:
    removed = (fixture_store / "datasets/ds-retained/1/retention.jsonl").read_bytes().splitlines()
    facts = store_facts(fixture_store, "rpt-retention")
    done = run_cli("inspect", "--json", str(bundles["rpt-retention/alice"]))
    assert done.returncode == 0
    info = json.loads(done.stdout)
    assert info["unavailable_by_reason"] == {"removed_by_retention": len(removed)}
    assert info["redacted_by_reason"] == {}
    assert info["counts"]["examples"] == len(facts["examples"]) - len(removed)
    assert info["counts"]["payloads"] == len(facts["outputs"] | facts["artifacts"])


def test_inspect_text_of_a_fixture_bundle(bundles: dict[str, Path], fixture_store: Path) -> None:
    body = store_facts(fixture_store, "rpt-scorer-drift")["body"]
    done = run_cli("inspect", str(bundles["rpt-scorer-drift/bob"]))
    assert done.returncode == 0
    found = labels(done.stdout)
    assert (
        found["Report"].startswith("rpt-scorer-drift")
        and f"result {body['result']}" in found["Report"]
    )
    assert found["Suite"] == f"{body['suite_ref']['id']}@{body['suite_ref']['version']}"
    # Both pinned scorers are unavailable (one deleted, one drifted): none was exported.
    assert found["Scorers"] == "none"
    assert found["Datasets"] == ", ".join(
        sorted(f"{r['id']}@{r['version']}" for r in body["dataset_refs"])
    )
    text = done.stdout.decode()
    assert "  scorer_version_missing: 1\n" in text and "  scorer_digest_mismatch: 1\n" in text
    assert "  no_dataset_read_body: " in text
    assert found["Digest"] == bundle_digest_of(bundles["rpt-scorer-drift/bob"])


def test_inspect_refuses_a_hostile_archive(hostile_archive: Path) -> None:
    for args in (["inspect"], ["inspect", "--json"]):
        done = run_cli(*args, str(hostile_archive))
        assert done.returncode == 3
        message = done.stderr.decode()
        assert message.count("\n") == 1 and "symbolic link" in message and "offset" in message
        if "--json" in args:  # the failure as its one JSON line (SPEC 7)
            line = json.loads(done.stdout)
            assert line["schema"] == "evalbook.error.v1" and line["exit_code"] == 3
            assert "symbolic link" in line["error"]
        else:
            assert done.stdout == b""
