"""fixity: re-check an archive on a schedule and keep the ledger and record (SPEC 13)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from bundler.cli.app import cli
from bundler.cli.common import (
    _Count,
    _emit_json,
    _endpoint_option,
    _key_option,
    _LocalPath,
    _note,
    _ProgressLine,
    _quiet_option,
    _say,
)
from bundler.core.errors import UsageError
from bundler.core.textsafe import shown

FIXITY_HELP = """Check that every bundle of an archive still holds its bytes and verifies.

SOURCE is an archive prefix s3://bucket/prefix (every archive under
<prefix>/reports/bundles/) or a local directory (every *.tar.zst below it, links not
followed). Each check ends pass, fail (a claim failed, or the bytes, size or key differ
from what was recorded: altered at rest), missing (a bundle the ledger knew is gone) or
error (it could not be checked). The ledger keeps every bundle and every check; a run
that is killed loses only the checks in flight. A failure is carried into every later
summary, and the exit code, until a check passes the bundle or the keeper retires it
with --retire KEY --reason TEXT. Exit 0 when every check passed and no failure is
open, 1 when any failed or is missing, 5 when storage kept some from being checked, 3
when the run cannot start (a ledger this tool did not write, bad source) or some
bundle could not be read for a reason other than storage's (a local file that cannot be
opened); 130 or 143 after SIGINT or SIGTERM, with the
summary so far.
"""


@cli.command(
    help=FIXITY_HELP,
    examples=[
        "evalbook-bundle fixity s3://archive/eval --ledger fixity.sqlite",
        "evalbook-bundle fixity s3://archive/eval --older-than 90d --limit-bytes 500000000000",
        "evalbook-bundle fixity s3://archive/eval --sample 3/13 --level object",
        "evalbook-bundle fixity archive/ --record run.jsonl --key ~/.ssh/id_ed25519",
        "evalbook-bundle fixity s3://archive/eval --upload-record --scheduler tcp://10.0.0.5:8786",
        "evalbook-bundle fixity --json archive/ | jq '.counts'",
        "evalbook-bundle fixity s3://archive/eval --retire KEY --reason 'restored from tape'",
    ],
)
@click.argument("source")
@click.option(
    "--level",
    type=click.Choice(["object", "full"]),
    default="full",
    show_default=True,
    help="object: re-hash and compare with the recorded SHA-256 and size; full: that and "
    "the whole verification, in the same read.",
)
@click.option(
    "--ledger",
    type=_LocalPath(dir_okay=False),
    default="evalbook-fixity.sqlite",
    show_default=True,
    help="SQLite ledger of bundles and checks (created when absent).",
)
@click.option(
    "--older-than",
    metavar="DURATION",
    help="Only bundles whose last check at this level or above is older (12h, 30d, 2w); "
    "never checked counts as oldest.",
)
@click.option(
    "--sample",
    metavar="K/N",
    help="Only the bundles of group K of N (SHA-256 of the key, mod N): runs 0..N-1 "
    "together check every bundle once.",
)
@click.option("--limit", type=_Count(1), help="Check at most N bundles, oldest first.")
@click.option(
    "--limit-bytes",
    type=_Count(1),
    help="Read at most about N bytes, oldest first (the oldest bundle always runs).",
)
@click.option(
    "--workers",
    type=_Count(1, 1024),
    default=None,
    help="Checkers on this machine: this process and N - 1 helper processes (default: the number of cores).",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    envvar="DASK_SCHEDULER_ADDRESS",
    help="Run the checks on a Dask distributed cluster (tcp://host:8786; default "
    "$DASK_SCHEDULER_ADDRESS); needs evalbook-bundle[cluster].",
)
@click.option(
    "--allowed-signers",
    type=_LocalPath(dir_okay=False),
    help="OpenSSH allowed_signers file: at level full, some signature of each bundle "
    "(embedded, or stored beside it) must verify.",
)
@click.option(
    "--record",
    type=_LocalPath(),
    help="Write the JSON Lines fixity record here (never over an existing file).",
)
@click.option(
    "--upload-record",
    is_flag=True,
    help="Store the record under <prefix>/fixity/<run-id>.jsonl (s3:// SOURCE only; "
    "never overwritten).",
)
@click.option(
    "--retire",
    metavar="KEY",
    help="Check nothing: retire a failed or missing bundle (KEY as the summary shows "
    "it) on purpose, with --reason; it is no longer carried into summaries.",
)
@click.option("--reason", metavar="TEXT", help="Why the bundle is retired (kept in the ledger).")
@_key_option()
@click.option("--json", "as_json", is_flag=True, help="The summary as one JSON object on stdout.")
@_endpoint_option
@_quiet_option
def fixity(
    source: str,
    level: str,
    ledger: Path,
    older_than: str | None,
    sample: str | None,
    limit: int | None,
    limit_bytes: int | None,
    workers: int | None,
    scheduler: str | None,
    allowed_signers: Path | None,
    record: Path | None,
    upload_record: bool,
    retire: str | None,
    reason: str | None,
    key_path: Path | None,
    as_json: bool,
    endpoint_url: str | None,
    quiet: bool,
) -> None:
    from bundler.api.fixity import fixity as run_fixity
    from bundler.cli.export import _warn_key

    if retire is not None or reason is not None:
        _refuse_unused_with_retire()
        _retire(source, ledger, retire, reason, as_json=as_json, quiet=quiet)
        return

    if upload_record and not source.startswith("s3://"):
        raise UsageError("--upload-record needs an s3://bucket/prefix SOURCE")
    if key_path is not None and record is None and not upload_record:
        raise UsageError("--key signs the record: give --record FILE or --upload-record")
    _warn_key(key_path)
    line = _ProgressLine(not quiet, "fixity", unit="bundles")
    try:
        summary = run_fixity(
            source,
            ledger=ledger,
            level=level,
            older_than=older_than,
            sample=sample,
            limit=limit,
            limit_bytes=limit_bytes,
            workers=workers,
            scheduler=_scheduler(scheduler),
            allowed_signers=allowed_signers,
            record=record,
            upload_record=upload_record,
            key=key_path,
            endpoint_url=endpoint_url,
            on_progress=line.callback(),
        )
    finally:
        line.done()
    if as_json:
        _emit_json(summary.to_json())
    else:
        sys.stdout.write(_summary_text(summary))
        sys.stdout.flush()
    if summary.record_url:
        _note(f"Record stored at {shown(summary.record_url)}\n")
    if summary.interrupted is not None:
        _say(
            f"evalbook-bundle: fixity stopped by {summary.interrupted}; the summary covers "
            "the checks finished before it\n"
        )
    sys.exit(summary.exit_code)


def _scheduler(value: str | None) -> str | None:
    """--scheduler as given on the command line (an empty one is refused as any
    malformed address); an empty $DASK_SCHEDULER_ADDRESS means none."""
    ctx = click.get_current_context()
    if (
        not value
        and ctx.get_parameter_source("scheduler") is not click.core.ParameterSource.COMMANDLINE
    ):
        return None
    return value


# What --retire uses; every other option given with it would be ignored, so it is refused.
_RETIRE_USES = frozenset({"source", "ledger", "retire", "reason", "as_json", "quiet"})


def _refuse_unused_with_retire() -> None:
    ctx = click.get_current_context()
    for param in ctx.command.params:
        if param.name in _RETIRE_USES or param.name is None:
            continue
        # Only what the command line says: an environment variable is not a request.
        if ctx.get_parameter_source(param.name) is click.core.ParameterSource.COMMANDLINE:
            option = max(param.opts, key=len)
            raise UsageError(
                f"{option}: --retire checks nothing, so it takes only --ledger, --reason, "
                "--json and --quiet"
            )


def _retire(
    source: str,
    ledger: Path,
    key: str | None,
    reason: str | None,
    *,
    as_json: bool,
    quiet: bool,
) -> None:
    from bundler.api.fixity import retire

    if key is None or reason is None:
        raise UsageError("--retire KEY and --reason TEXT go together")
    done = retire(source, bundle_key=key, reason=reason, ledger=ledger)
    if as_json:
        _emit_json(done.to_json())
    elif not quiet:
        sys.stdout.write(
            f"Retired:     {done.key} ({done.outcome} since {done.found})\n"
            f"Reason:      {shown(done.reason)}\n"
            f"Ledger:      {shown(done.ledger)}\n"
        )


def _summary_text(summary: object) -> str:
    from bundler.fixity.run import Summary

    assert isinstance(summary, Summary)
    counts = summary.counts
    checked = sum(counts.values())
    lines = [
        f"Source:      {shown(summary.source)}",
        f"Run:         {summary.run_id} (level {summary.level})",
        # Not "of": a bundle the ledger knew that is gone is checked (missing), not listed.
        f"Checked:     {checked} (listed now: {summary.listed}): {counts['pass']} pass, "
        f"{counts['fail']} fail, {counts['missing']} missing, {counts['error']} error",
        f"Bytes read:  {summary.bytes_read}",
        f"Wall time:   {summary.wall_seconds:.2f} s",
        "Checked at this level within 30/90/365 days: "
        + ", ".join(f"{summary.shares[k] * 100:.1f}%" for k in ("30d", "90d", "365d")),
        f"Ledger:      {shown(summary.ledger)}",
    ]
    if summary.record is not None:
        lines.append(f"Record:      {shown(summary.record)} ({summary.record_sha256})")
        lines.append(f"Chain:       {summary.record_chain_sha256} (the footer's digest)")
    if summary.signature is not None:
        lines.append(f"Signature:   {shown(summary.signature)}")
    if summary.record_url is not None:
        lines.append(f"Stored:      {shown(summary.record_url)}")
    if summary.problems:
        lines.append(f"Not passed:  {len(summary.problems)}")
        lines += [
            # Keys and details in a summary are already escaped (``shown``) once.
            f"  - {p['outcome']}{' since ' + p['found'] if 'found' in p else ''}: "
            f"{p['key']}: {p['detail']}"
            for p in summary.problems
        ]
    if summary.carried:
        lines.append(f"Still open:  {len(summary.carried)} from earlier runs (not checked now)")
        lines += [
            f"  - {c['outcome']} since {c['found']}: {c['key']}: {c['detail']}"
            for c in summary.carried
        ]
    if summary.interrupted is not None:
        lines.append(f"Interrupted: by {summary.interrupted}")
    return "\n".join(lines) + "\n"
