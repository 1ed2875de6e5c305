"""import-inspect and import-lm-eval: runs of other tools as store reports (SPEC 16)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from bundler.cli.app import cli
from bundler.cli.common import _emit_json, _LocalPath, _note, _quiet_option, _say
from bundler.core.errors import UsageError
from bundler.core.textsafe import shown


def _common_options(command: Any) -> Any:
    for option in reversed(
        [
            click.option(
                "--store",
                "store",
                type=_LocalPath(),
                metavar="DIR",
                help="Store root directory (created when it does not exist).",
            ),
            click.option(
                "--task",
                "task_files",
                multiple=True,
                type=_LocalPath(),
                metavar="FILE",
                help="A task source file; repeat for several (at most 4,096). "
                "Becomes a file of every scorer version.",
            ),
            click.option(
                "--decision",
                type=_LocalPath(),
                metavar="FILE",
                help="An evalbook.decision.v1 file: which checks are required, "
                "with which aggregation. Without it every result is inconclusive.",
            ),
            click.option(
                "--report-id",
                "report_id",
                metavar="ID",
                help="The report id (default: derived from the run's content).",
            ),
            click.option(
                "--principal",
                envvar="EVALBOOK_PRINCIPAL",
                help="Principal a new store's access.json grants report.export and "
                "dataset.read_body (default $EVALBOOK_PRINCIPAL).",
            ),
            click.option(
                "--check",
                "check_bundle",
                metavar="BUNDLE",
                help="Instead of importing: re-import the run files inside BUNDLE "
                "and compare every document (exit 0 same, 1 differs, 3 unreadable); "
                "this also holds what audit cannot re-derive from the bundle (a group's "
                "subtasks and stderr, a groups record deleted) to the run files.",
            ),
            click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout."),
            _quiet_option,
        ]
    ):
        command = option(command)
    return command


def _run(
    runner: Any,
    run_files: tuple[Path, ...],
    *,
    store: Path | None,
    task_files: tuple[Path, ...],
    dataset_files: tuple[Path, ...],
    decision: Path | None,
    report_id: str | None,
    principal: str | None,
    check_bundle: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    if check_bundle is not None:
        if run_files or store is not None:
            raise UsageError("--check BUNDLE takes no run files and no --store")
        # --check re-imports with what the bundle holds (its task, dataset and decision
        # files, its report id): an option that seems to say otherwise is refused, never
        # silently ignored. A principal from $EVALBOOK_PRINCIPAL is no such claim.
        source = click.get_current_context().get_parameter_source("principal")
        given = [
            name
            for name, value in (
                ("--task", task_files or None),
                ("--dataset", dataset_files or None),
                ("--decision", decision),
                ("--report-id", report_id),
                ("--principal", principal if source is ParameterSource.COMMANDLINE else None),
            )
            if value is not None
        ]
        if given:
            raise UsageError(
                f"--check BUNDLE takes no {', '.join(given)}: it re-imports with the task, "
                "dataset and decision files and the report id the bundle holds"
            )
        _check(check_bundle, runner, as_json)
        return
    if not run_files:
        raise UsageError("give the run's files, or --check BUNDLE")
    if store is None:
        raise UsageError("--store DIR is required to import")
    from bundler.importers.importing import ImportConfig, import_run

    result = import_run(
        ImportConfig(
            runner, run_files, store, task_files, dataset_files, decision, report_id, principal
        )
    )
    if as_json:
        _emit_json(result.to_json())
        return
    if result.outcome == "imported":
        click.echo(f"Imported:  report {shown(result.report_id)} into {shown(result.store)}")
    elif result.outcome == "repaired":
        n = result.files_written
        click.echo(
            f"Repaired:  report {shown(result.report_id)} was already in {shown(result.store)}; "
            f"{n} missing file{'s' if n != 1 else ''} it needs {'were' if n != 1 else 'was'} "
            "written"
        )
    else:
        click.echo(
            f"Unchanged: report {shown(result.report_id)} is already in {shown(result.store)} "
            "with these exact documents; nothing written"
        )
    click.echo(f"Report:    {result.report_digest}")
    click.echo(f"Result:    {result.result}")
    for check_id, status in result.checks:
        click.echo(f"  {shown(check_id)}: {status}")
    if result.not_granted is not None:
        # A warning, whatever -q says: the principal cannot export what it imported.
        _say(
            f"warning: {shown(result.store)}/access.json does not grant "
            f"{shown(result.not_granted)} report.export: the store was there before this "
            "import (or another import made it first), and an import changes no "
            "access.json it did not create\n"
        )
    if result.result == "inconclusive":
        _note(
            "note: without --decision every check is optional with no threshold, so the "
            "result is inconclusive (SPEC 12, 16)\n"
        )


def _check(bundle: str, runner: Any, as_json: bool) -> None:
    from bundler.importers.recheck import recheck_bundle

    result = recheck_bundle(bundle, runner)
    if as_json:
        _emit_json({**result.to_json(), "input": bundle})
    else:
        click.echo(f"Bundle:    {shown(bundle)}")
        click.echo(f"Report:    {shown(result.report_id or '-')}")
        if result.not_rederivable is not None:
            click.echo(f"Cannot re-derive: {shown(result.not_rederivable)}")
        elif not result.verified:
            for d in result.differences:
                click.echo(f"Differs:   {shown(d.path)}: {shown(d.problem)}")
            click.echo("Verified:  no: the bundle does not verify, so nothing was compared")
        else:
            click.echo(f"Compared:  {result.compared} documents")
            for d in result.differences:
                click.echo(f"Differs:   {shown(d.path)}: {shown(d.problem)}")
            click.echo(
                "Matches:   the bundle holds exactly what its run gives"
                if not result.differences
                else f"Mismatch:  {len(result.differences)} document(s) differ from what the run gives"
            )
    if result.exit_code:
        if not as_json:
            why = (
                result.not_rederivable
                or (not result.verified and "the bundle does not verify")
                or "the bundle does not hold what its run gives"
            )
            _say(f"evalbook-bundle: {shown(why)}\n")
        sys.exit(result.exit_code)


@cli.command(
    "import-inspect",
    examples=[
        "evalbook-bundle import-inspect run.eval --store STORE --task task.py --principal alice",
        "evalbook-bundle import-inspect run.eval --store STORE --decision decision.json",
        "evalbook-bundle import-inspect --check evalbook-bundle-inspect-x.tar.zst",
    ],
)
@click.argument("log", required=False, type=_LocalPath())
@click.option(
    "--dataset",
    "dataset_files",
    multiple=True,
    type=_LocalPath(),
    metavar="FILE",
    help="A dataset file to keep as a run file; repeat for several (at most 256).",
)
@_common_options
def import_inspect(
    log: Path | None,
    dataset_files: tuple[Path, ...],
    store: Path | None,
    task_files: tuple[Path, ...],
    decision: Path | None,
    report_id: str | None,
    principal: str | None,
    check_bundle: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Import an Inspect AI .eval log as one report of an EvalBook store (SPEC 16).

    The log is read strictly and never extracted; a check per (scorer, metric), a case
    per sample and epoch; the log itself is kept byte for byte as an artifact of every
    case. Importing the same run with the same options again changes nothing (exit 0).
    A refused import writes nothing to the store (exit 3).
    """
    from bundler.importers.importing import Runner

    _run(
        Runner.INSPECT,
        (log,) if log is not None else (),
        store=store,
        task_files=task_files,
        dataset_files=dataset_files,
        decision=decision,
        report_id=report_id,
        principal=principal,
        check_bundle=check_bundle,
        as_json=as_json,
        quiet=quiet,
    )


@cli.command(
    "import-lm-eval",
    examples=[
        "evalbook-bundle import-lm-eval results_2026.json --samples samples_t_2026.jsonl "
        "--store STORE --task t.yaml --principal alice",
        "evalbook-bundle import-lm-eval --check evalbook-bundle-lm-eval-x.tar.zst",
    ],
)
@click.argument("results", required=False, type=_LocalPath())
@click.option(
    "--samples",
    "samples_files",
    multiple=True,
    type=_LocalPath(),
    metavar="FILE",
    help="A samples_<task>_<date>.jsonl file; one per task.",
)
@_common_options
def import_lm_eval(
    results: Path | None,
    samples_files: tuple[Path, ...],
    store: Path | None,
    task_files: tuple[Path, ...],
    decision: Path | None,
    report_id: str | None,
    principal: str | None,
    check_bundle: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Import an lm-evaluation-harness run (results and samples files) as one report.

    lm-eval's own doc_hash, prompt_hash, target_hash and task_hashes are recomputed and a
    mismatch refuses the import; a check per (task, metric, filter), a case per document
    and filter; the results and samples files are kept byte for byte as artifacts.
    """
    from bundler.importers.importing import Runner

    if results is None and samples_files:
        raise UsageError("--samples needs the RESULTS file")
    run_files = ((results, *samples_files)) if results is not None else ()
    _run(
        Runner.LM_EVAL,
        run_files,
        store=store,
        task_files=task_files,
        dataset_files=(),
        decision=decision,
        report_id=report_id,
        principal=principal,
        check_bundle=check_bundle,
        as_json=as_json,
        quiet=quiet,
    )
