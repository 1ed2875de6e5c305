"""What the library's functions return: frozen results whose ``to_json()`` is the object
the command prints with ``--json`` (SPEC 7.1), and a progress report for callbacks.

The results of export, verify, audit and fixity are the implementation's own
(``ExportResult``, ``Verification``, ``Audit``, ``fixity.Summary``); the others are
here. Each keeps its record whole for ``to_json`` (a copy each call, so the frozen
result stays as it was) and shows a short ``repr``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from bundler.core.frozen import freeze, thaw


@dataclass(frozen=True)
class Progress:
    """How far a long operation is: ``done`` of ``total`` units (bytes, or bundles for
    fixity), ``total`` None until it is known; ``note`` a short line of detail."""

    done: int
    total: int | None = None
    note: str = ""
    unit: str = "bytes"


@dataclass(frozen=True)
class _Record:
    record: Mapping[str, Any] = field(repr=False)

    def __post_init__(self) -> None:
        # Frozen through and through (``bundler.core.frozen``): the record cannot be
        # changed in place, so ``to_json()`` always says what the attributes say.
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, dict | list):
                object.__setattr__(self, f.name, freeze(value))

    def to_json(self) -> dict[str, Any]:
        """The command's ``--json`` object (a fresh copy)."""
        return thaw(dict(self.record))  # type: ignore[no-any-return]


@dataclass(frozen=True)
class InspectResult(_Record):
    """What a bundle holds (``inspect --json``), unproven."""

    bundle_digest: str | None = None
    report_id: str | None = None
    bundle_schema: str | None = None
    signed: bool = False
    # What ``inspect`` prints besides the record: (label, value) lines, untrusted text.
    labels: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    # What the reader should know but the record does not say (a stored object without
    # sha256 metadata: inspected from its bytes, which cannot be shown to be the ones
    # uploaded).
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProofResult(_Record):
    """A case proof (``prove``): ``proof`` is the ``evalbook.case_proof.v1`` object, and
    ``out`` the file it was written to, if any. ``to_json`` is what ``prove --json``
    prints: the proof itself, or with ``out`` where it went."""

    case_id: str = ""
    leaf_index: int = 0
    tree_size: int = 0
    bundle_digest: str | None = None
    out: Path | None = None
    proof: Mapping[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class ProofCheckResult(_Record):
    """A proof that proves its case (``check-proof --json``)."""

    case_id: str = ""
    leaf_index: int = 0
    tree_size: int = 0
    bundle_digest: str = ""
    report_id: str = ""
    anchored: bool = False
    signer: str | None = None
    anchor: str = ""
    case_status: str | None = None
    case_score: float | None = None


@dataclass(frozen=True)
class SignResult(_Record):
    """A head signature written or stored (``sign --json``)."""

    bundle: str = ""
    bundle_digest: str | None = None
    report_id: str | None = None
    signature: str = ""
    state: str = "stored"


@dataclass(frozen=True)
class UploadResult(_Record):
    """A bundle stored in object storage (``upload --json``)."""

    url: str = ""
    status: str = ""
    size: int = 0
    sha256: str = ""


@dataclass(frozen=True)
class DownloadResult(_Record):
    """A stored bundle fetched and checked against its recorded SHA-256 (``download --json``)."""

    url: str = ""
    path: Path | None = None
    size: int = 0
    sha256: str = ""


@dataclass(frozen=True)
class RenderResult(_Record):
    """An auditor's page written (``render --json``)."""

    out: Path = Path()
    kind: str = ""


@dataclass(frozen=True)
class Listing:
    """One JSON object per line (``list --json``, ``reports --json``): ``items`` the lines."""

    items: tuple[Mapping[str, Any], ...] = field(repr=False)
    problems: int = 0  # lines that name a problem (reports: unreadable reports)
    # The implementation's objects behind the lines (``ReportEntry``, ``ListedBundle``).
    entries: tuple[Any, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", tuple(freeze(dict(item)) for item in self.items))

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.items)} items, {self.problems} with problems)"

    def to_json(self) -> list[dict[str, Any]]:
        """The command's JSON Lines, one object each (fresh copies)."""
        return [thaw(dict(item)) for item in self.items]


@dataclass(frozen=True, repr=False)
class BundleListing(Listing):
    """The bundles stored under an archive prefix (``list``)."""


@dataclass(frozen=True, repr=False)
class ReportListing(Listing):
    """The reports a store holds (``reports``)."""
