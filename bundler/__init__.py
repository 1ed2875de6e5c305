"""evalbook-bundle: reproducibility bundles of EvalBook reports, verifiable offline."""

from __future__ import annotations

__version__ = "0.1.0"
TOOL_NAME = "evalbook-bundle"
