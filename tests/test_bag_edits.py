"""An extracted bag edited by hand is described truthfully (expected: what bag-info.txt or
the manifest declares; observed: what is on disk), and each failure names the file that
is missing or extra, nothing untouched."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import CLI

from bundler.bundles.verify import verify_bundle
from bundler.core.claims import State, VerifyOptions


@pytest.fixture
def bag(bundles: dict[str, Path], tmp_path: Path) -> Path:
    out = tmp_path / "out"
    done = subprocess.run(
        [*CLI, "extract", str(bundles["rpt-clean/alice"]), str(out)], capture_output=True
    )
    assert done.returncode == 0, done.stderr
    (top,) = out.iterdir()
    return top


def _failed(bag: Path) -> list:
    result = verify_bundle(str(bag), VerifyOptions())
    return [c for c in result.claims if c.state is State.FAILED]


def _oxum(bag: Path) -> str:
    for line in (bag / "bag-info.txt").read_text().splitlines():
        if line.startswith("Payload-Oxum: "):
            return line.split(": ", 1)[1]
    raise AssertionError("no Payload-Oxum")


@pytest.mark.parametrize(
    "victim", ["data/checks/accuracy.json", "data/cases/accuracy.jsonl", "data/report/envelope.json"]
)
def test_deleted_file_is_the_only_file_blamed(bag: Path, victim: str) -> None:
    declared = _oxum(bag)
    size = (bag / victim).stat().st_size
    (bag / victim).unlink()
    failed = _failed(bag)
    assert failed
    assert {c.path for c in failed} <= {victim, "bag-info.txt"}
    assert not any(c.subject == "bag-info.txt is what bundle.json gives" for c in failed)
    (oxum,) = [c for c in failed if c.subject == "Payload-Oxum"]
    assert oxum.expected == declared
    octets, count = (int(x) for x in declared.split("."))
    assert oxum.observed == f"{octets - size}.{count - 1}"


def test_extra_file_is_named(bag: Path) -> None:
    declared = _oxum(bag)
    (bag / "data" / "extra.txt").write_bytes(b"hello")
    failed = _failed(bag)
    assert {c.path for c in failed} <= {"data/extra.txt", "bag-info.txt"}
    (oxum,) = [c for c in failed if c.subject == "Payload-Oxum"]
    octets, count = (int(x) for x in declared.split("."))
    assert (oxum.expected, oxum.observed) == (declared, f"{octets + 5}.{count + 1}")


def test_untouched_bag_verifies_and_cli_agrees(bag: Path) -> None:
    assert _failed(bag) == []
    done = subprocess.run([*CLI, "verify", "--json", str(bag)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["verdict"] == "verified"
