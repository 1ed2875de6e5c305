"""Stored bundles through the installed CLI against the real SeaweedFS server: several
signatures per stored bundle, archives altered at rest, several bundles in one verify,
and `aws s3 cp`-style paths (SPEC sections 5, 6, 8 and 11.3)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard
from conftest import run_cli
from s3_server import Server

SSH_KEYGEN = "/usr/bin/ssh-keygen"


@pytest.fixture
def endpoint(s3_server: Server) -> list[str]:
    return ["--endpoint-url", s3_server.endpoint]


def _key(path: Path) -> Path:
    done = subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)],
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    return path


def _allowed(path: Path, **keys: Path) -> Path:
    lines = []
    for principal, key in keys.items():
        key_type, blob = Path(f"{key}.pub").read_text().split()[:2]
        lines.append(f'{principal} namespaces="evalbook-bundle-head-v1" {key_type} {blob}\n')
    path.write_text("".join(lines))
    return path


def _fingerprint(key: Path) -> str:
    done = subprocess.run(
        [SSH_KEYGEN, "-lf", f"{key}.pub"], capture_output=True, check=True, timeout=60
    )
    return done.stdout.decode().split()[1]


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _upload(archive: Path, url: str, endpoint: list[str]) -> dict[str, Any]:
    done = run_cli("upload", str(archive), url, *endpoint, "--json")
    assert done.returncode == 0, done.stderr.decode()
    info: dict[str, Any] = orjson.loads(done.stdout)
    return info


def _tampered(archive: Path, dest: Path) -> Path:
    """A readable archive whose report body no longer matches its digest."""
    data = bytearray(zstandard.ZstdDecompressor().stream_reader(archive.read_bytes()).read())
    index = data.index(b'"score":1,"status":"pass"')
    data[index + 8] = ord("0")
    dest.write_bytes(zstandard.ZstdCompressor(write_checksum=True).compress(bytes(data)))
    return dest


# --------------------------------------------------------------------------- signatures


def test_two_signers_on_one_stored_bundle(
    bundles: dict[str, Path], bucket: str, endpoint: list[str], tmp_path: Path, raw: Any
) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    exporter, auditor, stranger = (_key(keys / n) for n in ("exporter", "auditor", "stranger"))
    local = tmp_path / "b.tar.zst"
    shutil.copyfile(bundles["rpt-clean/alice"], local)
    done = run_cli("sign", str(local), "--key", str(exporter))
    assert done.returncode == 0, done.stderr.decode()
    info = _upload(local, f"s3://{bucket}/arch", endpoint)
    url = f"s3://{bucket}/{info['key']}"
    assert [s["key"] for s in info["signatures"]] == [info["key"] + ".sig"]

    # The auditor verifies the stored bundle and countersigns it; so does a stranger.
    counter = []
    for key in (auditor, stranger):
        done = run_cli("sign", url, "--key", str(key), *endpoint, "--json")
        assert done.returncode == 0, done.stderr.decode()
        stored = orjson.loads(done.stdout)["signature"]
        assert stored.startswith(url + ".sig.") and stored != url + ".sig"
        counter.append(stored)
    again = run_cli("sign", url, "--key", str(auditor), *endpoint)
    assert again.returncode == 0
    assert again.stdout.decode().splitlines()[-1] == (
        f"Signature:   {counter[0]} (already signed by this key: nothing written)"
    )
    stored_keys = sorted(
        o["Key"] for o in raw.list_objects_v2(Bucket=bucket)["Contents"] if ".sig" in o["Key"]
    )
    assert stored_keys == sorted(
        [info["key"] + ".sig"] + [c[len(f"s3://{bucket}/") :] for c in counter]
    )
    # The exporter's signature is untouched.
    assert (
        raw.get_object(Bucket=bucket, Key=info["key"] + ".sig")["Body"].read()
        == Path(f"{local}.sig").read_bytes()
    )

    listed = run_cli("list", f"s3://{bucket}/arch", *endpoint, "--json")
    assert listed.returncode == 0, listed.stderr.decode()
    row = orjson.loads(listed.stdout)
    assert row["signed"] is True and row["signatures"] == 3
    human = run_cli("list", f"s3://{bucket}/arch", *endpoint)
    assert b"signed(3)" in human.stdout

    # Both allowed signers verify; the stranger's is listed as not verified, and passes.
    allowed = _allowed(tmp_path / "allowed", exporter=exporter, auditor=auditor)
    verified = run_cli("verify", url, *endpoint, "--allowed-signers", str(allowed), "--json")
    assert verified.returncode == 0, verified.stderr.decode()
    result = orjson.loads(verified.stdout)
    assert result["verdict"] == "verified"
    assert _fingerprint(exporter) in result["anchor"]["signer"]
    assert _fingerprint(auditor) in result["anchor"]["signer"]
    (claim,) = [c for c in result["claims"] if c["subject"] == "signature"]
    assert claim["state"] == "proven" and claim["detail"] is None
    listed_sigs = {s["where"]: s for s in result["signatures"]}
    assert listed_sigs[f"{url}.sig"]["state"] == "verified"
    assert listed_sigs[f"{url}.sig"]["identity"] == "exporter"
    assert listed_sigs[f"{url}.sig"]["key"] == _fingerprint(exporter)
    assert listed_sigs[counter[0]]["state"] == "verified"
    assert listed_sigs[counter[1]]["state"] == "not_allowed"
    assert listed_sigs[counter[1]]["reason"] == (
        f"signing key {_fingerprint(stranger)} is not in the allowed signers"
    )
    # With --json stdout holds the record and stderr no summary (SPEC 7): the summary
    # of the same check, without --json, lists each signature.
    assert verified.stderr == b""
    human = run_cli("verify", url, *endpoint, "--allowed-signers", str(allowed))
    assert human.returncode == 0, human.stderr.decode()
    text = human.stdout.decode()
    assert "Signatures:  3 (1 not allowed, 2 verified)" in text
    assert f"  - {counter[1]} (sidecar): not allowed: signing key {_fingerprint(stranger)}" in text

    # One allowed signer is enough: only the auditor's key.
    only_auditor = _allowed(tmp_path / "auditor-only", auditor=auditor)
    done = run_cli("verify", url, *endpoint, "--allowed-signers", str(only_auditor))
    assert done.returncode == 0, done.stderr.decode()
    assert "Signatures:  3 (2 not allowed, 1 verified)" in done.stdout.decode()

    # No allowed signer among them: fails, listing every signature.
    nobody = _allowed(tmp_path / "nobody", someone=_key(keys / "someone"))
    done = run_cli("verify", url, *endpoint, "--allowed-signers", str(nobody), "--json")
    assert done.returncode == 1, done.stderr.decode()
    (claim,) = [c for c in orjson.loads(done.stdout)["claims"] if c["subject"] == "signature"]
    assert claim["state"] == "failed"
    assert claim["detail"].startswith("none of 3 signature(s) verifies by an allowed signer")

    # --signature s3://... names one signature in addition to those stored beside it
    # (SPEC 11.3: every signature present is checked); one of them already, so listed once.
    done = run_cli(
        "verify", url, *endpoint, "--allowed-signers", str(only_auditor), "--signature", counter[0]
    )
    assert done.returncode == 0, done.stderr.decode()
    line = next(x for x in done.stdout.decode().splitlines() if x.startswith("Signatures:"))
    assert line.startswith("Signatures:  3 (") and "1 verified" in line, line
    done = run_cli(
        "verify",
        url,
        *endpoint,
        "--allowed-signers",
        str(only_auditor),
        "--signature",
        url + ".sig",
    )
    # Naming a signature by a signer not allowed takes nothing away: the auditor's
    # countersignature beside it is still checked and anchors the bundle.
    assert done.returncode == 0, done.stderr.decode()

    # A download brings every signature along, and verifies locally the same way.
    out = tmp_path / "out"
    out.mkdir()  # a dir/ must exist, as for every output option (SPEC 7)
    done = run_cli("download", url, f"{out}/", *endpoint)
    assert done.returncode == 0, done.stderr.decode()
    name = info["key"].rsplit("/", 1)[1]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [name, name + ".sig"] + [c.rsplit("/", 1)[1] for c in counter]
    )
    done = run_cli("verify", str(out / name), "--allowed-signers", str(allowed))
    assert done.returncode == 0, done.stderr.decode()
    assert "Signatures:  3 (1 not allowed, 2 verified)" in done.stdout.decode()

    # The countersignature is a plain SSHSIG file: ssh-keygen checks it as README says.
    bag = tmp_path / "bag"
    done = run_cli("extract", str(out / name), str(bag))
    assert done.returncode == 0, done.stderr.decode()
    (head,) = bag.rglob("bundle-head.json")
    countersignature = out / counter[0].rsplit("/", 1)[1]
    checked = subprocess.run(
        [
            SSH_KEYGEN,
            "-Y",
            "verify",
            "-f",
            str(allowed),
            "-I",
            "auditor",
            "-n",
            "evalbook-bundle-head-v1",
            "-s",
            str(countersignature),
        ],
        input=head.read_bytes(),
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stderr.decode()


def test_upload_of_a_local_countersignature_adds_it(
    bundles: dict[str, Path], bucket: str, endpoint: list[str], tmp_path: Path, raw: Any
) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    exporter, auditor = _key(keys / "exporter"), _key(keys / "auditor")
    first = tmp_path / "first" / "b.tar.zst"
    second = tmp_path / "second" / "b.tar.zst"
    for copy, key in ((first, exporter), (second, auditor)):
        copy.parent.mkdir()
        shutil.copyfile(bundles["rpt-superseded/alice"], copy)
        assert run_cli("sign", str(copy), "--key", str(key)).returncode == 0
    info = _upload(first, f"s3://{bucket}/a", endpoint)
    # The auditor's copy carries its own b.tar.zst.sig: uploading it adds, never replaces.
    again = _upload(second, f"s3://{bucket}/a", endpoint)
    assert again["status"] == "already_archived"
    (sig,) = again["signatures"]
    assert sig["status"] == "uploaded" and sig["key"].startswith(info["key"] + ".sig.")
    assert (
        raw.get_object(Bucket=bucket, Key=info["key"] + ".sig")["Body"].read()
        == Path(f"{first}.sig").read_bytes()
    )
    allowed = _allowed(tmp_path / "allowed", auditor=auditor)
    url = f"s3://{bucket}/{info['key']}"
    done = run_cli("verify", url, *endpoint, "--allowed-signers", str(allowed))
    assert done.returncode == 0, done.stderr.decode()


# --------------------------------------------------------------------------- altered at rest


def test_rot_in_place_is_a_failed_verification(
    bundles: dict[str, Path], bucket: str, endpoint: list[str], tmp_path: Path, raw: Any
) -> None:
    archive = bundles["rpt-clean/alice"]
    info = _upload(archive, f"s3://{bucket}/rot", endpoint)
    key, url = info["key"], f"s3://{bucket}/{info['key']}"
    head = raw.head_object(Bucket=bucket, Key=key)
    rotten = bytearray(archive.read_bytes())
    rotten[len(rotten) // 2] ^= 0x10
    # Same length, same metadata: only the bytes changed.
    raw.put_object(Bucket=bucket, Key=key, Body=bytes(rotten), Metadata=head["Metadata"])
    recorded, observed = _sha(archive.read_bytes()), _sha(bytes(rotten))

    done = run_cli("verify", url, *endpoint, "--json")
    assert done.returncode == 1, done.stderr.decode()
    result = orjson.loads(done.stdout)
    assert result["verdict"] == "failed"
    (claim,) = result["claims"]
    assert (claim["state"], claim["expected"], claim["observed"]) == ("failed", recorded, observed)
    human = run_cli("verify", url, *endpoint)  # the summary, on stdout without --json
    assert human.returncode == 1, human.stderr.decode()
    for text in (claim["detail"], human.stdout.decode()):
        assert key in text and recorded in text and observed in text

    target = tmp_path / "x.tar.zst"
    got = run_cli("download", url, str(target), *endpoint)
    assert got.returncode == 1, got.stderr.decode()
    message = got.stderr.decode()
    assert key in message and recorded in message and observed in message
    assert not target.exists()
    streamed = run_cli("download", url, "-", *endpoint)
    assert streamed.returncode == 1 and streamed.stdout == bytes(rotten)
    for command in (["inspect", url], ["prove", url, "--case", "c-1"]):
        done = run_cli(*command, *endpoint)
        assert done.returncode == 1, (command, done.stderr.decode())
        assert observed in done.stderr.decode()


def test_key_that_does_not_name_the_bundle_fails(
    bundles: dict[str, Path], bucket: str, endpoint: list[str], raw: Any
) -> None:
    info = _upload(bundles["rpt-clean/alice"], f"s3://{bucket}/k", endpoint)
    other = _upload(bundles["rpt-retention/alice"], f"s3://{bucket}/k", endpoint)
    # The other bundle's archive, with its own metadata, copied under the first one's key.
    raw.delete_object(Bucket=bucket, Key=info["key"])
    raw.copy_object(
        Bucket=bucket, Key=info["key"], CopySource={"Bucket": bucket, "Key": other["key"]}
    )
    done = run_cli("verify", f"s3://{bucket}/{info['key']}", *endpoint, "--json")
    assert done.returncode == 1, done.stderr.decode()
    failed = [c for c in orjson.loads(done.stdout)["claims"] if c["state"] == "failed"]
    assert [c["subject"] for c in failed] == ["storage key names the bundle it holds"]
    assert info["bundle_digest"] in failed[0]["detail"]
    assert other["bundle_digest"] in failed[0]["detail"]


# --------------------------------------------------------------------------- several bundles


def test_several_bundles_each_reported(
    bundles: dict[str, Path], bucket: str, endpoint: list[str], tmp_path: Path
) -> None:
    info = _upload(bundles["rpt-clean/alice"], f"s3://{bucket}/many", endpoint)
    good = f"s3://{bucket}/{info['key']}"
    tampered = str(_tampered(bundles["rpt-clean/alice"], tmp_path / "tampered.tar.zst"))
    unreadable = tmp_path / "unreadable.tar.zst"
    unreadable.write_bytes(b"\x28\xb5\x2f\xfd not really")
    gone = f"s3://no-such-bucket-{bucket}/reports/x.tar.zst"
    order = [good, tampered, str(unreadable), gone]

    done = run_cli("verify", *order, *endpoint, "--json")
    assert done.returncode == 1, done.stderr.decode()
    rows = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert [r["source"] for r in rows] == order
    assert [r["verdict"] for r in rows] == ["verified", "failed", "error", "error"]
    assert "does not exist" in rows[3]["error"]
    assert "Totals:" not in done.stderr.decode()  # --json: no human summary (SPEC 7)

    human = run_cli("verify", *order, *endpoint)
    assert human.returncode == 1
    assert (
        "Totals:      4 bundles: 1 verified, 1 failed, 1 could not be read, 1 storage failed"
        in human.stdout.decode()
    )
    lines = human.stdout.decode().splitlines()
    assert sum(1 for line in lines if line.startswith("Bundle:")) == 4
    assert lines[-1] == (
        "Totals:      4 bundles: 1 verified, 1 failed, 1 could not be read, "
        "1 storage failed (not checked)"
    )

    # Without the tampered one, the unreadable one decides; a storage failure among
    # several is a bundle that could not be checked (SPEC 5): 3 as well; alone, 5.
    done = run_cli("verify", good, str(unreadable), gone, *endpoint, "--json")
    assert done.returncode == 3, done.stderr.decode()
    assert len(done.stdout.splitlines()) == 3
    done = run_cli("verify", good, gone, *endpoint, "--json")
    assert done.returncode == 3, done.stderr.decode()
    assert len(done.stdout.splitlines()) == 2
    done = run_cli("verify", gone, *endpoint, "--json")
    assert done.returncode == 5, done.stderr.decode()
    assert len(done.stdout.splitlines()) == 1
    done = run_cli("verify", gone, tampered, *endpoint, "--json")
    assert done.returncode == 1, done.stderr.decode()


# --------------------------------------------------------------------------- paths


def test_download_paths_like_aws_s3_cp(
    bundles: dict[str, Path], bucket: str, endpoint: list[str], tmp_path: Path
) -> None:
    archive = bundles["rpt-clean/alice"]
    info = _upload(archive, f"s3://{bucket}/p", endpoint)
    url = f"s3://{bucket}/{info['key']}"
    name = info["key"].rsplit("/", 1)[1]

    streamed = run_cli("download", url, "-", *endpoint, cwd=tmp_path)
    assert streamed.returncode == 0, streamed.stderr.decode()
    assert streamed.stdout == archive.read_bytes()
    assert not (tmp_path / "-").exists()

    # A name ending in / that is no directory is refused, as --out and --html refuse
    # it (SPEC 7: alike); nothing is created.
    done = run_cli("download", url, "new/", *endpoint, cwd=tmp_path)
    assert done.returncode == 2, done.stderr.decode()
    assert "no such directory" in done.stderr.decode()
    assert not (tmp_path / "new").exists()

    existing = tmp_path / "existing"
    existing.mkdir()
    done = run_cli("download", url, str(existing), *endpoint)
    assert done.returncode == 0, done.stderr.decode()
    assert (existing / name).read_bytes() == archive.read_bytes()
    again = run_cli("download", url, str(existing), *endpoint)
    assert again.returncode == 3, again.stderr.decode()
    assert b"already exists" in again.stderr


@pytest.mark.parametrize(
    ("destination", "prefix"),
    [
        ("prefix/reports/bundles/rpt/x.tar.zst", "prefix"),
        ("prefix/reports/bundles/", "prefix"),
        ("reports/bundles/rpt-clean", ""),
        ("prefix/x.tar.zst", "prefix"),
    ],
)
def test_upload_refuses_a_key_for_a_prefix(
    bundles: dict[str, Path],
    bucket: str,
    endpoint: list[str],
    raw: Any,
    destination: str,
    prefix: str,
) -> None:
    done = run_cli(
        "upload", str(bundles["rpt-clean/alice"]), f"s3://{bucket}/{destination}", *endpoint
    )
    assert done.returncode == 2, done.stderr.decode()
    use = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
    assert f"use {use} " in done.stderr.decode()
    assert raw.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0


def test_prove_of_a_stored_bundle_carries_its_stored_signature(
    bundles: dict[str, Path], bucket: str, endpoint: list[str], tmp_path: Path
) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    exporter = _key(keys / "exporter")
    local = tmp_path / "b.tar.zst"
    shutil.copyfile(bundles["rpt-clean/alice"], local)
    assert run_cli("sign", str(local), "--key", str(exporter)).returncode == 0
    info = _upload(local, f"s3://{bucket}/proofs", endpoint)
    url = f"s3://{bucket}/{info['key']}"
    out = tmp_path / "proof.json"
    done = run_cli("prove", url, "--case", "accuracy-00003", "--out", str(out), *endpoint)
    assert done.returncode == 0, done.stderr.decode()
    proof = orjson.loads(out.read_bytes())
    assert proof["head_signature"] is not None
    assert proof["head_signature"] == Path(f"{local}.sig").read_text()
    allowed = _allowed(tmp_path / "allowed_signers", exporter=exporter)
    checked = run_cli("check-proof", str(out), "--allowed-signers", str(allowed))
    assert checked.returncode == 0, checked.stderr.decode()


def test_inspect_of_a_stored_bundle_names_its_signatures(
    bundles: dict[str, Path], bucket: str, endpoint: list[str], tmp_path: Path
) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    local = tmp_path / "b.tar.zst"
    shutil.copyfile(bundles["rpt-clean/alice"], local)
    assert run_cli("sign", str(local), "--key", str(_key(keys / "exporter"))).returncode == 0
    info = _upload(local, f"s3://{bucket}/inspected", endpoint)
    url = f"s3://{bucket}/{info['key']}"
    assert run_cli("sign", url, "--key", str(_key(keys / "auditor")), *endpoint).returncode == 0
    done = run_cli("inspect", url, "--json", *endpoint)
    assert done.returncode == 0, done.stderr.decode()
    names = orjson.loads(done.stdout)["signatures"]
    assert names[0] == url + ".sig" and len(names) == 2 and names[1].startswith(url + ".sig.")
    human = run_cli("inspect", url, *endpoint)
    assert b"Signed:      yes: 2 signatures beside it" in human.stdout


# ------------------------------------------- a countersignature's name held by junk


def test_junk_at_a_signers_sidecar_names_is_refused_alike_locally_and_in_storage(
    bundles: dict[str, Path], bucket: str, endpoint: list[str], tmp_path: Path, raw: Any
) -> None:
    """Ed25519 signatures are deterministic, so the name a key's signature of a head takes
    (<archive>.sig.<sha256 of it>) is known to anyone who saw it once; junk planted there
    (and at .sig) makes sign refuse with exit 3 and one message in both places, never
    exit 5 (the service answered) and never overwriting."""
    key = _key(tmp_path / "signer")
    learn = tmp_path / "learn.tar.zst"
    shutil.copyfile(bundles["rpt-clean/alice"], learn)
    assert run_cli("sign", str(learn), "--key", str(key)).returncode == 0
    hex_name = hashlib.sha256((tmp_path / "learn.tar.zst.sig").read_bytes()).hexdigest()

    local = tmp_path / "local" / "b.tar.zst"
    local.parent.mkdir()
    shutil.copyfile(bundles["rpt-clean/alice"], local)
    for suffix in (".sig", f".sig.{hex_name}"):
        Path(f"{local}{suffix}").write_bytes(b"junk\n")
    info = _upload(bundles["rpt-clean/alice"], f"s3://{bucket}/junk", endpoint)
    url = f"s3://{bucket}/{info['key']}"
    for suffix in (".sig", f".sig.{hex_name}"):
        raw.put_object(Bucket=bucket, Key=info["key"] + suffix, Body=b"junk\n")

    for target in (str(local), url):
        done = run_cli("sign", target, "--key", str(key), *endpoint)
        assert done.returncode == 3, done.stderr.decode()
        assert done.stderr.decode() == (
            f"evalbook-bundle: error: {target}.sig.{hex_name}: holds other bytes than this "
            "signature, at the name it takes; refusing to overwrite (if it is not a "
            "signature anyone keeps, remove or rename it and sign again)\n"
        )
        assert done.stdout == b""
    for suffix in (".sig", f".sig.{hex_name}"):
        assert Path(f"{local}{suffix}").read_bytes() == b"junk\n"
        body = raw.get_object(Bucket=bucket, Key=info["key"] + suffix)["Body"].read()
        assert body == b"junk\n"
