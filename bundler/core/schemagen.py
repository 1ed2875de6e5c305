"""The compiled acceptance checks: each schema turned into Python source (SPEC 3).

``generate_check`` writes the source of one schema's check (``GeneratedCheck``), or
gives None for a construct it does not handle; ``compile_schema`` compiles it into a
predicate that answers only "valid or not". ``schemas.validate`` runs the predicate
first and asks the reference validator whenever it says no.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

from bundler.core.schemakeywords import _compiled, _json_key

# --- compiled acceptance check ------------------------------------------------------
#
# The reference validator costs about a millisecond per case line, too slow for 20,000
# cases. Each schema is therefore also turned into Python source, compiled once: one
# function for the document and one for each definition it calls, answering only "valid
# or not". A document it accepts is accepted; anything else goes to the reference
# validator, which has the last word and the error message. The generator knows the
# keywords these schemas use and refuses the rest, in which case the reference validator
# is used alone.
#
# Straight-line code is the point: a keyword costs a comparison, not a Python call per
# keyword per value as a tree of closures would. Schema values never become source
# text: property names, enum members, bounds and regexes are named constants of the
# function's namespace, so the source holds only generated names, Python keywords and
# the builtins it calls, whatever the schema or the document contains.

Check = Callable[[Any], bool]

_KEYWORDS = frozenset(
    {
        "$ref",
        "type",
        "enum",
        "const",
        "pattern",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "required",
        "properties",
        "additionalProperties",
        "propertyNames",
        "items",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
    }
)
# Read by the keyword they modify (``if``); without it they have no effect.
_HANDLED_ELSEWHERE = frozenset({"then", "else"})
_ANNOTATIONS = frozenset({"$defs", "$comment", "title", "description"})
# ``$id`` below the root would start a new resource with its own ``#/$defs/``.
_ROOT_ANNOTATIONS = frozenset({"$schema", "$id"})
_DEFS_PREFIX = "#/$defs/"
_ENTRY = "_check"
# Deeper blocks or expressions move into a function of their own, far from Python's
# limits on nested loops (20) and indentation (100).
_MAX_NESTING = 8

# Python test for each JSON type; ``{v}`` is a generated variable name.
_TYPE_TESTS = {
    "null": "{v} is None",
    "boolean": "isinstance({v}, bool)",
    "integer": (
        "(type({v}) is int or isinstance({v}, float) and {v}.is_integer()"
        " or isinstance({v}, int) and not isinstance({v}, bool))"
    ),
    "number": "(isinstance({v}, (int, float)) and not isinstance({v}, bool))",
    "string": "isinstance({v}, str)",
    "array": "isinstance({v}, list)",
    "object": "isinstance({v}, dict)",
}
# Keywords that test one value of one type: (type they apply to, test template).
_COMPARISONS = {
    "minLength": ("string", "len({v}) >= {c}"),
    "maxLength": ("string", "len({v}) <= {c}"),
    "minimum": ("number", "{v} >= {c}"),
    "maximum": ("number", "{v} <= {c}"),
    "exclusiveMinimum": ("number", "{v} > {c}"),
    "exclusiveMaximum": ("number", "{v} < {c}"),
    "minItems": ("array", "len({v}) >= {c}"),
    "maxItems": ("array", "len({v}) <= {c}"),
}
_OBJECT_KEYWORDS = ("required", "properties", "additionalProperties", "propertyNames")
_LOOP_KEYWORDS = ("items", "contains", "propertyNames", "additionalProperties")


class _Unsupported(Exception):
    """A schema construct the generator does not handle."""


class _Missing:
    """The value of a member the document does not have."""

    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def _all_unique(items: list[Any]) -> bool:
    """True only when no two items are JSON-equal (False sends the document on to the
    reference validator, which decides)."""
    try:
        # Flat objects and scalars, by Python equality: it agrees with JSON equality
        # except that True == 1, which can only make this answer False, never wrongly
        # True. Nested values are unhashable here and take the exact path below.
        flat = {frozenset(item.items()) if type(item) is dict else item for item in items}
    except TypeError:
        pass
    else:
        if len(flat) == len(items):
            return True
    return len({_json_key(item) for item in items}) == len(items)


class _Facts(NamedTuple):
    """What the code generated so far has established about a value."""

    # The JSON type the value has ("integer" is also a "number"), or None.
    kind: str | None = None
    # Members the value has if it is an object.
    present: frozenset[str] = frozenset()
    # Members already read into a variable of the function being written, each with
    # the type its checks established: (member, variable, type).
    loaded: tuple[tuple[str, str, str | None], ...] = ()

    def member(self, name: str) -> tuple[str, str | None] | None:
        for member, var, kind in self.loaded:
            if member == name:
                return var, kind
        return None


_UNKNOWN = _Facts()

# A step of a check: a boolean expression that must hold, or statements that return
# False when the value is invalid.
_Step = str | list[str]


def _applies(kind: str | None, want: str) -> bool | None:
    """Whether a keyword for type ``want`` applies to a value of ``kind``; None: unknown."""
    if kind is None:
        return None
    if want == "number":
        return kind in ("number", "integer")
    return kind == want


def _is_schema(value: Any) -> bool:
    return isinstance(value, (bool, dict))


def _is_bound(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _needs_loop(schema: Any) -> bool:
    """Whether ``schema`` tests every member or item, which an expression cannot."""
    return isinstance(schema, dict) and any(
        keyword in schema and schema[keyword] is not True and schema[keyword] is not False
        for keyword in _LOOP_KEYWORDS
    )


def _subschemas(schema: Any) -> Iterator[Any]:
    """The schemas directly inside ``schema`` (not ``$ref`` targets)."""
    if not isinstance(schema, dict):
        return
    for keyword in ("additionalProperties", "propertyNames", "items", "contains"):
        if keyword in schema:
            yield schema[keyword]
    for keyword in ("not", "if", "then", "else"):
        if keyword in schema:
            yield schema[keyword]
    properties = schema.get("properties")
    if isinstance(properties, dict):
        yield from properties.values()
    for keyword in ("allOf", "anyOf", "oneOf"):
        if isinstance(schema.get(keyword), list):
            yield from schema[keyword]


def _has_ref(schema: Any) -> bool:
    if isinstance(schema, dict) and "$ref" in schema:
        return True
    return any(_has_ref(sub) for sub in _subschemas(schema))


def _indent(lines: list[str], levels: int = 1) -> list[str]:
    pad = "    " * levels
    return [pad + line for line in lines]


def _is_atom(expression: str) -> bool:
    """Whether ``expression`` is a name, a call or a parenthesised expression.

    Generated source has no string literals, so counting brackets is exact.
    """
    head, bracket, _ = expression.partition("(")
    if not bracket:
        return expression.isidentifier()
    if head and not head.isidentifier():
        return False
    depth = 0
    for index, char in enumerate(expression):
        depth += (char == "(") - (char == ")")
        if depth == 0 and char == ")":
            return index == len(expression) - 1
    return False


def _negate(expression: str) -> str:
    return f"not {expression}" if _is_atom(expression) else f"not ({expression})"


def _guard(expression: str) -> list[str]:
    return [f"if {_negate(expression)}:", "    return False"]


def _statements(steps: list[_Step]) -> list[str]:
    lines: list[str] = []
    for step in steps:
        lines.extend(_guard(step) if isinstance(step, str) else step)
    return lines


def _conjunction(steps: list[_Step]) -> str:
    parts: list[str] = []
    for step in steps:
        if not isinstance(step, str):
            raise AssertionError("statements in an expression")
        if step != "True":
            parts.append(step)
    if not parts:
        return "True"
    return parts[0] if len(parts) == 1 else "(" + " and ".join(parts) + ")"


@dataclass(frozen=True)
class GeneratedCheck:
    """The Python source of one schema's acceptance check and the constants it reads.

    ``source`` defines ``_check(instance) -> bool`` and the functions it calls; every
    value taken from the schema is a name in ``constants``, never a literal in
    ``source``.
    """

    source: str
    constants: Mapping[str, Any]

    def build(self, label: str) -> Check:
        """Compile the source, as file ``<schema LABEL>``, and return its ``_check``.

        Raises SyntaxError or RecursionError if Python's compiler cannot take it.
        """
        code = compile(self.source, f"<schema {label}>", "exec")
        namespace = dict(self.constants)
        exec(code, namespace)
        check: Check = namespace[_ENTRY]
        return check


class _Generator:
    """Writes the check of one schema document; raises _Unsupported if it cannot.

    Every expression it builds is safe as an operand of ``and``, ``or`` and ``not``:
    anything with an operator of lower precedence than a comparison is parenthesised.
    """

    def __init__(self, root: Mapping[str, Any]) -> None:
        defs = root.get("$defs", {})
        if not isinstance(defs, dict):
            raise _Unsupported("$defs")
        self._defs: dict[str, Any] = defs
        self._constants: dict[str, Any] = {
            "_missing": _MISSING,
            "_json_key": _json_key,
            "_all_unique": _all_unique,
        }
        self._constant_names: dict[Any, str] = {}
        self._functions: dict[Any, str] = {}
        self._pending: list[tuple[str, Any, _Facts]] = []
        self._leaves: dict[str, bool] = {}
        self._temporaries = 0

    # --- names -------------------------------------------------------------------

    def _constant(self, key: Any, value: Any) -> str:
        name = self._constant_names.get(key)
        if name is None:
            name = f"_c{len(self._constant_names)}"
            self._constant_names[key] = name
            self._constants[name] = value
        return name

    def _string(self, value: str) -> str:
        return self._constant(("str", value), value)

    def _set(self, values: frozenset[Any]) -> str:
        return self._constant(("set", values), values)

    def _number(self, value: Any) -> str:
        return self._constant(("number", type(value).__name__, value), value)

    def _temporary(self) -> str:
        self._temporaries += 1
        return f"_v{self._temporaries}"

    def _function(self, key: Any, prefix: str, schema: Any, facts: _Facts) -> str:
        name = self._functions.get(key)
        if name is None:
            name = f"{prefix}{len(self._functions)}"
            self._functions[key] = name
            self._pending.append((name, schema, facts))
        return name

    def _definition(self, ref: Any) -> str:
        if not isinstance(ref, str) or not ref.startswith(_DEFS_PREFIX):
            raise _Unsupported(f"$ref {ref!r}")
        name = ref[len(_DEFS_PREFIX) :]
        # Escaped or percent-encoded pointers would name another member than the text.
        if name not in self._defs or any(char in name for char in "/~%"):
            raise _Unsupported(f"$ref {ref!r}")
        return name

    def _is_leaf(self, name: str) -> bool:
        leaf = self._leaves.get(name)
        if leaf is None:
            leaf = not _has_ref(self._defs[name])
            self._leaves[name] = leaf
        return leaf

    # --- document ----------------------------------------------------------------

    def generate(self, root: dict[str, Any]) -> GeneratedCheck:
        steps, _ = self._steps(root, "x", _UNKNOWN, 0, expression=False, root=True)
        body = _statements(steps)
        lines = [
            f"def {_ENTRY}(x):",
            "    try:",
            *_indent(body or ["pass"], 2),
            "    except RecursionError:",
            "        # Nesting deeper than the stack: the reference validator decides.",
            "        return False",
            "    return True",
        ]
        while self._pending:
            name, schema, facts = self._pending.pop(0)
            body = self._block(schema, "x", facts, 0)
            lines += ["", "", f"def {name}(x):", *_indent(body), "    return True"]
        return GeneratedCheck("\n".join(lines) + "\n", MappingProxyType(dict(self._constants)))

    def _block(self, schema: Any, var: str, facts: _Facts, depth: int) -> list[str]:
        """Statements that return False when ``var`` breaks ``schema``."""
        return self._typed_block(schema, var, facts, depth)[0]

    def _typed_block(
        self, schema: Any, var: str, facts: _Facts, depth: int
    ) -> tuple[list[str], str | None]:
        """``_block`` and the type of ``var`` once the statements have passed."""
        if schema is True:
            return [], facts.kind
        if schema is False:
            return ["return False"], facts.kind
        if depth > _MAX_NESTING:
            return _guard(self._call(schema, var, facts)), facts.kind
        steps, kind = self._steps(schema, var, facts, depth, expression=False)
        return _statements(steps), kind

    def _expression(self, schema: Any, var: str, facts: _Facts, depth: int) -> str:
        """A boolean expression: True exactly when ``var`` is valid under ``schema``."""
        if schema is True:
            return "True"
        if schema is False:
            return "False"
        if depth > _MAX_NESTING or _needs_loop(schema):
            return self._call(schema, var, facts)
        steps, _ = self._steps(schema, var, facts, depth, expression=True)
        return _conjunction(steps)

    def _call(self, schema: Any, var: str, facts: _Facts) -> str:
        # Variables of this function mean nothing in another one.
        facts = facts._replace(loaded=())
        # One function per subschema and what is known on entry; ``schema`` is part of
        # the document being compiled, so its id is stable while the generator runs.
        name = self._function(("sub", id(schema), facts), "_s", schema, facts)
        return f"{name}({var})"

    # --- keywords ----------------------------------------------------------------

    def _steps(
        self,
        schema: Any,
        var: str,
        facts: _Facts,
        depth: int,
        *,
        expression: bool,
        root: bool = False,
    ) -> tuple[list[_Step], str | None]:
        """The checks of ``schema`` on ``var``, and the type ``var`` has once they pass."""
        if not isinstance(schema, dict):
            raise _Unsupported(f"schema {schema!r}")
        for keyword in schema:
            if keyword in _KEYWORDS or keyword in _ANNOTATIONS or keyword in _HANDLED_ELSEWHERE:
                continue
            if root and keyword in _ROOT_ANNOTATIONS:
                continue
            raise _Unsupported(f"keyword {keyword!r}")
        steps: list[_Step] = []
        kind = facts.kind
        if "type" in schema:
            test, kind = self._type(schema["type"], var, kind)
            if test != "True":
                steps.append(test)
        value_steps, kind = self._values(schema, var, kind)
        steps += value_steps
        facts = facts._replace(kind=kind)
        object_steps, facts = self._object(schema, var, facts, depth, expression)
        steps += object_steps
        steps += self._array(schema, var, kind, depth, expression)
        if "$ref" in schema:
            ref_steps, kind = self._ref(schema["$ref"], var, facts, depth, expression)
            steps += ref_steps
            facts = facts._replace(kind=kind)
        steps += self._logic(schema, var, facts, depth, expression)
        return steps, kind

    def _type(self, value: Any, var: str, kind: str | None) -> tuple[str, str | None]:
        names = value if isinstance(value, list) else [value]
        if not all(isinstance(name, str) and name in _TYPE_TESTS for name in names):
            raise _Unsupported(f"type {value!r}")
        if kind is not None and any(_applies(kind, name) for name in names):
            return "True", kind
        tests = [_TYPE_TESTS[name].format(v=var) for name in dict.fromkeys(names)]
        if len(tests) == 1:
            return tests[0], names[0]
        return ("(" + " or ".join(tests) + ")" if tests else "False"), None

    def _typed(self, kind: str | None, want: str, var: str, test: str) -> list[_Step]:
        """``test``, which assumes a value of type ``want``, guarded by that type."""
        applies = _applies(kind, want)
        if applies is None:
            return [f"(not {_TYPE_TESTS[want].format(v=var)} or {test})"]
        return [test] if applies else []

    def _values(
        self, schema: dict[str, Any], var: str, kind: str | None
    ) -> tuple[list[_Step], str | None]:
        """The keywords on one value, and the type of the value once they pass."""
        steps: list[_Step] = []
        for keyword in ("enum", "const"):
            if keyword not in schema:
                continue
            values = schema[keyword] if keyword == "enum" else [schema[keyword]]
            if not isinstance(values, list):
                raise _Unsupported(f"enum {values!r}")
            if values and all(isinstance(item, str) for item in values):
                if len(values) == 1:
                    test = f"{var} == {self._string(values[0])}"
                else:
                    test = f"{var} in {self._set(frozenset(values))}"
                # Unlike the other keywords, this one rejects values of other types.
                applies = _applies(kind, "string")
                if applies is None:
                    steps.append(f"(isinstance({var}, str) and {test})")
                    kind = "string"
                else:
                    steps.append(test if applies else "False")
            elif values and all(type(item) is int for item in values):
                # Numbers compare as JSON numbers (1.0 is 1); booleans are not numbers.
                test = f"{var} in {self._set(frozenset(values))}"
                steps.append(
                    f"(isinstance({var}, int | float) and not isinstance({var}, bool) and {test})"
                )
            else:
                keys = self._set(frozenset(_json_key(item) for item in values))
                steps.append(f"_json_key({var}) in {keys}")
        if "pattern" in schema:
            pattern = schema["pattern"]
            if not isinstance(pattern, str):
                raise _Unsupported(f"pattern {pattern!r}")
            try:
                search = _compiled(pattern).search
            except re.error as exc:
                raise _Unsupported(f"pattern {pattern!r}") from exc
            name = self._constant(("pattern", pattern), search)
            steps += self._typed(kind, "string", var, f"{name}({var}) is not None")
        for keyword, (want, template) in _COMPARISONS.items():
            if keyword not in schema:
                continue
            bound = schema[keyword]
            if not _is_bound(bound):
                raise _Unsupported(f"{keyword} {bound!r}")
            test = template.format(v=var, c=self._number(bound))
            steps += self._typed(kind, want, var, test)
        if "uniqueItems" in schema:
            unique = schema["uniqueItems"]
            if not isinstance(unique, bool):
                raise _Unsupported(f"uniqueItems {unique!r}")
            if unique:
                steps += self._typed(kind, "array", var, f"_all_unique({var})")
        return steps, kind

    def _object(
        self, schema: dict[str, Any], var: str, facts: _Facts, depth: int, expression: bool
    ) -> tuple[list[_Step], _Facts]:
        """``required``, ``properties``, ``additionalProperties`` and ``propertyNames``.

        Also returns what is known about ``var`` once these checks have passed.
        """
        if not any(keyword in schema for keyword in _OBJECT_KEYWORDS):
            return [], facts
        required = schema.get("required", [])
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        names = schema.get("propertyNames", True)
        if not isinstance(required, list) or not all(isinstance(k, str) for k in required):
            raise _Unsupported(f"required {required!r}")
        if not isinstance(properties, dict) or not all(map(_is_schema, properties.values())):
            raise _Unsupported(f"properties {properties!r}")
        if not _is_schema(extra) or not _is_schema(names):
            raise _Unsupported("additionalProperties or propertyNames")
        applies = _applies(facts.kind, "object")
        if applies is False:
            return [], facts
        steps: list[_Step] = []
        known = frozenset(properties)
        wanted = [name for name in dict.fromkeys(required) if name not in facts.present]
        if extra is False and known and known == frozenset(required):
            # The hot shape: closed and every member required, one set comparison.
            steps.append(f"{var}.keys() == {self._set(known)}")
        else:
            if extra is False:
                steps.append(f"{var}.keys() <= {self._set(known)}" if known else f"not {var}")
            if len(wanted) == 1:
                steps.append(f"{self._string(wanted[0])} in {var}")
            elif wanted:
                steps.append(f"{var}.keys() >= {self._set(frozenset(wanted))}")
        present = facts.present | frozenset(required)
        loaded = list(facts.loaded)
        for name, sub in properties.items():
            member_steps, entry = self._member(var, name, present, sub, facts, depth, expression)
            steps += member_steps
            # A variable assigned inside "if isinstance(var, dict)" may be unbound later.
            if entry is not None and applies:
                loaded.append(entry)
        if extra is not True and extra is not False:
            if expression:
                raise AssertionError("additionalProperties needs a loop")
            value = self._temporary()
            body = self._block(extra, value, _UNKNOWN, depth + 1)
            if body and known:
                member = self._temporary()
                steps.append(
                    [
                        f"for {member}, {value} in {var}.items():",
                        f"    if {member} not in {self._set(known)}:",
                        *_indent(body, 2),
                    ]
                )
            elif body:
                steps.append([f"for {value} in {var}.values():", *_indent(body)])
        if names is False:
            steps.append(f"not {var}")
        elif names is not True:
            if expression:
                raise AssertionError("propertyNames needs a loop")
            member = self._temporary()
            # Keys of a dict built in Python need not be strings: nothing is known.
            body = self._block(names, member, _UNKNOWN, depth + 1)
            if body:
                steps.append([f"for {member} in {var}:", *_indent(body)])
        facts = facts._replace(present=present, loaded=tuple(loaded))
        if applies or not steps:
            return steps, facts
        if expression:
            return [f"(not isinstance({var}, dict) or {_conjunction(steps)})"], facts
        return [[f"if isinstance({var}, dict):", *_indent(_statements(steps))]], facts

    def _member(
        self,
        var: str,
        name: str,
        present: frozenset[str],
        sub: Any,
        facts: _Facts,
        depth: int,
        expression: bool,
    ) -> tuple[list[_Step], tuple[str, str, str | None] | None]:
        """The checks of member ``name`` of object ``var``, skipped when it is absent.

        Also returns (member, variable, type) when the member's value is left in a
        variable that dominates the rest of the function.
        """
        earlier = facts.member(name)
        if earlier is not None:
            # Read and checked before by this function: test the variable again.
            value, kind = earlier
            if expression:
                test = self._expression(sub, value, _Facts(kind), depth + 1)
                return ([] if test == "True" else [test]), None
            body = self._block(sub, value, _Facts(kind), depth + 1)
            return ([body] if body else []), None
        value = self._temporary()
        if expression:
            test = self._expression(sub, value, _UNKNOWN, depth + 1)
            if test == "True":
                return [], None
            key = self._string(name)
            access = f"{var}[{key}]" if name in present else f"{var}.get({key}, _missing)"
            return [f"(({value} := {access}) is _missing or {test})"], None
        body, kind = self._typed_block(sub, value, _UNKNOWN, depth + 1)
        if not body:
            return [], None
        key = self._string(name)
        if name in present:
            return [[f"{value} = {var}[{key}]", *body]], (name, value, kind)
        lines = [f"{value} = {var}.get({key}, _missing)", f"if {value} is not _missing:"]
        return [[*lines, *_indent(body)]], None

    def _array(
        self, schema: dict[str, Any], var: str, kind: str | None, depth: int, expression: bool
    ) -> list[_Step]:
        """``items`` and ``contains``."""
        if "items" not in schema and "contains" not in schema:
            return []
        items = schema.get("items", True)
        if not _is_schema(items) or not _is_schema(schema.get("contains", True)):
            raise _Unsupported("items or contains")
        applies = _applies(kind, "array")
        if applies is False:
            return []
        steps: list[_Step] = []
        if items is False:
            steps.append(f"not {var}")
        elif items is not True:
            if expression:
                raise AssertionError("items needs a loop")
            value = self._temporary()
            body = self._block(items, value, _UNKNOWN, depth + 1)
            if body:
                steps.append([f"for {value} in {var}:", *_indent(body)])
        if "contains" in schema:
            contains = schema["contains"]
            if contains is True or contains is False:
                steps.append(f"len({var}) > 0" if contains else "False")
            else:
                if expression:
                    raise AssertionError("contains needs a loop")
                value = self._temporary()
                test = self._expression(contains, value, _UNKNOWN, depth + 1)
                loop = [f"for {value} in {var}:", f"    if {test}:", "        break"]
                steps.append([*loop, "else:", "    return False"])
        if applies or not steps:
            return steps
        if expression:
            return [f"(not isinstance({var}, list) or {_conjunction(steps)})"]
        return [[f"if isinstance({var}, list):", *_indent(_statements(steps))]]

    def _ref(
        self, ref: Any, var: str, facts: _Facts, depth: int, expression: bool
    ) -> tuple[list[_Step], str | None]:
        """A call to the definition's function; also the type of ``var`` after it."""
        name = self._definition(ref)
        target = self._defs[name]
        # A definition without references of its own (a digest, an identifier) is
        # written out where it is used: its test costs less than the call would.
        if self._is_leaf(name) and not (expression and _needs_loop(target)):
            if expression:
                return [self._expression(target, var, facts, depth + 1)], facts.kind
            body, kind = self._typed_block(target, var, facts, depth + 1)
            return [body], kind
        function = self._function(("def", name), "_d", target, _UNKNOWN)
        return [f"{function}({var})"], facts.kind

    def _logic(
        self, schema: dict[str, Any], var: str, facts: _Facts, depth: int, expression: bool
    ) -> list[_Step]:
        """``not``, ``anyOf``, ``oneOf``, ``allOf`` and ``if``/``then``/``else``."""
        steps: list[_Step] = []
        deeper = depth + 1
        if "not" in schema:
            steps.append(f"({_negate(self._expression(schema['not'], var, facts, deeper))})")
        for keyword in ("anyOf", "oneOf", "allOf"):
            if keyword in schema and not isinstance(schema[keyword], list):
                raise _Unsupported(f"{keyword} {schema[keyword]!r}")
        if "anyOf" in schema:
            tests = [self._expression(sub, var, facts, deeper) for sub in schema["anyOf"]]
            if not tests:
                steps.append("False")
            else:
                steps.append(tests[0] if len(tests) == 1 else "(" + " or ".join(tests) + ")")
        if "oneOf" in schema:
            tests = [self._expression(sub, var, facts, deeper) for sub in schema["oneOf"]]
            if len(tests) == 1:
                steps.append(tests[0])
            else:
                total = " + ".join(f"({test})" for test in tests) if tests else "0"
                steps.append(f"({total} == 1)")
        for sub in schema.get("allOf", []):
            if expression:
                steps.append(self._expression(sub, var, facts, deeper))
            else:
                steps.append(self._block(sub, var, facts, deeper))
        if "if" in schema:
            steps += self._conditional(schema, var, facts, deeper, expression)
        return steps

    def _conditional(
        self, schema: dict[str, Any], var: str, facts: _Facts, depth: int, expression: bool
    ) -> list[_Step]:
        condition = self._expression(schema["if"], var, facts, depth)
        then = schema.get("then", True)
        otherwise = schema.get("else", True)
        if not _is_schema(then) or not _is_schema(otherwise):
            raise _Unsupported("then or else")
        if expression:
            yes = self._expression(then, var, facts, depth)
            no = self._expression(otherwise, var, facts, depth)
            if yes == "True" and no == "True":
                return []
            if no == "True":
                return [f"({_negate(condition)} or {yes})"]
            if yes == "True":
                return [f"({condition} or {no})"]
            return [f"({yes} if {condition} else {no})"]
        yes_lines = self._block(then, var, facts, depth)
        no_lines = self._block(otherwise, var, facts, depth)
        if not no_lines:
            return [[f"if {condition}:", *_indent(yes_lines)]] if yes_lines else []
        if not yes_lines:
            return [[f"if {_negate(condition)}:", *_indent(no_lines)]]
        return [[f"if {condition}:", *_indent(yes_lines), "else:", *_indent(no_lines)]]


def generate_check(schema: Mapping[str, Any]) -> GeneratedCheck | None:
    """The source of ``schema``'s acceptance check, or None if it uses other constructs.

    The same schema always gives the same source. The check returns True only for a
    document valid under ``schema``; False means "ask the reference validator".
    """
    try:
        return _Generator(schema).generate(dict(schema))
    except (_Unsupported, RecursionError):
        return None


def _build(schema: Mapping[str, Any], label: str) -> Check | None:
    generated = generate_check(schema)
    if generated is None:
        return None
    try:
        return generated.build(label)
    except (SyntaxError, RecursionError):
        return None


def compile_schema(schema: Mapping[str, Any]) -> Check | None:
    """A fast acceptance predicate for ``schema``, or None if it uses other constructs.

    The predicate returns True only for a document valid under ``schema``; False means
    "ask the reference validator", which may still accept it.
    """
    return _build(schema, "(inline)")
