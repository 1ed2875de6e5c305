"""RFC 8785 (JCS) serialisation of exact JSON types, in C; see bundler.core.canonical."""

from typing import Any

MAX_DEPTH: int

class Fallback(Exception):
    """dumps cannot write this value itself; the reference serialiser decides."""

def dumps(value: Any, /) -> bytes:
    """The RFC 8785 bytes of ``value``; raises Fallback for anything not plain JSON."""
