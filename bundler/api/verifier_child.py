"""The verifier as ``--check`` runs it: in a process of its own, beside the re-import.

``python -m bundler.api.verifier_child PARENT verify BUNDLE`` (or ``PARENT extract
BUNDLE DIR``; PARENT the pid of the process it must not outlive) verifies as
``evalbook-bundle verify`` (or ``extract``) does and writes one short JSON line, what
``--check`` needs of the verdict: the exit code, the error of a bundle that
could not be read, the number of failed claims and the first few of them, and the
SHA-256 of the archive read. The verification record itself, which for a hostile bundle
is a hundred megabytes of JSON and more, is never written, so the reader never parses it.

Exit status 0 whenever that line was written (the verdict is in it); anything else, or
no line, is a verifier that did not finish.
"""

from __future__ import annotations

import sys
from typing import Any

import orjson

# The failed claims named, at most: the first few say where to look; the count is whole.
NAMED_FAILURES = 10


def outcome(argv: list[str]) -> dict[str, Any]:
    from bundler.api import bundles
    from bundler.core.errors import BundlerError

    try:
        if argv[0] == "verify" and len(argv) == 2:
            result = bundles.verify(argv[1])
        elif argv[0] == "extract" and len(argv) == 3:
            result = bundles.extract(argv[1], argv[2])
        else:
            raise SystemExit(f"usage: {__name__} verify BUNDLE | extract BUNDLE DIRECTORY")
    except BundlerError as exc:
        return {"exit_code": exc.exit_code, "error": exc.message}
    failed = [c for c in result.claims if c.state.value == "failed"]
    return {
        "exit_code": result.exit_code,
        "error": result.error,
        "failed": len(failed),
        "failures": [
            {"group": c.group, "path": c.path, "detail": c.detail}
            for c in failed[:NAMED_FAILURES]
        ],
        "archive_sha256": result.archive.sha256 if result.archive is not None else None,
    }


if __name__ == "__main__":
    from bundler.core.orphans import die_with_parent

    die_with_parent(int(sys.argv[1]))
    sys.stdout.buffer.write(orjson.dumps(outcome(sys.argv[2:])) + b"\n")
