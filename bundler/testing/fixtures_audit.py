"""The audit fixture store: reports that break one rule of issue each (SPEC section 12).

``python -m bundler.testing.fixtures_audit DIR [--force]`` writes the store to ``DIR/audit``.
Every report is first generated consistent by ``fixturegen.StoreBuilder`` (its issued
verdicts come from ``bundler.evalbook.derive``); the inconsistent ones then have their issued
fields edited, in the check result file and in the report body alike, as an issuer
that broke the rule would have written them. The body is rewritten canonical, so the
report digest is simply the digest of the edited bytes. ``SCENARIOS`` names, per
report, the rule broken and the disagreements an audit must find (scope, field and
kind), and nothing else. Generation is deterministic: a regeneration is byte-identical.
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any

from bundler.core import canonical
from bundler.evalbook.stats import BootstrapStatistic, bootstrap_interval
from bundler.testing.fixturegen import CaseSpec, CheckSpec, StoreBuilder

AUDIT_STORE = "audit"
PRINCIPALS = {"alice": ["dataset.read_body", "report.export", "report.read"]}

BETWEEN = "between_documents"
DERIVED = "issued_vs_derived"

# (check_id or None for the report, field, disagreement kind)
Planted = frozenset[tuple[str | None, str, str]]


@dataclass(frozen=True)
class Scenario:
    """One report of the audit store: the rule its issue breaks, and what an audit finds."""

    report_id: str
    rule: str
    planted: Planted


SCENARIOS: dict[str, Scenario] = {
    s.report_id: s
    for s in (
        Scenario(
            "rpt-audit-consistent-repeats",
            "none: repeats > 1 with bootstrap intervals for a pass rate and two means",
            frozenset(),
        ),
        Scenario(
            "rpt-audit-pass-below-threshold",
            "a required check is marked pass below its threshold",
            frozenset(
                {
                    ("accuracy", "status", DERIVED),
                    ("accuracy", "result", DERIVED),
                    (None, "result", DERIVED),
                }
            ),
        ),
        Scenario(
            "rpt-audit-coverage-over-repeats",
            "coverage is counted over repeats instead of examples",
            frozenset({("consistency", "coverage", DERIVED), (None, "coverage", DERIVED)}),
        ),
        Scenario(
            "rpt-audit-timeout-as-missing",
            "a timeout among missing examples is reported as missing",
            frozenset({("robustness", "status", DERIVED), ("robustness", "result", DERIVED)}),
        ),
        Scenario(
            "rpt-audit-pass-incomplete-evidence",
            "the report is marked pass although a required check's evidence is incomplete",
            frozenset({(None, "result", DERIVED)}),
        ),
        Scenario(
            "rpt-audit-wilson-continuity",
            "the Wilson interval is computed with continuity correction",
            frozenset({("accuracy", "interval", DERIVED)}),
        ),
        Scenario(
            "rpt-audit-bootstrap-other-seed",
            "the bootstrap interval comes from another seed than the one recorded",
            frozenset({("helpfulness", "interval", DERIVED)}),
        ),
        Scenario(
            "rpt-audit-assurance-uncounted-case",
            "a check's assurance is taken from a case that does not count for it",
            frozenset({("accuracy", "assurance", DERIVED)}),
        ),
        Scenario(
            "rpt-audit-min-coverage-float",
            "min_coverage is compared in floating point (0.28 x 25 > 7) instead of exactly",
            frozenset({("recall", "status", DERIVED), ("recall", "result", DERIVED)}),
        ),
        Scenario(
            "rpt-audit-documents-differ",
            "the report body and the check result issue different scores",
            frozenset({("helpfulness", "score", BETWEEN), ("helpfulness", "score", DERIVED)}),
        ),
    )
}

# Values the inconsistent reports carry, for tests that check them.
BOOTSTRAP_RECORDED_SEED = 11
BOOTSTRAP_USED_SEED = 12
DOCUMENTS_DIFFER_BODY_SCORE = 0.7


def continuity_corrected_wilson(passes: int, n: int, level: float) -> tuple[float, float]:
    """The Wilson score interval with continuity correction (Newcombe 1998, method 4).

    The interval a mistaken issuer computes; the audit must not accept it.
    """
    z = NormalDist().inv_cdf(1.0 - (1.0 - level) / 2.0)
    p = passes / n
    denominator = 2.0 * (n + z * z)
    low = 0.0
    if passes > 0:
        root = math.sqrt(z * z - 2.0 - 1.0 / n + 4.0 * p * (n * (1.0 - p) + 1.0))
        low = max(0.0, (2.0 * n * p + z * z - 1.0 - z * root) / denominator)
    high = 1.0
    if passes < n:
        root = math.sqrt(z * z + 2.0 - 1.0 / n + 4.0 * p * (n * (1.0 - p) - 1.0))
        high = min(1.0, (2.0 * n * p + z * z + 1.0 + z * root) / denominator)
    return low, high


def _agg(
    rule: str, threshold: float | None, min_coverage: float, min_samples: int, repeats: int
) -> dict[str, Any]:
    return {
        "rule": rule,
        "threshold": threshold,
        "min_coverage": min_coverage,
        "min_samples": min_samples,
        "repeats": repeats,
    }


class _AuditStore:
    """Builds the reports; ``issue`` rewrites issued fields the way a faulty issuer would."""

    def __init__(self, root: Path) -> None:
        self.rng = random.Random(20261201)
        self.b = StoreBuilder(root)
        self.b.principals = dict(PRINCIPALS)
        self.b.access()
        self.b.scorer(
            "sc-audit",
            1,
            kind="deterministic",
            files={
                "score.py": b"def score(output, expected):\n    return float(output == expected)\n"
            },
        )
        self.b.dataset("ds-audit", 1, self._examples("au", 12))
        self.b.dataset("ds-repeats", 1, self._examples("rp", 5))
        self.b.dataset("ds-wide", 1, self._examples("wd", 25))
        self.ids = {
            key: [e["example_id"] for e in manifest["examples"]]
            for key, manifest in self.b.manifests.items()
        }

    def _examples(self, prefix: str, count: int) -> dict[str, Any]:
        return {
            f"{prefix}-{i:04d}": {
                "input": f"question {prefix} {i}",
                "expected": self.rng.choice(["a", "b"]),
            }
            for i in range(count)
        }

    def case(
        self, example_id: str, status: str, score: float | None, *, repeat: int = 1, **kw: Any
    ) -> CaseSpec:
        output = f"output {example_id}/{repeat} {self.rng.randrange(10**6)}".encode()
        return CaseSpec(example_id, repeat, status, score, output=output, **kw)

    def check(
        self,
        check_id: str,
        dataset: str,
        aggregation: dict[str, Any],
        cases: list[CaseSpec],
        *,
        required: bool = True,
        seed: int = 0,
    ) -> CheckSpec:
        return CheckSpec(
            check_id,
            required,
            ("sc-audit", 1),
            (dataset, 1),
            aggregation,
            cases,
            interval_seed=seed,
        )

    def report(self, report_id: str, checks: Sequence[CheckSpec]) -> dict[str, Any]:
        return self.b.report(
            report_id,
            suite_id="suite-" + report_id.removeprefix("rpt-"),
            suite_version=1,
            checks=checks,
        )

    def check_result_path(self, report_id: str, check_id: str) -> str:
        return f"reports/{report_id}/checks/{check_id}.json"

    def issue(
        self,
        report_id: str,
        body: dict[str, Any],
        check_id: str | None = None,
        *,
        body_only: bool = False,
        **changes: Any,
    ) -> None:
        """Set issued fields of a check (body entry and check result) or of the report."""
        if check_id is None:
            body.update(changes)
        else:
            entry = next(c for c in body["checks"] if c["check_id"] == check_id)
            entry.update({k: v for k, v in changes.items() if k in entry})
            if not body_only:
                path = self.check_result_path(report_id, check_id)
                result = canonical.loads((self.b.root / path).read_bytes(), source=path)
                result.update(changes)
                self.b.write_json(path, result)
        self.b.write_json(f"reports/{report_id}/body.json", body)


def build_audit_store(root: Path) -> None:
    """Write the audit fixture store at ``root`` (one report per entry of SCENARIOS)."""
    s = _AuditStore(root)
    au, rp, wd = s.ids[("ds-audit", 1)], s.ids[("ds-repeats", 1)], s.ids[("ds-wide", 1)]

    # Consistent: pass counts [3, 2, 3, 0, 1] of 3 repeats and mean scores
    # [0.9, 0.4, 0.75, 0.1, 0.6], both with seed 42 (the references of SPEC 12), and a
    # mean over two repeats with a timeout left unexecuted.
    passes = [3, 2, 3, 0, 1]
    consistency = [
        s.case(e, "pass" if r <= k else "fail", 1 if r <= k else 0, repeat=r)
        for e, k in zip(rp, passes, strict=True)
        for r in (1, 2, 3)
    ]
    helpfulness = [
        s.case(e, "pass", v) for e, v in zip(rp, [0.9, 0.4, 0.75, 0.1, 0.6], strict=True)
    ]
    stability = [
        s.case(e, "pass", 0.5 + 0.04 * i, repeat=r) for i, e in enumerate(au) for r in (1, 2)
    ]
    stability[5] = s.case(au[2], "timeout", None, repeat=2)
    s.report(
        "rpt-audit-consistent-repeats",
        [
            s.check(
                "consistency", "ds-repeats", _agg("pass_rate", 0.6, 1, 5, 3), consistency, seed=42
            ),
            s.check("helpfulness", "ds-repeats", _agg("mean", 0.5, 1, 5, 1), helpfulness, seed=42),
            s.check("stability", "ds-audit", _agg("mean", 0.6, 0.9, 5, 2), stability, seed=7),
        ],
    )

    # 8 of 12 pass: 0.666... < 0.75, derived fail; issued pass.
    rid = "rpt-audit-pass-below-threshold"
    cases = [
        s.case(e, "fail" if i % 3 == 2 else "pass", 0 if i % 3 == 2 else 1)
        for i, e in enumerate(au)
    ]
    body = s.report(
        rid, [s.check("accuracy", "ds-audit", _agg("pass_rate", 0.75, 0.8, 5, 1), cases)]
    )
    s.issue(rid, body, "accuracy", status="pass", result="pass")
    s.issue(rid, body, result="pass", reasons=[])

    # 6 examples of 3 repeats: four executed, one with a timeout, one with a single
    # repeat. Per example 6 expected, 4 executed; per repeat 18, 15 (also a pass).
    rid = "rpt-audit-coverage-over-repeats"
    plan = {0: "PPP", 1: "PFP", 2: "PPP", 3: "FPP", 4: "PPT", 5: "P"}
    ids = au[:6]
    cases = [
        s.case(
            ids[i],
            {"P": "pass", "F": "fail", "T": "timeout"}[c],
            {"P": 1, "F": 0, "T": None}[c],
            repeat=r + 1,
        )
        for i, word in plan.items()
        for r, c in enumerate(word)
    ]
    b_ds = _dataset_of(s, "ds-six", ids)
    body = s.report(
        rid, [s.check("consistency", b_ds, _agg("pass_rate", 0.6, 0.5, 1, 3), cases, seed=3)]
    )
    by_repeats = {"expected": 18, "executed": 15, "missing": 3}
    s.issue(rid, body, "consistency", coverage=by_repeats)
    s.issue(rid, body, coverage=by_repeats)

    # all_pass, 8 examples: 5 pass, 1 timeout, 2 without a case; coverage 5/8 < 1, so
    # the status is the highest unscored one, timeout (result inconclusive).
    rid = "rpt-audit-timeout-as-missing"
    ids = au[:8]
    cases = [s.case(e, "pass", 1) for e in ids[:5]] + [s.case(ids[5], "timeout", None)]
    body = s.report(
        rid,
        [
            s.check(
                "robustness",
                _dataset_of(s, "ds-eight", ids),
                _agg("all_pass", None, 1, 1, 1),
                cases,
            )
        ],
    )
    s.issue(rid, body, "robustness", status="missing", result="missing")
    s.issue(rid, body, reasons=["required check robustness is missing"])

    # Every example passes but one case has no output: the check passes with
    # incomplete evidence, so the report is inconclusive; issued pass.
    rid = "rpt-audit-pass-incomplete-evidence"
    cases = [s.case(e, "pass", 1) for e in au]
    cases[4].output = None
    body = s.report(
        rid, [s.check("grounding", "ds-audit", _agg("pass_rate", 0.75, 0.8, 5, 1), cases)]
    )
    s.issue(rid, body, result="pass", reasons=[])

    # 3 of 10 pass (SPEC 12's Wilson reference) with a threshold of 0.25.
    rid = "rpt-audit-wilson-continuity"
    ids = au[:10]
    cases = [
        s.case(e, "pass" if i in (1, 4, 7) else "fail", 1 if i in (1, 4, 7) else 0)
        for i, e in enumerate(ids)
    ]
    body = s.report(
        rid,
        [
            s.check(
                "accuracy", _dataset_of(s, "ds-ten", ids), _agg("pass_rate", 0.25, 1, 5, 1), cases
            )
        ],
    )
    low, high = continuity_corrected_wilson(3, 10, 0.95)
    interval = _read_result(s, rid, "accuracy")["interval"]
    s.issue(rid, body, "accuracy", interval={**interval, "low": low, "high": high})

    # Mean scores; the interval records seed 11 but was computed with seed 12.
    rid = "rpt-audit-bootstrap-other-seed"
    scores = [0.62, 0.91, 0.47, 0.88, 0.73, 0.55, 0.96, 0.69, 0.81, 0.58, 0.77, 0.64]
    cases = [s.case(e, "pass", v) for e, v in zip(au, scores, strict=True)]
    body = s.report(
        rid,
        [
            s.check(
                "helpfulness",
                "ds-audit",
                _agg("mean", 0.5, 0.8, 5, 1),
                cases,
                seed=BOOTSTRAP_RECORDED_SEED,
            )
        ],
    )
    low, high = bootstrap_interval(
        scores, statistic=BootstrapStatistic.MEAN, seed=BOOTSTRAP_USED_SEED, level=0.95
    )
    interval = _read_result(s, rid, "helpfulness")["interval"]
    s.issue(rid, body, "helpfulness", interval={**interval, "low": low, "high": high})

    # accuracy's cases are all platform_verified; the optional latency check has one
    # case only reported. accuracy's issued assurance is that case's level.
    rid = "rpt-audit-assurance-uncounted-case"
    accuracy = [s.case(e, "pass", 1, assurance="platform_verified") for e in au]
    latency = [s.case(e, "pass", 1, assurance="platform_verified") for e in au]
    latency[3].assurance = "reported"
    body = s.report(
        rid,
        [
            s.check("accuracy", "ds-audit", _agg("pass_rate", 0.75, 0.8, 5, 1), accuracy),
            s.check(
                "latency", "ds-audit", _agg("pass_rate", 0.5, 0.8, 5, 1), latency, required=False
            ),
        ],
    )
    s.issue(rid, body, "accuracy", assurance="reported")

    # 7 of 25 executed, all passing, min_coverage 0.28: exactly 7/25, so met (pass);
    # in floating point 0.28 x 25 = 7.000000000000001 > 7, "not met", and the issuer
    # took the highest unscored status, missing.
    rid = "rpt-audit-min-coverage-float"
    cases = [s.case(e, "pass", 1) for e in wd[:7]]
    body = s.report(rid, [s.check("recall", "ds-wide", _agg("pass_rate", 0.5, 0.28, 1, 1), cases)])
    s.issue(rid, body, "recall", status="missing", result="missing")
    s.issue(rid, body, reasons=["required check recall is missing"])

    # Mean 0.75 in the check result (derived), 0.7 in the report body.
    rid = "rpt-audit-documents-differ"
    cases = [s.case(e, "pass", 0.75) for e in au]
    body = s.report(rid, [s.check("helpfulness", "ds-audit", _agg("mean", 0.5, 0.8, 5, 1), cases)])
    s.issue(rid, body, "helpfulness", body_only=True, score=DOCUMENTS_DIFFER_BODY_SCORE)


def _dataset_of(s: _AuditStore, dataset_id: str, example_ids: Sequence[str]) -> str:
    """A dataset version holding exactly ``example_ids`` (bodies copied from ds-audit)."""
    if (dataset_id, 1) not in s.b.manifests:
        source = s.b.root / "datasets/ds-audit/1/examples"
        bodies = {e: canonical.loads((source / f"{e}.json").read_bytes()) for e in example_ids}
        s.b.dataset(dataset_id, 1, bodies)
    return dataset_id


def _read_result(s: _AuditStore, report_id: str, check_id: str) -> dict[str, Any]:
    path = s.check_result_path(report_id, check_id)
    value = canonical.loads((s.b.root / path).read_bytes(), source=path)
    assert isinstance(value, dict)
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", type=Path, help=f"directory that receives {AUDIT_STORE}/")
    parser.add_argument("--force", action="store_true", help=f"replace an existing {AUDIT_STORE}/")
    args = parser.parse_args(argv)
    target: Path = args.out / AUDIT_STORE
    if target.exists():
        if not args.force:
            print(f"{target}: exists (use --force to regenerate)", file=sys.stderr)
            return 3
        shutil.rmtree(target)
    build_audit_store(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
