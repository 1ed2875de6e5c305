"""Bundles in object storage as the commands read them (``bundler.bundles.stored``)."""

from __future__ import annotations

from bundler.bundles.stored import altered_result as _altered_result
from bundler.bundles.stored import bundle_stream as _bundle_stream
from bundler.bundles.stored import verified_stored as _verified_stored

__all__ = [
    "_altered_result",
    "_bundle_stream",
    "_verified_stored",
]
