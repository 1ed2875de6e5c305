"""A user's script that calls every function of the library face with the types its
documentation gives; tests/test_library_types.py holds it to ``mypy --strict``.

It is type-checked, never run: its paths are placeholders.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import bundler


def on_progress(progress: bundler.Progress) -> None:
    print(progress.done, progress.total, progress.note)


def main(work: Path) -> int:
    listing: bundler.ReportListing = bundler.reports("fixtures/stores/main")
    lines: list[dict[str, object]] = [dict(line) for line in listing.to_json()]
    exported: bundler.ExportResult = bundler.export(
        Path("fixtures/stores/main"),
        "rpt-clean",
        principal="alice",
        out=work,
        exported_at=datetime(2026, 11, 30, tzinfo=UTC),
        level=3,
        strict=False,
        key=work / "id_ed25519",
        on_progress=on_progress,
    )
    again = bundler.export("store", "rpt-clean", exported_at="2026-11-30T00:00:00Z")
    run: bundler.EbExportResult = bundler.export_eb(
        work / "run", project=work / "project", out=str(work), exported_at="2026-12-01T00:00:00Z"
    )
    check: bundler.Verification = bundler.verify(
        exported.path,
        expect_bundle_digest=exported.bundle_digest,
        expect_report_digest=again.report_digest,
        allowed_signers=work / "allowed_signers",
        identity="alice@example.org",
        signature=b"-----BEGIN SSH SIGNATURE-----",
        strict=True,
        max_bytes=1 << 30,
        on_progress=on_progress,
    )
    verdict: bundler.Verdict = check.verdict
    facts: bundler.InspectResult = bundler.inspect(str(exported.path))
    extracted: bundler.Verification = bundler.extract(
        exported.path, work / "bag", allowed_signers=work / "allowed_signers"
    )
    audited: bundler.Audit = bundler.audit(run.path, expect_bundle_digest=run.bundle_digest)
    proof: bundler.ProofResult = bundler.prove(exported.path, "accuracy-00003", out=work)
    checked: bundler.ProofCheckResult = bundler.check_proof(
        proof.to_json(), allowed_signers=work / "allowed_signers", identity="alice@example.org"
    )
    from_text: bundler.ProofCheckResult = bundler.check_proof("{}")
    from_bytes: bundler.ProofCheckResult = bundler.check_proof(b"{}")
    from_file: bundler.ProofCheckResult = bundler.check_proof(work / "p.proof.json")
    signed: bundler.SignResult = bundler.sign(exported.path, key=work / "id_ed25519")
    page: bundler.RenderResult = bundler.render(check.to_json(), html=work)
    page_from_file: bundler.RenderResult = bundler.render(work / "v.json", html=work / "v.html")
    stored: bundler.UploadResult = bundler.upload(
        exported.path,
        "s3://archive/eval",
        retain_until=datetime(2033, 1, 1, tzinfo=UTC),
        retention_mode="COMPLIANCE",
        endpoint_url="http://127.0.0.1:8333",
    )
    bundles: bundler.BundleListing = bundler.list_bundles("s3://archive/eval", report_id="rpt-clean")
    fetched: bundler.DownloadResult = bundler.download(stored.url, work / "copy.tar.zst")
    summary: bundler.FixitySummary = bundler.fixity(
        work, ledger=work / "fixity.sqlite", level="object", workers=1, on_progress=on_progress
    )
    retired: bundler.Retirement = bundler.retire(
        work, bundle_key="b00.tar.zst", reason="restored from tape", ledger=work / "fixity.sqlite"
    )
    try:
        bundler.inspect("s3://bucket/prefix/reports/bundles/rpt-x/0.tar.zst")
    except bundler.NotFound as exc:
        print(exc.param, exc.exit_code)
    try:
        bundler.export("store", "rpt-clean", exported_at=datetime(2026, 11, 30))
    except bundler.ParameterError as exc:
        print(exc.param, exc.exit_code)
    except bundler.BundlerError as exc:
        print(exc.message)
    print(
        retired.reason,
        lines,
        verdict.value,
        facts.signed,
        extracted.exit_code,
        audited.exit_code,
        checked.case_status,
        from_text.anchored,
        from_bytes.leaf_index,
        from_file.tree_size,
        signed.signature,
        page.out,
        page_from_file.kind,
        len(bundles),
        fetched.sha256,
    )
    return summary.exit_code
