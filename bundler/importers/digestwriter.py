"""The documents an import gives, as digests, with nothing written (``--check``, SPEC 16).

``import-inspect --check`` / ``import-lm-eval --check`` compare a bundle with what its
run gives. The bundle's side is its payload manifest (every file under ``data/`` with
its SHA-256, verified before it is read); the run's side need be no more than the same:
``DigestWriter`` takes every document, payload and example an import stages, exactly as
``StoreWriter`` does, and records its store path, SHA-256 and size instead of writing
it. Tens of thousands of files are never created twice (once staged, once moved into a
temporary store) only to be read back and compared. Only the case files named in
``keep`` are held whole: a case file the export cut (``case_limit``) is compared by its
first lines.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from bundler.core.errors import StoreError
from bundler.importers.storewriter import PayloadRef, Staged, StoreWriter


@dataclass(frozen=True)
class Given:
    """What the run gives at one store path: its SHA-256 (hex) and size."""

    sha256: str
    size: int


class DigestWriter:
    """The staging interface of ``StoreWriter``, recording digests only."""

    def __init__(self, keep: frozenset[str] = frozenset()) -> None:
        self.documents: dict[str, Given] = {}
        self.kept: dict[str, bytes] = {}  # the whole bytes of the paths in ``keep``
        self._keep = keep
        self._examples: dict[str, Given] = {}  # digest -> the example body's digest

    def _put(self, relpath: str, given: Given) -> None:
        held = self.documents.setdefault(relpath, given)
        if held != given:
            raise StoreError(f"{relpath}: two different documents for one path; import refused")

    def put_payload(self, data: bytes) -> PayloadRef:
        hexdigest = hashlib.sha256(data).hexdigest()
        ref = PayloadRef("sha256:" + hexdigest, len(data))
        self._put(ref.relpath, Given(hexdigest, len(data)))
        return ref

    def put_file_payload(self, source: Path, digest: str, size: int) -> PayloadRef:
        # The run file was hashed as it was opened (RunFile); the bundle names it by
        # the same digest, and --check compares that digest with the bundle's.
        ref = PayloadRef(digest, size)
        self._put(ref.relpath, Given(digest.removeprefix("sha256:"), size))
        return ref

    def put_example(self, data: bytes) -> str:
        hexdigest = hashlib.sha256(data).hexdigest()
        digest = "sha256:" + hexdigest
        self._examples.setdefault(digest, Given(hexdigest, len(data)))
        return digest

    def place_example(self, digest: str, relpath: str) -> None:
        self._put(relpath, self._examples[digest])

    def put_document(self, relpath: str, data: bytes) -> None:
        self._put(relpath, Given(hashlib.sha256(data).hexdigest(), len(data)))
        if relpath in self._keep:
            self.kept[relpath] = data

    def staged_files(self) -> list[Staged]:
        return []


# What the readers and ``build_documents`` stage with: a store's staging area, or digests.
Stager = StoreWriter | DigestWriter
