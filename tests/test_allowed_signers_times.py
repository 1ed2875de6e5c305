"""valid-after/valid-before spellings: ssh-keygen, the Python and the Node verifier read
every one the same (SPEC 11.3, 15; docs/format.md "allowed_signers times").

Each spelling is a past moment in ``valid-after`` of a signer line: ssh-keygen -Y verify
says Good exactly when it parses, so its exit code is the oracle for the parse. One
spelling glibc's strptime lets through (a space standing for a digit's leading zero) is
refused by both verifiers, a documented difference.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from bundler.core.errors import BundlerError
from bundler.trust import sshsig

ROOT = Path(__file__).resolve().parents[1]
KEY = ROOT / "conformance" / "keys" / "conformance.key"
PUB = " ".join((ROOT / "conformance/keys/conformance.key.pub").read_text().split()[:2])
SSH_KEYGEN = "/usr/bin/ssh-keygen"
NODE = shutil.which("node") or "node"

SPELLINGS = [
    "20200101", "20200101Z", "20200101z", "20200101UTC", "20200101utc", "20200101uTc",
    "202001010000", "202001010000z", "20200101000000Z", "20200101000000z",
    "20200230Z", "20200231Z", "20200101235960Z", "20200101235961Z", "19700101000001Z",
    "20201301Z", "20200001Z", "20200100Z", "20200132Z", "20200101240000Z",
    "20200101006000Z", "20200101235962Z", "19700101Z", "19691231Z", "2020010Z",
    "20200101ZZ", "2020-1-1Z", " 2020101Z", "+2020101Z", "Z", "UTC", "20200101\u0661Z",
    "2020010112Z", "20200101 UTC", "00800101Z",
]  # fmt: skip
GLIBC_ONLY = ["2020 101Z"]


def _keygen_accepts(tmp: Path, value: str) -> bool:
    return keygen_verifies(tmp, f'a@x valid-after="{value}" {PUB}\n')


def keygen_verifies(tmp: Path, text: str) -> bool:
    """Whether ``ssh-keygen -Y verify`` trusts a@x's signature of ``tmp/m`` (``tmp``:
    the ``keygen_signed`` fixture) with the allowed_signers file ``text``."""
    if not Path(SSH_KEYGEN).is_file():
        pytest.fail(f"{SSH_KEYGEN} is required")
    signers = tmp / "signers"
    signers.write_bytes(text.encode("utf-8"))
    r = subprocess.run(
        [SSH_KEYGEN, "-Y", "verify", "-f", signers, "-I", "a@x", "-n", "ns", "-s", tmp / "m.sig"],
        input=b"m\n",
        capture_output=True,
        check=False,
    )
    return r.returncode == 0


def _python_reads(value: str) -> int | None:
    try:
        signers = sshsig.parse_allowed_signers(f'a@x valid-after="{value}" {PUB}\n', source="s")
    except BundlerError:
        return None
    return signers[0].valid_after


def _node_reads(values: list[str]) -> list[int | None]:
    script = (
        "import { parseAllowedSigners } from './js/src/sshsig.mjs';"
        "const [pub, values] = JSON.parse(process.argv[1]);"
        "console.log(JSON.stringify(values.map((v) => { try {"
        " return parseAllowedSigners(`a@x valid-after=\"${v}\" ${pub}\\n`, 's')[0].validAfter;"
        " } catch { return null; } })));"
    )
    r = subprocess.run(
        [NODE, "--input-type=module", "-e", script, json.dumps([PUB, values])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(r.stdout))


def test_every_spelling_is_read_alike_by_ssh_keygen_python_and_node(keygen_signed: Path) -> None:
    node = _node_reads(SPELLINGS + GLIBC_ONLY)
    rows = []
    for value, by_node in zip(SPELLINGS + GLIBC_ONLY, node, strict=True):
        by_python = _python_reads(value)
        keygen = _keygen_accepts(keygen_signed, value)
        rows.append((value, keygen, by_python, by_node))
    differ = [
        r for r in rows if r[2] != r[3] or (r[0] not in GLIBC_ONLY and (r[2] is not None) != r[1])
    ]
    assert differ == []
    assert {r[0] for r in rows if r[2] is not None} >= {"20200101z", "20200101uTc", "20200230Z"}
    assert all(r[1] and r[2] is None for r in rows if r[0] in GLIBC_ONLY)
    by = {r[0]: r[2] for r in rows}
    assert by["20200101z"] == by["20200101Z"] == by["20200101UTC"] == 1577836800
    assert (
        by["20200230Z"] == by["20200301Z"] if "20200301Z" in by else by["20200230Z"] == 1583020800
    )
