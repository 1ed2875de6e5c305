"""Object storage against a real S3-compatible server (SPEC section 6).

SeaweedFS runs on 127.0.0.1 with SigV4 credentials; each test gets a fresh bucket.
Expected checksums are computed here with hashlib/zlib (or the reference CRC64NVME
below), never taken from the code under test.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import secrets
import time
import traceback
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from conftest import raw_client as _raw_client
from faulty_proxy import FaultyProxy, corrupt_parts, corrupt_puts
from s3_server import SECRET_KEY, Server, free_ports, start_server

from bundler import storage
from bundler.core.errors import (
    DigestError,
    InputError,
    OutputError,
    StorageError,
    StoreError,
    UsageError,
    VerificationFailed,
)
from bundler.storage import S3Location, StorageConfig, UploadStatus

MiB = 1024 * 1024
# Distinctive, so a leak into any message or traceback is unmistakable.
SMALL = StorageConfig(multipart_threshold=5 * MiB, part_size=5 * MiB)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(autouse=True)
def fresh_clients() -> Iterator[None]:
    """Tests patch client construction; none may inherit another test's client."""
    storage.config._CONN_CACHE.clear()
    yield
    storage.config._CONN_CACHE.clear()


@pytest.fixture
def config(s3_server: Server) -> StorageConfig:
    return StorageConfig(
        endpoint_url=s3_server.endpoint,
        multipart_threshold=SMALL.multipart_threshold,
        part_size=SMALL.part_size,
    )


def _archive(tmp_path: Path, size: int, name: str = "bundle.tar.zst") -> Path:
    path = tmp_path / name
    path.write_bytes(os.urandom(size))
    return path


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _b64sha(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def _b64crc32(data: bytes) -> str:
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def _ids(tag: str) -> dict[str, str]:
    """A bundle digest, report id and report digest, distinct per tag."""
    return {
        "bundle_digest": _sha(b"bundle:" + tag.encode()),
        "report_id": "rep-" + tag,
        "report_digest": _sha(b"report:" + tag.encode()),
    }


def _upload(path: Path, bucket: str, config: StorageConfig, tag: str = "a", **kw: Any) -> Any:
    return storage.upload_bundle(
        path, S3Location(bucket, "archive"), config=config, **_ids(tag), **kw
    )


def _key(tag: str, prefix: str = "archive") -> str:
    ids = _ids(tag)
    return f"{prefix}/reports/bundles/{ids['report_id']}/{ids['bundle_digest'][7:]}.tar.zst"


def _keys(raw: Any, bucket: str) -> list[str]:
    return [o["Key"] for o in raw.list_objects_v2(Bucket=bucket).get("Contents", [])]


def _assert_clean(exc: BaseException) -> None:
    """One line, exit 5, and no secret anywhere in the message or its chain."""
    assert isinstance(exc, StorageError)
    assert exc.exit_code == 5
    assert "\n" not in str(exc)
    text = "".join(traceback.format_exception(exc))
    for secret in (SECRET_KEY, os.environ.get("AWS_SECRET_ACCESS_KEY", SECRET_KEY)):
        assert secret not in text


def _assert_altered(exc: BaseException, key: str, recorded: str, observed: str) -> None:
    """A failed verification (exit 1), one line naming the key and both digests."""
    assert isinstance(exc, storage.AlteredAtRest)
    assert exc.exit_code == 1
    assert "\n" not in str(exc)
    assert key in str(exc) and recorded in str(exc) and observed in str(exc)
    assert (exc.key, exc.recorded, exc.observed) == (key, recorded, observed)


# --------------------------------------------------------------------------- no server


def test_parse_s3_url() -> None:
    assert storage.parse_s3_url("s3://bkt/a/b.tar.zst") == S3Location("bkt", "a/b.tar.zst")
    assert storage.parse_s3_url("s3://bkt") == S3Location("bkt", "")
    assert storage.parse_s3_url("s3://bkt/") == S3Location("bkt", "")
    for bad in ("http://bkt/x", "s3://", "s3:///key", "bkt/key", "s3://b k/x", "S3://bkt/x"):
        with pytest.raises(UsageError):
            storage.parse_s3_url(bad)


def test_bundle_key_layout() -> None:
    digest = "sha256:" + "ab" * 32
    want = f"reports/bundles/r-1/{'ab' * 32}.tar.zst"
    assert storage.bundle_key("", "r-1", digest) == want
    assert storage.bundle_key("/", "r-1", digest) == want
    assert storage.bundle_key("arch/2024/", "r-1", digest) == "arch/2024/" + want
    with pytest.raises(DigestError):
        storage.bundle_key("p", "r-1", "sha256:" + "AB" * 32)
    with pytest.raises(UsageError):
        storage.bundle_key("p", "../r", digest)


def test_config_rejects_unusable_values() -> None:
    with pytest.raises(UsageError):
        StorageConfig(part_size=MiB)
    with pytest.raises(UsageError):
        StorageConfig(page_size=0)
    with pytest.raises(UsageError):
        StorageConfig(endpoint_url="127.0.0.1:9000")


def test_endpoint_from_environment(s3_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:2")
    client = storage.make_client(StorageConfig())
    assert client.meta.endpoint_url == "http://127.0.0.1:2"
    assert client.meta.config.s3 is not None
    assert client.meta.config.s3["addressing_style"] == "path"
    client = storage.make_client(StorageConfig(endpoint_url="http://127.0.0.1:3"))
    assert client.meta.endpoint_url == "http://127.0.0.1:3"


def test_list_rejects_invalid_report_id_at_once() -> None:
    with pytest.raises(UsageError):
        storage.list_bundles(S3Location("bkt", "p"), report_id="../x", config=SMALL)


def test_upload_argument_errors(tmp_path: Path) -> None:
    path = _archive(tmp_path, 10)
    dest = S3Location("bkt", "p")
    with pytest.raises(InputError):
        storage.upload_bundle(tmp_path / "absent", dest, config=SMALL, **_ids("x"))
    with pytest.raises(DigestError):
        storage.upload_bundle(path, dest, config=SMALL, **{**_ids("x"), "report_digest": "md5:00"})
    past = datetime.now(UTC) - timedelta(days=1)
    with pytest.raises(UsageError):
        storage.upload_bundle(path, dest, config=SMALL, retain_until=past, **_ids("x"))
    with pytest.raises(UsageError):
        storage.upload_bundle(
            path,
            dest,
            config=SMALL,
            retain_until=datetime.now(UTC) + timedelta(days=1),
            retention_mode="FOREVER",
            **_ids("x"),
        )


# --------------------------------------------------------------------------- upload


@pytest.mark.s3
def test_single_put_upload(tmp_path: Path, raw: Any, bucket: str, config: StorageConfig) -> None:
    path = _archive(tmp_path, 300_000)
    data = path.read_bytes()
    seen: list[int] = []
    result = _upload(path, bucket, config, progress=seen.append)
    assert result.status is UploadStatus.UPLOADED
    assert result.key == _key("a")
    assert (result.multipart, result.sha256, sum(seen)) == (False, _sha(data), len(data))
    head = raw.head_object(Bucket=bucket, Key=_key("a"), ChecksumMode="ENABLED")
    assert head["ContentLength"] == len(data)
    assert head["ChecksumSHA256"] == _b64sha(data)
    ids = _ids("a")
    assert head["Metadata"] == {
        "bundle-digest": ids["bundle_digest"],
        "report-id": ids["report_id"],
        "report-digest": ids["report_digest"],
        "sha256": _sha(data),
    }
    assert raw.get_object(Bucket=bucket, Key=_key("a"))["Body"].read() == data


@pytest.mark.s3
def test_multipart_upload(tmp_path: Path, raw: Any, bucket: str, config: StorageConfig) -> None:
    path = _archive(tmp_path, 11 * MiB + 12_345)
    data = path.read_bytes()
    seen: list[int] = []
    result = _upload(path, bucket, config, progress=seen.append)
    assert (result.status, result.multipart, result.part_count) == (UploadStatus.UPLOADED, True, 3)
    assert sorted(seen) == [1 * MiB + 12_345, 5 * MiB, 5 * MiB]
    head = raw.head_object(Bucket=bucket, Key=_key("a"), ChecksumMode="ENABLED")
    assert head["ETag"].strip('"').endswith("-3")
    assert head["ChecksumCRC32"] == _b64crc32(data)
    assert head["ChecksumType"] == "FULL_OBJECT"
    assert head["Metadata"]["sha256"] == _sha(data)
    assert head["ContentLength"] == len(data)
    assert raw.get_object(Bucket=bucket, Key=_key("a"))["Body"].read() == data
    assert raw.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


# Reference CRC-64/NVME (reflected, poly 0xAD93D23594C93659, init and xorout all ones),
# written from the algorithm's parameters; its published check value is asserted below.
_CRC64_POLY = 0x9A6C9329AC4BC9B5  # 0xAD93D23594C93659 bit-reversed
_CRC64_TABLE: list[int] = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ _CRC64_POLY if _c & 1 else _c >> 1
    _CRC64_TABLE.append(_c)


def _crc64nvme(data: bytes | memoryview, crc: int = 0) -> int:
    crc ^= 0xFFFFFFFFFFFFFFFF
    table = _CRC64_TABLE
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFFFFFFFFFF


@pytest.mark.parametrize(
    ("len_a", "len_b"), [(0, 0), (0, 9), (9, 0), (1, 1), (1000, 7), (3, 70_000)]
)
def test_crc_combine_matches_crc_of_concatenation(len_a: int, len_b: int) -> None:
    a, b = os.urandom(len_a), os.urandom(len_b)
    crc32 = storage.checksums._Crc("CRC32", 4, 0xEDB88320, zlib.crc32)
    assert crc32.combine(zlib.crc32(a), zlib.crc32(b), len_b) == zlib.crc32(a + b)
    crc64 = storage.checksums._Crc("CRC64NVME", 8, _CRC64_POLY, _crc64nvme)
    assert crc64.combine(_crc64nvme(a), _crc64nvme(b), len_b) == _crc64nvme(a + b)


@pytest.mark.s3
def test_multipart_with_crc64nvme(
    tmp_path: Path, raw: Any, bucket: str, s3_server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path taken when awscrt is installed, with a reference CRC in its place."""
    assert _crc64nvme(b"123456789") == 0xAE8B14860A799888
    monkeypatch.setattr(
        storage.upload,
        "_full_object_crc",
        lambda: storage.checksums._Crc("CRC64NVME", 8, _CRC64_POLY, _crc64nvme),
    )
    path = _archive(tmp_path, 600_000)
    data = path.read_bytes()
    cfg = StorageConfig(endpoint_url=s3_server.endpoint, multipart_threshold=100_000)
    result = _upload(path, bucket, cfg)
    assert (result.multipart, result.checksum_algorithm) == (True, "CRC64NVME")
    head = raw.head_object(Bucket=bucket, Key=_key("a"), ChecksumMode="ENABLED")
    assert (
        head["ChecksumCRC64NVME"] == base64.b64encode(_crc64nvme(data).to_bytes(8, "big")).decode()
    )
    assert raw.get_object(Bucket=bucket, Key=_key("a"))["Body"].read() == data


@pytest.mark.s3
@pytest.mark.parametrize("size", [200_000, 6 * MiB], ids=["single", "multipart"])
def test_reupload_identical_is_already_archived(
    tmp_path: Path, raw: Any, bucket: str, config: StorageConfig, size: int
) -> None:
    path = _archive(tmp_path, size)
    _upload(path, bucket, config)
    before = raw.head_object(Bucket=bucket, Key=_key("a"))
    time.sleep(1.1)  # a rewrite would show a later Last-Modified
    again = _upload(path, bucket, config)
    assert (again.status, again.identical) == (UploadStatus.ALREADY_ARCHIVED, True)
    after = raw.head_object(Bucket=bucket, Key=_key("a"))
    assert (after["LastModified"], after["ETag"]) == (before["LastModified"], before["ETag"])


@pytest.mark.s3
def test_same_bundle_other_archive_bytes_is_already_archived(
    tmp_path: Path, raw: Any, bucket: str, config: StorageConfig
) -> None:
    """Two zstd levels of one bundle share the key: the second is not written, once the
    stored bytes verify as this bundle (``existing_bundle``; metadata proves nothing)."""
    first = _archive(tmp_path, 100_000, "one.tar.zst")
    second = _archive(tmp_path, 90_000, "two.tar.zst")
    _upload(first, bucket, config)
    asked: list[str] = []

    def same_bundle(url: str) -> str:
        asked.append(url)
        return _ids("a")["bundle_digest"]

    result = _upload(second, bucket, config, existing_bundle=same_bundle)
    assert (result.status, result.identical) == (UploadStatus.ALREADY_ARCHIVED, False)
    assert asked == [f"s3://{bucket}/{_key('a')}"]
    assert result.stored_sha256 == _sha(first.read_bytes())
    assert raw.get_object(Bucket=bucket, Key=_key("a"))["Body"].read() == first.read_bytes()
    # Without bytes that verify as this bundle, the same metadata is not enough.
    with pytest.raises(VerificationFailed, match="left alone"):
        _upload(second, bucket, config, existing_bundle=lambda url: None)


@pytest.mark.s3
@pytest.mark.parametrize(
    "metadata",
    [{}, {"bundle-digest": _sha(b"other"), "report-id": "rep-a"}],
    ids=["no-metadata", "other-bundle"],
)
def test_foreign_object_at_key_is_never_overwritten(
    tmp_path: Path, raw: Any, bucket: str, config: StorageConfig, metadata: dict[str, str]
) -> None:
    raw.put_object(Bucket=bucket, Key=_key("a"), Body=b"someone else's bytes", Metadata=metadata)
    path = _archive(tmp_path, 1000)
    with pytest.raises(VerificationFailed, match="left alone") as info:
        _upload(path, bucket, config)
    assert _key("a") in str(info.value)
    assert raw.get_object(Bucket=bucket, Key=_key("a"))["Body"].read() == b"someone else's bytes"


@pytest.mark.s3
@pytest.mark.parametrize("size", [1000, 6 * MiB], ids=["single", "multipart"])
def test_conditional_write_refuses_object_that_appeared(
    tmp_path: Path,
    raw: Any,
    bucket: str,
    config: StorageConfig,
    monkeypatch: pytest.MonkeyPatch,
    size: int,
) -> None:
    """Another writer wins the race after our HEAD: If-None-Match stops the write."""
    real_head = storage.objects._head
    calls: list[str] = []

    def head_racing(conn: Any, loc: S3Location, action: str) -> Any:
        calls.append(action)
        if len(calls) == 1:
            raw.put_object(Bucket=bucket, Key=loc.key, Body=b"the race winner")
            return None
        return real_head(conn, loc, action)

    monkeypatch.setattr(storage.upload, "_head", head_racing)
    path = _archive(tmp_path, size)
    with pytest.raises(VerificationFailed, match="left alone"):
        _upload(path, bucket, config)
    assert raw.get_object(Bucket=bucket, Key=_key("a"))["Body"].read() == b"the race winner"
    assert raw.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


@pytest.mark.s3
def test_sidecar_uploaded_and_never_replaced(
    tmp_path: Path, raw: Any, bucket: str, config: StorageConfig
) -> None:
    path = _archive(tmp_path, 5000)
    sig = tmp_path / "bundle.tar.zst.sig"
    sig.write_bytes(b"-----BEGIN SSH SIGNATURE-----\nA\n")
    result = _upload(path, bucket, config, sidecars=[sig])
    assert result.sidecar_key == _key("a") + ".sig"
    assert result.sidecar_status is UploadStatus.UPLOADED
    stored = raw.get_object(Bucket=bucket, Key=_key("a") + ".sig", ChecksumMode="ENABLED")
    assert stored["Body"].read() == sig.read_bytes()
    assert stored["ChecksumSHA256"] == _b64sha(sig.read_bytes())
    again = _upload(path, bucket, config, sidecars=[sig])
    assert again.sidecar_status is UploadStatus.ALREADY_ARCHIVED
    # A second signer's signature is added beside the first under its own SHA-256.
    other = tmp_path / "other.sig"
    other.write_bytes(b"-----BEGIN SSH SIGNATURE-----\nB\n")
    added = _upload(path, bucket, config, sidecars=[other])
    counter_key = f"{_key('a')}.sig.{hashlib.sha256(other.read_bytes()).hexdigest()}"
    assert [(s.key, s.status) for s in added.signatures] == [(counter_key, UploadStatus.UPLOADED)]
    assert raw.get_object(Bucket=bucket, Key=_key("a") + ".sig")["Body"].read() == sig.read_bytes()
    assert raw.get_object(Bucket=bucket, Key=counter_key)["Body"].read() == other.read_bytes()
    both = _upload(path, bucket, config, sidecars=[sig, other])
    assert [s.status for s in both.signatures] == [UploadStatus.ALREADY_ARCHIVED] * 2
    found = storage.stored_signatures(S3Location(bucket, _key("a")), config=config)
    assert [(s.key, s.data, s.problem) for s in found] == [
        (_key("a") + ".sig", sig.read_bytes(), None),
        (counter_key, other.read_bytes(), None),
    ]
    # Something squatting on a countersignature's key (not its bytes) is never replaced.
    third = tmp_path / "third.sig"
    third.write_bytes(b"-----BEGIN SSH SIGNATURE-----\nC\n")
    squat = f"{_key('a')}.sig.{hashlib.sha256(third.read_bytes()).hexdigest()}"
    raw.put_object(Bucket=bucket, Key=squat, Body=b"junk")
    with pytest.raises(OutputError, match=r"refusing to overwrite.*archive itself is stored"):
        _upload(path, bucket, config, sidecars=[third])
    assert raw.get_object(Bucket=bucket, Key=squat)["Body"].read() == b"junk"
    listed = storage.stored_signatures(S3Location(bucket, _key("a")), config=config)
    assert {s.key: s.problem is not None for s in listed} == {
        _key("a") + ".sig": False,
        counter_key: False,
        squat: True,
    }
    assert "altered at rest" in str(next(s.problem for s in listed if s.key == squat))


@pytest.mark.s3
def test_list_shows_signed_bundles(
    tmp_path: Path, raw: Any, bucket: str, config: StorageConfig
) -> None:
    sig = tmp_path / "x.sig"
    sig.write_bytes(b"s1")
    _upload(_archive(tmp_path, 100, "a.tar.zst"), bucket, config, "a", sidecars=[sig])
    _upload(_archive(tmp_path, 100, "b.tar.zst"), bucket, config, "b")
    storage.add_signature(S3Location(bucket, _key("a")), b"s2", config=config)
    # Not signatures of a: a stray object named like one, and a different suffix.
    raw.put_object(Bucket=bucket, Key=_key("a") + ".sig.notes", Body=b"x")
    listed = {
        b.report_id: b.signature_keys
        for b in storage.list_bundles(S3Location(bucket, "archive"), config=config)
    }
    assert listed == {
        "rep-a": (_key("a") + ".sig", f"{_key('a')}.sig.{hashlib.sha256(b's2').hexdigest()}"),
        "rep-b": (),
    }


# --------------------------------------------------------------------------- retention


@pytest.mark.s3
def test_object_lock_retention(tmp_path: Path, raw: Any, config: StorageConfig) -> None:
    name = f"lock-{secrets.token_hex(6)}"
    raw.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    until = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
    path = _archive(tmp_path, 2000)
    result = _upload(path, name, config, retain_until=until, retention_mode="COMPLIANCE")
    assert result.retention_mode == "COMPLIANCE"
    head = raw.head_object(Bucket=name, Key=_key("a"))
    assert head["ObjectLockMode"] == "COMPLIANCE"
    assert abs((head["ObjectLockRetainUntilDate"] - until).total_seconds()) < 1
    version = head.get("VersionId")
    with pytest.raises(ClientError):
        raw.delete_object(Bucket=name, Key=_key("a"), VersionId=version or "null")


@pytest.mark.s3
def test_retention_without_object_lock_is_refused(
    tmp_path: Path, raw: Any, bucket: str, config: StorageConfig
) -> None:
    path = _archive(tmp_path, 2000)
    until = datetime.now(UTC) + timedelta(days=1)
    with pytest.raises(StorageError, match="Object Lock") as info:
        _upload(path, bucket, config, retain_until=until)
    _assert_clean(info.value)
    assert _keys(raw, bucket) == []


# --------------------------------------------------------------------------- list


@pytest.mark.s3
def test_list_paginates_and_filters(
    tmp_path: Path,
    raw: Any,
    bucket: str,
    s3_server: Server,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = StorageConfig(endpoint_url=s3_server.endpoint, page_size=2)
    expected = {}
    for i, tag in enumerate(["a", "b", "c", "d", "e"]):
        path = _archive(tmp_path, 100 + i, f"{tag}.tar.zst")
        ids = _ids(tag)
        if tag in ("d", "e"):
            ids["report_id"] = "rep-a"  # three bundles of one report
        storage.upload_bundle(path, S3Location(bucket, "archive"), config=cfg, **ids)
        expected[ids["bundle_digest"]] = (ids["report_id"], 100 + i)
    # Not bundles: a sidecar, a stray object, and a bundle under another prefix.
    raw.put_object(Bucket=bucket, Key=_key("a") + ".sig", Body=b"sig")
    raw.put_object(Bucket=bucket, Key="archive/reports/bundles/rep-a/notes.txt", Body=b"x")
    raw.put_object(Bucket=bucket, Key=_key("z", prefix="elsewhere"), Body=b"x")

    requests: list[int] = []
    real_connect = storage.config._connect

    def counting_connect(config: StorageConfig) -> Any:
        conn = real_connect(config)
        conn.client.meta.events.register(
            "after-call.s3.ListObjectsV2", lambda **kw: requests.append(1)
        )
        return conn

    monkeypatch.setattr(storage.listing, "_connect", counting_connect)
    listed = list(storage.list_bundles(S3Location(bucket, "archive/"), config=cfg))
    assert {b.bundle_digest: (b.report_id, b.size) for b in listed} == expected
    assert len(requests) >= 3  # 5 bundles + 2 other keys at 2 keys per page
    assert all(b.key.startswith("archive/reports/bundles/") for b in listed)
    assert all(isinstance(b.last_modified, datetime) for b in listed)

    only = list(storage.list_bundles(S3Location(bucket, "archive"), report_id="rep-a", config=cfg))
    assert sorted(b.bundle_digest for b in only) == sorted(
        d for d, (r, _) in expected.items() if r == "rep-a"
    )
    assert len(only) == 3


# --------------------------------------------------------------------------- download


@pytest.mark.s3
def test_download_round_trip_with_sidecar(
    tmp_path: Path, bucket: str, config: StorageConfig
) -> None:
    path = _archive(tmp_path, 17 * MiB + 7)  # three ranges
    sig = tmp_path / "s.sig"
    sig.write_bytes(b"signature bytes")
    _upload(path, bucket, config, sidecars=[sig])
    out = tmp_path / "out"
    out.mkdir()
    seen: list[int] = []
    result = storage.download_bundle(
        S3Location(bucket, _key("a")), out / "got.tar.zst", config=config, progress=seen.append
    )
    assert (out / "got.tar.zst").read_bytes() == path.read_bytes()
    assert (out / "got.tar.zst.sig").read_bytes() == sig.read_bytes()
    assert result.sha256 == _sha(path.read_bytes())
    assert result.sidecar_path == out / "got.tar.zst.sig"
    assert result.bundle_digest == _ids("a")["bundle_digest"]
    assert sum(seen) == path.stat().st_size
    assert sorted(p.name for p in out.iterdir()) == ["got.tar.zst", "got.tar.zst.sig"]


@pytest.mark.s3
def test_download_refuses_existing_destination(
    tmp_path: Path, bucket: str, config: StorageConfig
) -> None:
    path = _archive(tmp_path, 1000)
    _upload(path, bucket, config)
    dest = tmp_path / "exists.tar.zst"
    dest.write_bytes(b"keep me")
    with pytest.raises(OutputError) as info:
        storage.download_bundle(S3Location(bucket, _key("a")), dest, config=config)
    assert info.value.exit_code == 3
    assert dest.read_bytes() == b"keep me"
    with pytest.raises(OutputError):
        storage.download_bundle(
            S3Location(bucket, _key("a")), tmp_path / "no" / "dir.tar.zst", config=config
        )


def _replace_behind_our_back(raw: Any, bucket: str, key: str, data: bytes) -> None:
    """Another client rewrites the object with new bytes but the old metadata."""
    old = raw.head_object(Bucket=bucket, Key=key)["Metadata"]
    raw.put_object(Bucket=bucket, Key=key, Body=data, Metadata=old)


@pytest.mark.s3
@pytest.mark.parametrize("size", [50_000, 9 * MiB], ids=["single", "multipart"])
def test_replaced_object_fails_download_and_stream(
    tmp_path: Path, raw: Any, bucket: str, config: StorageConfig, size: int
) -> None:
    path = _archive(tmp_path, size)
    _upload(path, bucket, config)
    tampered = bytearray(path.read_bytes())
    tampered[size // 3] ^= 0x01
    _replace_behind_our_back(raw, bucket, _key("a"), bytes(tampered))

    out = tmp_path / "out"
    out.mkdir()
    recorded, observed = _sha(path.read_bytes()), _sha(bytes(tampered))
    with pytest.raises(storage.AlteredAtRest, match="altered at rest") as info:
        storage.download_bundle(S3Location(bucket, _key("a")), out / "x.tar.zst", config=config)
    _assert_altered(info.value, _key("a"), recorded, observed)
    assert list(out.iterdir()) == []  # neither the file nor a temporary one

    with storage.open_verified(S3Location(bucket, _key("a")), config=config) as stream:
        received = bytearray()
        with pytest.raises(storage.AlteredAtRest, match="altered at rest") as info:
            while chunk := stream.read(64 * 1024):
                received += chunk
        _assert_altered(info.value, _key("a"), recorded, observed)
        assert not stream.verified
    # Everything before the end was handed over; the end is where the verdict falls.
    assert bytes(received) == bytes(tampered[: len(received)])


@pytest.mark.s3
def test_object_replaced_during_ranged_download(
    tmp_path: Path,
    raw: Any,
    bucket: str,
    config: StorageConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ranges are pinned to the version the HEAD saw (If-Match), so bytes of two
    versions are never stitched together."""
    path = _archive(tmp_path, 11 * MiB)
    _upload(path, bucket, config)
    real_fetch = storage.download._fetch_range
    replaced: list[bool] = []

    def fetch_after_replacing(*args: Any) -> bytes:
        if not replaced:
            replaced.append(True)
            _replace_behind_our_back(raw, bucket, _key("a"), os.urandom(11 * MiB))
        return real_fetch(*args)

    monkeypatch.setattr(storage.download, "_fetch_range", fetch_after_replacing)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(StorageError, match="changed during the download") as info:
        storage.download_bundle(S3Location(bucket, _key("a")), out / "x.tar.zst", config=config)
    _assert_clean(info.value)
    assert list(out.iterdir()) == []


@pytest.mark.s3
def test_open_verified_passes_intact_object(
    tmp_path: Path, bucket: str, config: StorageConfig
) -> None:
    path = _archive(tmp_path, 3 * MiB + 1)
    _upload(path, bucket, config)
    with storage.open_verified(S3Location(bucket, _key("a")), config=config) as stream:
        assert stream.read() == path.read_bytes()
        assert stream.verified


@pytest.mark.s3
def test_object_without_sha256_metadata_is_not_trusted(
    tmp_path: Path, raw: Any, bucket: str, config: StorageConfig
) -> None:
    raw.put_object(Bucket=bucket, Key="loose.tar.zst", Body=b"unverifiable")
    with pytest.raises(StorageError, match="no sha256 metadata"):
        storage.download_bundle(
            S3Location(bucket, "loose.tar.zst"), tmp_path / "x.tar.zst", config=config
        )
    assert not (tmp_path / "x.tar.zst").exists()
    with (
        pytest.raises(StorageError, match="no sha256 metadata"),
        storage.open_verified(S3Location(bucket, "loose.tar.zst"), config=config),
    ):
        pass
    # Asked to, a stream opens with nothing recorded to check: the verifier judges it.
    loose = S3Location(bucket, "loose.tar.zst")
    with storage.open_verified(loose, config=config, unrecorded_ok=True) as stream:
        assert stream.expected_sha256 is None
        assert stream.read() == b"unverifiable"
        assert not stream.verified


# --------------------------------------------------------------------------- transit faults


def _unsigned_payloads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Turn off SigV4 payload signing (as on HTTPS), so only the S3 checksum guards
    the bytes: the test then shows that our checksum is what the server checks."""
    real = storage.config._botocore_config

    def config(cfg: StorageConfig, *, path_style: bool) -> Config:
        s3 = {"addressing_style": "path", "payload_signing_enabled": False}
        return real(cfg, path_style=path_style).merge(Config(s3=s3))

    monkeypatch.setattr(storage.config, "_botocore_config", config)


@pytest.mark.s3
@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned-payload"])
@pytest.mark.parametrize(
    ("size", "select"),
    [(100_000, corrupt_puts), (11 * MiB, corrupt_parts)],
    ids=["single", "multipart"],
)
def test_corrupted_in_transit_is_refused(
    tmp_path: Path,
    raw: Any,
    bucket: str,
    s3_server: Server,
    monkeypatch: pytest.MonkeyPatch,
    signed: bool,
    size: int,
    select: Callable[[str, str], bool],
) -> None:
    if not signed:
        _unsigned_payloads(monkeypatch)
    path = _archive(tmp_path, size)
    with FaultyProxy(s3_server.port, select=select, max_flips=1) as proxy:
        cfg = StorageConfig(endpoint_url=proxy.endpoint, multipart_threshold=5 * MiB)
        with pytest.raises(StorageError, match="corrupted in transit") as info:
            _upload(path, bucket, cfg)
        assert proxy.flipped == 1
    _assert_clean(info.value)
    assert _keys(raw, bucket) == []
    direct = StorageConfig(endpoint_url=s3_server.endpoint)
    assert list(storage.list_bundles(S3Location(bucket, "archive"), config=direct)) == []
    assert raw.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


@pytest.mark.s3
@pytest.mark.parametrize("size", [100_000, 6 * MiB], ids=["single", "multipart"])
def test_file_changed_after_hashing_is_refused(
    tmp_path: Path,
    raw: Any,
    bucket: str,
    config: StorageConfig,
    monkeypatch: pytest.MonkeyPatch,
    size: int,
) -> None:
    """The checksums sent are those of the hashed bytes (the sha256 metadata), so
    bytes that changed on disk in between never get stored under that metadata."""
    real_hash = storage.upload._hash_file

    def hash_then_change(path: Path, **kw: Any) -> Any:
        hashed = real_hash(path, **kw)
        with open(path, "r+b") as fh:
            fh.seek(size - 10)
            fh.write(b"X" * 10)
        return hashed

    monkeypatch.setattr(storage.upload, "_hash_file", hash_then_change)
    path = _archive(tmp_path, size)
    with pytest.raises(StorageError, match="BadDigest") as info:
        _upload(path, bucket, config)
    _assert_clean(info.value)
    assert _keys(raw, bucket) == []


@pytest.mark.s3
def test_server_stopped_mid_upload(s3_env: None, tmp_path: Path) -> None:
    server = start_server(tmp_path / "own-server")
    try:
        client = _raw_client(server.endpoint)
        client.create_bucket(Bucket="mid")
        cfg = StorageConfig(
            endpoint_url=server.endpoint,
            multipart_threshold=5 * MiB,
            part_size=5 * MiB,
            max_concurrency=1,
            max_attempts=2,
        )
        path = _archive(tmp_path, 16 * MiB)
        parts: list[int] = []

        def stop_after_first_part(n: int) -> None:
            parts.append(n)
            if len(parts) == 1:
                server.stop()

        started = time.monotonic()
        with pytest.raises(StorageError) as info:
            _upload(path, "mid", cfg, progress=stop_after_first_part)
        assert time.monotonic() - started < 30
        _assert_clean(info.value)
        assert parts == [5 * MiB]
        assert "could not be aborted" in str(info.value)

        server.start()
        client = _raw_client(server.endpoint)
        assert _keys(client, "mid") == []
        assert list(storage.list_bundles(S3Location("mid", "archive"), config=cfg)) == []
        result = _upload(path, "mid", cfg)
        assert result.status is UploadStatus.UPLOADED
        assert client.get_object(Bucket="mid", Key=_key("a"))["Body"].read() == path.read_bytes()
    finally:
        server.stop()


# --------------------------------------------------------------------------- refusals


@pytest.mark.s3
def test_unreachable_endpoint_fails_quickly(s3_env: None, tmp_path: Path) -> None:
    (port,) = free_ports(1)  # nothing listens there
    cfg = StorageConfig(endpoint_url=f"http://127.0.0.1:{port}")
    path = _archive(tmp_path, 100)
    calls: list[Callable[[], object]] = [
        lambda: _upload(path, "bkt", cfg),
        lambda: list(storage.list_bundles(S3Location("bkt", "p"), config=cfg)),
        lambda: storage.download_bundle(S3Location("bkt", "k"), tmp_path / "d", config=cfg),
    ]
    for call in calls:
        started = time.monotonic()
        with pytest.raises(StorageError, match=f"cannot reach .*127.0.0.1:{port}") as info:
            call()
        assert time.monotonic() - started < 20
        _assert_clean(info.value)


@pytest.mark.s3
def test_bad_credentials_never_leak_the_secret(
    tmp_path: Path, bucket: str, config: StorageConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _archive(tmp_path, 6 * MiB)
    _upload(path, bucket, config)
    wrong = "wRoNg-" + secrets.token_hex(12) + "-secret"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", wrong)
    calls: list[Callable[[], object]] = [
        lambda: _upload(path, bucket, config, tag="b"),
        lambda: list(storage.list_bundles(S3Location(bucket, "archive"), config=config)),
        lambda: storage.download_bundle(
            S3Location(bucket, _key("a")), tmp_path / "d", config=config
        ),
        lambda: storage.S3StoreSource(S3Location(bucket, ""), config=config).read_bytes(
            _key("a"), max_size=10
        ),
    ]
    for call in calls:
        with pytest.raises(StorageError, match="credentials rejected") as info:
            call()
        _assert_clean(info.value)
        assert wrong not in "".join(traceback.format_exception(info.value))
    assert not (tmp_path / "d").exists()


@pytest.mark.s3
def test_missing_bucket(tmp_path: Path, raw: Any, config: StorageConfig) -> None:
    path = _archive(tmp_path, 100)
    calls: list[Callable[[], object]] = [
        lambda: _upload(path, "no-such-bucket-here", config),
        lambda: list(storage.list_bundles(S3Location("no-such-bucket-here", ""), config=config)),
        lambda: storage.download_bundle(
            S3Location("no-such-bucket-here", "k"), tmp_path / "d", config=config
        ),
    ]
    for call in calls:
        with pytest.raises(StorageError, match="'no-such-bucket-here' does not exist") as info:
            call()
        _assert_clean(info.value)
    assert "no-such-bucket-here" not in [b["Name"] for b in raw.list_buckets()["Buckets"]]


@pytest.mark.s3
def test_download_of_absent_key(tmp_path: Path, bucket: str, config: StorageConfig) -> None:
    with pytest.raises(StorageError, match="no such object"):
        storage.download_bundle(S3Location(bucket, "absent"), tmp_path / "d", config=config)
    assert not (tmp_path / "d").exists()


# --------------------------------------------------------------------------- store source


@pytest.mark.s3
def test_s3_store_source(raw: Any, bucket: str, config: StorageConfig) -> None:
    body = b'{"report_id":"r1"}'
    cases = b"".join(b'{"case_id":"c%d"}\n' % i for i in range(50_000))
    raw.put_object(Bucket=bucket, Key="stores/main/reports/r1/body.json", Body=body)
    raw.put_object(Bucket=bucket, Key="stores/main/reports/r1/cases/c.jsonl", Body=cases)
    source = storage.S3StoreSource.from_url(f"s3://{bucket}/stores/main/", config=config)
    assert (
        source.describe("reports/r1/body.json") == f"s3://{bucket}/stores/main/reports/r1/body.json"
    )
    assert source.read_bytes("reports/r1/body.json", max_size=1000) == body
    assert source.read_bytes("reports/r1/envelope.json", max_size=1000) is None
    with pytest.raises(StoreError, match="larger than 10 bytes"):
        source.read_bytes("reports/r1/body.json", max_size=10)
    opened = source.open_stream("reports/r1/cases/c.jsonl")
    assert opened is not None
    stream, size = opened
    with stream:
        assert size == len(cases)
        assert stream.readline() == b'{"case_id":"c0"}\n'
        assert stream.read() == cases[len(b'{"case_id":"c0"}\n') :]
    assert source.open_stream("reports/r1/cases/absent.jsonl") is None
    unprefixed = storage.S3StoreSource(S3Location(bucket, ""), config=config)
    assert unprefixed.read_bytes("stores/main/reports/r1/body.json", max_size=100) == body


@pytest.mark.s3
def test_store_source_stream_closed_early(raw: Any, bucket: str, config: StorageConfig) -> None:
    raw.put_object(Bucket=bucket, Key="big", Body=b"x" * (3 * MiB))
    source = storage.S3StoreSource(S3Location(bucket, ""), config=config)
    opened = source.open_stream("big")
    assert opened is not None
    with contextlib.closing(opened[0]) as stream:
        assert stream.read(10) == b"x" * 10
    assert stream.closed
    assert source.read_bytes("big", max_size=3 * MiB) == b"x" * (3 * MiB)
