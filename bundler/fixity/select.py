"""Which bundles a fixity run checks (SPEC sections 13 and 13.1): listing the source,
the stable sample groups, ``--older-than``, and the caps; bundles whose latest outcome
is fail, missing or error first, then the oldest checked."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bundler import storage
from bundler.core.errors import InputError, UsageError
from bundler.fixity.ledger import RETIRED, KnownBundle

ARCHIVE_SUFFIX = ".tar.zst"
# Digits are matched without a length limit (up to a sanity cap that only keeps int()
# cheap) so a value too large is refused by its bound, named, not called malformed.
_DURATION_RE = re.compile(r"\A([1-9][0-9]{0,39})([smhdw])\Z")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# --older-than at most 100 years: longer than any archive has existed, and far inside
# the dates a timestamp can hold (a cutoff before year 1 cannot be computed).
MAX_DURATION_DAYS = 36_525
_SAMPLE_RE = re.compile(r"\A(0|[1-9][0-9]{0,39})/([1-9][0-9]{0,39})\Z")
MAX_SAMPLE_GROUPS = 999_999_999


@dataclass(frozen=True)
class Listed:
    """A bundle the source holds now."""

    key: str
    size: int
    in_layout: bool = True  # s3://: the key follows <prefix>/reports/bundles/<id>/<hex>.tar.zst
    # When its bytes may last have changed (a local file's later of mtime and ctime, an
    # object's LastModified), in the ledger's time format; None when unknown.
    changed: str | None = None


@dataclass(frozen=True)
class Selection:
    """The options that narrow a run, as the record and the ledger name them."""

    sample: tuple[int, int] | None = None  # (K, N)
    older_than: timedelta | None = None
    limit: int | None = None
    limit_bytes: int | None = None

    def describe(self) -> dict[str, object]:
        return {
            "sample": None if self.sample is None else f"{self.sample[0]}/{self.sample[1]}",
            "older_than_seconds": None
            if self.older_than is None
            else int(self.older_than.total_seconds()),
            "limit": self.limit,
            "limit_bytes": self.limit_bytes,
        }


def parse_duration(text: str, *, option: str = "--older-than") -> timedelta:
    """``12h``, ``30d``, ``2w`` (also ``s`` and ``m``); UsageError otherwise."""
    match = _DURATION_RE.match(text)
    if match is None:
        raise UsageError(f"{option}: {text!r} is not a duration such as 12h, 30d or 2w")
    seconds = int(match.group(1)) * _UNITS[match.group(2)]
    if seconds > MAX_DURATION_DAYS * 86400:
        raise UsageError(
            f"{option}: {text!r} is longer than {MAX_DURATION_DAYS:,} days (100 years), "
            "the longest accepted"
        )
    return timedelta(seconds=seconds)


def parse_sample(text: str) -> tuple[int, int]:
    """``K/N`` with 0 <= K < N <= MAX_SAMPLE_GROUPS; UsageError otherwise."""
    match = _SAMPLE_RE.match(text)
    if match is None or int(match.group(1)) >= int(match.group(2)):
        raise UsageError(f"--sample: {text!r} is not K/N with 0 <= K < N (e.g. 0/7)")
    k, n = int(match.group(1)), int(match.group(2))
    if n > MAX_SAMPLE_GROUPS:
        raise UsageError(
            f"--sample: {text!r} has N over {MAX_SAMPLE_GROUPS:,}, the most groups accepted"
        )
    return k, n


def group_of(key: str, n: int) -> int:
    """The sample group of a key: the first 8 bytes of SHA-256(key), big-endian, mod n.

    Depends on the key alone, so a bundle stays in its group and runs K = 0..n-1
    together check every bundle exactly once. A local name that is not UTF-8 is
    grouped by its exact bytes.
    """
    data = key.encode("utf-8", "surrogateescape")
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big") % n


def list_source(source: str, endpoint_url: str | None) -> Iterator[Listed]:
    """The bundles under ``source`` now: ``*.tar.zst`` below a local directory (links not
    followed; names as the file system has them, ``surrogateescape`` for bytes that are
    not UTF-8) or every ``*.tar.zst`` under ``<prefix>/reports/bundles/``, in the key
    layout or not. InputError for a bad source."""
    if source.startswith("s3://"):
        loc = storage.parse_s3_url(source)
        storage.check_archive_prefix(loc)
        config = storage.StorageConfig(endpoint_url=endpoint_url)
        for listed in storage.list_archive_objects(loc, config=config):
            changed = None if listed.last_modified is None else _iso(listed.last_modified)
            yield Listed(listed.key, listed.size, listed.in_layout, changed)
        return
    try:
        info = os.stat(source, follow_symlinks=False)
    except OSError as exc:
        raise InputError(f"{source}: cannot read the source directory ({exc.strerror})") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise InputError(f"{source}: not a directory or an s3://bucket/prefix archive prefix")
    yield from _walk(source, "")


def _walk(root: str, relative: str) -> Iterator[Listed]:
    where = os.path.join(root, relative) if relative else root
    try:
        entries = sorted(os.scandir(where), key=lambda e: e.name)
    except OSError as exc:
        raise InputError(f"{where}: cannot list ({exc.strerror})") from exc
    for entry in entries:
        name = f"{relative}/{entry.name}" if relative else entry.name
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(root, name)
        elif entry.is_file(follow_symlinks=False) and entry.name.endswith(ARCHIVE_SUFFIX):
            info = entry.stat(follow_symlinks=False)
            # ctime too: a write that set mtime back still moves it.
            ns = max(info.st_mtime_ns, info.st_ctime_ns)
            changed = _iso(datetime.fromtimestamp(ns / 1e9, UTC))
            yield Listed(name, info.st_size, changed=changed)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Candidate:
    """A bundle the run may check: listed now, or known to the ledger and gone."""

    key: str
    size: int
    known: KnownBundle | None
    gone: bool
    in_layout: bool = True
    changed: str | None = None  # see Listed

    @property
    def first_sight(self) -> bool:
        """No check has passed it yet, or it was retired and (being selected) now holds
        other bytes: checked at level full, and its digests become the baseline only
        when that check passes (SPEC 13.1)."""
        k = self.known
        return k is None or not k.has_baseline or k.verdict == RETIRED

    def still_retired(self, same_bytes: Callable[[Candidate], bool] | None) -> bool:
        """Retired by the keeper and still holding the bytes it was retired with: gone,
        when it was retired missing; else the size they had and, when the key was
        written since it was retired, the SHA-256 they had (``same_bytes`` reads them;
        without it, a write since is taken for other bytes)."""
        k = self.known
        if k is None or k.verdict != RETIRED:
            return False
        if self.gone:
            return True
        if k.retired_size is None or k.retired_size != self.size:
            return False
        if self.changed is None or k.verdict_since is None or self.changed <= k.verdict_since:
            return True
        return same_bytes is not None and same_bytes(self)

    @property
    def due_first(self) -> bool:
        return self.known is not None and self.known.due_first


def select(
    listed: list[Listed],
    known: dict[str, KnownBundle],
    selection: Selection,
    level: str,
    now: datetime,
    same_bytes: Callable[[Candidate], bool] | None = None,
) -> list[Candidate]:
    """The bundles to check: those whose latest outcome is fail, missing or error
    first (whatever ``--older-than`` says), then the oldest checked (never checked
    first of all). A retired bundle that still holds the bytes it was retired with is
    not checked (``same_bytes`` tells, for one written since it was retired)."""
    present = {item.key for item in listed}
    candidates = [
        Candidate(item.key, item.size, known.get(item.key), False, item.in_layout, item.changed)
        for item in listed
    ]
    candidates += [
        Candidate(key, row.size, row, True)
        for key, row in sorted(known.items())
        if key not in present
    ]
    candidates = [c for c in candidates if not c.still_retired(same_bytes)]
    if selection.sample is not None:
        k, n = selection.sample
        candidates = [c for c in candidates if group_of(c.key, n) == k]
    if selection.older_than is not None:
        cutoff = (now - selection.older_than).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        candidates = [
            c
            for c in candidates
            if c.known is None
            or c.first_sight
            or c.due_first
            or (c.known.last_at(level) or "") < cutoff
        ]
    candidates.sort(
        key=lambda c: (
            not c.due_first,
            "" if c.known is None or c.first_sight else (c.known.last_at(level) or ""),
            c.key,
        )
    )
    if selection.limit is not None:
        candidates = candidates[: selection.limit]
    if selection.limit_bytes is not None:
        capped: list[Candidate] = []
        total = 0
        for c in candidates:
            cost = 0 if c.gone else c.size
            # The oldest always runs, so a bundle bigger than the cap is not stuck forever.
            if capped and total + cost > selection.limit_bytes:
                break
            capped.append(c)
            total += cost
        candidates = capped
    return candidates
