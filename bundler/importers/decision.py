"""The decision file of an import, ``evalbook.decision.v1`` (SPEC 16).

Runners report metrics, not verdicts. Without a decision every check is optional with
a null threshold, so every status and the report's result are ``inconclusive`` (SPEC
12). A decision file names checks by the ids the import gives and sets, for each,
whether it is required and its aggregation (SPEC 3.3); the rules go into the suite and
the verdict is derived as SPEC 12 derives it, so ``audit`` re-derives it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bundler.core import canonical
from bundler.core.digests import bytes_digest
from bundler.core.errors import CanonicalJSONError, InputError
from bundler.evalbook.group_rule import mean_aggregation
from bundler.importers.runfile import open_run_file

SCHEMA = "evalbook.decision.v1"
MAX_DECISION_BYTES = 1024 * 1024
DEFAULT_VALIDITY_HOURS = 8760
_AGGREGATION_KEYS = ("rule", "threshold", "min_coverage", "min_samples", "repeats")
_RULES = ("all_pass", "pass_rate", "mean", "min")


@dataclass(frozen=True)
class CheckDecision:
    required: bool
    aggregation: dict[str, Any]


@dataclass(frozen=True)
class Decision:
    """The parsed decision; ``digest`` is the SHA-256 of the file's bytes."""

    checks: dict[str, CheckDecision]
    validity_hours: int
    digest: str
    name: str
    size: int
    where: str = ""  # the path as given, for messages


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _aggregation_problem(agg: Any) -> str | None:
    if not isinstance(agg, dict):
        return "must be an object"
    unknown = sorted(set(agg) - set(_AGGREGATION_KEYS))
    if unknown:
        return f"unknown key {unknown[0]!r}"
    missing = [k for k in _AGGREGATION_KEYS if k not in agg]
    if missing:
        return f"missing key {missing[0]!r} (give all of {', '.join(_AGGREGATION_KEYS)})"
    if agg["rule"] not in _RULES:
        return f"rule must be one of {', '.join(_RULES)}"
    if agg["threshold"] is not None and not _number(agg["threshold"]):
        return "threshold must be a number or null"
    mc = agg["min_coverage"]
    if mc is not None and (not _number(mc) or not 0 <= mc <= 1):
        return "min_coverage must be a number in 0..1 or null"
    ms = agg["min_samples"]
    if ms is not None and (not isinstance(ms, int) or isinstance(ms, bool) or ms < 0):
        return "min_samples must be an integer >= 0 or null"
    rp = agg["repeats"]
    if not isinstance(rp, int) or isinstance(rp, bool) or not 1 <= rp <= 20_000:
        return "repeats must be an integer in 1..20000"
    return None


def read_decision(path: Any) -> Decision:
    """Parse and check a decision file; InputError (exit 3) naming the key and the rule."""
    run_file = open_run_file(path, role="--decision file", cap=MAX_DECISION_BYTES)
    try:
        data = run_file.read_all(cap=MAX_DECISION_BYTES)
    finally:
        run_file.close()
    where = str(path)
    value = canonical.loads(data, source=where, max_values=canonical.MAX_VALUES)
    if not isinstance(value, dict):
        raise InputError(f"{where}: a decision file is a JSON object")
    unknown = sorted(set(value) - {"schema", "checks", "validity_hours"})
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r}")
    if value.get("schema") != SCHEMA:
        raise InputError(f"{where}: schema: must be {SCHEMA!r}")
    validity = value.get("validity_hours", DEFAULT_VALIDITY_HOURS)
    if not isinstance(validity, int) or isinstance(validity, bool) or not 1 <= validity <= 876_000:
        raise InputError(f"{where}: validity_hours: must be an integer in 1..876000")
    checks = value.get("checks")
    if not isinstance(checks, dict):
        raise InputError(f"{where}: checks: must be an object of check ids")
    parsed: dict[str, CheckDecision] = {}
    for check_id, entry in checks.items():
        key = f"{where}: checks.{check_id}"
        if not isinstance(entry, dict) or set(entry) != {"required", "aggregation"}:
            raise InputError(f"{key}: must be an object with exactly required and aggregation")
        if not isinstance(entry["required"], bool):
            raise InputError(f"{key}.required: must be true or false")
        problem = _aggregation_problem(entry["aggregation"])
        if problem is not None:
            raise InputError(f"{key}.aggregation: {problem}")
        try:
            # What the suite will hold, read back as its readers read it: a threshold
            # such as 1e19 is written as an integer past 2^53, which they refuse.
            canonical.check_readable(
                canonical.dumps(entry["aggregation"]), source=f"{key}.aggregation"
            )
        except CanonicalJSONError as exc:
            raise InputError(
                f"{exc.message} (JCS writes this number as that integer, which the store's "
                "readers refuse)"
            ) from None
        parsed[check_id] = CheckDecision(entry["required"], dict(entry["aggregation"]))
    name = path.name if hasattr(path, "name") else where
    return Decision(parsed, validity, bytes_digest(data), name, len(data), where)


def no_threshold(repeats: int) -> dict[str, Any]:
    """The aggregation of a check without a decision: the mean, no threshold."""
    return mean_aggregation(repeats)


def check_known(decision: Decision | None, repeats: dict[str, int]) -> None:
    """Refuse a decision that names a check the import does not give, or gives a check
    ``aggregation.repeats`` other than the run's repeats of it (Inspect's epochs; 1 for
    lm-eval): the cases' repeats are the run's, so any other count would make every
    example missing or every case out of range."""
    if decision is None:
        return
    for check_id in sorted(decision.checks):
        if check_id not in repeats:
            known = ", ".join(sorted(repeats)) or "none"
            raise InputError(
                f"{decision.where}: checks.{check_id}: no such check in this run "
                f"(the import gives: {known})"
            )
        given = decision.checks[check_id].aggregation["repeats"]
        if given != repeats[check_id]:
            raise InputError(
                f"{decision.where}: checks.{check_id}.aggregation.repeats: {given}, but the run "
                f"gives {repeats[check_id]} repeat{'s' if repeats[check_id] != 1 else ''} of "
                "each example (Inspect: its epochs; lm-eval: 1); import refused"
            )
