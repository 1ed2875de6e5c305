"""The tool's name and version, as records and bundles name it."""

__version__ = "0.1.0"
TOOL_NAME = "evalbook-bundle"
