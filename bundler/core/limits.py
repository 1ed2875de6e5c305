"""Limits shared by the archive reader and the verifier's options.

``DEFAULT_MAX_BYTES`` caps the bytes an archive may expand to when nothing else is
given: the reader's default and ``VerifyOptions.max_bytes``, so both stay one number.
"""

from __future__ import annotations

from typing import Final

DEFAULT_MAX_BYTES: Final = 64 * 1024**3
