"""bundler.core._jcs: the native JCS serialiser against the reference path and rfc8785.

The native path must write exactly the bytes of ``canonical._reference_dumps`` (plain
Python, written from RFC 8785) and of the ``rfc8785`` package for every plain JSON
value, and must decline, by raising ``_jcs.Fallback``, everything else, leaving every
error message to the reference path.
"""

from __future__ import annotations

import collections
import decimal
import enum
import gc
import math
import random
import sys
import tracemalloc
from typing import Any

import numpy as np
import orjson
import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundler.core import _jcs, canonical
from bundler.core.errors import CanonicalJSONError

MAX_SAFE = 2**53 - 1


def test_native_module_is_built_and_used() -> None:
    # The build must compile the extension (this file's import of it fails otherwise):
    # a missing module would silently leave canonical.dumps on the slower orjson path.
    assert vars(canonical)["_jcs"] is _jcs
    assert _jcs.__file__ is not None and not _jcs.__file__.endswith(".py")
    assert _jcs.MAX_DEPTH == canonical.MAX_DEPTH == 64
    assert issubclass(_jcs.Fallback, Exception)
    assert not issubclass(_jcs.Fallback, CanonicalJSONError)


def same_bytes_everywhere(value: Any) -> bytes:
    """Assert the native, reference and public paths (and rfc8785) agree; return them."""
    expected = canonical._reference_dumps(value)
    assert _jcs.dumps(value) == expected
    assert canonical.dumps(value) == expected
    try:
        oracle = rfc8785.dumps(value)
    except rfc8785.CanonicalizationError:
        pass
    else:
        assert oracle == expected
    return expected


# --------------------------------------------------------------------------------------
# Differential: random documents

KEY_CHARS = st.one_of(
    st.characters(codec="utf-8"),
    # U+E000..U+FFFF against non-BMP characters: UTF-16 order differs from code points.
    st.characters(min_codepoint=0xE000, max_codepoint=0xFFFF),
    st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF),
    st.characters(min_codepoint=0, max_codepoint=0x20),
    st.sampled_from(['"', "\\", "/", "\x7f", "\u2028", "\u00e9", "\u00ff", "a"]),
)
TEXT = st.text(KEY_CHARS, max_size=10)
LONG_TEXT = st.text(KEY_CHARS, min_size=10, max_size=80)
BOUNDARY_FLOATS = [
    0.0,
    -0.0,
    5e-324,
    -5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    1e-7,
    1e-6,
    math.nextafter(1e-6, 0),
    math.nextafter(1e-6, 1),
    1e15,
    math.nextafter(1e15, 0),
    math.nextafter(1e15, math.inf),
    2.0**53,
    2.0**53 - 1,
    2.0**53 + 2,
    1e20,
    1e21,
    math.nextafter(1e21, 0),
    math.nextafter(1e21, math.inf),
    0.1,
    0.30000000000000004,
    123.456,
    -1.5e-7,
]
FLOATS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(BOUNDARY_FLOATS),
    st.integers(min_value=-MAX_SAFE, max_value=MAX_SAFE).map(float),
    # Short decimals, the values with a quick digit search in the native path.
    st.builds(
        lambda m, k: m / 10**k,
        st.integers(min_value=-(10**15), max_value=10**15),
        st.integers(min_value=0, max_value=22),
    ),
)
INTS = st.one_of(
    st.integers(min_value=-MAX_SAFE, max_value=MAX_SAFE),
    st.sampled_from([MAX_SAFE, -MAX_SAFE, 0, -1, 2**31, -(2**31), 2**32]),
)
SCALARS = st.one_of(st.none(), st.booleans(), INTS, FLOATS, TEXT, LONG_TEXT)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=8),
        st.dictionaries(TEXT, children, max_size=8),
        # More members than the native path sorts by insertion (16) or on its stack (32).
        st.dictionaries(TEXT, children, min_size=17, max_size=40),
    ),
    max_leaves=60,
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(DOCUMENTS)
def test_random_documents_agree(doc: Any) -> None:
    same_bytes_everywhere(doc)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(TEXT, st.integers(0, 9), min_size=2, max_size=24))
def test_key_order_is_utf16(obj: dict[str, int]) -> None:
    data = _jcs.dumps(obj)
    assert data == canonical._reference_dumps(obj)
    # Independently: the keys in the output appear sorted by their UTF-16 code units.
    written = list(orjson.loads(data))
    assert written == sorted(obj, key=lambda k: k.encode("utf-16-be"))


def test_utf16_order_across_string_kinds() -> None:
    # CPython stores these keys with 1, 2 and 4 bytes per character.
    keys = ["a", "\u00e9", "\u00ff", "\u0100", "\ud7ff", "\ue000", "\uffff", "\U00010000"]
    keys += ["\U0001f600", "\U0010ffff", "k\ue000", "k\U0001f600", "k", "ka", ""]
    obj = {key: index for index, key in enumerate(keys)}
    data = same_bytes_everywhere(obj)
    assert list(orjson.loads(data)) == sorted(keys, key=lambda k: k.encode("utf-16-be"))
    # The RFC 8785 (3.2.3) rule in one line: a non-BMP character sorts before U+E000.
    assert _jcs.dumps({"\ue000": 1, "\U0001f600": 2}) == (
        b'{"\xf0\x9f\x98\x80":2,"\xee\x80\x80":1}'
    )


def test_repeated_key_sets_in_any_order() -> None:
    # The native path remembers the order of key sets it has sorted; documents with
    # many key sets, the same keys in other insertion orders, and equal keys that are
    # distinct string objects must all come out sorted.
    rng = random.Random(8785)
    pool = [sys.intern(f"key-{i:02d}") for i in range(20)] + ["\ue000", "\U0001f600"]
    objects = []
    for _ in range(3000):
        keys = rng.sample(pool, rng.randint(0, 18))
        objects.append({key: rng.random() for key in keys})
    for index in range(0, 3000, 7):
        objects.append({"".join(list(key)): value for key, value in objects[index].items()})
    data = same_bytes_everywhere(objects)
    for written, obj in zip(orjson.loads(data), objects, strict=True):
        assert list(written) == sorted(obj, key=lambda k: k.encode("utf-16-be"))


# --------------------------------------------------------------------------------------
# Strings

SPECIALS = ['"', "\\", "\x00", "\x08", "\x1f", "\n", "\r", " ", "\x7f", "\u00e9", "\U0001f600"]


def test_escapes_at_every_position() -> None:
    # The native path copies 16 (or 8) bytes at a time and handles tails of every
    # length separately: put each special character at each position of short strings.
    values = []
    for length in range(0, 40):
        for position in range(length + 1):
            for special in SPECIALS:
                values.append("a" * position + special + "b" * (length - position))
                values.append(special * 2 + "a" * length + special)
    for value in values:
        assert _jcs.dumps(value) == canonical._reference_dumps(value), repr(value)
    same_bytes_everywhere(values)


def test_escape_rule_written_independently() -> None:
    # RFC 8785 3.2.2.2, spelled out here rather than taken from the code under test.
    short = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"}
    for code in range(0x20):
        escaped = short.get(code, f"\\u{code:04x}")
        assert _jcs.dumps(chr(code)) == f'"{escaped}"'.encode()
        assert _jcs.dumps({chr(code): 0}) == f'{{"{escaped}":0}}'.encode()
    assert _jcs.dumps('"\\') == b'"\\"\\\\"'
    for raw in ["/", "\x7f", "\u0080", "\u2028", "\u2029", "\ufeff", "\ue000", "\U0010ffff"]:
        assert _jcs.dumps(raw) == b'"' + raw.encode("utf-8") + b'"'


def test_long_strings_across_buffer_chunks() -> None:
    # Strings are written in chunks of 8192 characters; escapes that expand six-fold
    # and multi-byte characters straddle the chunk edges here.
    values = [
        "a" * 8191 + '"' + "b" * 9000,
        "\x00" * 20_000,
        ("x\u00e9\U0001f600\n" * 5000),
        "\u00e9" * 8193,
        "a" * 100_000,
    ]
    for value in values:
        assert _jcs.dumps(value) == canonical._reference_dumps(value)
    same_bytes_everywhere(values)
    assert _jcs.dumps("\x00" * 20_000) == b'"' + b"\\u0000" * 20_000 + b'"'


# --------------------------------------------------------------------------------------
# Numbers


def test_float_layout_examples() -> None:
    # ECMAScript Number::toString, from RFC 8785 Appendix B and the SPEC's examples.
    cases = {
        1.0: b"1",
        -0.0: b"0",
        1e20: b"100000000000000000000",
        1e21: b"1e+21",
        1e-6: b"0.000001",
        1e-7: b"1e-7",
        5e-324: b"5e-324",
        -1.7976931348623157e308: b"-1.7976931348623157e+308",
        9007199254740992.0: b"9007199254740992",
        295147905179352830000.0: b"295147905179352830000",
        9.999999999999997e22: b"9.999999999999997e+22",
        999999999999999700000.0: b"999999999999999700000",
        9.999999999999997e-7: b"9.999999999999997e-7",
        333333333.3333332: b"333333333.3333332",
        -0.0000033333333333333333: b"-0.0000033333333333333333",
        1424953923781206.2: b"1424953923781206.2",
        0.1: b"0.1",
        -1.5: b"-1.5",
        123.456: b"123.456",
        0.000015: b"0.000015",
        2.5e-7: b"2.5e-7",
    }
    for value, expected in cases.items():
        assert _jcs.dumps(value) == expected, value
        assert _jcs.dumps([value]) == b"[" + expected + b"]"


def _random_floats(count: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**64, size=count, dtype=np.uint64, endpoint=False)
    doubles = bits.view(np.float64)
    random_bits = doubles[np.isfinite(doubles)].tolist()
    # Short decimals of every length and magnitude, and their neighbours, which need
    # 16 or 17 digits: the quick digit search and its hand-over to the general one.
    mantissas = rng.integers(1, 10**15, size=count)
    digits = rng.integers(1, 16, size=count)
    scales = rng.integers(-12, 12, size=count)
    short = [float(f"{str(m)[:d]}e{s}") for m, d, s in zip(mantissas, digits, scales, strict=True)]
    near = [math.nextafter(x, math.inf) for x in short[::3]]
    near += [math.nextafter(x, 0) for x in short[1::3]]
    uniform = rng.uniform(-1e4, 1e4, count).tolist()
    rounded = [round(x, int(k)) for x, k in zip(uniform, digits, strict=True)]
    values = random_bits + short + near + rounded
    return [-x if i % 2 else x for i, x in enumerate(values)]


def test_floats_against_the_python_formatter() -> None:
    values = _random_floats(100_000, 53) + BOUNDARY_FLOATS
    tokens = _jcs.dumps(values)[1:-1].split(b",")
    assert len(tokens) == len(values)
    for value, token in zip(values, tokens, strict=True):
        assert token.decode() == canonical.format_number(value), value
    assert list(map(float, tokens)) == values
    subset = values[::10]
    assert _jcs.dumps(subset) == rfc8785.dumps(subset)


def test_short_decimals_every_power_of_ten() -> None:
    # d / 10**p for every digit count and scale where the quick search runs or ends.
    values = []
    for power in range(0, 23):
        for mantissa in (1, 7, 12, 999, 123456789, 10**14 + 1, 10**15 - 1, 10**16 + 3):
            values.append(mantissa / 10**power)
            values.append(mantissa * 10.0**-power)
    values += [1e15 - 0.5, 1e15 - 0.25, 999999999999999.9, 1e-6 + 1e-22, 1.0000000000000002]
    tokens = _jcs.dumps(values)[1:-1].split(b",")
    for value, token in zip(values, tokens, strict=True):
        assert token.decode() == canonical.format_number(value), value
    assert _jcs.dumps(values) == rfc8785.dumps(values)


def test_integers_and_literals() -> None:
    for value in [0, 1, -1, 10, -10, 2**31, -(2**31), 2**32, MAX_SAFE, -MAX_SAFE]:
        assert _jcs.dumps(value) == str(value).encode()
    assert _jcs.dumps([None, True, False]) == b"[null,true,false]"
    assert _jcs.dumps({"b": True, "a": None}) == b'{"a":null,"b":true}'
    assert _jcs.dumps([]) == b"[]"
    assert _jcs.dumps({}) == b"{}"
    assert _jcs.dumps("") == b'""'
    assert _jcs.dumps([[], {}, [{}]]) == b"[[],{},[{}]]"


# --------------------------------------------------------------------------------------
# Fallback: the native path declines, the reference path decides


class Colour(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Ratio(float):
    pass


class Text(str):
    pass


class Items(list[Any]):
    pass


class Mapping(dict[str, Any]):
    pass


def _cycle() -> list[Any]:
    cycle: list[Any] = [1]
    cycle.append(cycle)
    return cycle


def _dict_cycle() -> dict[str, Any]:
    cycle: dict[str, Any] = {"a": 1}
    cycle["self"] = cycle
    return cycle


def _nested(depth: int, mixed: bool = False) -> Any:
    value: Any = {} if mixed else []
    for level in range(depth - 1):
        value = {"k": value} if mixed and level % 2 else [value]
    return value


# Values the reference path writes: the native path declines, dumps still succeeds.
DECLINED_BUT_WRITTEN = [
    (1, 2.5),
    [1, (2, 3)],
    Colour.RED,
    {"c": Colour.RED},
    Level.HIGH,
    [Level.HIGH],
    Ratio(2.0),
    {"r": Ratio(0.5)},
    Text("x"),
    Items([1]),
    Mapping(a=1),
    collections.OrderedDict([("b", 1), ("a", 2)]),
    {"k": collections.OrderedDict()},
    {Colour.RED: 1},
    {Text("key"): 1},
]


@pytest.mark.parametrize("value", DECLINED_BUT_WRITTEN, ids=repr)
def test_subclasses_and_tuples_fall_back(value: Any) -> None:
    with pytest.raises(_jcs.Fallback):
        _jcs.dumps(value)
    written = canonical.dumps(value)
    assert written == canonical._reference_dumps(value)
    assert written == rfc8785.dumps(value)


# Values nothing writes: the native path declines, dumps raises the reference message.
DECLINED_AND_REJECTED = [
    (float("nan"), "not finite"),
    (float("inf"), "not finite"),
    ([1, float("-inf")], "not finite"),
    ({"a": {"b": float("nan")}}, "not finite"),
    (2**53, "outside -(2^53-1)..2^53-1"),
    (-(2**53), "outside -(2^53-1)..2^53-1"),
    ([2**63], "outside -(2^53-1)..2^53-1"),
    ({"n": -(2**63) - 1}, "outside -(2^53-1)..2^53-1"),
    (2**200, "outside -(2^53-1)..2^53-1"),
    ("a\ud800", "lone surrogate U+D800"),
    (["ok", "\udfff"], "lone surrogate U+DFFF"),
    ("\ud83d\ude00", "lone surrogate U+D83D"),
    ({"k\udc00": 1}, "lone surrogate U+DC00"),
    ({"\u00e9\ud800": 1}, "lone surrogate U+D800"),
    ({1: "a"}, "not a str"),
    ({"a": {None: 1}}, "not a str"),
    ({True: 1}, "not a str"),
    ({(1, 2): 1}, "not a str"),
    ({1.5: 1}, "not a str"),
    (b"bytes", "unsupported type bytes"),
    ({1, 2}, "unsupported type set"),
    ([object()], "unsupported type object"),
    ({"d": decimal.Decimal("1.5")}, "unsupported type Decimal"),
    ([orjson.Fragment(b"1")], "unsupported type Fragment"),
    (_nested(65), "nesting deeper than 64 levels"),
    (_nested(65, mixed=True), "nesting deeper than 64 levels"),
    ([_nested(64)], "nesting deeper than 64 levels"),
    (_cycle(), "nesting deeper than 64 levels"),
    (_dict_cycle(), "nesting deeper than 64 levels"),
    ([{"a": 1.5}] * 1000 + [float("nan")], "not finite"),
]


@pytest.mark.parametrize(("value", "rule"), DECLINED_AND_REJECTED, ids=[f"case{i}" for i in range(len(DECLINED_AND_REJECTED))])
def test_unwritable_values_fall_back(value: Any, rule: str) -> None:
    with pytest.raises(_jcs.Fallback):
        _jcs.dumps(value)
    with pytest.raises(CanonicalJSONError) as reference:
        canonical._reference_dumps(value)
    with pytest.raises(CanonicalJSONError) as public:
        canonical.dumps(value)
    assert public.value.message == reference.value.message
    assert rule in public.value.message


def test_bool_is_not_an_integer() -> None:
    # bool is an int subclass; JCS writes it as a literal, never as 1 or 0.
    assert _jcs.dumps([True, 1, False, 0]) == b"[true,1,false,0]"


def test_depth_limit() -> None:
    for mixed in (False, True):
        same_bytes_everywhere(_nested(64, mixed))
        same_bytes_everywhere([1.0, _nested(63, mixed)])
        with pytest.raises(_jcs.Fallback):
            _jcs.dumps(_nested(65, mixed))


def test_very_deep_nesting_does_not_crash() -> None:
    deep = _nested(100_000)
    with pytest.raises(_jcs.Fallback):
        _jcs.dumps(deep)
    with pytest.raises(CanonicalJSONError, match="nesting deeper than 64 levels"):
        canonical.dumps(deep)


# --------------------------------------------------------------------------------------
# The public functions use the native path, and cope without it


def test_dumps_and_loads_canonical_call_the_native_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []

    class Recording:
        Fallback = _jcs.Fallback

        @staticmethod
        def dumps(value: Any) -> bytes:
            calls.append(value)
            return _jcs.dumps(value)

    monkeypatch.setattr(canonical, "_jcs", Recording)
    value = {"b": [1.0, "x"], "a": None}
    assert canonical.dumps(value) == b'{"a":null,"b":[1,"x"]}'
    assert calls == [value]
    assert canonical.loads_canonical(b'{"a":null,"b":[1,"x"]}') == value
    assert calls[-1] == value and len(calls) == 2


def test_without_the_native_module(monkeypatch: pytest.MonkeyPatch) -> None:
    # A build without the extension still writes JCS, through the orjson path.
    value = {"\ue000": [1.0, 0.5, "\x00"], "\U0001f600": {"n": -0.0}, "t": (1,)}
    expected = canonical.dumps(value)
    monkeypatch.setattr(canonical, "_jcs", None)
    assert canonical.dumps(value) == expected
    assert canonical.loads_canonical(canonical.dumps([1.5, "a"])) == [1.5, "a"]
    with pytest.raises(CanonicalJSONError, match="not finite"):
        canonical.dumps([float("nan")])


def test_loads_canonical_still_rejects_non_canonical_bytes() -> None:
    for data in [b'{"b":1,"a":2}', b"[1.0]", b'{"\xee\x80\x80":2,"\xf0\x9f\x98\x80":1}']:
        with pytest.raises(CanonicalJSONError, match="not stored canonical"):
            canonical.loads_canonical(data, source="doc.json")


# --------------------------------------------------------------------------------------
# A large document


def _large_document(target_bytes: int) -> dict[str, Any]:
    rng = random.Random(2026)
    words = ["the", "score", "r\u00e9sum\u00e9", "\u65e5\u672c", "emoji \U0001f600", 'say "hi"']
    words += ["tab\there", "line\nbreak", "path\\to", "\ue000", "ok"]
    records: list[dict[str, Any]] = []
    size = 0
    index = 0
    while size < target_bytes:
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 80)))
        record = {
            "id": f"case-{index:08d}",
            "score": rng.choice([rng.random(), 0.0, 1.0, None, rng.randint(0, 1)]),
            "latency_ms": round(rng.uniform(0.5, 9000.0), 3),
            "passed": rng.random() < 0.7,
            "text": text,
            "tags": rng.sample(["math", "code", "qa", "\U0001f600", "\ue000"], 2),
            "nested": {"digest": f"sha256:{rng.getrandbits(256):064x}", "n": index},
            rng.choice(["\U00010000", "\uffff", "z"]): rng.uniform(-1e30, 1e30),
        }
        records.append(record)
        size += len(orjson.dumps(record))
        index += 1
    return {"schema": "large.v1", "records": records}


def test_large_document_matches_the_reference() -> None:
    doc = _large_document(20_000_000)
    native = _jcs.dumps(doc)
    assert len(native) > 20_000_000
    assert native == canonical._reference_dumps(doc)


# --------------------------------------------------------------------------------------
# Memory: nothing leaks on success or on fallback


def _traced_growth(function: Any, argument: Any, rounds: int) -> int:
    function(argument)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(rounds):
            function(argument)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def _declined(value: Any) -> None:
    try:
        _jcs.dumps(value)
    except _jcs.Fallback:
        return
    raise AssertionError("expected Fallback")


def test_no_leaks() -> None:
    mixed = {
        "a": [1, 2.5, 1e-7, 1e300, "x\u00e9\U0001f600\n", None, True],
        "b": {f"k{i}": {"v": i / 7} for i in range(40)},
        "\ue000": "y" * 100,
    }
    # Each round allocates and frees the result; 10k rounds leaking even one small
    # object each would grow by hundreds of kB.
    assert _traced_growth(_jcs.dumps, mixed, 10_000) < 20_000
    failing = [
        [mixed, float("nan")],
        {"k": mixed, "bad\ud800": 1},
        [mixed, 2**60],
        {"x": [mixed, (1,)]},
        _nested(70),
        {f"k{i}": i for i in range(40)} | {1: 2},
    ]
    for value in failing:
        assert _traced_growth(_declined, value, 2_000) < 20_000
    # Refcounts of what was written are left as they were.
    key, item = "k-refcount", [1.5]
    holder = {key: item}
    counts = (sys.getrefcount(key), sys.getrefcount(item), sys.getrefcount(holder))
    unsupported = object()
    for _ in range(1000):
        _jcs.dumps(holder)
        _declined([holder, unsupported])
    assert (sys.getrefcount(key), sys.getrefcount(item), sys.getrefcount(holder)) == counts


@pytest.mark.parametrize(
    ("data", "rule"),
    [
        (b'{"a":18446744073709551616}', "outside"),  # 2^64: orjson reads it as a float
        (b"[100000000000000000000]", "outside"),
        (b"[-18446744073709551617]", "outside"),
        (b'{"a":9007199254740992}', "outside"),
        (b"[" * 65 + b"]" * 65, "nesting"),
        (b'{"a":1,"a":1}', "duplicate"),
        (b'{"a":1.0}', "not stored canonical"),
    ],
)
@pytest.mark.parametrize("native", [True, False], ids=["native", "orjson"])
def test_loads_canonical_fast_path_refuses_what_the_reference_refuses(
    data: bytes, rule: str, native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not native:
        monkeypatch.setattr(canonical, "_jcs", None)
    with pytest.raises(CanonicalJSONError, match=rule):
        canonical.loads_canonical(data, source="doc.json")


@pytest.mark.parametrize("native", [True, False], ids=["native", "orjson"])
def test_loads_canonical_does_not_walk_the_parsed_value(
    native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    def walked(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the parsed value was walked")

    if not native:
        monkeypatch.setattr(canonical, "_jcs", None)
    monkeypatch.setattr(canonical, "_check_parsed", walked)
    data = b'{"a":[1,2.5,"x"],"b":{"c":null,"d":true},"e":"12345678901234567"}'
    assert canonical.loads_canonical(data) == orjson.loads(data)


def test_loads_canonical_with_long_digit_runs_still_accepts_canonical_text() -> None:
    data = b'{"id":"1234567890123456789012345","n":9007199254740991}'
    assert canonical.loads_canonical(data) == orjson.loads(data)
