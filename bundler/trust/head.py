"""The bundle head (SPEC 11.2) and the bag's tag files, derived from bundle.json alone.

Both exporters write them and every verifier recomputes them, so they live here, below
the two bundle kinds: the head is what a signature covers and what a case proof carries.
"""

from __future__ import annotations

from typing import Any

from bundler.archive import bag

HEAD_SCHEMA = "evalbook.bundle_head.v1"
HEAD_FILE = "bundle-head.json"
HEAD_SIG_FILE = "bundle-head.json.sig"


def bundle_head(bundle: dict[str, Any], bundle_digest: str) -> dict[str, Any]:
    """The bundle head of SPEC 11.2, derived from bundle.json alone."""
    report = bundle["report"] if "report" in bundle else bundle["run"]
    return {
        "schema": HEAD_SCHEMA,
        "bundle_digest": bundle_digest,
        "report_id": report.get("report_id", report.get("run_id")),
        "report_digest": report["digest"],
        "exported_at": bundle["exported_at"],
        "cases_tree": bundle["cases_tree"],
    }


TAG_FILES = frozenset(
    {
        bag.BAGIT,
        bag.BAG_INFO,
        bag.MANIFEST,
        bag.TAG_MANIFEST,
        "bundle-head.json",
        "bundle-head.json.sig",
    }
)


def bag_info_bytes(
    bundle: dict[str, Any], bundle_digest: str, payload_bytes: int, file_count: int
) -> bytes:
    """bag-info.txt, derived from bundle.json alone; the verifier expects exactly these bytes."""
    head = bundle_head(bundle, bundle_digest)
    return bag.bag_info(
        [
            ("Bag-Software-Agent", f"{bundle['exporter']['tool']} {bundle['exporter']['version']}"),
            ("Bagging-Date", bundle["exported_at"][:10]),
            ("Bundle-Digest", bundle_digest),
            ("Bundle-Schema", bundle["schema"]),
            ("External-Identifier", str(head["report_id"])),
            ("Payload-Oxum", bag.payload_oxum(payload_bytes, file_count)),
            ("Report-Digest", head["report_digest"]),
        ]
    )
