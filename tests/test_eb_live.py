"""The real eval-banana 0.5.0 end to end: eb run, then export-eb and verify (SPEC section 10).

eval-banana needs Python 3.12 or newer. The interpreter is ``$EB_PYTHON``, else a
working ``python3.12`` on PATH, else the newest 3.12.x that pyenv knows; without one the
test is skipped, saying so. eval-banana 0.5.0 is installed with pip into a virtualenv
created under the test's temporary directory, or into (or reused from) ``$EB_VENV``. A
failed installation fails the test: it is not a reason to skip.

The sample project is copied fresh, ``eb run`` records a run of it (and exits 1, by
design: two checks error), and the run must then export and verify: in place, as an
archive, with eval-banana's own console labels and recorded definition digests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli
from test_export_eb import PROJECT, bag_files, hand_definition_digest

EB_REQUIREMENT = "eval-banana==0.5.0"
EB_VERSION = "0.5.0"
NO_PYTHON = "python3.12 not available on this machine"

pytestmark = pytest.mark.slow


def _is_py312(python: str) -> bool:
    try:
        probe = subprocess.run(
            [python, "-c", "import sys; sys.exit(0 if sys.version_info[:2] >= (3, 12) else 1)"],
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def find_python312() -> str | None:
    """$EB_PYTHON, a working python3.12 on PATH, or pyenv's newest 3.12.x; else None."""
    explicit = os.environ.get("EB_PYTHON")
    if explicit:
        if not _is_py312(explicit):
            pytest.fail(f"EB_PYTHON={explicit} is not a Python 3.12 or newer interpreter")
        return explicit
    found = shutil.which("python3.12")
    if found and _is_py312(found):
        return found
    pyenv = shutil.which("pyenv")
    if pyenv:
        listing = subprocess.run(
            [pyenv, "versions", "--bare"], capture_output=True, text=True, check=False
        )
        versions = [v.strip() for v in listing.stdout.splitlines() if v.strip().startswith("3.12.")]
        versions = [v for v in versions if v.split(".")[2].isdigit()]
        for version in sorted(versions, key=lambda v: int(v.split(".")[2]), reverse=True):
            prefix = subprocess.run(
                [pyenv, "prefix", version], capture_output=True, text=True, check=False
            )
            candidate = str(Path(prefix.stdout.strip()) / "bin" / "python3.12")
            if prefix.returncode == 0 and _is_py312(candidate):
                return candidate
    return None


def _installed_version(venv: Path) -> str | None:
    probe = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m; print(m.version('eval-banana'))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


@pytest.fixture(scope="module")
def eb_command(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``eb`` executable of a virtualenv holding eval-banana 0.5.0."""
    python = find_python312()
    if python is None:
        pytest.skip(NO_PYTHON)
    venv = (
        Path(os.environ["EB_VENV"])
        if os.environ.get("EB_VENV")
        else tmp_path_factory.mktemp("eb") / "venv"
    )
    if not (venv / "bin" / "eb").exists():
        made = subprocess.run(
            [python, "-m", "venv", str(venv)], capture_output=True, text=True, check=False
        )
        if made.returncode != 0:
            pytest.fail(
                f"could not create a virtualenv with {python}: {made.stderr.strip()[-500:]}"
            )
        pip = subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                EB_REQUIREMENT,
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if pip.returncode != 0:
            pytest.fail(f"could not install {EB_REQUIREMENT} with pip: {pip.stderr.strip()[-800:]}")
    version = _installed_version(venv)
    if version != EB_VERSION:
        pytest.fail(f"the virtualenv at {venv} holds eval-banana {version}, not {EB_VERSION}")
    return venv / "bin" / "eb"


def test_live_eb_run_exports_and_verifies(eb_command: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    shutil.rmtree(project / ".eval-banana" / "results", ignore_errors=True)
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8", "PYTHONUTF8": "1"}
    ran = subprocess.run(
        [str(eb_command), "run", "--cwd", str(project)],
        capture_output=True,
        env=env,
        timeout=300,
        check=False,
    )
    # The sample project fails by design: 6 of 9 pass, but two checks error.
    assert ran.returncode == 1, ran.stderr.decode()
    results = project / ".eval-banana" / "results"
    [run_dir] = list(results.iterdir())
    report = json.loads((run_dir / "report.json").read_bytes())
    assert report["run_id"] == run_dir.name

    in_place = run_cli("verify", str(run_dir), "--project", str(project))
    assert in_place.returncode == 0, in_place.stderr.decode()
    console = ran.stdout.decode("utf-8").splitlines()[:4]
    assert [line.split(": ")[0] for line in console] == ["Run ID", "Score", "Percentage", "Passed"]
    for line in console:
        label, value = line.split(": ", 1)
        assert f"{label + ':':<12} {value}\n" in in_place.stdout.decode()

    out = tmp_path / "bundle.tar.zst"
    exported = run_cli(
        "export-eb", str(run_dir), "--project", str(project), "--out", str(out), "--json"
    )
    assert exported.returncode == 0, exported.stderr.decode()
    assert json.loads(exported.stdout)["counts"]["unavailable"] == 0

    verified = run_cli("verify", str(out), "--json")
    assert verified.returncode == 0, verified.stderr.decode()
    result = json.loads(verified.stdout)
    assert result["verdict"] == "verified" and result["counts"]["failed"] == 0
    assert [f"{k}: {v}" for k, v in result["summary"]["labels"]] == console

    _, files = bag_files(out)
    bundle = json.loads(files["data/bundle.json"])
    assert bundle["run"]["project_root"] == report["project_root"]
    recorded = {c["check_id"]: c["check_definition_sha256"] for c in report["checks"]}
    for entry in bundle["checks"]:
        yaml_bytes = files[entry["definition"]]
        script = files[entry["script"]] if entry["script"] else None
        digest = hand_definition_digest(
            yaml_bytes, script, unavailable=entry["check_id"] == "missing-script"
        )
        assert digest == recorded[entry["check_id"]], entry["check_id"]
