"""The library's export functions (SPEC 4, 10.1; ``export``, ``export-eb``): a store's
report or an eval-banana run into a bundle archive. Their result types are imported
here, so ``typing.get_type_hints`` resolves them; the exporters load only when one of
these functions is first called (``bundler`` imports this module lazily)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from bundler.api import params
from bundler.api.bundles import (
    PRINCIPAL_ENV,
    OnProgress,
    output_path,
    progress_callback,
    signer_for,
)
from bundler.api.results import Progress
from bundler.core import times
from bundler.core.errors import ParameterError
from bundler.evalbanana.export import EbExportResult
from bundler.evalbook.export import ExportResult


def export(
    store: str | os.PathLike[str],
    report_id: str,
    *,
    principal: str | None = None,
    out: str | os.PathLike[str] | None = None,
    exported_at: Any = None,
    level: int = 3,
    strict: bool = False,
    key: str | os.PathLike[str] | None = None,
    upload: str | None = None,
    endpoint_url: str | None = None,
    on_progress: OnProgress | None = None,
) -> ExportResult:
    """Export one issued report into a reproducibility bundle (SPEC 4; ``export``).

    ``store`` is a directory or ``s3://bucket/prefix``; ``principal`` (default
    ``$EVALBOOK_PRINCIPAL``) needs ``report.export``. The archive goes to ``out`` (a file,
    or a directory that receives ``evalbook-bundle-<report_id>.tar.zst``; default the
    current directory) and is never overwritten. ``exported_at`` is an aware datetime or
    RFC 3339 text (default ``$SOURCE_DATE_EPOCH``, else now); the same store, report,
    principal and time give the same bytes. ``key`` signs the head inside the bundle;
    ``upload`` then stores it under ``s3://bucket/prefix``.

    Raises ParameterError (2) for a bad parameter or no principal, PermissionDenied (4),
    InputError (3) for a missing or malformed report or an unusable ``out``,
    StrictFailure (1) under ``strict``, VerificationFailed (1) or StorageError (5) from
    ``upload``.
    """
    from bundler.evalbook.export import ExportConfig, export_bundle

    root = params.input_directory(store, "store")
    rid = params.identifier(report_id, "report_id", "report id")
    who = principal if principal is not None else os.environ.get(PRINCIPAL_ENV)
    if not who:
        raise ParameterError("principal", f"none given: pass principal=... or set ${PRINCIPAL_ENV}")
    who = params.text(who, "principal")
    target = output_path(out)
    environ = dict(os.environ)
    moment = times.export_time(exported_at, "exported_at", environ, time.time())
    zstd_level = params.integer(level, "level", 1, 19)
    is_strict = params.flag(strict, "strict")
    destination = None if upload is None else params.s3_url(upload, "upload")
    endpoint = params.endpoint(endpoint_url)
    report = progress_callback(on_progress)
    signer = signer_for(key)
    config = ExportConfig(
        root,
        rid,
        who,
        moment,
        target,
        zstd_level,
        is_strict,
        signer,
        endpoint,
        exported_at_source=times.time_source(exported_at, "exported_at", environ),
    )

    forward: Callable[[Any], None] | None = None
    if report is not None:
        told = report

        def forward(p: Any) -> None:
            told(Progress(p.bytes, p.total_bytes, f"{p.files} files, {p.cases} cases"))

    with params.reading("store", output="out"):
        result = export_bundle(config, forward)
    if destination is not None:
        from bundler.api.stored import upload as upload_archive

        uploaded = upload_archive(
            result.path, destination, endpoint_url=endpoint, on_progress=report
        )
        record = uploaded.to_json()
        record.pop("schema", None)  # the export summary carries it as "upload"
        result = replace(result, upload=record)
    return result


def export_eb(
    run_dir: str | os.PathLike[str],
    *,
    project: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    exported_at: Any = None,
    level: int = 3,
    strict: bool = False,
    key: str | os.PathLike[str] | None = None,
    on_progress: OnProgress | None = None,
) -> EbExportResult:
    """Export an eval-banana run directory into an eval-banana bundle (SPEC 10.1;
    ``export-eb``). Parameters as for ``export``; ``project`` is the project root the
    run's definitions are found under. Raises as ``export`` does (no principal: a run
    has no access rules)."""
    from bundler.evalbanana.export import EbExportConfig, export_eb_bundle

    run = params.local_directory(run_dir, "run_dir")
    root = params.local_directory(project, "project")
    target = output_path(out)
    environ = dict(os.environ)
    moment = times.export_time(exported_at, "exported_at", environ, time.time())
    zstd_level = params.integer(level, "level", 1, 19)
    is_strict = params.flag(strict, "strict")
    report = progress_callback(on_progress)
    signer = signer_for(key)
    config = EbExportConfig(
        run,
        root,
        moment,
        target,
        zstd_level,
        is_strict,
        signer,
        exported_at_source=times.time_source(exported_at, "exported_at", environ),
    )

    forward: Callable[[Any], None] | None = None
    if report is not None:
        told = report

        def forward(p: Any) -> None:
            told(Progress(p.bytes, p.total_bytes, f"{p.files} files"))

    with params.reading("run_dir", output="out"):
        return export_eb_bundle(config, forward)
