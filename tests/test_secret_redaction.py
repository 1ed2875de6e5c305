"""Secrets are hidden from storage error text as whole tokens, and only strings long
enough to be secrets: a one-letter test secret no longer turns every capital S into ***."""

from __future__ import annotations

import pytest

from bundler.storage.config import MIN_SECRET_CHARS, scrub_secrets

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize(
    ("text", "secrets", "shown"),
    [
        ("own SHA-256 failed", ["S"], "own SHA-256 failed"),
        ("own SHA-256 failed", ["SHA-256"], "own SHA-256 failed"),  # 7 characters
        (f"key {SECRET} refused", [SECRET], "key *** refused"),
        (f"secret={SECRET}", [SECRET], "secret=***"),
        (f"({SECRET}/x)", [SECRET], "(***/x)"),
        (f"{SECRET}{SECRET}", [SECRET], f"{SECRET}{SECRET}"),  # not a whole token
        (f"x{SECRET}", [SECRET], f"x{SECRET}"),
        ("token abcdefgh and abcdefghi", ["abcdefgh"], "token *** and abcdefghi"),
        ("a.b+c?d", ["a.b+c?d1"], "a.b+c?d"),
        ("pattern a.b+c?d[ here", ["a.b+c?d["], "pattern *** here"),  # no regex meaning
        ("empty", ["", "S"], "empty"),
    ],
)
def test_scrub_secrets(text: str, secrets: list[str], shown: str) -> None:
    assert scrub_secrets(text, secrets) == shown


def test_min_secret_chars() -> None:
    assert MIN_SECRET_CHARS == 8
    assert scrub_secrets("12345678", ["12345678"]) == "***"
    assert scrub_secrets("1234567", ["1234567"]) == "1234567"
