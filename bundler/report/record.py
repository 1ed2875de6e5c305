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

import os
import stat
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundler.core import canonical
from bundler.core.errors import InputError, SchemaError
from bundler.core.schemas import validate
from bundler.report.jsonscan import Buffer, Span, scan_array, scan_object

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
    return InputError(f"{source}: {pointer}: {rule} (SPEC 14: a record must not contradict itself)")


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

    def item(self, key: str, value: Any, size: int) -> None:
        state = value["state"]
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
                f"says {head['strict_forecast']!r}, but the claims give "
                f"{self.strict_forecast(head)!r}",
            )
        yield from _eb_contradictions(head)


def eb_totals(summary: Mapping[str, Any]) -> Any:
    """eval-banana totals recomputed from the record's per-check statuses, or None."""
    from bundler.evalbanana.results import recompute_totals
    from bundler.evalbanana.run import CheckStatus

    checks = summary.get("checks")
    threshold = summary.get("pass_threshold")
    if not isinstance(checks, list) or isinstance(threshold, bool):
        return None
    if not isinstance(threshold, int | float):
        return None
    return recompute_totals([CheckStatus(c["status"]) for c in checks], float(threshold))


def _eb_contradictions(head: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    summary = head["summary"]
    totals = eb_totals(summary)
    if totals is None:
        return
    for c in summary["checks"]:
        if c["score"] != (1 if c["status"] == "passed" else 0):
            yield (
                "/summary/checks",
                f"check {c['check_id']!r} is {c['status']} with score {c['score']}",
            )
            break
    recomputed = summary.get("recomputed")
    if isinstance(recomputed, Mapping):
        for name, value in recomputed.items():
            want = getattr(totals, name, None)
            if want is not None and (
                value != want or isinstance(value, bool) != isinstance(want, bool)
            ):
                yield (
                    f"/summary/recomputed/{name}",
                    f"says {value!r}, but the checks' statuses give {want!r}",
                )
    if head["verdict"] != "error":
        result = "pass" if totals.run_passed else "fail"
        if head["report_result"] != result:
            yield (
                "/report_result",
                f"says {head['report_result']}, but the checks' statuses give {result}",
            )


class AuditFacts(Facts):
    def __init__(self) -> None:
        super().__init__()
        self.outcomes: Counter[str] = Counter()
        self.check_errors = 0
        self.disagreeing_fields = 0
        self.kept = {k: Kept() for k in STREAMED["audit"]}

    def head_fields(self, head: Mapping[str, Any]) -> None:
        report = head.get("report")
        if isinstance(report, Mapping):
            for f in report["fields"]:
                self.outcomes[f["outcome"]] += 1

    def item(self, key: str, value: Any, size: int) -> None:
        if key == "checks":
            for f in value["fields"]:
                self.outcomes[f["outcome"]] += 1
            self.check_errors += len(value["errors"])
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
        if bool(self.outcomes["disagree"]) != bool(self.kept["disagreements"].total):
            yield (
                "/disagreements",
                f"lists {self.kept['disagreements'].total}, but "
                f"{self.outcomes['disagree']} field(s) disagree",
            )
        verification = head.get("verification")
        if isinstance(verification, Mapping):
            failed = verification["counts"]["failed"]
            verdict = verification["verdict"]
            if (verdict == "verified" and failed) or (verdict == "failed" and not failed):
                yield (
                    "/verification/verdict",
                    f"says {verdict} with {failed} failed claim(s)",
                )


class FixityFacts(Facts):
    def __init__(self) -> None:
        super().__init__()
        self.by_outcome: Counter[str] = Counter()
        self.kept = {k: Kept() for k in STREAMED["fixity"]}

    def item(self, key: str, value: Any, size: int) -> None:
        if key == "problems":
            self.by_outcome[value["outcome"]] += 1
        self.kept[key].offer(value, size, self.budget)

    def failing(self, head: Mapping[str, Any]) -> int:
        """Bundles that did not pass, in this run or carried from an earlier one."""
        counts = head["counts"]
        this_run: int = sum(counts[k] for k in ("fail", "missing", "error"))
        return max(this_run, self.kept["problems"].total) + self.kept["carried"].total

    def contradictions(self, head: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        counts = head["counts"]
        total = sum(counts[k] for k in ("pass", "fail", "missing", "error"))
        if head["checked"] != total:
            yield "/checked", f"says {head['checked']}, but the counts add up to {total}"
        # Exit 1 exactly while a bundle failed or is missing (SPEC 13, 13.1); an error
        # outcome alone is exit 5, and an interrupted run 130 or 143.
        exit_code = head.get("exit_code")
        lost = counts["fail"] + counts["missing"] + self.kept["carried"].total
        lost += self.by_outcome["fail"] + self.by_outcome["missing"]
        if (exit_code == 0 and lost) or (exit_code == 1 and not lost):
            yield "/exit_code", f"says {exit_code}, but {lost} failure(s) are listed or counted"
        # Problems list this run's failures and may list failures carried from earlier
        # runs too: at least as many as the counts, never fewer.
        for outcome in ("fail", "missing", "error"):
            listed = self.by_outcome[outcome]
            if listed < counts[outcome]:
                yield (
                    f"/counts/{outcome}",
                    f"says {counts[outcome]}, but the problems list only {listed}",
                )


_FACTS = {"verification": VerificationFacts, "audit": AuditFacts, "fixity": FixityFacts}


@dataclass
class Sifted:
    """A record's own fields, the kept items of its long arrays, and what its items give."""

    kind: str
    head: dict[str, Any]
    facts: Any
    source: str


# ---- validation in batches ------------------------------------------------------------


class _Checker:
    """Validates the record's fields once, then its long arrays a batch at a time."""

    def __init__(
        self, kind: str, head: dict[str, Any], prefixes: dict[str, list[Any]], source: str
    ):
        self.schema = SCHEMA_FILES[kind]
        self.source = source
        self.skeleton = {**head, **prefixes}
        self.offsets: dict[str, int] = {}
        validate(self.schema, self.skeleton, source=source)

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
) -> Sifted:
    kind = _kind_of(head, source)
    checker = _Checker(kind, head, prefixes, source)
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
                values = canonical.loads(
                    b"[" + buf.slice(span) + b"]", source=f"{source}: {_pointer(key)}/{i}..."
                )
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
    return _sift(head, {k: items(k) for k in spans}, prefixes, source)
