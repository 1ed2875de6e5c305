"""The signature names the commands share; finding and checking signatures is the
library's (``bundler.bundles.signatures``, ``bundler.trust.signatures``): the commands
print what the verifier's record lists."""

from __future__ import annotations

from bundler.core.errors import VerificationFailed

_NotVerified = VerificationFailed  # a bundle a command must verify first does not (exit 1)

__all__ = ["_NotVerified"]
