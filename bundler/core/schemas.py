"""JSON Schema validation of every document the toolkit reads or writes (SPEC 3 and 4.2).

The schemas are the ``*.schema.json`` files of the ``bundler.schema_files`` data package
(the project's ``schemas/`` directory), JSON Schema Draft 2020-12, one self-contained
file per document kind with its shared pieces under ``$defs``. ``validate`` checks a
parsed document against one of them and raises ``SchemaError`` with one line:
``<source>: <JSON pointer>: <reason> (schema <name>)``.

Every document is first given to its schema's compiled acceptance check
(``schemagen``); whatever that does not accept goes to the reference validator here,
which decides and explains. Two keywords are evaluated the way the schemas mean them
rather than the way Python's ``re`` and the reference implementation would
(``schemakeywords``, for both evaluators):

- ``pattern`` follows ECMA-262, which JSON Schema specifies: ``$`` is the end of the
  string. Python's ``$`` also matches before a final newline, which would let
  ``"sha256:<hex>\\n"`` pass as a digest.
- ``uniqueItems`` hashes the items (with JSON equality: ``1 == 1.0``, ``true != 1``)
  instead of comparing every pair, so an evidence manifest with tens of thousands of
  entries validates in linear time.

A subschema's ``description``, where one is given, is the reason printed when that
subschema fails; descriptions therefore sit on leaf and conditional subschemas only.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from bundler.core.errors import SchemaError
from bundler.core.schemagen import Check, _build
from bundler.core.schemakeywords import _compiled, _json_key
from bundler.core.textsafe import quoted

SCHEMA_PACKAGE = "bundler.schema_files"
SCHEMA_SUFFIX = ".schema.json"
SCHEMA_NAMES = (
    "access",
    "bundle",
    "case",
    "check-result",
    "dataset-manifest",
    "envelope",
    "evidence-manifest",
    "report-body",
    "retention-line",
    "scorer",
    "suite",
    "case-proof",
    "verification",
    "audit",
    "eb-bundle",
    "export-summary",
    "export-eb-summary",
    "reports-line",
)

# The shapes commands print with --json (SPEC 7), beside the documents above; validated
# by the tests, never compiled for the verifier.
OUTPUT_SCHEMA_NAMES = (
    "error",
    "digest",
    "canonical",
    "signed",
    "proof-written",
    "proof-check",
    "upload",
    "list-line",
    "download",
    "inspect",
    "fixity-run",
    "fixity-check",
    "fixity-footer",
    "fixity-summary",
    "fixity-retired",
    "rendered",
)

_REPR_LIMIT = 80
_REASON_LIMIT = 300


def schema_dir() -> Path:
    """The directory holding the ``*.schema.json`` files: the data package ``SCHEMA_PACKAGE``
    (the repository's ``schemas/`` directory, installed under that name).

    Found from the package's import spec, not through ``importlib.resources``: importing
    that (tempfile, shutil, random and the compression modules with it) cost a few per cent of
    the start-up of every command. The package is always a directory on disk, since the
    native extension beside it cannot be loaded from a zip file either.
    """
    spec = importlib.util.find_spec(SCHEMA_PACKAGE)
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not locations:
        raise RuntimeError(f"the schema files ({SCHEMA_PACKAGE}) are not installed")
    return Path(locations[0])


def schema_path(name: str) -> Path:
    """The schema file of ``name`` (the file stem without ``.schema.json``).

    Raises KeyError for a name that is not one of ``SCHEMA_NAMES``.
    """
    if name not in SCHEMA_NAMES and name not in OUTPUT_SCHEMA_NAMES:
        known = ", ".join((*SCHEMA_NAMES, *OUTPUT_SCHEMA_NAMES))
        raise KeyError(f"unknown schema {name!r} (known: {known})")
    return schema_dir().joinpath(f"{name}{SCHEMA_SUFFIX}")


def load_schema(name: str) -> dict[str, Any]:
    """The parsed schema document of ``name``; raises KeyError for an unknown name."""
    value = json.loads(schema_path(name).read_text(encoding="utf-8"))
    if not isinstance(value, dict):
        raise TypeError(f"{name}{SCHEMA_SUFFIX}: a schema document must be a JSON object")
    return value


# --- keyword implementations -------------------------------------------------------


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if isinstance(instance, str) and _compiled(pattern).search(instance) is None:
        yield ValidationError(f"{_short(instance)} does not match {pattern!r}")


def _unique_items(validator: Any, unique: bool, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not unique or not isinstance(instance, list):
        return
    seen: dict[Any, int] = {}
    for index, item in enumerate(instance):
        key = _json_key(item)
        first = seen.setdefault(key, index)
        if first != index:
            yield ValidationError(
                f"items {first} and {index} are equal ({_short(item)}); items must be unique"
            )
            return


@functools.cache
def reference_validator_class() -> Any:
    """jsonschema's Draft 2020-12 validator class with ``pattern`` and ``uniqueItems``
    evaluated as above.

    jsonschema is imported here, on first use, not with this module: the compiled checks
    accept every valid document without it, and its import alone costs more than the
    whole verification of a small bundle.
    """
    from jsonschema import Draft202012Validator, validators

    return validators.extend(
        Draft202012Validator,
        {"pattern": _pattern, "uniqueItems": _unique_items},
    )


@functools.cache
def _explainer(name: str) -> Any:
    """The reference validator of ``name`` as ``validate`` runs it to explain a rejection:
    each item of an array is first given to the compiled check of the array's items
    schema, and only the first item that check does not accept is explained (every
    item it accepts is valid: the reference would find nothing there). jsonschema's own
    walk of 150,000 valid listed entries took 20 s to reach the one that was not, and
    30 s when every entry was bad; SPEC 5 allows 10 s."""
    from jsonschema import validators

    root = load_schema(name)
    defs = root.get("$defs", {})
    base = reference_validator_class()
    reference_items = base.VALIDATORS["items"]
    checks: dict[int, tuple[Any, Check | None]] = {}

    def item_check(items: Any) -> Check | None:
        known = checks.get(id(items))
        if known is None or known[0] is not items:
            check = None
            if isinstance(items, dict) and "$defs" not in items and "$id" not in items:
                check = _build({**items, "$defs": defs}, f"{name} items")
            known = checks[id(items)] = (items, check)
        return known[1]

    def items(validator: Any, items: Any, instance: Any, schema: Any) -> Iterator[Any]:
        check = None
        if isinstance(instance, list) and "prefixItems" not in schema:
            check = item_check(items)
        if check is None:
            yield from reference_items(validator, items, instance, schema)
            return
        for index, item in enumerate(instance):
            if not check(item):
                errors = list(validator.descend(instance=item, schema=items, path=index))
                if errors:
                    yield from errors
                    return

    return validators.extend(base, {"items": items})(root)


@functools.cache
def validator_for(name: str) -> Any:
    """The cached ``jsonschema`` validator of schema ``name``; raises KeyError if unknown.

    It is the reference: it decides every rejection and explains it.
    """
    return reference_validator_class()(load_schema(name))


@functools.cache
def _fast_check(name: str) -> Check | None:
    return _build(load_schema(name), name)


# --- messages ----------------------------------------------------------------------


def _short(value: Any) -> str:
    # Quoted, not repr'd: the message is escaped once where it is shown (textsafe).
    text = quoted(value)
    if len(text) <= _REPR_LIMIT:
        return text
    return text[: _REPR_LIMIT - 3] + "..."


def json_pointer(path: Any) -> str:
    """RFC 6901 pointer of an instance path; the document root is shown as ``(root)``."""
    parts = [str(part).replace("~", "~0").replace("/", "~1") for part in path]
    return "/" + "/".join(parts) if parts else "(root)"


def _reason(error: Any) -> str:
    schema = error.schema
    keyword = error.validator
    types = _alternative_types(error)
    if types:
        return f"{_short(error.instance)} is not of type {' or '.join(types)}"
    if isinstance(schema, Mapping) and isinstance(schema.get("description"), str):
        return f"{schema['description']}; got {_short(error.instance)}"
    if keyword == "enum":
        return f"{_short(error.instance)} is not one of {list(error.validator_value)!r}"
    if keyword == "const":
        return f"{_short(error.instance)} is not {error.validator_value!r}"
    if keyword == "type":
        want = error.validator_value
        names = " or ".join(want) if isinstance(want, list) else str(want)
        return f"{_short(error.instance)} is not of type {names}"
    if keyword == "pattern" and isinstance(error.validator_value, str):
        return f"{_short(error.instance)} does not match {quoted(error.validator_value)}"
    if keyword in ("maxItems", "minItems") and isinstance(error.instance, list):
        bound = "at most" if keyword == "maxItems" else "at least"
        return f"has {len(error.instance)} items, {bound} {error.validator_value} allowed"
    message = str(error.message)
    full = repr(error.instance)
    if full in message:
        message = message.replace(full, _short(error.instance))
    if len(message) > _REASON_LIMIT:
        message = message[: _REASON_LIMIT - 3] + "..."
    return message


def _deepest(error: Any) -> Any:
    """For an ``anyOf``/``oneOf`` failure, the alternative that got furthest.

    ``x: null | digest`` given a malformed string should say "malformed digest", not
    "is not valid under any of the given schemas".
    """
    from jsonschema.exceptions import best_match

    while error.validator in ("anyOf", "oneOf") and error.context:
        candidates = [sub for sub in error.context if sub.validator != "type"]
        if not candidates:
            break
        error = best_match(candidates)
    return error


def _alternative_types(error: Any) -> list[str]:
    """The types an ``anyOf``/``oneOf`` accepted, when every alternative failed on type."""
    if error.validator not in ("anyOf", "oneOf") or not error.context:
        return []
    names: list[str] = []
    for sub in error.context:
        if sub.validator != "type" or sub.relative_path:
            return []
        want = sub.validator_value
        for item in want if isinstance(want, list) else [want]:
            if item not in names:
                names.append(str(item))
    return names


def is_valid(name: str, instance: Any) -> bool:
    """Whether ``instance`` is valid under schema ``name``, with no explanation: the
    compiled check's answer (its expression is true exactly when the document is valid;
    tests/test_schemas_codegen.py holds it to the reference on every construct), or the
    reference validator's where a schema has no compiled check. For the many documents
    of one kind a verifier counts but does not explain (case lines past the three its
    claim names: explaining 20,000 through the reference took 10 to 13 s)."""
    fast = _fast_check(name)
    if fast is not None:
        return fast(instance)
    return bool(validator_for(name).is_valid(instance))


def validate(name: str, instance: Any, *, source: str) -> None:
    """Check ``instance`` against schema ``name`` (e.g. ``"case"``, ``"bundle"``).

    Returns quietly when the document is valid. Raises SchemaError with one line,
    ``<source>: <pointer>: <reason> (schema <name>)``, for the most relevant violation;
    raises KeyError for an unknown schema name.
    """
    fast = _fast_check(name)
    if fast is not None and fast(instance):
        return
    from jsonschema.exceptions import best_match

    error = best_match(_explainer(name).iter_errors(instance))
    if error is None:
        return
    error = _deepest(error)
    reason = _reason(error)
    pointer = json_pointer(error.absolute_path)
    raise SchemaError(f"{source}: {pointer}: {reason} (schema {name})")
