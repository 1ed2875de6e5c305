"""Deterministic generator of EvalBook stores: the committed fixtures and large synthetic
stores for tests and benchmarks.

``python -m bundler.testing.fixturegen DIR`` writes the fixture store; ``--large`` writes a
synthetic store with options for case count and payload bytes. Everything derives from
a seeded ``random.Random`` and fixed timestamps, so a regeneration is byte-identical.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundler.core import canonical
from bundler.core.digests import SCORER_TAG, bytes_digest, framed_digest, json_digest
from bundler.evalbook.derive import derive_check, derive_report
from bundler.evalbook.verdicts import DerivedCheck, Interval

INLINE_MAX = 262_144
ISSUED_AT = "2026-10-20T09:30:00Z"
MAIN_STORE = "main"


def _dumps(value: Any) -> bytes:
    return canonical.dumps(value)


@dataclass
class CaseSpec:
    """One planned case: which example and repeat, what happened, what it produced."""

    example_id: str
    repeat: int
    status: str
    score: float | int | None
    output: bytes | None = None
    output_location: str = "inline"  # inline | sso
    artifacts: list[bytes] = field(default_factory=list)
    traces: list[str] = field(default_factory=list)
    assurance: str = "independently_observed"
    output_override: dict[str, Any] | None = None  # a hand-made payload ref


@dataclass
class CheckSpec:
    check_id: str
    required: bool
    scorer: tuple[str, int]
    dataset: tuple[str, int]
    aggregation: dict[str, Any]
    cases: list[CaseSpec]
    scorer_digest_override: str | None = None
    interval_seed: int = 0


class StoreBuilder:
    """Writes one store root; every digest comes from bundler.core.digests."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.principals: dict[str, list[str]] = {}
        self.manifests: dict[tuple[str, int], dict[str, Any]] = {}
        self.dataset_digests: dict[tuple[str, int], str] = {}
        self.scorer_digests: dict[tuple[str, int], str] = {}

    def write(self, relpath: str, data: bytes) -> None:
        path = self.root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def write_json(self, relpath: str, value: Any) -> bytes:
        data = _dumps(value)
        self.write(relpath, data)
        return data

    def blob(self, data: bytes, *, location: str = "inline", write: bool = True) -> dict[str, Any]:
        """Store a payload and return its ref fields (digest, size, location)."""
        hex_digest = hashlib.sha256(data).hexdigest()
        area = "blobs" if location == "inline" else "sso"
        if write:
            self.write(f"{area}/sha256/{hex_digest}", data)
        return {"digest": "sha256:" + hex_digest, "size": len(data), "location": location}

    def dataset(self, dataset_id: str, version: int, examples: dict[str, Any]) -> None:
        entries = []
        for example_id in sorted(examples):
            body = self.write_json(
                f"datasets/{dataset_id}/{version}/examples/{example_id}.json", examples[example_id]
            )
            entries.append(
                {"example_id": example_id, "digest": bytes_digest(body), "size": len(body)}
            )
        manifest = {"dataset_id": dataset_id, "version": version, "examples": entries}
        self.write_json(f"datasets/{dataset_id}/{version}/manifest.json", manifest)
        self.manifests[(dataset_id, version)] = manifest
        self.dataset_digests[(dataset_id, version)] = json_digest(manifest)

    def scorer(
        self,
        scorer_id: str,
        version: int,
        *,
        kind: str,
        files: dict[str, bytes],
        judge: dict[str, Any] | None = None,
        config: Any = None,
    ) -> None:
        descriptor = {
            "scorer_id": scorer_id,
            "version": version,
            "kind": kind,
            "entrypoint": "files/" + sorted(files)[0],
            "runtime": "python3.11",
            "config": config if config is not None else {},
            "judge": judge,
            "files": sorted(files),
        }
        base = f"scorers/{scorer_id}/{version}"
        desc_bytes = self.write_json(f"{base}/scorer.json", descriptor)
        for path, data in files.items():
            self.write(f"{base}/files/{path}", data)
        components = [("scorer.json", desc_bytes)]
        components += [(f"files/{p}", files[p]) for p in sorted(files, key=lambda p: p.encode())]
        self.scorer_digests[(scorer_id, version)] = framed_digest(SCORER_TAG, components)

    def access(self) -> None:
        self.write_json("access.json", {"principals": self.principals})

    def report(
        self,
        report_id: str,
        *,
        suite_id: str,
        suite_version: int,
        checks: Sequence[CheckSpec],
        envelope: dict[str, Any] | None = None,
        validity_hours: int = 720,
        write_suite: bool = True,
    ) -> dict[str, Any]:
        """Write a suite version, the check results, cases and a report body.

        The issued verdicts are derived by ``bundler.evalbook.derive`` from the cases, so a
        fixture report follows SPEC section 12 unless a scenario edits it afterwards.
        """
        suite = {
            "suite_id": suite_id,
            "version": suite_version,
            "status": "active",
            "validity_hours": validity_hours,
            "decision_rule": _decision_rule(),
            "checks": [
                {
                    "check_id": c.check_id,
                    "required": c.required,
                    "scorer": {"id": c.scorer[0], "version": c.scorer[1]},
                    "dataset": {"id": c.dataset[0], "version": c.dataset[1]},
                    "aggregation": c.aggregation,
                }
                for c in checks
            ],
        }
        if write_suite:
            self.write_json(f"suites/{suite_id}/{suite_version}.json", suite)
        body_checks = []
        derived_checks = []
        for spec in checks:
            body_check, required, derived = self._check(report_id, spec)
            body_checks.append(body_check)
            derived_checks.append((required, derived))
        report_result = _derive_report(derived_checks, [c.check_id for c in checks])
        dataset_refs = sorted({c.dataset for c in checks})
        body = {
            "schema_version": "1.0",
            "producer": "svc_evalbook",
            "organization": "org-acme",
            "project": "proj-assistant",
            "report_id": report_id,
            "evaluation_id": "eval-" + report_id,
            "subject": {"kind": "model", "name": "acme-assistant", "revision": "2026.10.1"},
            "suite_ref": {"id": suite_id, "version": suite_version, "digest": json_digest(suite)},
            "dataset_refs": [
                {"id": d, "version": v, "digest": self.dataset_digests[(d, v)]}
                for d, v in dataset_refs
            ],
            "mode": "gate",
            "execution_mode": "platform",
            "decision_rule": _decision_rule(),
            "result": report_result["result"],
            "evidence_complete": report_result["evidence_complete"],
            "reasons": report_result["reasons"],
            "checks": body_checks,
            "coverage": report_result["coverage"],
            "issued_at": ISSUED_AT,
            "valid_until": _plus_hours(ISSUED_AT, validity_hours),
        }
        self.write_json(f"reports/{report_id}/body.json", body)
        self.write_json(
            f"reports/{report_id}/envelope.json",
            envelope
            or {
                "status": "current",
                "superseded_by": None,
                "superseded_at": None,
                "superseded_reason": None,
                "url": f"https://evalbook.example/reports/{report_id}",
            },
        )
        return body

    def _check(self, report_id: str, spec: CheckSpec) -> tuple[dict[str, Any], bool, DerivedCheck]:
        lines = []
        views = []
        scored: list[dict[str, str]] = []
        for index, case in enumerate(spec.cases):
            output_ref = None
            if case.output_override is not None:
                output_ref = {"kind": "output", **case.output_override}
            elif case.output is not None:
                output_ref = {
                    "kind": "output",
                    **self.blob(case.output, location=case.output_location),
                }
            evidence = [{"kind": "artifact", **self.blob(a)} for a in case.artifacts]
            for trace_id in case.traces:
                trace_body = _dumps(
                    {"trace_id": trace_id, "spans": [{"name": "generate", "ms": 812}]}
                )
                self.write(f"traces/{trace_id}.json", trace_body)
                evidence.append(
                    {
                        "kind": "trace",
                        "digest": bytes_digest(trace_body),
                        "size": len(trace_body),
                        "location": "traces",
                        "trace_id": trace_id,
                    }
                )
            dataset_id, version = spec.dataset
            value = {
                "case_id": f"{spec.check_id}-{index:05d}",
                "check_id": spec.check_id,
                "example": {
                    "dataset_id": dataset_id,
                    "version": version,
                    "example_id": case.example_id,
                },
                "repeat": case.repeat,
                "status": case.status,
                "score": case.score,
                "assurance": case.assurance,
                "output": output_ref,
                "evidence": evidence,
            }
            lines.append(_dumps(value))
            views.append(value)
            for ref in ([output_ref] if output_ref else []) + evidence:
                scored.append({"kind": ref["kind"], "digest": ref["digest"]})
        self.write(
            f"reports/{report_id}/cases/{spec.check_id}.jsonl", b"".join(x + b"\n" for x in lines)
        )
        manifest = self.manifests.get(spec.dataset)
        expected = [e["example_id"] for e in manifest["examples"]] if manifest else []
        fields, derived = _derive_check(
            spec.aggregation, spec.dataset, expected, views, spec.interval_seed
        )
        result = {
            "check_id": spec.check_id,
            "required": spec.required,
            "aggregation": spec.aggregation,
            **fields,
        }
        self.write_json(f"reports/{report_id}/checks/{spec.check_id}.json", result)
        unique = sorted({(s["digest"], s["kind"]) for s in scored})
        if len(unique) > 20:
            evidence_manifest = {
                "schema": "evalbook.evidence_manifest.v1",
                "check_id": spec.check_id,
                "evidence": [{"kind": k, "digest": d} for d, k in unique],
            }
            data = _dumps(evidence_manifest)
            self.write(f"blobs/sha256/{hashlib.sha256(data).hexdigest()}", data)
            evidence_refs = [{"kind": "manifest", "digest": json_digest(evidence_manifest)}]
        else:
            evidence_refs = [{"kind": k, "digest": d} for d, k in unique]
        scorer_digest = spec.scorer_digest_override or self.scorer_digests[spec.scorer]
        body_check = {
            "check_id": spec.check_id,
            "required": spec.required,
            "status": fields["status"],
            "result": fields["result"],
            "scorer_ref": {
                "id": spec.scorer[0],
                "version": spec.scorer[1],
                "digest": scorer_digest,
            },
            "assurance": fields["assurance"],
            "evidence_refs": evidence_refs,
            "score": fields["score"],
            "explanation": f"{spec.aggregation['rule']} over {fields['coverage']['executed']} executed examples",
            "coverage": fields["coverage"],
            "observations": [],
            "slices": [],
        }
        return body_check, spec.required, derived


WILSON_95 = {
    "level": 0.95,
    "method": "wilson",
    "low": 0.0,
    "high": 0.0,
    "resamples": None,
    "seed": None,
}
BOOTSTRAP_95 = {
    "level": 0.95,
    "method": "bootstrap-percentile/philox4x64-10/t7",
    "low": 0.0,
    "high": 0.0,
    "resamples": 2000,
    "seed": 0,
}


def _derive_check(
    agg: dict[str, Any],
    dataset: tuple[str, int],
    expected: list[str],
    cases: list[dict[str, Any]],
    seed: int,
) -> tuple[dict[str, Any], DerivedCheck]:
    """The issued check verdict, derived by SPEC section 12's rules (bundler.evalbook.derive)."""
    spec: dict[str, Any] | None = None
    if agg["rule"] == "pass_rate" and agg["repeats"] == 1:
        spec = dict(WILSON_95)
    elif agg["rule"] in ("pass_rate", "mean"):
        spec = dict(BOOTSTRAP_95, seed=seed)
    derived = derive_check(
        agg,
        dataset_id=dataset[0],
        dataset_version=dataset[1],
        expected_example_ids=expected,
        cases=cases,
        interval=spec,
    )
    interval = None
    if spec is not None and isinstance(derived.interval, Interval):
        interval = dict(spec, low=derived.interval.low, high=derived.interval.high)
    fields: dict[str, Any] = {
        "status": derived.status.value,
        "result": derived.result.value,
        "score": derived.score,
        "interval": interval,
        "coverage": {
            "expected": derived.coverage.expected,
            "executed": derived.coverage.executed,
            "missing": derived.coverage.missing,
        },
        "assurance": derived.assurance.value if derived.assurance else None,
        "slices": [],
    }
    return fields, derived


def _derive_report(checks: list[tuple[bool, DerivedCheck]], ids: list[str]) -> dict[str, Any]:
    report = derive_report(checks)
    reasons = [
        f"required check {check_id} is {d.result.value}"
        for check_id, (required, d) in zip(ids, checks, strict=True)
        if required and d.result.value != "pass"
    ]
    if report.result.value == "inconclusive" and not reasons:
        reasons.append("evidence is incomplete for a required check")
    return {
        "result": report.result.value,
        "evidence_complete": report.evidence_complete,
        "coverage": {
            "expected": report.coverage.expected,
            "executed": report.coverage.executed,
            "missing": report.coverage.missing,
        },
        "reasons": reasons,
    }


def _decision_rule() -> dict[str, Any]:
    return {"rule": "threshold", "alpha": 0.05, "margin": None, "correction": None}


def _plus_hours(ts: str, hours: int) -> str:
    from datetime import datetime, timedelta

    start = datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ")
    return (start + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _examples(rng: random.Random, prefix: str, count: int) -> dict[str, Any]:
    topics = ["billing", "refunds", "shipping", "privacy", "accounts", "outages"]
    return {
        f"{prefix}-{i:04d}": {
            "input": f"Customer asks about {rng.choice(topics)} (case {i}).",
            "expected": rng.choice(["escalate", "answer", "refuse"]),
            "tags": sorted(rng.sample(topics, 2)),
            "weight": rng.choice([1, 2, 0.5]),
        }
        for i in range(count)
    }


def _output(rng: random.Random, label: str, size: int = 0) -> bytes:
    text = f"answer for {label}: " + " ".join(
        rng.choice(["yes", "no", "maybe", "refund", "later"]) for _ in range(8)
    )
    if size > len(text):
        text += "x" * (size - len(text))
    return text.encode("utf-8")


def _pass_cases(
    rng: random.Random,
    examples: Sequence[str],
    *,
    fail_every: int = 0,
    score_fn: Callable[[int], float] | None = None,
) -> list[CaseSpec]:
    cases = []
    for i, example_id in enumerate(examples):
        failed = fail_every and i % fail_every == fail_every - 1
        status = "fail" if failed else "pass"
        score: float | int = score_fn(i) if score_fn else (0 if failed else 1)
        cases.append(CaseSpec(example_id, 1, status, score, output=_output(rng, example_id)))
    return cases


def build_fixture_store(root: Path) -> None:
    """The committed fixture store: one report per scenario (see fixtures/README.md)."""
    rng = random.Random(20261130)
    b = StoreBuilder(root)
    b.principals = {
        "alice": ["dataset.read_body", "report.export", "report.read"],
        "bob": ["report.export", "report.read"],
        "carol": ["report.read"],
    }
    b.access()
    qa = _examples(rng, "qa", 12)
    safety = _examples(rng, "sf", 8)
    b.dataset("ds-qa", 1, qa)
    b.dataset("ds-safety", 2, safety)
    b.scorer(
        "sc-exact",
        1,
        kind="deterministic",
        files={"score.py": b"def score(output, expected):\n    return float(output == expected)\n"},
    )
    b.scorer(
        "sc-judge",
        3,
        kind="harness_judge",
        files={
            "prompt.md": b"Rate whether the answer resolves the request. Reply with a score in [0, 1].\n",
            "rubric/criteria.txt": b"helpful\nsafe\ncorrect\n",
        },
        judge={"agent_type": "claude-code", "model": "judge-large", "reasoning_effort": "medium"},
        config={"temperature": 0, "max_tokens": 512},
    )
    qa_ids = sorted(qa)
    sf_ids = sorted(safety)
    pass_rate = {
        "rule": "pass_rate",
        "threshold": 0.75,
        "min_coverage": 0.8,
        "min_samples": 5,
        "repeats": 1,
    }
    mean = {"rule": "mean", "threshold": 0.6, "min_coverage": 0.8, "min_samples": 5, "repeats": 1}
    all_pass = {
        "rule": "all_pass",
        "threshold": None,
        "min_coverage": 1,
        "min_samples": 1,
        "repeats": 1,
    }

    def clean_checks() -> list[CheckSpec]:
        return [
            CheckSpec(
                "accuracy",
                True,
                ("sc-exact", 1),
                ("ds-qa", 1),
                pass_rate,
                _pass_cases(rng, qa_ids, fail_every=6),
            ),
            CheckSpec(
                "helpfulness",
                True,
                ("sc-judge", 3),
                ("ds-qa", 1),
                mean,
                _pass_cases(rng, qa_ids, score_fn=lambda i: [0.9, 0.7, 0.8, 0.65][i % 4]),
            ),
            CheckSpec(
                "safety",
                True,
                ("sc-exact", 1),
                ("ds-safety", 2),
                all_pass,
                _pass_cases(rng, sf_ids),
            ),
        ]

    # 1. clean: several checks, two datasets, two scorers (one harness_judge).
    b.report("rpt-clean", suite_id="suite-assistant", suite_version=1, checks=clean_checks())

    # 2. superseded envelope.
    b.report(
        "rpt-superseded",
        suite_id="suite-assistant",
        suite_version=1,
        checks=clean_checks(),
        envelope={
            "status": "superseded",
            "superseded_by": "rpt-clean",
            "superseded_at": "2026-10-21T08:00:00Z",
            "superseded_reason": "re_evaluation",
            "url": "https://evalbook.example/reports/rpt-superseded",
        },
    )

    # 3. a check with more than 20 evidence items: evidence_refs is a manifest.
    many = [
        CaseSpec(e, 1, "pass", 1, output=_output(rng, e), artifacts=[_output(rng, "art-" + e)])
        for e in qa_ids
    ]
    b.report(
        "rpt-evidence-manifest",
        suite_id="suite-evidence",
        suite_version=1,
        checks=[CheckSpec("accuracy", True, ("sc-exact", 1), ("ds-qa", 1), pass_rate, many)],
    )

    # 4. outputs over 262,144 bytes stored at SSO, and traces.
    sso_cases = _pass_cases(rng, qa_ids[:6])
    sso_cases[1].output = _output(rng, "big-1", INLINE_MAX + 1)
    sso_cases[1].output_location = "sso"
    sso_cases[3].output_override = {
        "digest": "sha256:" + hashlib.sha256(b"large output kept at SSO only").hexdigest(),
        "size": 3 * INLINE_MAX,
        "location": "sso",
    }
    sso_cases[3].output = None
    for i, case in enumerate(sso_cases):
        case.traces = [f"trace-{i:03d}"]
    b.report(
        "rpt-sso-traces",
        suite_id="suite-sso",
        suite_version=1,
        checks=[
            CheckSpec(
                "accuracy",
                True,
                ("sc-exact", 1),
                ("ds-qa", 1),
                {**pass_rate, "min_coverage": 0.5},
                sso_cases,
            )
        ],
    )

    # 5. examples removed by retention.
    b.dataset("ds-retained", 1, _examples(rng, "rt", 6))
    retained_ids = sorted(
        b.manifests[("ds-retained", 1)]["examples"], key=lambda e: e["example_id"]
    )
    removed = [e["example_id"] for e in retained_ids[:2]]
    b.report(
        "rpt-retention",
        suite_id="suite-retention",
        suite_version=1,
        checks=[
            CheckSpec(
                "recall",
                True,
                ("sc-exact", 1),
                ("ds-retained", 1),
                all_pass,
                _pass_cases(rng, [e["example_id"] for e in retained_ids]),
            )
        ],
    )
    retention_lines = b"".join(
        _dumps({"example_id": e, "removed_at": "2026-11-01T00:00:00Z", "policy": "pii-90d"}) + b"\n"
        for e in removed
    )
    b.write("datasets/ds-retained/1/retention.jsonl", retention_lines)
    for e in removed:
        (root / f"datasets/ds-retained/1/examples/{e}.json").unlink()

    # 6. a deleted scorer version and 7. a scorer whose files changed after the run.
    b.scorer(
        "sc-legacy",
        2,
        kind="deterministic",
        files={"legacy.py": b"def score(o, e):\n    return 1.0\n"},
    )
    b.scorer(
        "sc-drift",
        1,
        kind="model_judge",
        files={"prompt.md": b"Is the answer correct?\n"},
        judge={"agent_type": "api", "model": "judge-small", "reasoning_effort": None},
    )
    b.report(
        "rpt-scorer-drift",
        suite_id="suite-drift",
        suite_version=1,
        checks=[
            CheckSpec(
                "legacy", True, ("sc-legacy", 2), ("ds-qa", 1), pass_rate, _pass_cases(rng, qa_ids)
            ),
            CheckSpec(
                "judged",
                False,
                ("sc-drift", 1),
                ("ds-qa", 1),
                mean,
                _pass_cases(rng, qa_ids, score_fn=lambda i: 0.8),
            ),
        ],
    )
    shutil.rmtree(root / "scorers/sc-legacy/2")
    b.write("scorers/sc-drift/1/files/prompt.md", b"Is the answer correct and polite?\n")

    # 8. every unavailable and redacted reason that a committed store can show.
    every_cases = _pass_cases(rng, qa_ids[:8])
    every_cases[0].output = _output(rng, "huge", INLINE_MAX + 10)
    every_cases[0].output_location = "sso"
    every_cases[1].traces = ["trace-every"]
    every_cases[2].artifacts = [b"artifact whose blob will be corrupted"]
    every_cases[3].artifacts = [b"artifact whose blob will be deleted"]
    every_cases[4].example_id = "qa-9999"  # not in the dataset manifest
    rt_ids = [e["example_id"] for e in retained_ids]
    every = [
        CheckSpec(
            "accuracy",
            True,
            ("sc-exact", 1),
            ("ds-qa", 1),
            {**pass_rate, "min_coverage": 0.5},
            every_cases,
        ),
        CheckSpec(
            "recall", True, ("sc-legacy", 2), ("ds-retained", 1), all_pass, _pass_cases(rng, rt_ids)
        ),
        CheckSpec(
            "judged",
            False,
            ("sc-drift", 1),
            ("ds-qa", 1),
            mean,
            _pass_cases(rng, qa_ids, score_fn=lambda i: 0.8),
        ),
        CheckSpec(
            "latency", False, ("sc-exact", 1), ("ds-qa", 1), pass_rate, _pass_cases(rng, qa_ids)
        ),
    ]
    # The deleted/drifted scorers were pinned by digest before they changed.
    every[1].scorer_digest_override = b.scorer_digests[("sc-legacy", 2)]
    every[2].scorer_digest_override = b.scorer_digests[("sc-drift", 1)]
    b.report("rpt-every-reason", suite_id="suite-every", suite_version=1, checks=every)
    corrupt = hashlib.sha256(b"artifact whose blob will be corrupted").hexdigest()
    b.write(f"blobs/sha256/{corrupt}", b"artifact whose blob WAS corrupted")
    (
        root / f"blobs/sha256/{hashlib.sha256(b'artifact whose blob will be deleted').hexdigest()}"
    ).unlink()
    (root / "reports/rpt-every-reason/checks/latency.json").unlink()
    (root / "reports/rpt-every-reason/cases/latency.jsonl").unlink()


def build_large_store(
    root: Path,
    *,
    report_id: str = "rpt-large",
    cases: int = 20_000,
    checks: int = 4,
    payload_bytes: int = 0,
    sso_payloads: int = 3,
    seed: int = 7,
    sizes: str = "fixed",
) -> None:
    """A synthetic store with one report of ``cases`` cases over ``checks`` checks.

    ``payload_bytes`` of inline outputs in total (half text-like, half random), spread
    over the cases: each the same size (``sizes="fixed"``), or of exponentially
    distributed size with the same mean (``sizes="exponential"``: many small outputs and
    a few large ones, as reports mostly look), capped at the inline limit;
    ``sso_payloads`` outputs are larger than the inline limit.
    """
    if sizes not in ("fixed", "exponential"):
        raise ValueError(f"sizes must be 'fixed' or 'exponential', not {sizes!r}")
    rng = random.Random(seed)
    b = StoreBuilder(root)
    b.principals = {"alice": ["dataset.read_body", "report.export", "report.read"]}
    b.access()
    per_check = -(-cases // checks)
    examples = {
        f"ex-{i:05d}": {"input": f"prompt {i}", "expected": i % 3} for i in range(per_check)
    }
    b.dataset("ds-large", 1, examples)
    b.scorer(
        "sc-large",
        1,
        kind="deterministic",
        files={"score.py": b"def score(o, e):\n    return 1.0\n"},
    )
    example_ids = sorted(examples)
    each = max(1, payload_bytes // max(1, cases)) if payload_bytes else 0
    text_unit = b"The quick brown fox answers the customer about refunds and shipping. "
    specs = []
    made = 0
    for c in range(checks):
        n = min(per_check, cases - made)
        made += n
        check_cases = []
        for i in range(n):
            if each:
                size = each
                if sizes == "exponential":
                    size = min(INLINE_MAX, max(17, round(rng.expovariate(1 / each))))
                if (c * per_check + i) % 2 == 0:
                    body = (text_unit * (size // len(text_unit) + 1))[: size - 16] + rng.randbytes(
                        16
                    )
                else:
                    body = rng.randbytes(size)
            else:
                body = f"output {c}/{i}".encode()
            case = CaseSpec(
                example_ids[i], 1, "pass" if i % 10 else "fail", 1 if i % 10 else 0, output=body
            )
            if c == 0 and i < sso_payloads:
                case.output = rng.randbytes(INLINE_MAX + 1 + i)
                case.output_location = "sso"
            check_cases.append(case)
        agg = {
            "rule": "pass_rate",
            "threshold": 0.8,
            "min_coverage": 0.5,
            "min_samples": 1,
            "repeats": 1,
        }
        specs.append(
            CheckSpec(f"check-{c}", True, ("sc-large", 1), ("ds-large", 1), agg, check_cases)
        )
    b.report(report_id, suite_id="suite-large", suite_version=1, checks=specs)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", type=Path, help="directory to write (must not exist unless --force)")
    parser.add_argument("--large", action="store_true", help="write a large synthetic store")
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--checks", type=int, default=4)
    parser.add_argument("--payload-bytes", type=int, default=0)
    parser.add_argument("--force", action="store_true", help="replace an existing directory")
    args = parser.parse_args(argv)
    out: Path = args.out
    if out.exists():
        if not args.force:
            print(f"{out}: exists (use --force to regenerate)", file=sys.stderr)
            return 3
        shutil.rmtree(out)
    if args.large:
        build_large_store(
            out, cases=args.cases, checks=args.checks, payload_bytes=args.payload_bytes
        )
    else:
        build_fixture_store(out / MAIN_STORE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
