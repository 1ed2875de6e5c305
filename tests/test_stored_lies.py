"""Stored objects are judged by their bytes (SPEC 6, 11.3), against a real SeaweedFS.

Every command that reads a stored bundle (verify, inspect, download, sign, prove, audit,
extract) x every way an object or its neighbours can lie:

- ``wrong-report``: an intact archive stored under another report's directory;
- ``wrong-digest``: an intact archive stored under another bundle's digest;
- ``altered``: another archive's bytes under a key whose metadata records this one's;
- ``no-metadata``: an intact archive copied in without ``sha256`` metadata (as
  ``aws s3 cp`` leaves it): verified from its bytes, one claim unprovable;
- ``crowded``: an intact, validly signed archive beside an oversized sidecar, 65 small
  ones and an altered one: none blocks the bundle.

The lying objects are made once per module with a plain boto3 client; every command runs
as a subprocess of the installed console script. Nothing a lie reaches is written: no
file, no extracted bag, no proof, no signature object.
"""

from __future__ import annotations

import hashlib
import secrets
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from conftest import CLI, EXPORTED_AT, raw_client, run_cli
from s3_server import Server
from test_cli_voice import json_lines

REPO = Path(__file__).resolve().parent.parent
STORE = REPO / "fixtures" / "stores" / "main"
STAMP = EXPORTED_AT.strftime("%Y-%m-%dT%H:%M:%SZ")
SSH_KEYGEN = "/usr/bin/ssh-keygen"
CASE = "accuracy-00003"

pytestmark = pytest.mark.s3


def _keygen(path: Path) -> Path:
    done = subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)],
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    return path


@dataclass(frozen=True)
class Lies:
    bucket: str
    endpoint: list[str]
    alice: Path
    allowed: Path
    clean_key: str  # the honest object, signed at export by alice
    urls: dict[str, str]  # lie name -> s3:// URL of the lying object


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# Spellings of the sha256 metadata that are not a digest, from the recorded one.
MALFORMED_SHA256: dict[str, Callable[[str], str]] = {
    "garbage": lambda d: "garbage",
    "uppercase hex": lambda d: "sha256:" + d[7:].upper(),
    "another algorithm": lambda d: "sha512:" + d[7:],
    "no prefix": lambda d: d[7:],
    "63 hex digits": lambda d: d[:-1],
    "65 hex digits": lambda d: d + "0",
}
UNRECORDED = ["no-metadata", *(f"sha256 {n}" for n in sorted(MALFORMED_SHA256))]


@pytest.fixture(scope="module")
def lies(s3_server: Server, tmp_path_factory: pytest.TempPathFactory) -> Lies:
    root = tmp_path_factory.mktemp("lies")
    raw = raw_client(s3_server.endpoint)
    bucket = f"lies-{secrets.token_hex(4)}"
    raw.create_bucket(Bucket=bucket)
    endpoint = ["--endpoint-url", s3_server.endpoint]
    alice = _keygen(root / "alice")
    allowed = root / "allowed_signers"
    pub = " ".join(Path(f"{alice}.pub").read_text().split()[:2])
    allowed.write_text(f"alice@example.org {pub}\n", encoding="utf-8")
    clean, other = root / "clean.tar.zst", root / "other.tar.zst"
    for out, report, extra in (
        (clean, "rpt-clean", ["--key", str(alice)]),
        (other, "rpt-every-reason", []),
    ):
        done = run_cli(
            "export", "--store", str(STORE), "--report", report, "--principal", "alice",
            "--exported-at", STAMP, "--out", str(out), *extra,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()
    infos = {}
    for name, path in (("clean", clean), ("other", other)):
        done = run_cli("upload", str(path), f"s3://{bucket}/honest", *endpoint, "--json")
        assert done.returncode == 0, done.stderr.decode()
        infos[name] = orjson.loads(done.stdout)
    c, o = infos["clean"], infos["other"]
    clean_bytes, other_bytes = clean.read_bytes(), other.read_bytes()
    meta = raw.head_object(Bucket=bucket, Key=c["key"])["Metadata"]
    clean_hex, other_hex = c["bundle_digest"][7:], o["bundle_digest"][7:]

    def put(key: str, body: bytes, metadata: dict[str, str] | None) -> str:
        raw.put_object(Bucket=bucket, Key=key, Body=body, Metadata=metadata or {})
        return f"s3://{bucket}/{key}"

    urls = {
        "wrong-report": put(
            f"l1/reports/bundles/{o['report_id']}/{clean_hex}.tar.zst", clean_bytes, meta
        ),
        "wrong-digest": put(f"l2/reports/bundles/rpt-clean/{other_hex}.tar.zst", clean_bytes, meta),
        "altered": put(f"l3/reports/bundles/rpt-clean/{clean_hex}.tar.zst", other_bytes, meta),
        "no-metadata": put(f"l4/reports/bundles/rpt-clean/{clean_hex}.tar.zst", clean_bytes, None),
    }
    # A sha256 value that is not a digest records nothing (SPEC 2): each spelling is
    # judged as the object with no metadata is, never as one whose claim holds.
    for n, (name, value) in enumerate(sorted(MALFORMED_SHA256.items())):
        spelled = value(c["sha256"])
        urls[f"sha256 {name}"] = put(
            f"m{n}/reports/bundles/rpt-clean/{clean_hex}.tar.zst",
            clean_bytes,
            {**meta, "sha256": spelled},
        )
    crowded_key = f"l5/reports/bundles/rpt-clean/{clean_hex}.tar.zst"
    urls["crowded"] = put(crowded_key, clean_bytes, meta)
    big = b"x" * (2 * 1024 * 1024)  # the attack: megabytes under a sidecar name
    put(f"{crowded_key}.sig.{hashlib.sha256(big).hexdigest()}", big, None)
    for n in range(65):
        junk = f"junk {n}\n".encode()
        put(f"{crowded_key}.sig.{hashlib.sha256(junk).hexdigest()}", junk, None)
    put(f"{crowded_key}.sig", b"not what was recorded", {"sha256": _sha(b"something else")})
    return Lies(bucket, endpoint, alice, allowed, c["key"], urls)


def _run(lies: Lies, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, *args, *lies.endpoint], capture_output=True, timeout=120)


# Each command that reads a stored bundle, as (arguments, what it would write).
Command = Callable[[Lies, str, Path], tuple[list[str], Path | None]]
COMMANDS: dict[str, Command] = {
    "verify": lambda lies, url, tmp: (["verify", url, "--json"], None),
    "verify-anchored": lambda lies, url, tmp: (
        ["verify", url, "--allowed-signers", str(lies.allowed), "--json"],
        None,
    ),
    "inspect": lambda lies, url, tmp: (["inspect", url, "--json"], None),
    "download": lambda lies, url, tmp: (
        ["download", url, str(tmp / "got.tar.zst"), "--json"],
        tmp / "got.tar.zst",
    ),
    "sign": lambda lies, url, tmp: (["sign", url, "--key", str(_bob(tmp)), "--json"], None),
    "prove": lambda lies, url, tmp: (
        ["prove", url, "--case", CASE, "--out", str(tmp / "p.json"), "--json"],
        tmp / "p.json",
    ),
    "audit": lambda lies, url, tmp: (["audit", url, "--json"], None),
    "extract": lambda lies, url, tmp: (["extract", url, str(tmp / "bag"), "--json"], tmp / "bag"),
}


def _bob(tmp: Path) -> Path:
    key = tmp / "bob"
    return key if key.exists() else _keygen(key)


def _signature_objects(lies: Lies, url: str) -> list[str]:
    key = url.removeprefix(f"s3://{lies.bucket}/")
    raw = raw_client(lies.endpoint[1])
    listed = raw.list_objects_v2(Bucket=lies.bucket, Prefix=key + ".sig")
    return sorted(o["Key"] for o in listed.get("Contents", []))


@pytest.mark.parametrize("lie", ["wrong-report", "wrong-digest", "altered"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_lying_object_fails_every_command_and_nothing_is_written(
    lie: str, command: str, lies: Lies, tmp_path: Path
) -> None:
    url = lies.urls[lie]
    args, output = COMMANDS[command](lies, url, tmp_path)
    before = _signature_objects(lies, url)
    done = _run(lies, *args)
    assert done.returncode == 1, (lie, command, done.returncode, done.stderr.decode())
    assert "Traceback" not in done.stderr.decode()
    json_lines(done)  # whatever it printed validates
    text = (done.stdout + done.stderr).decode()
    assert "altered at rest" in text, text[-2000:]
    assert output is None or not output.exists() or not any(output.iterdir())
    assert _signature_objects(lies, url) == before


@pytest.mark.parametrize("lie", UNRECORDED)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_object_without_metadata_is_judged_by_its_bytes(
    command: str, lie: str, lies: Lies, tmp_path: Path
) -> None:
    url = lies.urls[lie]
    args, output = COMMANDS[command](lies, url, tmp_path)
    done = _run(lies, *args)
    assert done.returncode == 0, (command, done.stderr.decode())
    [line] = json_lines(done)
    if command.startswith("verify"):
        [claim] = [
            c
            for c in line["claims"]
            if c["state"] == "unprovable" and c["reason"] == "no_recorded_sha256"
        ]
        assert url in claim["detail"]
        if lie != "no-metadata":
            assert "malformed sha256 metadata" in claim["detail"], claim
        keyed = [
            c for c in line["claims"] if c["subject"] == "storage key names the bundle it holds"
        ]
        assert [c["state"] for c in keyed] == ["proven"]
        if command == "verify":
            strict = _run(lies, "verify", url, "--strict")
            assert strict.returncode == 1  # the unprovable claim fails under --strict
    if output is not None:
        assert output.exists()


@pytest.mark.parametrize("command", ["verify-anchored", "download", "prove", "audit", "extract"])
def test_no_neighbour_blocks_a_validly_signed_bundle(
    command: str, lies: Lies, tmp_path: Path
) -> None:
    url = lies.urls["crowded"]
    args, output = COMMANDS[command](lies, url, tmp_path)
    done = _run(lies, *args)
    assert done.returncode == 0, (command, done.stderr.decode())
    [line] = json_lines(done)
    if command == "verify-anchored":
        states = [s["state"] for s in line["signatures"]]
        assert states[0] == "verified" and line["signatures"][0]["embedded"] is True
        assert len(states) == 1 + 64 + 1  # embedded, 64 read, one entry for the rest
        assert all(s == "invalid" for s in states[1:])
        reasons = [s["reason"] for s in line["signatures"][1:]]
        assert "altered at rest" in reasons[0]  # <key>.sig, first
        assert "more than 64" in reasons[-1]
    if command == "download":
        skipped = [s["reason"] for s in line["skipped_signatures"]]
        assert "altered at rest" in skipped[0] and "more than 64" in skipped[-1]
    if output is not None:
        assert output.exists()


def test_fixity_with_allowed_signers_passes_a_crowded_bundle(lies: Lies, tmp_path: Path) -> None:
    prefix = lies.urls["crowded"].split("/reports/bundles/")[0]
    done = _run(
        lies, "fixity", prefix, "--level", "full", "--allowed-signers", str(lies.allowed),
        "--ledger", str(tmp_path / "ledger.sqlite"), "--json", "-q",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()


@pytest.mark.parametrize("lie", UNRECORDED)
def test_fixity_verifies_an_unrecorded_object_from_its_bytes(
    lie: str, lies: Lies, tmp_path: Path
) -> None:
    """Fixity, like every reader (SPEC 6), reads such an object and verifies it: a pass,
    saying what cannot be proven, never "altered at rest" unread."""
    prefix = lies.urls[lie].split("/reports/bundles/")[0]
    ledger = str(tmp_path / "ledger.sqlite")
    for n, level in enumerate(("full", "object", "full")):
        record = tmp_path / f"run{n}.jsonl"
        done = _run(
            lies, "fixity", prefix, "--level", level, "--ledger", ledger,
            "--record", str(record), "--json", "-q",
        )  # fmt: skip
        assert done.returncode == 0, (lie, level, done.stdout.decode(), done.stderr.decode())
        lines = [orjson.loads(x) for x in record.read_bytes().splitlines()]
        checks = [x for x in lines if x.get("schema") == "evalbook.fixity_check.v1"]
        assert [c["outcome"] for c in checks] == ["pass"], checks
        assert checks[0]["bytes_read"] > 0
        assert "no_recorded_sha256" in checks[0]["detail"], checks[0]
    anchored = _run(
        lies, "fixity", prefix, "--level", "full", "--allowed-signers", str(lies.allowed),
        "--ledger", str(tmp_path / "other.sqlite"), "--json", "-q",
    )  # fmt: skip
    assert anchored.returncode == 0, anchored.stdout.decode()


@pytest.mark.parametrize("url", ["s3://{bucket}/", "s3://{bucket}/l1/", "s3://{bucket}"])
@pytest.mark.parametrize("command", ["verify", "inspect", "sign", "prove", "audit", "extract"])
def test_a_url_without_a_key_is_a_usage_error(
    url: str, command: str, lies: Lies, tmp_path: Path
) -> None:
    target = url.format(bucket=lies.bucket)
    args, _ = COMMANDS[command](lies, target, tmp_path)
    done = _run(lies, *args)
    assert done.returncode == 2, (command, target, done.stderr.decode())
    assert target in done.stderr.decode() or repr(target) in done.stderr.decode()


def test_upload_is_not_fooled_by_metadata(lies: Lies, tmp_path: Path) -> None:
    # Another archive's bytes sit at the key with this archive's metadata: not "already
    # archived", but refused with exit 1 and left alone.
    raw = raw_client(lies.endpoint[1])
    honest = raw.get_object(Bucket=lies.bucket, Key=lies.clean_key)
    clean_bytes = honest["Body"].read()
    archive = tmp_path / "clean.tar.zst"
    archive.write_bytes(clean_bytes)
    key = "l6/" + lies.clean_key.removeprefix("honest/")
    liar = raw.get_object(Bucket=lies.bucket, Key=lies.urls["altered"].split("/", 3)[3])[
        "Body"
    ].read()
    raw.put_object(Bucket=lies.bucket, Key=key, Body=liar, Metadata=honest["Metadata"])
    done = _run(lies, "upload", str(archive), f"s3://{lies.bucket}/l6", "--json")
    assert done.returncode == 1, done.stderr.decode()
    assert b"already archived" not in done.stdout + done.stderr
    assert raw.get_object(Bucket=lies.bucket, Key=key)["Body"].read() == liar


def test_list_counts_the_embedded_signature(lies: Lies) -> None:
    done = _run(lies, "list", f"s3://{lies.bucket}/honest", "--json")
    assert done.returncode == 0, done.stderr.decode()
    rows = {r["report_id"]: r for r in json_lines(done)}
    clean, other = rows["rpt-clean"], rows["rpt-every-reason"]
    assert (clean["signed"], clean["signatures"], clean["embedded_signature"]) == (True, 1, True)
    assert (other["signed"], other["signatures"], other["embedded_signature"]) == (False, 0, False)
    human = _run(lies, "list", f"s3://{lies.bucket}/honest")
    assert b"signed(1)" in human.stdout and b"unsigned" in human.stdout


def test_an_object_named_like_a_report_directory_is_one_report(lies: Lies) -> None:
    from bundler.storage import S3StoreSource, StorageConfig

    raw = raw_client(lies.endpoint[1])
    for key in ("store/reports/rpt-clean", "store/reports/rpt-clean/body.json"):
        raw.put_object(Bucket=lies.bucket, Key=key, Body=b"{}")
    source = S3StoreSource.from_url(
        f"s3://{lies.bucket}/store", config=StorageConfig(endpoint_url=lies.endpoint[1])
    )
    assert source.list_names("reports", limit=10) == ["rpt-clean"]


@pytest.mark.parametrize(
    "where", ["s3://{bucket}/", "s3://{bucket}", "s3://{bucket}/sigs/", "s3://{bucket}/l1/"]
)
@pytest.mark.parametrize("command", ["verify", "audit"])
def test_a_signature_url_without_a_key_is_a_usage_error(
    where: str, command: str, lies: Lies, tmp_path: Path
) -> None:
    """``--signature`` names one object (SPEC 6): a bucket or prefix is exit 2 naming it,
    before any request, never a service error and never the "directory" object read."""
    raw = raw_client(lies.endpoint[1])
    raw.put_object(Bucket=lies.bucket, Key="sigs/", Body=b"")
    target = where.format(bucket=lies.bucket)
    url = f"s3://{lies.bucket}/{lies.clean_key}"
    done = _run(lies, command, url, "--allowed-signers", str(lies.allowed), "--signature", target)
    err = done.stderr.decode()
    assert done.returncode == 2, (command, target, done.returncode, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert repr(target) in err or target in err


@pytest.mark.parametrize("size", [64 * 1024 + 1, 200_000])
@pytest.mark.parametrize("place", ["local", "stored"])
@pytest.mark.parametrize("command", ["verify", "audit"])
def test_an_oversized_signature_named_is_an_input_error_everywhere(
    size: int, place: str, command: str, lies: Lies, tmp_path: Path
) -> None:
    """The same input, the same exit code (SPEC 8): a --signature over the 64 KiB a
    signature may hold is unreadable input (exit 3), in a file as in a bucket."""
    data = b"x" * size
    if place == "local":
        target = tmp_path / "big.sig"
        target.write_bytes(data)
        where = str(target)
    else:
        raw = raw_client(lies.endpoint[1])
        key = f"sigs/big-{size}.sig"
        raw.put_object(Bucket=lies.bucket, Key=key, Body=data)
        where = f"s3://{lies.bucket}/{key}"
    url = f"s3://{lies.bucket}/{lies.clean_key}"
    done = _run(lies, command, url, "--allowed-signers", str(lies.allowed), "--signature", where)
    err = done.stderr.decode()
    assert done.returncode == 3, (command, place, done.returncode, err, done.stdout.decode())
    assert "Traceback" not in err
    assert where in err and str(64 * 1024) in err, err


def test_upload_names_every_local_sidecar_it_does_not_store(lies: Lies, tmp_path: Path) -> None:
    """A sidecar is never silently skipped (SPEC 11.3): upload stores the signatures over
    this head and names each other one, with why, on stderr and in --json."""
    from bundler.trust import sshsig

    raw = raw_client(lies.endpoint[1])
    archive = tmp_path / "u.tar.zst"
    archive.write_bytes(raw.get_object(Bucket=lies.bucket, Key=lies.clean_key)["Body"].read())
    bob = _bob(tmp_path)
    done = run_cli("sign", str(archive), "--key", str(bob))
    assert done.returncode == 0, done.stderr.decode()
    first = tmp_path / "u.tar.zst.sig"
    real = first.read_bytes()
    first.unlink()
    key = sshsig.load_private_key(lies.alice, passphrase=None)
    other_head = sshsig.sign(b'{"another":"head"}', key).encode()
    junk = b"junk\n"
    bad = {
        "u.tar.zst.sig": other_head,  # a valid signature over another head
        f"u.tar.zst.sig.{hashlib.sha256(junk).hexdigest()}": junk,
        f"u.tar.zst.sig.{'1' * 64}": b"name and bytes disagree",
        f"u.tar.zst.sig.{hashlib.sha256(junk).hexdigest().upper()}": junk,
        "u.tar.zst.sig.bak": junk,
    }
    for name, data in bad.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / f"u.tar.zst.sig.{hashlib.sha256(real).hexdigest()}").write_bytes(real)
    done = _run(lies, "upload", str(archive), f"s3://{lies.bucket}/up", "--json")
    assert done.returncode == 0, done.stderr.decode()
    [line] = json_lines(done)
    skipped = {Path(s["url"]).name: s["reason"] for s in line["skipped_signatures"]}
    assert set(skipped) == set(bad), skipped
    err = done.stderr.decode()
    for name in bad:
        assert name in err, err
    assert len(line["signatures"]) == 1  # bob's, the one over this head
