"""eval-banana check definitions as a bundle holds them, re-hashed in memory (SPEC 10.2).

``bundled_definition`` finds a check's YAML and script among the bytes the bag reader
kept, where the contract puts them (never where bundle.json points), and recomputes
its ``check_definition_sha256`` without writing anything; ``expected_definition_member``
is where the exporter bundles a check's YAML.
"""

from __future__ import annotations

from collections.abc import Mapping

from bundler.evalbanana import run as eb
from bundler.evalbanana.definitions import (
    Definition,
    DefinitionState,
    ScriptState,
    definition_of,
    map_source_path,
)
from bundler.evalbanana.export import DEFINITIONS_PREFIX


def bundled_definition(run: eb.Run, check: eb.CheckRecord, kept: Mapping[str, bytes]) -> Definition:
    """Re-hash ``check``'s bundled definition from the bytes the bag reader kept.

    Every byte is found where the contract puts it, never where bundle.json points: the
    YAML at the recorded ``source_path`` mapped through the recorded ``project_root``
    under ``data/definitions/``, and the script at the path that YAML's own
    ``script_path`` names (``evalbanana.script_location``, the exporter's rule); a
    script absent from the bag gives the ``referenced-script-unavailable`` component.
    Never raises: the state says what was found (``yaml_path``/``script_path`` are bag
    paths here).
    """
    rel = map_source_path(run.project_root, check.source_path)
    member = None if rel is None else DEFINITIONS_PREFIX + rel
    yaml_bytes = None if member is None else kept.get(member)
    if rel is None or yaml_bytes is None:
        return Definition(
            check_id=check.check_id,
            state=DefinitionState.OUTSIDE_PROJECT if rel is None else DefinitionState.MISSING,
            recorded_digest=check.check_definition_sha256,
            observed_digest=None,
            yaml_path=member,
            script_path=None,
            script_state=ScriptState.NONE,
            empty_inline_script=False,
            detail=(
                f"source_path {check.source_path!r} is not under project_root {run.project_root!r}"
                if rel is None
                else f"{member}: not in the bag"
            ),
        )
    return definition_of(
        check,
        rel,
        yaml_bytes,
        lambda script_rel: kept.get(DEFINITIONS_PREFIX + script_rel),
        where=DEFINITIONS_PREFIX,
    )


def expected_definition_member(run_project_root: str, source_path: str) -> str | None:
    """Where the exporter bundles a check's YAML, or None when it lies outside the project."""
    rel = map_source_path(run_project_root, source_path)
    return None if rel is None else DEFINITIONS_PREFIX + rel
