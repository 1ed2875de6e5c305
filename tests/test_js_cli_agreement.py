"""The Node command says what ``evalbook-bundle`` says, the way it says it (SPEC 7, 8, 15):
one test per class an independent tester found apart, each run through both commands.

- BUNDLE that is no regular file (a FIFO, a character device that never ends, a
  socket): refused at once, exit 3, the other bundles still checked;
- several bundles with ``--json``: every line carries the run's exit code;
- ``-q`` never changes stdout;
- ``check-proof``: the proven case's status and score; a proof that is not proven is
  a line on stderr (nothing on stdout); one that cannot be read is an
  ``evalbook.error.v1`` with ``--json`` (exit 3);
- ``--help`` names every option.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYTHON = [sys.executable, "-m", "bundler"]
NODE = ["node", str(ROOT / "js" / "verify-bundle.mjs")]
COMMANDS = {"python": [*PYTHON, "verify"], "node": NODE}
CHECK_PROOF = {"python": [*PYTHON, "check-proof"], "node": [*NODE, "check-proof"]}


def _run(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(cmd, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture()
def not_files(tmp_path: Path) -> Iterator[dict[str, Path]]:
    fifo = tmp_path / "fifo.tar.zst"
    os.mkfifo(fifo)
    sock_path = tmp_path / "sock.tar.zst"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(sock_path))
    try:
        yield {"fifo": fifo, "device": Path("/dev/zero"), "socket": sock_path}
    finally:
        sock.close()


@pytest.mark.parametrize("kind", ["fifo", "device", "socket"])
@pytest.mark.parametrize("tool", sorted(COMMANDS))
def test_a_bundle_that_is_no_regular_file_is_refused_and_the_rest_checked(
    bundles: dict[str, Path], not_files: dict[str, Path], kind: str, tool: str
) -> None:
    good = bundles["rpt-clean/alice"]
    done = _run([*COMMANDS[tool], str(not_files[kind]), str(good), "--json"], timeout=20)
    assert done.returncode == 3, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["verdict"] for r in lines] == ["error", "verified"]
    assert "not a regular file" in lines[0]["error"]
    assert {r["exit_code"] for r in lines} == {3}  # the run's, on every line
    assert done.stderr.count(b"\n") == 1 and b"Traceback" not in done.stderr


@pytest.mark.parametrize("tool", sorted(COMMANDS))
def test_quiet_never_changes_the_result_on_stdout(bundles: dict[str, Path], tool: str) -> None:
    args = [str(bundles["rpt-clean/alice"]), str(bundles["rpt-every-reason/alice"])]
    loud = _run([*COMMANDS[tool], *args])
    quiet = _run([*COMMANDS[tool], *args, "-q"])

    def steady(out: bytes) -> list[bytes]:
        return [line for line in out.splitlines() if not line.startswith(b"Checked at")]

    assert loud.returncode == quiet.returncode
    assert steady(loud.stdout) == steady(quiet.stdout)
    assert b"VERIFIED" in quiet.stdout


@pytest.fixture(scope="module")
def proof(bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("proof") / "proof.json"
    done = _run(
        [*PYTHON, "prove", str(bundles["rpt-clean/alice"]), "--case", "accuracy-00003",
         "--out", str(out), "-q"]
    )
    assert done.returncode == 0, done.stderr
    return out


def test_check_proof_names_the_case_status_and_score_alike(proof: Path) -> None:
    records = {}
    for tool, cmd in CHECK_PROOF.items():
        done = _run([*cmd, str(proof), "--json"])
        assert done.returncode == 0, done.stderr
        records[tool] = json.loads(done.stdout)
        human = _run([*cmd, str(proof)])
        assert b"status pass, score 1" in human.stdout, (tool, human.stdout)
    assert records["python"]["case_status"] == records["node"]["case_status"] == "pass"
    assert records["python"]["case_score"] == records["node"]["case_score"] == 1
    # A proven case is no failing command's object: the same fields in both (SPEC 7).
    assert sorted(records["python"]) == sorted(records["node"])
    assert "exit_code" not in records["node"] and "input" not in records["node"]


# Option files that cannot be used, each alone and beside another bad one: the error
# record's input is the file that failed, the same one in both verifiers.
BAD_OPTION_FILES = {
    "signers missing": (["--allowed-signers", "{missing}"], "{missing}"),
    "signers not signers": (["--allowed-signers", "{text}"], "{text}"),
    "signers a directory": (["--allowed-signers", "{dir}"], "{dir}"),
    "signature missing": (["--signature", "{missing}", "--allowed-signers", "{text}"], "{missing}"),
    "signature a device": (["--allowed-signers", "{text}", "--signature", "/dev/null"], "/dev/null"),
}


@pytest.mark.parametrize("case", sorted(BAD_OPTION_FILES))
def test_an_unusable_option_file_is_the_input_of_the_error_record(
    bundles: dict[str, Path], tmp_path: Path, case: str
) -> None:
    text = tmp_path / "hostname"
    text.write_text("vm\n")
    where = {"missing": str(tmp_path / "absent"), "text": str(text), "dir": str(tmp_path)}
    options, named = BAD_OPTION_FILES[case]
    args = [o.format(**where) for o in options]
    bundle = str(bundles["rpt-clean/alice"])
    for tool, cmd in COMMANDS.items():
        done = _run([*cmd, bundle, *args, "--json"])
        assert done.returncode == 3, (tool, done.stderr)
        record = json.loads(done.stdout)
        assert record["schema"] == "evalbook.error.v1", (tool, record)
        assert record["input"] == named.format(**where), (tool, record)
        assert done.stderr.count(b"\n") == 1, (tool, done.stderr)


@pytest.mark.parametrize("tool", sorted(CHECK_PROOF))
def test_check_proof_not_proven_is_said_on_stderr_only(
    proof: Path, tool: str, tmp_path: Path
) -> None:
    doc = json.loads(proof.read_bytes())
    doc["leaf_index"] = doc["leaf_index"] + 1  # another leaf: the path leads elsewhere
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps(doc))
    done = _run([*CHECK_PROOF[tool], str(wrong)])
    assert done.returncode == 1
    assert done.stdout == b""
    assert done.stderr.count(b"\n") == 1
    done = _run([*CHECK_PROOF[tool], str(wrong), "--json"])
    assert done.returncode == 1
    record = json.loads(done.stdout)
    assert record["schema"] == "evalbook.proof_check.v1" and record["proven"] is False


@pytest.mark.parametrize("content", [b"", b"{", b"[]", b"\xff"])
@pytest.mark.parametrize("tool", sorted(CHECK_PROOF))
def test_check_proof_that_cannot_be_read_is_an_error_record(
    tool: str, content: bytes, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    for target in (bad, tmp_path):  # bad bytes, and a directory
        done = _run([*CHECK_PROOF[tool], str(target), "--json"])
        assert done.returncode == 3, (target, done.stderr)
        record = json.loads(done.stdout)
        assert record["schema"] == "evalbook.error.v1" and record["exit_code"] == 3
        assert done.stderr.count(b"\n") == 1 and b"Traceback" not in done.stderr
        human = _run([*CHECK_PROOF[tool], str(target)])
        assert human.returncode == 3 and human.stdout == b""


def test_node_help_names_every_option() -> None:
    for argv, options in (
        (["--help"], ["--json", "--strict", "-q", "--expect-bundle-digest",
                      "--expect-report-digest", "--allowed-signers", "--identity",
                      "--signature", "--max-bytes"]),
        (["check-proof", "--help"], ["--json", "-q", "--allowed-signers", "--identity",
                                     "--expect-bundle-digest"]),
    ):
        done = _run([*NODE, *argv])
        assert done.returncode == 0
        text = done.stdout.decode()
        assert "Exit codes" in text
        for option in options:
            assert text.count(option) >= 2, (argv, option)  # in the usage and explained


@pytest.mark.parametrize("tool", sorted(CHECK_PROOF))
def test_check_proof_reads_standard_input_as_dash(proof: Path, tool: str) -> None:
    with open(proof, "rb") as stdin:
        done = subprocess.run(
            [*CHECK_PROOF[tool], "-", "--json"], stdin=stdin, capture_output=True, timeout=60
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["proven"] is True


@pytest.mark.parametrize("tool", sorted(COMMANDS))
def test_examples_of_an_unreadable_manifest_are_not_said_missing_from_it(
    bundles: dict[str, Path], tmp_path: Path, tool: str
) -> None:
    """A dataset manifest that fails its own claim (here its JSON digest) gives no list
    to look examples up in: each example's claim fails saying so, never "not in the
    dataset manifest", which would assert what nobody could read."""
    import repack

    eb = repack.open_bundle(bundles["rpt-clean/alice"])
    manifest = next(
        p for p in eb.paths() if p.startswith("data/datasets/") and p.endswith("/manifest.json")
    )
    eb.edit_json(manifest, lambda value: value.update(extra_field=1))
    bad = repack.write_bundle(eb, tmp_path / "manifest.tar.zst")
    done = _run([*COMMANDS[tool], str(bad), "--json"])
    assert done.returncode == 1, done.stderr
    record = json.loads(done.stdout)
    failed = [
        c["detail"]
        for c in record["claims"]
        if c["subject"].startswith("example ") and c["group"] == 6 and c["state"] == "failed"
    ]
    assert len(failed) >= 5
    assert all(d.startswith("no dataset manifest to find it in") for d in failed), failed


@pytest.fixture(scope="module")
def stdin_signature(
    bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """A bundle, its signature moved away from it (no sidecar is found beside it) and
    an allowed_signers file naming the key."""
    import shutil

    tmp = tmp_path_factory.mktemp("stdin-signature")
    key = tmp / "key"
    shutil.copyfile(ROOT / "conformance" / "keys" / "conformance.key", key)
    key.chmod(0o600)
    bundle = tmp / "b.tar.zst"
    shutil.copyfile(bundles["rpt-clean/alice"], bundle)
    assert _run([*PYTHON, "sign", str(bundle), "--key", str(key)]).returncode == 0
    signature = tmp / "head.sig"
    (tmp / "b.tar.zst.sig").rename(signature)
    pub = " ".join((ROOT / "conformance/keys/conformance.key.pub").read_text().split()[:2])
    allowed = tmp / "allowed_signers"
    allowed.write_text(f"auditor@example.org {pub}\n")
    return {"bundle": bundle, "signature": signature, "allowed": allowed}


@pytest.mark.parametrize("tool", sorted(COMMANDS))
def test_signature_from_standard_input_is_read_alike(
    stdin_signature: dict[str, Path], tool: str
) -> None:
    """`--signature -` reads the signature from standard input in both verifiers: a good
    one anchors the bundle, an empty one is an invalid signature (1), one over the 64 KiB
    a signature may hold is an input error (3)."""
    args = [str(stdin_signature["bundle"]), "--allowed-signers", str(stdin_signature["allowed"]),
            "--signature", "-", "--json"]  # fmt: skip
    for data, code in (
        (stdin_signature["signature"].read_bytes(), 0),
        (b"", 1),
        (b"x" * 70_000, 3),
    ):
        done = subprocess.run([*COMMANDS[tool], *args], input=data, capture_output=True,
                              timeout=60)  # fmt: skip
        assert done.returncode == code, (len(data), done.stderr)
        if code == 0:
            record = json.loads(done.stdout)
            assert record["anchor"]["signer"].startswith("auditor@example.org, key SHA256:")


@pytest.mark.parametrize("tool", sorted(COMMANDS))
def test_an_empty_identity_is_a_usage_error(
    stdin_signature: dict[str, Path], proof: Path, tool: str
) -> None:
    for cmd, target in ((COMMANDS[tool], stdin_signature["bundle"]), (CHECK_PROOF[tool], proof)):
        done = _run([*cmd, str(target), "--allowed-signers", str(stdin_signature["allowed"]),
                     "--identity", ""])  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert b"--identity: empty" in done.stderr


@pytest.mark.parametrize("tool", sorted(COMMANDS))
def test_a_bundle_with_no_verdict_is_an_error_on_stderr_without_json(
    bundles: dict[str, Path], tmp_path: Path, tool: str
) -> None:
    """SPEC 5, 7: the summaries are on stdout; the error of a bundle that could not be
    checked is on stderr too, one line, with or without --json, in both verifiers."""
    junk = tmp_path / "junk.tar.zst"
    junk.write_bytes(b"junk\n")
    done = _run([*COMMANDS[tool], str(junk), str(bundles["rpt-clean/alice"])])
    assert done.returncode == 3
    errors = done.stderr.decode().splitlines()
    assert len(errors) == 1 and str(junk) in errors[0] and "zstd" in errors[0], errors
    assert b"VERIFIED" in done.stdout


@pytest.mark.parametrize("tool", sorted(COMMANDS))
def test_a_signature_from_standard_input_is_read_to_its_cap_only(
    stdin_signature: dict[str, Path], tool: str
) -> None:
    """`--signature -` reads at most one byte past the 64 KiB a signature may hold: a
    pipe that never ends is refused at once (exit 3, one line), never read into memory
    without end; standard input closed by the caller is an empty one."""
    args = [*COMMANDS[tool], str(stdin_signature["bundle"]), "--allowed-signers",
            str(stdin_signature["allowed"]), "--signature", "-"]  # fmt: skip
    endless = subprocess.Popen(["yes"], stdout=subprocess.PIPE)
    try:
        done = subprocess.run(args, stdin=endless.stdout, capture_output=True, timeout=30)
    finally:
        endless.kill()
        endless.wait()
        assert endless.stdout is not None
        endless.stdout.close()
    assert done.returncode == 3 and done.stderr.count(b"\n") == 1, done.stderr
    closed = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
                            preexec_fn=lambda: os.close(0))  # fmt: skip
    # Closed, it reads as empty (Node opens /dev/null in its place): no signature, 1.
    assert closed.returncode == 1 and b"Traceback" not in closed.stderr, closed.stderr


@pytest.mark.parametrize("tool", sorted(COMMANDS))
def test_a_named_signature_is_for_one_bundle_and_never_empty(
    bundles: dict[str, Path], stdin_signature: dict[str, Path], tool: str
) -> None:
    """A signature is over one bundle's head: --signature with several bundles, or an
    empty path, is a usage error (exit 2) in both verifiers."""
    allowed = str(stdin_signature["allowed"])
    two = [str(stdin_signature["bundle"]), str(bundles["rpt-clean/alice"])]
    sig = str(stdin_signature["signature"])
    for args in (
        [*two, "--allowed-signers", allowed, "--signature", sig],
        [two[0], "--allowed-signers", allowed, "--signature", ""],
    ):
        done = _run([*COMMANDS[tool], *args])
        assert done.returncode == 2, (args, done.stderr)
