"""A saved record read as untrusted input (SPEC 14): streamed, schema-checked, re-derived.

``render`` is handed a ``verification.json``, an ``audit.json`` or a ``fixity --json``
summary by someone else. ``sift_path`` reads it as a stream (``jsonscan``): the top-level
fields are parsed whole, each long array (claims, audit findings, fixity problems) one item
at a time; every item is checked against the record's schema and fed to the kind's
``Facts``, which counts what the page shows and keeps at most ``MAX_KEPT_ITEMS`` items of
each list to list by name. ``sift_value`` does the same for a record already in memory
(``verify --html``, ``audit --html``), so both give the same page.

Then ``Facts.contradictions`` compares what the record says with what its own items give:
a verdict its claims do not give, counts that disagree with the listed items, a fixity
summary whose problems contradict its counts. Any of them refuses the record (InputError,
exit 3) naming the field. The page shows only the derived values.

Bounds: a record file over ``MAX_RECORD_BYTES``, one top-level value or one item over
``MAX_VALUE_BYTES`` is refused; the items kept for the page stop at ``MAX_KEPT_ITEMS`` per
list and ``MAX_KEPT_BYTES`` in all (the rest are counted, and the page says how many more).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundler.core import canonical
from bundler.core.errors import InputError, SchemaError
from bundler.core.exits import SIGNAL_EXIT
from bundler.core.schemas import validate
from bundler.core.textsafe import quoted
from bundler.report.audit_values import (
    GroupFacts,
    ReportResultFacts,
    audit_field_contradiction,
    check_status_contradiction,
    expected_disagreements,
    field_disagreements,
    is_number,
)
from bundler.report.jsonscan import Buffer, Span, run_items, scan_array, scan_object
from bundler.report.record_formats import exit_contradiction as _exit_contradiction
from bundler.report.record_formats import format_contradictions as _format_contradictions
from bundler.report.ties import (
    ANCHOR_SUBJECTS,
    EVALBOOK_BUNDLE,
    IDENTIFIER,
    ProofClaims,
    anchor_contradictions,
    audit_anchor_contradictions,
    audit_contradictions,
    envelope_contradictions,
    summary_contradictions,
)

# A saved record is at most what verify writes for a 20,000-case bundle, many times over.
MAX_RECORD_BYTES = 512 * 1024 * 1024
# One top-level value other than the streamed arrays, or one item of them.
MAX_VALUE_BYTES = 16 * 1024 * 1024
# Items listed by name on the page, per list, and their bytes in all.
MAX_KEPT_ITEMS = 1000
MAX_KEPT_BYTES = 32 * 1024 * 1024
# Items validated together against the record's schema.
_BATCH = 1000
# Items of each streamed array that stand in for it when the record's own fields are
# validated: enough for every condition the schemas put on an array's length (0 or 1).
_PREFIX = 2
MAX_FIELDS = 256

VERIFICATION_SCHEMA = "evalbook.verification.v1"
AUDIT_SCHEMA = "evalbook.audit.v1"
FIXITY_SCHEMA = "evalbook.fixity_summary.v1"
KINDS = {VERIFICATION_SCHEMA: "verification", AUDIT_SCHEMA: "audit", FIXITY_SCHEMA: "fixity"}
SCHEMA_FILES = {"verification": "verification", "audit": "audit", "fixity": "fixity-summary"}
# The arrays of each kind read one item at a time.
STREAMED = {
    "verification": ("claims",),
    "audit": ("checks", "disagreements", "not_rederivable", "errors"),
    "fixity": ("problems", "carried"),
}
_ALL_STREAMED = frozenset(k for keys in STREAMED.values() for k in keys)


def _refuse(source: str, pointer: str, rule: str) -> InputError:
    return InputError(
        f"{source}: {pointer}: {rule} (SPEC 14: a record must be schema-valid and must not contradict itself)"
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ---- what each kind derives from its items ------------------------------------------


@dataclass
class Kept:
    """The first items of one list, within the page's bounds, and how many there were."""

    items: list[Any] = field(default_factory=list)
    total: int = 0

    def offer(self, item: Any, size: int, budget: list[int]) -> None:
        self.total += 1
        if len(self.items) < MAX_KEPT_ITEMS and budget[0] >= size:
            budget[0] -= size
            self.items.append(item)

    @property
    def more(self) -> int:
        return self.total - len(self.items)


class Facts:
    """Counts and kept items of one record, fed one item at a time."""

    def __init__(self) -> None:
        self.budget = [MAX_KEPT_BYTES]

    def item(self, key: str, value: Any, size: int) -> None:
        raise NotImplementedError

    def contradictions(self, head: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        """(JSON pointer, rule) for each thing the record says that its items do not give."""
        raise NotImplementedError


class VerificationFacts(Facts):
    def __init__(self) -> None:
        super().__init__()
        self.states: Counter[str] = Counter()
        self.groups: dict[int, Counter[str]] = {}
        self.by_reason: Counter[str] = Counter()
        self.failed = Kept()
        self.unprovable = Kept()
        self.inputs = Kept()
        # The claims behind the anchor: (expected, observed, state) of each.
        self.anchor_claims: dict[str, list[tuple[Any, Any, str]]] = {s: [] for s in ANCHOR_SUBJECTS}
        self.n = 0
        self.first_unequal: int | None = None
        self.proofs = ProofClaims()  # the claims behind the other facts the page shows

    def item(self, key: str, value: Any, size: int) -> None:
        state = value["state"]
        self.proofs.add(value)
        if value["subject"] in self.anchor_claims and len(self.anchor_claims[value["subject"]]) < 8:
            self.anchor_claims[value["subject"]].append(
                (value["expected"], value["observed"], state)
            )
        # A proven comparison found what it expected: the two digests it shows are one.
        if (
            state == "proven"
            and self.first_unequal is None
            and value["expected"] is not None
            and value["observed"] is not None
            and value["expected"] != value["observed"]
        ):
            self.first_unequal = self.n
        self.n += 1
        group = value["group"]
        self.states[state] += 1
        counter = self.groups.get(group)
        if counter is None:
            counter = self.groups[group] = Counter()
        counter[state] += 1
        if state == "failed":
            self.failed.offer(value, size, self.budget)
        elif state == "unprovable":
            self.unprovable.offer(value, size, self.budget)
            self.by_reason[value["reason"] or "unknown"] += 1
        if group in (4, 5) or (group == 6 and value["subject"].startswith("dataset ")):
            self.inputs.offer(value, size, self.budget)

    def counts(self) -> dict[str, int]:
        return {s: self.states[s] for s in ("proven", "unprovable", "failed")}

    def verdict(self, head: Mapping[str, Any]) -> str:
        if head["verdict"] == "error":
            return "error"
        return "failed" if self.states["failed"] else "verified"

    def strict_forecast(self, head: Mapping[str, Any]) -> str | None:
        n = self.states["unprovable"]
        if head["strict"] or self.verdict(head) != "verified" or not n:
            return None
        return f"FAILED ({n} unprovable {'claim' if n == 1 else 'claims'} would fail)"

    def contradictions(self, head: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        derived = self.verdict(head)
        if head["verdict"] != derived:
            yield (
                "/verdict",
                f"says {head['verdict']}, but its claims give {derived} "
                f"({self.states['failed']} failed)",
            )
        for state, n in self.counts().items():
            if head["counts"][state] != n:
                yield f"/counts/{state}", f"says {head['counts'][state]}, but the claims hold {n}"
        if dict(head["unprovable_by_reason"]) != dict(self.by_reason):
            yield (
                "/unprovable_by_reason",
                f"says {dict(sorted(head['unprovable_by_reason'].items()))}, but the "
                f"unprovable claims give {dict(sorted(self.by_reason.items()))}",
            )
        if head["strict"] and self.states["unprovable"]:
            yield "/strict", "says --strict, under which no claim stays unprovable"
        if head["strict_forecast"] != self.strict_forecast(head):
            yield (
                "/strict_forecast",
                f"says {quoted(head['strict_forecast'])}, but the claims give "
                f"{quoted(self.strict_forecast(head))}",
            )
        if self.first_unequal is not None:
            yield (
                f"/claims/{self.first_unequal}/observed",
                "differs from expected in a proven claim (a proven comparison found what it "
                "expected)",
            )
        yield from _exit_contradiction(head, _VERIFICATION_EXIT[head["verdict"]])
        yield from anchor_contradictions(head, self.anchor_claims)
        yield from _format_contradictions(head, _VERIFICATION_FORMATS)
        yield from self.proofs.contradictions(head)
        yield from summary_contradictions(head)
        yield from envelope_contradictions(
            head["report_id"], head["report_issued_at"], head["envelope"]
        )


# The exit code each verdict gives (SPEC 8): an error is 3, or 5 when storage failed.
# A record carries the process's exit code (SPEC 7): with several bundles, one that
# verified may stand in a run that exits 1 (another failed) or 3 or 5 (another could not
# be checked). A failed bundle always makes the run exit 1.
_VERIFICATION_EXIT = {"verified": (0, 1, 3, 5), "failed": (1,), "error": (1, 3, 5)}
# Text fields the page shows whose spelling the contract fixes: (pointer, pattern, rule,
# bundle schemas it applies to or None for every record). Null always passes: the
# schema says when a field may be null.
_TIMESTAMP = re.compile(
    r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:"
    r"([0-5][0-9]|60)(\.[0-9]+)?Z"
)
_VERSION = re.compile(r"[0-9]+(\.[0-9]+)*([-+.][0-9A-Za-z][0-9A-Za-z.+-]{0,63})?")
_TIMESTAMP_RULE = "must be an RFC 3339 UTC timestamp, as the report's documents hold it"
_VERIFICATION_FORMATS: tuple[tuple[tuple[str, ...], re.Pattern[str], str, str | None], ...] = (
    (("tool", "version"), _VERSION, "must be a version number (digits and dots)", None),
    # An eval-banana run's id too: the run reader takes no other (evalbanana.run).
    (("report_id",), IDENTIFIER, "must be a report or run identifier (SPEC 3)", None),
    (("report_issued_at",), _TIMESTAMP, _TIMESTAMP_RULE, EVALBOOK_BUNDLE),
    (("envelope", "superseded_at"), _TIMESTAMP, _TIMESTAMP_RULE, EVALBOOK_BUNDLE),
)


class AuditFacts(Facts):
    def __init__(self) -> None:
        super().__init__()
        self.outcomes: Counter[str] = Counter()
        self.check_errors = 0
        self.disagreeing_fields = 0
        self.kept = {k: Kept() for k in STREAMED["audit"]}

        # Disagreements the fields' own values give, and the first field whose outcome,
        # comparison or value its values contradict.
        self.found = 0
        self.first_wrong: tuple[str, str] | None = None
        self.report_result = ReportResultFacts()  # the required checks' derived results
        # The disagreements the fields give, in the auditor's order (the report's, then
        # each check's): (where, digest of the item but its detail), and the first listed
        # item that is not the one its place gives.
        self.expected: list[tuple[str, bytes]] = []
        self.first_stray: tuple[str, str] | None = None

    def _field(self, where: str, f: Mapping[str, Any], check_id: Any = None) -> None:
        self.outcomes[f["outcome"]] += 1
        if f["outcome"] not in ("agree", "disagree"):
            return
        wrong = audit_field_contradiction(f)
        given = expected_disagreements(check_id, f) if wrong is None else []
        self.expected += [(where, _digest(d)) for d in given]
        n = field_disagreements(f)
        self.found += n
        if wrong is None and (n > 0) != (f["outcome"] == "disagree"):
            wrong = (
                "outcome",
                f"says {f['outcome']}, but its issued and derived values give "
                + ("disagree" if n else "agree"),
            )
        if wrong is not None and self.first_wrong is None:
            self.first_wrong = (f"{where}/{wrong[0]}", wrong[1])

    def head_fields(self, head: Mapping[str, Any]) -> None:
        report = head.get("report")
        if isinstance(report, Mapping):
            for j, f in enumerate(report["fields"]):
                self._field(f"/report/fields/{j}", f)
        groups = GroupFacts(head.get("groups"))  # lm-eval groups (SPEC 16)
        self.outcomes.update(groups.outcomes)
        self.found += groups.found
        self.first_wrong = self.first_wrong or groups.wrong

    def item(self, key: str, value: Any, size: int) -> None:
        if key == "checks":
            i = self.kept["checks"].total
            for j, f in enumerate(value["fields"]):
                self._field(f"/checks/{i}/fields/{j}", f, value["check_id"])
            self.check_errors += len(value["errors"])
            wrong = check_status_contradiction(value)
            if wrong is not None and self.first_wrong is None:
                self.first_wrong = (f"/checks/{i}/{wrong[0]}", wrong[1])
            self.report_result.add(value)
        elif key == "disagreements" and self.first_stray is None:
            i = self.kept["disagreements"].total
            mine = _digest({k: v for k, v in value.items() if k != "detail"})
            if i < len(self.expected) and mine != self.expected[i][1]:
                self.first_stray = (
                    f"/disagreements/{i}",
                    f"is not the disagreement {self.expected[i][0]} gives (its scope, "
                    "check_id, field, kind, issued and derived values and comparison, in "
                    "the order of the report's fields, then each check's)",
                )
        self.kept[key].offer(value, size, self.budget)

    def contradictions(self, head: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        counts = head["counts"]
        derived = {
            "checks": self.kept["checks"].total,
            "agree": self.outcomes["agree"],
            "disagree": self.outcomes["disagree"],
            "not_rederivable": self.outcomes["not_rederivable"],
            "informational": self.outcomes["informational"],
            "disagreements": self.kept["disagreements"].total,
            "errors": self.kept["errors"].total,
        }
        for name, n in derived.items():
            if counts[name] != n:
                yield f"/counts/{name}", f"says {counts[name]}, but the record's items give {n}"
        if self.check_errors != self.kept["errors"].total:
            yield (
                "/errors",
                f"lists {self.kept['errors'].total}, but its checks hold {self.check_errors}",
            )
        if self.first_wrong is not None:
            yield self.first_wrong
        wrong = self.report_result.contradiction(head.get("report"))
        if wrong is not None:
            yield wrong
        if self.first_stray is not None:
            yield self.first_stray
        if self.found != self.kept["disagreements"].total:
            yield (
                "/disagreements",
                f"lists {self.kept['disagreements'].total}, but the fields' issued and "
                f"derived values give {self.found}",
            )
        verdict = "inconsistent" if self.found else "consistent"
        if head["verdict"] != "error" and head["verdict"] != verdict:
            yield "/verdict", f"says {head['verdict']}, but the fields give {verdict}"
        verification = head.get("verification")
        yield from audit_contradictions(head)
        yield from audit_anchor_contradictions(head, verification)
        if isinstance(verification, Mapping):
            yield from (
                (f"/verification{pointer}", rule)
                for pointer, rule in _format_contradictions(verification, _VERIFICATION_FORMATS)
            )
            failed = verification["counts"]["failed"]
            verdict = verification["verdict"]
            if (verdict == "verified" and failed) or (verdict == "failed" and not failed):
                yield (
                    "/verification/verdict",
                    f"says {verdict} with {failed} failed claim(s)",
                )


def _digest(value: Any) -> bytes:
    return hashlib.blake2b(canonical.dumps(value), digest_size=16).digest()


class FixityFacts(Facts):
    def __init__(self) -> None:
        super().__init__()
        self.by_outcome: Counter[str] = Counter()
        self.kept = {k: Kept() for k in STREAMED["fixity"]}
        # Each bundle is checked once a run: its key's digest, to find one listed twice.
        self.keys: set[bytes] = set()
        self.repeated: tuple[str, str] | None = None

    def item(self, key: str, value: Any, size: int) -> None:
        seen = hashlib.blake2b(value["key"].encode("utf-8", "surrogatepass"), digest_size=16)
        if key == "problems":
            self.by_outcome[value["outcome"]] += 1
            if seen.digest() in self.keys and self.repeated is None:
                self.repeated = (
                    f"/problems/{self.kept[key].total}/key",
                    "lists a bundle already listed",
                )
            self.keys.add(seen.digest())
        elif self.repeated is None:
            # A carried failure is one the run did not check: never one of its problems,
            # and each open failure is carried once (run.py: open failures not checked).
            if seen.digest() in self.keys:
                self.repeated = (
                    f"/carried/{self.kept[key].total}/key",
                    "lists a bundle this run checked (under problems) or already carried",
                )
            self.keys.add(seen.digest())
        self.kept[key].offer(value, size, self.budget)

    def failing(self, head: Mapping[str, Any]) -> int:
        """Bundles that did not pass, in this run or carried from an earlier one."""
        return self.kept["problems"].total + self.kept["carried"].total

    def exit_code(self, head: Mapping[str, Any]) -> tuple[int, ...]:
        """The exit codes the record's items give (SPEC 13, 13.1; run.Summary.exit_code):
        130 or 143 when interrupted; 1 while a bundle failed, is missing or an earlier
        failure is open; 5 or 3 for errors alone (storage or not: the record does not
        say); else 0."""
        interrupted = head.get("interrupted")
        if interrupted is not None:
            return (SIGNAL_EXIT[interrupted],) if interrupted in SIGNAL_EXIT else ()
        if self.by_outcome["fail"] or self.by_outcome["missing"] or self.kept["carried"].total:
            return (1,)
        return (3, 5) if self.by_outcome["error"] else (0,)

    def contradictions(self, head: Mapping[str, Any]) -> Iterator[tuple[str, str]]:

        counts = head["counts"]
        # The problems list exactly this run's bundles that did not pass (run._Run.take).
        for outcome in ("fail", "missing", "error"):
            listed = self.by_outcome[outcome]
            if listed != counts[outcome]:
                yield (
                    f"/counts/{outcome}",
                    f"says {counts[outcome]}, but the problems list {listed}",
                )
        if self.repeated is not None:
            yield self.repeated
        if self.kept["carried"].total and not _may_leave_failures(head):
            yield (
                "/carried",
                f"lists {self.kept['carried'].total}, but a run whose selection keeps every "
                "bundle (no --sample, --limit or --limit-bytes) and that was not interrupted "
                "checks every open failure, so it carries none",
            )
        present = sum(counts[k] for k in ("pass", "fail", "error"))
        if present > head["listed"]:
            yield (
                "/listed",
                f"says {head['listed']}, but {present} bundles were read in this run (pass, "
                "fail and error: only a missing bundle can be checked without being listed)",
            )
        total = sum(counts[k] for k in ("pass", "fail", "missing", "error"))
        if head["checked"] != total:
            yield "/checked", f"says {head['checked']}, but the counts add up to {total}"
        interrupted = head.get("interrupted")
        if interrupted is not None and interrupted not in SIGNAL_EXIT:
            yield "/interrupted", f"must be one of {', '.join(SIGNAL_EXIT)} or null"
        allowed = self.exit_code(head)
        exit_code = head.get("exit_code")
        if exit_code is not None and allowed and exit_code not in allowed:
            yield (
                "/exit_code",
                f"says {exit_code}, but the record's items give "
                + " or ".join(str(c) for c in allowed),
            )
        shares = head["shares"]
        last = 0.0
        for period in ("30d", "90d", "365d"):
            share = shares[period]
            if not (is_number(share) and last <= share <= 1):
                yield (
                    f"/shares/{period}",
                    f"says {share}, but a share lies from 0 to 1 and never shrinks as the "
                    "period grows",
                )
                break
            last = share


def _may_leave_failures(head: Mapping[str, Any]) -> bool:
    """Whether a fixity run may leave an open failure unchecked: only one that chose a
    part of the source (``select``: a sample, a count or a byte limit; --older-than
    still takes every open failure first) or that a signal cut short."""
    selection = head.get("selection")
    limited = isinstance(selection, Mapping) and any(
        selection.get(k) is not None for k in ("sample", "limit", "limit_bytes")
    )
    return limited or head.get("interrupted") is not None


_FACTS = {"verification": VerificationFacts, "audit": AuditFacts, "fixity": FixityFacts}


@dataclass
class Sifted:
    """A record's own fields, the kept items of its long arrays, and what its items give."""

    kind: str
    head: dict[str, Any]
    facts: Any
    source: str


# ---- validation in batches ------------------------------------------------------------


_TOO_MANY = re.compile(r"/(?P<key>[a-z_]+): has [0-9]+ items, at most (?P<most>[0-9]+) allowed")


class _Checker:
    """Validates the record's fields once, then its long arrays a batch at a time."""

    def __init__(
        self,
        kind: str,
        head: dict[str, Any],
        prefixes: dict[str, list[Any]],
        source: str,
        count: Callable[[str], int],
    ):
        self.schema = SCHEMA_FILES[kind]
        self.source = source
        self.skeleton = {**head, **prefixes}
        self.offsets: dict[str, int] = {}
        try:
            validate(self.schema, self.skeleton, source=source)
        except SchemaError as exc:
            # A streamed array stands here as its first items: a bound on its length is
            # told with its real length, and the field whose value sets the bound.
            bound = _TOO_MANY.match(exc.message.removeprefix(f"{source}: "))
            if bound is None or bound["key"] not in prefixes:
                raise
            raise SchemaError(
                f"{source}: /{bound['key']}: has {count(bound['key'])} items, at most "
                f"{bound['most']} allowed when /verdict is {quoted(head.get('verdict'))} "
                f"(schema {self.schema})"
            ) from None

    def check(self, key: str, batch: list[Any]) -> None:
        """Each item of ``batch`` (the next items of array ``key``) is schema-valid."""
        if not batch:
            return
        offset = self.offsets.get(key, 0)
        try:
            validate(self.schema, {**self.skeleton, key: batch}, source=self.source)
        except SchemaError:
            for i, item in enumerate(batch):
                try:
                    validate(self.schema, {**self.skeleton, key: [item]}, source=self.source)
                except SchemaError as exc:
                    local = f"{self.source}: /{key}/0"
                    real = f"{self.source}: /{key}/{offset + i}"
                    raise SchemaError(exc.message.replace(local, real, 1)) from None
            raise
        self.offsets[key] = offset + len(batch)


def _feed(checker: _Checker, facts: Facts, key: str, batch: list[tuple[Any, int]]) -> None:
    checker.check(key, [value for value, _ in batch])
    for value, size in batch:
        facts.item(key, value, size)


def _kind_of(head: Mapping[str, Any], source: str) -> str:
    schema = head.get("schema")
    kind = KINDS.get(schema) if isinstance(schema, str) else None
    if kind is None:
        raise InputError(
            f"{source}: /schema: not a verification, audit or fixity summary record "
            f"(must be one of {', '.join(KINDS)})"
        )
    return kind


def _sift(
    head: dict[str, Any],
    arrays: dict[str, Iterable[tuple[Any, int]]],
    prefixes: dict[str, list[Any]],
    source: str,
    count: Callable[[str], int],
) -> Sifted:
    kind = _kind_of(head, source)
    checker = _Checker(kind, head, prefixes, source, count)
    facts = _FACTS[kind]()
    if isinstance(facts, AuditFacts):
        facts.head_fields(head)
    for key in STREAMED[kind]:
        if key not in arrays:
            continue
        batch: list[tuple[Any, int]] = []
        for pair in arrays[key]:
            batch.append(pair)
            if len(batch) >= _BATCH:
                _feed(checker, facts, key, batch)
                batch = []
        _feed(checker, facts, key, batch)
    for pointer, rule in facts.contradictions(head):
        raise _refuse(source, pointer, rule)
    return Sifted(kind=kind, head=head, facts=facts, source=source)


def sift_value(record: Mapping[str, Any], *, source: str = "record") -> Sifted:
    """A record already in memory, checked and re-derived exactly as ``sift_path`` does.

    The record is read from its canonical bytes by the file reader itself, so both give
    one order of checks and the same error for the same record: a value the file would
    spell as an integer past 2^53 (a float such as 1e20) is refused here as there.
    Raises InputError (exit 3), CanonicalJSONError for a value JSON cannot hold.
    """
    if not isinstance(record, Mapping):
        raise InputError(f"{source}: not a JSON object")
    try:
        data = canonical.dumps(record)
    except InputError as exc:
        raise InputError(f"{source}: {exc.message}") from None
    return _sift_buffer(Buffer.from_bytes(data), source)


def _open(path: Path) -> tuple[int, int]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise InputError(f"{path}: not a regular file")
    if info.st_size > MAX_RECORD_BYTES:
        os.close(fd)
        raise InputError(f"{path}: {info.st_size} bytes, over the {MAX_RECORD_BYTES}-byte cap")
    return fd, info.st_size


def sift_path(path: Path) -> Sifted:
    """Read, check and re-derive the record at ``path``; raises InputError (exit 3)."""
    source = str(path)
    fd, size = _open(path)
    try:
        buf = Buffer(fd, size)
    except (OSError, ValueError) as exc:
        os.close(fd)
        raise InputError(f"{path}: cannot read ({exc})") from exc
    os.close(fd)
    try:
        return _sift_buffer(buf, source)
    finally:
        buf.close()


def _load(buf: Buffer, span: Span, source: str, pointer: str) -> Any:
    if span.size > MAX_VALUE_BYTES:
        raise InputError(
            f"{source}: {pointer}: {span.size} bytes, over the {MAX_VALUE_BYTES}-byte cap"
        )
    return canonical.loads(buf.slice(span), source=f"{source}: {pointer}")


def _pointer(key: str) -> str:
    return "/" + key.replace("~", "~0").replace("/", "~1")


def _sift_buffer(buf: Buffer, source: str) -> Sifted:
    head: dict[str, Any] = {}
    spans: dict[str, Span] = {}
    for key_span, value_span in scan_object(buf.data, source, buf):
        key = canonical.loads(buf.slice(key_span), source=f"{source}: a key")
        if key in head or key in spans:
            raise InputError(f"{source}: {_pointer(key)}: the key appears twice")
        if len(head) + len(spans) >= MAX_FIELDS:
            raise InputError(f"{source}: more than {MAX_FIELDS} top-level fields")
        if key in _ALL_STREAMED and buf.data[value_span.start] == 0x5B:
            spans[key] = value_span
        else:
            head[key] = _load(buf, value_span, source, _pointer(key))
    kind = _kind_of(head, source)
    # Arrays this kind does not stream are parsed whole (the schema then judges them).
    for key in [k for k in spans if k not in STREAMED[kind]]:
        head[key] = _load(buf, spans.pop(key), source, _pointer(key))

    def items(key: str) -> Iterator[tuple[Any, int]]:
        i = 0
        for span, run in scan_array(buf.data, spans[key], source, buf):
            if run:
                try:
                    values = canonical.loads(
                        b"[" + buf.slice(span) + b"]", source=f"{source}: {_pointer(key)}/{i}..."
                    )
                except InputError:
                    # Parsed again one item at a time, so the refusal names its item.
                    for j, one in enumerate(run_items(buf.data, span, source, buf)):
                        _load(buf, one, source, f"{_pointer(key)}/{i + j}")
                    raise
                each = span.size // max(len(values), 1)
                for value in values:
                    yield value, each
                i += len(values)
            else:
                yield _load(buf, span, source, f"{_pointer(key)}/{i}"), span.size
                i += 1
            buf.release_before(span.end)

    prefixes: dict[str, list[Any]] = {}
    for key in spans:
        prefixes[key] = []
        for value, _ in items(key):
            if len(prefixes[key]) >= _PREFIX:
                break
            prefixes[key].append(value)

    def count(key: str) -> int:
        return sum(1 for _ in items(key))

    return _sift(head, {k: items(k) for k in spans}, prefixes, source, count)
