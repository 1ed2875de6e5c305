"""Object storage through the installed CLI against the real SeaweedFS server (SPEC 6, 7, 8)."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import EXPORTED_AT, run_cli
from s3_server import SECRET_KEY, Server

STAMP = EXPORTED_AT.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def endpoint(s3_server: Server) -> list[str]:
    return ["--endpoint-url", s3_server.endpoint]


def _upload_store(raw: Any, bucket: str, prefix: str, root: Path) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            raw.put_object(
                Bucket=bucket,
                Key=f"{prefix}/{path.relative_to(root).as_posix()}",
                Body=path.read_bytes(),
            )


def test_upload_list_download_verify_inspect(
    bundles: dict[str, Path], bucket: str, endpoint: list[str], tmp_path: Path, raw: Any
) -> None:
    archive = bundles["rpt-clean/alice"]
    done = run_cli("upload", str(archive), f"s3://{bucket}/archive", *endpoint, "--json")
    assert done.returncode == 0, done.stderr.decode()
    info = orjson.loads(done.stdout)
    assert info["key"].startswith("archive/reports/bundles/rpt-clean/")
    assert info["key"].endswith(info["bundle_digest"][7:] + ".tar.zst")
    head = raw.head_object(Bucket=bucket, Key=info["key"])
    assert head["Metadata"]["report-id"] == "rpt-clean"
    assert head["Metadata"]["bundle-digest"] == info["bundle_digest"]

    again = run_cli("upload", str(archive), f"s3://{bucket}/archive", *endpoint)
    assert again.returncode == 0, again.stderr.decode()
    assert b"Upload:      already archived: s3://" in again.stdout

    listed = run_cli("list", f"s3://{bucket}/archive", *endpoint, "--json")
    assert listed.returncode == 0, listed.stderr.decode()
    rows = [orjson.loads(line) for line in listed.stdout.splitlines()]
    assert [r["report_id"] for r in rows] == ["rpt-clean"]
    assert rows[0]["bundle_digest"] == info["bundle_digest"]

    url = f"s3://{bucket}/{info['key']}"
    target = tmp_path / "copy.tar.zst"
    got = run_cli("download", url, str(target), *endpoint)
    assert got.returncode == 0, got.stderr.decode()
    assert target.read_bytes() == archive.read_bytes()
    refused = run_cli("download", url, str(target), *endpoint)
    assert refused.returncode == 3 and target.read_bytes() == archive.read_bytes()

    verified = run_cli("verify", url, *endpoint, "--expect-bundle-digest", info["bundle_digest"])
    assert verified.returncode == 0, verified.stderr.decode()
    assert b"Verdict:     VERIFIED" in verified.stdout
    inspected = run_cli("inspect", url, *endpoint, "--json")
    assert inspected.returncode == 0 and orjson.loads(inspected.stdout)["report_id"] == "rpt-clean"


def test_replaced_object_fails_download_and_verify(
    bundles: dict[str, Path], bucket: str, endpoint: list[str], tmp_path: Path, raw: Any
) -> None:
    done = run_cli(
        "upload", str(bundles["rpt-retention/alice"]), f"s3://{bucket}/p", *endpoint, "--json"
    )
    assert done.returncode == 0, done.stderr.decode()
    key = orjson.loads(done.stdout)["key"]
    head = raw.head_object(Bucket=bucket, Key=key)
    other = bundles["rpt-clean/alice"].read_bytes()
    raw.put_object(Bucket=bucket, Key=key, Body=other, Metadata=head["Metadata"])
    url = f"s3://{bucket}/{key}"
    target = tmp_path / "x.tar.zst"
    got = run_cli("download", url, str(target), *endpoint)
    assert got.returncode == 1, got.stderr.decode()
    assert not target.exists()
    assert len(got.stderr.decode().strip().splitlines()) == 1
    assert key in got.stderr.decode() and "altered at rest" in got.stderr.decode()
    verified = run_cli("verify", url, *endpoint)
    assert verified.returncode == 1, verified.stderr.decode()


def test_export_from_an_s3_store_is_byte_identical(
    fixture_store: Path, bucket: str, endpoint: list[str], tmp_path: Path, raw: Any
) -> None:
    _upload_store(raw, bucket, "stores/main", fixture_store)
    local = tmp_path / "local.tar.zst"
    remote = tmp_path / "remote.tar.zst"
    common = [
        "--report",
        "rpt-every-reason",
        "--principal",
        "alice",
        "--exported-at",
        STAMP,
        "--quiet",
    ]
    a = run_cli("export", "--store", str(fixture_store), "--out", str(local), *common)
    b = run_cli(
        "export", "--store", f"s3://{bucket}/stores/main", "--out", str(remote), *common, *endpoint
    )
    assert a.returncode == 0, a.stderr.decode()
    assert b.returncode == 0, b.stderr.decode()
    assert local.read_bytes() == remote.read_bytes()


def test_export_upload(
    fixture_store: Path, bucket: str, endpoint: list[str], tmp_path: Path, raw: Any
) -> None:
    out = tmp_path / "up.tar.zst"
    done = run_cli(
        "export",
        "--store",
        str(fixture_store),
        "--report",
        "rpt-clean",
        "--principal",
        "alice",
        "--exported-at",
        STAMP,
        "--out",
        str(out),
        "--upload",
        f"s3://{bucket}/up",
        "--json",
        *endpoint,
    )
    assert done.returncode == 0, done.stderr.decode()
    summary = orjson.loads(done.stdout)
    stored = raw.get_object(Bucket=summary["upload"]["bucket"], Key=summary["upload"]["key"])[
        "Body"
    ].read()
    assert stored == out.read_bytes()


def test_missing_bucket_and_unreachable_endpoint_exit_5_without_secrets(
    bundles: dict[str, Path], endpoint: list[str], tmp_path: Path
) -> None:
    archive = bundles["rpt-clean/alice"]
    missing = run_cli("upload", str(archive), f"s3://no-such-{secrets.token_hex(4)}/p", *endpoint)
    assert missing.returncode == 5, missing.stderr.decode()
    assert len(missing.stderr.decode().strip().splitlines()) == 1
    unreachable = run_cli("list", "s3://bucket/p", "--endpoint-url", "http://127.0.0.1:9")
    assert unreachable.returncode == 5, unreachable.stderr.decode()
    for proc in (missing, unreachable):
        assert SECRET_KEY.encode() not in proc.stderr + proc.stdout


def test_upload_refuses_a_bundle_that_does_not_verify(
    bundles: dict[str, Path], bucket: str, endpoint: list[str], tmp_path: Path, raw: Any
) -> None:
    import zstandard

    data = bytearray(
        zstandard.ZstdDecompressor().stream_reader(bundles["rpt-clean/alice"].read_bytes()).read()
    )
    index = data.index(b'"score":1,"status":"pass"')
    data[index + 8] = ord("0")
    bad = tmp_path / "bad.tar.zst"
    bad.write_bytes(zstandard.ZstdCompressor(write_checksum=True).compress(bytes(data)))
    done = run_cli("upload", str(bad), f"s3://{bucket}/p", *endpoint)
    assert done.returncode == 1, done.stderr.decode()
    assert b"does not verify" in done.stderr
    unreadable = tmp_path / "unreadable.tar.zst"
    unreadable.write_bytes(b"not a bundle")
    done = run_cli("upload", str(unreadable), f"s3://{bucket}/p", *endpoint)
    assert done.returncode == 3, done.stderr.decode()
    assert raw.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
