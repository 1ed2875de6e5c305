"""The library's documentation runs as written: every example of docs/library.md (one
script, the storage examples against SeaweedFS) and the README's "As a library" snippet,
each twice from the repository's root, as a new user would paste them (SPEC 7.1)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO
from s3_server import Server

FENCE = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def _blocks(text: str) -> list[str]:
    return [m.group(1) for m in FENCE.finditer(text)]


def _run_twice(script: str, env: dict[str, str]) -> list[str]:
    outputs = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=REPO,
            env=env,
            capture_output=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr.decode()
        outputs.append(done.stdout.decode())
    return outputs


def test_every_example_of_docs_library_md_runs_twice(
    s3_server: Server, bucket: str, tmp_path: Path
) -> None:
    text = (REPO / "docs" / "library.md").read_text("utf-8")
    blocks = _blocks(text)
    # Every public function has an example: its name appears called in some block.
    import bundler

    functions = [n for n in bundler.__all__ if n[0].islower() and n != "__version__"]
    script = "\n".join(blocks)
    for name in functions:
        assert f"bundler.{name}(" in script, f"docs/library.md has no example of {name}"
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL_S3": s3_server.endpoint,
        "EVALBOOK_BUCKET": bucket,
        "TMPDIR": str(tmp_path),
    }
    env.pop("EVALBOOK_PRINCIPAL", None)
    first, second = _run_twice(script, env)
    assert "ReportListing(7 items, 0 with problems)" in first
    assert "2 exported_at: naive datetime" in first
    assert "error 3" in first and "consistent 0" in first
    assert "pass 1.0 False" in first and "rpt-clean.verification.html verification" in first
    assert first.count("uploaded") == 1 and second.count("uploaded") == 1
    assert list(tmp_path.iterdir()) == []  # the examples clean up after themselves


def test_the_readme_library_snippet_runs_twice(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text("utf-8")
    section = readme[readme.index("## As a library") :]
    section = section[: section.index("\n## ", 3)]
    (snippet,) = _blocks(section)
    for promise in ("key=", "allowed_signers=", "expect_bundle_digest=", "bundler.fixity("):
        assert promise in snippet
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("EVALBOOK_PRINCIPAL", None)
    for output in _run_twice(snippet, env):
        signer, counts = output.splitlines()
        assert signer.startswith("signed by alice@example.org, key SHA256:")
        assert counts == "{'pass': 1, 'fail': 0, 'missing': 0, 'error': 0} 0"
    assert list(tmp_path.iterdir()) == []
