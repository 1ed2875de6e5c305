"""What the bundle reader admits of an eval-banana bundle: the one size rule that
``export-eb`` and ``verify RUN_DIR --project ROOT`` both ask (SPEC 5, Resources; threat
model class 6; docs/format.md, "Sizes: one rule for export and verify in place").

The bundle reader (``archive.bag_reader``) keeps every data/run/ file, definition and
tag document in memory under its caps, and the strict archive reader counts member
names (``archive.names.MemberNames``). A run whose bundle would break one of them can
never verify as a bundle, so export refuses it and verify in place refuses it in the
same words. The rule is fed every member in the order export writes it, by name and
size, and asked for a document's bytes only when the reader would count its JSON
values: export gives the bytes it writes, verify in place the sizes it already has
(``run_file_sizes``) and the few JSON documents read once more; neither hashes or
archives anything for it.

Refusals are ``BundleRefusal`` (an InputError, exit 3): one line naming the run
directory, the member and the rule, ending in "its bundle would fail verification". The
rule's words are shared; the tail is each command's own: export-eb adds "; nothing
written", verify in place says the rule after "export-eb would refuse this run: " and
adds nothing, since it writes nothing in any case.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from bundler.archive.bag_reader import (
    MAX_DOCUMENT_BYTES,
    is_json,
    is_kept,
    json_values,
    sized_document_problem,
)
from bundler.archive.names import MemberNames
from bundler.core.errors import InputError
from bundler.evalbanana import run as eb

RUN_PREFIX = "data/run/"
_REFUSED = "(the bundle reader's limit, SPEC 5, Resources): its bundle would fail verification"
EXPORT_TAIL = "; nothing written"


class BundleRefusal(InputError):
    """A run whose bundle the bundle reader would refuse. ``rule`` is the rule's words
    (run directory, member, limit), which export-eb and verify in place share; the
    message is export's: the rule, then ``EXPORT_TAIL``."""

    def __init__(self, rule: str) -> None:
        super().__init__(rule + EXPORT_TAIL)
        self.rule = rule


def run_file_sizes(run: eb.Run, run_dir: Path) -> dict[str, int]:
    """The size of each run file, refusing first (before reading any) one the bundle
    reader would not keep whole.

    The reader keeps each data/run/ file under its document cap, and the verifier
    re-derives the stdout tails from those bytes; a larger file would make the bundle
    fail its own verification. A legitimate stdout can be larger: once the reader keeps
    a bounded tail of data/run/checks/*.stdout.txt (its last 8 KiB, with the file's size
    and whether it is UTF-8) instead of the whole file, stdout files leave this rule.
    """
    sizes: dict[str, int] = {}
    for rel in run.files:
        try:
            size = os.lstat(run_dir / rel).st_size
        except OSError as exc:
            raise InputError(f"{run_dir / rel}: cannot be read ({exc.strerror})") from exc
        if size > MAX_DOCUMENT_BYTES or not is_kept(RUN_PREFIX + rel, b"", size):
            raise BundleRefusal(
                f"{run_dir / rel}: {size} bytes, over the {MAX_DOCUMENT_BYTES}-byte document "
                "cap of the bundle reader (SPEC 5, Resources): its bundle would fail "
                "verification"
            )
        sizes[rel] = size
    return sizes


class BundleBudget:
    """The reader's totals and names over one eval-banana bundle, member by member.

    ``admit`` claims a member's name (and, as ``BagWriter`` writes them, each of its
    directories before its first member) in the names ledger the strict reader keeps,
    then applies the reader's document caps (``sized_document_problem``: one document,
    the kept bytes and the JSON values in all). The tag files are counted by estimate
    (``admit_tag_files``), their signature whether or not export signs.
    """

    # bagit.txt, bag-info.txt, bundle-head.json (and its signature), tagmanifest: small.
    TAG_FILES_BYTES = 16 * 1024
    TAG_FILES_VALUES = 64
    TAG_FILES = (
        "bagit.txt",
        "bag-info.txt",
        "manifest-sha256.txt",
        "bundle-head.json",
        "bundle-head.json.sig",
        "tagmanifest-sha256.txt",
    )

    def __init__(self, where: Path, top: str) -> None:
        self.where = where
        self.top = top
        self.kept = 0
        self.values = 0
        self._names = MemberNames()
        self._claim(top, is_dir=True)

    def _refuse(self, member: str, problem: str) -> BundleRefusal:
        return BundleRefusal(f"{self.where}: {member}: {problem} {_REFUSED}")

    def _claim(self, name: str, *, is_dir: bool = False) -> None:
        refused = self._names.claim(name, is_dir=is_dir)
        if refused is not None:
            member = name[len(self.top) + 1 :] or name
            raise self._refuse(member, f"the bundle cannot hold this name: {refused[0]}")

    def _claim_dirs(self, member: str) -> None:
        parent = member.rpartition("/")[0]
        if not parent or self._names.has_directory(f"{self.top}/{parent}"):
            return
        parts = member.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            directory = self.top + "/" + "/".join(parts[:i])
            if not self._names.has_directory(directory):
                self._claim(directory, is_dir=True)

    def admit(self, member: str, size: int, load: Callable[[], bytes]) -> None:
        """Admit the member at bag path ``member`` of ``size`` bytes, or raise InputError.

        ``load`` gives the member's bytes; it is called only for a kept JSON document,
        whose values the reader counts. (Whether a member is kept never depends on its
        first bytes outside data/blobs/, which an eval-banana bundle does not have.)
        """
        self._claim_dirs(member)
        self._claim(f"{self.top}/{member}")
        if not is_kept(member, b"", size):
            return
        self._keep(member, size, json_values(load()) if is_json(member) else 0)

    def _keep(self, member: str, size: int, values: int) -> None:
        """Count a kept document against the reader's caps, or refuse it."""
        problem = sized_document_problem(
            size, values, kept_before=self.kept, values_before=self.values
        )
        if problem is not None:
            raise self._refuse(member, problem)
        self.kept += size
        self.values += values

    def admit_bytes(self, member: str, data: bytes) -> None:
        """``admit`` for a member whose bytes are in hand."""
        self.admit(member, len(data), lambda: data)

    def admit_tag_files(self, paths: list[str]) -> None:
        """The tag files at the bag root, for a manifest naming ``paths``."""
        for name in self.TAG_FILES:
            self._claim(f"{self.top}/{name}")
        manifest = sum(64 + 2 + len(p.encode("utf-8")) + 1 for p in paths)
        for member, size, values in (
            ("manifest-sha256.txt", manifest, 0),
            ("bundle-head.json", self.TAG_FILES_VALUES, json_values(b"," * self.TAG_FILES_VALUES)),
            ("bag-info.txt", self.TAG_FILES_BYTES, 0),
        ):
            self._keep(member, size, values)


T = TypeVar("T")
# How verify in place begins the message of a run export-eb refuses over its bundle's size.
EXPORT_WOULD_REFUSE = "export-eb would refuse this run: "


def as_export_would(ask: Callable[[], T]) -> T:
    """``ask()``, its refusal said as export-eb's (exit 3): the rule in export's words
    (``in_place_words``) after ``EXPORT_WOULD_REFUSE``."""
    try:
        return ask()
    except eb.ChangedDuringRead:
        raise  # not export's rule: the run changed while it was verified
    except InputError as exc:
        raise InputError(f"{EXPORT_WOULD_REFUSE}{in_place_words(exc)}") from exc


def in_place_words(exc: InputError) -> str:
    """What verify in place says of export's refusal ``exc``: the rule's own words,
    without export's tail ("nothing written": verify writes nothing in any case)."""
    return exc.rule if isinstance(exc, BundleRefusal) else exc.message
