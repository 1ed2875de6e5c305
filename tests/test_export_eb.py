"""export-eb (SPEC section 10.1): eval-banana run directories into eval-banana bundles.

The committed runs under fixtures/eval-banana/runs/ were written by the real
eval-banana 0.5.0 from fixtures/eval-banana/project/ (recorded there as
/tmp/eb-sample/project). Expected values are taken from those files, from the real
tool's console output (fixtures/eval-banana/console/) and from hashes computed here
with hashlib and by-hand framing, never from the exporter itself. Bad inputs are
copies of the runs and the project, edited in tmp_path.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import bagit
import pytest
import zstandard
from conftest import run_cli

from bundler.bundles.verify import verify_bundle
from bundler.core.claims import State, Verdict, VerifyOptions
from bundler.core.errors import InputError, OutputError, StrictFailure
from bundler.evalbanana import run as eb
from bundler.evalbanana.export import EbExportConfig, EbExportResult, export_eb_bundle

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "eval-banana"
PROJECT = FIXTURES / "project"
RECORDED_ROOT = "/tmp/eb-sample/project"
DEFAULT_RUN = sorted((FIXTURES / "runs" / "default").iterdir())[0]
FLAT_RUN = FIXTURES / "runs" / "flat"
RUNS = {"default": DEFAULT_RUN, "flat": FLAT_RUN}
CONSOLE = {
    "default": FIXTURES / "console" / "default.stdout.txt",
    "flat": FIXTURES / "console" / "flat.stdout.txt",
}
EXPORTED_AT = datetime(2026, 11, 30, 3, tzinfo=UTC)  # after the committed runs completed
EXPORTED_AT_TEXT = "2026-11-30T03:00:00Z"
TAG = b"eval-banana/check-definition-sha256/v1"


# --------------------------------------------------------------------------- helpers


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _frame(name: bytes, content: bytes) -> bytes:
    return len(name).to_bytes(8, "big") + name + len(content).to_bytes(8, "big") + content


def hand_definition_digest(
    yaml_bytes: bytes, script: bytes | None, unavailable: bool = False
) -> str:
    """The framed definition digest, framed here by hand (independent of bundler.core.digests)."""
    data = TAG + b"\x00" + _frame(b"definition.yaml", yaml_bytes)
    if unavailable:
        data += _frame(b"referenced-script-unavailable", b"")
    elif script is not None:
        data += _frame(b"referenced-script", script)
    return sha(data)


def copy_run(tmp_path: Path, run: Path = DEFAULT_RUN, name: str = "run") -> Path:
    dest = tmp_path / name
    shutil.copytree(run, dest, symlinks=True)
    return dest


def copy_project(tmp_path: Path, name: str = "project") -> Path:
    dest = tmp_path / name
    shutil.copytree(PROJECT, dest, symlinks=True)
    return dest


def edit_json(path: Path, change: Callable[[Any], None]) -> None:
    value = json.loads(path.read_bytes())
    change(value)
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False), encoding="utf-8")


def edit_check(run_dir: Path, check_id: str, change: Callable[[dict[str, Any]], None]) -> None:
    """The same edit to a check's report.json entry and its checks/<stem>.json."""

    def in_report(report: dict[str, Any]) -> None:
        change(next(c for c in report["checks"] if c["check_id"] == check_id))

    edit_json(run_dir / "report.json", in_report)
    edit_json(run_dir / "checks" / f"{eb.check_stem(check_id)}.json", change)


def run_files(run_dir: Path) -> dict[str, bytes]:
    """Every regular file below a run directory, by relative POSIX path."""
    return {
        p.relative_to(run_dir).as_posix(): p.read_bytes()
        for p in sorted(run_dir.rglob("*"))
        if p.is_file()
    }


def archive_members(archive: Path) -> dict[str, bytes | None]:
    """Member name -> bytes (None for directories) of one of our own, trusted archives."""
    raw = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(archive.read_bytes())).read()
    out: dict[str, bytes | None] = {}
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
        for info in tar.getmembers():
            if info.isdir():
                out[info.name] = None
            else:
                handle = tar.extractfile(info)
                assert handle is not None
                out[info.name] = handle.read()
    return out


def bag_files(archive: Path) -> tuple[str, dict[str, bytes]]:
    """(top directory, {bag-relative path: bytes}) of the regular files of an archive."""
    members = archive_members(archive)
    tops = {name.split("/")[0] for name in members}
    assert len(tops) == 1
    top = tops.pop()
    files = {name[len(top) + 1 :]: data for name, data in members.items() if data is not None}
    return top, files


def do_export(run_dir: Path, project: Path, out: Path, **kw: Any) -> EbExportResult:
    return export_eb_bundle(
        EbExportConfig(run_dir, project, kw.pop("exported_at", EXPORTED_AT), out=out, **kw)
    )


def export_cli(
    run_dir: Path,
    project: Path,
    *extra: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> Any:
    return run_cli("export-eb", str(run_dir), "--project", str(project), *extra, cwd=cwd, env=env)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each committed run exported once from the fixture project (read-only)."""
    out_dir = tmp_path_factory.mktemp("eb-bundles")
    return {
        name: do_export(run, PROJECT, out_dir / f"{name}.tar.zst").path
        for name, run in RUNS.items()
    }


# --------------------------------------------------------------------------- the committed runs


@pytest.mark.parametrize("name", sorted(RUNS))
def test_committed_run_bundle_verifies_with_eval_bananas_labels(
    exported: dict[str, Path], name: str
) -> None:
    result = verify_bundle(str(exported[name]), VerifyOptions())
    assert result.verdict is Verdict.VERIFIED, [c.to_json() for c in result.failures()]
    assert result.counts()["unprovable"] == 0
    report = json.loads((RUNS[name] / "report.json").read_bytes())
    assert result.report_id == report["run_id"]
    assert result.report_digest == sha((RUNS[name] / "report.json").read_bytes())
    # The first four lines eb printed are its summary labels.
    console = CONSOLE[name].read_text(encoding="utf-8").splitlines()[:4]
    assert [f"{k}: {v}" for k, v in result.summary["labels"]] == console


@pytest.mark.parametrize("name", sorted(RUNS))
def test_every_run_file_is_bundled_verbatim(exported: dict[str, Path], name: str) -> None:
    top, files = bag_files(exported[name])
    run_id = json.loads((RUNS[name] / "report.json").read_bytes())["run_id"]
    assert top == f"eval-banana-bundle-{run_id}"
    on_disk = run_files(RUNS[name])
    bundled = {p[len("data/run/") :]: d for p, d in files.items() if p.startswith("data/run/")}
    assert bundled == on_disk


@pytest.mark.parametrize("name", sorted(RUNS))
def test_bundle_json_names_every_file_with_its_digest(exported: dict[str, Path], name: str) -> None:
    _, files = bag_files(exported[name])
    bundle = json.loads(files["data/bundle.json"])
    assert bundle["schema"] == "evalbook.eval_banana_bundle.v1"
    assert bundle["exported_at"] == EXPORTED_AT_TEXT
    data_files = {
        p: d for p, d in files.items() if p.startswith("data/") and p != "data/bundle.json"
    }
    listed = [f["path"] for f in bundle["files"]]
    assert listed == sorted(data_files, key=lambda p: p.encode("utf-8"))
    for item in bundle["files"]:
        assert item["digest"] == sha(data_files[item["path"]])
        assert item["size"] == len(data_files[item["path"]])
    report_bytes = (RUNS[name] / "report.json").read_bytes()
    report = json.loads(report_bytes)
    assert bundle["run"] == {
        "run_id": report["run_id"],
        "digest": sha(report_bytes),
        "path": "data/run/report.json",
        "project_root": RECORDED_ROOT,
        "run_passed": report["run_passed"],
    }
    assert bundle["unavailable"] == [] and bundle["redacted"] == []


@pytest.mark.parametrize("name", sorted(RUNS))
def test_check_entries_map_results_outputs_and_definitions(
    exported: dict[str, Path], name: str
) -> None:
    _, files = bag_files(exported[name])
    bundle = json.loads(files["data/bundle.json"])
    report = json.loads((RUNS[name] / "report.json").read_bytes())
    assert [c["check_id"] for c in bundle["checks"]] == [c["check_id"] for c in report["checks"]]
    on_disk = run_files(RUNS[name])
    for entry, check in zip(bundle["checks"], report["checks"], strict=True):
        label = check["check_id"]
        assert entry["status"] == check["status"]
        assert entry["check_definition_sha256"] == check["check_definition_sha256"]
        stem = entry["stem"]
        assert f"checks/{stem}.json" in on_disk
        assert json.loads(on_disk[f"checks/{stem}.json"])["check_id"] == label
        assert entry["result"] == f"data/run/checks/{stem}.json"
        for key, suffix in (
            ("stdout", "stdout.txt"),
            ("stderr", "stderr.txt"),
            ("prompt", "prompt.txt"),
        ):
            rel = f"checks/{stem}.{suffix}"
            assert entry[key] == (f"data/run/{rel}" if rel in on_disk else None), (label, key)
        rel_yaml = check["source_path"][len(RECORDED_ROOT) + 1 :]
        assert entry["definition"] == f"data/definitions/{rel_yaml}"
        assert files[entry["definition"]] == (PROJECT / rel_yaml).read_bytes()
    scripts = {c["check_id"]: c["script"] for c in bundle["checks"]}
    assert scripts == {
        "passes": "data/definitions/eval_checks/scripts/passes.py",
        "fails": "data/definitions/eval_checks/scripts/fails.py",
        "long-output-with-a-very-long-check-identifier-over-forty": "data/definitions/tools/long_output.py",
        "exact-limit": None,
        "missing-script": None,  # absent at run time: the digest has the unavailable component
        "_inline_": None,
        "crlf-inline": None,
        "context-keys": "data/definitions/tools/context_keys.py",
        "judge": None,
    }


@pytest.mark.parametrize("name", sorted(RUNS))
def test_bundled_definitions_give_the_real_tools_recorded_digests(
    exported: dict[str, Path], name: str
) -> None:
    _, files = bag_files(exported[name])
    bundle = json.loads(files["data/bundle.json"])
    recorded = {
        c["check_id"]: c["check_definition_sha256"]
        for c in json.loads((RUNS[name] / "report.json").read_bytes())["checks"]
    }
    for entry in bundle["checks"]:
        yaml_bytes = files[entry["definition"]]
        if entry["check_id"] == "missing-script":
            digest = hand_definition_digest(yaml_bytes, None, unavailable=True)
        else:
            script = files[entry["script"]] if entry["script"] else None
            digest = hand_definition_digest(yaml_bytes, script)
        assert digest == recorded[entry["check_id"]] == entry["check_definition_sha256"]


@pytest.mark.parametrize("name", sorted(RUNS))
def test_cases_tree_covers_the_check_files_in_report_order(
    exported: dict[str, Path], name: str
) -> None:
    _, files = bag_files(exported[name])
    bundle = json.loads(files["data/bundle.json"])
    report = json.loads((RUNS[name] / "report.json").read_bytes())
    leaves = [
        (RUNS[name] / "checks" / f"{eb.check_stem(c['check_id'])}.json").read_bytes()
        for c in report["checks"]
    ]

    def root(hashes: list[bytes]) -> bytes:  # RFC 6962, by hand
        if len(hashes) == 1:
            return hashes[0]
        k = 1
        while k * 2 < len(hashes):
            k *= 2
        return hashlib.sha256(b"\x01" + root(hashes[:k]) + root(hashes[k:])).digest()

    expected = root([hashlib.sha256(b"\x00" + leaf).digest() for leaf in leaves])
    assert bundle["cases_tree"] == {"tree_size": len(leaves), "root": expected.hex()}
    head = json.loads(files["bundle-head.json"])
    assert head["report_id"] == report["run_id"]
    assert head["report_digest"] == sha((RUNS[name] / "report.json").read_bytes())
    assert head["cases_tree"] == bundle["cases_tree"]


def test_archive_is_a_valid_bagit_bag(exported: dict[str, Path], tmp_path: Path) -> None:
    top, files = bag_files(exported["default"])
    root = tmp_path / top
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    bag = bagit.Bag(str(root))
    bag.validate()
    assert bag.info["Bundle-Schema"] == "evalbook.eval_banana_bundle.v1"
    # One changed byte in a run file is caught by the standard validator too.
    target = next(root.glob("data/run/checks/*.stdout.txt"))
    target.write_bytes(target.read_bytes().replace(b"\n", b"\r", 1))
    with pytest.raises(bagit.BagValidationError):
        bagit.Bag(str(root)).validate()


def test_members_are_normalised(exported: dict[str, Path]) -> None:
    raw = (
        zstandard.ZstdDecompressor().stream_reader(io.BytesIO(exported["flat"].read_bytes())).read()
    )
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
        infos = tar.getmembers()
    assert infos[0].isdir() and "/" not in infos[0].name
    for info in infos:
        assert info.isdir() or info.isfile()
        assert (info.uid, info.gid, info.uname, info.gname) == (0, 0, "", "")
        assert info.mode == (0o755 if info.isdir() else 0o644)
        assert info.mtime == int(EXPORTED_AT.timestamp())
    names = [i.name.split("/", 1)[1] for i in infos[1:] if i.isfile()]
    run = [n for n in names if n.startswith("data/run/")]
    definitions = [n for n in names if n.startswith("data/definitions/")]
    assert names == [
        *run,
        *definitions,
        "data/bundle.json",
        "bagit.txt",
        "bag-info.txt",
        "manifest-sha256.txt",
        "bundle-head.json",
        "tagmanifest-sha256.txt",
    ]
    assert run == sorted(run) and definitions == sorted(definitions)


# --------------------------------------------------------------------------- determinism and output


def test_same_exported_at_gives_identical_archives_across_processes(tmp_path: Path) -> None:
    outs = []
    for i, extra in enumerate([("--exported-at", "2026-11-30T04:00:00+01:00"), ()]):
        out = tmp_path / f"a{i}.tar.zst"
        env = {"SOURCE_DATE_EPOCH": str(int(EXPORTED_AT.timestamp()))} if not extra else None
        proc = export_cli(DEFAULT_RUN, PROJECT, "--out", str(out), *extra, env=env)
        assert proc.returncode == 0, proc.stderr.decode()
        printed = dict(line.split(":", 1) for line in proc.stdout.decode().splitlines()[:3])
        digest, path = printed["Bundle digest"].split()[0], printed["Archive"].strip()
        assert path == str(out)
        outs.append((digest, out.read_bytes()))
    outs.append(
        (
            do_export(DEFAULT_RUN, PROJECT, tmp_path / "lib.tar.zst").bundle_digest,
            (tmp_path / "lib.tar.zst").read_bytes(),
        )
    )
    assert outs[0] == outs[1] == outs[2]
    # A different time changes the archive bytes and the bundle digest.
    other = do_export(
        DEFAULT_RUN, PROJECT, tmp_path / "b.tar.zst", exported_at=datetime(2026, 12, 1, tzinfo=UTC)
    )
    assert other.path.read_bytes() != outs[0][1]
    assert other.bundle_digest != outs[0][0]


def test_json_summary_and_default_name_in_the_working_directory(tmp_path: Path) -> None:
    proc = export_cli(FLAT_RUN, PROJECT, "--exported-at", EXPORTED_AT_TEXT, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    summary = json.loads(proc.stdout)
    run_id = json.loads((FLAT_RUN / "report.json").read_bytes())["run_id"]
    target = tmp_path / f"eval-banana-bundle-{run_id}.tar.zst"
    assert leftovers(tmp_path) == [target.name]
    assert summary["path"] == str(target)
    assert summary["run_id"] == run_id
    assert summary["archive_sha256"] == sha(target.read_bytes())
    assert summary["archive_size"] == target.stat().st_size
    assert summary["counts"] == {
        "checks": 9,
        "run_files": len(run_files(FLAT_RUN)),
        "definition_files": 13,
        "unavailable": 0,
    }
    _, files = bag_files(target)
    assert summary["bundle_digest"] == sha(files["data/bundle.json"])
    assert proc.stderr == b""  # SPEC 7: with --json no human summary on stderr


def test_existing_target_is_refused_and_untouched(tmp_path: Path) -> None:
    out = tmp_path / "bundle.tar.zst"
    out.write_bytes(b"precious")
    proc = export_cli(DEFAULT_RUN, PROJECT, "--out", str(out))
    assert proc.returncode == 3
    assert f"{out}: already exists" in proc.stderr.decode()
    assert out.read_bytes() == b"precious"
    assert leftovers(tmp_path) == ["bundle.tar.zst"]
    assert proc.stdout == b""


@pytest.mark.parametrize("dangling", [True, False])
def test_symlink_target_is_refused(tmp_path: Path, dangling: bool) -> None:
    real = tmp_path / "real.tar.zst"
    if not dangling:
        real.write_bytes(b"x")
    link = tmp_path / "link.tar.zst"
    link.symlink_to(real)
    with pytest.raises(OutputError, match="symlink"):
        do_export(DEFAULT_RUN, PROJECT, link)
    assert not real.exists() or real.read_bytes() == b"x"


def test_missing_parent_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="output directory does not exist") as caught:
        do_export(DEFAULT_RUN, PROJECT, tmp_path / "nope" / "b.tar.zst")
    assert caught.value.exit_code == 3
    assert leftovers(tmp_path) == []


def test_failed_export_leaves_no_partial_file(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    (run / "report.json").write_text("{", encoding="utf-8")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    with pytest.raises(InputError):
        do_export(run, PROJECT, out_dir / "b.tar.zst")
    assert leftovers(out_dir) == []


def test_signed_export_embeds_a_head_signature(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    key_path = tmp_path / "id_ed25519"
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    signers = tmp_path / "allowed_signers"
    signers.write_text(f"auditor@example.org {public.decode()}\n", encoding="utf-8")
    out = tmp_path / "signed.tar.zst"
    proc = export_cli(
        DEFAULT_RUN, PROJECT, "--out", str(out), "--key", str(key_path), "--quiet"
    )
    assert proc.returncode == 0, proc.stderr.decode()
    _, files = bag_files(out)
    assert files["bundle-head.json.sig"].startswith(b"-----BEGIN SSH SIGNATURE-----")
    verified = run_cli("verify", str(out), "--allowed-signers", str(signers))
    assert verified.returncode == 0, verified.stderr.decode()
    assert "signed by auditor@example.org" in verified.stdout.decode()


# --------------------------------------------------------------------------- definitions listed


def test_definition_edited_after_the_run_is_listed_with_the_observed_digest(tmp_path: Path) -> None:
    project = copy_project(tmp_path)
    yaml_path = project / "eval_checks" / "passes.yaml"
    yaml_bytes = yaml_path.read_bytes() + b"# edited after the run\n"
    yaml_path.write_bytes(yaml_bytes)
    observed = hand_definition_digest(
        yaml_bytes, (project / "eval_checks" / "scripts" / "passes.py").read_bytes()
    )
    recorded = next(
        c
        for c in json.loads((DEFAULT_RUN / "report.json").read_bytes())["checks"]
        if c["check_id"] == "passes"
    )["check_definition_sha256"]
    out = tmp_path / "b.tar.zst"
    result = do_export(DEFAULT_RUN, project, out)
    assert result.bundle["unavailable"] == [
        {
            "kind": "definition",
            "ref": "passes",
            "digest": recorded,
            "reason": "definition_digest_mismatch",
            "detail": observed,
        }
    ]
    entry = next(c for c in result.bundle["checks"] if c["check_id"] == "passes")
    assert entry["definition"] is None and entry["script"] is None
    _, files = bag_files(out)
    assert "data/definitions/eval_checks/passes.yaml" not in files
    # passes.py is referenced by no other check, so it is not bundled either.
    assert "data/definitions/eval_checks/scripts/passes.py" not in files
    verification = verify_bundle(str(out), VerifyOptions())
    assert verification.verdict is Verdict.VERIFIED
    assert verification.unprovable_by_reason() == {"definition_digest_mismatch": 1}


def test_strict_refuses_to_list_and_writes_nothing(tmp_path: Path) -> None:
    project = copy_project(tmp_path)
    (project / "tools" / "long_output.py").write_bytes(b"print('changed')\n")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    proc = export_cli(DEFAULT_RUN, project, "--out", str(out_dir / "b.tar.zst"), "--strict")
    assert proc.returncode == 1
    assert (
        "--strict: 1 definition(s) would be unavailable (definition_digest_mismatch)"
        in proc.stderr.decode()
    )
    assert leftovers(out_dir) == []
    with pytest.raises(StrictFailure):
        do_export(DEFAULT_RUN, project, out_dir / "c.tar.zst", strict=True)
    assert (
        do_export(DEFAULT_RUN, PROJECT, out_dir / "d.tar.zst", strict=True).bundle["unavailable"]
        == []
    )


def test_project_holding_one_definition_lists_every_other_missing(tmp_path: Path) -> None:
    partial = tmp_path / "partial"
    (partial / "eval_checks").mkdir(parents=True)
    shutil.copy(PROJECT / "eval_checks" / "judge.yaml", partial / "eval_checks" / "judge.yaml")
    out = tmp_path / "b.tar.zst"
    proc = export_cli(DEFAULT_RUN, partial, "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout)["unavailable_by_reason"] == {"definition_missing": 8}
    _, files = bag_files(out)
    bundle = json.loads(files["data/bundle.json"])
    report = json.loads((DEFAULT_RUN / "report.json").read_bytes())
    assert [(u["ref"], u["digest"], u["reason"]) for u in bundle["unavailable"]] == sorted(
        (c["check_id"], c["check_definition_sha256"], "definition_missing")
        for c in report["checks"]
        if c["check_id"] != "judge"
    )
    assert all("not found" in u["detail"] for u in bundle["unavailable"])
    assert [p for p in files if p.startswith("data/definitions/")] == [
        "data/definitions/eval_checks/judge.yaml"
    ]
    verified = verify_bundle(str(out), VerifyOptions())
    assert verified.verdict is Verdict.VERIFIED
    assert verified.unprovable_by_reason() == {"definition_missing": 8}


@pytest.mark.parametrize("where", ["one level too high", "empty directory"])
def test_project_holding_no_definition_is_refused(tmp_path: Path, where: str) -> None:
    # Issue 14 item 8: --project one level too high used to export with no definition.
    if where == "one level too high":
        parent = tmp_path / "checkout"
        shutil.copytree(PROJECT, parent / "project")
    else:
        parent = tmp_path / "elsewhere"
        parent.mkdir()
    out = tmp_path / "b.tar.zst"
    proc = export_cli(DEFAULT_RUN, parent, "--out", str(out))
    assert proc.returncode == 3, proc.stderr.decode()
    stderr = proc.stderr.decode()
    assert stderr.count("\n") == 1 and "--project: " in stderr
    assert "no check definition found under it" in stderr
    assert f"recorded as {RECORDED_ROOT} (a directory named 'project')" in stderr
    assert str(parent / "eval_checks" / "crlf_inline.yaml") in stderr
    if where == "one level too high":
        assert f"did you mean {parent / 'project'}?" in stderr
    assert not out.exists() and proc.stdout == b""


@pytest.mark.parametrize(
    "source_path", ["/elsewhere/eval_checks/passes.yaml", "/tmp/eb-sample/project/../x.yaml"]
)
def test_source_path_outside_the_recorded_project_root_is_listed(
    tmp_path: Path, source_path: str
) -> None:
    run = copy_run(tmp_path)
    edit_check(run, "passes", lambda c: c.update(source_path=source_path))
    out = tmp_path / "b.tar.zst"
    result = do_export(run, PROJECT, out)
    [item] = result.bundle["unavailable"]
    assert (item["ref"], item["reason"]) == ("passes", "definition_missing")
    assert "outside the project" in item["detail"] and "not under project_root" in item["detail"]
    assert verify_bundle(str(out), VerifyOptions()).verdict is Verdict.VERIFIED


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_project_root_that_is_not_a_directory(tmp_path: Path, kind: str) -> None:
    project = tmp_path / "project"
    if kind == "file":
        project.write_bytes(b"")
    with pytest.raises(InputError, match="project root is not a directory") as caught:
        do_export(DEFAULT_RUN, project, tmp_path / "b.tar.zst")
    assert caught.value.exit_code == 3


# --------------------------------------------------------------------------- bad run directories


def _bad_run(tmp_path: Path, edit: Callable[[Path], None]) -> tuple[InputError, list[str]]:
    run = copy_run(tmp_path)
    edit(run)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    with pytest.raises(InputError) as caught:
        do_export(run, PROJECT, out_dir / "b.tar.zst")
    return caught.value, leftovers(out_dir)


def _long_stdout(run: Path) -> Path:
    return (
        run
        / "checks"
        / (
            eb.check_stem("long-output-with-a-very-long-check-identifier-over-forty")
            + ".stdout.txt"
        )
    )


BAD_RUNS: dict[str, tuple[Callable[[Path], None], str]] = {
    "no report.json": (lambda run: (run / "report.json").unlink(), "report.json: missing"),
    "malformed JSON": (
        lambda run: (run / "report.json").write_bytes(b'{"run_id": '),
        "report.json",
    ),
    "not an object": (
        lambda run: (run / "report.json").write_bytes(b"[]"),
        "must be a JSON object",
    ),
    "check file disagrees": (
        lambda run: edit_json(
            run / "checks" / f"{eb.check_stem('passes')}.json",
            lambda c: c.update(description="rewritten"),
        ),
        "differs from its entry in report.json",
    ),
    "stdout tail does not match": (
        lambda run: _long_stdout(run).write_bytes(_long_stdout(run).read_bytes() + b"more\n"),
        "stdout is not the bounded tail",
    ),
    "run_passed does not follow": (
        lambda run: edit_json(run / "report.json", lambda r: r.update(run_passed=True)),
        "run_passed is true, the checks give false",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_RUNS))
def test_bad_run_directory_is_refused(tmp_path: Path, case: str) -> None:
    edit, message = BAD_RUNS[case]
    error, left = _bad_run(tmp_path, edit)
    assert error.exit_code == 3
    assert message in error.message and "\n" not in error.message
    assert left == []


def test_bad_run_directory_on_the_command_line(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    BAD_RUNS["malformed JSON"][0](run)
    proc = export_cli(run, PROJECT, "--out", str(tmp_path / "b.tar.zst"))
    assert proc.returncode == 3
    stderr = proc.stderr.decode()
    assert stderr.startswith("evalbook-bundle: error: ") and stderr.count("\n") == 1
    assert f"{run / 'report.json'}" in stderr
    assert proc.stdout == b""
    assert not (tmp_path / "b.tar.zst").exists()


@pytest.mark.parametrize("where", ["file", "directory", "report"])
def test_symlinks_in_the_run_directory_are_refused_never_followed(
    tmp_path: Path, where: str
) -> None:
    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "secret.txt").write_bytes(b"not part of the run")
    run = copy_run(tmp_path)
    if where == "file":
        (run / "checks" / "extra.txt").symlink_to(secret / "secret.txt")
    elif where == "directory":
        (run / "checks" / f"{eb.check_stem('passes')}").symlink_to(secret, target_is_directory=True)
    else:
        real = tmp_path / "report-elsewhere.json"
        (run / "report.json").rename(real)
        (run / "report.json").symlink_to(real)
    out = tmp_path / "b.tar.zst"
    if where == "file":
        proc = export_cli(run, PROJECT, "--out", str(out))
        assert proc.returncode == 3
        assert (
            "symbolic link in the run directory (refused, never followed)" in proc.stderr.decode()
        )
    else:
        with pytest.raises(
            InputError, match=r"symbolic link in the run directory \(refused, never followed\)"
        ):
            do_export(run, PROJECT, out)
    assert not out.exists()


def test_symlinked_run_directory_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(DEFAULT_RUN, target_is_directory=True)
    with pytest.raises(InputError, match="run directory is a symbolic link"):
        do_export(link, PROJECT, tmp_path / "b.tar.zst")


def test_file_swapped_for_a_link_during_export_is_not_followed(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"secret")
    (run / "report.md").unlink()
    (run / "report.md").symlink_to(secret)
    with pytest.raises(InputError, match="symbolic link"):
        eb.read_regular(run, "report.md", what="a run file")
    checks = run / "checks"
    moved = tmp_path / "moved"
    checks.rename(moved)
    checks.symlink_to(moved, target_is_directory=True)
    with pytest.raises(InputError, match="symbolic link"):
        eb.read_regular(run, f"checks/{eb.check_stem('passes')}.json", what="a check result")


def test_evidence_files_are_bundled_and_empty_directories_dropped(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    evidence = run / "checks" / eb.check_stem("fails")
    evidence.mkdir()
    (evidence / "trace.log").write_bytes(b"evidence\n")
    (run / "checks" / eb.check_stem("passes")).mkdir()
    out = tmp_path / "b.tar.zst"
    do_export(run, PROJECT, out)
    members = archive_members(out)
    top = next(iter(members))
    assert members[f"{top}/data/run/checks/{eb.check_stem('fails')}/trace.log"] == b"evidence\n"
    assert f"{top}/data/run/checks/{eb.check_stem('passes')}" not in members
    assert verify_bundle(str(out), VerifyOptions()).verdict is Verdict.VERIFIED


def test_listing_and_claims_for_a_missing_script_that_appeared_later(tmp_path: Path) -> None:
    # missing-script's digest was recorded with the script unavailable; once the script
    # exists, the definition no longer recomputes and is listed.
    project = copy_project(tmp_path)
    (project / "eval_checks" / "scripts" / "does_not_exist.py").write_bytes(b"print('now here')\n")
    out = tmp_path / "b.tar.zst"
    result = do_export(DEFAULT_RUN, project, out)
    [item] = result.bundle["unavailable"]
    assert (item["ref"], item["reason"]) == ("missing-script", "definition_digest_mismatch")
    yaml_bytes = (project / "eval_checks" / "missing_script.yaml").read_bytes()
    assert item["detail"] == hand_definition_digest(yaml_bytes, b"print('now here')\n")
    claims = verify_bundle(str(out), VerifyOptions()).claims
    [claim] = [c for c in claims if c.state is State.UNPROVABLE]
    assert claim.subject.startswith("check missing-script:")


def test_export_does_not_touch_the_run_or_the_project(tmp_path: Path) -> None:
    before_run = run_files(DEFAULT_RUN)
    before_project = {p: p.read_bytes() for p in PROJECT.rglob("*") if p.is_file()}
    do_export(DEFAULT_RUN, PROJECT, tmp_path / "b.tar.zst")
    assert run_files(DEFAULT_RUN) == before_run
    assert {p: p.read_bytes() for p in PROJECT.rglob("*") if p.is_file()} == before_project
    assert os.stat(tmp_path / "b.tar.zst").st_size > 0


def test_definition_name_a_bundle_could_not_hold_is_refused(tmp_path: Path) -> None:
    # A name the strict archive reader refuses (not NFC) is refused before anything is written.
    project = copy_project(tmp_path)
    decomposed = "cafe\u0301.yaml"
    shutil.copy(project / "eval_checks" / "judge.yaml", project / "eval_checks" / decomposed)
    run = copy_run(tmp_path)
    edit_check(
        run, "judge", lambda c: c.update(source_path=f"{RECORDED_ROOT}/eval_checks/{decomposed}")
    )
    out = tmp_path / "b.tar.zst"
    with pytest.raises(InputError, match="not NFC-normalised") as caught:
        do_export(run, project, out)
    assert decomposed in caught.value.message
    assert not out.exists()
