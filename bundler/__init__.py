"""evalbook-bundle: reproducibility bundles of EvalBook reports, verifiable offline."""

from __future__ import annotations

from bundler.core.version import TOOL_NAME, __version__

__all__ = ["TOOL_NAME", "__version__"]
