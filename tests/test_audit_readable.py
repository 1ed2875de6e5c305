"""The audit as an auditor reads it: streams, the rule and numbers behind each disagreement,
words for methods and levels, the label for defects of the issued report, and anchors
given as verify takes them (SPEC 5, 7, 12).

Every test runs the real command line as a subprocess over bundles exported, by the
command line too, from the committed audit store (fixtures/stores/audit), whose reports
carry planted disagreements (``bundler.testing.fixtures_audit.SCENARIOS``).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
import repack
from conftest import run_cli

from bundler.core import canonical, schemas

REPO = Path(__file__).resolve().parents[1]
STORE = REPO / "fixtures" / "stores" / "audit"
EXPORTED_AT = "2026-11-30T00:00:00Z"
SSH_KEYGEN = "/usr/bin/ssh-keygen"
BELOW = "rpt-audit-pass-below-threshold"
CONSISTENT = "rpt-audit-consistent-repeats"
REPORTS = (
    BELOW,
    CONSISTENT,
    "rpt-audit-timeout-as-missing",
    "rpt-audit-wilson-continuity",
    "rpt-audit-coverage-over-repeats",
    "rpt-audit-bootstrap-other-seed",
    "rpt-audit-documents-differ",
)
SELF_CONSISTENT = "none: this result shows self-consistency only, not who made the bundle"


# ----------------------------------------------------------------------------- helpers


def _export(report: str, out: Path, *extra: str) -> Path:
    done = run_cli(
        "export", "--store", str(STORE), "--report", report, "--principal", "alice",
        "--out", str(out), "--exported-at", EXPORTED_AT, *extra,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("readable")
    return {r: _export(r, root / f"{r}.tar.zst") for r in REPORTS}


def audit(*args: str) -> subprocess.CompletedProcess[bytes]:
    return run_cli("audit", *args)


def out(done: subprocess.CompletedProcess[bytes]) -> str:
    return done.stdout.decode("utf-8")


def audit_json(*args: str, code: int) -> dict[str, Any]:
    """``audit --json``: exactly one compact JSON line on stdout, schema-valid."""
    done = audit(*args, "--json")
    assert done.returncode == code, done.stderr.decode()
    text = out(done)
    assert text.endswith("\n") and text.count("\n") == 1, text[:500]
    doc = json.loads(text)
    assert done.stdout == orjson.dumps(doc) + b"\n"  # compact
    errors = list(schemas.validator_for("audit").iter_errors(doc))
    assert not errors, [e.message for e in errors[:3]]
    return doc


def disagreement_lines(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Disagreements:"))
    found = []
    for line in lines[start + 1 :]:
        if not line.startswith("  - "):
            break
        found.append(line[4:])
    return found


def line_of(text: str, prefix: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(prefix))


# ----------------------------------------------------------------------------- streams


def test_the_summary_is_the_result_on_stdout_and_quiet_keeps_it(
    exported: dict[str, Path],
) -> None:
    plain = audit(str(exported[BELOW]))
    assert plain.returncode == 1
    assert out(plain).startswith("Bundle:      ")
    assert "Verdict:     INCONSISTENT (3 disagreement(s))" in out(plain)
    assert plain.stderr == b""  # no terminal: no progress bar, and no notes
    for flag in ("-q", "--quiet"):
        quiet = audit(str(exported[BELOW]), flag)
        assert quiet.returncode == 1
        assert quiet.stdout == plain.stdout and quiet.stderr == b""


def test_json_is_one_line_and_nothing_else(exported: dict[str, Path]) -> None:
    done = audit(str(exported[BELOW]), "--json", "-q")
    assert done.returncode == 1 and done.stderr == b""
    doc = audit_json(str(exported[BELOW]), code=1)
    assert doc["verdict"] == "inconsistent" and doc["exit_code"] == 1
    # The same record but for the time each run read the bundle.
    assert json.loads(out(done)) == {**doc, "audited_at": json.loads(out(done))["audited_at"]}
    # Consistent: exit 0, valid too.
    consistent = audit_json(str(exported[CONSISTENT]), code=0)
    assert consistent["verdict"] == "consistent" and consistent["disagreements"] == []


def test_an_unreadable_bundle_is_a_valid_error_record_and_one_stderr_line(
    tmp_path: Path,
) -> None:
    junk = tmp_path / "junk.tar.zst"
    junk.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 64)
    doc = audit_json(str(junk), code=3)
    assert doc["verdict"] == "error" and doc["anchor"]["self_consistent_only"] is True
    done = audit(str(junk), "--json", "-q")
    (line,) = done.stderr.decode().splitlines()  # an error is not quieted
    assert line.startswith("evalbook-bundle: error: the bundle could not be verified")
    human = audit(str(junk))
    assert human.returncode == 3
    assert "Verdict:     ERROR (no audit possible)" in out(human)


# ---------------------------------------------------------- the rule and the numbers


def test_a_status_below_threshold_shows_the_rule_and_both_numbers(
    exported: dict[str, Path],
) -> None:
    lines = disagreement_lines(out(audit(str(exported[BELOW]))))
    assert lines == [
        "report result: required check accuracy is fail → fail (issued: pass, in report body)",
        "check accuracy status: pass_rate 0.667 (8 of 12 repeats passed) < threshold 0.75 "
        "→ fail (issued: pass, in report body and check result)",
        "check accuracy result: pass_rate 0.667 (8 of 12 repeats passed) < threshold 0.75 "
        "→ status fail → result fail (issued: pass, in report body and check result)",
    ]


def test_a_coverage_gate_names_the_counts_the_bound_and_the_status_chosen(
    exported: dict[str, Path],
) -> None:
    lines = disagreement_lines(out(audit(str(exported["rpt-audit-timeout-as-missing"]))))
    status = next(line for line in lines if line.startswith("check robustness status:"))
    assert status == (
        "check robustness status: coverage 5 of 8 = 0.625 < min_coverage 1 (compared "
        "exactly); the highest-ranked status among the unscored repeats is timeout "
        "→ timeout (issued: missing, in report body and check result)"
    )


def test_coverage_disagreements_give_both_counts(exported: dict[str, Path]) -> None:
    lines = disagreement_lines(out(audit(str(exported["rpt-audit-coverage-over-repeats"]))))
    check = next(line for line in lines if line.startswith("check consistency coverage:"))
    assert "4 of 6 expected examples executed, 2 missing" in check
    assert "each of its 3 repeats has a pass or fail case" in check
    assert "(issued: 18 expected, 15 executed, 3 missing, in report body and check result)" in (
        check
    )
    report = next(line for line in lines if line.startswith("report coverage:"))
    assert report.startswith("report coverage: the sum over 1 required check → 6 expected")


def test_interval_disagreements_give_the_method_and_both_intervals(
    exported: dict[str, Path],
) -> None:
    (wilson,) = disagreement_lines(out(audit(str(exported["rpt-audit-wilson-continuity"]))))
    assert wilson == (
        "check accuracy interval: wilson at level 0.95 over 3 passes of 10 → [0.108, 0.603] "
        "(issued: [0.0809, 0.646] (wilson, level 0.95), in check result)"
    )
    (boot,) = disagreement_lines(out(audit(str(exported["rpt-audit-bootstrap-other-seed"]))))
    assert boot.startswith(
        "check helpfulness interval: bootstrap-percentile/philox4x64-10/t7 at level 0.95, "
        "seed 11, 2000 resamples of the mean over "
    )
    low, high = re.findall(r"\[([0-9.]+), ([0-9.]+)\]", boot)[:2]
    assert low != high  # derived and issued, each shown rounded and still distinct


def test_between_documents_lists_each_documents_value(exported: dict[str, Path]) -> None:
    lines = disagreement_lines(out(audit(str(exported["rpt-audit-documents-differ"]))))
    between = next(line for line in lines if "the issued documents differ" in line)
    assert between.startswith("check helpfulness score: the issued documents differ: ")
    assert "report body 0.7" in between and "check result " in between
    derived = next(line for line in lines if "mean over" in line)
    assert derived.startswith("check helpfulness score: mean over ")


def test_floats_are_rounded_for_people_and_full_in_json(exported: dict[str, Path]) -> None:
    text = out(audit(str(exported[BELOW])))
    assert "0.6666666666666666" not in text and "0.667" in text
    interval = line_of(text, "  interval:")
    assert "[0.391, 0.862]" in interval and "0.39062208887279953" not in interval
    doc = audit_json(str(exported[BELOW]), code=1)
    status = next(d for d in doc["disagreements"] if d["field"] == "status")
    assert (
        "pass_rate 0.6666666666666666 (8 of 12 repeats passed) < threshold 0.75"
        in (status["detail"])
    )
    (check,) = doc["checks"]
    score = next(f for f in check["fields"] if f["field"] == "score")
    assert score["derived"]["value"] == 8 / 12
    bounds = next(f for f in check["fields"] if f["field"] == "interval")["derived"]["value"]
    assert bounds["low"] == pytest.approx(0.39062208887279953, abs=1e-15)


# ------------------------------------------------------------------------ the words


def test_methods_and_levels_are_explained_once_next_to_their_use(
    exported: dict[str, Path], tmp_path: Path
) -> None:
    # Three checks of this report use the bootstrap: its words still come once.
    path = str(exported[CONSISTENT])
    text = out(audit(path, "--output-dir", str(tmp_path / "o")))
    lines = text.splitlines()
    boot = [x for x in lines if x.startswith("  bootstrap-percentile/philox4x64-10/t7: ")]
    assert len(boot) == 1 and "Philox4x64-10" in boot[0] and "seed" in boot[0]
    assert "wilson: " not in text  # no check of this report uses it
    assert sum(x.startswith("Intervals:") for x in lines) == 1
    assert sum(x.startswith("Assurance:   levels weakest first") for x in lines) == 1
    for level in ("development_unisolated", "reported", "independently_observed"):
        assert sum(x.startswith(f"  {level}: ") for x in lines) == 1
    # Next to their use: after the checks, before the findings.
    index = {x: i for i, x in enumerate(lines)}
    last_check = max(i for x, i in index.items() if x.startswith("Check "))
    assert last_check < index[boot[0]] < lines.index(line_of(text, "Disagreements:"))
    md = (tmp_path / "o" / "audit.md").read_text("utf-8")
    assert md.count("## Terms") == 1
    assert md.count("Philox4x64-10 random stream") == 1
    assert md.count("**independently_observed:**") == 1
    wilson = out(audit(str(exported["rpt-audit-wilson-continuity"])))
    assert wilson.count("the Wilson score interval") == 1
    assert "without continuity correction" in wilson


# ------------------------------------------------------- defects of the issued report


def _defect(bag: repack.EditableBag) -> None:
    # A second repeat of a check with repeats = 1: a defect of the cases the report rests
    # on (the issued report contradicts itself), which makes the derived status error.
    path = "data/cases/accuracy.jsonl"
    lines = bag.lines(path)
    case = canonical.loads(lines[0])
    case.update(case_id="accuracy-extra", repeat=2)
    bag.set_lines(path, [*lines, canonical.dumps(case)])


def test_the_defect_label_cannot_be_read_as_the_audit_failing(
    exported: dict[str, Path], tmp_path: Path
) -> None:
    clean = out(audit(str(exported[BELOW])))
    assert "Issued report inconsistent: 0 (" in clean
    assert not any(x.startswith(("Errors:", "  error:")) for x in clean.splitlines())
    bag = repack.open_bundle(exported[BELOW])
    _defect(bag)
    path = repack.write_bundle(bag, tmp_path / "defect.tar.zst")
    done = audit(str(path))
    text = out(done)
    assert done.returncode == 1, done.stderr.decode()
    assert "issued report inconsistent: 1 defect(s)" in line_of(text, "Verdict:")
    assert "error(s)" not in line_of(text, "Verdict:")
    assert line_of(text, "Issued report inconsistent:").startswith(
        "Issued report inconsistent: 1 (defects in the bundle's own documents"
    )
    assert "  defect: repeat_out_of_range: case 'accuracy-extra': repeat 2 is outside 1..1" in (
        text.splitlines()
    )
    status = next(x for x in disagreement_lines(text) if x.startswith("check accuracy status:"))
    assert "1 defect in the check's inputs" in status and "→ error" in status
    # The JSON keeps its names: "errors", with the code.
    doc = audit_json(str(path), code=1)
    assert [e["code"] for e in doc["errors"]] == ["repeat_out_of_range"]


# ------------------------------------------------------------------------- anchors


def test_nothing_anchors_a_plain_audit_and_it_says_so(exported: dict[str, Path]) -> None:
    text = out(audit(str(exported[BELOW])))
    assert line_of(text, "Anchor:") == f"Anchor:      {SELF_CONSISTENT}"
    assert text.index("Anchor:") < text.index("Verdict:")
    doc = audit_json(str(exported[BELOW]), code=1)
    assert doc["anchor"] == {
        "expected_bundle_digest": None,
        "expected_report_digest": None,
        "signer": None,
        "self_consistent_only": True,
        "description": SELF_CONSISTENT,
    }


def test_an_expected_digest_anchors_the_audit(exported: dict[str, Path]) -> None:
    first = audit_json(str(exported[CONSISTENT]), code=0)
    digest = first["verification"]["bundle_digest"]
    doc = audit_json(str(exported[CONSISTENT]), "--expect-bundle-digest", digest, code=0)
    assert doc["anchor"]["expected_bundle_digest"] == digest
    assert doc["anchor"]["self_consistent_only"] is False
    text = out(audit(str(exported[CONSISTENT]), "--expect-bundle-digest", digest))
    assert line_of(text, "Anchor:") == f"Anchor:      expected bundle digest {digest}"
    wrong = "sha256:" + "0" * 64
    failed = audit_json(str(exported[CONSISTENT]), "--expect-bundle-digest", wrong, code=1)
    assert failed["verdict"] == "error" and failed["exit_code"] == 1


def _keygen(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([SSH_KEYGEN, *args], capture_output=True, check=False, timeout=60)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not Path(SSH_KEYGEN).is_file():
        pytest.fail(f"{SSH_KEYGEN} is required: signatures must interoperate with OpenSSH")
    root = tmp_path_factory.mktemp("audit-keys")
    made = {}
    for name in ("alice", "bob"):
        path = root / name
        done = _keygen("-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path))
        assert done.returncode == 0, done.stderr.decode()
        made[name] = path
    return made


def _public(key: Path) -> str:
    return " ".join(Path(f"{key}.pub").read_text("utf-8").split()[:2])


def _fingerprint(key: Path) -> str:
    return _keygen("-lf", f"{key}.pub").stdout.decode().split()[1]


def _allowed(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def signed(keys: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("audit-signed")
    return _export(CONSISTENT, root / "signed.tar.zst", "--key", str(keys["alice"]))


def test_a_signed_bundle_names_its_signer_in_the_anchor(
    signed: Path, keys: dict[str, Path], tmp_path: Path
) -> None:
    allowed = _allowed(tmp_path / "allowed_signers", f"alice {_public(keys['alice'])}")
    signer = f"alice, key {_fingerprint(keys['alice'])}"
    done = audit(str(signed), "--allowed-signers", str(allowed))
    assert done.returncode == 0, out(done) + done.stderr.decode()
    text = out(done)
    assert line_of(text, "Anchor:") == f"Anchor:      signed by {signer}"
    assert line_of(text, "Signatures:") == "Signatures:  1 (1 verified)"
    assert f"  - bundle-head.json.sig (embedded): verified: signed by {signer}" in text.splitlines()
    doc = audit_json(str(signed), "--allowed-signers", str(allowed), code=0)
    assert doc["anchor"]["signer"] == signer
    assert doc["anchor"]["self_consistent_only"] is False
    assert doc["anchor"]["description"] == f"signed by {signer}"
    named = audit_json(
        str(signed), "--allowed-signers", str(allowed), "--identity", "alice", code=0
    )
    assert named["anchor"]["signer"] == signer
    # Unchecked, the same signed bundle is self-consistent only.
    assert audit_json(str(signed), code=0)["anchor"]["self_consistent_only"] is True


@pytest.mark.parametrize("how", ["other-key", "other-identity"])
def test_a_wrong_signer_fails_the_audit_with_exit_1(
    how: str, signed: Path, keys: dict[str, Path], tmp_path: Path
) -> None:
    if how == "other-key":
        allowed = _allowed(tmp_path / "allowed_signers", f"alice {_public(keys['bob'])}")
        extra: tuple[str, ...] = ()
    else:
        allowed = _allowed(tmp_path / "allowed_signers", f"alice {_public(keys['alice'])}")
        extra = ("--identity", "carol")
    done = audit(str(signed), "--allowed-signers", str(allowed), *extra)
    assert done.returncode == 1
    text = out(done)
    assert "Verdict:     ERROR (the bundle failed verification; no audit possible)" in text
    assert line_of(text, "Anchor:").startswith("Anchor:      none: the bundle failed verification")
    # Valid, but by a signer the file does not allow: listed as such, and no anchor.
    assert line_of(text, "Signatures:") == "Signatures:  1 (1 not allowed)"
    doc = audit_json(str(signed), "--allowed-signers", str(allowed), *extra, code=1)
    assert doc["verdict"] == "error" and doc["exit_code"] == 1
    assert doc["anchor"]["signer"] is None and doc["report"] is None
    assert "signature" in doc["error"]


def test_a_sidecar_or_an_explicit_signature_is_checked(
    keys: dict[str, Path], tmp_path: Path
) -> None:
    bundle = _export(CONSISTENT, tmp_path / "plain.tar.zst")
    allowed = _allowed(tmp_path / "allowed_signers", f"alice {_public(keys['alice'])}")
    # Unsigned: nothing to check, so the audit fails (as verify does).
    assert audit(str(bundle), "--allowed-signers", str(allowed)).returncode == 1
    sign = run_cli("sign", str(bundle), "--key", str(keys["alice"]))
    assert sign.returncode == 0, sign.stderr.decode()
    sidecar = Path(f"{bundle}.sig")
    assert sidecar.is_file()
    signer = f"alice, key {_fingerprint(keys['alice'])}"
    doc = audit_json(str(bundle), "--allowed-signers", str(allowed), code=0)
    assert doc["anchor"]["signer"] == signer
    moved = tmp_path / "elsewhere.sig"
    sidecar.rename(moved)
    explicit = audit_json(
        str(bundle), "--allowed-signers", str(allowed), "--signature", str(moved), code=0
    )
    assert explicit["anchor"]["signer"] == signer


@pytest.mark.parametrize(
    "args",
    [("--identity", "alice"), ("--signature", "x.sig")],
    ids=["identity", "signature"],
)
def test_signer_options_need_allowed_signers(args: tuple[str, ...], tmp_path: Path) -> None:
    done = audit(str(tmp_path / "absent.tar.zst"), *args)
    assert done.returncode == 2 and done.stdout == b""
    (line,) = done.stderr.decode().splitlines()
    assert "--identity and --signature need --allowed-signers" in line


# --------------------------------------------------------------------------- help


def _help() -> str:
    done = run_cli("audit", "--help")
    assert done.returncode == 0
    return out(done)


def test_every_option_has_help_and_the_examples_keep_their_lines() -> None:
    text = _help()
    options = text.split("Options:", 1)[1]
    entries = re.findall(r"^  (-[^\n]*)$", options, re.MULTILINE)
    for name in (
        "--expect-bundle-digest",
        "--expect-report-digest",
        "--allowed-signers",
        "--identity",
        "--signature",
        "--strict",
        "--json",
        "--output-dir",
        "--max-bytes",
        "--endpoint-url",
        "-q, --quiet",
    ):
        entry = next(e for e in entries if e.startswith(name) or e.startswith(f"{name} "))
        assert len(entry.split()) > 2, f"{name} has no help text"
    assert "[default: (64 GiB); x>=1]" in " ".join(text.split())
    assert "68719476736" not in text
    # Long examples are broken with shell line continuations; joined, they are as written.
    section = text.split("Examples:\n", 1)[1].split("\n\n", 1)[0]
    joined = [" ".join(line.split()) for line in section.replace(" \\\n", " ").splitlines()]
    assert joined == [
        "evalbook-bundle audit bundle.tar.zst",
        "evalbook-bundle audit bundle.tar.zst --allowed-signers allowed_signers --json | jq "
        ".verdict",
        "evalbook-bundle audit s3://bucket/archive/reports/bundles/rpt/HEX.tar.zst "
        "--output-dir out/",
    ]
