"""bundler.core.digests: digest strings, JSON digests and the framed digest v1 (SPEC section 2).

Expected values are sha256 over byte strings written out by hand from the SPEC's
definitions, never output of the code under test.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from bundler.core import digests
from bundler.core.errors import CanonicalJSONError, DigestError, InputError

HEX = "0123456789abcdef" * 4
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------------------
# Digest strings


def test_constants_are_the_spec_strings() -> None:
    assert digests.PREFIX == "sha256:"
    assert digests.SCORER_TAG == "evalbook/scorer-version-sha256/v1"
    assert digests.CHECK_DEFINITION_TAG == "eval-banana/check-definition-sha256/v1"


@pytest.mark.parametrize("value", ["sha256:" + HEX, "sha256:" + EMPTY_SHA256, "sha256:" + "0" * 64])
def test_well_formed_digest(value: str) -> None:
    assert digests.is_digest(value)
    assert digests.parse_digest(value, source="bundle.json") == value[len("sha256:") :]


MALFORMED: list[Any] = [
    "sha256:" + HEX.upper(),  # uppercase hex
    "sha256:" + HEX[:-1] + "F",  # one uppercase digit
    "SHA256:" + HEX,  # uppercase algorithm
    "sha512:" + HEX + HEX,  # another algorithm
    "sha1:" + HEX[:40],
    "md5:" + HEX[:32],
    "sha256:" + HEX[:-1],  # 63 digits
    "sha256:" + HEX + "0",  # 65 digits
    "sha256:",
    HEX,  # no algorithm
    "sha256-" + HEX,
    "sha256::" + HEX[1:],
    " sha256:" + HEX,  # whitespace
    "sha256:" + HEX + " ",
    "sha256:" + HEX + "\n",
    "sha256: " + HEX[1:],
    "sha256:" + HEX[:32] + "\t" + HEX[33:],
    "sha256:" + HEX[:-1] + "g",  # not hex
    "sha256:" + HEX[:-1] + "\u0660",  # a non-ASCII digit
    "",
    None,
    42,
    ("sha256:" + HEX).encode(),  # bytes, not str
]


@pytest.mark.parametrize("value", MALFORMED)
def test_malformed_digest(value: Any) -> None:
    assert not digests.is_digest(value)
    with pytest.raises(DigestError) as caught:
        digests.parse_digest(value, source="data/bundle.json: report.digest")
    assert isinstance(caught.value, InputError)
    message = caught.value.message
    assert message.startswith("data/bundle.json: report.digest: malformed digest")
    assert "\n" not in message


def test_from_hex() -> None:
    assert digests.from_hex(HEX) == "sha256:" + HEX
    for bad in [HEX.upper(), HEX[:-1], HEX + "0", "sha256:" + HEX, " " + HEX[1:]]:
        with pytest.raises(DigestError, match="malformed hex digest"):
            digests.from_hex(bad)


def test_bytes_digest() -> None:
    assert digests.bytes_digest(b"") == "sha256:" + EMPTY_SHA256
    assert digests.bytes_digest(b"abc") == (
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


# --------------------------------------------------------------------------------------
# JSON digest: sha256 of the JCS bytes


@pytest.mark.parametrize(
    ("value", "jcs"),
    [
        ({"b": [1, 2.0, "\u00e9"], "a": None}, b'{"a":null,"b":[1,2,"\xc3\xa9"]}'),
        (
            {"z": {"y": True, "x": 1e21}, "\U0001f600": 0, "\ue000": -0.0},
            b'{"z":{"x":1e+21,"y":true},"\xf0\x9f\x98\x80":0,"\xee\x80\x80":0}',
        ),
        ([], b"[]"),
        ("line\nbreak\u0001", b'"line\\nbreak\\u0001"'),
        (1e-7, b"1e-7"),
        (0.000001, b"0.000001"),
        (100.0, b"100"),
    ],
)
def test_json_digest(value: Any, jcs: bytes) -> None:
    assert digests.json_digest(value) == sha256(jcs)


def test_json_digest_ignores_key_order() -> None:
    assert digests.json_digest({"a": 1, "b": 2}) == digests.json_digest({"b": 2, "a": 1})
    assert digests.json_digest({"a": 1, "b": 2}) == sha256(b'{"a":1,"b":2}')


def test_json_digest_rejects_what_jcs_cannot_represent() -> None:
    for value in [float("nan"), {"a": float("inf")}, 2**53, {1: "a"}, "\ud800"]:
        with pytest.raises(CanonicalJSONError):
            digests.json_digest(value)


# --------------------------------------------------------------------------------------
# Framed digest v1: sha256(TAG || 0x00 || C1 || C2 ...),
# Ci = u64be(len(name)) || name || u64be(len(content)) || content

SCORER_HEAD = b"evalbook/scorer-version-sha256/v1\x00"
DESCRIPTOR = b'{"entrypoint":"run.py","scorer_id":"exact","version":1}'  # 55 bytes

C_SCORER_JSON = b"\x00" * 7 + b"\x0b" + b"scorer.json" + b"\x00" * 7 + b"\x37" + DESCRIPTOR
C_RUN_PY = b"\x00" * 7 + b"\x0c" + b"files/run.py" + b"\x00" * 7 + b"\x09" + b"print(1)\n"
C_EMPTY = b"\x00" * 7 + b"\x0f" + b"files/empty.txt" + b"\x00" * 8
# "files/résumé.txt": 16 characters, 18 bytes of UTF-8.
C_NON_ASCII = (
    b"\x00" * 7
    + b"\x12"
    + b"files/r\xc3\xa9sum\xc3\xa9.txt"
    + b"\x00" * 7
    + b"\x03"
    + b"\xe2\x82\xac"
)
# 300 bytes of content: a length that needs two bytes of the u64.
C_LONG = b"\x00" * 7 + b"\x0a" + b"files/long" + b"\x00" * 6 + b"\x01\x2c" + b"x" * 300


def test_framed_digest_one_component() -> None:
    assert len(DESCRIPTOR) == 0x37
    expected = sha256(SCORER_HEAD + C_SCORER_JSON)
    assert digests.framed_digest(digests.SCORER_TAG, [("scorer.json", DESCRIPTOR)]) == expected


def test_framed_digest_two_components() -> None:
    expected = sha256(SCORER_HEAD + C_SCORER_JSON + C_RUN_PY)
    components = [("scorer.json", DESCRIPTOR), ("files/run.py", b"print(1)\n")]
    assert digests.framed_digest(digests.SCORER_TAG, components) == expected
    # Order matters: the framing binds each component to its position.
    assert digests.framed_digest(digests.SCORER_TAG, components[::-1]) == sha256(
        SCORER_HEAD + C_RUN_PY + C_SCORER_JSON
    )


def test_framed_digest_empty_content_and_non_ascii_name() -> None:
    expected = sha256(SCORER_HEAD + C_SCORER_JSON + C_EMPTY + C_NON_ASCII + C_LONG)
    components = [
        ("scorer.json", DESCRIPTOR),
        ("files/empty.txt", b""),
        ("files/r\u00e9sum\u00e9.txt", "\u20ac".encode()),
        ("files/long", b"x" * 300),
    ]
    assert digests.framed_digest(digests.SCORER_TAG, components) == expected


def test_framed_digest_no_components_and_other_tag() -> None:
    assert digests.framed_digest(digests.SCORER_TAG, []) == sha256(SCORER_HEAD)
    head = b"eval-banana/check-definition-sha256/v1\x00"
    assert digests.framed_digest(
        digests.CHECK_DEFINITION_TAG, [("files/empty.txt", b"")]
    ) == sha256(head + C_EMPTY)


def test_framing_is_unambiguous() -> None:
    # Moving bytes between name and content, or between components, changes the digest.
    tag = digests.SCORER_TAG
    base = digests.framed_digest(tag, [("ab", b"c")])
    assert base != digests.framed_digest(tag, [("a", b"bc")])
    assert digests.framed_digest(tag, [("a", b"b"), ("c", b"")]) != digests.framed_digest(
        tag, [("a", b""), ("bc", b"")]
    )


def test_framed_hasher_streaming() -> None:
    expected = sha256(SCORER_HEAD + C_SCORER_JSON + C_LONG + C_EMPTY + C_NON_ASCII)
    hasher = digests.FramedHasher(digests.SCORER_TAG)
    hasher.add("scorer.json", DESCRIPTOR)
    hasher.begin("files/long", 300)
    for chunk in (b"x" * 1, b"", b"x" * 99, b"x" * 200):
        hasher.update(chunk)
    hasher.begin("files/empty.txt", 0)
    hasher.begin("files/r\u00e9sum\u00e9.txt", 3)
    hasher.update(b"\xe2")
    hasher.update(b"\x82\xac")
    assert hasher.digest() == expected


def test_framed_hasher_misuse() -> None:
    hasher = digests.FramedHasher(digests.SCORER_TAG)
    hasher.begin("files/a", 4)
    hasher.update(b"ab")
    with pytest.raises(ValueError, match="previous framed component not finished"):
        hasher.begin("files/b", 1)
    with pytest.raises(ValueError, match="longer than declared"):
        hasher.update(b"abc")
    with pytest.raises(ValueError, match="shorter than declared"):
        hasher.digest()
    hasher.update(b"cd")
    assert hasher.digest() == sha256(
        SCORER_HEAD + b"\x00" * 7 + b"\x07" + b"files/a" + b"\x00" * 7 + b"\x04" + b"abcd"
    )

    fresh = digests.FramedHasher(digests.SCORER_TAG)
    with pytest.raises(ValueError, match="longer than declared"):
        fresh.update(b"x")
    with pytest.raises(UnicodeEncodeError):
        digests.FramedHasher("evalbook/t\u00e4g/v1")
