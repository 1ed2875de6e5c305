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
