"""Running a fixity pass (SPEC sections 13 and 13.1): select, check (``execute``), write
the ledger and the record, summarise; and retiring a failed bundle on purpose.

Nothing is created before the run can start: the ledger is inspected read-only, the
source listed and the options checked first, and only then are the ledger and the
record written. Results come back to this process, which alone writes the ledger, one
transaction per batch, so a run killed at any point loses at most the batches in
flight. SIGINT and SIGTERM (KeyboardInterrupt here) stop the checking, never the writing
of a batch's evidence (``interrupts``); the summary of what was checked so far is still
returned, marked interrupted, and the record holds exactly those checks.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from bundler import storage
from bundler.core.errors import BundlerError, InputError, ParameterError, StorageError, UsageError
from bundler.core.exits import SIGNAL_EXIT
from bundler.core.frozen import freeze, thaw
from bundler.core.textsafe import shown
from bundler.core.version import TOOL_NAME, __version__
from bundler.fixity import ledger as ledger_file
from bundler.fixity.check import Result, Settings, Task, held_sha256, missing, now_iso
from bundler.fixity.execute import HelperPool, close_scheduler, connect_scheduler, execute
from bundler.fixity.interrupts import Interrupts
from bundler.fixity.ledger import Event, Ledger
from bundler.fixity.record import CHECK_SCHEMA, FOOTER_SCHEMA, RUN_SCHEMA, RecordWriter
from bundler.fixity.select import Candidate, Selection, list_source, select

SUMMARY_SCHEMA = "evalbook.fixity_summary.v1"
RETIRED_SCHEMA = "evalbook.fixity_retired.v1"
OUTCOMES = ("pass", "fail", "missing", "error")
SHARE_WINDOWS = (("30d", 30), ("90d", 90), ("365d", 365))
# The first checks of a run, all ending in the same storage error, that stop it.
EARLY_STOP_CHECKS = 10


@dataclass(frozen=True)
class FixityConfig:
    """One run of ``fixity``, as the command line gives it."""

    source: str
    level: str = "full"
    ledger: Path = Path("evalbook-fixity.sqlite")
    selection: Selection = field(default_factory=Selection)
    workers: int = 1
    scheduler: str | None = None
    endpoint_url: str | None = None
    allowed_signers: Path | None = None
    record: Path | None = None
    upload_record: bool = False


@dataclass
class Progress:
    """What the progress line shows: checked of total, bytes, failures so far."""

    total: int = 0
    checked: int = 0
    bytes_read: int = 0
    not_passed: int = 0


@dataclass(frozen=True)
class Summary:
    """The result of a run, as stdout shows it (``to_json`` for --json)."""

    run_id: str
    source: str
    level: str
    selection: dict[str, object]
    started: str
    finished: str
    wall_seconds: float
    listed: int
    counts: dict[str, int]
    bytes_read: int
    problems: list[dict[str, str]]
    carried: list[dict[str, str | None]]  # open failures of earlier runs, not checked now
    shares: dict[str, float]
    ledger: str
    record: str | None
    record_sha256: str | None  # of the record file's bytes
    record_chain_sha256: str | None  # the footer's digest of the lines before it
    record_url: str | None
    signature: str | None
    storage_errors: int
    interrupted: str | None = None  # "SIGINT" or "SIGTERM"

    def __post_init__(self) -> None:
        # Frozen through and through: no field can drift from ``to_json()``.
        for name in ("selection", "counts", "problems", "carried", "shares"):
            object.__setattr__(self, name, freeze(getattr(self, name)))

    @property
    def exit_code(self) -> int:
        """130 or 143 when interrupted; 1 when any check failed or is missing, or an
        earlier failure is still open; 5 when storage kept some from being checked; 3
        when some could not be read for another reason; else 0."""
        if self.interrupted is not None:
            return SIGNAL_EXIT[self.interrupted]
        if self.counts["fail"] or self.counts["missing"] or self.carried:
            return 1
        if self.storage_errors:
            return 5
        return 3 if self.counts["error"] else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SUMMARY_SCHEMA,
            "tool": {"name": TOOL_NAME, "version": __version__},
            **{k: thaw(v) for k, v in asdict(self).items() if k != "storage_errors"},
            "checked": sum(self.counts.values()),
            "exit_code": self.exit_code,
        }


def normalise_source(source: str) -> str:
    """The source as the ledger keys it: an absolute local path, or the s3:// prefix
    without a trailing slash. UsageError for an s3:// URL that is no prefix."""
    if source.startswith("s3://"):
        loc = storage.parse_s3_url(source)
        return f"s3://{loc.bucket}/{loc.key.strip('/')}".rstrip("/")
    return os.path.abspath(source)


def _settings(config: FixityConfig, source: str) -> Settings:
    endpoint, region = config.endpoint_url, None
    if source.startswith("s3://"):
        # Resolved here, once, so that every checker (a helper, a cluster worker on
        # another machine) reaches the same storage the same way (SPEC 13.1).
        resolved = storage.resolved_config(storage.StorageConfig(endpoint_url=endpoint))
        endpoint, region = resolved.endpoint_url, resolved.region
    return Settings(
        source=source,
        level=config.level,
        endpoint_url=endpoint,
        region=region,
        allowed_signers=_read_text(config.allowed_signers),
        allowed_signers_name=str(config.allowed_signers or "allowed_signers"),
    )


class _Run:
    """What one run accumulates while results come in, and the one writer of its
    evidence: each batch goes to the ledger, then to the record, then into the counts
    the summary and the footer report, with SIGINT and SIGTERM held back meanwhile, so
    an interrupted run's record, ledger and summary hold the same checks (SPEC 13.1)."""

    def __init__(
        self,
        source: str,
        run_id: str,
        ledger: Ledger,
        record: RecordWriter | None,
        total: int,
        on_progress: Callable[[Progress], None] | None,
        interrupts: Interrupts,
    ) -> None:
        self.interrupts = interrupts
        self.source = source
        self.run_id = run_id
        self.ledger = ledger
        self.record = record
        self.on_progress = on_progress
        self.progress = Progress(total=total)
        self.counts = dict.fromkeys(OUTCOMES, 0)
        self.problems: list[dict[str, str]] = []
        self.checked: set[str] = set()
        self.storage_errors = 0
        self._streak: list[Result] = []  # the first checks, while all fail the same way
        self._streak_open = True

    def take(self, results: list[Result]) -> None:
        events = [_event(r) for r in results]
        lines = [_check_line(r) for r in results] if self.record is not None else []
        with self.interrupts.held():
            self.ledger.record(self.source, self.run_id, events)
            for line in lines:
                assert self.record is not None
                self.record.write(line)
            for r in results:
                self.counts[r.outcome] += 1
                self.checked.add(r.key)
                self.progress.checked += 1
                self.progress.bytes_read += r.bytes_read
                self.storage_errors += r.storage_error
                if r.outcome != "pass":
                    self.progress.not_passed += 1
                    self.problems.append({"key": r.key, "outcome": r.outcome, "detail": r.detail})
            if self.on_progress is not None:
                self.on_progress(self.progress)
        self._watch_streak(results)

    def _watch_streak(self, results: list[Result]) -> None:
        """Stop the run when its first checks all end in the same storage error."""
        if not self._streak_open:
            return
        for r in results:
            if not r.storage_error or (self._streak and r.cause != self._streak[0].cause):
                self._streak_open = False
                return
            self._streak.append(r)
        needed = min(EARLY_STOP_CHECKS, self.progress.total)
        if len(self._streak) >= needed:
            raise StorageError(
                f"the first {len(self._streak)} checks all ended in the same storage error, "
                f"so the run stopped: {self._streak[-1].detail}"
            )


def run_fixity(
    config: FixityConfig,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    signer: Callable[[bytes], str] | None = None,
) -> Summary:
    """Check the bundles ``config`` selects; the ledger and the record hold every
    finished check. Raises InputError (exit 3) when the run cannot start (a ledger this
    tool did not write, a bad source), StorageError (exit 5) when the source cannot be
    listed or the first checks all end in the same storage error; in every case where
    the run cannot start, no ledger and no record is created. SIGINT or SIGTERM while
    checking ends the run early: the summary is returned, ``interrupted`` set."""
    source = normalise_source(config.source)
    ledger_file.inspect(config.ledger)  # refused before anything else, unchanged
    if config.record is not None and os.path.lexists(config.record):
        raise UsageError(f"--record: {config.record} already exists; a record is never overwritten")
    settings = _settings(config, source)
    started_clock = time.monotonic()
    started = now_iso()
    run_id = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ-") + secrets.token_hex(4)
    helpers: HelperPool | None = None
    cluster: Any = None  # a Dask client, with a scheduler
    record: RecordWriter | None = None
    ledger: Ledger | None = None
    interrupts = Interrupts()
    run: _Run | None = None
    # A ledger this run creates is removed again if the run fails before it starts, so a
    # refused run leaves nothing behind (a ledger that existed is kept as it was).
    new_ledger = not os.path.lexists(config.ledger)
    try:
        interrupts.__enter__()
        try:
            with interrupts.opened():
                # Helpers start now, so their interpreters are up (and warm) by the time
                # the listing is done and the first batch is ready.
                if config.scheduler is not None:
                    # Reached before the ledger is created: a scheduler that cannot be
                    # reached refuses the run with nothing left behind.
                    cluster = connect_scheduler(config.scheduler)
                elif config.workers > 1:
                    helpers = HelperPool(settings, config.workers - 1)
                listed = list(list_source(source, settings.endpoint_url))
                # The run can start: only now is anything written.
                ledger = Ledger(config.ledger, tool_version=__version__)
                chosen = select(
                    listed,
                    ledger.known(source),
                    config.selection,
                    config.level,
                    datetime.now(UTC),
                    _same_bytes(settings),
                )
                record = (
                    RecordWriter(config.record) if config.record or config.upload_record else None
                )
                selection = config.selection.describe()
                with interrupts.held():
                    ledger.start_run(
                        run_id, source, config.level, orjson.dumps(selection).decode(), started
                    )
                    if record is not None:
                        record.write(
                            {
                                "schema": RUN_SCHEMA,
                                "run_id": run_id,
                                "tool": {"name": TOOL_NAME, "version": __version__},
                                "source": source,
                                "level": config.level,
                                "selection": selection,
                                "started": started,
                                "selected": len(chosen),
                            }
                        )
                    run = _Run(source, run_id, ledger, record, len(chosen), on_progress, interrupts)
                gone = [c for c in chosen if c.gone]
                if gone:
                    run.take([missing(_task(c, config.level), settings) for c in gone])
                present = [_task(c, config.level) for c in chosen if not c.gone]
                if present:
                    execute(
                        present,
                        settings,
                        run.take,
                        workers=config.workers,
                        scheduler=cluster,
                        helpers=helpers,
                    )
        except KeyboardInterrupt as exc:
            if run is None:
                raise  # before any check: nothing to summarise, nothing kept
            if interrupts.pending is None:  # raised by a handler the gate did not set
                signum = getattr(exc, "signum", None) or getattr(exc.__cause__, "signum", None)
                interrupts.pending = signal.SIGTERM if signum == signal.SIGTERM else signal.SIGINT
        assert ledger is not None
        # Checking is over: what follows closes the evidence, and a signal now only
        # marks the run interrupted (it cannot cut the footer or the ledger's run row).
        if interrupts.pending is not None and helpers is not None:
            helpers.kill()
        finished = now_iso()
        now = datetime.now(UTC)
        shares = ledger.shares(
            source,
            config.level,
            [(name, _iso(now - timedelta(days=days))) for name, days in SHARE_WINDOWS],
            [item.key for item in listed],
        )
        open_now = ledger.open_failures(source)
        found = {f.key: f.found for f in open_now}
        problems = [_problem(p, found) for p in run.problems]
        carried = [
            {
                "key": shown(f.key),
                "outcome": f.outcome,
                "found": f.found,
                "run_id": f.run_id,
                "detail": shown(f.detail),
            }
            for f in open_now
            if f.key not in run.checked
        ]
        interrupted = interrupts.name
        record_bytes: bytes | None = None
        chain_sha = file_sha = None
        if record is not None:
            chain_sha = record.sha256
            footer: dict[str, Any] = {
                "schema": FOOTER_SCHEMA,
                "run_id": run_id,
                "counts": run.counts,
                "bytes_read": run.progress.bytes_read,
                "finished": finished,
                "preceding_sha256": chain_sha,
            }
            if interrupted is not None:
                footer["interrupted"] = interrupted
            record.write(footer)
            record_bytes = record.finish()
            file_sha = record.file_sha256
        ledger.finish_run(run_id, finished, orjson.dumps(run.counts).decode())
    except BaseException:
        if record is not None:
            record.abandon()
        if helpers is not None:
            helpers.kill()
        if ledger is not None and new_ledger and run is None:
            ledger.close()
            ledger = None
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(OSError):
                    os.unlink(f"{config.ledger}{suffix}")
        raise
    finally:
        if helpers is not None:
            helpers.close()
        if cluster is not None:
            close_scheduler(cluster)
        if ledger is not None:
            ledger.close()
        interrupts.__exit__(None, None, None)
    signature_path = None
    record_url = None
    if record is not None and (signer is not None or config.upload_record):
        data = record_bytes if record_bytes is not None else Path(str(config.record)).read_bytes()
        signature = signer(data) if signer is not None else None
        if signature is not None and config.record is not None:
            from bundler.fixity.record import write_signature

            signature_path = str(write_signature(config.record, signature))
        if config.upload_record:
            record_url = upload_record(source, run_id, data, signature, config.endpoint_url)
    return Summary(
        run_id=run_id,
        source=source,
        level=config.level,
        selection=selection,
        started=started,
        finished=finished,
        wall_seconds=round(time.monotonic() - started_clock, 3),
        listed=len(listed),
        counts=run.counts,
        bytes_read=run.progress.bytes_read,
        problems=problems,
        carried=carried,
        shares=shares,
        ledger=str(config.ledger),
        record=None if config.record is None else str(config.record),
        record_sha256=file_sha,
        record_chain_sha256=chain_sha,
        record_url=record_url,
        signature=signature_path,
        storage_errors=run.storage_errors,
        interrupted=interrupted,
    )


@dataclass(frozen=True)
class Retirement:
    """A bundle the keeper retired on purpose (``fixity --retire KEY --reason TEXT``)."""

    source: str
    key: str  # as the summary shows it
    outcome: str  # what it was retired from: fail or missing
    found: str
    reason: str  # as the keeper gave it
    time: str
    run_id: str
    ledger: str

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": RETIRED_SCHEMA,
            "tool": {"name": TOOL_NAME, "version": __version__},
            **asdict(self),
        }


def retire(source: str, ledger_path: Path, key: str, reason: str) -> Retirement:
    """Record that the keeper retired ``key`` (as a summary shows it) with ``reason``:
    a ``retired`` event; it checks nothing. InputError (exit 3) when there is no ledger,
    it is not this tool's, or it holds no failed or missing bundle ``key`` under
    ``source`` (naming ``bundle_key``, the library's parameter); ParameterError for a
    blank reason."""
    if not reason.strip():
        raise ParameterError(
            "reason", "blank: give the reason the bundle is retired (it is kept in the ledger)"
        )
    source = normalise_source(source)
    if ledger_file.inspect(ledger_path) is None:
        raise InputError(f"{ledger_path}: no such ledger; nothing to retire")
    # Refused before the ledger is opened for writing (which would bring an older one
    # forward): a refusal changes no byte.
    known = ledger_file.verdicts(ledger_path, source)
    # KEY is matched as the summary shows it, and only so: ``shown`` is one-to-one, so
    # exactly one key shows as KEY; a raw name that happens to spell another key's
    # escape (the text "bad\\udcff" beside the byte 0xff) never stands for it.
    exact = next((k for k in known if shown(k) == key), None)
    if exact is None or known.get(exact) not in ledger_file.OPEN_VERDICTS:
        state = "not in the ledger" if exact is None else f"its latest outcome is {known[exact]}"
        raise InputError(
            f"bundle_key: {key}: nothing to retire under {source} ({state}); only a bundle "
            "whose latest outcome is fail or missing can be retired",
            param="bundle_key",
        )
    ledger = Ledger(ledger_path, tool_version=__version__)
    try:
        time_now = now_iso()
        run_id = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ-") + secrets.token_hex(4)
        # The reason is kept as the keeper gave it (escaped only where shown).
        failure = ledger.retire(source, exact, reason, time_now, run_id)
    finally:
        ledger.close()
    return Retirement(
        source=source,
        key=shown(exact),
        outcome=failure.outcome,
        found=failure.found,
        reason=_json_text(reason),
        time=time_now,
        run_id=run_id,
        ledger=str(ledger_path),
    )


def _json_text(text: str) -> str:
    """``text`` as it is, unless it holds bytes that are not UTF-8 (a JSON string cannot):
    then escaped, as shown."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return shown(text)
    return text


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _read_text(path: Path | None) -> str | None:
    if path is None:
        return None
    from bundler.trust import sshsig

    sshsig.load_allowed_signers(path)  # a malformed file is refused before any work
    return path.read_bytes().decode("utf-8")  # bytes: a lone CR stays inside its line


def _task(c: Candidate, level: str) -> Task:
    k = c.known
    if c.first_sight:
        # Full at first sight, whatever --level, so a corrupt archive never becomes its
        # own baseline (SPEC 13.1).
        return Task(key=c.key, size=c.size, level="full", baseline=True, in_layout=c.in_layout)
    assert k is not None
    return Task(
        key=c.key,
        size=c.size,
        recorded_size=k.size,
        recorded_sha256=k.sha256,
        recorded_bundle_digest=k.bundle_digest,
        level=level,
        in_layout=c.in_layout,
    )


def _same_bytes(settings: Settings) -> Callable[[Candidate], bool]:
    """Whether a retired bundle written since it was retired still holds the bytes it
    was retired with (then it stays retired, SPEC 13.1); bytes that cannot be read are
    taken for other bytes, so the check says what is wrong."""

    def same(c: Candidate) -> bool:
        assert c.known is not None
        try:
            return held_sha256(c.key, settings) == c.known.retired_sha256
        except (OSError, BundlerError):
            return False

    return same


def _problem(p: dict[str, str], found: dict[str, str]) -> dict[str, str]:
    """A check of this run that did not pass, as the summary shows it: a failure with
    the time it was first found (by this run or an earlier one, SPEC 13.1)."""
    shown_p = {"key": shown(p["key"]), "outcome": p["outcome"], "detail": shown(p["detail"])}
    if p["outcome"] in ledger_file.OPEN_VERDICTS and p["key"] in found:
        shown_p["found"] = found[p["key"]]
    return shown_p


def _event(r: Result) -> Event:
    return Event(
        key=r.key,
        time=r.time,
        level=r.level,
        outcome=r.outcome,
        detail=r.detail,  # kept as it is; escaped once, where it is shown
        size=r.size,
        sha256=r.sha256,
        bundle_digest=r.bundle_digest,
        report_id=r.report_id,
        bytes_read=r.bytes_read,
        baseline=r.baseline,
    )


def _check_line(r: Result) -> dict[str, Any]:
    return {
        "schema": CHECK_SCHEMA,
        "key": shown(r.key),
        "time": r.time,
        "level": r.level,
        "outcome": r.outcome,
        "detail": shown(r.detail),
        "size": r.size,
        "bytes_read": r.bytes_read,
        "sha256": r.sha256,
        "bundle_digest": r.bundle_digest,
        "report_id": r.report_id,
        "seconds": r.seconds,
    }


def upload_record(
    source: str, run_id: str, data: bytes, signature: str | None, endpoint_url: str | None
) -> str:
    """Store the record under ``<prefix>/fixity/<run-id>.jsonl`` (and its signature
    beside it as ``.sig``), never over an existing object. Returns the record's URL."""
    import base64
    import hashlib

    if not source.startswith("s3://"):
        raise UsageError("--upload-record needs an s3://bucket/prefix SOURCE")
    loc = storage.parse_s3_url(source)
    prefix = loc.key.strip("/")
    key = f"{prefix}/fixity/{run_id}.jsonl" if prefix else f"fixity/{run_id}.jsonl"
    client = storage.make_client(storage.StorageConfig(endpoint_url=endpoint_url))
    objects = [(key, data)]
    if signature is not None:
        objects.append((key + ".sig", signature.encode("ascii")))
    for name, body in objects:
        digest = hashlib.sha256(body).digest()
        url = f"s3://{loc.bucket}/{name}"
        try:
            client.put_object(
                Bucket=loc.bucket,
                Key=name,
                Body=body,
                ContentType="application/x-ndjson",
                ChecksumAlgorithm="SHA256",
                ChecksumSHA256=base64.b64encode(digest).decode("ascii"),
                IfNoneMatch="*",
                Metadata={"sha256": "sha256:" + digest.hex()},
            )
        except Exception as exc:
            raise StorageError(f"{url}: storing the fixity record failed: {exc}") from exc
    return f"s3://{loc.bucket}/{key}"
