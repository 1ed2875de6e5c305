"""The library face (bundler/__init__.py): the operations the command line runs, as
functions, with the results and errors their docstrings promise."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from conftest import EXPORTED_AT
from s3_server import Server

import bundler
from bundler.core.errors import InputError, PermissionDenied, VerificationFailed

STORE = Path(__file__).resolve().parent.parent / "fixtures" / "stores" / "main"


def test_export_verify_audit_prove_extract(tmp_path: Path) -> None:
    out = tmp_path / "b.tar.zst"
    result = bundler.export(
        str(STORE), "rpt-clean", principal="alice", out=out, exported_at=EXPORTED_AT
    )
    check = bundler.verify(str(out))
    assert check.verdict.value == "verified" and check.bundle_digest == result.bundle_digest
    assert bundler.audit(str(out)).verdict.value == "consistent"
    proof = bundler.prove(str(out), "accuracy-00000")
    checked = bundler.check_proof(orjson.dumps(proof.to_json()))
    assert checked.case_id == "accuracy-00000" and not checked.anchored
    assert bundler.inspect(str(out)).bundle_digest == result.bundle_digest
    assert bundler.extract(str(out), tmp_path / "bag").verdict.value == "verified"
    # The same deterministic bytes through the library as through the command line.
    again = bundler.export(
        str(STORE),
        "rpt-clean",
        principal="alice",
        out=tmp_path / "c.tar.zst",
        exported_at=EXPORTED_AT,
    )
    assert (tmp_path / "c.tar.zst").read_bytes() == out.read_bytes()
    assert again.bundle_digest == result.bundle_digest


def test_errors_are_the_promised_ones(tmp_path: Path) -> None:
    with pytest.raises(PermissionDenied):
        bundler.export(str(STORE), "rpt-clean", principal="carol", out=tmp_path / "x.tar.zst")
    with pytest.raises(InputError):
        bundler.inspect(str(tmp_path / "absent.tar.zst"))
    assert bundler.verify(str(tmp_path / "absent.tar.zst")).verdict.value == "error"
    broken = tmp_path / "broken.tar.zst"
    bundler.export(str(STORE), "rpt-clean", principal="alice", out=broken, exported_at=EXPORTED_AT)
    data = bytearray(broken.read_bytes())
    data[len(data) // 2] ^= 1
    broken.write_bytes(bytes(data))
    with pytest.raises((VerificationFailed, InputError)):
        bundler.prove(str(broken), "accuracy-00000")


def test_upload_and_download(
    tmp_path: Path, s3_server: Server, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server.endpoint)
    out = tmp_path / "b.tar.zst"
    bundler.export(str(STORE), "rpt-clean", principal="alice", out=out, exported_at=EXPORTED_AT)
    stored = bundler.upload(out, f"s3://{bucket}/lib")
    assert stored.status == "uploaded"
    got = bundler.download(stored.url, tmp_path / "copy.tar.zst")
    assert (tmp_path / "copy.tar.zst").read_bytes() == out.read_bytes()
    assert got.sha256 == stored.sha256
    assert bundler.verify(stored.url).verdict.value == "verified"
