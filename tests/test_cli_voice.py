"""One voice across every command (SPEC 5, 7): every command's --json output, in success
and in failure, is JSON Lines whose every line validates against the schema its
``schema`` field names; every option has a help text and every command an example.

The commands run as subprocesses of the installed console script, against the committed
fixtures and the real SeaweedFS server the storage tests use.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import orjson
import pytest
from conftest import EXPORTED_AT, run_cli
from s3_server import Server

from bundler.cli import cli
from bundler.core.schemas import validator_for

REPO = Path(__file__).resolve().parent.parent
STORE = REPO / "fixtures" / "stores" / "main"
EB_PROJECT = REPO / "fixtures" / "eval-banana" / "project"
EB_RUN = REPO / "fixtures" / "eval-banana" / "runs" / "default" / "20261130_022618_e23eabf2"
STAMP = EXPORTED_AT.strftime("%Y-%m-%dT%H:%M:%SZ")
SSH_KEYGEN = shutil.which("ssh-keygen")


def _schema_file(schema_id: str) -> str:
    """``evalbook.proof_check.v1`` -> ``proof-check`` (the file schemas/proof-check.schema.json)."""
    assert schema_id.startswith("evalbook.") and schema_id.endswith(".v1"), schema_id
    return schema_id.removeprefix("evalbook.").removesuffix(".v1").replace("_", "-")


def json_lines(done: subprocess.CompletedProcess[bytes]) -> list[dict[str, Any]]:
    """Every stdout line as a validated JSON object; stdout holds nothing else."""
    text = done.stdout.decode()
    assert text.endswith("\n"), f"stdout is not JSON Lines: {text[-200:]!r}"
    lines = []
    for raw in text.splitlines():
        value = orjson.loads(raw)
        assert isinstance(value, dict), raw
        errors = sorted(validator_for(_schema_file(value["schema"])).iter_errors(value), key=str)
        assert not errors, f"{value['schema']}: {errors[0]}"
        lines.append(value)
    return lines


def one_line(done: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    lines = json_lines(done)
    assert len(lines) == 1, lines
    return lines[0]


def failure(done: subprocess.CompletedProcess[bytes], code: int) -> dict[str, Any]:
    """A failed command's one JSON line: the error object, its code equal to the exit code."""
    assert done.returncode == code, (done.returncode, done.stderr.decode())
    line = one_line(done)
    assert line["schema"] == "evalbook.error.v1", line
    assert line["exit_code"] == code
    assert "Traceback" not in done.stderr.decode()
    assert done.stderr.decode().strip(), "the error is also told on stderr"
    return line


# ----------------------------------------------------------------- help and options


def _commands() -> dict[str, click.Command]:
    return dict(sorted(cli.commands.items()))


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_every_option_has_help_and_the_shared_names(name: str) -> None:
    command = _commands()[name]
    options = [p for p in command.params if isinstance(p, click.Option) and not p.hidden]
    missing = [p.opts[0] for p in options if not (p.help or "").strip()]
    assert not missing, f"{name}: options without help text: {missing}"
    names = {opt for p in options for opt in p.opts}
    for shared in ("-q", "--quiet", "--json", "--verbose"):
        assert shared in names, f"{name} lacks {shared}"
    assert "--sign-key" not in names, "a signing key is --key everywhere"
    for p in options:
        if p.name == "max_bytes":
            assert p.show_default == "64 GiB", f"{name}: --max-bytes default reads {p.default}"


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_every_command_help_shows_examples(name: str) -> None:
    done = run_cli(name, "--help")
    assert done.returncode == 0
    text = done.stdout.decode()
    assert "\nExamples:\n" in text, f"{name} --help has no Examples section"
    examples = text.split("\nExamples:\n", 1)[1]
    assert f"evalbook-bundle {name}" in examples or (
        name == "canonicalize" and "canonicalize" in examples
    ), examples


def test_verbose_is_accepted_after_the_command(tmp_path: Path) -> None:
    done = run_cli("inspect", str(tmp_path / "absent.tar.zst"), "--verbose")
    assert done.returncode == 3
    assert "Traceback" in done.stderr.decode()  # --verbose shows it, wherever it is given
    quiet = run_cli("inspect", str(tmp_path / "absent.tar.zst"))
    assert quiet.returncode == 3 and "Traceback" not in quiet.stderr.decode()


def test_a_refused_option_with_json_names_the_option(tmp_path: Path) -> None:
    done = run_cli("inspect", "--json", "--max-bytes", "lots", str(tmp_path / "x"))
    line = failure(done, 2)
    assert line["input"] == "--max-bytes" and line["command"] == "inspect"


# ----------------------------------------------------------- every command, --json


@pytest.fixture(scope="module")
def keypair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An Ed25519 key and an allowed_signers file naming it for bundle heads."""
    if SSH_KEYGEN is None:
        pytest.fail("ssh-keygen is needed (openssh-client)")
    home = tmp_path_factory.mktemp("keys")
    key = home / "key"
    subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", "voice", "-f", str(key)], check=True
    )
    key_type, blob = (home / "key.pub").read_text().split()[:2]
    allowed = home / "allowed_signers"
    allowed.write_text(
        f'voice@example.org namespaces="evalbook-bundle-head-v1" {key_type} {blob}\n'
    )
    return key, allowed


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory, keypair: tuple[Path, Path]) -> Path:
    out = tmp_path_factory.mktemp("voice") / "clean.tar.zst"
    done = run_cli(
        "export", "--store", str(STORE), "--report", "rpt-clean", "--principal", "alice",
        "--exported-at", STAMP, "--out", str(out), "--key", str(keypair[0]), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    return out


Case = Callable[[Path], subprocess.CompletedProcess[bytes]]


def test_export_json_success_and_failure(tmp_path: Path) -> None:
    done = run_cli(
        "export", "--store", str(STORE), "--report", "rpt-clean", "--principal", "bob",
        "--exported-at", STAMP, "--out", str(tmp_path / "b.tar.zst"), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    summary = one_line(done)
    assert summary["bundle_digest"].startswith("sha256:")
    line = failure(
        run_cli(
            "export",
            "--store",
            str(STORE),
            "--report",
            "rpt-nope",
            "--principal",
            "bob",
            "--exported-at",
            STAMP,
            "--out",
            str(tmp_path / "c.tar.zst"),
            "--json",
        ),
        3,
    )
    # The missing report is the --report option's (the library's report_id), not the store's.
    assert line["error"].startswith("--report 'rpt-nope': no such report"), line["error"]
    assert not (tmp_path / "c.tar.zst").exists()
    denied = run_cli(
        "export", "--store", str(STORE), "--report", "rpt-clean", "--principal", "carol",
        "--exported-at", STAMP, "--out", str(tmp_path / "d.tar.zst"), "--json",
    )  # fmt: skip
    assert denied.returncode == 4
    failure(denied, denied.returncode)


def test_export_eb_json_success_and_failure(tmp_path: Path) -> None:
    done = run_cli(
        "export-eb", str(EB_RUN), "--project", str(EB_PROJECT), "--exported-at",
        "2026-11-30T03:00:00Z", "--out", str(tmp_path / "eb.tar.zst"), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    one_line(done)
    failure(
        run_cli(
            "export-eb",
            str(tmp_path / "no-run"),
            "--project",
            str(EB_PROJECT),
            "--exported-at",
            "2026-11-30T03:00:00Z",
            "--json",
        ),
        3,
    )


def test_verify_inspect_extract_json(exported: Path, tmp_path: Path) -> None:
    result = one_line(run_cli("verify", str(exported), "--json"))
    assert result["schema"] == "evalbook.verification.v1" and result["verdict"] == "verified"
    several = json_lines(run_cli("verify", str(exported), str(tmp_path / "absent"), "--json"))
    assert [r["verdict"] for r in several] == ["verified", "error"]
    info = one_line(run_cli("inspect", str(exported), "--json"))
    assert info["bundle_schema"] == "evalbook.reproducibility_bundle.v1"
    failure(run_cli("inspect", str(tmp_path / "absent.tar.zst"), "--json"), 3)
    extracted = run_cli("extract", str(exported), str(tmp_path / "bag"), "--json")
    assert extracted.returncode == 0, extracted.stderr.decode()
    assert one_line(extracted)["verdict"] == "verified"
    refused = run_cli("extract", str(tmp_path / "absent.tar.zst"), str(tmp_path / "b2"), "--json")
    assert refused.returncode == 3
    assert one_line(refused)["schema"] in ("evalbook.verification.v1", "evalbook.error.v1")


def test_digest_and_canonicalize_json(exported: Path, tmp_path: Path) -> None:
    doc = tmp_path / "doc.json"
    doc.write_bytes(b'{"b": 1, "a": [1.0, "x"]}')
    lines = json_lines(run_cli("digest", "--canonical", "--json", str(doc), str(doc)))
    assert [line["kind"] for line in lines] == ["canonical", "canonical"]
    canon = one_line(run_cli("canonicalize", "--json", str(doc)))
    assert canon["canonical"] == '{"a":[1,"x"],"b":1}'
    assert canon["digest"] == lines[0]["digest"]
    raw = one_line(run_cli("digest", "--json", str(exported)))
    assert raw["kind"] == "raw"
    # One unreadable FILE among several: its error line, the others' digests, exit 3.
    mixed = run_cli("digest", "--json", str(doc), str(tmp_path / "absent"))
    assert mixed.returncode == 3
    kinds = [line["schema"] for line in json_lines(mixed)]
    assert kinds == ["evalbook.digest.v1", "evalbook.error.v1"]
    failure(run_cli("digest", "--json", str(tmp_path / "absent")), 3)
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"a": 1, "a": 2}')
    failure(run_cli("canonicalize", "--json", str(bad)), 3)
    failure(run_cli("digest", "--canonical", "--json", str(bad)), 3)
    framed = one_line(run_cli("digest", "--json", "--framed", "t/v1", f"a={doc}", f"b={doc}"))
    assert framed["kind"] == "framed" and framed["components"] == ["a", "b"]


def test_sign_prove_check_proof_json(
    exported: Path, keypair: tuple[Path, Path], tmp_path: Path
) -> None:
    key, allowed = keypair
    copy = tmp_path / "copy.tar.zst"
    copy.write_bytes(exported.read_bytes())
    # The head carries this key's signature already (export --key): nothing is written.
    signed = one_line(run_cli("sign", str(copy), "--key", str(key), "--json"))
    assert (signed["signature"], signed["state"]) == ("bundle-head.json.sig", "already_signed")
    assert not Path(f"{copy}.sig").exists()
    proof_file = tmp_path / "p.json"
    written = one_line(
        run_cli("prove", str(copy), "--case", "accuracy-00000", "--out", str(proof_file), "--json")
    )
    assert written["out"] == str(proof_file)
    # Without --out the proof itself is the one JSON line.
    proof = one_line(run_cli("prove", str(copy), "--case", "accuracy-00000", "--json"))
    assert proof["schema"] == "evalbook.case_proof.v1"
    failure(run_cli("prove", str(copy), "--case", "no-such-case", "--json"), 3)
    checked = one_line(
        run_cli("check-proof", str(proof_file), "--allowed-signers", str(allowed), "--json")
    )
    assert checked["proven"] and checked["anchor"]["signer"].startswith("voice@example.org")
    unanchored = run_cli(
        "check-proof", str(proof_file), "--expect-bundle-digest", written["bundle_digest"], "--json"
    )
    assert unanchored.returncode == 1
    assert one_line(unanchored)["proven"] is False
    failure(run_cli("check-proof", str(tmp_path / "absent.json"), "--json"), 3)


def test_audit_json(exported: Path, tmp_path: Path) -> None:
    done = run_cli("audit", str(exported), "--json")
    assert done.returncode == 0, done.stderr.decode()
    assert one_line(done)["schema"] == "evalbook.audit.v1"
    failed = run_cli("audit", str(tmp_path / "absent.tar.zst"), "--json")
    assert failed.returncode == 3
    assert one_line(failed)["schema"] in ("evalbook.audit.v1", "evalbook.error.v1")


def test_reports_json(tmp_path: Path) -> None:
    lines = json_lines(run_cli("reports", "--store", str(STORE), "--json"))
    assert "rpt-clean" in {line["report_id"] for line in lines}
    failure(run_cli("reports", "--store", str(tmp_path / "absent"), "--json"), 3)


def test_storage_commands_json(
    exported: Path, s3_server: Server, bucket: str, tmp_path: Path
) -> None:
    endpoint = ["--endpoint-url", s3_server.endpoint]
    copy = tmp_path / "up.tar.zst"
    copy.write_bytes(exported.read_bytes())
    uploaded = one_line(run_cli("upload", str(copy), f"s3://{bucket}/a", *endpoint, "--json"))
    assert uploaded["status"] == "uploaded"
    again = one_line(run_cli("upload", str(copy), f"s3://{bucket}/a", *endpoint, "--json"))
    assert again["status"] == "already_archived"
    failure(run_cli("upload", str(copy), f"s3://{bucket}/a/x.tar.zst", *endpoint, "--json"), 2)
    listed = json_lines(run_cli("list", f"s3://{bucket}/a", *endpoint, "--json"))
    assert [row["key"] for row in listed] == [uploaded["key"]]
    failure(run_cli("list", "not-a-url", *endpoint, "--json"), 2)
    url = uploaded["url"]
    got = one_line(run_cli("download", url, str(tmp_path / "dl.tar.zst"), *endpoint, "--json"))
    assert got["sha256"] == uploaded["sha256"]
    # No such object: an item not found (SPEC 8), not a storage failure.
    failure(run_cli("download", url + ".nope", str(tmp_path / "dl2"), *endpoint, "--json"), 3)
    stored = one_line(run_cli("verify", url, *endpoint, "--json"))
    assert stored["verdict"] == "verified"


def test_shell_completion_as_the_readme_documents() -> None:
    script = run_cli(env={"_EVALBOOK_BUNDLE_COMPLETE": "bash_source"})
    assert script.returncode == 0 and b"_evalbook_bundle_completion" in script.stdout
    done = run_cli(
        env={
            "_EVALBOOK_BUNDLE_COMPLETE": "bash_complete",
            "COMP_WORDS": "evalbook-bundle ver",
            "COMP_CWORD": "1",
        }
    )
    assert done.stdout.decode().split() == ["plain,verifier-page", "plain,verify"]
