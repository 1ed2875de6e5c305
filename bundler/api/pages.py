"""The auditor's page of a result (SPEC 14; ``render``, and ``--html`` of verify and
audit): reading a saved record, choosing the page's name, writing it once."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundler.api import params
from bundler.api.results import RenderResult
from bundler.core.errors import OutputError, ParameterError

if TYPE_CHECKING:
    from bundler.report.record import Sifted


def page_target(value: object, default_name: str, param: str = "html") -> Path:
    """Where a page goes: a file that must not exist, or a directory (existing, or a
    name ending in /) that receives ``default_name``. Raises ParameterError for a
    directory that does not exist, OutputError (3) for an existing file."""
    # ``params.output`` refuses None and every other wrong type, naming ``param``.
    target = params.output(value, param)
    if target.is_dir():
        target = target / default_name
    if target.exists() or target.is_symlink():
        raise OutputError(
            f"{param}: {target}: already exists; an output is never written over anything",
            param=param,
        )
    return target


def write_page(path: Path, record: Mapping[str, Any] | Sifted) -> str:
    """Render ``record`` and write it to ``path`` (never over a file); its kind."""
    from bundler.core.outputs import write_new_file
    from bundler.report.page import render_record

    kind, page = render_record(record)
    write_new_file(path, page)
    return kind


def page_name(record: Mapping[str, Any]) -> str:
    """The default file name of a record's page: ``<report id>.<kind>.html``, or
    ``<kind>.html`` when the record names no report."""
    from bundler.report.page import record_kind

    kind = record_kind(record) or "record"
    rid = record.get("report_id")
    if rid is None and isinstance(record.get("verification"), dict):
        rid = record["verification"].get("report_id")
    import re

    if isinstance(rid, str) and re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,150}", rid, re.ASCII):
        return f"{rid}.{kind}.html"
    return f"{kind}.html"


def render(
    result: str | os.PathLike[str] | dict[str, Any], *, html: str | os.PathLike[str]
) -> RenderResult:
    """Write the auditor's page of a saved result (SPEC 14; ``render``): ``result`` is a
    verification, audit or fixity summary record, as a file or as the object
    (``Verification.to_json()``...). ``html`` is the page (never overwritten) or a
    directory that receives ``<report id>.<kind>.html``. Raises InputError (3) for a
    record that is not one, OutputError (3) for an existing page."""
    from bundler.report.record import sift_path, sift_value

    params.output(html, "html")  # a parameter is checked before any file is read
    # The record is untrusted input (SPEC 14): read with caps, checked against its schema
    # and against itself; the page is built from what its items give, never its claims.
    if isinstance(result, dict):
        from bundler.core import canonical
        from bundler.core.errors import BundlerError

        try:
            value = canonical.loads(canonical.dumps(result), source="result")
        except BundlerError as exc:
            raise ParameterError("result", exc.message) from exc
        if not isinstance(value, dict):
            raise ParameterError("result", "not a JSON object")
        with params.reading("result"):
            sifted = sift_value(value, source="result")
    else:
        path = params.path(result, "result")
        params.existing_input(path, "result", directory_ok=False)
        with params.reading("result"):
            sifted = sift_path(path)
    with params.reading("html"):
        target = page_target(html, page_name(sifted.head))
        kind = write_page(target, sifted)
    return RenderResult(
        {"schema": "evalbook.rendered.v1", "out": str(target), "kind": kind}, out=target, kind=kind
    )
