"""Documents no exporter could have written (claim 11), and bytes outside the bundle
digest (claim 1).

Every bundle is a fixture bundle edited with ``repack`` and resealed (digests, report
digest, manifest, bag-info, head), so the attack is self-consistent wherever a digest
reaches: only the coherence rules of claim 11, or claim 1's "tag files only at the bag
root", can catch it. Each attack must give verdict FAILED (never VERIFIED, never ERROR)
with a failed claim of the group named.

- permissions recorded without ``report.export``;
- one check listed twice (report body, bundle.json, suite);
- a payload reference whose size or location disagrees with the payload or with the
  262,144-byte inline limit;
- a suite, scorer descriptor, check result, envelope, dataset manifest or evidence
  manifest that breaks its schema while every digest that names it matches;
- a tag file, or any other file, in a subdirectory of the bag outside data/, or an
  unknown file at the bag root; ``extract`` must leave none of it behind.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import repack

from bundler.bundles.verify import verify_bundle
from bundler.core import canonical
from bundler.core.claims import State, Verdict, Verification, VerifyOptions
from bundler.core.digests import json_digest

CLI = [sys.executable, "-m", "bundler"]
INLINE_MAX = 262_144
BODY = "data/report/body.json"


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def blob_path(digest: str) -> str:
    return "data/blobs/sha256/" + digest.removeprefix("sha256:")


def seal(eb: repack.EditableBag, tmp_path: Path, name: str = "attack") -> Path:
    out = tmp_path / f"{name}-{len(list(tmp_path.iterdir()))}.tar.zst"
    return repack.write_bundle(eb, out)


def describe(result: Verification) -> list[str]:
    return [f"[{c.group}] {c.subject}: {c.detail}" for c in result.failures()] or [
        f"{result.verdict.value}: {result.error}"
    ]


def failed_groups(result: Verification) -> set[int]:
    return {c.group for c in result.claims if c.state is State.FAILED}


def assert_fails(result: Verification, *groups: int) -> None:
    """FAILED, with a failed claim in at least one of ``groups``."""
    assert result.verdict is Verdict.FAILED, describe(result)
    assert failed_groups(result) & set(groups), describe(result)


def verify_path(path: Path, **options: Any) -> Verification:
    return verify_bundle(str(path), VerifyOptions(**options))


def attack(
    bundles: dict[str, Path], key: str, tmp_path: Path, edit: Callable[[repack.EditableBag], None]
) -> Verification:
    eb = repack.open_bundle(bundles[key])
    edit(eb)
    return verify_path(seal(eb, tmp_path))


def edit_bundle(eb: repack.EditableBag, change: Callable[[dict[str, Any]], None]) -> None:
    bundle = eb.bundle
    change(bundle)
    eb.set_bundle(bundle)


# ---------------------------------------------------------------------- permissions

PERMISSIONS = [
    [],
    ["report.read"],
    ["dataset.read_body"],
    ["dataset.read_body", "report.read"],
    ["report.exports"],
    ["report.export_all"],
    ["report.export.x"],
    ["reports.export"],
]


@pytest.mark.parametrize("key", ["rpt-clean/alice", "rpt-clean/bob"])
@pytest.mark.parametrize("permissions", PERMISSIONS, ids=lambda p: "+".join(p) or "none")
def test_recorded_permissions_without_report_export_fail(
    bundles: dict[str, Path], tmp_path: Path, key: str, permissions: list[str]
) -> None:
    def edit(eb: repack.EditableBag) -> None:
        edit_bundle(eb, lambda b: b["exporter"].update(permissions=permissions))

    assert_fails(attack(bundles, key, tmp_path, edit), 11)


# ------------------------------------------------------------------ a check twice


def dup_body(eb: repack.EditableBag, index: int = 0) -> None:
    eb.edit_json(BODY, lambda body: body["checks"].insert(index + 1, body["checks"][index]))


def dup_bundle(eb: repack.EditableBag, index: int = 0) -> None:
    edit_bundle(eb, lambda b: b["checks"].insert(index + 1, b["checks"][index]))


def dup_suite(eb: repack.EditableBag, index: int = 0) -> None:
    path = eb.bundle["suite"]["path"]
    eb.edit_json(path, lambda s: s["checks"].insert(index + 1, s["checks"][index]))
    digest = json_digest(eb.json(path))
    eb.edit_json(BODY, lambda body: body["suite_ref"].update(digest=digest))


def dup_everywhere(eb: repack.EditableBag) -> None:
    dup_suite(eb)
    dup_body(eb)
    dup_bundle(eb)


def dup_last_at_end(eb: repack.EditableBag) -> None:
    eb.edit_json(BODY, lambda body: body["checks"].append(body["checks"][0]))
    edit_bundle(eb, lambda b: b["checks"].append(b["checks"][0]))


TWICE: dict[str, Callable[[repack.EditableBag], None]] = {
    "body-and-bundle": lambda eb: (dup_body(eb), dup_bundle(eb)),  # type: ignore[func-returns-value]
    "body-only": dup_body,
    "bundle-only": dup_bundle,
    "suite-body-and-bundle": dup_everywhere,
    "first-repeated-last": dup_last_at_end,
    "second-check": lambda eb: (dup_body(eb, 1), dup_bundle(eb, 1)),  # type: ignore[func-returns-value]
}


@pytest.mark.parametrize("key", ["rpt-clean/alice", "rpt-every-reason/alice"])
@pytest.mark.parametrize("how", list(TWICE))
def test_a_check_listed_twice_fails(
    bundles: dict[str, Path], tmp_path: Path, key: str, how: str
) -> None:
    assert_fails(attack(bundles, key, tmp_path, TWICE[how]), 11)


# ----------------------------------------------------- payload size and location


def swap_first_output(
    eb: repack.EditableBag,
    *,
    data: bytes | None,
    size: int,
    location: str,
    check: int = 0,
) -> str:
    """Point the first case of a check at a new output (``data`` None: not in the bundle).

    The old blob goes, and the report's evidence_refs follow, so only the ref's size and
    location can disagree. Returns the new digest.
    """
    bundle = eb.bundle
    check_entry = bundle["checks"][check]
    path = check_entry["cases"]["path"]
    lines = eb.lines(path)
    case = canonical.loads(lines[0])
    old = case["output"]["digest"]
    digest = sha(data) if data is not None else sha(b"never stored %d" % size)
    case["output"] = {"kind": "output", "digest": digest, "size": size, "location": location}
    lines[0] = canonical.dumps(case)
    eb.set_lines(path, lines)
    used_elsewhere = any(old.encode() in line for line in lines[1:])
    if not used_elsewhere:
        eb.files.pop(blob_path(old), None)
    if data is not None:
        eb.files[blob_path(digest)] = data

    def change(body: dict[str, Any]) -> None:
        refs = body["checks"][check]["evidence_refs"]
        assert refs and refs[0]["kind"] != "manifest"
        kept = [r for r in refs if not (r["digest"] == old and not used_elsewhere)]
        kept.append({"kind": "output", "digest": digest})
        unique = {(r["digest"], r["kind"]) for r in kept}
        body["checks"][check]["evidence_refs"] = [
            {"kind": k, "digest": d} for d, k in sorted(unique)
        ]

    eb.edit_json(BODY, change)
    return digest


def list_sso(eb: repack.EditableBag, digest: str) -> None:
    def change(b: dict[str, Any]) -> None:
        b["unavailable"].append(
            {
                "kind": "output",
                "ref": digest,
                "digest": digest,
                "reason": "payload_at_sso",
                "detail": None,
            }
        )
        b["unavailable"].sort(key=lambda e: (e["kind"], e["ref"]))

    edit_bundle(eb, change)


FIVE_MIB = 5 * 1024 * 1024

# (name, bytes in the bundle or None, size in the ref, location in the ref, listed at sso)
SIZES: list[tuple[str, int | None, int, str, bool]] = [
    ("5MiB-blob-ref-says-57-inline", FIVE_MIB, 57, "inline", False),
    ("5MiB-blob-ref-says-5MiB-inline", FIVE_MIB, FIVE_MIB, "inline", False),
    ("inline-over-limit-by-one", INLINE_MAX + 1, INLINE_MAX + 1, "inline", False),
    ("inline-over-limit-ref-says-limit", INLINE_MAX + 1, INLINE_MAX, "inline", False),
    ("inline-size-plus-one", 100, 101, "inline", False),
    ("inline-size-minus-one", 100, 99, "inline", False),
    ("inline-size-zero", 100, 0, "inline", False),
    ("inline-empty-blob-ref-says-1", 0, 1, "inline", False),
    ("sso-ref-of-57-bytes-listed", None, 57, "sso", True),
    ("sso-ref-at-the-limit-listed", None, INLINE_MAX, "sso", True),
    ("sso-ref-of-0-bytes-listed", None, 0, "sso", True),
    ("sso-ref-with-its-blob-in-the-bundle", INLINE_MAX + 1, INLINE_MAX + 1, "sso", False),
    ("sso-ref-small-with-its-blob-in-the-bundle", 100, 100, "sso", False),
]


@pytest.mark.parametrize(
    ("data_size", "size", "location", "listed"),
    [s[1:] for s in SIZES],
    ids=[s[0] for s in SIZES],
)
def test_a_payload_ref_that_disagrees_with_the_payload_fails(
    bundles: dict[str, Path],
    tmp_path: Path,
    data_size: int | None,
    size: int,
    location: str,
    listed: bool,
) -> None:
    def edit(eb: repack.EditableBag) -> None:
        data = None if data_size is None else (b"p" * data_size)
        digest = swap_first_output(eb, data=data, size=size, location=location)
        if listed:
            list_sso(eb, digest)

    # The listing rules of claim 10 may see some of these first; claim 11 must not pass them.
    assert_fails(attack(bundles, "rpt-clean/alice", tmp_path, edit), 10, 11)


def test_the_size_attacks_have_a_legitimate_control(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    """The same edit with the true size, inline at the limit, verifies."""

    def edit(eb: repack.EditableBag) -> None:
        swap_first_output(eb, data=b"p" * INLINE_MAX, size=INLINE_MAX, location="inline")

    result = attack(bundles, "rpt-clean/alice", tmp_path, edit)
    assert result.verdict is Verdict.VERIFIED, describe(result)


@pytest.mark.parametrize("delta", [-1, 1, 1 << 40])
def test_an_artifact_ref_with_a_wrong_size_fails(
    bundles: dict[str, Path], tmp_path: Path, delta: int
) -> None:
    def edit(eb: repack.EditableBag) -> None:
        path = eb.bundle["checks"][0]["cases"]["path"]
        lines = eb.lines(path)
        case = canonical.loads(lines[0])
        artifact = next(e for e in case["evidence"] if e["kind"] == "artifact")
        artifact["size"] = max(0, artifact["size"] + delta)
        lines[0] = canonical.dumps(case)
        eb.set_lines(path, lines)

    # A size over the inline limit also breaks the case line's schema (claim 8).
    assert_fails(attack(bundles, "rpt-evidence-manifest/alice", tmp_path, edit), 8, 11)


def test_two_refs_to_one_payload_with_different_sizes_fail(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    def edit(eb: repack.EditableBag) -> None:
        path = eb.bundle["checks"][0]["cases"]["path"]
        lines = eb.lines(path)
        first, second = canonical.loads(lines[0]), canonical.loads(lines[1])
        old = second["output"]["digest"]
        second["output"] = {**first["output"], "size": first["output"]["size"] + 1}
        lines[1] = canonical.dumps(second)
        eb.set_lines(path, lines)
        eb.files.pop(blob_path(old), None)

        def change(body: dict[str, Any]) -> None:
            refs = body["checks"][0]["evidence_refs"]
            body["checks"][0]["evidence_refs"] = [r for r in refs if r["digest"] != old]

        eb.edit_json(BODY, change)

    assert_fails(attack(bundles, "rpt-clean/alice", tmp_path, edit), 11)


@pytest.mark.parametrize("delta", [-1, 1])
def test_a_payload_entry_whose_size_is_not_the_blobs_fails(
    bundles: dict[str, Path], tmp_path: Path, delta: int
) -> None:
    eb = repack.open_bundle(bundles["rpt-clean/alice"])
    repack.refresh_bundle_json(eb)
    edit_bundle(eb, lambda b: b["payloads"][0].update(size=b["payloads"][0]["size"] + delta))
    out = tmp_path / "payload-size.tar.zst"
    repack.write_tar(repack.repack(eb, bundle_json=False), out)
    # bundle.json's own payload list: claim 8 (the payload is proven) may see it first.
    assert_fails(verify_path(out), 8, 10, 11)


# ------------------------------------------- schema-invalid documents, digests resealed


def reseal_suite(eb: repack.EditableBag, value: Any) -> None:
    path = eb.bundle["suite"]["path"]
    eb.set_json(path, value)
    digest = json_digest(value)
    eb.edit_json(BODY, lambda body: body["suite_ref"].update(digest=digest))


def suite_change(change: Callable[[dict[str, Any]], None]) -> Callable[[repack.EditableBag], None]:
    def edit(eb: repack.EditableBag) -> None:
        value = eb.json(eb.bundle["suite"]["path"])
        change(value)
        reseal_suite(eb, value)

    return edit


SUITES: dict[str, Callable[[repack.EditableBag], None]] = {
    "empty-array": lambda eb: reseal_suite(eb, []),
    "empty-object": lambda eb: reseal_suite(eb, {}),
    "string": lambda eb: reseal_suite(eb, "suite"),
    "null": lambda eb: reseal_suite(eb, None),
    "number": lambda eb: reseal_suite(eb, 1),
    "no-checks": suite_change(lambda s: s.pop("checks")),
    "checks-not-a-list": suite_change(lambda s: s.update(checks={})),
    "extra-field": suite_change(lambda s: s.update(extra=True)),
    "bad-status": suite_change(lambda s: s.update(status="frozen")),
    "validity-zero": suite_change(lambda s: s.update(validity_hours=0)),
    "version-string": suite_change(lambda s: s.update(version=str(s["version"]))),
    "check-entry-extra-field": suite_change(lambda s: s["checks"][0].update(extra=1)),
    "check-entry-no-scorer": suite_change(lambda s: s["checks"][0].pop("scorer")),
}


@pytest.mark.parametrize("how", list(SUITES))
def test_a_schema_invalid_suite_whose_digest_matches_fails(
    bundles: dict[str, Path], tmp_path: Path, how: str
) -> None:
    assert_fails(attack(bundles, "rpt-clean/alice", tmp_path, SUITES[how]), 4, 11)


def scorer_change(change: Callable[[dict[str, Any]], None]) -> Callable[[repack.EditableBag], None]:
    """Edit sc-exact@1's descriptor (its file list kept) and repin its framed digest."""

    def edit(eb: repack.EditableBag) -> None:
        scorer = next(s for s in eb.bundle["scorers"] if s["scorer_id"] == "sc-exact")
        path = f"{scorer['path']}/scorer.json"
        eb.edit_json(path, change)
        repack.refresh_bundle_json(eb)
        digest = next(s for s in eb.bundle["scorers"] if s["scorer_id"] == "sc-exact")["digest"]

        def repin(body: dict[str, Any]) -> None:
            for check in body["checks"]:
                if check["scorer_ref"]["id"] == "sc-exact":
                    check["scorer_ref"]["digest"] = digest

        eb.edit_json(BODY, repin)

    return edit


SCORERS: dict[str, Callable[[repack.EditableBag], None]] = {
    "bad-kind": scorer_change(lambda d: d.update(kind="oracle")),
    "no-runtime": scorer_change(lambda d: d.pop("runtime")),
    "no-entrypoint": scorer_change(lambda d: d.pop("entrypoint")),
    "extra-field": scorer_change(lambda d: d.update(extra="x")),
    "judge-string": scorer_change(lambda d: d.update(judge="judge-large")),
    "version-string": scorer_change(lambda d: d.update(version="1")),
    "version-zero": scorer_change(lambda d: d.update(version=0)),
    "scorer-id-other": scorer_change(lambda d: d.update(scorer_id="sc-other")),
}


@pytest.mark.parametrize("how", list(SCORERS))
def test_a_schema_invalid_scorer_whose_framed_digest_matches_fails(
    bundles: dict[str, Path], tmp_path: Path, how: str
) -> None:
    assert_fails(attack(bundles, "rpt-clean/alice", tmp_path, SCORERS[how]), 5, 11)


def check_change(change: Callable[[Any], Any]) -> Callable[[repack.EditableBag], None]:
    def edit(eb: repack.EditableBag) -> None:
        path = eb.bundle["checks"][0]["path"]
        value = eb.json(path)
        new = change(value)
        eb.set_json(path, value if new is None else new)

    return edit


CHECKS: dict[str, Callable[[repack.EditableBag], None]] = {
    "empty-array": check_change(lambda r: []),
    "empty-object": check_change(lambda r: {}),
    "extra-field": check_change(lambda r: r.update(extra=1)),
    "bad-aggregation-rule": check_change(lambda r: r["aggregation"].update(rule="median")),
    "no-interval": check_change(lambda r: r.pop("interval")),
    "bad-interval-method": check_change(
        lambda r: r.update(
            interval={
                "level": 0.95,
                "method": "jackknife",
                "low": 0,
                "high": 1,
                "resamples": None,
                "seed": None,
            }
        )
    ),
    "interval-level-one": check_change(
        lambda r: r["interval"].update(level=1) if r.get("interval") else r.update(interval=1)
    ),
    "no-slices": check_change(lambda r: r.pop("slices")),
    "coverage-string": check_change(lambda r: r.update(coverage="12/12")),
}


@pytest.mark.parametrize("how", list(CHECKS))
def test_a_schema_invalid_check_result_fails(
    bundles: dict[str, Path], tmp_path: Path, how: str
) -> None:
    assert_fails(attack(bundles, "rpt-clean/alice", tmp_path, CHECKS[how]), 7, 11)


ENVELOPES: dict[str, Callable[[dict[str, Any]], None]] = {
    "extra-field": lambda e: e.update(extra=1),
    "bad-superseded-at": lambda e: e.update(superseded_at="yesterday"),
    "no-url": lambda e: e.pop("url"),
}


@pytest.mark.parametrize("how", list(ENVELOPES))
def test_a_schema_invalid_envelope_fails(
    bundles: dict[str, Path], tmp_path: Path, how: str
) -> None:
    def edit(eb: repack.EditableBag) -> None:
        eb.edit_json("data/report/envelope.json", ENVELOPES[how])

    result = attack(bundles, "rpt-clean/alice", tmp_path, edit)
    assert_fails(result, 3, 11)


def manifest_change(
    change: Callable[[dict[str, Any]], None],
) -> Callable[[repack.EditableBag], None]:
    def edit(eb: repack.EditableBag) -> None:
        dataset = eb.bundle["datasets"][0]
        eb.edit_json(dataset["path"], change)
        digest = json_digest(eb.json(dataset["path"]))

        def repin(body: dict[str, Any]) -> None:
            for ref in body["dataset_refs"]:
                if ref["id"] == dataset["dataset_id"] and ref["version"] == dataset["version"]:
                    ref["digest"] = digest

        eb.edit_json(BODY, repin)

    return edit


MANIFESTS: dict[str, Callable[[repack.EditableBag], None]] = {
    "extra-field": manifest_change(lambda m: m.update(extra=1)),
    "examples-unsorted": manifest_change(lambda m: m["examples"].reverse()),
    "example-extra-field": manifest_change(lambda m: m["examples"][-1].update(extra=1)),
    "example-size-negative": manifest_change(lambda m: m["examples"][-1].update(size=-1)),
    "example-listed-twice": manifest_change(lambda m: m["examples"].append(m["examples"][-1])),
}


@pytest.mark.parametrize("how", list(MANIFESTS))
def test_a_schema_invalid_dataset_manifest_whose_digest_matches_fails(
    bundles: dict[str, Path], tmp_path: Path, how: str
) -> None:
    assert_fails(attack(bundles, "rpt-clean/alice", tmp_path, MANIFESTS[how]), 6, 11)


def evidence_change(
    change: Callable[[dict[str, Any]], None],
) -> Callable[[repack.EditableBag], None]:
    """Rewrite the evidence manifest of rpt-evidence-manifest and repin evidence_refs."""

    def edit(eb: repack.EditableBag) -> None:
        body = eb.json(BODY)
        old = body["checks"][0]["evidence_refs"][0]["digest"]
        value = canonical.loads(eb.files.pop(blob_path(old)))
        change(value)
        data = canonical.dumps(value)
        eb.files[blob_path(sha(data))] = data
        body["checks"][0]["evidence_refs"][0]["digest"] = sha(data)
        eb.set_json(BODY, body)

    return edit


EVIDENCE: dict[str, Callable[[repack.EditableBag], None]] = {
    "unsorted": evidence_change(lambda m: m["evidence"].reverse()),
    "duplicate-entry": evidence_change(lambda m: m["evidence"].append(m["evidence"][0])),
    "other-schema": evidence_change(lambda m: m.update(schema="evalbook.evidence_manifest.v2")),
    "other-check": evidence_change(lambda m: m.update(check_id="safety")),
    "extra-field": evidence_change(lambda m: m.update(extra=1)),
    "kind-manifest": evidence_change(lambda m: m["evidence"][0].update(kind="manifest")),
    "twenty-entries": evidence_change(lambda m: m.update(evidence=m["evidence"][:20])),
}


@pytest.mark.parametrize("how", list(EVIDENCE))
def test_an_incoherent_evidence_manifest_fails(
    bundles: dict[str, Path], tmp_path: Path, how: str
) -> None:
    assert_fails(attack(bundles, "rpt-evidence-manifest/alice", tmp_path, EVIDENCE[how]), 9, 11)


def test_a_schema_invalid_suite_crashes_no_command(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    eb = repack.open_bundle(bundles["rpt-clean/alice"])
    reseal_suite(eb, [])
    path = seal(eb, tmp_path)
    for args, allowed in (
        (["verify", str(path)], {1}),
        (["inspect", str(path)], {0, 1, 3}),
        (["audit", str(path)], {1, 3}),
        (["extract", str(path), str(tmp_path / "out")], {1}),
    ):
        proc = subprocess.run([*CLI, *args], capture_output=True, timeout=120, check=False)
        assert b"Traceback" not in proc.stderr, (args, proc.stderr.decode()[-2000:])
        assert proc.returncode in allowed, (args, proc.returncode, proc.stderr.decode()[-2000:])


# ------------------------------------------------- claim 1: tag files outside the root

TAG_NAMES = [
    "bagit.txt",
    "bag-info.txt",
    "manifest-sha256.txt",
    "tagmanifest-sha256.txt",
    "bundle-head.json",
    "bundle-head.json.sig",
    "x",
    "approval.txt",
]
SUBDIRS = ["sub", "meta", "sub/deeper", "data-extra", "datax", "tags"]


def tag_content(eb: repack.EditableBag, name: str) -> bytes:
    return eb.files.get(name, b"Approved for release by the audit board.\n")


@pytest.mark.parametrize("listed", [True, False], ids=["in-tagmanifest", "not-in-tagmanifest"])
@pytest.mark.parametrize("subdir", SUBDIRS)
@pytest.mark.parametrize("name", TAG_NAMES)
def test_a_file_in_a_subdirectory_outside_data_fails_claim_1(
    bundles: dict[str, Path], tmp_path: Path, name: str, subdir: str, listed: bool
) -> None:
    eb = repack.open_bundle(bundles["rpt-clean/alice"])
    extra = f"{subdir}/{name}"
    if listed:
        eb.files[extra] = tag_content(eb, name)
        path = seal(eb, tmp_path)
    else:
        tar = repack.repack(eb)
        eb.files[extra] = tag_content(eb, name)
        tar = repack.tar_bytes(eb)
        path = repack.write_tar(tar, tmp_path / "unlisted.tar.zst")
    assert_fails(verify_path(path), 1)


# (A name that collides with a tag file after case folding, e.g. BagIt.txt, is refused
# before any verdict, SPEC 5, so it is not among these.)
@pytest.mark.parametrize(
    "name",
    [
        "approval.txt",
        "bagit.txt.bak",
        "manifest-md5.txt",
        "tagmanifest-md5.txt",
        "bundle-head.json.sig2",
        "README",
    ],
)
def test_an_unknown_file_at_the_bag_root_fails_claim_1(
    bundles: dict[str, Path], tmp_path: Path, name: str
) -> None:
    """Claim 1: nothing outside data/ but the tag files section 4.1 names."""
    eb = repack.open_bundle(bundles["rpt-clean/alice"])
    eb.files[name] = b"Approved for release by the audit board.\n"
    assert_fails(verify_path(seal(eb, tmp_path)), 1)


@pytest.mark.parametrize(
    "extra", ["sub/bagit.txt", "meta/x", "sub/deeper/bundle-head.json", "approval.txt"]
)
def test_extract_leaves_no_file_of_a_bundle_with_a_stray_tag_file(
    bundles: dict[str, Path], tmp_path: Path, extra: str
) -> None:
    eb = repack.open_bundle(bundles["rpt-clean/alice"])
    eb.files[extra] = tag_content(eb, extra.rsplit("/", 1)[-1])
    path = seal(eb, tmp_path)
    out = tmp_path / "extracted"
    proc = subprocess.run(
        [*CLI, "extract", str(path), str(out)], capture_output=True, timeout=120, check=False
    )
    assert b"Traceback" not in proc.stderr, proc.stderr.decode()[-2000:]
    assert proc.returncode == 1, (proc.returncode, proc.stderr.decode()[-2000:])
    left = sorted(str(p.relative_to(out)) for p in out.rglob("*")) if out.exists() else []
    assert left == [], left


def test_a_stray_tag_file_fails_through_the_cli(bundles: dict[str, Path], tmp_path: Path) -> None:
    eb = repack.open_bundle(bundles["rpt-clean/alice"])
    eb.files["sub/bagit.txt"] = eb.files["bagit.txt"]
    path = seal(eb, tmp_path)
    proc = subprocess.run(
        [*CLI, "verify", str(path)], capture_output=True, timeout=120, check=False
    )
    assert b"Traceback" not in proc.stderr, proc.stderr.decode()[-2000:]
    assert proc.returncode == 1, (proc.stdout + proc.stderr).decode()[-2000:]
