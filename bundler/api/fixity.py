"""The library's fixity run and the keeper's retirement (SPEC 13; ``fixity``, ``fixity
--retire``). ``Summary`` and ``Retirement`` are imported here so that
``typing.get_type_hints`` resolves them."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bundler.api import params
from bundler.api.results import Progress
from bundler.core.errors import OutputError, ParameterError, UsageError
from bundler.fixity.run import Retirement, Summary

OnProgress = Callable[[Progress], None]


def _distinct_outputs(ledger: Path, record: Path, *, signed: bool) -> None:
    """Every file the run will write is checked before any work: the record and, when
    it is signed, its ``.sig`` are outputs like any other (never over anything, exit 3),
    and neither may be the ledger or one of the files SQLite keeps beside it."""
    outputs = [record]
    if signed:
        outputs.append(params.output(record.with_name(record.name + ".sig"), "record"))
    ledger_files = {
        os.path.abspath(ledger.with_name(ledger.name + suffix))
        for suffix in ("", "-journal", "-wal", "-shm")
    }
    for target in outputs:
        if target.is_dir():  # the record's own file names, never a directory to fill
            raise OutputError(
                f"record: {target}: exists and is a directory; an output is never "
                "written over anything",
                param="record",
            )
        if os.path.abspath(target) in ledger_files:
            raise ParameterError(
                "record", f"{target}: is the ledger's own file; the record needs a path of its own"
            )


def _parsed(parse: Callable[[str], Any], value: object, param: str) -> Any:
    """``parse(value)``, its refusal naming ``param`` (the parsers name the option)."""
    try:
        return parse(params.text(value, param))
    except ParameterError:
        raise
    except UsageError as exc:
        raise ParameterError(param, exc.message.split(": ", 1)[-1]) from exc


def fixity(
    source: str | os.PathLike[str],
    *,
    ledger: str | os.PathLike[str] = "evalbook-fixity.sqlite",
    level: str = "full",
    older_than: str | None = None,
    sample: str | None = None,
    limit: int | None = None,
    limit_bytes: int | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    allowed_signers: str | os.PathLike[str] | None = None,
    record: str | os.PathLike[str] | None = None,
    upload_record: bool = False,
    key: str | os.PathLike[str] | None = None,
    endpoint_url: str | None = None,
    on_progress: OnProgress | None = None,
) -> Summary:
    """Check that every bundle of an archive still holds its bytes and verifies (SPEC
    13; ``fixity``): ``source`` is ``s3://bucket/prefix`` or a local directory. The
    ledger keeps every bundle and check; ``record`` (never overwritten) and
    ``upload_record`` keep the run's record, signed with ``key``. The summary's
    ``exit_code`` is the command's. Raises ParameterError (2), InputError (3) when the
    run cannot start, StorageError (5) when the source cannot be listed."""
    from bundler.fixity import FixityConfig, Selection, parse_duration, parse_sample, run_fixity
    from bundler.fixity.run import Progress as FixityProgress

    # The scheduler's address is checked before anything (a file, a connection) is touched.
    address = params.scheduler(scheduler, "scheduler")
    where = params.input_directory(source, "source")
    if where.startswith("s3://"):
        params.archive_prefix(where, "source")
    ledger_path = params.output(ledger, "ledger", existing_file_ok=True)
    check_level = params.choice(level, "level", ("object", "full"))
    is_upload = params.flag(upload_record, "upload_record")
    record_path = None if record is None else params.output(record, "record")
    signers = params.optional_path(allowed_signers, "allowed_signers")
    if signers is not None:
        from bundler.bundles.signatures import load_allowed

        params.existing_input(signers, "allowed_signers", directory_ok=False)
        with params.reading("allowed_signers"):
            load_allowed(signers)  # read before the run: its errors name this parameter
    if is_upload and not where.startswith("s3://"):
        raise ParameterError("upload_record", "needs an s3://bucket/prefix source")
    if key is not None and record_path is None and not is_upload:
        raise ParameterError("key", "signs the record: give record or upload_record")
    if record_path is not None:
        _distinct_outputs(ledger_path, record_path, signed=key is not None)
    selection = Selection(
        sample=None if sample is None else _parsed(parse_sample, sample, "sample"),
        older_than=None
        if older_than is None
        else _parsed(parse_duration, older_than, "older_than"),
        limit=params.optional_integer(limit, "limit", 1),
        limit_bytes=params.optional_integer(limit_bytes, "limit_bytes", 1),
    )
    count = params.optional_integer(workers, "workers", 1, 1024)
    config = FixityConfig(
        source=where,
        level=check_level,
        ledger=ledger_path,
        selection=selection,
        workers=count or os.cpu_count() or 1,
        scheduler=None if address is None else address[0],
        endpoint_url=params.endpoint(endpoint_url),
        allowed_signers=signers,
        record=record_path,
        upload_record=is_upload,
    )
    signer = None
    if key is not None:
        from bundler.api.bundles import signing_key
        from bundler.fixity.record import SIGNATURE_NAMESPACE
        from bundler.trust import sshsig

        loaded = signing_key(key, "key")

        def signer(data: bytes) -> str:
            return sshsig.sign(data, loaded, namespace=SIGNATURE_NAMESPACE)

    from bundler.api.bundles import progress_callback

    report = progress_callback(on_progress)
    forward: Callable[[Any], None] | None = None
    if report is not None:
        told = report

        def forward(progress: FixityProgress) -> None:
            told(
                Progress(
                    progress.checked,
                    progress.total,
                    f"{progress.bytes_read / 1e6:.1f} MB read, {progress.not_passed} not passed",
                    unit="bundles",
                )
            )

    from bundler.fixity import ledger as ledger_file

    with params.reading("ledger"):
        ledger_file.inspect(ledger_path)  # a ledger this tool did not write: named as such
    with params.reading("source", output="record"):
        return run_fixity(config, on_progress=forward, signer=signer)


def retire(
    source: str | os.PathLike[str],
    *,
    bundle_key: str,
    reason: str,
    ledger: str | os.PathLike[str] = "evalbook-fixity.sqlite",
) -> Retirement:
    """Retire a failed or missing bundle on purpose (``fixity --retire KEY --reason
    TEXT``): it checks nothing, records a ``retired`` event in ``ledger`` with
    ``reason``, and the bundle is no longer carried into summaries. ``bundle_key`` is the
    key as a summary shows it (``Summary.problems``/``carried``). Raises ParameterError
    (2) for a bad parameter or a blank reason, InputError (3) when there is no ledger,
    it is not this tool's, or it holds no failed or missing ``bundle_key`` under
    ``source``; a refusal changes no byte of the ledger."""
    from bundler.fixity.run import retire as retire_in_ledger

    where = params.location(source, "source")
    if where.startswith("s3://"):
        params.archive_prefix(where, "source")
    ledger_path = params.path(ledger, "ledger")
    key = params.text(bundle_key, "bundle_key")
    why = params.text(reason, "reason")
    with params.reading("ledger"):
        return retire_in_ledger(where, ledger_path, key, why)
