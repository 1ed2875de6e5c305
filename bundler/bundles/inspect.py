"""What a bundle of either kind holds, read through the same safe reader, without the proof.

``inspect_bundle`` reads the bag and bundle.json as verify does and reports the recorded
facts (digest, exporter, counts, labels) for ``inspect``: an EvalBook bundle's report,
suite, scorers, datasets and cases; an eval-banana bundle's run (``inspect_facts``).
Nothing here is proven; verify proves it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, BinaryIO

from bundler.archive.bag_reader import BagContents, open_members, read_bag
from bundler.bundles.verify import load_bundle
from bundler.core import canonical
from bundler.core.digests import bytes_digest
from bundler.core.errors import CanonicalJSONError
from bundler.core.limits import DEFAULT_MAX_BYTES
from bundler.evalbook.bagcheck import parse_kept
from bundler.evalbook.contract import BUNDLE_SCHEMA
from bundler.trust.head import HEAD_SIG_FILE


def inspect_bundle(
    location: str, *, max_bytes: int = DEFAULT_MAX_BYTES, stream: BinaryIO | None = None
) -> dict[str, Any]:
    """What a bundle holds, read through the same safe reader, without the proof.

    Raises BundlerError when the archive is unsafe or bundle.json is malformed.
    """
    contents = read_bag(open_members(location, max_bytes=max_bytes, stream=stream), source=location)
    bundle = load_bundle(contents)
    by_reason: dict[str, Counter[str]] = {"unavailable": Counter(), "redacted": Counter()}
    for group in by_reason:
        by_reason[group].update(e["reason"] for e in bundle[group])
    info: dict[str, Any] = {
        "source": location,
        "schema": bundle["schema"],
        "bundle_digest": bytes_digest(canonical.dumps(bundle)),
        "exported_at": bundle["exported_at"],
        "principal": bundle["exporter"].get("principal"),
        "exporter": f"{bundle['exporter']['tool']} {bundle['exporter']['version']}",
        "files": len(contents.files),
        "bytes": sum(f.size for f in contents.files.values()),
        "unavailable_by_reason": dict(sorted(by_reason["unavailable"].items())),
        "redacted_by_reason": dict(sorted(by_reason["redacted"].items())),
        # Whether the head is signed inside the bundle; inspect does not check it.
        "embedded_signature": HEAD_SIG_FILE in contents.kept,
    }
    if bundle["schema"] == BUNDLE_SCHEMA:
        body, _ = parse_kept(contents, bundle["report"]["path"], canonical_required=False)
        report = body if isinstance(body, dict) else {}
        checks = bundle["checks"]
        info.update(
            report_id=bundle["report"]["report_id"],
            report_digest=bundle["report"]["digest"],
            result=report.get("result"),
            envelope_status=bundle["report"]["envelope"]["status"],
            suite=f"{bundle['suite']['suite_id']}@{bundle['suite']['version']}",
            scorers=[f"{s['scorer_id']}@{s['version']}" for s in bundle["scorers"]],
            datasets=[f"{d['dataset_id']}@{d['version']}" for d in bundle["datasets"]],
            counts={
                "checks": len(checks),
                "cases_total": sum(c["cases"]["total"] for c in checks),
                "cases_exported": sum(c["cases"]["exported"] for c in checks),
                "payloads": len(bundle["payloads"]),
                "examples": sum(1 for d in bundle["datasets"] for e in d["examples"] if e["path"]),
            },
            labels=[
                (
                    "Report",
                    f"{bundle['report']['report_id']} (result {report.get('result')}, "
                    f"envelope {bundle['report']['envelope']['status']})",
                ),
                ("Suite", f"{bundle['suite']['suite_id']}@{bundle['suite']['version']}"),
                (
                    "Scorers",
                    ", ".join(f"{s['scorer_id']}@{s['version']}" for s in bundle["scorers"])
                    or "none",
                ),
                (
                    "Datasets",
                    ", ".join(f"{d['dataset_id']}@{d['version']}" for d in bundle["datasets"])
                    or "none",
                ),
                (
                    "Cases",
                    f"{sum(c['cases']['exported'] for c in checks)} exported of "
                    f"{sum(c['cases']['total'] for c in checks)} in {len(checks)} "
                    + ("check" if len(checks) == 1 else "checks"),
                ),
                ("Payloads", str(len(bundle["payloads"]))),
            ],
        )
    else:
        info.update(inspect_facts(contents, bundle))
    return info


def inspect_facts(contents: BagContents, bundle: dict[str, Any]) -> dict[str, Any]:
    """What ``inspect`` shows for an eval-banana bundle: recorded values, no proof.

    Keys: ``report_id`` (run id), ``report_digest``, ``run_passed`` (as recorded),
    ``project_root``, ``counts`` and ``labels`` (Run ID, Score, Percentage, Passed as
    report.json records them, then checks and definitions).
    """
    # Imported here, as in bundles.verify: an EvalBook bundle never needs the eval-banana side.
    from bundler.evalbanana.export import DEFINITIONS_PREFIX, REPORT_MEMBER, RUN_PREFIX

    run = bundle["run"]
    recorded: dict[str, Any] = {}
    data = contents.kept.get(REPORT_MEMBER)
    if data is not None:
        try:
            value = canonical.loads(data, source=REPORT_MEMBER)
        except CanonicalJSONError:
            value = None
        if isinstance(value, dict):
            recorded = value
    paths = [f["path"] for f in bundle["files"]]
    statuses = [c["status"] for c in bundle["checks"]]
    counts = {
        "checks": len(bundle["checks"]),
        "passed": statuses.count("passed"),
        "failed": statuses.count("failed"),
        "error": statuses.count("error"),
        "run_files": sum(1 for p in paths if p.startswith(RUN_PREFIX)),
        "definition_files": sum(1 for p in paths if p.startswith(DEFINITIONS_PREFIX)),
        "definitions_unavailable": len(bundle["unavailable"]),
    }
    percentage = recorded.get("percentage")
    labels = [
        ["Run ID", run["run_id"]],
        [
            "Score",
            f"{recorded.get('points_earned', '?')}/{recorded.get('total_points', '?')} (recorded)",
        ],
        [
            "Percentage",
            f"{percentage:.1f}% (recorded)"
            if isinstance(percentage, int | float) and not isinstance(percentage, bool)
            else "? (recorded)",
        ],
        ["Passed", ("yes" if run["run_passed"] else "no") + " (recorded)"],
        ["Project", run["project_root"]],
        [
            "Checks",
            f"{counts['checks']} ({counts['passed']} passed, {counts['failed']} failed, "
            f"{counts['error']} error)",
        ],
        [
            "Definitions",
            f"{counts['definition_files']} files bundled, "
            f"{counts['definitions_unavailable']} unavailable",
        ],
    ]
    return {
        "report_id": run["run_id"],
        "report_digest": run["digest"],
        "run_passed": run["run_passed"],
        "project_root": run["project_root"],
        "counts": counts,
        "labels": labels,
    }
