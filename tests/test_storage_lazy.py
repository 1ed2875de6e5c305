"""What commands load: ``bundler.storage`` imports its modules on first use, a local
verify or export never imports botocore (about a quarter of a second of every such
command), and verifying an EvalBook bundle loads neither the exporter nor eval-banana."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

from conftest import SCENARIOS

from bundler import storage


def test_every_public_name_resolves_from_the_module_it_is_listed_under() -> None:
    assert set(storage._MODULES) == set(storage.__all__)
    for name, module in storage._MODULES.items():
        value = getattr(storage, name)
        assert value is getattr(importlib.import_module(f"bundler.storage.{module}"), name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        storage.no_such_name  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("no AttributeError")


def _modules_loaded(commands: list[list[str]], prefixes: tuple[str, ...]) -> list[str]:
    """The modules under ``prefixes`` loaded after running ``commands`` (each must exit
    0) through the CLI, in a fresh interpreter."""
    script = f"""
import sys
from bundler.cli.app import main
for args in {commands!r}:
    try:
        main(args)
    except SystemExit as exc:
        assert exc.code in (0, None), (args[0], exc.code)
print(sorted(m for m in sys.modules if m.startswith({prefixes!r})))
"""
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    loaded: list[str] = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    return loaded


def test_local_verify_and_export_do_not_import_botocore(
    bundles: dict[str, Path], fixture_store: Path, tmp_path: Path
) -> None:
    archive = str(bundles[f"{SCENARIOS[0]}/alice"])
    export = ["export", "--store", str(fixture_store), "--report", SCENARIOS[0]]
    export += ["--principal", "alice", "--out", str(tmp_path / "out.tar.zst"), "--quiet"]
    commands = [["verify", archive, "--quiet"], export]
    assert _modules_loaded(commands, ("botocore", "boto3")) == []


def test_verifying_an_evalbook_bundle_loads_neither_exporter_nor_eval_banana(
    bundles: dict[str, Path],
) -> None:
    # Start-up is most of the time of verifying a bundle of ordinary size: the exporter,
    # the store reader and the eval-banana side are not loaded to verify or inspect an
    # EvalBook bundle (bundler.evalbook.contract holds the names they share).
    archive = str(bundles[f"{SCENARIOS[0]}/alice"])
    unwanted = (
        "bundler.evalbanana",
        "bundler.evalbook.export",
        "bundler.evalbook.store",
        "bundler.evalbook.bagwriter",
    )
    assert _modules_loaded([["verify", archive, "--quiet"], ["inspect", archive]], unwanted) == []
