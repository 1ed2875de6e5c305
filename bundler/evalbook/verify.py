"""Offline verification of an EvalBook reproducibility bundle (SPEC section 5).

``verify_evalbook_bundle`` checks the claim groups over a bag already read and
returns the claims and the facts verify reports: every claim proven, unprovable
(listed, with its reason) or failed (path, expected and observed). The groups live
beside it: 1 and 2 in ``bagcheck`` (shared with eval-banana bundles), 3 to 6 in
``verify_documents``, 7 to 10 in ``verify_cases``, 11 in ``verify_coherence``, over the
state in ``verify_state``. Reading a bundle and dispatching on its schema is
``bundler.bundles.verify``'s.
"""

from __future__ import annotations

from typing import Any

from bundler.archive.bag_reader import BagContents
from bundler.core.claims import Claims, VerifyOptions
from bundler.evalbook.bagcheck import check_bag_frame
from bundler.evalbook.verify_cases import CaseClaims
from bundler.evalbook.verify_coherence import CoherenceClaims
from bundler.evalbook.verify_documents import DocumentClaims


def verify_evalbook_bundle(
    contents: BagContents, bundle: dict[str, Any], options: VerifyOptions
) -> tuple[Claims, dict[str, Any]]:
    """Claims over an EvalBook bundle already read, and the facts verify reports.

    ``bundle`` is bundle.json, parsed and schema-valid. The facts are ``bundle_digest``,
    ``report_id``, ``report_digest``, ``report_result`` and ``envelope``. Raises nothing
    for a bad bundle: every problem is a failed claim.
    """
    return _EvalBookVerifier(contents, bundle, options).run()


class _EvalBookVerifier(DocumentClaims, CaseClaims, CoherenceClaims):
    def run(self) -> tuple[Claims, dict[str, Any]]:
        digest = check_bag_frame(
            self.c,
            self.claims,
            self.bundle,
            self.options,
            expected_top=f"evalbook-bundle-{self.bundle['report']['report_id']}",
        )
        self.check_report()
        self.check_suite()
        self.check_scorers()
        manifests = self.check_datasets()
        self.check_checks_and_cases()
        self.check_examples(manifests)
        self.check_payloads()
        self.check_evidence_refs()
        self.check_accounting(manifests)
        self.check_coherence()
        return self.claims, {
            "bundle_digest": digest,
            "report_id": self.bundle["report"]["report_id"],
            "report_digest": self.bundle["report"]["digest"],
            "report_result": None if self.report is None else self.report["result"],
            "report_issued_at": None if self.report is None else self.report.get("issued_at"),
            "envelope": self.envelope,
        }
