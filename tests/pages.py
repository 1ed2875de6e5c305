"""Real results to render as auditor's pages (SPEC 14), made by the CLI in a directory:
a verified bundle, a tampered one, an audit with the planted disagreement, an
eval-banana bundle and a fixity summary with one bundle that did not pass."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import zstandard
from conftest import REPO, run_cli

EXPORTED_AT = "2026-11-30T00:00:00Z"
EB_EXPORTED_AT = "2026-11-30T03:00:00Z"
MAIN_STORE = REPO / "fixtures" / "stores" / "main"
AUDIT_STORE = REPO / "fixtures" / "stores" / "audit"
EB_DIR = REPO / "fixtures" / "eval-banana"


@dataclass(frozen=True)
class Results:
    root: Path
    verified: Path  # verification.json of a bundle with unprovable claims
    tampered: Path  # verification.json of a bundle with failed claims
    audit: Path  # audit.json with the planted disagreement
    eb: Path  # verification.json of an eval-banana bundle
    fixity: Path  # fixity --json summary with one failed bundle
    tampered_archive: Path


def _ok(proc: object, *codes: int) -> None:
    rc = proc.returncode  # type: ignore[attr-defined]
    assert rc in codes, proc.stderr.decode()  # type: ignore[attr-defined]


def tamper(source: Path, target: Path) -> None:
    """One case score changed in the tar stream, no digest updated."""
    data = zstandard.ZstdDecompressor().stream_reader(source.read_bytes()).read()
    needle = b'"score":1,"status":"pass"'
    i = data.index(needle)
    data = data[:i] + b'"score":0,"status":"pass"' + data[i + len(needle) :]
    target.write_bytes(zstandard.ZstdCompressor(level=3, write_checksum=True).compress(data))


def make_results(root: Path) -> Results:
    arch = root / "archive"
    arch.mkdir(parents=True)
    for report, out in (
        ("rpt-every-reason", arch / "every.tar.zst"),
        ("rpt-clean", root / "clean.tar.zst"),
    ):
        _ok(
            run_cli(
                "export",
                "--store",
                str(MAIN_STORE),
                "--report",
                report,
                "--principal",
                "alice",
                "--exported-at",
                EXPORTED_AT,
                "--out",
                str(out),
                "-q",
            ),
            0,
        )
    tampered = arch / "tampered.tar.zst"
    tamper(root / "clean.tar.zst", tampered)
    _ok(
        run_cli(
            "export",
            "--store",
            str(AUDIT_STORE),
            "--report",
            "rpt-audit-pass-below-threshold",
            "--principal",
            "alice",
            "--exported-at",
            EXPORTED_AT,
            "--out",
            str(root / "audit.tar.zst"),
            "-q",
        ),
        0,
    )
    run_dir = sorted((EB_DIR / "runs" / "default").iterdir())[0]
    _ok(
        run_cli(
            "export-eb",
            str(run_dir),
            "--project",
            str(EB_DIR / "project"),
            "--exported-at",
            EB_EXPORTED_AT,
            "--out",
            str(root / "eb.tar.zst"),
            "-q",
        ),
        0,
    )
    for name, archive, code in (
        ("verified", arch / "every.tar.zst", 0),
        ("tampered", tampered, 1),
        ("eb", root / "eb.tar.zst", 0),
    ):
        _ok(run_cli("verify", str(archive), "--output-dir", str(root / name), "-q"), code)
    _ok(run_cli("audit", str(root / "audit.tar.zst"), "--output-dir", str(root / "audit"), "-q"), 1)
    proc = run_cli(
        "fixity",
        str(arch),
        "--ledger",
        str(root / "ledger.sqlite"),
        "--json",
        "-q",
        "--workers",
        "1",
    )
    _ok(proc, 1)
    (root / "fixity.json").write_bytes(proc.stdout)
    assert json.loads(proc.stdout)["schema"] == "evalbook.fixity_summary.v1"
    return Results(
        root=root,
        verified=root / "verified" / "verification.json",
        tampered=root / "tampered" / "verification.json",
        audit=root / "audit" / "audit.json",
        eb=root / "eb" / "verification.json",
        fixity=root / "fixity.json",
        tampered_archive=tampered,
    )


def kinds(results: Results) -> dict[str, Path]:
    return {
        "verified": results.verified,
        "tampered": results.tampered,
        "audit": results.audit,
        "eb": results.eb,
        "fixity": results.fixity,
    }
