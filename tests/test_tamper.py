"""Tampering is detected (SPEC sections 4 and 5).

Two kinds of change: any single byte of the tar (a property, and a sweep over the header
blocks), and "deep" edits made with ``repack`` that keep BagIt and bundle.json
self-consistent, so that only the claim about the edited item can catch them. For each
deep edit the test names the claim group (``Claim.group``) that must fail. Edits that
only a trust anchor can catch are shown to verify alone and to fail with the anchor.
"""

from __future__ import annotations

import hashlib
import io
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import repack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundler.archive.tarwriter import BLOCK
from bundler.bundles.verify import verify_bundle
from bundler.core import canonical
from bundler.core.claims import State, Verdict, Verification, VerifyOptions

PROPERTY_BUNDLE = "rpt-clean/alice"
SWEEP_BUNDLE = "rpt-retention/bob"


def verify_bytes(archive: bytes, options: VerifyOptions | None = None) -> Verification:
    """Verify an archive held in memory."""
    return verify_bundle("tampered.tar.zst", options or VerifyOptions(), stream=io.BytesIO(archive))


def failed_groups(result: Verification) -> set[int]:
    return {c.group for c in result.claims if c.state is State.FAILED}


def describe(result: Verification) -> list[str]:
    return [f"[{c.group}] {c.subject}: {c.detail}" for c in result.failures()] or [
        str(result.error)
    ]


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------- single bytes


@pytest.fixture(scope="module")
def property_tar(bundles: dict[str, Path]) -> bytes:
    return repack.archive_tar(bundles[PROPERTY_BUNDLE])


@pytest.fixture(scope="module")
def sweep_tar(bundles: dict[str, Path]) -> bytes:
    return repack.archive_tar(bundles[SWEEP_BUNDLE])


def test_repack_without_changes_reproduces_the_exporters_tar(bundles: dict[str, Path]) -> None:
    """repack's member order and tag files are the exporter's: a no-op repack is byte-identical."""
    for key, path in bundles.items():
        eb = repack.open_bundle(path)
        assert repack.repack(eb) == repack.archive_tar(path), key


def test_the_untouched_tar_verifies(property_tar: bytes, sweep_tar: bytes) -> None:
    """The baseline of the properties below: recompressing alone changes nothing."""
    for tar in (property_tar, sweep_tar):
        assert verify_bytes(repack.compress(tar)).verdict is Verdict.VERIFIED


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rnd=st.randoms(use_true_random=True))
def test_any_single_byte_change_is_never_verified(property_tar: bytes, rnd: random.Random) -> None:
    # A seeded random.Random, unlike st.integers, spreads positions uniformly over the tar
    # instead of favouring the first blocks.
    position = rnd.randrange(len(property_tar))
    mutated = bytearray(property_tar)
    mutated[position] = rnd.choice([v for v in range(256) if v != property_tar[position]])
    result = verify_bytes(repack.compress(bytes(mutated)))
    assert result.verdict in (Verdict.ERROR, Verdict.FAILED), (
        f"byte {position} changed, still verified"
    )


def test_first_byte_of_every_header_block(sweep_tar: bytes) -> None:
    headers = repack.header_blocks(sweep_tar)
    assert len(headers) > 20
    for header in headers:
        mutated = bytearray(sweep_tar)
        mutated[header.offset] ^= 0x01
        result = verify_bytes(repack.compress(bytes(mutated)))
        # The header checksum no longer matches: the archive is refused outright.
        assert result.verdict is Verdict.ERROR, (header.name, describe(result))
        assert f"offset {header.offset}" in (result.error or ""), result.error


def with_checksum(block: bytes) -> bytes:
    """A header block with its checksum recomputed the way tar writers spell it."""
    raw = bytearray(block)
    raw[148:156] = b" " * 8
    raw[148:156] = b"%06o\0 " % sum(raw)
    return bytes(raw)


def test_renaming_any_member_with_a_valid_header_is_never_verified(sweep_tar: bytes) -> None:
    """The last byte of each name changed and the header checksum recomputed."""
    for header in repack.header_blocks(sweep_tar):
        block = sweep_tar[header.offset : header.offset + BLOCK]
        end = block[:100].find(b"\0")
        end = 100 if end < 0 else end  # a 100-byte name field has no NUL
        last = end - 2 if block[end - 1 : end] == b"/" else end - 1
        renamed = bytearray(block)
        renamed[last] = ord("Q") if renamed[last] != ord("Q") else ord("R")
        mutated = (
            sweep_tar[: header.offset]
            + with_checksum(bytes(renamed))
            + sweep_tar[header.offset + BLOCK :]
        )
        result = verify_bytes(repack.compress(mutated))
        assert result.verdict is not Verdict.VERIFIED, header.name


@pytest.mark.parametrize(("field_offset", "value"), [(148, b" "), (154, b" "), (155, b"\0")])
def test_respelling_a_header_checksum_is_detected(
    sweep_tar: bytes, field_offset: int, value: bytes
) -> None:
    """The checksum field as written is '%06o\\0 '; a leading space or a swapped NUL/space
    reads as the same number, so the header still checks, yet the archive differs by one
    byte and must not verify."""
    header = repack.header_blocks(sweep_tar)[3]
    field = sweep_tar[header.offset + 148 : header.offset + 156]
    assert field[0:1] == b"0" and field[6:8] == b"\0 ", field
    mutated = bytearray(sweep_tar)
    mutated[header.offset + field_offset] = value[0]
    assert bytes(mutated) != sweep_tar
    result = verify_bytes(repack.compress(bytes(mutated)))
    assert result.verdict is not Verdict.VERIFIED, (
        f"checksum field {bytes(mutated[header.offset + 148 : header.offset + 156])!r} accepted"
    )


# -------------------------------------------------------------------- deep changes


Edit = Callable[[repack.EditableBag], None]


def deep(bundles: dict[str, Path], key: str, edit: Edit, **options: Any) -> Verification:
    """Apply ``edit`` to a fixture bundle, recompute everything, and verify the result."""
    eb = repack.open_bundle(bundles[key])
    edit(eb)
    tar = repack.repack(eb)
    return verify_bytes(repack.compress(tar), VerifyOptions(**options))


def original_digests(bundles: dict[str, Path], key: str) -> tuple[str, str]:
    """(bundle digest, report digest) of the untouched bundle, hashed here."""
    eb = repack.open_bundle(bundles[key])
    return sha(eb.files["data/bundle.json"]), sha(eb.files["data/report/body.json"])


def assert_groups(result: Verification, *groups: int) -> None:
    assert result.verdict is Verdict.FAILED, describe(result)
    assert failed_groups(result) == set(groups), describe(result)


def first_case(eb: repack.EditableBag, check: int = 0) -> tuple[str, list[bytes], dict[str, Any]]:
    path = eb.bundle["checks"][check]["cases"]["path"]
    lines = eb.lines(path)
    return path, lines, canonical.loads(lines[0])


def edit_suite(eb: repack.EditableBag) -> None:
    eb.edit_json(
        eb.bundle["suite"]["path"], lambda s: s.update(validity_hours=s["validity_hours"] + 1)
    )


def edit_scorer_file(eb: repack.EditableBag) -> None:
    path = "data/scorers/sc-exact/1/files/score.py"
    assert b"==" in eb.files[path]
    eb.files[path] = eb.files[path].replace(b"==", b"!=")


def edit_example_body(eb: repack.EditableBag) -> None:
    path = next(e["path"] for d in eb.bundle["datasets"] for e in d["examples"] if e["path"])
    eb.edit_json(path, lambda body: body.update(expected="anything the model said"))


def edit_dataset_manifest(eb: repack.EditableBag) -> None:
    def change(manifest: dict[str, Any]) -> None:
        manifest["examples"][0]["size"] += 1

    eb.edit_json(eb.bundle["datasets"][0]["path"], change)


def test_suite_edit_fails_claim_4(bundles: dict[str, Path]) -> None:
    assert_groups(deep(bundles, "rpt-clean/alice", edit_suite), 4)


def test_scorer_file_edit_fails_claim_5(bundles: dict[str, Path]) -> None:
    assert_groups(deep(bundles, "rpt-clean/alice", edit_scorer_file), 5)


def test_example_body_edit_fails_claim_6(bundles: dict[str, Path]) -> None:
    assert_groups(deep(bundles, "rpt-clean/alice", edit_example_body), 6)


def test_dataset_manifest_edit_fails_claim_6(bundles: dict[str, Path]) -> None:
    result = deep(bundles, "rpt-clean/alice", edit_dataset_manifest)
    assert result.verdict is Verdict.FAILED
    assert 6 in failed_groups(result)
    assert any(
        c.subject.startswith("dataset ds-qa@1 manifest JSON digest") for c in result.failures()
    )


def test_dataset_manifest_edit_does_not_call_named_examples_unnamed(
    bundles: dict[str, Path],
) -> None:
    """The example bodies are named in bundle.json; a bad manifest must not make them 'unnamed'."""
    result = deep(bundles, "rpt-clean/alice", edit_dataset_manifest)
    false = [c for c in result.failures() if c.subject == "every file is named by bundle.json"]
    assert not false, [c.path for c in false]
    assert failed_groups(result) == {6}, describe(result)


# -- case lines


def rescore_first_case(eb: repack.EditableBag) -> None:
    path, lines, case = first_case(eb)
    case["status"] = "fail" if case["status"] == "pass" else "pass"
    case["score"] = 0 if case["score"] else 1
    lines[0] = canonical.dumps(case)
    eb.set_lines(path, lines)


def test_case_line_edit_with_the_cases_digest_recomputed_fails_the_case_tree(
    bundles: dict[str, Path],
) -> None:
    eb = repack.open_bundle(bundles["rpt-clean/alice"])
    tree = eb.bundle["cases_tree"]
    rescore_first_case(eb)
    repack.refresh_bundle_json(eb)
    bundle = eb.bundle
    assert bundle["cases_tree"] != tree
    bundle["cases_tree"] = tree  # the digest of the case file follows the edit, the tree does not
    eb.set_bundle(bundle)
    result = verify_bytes(repack.compress(repack.repack(eb, bundle_json=False)))
    assert_groups(result, 8)
    assert [c.subject for c in result.failures()] == ["cases_tree root"]


def test_case_line_pointing_at_another_output_fails_claims_8_and_9(
    bundles: dict[str, Path],
) -> None:
    def edit(eb: repack.EditableBag) -> None:
        path, lines, case = first_case(eb)
        case["output"]["digest"] = sha(b"an output that was never scored")
        lines[0] = canonical.dumps(case)
        eb.set_lines(path, lines)

    result = deep(bundles, "rpt-clean/alice", edit)
    # The output it used to name may also be reported as a payload nothing refers to.
    assert {8, 9} <= failed_groups(result) <= {8, 9, 10}, describe(result)


def test_case_line_not_canonical_fails_claim_8(bundles: dict[str, Path]) -> None:
    def edit(eb: repack.EditableBag) -> None:
        path, lines, _ = first_case(eb)
        lines[0] = lines[0].replace(b",", b", ", 1)
        eb.set_lines(path, lines)

    result = deep(bundles, "rpt-clean/alice", edit)
    # The unreadable line's output and example may also show as referred to by nothing.
    assert 8 in failed_groups(result) and failed_groups(result) <= {8, 9, 10}, describe(result)
    assert any("canonical" in (c.detail or "") for c in result.failures())


def test_case_line_of_another_check_fails_claim_8(bundles: dict[str, Path]) -> None:
    def edit(eb: repack.EditableBag) -> None:
        path, lines, case = first_case(eb)
        case["check_id"] = eb.bundle["checks"][1]["check_id"]
        lines[0] = canonical.dumps(case)
        eb.set_lines(path, lines)

    result = deep(bundles, "rpt-clean/alice", edit)
    assert 8 in failed_groups(result), describe(result)


def test_dropped_case_fails_claim_9(bundles: dict[str, Path]) -> None:
    def edit(eb: repack.EditableBag) -> None:
        path, lines, _ = first_case(eb)
        eb.set_lines(path, lines[1:])

    result = deep(bundles, "rpt-clean/alice", edit)
    assert 9 in failed_groups(result), describe(result)


def test_rewritten_case_line_is_caught_only_by_the_bundle_digest(bundles: dict[str, Path]) -> None:
    bundle_digest, report_digest = original_digests(bundles, "rpt-clean/alice")
    assert deep(bundles, "rpt-clean/alice", rescore_first_case).verdict is Verdict.VERIFIED
    anchored = deep(
        bundles, "rpt-clean/alice", rescore_first_case, expect_bundle_digest=bundle_digest
    )
    assert_groups(anchored, 2)
    # The report digest covers the issued body, not the cases behind it.
    by_report = deep(
        bundles, "rpt-clean/alice", rescore_first_case, expect_report_digest=report_digest
    )
    assert by_report.verdict is Verdict.VERIFIED


def test_rewritten_report_body_is_caught_only_by_an_anchor(bundles: dict[str, Path]) -> None:
    def edit(eb: repack.EditableBag) -> None:
        eb.edit_json(
            "data/report/body.json", lambda body: body.update(project=body["project"] + "-renamed")
        )

    bundle_digest, report_digest = original_digests(bundles, "rpt-clean/alice")
    assert deep(bundles, "rpt-clean/alice", edit).verdict is Verdict.VERIFIED
    assert_groups(deep(bundles, "rpt-clean/alice", edit, expect_report_digest=report_digest), 3)
    assert_groups(deep(bundles, "rpt-clean/alice", edit, expect_bundle_digest=bundle_digest), 2)


def test_envelope_edit_is_caught_only_by_the_bundle_digest(bundles: dict[str, Path]) -> None:
    """The envelope is not covered by the report digest (it changes after issue)."""

    def edit(eb: repack.EditableBag) -> None:
        eb.edit_json(
            "data/report/envelope.json",
            lambda env: env.update(
                status="superseded",
                superseded_by="rpt-elsewhere",
                superseded_at="2026-11-01T00:00:00Z",
                superseded_reason="re_evaluation",
            ),
        )

    bundle_digest, report_digest = original_digests(bundles, "rpt-clean/alice")
    plain = deep(bundles, "rpt-clean/alice", edit)
    assert plain.verdict is Verdict.VERIFIED
    assert (
        deep(bundles, "rpt-clean/alice", edit, expect_report_digest=report_digest).verdict
        is Verdict.VERIFIED
    )
    assert_groups(deep(bundles, "rpt-clean/alice", edit, expect_bundle_digest=bundle_digest), 2)


def test_check_result_edit_is_caught_by_the_bundle_digest(bundles: dict[str, Path]) -> None:
    def edit(eb: repack.EditableBag) -> None:
        eb.edit_json(eb.bundle["checks"][0]["path"], lambda r: r.update(score=0.01))

    bundle_digest, _ = original_digests(bundles, "rpt-clean/alice")
    assert_groups(deep(bundles, "rpt-clean/alice", edit, expect_bundle_digest=bundle_digest), 2)


def test_check_result_that_disagrees_with_the_report_on_required_fails_claim_7(
    bundles: dict[str, Path],
) -> None:
    """The exporter refuses a store whose check result's `required` differs from the report."""

    def edit(eb: repack.EditableBag) -> None:
        eb.edit_json(eb.bundle["checks"][0]["path"], lambda r: r.update(required=not r["required"]))

    assert_groups(deep(bundles, "rpt-clean/alice", edit), 7)


# -- accounting (claim 10)


def add_listing(eb: repack.EditableBag, group: str, entry: dict[str, Any]) -> None:
    bundle = eb.bundle
    bundle[group].append(entry)
    bundle[group].sort(key=lambda e: (e["kind"], e["ref"]))
    eb.set_bundle(bundle)


def test_inline_output_laundered_as_payload_at_sso_fails_claim_10(bundles: dict[str, Path]) -> None:
    def edit(eb: repack.EditableBag) -> None:
        _, _, case = first_case(eb)
        assert case["output"]["location"] == "inline"
        digest = case["output"]["digest"]
        del eb.files[f"data/blobs/sha256/{digest.removeprefix('sha256:')}"]
        add_listing(
            eb,
            "unavailable",
            {
                "kind": "output",
                "ref": digest,
                "digest": digest,
                "reason": "payload_at_sso",
                "detail": None,
            },
        )

    result = deep(bundles, "rpt-clean/alice", edit)
    assert_groups(result, 10)
    assert any("inline" in (c.detail or "") for c in result.failures())


def test_unnamed_file_under_data_fails_claim_10(bundles: dict[str, Path]) -> None:
    def edit(eb: repack.EditableBag) -> None:
        eb.files["data/report/notes.txt"] = b"an extra file\n"

    result = deep(bundles, "rpt-clean/alice", edit)
    assert_groups(result, 10)
    assert [c.path for c in result.failures()] == ["data/report/notes.txt"]


def test_redacted_body_included_in_a_bob_bundle_fails_claim_10(bundles: dict[str, Path]) -> None:
    alice = repack.open_bundle(bundles["rpt-clean/alice"])

    def edit(eb: repack.EditableBag) -> None:
        bundle = eb.bundle
        redacted = next(e for e in bundle["redacted"] if e["kind"] == "example")
        dataset_ref, _, example_id = redacted["ref"].partition("/")
        dataset_id, _, version = dataset_ref.partition("@")
        path = f"data/datasets/{dataset_id}/{version}/examples/{example_id}.json"
        eb.files[path] = alice.files[path]
        for dataset in bundle["datasets"]:
            for example in dataset["examples"]:
                if dataset["dataset_id"] == dataset_id and example["example_id"] == example_id:
                    example["path"] = path
        eb.set_bundle(bundle)

    result = deep(bundles, "rpt-clean/bob", edit)
    assert_groups(result, 10)
    assert any("in the bundle" in (c.detail or "") for c in result.failures())


def test_read_body_redaction_in_an_alice_bundle_fails_claim_10(bundles: dict[str, Path]) -> None:
    def edit(eb: repack.EditableBag) -> None:
        bundle = eb.bundle
        dataset = bundle["datasets"][0]
        example = dataset["examples"][0]
        del eb.files[example["path"]]
        example["path"] = None
        ref = f"{dataset['dataset_id']}@{dataset['version']}/{example['example_id']}"
        bundle["redacted"].append(
            {
                "kind": "example",
                "ref": ref,
                "digest": example["digest"],
                "reason": "no_dataset_read_body",
            }
        )
        eb.set_bundle(bundle)

    result = deep(bundles, "rpt-clean/alice", edit)
    assert_groups(result, 10)
    assert any("dataset.read_body" in (c.detail or "") for c in result.failures())


def test_case_limit_without_a_cut_fails_claim_10(bundles: dict[str, Path]) -> None:
    def edit(eb: repack.EditableBag) -> None:
        check_id = eb.bundle["checks"][0]["check_id"]
        add_listing(
            eb,
            "unavailable",
            {
                "kind": "cases",
                "ref": check_id,
                "digest": None,
                "reason": "case_limit",
                "detail": "3",
            },
        )

    result = deep(bundles, "rpt-clean/alice", edit)
    assert_groups(result, 10)
    assert any("case_limit" in (c.detail or "") for c in result.failures())


def test_case_limit_below_20000_cases_fails_claim_10(bundles: dict[str, Path]) -> None:
    """Counts that show a cut, though far fewer than 20,000 cases were exported."""
    eb = repack.open_bundle(bundles["rpt-clean/alice"])
    repack.refresh_bundle_json(eb)
    bundle = eb.bundle
    check = bundle["checks"][0]
    check["cases"]["total"] += 5
    bundle["unavailable"].append(
        {
            "kind": "cases",
            "ref": check["check_id"],
            "digest": None,
            "reason": "case_limit",
            "detail": "5",
        }
    )
    eb.set_bundle(bundle)
    result = verify_bytes(repack.compress(repack.repack(eb, bundle_json=False)))
    assert_groups(result, 10)


# -- weaknesses: deep changes that should not verify


def test_payload_nothing_refers_to_fails_claim_10(bundles: dict[str, Path]) -> None:
    """bundle.json names it as a payload, yet no case or evidence manifest refers to it."""
    smuggled = b"#!/bin/sh\necho carried along, bound to nothing the report says\n"

    def edit(eb: repack.EditableBag) -> None:
        eb.files[f"data/blobs/sha256/{hashlib.sha256(smuggled).hexdigest()}"] = smuggled

    result = deep(bundles, "rpt-clean/alice", edit)
    assert result.verdict is Verdict.FAILED and 10 in failed_groups(result), describe(result)


def test_example_body_no_case_uses_fails(bundles: dict[str, Path]) -> None:
    """bundle.json's examples are the snapshots of the examples the exported cases used."""
    donor = repack.open_bundle(bundles["rpt-clean/alice"])

    def edit(eb: repack.EditableBag) -> None:
        bundle = eb.bundle
        dataset = next(d for d in bundle["datasets"] if d["dataset_id"] == "ds-qa")
        used = {e["example_id"] for e in dataset["examples"]}
        base = f"data/datasets/ds-qa/{dataset['version']}/examples/"
        path = next(p for p in donor.files if p.startswith(base) and p[len(base) : -5] not in used)
        eb.files[path] = donor.files[path]
        dataset["examples"].append(
            {"example_id": path[len(base) : -5], "digest": sha(donor.files[path]), "path": path}
        )
        dataset["examples"].sort(key=lambda e: e["example_id"])
        eb.set_bundle(bundle)

    result = deep(bundles, "rpt-sso-traces/alice", edit)
    assert result.verdict is Verdict.FAILED, describe(result)


def test_extra_tag_file_is_not_covered_by_the_bundle_digest(bundles: dict[str, Path]) -> None:
    """A tag file at the bag root, listed in tagmanifest-sha256.txt, not bound by bundle.json."""

    def edit(eb: repack.EditableBag) -> None:
        eb.files["approval.txt"] = b"Approved for release by the audit board.\n"

    bundle_digest, _ = original_digests(bundles, "rpt-clean/alice")
    result = deep(bundles, "rpt-clean/alice", edit, expect_bundle_digest=bundle_digest)
    assert result.verdict is not Verdict.VERIFIED, (
        "an unbound tag file verified under the bundle digest"
    )


def test_edited_bag_info_is_not_covered_by_the_bundle_digest(bundles: dict[str, Path]) -> None:
    def edit(eb: repack.EditableBag) -> None:
        info = eb.files["bag-info.txt"]
        assert b"Bagging-Date: 2026-11-30\n" in info
        eb.files["bag-info.txt"] = (
            info.replace(b"Bagging-Date: 2026-11-30", b"Bagging-Date: 2024-01-01")
            + b"Source-Organization: Someone Else\n"
        )

    bundle_digest, _ = original_digests(bundles, "rpt-clean/alice")
    result = deep(bundles, "rpt-clean/alice", edit, expect_bundle_digest=bundle_digest)
    assert result.verdict is not Verdict.VERIFIED, (
        "bag-info.txt changed, yet verified under the bundle digest"
    )
