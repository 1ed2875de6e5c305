"""The command being run, shared by the command line's modules: which command is
invoked (``INVOKED``, pushed by the command class) and the one translation of library
parameter names inside texts into that command's options."""

from __future__ import annotations

import re
from typing import Any

import click

# The contexts of the commands being run, innermost last.
INVOKED: list[click.Context] = []

# Library parameters that the library's texts name inside a message (a reader's cap:
# "more than max_bytes=1 bytes (the max_bytes cap; ...)"), not only at its start: each
# with the pattern of its mentions, never a word that merely contains it.
_NAMED_IN_TEXT = {"max_bytes": re.compile(r"(?<![\w-])max_bytes(?![\w-])")}


def option_text(text: str) -> str:
    """``text`` (an error, a record's error or detail) with each library parameter it
    names spelled as the running command's option (``max_bytes`` as ``--max-bytes``):
    the one translation of parameter names inside texts. A parameter the command has no
    option for keeps its name."""
    # Almost no text names a parameter: a record of 130,000 claims has 700,000 texts.
    if not INVOKED or not any(name in text for name in _NAMED_IN_TEXT):
        return text
    for param in INVOKED[-1].command.params:
        pattern = _NAMED_IN_TEXT.get(param.name or "")
        if pattern is not None and isinstance(param, click.Option):
            text = pattern.sub(max(param.opts, key=len), text)
    return text


def may_name_a_parameter(data: bytes) -> bool:
    """Whether JSON ``data`` may hold a text ``option_text`` changes (a quick test, so a
    long record's texts need not each be looked at)."""
    return any(name.encode() in data for name in _NAMED_IN_TEXT)


def option_record(value: Any) -> Any:
    """A record as the command prints it: every text in it through ``option_text``."""
    if isinstance(value, str):
        return option_text(value)
    if isinstance(value, dict):
        return {k: option_record(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [option_record(v) for v in value]
    return value
