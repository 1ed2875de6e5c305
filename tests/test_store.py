"""The store reader (SPEC sections 2 and 3): bad input is one exit-3 line naming the file.

Every rejection below is checked twice where it matters: the reader raises an
``InputError`` (exit code 3) whose single-line message names the file (and the line, for
JSON Lines), and the exporter either refuses the same store or lists what is absent.
Expected digests are recomputed here with hashlib from the bytes on disk, never through
``bundler.core.digests``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import struct
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
import rfc8785
import zstandard
from conftest import run_cli

from bundler.core.errors import InputError, StoreError
from bundler.evalbook.store import LocalStoreSource, Store, open_source

SCORER_TAG = b"evalbook/scorer-version-sha256/v1"
# A store file reached through a symlink is refused, whether the reader rejects every
# symlinked file or only those resolving outside the root.
SYMLINK_RULE = r"symbolic link|symlink|outside"


# ------------------------------------------------------------------------- utilities


def open_store(root: Path) -> Store:
    return Store(open_source(str(root)))


def jcs(value: Any) -> bytes:
    """Canonical bytes from the reference RFC 8785 implementation, not ours."""
    return bytes(rfc8785.dumps(value))


def read_json(path: Path) -> Any:
    return json.loads(path.read_bytes())


def assert_input_error(
    exc: BaseException, path: Path | str, *, line: int | None = None, rule: str | None = None
) -> str:
    """One line, exit code 3, naming ``path`` (``path:line`` for JSON Lines) and the rule."""
    assert isinstance(exc, InputError), f"{type(exc).__name__}: {exc}"
    assert exc.exit_code == 3
    message = str(exc)
    assert "\n" not in message, f"message is not one line: {message!r}"
    where = f"{path}:{line}" if line is not None else str(path)
    assert where in message, f"{where!r} not named in {message!r}"
    if line is not None:
        # The line number is the right one, not a prefix of a longer number.
        assert re.search(re.escape(where) + r"(?!\d)", message), message
    if rule is not None:
        # Look for the rule outside the path: test directory names contain test names.
        rest = message.replace(where, "")
        assert re.search(rule, rest, re.IGNORECASE), f"rule /{rule}/ not in {message!r}"
    return message


def cli_export(store: Path, report_id: str, out: Path, principal: str = "alice") -> Any:
    return run_cli(
        "export", "--store", str(store), "--report", report_id, "--principal", principal,
        "--out", str(out), "--exported-at", "2026-11-30T00:00:00Z", "--quiet",
    )


def assert_cli_input_error(proc: Any, named: str, out: Path) -> None:
    """Exit 3, empty stdout, one stderr line naming ``named``, nothing at ``out``."""
    stderr = proc.stderr.decode()
    assert proc.returncode == 3, stderr
    assert proc.stdout == b""
    assert len(stderr.splitlines()) == 1, stderr
    assert named in stderr, stderr
    assert not out.exists()
    assert [p.name for p in out.parent.iterdir() if p.name.endswith(".partial")] == []


def archive_members(path: Path) -> dict[str, bytes]:
    """Member name -> bytes of one of our own archives (trusted output, so tarfile is fine)."""
    raw = zstandard.ZstdDecompressor().decompressobj().decompress(path.read_bytes())
    members = {}
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
        for info in tar:
            fh = tar.extractfile(info)
            members[info.name] = fh.read() if fh is not None else b""
    return members


def case_lines(store: Path, report_id: str, check_id: str) -> list[bytes]:
    return (store / f"reports/{report_id}/cases/{check_id}.jsonl").read_bytes().splitlines()


def write_case_lines(store: Path, report_id: str, check_id: str, lines: list[bytes]) -> Path:
    path = store / f"reports/{report_id}/cases/{check_id}.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


# ------------------------------------------------------------------ malformed JSON


def test_malformed_json_in_a_suite(store_copy: Path) -> None:
    path = store_copy / "suites/suite-assistant/1.json"
    path.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(InputError) as info:
        open_store(store_copy).suite("suite-assistant", 1)
    assert_input_error(info.value, path, rule="json")


def test_malformed_json_in_a_suite_stops_the_export(store_copy: Path, tmp_path: Path) -> None:
    path = store_copy / "suites/suite-assistant/1.json"
    path.write_bytes(b'{"suite_id": "suite-assistant", ')
    out = tmp_path / "out.tar.zst"
    assert_cli_input_error(cli_export(store_copy, "rpt-clean", out), str(path), out)


def test_duplicate_keys_in_a_report_body(store_copy: Path) -> None:
    path = store_copy / "reports/rpt-clean/body.json"
    data = path.read_bytes()
    assert data.count(b'"mode":"gate",') == 1
    # Same value twice: only the duplicate itself is wrong.
    path.write_bytes(data.replace(b'"mode":"gate",', b'"mode":"gate","mode":"gate",'))
    with pytest.raises(InputError) as info:
        open_store(store_copy).report_body("rpt-clean")
    assert_input_error(info.value, path, rule="duplicate")


def test_duplicate_keys_in_a_document_not_stored_canonical(store_copy: Path) -> None:
    # access.json is not required to be canonical, so only the duplicate rule can catch
    # this: whichever copy a parser keeps decides whether carol may export.
    path = store_copy / "access.json"
    path.write_bytes(
        b'{"principals": {"carol": ["report.read"], "carol": ["report.export", "report.read"]}}'
    )
    with pytest.raises(InputError) as info:
        open_store(store_copy).access()
    assert_input_error(info.value, path, rule="duplicate")


def test_nan_in_a_check_result_is_rejected(store_copy: Path) -> None:
    path = store_copy / "reports/rpt-clean/checks/accuracy.json"
    value = read_json(path)
    text = json.dumps(value).replace(f'"score": {json.dumps(value["score"])}', '"score": NaN')
    assert "NaN" in text
    path.write_text(text)
    with pytest.raises(InputError) as info:
        open_store(store_copy).check_result("rpt-clean", "accuracy")
    assert_input_error(info.value, path, rule=r"nan|finite")


# ------------------------------------------------------------ stored canonical


def test_report_body_with_a_space_is_not_canonical(store_copy: Path) -> None:
    path = store_copy / "reports/rpt-clean/body.json"
    data = path.read_bytes()
    spaced = data.replace(b'"mode":"gate"', b'"mode": "gate"')
    assert spaced != data
    assert json.loads(spaced) == json.loads(data)
    path.write_bytes(spaced)
    with pytest.raises(InputError) as info:
        open_store(store_copy).report_body("rpt-clean")
    assert_input_error(info.value, path, rule="canonical")


def test_report_body_with_a_trailing_newline_is_not_canonical(store_copy: Path) -> None:
    path = store_copy / "reports/rpt-clean/body.json"
    path.write_bytes(path.read_bytes() + b"\n")
    with pytest.raises(InputError) as info:
        open_store(store_copy).report_body("rpt-clean")
    assert_input_error(info.value, path, rule="canonical")


def test_case_line_with_keys_out_of_order(store_copy: Path) -> None:
    lines = case_lines(store_copy, "rpt-clean", "accuracy")
    value = json.loads(lines[1])
    reordered = json.dumps(dict(reversed(list(value.items()))), separators=(",", ":"), ensure_ascii=False)
    assert json.loads(reordered) == value
    lines[1] = reordered.encode()
    path = write_case_lines(store_copy, "rpt-clean", "accuracy", lines)
    cases = open_store(store_copy).iter_cases("rpt-clean", "accuracy")
    assert cases is not None
    assert next(cases).line == 1  # the first line is fine; the error comes at line 2
    with pytest.raises(InputError) as info:
        next(cases)
    assert_input_error(info.value, path, line=2, rule="canonical")


def test_cases_file_with_one_bad_line_in_the_middle(store_copy: Path, tmp_path: Path) -> None:
    lines = case_lines(store_copy, "rpt-clean", "accuracy")
    assert len(lines) == 12
    lines[2] = lines[2][:40]  # line 3 is cut short
    path = write_case_lines(store_copy, "rpt-clean", "accuracy", lines)
    cases = open_store(store_copy).iter_cases("rpt-clean", "accuracy")
    assert cases is not None
    with pytest.raises(InputError) as info:
        list(cases)
    assert_input_error(info.value, path, line=3, rule="json")

    out = tmp_path / "out.tar.zst"
    assert_cli_input_error(cli_export(store_copy, "rpt-clean", out), f"{path}:3", out)


def test_cases_file_with_a_schema_breaking_line(store_copy: Path) -> None:
    lines = case_lines(store_copy, "rpt-clean", "helpfulness")
    value = json.loads(lines[2])
    value["status"] = "splendid"
    lines[2] = jcs(value)
    path = write_case_lines(store_copy, "rpt-clean", "helpfulness", lines)
    cases = open_store(store_copy).iter_cases("rpt-clean", "helpfulness")
    assert cases is not None
    with pytest.raises(InputError) as info:
        list(cases)
    assert_input_error(info.value, path, line=3, rule="status")


def test_cases_file_with_an_empty_line(store_copy: Path) -> None:
    lines = case_lines(store_copy, "rpt-clean", "accuracy")
    lines.insert(4, b"")
    path = write_case_lines(store_copy, "rpt-clean", "accuracy", lines)
    cases = open_store(store_copy).iter_cases("rpt-clean", "accuracy")
    assert cases is not None
    with pytest.raises(InputError) as info:
        list(cases)
    assert_input_error(info.value, path, line=5)


def test_case_naming_another_check(store_copy: Path) -> None:
    lines = case_lines(store_copy, "rpt-clean", "accuracy")
    value = json.loads(lines[5])
    value["check_id"] = "safety"
    lines[5] = jcs(value)
    path = write_case_lines(store_copy, "rpt-clean", "accuracy", lines)
    cases = open_store(store_copy).iter_cases("rpt-clean", "accuracy")
    assert cases is not None
    with pytest.raises(InputError) as info:
        list(cases)
    assert_input_error(info.value, path, line=6, rule="check_id")


# ---------------------------------------------------------------- schema and digests


def test_uppercase_hex_digest_in_a_dataset_manifest(store_copy: Path) -> None:
    path = store_copy / "datasets/ds-qa/1/manifest.json"
    manifest = read_json(path)
    hex_part = manifest["examples"][3]["digest"].removeprefix("sha256:")
    assert re.fullmatch(r"[0-9a-f]{64}", hex_part) and hex_part != hex_part.upper()
    manifest["examples"][3]["digest"] = "sha256:" + hex_part.upper()
    path.write_bytes(jcs(manifest))  # still canonical: only the digest is wrong
    with pytest.raises(InputError) as info:
        open_store(store_copy).dataset_manifest("ds-qa", 1)
    assert_input_error(info.value, path, rule="digest|sha256")


@pytest.mark.parametrize(
    "bad",
    ["sha512:" + "0" * 128, "sha256:" + "0" * 63, "sha256:" + "0" * 65, "0" * 64, "sha256:" + "g" * 64],
)
def test_other_malformed_digests_in_a_dataset_manifest(store_copy: Path, bad: str) -> None:
    path = store_copy / "datasets/ds-qa/1/manifest.json"
    manifest = read_json(path)
    manifest["examples"][0]["digest"] = bad
    path.write_bytes(jcs(manifest))
    with pytest.raises(InputError) as info:
        open_store(store_copy).dataset_manifest("ds-qa", 1)
    assert_input_error(info.value, path)


def test_schema_breaking_check_result(store_copy: Path) -> None:
    path = store_copy / "reports/rpt-clean/checks/accuracy.json"
    value = read_json(path)
    value["status"] = "great"
    path.write_bytes(jcs(value))
    with pytest.raises(InputError) as info:
        open_store(store_copy).check_result("rpt-clean", "accuracy")
    assert_input_error(info.value, path, rule="status")


def test_check_result_missing_a_required_field(store_copy: Path) -> None:
    path = store_copy / "reports/rpt-clean/checks/safety.json"
    value = read_json(path)
    del value["coverage"]
    path.write_bytes(jcs(value))
    with pytest.raises(InputError) as info:
        open_store(store_copy).check_result("rpt-clean", "safety")
    assert_input_error(info.value, path, rule="coverage")


def test_dataset_manifest_examples_out_of_order(store_copy: Path) -> None:
    path = store_copy / "datasets/ds-qa/1/manifest.json"
    manifest = read_json(path)
    manifest["examples"][0], manifest["examples"][1] = manifest["examples"][1], manifest["examples"][0]
    path.write_bytes(jcs(manifest))
    with pytest.raises(InputError) as info:
        open_store(store_copy).dataset_manifest("ds-qa", 1)
    assert_input_error(info.value, path, rule="sorted")


def test_report_body_in_the_wrong_directory(store_copy: Path) -> None:
    (store_copy / "reports/rpt-copy").mkdir()
    body = store_copy / "reports/rpt-copy/body.json"
    body.write_bytes((store_copy / "reports/rpt-clean/body.json").read_bytes())
    with pytest.raises(InputError) as info:
        open_store(store_copy).report_body("rpt-copy")
    assert_input_error(info.value, body, rule="report_id")


# ------------------------------------------------------------------- identifiers


@pytest.mark.parametrize("report_id", ["../rpt-clean", "rpt-clean/..", "a/b", "..", ".", "", "rpt\x00clean",
                                       "-rpt", "x" * 129, "rpt clean"])
def test_bad_report_id_is_refused_before_any_read(fixture_store: Path, report_id: str) -> None:
    with pytest.raises(StoreError) as info:
        open_store(fixture_store).report_body(report_id)
    # The store layer speaks the library's parameter name; the command line maps it to
    # --report (test_bad_report_id_on_the_command_line).
    assert_input_error(info.value, "report_id", rule="identifier|report id")


@pytest.mark.parametrize("report_id", ["../rpt-clean", "..", "reports/rpt-clean", "rpt-clean/../rpt-clean"])
def test_bad_report_id_on_the_command_line(fixture_store: Path, tmp_path: Path, report_id: str) -> None:
    # A bad value of an option is a usage error (SPEC 8: exit 2), named with its option.
    out = tmp_path / "out.tar.zst"
    proc = cli_export(fixture_store, report_id, out)
    stderr = proc.stderr.decode()
    assert proc.returncode == 2 and proc.stdout == b"", stderr
    assert len(stderr.splitlines()) == 1 and "--report" in stderr and repr(report_id) in stderr
    assert not out.exists()


def _edit_body(store: Path, report_id: str, edit: Any) -> Path:
    path = store / f"reports/{report_id}/body.json"
    body = read_json(path)
    edit(body)
    path.write_bytes(jcs(body))
    return path


@pytest.mark.parametrize("bad", ["../../etc", "a/b", "..", "acc\x00uracy"])
def test_bad_check_id_inside_a_report_body(store_copy: Path, bad: str) -> None:
    path = _edit_body(store_copy, "rpt-clean", lambda b: b["checks"][0].__setitem__("check_id", bad))
    with pytest.raises(InputError) as info:
        open_store(store_copy).report_body("rpt-clean")
    assert_input_error(info.value, path)


def test_bad_suite_id_inside_a_report_body(store_copy: Path, tmp_path: Path) -> None:
    path = _edit_body(store_copy, "rpt-clean", lambda b: b["suite_ref"].__setitem__("id", "../../suites/x"))
    with pytest.raises(InputError) as info:
        open_store(store_copy).report_body("rpt-clean")
    assert_input_error(info.value, path, rule="suite_ref")
    out = tmp_path / "out.tar.zst"
    assert_cli_input_error(cli_export(store_copy, "rpt-clean", out), str(path), out)


@pytest.mark.parametrize("bad", ["../../../../etc/hostname", "/etc/hostname", "files/../../x", "a//b", "a\x00b"])
def test_scorer_file_path_escaping_the_scorer(store_copy: Path, bad: str) -> None:
    path = store_copy / "scorers/sc-judge/3/scorer.json"
    desc = read_json(path)
    desc["files"] = sorted([*desc["files"], bad])
    path.write_bytes(jcs(desc))
    with pytest.raises(InputError) as info:
        open_store(store_copy).scorer("sc-judge", 3)
    assert_input_error(info.value, path)


@pytest.mark.parametrize("bad", ["qa/0000", "..", "qa-0000\x00", "../../../reports/rpt-clean/body"])
def test_bad_example_id_inside_a_case(store_copy: Path, bad: str) -> None:
    lines = case_lines(store_copy, "rpt-clean", "accuracy")
    value = json.loads(lines[6])
    value["example"]["example_id"] = bad
    lines[6] = jcs(value)
    path = write_case_lines(store_copy, "rpt-clean", "accuracy", lines)
    cases = open_store(store_copy).iter_cases("rpt-clean", "accuracy")
    assert cases is not None
    with pytest.raises(InputError) as info:
        list(cases)
    assert_input_error(info.value, path, line=7)


def test_bad_example_id_inside_a_dataset_manifest(store_copy: Path) -> None:
    path = store_copy / "datasets/ds-qa/1/manifest.json"
    manifest = read_json(path)
    manifest["examples"][0]["example_id"] = "../qa-0000"
    path.write_bytes(jcs(manifest))
    with pytest.raises(InputError) as info:
        open_store(store_copy).dataset_manifest("ds-qa", 1)
    assert_input_error(info.value, path)


# ---------------------------------------------------------------------- symlinks


def test_example_symlinked_outside_the_store_is_refused(store_copy: Path, tmp_path: Path) -> None:
    example = store_copy / "datasets/ds-qa/1/examples/qa-0003.json"
    outside = tmp_path / "outside.json"
    # Same bytes, so only the location is wrong: a digest check alone would accept it.
    outside.write_bytes(example.read_bytes())
    example.unlink()
    example.symlink_to(outside)
    with pytest.raises(StoreError) as info:
        open_store(store_copy).example("ds-qa", 1, "qa-0003")
    assert_input_error(info.value, example, rule=SYMLINK_RULE)

    out = tmp_path / "out.tar.zst"
    assert_cli_input_error(cli_export(store_copy, "rpt-clean", out), str(example), out)


def test_blob_symlinked_to_a_system_file_is_refused(store_copy: Path) -> None:
    assert Path("/etc/hostname").exists()
    first_line = (store_copy / "reports/rpt-clean/cases/accuracy.jsonl").read_bytes().split(b"\n")[0]
    hex_digest = json.loads(first_line)["output"]["digest"].removeprefix("sha256:")
    blob = store_copy / "blobs/sha256" / hex_digest
    blob.unlink()
    blob.symlink_to("/etc/hostname")
    with pytest.raises(StoreError) as info:
        open_store(store_copy).blob(hex_digest, max_size=1 << 20)
    assert_input_error(info.value, blob, rule=SYMLINK_RULE)


def test_relative_symlink_climbing_out_of_the_store_is_refused(store_copy: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere.json").write_bytes(b'{"principals":{"mallory":["report.export"]}}')
    access = store_copy / "access.json"
    access.unlink()
    access.symlink_to(Path("..") / "elsewhere.json")
    with pytest.raises(StoreError) as info:
        open_store(store_copy).access()
    assert_input_error(info.value, access, rule=SYMLINK_RULE)


def test_symlinked_directory_outside_the_store_is_refused(store_copy: Path, tmp_path: Path) -> None:
    examples = store_copy / "datasets/ds-qa/1/examples"
    moved = tmp_path / "moved-examples"
    examples.rename(moved)
    examples.symlink_to(moved, target_is_directory=True)
    with pytest.raises(StoreError) as info:
        open_store(store_copy).example("ds-qa", 1, "qa-0000")
    # The offending directory is named (or the file under it).
    assert_input_error(info.value, examples, rule=SYMLINK_RULE)
    out = tmp_path / "out.tar.zst"
    assert_cli_input_error(cli_export(store_copy, "rpt-clean", out), str(examples), out)


def test_directory_where_a_file_belongs_is_refused(store_copy: Path) -> None:
    example = store_copy / "datasets/ds-qa/1/examples/qa-0005.json"
    example.unlink()
    example.mkdir()
    with pytest.raises(StoreError) as info:
        open_store(store_copy).example("ds-qa", 1, "qa-0005")
    assert_input_error(info.value, example, rule="regular file")


def test_fifo_where_a_file_belongs_is_refused_without_blocking(store_copy: Path) -> None:
    # Opening a FIFO for reading blocks until a writer appears; a hostile store must not
    # be able to hang the exporter that way. Run in a child so a hang fails, not stalls.
    example = store_copy / "datasets/ds-qa/1/examples/qa-0002.json"
    example.unlink()
    os.mkfifo(example)
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from bundler.core.errors import InputError\n"
        "from bundler.evalbook.store import Store, open_source\n"
        "try:\n"
        "    Store(open_source(sys.argv[1])).example('ds-qa', 1, 'qa-0002')\n"
        "except InputError as exc:\n"
        "    print(exc.exit_code, exc.message)\n"
    )
    try:
        proc = subprocess.run([sys.executable, "-c", code, str(store_copy)], capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("reading a FIFO in the store blocked")
    assert proc.returncode == 0, proc.stderr.decode()
    output = proc.stdout.decode()
    assert output.startswith("3 ") and str(example) in output and "regular file" in output, output


def test_store_root_that_is_not_a_directory(tmp_path: Path) -> None:
    root = tmp_path / "not-a-store"
    root.write_text("x")
    with pytest.raises(StoreError) as info:
        LocalStoreSource(root)
    assert_input_error(info.value, root)


# ---------------------------------------------------------------- missing files


def test_missing_example_is_none_for_the_reader_and_listed_by_the_exporter(
    store_copy: Path, export: Any
) -> None:
    (store_copy / "datasets/ds-qa/1/examples/qa-0003.json").unlink()
    assert open_store(store_copy).example("ds-qa", 1, "qa-0003") is None
    assert open_store(store_copy).example("ds-qa", 1, "qa-0004") is not None

    result = export(store_copy, "rpt-clean")
    manifest = read_json(store_copy / "datasets/ds-qa/1/manifest.json")
    expected_digest = next(e["digest"] for e in manifest["examples"] if e["example_id"] == "qa-0003")
    assert result.bundle["unavailable"] == [
        {"kind": "example", "ref": "ds-qa@1/qa-0003", "digest": expected_digest,
         "reason": "missing_from_store", "detail": None}
    ]
    names = archive_members(result.path)
    top = "evalbook-bundle-rpt-clean"
    assert f"{top}/data/datasets/ds-qa/1/examples/qa-0003.json" not in names
    assert f"{top}/data/datasets/ds-qa/1/examples/qa-0004.json" in names


def test_missing_suite_is_none_for_the_reader_and_listed_by_the_exporter(
    store_copy: Path, export: Any
) -> None:
    (store_copy / "suites/suite-assistant/1.json").unlink()
    assert open_store(store_copy).suite("suite-assistant", 1) is None
    result = export(store_copy, "rpt-clean")
    body = read_json(store_copy / "reports/rpt-clean/body.json")
    assert result.bundle["unavailable"] == [
        {"kind": "suite", "ref": "suite-assistant@1", "digest": body["suite_ref"]["digest"],
         "reason": "missing_from_store", "detail": None}
    ]
    assert result.bundle["suite"]["path"] is None
    assert not any("/data/suite/" in name for name in archive_members(result.path))


def test_missing_blob_and_missing_cases_read_as_none(store_copy: Path) -> None:
    store = open_store(store_copy)
    assert store.blob("0" * 64, max_size=1 << 20) is None
    assert store.iter_cases("rpt-clean", "no-such-check") is None
    assert store.check_result("rpt-clean", "no-such-check") is None
    assert store.scorer("sc-exact", 99) is None
    assert store.dataset_manifest("ds-qa", 99) is None
    assert store.retention("ds-qa", 1) == {}


def test_missing_report_is_an_input_error_naming_it(fixture_store: Path) -> None:
    with pytest.raises(InputError) as info:
        open_store(fixture_store).report_body("rpt-nowhere")
    assert_input_error(info.value, fixture_store / "reports/rpt-nowhere/body.json", rule="rpt-nowhere")


def test_missing_access_json(store_copy: Path, tmp_path: Path) -> None:
    path = store_copy / "access.json"
    path.unlink()
    with pytest.raises(StoreError) as info:
        open_store(store_copy).access()
    assert_input_error(info.value, path, rule="missing")
    out = tmp_path / "out.tar.zst"
    assert_cli_input_error(cli_export(store_copy, "rpt-clean", out), str(path), out)


def test_missing_envelope_is_an_input_error(store_copy: Path) -> None:
    path = store_copy / "reports/rpt-clean/envelope.json"
    path.unlink()
    with pytest.raises(StoreError) as info:
        open_store(store_copy).envelope("rpt-clean")
    assert_input_error(info.value, path)


# ------------------------------------------------------------------ positive reads


def framed_by_hand(tag: bytes, components: list[tuple[str, bytes]]) -> str:
    out = hashlib.sha256(tag + b"\x00")
    for name, content in components:
        raw = name.encode("utf-8")
        out.update(struct.pack(">Q", len(raw)) + raw + struct.pack(">Q", len(content)) + content)
    return "sha256:" + out.hexdigest()


def scorer_digest_by_hand(store: Path, scorer_id: str, version: int) -> str:
    base = store / "scorers" / scorer_id / str(version)
    descriptor = (base / "scorer.json").read_bytes()
    files = sorted(json.loads(descriptor)["files"], key=lambda p: p.encode("utf-8"))
    components = [("scorer.json", descriptor)]
    components += [(f"files/{p}", (base / "files" / p).read_bytes()) for p in files]
    return framed_by_hand(SCORER_TAG, components)


@pytest.mark.parametrize(("report_id", "scorer_id", "version"),
                         [("rpt-clean", "sc-judge", 3), ("rpt-clean", "sc-exact", 1),
                          ("rpt-evidence-manifest", "sc-exact", 1)])
def test_scorer_framed_digest_equals_the_pinned_digest(
    fixture_store: Path, report_id: str, scorer_id: str, version: int
) -> None:
    body = read_json(fixture_store / f"reports/{report_id}/body.json")
    pinned = {c["scorer_ref"]["digest"] for c in body["checks"]
              if (c["scorer_ref"]["id"], c["scorer_ref"]["version"]) == (scorer_id, version)}
    assert len(pinned) == 1
    by_hand = scorer_digest_by_hand(fixture_store, scorer_id, version)
    assert by_hand == pinned.pop()
    scorer = open_store(fixture_store).scorer(scorer_id, version)
    assert scorer is not None
    assert scorer.digest == by_hand
    assert scorer.missing_file is None


def test_judge_scorer_has_a_nested_file_in_byte_order(fixture_store: Path) -> None:
    scorer = open_store(fixture_store).scorer("sc-judge", 3)
    assert scorer is not None
    assert [f.relpath for f in scorer.files] == ["files/prompt.md", "files/rubric/criteria.txt"]
    base = fixture_store / "scorers/sc-judge/3"
    assert [f.data for f in scorer.files] == [(base / "files/prompt.md").read_bytes(),
                                              (base / "files/rubric/criteria.txt").read_bytes()]


def test_drifted_scorer_no_longer_matches_its_pin(fixture_store: Path) -> None:
    body = read_json(fixture_store / "reports/rpt-scorer-drift/body.json")
    pinned = next(c["scorer_ref"]["digest"] for c in body["checks"] if c["scorer_ref"]["id"] == "sc-drift")
    scorer = open_store(fixture_store).scorer("sc-drift", 1)
    assert scorer is not None
    assert scorer.digest == scorer_digest_by_hand(fixture_store, "sc-drift", 1)
    assert scorer.digest != pinned


def test_scorer_with_a_listed_file_missing(store_copy: Path) -> None:
    (store_copy / "scorers/sc-judge/3/files/rubric/criteria.txt").unlink()
    scorer = open_store(store_copy).scorer("sc-judge", 3)
    assert scorer is not None
    assert scorer.digest is None
    assert scorer.missing_file == "files/rubric/criteria.txt"


def test_documents_read_back_exactly(fixture_store: Path) -> None:
    store = open_store(fixture_store)
    body = store.report_body("rpt-clean")
    raw = (fixture_store / "reports/rpt-clean/body.json").read_bytes()
    assert body.data == raw
    assert body.sha256 == "sha256:" + hashlib.sha256(raw).hexdigest()
    assert body.value == json.loads(raw)

    suite = store.suite("suite-assistant", 1)
    assert suite is not None
    # Stored canonical, so the JSON digest is the digest of the bytes.
    assert "sha256:" + hashlib.sha256(suite.data).hexdigest() == body.value["suite_ref"]["digest"]
    for ref in body.value["dataset_refs"]:
        manifest = store.dataset_manifest(ref["id"], ref["version"])
        assert manifest is not None
        assert "sha256:" + hashlib.sha256(manifest.data).hexdigest() == ref["digest"]
        for entry in manifest.value["examples"]:
            data = store.example(ref["id"], ref["version"], entry["example_id"])
            assert data is not None
            assert "sha256:" + hashlib.sha256(data).hexdigest() == entry["digest"]
            assert len(data) == entry["size"]


def test_cases_stream_in_line_order_with_exact_bytes(fixture_store: Path) -> None:
    cases = open_store(fixture_store).iter_cases("rpt-clean", "accuracy")
    assert cases is not None
    read = list(cases)
    raw = case_lines(fixture_store, "rpt-clean", "accuracy")
    assert [c.line for c in read] == list(range(1, len(raw) + 1))
    assert [c.data for c in read] == raw
    assert [c.value for c in read] == [json.loads(x) for x in raw]


def test_final_case_line_without_newline_is_read(store_copy: Path) -> None:
    path = store_copy / "reports/rpt-clean/cases/safety.jsonl"
    data = path.read_bytes()
    path.write_bytes(data.rstrip(b"\n"))
    cases = open_store(store_copy).iter_cases("rpt-clean", "safety")
    assert cases is not None
    assert [c.data for c in cases] == data.splitlines()


def test_retention_and_access(fixture_store: Path) -> None:
    store = open_store(fixture_store)
    removed = store.retention("ds-retained", 1)
    lines = (fixture_store / "datasets/ds-retained/1/retention.jsonl").read_bytes().splitlines()
    assert sorted(removed) == sorted(json.loads(x)["example_id"] for x in lines)
    assert len(removed) == 2
    for example_id in removed:
        assert not (fixture_store / f"datasets/ds-retained/1/examples/{example_id}.json").exists()
    access = store.access()
    raw = read_json(fixture_store / "access.json")["principals"]
    assert access == {p: frozenset(v) for p, v in raw.items()}
    assert "report.export" in access["bob"] and "dataset.read_body" not in access["bob"]


def test_symlink_check_does_not_depend_on_the_working_directory(
    store_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A relative store root must still confine reads to the store.
    outside = tmp_path / "outside.json"
    outside.write_bytes(b"{}")
    example = store_copy / "datasets/ds-qa/1/examples/qa-0001.json"
    example.unlink()
    example.symlink_to(outside)
    monkeypatch.chdir(store_copy.parent)
    store = open_store(Path(os.path.relpath(store_copy)))
    with pytest.raises(StoreError) as info:
        store.example("ds-qa", 1, "qa-0001")
    assert_input_error(info.value, "datasets/ds-qa/1/examples/qa-0001.json", rule=SYMLINK_RULE)
