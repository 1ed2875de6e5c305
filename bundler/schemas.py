"""JSON Schema validation of every document the toolkit reads or writes (SPEC 3 and 4.2).

The schemas are the ``*.schema.json`` files of the ``bundler.schema_files`` data package
(the project's ``schemas/`` directory), JSON Schema Draft 2020-12, one self-contained
file per document kind with its shared pieces under ``$defs``. ``validate`` checks a
parsed document against one of them and raises ``SchemaError`` with one line:
``<source>: <JSON pointer>: <reason> (schema <name>)``.

Two keywords are evaluated the way the schemas mean them rather than the way Python's
``re`` and the reference implementation would:

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
import importlib.resources
import json
import re
from collections.abc import Callable, Iterator, Mapping
from importlib.resources.abc import Traversable
from typing import Any

from jsonschema import Draft202012Validator, validators  # type: ignore[import-untyped]
from jsonschema.exceptions import ValidationError, best_match  # type: ignore[import-untyped]

from bundler.errors import SchemaError

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
)

_REPR_LIMIT = 80
_REASON_LIMIT = 300


def schema_dir() -> Traversable:
    """The directory holding the ``*.schema.json`` files: the data package ``SCHEMA_PACKAGE``
    (the repository's ``schemas/`` directory, installed under that name)."""
    return importlib.resources.files(SCHEMA_PACKAGE)


def schema_path(name: str) -> Traversable:
    """The schema file of ``name`` (the file stem without ``.schema.json``).

    Raises KeyError for a name that is not one of ``SCHEMA_NAMES``.
    """
    if name not in SCHEMA_NAMES:
        raise KeyError(f"unknown schema {name!r} (known: {', '.join(SCHEMA_NAMES)})")
    return schema_dir().joinpath(f"{name}{SCHEMA_SUFFIX}")


def load_schema(name: str) -> dict[str, Any]:
    """The parsed schema document of ``name``; raises KeyError for an unknown name."""
    value = json.loads(schema_path(name).read_text(encoding="utf-8"))
    if not isinstance(value, dict):
        raise TypeError(f"{name}{SCHEMA_SUFFIX}: a schema document must be a JSON object")
    return value


# --- keyword implementations -------------------------------------------------------


def _ecma_regex(pattern: str) -> str:
    """Rewrite a JSON Schema (ECMA-262) pattern for Python's ``re``.

    Only ``$`` outside character classes differs for the patterns these schemas use;
    it becomes ``\\Z`` so that a trailing newline is not ignored.
    """
    out: list[str] = []
    in_class = False
    escaped = False
    for char in pattern:
        if escaped:
            out.append(char)
            escaped = False
        elif char == "\\":
            out.append(char)
            escaped = True
        elif in_class:
            out.append(char)
            in_class = char != "]"
        elif char == "[":
            out.append(char)
            in_class = True
        elif char == "$":
            out.append(r"\Z")
        else:
            out.append(char)
    return "".join(out)


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(_ecma_regex(pattern))


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if isinstance(instance, str) and _compiled(pattern).search(instance) is None:
        yield ValidationError(f"{_short(instance)} does not match {pattern!r}")


def _json_key(value: Any) -> Any:
    """A hashable key under which two JSON values collide exactly when JSON-equal."""
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        # 1 and 1.0 hash and compare equal, as JSON Schema requires.
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(_json_key(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, _json_key(item)) for key, item in value.items()))
    # Not a JSON value (a caller's tuple, say): equal only to itself.
    return ("other", id(value))


def _unique_items(validator: Any, unique: bool, instance: Any, schema: Any) -> Iterator[Any]:
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


_Validator = validators.extend(
    Draft202012Validator,
    {"pattern": _pattern, "uniqueItems": _unique_items},
)


@functools.cache
def validator_for(name: str) -> Any:
    """The cached ``jsonschema`` validator of schema ``name``; raises KeyError if unknown.

    It is the reference: it decides every rejection and explains it.
    """
    return _Validator(load_schema(name))


# --- compiled acceptance check ------------------------------------------------------
#
# The reference validator costs about a millisecond per case line, too slow for 20,000
# cases. Each schema is therefore also compiled into plain Python predicates that only
# answer "valid or not"; a document they accept is accepted, anything else goes to the
# reference validator, which has the last word and the error message. The compiler
# knows the keywords these schemas use and refuses the rest, in which case the
# reference validator is used alone.

Check = Callable[[Any], bool]

_ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "$comment", "title", "description"})
_DEFS_PREFIX = "#/$defs/"


class _Unsupported(Exception):
    """A schema construct the compiler does not handle."""


def _accept(instance: Any) -> bool:
    return True


def _reject(instance: Any) -> bool:
    return False


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


_TYPE_TESTS: dict[str, Check] = {
    "null": lambda value: value is None,
    "boolean": lambda value: isinstance(value, bool),
    "integer": _is_integer,
    "number": _is_number,
    "string": lambda value: isinstance(value, str),
    "array": lambda value: isinstance(value, list),
    "object": lambda value: isinstance(value, dict),
}


def _all_of(checks: list[Check]) -> Check:
    if not checks:
        return _accept
    if len(checks) == 1:
        return checks[0]
    frozen = tuple(checks)

    def check(instance: Any) -> bool:
        # A plain loop: a generator costs twice as much on the per-case hot path.
        for each in frozen:  # noqa: SIM110
            if not each(instance):
                return False
        return True

    return check


class _Compiler:
    """Turns one schema document into a predicate; raises _Unsupported if it cannot."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self._defs: Mapping[str, Any] = root.get("$defs", {})
        self._compiled: dict[str, Check] = {}
        self._in_progress: set[str] = set()

    def ref(self, ref: Any) -> Check:
        if not isinstance(ref, str) or not ref.startswith(_DEFS_PREFIX):
            raise _Unsupported(f"$ref {ref!r}")
        name = ref[len(_DEFS_PREFIX) :]
        if name not in self._compiled:
            if name in self._in_progress or name not in self._defs or "/" in name or "~" in name:
                raise _Unsupported(f"$ref {ref!r}")
            self._in_progress.add(name)
            self._compiled[name] = self.compile(self._defs[name])
            self._in_progress.discard(name)
        return self._compiled[name]

    def compile(self, schema: Any) -> Check:
        if schema is True:
            return _accept
        if schema is False:
            return _reject
        if not isinstance(schema, dict):
            raise _Unsupported(f"schema {schema!r}")
        checks: list[Check] = []
        for keyword in schema:
            if keyword in _ANNOTATIONS or keyword in _HANDLED_ELSEWHERE:
                continue
            build = _KEYWORDS.get(keyword)
            if build is None:
                raise _Unsupported(f"keyword {keyword!r}")
            checks.append(build(self, schema[keyword], schema))
        return _all_of(checks)


def _kw_ref(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    return compiler.ref(value)


def _kw_type(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    names = value if isinstance(value, list) else [value]
    tests = tuple(_TYPE_TESTS[name] for name in names)
    if len(tests) == 1:
        return tests[0]
    return lambda instance: any(test(instance) for test in tests)


def _kw_enum(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    if all(isinstance(item, str) for item in value):
        strings = frozenset(value)
        return lambda instance: isinstance(instance, str) and instance in strings
    keys = frozenset(_json_key(item) for item in value)
    return lambda instance: _json_key(instance) in keys


def _kw_const(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    return _kw_enum(compiler, [value], schema)


def _kw_pattern(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    search = _compiled(value).search
    return lambda instance: not isinstance(instance, str) or search(instance) is not None


def _kw_min_length(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    return lambda instance: not isinstance(instance, str) or len(instance) >= value


def _kw_max_length(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    return lambda instance: not isinstance(instance, str) or len(instance) <= value


def _kw_minimum(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    return lambda instance: not _is_number(instance) or instance >= value


def _kw_maximum(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    return lambda instance: not _is_number(instance) or instance <= value


def _kw_exclusive_minimum(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    return lambda instance: not _is_number(instance) or instance > value


def _kw_exclusive_maximum(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    return lambda instance: not _is_number(instance) or instance < value


def _kw_required(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    names = tuple(value)

    def check(instance: Any) -> bool:
        if not isinstance(instance, dict):
            return True
        return all(map(instance.__contains__, names))

    return check


def _kw_properties(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    """``properties`` together with ``additionalProperties``, in one pass over the keys."""
    known = {name: compiler.compile(sub) for name, sub in value.items()}
    extra = schema.get("additionalProperties", True)
    other = None if extra is True else compiler.compile(extra)

    def check(instance: Any) -> bool:
        if not isinstance(instance, dict):
            return True
        for name, item in instance.items():
            sub = known.get(name, other)
            if sub is not None and not sub(item):
                return False
        return True

    return check


def _kw_additional_properties(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    if "properties" in schema:
        return _accept
    sub = compiler.compile(value)

    def check(instance: Any) -> bool:
        if not isinstance(instance, dict):
            return True
        return all(map(sub, instance.values()))

    return check


def _kw_property_names(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    sub = compiler.compile(value)

    def check(instance: Any) -> bool:
        if not isinstance(instance, dict):
            return True
        return all(map(sub, instance))

    return check


def _kw_items(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    sub = compiler.compile(value)

    def check(instance: Any) -> bool:
        if not isinstance(instance, list):
            return True
        return all(map(sub, instance))

    return check


def _kw_min_items(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    return lambda instance: not isinstance(instance, list) or len(instance) >= value


def _kw_max_items(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    return lambda instance: not isinstance(instance, list) or len(instance) <= value


def _kw_unique_items(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    if value is not True:
        return _accept

    def check(instance: Any) -> bool:
        if not isinstance(instance, list):
            return True
        return len({_json_key(item) for item in instance}) == len(instance)

    return check


def _kw_contains(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    sub = compiler.compile(value)
    return lambda instance: not isinstance(instance, list) or any(map(sub, instance))


def _kw_all_of(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    return _all_of([compiler.compile(sub) for sub in value])


def _kw_any_of(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    subs = tuple(compiler.compile(sub) for sub in value)

    def check(instance: Any) -> bool:
        # A plain loop, as in _all_of: nullable fields make this a per-case hot path.
        for sub in subs:  # noqa: SIM110
            if sub(instance):
                return True
        return False

    return check


def _kw_one_of(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    subs = tuple(compiler.compile(sub) for sub in value)
    return lambda instance: sum(1 for sub in subs if sub(instance)) == 1


def _kw_not(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    sub = compiler.compile(value)
    return lambda instance: not sub(instance)


def _kw_if(compiler: _Compiler, value: Any, schema: Mapping[str, Any]) -> Check:
    condition = compiler.compile(value)
    then = compiler.compile(schema.get("then", True))
    otherwise = compiler.compile(schema.get("else", True))
    return lambda instance: then(instance) if condition(instance) else otherwise(instance)


_KEYWORDS: dict[str, Callable[[_Compiler, Any, Mapping[str, Any]], Check]] = {
    "$ref": _kw_ref,
    "type": _kw_type,
    "enum": _kw_enum,
    "const": _kw_const,
    "pattern": _kw_pattern,
    "minLength": _kw_min_length,
    "maxLength": _kw_max_length,
    "minimum": _kw_minimum,
    "maximum": _kw_maximum,
    "exclusiveMinimum": _kw_exclusive_minimum,
    "exclusiveMaximum": _kw_exclusive_maximum,
    "required": _kw_required,
    "properties": _kw_properties,
    "additionalProperties": _kw_additional_properties,
    "propertyNames": _kw_property_names,
    "items": _kw_items,
    "minItems": _kw_min_items,
    "maxItems": _kw_max_items,
    "uniqueItems": _kw_unique_items,
    "contains": _kw_contains,
    "allOf": _kw_all_of,
    "anyOf": _kw_any_of,
    "oneOf": _kw_one_of,
    "not": _kw_not,
    "if": _kw_if,
}
# Read by the keyword they modify (``if``); without it they have no effect.
_HANDLED_ELSEWHERE = frozenset({"then", "else"})


def compile_schema(schema: Mapping[str, Any]) -> Check | None:
    """A fast acceptance predicate for ``schema``, or None if it uses other constructs."""
    try:
        return _Compiler(schema).compile(dict(schema))
    except _Unsupported:
        return None


@functools.cache
def _fast_check(name: str) -> Check | None:
    return compile_schema(load_schema(name))


# --- messages ----------------------------------------------------------------------


def _short(value: Any) -> str:
    text = repr(value)
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
    if keyword in ("maxItems", "minItems") and isinstance(error.instance, list):
        bound = "at most" if keyword == "maxItems" else "at least"
        return f"has {len(error.instance)} items, {bound} {error.validator_value} allowed"
    message = str(error.message)
    full = repr(error.instance)
    if len(full) > _REPR_LIMIT:
        message = message.replace(full, _short(error.instance))
    if len(message) > _REASON_LIMIT:
        message = message[: _REASON_LIMIT - 3] + "..."
    return message


def _deepest(error: Any) -> Any:
    """For an ``anyOf``/``oneOf`` failure, the alternative that got furthest.

    ``x: null | digest`` given a malformed string should say "malformed digest", not
    "is not valid under any of the given schemas".
    """
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


def validate(name: str, instance: Any, *, source: str) -> None:
    """Check ``instance`` against schema ``name`` (e.g. ``"case"``, ``"bundle"``).

    Returns quietly when the document is valid. Raises SchemaError with one line,
    ``<source>: <pointer>: <reason> (schema <name>)``, for the most relevant violation;
    raises KeyError for an unknown schema name.
    """
    fast = _fast_check(name)
    if fast is not None and fast(instance):
        return
    error = best_match(validator_for(name).iter_errors(instance))
    if error is None:
        return
    error = _deepest(error)
    reason = _reason(error).replace("\n", " ")
    pointer = json_pointer(error.absolute_path)
    raise SchemaError(f"{source}: {pointer}: {reason} (schema {name})")
