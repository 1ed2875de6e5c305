"""Searches for runs of digits in JSON bytes, at C speed (``bytes.translate`` and ``in``).

The strict reader (``canonical``) uses them to decide, without parsing, whether a
document can hold a number its fast paths cannot vouch for.
"""

from __future__ import annotations

# Nineteen digits in a row: what an integer literal too large for orjson's integers
# (2^64 and more, twenty digits) would contain. Found by mapping every ASCII digit to
# "0" and every other byte to "x", then searching for nineteen "0"s: the same answer as
# the regular expression [0-9]{19}, which tries every position and cost more than the
# rest of a case line's parse.
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= i <= 0x39 else 0x78 for i in range(256))
_NINETEEN_ZEROS = b"0" * 19


def has_long_digits(data: bytes) -> bool:
    return _NINETEEN_ZEROS in data.translate(_DIGITS_AS_ZERO)


# The same search for runs that can begin a number: an integer literal starts after a
# sign, a bracket, a comma, a colon, whitespace or the start of the text, never after a
# decimal point, so the digits of a fraction (0.0002125229948433116, as runners write
# times) do not count.
DIGITS_AND_POINTS = bytes(
    0x30 if 0x30 <= i <= 0x39 else (0x2E if i == 0x2E else 0x78) for i in range(256)
)


def has_long_integer_digits(data: bytes) -> bool:
    return integer_run(data, _NINETEEN_ZEROS)


def integer_run(data: bytes, zeros: bytes) -> bool:
    """Whether ``len(zeros)`` digits in a row could begin a number in ``data``: at its
    start, or after a byte that is neither a digit nor a point (searched in the mapped
    bytes, never in a copy of them with a byte put in front: 49 MB of samples an import)."""
    mapped = data.translate(DIGITS_AND_POINTS)
    return mapped.startswith(zeros) or b"x" + zeros in mapped


SIXTEEN_ZEROS = b"0" * 16
