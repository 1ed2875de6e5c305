"""Finding the signatures beside a bundle, locally and in storage (SPEC 6, 11.3).

A bundle's sidecars are ``<location>.sig`` and ``<location>.sig.<sha256 hex of the
signature's bytes>``: beside an archive file, beside an extracted bag directory (where
``extract`` writes them), and beside a stored object (``storage.stored_signatures``).
Anyone who can write beside a bundle can add one, so each is read only up to
``MAX_SIDECAR_BYTES`` and only ``MAX_SIDECARS`` are read; an oversized, unreadable or
excess one becomes a ``SignatureSource`` with its ``problem``, listed as invalid, never
an error that blocks the bundle. ``with_signatures`` puts them, and the allowed
signers, into the ``VerifyOptions`` every verifying command passes on.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from bundler.core.claims import VerifyOptions
from bundler.core.errors import InputError
from bundler.core.signatures import (
    MAX_LISTED,
    MAX_SIDECAR_BYTES,
    MAX_SIDECARS,
    SignatureCheck,
    SignatureSource,
    SignatureState,
    order_sidecars,
    too_many,
)
from bundler.core.textsafe import shown
from bundler.trust.proof import read_bounded

SIDECAR_SUFFIX = ".sig"
_COUNTERSIGNATURE = re.compile(r"\.sig\.[0-9a-f]{64}")
ODD_NAME = (
    "not read: named like a signature of this bundle, but neither <archive>.sig nor "
    "<archive>.sig.<sha256 hex of its bytes, lowercase>"
)


def sidecar_name(base: str, signature: bytes, *, first_free: bool) -> str:
    """The sidecar name a new signature takes beside ``base``: ``<base>.sig`` when that
    is free (``first_free``), else ``<base>.sig.<sha256 hex of its bytes>``."""
    if first_free:
        return base + SIDECAR_SUFFIX
    return f"{base}{SIDECAR_SUFFIX}.{hashlib.sha256(signature).hexdigest()}"


def local_sidecar_paths(location: str) -> tuple[list[Path], int]:
    """The sidecars beside an archive file or a bag directory to read, and how many
    more lie there (not read): ``<location>.sig``, then ``<location>.sig.<hex>`` oldest
    first (``order_sidecars``), at most ``MAX_SIDECARS``; none for anything else.

    The age of a file is its status-change time (then its inode number, for files
    written within one clock tick), which the file system sets on every write and
    which, unlike the modification time, no writer can set back; so files added later
    never push out the signatures already there. Names beginning
    ``<location>.sig`` that are neither form are listed too (``odd_sidecar_names``)."""
    base = Path(location.rstrip("/") or location)
    if not (base.is_file() or base.is_dir()):
        return [], 0
    first = base.name + SIDECAR_SUFFIX
    found: list[tuple[str, tuple[float, ...]]] = []
    unlisted = 0
    try:
        with os.scandir(base.parent) as entries:
            for entry in entries:
                name = entry.name
                if name != first and not (
                    name.startswith(base.name)
                    and _COUNTERSIGNATURE.fullmatch(name[len(base.name) :])
                ):
                    continue
                if len(found) >= MAX_LISTED:
                    unlisted = 1
                    break
                try:
                    info = entry.stat(follow_symlinks=False)
                    when: tuple[float, ...] = (info.st_ctime_ns, info.st_ino)
                except OSError:
                    when = (0, 0)
                found.append((name, when))
    except OSError:
        found = [(first, (0, 0))] if os.path.lexists(base.with_name(first)) else []
    ordered = order_sidecars(found, first=first)
    rest = len(ordered) - min(len(ordered), MAX_SIDECARS) + unlisted
    return [base.with_name(name) for name in ordered[:MAX_SIDECARS]], rest


def odd_sidecar_names(location: str) -> list[Path]:
    """Files beside ``location`` whose names begin ``<name>.sig`` but are neither
    ``<name>.sig`` nor ``<name>.sig.<64 lowercase hex>`` (``.sig.bak``, upper-case hex):
    not read, but listed, so that none is silently skipped (at most ``MAX_SIDECARS``)."""
    base = Path(location.rstrip("/") or location)
    if not (base.is_file() or base.is_dir()):
        return []
    first = base.name + SIDECAR_SUFFIX
    odd: list[str] = []
    try:
        with os.scandir(base.parent) as entries:
            for entry in entries:
                name = entry.name
                if not name.startswith(first) or name == first:
                    continue
                if _COUNTERSIGNATURE.fullmatch(name[len(base.name) :]):
                    continue
                odd.append(name)
                if len(odd) >= MAX_SIDECARS:
                    break
    except OSError:
        return []
    return [base.with_name(name) for name in sorted(odd)]


def _bounded_sources(paths: list[Path], rest: int) -> list[SignatureSource]:
    sources = []
    for path in paths:
        where = str(path)
        try:
            data = read_bounded(where, limit=MAX_SIDECAR_BYTES, what="signature", follow=False)
        except InputError as exc:
            sources.append(
                SignatureSource(where, "", problem=exc.message.removeprefix(f"{shown(where)}: "))
            )
            continue
        problem = _name_problem(path.name, data)
        sources.append(SignatureSource(where, data.decode("utf-8", "replace"), problem=problem))
    if rest:
        base = str(paths[0]).rpartition(SIDECAR_SUFFIX)[0] if paths else "the bundle"
        sources.append(SignatureSource(f"{base}{SIDECAR_SUFFIX}.*", "", problem=too_many(rest)))
    return sources


def _name_problem(name: str, data: bytes) -> str | None:
    """A countersignature's name is the SHA-256 of its bytes; other bytes under it were
    put there by hand or altered."""
    match = re.search(r"\.sig\.([0-9a-f]{64})\Z", name)
    if match is None:
        return None
    actual = hashlib.sha256(data).hexdigest()
    if actual == match.group(1):
        return None
    return f"altered: its name records SHA-256 {match.group(1)}, its bytes hash to {actual}"


def local_sidecars(location: str) -> list[SignatureSource]:
    """The signatures beside a local archive or bag directory, bounded, then the files
    named like sidecars that are not (listed as invalid, never read)."""
    paths, rest = local_sidecar_paths(location)
    odd = [SignatureSource(str(path), "", problem=ODD_NAME) for path in odd_sidecar_names(location)]
    return _bounded_sources(paths, rest) + odd


def stored_sidecars(
    url: str, endpoint_url: str | None = None, *, config: object = None
) -> list[SignatureSource]:
    """The signatures stored beside an ``s3://`` object, bounded (never raises for
    what lies there; StorageError when the service fails). ``config`` (a
    ``storage.StorageConfig``) replaces the one ``endpoint_url`` gives."""
    from bundler import storage

    if not isinstance(config, storage.StorageConfig):
        config = storage.StorageConfig(endpoint_url=endpoint_url)
    return [
        SignatureSource(sig.url, sig.text, problem=sig.problem)
        for sig in storage.stored_signatures(url, config=config)
    ]


def sidecars_of(location: str, endpoint_url: str | None = None) -> list[SignatureSource]:
    """The signatures beside ``location`` (not the embedded one)."""
    if location.startswith("s3://"):
        return stored_sidecars(location, endpoint_url)
    return local_sidecars(location)


def explicit_signature(value: str | bytes, endpoint_url: str | None = None) -> SignatureSource:
    """A signature named instead of the bundle's own (``--signature``, ``signature=``):
    its bytes, a file or an ``s3://`` object. A file is read as a regular file only,
    without blocking; ``-`` is a file of that name here (standard input is the command
    line's to read, and it passes the bytes).

    Raises InputError (exit 3) when it cannot be read or is over ``MAX_SIDECAR_BYTES``
    (the one the user named is not a neighbour that may be skipped), StorageError for
    an object that cannot be fetched.
    """
    if isinstance(value, bytes):
        if len(value) > MAX_SIDECAR_BYTES:
            raise InputError(
                f"signature: {len(value)} bytes, over the {MAX_SIDECAR_BYTES}-byte cap"
            )
        return SignatureSource("<signature>", value.decode("utf-8", "replace"))
    if value.startswith("s3://"):
        from bundler import storage

        stored = storage.read_signature(
            value, config=storage.StorageConfig(endpoint_url=endpoint_url)
        )
        return SignatureSource(stored.url, stored.text)
    data = read_bounded("./-" if value == "-" else value, limit=MAX_SIDECAR_BYTES, what="signature")
    return SignatureSource(value, data.decode("utf-8", "replace"))


def load_allowed(path: Path | str | None) -> tuple[object, ...] | None:
    """The lines of an allowed_signers file (InputError, exit 3, when unreadable or
    malformed); None without a file."""
    if path is None:
        return None
    from bundler.trust import sshsig

    return tuple(sshsig.load_allowed_signers(Path(path)))


def with_sidecars(
    options: VerifyOptions,
    location: str,
    *,
    signature: str | bytes | SignatureSource | None = None,
    endpoint_url: str | None = None,
) -> VerifyOptions:
    """``options`` that also check the signatures beside the bundle at ``location``,
    and ``signature`` too when one is named: every signature present is checked (SPEC
    11.3), a named one in addition, never instead. The verifier always checks the
    embedded one; ``options.allowed_signers`` anchors them (``load_allowed``)."""
    named: list[SignatureSource] = []
    if isinstance(signature, SignatureSource):
        named = [signature]
    elif signature is not None:
        named = [explicit_signature(signature, endpoint_url)]
    beside = sidecars_of(location, endpoint_url)
    seen = {_same_place(s.where) for s in named}
    sidecars = named + [s for s in beside if _same_place(s.where) not in seen]
    return replace(options, sidecars=tuple(sidecars))


def _same_place(where: str) -> str:
    """One spelling per local file (a named signature may be a sidecar itself)."""
    return where if where.startswith("s3://") else os.path.realpath(where)


def good_sidecars(
    options: VerifyOptions, checks: Sequence[SignatureCheck]
) -> list[SignatureSource]:
    """The sidecars checked with ``options`` that are signatures over the bundle's head
    (verified, valid, or valid by a signer not allowed): those travel with it (upload,
    extract); invalid ones stay where they lie."""
    good = {
        c.where
        for c in checks
        if not c.embedded and (c.good or c.state is SignatureState.NOT_ALLOWED)
    }
    return [s for s in options.sidecars if s.where in good and s.problem is None]


def left_behind(options: VerifyOptions, checks: Sequence[SignatureCheck]) -> list[tuple[str, str]]:
    """The sidecars ``good_sidecars`` does not let travel, each with why: named, so that
    none is silently skipped (SPEC 11.3) by ``upload`` or ``extract``."""
    kept = {s.where for s in good_sidecars(options, checks)}
    return [(c.where, c.describe()) for c in checks if not c.embedded and c.where not in kept]


def write_beside_bag(directory: Path, sidecars: Sequence[SignatureSource]) -> list[Path]:
    """Beside a bag extracted into ``directory``, not inside it (a tag file the tag
    manifest does not list would make the bag fail): ``<bag>.sig``, ``<bag>.sig.<hex>``,
    where ``verify`` of the bag looks (SPEC 11.3). Nothing when the directory does not
    hold exactly one bag."""
    from bundler.core.outputs import write_new_file

    bags = [p for p in directory.iterdir() if p.is_dir() and not p.is_symlink()]
    if not sidecars or len(bags) != 1:
        return []
    written = []
    for n, source in enumerate(sidecars):
        data = source.text.encode("utf-8")
        target = directory / sidecar_name(bags[0].name, data, first_free=n == 0)
        write_new_file(target, data)
        written.append(target)
    return written


def sidecars_beside_bag(directory: Path) -> list[Path]:
    """The sidecars beside the one bag extracted into ``directory`` (``write_beside_bag``
    wrote them); none when it holds no single bag."""
    try:
        bags = [p for p in directory.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []
    return local_sidecar_paths(str(bags[0]))[0] if len(bags) == 1 else []
