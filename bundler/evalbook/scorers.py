"""The scorer-version digest (SPEC 3.5), one function for the store and the verifier.

A scorer version's digest is the framed digest (``SCORER_TAG``) of its ``scorer.json``
bytes, then each file its descriptor lists, as ``files/<path>``, in the order of the
paths' UTF-8 bytes. The store reader computes it from the store (and export pins it),
the verifier recomputes it from the bundled copy; both call ``scorer_version_digest``.
"""

from __future__ import annotations

from collections.abc import Iterable

from bundler.core.digests import SCORER_TAG, FramedHasher


def scorer_file_order(paths: Iterable[str]) -> list[str]:
    """A descriptor's file paths in the order the digest takes them: by UTF-8 bytes."""
    return sorted(paths, key=lambda p: p.encode("utf-8"))


def scorer_version_digest(descriptor: bytes, files: Iterable[tuple[str, bytes]]) -> str:
    """The framed digest of ``scorer.json`` (``descriptor``) and ``files``.

    ``files`` are (name, content) pairs named as in the scorer version directory
    (``files/<path>``), in ``scorer_file_order``.
    """
    hasher = FramedHasher(SCORER_TAG)
    hasher.add("scorer.json", descriptor)
    for name, content in files:
        hasher.add(name, content)
    return hasher.digest()
