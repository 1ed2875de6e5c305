"""What verify and export tell an auditor (SPEC 5 "Output", 7): end to end, over the fixtures.

The committed store fixtures/stores/main is exported by the real command line (bob lacks
dataset.read_body, so his bundle of rpt-every-reason lists nearly every reason), then
verified: the summary is on stdout, each reason is explained in words, the --strict
outcome is forecast, a superseded envelope is shown, Markdown names the claim groups, an
eval-banana run that failed its own gate says so, and the verification record names the
tool, the time and the SHA-256 of the very file read.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, run_cli

import bundler
from bundler.bundles.verify import read_and_verify
from bundler.core import schemas
from bundler.core.claims import GROUPS, Claim, State, Verdict, Verification, VerifyOptions
from bundler.core.textsafe import shown_md
from bundler.evalbanana.export import UnavailableReason
from bundler.evalbook.export import Reason
from bundler.evalbook.listing import REASON_EXPLANATIONS, REASONS
from bundler.report.render import verification_markdown, verification_text

STORE = REPO / "fixtures" / "stores" / "main"
EB_PROJECT = REPO / "fixtures" / "eval-banana" / "project"
EB_RUN = next((REPO / "fixtures" / "eval-banana" / "runs" / "default").iterdir())
EXPORTED_AT = "2026-11-30T00:00:00Z"
HEX = re.compile(r"^[0-9a-f]{64}$")


# ----------------------------------------------------------------------------- helpers


def sha256_hex(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def export_cli(report_id: str, out: Path, *extra: str, principal: str = "bob") -> Any:
    done = run_cli(
        "export",
        "--store",
        str(STORE),
        "--report",
        report_id,
        "--principal",
        principal,
        "--exported-at",
        EXPORTED_AT,
        "--out",
        str(out),
        *extra,
    )
    assert done.returncode == 0, done.stderr.decode()
    return done


def labels(text: str) -> dict[str, str]:
    """The first value of each ``Label: value`` line of a console summary."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        match = re.match(r"^([A-Z][A-Za-z0-9 -]*):\s+(.*)$", line)
        if match:
            found.setdefault(match.group(1), match.group(2))
    return found


def validate(name: str, doc: Any) -> None:
    schemas.validate(name, doc, source=name)


@pytest.fixture(scope="module")
def every_reason(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """rpt-every-reason exported by bob through the command line: (archive, export stdout)."""
    out = tmp_path_factory.mktemp("every") / "every-reason.tar.zst"
    done = export_cli("rpt-every-reason", out)
    yield out, done.stdout.decode()


@pytest.fixture(scope="module")
def eb_archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("eb") / "eb.tar.zst"
    done = run_cli(
        "export-eb",
        str(EB_RUN),
        "--project",
        str(EB_PROJECT),
        "--exported-at",
        "2026-11-30T03:00:00Z",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr.decode()
    return out, done.stdout.decode()


# ----------------------------------------------------------------------- reason words


def _schema_reasons(node: Any) -> set[str]:
    """Every value a ``reason`` property of a schema may take (its enums, anywhere)."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "reason" and isinstance(value, dict):
                found |= _enum_values(value)
            found |= _schema_reasons(value)
    elif isinstance(node, list):
        for item in node:
            found |= _schema_reasons(item)
    return found


def _enum_values(node: Any) -> set[str]:
    if isinstance(node, dict):
        values = {v for v in node.get("enum", []) if isinstance(v, str)}
        for value in node.values():
            values |= _enum_values(value)
        return values
    if isinstance(node, list):
        return set().union(*(_enum_values(v) for v in node)) if node else set()
    return set()


def every_possible_reason() -> set[str]:
    """Each reason a claim can carry: the exporters' enums, the listing table, the schemas."""
    reasons = {r.value for r in Reason} | {r.value for r in UnavailableReason}
    reasons |= set().union(*REASONS.values())
    for name in ("verification", "bundle", "eb-bundle"):
        doc = schemas.load_schema(name)
        reasons |= _schema_reasons(doc) | _enum_values(doc["$defs"].get("reason", {}))
    return reasons


def test_every_reason_a_claim_can_carry_is_explained() -> None:
    possible = every_possible_reason()
    assert {"payload_at_sso", "case_limit", "definition_missing"} <= possible
    assert possible == set(REASON_EXPLANATIONS), possible ^ set(REASON_EXPLANATIONS)
    for reason, words in REASON_EXPLANATIONS.items():
        assert len(words.split()) >= 6 and reason not in words, reason


def test_each_reason_is_explained_once_next_to_its_count_on_console_and_markdown() -> None:
    claims = (
        *(
            Claim(8, f"item {i}", State.UNPROVABLE, reason=reason)
            for i, reason in enumerate(sorted(REASON_EXPLANATIONS))
        ),
        Claim(8, "twice", State.UNPROVABLE, reason="payload_at_sso"),
    )
    v = Verification(
        source="x.tar.zst",
        verdict=Verdict.VERIFIED,
        bundle_digest="sha256:" + "a" * 64,
        report_id="rpt-x",
        report_digest="sha256:" + "b" * 64,
        claims=claims,
    )
    text = verification_text(v)
    md = verification_markdown(v)
    for reason, words in REASON_EXPLANATIONS.items():
        n = 2 if reason == "payload_at_sso" else 1
        unit = "claims" if n == 2 else "claim"
        assert text.count(f"  {reason}: {n} {unit} - {words}\n") == 1, reason
        assert text.count(words) == 1
        rows = [
            line for line in md.splitlines() if line.startswith(f"| {shown_md(reason)} | {n} | ")
        ]
        assert len(rows) == 1 and rows[0].endswith(f" | {shown_md(words)} |"), reason


# -------------------------------------------------------------------------- verify


def test_verify_summary_is_on_stdout_and_explains_every_reason(
    every_reason: tuple[Path, str],
) -> None:
    archive, _ = every_reason
    done = run_cli("verify", str(archive))
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b""
    text = done.stdout.decode()
    found = labels(text)
    record = json.loads(run_cli("verify", "--json", str(archive)).stdout)
    counts = record["counts"]
    assert found["Verdict"] == "VERIFIED"
    assert found["Proven"] == f"{counts['proven']} claims"
    assert found["Unprovable"] == f"{counts['unprovable']} claims"
    assert found["Failed"] == "0 claims"
    assert found["Report"].split() == ["rpt-every-reason", record["report_digest"]]
    body = json.loads((STORE / "reports" / "rpt-every-reason" / "body.json").read_bytes())
    assert found["Result"].split()[0] == body["result"] == record["report_result"]
    assert found["Envelope"].startswith("current")
    assert found["Anchor"].startswith("none: this result shows self-consistency only")
    assert len(record["unprovable_by_reason"]) >= 6
    for reason, n in record["unprovable_by_reason"].items():
        unit = "claim" if n == 1 else "claims"
        line = f"  {reason}: {n} {unit} - {REASON_EXPLANATIONS[reason]}"
        assert text.splitlines().count(line) == 1, reason
    # The archive line names the file's SHA-256, as sha256sum prints it.
    assert found["Archive"].split()[:4] == [
        str(archive.stat().st_size),
        "bytes,",
        "SHA-256",
        sha256_hex(archive),
    ]
    # --quiet is for stderr chatter: the result stays.
    quiet = run_cli("verify", "-q", str(archive))
    assert quiet.returncode == 0 and quiet.stderr == b""
    assert labels(quiet.stdout.decode())["Verdict"] == "VERIFIED"


def test_strict_is_forecast_and_then_applied(every_reason: tuple[Path, str]) -> None:
    archive, _ = every_reason
    plain = run_cli("verify", str(archive))
    n = json.loads(run_cli("verify", "--json", str(archive)).stdout)["counts"]["unprovable"]
    assert n > 0
    forecast = f"With --strict: FAILED ({n} unprovable claims would fail)"
    assert plain.stdout.decode().splitlines().count(forecast) == 1
    strict = run_cli("verify", "--strict", str(archive))
    assert strict.returncode == 1
    text = strict.stdout.decode()
    found = labels(text)
    assert found["Verdict"] == "FAILED  (--strict)"
    assert found["Strict"] == f"applied (--strict): {n} unprovable claims counted as failed"
    assert found["Failed"] == f"{n} claims" and found["Unprovable"] == "0 claims"
    assert "With --strict" not in text
    # Under --strict the reasons are still explained, next to what they failed.
    assert (
        f"--strict, no_dataset_read_body: 44 claims - {REASON_EXPLANATIONS['no_dataset_read_body']}"
        in text
    )
    record = json.loads(run_cli("verify", "--json", "--strict", str(archive)).stdout)
    validate("verification", record)
    assert record["strict_forecast"] is None and record["strict"] is True


def test_a_clean_bundle_has_nothing_to_forecast(tmp_path: Path) -> None:
    archive = tmp_path / "clean.tar.zst"
    export_cli("rpt-clean", archive, principal="alice")
    done = run_cli("verify", str(archive))
    assert done.returncode == 0
    assert "With --strict" not in done.stdout.decode()
    assert json.loads(run_cli("verify", "--json", str(archive)).stdout)["strict_forecast"] is None


def test_superseded_envelope_is_shown(tmp_path: Path) -> None:
    envelope = json.loads((STORE / "reports" / "rpt-superseded" / "envelope.json").read_bytes())
    assert envelope["status"] == "superseded"
    archive = tmp_path / "superseded.tar.zst"
    export_cli("rpt-superseded", archive)
    done = run_cli("verify", str(archive))
    assert done.returncode == 0, done.stderr.decode()
    found = labels(done.stdout.decode())
    assert found["Envelope"].startswith(
        f"superseded by {envelope['superseded_by']} at {envelope['superseded_at']}, "
        f"reason {envelope['superseded_reason']}"
    )
    assert "no longer gates" in found["Envelope"]
    record = json.loads(run_cli("verify", "--json", str(archive)).stdout)
    validate("verification", record)
    assert record["envelope"] == {
        "status": "superseded",
        "superseded_by": envelope["superseded_by"],
        "superseded_at": envelope["superseded_at"],
        "reason": envelope["superseded_reason"],
    }
    out_dir = tmp_path / "out"
    assert run_cli("verify", "--output-dir", str(out_dir), str(archive)).returncode == 0
    md = (out_dir / "verification.md").read_text("utf-8")
    assert "- **Envelope:** superseded by" in md


def test_verification_record_names_tool_time_and_archive(
    every_reason: tuple[Path, str],
) -> None:
    archive, _ = every_reason
    before = datetime.now(UTC).replace(microsecond=0)
    done = run_cli("verify", "--json", str(archive))
    after = datetime.now(UTC)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.count(b"\n") == 1  # one JSON line, nothing else on stdout
    record = json.loads(done.stdout)
    validate("verification", record)
    assert record["tool"] == {"name": "evalbook-bundle", "version": bundler.__version__}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", record["verified_at"])
    when = datetime.strptime(record["verified_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert before <= when <= after + timedelta(seconds=1)
    assert record["archive"] == {
        "sha256": sha256_hex(archive),
        "size": archive.stat().st_size,
    }
    # verification.json carries the same record as the JSON line.
    out_dir = archive.parent / "out-record"
    assert run_cli("verify", "--output-dir", str(out_dir), str(archive)).returncode == 0
    written = json.loads((out_dir / "verification.json").read_bytes())
    validate("verification", written)
    assert written["archive"] == record["archive"] and written["tool"] == record["tool"]


def test_a_bag_directory_names_no_archive(every_reason: tuple[Path, str], tmp_path: Path) -> None:
    archive, _ = every_reason
    out = tmp_path / "x"
    done = run_cli("extract", str(archive), str(out))
    assert done.returncode == 0, done.stderr.decode()
    found = labels(done.stdout.decode())  # extract's summary is its result: stdout
    assert found["Verdict"] == "VERIFIED" and found["Extracted"] == str(out)
    assert found["Archive"].split()[3] == sha256_hex(archive)
    (bag,) = out.iterdir()
    record = json.loads(run_cli("verify", "--json", str(bag)).stdout)
    validate("verification", record)
    assert record["verdict"] == "verified" and record["archive"] is None


def test_an_unreadable_archive_is_still_named_by_its_sha256(
    every_reason: tuple[Path, str], tmp_path: Path
) -> None:
    archive, _ = every_reason
    broken = tmp_path / "trailing.tar.zst"
    broken.write_bytes(archive.read_bytes() + b"not part of the frame")
    done = run_cli("verify", "--json", str(broken))
    assert done.returncode == 3
    record = json.loads(done.stdout)
    validate("verification", record)
    assert record["verdict"] == "error" and "trailing bytes" in record["error"]
    assert record["archive"] == {"sha256": sha256_hex(broken), "size": broken.stat().st_size}
    human = run_cli("verify", str(broken))
    assert human.returncode == 3
    assert labels(human.stdout.decode())["Verdict"] == "ERROR (no verdict possible)"


def test_progress_counts_the_archive_bytes_up_to_its_size(
    every_reason: tuple[Path, str], tmp_path: Path
) -> None:
    archive, _ = every_reason
    seen: list[int] = []
    result, _ = read_and_verify(str(archive), VerifyOptions(), progress=seen.append)
    assert result.verdict is Verdict.VERIFIED
    assert seen == sorted(seen) and seen[-1] == archive.stat().st_size
    assert result.archive is not None and result.archive.sha256 == sha256_hex(archive)


def test_several_bundles_totals_last_on_stdout_and_json_lines_only(
    every_reason: tuple[Path, str],
) -> None:
    archive, _ = every_reason
    human = run_cli("verify", str(archive), str(archive))
    assert human.returncode == 0
    lines = human.stdout.decode().splitlines()
    assert sum(1 for line in lines if line.startswith("Verdict:")) == 2
    assert lines[-1] == "Totals:      2 bundles: 2 verified"
    as_json = run_cli("verify", "--json", "-q", str(archive), str(archive))
    assert as_json.returncode == 0 and as_json.stderr == b""
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert len(rows) == 2
    for row in rows:
        validate("verification", row)
    # Without -q too: with --json, stderr holds no summary and no totals (SPEC 7).
    noisy = run_cli("verify", "--json", str(archive), str(archive))
    assert noisy.stdout.count(b"\n") == 2
    assert noisy.stderr == b""


def test_markdown_names_the_claim_groups(every_reason: tuple[Path, str], tmp_path: Path) -> None:
    archive, _ = every_reason
    out_dir = tmp_path / "md"
    assert run_cli("verify", "--output-dir", str(out_dir), str(archive)).returncode == 0
    md = (out_dir / "verification.md").read_text("utf-8")
    rows = [line for line in md.splitlines() if re.match(r"^\| \d+ ", line)]
    assert rows
    used = set()
    for row in rows:
        number, name = row.split(" | ")[0].removeprefix("| ").split(" ", 1)
        assert GROUPS[int(number)] == name, row
        used.add(name)
    assert {"bagit", "bundle", "report", "coherence"} <= used
    assert "| reason | claims | meaning |" in md
    assert REASON_EXPLANATIONS["trace_capture_policy"] in md.replace("\\", "")
    assert "- **With --strict:** FAILED (" in md


# --------------------------------------------------------------------- eval-banana


def test_eval_banana_run_that_failed_its_gate_says_so(eb_archive: tuple[Path, str]) -> None:
    archive, _ = eb_archive
    report = json.loads((EB_RUN / "report.json").read_bytes())
    assert report["run_passed"] is False
    done = run_cli("verify", str(archive))
    assert done.returncode == 0, done.stderr.decode()
    found = labels(done.stdout.decode())
    assert found["Passed"] == "no" and found["Verdict"] == "VERIFIED"
    assert found["Run result"] == (
        "the run did not pass its own gate (passed: no); VERIFIED below means the bundle "
        "holds exactly what the run wrote, not that the run passed"
    )
    record = json.loads(run_cli("verify", "--json", str(archive)).stdout)
    validate("verification", record)
    assert record["report_result"] == "fail" and record["envelope"] is None
    assert record["archive"]["sha256"] == sha256_hex(archive)
    in_place = run_cli("verify", str(EB_RUN), "--project", str(EB_PROJECT))
    assert in_place.returncode == 0
    assert "VERIFIED below means the run directory is exactly what the run wrote" in (
        in_place.stdout.decode()
    )
    record = json.loads(
        run_cli("verify", "--json", str(EB_RUN), "--project", str(EB_PROJECT)).stdout
    )
    validate("verification", record)
    assert record["archive"] is None and record["report_result"] == "fail"


# -------------------------------------------------------------------------- export


def _printed(stdout: str) -> dict[str, str]:
    head = stdout.splitlines()[:3]
    assert [line.split(":", 1)[0] for line in head] == [
        "Archive",
        "Bundle digest",
        "Archive SHA-256",
    ], head
    return {k: v.strip() for k, v in (line.split(":", 1) for line in head)}


def test_export_stdout_names_both_numbers(every_reason: tuple[Path, str], tmp_path: Path) -> None:
    archive, stdout = every_reason
    printed = _printed(stdout)
    assert printed["Archive"] == str(archive)
    file_hex = printed["Archive SHA-256"].split()[0]
    assert HEX.match(file_hex) and file_hex == sha256_hex(archive)
    assert "(sha256sum of the file)" in printed["Archive SHA-256"]
    bundle_digest = printed["Bundle digest"].split()[0]
    assert bundle_digest.startswith("sha256:") and bundle_digest.removeprefix("sha256:") != file_hex
    assert "verify --expect-bundle-digest" in printed["Bundle digest"]
    # Nothing on stdout reads as a sha256sum line ("<hex>  <path>").
    assert not any(re.match(r"^(sha256:)?[0-9a-f]{64}  ", line) for line in stdout.splitlines())
    # The printed bundle digest anchors verify.
    anchored = run_cli("verify", "--expect-bundle-digest", bundle_digest, str(archive))
    assert anchored.returncode == 0, anchored.stdout.decode()
    # The printed SHA-256 checks with sha256sum -c, as its label says.
    sha256sum = shutil.which("sha256sum")
    if sha256sum is not None:
        check = tmp_path / "SHA256SUMS"
        check.write_text(f"{file_hex}  {archive}\n", encoding="utf-8")
        ran = subprocess.run([sha256sum, "-c", str(check)], capture_output=True, check=False)
        assert ran.returncode == 0, ran.stdout + ran.stderr
    # The export summary follows, on stdout too, each listed reason explained.
    text = stdout
    assert "Exported:    rpt-every-reason -> " in text
    assert (
        f"  no_dataset_read_body: 44 items - {REASON_EXPLANATIONS['no_dataset_read_body']}" in text
    )


def test_export_json_summary_is_schema_valid_and_names_both(tmp_path: Path) -> None:
    out = tmp_path / "a.tar.zst"
    done = export_cli("rpt-every-reason", out, "--json", "-q")
    assert done.stderr == b"" and done.stdout.count(b"\n") == 1
    summary = json.loads(done.stdout)
    validate("export-summary", summary)
    assert summary["archive_sha256"] == "sha256:" + sha256_hex(out)
    assert summary["archive_size"] == out.stat().st_size
    record = json.loads(run_cli("verify", "--json", str(out)).stdout)
    assert summary["bundle_digest"] == record["bundle_digest"]
    assert summary["archive_sha256"].removeprefix("sha256:") == record["archive"]["sha256"]
    quiet = export_cli("rpt-every-reason", tmp_path / "b.tar.zst", "-q")
    assert quiet.stderr == b"" and _printed(quiet.stdout.decode())


def test_export_eb_stdout_and_json(eb_archive: tuple[Path, str], tmp_path: Path) -> None:
    archive, stdout = eb_archive
    printed = _printed(stdout)
    assert printed["Archive"] == str(archive)
    assert printed["Archive SHA-256"].split()[0] == sha256_hex(archive)
    assert "Run result:  the run did not pass its own gate (passed: no)" in stdout
    out = tmp_path / "eb.tar.zst"
    done = run_cli(
        "export-eb", str(EB_RUN), "--project", str(EB_PROJECT), "--exported-at",
        "2026-11-30T03:00:00Z", "--out", str(out), "--json", "-q",
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == b""
    summary = json.loads(done.stdout)
    validate("export-eb-summary", summary)
    assert summary["archive_sha256"] == "sha256:" + sha256_hex(out)
    assert summary["bundle_digest"] == printed["Bundle digest"].split()[0]
