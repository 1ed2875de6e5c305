"""`make demo`: the main jobs on the bundled fixtures, each shown as the command an
operator would type, followed by what it printed.

Everything is written under out/demo/ (recreated each run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "out" / "demo"
STORE = REPO / "fixtures" / "stores" / "main"
EXPORTED_AT = "2026-11-30T00:00:00Z"
EB_EXPORTED_AT = "2026-11-30T03:00:00Z"  # after the recorded eval-banana run completed
IMPORT_EXPORTED_AT = "2030-01-01T00:00:00Z"  # after the recorded runner fixtures completed
BIN = Path(sys.executable).parent / "evalbook-bundle"


def banner(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m" if sys.stdout.isatty() else f"\n== {text}", flush=True)


def run(
    *args: str, expect: int = 0, env: dict[str, str] | None = None, show: bool = True
) -> subprocess.CompletedProcess[str]:
    shown = " ".join(a.replace(str(REPO) + "/", "") for a in ("evalbook-bundle", *args))
    print(f"$ {shown}", flush=True)
    proc = subprocess.run(
        [str(BIN), *args],
        capture_output=True,
        text=True,
        cwd=OUT,
        env={**os.environ, **(env or {})},
        check=False,
    )
    if show:
        for stream in (proc.stdout, proc.stderr):
            if stream:
                print("  " + stream.rstrip().replace("\n", "\n  "), flush=True)
    print(f"  (exit {proc.returncode})", flush=True)
    if proc.returncode != expect:
        sys.exit(f"demo: expected exit {expect}, got {proc.returncode}")
    return proc


def sh(*args: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
    print("$ " + " ".join(a.replace(str(OUT) + "/", "") for a in args), flush=True)
    proc = subprocess.run(list(args), capture_output=True, text=True, cwd=OUT, check=False)
    for stream in (proc.stdout, proc.stderr):
        if stream:
            print("  " + stream.rstrip().replace("\n", "\n  "), flush=True)
    if proc.returncode != expect:
        sys.exit(f"demo: expected exit {expect}, got {proc.returncode}")
    return proc


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    import orjson

    banner("The fixture store: one report per scenario")
    for body in sorted(STORE.glob("reports/*/body.json")):
        report = orjson.loads(body.read_bytes())
        envelope = orjson.loads((body.parent / "envelope.json").read_bytes())
        digest = run("digest", str(body), show=False).stdout.strip()
        print(
            f"  {report['report_id']:<24} {report['result']:<13} envelope {envelope['status']:<10} {digest}"
        )

    banner("Export every scenario as alice (all permissions)")
    for body in sorted(STORE.glob("reports/*/body.json")):
        report_id = body.parent.name
        run(
            "export",
            "--store",
            str(STORE),
            "--report",
            report_id,
            "--principal",
            "alice",
            "--exported-at",
            EXPORTED_AT,
            "--out",
            f"{report_id}.tar.zst",
            "--quiet",
        )

    banner(
        "Every unavailable and redacted reason: rpt-every-reason exported by bob (no dataset.read_body)"
    )
    run(
        "export",
        "--store",
        str(STORE),
        "--report",
        "rpt-every-reason",
        "--principal",
        "bob",
        "--exported-at",
        EXPORTED_AT,
        "--out",
        "rpt-every-reason-bob.tar.zst",
    )
    run(
        "export",
        "--store",
        str(STORE),
        "--report",
        "rpt-every-reason",
        "--principal",
        "alice",
        "--exported-at",
        EXPORTED_AT,
        "--out",
        "rpt-every-reason-strict.tar.zst",
        "--strict",
        expect=1,
    )
    run(
        "export",
        "--store",
        str(STORE),
        "--report",
        "rpt-clean",
        "--principal",
        "carol",
        "--exported-at",
        EXPORTED_AT,
        expect=4,
    )

    banner("Determinism: the same export twice gives the same bytes")
    run(
        "export",
        "--store",
        str(STORE),
        "--report",
        "rpt-clean",
        "--principal",
        "alice",
        "--exported-at",
        EXPORTED_AT,
        "--out",
        "again.tar.zst",
        "--quiet",
    )
    first = run("digest", "rpt-clean.tar.zst", show=False).stdout.strip()
    second = run("digest", "again.tar.zst", show=False).stdout.strip()
    print(f"  {first}\n  {second}\n  identical: {first == second}")

    banner("Inspect and verify offline")
    run("inspect", "rpt-every-reason-bob.tar.zst")
    for archive in sorted(OUT.glob("rpt-*.tar.zst")):
        run("verify", archive.name, "--quiet")
    bundle_digest = run("inspect", "rpt-clean.tar.zst", "--json", show=False)
    expected = orjson.loads(bundle_digest.stdout)["bundle_digest"]
    run("verify", "rpt-clean.tar.zst", "--expect-bundle-digest", expected)

    banner("A tampered bundle fails with a readable explanation")
    tamper(OUT / "rpt-clean.tar.zst", OUT / "tampered.tar.zst")
    run("verify", "tampered.tar.zst", expect=1)

    banner("The auditor's page: one self-contained HTML file per result (open it, print it)")
    run("verify", "rpt-clean.tar.zst", "--expect-bundle-digest", expected, "--html",
        "page-verified.html", show=False)
    run("verify", "tampered.tar.zst", "--output-dir", "tampered-result", "--html",
        "page-tampered.html", expect=1, show=False)
    run("render", "tampered-result/verification.json", "--html", "page-tampered-rendered.html")
    sh("cmp", "page-tampered.html", "page-tampered-rendered.html")
    print("  (render of the saved record gives the same bytes as verify --html)", flush=True)

    banner("Several bundles at once: each is checked; a tampered one is never hidden by an unreadable one")
    (OUT / "not-a-bundle.tar.zst").write_bytes(b"this is not an archive\n")
    print("  (not-a-bundle.tar.zst holds a line of text)")
    run("verify", "rpt-clean.tar.zst", "tampered.tar.zst", "not-a-bundle.tar.zst", expect=1)
    run("verify", "rpt-clean.tar.zst", "not-a-bundle.tar.zst", expect=3)

    banner("Extract safely (verifies while extracting)")
    run("extract", "rpt-clean.tar.zst", "rpt-clean-extracted", "--quiet")
    if shutil.which("bagit.py") or (Path(sys.executable).parent / "bagit.py").exists():
        bagit = shutil.which("bagit.py") or str(Path(sys.executable).parent / "bagit.py")
        sh(bagit, "--quiet", "--validate", "rpt-clean-extracted/evalbook-bundle-rpt-clean")
        print("  bagit.py --validate: exit 0 (valid)")

    banner("Sign the head with a throwaway key; check it with ssh-keygen and with verify")
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "demo-exporter", "-f", "demo-key")
    pub = (OUT / "demo-key.pub").read_text().strip()
    (OUT / "allowed_signers").write_text(
        f'exporter@example.org namespaces="evalbook-bundle-head-v1" {pub}\n'
    )
    os.chmod(OUT / "demo-key", 0o600)
    run("sign", "rpt-clean.tar.zst", "--key", "demo-key")
    run("extract", "rpt-clean.tar.zst", "signed-extract", "--quiet")
    head = "signed-extract/evalbook-bundle-rpt-clean/bundle-head.json"
    print(
        f"$ ssh-keygen -Y verify -f allowed_signers -I exporter@example.org -n evalbook-bundle-head-v1 -s rpt-clean.tar.zst.sig < {head}"
    )
    with open(OUT / head, "rb") as fh:
        proc = subprocess.run(
            [
                "ssh-keygen",
                "-Y",
                "verify",
                "-f",
                "allowed_signers",
                "-I",
                "exporter@example.org",
                "-n",
                "evalbook-bundle-head-v1",
                "-s",
                "rpt-clean.tar.zst.sig",
            ],
            stdin=fh,
            capture_output=True,
            text=True,
            cwd=OUT,
            check=True,
        )
    print("  " + (proc.stdout + proc.stderr).strip())
    run(
        "verify",
        "rpt-clean.tar.zst",
        "--allowed-signers",
        "allowed_signers",
        "--identity",
        "exporter@example.org",
    )

    banner("Prove one case without the bundle")
    run("prove", "rpt-clean.tar.zst", "--case", "accuracy-00003", "--out", "case-proof.json")
    run("check-proof", "case-proof.json", "--allowed-signers", "allowed_signers")

    for step in EXTRA_STEPS:
        step()
    banner("Done: everything above is in out/demo/")


def tamper(source: Path, target: Path) -> None:
    """Rewrite one case score in the tar stream without fixing any digest."""
    import zstandard

    data = zstandard.ZstdDecompressor().stream_reader(source.read_bytes()).read()
    needle = b'"score":1,"status":"pass"'
    index = data.index(needle)
    data = data[:index] + b'"score":0,"status":"pass"' + data[index + len(needle) :]
    target.write_bytes(zstandard.ZstdCompressor(level=3, write_checksum=True).compress(data))
    print(f"  (changed one case's score from 1 to 0 in {target.name}; no digest was updated)")


def eb_demo() -> None:
    eb_dir = REPO / "fixtures" / "eval-banana"
    run_dir = next((eb_dir / "runs" / "default").iterdir())
    banner("eval-banana: verify the recorded run in place, export it, verify it, and a tampered copy")
    run("verify", str(run_dir), "--project", str(eb_dir / "project"))
    run("export-eb", str(run_dir), "--project", str(eb_dir / "project"),
        "--exported-at", EB_EXPORTED_AT, "--out", "eb-run.tar.zst")
    run("verify", "eb-run.tar.zst")
    run("verify", "eb-run.tar.zst", "--html", "page-eval-banana.html", show=False)
    import zstandard

    data = zstandard.ZstdDecompressor().stream_reader((OUT / "eb-run.tar.zst").read_bytes()).read()
    i = data.index(b"expected 42, got 41")
    data = data[:i] + b"expected 41, got 41" + data[i + 19 :]
    (OUT / "eb-tampered.tar.zst").write_bytes(zstandard.ZstdCompressor(level=3, write_checksum=True).compress(data))
    print("  (changed the failing check's recorded stderr in eb-tampered.tar.zst; no digest was updated)")
    run("verify", "eb-tampered.tar.zst", expect=1)


def audit_demo() -> None:
    banner("Audit: re-derive the verdict from the cases (consistent, then a planted disagreement)")
    run("audit", "rpt-clean.tar.zst")
    audit_store = REPO / "fixtures" / "stores" / "audit"
    run("export", "--store", str(audit_store), "--report", "rpt-audit-pass-below-threshold",
        "--principal", "alice", "--exported-at", EXPORTED_AT, "--out", "audit-inconsistent.tar.zst", "--quiet")
    run("audit", "audit-inconsistent.tar.zst", expect=1)
    run("audit", "audit-inconsistent.tar.zst", "--html", "page-audit.html", expect=1, show=False)


def import_demo() -> None:
    runners = REPO / "fixtures" / "runners"
    log = next((runners / "inspect" / "logs").glob("*.eval"))
    lm_run = runners / "lm-eval" / "run"
    banner("Inspect AI and lm-evaluation-harness runs (real, made offline) as EvalBook stores")
    run("import-inspect", str(log), "--store", "imported", "--principal", "alice",
        "--task", str(runners / "inspect" / "arithmetic_task.py"))
    samples = [a for s in sorted(lm_run.glob("samples_*.jsonl")) for a in ("--samples", str(s))]
    tasks = [a for t in sorted((runners / "lm-eval" / "tasks").glob("*.yaml")) for a in ("--task", str(t))]
    lm = run("import-lm-eval", str(next(lm_run.glob("results_*.json"))), *samples, *tasks,
             "--store", "imported", "--json")
    import orjson

    lm_id = orjson.loads(lm.stdout)["report_id"]
    inspect_id = next(p.name for p in (OUT / "imported" / "reports").iterdir() if p.name != lm_id)
    access = orjson.loads((OUT / "imported" / "access.json").read_bytes())
    access["principals"]["bob"] = ["report.export"]
    (OUT / "imported" / "access.json").write_bytes(orjson.dumps(access, option=orjson.OPT_SORT_KEYS))
    print("  (granted bob report.export only: his bundles withhold inputs, outputs and run files)")
    run("export", "--store", "imported", "--report", inspect_id, "--principal", "alice",
        "--exported-at", IMPORT_EXPORTED_AT, "--out", "inspect-alice.tar.zst", "--quiet")
    run("export", "--store", "imported", "--report", inspect_id, "--principal", "bob",
        "--exported-at", IMPORT_EXPORTED_AT, "--out", "inspect-bob.tar.zst", "--quiet")
    run("export", "--store", "imported", "--report", lm_id, "--principal", "alice",
        "--exported-at", IMPORT_EXPORTED_AT, "--out", "lm-eval-alice.tar.zst", "--quiet")
    run("verify", "inspect-bob.tar.zst")
    run("audit", "lm-eval-alice.tar.zst", show=False)
    run("prove", "inspect-alice.tar.zst", "--case", "match.accuracy.mul-1.2", "--out", "inspect-proof.json")
    run("audit", "inspect-alice.tar.zst", "--html", "page-inspect.html", show=False)
    run("import-inspect", "--check", "inspect-alice.tar.zst")
    run("import-lm-eval", "--check", "lm-eval-alice.tar.zst")
    run("import-inspect", "--check", "inspect-bob.tar.zst", expect=3)


def storage_demo() -> None:
    banner("Object storage: a local SeaweedFS server; export --upload, list, verify and download")
    sys.path.insert(0, str(REPO / "tests"))
    import secrets
    import tempfile

    import boto3
    from s3_server import start_server

    env = {
        "AWS_ACCESS_KEY_ID": "demo-access",
        "AWS_SECRET_ACCESS_KEY": "demo-" + secrets.token_hex(8),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    os.environ.update(env)
    # The server's data, log and sockets live in one directory, removed afterwards
    # (SeaweedFS puts its sockets in TMPDIR).
    scratch = Path(tempfile.mkdtemp(prefix="evalbook-demo-s3-"))
    saved_tmpdir = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(scratch)
    server = start_server(scratch)
    if saved_tmpdir is None:
        del os.environ["TMPDIR"]
    else:
        os.environ["TMPDIR"] = saved_tmpdir
    try:
        os.environ["AWS_ENDPOINT_URL_S3"] = server.endpoint
        print(f"  (SeaweedFS at {server.endpoint}; AWS_ENDPOINT_URL_S3 points the commands at it)")
        boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1").create_bucket(Bucket="evidence")
        run("export", "--store", str(STORE), "--report", "rpt-every-reason", "--principal", "alice",
            "--exported-at", EXPORTED_AT, "--out", "uploaded.tar.zst", "--upload", "s3://evidence/archive", "--quiet")
        run("upload", "rpt-clean.tar.zst", "s3://evidence/archive")
        run("upload", "rpt-clean.tar.zst", "s3://evidence/archive")
        listing = run("list", "s3://evidence/archive")
        key = listing.stdout.splitlines()[0].split()[-1]
        run("verify", key)
        run("download", key, "downloaded.tar.zst")

        banner("A countersigned stored bundle: the exporter's signature travelled with it; an auditor adds one")
        clean_key = "s3://evidence/archive/" + next(
            line.split()[-1].split("/archive/", 1)[1]
            for line in listing.stdout.splitlines()
            if "rpt-clean" in line
        )
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "demo-auditor", "-f", "auditor-key")
        os.chmod(OUT / "auditor-key", 0o600)
        auditor_pub = (OUT / "auditor-key.pub").read_text().strip()
        # One line for both namespaces the auditor signs for (bundle heads here, fixity
        # records below): ssh-keygen warns about every line of the principal that does
        # not allow the namespace it checks.
        with open(OUT / "allowed_signers", "a", encoding="utf-8") as fh:
            fh.write(
                'auditor@example.org namespaces="evalbook-bundle-head-v1,evalbook-fixity-v1" '
                f"{auditor_pub}\n"
            )
        run("sign", clean_key, "--key", "auditor-key")
        run("list", "s3://evidence/archive", "--report", "rpt-clean")
        run("verify", clean_key, "--allowed-signers", "allowed_signers")

        banner("Fixity of the whole archive: one bundle rotted in place, a ledger, a signed record")
        fixity_demo(listing.stdout, server.endpoint)
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
        print("  (SeaweedFS stopped, its data removed)")


def fixity_demo(listing: str, endpoint: str) -> None:
    """Rot one stored archive in place (same length, metadata kept, as bit rot would),
    run fixity with a ledger and a signed record; the next run, --older-than, still
    reports the failure (it is never forgotten), until the keeper retires it with a
    reason, after which a run passes."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    key = next(
        line.split()[-1].split("s3://evidence/", 1)[1]
        for line in listing.splitlines()
        if "rpt-every-reason" in line
    )
    stored = client.get_object(Bucket="evidence", Key=key)
    data = bytearray(stored["Body"].read())
    data[len(data) // 2] ^= 0x01
    client.put_object(Bucket="evidence", Key=key, Body=bytes(data), Metadata=stored["Metadata"])
    print(f"  (flipped one bit of s3://evidence/{key}, its metadata kept)")
    run("fixity", "s3://evidence/archive", "--ledger", "fixity.sqlite", "--workers", "2",
        "--record", "fixity-record.jsonl", "--key", "auditor-key", expect=1)
    # Checked again first, whatever --older-than says: the failure is still there.
    again = run("fixity", "s3://evidence/archive", "--ledger", "fixity.sqlite", "--older-than",
                "30d", expect=1)
    if key not in again.stdout:
        sys.exit("demo: the second fixity run forgot the rotted bundle")
    run("fixity", "s3://evidence/archive", "--ledger", "fixity.sqlite", "--retire", key,
        "--reason", "bit rot confirmed; the bundle is re-exported from the store")
    run("fixity", "s3://evidence/archive", "--ledger", "fixity.sqlite", "--older-than", "30d")
    print("$ ssh-keygen -Y verify -f allowed_signers -I auditor@example.org -n evalbook-fixity-v1 "
          "-s fixity-record.jsonl.sig < fixity-record.jsonl", flush=True)
    with open(OUT / "fixity-record.jsonl", "rb") as record:
        proc = subprocess.run(
            ["ssh-keygen", "-Y", "verify", "-f", "allowed_signers", "-I", "auditor@example.org",
             "-n", "evalbook-fixity-v1", "-s", "fixity-record.jsonl.sig"],
            stdin=record, capture_output=True, text=True, cwd=OUT, check=False,
        )
    print("  " + (proc.stdout + proc.stderr).strip(), flush=True)
    if proc.returncode != 0:
        sys.exit("demo: the signed fixity record did not verify with ssh-keygen")


EXTRA_STEPS: list = [eb_demo, audit_demo, import_demo, storage_demo]  # type: ignore[type-arg]

if __name__ == "__main__":
    main()
