"""Names and numbers of the EvalBook contract that the store reader, the exporter and the
verifier all use (SPEC sections 3 and 4).

Kept in a module of their own, importing nothing of the package, so that verifying or
inspecting a bundle does not load the store reader and the exporter only to learn a string
or a limit.
"""

from typing import Final

# The ``schema`` of an EvalBook bundle's data/bundle.json (SPEC 4.2).
BUNDLE_SCHEMA: Final = "evalbook.reproducibility_bundle.v1"
# The access.json permissions export reads (SPEC 3.7).
EXPORT: Final = "report.export"
READ_BODY: Final = "dataset.read_body"
# A payload larger than this lives in the store's large-object area (SSO), never inline
# (SPEC 3, 3.3).
INLINE_PAYLOAD_MAX_BYTES: Final = 262_144
# A check's evidence_refs lists at most this many items; a check that scored more lists
# one evidence manifest instead (SPEC 3.1).
MAX_EVIDENCE_REFS: Final = 20

# Reports an importer of SPEC 16 wrote. Their artifact payloads are the run files (the
# .eval log; lm-eval's results and samples files; --dataset and --decision files): these
# are exported whatever their size, from blobs/ or sso/, never listed payload_at_sso, and
# redacted (no_dataset_read_body) whenever example bodies are, since they hold the
# examples and outputs. One rule for the exporter and the verifier's claims 10 and 11.
IMPORT_PRODUCERS: Final = frozenset(
    {"evalbook-bundle/import-inspect", "evalbook-bundle/import-lm-eval"}
)


def is_run_file(producer: object, kind: str) -> bool:
    """Whether a payload of ``kind`` in a report by ``producer`` is an imported run file."""
    return producer in IMPORT_PRODUCERS and kind == "artifact"
