"""Adversarial listings (SPEC 4.3 and claim 10): a bundle cannot hide evidence by calling
it unavailable or redacted.

Every bundle here is a fixture bundle edited with ``repack`` (every digest, the manifest,
bag-info and the head resealed), so only the listing rules can catch the edit. Three
families, each exhaustive over its table:

- the (kind, reason) table: every item the fixtures list is relisted under every other
  reason and every other kind, and every item the bundle holds is listed under every
  reason; only the reasons the bundle cannot tell apart (``PLAUSIBLE``) are left out;
- pinned digests, observed digests, counts, permissions and duplicates;
- ref spellings: every ref written another way (leading zero, non-ASCII digits, signs,
  spaces, case, compatibility forms, uppercase hex), for absent items and for items the
  bundle holds; none may crash verify, inspect, extract, prove or audit.

Each attack must give verdict FAILED with a failed claim of group 10 (never VERIFIED,
never ERROR).
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
from bundler.core.errors import BundlerError

UNAVAILABLE = (
    "payload_at_sso",
    "removed_by_retention",
    "scorer_version_missing",
    "scorer_digest_mismatch",
    "case_limit",
    "digest_mismatch",
    "missing_from_store",
)
REDACTED = ("no_dataset_read_body", "trace_capture_policy")
REASONS = UNAVAILABLE + REDACTED
KINDS = (
    "report",
    "suite",
    "scorer",
    "dataset",
    "example",
    "check",
    "cases",
    "output",
    "trace",
    "artifact",
    "evidence_manifest",
)
OTHER_DIGEST = "sha256:" + hashlib.sha256(b"some other bytes").hexdigest()
CLI = [sys.executable, "-m", "bundler"]


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------------- helpers


def group_of(reason: str) -> str:
    return "redacted" if reason in REDACTED else "unavailable"


def entry(kind: str, ref: str, digest: str | None, reason: str) -> tuple[str, dict[str, Any]]:
    """A schema-valid listing entry for ``reason``, with a well-formed detail."""
    if reason in REDACTED:
        return "redacted", {
            "kind": kind,
            "ref": ref,
            "digest": digest or OTHER_DIGEST,
            "reason": reason,
        }
    detail: str | None = None
    if reason in ("scorer_digest_mismatch", "digest_mismatch"):
        detail = OTHER_DIGEST
    elif reason == "case_limit":
        detail = "3"
    return "unavailable", {
        "kind": kind,
        "ref": ref,
        "digest": digest,
        "reason": reason,
        "detail": detail,
    }


def find(bundle: dict[str, Any], kind: str, ref: str) -> tuple[str, dict[str, Any]]:
    for group in ("unavailable", "redacted"):
        for e in bundle[group]:
            if e["kind"] == kind and e["ref"] == ref:
                return group, e
    raise AssertionError(f"no listing of {kind} {ref}")


def put(bundle: dict[str, Any], group: str, item: dict[str, Any]) -> None:
    bundle[group].append(item)
    bundle[group].sort(key=lambda e: (e["kind"], e["ref"]))


def remove(bundle: dict[str, Any], kind: str, ref: str) -> dict[str, Any]:
    group, e = find(bundle, kind, ref)
    bundle[group].remove(e)
    return e


def seal(eb: repack.EditableBag, tmp_path: Path, name: str = "attack") -> Path:
    out = tmp_path / f"{name}-{len(list(tmp_path.iterdir()))}.tar.zst"
    return repack.write_bundle(eb, out)


def run_verify(path: Path, **options: Any) -> Verification:
    return verify_bundle(str(path), VerifyOptions(**options))


def describe(result: Verification) -> list[str]:
    return [f"[{c.group}] {c.subject}: {c.detail}" for c in result.failures()] or [
        f"{result.verdict.value}: {result.error}"
    ]


def failed_groups(result: Verification) -> set[int]:
    return {c.group for c in result.claims if c.state is State.FAILED}


def assert_fails(result: Verification, group: int = 10) -> None:
    assert result.verdict is Verdict.FAILED, describe(result)
    assert group in failed_groups(result), describe(result)


def attack(
    bundles: dict[str, Path],
    key: str,
    tmp_path: Path,
    edit: Callable[[repack.EditableBag, dict[str, Any]], None],
) -> Verification:
    """Open a fixture bundle, let ``edit`` change its files and parsed bundle.json, reseal."""
    eb = repack.open_bundle(bundles[key])
    bundle = eb.bundle
    edit(eb, bundle)
    eb.set_bundle(bundle)
    return run_verify(seal(eb, tmp_path))


# ------------------------------------------------ the items the fixtures list, by situation

# (bundle, kind, ref, the reasons the bundle alone cannot tell from the true one).
# An sso output is payload_at_sso (or redacted for a principal without read_body); an
# inline payload that is absent is missing or mismatched, which only the store can tell
# apart; an example of the manifest whose body is absent may be retention, missing or
# mismatched; a scorer not in the bundle may be deleted, drifted or missing a file; a
# check or case file that is absent is missing; traces are always trace_capture_policy.
SSO_TRACES_OUTPUT = "sha256:3180d565b8ce1214dc0ce5de0b896fa48a3fe9effc672b47108d86551580c6d1"
SSO_TRACE = "sha256:2789ae009450da9650eb5f6bf108ea407f0cb0087373e3754c3ab0697610b5a1"
EVERY_SSO = "sha256:7ab9b9c19d490e55cff8b1ca5e512e4188cc037ed0a9f93b0f12d260836b22e1"
EVERY_MISMATCH = "sha256:2d1d7a754119af8afe34902ac75ac4db8ce8d4737e8794e63edcf864c50b1414"
EVERY_MISSING = "sha256:d326c6cb2d3065a56e26f5c1145ff392e585d2bcba2985aeea3dffedc55109f6"
EVERY_TRACE = "sha256:1954abf48a7fdbfaeca9de64e1b7a36f1d271ea818d647ea0cc107621b144cf2"
BOB_OUTPUT = "sha256:09bcfa5fcc657db24fdb4ca6c99e4b9b9a0b4180cab8cfa82055aa93dbaa112c"

ABSENT_PAYLOAD = {"digest_mismatch", "missing_from_store"}
ABSENT_EXAMPLE = {"removed_by_retention", "missing_from_store", "digest_mismatch"}
ABSENT_SCORER = {"scorer_version_missing", "scorer_digest_mismatch", "missing_from_store"}

LISTED: list[tuple[str, str, str, set[str]]] = [
    ("rpt-sso-traces/alice", "output", SSO_TRACES_OUTPUT, {"payload_at_sso"}),
    ("rpt-sso-traces/alice", "trace", SSO_TRACE, {"trace_capture_policy"}),
    ("rpt-every-reason/alice", "output", EVERY_SSO, {"payload_at_sso"}),
    ("rpt-every-reason/alice", "artifact", EVERY_MISMATCH, ABSENT_PAYLOAD),
    ("rpt-every-reason/alice", "artifact", EVERY_MISSING, ABSENT_PAYLOAD),
    ("rpt-every-reason/alice", "trace", EVERY_TRACE, {"trace_capture_policy"}),
    ("rpt-every-reason/alice", "cases", "latency", {"missing_from_store"}),
    ("rpt-every-reason/alice", "check", "latency", {"missing_from_store"}),
    ("rpt-every-reason/alice", "example", "ds-qa@1/qa-9999", {"missing_from_store"}),
    ("rpt-retention/alice", "example", "ds-retained@1/rt-0000", ABSENT_EXAMPLE),
    ("rpt-scorer-drift/alice", "scorer", "sc-drift@1", ABSENT_SCORER),
    ("rpt-scorer-drift/alice", "scorer", "sc-legacy@2", ABSENT_SCORER),
    ("rpt-clean/bob", "example", "ds-qa@1/qa-0000", {"no_dataset_read_body"}),
    ("rpt-clean/bob", "output", BOB_OUTPUT, {"no_dataset_read_body"}),
    ("rpt-every-reason/bob", "output", EVERY_SSO, {"no_dataset_read_body"}),
    ("rpt-every-reason/bob", "example", "ds-retained@1/rt-0000", {"no_dataset_read_body"}),
]


def _short(ref: str) -> str:
    return ref[:15] if ref.startswith("sha256:") else ref


RELIST_REASON = [
    pytest.param(key, kind, ref, reason, id=f"{key}-{kind}-{_short(ref)}-as-{reason}")
    for key, kind, ref, plausible in LISTED
    for reason in REASONS
    if reason not in plausible
]
RELIST_KIND = [
    pytest.param(key, kind, ref, other, id=f"{key}-{kind}-{_short(ref)}-as-kind-{other}")
    for key, kind, ref, _ in LISTED
    for other in KINDS
    if other != kind
]


def test_the_fixture_listings_verify(bundles: dict[str, Path]) -> None:
    """The baseline: every bundle the attacks start from verifies untouched."""
    for key in sorted({key for key, *_ in LISTED} | {"rpt-evidence-manifest/alice"}):
        result = run_verify(bundles[key])
        assert result.verdict is Verdict.VERIFIED, (key, describe(result))


def test_the_listed_items_are_the_ones_the_table_names(bundles: dict[str, Path]) -> None:
    """Guards the table above against a fixture change."""
    for key, kind, ref, plausible in LISTED:
        _, e = find(repack.open_bundle(bundles[key]).bundle, kind, ref)
        assert e["reason"] in plausible, (key, kind, ref, e)


@pytest.mark.parametrize(("key", "kind", "ref", "reason"), RELIST_REASON)
def test_a_listed_item_relisted_under_another_reason_fails(
    bundles: dict[str, Path], tmp_path: Path, key: str, kind: str, ref: str, reason: str
) -> None:
    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        old = remove(bundle, kind, ref)
        put(bundle, *entry(kind, ref, old["digest"], reason))

    assert_fails(attack(bundles, key, tmp_path, edit))


@pytest.mark.parametrize(("key", "kind", "ref", "other"), RELIST_KIND)
def test_a_listed_item_relisted_under_another_kind_fails(
    bundles: dict[str, Path], tmp_path: Path, key: str, kind: str, ref: str, other: str
) -> None:
    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        old = remove(bundle, kind, ref)
        bundle[group_of(old["reason"])].append({**old, "kind": other})
        bundle[group_of(old["reason"])].sort(key=lambda e: (e["kind"], e["ref"]))

    assert_fails(attack(bundles, key, tmp_path, edit))


# ------------------------------------------------------------ items the bundle holds

MANIFEST_KEY = "rpt-evidence-manifest/alice"


def present_items(eb: repack.EditableBag) -> list[tuple[str, str, str | None, str]]:
    """(kind, ref, pinned digest, bag path) of one item of each kind the bundle holds."""
    b = eb.bundle
    body = eb.json("data/report/body.json")
    scorer = b["scorers"][0]
    dataset = b["datasets"][0]
    example = next(e for e in dataset["examples"] if e["path"])
    check = b["checks"][0]
    case = canonical.loads(eb.lines(check["cases"]["path"])[0])
    artifact = next(e for e in case["evidence"] if e["kind"] == "artifact")
    manifest = body["checks"][0]["evidence_refs"][0]
    assert manifest["kind"] == "manifest"
    hexd = manifest["digest"].removeprefix("sha256:")
    return [
        ("report", b["report"]["report_id"], b["report"]["digest"], b["report"]["path"]),
        (
            "suite",
            f"{b['suite']['suite_id']}@{b['suite']['version']}",
            b["suite"]["digest"],
            b["suite"]["path"],
        ),
        (
            "scorer",
            f"{scorer['scorer_id']}@{scorer['version']}",
            scorer["digest"],
            f"{scorer['path']}/scorer.json",
        ),
        (
            "dataset",
            f"{dataset['dataset_id']}@{dataset['version']}",
            dataset["digest"],
            dataset["path"],
        ),
        (
            "example",
            f"{dataset['dataset_id']}@{dataset['version']}/{example['example_id']}",
            example["digest"],
            example["path"],
        ),
        ("check", check["check_id"], check["digest"], check["path"]),
        ("cases", check["check_id"], check["cases"]["digest"], check["cases"]["path"]),
        (
            "output",
            case["output"]["digest"],
            case["output"]["digest"],
            "data/blobs/sha256/" + case["output"]["digest"].removeprefix("sha256:"),
        ),
        (
            "artifact",
            artifact["digest"],
            artifact["digest"],
            "data/blobs/sha256/" + artifact["digest"].removeprefix("sha256:"),
        ),
        ("evidence_manifest", manifest["digest"], manifest["digest"], f"data/blobs/sha256/{hexd}"),
    ]


PRESENT_KINDS = [k for k in KINDS if k != "trace"]


@pytest.mark.parametrize("reason", REASONS)
@pytest.mark.parametrize("kind", PRESENT_KINDS)
def test_an_item_the_bundle_holds_listed_under_any_reason_fails(
    bundles: dict[str, Path], tmp_path: Path, kind: str, reason: str
) -> None:
    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        item = next(i for i in present_items(eb) if i[0] == kind)
        put(bundle, *entry(kind, item[1], item[2], reason))

    assert_fails(attack(bundles, MANIFEST_KEY, tmp_path, edit))


def manifest_digest(eb: repack.EditableBag) -> str:
    return next(i for i in present_items(eb) if i[0] == "evidence_manifest")[2]  # type: ignore[return-value]


def drop_manifest(eb: repack.EditableBag) -> str:
    digest = manifest_digest(eb)
    del eb.files["data/blobs/sha256/" + digest.removeprefix("sha256:")]
    return digest


MANIFEST_PLAUSIBLE = {
    ("evidence_manifest", "missing_from_store"),
    ("evidence_manifest", "digest_mismatch"),
}


@pytest.mark.parametrize(
    ("kind", "reason"),
    [(k, r) for k in KINDS for r in REASONS if (k, r) not in MANIFEST_PLAUSIBLE],
)
def test_an_absent_evidence_manifest_explained_any_other_way_fails(
    bundles: dict[str, Path], tmp_path: Path, kind: str, reason: str
) -> None:
    """An evidence manifest is always exported: only its absence or its bytes explain it."""

    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        digest = drop_manifest(eb)
        put(bundle, *entry(kind, digest, digest, reason))

    assert_fails(attack(bundles, MANIFEST_KEY, tmp_path, edit))


def test_an_absent_evidence_manifest_listed_missing_from_store_verifies(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    """The control of the table above: the listing the contract allows is accepted."""

    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        digest = drop_manifest(eb)
        put(bundle, *entry("evidence_manifest", digest, digest, "missing_from_store"))

    result = attack(bundles, MANIFEST_KEY, tmp_path, edit)
    assert result.verdict is Verdict.VERIFIED, describe(result)


@pytest.mark.parametrize("location", ["sso", "inline"])
def test_an_evidence_manifest_laundered_through_a_crafted_case_output_fails(
    bundles: dict[str, Path], tmp_path: Path, location: str
) -> None:
    """A case output that names the manifest's digest at SSO cannot make it payload_at_sso."""

    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        digest = drop_manifest(eb)
        path = bundle["checks"][0]["cases"]["path"]
        lines = eb.lines(path)
        case = canonical.loads(lines[0])
        old = case["output"]["digest"]
        case["output"] = {
            "kind": "output",
            "digest": digest,
            "location": location,
            "size": 3 * 262_144 if location == "sso" else 100,
        }
        lines[0] = canonical.dumps(case)
        eb.set_lines(path, lines)
        blob = "data/blobs/sha256/" + old.removeprefix("sha256:")
        eb.files.pop(blob, None)
        put(bundle, *entry("output", digest, digest, "payload_at_sso"))

    assert_fails(attack(bundles, MANIFEST_KEY, tmp_path, edit))


# ------------------------------------------------------- pinned and observed digests


# Items the fixtures list with a null digest (nothing pins them): only "another digest"
# applies to them; a redacted entry's digest cannot be null (schema).
NO_PIN = {("check", "latency"), ("cases", "latency"), ("example", "ds-qa@1/qa-9999")}
REPIN = [
    pytest.param(key, kind, ref, digest, id=f"{key}-{kind}-{_short(ref)}-{digest}")
    for key, kind, ref, plausible in LISTED
    for digest in ("other", "null")
    if digest == "other" or ((kind, ref) not in NO_PIN and not plausible <= set(REDACTED))
]


@pytest.mark.parametrize(("key", "kind", "ref", "digest"), REPIN)
def test_a_listed_digest_that_is_not_the_pinned_one_fails(
    bundles: dict[str, Path], tmp_path: Path, key: str, kind: str, ref: str, digest: str
) -> None:
    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        find(bundle, kind, ref)[1]["digest"] = OTHER_DIGEST if digest == "other" else None

    assert_fails(attack(bundles, key, tmp_path, edit))


@pytest.mark.parametrize(
    ("key", "kind", "ref", "reason"),
    [
        ("rpt-scorer-drift/alice", "scorer", "sc-drift@1", "scorer_digest_mismatch"),
        ("rpt-scorer-drift/alice", "scorer", "sc-legacy@2", "scorer_digest_mismatch"),
        ("rpt-every-reason/alice", "artifact", EVERY_MISMATCH, "digest_mismatch"),
        ("rpt-every-reason/alice", "artifact", EVERY_MISSING, "digest_mismatch"),
        ("rpt-retention/alice", "example", "ds-retained@1/rt-0000", "digest_mismatch"),
    ],
)
def test_a_mismatch_whose_observed_digest_is_the_pinned_one_fails(
    bundles: dict[str, Path], tmp_path: Path, key: str, kind: str, ref: str, reason: str
) -> None:
    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        e = find(bundle, kind, ref)[1]
        e["reason"] = reason
        e["detail"] = e["digest"]

    assert_fails(attack(bundles, key, tmp_path, edit))


@pytest.mark.parametrize("detail", [None, "", "observed", "SHA256:" + "A" * 64])
def test_a_digest_mismatch_without_an_observed_digest_fails(
    bundles: dict[str, Path], tmp_path: Path, detail: str | None
) -> None:
    """docs/format.md: detail holds the observed digest for digest_mismatch."""

    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        find(bundle, "artifact", EVERY_MISMATCH)[1]["detail"] = detail

    assert_fails(attack(bundles, "rpt-every-reason/alice", tmp_path, edit))


def drop_suite(eb: repack.EditableBag, bundle: dict[str, Any]) -> tuple[str, str]:
    suite = bundle["suite"]
    del eb.files[suite["path"]]
    suite["path"] = None
    return f"{suite['suite_id']}@{suite['version']}", suite["digest"]


def test_an_absent_suite_listed_with_its_pinned_digest_verifies(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    """The control: SPEC allows a suite to be unavailable (docs/format.md: path null)."""

    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        ref, digest = drop_suite(eb, bundle)
        put(bundle, *entry("suite", ref, digest, "missing_from_store"))

    result = attack(bundles, "rpt-clean/alice", tmp_path, edit)
    assert result.verdict is Verdict.VERIFIED, describe(result)


@pytest.mark.parametrize("where", ["listing", "listing-and-bundle-json"])
@pytest.mark.parametrize("digest", [OTHER_DIGEST, None])
@pytest.mark.parametrize("reason", ["missing_from_store", "digest_mismatch"])
def test_an_absent_suite_listed_with_another_digest_fails(
    bundles: dict[str, Path], tmp_path: Path, digest: str | None, reason: str, where: str
) -> None:
    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        ref, _ = drop_suite(eb, bundle)
        if where == "listing-and-bundle-json":
            bundle["suite"]["digest"] = digest or OTHER_DIGEST
        put(bundle, *entry("suite", ref, digest, reason))

    assert_fails(attack(bundles, "rpt-clean/alice", tmp_path, edit))


@pytest.mark.parametrize("digest", [OTHER_DIGEST, None])
def test_an_absent_dataset_listed_with_another_digest_fails(
    bundles: dict[str, Path], tmp_path: Path, digest: str | None
) -> None:
    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        dataset = bundle["datasets"][0]
        del eb.files[dataset["path"]]
        ref = f"{dataset['dataset_id']}@{dataset['version']}"
        put(bundle, *entry("dataset", ref, digest, "missing_from_store"))

    assert_fails(attack(bundles, "rpt-clean/alice", tmp_path, edit))


# ------------------------------------------------------ permissions, counts, duplicates


@pytest.mark.parametrize("key", ["rpt-clean/bob", "rpt-every-reason/bob"])
def test_no_dataset_read_body_when_the_permissions_include_it_fails(
    bundles: dict[str, Path], tmp_path: Path, key: str
) -> None:
    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        bundle["exporter"]["permissions"] = sorted(
            {*bundle["exporter"]["permissions"], "dataset.read_body"}
        )

    assert_fails(attack(bundles, key, tmp_path, edit))


@pytest.mark.parametrize("check", [0, 1, 2])
@pytest.mark.parametrize("detail", ["1", "12", "20000"])
def test_case_limit_where_the_counts_show_no_cut_fails(
    bundles: dict[str, Path], tmp_path: Path, check: int, detail: str
) -> None:
    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        check_id = bundle["checks"][check]["check_id"]
        put(
            bundle,
            "unavailable",
            {
                "kind": "cases",
                "ref": check_id,
                "digest": None,
                "reason": "case_limit",
                "detail": detail,
            },
        )

    assert_fails(attack(bundles, "rpt-clean/alice", tmp_path, edit))


@pytest.mark.parametrize("kind", ["check", "example", "output", "suite"])
def test_case_limit_for_a_kind_other_than_cases_fails(
    bundles: dict[str, Path], tmp_path: Path, kind: str
) -> None:
    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        ref = {
            "check": "latency",
            "example": "ds-qa@1/qa-9999",
            "output": EVERY_SSO,
            "suite": f"{bundle['suite']['suite_id']}@{bundle['suite']['version']}",
        }[kind]
        if kind in ("check", "example", "output"):
            remove(bundle, kind, ref)
        else:
            drop_suite(eb, bundle)
        put(
            bundle,
            "unavailable",
            {"kind": kind, "ref": ref, "digest": None, "reason": "case_limit", "detail": "3"},
        )

    assert_fails(attack(bundles, "rpt-every-reason/alice", tmp_path, edit))


DUPLICATES: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    (
        "same unavailable entry twice",
        lambda b: put(b, "unavailable", dict(find(b, "output", EVERY_SSO)[1])),
    ),
    (
        "same redacted entry twice",
        lambda b: put(b, "redacted", dict(find(b, "trace", EVERY_TRACE)[1])),
    ),
    (
        "same item under two reasons",
        lambda b: put(b, *entry("artifact", EVERY_MISSING, EVERY_MISSING, "digest_mismatch")),
    ),
    (
        "same item unavailable and redacted",
        lambda b: put(b, *entry("output", EVERY_SSO, EVERY_SSO, "no_dataset_read_body")),
    ),
    (
        "same payload digest under two kinds",
        lambda b: put(b, *entry("output", EVERY_MISSING, EVERY_MISSING, "missing_from_store")),
    ),
    (
        "same payload digest as artifact and trace",
        lambda b: put(b, *entry("artifact", EVERY_TRACE, EVERY_TRACE, "missing_from_store")),
    ),
    ("same check twice", lambda b: put(b, "unavailable", dict(find(b, "check", "latency")[1]))),
    (
        "same scorer twice, other reason",
        lambda b: put(
            b,
            *entry(
                "scorer",
                "sc-legacy@2",
                find(b, "scorer", "sc-legacy@2")[1]["digest"],
                "missing_from_store",
            ),
        ),
    ),
    (
        "same example twice, other reason",
        lambda b: put(
            b,
            *entry(
                "example",
                "ds-retained@1/rt-0000",
                find(b, "example", "ds-retained@1/rt-0000")[1]["digest"],
                "missing_from_store",
            ),
        ),
    ),
]


@pytest.mark.parametrize("edit", [d[1] for d in DUPLICATES], ids=[d[0] for d in DUPLICATES])
def test_an_item_listed_twice_fails(
    bundles: dict[str, Path], tmp_path: Path, edit: Callable[[dict[str, Any]], None]
) -> None:
    assert_fails(attack(bundles, "rpt-every-reason/alice", tmp_path, lambda eb, b: edit(b)))


@pytest.mark.parametrize("kind", KINDS)
def test_a_listing_of_something_nothing_refers_to_fails(
    bundles: dict[str, Path], tmp_path: Path, kind: str
) -> None:
    """A listed ref the report, manifests and cases never name is not an explanation."""
    ref = {
        "suite": "suite-other@1",
        "scorer": "sc-other@1",
        "dataset": "ds-other@1",
        "example": "ds-qa@1/qa-7777",
        "check": "nonexistent",
        "cases": "nonexistent",
        "report": "rpt-other",
    }.get(kind, OTHER_DIGEST)

    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        put(bundle, *entry(kind, ref, OTHER_DIGEST, "missing_from_store"))

    assert_fails(attack(bundles, "rpt-every-reason/alice", tmp_path, edit))


# --------------------------------------------------------------------- ref spellings


def _digits(table: str) -> Callable[[str], str]:
    return lambda v: "".join(table[int(c)] for c in v)


FULLWIDTH = "".join(chr(0xFF10 + i) for i in range(10))  # U+FF10..U+FF19
ARABIC_INDIC = "".join(chr(0x0660 + i) for i in range(10))  # U+0660..U+0669
SUPERSCRIPT = "\u2070\u00b9\u00b2\u00b3" + "".join(chr(0x2074 + i) for i in range(6))
VERSION_SPELLINGS: dict[str, Callable[[str], str]] = {
    "leading-zero": lambda v: "0" + v,
    "fullwidth": _digits(FULLWIDTH),
    "arabic-indic": _digits(ARABIC_INDIC),
    "superscript": _digits(SUPERSCRIPT),
    "plus": lambda v: "+" + v,
    "leading-space": lambda v: " " + v,
    "trailing-space": lambda v: v + " ",
    "decimal": lambda v: v + ".0",
    "exponent": lambda v: v + "e0",
    "underscore": lambda v: v + "_",
}
ID_SPELLINGS: dict[str, Callable[[str], str]] = {
    "upper": str.upper,
    "title": str.title,
    "fullwidth-first": lambda s: chr(ord(s[0]) + 0xFEE0) + s[1:],
    "combining-acute": lambda s: s + "\u0301",
    "leading-space": lambda s: " " + s,
    "trailing-space": lambda s: s + " ",
    "zero-width-space": lambda s: s[:1] + "\u200b" + s[1:],
}
DIGEST_SPELLINGS: dict[str, Callable[[str], str]] = {
    "upper-hex": lambda d: "sha256:" + d.removeprefix("sha256:").upper(),
    "upper-all": str.upper,
    "no-prefix": lambda d: d.removeprefix("sha256:"),
    "other-prefix": lambda d: "sha-256:" + d.removeprefix("sha256:"),
    "trailing-space": lambda d: d + " ",
    "fullwidth-hex-digit": lambda d: d[:-1] + (chr(ord(d[-1]) + 0xFEE0)),
    "one-hex-upper": lambda d: d.replace(
        next(c for c in d[7:] if c in "abcdef"), next(c for c in d[7:] if c in "abcdef").upper(), 1
    ),
}


def respellings(kind: str, ref: str) -> dict[str, str]:
    """Every other spelling of ``ref``; each must differ from it."""
    out: dict[str, str] = {}
    if ref.startswith("sha256:"):
        for name, f in DIGEST_SPELLINGS.items():
            out[name] = f(ref)
    elif "@" in ref:
        head, _, rest = ref.partition("@")
        version, sep, tail = rest.partition("/")
        for name, f in VERSION_SPELLINGS.items():
            out[f"version-{name}"] = f"{head}@{f(version)}{sep}{tail}"
        for name, f in ID_SPELLINGS.items():
            out[f"id-{name}"] = f"{f(head)}@{version}{sep}{tail}"
            if tail:
                out[f"example-{name}"] = f"{head}@{version}/{f(tail)}"
        if tail:
            out["double-slash"] = f"{head}@{version}//{tail}"
            out["dot-segment"] = f"{head}@{version}/./{tail}"
    else:
        for name, f in ID_SPELLINGS.items():
            out[name] = f(ref)
    return {k: v for k, v in out.items() if v != ref}


RESPELL_LISTED = [
    pytest.param(key, kind, ref, spelled, id=f"{key}-{kind}-{_short(ref)}-{name}")
    for key, kind, ref, _ in LISTED
    for name, spelled in respellings(kind, ref).items()
]


@pytest.mark.parametrize(("key", "kind", "ref", "spelled"), RESPELL_LISTED)
def test_a_listed_ref_spelled_another_way_fails(
    bundles: dict[str, Path], tmp_path: Path, key: str, kind: str, ref: str, spelled: str
) -> None:
    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        old = remove(bundle, kind, ref)
        bundle[group_of(old["reason"])].append({**old, "ref": spelled})
        bundle[group_of(old["reason"])].sort(key=lambda e: (e["kind"], e["ref"]))

    assert_fails(attack(bundles, key, tmp_path, edit))


# A reason the contract gives each kind, for listing an item the bundle holds.
REASON_FOR = {
    "report": "missing_from_store",
    "suite": "missing_from_store",
    "scorer": "scorer_version_missing",
    "dataset": "missing_from_store",
    "example": "removed_by_retention",
    "check": "missing_from_store",
    "cases": "case_limit",
    "output": "payload_at_sso",
    "artifact": "payload_at_sso",
    "evidence_manifest": "missing_from_store",
}


PRESENT_REFS = {
    "report": "rpt-evidence-manifest",
    "suite": "suite-evidence@1",
    "scorer": "sc-exact@1",
    "dataset": "ds-qa@1",
    "example": "ds-qa@1/qa-0000",
    "check": "accuracy",
    "cases": "accuracy",
}
RESPELL_PRESENT = [
    pytest.param(kind, name, id=f"{kind}-{name}")
    for kind in REASON_FOR
    for name in respellings(kind, PRESENT_REFS.get(kind, "sha256:" + "ab" * 32))
]


@pytest.mark.parametrize(("kind", "name"), RESPELL_PRESENT)
def test_an_item_the_bundle_holds_listed_under_another_spelling_fails(
    bundles: dict[str, Path], tmp_path: Path, kind: str, name: str
) -> None:
    """The body is in the bundle, and the listing names it in a spelling nothing matches."""

    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        _, ref, digest, _ = next(i for i in present_items(eb) if i[0] == kind)
        spelled = respellings(kind, ref)[name]
        put(bundle, *entry(kind, spelled, digest, REASON_FOR[kind]))

    assert_fails(attack(bundles, MANIFEST_KEY, tmp_path, edit))


@pytest.mark.parametrize("name", ["leading-zero", "fullwidth", "arabic-indic", "superscript"])
def test_a_retained_example_whose_body_is_present_under_a_respelled_ref_fails(
    bundles: dict[str, Path], tmp_path: Path, name: str
) -> None:
    """The issue's example: removed_by_retention for a body the bundle holds."""

    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        dataset = next(d for d in bundle["datasets"] if d["dataset_id"] == "ds-retained")
        example = next(e for e in dataset["examples"] if e["path"])
        version = VERSION_SPELLINGS[name](str(dataset["version"]))
        ref = f"ds-retained@{version}/{example['example_id']}"
        put(
            bundle,
            "unavailable",
            {
                "kind": "example",
                "ref": ref,
                "digest": example["digest"],
                "reason": "removed_by_retention",
                "detail": None,
            },
        )

    assert_fails(attack(bundles, "rpt-retention/alice", tmp_path, edit))


# ------------------------------------------- no command crashes on a respelled listing

NON_ASCII = ["fullwidth", "arabic-indic", "superscript"]
CRASH_TARGETS = [
    ("rpt-retention/alice", "example", "ds-retained@1/rt-0000"),
    ("rpt-scorer-drift/alice", "scorer", "sc-drift@1"),
]


def respelled_bundle(
    bundles: dict[str, Path], tmp_path: Path, key: str, kind: str, ref: str, name: str
) -> Path:
    eb = repack.open_bundle(bundles[key])
    bundle = eb.bundle
    old = remove(bundle, kind, ref)
    head, _, rest = ref.partition("@")
    version, sep, tail = rest.partition("/")
    spelled = f"{head}@{VERSION_SPELLINGS[name](version)}{sep}{tail}"
    put(bundle, group_of(old["reason"]), {**old, "ref": spelled})
    eb.set_bundle(bundle)
    return seal(eb, tmp_path, "respelled")


def first_case_id(path: Path) -> str:
    eb = repack.open_bundle(path)
    check = eb.bundle["checks"][0]
    return canonical.loads(eb.lines(check["cases"]["path"])[0])["case_id"]


@pytest.mark.parametrize(("key", "kind", "ref"), CRASH_TARGETS)
@pytest.mark.parametrize("name", NON_ASCII)
def test_non_ascii_version_digits_crash_nothing_in_process(
    bundles: dict[str, Path], tmp_path: Path, key: str, kind: str, ref: str, name: str
) -> None:
    from bundler.bundles.proof import prove_case

    path = respelled_bundle(bundles, tmp_path, key, kind, ref, name)
    assert_fails(run_verify(path))
    with pytest.raises(BundlerError):
        prove_case(str(path), first_case_id(path))


@pytest.mark.parametrize(("key", "kind", "ref"), CRASH_TARGETS)
@pytest.mark.parametrize("name", NON_ASCII)
@pytest.mark.parametrize("command", ["verify", "inspect", "extract", "prove", "audit"])
def test_non_ascii_version_digits_crash_no_command(
    bundles: dict[str, Path],
    tmp_path: Path,
    key: str,
    kind: str,
    ref: str,
    name: str,
    command: str,
) -> None:
    path = respelled_bundle(bundles, tmp_path, key, kind, ref, name)
    args = {
        "verify": ["verify", str(path)],
        "inspect": ["inspect", str(path)],
        "extract": ["extract", str(path), str(tmp_path / "out")],
        "prove": ["prove", str(path), "--case", first_case_id(path)],
        "audit": ["audit", str(path)],
    }[command]
    proc = subprocess.run([*CLI, *args], capture_output=True, timeout=120, check=False)
    stderr = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr, stderr
    allowed = {0, 1, 3} if command == "inspect" else {1, 3}
    assert proc.returncode in allowed, (proc.returncode, stderr[-2000:])
    if command == "verify":
        assert proc.returncode == 1, stderr[-2000:]
    if command == "extract":
        out = tmp_path / "out"
        assert not out.exists() or not any(out.iterdir()), sorted(out.rglob("*"))


def test_a_tampered_listing_fails_through_the_cli(bundles: dict[str, Path], tmp_path: Path) -> None:
    """A sample of the table through the command line: exit 1, one-line, no traceback."""

    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        digest = drop_manifest(eb)
        put(bundle, *entry("evidence_manifest", digest, digest, "payload_at_sso"))

    eb = repack.open_bundle(bundles[MANIFEST_KEY])
    bundle = eb.bundle
    edit(eb, bundle)
    eb.set_bundle(bundle)
    path = seal(eb, tmp_path)
    proc = subprocess.run(
        [*CLI, "verify", str(path)], capture_output=True, timeout=120, check=False
    )
    assert b"Traceback" not in proc.stderr, proc.stderr.decode()
    assert proc.returncode == 1, (proc.stdout + proc.stderr).decode()[-2000:]


# ------------------------------------------------- absent inline outputs, absent suites


def drop_inline_output(eb: repack.EditableBag) -> str:
    """Delete the blob of the first case's (inline) output; return its digest."""
    check = eb.bundle["checks"][0]
    case = canonical.loads(eb.lines(check["cases"]["path"])[0])
    assert case["output"]["location"] == "inline"
    digest = case["output"]["digest"]
    del eb.files["data/blobs/sha256/" + digest.removeprefix("sha256:")]
    return digest


@pytest.mark.parametrize(
    "reason", [r for r in REASONS if r not in ("missing_from_store", "digest_mismatch")]
)
@pytest.mark.parametrize("kind", ["output", "artifact", "trace", "evidence_manifest"])
def test_an_absent_inline_output_explained_any_other_way_fails(
    bundles: dict[str, Path], tmp_path: Path, kind: str, reason: str
) -> None:
    """An inline output that is gone is missing or mismatched, and listed as an output."""

    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        digest = drop_inline_output(eb)
        put(bundle, *entry(kind, digest, digest, reason))

    assert_fails(attack(bundles, "rpt-clean/alice", tmp_path, edit))


@pytest.mark.parametrize("kind", ["artifact", "trace", "evidence_manifest"])
@pytest.mark.parametrize("reason", ["missing_from_store", "digest_mismatch"])
def test_an_absent_inline_output_listed_under_another_kind_fails(
    bundles: dict[str, Path], tmp_path: Path, kind: str, reason: str
) -> None:
    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        digest = drop_inline_output(eb)
        put(bundle, *entry(kind, digest, digest, reason))

    assert_fails(attack(bundles, "rpt-clean/alice", tmp_path, edit))


@pytest.mark.parametrize(
    "name", [*(f"version-{n}" for n in VERSION_SPELLINGS), *(f"id-{n}" for n in ID_SPELLINGS)]
)
def test_an_absent_suite_listed_under_another_spelling_fails(
    bundles: dict[str, Path], tmp_path: Path, name: str
) -> None:
    def edit(eb: repack.EditableBag, bundle: dict[str, Any]) -> None:
        ref, digest = drop_suite(eb, bundle)
        put(bundle, *entry("suite", respellings("suite", ref)[name], digest, "missing_from_store"))

    assert_fails(attack(bundles, "rpt-clean/alice", tmp_path, edit))
