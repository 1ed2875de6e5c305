"""The `evalbook-bundle` command line (SPEC section 7). The only package that imports Click.

Each command parses its options into a config object, calls one library function and
prints the result: results on stdout (JSON Lines with --json), progress, warnings and
errors on stderr. Errors become exit codes in one place, ``app.main``. One module per
command group; importing this package registers them all on the ``cli`` group.
"""

from bundler.cli import (
    audit,
    export,
    fixity,
    importers,
    proof,
    render,
    reports,
    storage,
    tools,
    verifier_page,
    verify,
)
from bundler.cli.app import Terminated, _on_sigterm, cli, main
from bundler.cli.common import _exported_at

__all__ = [
    "Terminated",
    "_exported_at",
    "_on_sigterm",
    "audit",
    "cli",
    "export",
    "fixity",
    "importers",
    "main",
    "proof",
    "render",
    "reports",
    "storage",
    "tools",
    "verifier_page",
    "verify",
]
