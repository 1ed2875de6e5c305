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
    MAX_SIDECAR_BYTES,
    MAX_SIDECARS,
    SignatureCheck,
    SignatureSource,
    SignatureState,
)
from bundler.core.textsafe import shown
from bundler.trust.proof import read_bounded

SIDECAR_SUFFIX = ".sig"
_COUNTERSIGNATURE = re.compile(r"\.sig\.[0-9a-f]{64}")


def sidecar_name(base: str, signature: bytes, *, first_free: bool) -> str:
    """The sidecar name a new signature takes beside ``base``: ``<base>.sig`` when that
    is free (``first_free``), else ``<base>.sig.<sha256 hex of its bytes>``."""
    if first_free:
        return base + SIDECAR_SUFFIX
    return f"{base}{SIDECAR_SUFFIX}.{hashlib.sha256(signature).hexdigest()}"


def local_sidecar_paths(location: str) -> list[Path]:
    """``<location>.sig`` then ``<location>.sig.<hex>`` (name order) that exist beside
    an archive file or a bag directory; none for anything else."""
    base = Path(location.rstrip("/") or location)
    if not (base.is_file() or base.is_dir()):
        return []
    found = []
    first = base.with_name(base.name + SIDECAR_SUFFIX)
    if os.path.lexists(first):
        found.append(first)
    try:
        entries = sorted(
            entry.name
            for entry in os.scandir(base.parent)
            if entry.name.startswith(base.name)
            and _COUNTERSIGNATURE.fullmatch(entry.name[len(base.name) :])
        )
    except OSError:
        entries = []
    found += [base.with_name(name) for name in entries]
    return found


def _bounded_sources(paths: list[Path]) -> list[SignatureSource]:
    sources = []
    for path in paths[:MAX_SIDECARS]:
        where = str(path)
        try:
            data = read_bounded(where, limit=MAX_SIDECAR_BYTES, what="signature")
        except InputError as exc:
            sources.append(
                SignatureSource(where, "", problem=exc.message.removeprefix(f"{shown(where)}: "))
            )
            continue
        problem = _name_problem(path.name, data)
        sources.append(SignatureSource(where, data.decode("utf-8", "replace"), problem=problem))
    if len(paths) > MAX_SIDECARS:
        rest = len(paths) - MAX_SIDECARS
        sources.append(
            SignatureSource(
                f"{paths[MAX_SIDECARS]} and {rest - 1} more"
                if rest > 1
                else str(paths[MAX_SIDECARS]),
                "",
                problem=f"more than {MAX_SIDECARS} signatures beside the bundle: {rest} not read",
            )
        )
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
    """The signatures beside a local archive or bag directory, bounded."""
    return _bounded_sources(local_sidecar_paths(location))


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
    """``options`` that also check the signatures beside the bundle at ``location``
    (or only ``signature``, when one is named). The verifier always checks the
    embedded one; ``options.allowed_signers`` anchors them (``load_allowed``)."""
    if isinstance(signature, SignatureSource):
        sidecars = [signature]
    elif signature is not None:
        sidecars = [explicit_signature(signature, endpoint_url)]
    else:
        sidecars = sidecars_of(location, endpoint_url)
    return replace(options, sidecars=tuple(sidecars))


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
    return local_sidecar_paths(str(bags[0])) if len(bags) == 1 else []
