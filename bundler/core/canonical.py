"""Canonical JSON (RFC 8785, JCS): strict parsing and canonical serialisation.

Public API:

- ``loads(data, *, source)``: parse UTF-8 JSON bytes strictly, rejecting everything
  SPEC section 2 rejects; raises CanonicalJSONError naming ``source`` and the rule.
- ``dumps(value)``: the JCS bytes of a JSON value; raises CanonicalJSONError.
- ``loads_canonical(data, *, source)``: parse and require ``data == dumps(value)``.
- ``value_bound(data)``: an upper bound on the values of a document, before parsing it
  (``loads(..., max_values=MAX_VALUES)`` refuses a document over the cap).
- ``format_number(value)``: the JCS (ECMAScript) text of one finite float.

Nesting depth counts arrays and objects: a scalar has depth 0, ``[]`` depth 1,
``{"a": [1]}`` depth 2. Depth 64 (``MAX_DEPTH``) is allowed, depth 65 is rejected, by
both ``loads`` and ``dumps``.

``dumps`` accepts ``dict`` (string keys), ``list``, ``tuple``, ``str``, ``int``,
``float``, ``bool`` and ``None``, and subclasses of those types (so an enum that
mixes in ``str`` or ``int`` is written as its value). Anything else is rejected.

Serialising has three implementations with one contract, parsing two. The reference
path is plain Python and says exactly which rule a value or document breaks. The
native path (the C extension ``bundler.core._jcs``) writes values built of the exact JSON
types and raises its ``Fallback`` for anything else. The orjson path lets orjson do
the work wherever orjson's output already is JCS; it serves when the native path
declines or is not built. Each fast path hands the input on whenever it meets anything
it is not sure about, so every rejection and every unusual value goes through the
reference path.

Note the one asymmetry that JCS itself creates: ``dumps`` writes an integral float in
[2^53, 1e21) as a plain integer (``1e20`` -> ``100000000000000000000``), which ``loads``
rejects as an integer outside the safe range. Such floats cannot round-trip.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, NoReturn

import orjson

from bundler.core import digitruns
from bundler.core.errors import CanonicalJSONError

try:
    from bundler.core import _jcs
except ImportError:  # pragma: no cover - the package build compiles it
    _jcs = None  # type: ignore[assignment]

MAX_DEPTH = 64
MAX_SAFE_INTEGER = 2**53 - 1
# The values (see ``value_bound``) an untrusted JSON document may hold, and all the kept
# documents of one bundle together (bag_reader): parsed, two million values are about
# 100 MB of Python objects, a third of the 300 MB budget (SPEC 5, Resources).
MAX_VALUES = 2_000_000

_BOM = b"\xef\xbb\xbf"
_OPT = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER
_NONE_TYPE = type(None)

# orjson writes a finite float in plain decimal notation exactly when
# 1e-5 <= |x| < 1e16, appending ".0" to integral values; that plain form is also
# ECMAScript's as long as the value is not integral. Floats outside that class are
# written through orjson.Fragment with our own formatter. The bound is widened to
# infinity (every float goes through the formatter) if the installed orjson does
# not behave as checked at import time.
_PLAIN_FLOAT_MIN = 1e-5
# Whether format_number takes its digits from orjson (fast) or repr; checked at import.
_ORJSON_DIGITS = True

# UTF-8 lead bytes of U+E000..U+FFFF and of U+10000.. (four-byte sequences). Code-point
# order (orjson's) and UTF-16 order (JCS's) differ only between such characters.
_HIGH_BMP_LEADS = (b"\xee", b"\xef")
_NON_BMP_LEAD_RE = re.compile(b"[\xf0-\xf4]")

_ESCAPE_RE = re.compile('[\\x00-\\x1f"\\\\]')
_SHORT_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_ESCAPES = {chr(c): _SHORT_ESCAPES.get(chr(c), f"\\u{c:04x}") for c in range(0x20)}
_ESCAPES['"'] = '\\"'
_ESCAPES["\\"] = "\\\\"

_ESCAPED_SURROGATE_RE = re.compile(r"\\u[dD][89a-fA-F]")
_ESCAPED_COLON = (b"\\u003a", b"\\u003A")


def check_readable(data: bytes, *, source: str) -> None:
    """Raise CanonicalJSONError (naming ``source``) when ``loads_canonical`` would refuse
    what ``dumps`` wrote: a float of magnitude 2^53 to 1e21 (1e19), which JCS spells as an
    integer past the safe range, so of sixteen digits or more (``digitruns``)."""
    if digitruns.integer_run(data, digitruns.SIXTEEN_ZEROS):
        loads_canonical(data, source=source)


class _Fallback(Exception):
    """The fast path cannot vouch for this input; the reference path decides."""


class _NoNativeFallback(Exception):
    """Stands in for ``_jcs.Fallback`` when the extension is missing; never raised."""


_NativeFallback: type[Exception] = _jcs.Fallback if _jcs is not None else _NoNativeFallback


class _Reject(Exception):
    """A rule broken while parsing; turned into CanonicalJSONError with the source."""


# --------------------------------------------------------------------------------------
# Numbers


def format_number(value: float) -> str:
    """ECMAScript ``Number.prototype.toString`` of a finite float (RFC 8785 3.2.2.3).

    Raises ValueError for NaN and infinities, which have no JSON form.
    """
    if value - value != 0:
        raise ValueError(f"{value!r} has no JSON form")
    return _number_bytes(value).decode("ascii")


def _number_bytes(value: float) -> bytes:
    # Both orjson and repr give the shortest digit string that round-trips, which is
    # ECMAScript's choice of digits; only the layout differs. orjson is several times
    # faster than repr on long digit strings; repr is the fallback should the installed
    # orjson fail the import-time check.
    text = orjson.dumps(value) if _ORJSON_DIGITS else repr(value).encode("ascii")
    return _ecmascript_layout(text)


def _ecmascript_layout(text: bytes) -> bytes:
    """Re-lay a shortest round-trip float text (repr or orjson style) as ECMAScript does.

    Both styles write plain decimals inside ECMAScript's plain range 1e-6 <= |x| < 1e21,
    adding ".0" to integers, and scientific ``d.ddde[+-]x`` elsewhere.
    """
    exponent_at = text.find(b"e")
    if exponent_at < 0:
        if text.endswith(b".0"):
            text = text[:-2]
            return b"0" if text == b"-0" else text
        return text
    exponent = int(text[exponent_at + 1 :])
    if exponent >= 21 or exponent <= -7:
        return b"%se%s%d" % (text[:exponent_at], b"+" if exponent > 0 else b"-", abs(exponent))
    sign = b"-" if text.startswith(b"-") else b""
    whole, _, fraction = text[len(sign) : exponent_at].partition(b".")
    digits = (whole + fraction).rstrip(b"0")
    # value == 0.digits * 10**point, as in ECMA-262 Number::toString
    point = exponent + len(whole)
    if len(digits) <= point:
        return sign + digits + b"0" * (point - len(digits))
    if point > 0:
        return sign + digits[:point] + b"." + digits[point:]
    return sign + b"0." + b"0" * -point + digits


# --------------------------------------------------------------------------------------
# Serialisation: reference path


def _path_text(path: list[str | int]) -> str:
    parts = [f"[{p}]" if isinstance(p, int) else f"[{json.dumps(p)}]" for p in path]
    if len(parts) > 12:
        parts = [*parts[:6], "...", *parts[-4:]]
    return "$" + "".join(parts)


def _dump_error(path: list[str | int], rule: str) -> NoReturn:
    raise CanonicalJSONError(f"cannot write canonical JSON: {rule} at {_path_text(path)}")


def _utf16_key(item: tuple[str, Any]) -> bytes:
    return item[0].encode("utf-16-be")


def _check_text(text: str, path: list[str | int], what: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = ord(text[exc.start])
        _dump_error(path, f"{what} holds a lone surrogate U+{bad:04X}")


def _escape(text: str) -> str:
    return '"' + _ESCAPE_RE.sub(lambda m: _ESCAPES[m.group(0)], text) + '"'


def _reference_encode(value: Any, out: list[str], path: list[str | int], depth: int) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        text = str.__str__(value)
        _check_text(text, path, "string")
        out.append(_escape(text))
    elif isinstance(value, int):
        number = int.__int__(value)
        if not -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER:
            _dump_error(path, f"integer {number} is outside -(2^53-1)..2^53-1")
        out.append(str(number))
    elif isinstance(value, float):
        real = float.__float__(value)
        if real - real != 0:
            _dump_error(path, f"number {real!r} is not finite")
        out.append(format_number(real))
    elif isinstance(value, (list, tuple)):
        if depth >= MAX_DEPTH:
            _dump_error(path, f"nesting deeper than {MAX_DEPTH} levels")
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            path.append(index)
            _reference_encode(item, out, path, depth + 1)
            path.pop()
        out.append("]")
    elif isinstance(value, dict):
        if depth >= MAX_DEPTH:
            _dump_error(path, f"nesting deeper than {MAX_DEPTH} levels")
        items: list[tuple[str, Any]] = []
        for key, item in value.items():
            if not isinstance(key, str):
                _dump_error(path, f"object key {key!r} of type {type(key).__name__} is not a str")
            key = str.__str__(key)
            path.append(key)
            _check_text(key, path, "object key")
            path.pop()
            items.append((key, item))
        items.sort(key=_utf16_key)
        out.append("{")
        for index, (key, item) in enumerate(items):
            if index:
                out.append(",")
            out.append(_escape(key))
            out.append(":")
            path.append(key)
            _reference_encode(item, out, path, depth + 1)
            path.pop()
        out.append("}")
    else:
        _dump_error(path, f"unsupported type {type(value).__name__}")


def _reference_dumps(value: Any) -> bytes:
    out: list[str] = []
    _reference_encode(value, out, [], 0)
    return "".join(out).encode("utf-8")


# --------------------------------------------------------------------------------------
# Serialisation: fast path
#
# A first walk checks depth and types, rejects non-finite floats, and records in ``dirty``
# the id of every container that holds, at any depth, a float orjson would write
# differently from JCS. If nothing is dirty, orjson's output is the answer. Otherwise
# only the dirty containers are copied, with those floats replaced by Fragments holding
# their JCS text. The walk does not read keys: only when the output holds both
# U+E000..U+FFFF and non-BMP characters does a second walk look for objects whose UTF-16
# key order differs from orjson's code-point order; those become Fragments too.


def _scan_values(values: Iterable[Any], owner: Any, depth: int, dirty: set[int]) -> bool:
    """Check the values of one container; mark it (by id) when it holds floats JCS
    formats differently from orjson, or containers that do. Raises _Fallback for
    anything the reference path must judge (NaN, infinities, depth, other types)."""
    # Kept lean on purpose: it visits every value of the document.
    found = False
    plain_min = _PLAIN_FLOAT_MIN
    for item in values:
        kind = type(item)
        if kind is str:
            continue
        if kind is dict:
            if depth >= MAX_DEPTH:
                raise _Fallback
            if _scan_values(item.values(), item, depth + 1, dirty):
                found = True
        elif kind is list:
            if depth >= MAX_DEPTH:
                raise _Fallback
            if _scan_values(item, item, depth + 1, dirty):
                found = True
        elif kind is int or kind is _NONE_TYPE or kind is bool:
            continue
        elif kind is float:
            if item.is_integer() or -plain_min < item < plain_min or item - item != 0:
                if item - item != 0:
                    raise _Fallback
                found = True
        else:
            raise _Fallback
    if found:
        dirty.add(id(owner))
    return found


def _needs_utf16_order(obj: dict[Any, Any]) -> bool:
    keys = [key for key in obj if type(key) is str]
    if "".join(keys).isascii():
        return False
    return sorted(keys) != sorted(keys, key=lambda k: k.encode("utf-16-be", "surrogatepass"))


def _scan_keys(value: Any, dirty: set[int], reorder: set[int]) -> bool:
    """Mark objects whose UTF-16 key order differs from code-point order, and their parents."""
    found = False
    if type(value) is dict:
        for item in value.values():
            if (type(item) is dict or type(item) is list) and _scan_keys(item, dirty, reorder):
                found = True
        if _needs_utf16_order(value):
            reorder.add(id(value))
            found = True
    elif type(value) is list:
        for item in value:
            if (type(item) is dict or type(item) is list) and _scan_keys(item, dirty, reorder):
                found = True
    if found:
        dirty.add(id(value))
    return found


def _utf16_object(obj: dict[Any, Any]) -> orjson.Fragment:
    if any(type(key) is not str for key in obj):
        raise _Fallback
    items = sorted(obj.items(), key=lambda kv: kv[0].encode("utf-16-be", "surrogatepass"))
    parts = [orjson.dumps(key) + b":" + orjson.dumps(item, option=_OPT) for key, item in items]
    return orjson.Fragment(b"{" + b",".join(parts) + b"}")


def _fragment(value: float) -> orjson.Fragment:
    # The same few values (0.0, 1.0, ...) tend to recur; keep their Fragments.
    fragment = _FRAGMENT_CACHE.get(value)
    if fragment is None:
        fragment = orjson.Fragment(_number_bytes(value))
        if len(_FRAGMENT_CACHE) < 4096:
            _FRAGMENT_CACHE[value] = fragment
    return fragment


_FRAGMENT_CACHE: dict[float, orjson.Fragment] = {}


def _rebuild(value: Any, dirty: set[int], reorder: set[int]) -> Any:
    """Copy the dirty containers of ``value`` so that orjson writes them as JCS.

    Runs after the scan, so every float here is finite.
    """
    plain_min = _PLAIN_FLOAT_MIN
    if type(value) is dict:
        obj = dict(value)
        for key, item in value.items():
            kind = type(item)
            if kind is float:
                if item.is_integer() or -plain_min < item < plain_min:
                    obj[key] = _fragment(item)
            elif (kind is dict or kind is list) and id(item) in dirty:
                obj[key] = _rebuild(item, dirty, reorder)
        return _utf16_object(obj) if id(value) in reorder else obj
    if type(value) is list:
        arr = list(value)
        for index, item in enumerate(value):
            kind = type(item)
            if kind is float:
                if item.is_integer() or -plain_min < item < plain_min:
                    arr[index] = _fragment(item)
            elif (kind is dict or kind is list) and id(item) in dirty:
                arr[index] = _rebuild(item, dirty, reorder)
        return arr
    return value


def _fast_dumps(value: Any) -> bytes:
    dirty: set[int] = set()
    kind = type(value)
    if kind is dict:
        _scan_values(value.values(), value, 1, dirty)
    elif kind is list:
        _scan_values(value, value, 1, dirty)
    elif kind is float:
        if value - value != 0:
            raise _Fallback
        return _number_bytes(value)
    elif not (kind is str or kind is int or kind is bool or kind is _NONE_TYPE):
        raise _Fallback
    out = orjson.dumps(_rebuild(value, dirty, set()) if dirty else value, option=_OPT)
    if (_HIGH_BMP_LEADS[0] in out or _HIGH_BMP_LEADS[1] in out) and _NON_BMP_LEAD_RE.search(out):
        reorder: set[int] = set()
        if _scan_keys(value, dirty, reorder):
            out = orjson.dumps(_rebuild(value, dirty, reorder), option=_OPT)
    return out


def dumps(value: Any) -> bytes:
    """Return the RFC 8785 canonical JSON bytes of ``value``.

    Raises CanonicalJSONError, naming the path of the offending member (``$["a"][0]``),
    for NaN or infinite floats, integers outside -(2^53-1)..2^53-1, strings or keys
    with lone surrogates, non-string keys, unsupported types and nesting deeper than
    ``MAX_DEPTH``.
    """
    try:
        return _quick_dumps(value)
    except _Fallback:
        return _reference_dumps(value)


def _quick_dumps(value: Any) -> bytes:
    """The native path, then the orjson path; raises _Fallback when neither vouches."""
    if _jcs is not None:
        try:
            return _jcs.dumps(value)
        except _NativeFallback:
            pass
    if not _FAST_DUMPS:
        raise _Fallback
    try:
        return _fast_dumps(value)
    except orjson.JSONEncodeError as exc:
        raise _Fallback from exc


# --------------------------------------------------------------------------------------
# Parsing: reference path


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Reject(f"duplicate object key {_shorten(key)!r}")
            seen.add(key)
    return obj


def _shorten(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def _int_hook(literal: str) -> int:
    # 2^53-1 has 16 digits: longer literals are out of range, and are not converted
    # (int() of a huge literal is slow and limited).
    if len(literal.lstrip("-")) > 16 or abs(int(literal)) > MAX_SAFE_INTEGER:
        raise _Reject(f"integer {_shorten(literal)} is outside -(2^53-1)..2^53-1")
    return int(literal)


def _float_hook(literal: str) -> float:
    value = float(literal)
    if value - value != 0:
        raise _Reject(f"number {_shorten(literal)} overflows to infinity")
    return value


def _constant_hook(name: str) -> NoReturn:
    raise _Reject(f"{name} is not a JSON number (NaN and Infinity are not allowed)")


def _lone_surrogate(text: str) -> int | None:
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return ord(text[exc.start])
    return None


def _check_tree(value: Any, depth: int, surrogates: bool) -> None:
    """Depth and (when the text may hold escaped surrogates) lone surrogates."""
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            raise _Reject(f"nesting deeper than {MAX_DEPTH} levels")
        for key, item in value.items():
            if surrogates:
                bad = _lone_surrogate(key)
                if bad is not None:
                    raise _Reject(
                        f"object key {_shorten(key)!r} holds a lone surrogate U+{bad:04X}"
                    )
            _check_tree(item, depth + 1, surrogates)
    elif isinstance(value, list):
        if depth >= MAX_DEPTH:
            raise _Reject(f"nesting deeper than {MAX_DEPTH} levels")
        for item in value:
            _check_tree(item, depth + 1, surrogates)
    elif surrogates and isinstance(value, str):
        bad = _lone_surrogate(value)
        if bad is not None:
            raise _Reject(f"string {_shorten(value)!r} holds a lone surrogate U+{bad:04X}")


def _reference_loads(data: bytes, source: str) -> Any:
    if data.startswith(_BOM):
        raise CanonicalJSONError(f"{source}: starts with a UTF-8 byte order mark (not allowed)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CanonicalJSONError(
            f"{source}: not valid UTF-8 at byte {exc.start} ({exc.reason})"
        ) from exc
    try:
        decoder = json.JSONDecoder(
            object_pairs_hook=_pairs_hook,
            parse_int=_int_hook,
            parse_float=_float_hook,
            parse_constant=_constant_hook,
            strict=True,
        )
        value = decoder.decode(text)
        _check_tree(value, 0, _ESCAPED_SURROGATE_RE.search(text) is not None)
    except _Reject as exc:
        raise CanonicalJSONError(f"{source}: {exc}") from exc
    except RecursionError as exc:
        raise CanonicalJSONError(f"{source}: nesting deeper than {MAX_DEPTH} levels") from exc
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            raise CanonicalJSONError(
                f"{source}: trailing data after the JSON value at line {exc.lineno} "
                f"column {exc.colno}"
            ) from exc
        raise CanonicalJSONError(
            f"{source}: malformed JSON ({exc.msg}) at line {exc.lineno} column {exc.colno}"
        ) from exc
    return value


# --------------------------------------------------------------------------------------
# Parsing: fast path
#
# orjson.loads already rejects invalid UTF-8, a BOM, NaN/Infinity, lone surrogates,
# numbers that overflow, malformed JSON and trailing data. What it lets through is
# checked here: integers outside the safe range, nesting depth, and duplicate keys,
# which orjson silently merges. An integer literal of 2^64 or more reaches us as an
# integral float, indistinguishable from a float literal, so any float of magnitude
# near 2^63 or more sends the document to the reference parser.

_AMBIGUOUS_FLOAT = 9.2e18


def _check_parsed_dict(obj: dict[str, Any], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise _Fallback
    for item in obj.values():
        kind = type(item)
        if kind is str:
            continue
        if kind is dict:
            _check_parsed_dict(item, depth + 1)
        elif kind is list:
            _check_parsed_list(item, depth + 1)
        elif kind is int:
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                raise _Fallback
        elif kind is float and (item <= -_AMBIGUOUS_FLOAT or item >= _AMBIGUOUS_FLOAT):
            raise _Fallback


def _check_parsed_list(arr: list[Any], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise _Fallback
    for item in arr:
        kind = type(item)
        if kind is str:
            continue
        if kind is dict:
            _check_parsed_dict(item, depth + 1)
        elif kind is list:
            _check_parsed_list(item, depth + 1)
        elif kind is int:
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                raise _Fallback
        elif kind is float and (item <= -_AMBIGUOUS_FLOAT or item >= _AMBIGUOUS_FLOAT):
            raise _Fallback


def _check_parsed(value: Any) -> None:
    kind = type(value)
    if kind is dict:
        _check_parsed_dict(value, 1)
    elif kind is list:
        _check_parsed_list(value, 1)
    elif kind is int:
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise _Fallback
    elif kind is float and (value <= -_AMBIGUOUS_FLOAT or value >= _AMBIGUOUS_FLOAT):
        raise _Fallback


def _no_duplicate_keys(data: bytes, value: Any, written: bytes | None = None) -> bool:
    """True when orjson merged no duplicate keys parsing ``data`` into ``value``
    (``written``: ``value`` re-serialised by orjson or ``_jcs``, if at hand). A member has
    one structural colon; other colons sit in strings, one raw colon each without
    ``\\u003a`` escapes, and both writers write colons raw: equal counts, no member lost."""
    if _ESCAPED_COLON[0] in data or _ESCAPED_COLON[1] in data:
        return False
    if written is None:
        written = orjson.dumps(value)
    return data.count(b":") == written.count(b":")


def _checked_natively(data: bytes, value: Any) -> bytes | None:
    """``_check_parsed``'s checks in C, giving the JCS bytes of ``value``; None when the
    writer is missing or 19 digits could begin a number (only the walk tells an integer
    literal orjson read as a float from a float literal). Without such a run a float of
    9.2e18 or more had an exponent, a float literal the reference path reads alike."""
    if _jcs is None or digitruns.has_long_integer_digits(data):
        return None
    try:
        return _jcs.dumps(value)
    except _NativeFallback as exc:
        raise _Fallback from exc


def _fast_parse(data: bytes, *, duplicates: bool, walk: bool = True) -> Any:
    """orjson's parse, checked for what orjson lets through; ``walk=False`` leaves the
    value unchecked, for a caller that re-serialises it through a writer that refuses
    the same things (see ``loads_canonical``)."""
    if data.startswith(_BOM):
        raise _Fallback
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise _Fallback from exc
    written = None
    if walk:
        written = _checked_natively(data, value)
        if written is None:
            _check_parsed(value)
    if duplicates and not _no_duplicate_keys(data, value, written):
        raise _Fallback
    return value


def value_bound(data: bytes) -> int:
    """An upper bound on the values and keys of the JSON ``data``, without parsing it.

    Every value but the first follows a comma, a colon or an opening bracket, and every
    key a comma or an opening brace; characters inside strings count too, so this never
    undercounts. It is at most ``len(data) + 1``.
    """
    return data.count(b",") + data.count(b":") + data.count(b"[") + data.count(b"{") + 1


def _check_values(data: bytes, source: str, max_values: int | None) -> None:
    # The parse of a small-valued document costs far more than its bytes (a float is
    # 32 bytes of Python, ``0,`` two bytes of JSON); the bound costs four C-speed scans
    # and is skipped when the size alone keeps it under the cap.
    if max_values is not None and len(data) >= max_values and value_bound(data) > max_values:
        raise CanonicalJSONError(
            f"{source}: more than {max_values} JSON values (parse cost cap; refused before parsing)"
        )


def loads(data: bytes, *, source: str = "<input>", max_values: int | None = None) -> Any:
    """Parse UTF-8 JSON bytes strictly into dict/list/str/int/float/bool/None.

    Raises CanonicalJSONError, with a one-line message naming ``source`` and the rule,
    for invalid UTF-8, a UTF-8 BOM, NaN/Infinity literals, integers outside
    -(2^53-1)..2^53-1, numbers that overflow to infinity, lone surrogates, duplicate
    object keys (also when spelled with escapes), nesting deeper than ``MAX_DEPTH``,
    malformed JSON and trailing data; with ``max_values``, before parsing, for a
    document whose ``value_bound`` exceeds it (pass ``MAX_VALUES`` for untrusted input).
    """
    data = bytes(data)
    _check_values(data, source, max_values)
    try:
        return _fast_parse(data, duplicates=True)
    except _Fallback:
        return _reference_loads(data, source)


def loads_canonical(data: bytes, *, source: str = "<input>", max_values: int | None = None) -> Any:
    """Parse like ``loads`` and require the bytes to be stored canonical.

    Raises CanonicalJSONError for everything ``loads`` rejects (``max_values``
    included), and with a message saying "not stored canonical" when
    ``data != dumps(loads(data))``.
    """
    data = bytes(data)
    _check_values(data, source, max_values)
    # Both fast writers refuse integers outside the safe range and nesting deeper than
    # MAX_DEPTH, so bytes equal to their output need no walk of the parsed value for
    # those. The one case they cannot see, an integer literal of 2^64 or more that
    # orjson reads as a float, would be a run of at least 20 digits in the bytes.
    walk = digitruns.has_long_digits(data)
    try:
        # Duplicate keys need no separate check here: bytes equal to JCS output of the
        # parsed value cannot hold duplicates.
        value = _fast_parse(data, duplicates=False, walk=walk)
    except _Fallback:
        value = None
    else:
        try:
            if _quick_dumps(value) == data:
                return value
        except _Fallback:
            pass
    value = _reference_loads(data, source)
    canonical = dumps(value)
    if canonical != data:
        raise CanonicalJSONError(
            f"{source}: not stored canonical (bytes differ from the JCS form at byte "
            f"{_first_difference(data, canonical)})"
        )
    return value


def _first_difference(left: bytes, right: bytes) -> int:
    end = min(len(left), len(right))
    start = 0
    # Skip equal blocks at C speed; documents can be tens of MB.
    while start < end and left[start : start + 65536] == right[start : start + 65536]:
        start += 65536
    for index in range(start, min(start + 65536, end)):
        if left[index] != right[index]:
            return index
    return end


# --------------------------------------------------------------------------------------
# Import-time check that the installed orjson still writes what the fast path assumes.


_FLOAT_PROBES = [
    0.1,
    0.5,
    -2.75,
    1e-5,
    1.5e-5,
    0.30000000000000004,
    123.456,
    9007199254740.5,
    1234567890123456.8,
    4503599627370495.5,
    -0.000123,
    333333333.3333333,
    0.0,
    -0.0,
    1.0,
    -17.0,
    1e-7,
    1.5e-7,
    9.5e-6,
    1e16,
    1.25e20,
    1e21,
    1e23,
    5e-324,
    -1.7976931348623157e308,
    2.2250738585072014e-308,
    1.2345678901234567e-200,
]


def _orjson_digits_agree() -> bool:
    return all(
        _ecmascript_layout(orjson.dumps(p)) == _ecmascript_layout(repr(p).encode("ascii"))
        for p in _FLOAT_PROBES
    )


def _orjson_plain_floats_agree() -> bool:
    plain = [p for p in _FLOAT_PROBES if not p.is_integer() and abs(p) >= _PLAIN_FLOAT_MIN]
    return all(orjson.dumps(p) == format_number(p).encode("ascii") for p in plain)


def _orjson_strings_agree() -> bool:
    sample = "".join(map(chr, range(0x20))) + '"\\/\x7f\u2028\u00e9\ue000\U0001f600'
    keys = {"b": 1, "a": 2, "\u00e9": 3, "\U0001f600": 4, "\ue000": 5, "": 6}
    try:
        ok = orjson.dumps(sample) == _reference_dumps(sample)
        ok = ok and orjson.dumps(keys, option=_OPT) == (
            b'{"":6,"a":2,"b":1,"\xc3\xa9":3,"\xee\x80\x80":5,"\xf0\x9f\x98\x80":4}'
        )
        orjson.dumps(MAX_SAFE_INTEGER + 1, option=_OPT)
    except orjson.JSONEncodeError:
        return ok
    return False


_ORJSON_DIGITS = _orjson_digits_agree()
_FAST_DUMPS = _orjson_strings_agree()
if not _orjson_plain_floats_agree():
    _PLAIN_FLOAT_MIN = float("inf")
