"""verify on eval-banana bundles and on run directories in place (SPEC section 10.2).

Tampered bundles are extracted bags edited in tmp_path and, where a test says so,
"resealed" the way a careful tamperer would: bundle.json's file digests and sizes, the
BagIt manifests, bag-info.txt and bundle-head.json recomputed here with hashlib and the
rfc8785 package (independent of the exporter), so that only the claim under test can
catch the edit.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from conftest import run_cli
from test_export_eb import (
    CONSOLE,
    DEFAULT_RUN,
    FLAT_RUN,
    PROJECT,
    RUNS,
    bag_files,
    copy_project,
    copy_run,
    do_export,
    edit_check,
    edit_json,
    hand_definition_digest,
    sha,
)

from bundler.archive.bag_reader import open_members, read_bag
from bundler.bundles.inspect import inspect_facts
from bundler.bundles.proof import case_leaves
from bundler.bundles.verify import verify_bundle
from bundler.core import schemas
from bundler.core.claims import Claim, State, Verdict, Verification, VerifyOptions
from bundler.core.errors import UsageError
from bundler.evalbanana import run as eb
from bundler.evalbanana.verify import verify_run_dir

LONG = "long-output-with-a-very-long-check-identifier-over-forty"


# --------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out_dir = tmp_path_factory.mktemp("eb-verify")
    return {
        name: do_export(run, PROJECT, out_dir / f"{name}.tar.zst").path
        for name, run in RUNS.items()
    }


def extract(archive: Path, dest: Path) -> Path:
    """Write an archive's files into dest/<top>/ (our own trusted archive) and return the bag."""
    top, files = bag_files(archive)
    root = dest / top
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def _hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tree_root(leaves: list[bytes]) -> str:
    def root(hashes: list[bytes]) -> bytes:
        if not hashes:
            return hashlib.sha256(b"").digest()
        if len(hashes) == 1:
            return hashes[0]
        k = 1
        while k * 2 < len(hashes):
            k *= 2
        return hashlib.sha256(b"\x01" + root(hashes[:k]) + root(hashes[k:])).digest()

    return root([hashlib.sha256(b"\x00" + leaf).digest() for leaf in leaves]).hex()


def reseal(
    root: Path, *, tree: bool = False, bundle_edit: Callable[[dict[str, Any]], None] | None = None
) -> None:
    """Recompute every digest a tamperer controls: bundle.json's files[] (and, with
    ``tree``, its cases_tree), the manifests, bag-info.txt and bundle-head.json."""
    bundle = json.loads((root / "data" / "bundle.json").read_bytes())
    if bundle_edit is not None:
        bundle_edit(bundle)
    data = {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.glob("data/**/*"))
        if p.is_file() and p.relative_to(root).as_posix() != "data/bundle.json"
    }
    bundle["files"] = [
        {"path": p, "digest": sha(d), "size": len(d)}
        for p, d in sorted(data.items(), key=lambda i: i[0].encode())
    ]
    bundle["run"]["digest"] = sha(data["data/run/report.json"])
    if tree:
        leaves = [data[c["result"]] for c in bundle["checks"]]
        bundle["cases_tree"] = {"tree_size": len(leaves), "root": _tree_root(leaves)}
    bundle_bytes = rfc8785.dumps(bundle)
    (root / "data" / "bundle.json").write_bytes(bundle_bytes)
    data["data/bundle.json"] = bundle_bytes
    manifest = "".join(
        f"{_hex(d)}  {p}\n" for p, d in sorted(data.items(), key=lambda i: i[0].encode())
    )
    (root / "manifest-sha256.txt").write_text(manifest, encoding="utf-8")
    info_lines = (root / "bag-info.txt").read_text(encoding="utf-8").splitlines()
    replace = {
        "Payload-Oxum": f"{sum(len(d) for d in data.values())}.{len(data)}",
        "Bundle-Digest": sha(bundle_bytes),
        "Report-Digest": bundle["run"]["digest"],
    }
    info = [f"{k}: {replace.get(k, v)}" for k, v in (line.split(": ", 1) for line in info_lines)]
    (root / "bag-info.txt").write_text("\n".join(info) + "\n", encoding="utf-8")
    head = {
        "schema": "evalbook.bundle_head.v1",
        "bundle_digest": sha(bundle_bytes),
        "report_id": bundle["run"]["run_id"],
        "report_digest": bundle["run"]["digest"],
        "exported_at": bundle["exported_at"],
        "cases_tree": bundle["cases_tree"],
    }
    (root / "bundle-head.json").write_bytes(rfc8785.dumps(head))
    tags = ["bagit.txt", "bag-info.txt", "manifest-sha256.txt", "bundle-head.json"]
    (root / "tagmanifest-sha256.txt").write_text(
        "".join(f"{_hex((root / t).read_bytes())}  {t}\n" for t in sorted(tags)), encoding="utf-8"
    )


def failed(result: Verification) -> list[Claim]:
    return result.failures()


def failed_subjects(result: Verification) -> list[str]:
    return [c.subject for c in result.failures()]


def verify_dir(root: Path, **kw: Any) -> Verification:
    return verify_bundle(str(root), VerifyOptions(**kw))


def stem_path(check_id: str, suffix: str = ".json") -> str:
    return f"checks/{eb.check_stem(check_id)}{suffix}"


@pytest.fixture
def bag(archives: dict[str, Path], tmp_path: Path) -> Path:
    """An editable extracted copy of the default run's bundle."""
    return extract(archives["default"], tmp_path)


# --------------------------------------------------------------------------- run directories in place


@pytest.mark.parametrize("name", sorted(RUNS))
def test_run_directory_verifies_in_place_with_eval_bananas_labels(name: str) -> None:
    proc = run_cli("verify", str(RUNS[name]), "--project", str(PROJECT), "--json")
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stderr == b""  # SPEC 7: with --json no human summary; it is the default form
    human = run_cli("verify", str(RUNS[name]), "--project", str(PROJECT))
    stderr = human.stdout.decode()
    assert (
        "Checked:     run directory in place; claims 1 (BagIt) and 2 (bundle.json) do not apply"
        in stderr
    )
    for line in CONSOLE[name].read_text(encoding="utf-8").splitlines()[:4]:
        label, value = line.split(": ", 1)
        assert f"{label + ':':<12} {value}\n" in stderr
    assert "Anchor:" in stderr and "Verdict:     VERIFIED" in stderr
    result = json.loads(proc.stdout)
    assert result["verdict"] == "verified" and result["report_id"] == eb.read_run(RUNS[name]).run_id
    assert result["report_digest"] == sha((RUNS[name] / "report.json").read_bytes())
    assert {c["group"] for c in result["claims"]} == {3, 7, 8, 10}
    assert result["counts"] == {"proven": len(result["claims"]), "unprovable": 0, "failed": 0}
    assert result["summary"]["mode"] == "run_directory"


def _in_place(run: Path, project: Path = PROJECT, **kw: Any) -> Verification:
    return verify_run_dir(run, project, VerifyOptions(**kw))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda run: (run / "report.json").unlink(), "report.json: missing"),
        (lambda run: (run / "report.json").write_bytes(b'{"run_id": '), "report.json"),
        (
            lambda run: edit_json(run / "report.json", lambda r: r.pop("pass_threshold")),
            "pass_threshold",
        ),
    ],
    ids=["no report.json", "malformed JSON", "missing field"],
)
def test_unreadable_run_directory_gives_error(
    tmp_path: Path, edit: Callable[[Path], None], message: str
) -> None:
    run = copy_run(tmp_path)
    edit(run)
    result = _in_place(run)
    assert result.verdict is Verdict.ERROR and result.exit_code == 3
    assert result.error is not None and message in result.error
    assert result.claims == ()


def test_unreadable_run_directory_on_the_command_line(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    (run / "report.json").write_bytes(b"not json")
    proc = run_cli("verify", str(run), "--project", str(PROJECT))
    assert proc.returncode == 3
    assert "Verdict:     ERROR (no verdict possible)" in proc.stdout.decode()
    assert str(run / "report.json") in proc.stdout.decode()


def test_check_file_disagreeing_with_report_fails_in_place(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    edit_json(run / stem_path("passes"), lambda c: c.update(reason="rewritten"))
    result = _in_place(run)
    assert result.verdict is Verdict.FAILED and result.exit_code == 1
    [claim] = failed(result)
    assert (claim.group, claim.path) == (7, stem_path("passes"))
    assert "differs from its entry in report.json" in (claim.detail or "")


def test_stdout_tail_not_matching_its_file_fails_in_place(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    full = run / stem_path(LONG, ".stdout.txt")
    full.write_bytes(full.read_bytes() + b"one more line\n")
    result = _in_place(run)
    [claim] = failed(result)
    assert (claim.group, claim.path) == (8, stem_path(LONG, ".stdout.txt"))
    assert "stdout is not the bounded tail" in (claim.detail or "")


def test_run_passed_that_does_not_follow_fails_in_place(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    edit_json(run / "report.json", lambda r: r.update(run_passed=True))
    result = _in_place(run)
    [claim] = failed(result)
    assert (claim.group, claim.subject, claim.expected, claim.observed) == (
        3,
        "report.json run_passed",
        "false",
        "true",
    )
    # The labels are recomputed, not copied: eval-banana's rule says the run did not pass.
    assert ["Passed", "no"] in result.summary["labels"]


def test_status_flip_changes_the_recomputed_labels(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    edit_check(run, "fails", lambda c: c.update(status="passed", score=1))
    result = _in_place(run)
    labels = dict(map(tuple, result.summary["labels"]))
    assert (labels["Score"], labels["Percentage"], labels["Passed"]) == ("7/9", "77.8%", "no")
    assert {c.subject for c in failed(result)} >= {
        "report.json passed_checks",
        "report.json points_earned",
    }


def test_definition_edited_after_the_run_is_unprovable_in_place(tmp_path: Path) -> None:
    project = copy_project(tmp_path)
    yaml_path = project / "eval_checks" / "crlf_inline.yaml"
    yaml_path.write_bytes(yaml_path.read_bytes().replace(b"\r\n", b"\n"))
    result = _in_place(DEFAULT_RUN, project)
    assert result.verdict is Verdict.VERIFIED
    [claim] = [c for c in result.claims if c.state is State.UNPROVABLE]
    assert claim.reason == "definition_digest_mismatch"
    assert claim.observed == hand_definition_digest(yaml_path.read_bytes(), None)
    strict = _in_place(DEFAULT_RUN, project, strict=True)
    assert strict.verdict is Verdict.FAILED
    assert [c.reason for c in failed(strict)] == ["definition_digest_mismatch"]


def test_project_pointing_elsewhere_in_place(tmp_path: Path) -> None:
    # Issue 14 item 8: the summary says no definition was found, and --strict fails it.
    parent = tmp_path / "checkout"
    shutil.copytree(PROJECT, parent / "project")
    result = _in_place(DEFAULT_RUN, parent)
    assert result.verdict is Verdict.VERIFIED
    assert result.unprovable_by_reason() == {"definition_missing": 10}
    labels = dict(map(tuple, result.summary["labels"]))
    assert labels["Definitions"].startswith("NONE FOUND: ")
    assert "no check definition found under it" in labels["Definitions"]
    assert f"did you mean {parent / 'project'}?" in labels["Definitions"]
    [claim] = [
        c for c in result.claims if c.subject == "the project root holds the run's definitions"
    ]
    assert claim.state is State.UNPROVABLE
    strict = _in_place(DEFAULT_RUN, parent, strict=True)
    assert strict.verdict is Verdict.FAILED
    assert "the project root holds the run's definitions" in failed_subjects(strict)
    proc = run_cli("verify", str(DEFAULT_RUN), "--project", str(parent))
    assert proc.returncode == 0, proc.stderr.decode()
    assert "Definitions: NONE FOUND: " in proc.stdout.decode()


def test_source_path_outside_recorded_root_in_place(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    edit_check(run, "judge", lambda c: c.update(source_path="/somewhere/else/judge.yaml"))
    result = _in_place(run)
    [claim] = [c for c in result.claims if c.state is State.UNPROVABLE]
    assert claim.reason == "definition_missing" and claim.subject.startswith("check judge:")
    assert "not under project_root" in (claim.detail or "")


def test_empty_inline_script_beside_script_path_is_reported(tmp_path: Path) -> None:
    project = copy_project(tmp_path)
    yaml_path = project / "eval_checks" / "passes.yaml"
    yaml_path.write_bytes(yaml_path.read_bytes() + b'script: ""\n')
    result = _in_place(DEFAULT_RUN, project)
    kinds = [c.subject for c in failed(result)]
    assert kinds == ["check passes: empty_inline_script_with_script_path"]


def test_symlink_in_run_directory_gives_error(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    (run / "checks" / "linked.txt").symlink_to(PROJECT / "README.md")
    result = _in_place(run)
    assert result.verdict is Verdict.ERROR
    assert "symbolic link in the run directory (refused, never followed)" in (result.error or "")


def test_anchors_in_place(tmp_path: Path) -> None:
    digest = sha((DEFAULT_RUN / "report.json").read_bytes())
    good = _in_place(DEFAULT_RUN, expect_report_digest=digest)
    assert good.verdict is Verdict.VERIFIED and not good.anchor.self_consistent_only
    bad = _in_place(DEFAULT_RUN, expect_report_digest="sha256:" + "0" * 64)
    assert failed_subjects(bad) == ["report digest equals --expect-report-digest"]
    with pytest.raises(UsageError):
        _in_place(DEFAULT_RUN, expect_bundle_digest=digest)
    proc = run_cli(
        "verify", str(DEFAULT_RUN), "--project", str(PROJECT), "--expect-bundle-digest", digest
    )
    assert proc.returncode == 2
    assert "a run directory has no bundle digest" in proc.stderr.decode()


# --------------------------------------------------------------------------- bundles


@pytest.mark.parametrize("name", sorted(RUNS))
def test_bundle_verification_json_is_schema_valid(archives: dict[str, Path], name: str) -> None:
    proc = run_cli("verify", str(archives[name]), "--json") if name == "default" else None
    value = (
        json.loads(proc.stdout)
        if proc is not None
        else verify_bundle(str(archives[name]), VerifyOptions()).to_json()
    )
    schemas.validate("verification", value, source=name)
    assert value["bundle_schema"] == "evalbook.eval_banana_bundle.v1"
    assert value["verdict"] == "verified"
    groups = {c["group"] for c in value["claims"]}
    assert groups == {1, 2, 3, 7, 8, 10}
    if proc is not None:
        assert proc.returncode == 0 and proc.stderr == b""
        stderr = run_cli("verify", str(archives[name])).stdout.decode()
        for line in CONSOLE[name].read_text(encoding="utf-8").splitlines()[:4]:
            label, text = line.split(": ", 1)
            assert f"{label + ':':<12} {text}\n" in stderr
        assert "Anchor:      none: this result shows self-consistency only" in stderr


def test_expect_digests_anchor_a_bundle(archives: dict[str, Path]) -> None:
    _, files = bag_files(archives["default"])
    bundle_digest = sha(files["data/bundle.json"])
    report_digest = sha((DEFAULT_RUN / "report.json").read_bytes())
    ok = verify_bundle(str(archives["default"]), VerifyOptions(bundle_digest, report_digest))
    assert ok.verdict is Verdict.VERIFIED and ok.bundle_digest == bundle_digest
    wrong = verify_bundle(
        str(archives["default"]), VerifyOptions(expect_report_digest="sha256:" + "1" * 64)
    )
    assert failed_subjects(wrong) == ["report digest equals --expect-report-digest"]


def test_resealed_untouched_bag_still_verifies(bag: Path) -> None:
    reseal(bag, tree=True)
    assert verify_dir(bag).verdict is Verdict.VERIFIED


def test_edit_without_reseal_is_caught_by_bagit_and_accounting(bag: Path) -> None:
    target = bag / "data" / "run" / stem_path("fails", ".stderr.txt")
    target.write_bytes(target.read_bytes().replace(b"41", b"42"))
    result = verify_dir(bag)
    groups = {c.group for c in failed(result)}
    assert {1, 8, 10} <= groups
    assert all(
        c.path == f"data/run/{stem_path('fails', '.stderr.txt')}"
        for c in failed(result)
        if c.group in (1, 10)
    )


def test_definition_edited_inside_the_bundle_fails_its_claim(bag: Path) -> None:
    target = bag / "data" / "definitions" / "eval_checks" / "passes.yaml"
    edited = target.read_bytes().replace(b"exits 0", b"exits zero")
    assert edited != target.read_bytes()
    target.write_bytes(edited)
    reseal(bag)
    result = verify_dir(bag)
    [claim] = failed(result)
    assert claim.group == 7
    assert (
        claim.subject
        == "check passes: check_definition_sha256 recomputes from the bundled definition"
    )
    assert claim.path == "data/definitions/eval_checks/passes.yaml"
    script = (bag / "data" / "definitions" / "eval_checks" / "scripts" / "passes.py").read_bytes()
    assert claim.observed == hand_definition_digest(edited, script)
    assert claim.expected == next(
        c.check_definition_sha256 for c in eb.read_run(DEFAULT_RUN).checks if c.check_id == "passes"
    )


def test_script_edited_inside_the_bundle_fails_its_definition(bag: Path) -> None:
    target = bag / "data" / "definitions" / "tools" / "long_output.py"
    target.write_bytes(target.read_bytes() + b"# edited\n")
    reseal(bag)
    assert failed_subjects(verify_dir(bag)) == [
        f"check {LONG}: check_definition_sha256 recomputes from the bundled definition"
    ]


def test_full_stdout_edited_so_the_tail_no_longer_matches(bag: Path) -> None:
    target = bag / "data" / "run" / stem_path(LONG, ".stdout.txt")
    target.write_bytes(target.read_bytes()[:-10] + b"tampered!\n")
    reseal(bag)
    [claim] = failed(verify_dir(bag))
    assert (claim.group, claim.path) == (8, f"data/run/{stem_path(LONG, '.stdout.txt')}")
    assert claim.subject == f"check {LONG}: stdout_tail_mismatch"


def test_stdout_tail_edited_in_report_and_check_file(bag: Path) -> None:
    run = bag / "data" / "run"
    edit_check(run, "fails", lambda c: c.update(stdout="all good\n"))
    reseal(bag, tree=True)
    [claim] = failed(verify_dir(bag))
    assert (claim.group, claim.subject) == (8, "check fails: stdout_tail_mismatch")


def test_check_file_disagreeing_inside_the_bundle(bag: Path) -> None:
    edit_json(bag / "data" / "run" / stem_path("_inline_"), lambda c: c.update(duration_ms=1))
    reseal(bag, tree=True)
    [claim] = failed(verify_dir(bag))
    assert (claim.group, claim.path) == (7, f"data/run/{stem_path('_inline_')}")


def test_run_passed_flipped_in_report_and_bundle(bag: Path) -> None:
    edit_json(bag / "data" / "run" / "report.json", lambda r: r.update(run_passed=True))
    reseal(bag, bundle_edit=lambda b: b["run"].update(run_passed=True))
    result = verify_dir(bag)
    assert failed_subjects(result) == ["report.json run_passed"]
    assert ["Passed", "no"] in result.summary["labels"]


def test_bundle_json_run_passed_disagreeing_with_report(bag: Path) -> None:
    reseal(bag, bundle_edit=lambda b: b["run"].update(run_passed=True))
    assert failed_subjects(verify_dir(bag)) == [
        "bundle.json run.run_passed agrees with report.json"
    ]


def test_cases_tree_root_changed(bag: Path) -> None:
    reseal(bag, bundle_edit=lambda b: b["cases_tree"].update(root="0" * 64))
    assert failed_subjects(verify_dir(bag)) == [
        "cases_tree root over the check files in report order"
    ]


def test_present_definition_listed_as_unavailable(bag: Path) -> None:
    def listing(bundle: dict[str, Any]) -> None:
        entry = next(c for c in bundle["checks"] if c["check_id"] == "judge")
        bundle["unavailable"].append(
            {
                "kind": "definition",
                "ref": "judge",
                "digest": entry["check_definition_sha256"],
                "reason": "definition_missing",
                "detail": None,
            }
        )

    reseal(bag, bundle_edit=listing)
    [claim] = failed(verify_dir(bag))
    assert claim.group == 10
    assert "listed, yet data/definitions/eval_checks/judge.yaml is in the bundle" in (
        claim.detail or ""
    )


def test_definition_dropped_and_not_listed(bag: Path) -> None:
    (bag / "data" / "definitions" / "eval_checks" / "judge.yaml").unlink()

    def drop(bundle: dict[str, Any]) -> None:
        next(c for c in bundle["checks"] if c["check_id"] == "judge")["definition"] = None

    reseal(bag, bundle_edit=drop)
    [claim] = failed(verify_dir(bag))
    assert (claim.group, claim.subject) == (
        7,
        "check judge: check_definition_sha256 recomputes from the bundled definition",
    )
    assert claim.detail == "the definition is neither bundled nor listed as unavailable"


def test_definition_dropped_and_listed_is_unprovable_not_proven(bag: Path) -> None:
    (bag / "data" / "definitions" / "eval_checks" / "judge.yaml").unlink()

    def drop(bundle: dict[str, Any]) -> None:
        entry = next(c for c in bundle["checks"] if c["check_id"] == "judge")
        entry["definition"] = None
        bundle["unavailable"].append(
            {
                "kind": "definition",
                "ref": "judge",
                "digest": entry["check_definition_sha256"],
                "reason": "definition_missing",
                "detail": "gone",
            }
        )

    reseal(bag, bundle_edit=drop)
    result = verify_dir(bag)
    assert result.verdict is Verdict.VERIFIED
    assert result.unprovable_by_reason() == {"definition_missing": 1}
    assert verify_dir(bag, strict=True).verdict is Verdict.FAILED


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda e: e.update(detail=e["digest"]), "nothing mismatched"),
        (
            lambda e: e.update(digest="sha256:" + "2" * 64),
            "not the recorded check_definition_sha256",
        ),
        (lambda e: e.update(ref="no-such-check"), "not a check of the run"),
    ],
    ids=["detail equals recorded", "wrong digest", "unknown check"],
)
def test_listing_must_agree_with_the_bundle(
    bag: Path, change: Callable[[dict[str, Any]], None], problem: str
) -> None:
    (bag / "data" / "definitions" / "eval_checks" / "judge.yaml").unlink()

    def drop(bundle: dict[str, Any]) -> None:
        entry = next(c for c in bundle["checks"] if c["check_id"] == "judge")
        entry["definition"] = None
        item = {
            "kind": "definition",
            "ref": "judge",
            "digest": entry["check_definition_sha256"],
            "reason": "definition_digest_mismatch",
            "detail": "sha256:" + "3" * 64,
        }
        change(item)
        bundle["unavailable"].append(item)

    reseal(bag, bundle_edit=drop)
    details = [c.detail or "" for c in failed(verify_dir(bag))]
    assert any(problem in d for d in details), details


def test_unnamed_definition_file_and_extra_run_file(bag: Path) -> None:
    (bag / "data" / "definitions" / "notes.txt").write_bytes(b"extra\n")
    (bag / "data" / "run" / "extra.log").write_bytes(b"extra\n")
    reseal(bag)
    result = verify_dir(bag)
    assert sorted((c.group, c.path) for c in failed(result)) == [
        (10, "data/definitions/notes.txt"),
        (10, "data/run/extra.log"),
    ]


def test_check_entry_naming_the_wrong_files(bag: Path) -> None:
    def wrong(bundle: dict[str, Any]) -> None:
        entry = next(c for c in bundle["checks"] if c["check_id"] == "passes")
        entry["stderr"] = entry["stdout"]

    reseal(bag, bundle_edit=wrong)
    [claim] = failed(verify_dir(bag))
    assert claim.subject == "check passes: bundle.json entry agrees with report.json"
    assert "stderr" in (claim.detail or "")


def test_malformed_report_inside_a_bundle_fails_without_leaking_paths(bag: Path) -> None:
    (bag / "data" / "run" / "report.json").write_bytes(b'{"schema_version": 1}')
    reseal(bag)
    result = verify_dir(bag)
    assert result.verdict is Verdict.FAILED
    claim = next(
        c for c in failed(result) if c.subject == "report.json is a valid eval-banana report"
    )
    assert claim.detail is not None and claim.detail.startswith(
        "data/run/report.json: missing field"
    )


def test_verify_writes_nothing_that_outlives_it(archives: dict[str, Path], tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    proc = run_cli("verify", str(archives["flat"]), "--quiet", env={"TMPDIR": str(scratch)})
    assert proc.returncode == 0, proc.stderr.decode()
    assert list(scratch.iterdir()) == []


def test_case_leaves_and_inspect_facts(archives: dict[str, Path]) -> None:
    contents = read_bag(open_members(str(archives["flat"])), source="flat")
    bundle = json.loads(contents.kept["data/bundle.json"])
    report = json.loads((FLAT_RUN / "report.json").read_bytes())
    expected = [(FLAT_RUN / stem_path(c["check_id"])).read_bytes() for c in report["checks"]]
    assert case_leaves(contents, bundle) == expected
    facts = inspect_facts(contents, bundle)
    assert facts["report_id"] == report["run_id"]
    assert facts["counts"]["checks"] == 9 and facts["counts"]["definitions_unavailable"] == 0
    labels = dict(map(tuple, facts["labels"]))
    assert labels["Score"] == "6/9 (recorded)" and labels["Passed"] == "no (recorded)"


def test_extract_writes_a_verified_eb_bundle(archives: dict[str, Path], tmp_path: Path) -> None:
    dest = tmp_path / "out"
    proc = run_cli("extract", str(archives["default"]), str(dest), "--quiet")
    assert proc.returncode == 0, proc.stderr.decode()
    [top] = list(dest.iterdir())
    for rel, data in (
        (p.relative_to(DEFAULT_RUN).as_posix(), p.read_bytes())
        for p in DEFAULT_RUN.rglob("*")
        if p.is_file()
    ):
        assert (top / "data" / "run" / rel).read_bytes() == data
    shutil.rmtree(dest)
    assert not os.path.exists(dest)
