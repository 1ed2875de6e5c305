"""An import refuses up front what the export of its report would refuse (SPEC 16, 5).

The export of a report refuses, whatever the store holds beside it, a member name the
bundle's reader refuses (the name rules, a collision after NFC and case folding, more
members or name bytes than a bundle holds) and a document over the reader's caps (one
document, the bag's kept bytes, its JSON values). Those depend only on the documents of
the report, so ``check_exportable`` asks the exporter's own ledger
(``evalbook.bagwriter.BagAdmission``) about every member a full export of the staged
report writes, before anything is moved into the store: a refused import writes
nothing. ``data/bundle.json`` and the tag files, which the export itself composes (its
time, principal and lists), are not members of the store and are not counted here.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from bundler.archive.bag_reader import CHUNK, EVIDENCE_MANIFEST_PREFIX
from bundler.core.errors import InputError, StoreError
from bundler.evalbook.bagwriter import BagAdmission
from bundler.evalbook.export import bag_top
from bundler.importers.storewriter import Staged

# The export's order of members (evalbook.export._fill_bag): the report, the suite,
# scorers, dataset manifests, check results, case files, examples, payloads.
_ORDER = (
    "data/report/",
    "data/suite/",
    "data/scorers/",
    "manifest",
    "data/checks/",
    "data/cases/",
    "examples",
    "data/blobs/",
)


def _member(relpath: str, report_dir: str) -> str | None:
    """The bag member a full export writes for the store file at ``relpath``."""
    if relpath.startswith(report_dir + "/"):
        rest = relpath[len(report_dir) + 1 :]
        return f"data/report/{rest}" if "/" not in rest else f"data/{rest}"
    if relpath.startswith("suites/"):
        return "data/suite/" + relpath.removeprefix("suites/")
    if relpath.startswith(("scorers/", "datasets/")):
        return "data/" + relpath
    if relpath.startswith(("blobs/", "sso/")):
        return "data/blobs/" + relpath.split("/", 1)[1]
    return None  # access.json: not in a bundle


def _rank(member: str) -> int:
    if member.startswith("data/datasets/"):
        return _ORDER.index("examples" if "/examples/" in member else "manifest")
    return next(i for i, prefix in enumerate(_ORDER) if member.startswith(prefix))


def check_exportable(staged: Iterable[Staged], report_id: str, where: str) -> None:
    """Refuse (InputError naming ``where``, the member and the rule) a staged report
    whose full export the exporter would refuse; ``staged`` is every file the import
    wrote. A file is read only when its bytes are not in memory and its first bytes are
    not given or the reader would keep it."""
    members = []
    for f in staged:
        member = _member(f.relpath, f"reports/{report_id}")
        if member is not None:
            members.append((_rank(member), member, f))
    admission = BagAdmission(bag_top(report_id))
    try:
        for _, member, f in sorted(members, key=lambda m: m[:2]):
            if f.data is not None:
                data = f.data
            elif f.head is not None and len(f.head) >= len(EVIDENCE_MANIFEST_PREFIX):
                admission.file(member, f.head, -1, partial(_read, f.path))
                continue
            else:
                data = _read(f.path)
            admission.file(member, data[:CHUNK], len(data), partial(bytes, data))
    except StoreError as exc:
        rule = exc.message.removesuffix(", export refused")
        raise InputError(
            f"{where}: its report could never be exported: {rule}; import refused"
        ) from None


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()
