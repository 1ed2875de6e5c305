"""Lines and separators of an allowed_signers file: ssh-keygen, the Python and the Node
verifier read every shape alike (SPEC 11.3 "as ssh-keygen reads it", 15; docs/format.md
"allowed_signers lines").

ssh-keygen ends a line at LF alone: a CR, VT, FF, FS/GS/RS, NEL or U+2028 inside a line
is part of it, so a key after `# revoked<CR>` is a comment, never a trusted signer. Each
shape is a file whose one signer line, if read as ssh-keygen reads it, names the key
that signed: ``ssh-keygen -Y verify`` says Good exactly when that key is trusted, the
oracle. Both verifiers must give the same reading, never trust a key ssh-keygen does
not, and trust every key ssh-keygen does, unless they refuse the whole file (a line
ssh-keygen skips as invalid is refused by both, a documented difference).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

from test_allowed_signers_times import keygen_verifies

from bundler.core.errors import BundlerError
from bundler.trust import sshsig

ROOT = Path(__file__).resolve().parents[1]
KEY = ROOT / "conformance" / "keys" / "conformance.key"
TYPE, B64 = (ROOT / "conformance/keys/conformance.key.pub").read_text().split()[:2]
PUB = f"{TYPE} {B64}"
SSH_KEYGEN = "/usr/bin/ssh-keygen"
NODE = shutil.which("node") or "node"

SEPARATORS = ["\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
# name -> (file text, what ssh-keygen does with it: True trusts a@x's key)
SHAPES: dict[str, str] = {
    "plain": f"a@x {PUB}\n",
    "crlf": f"a@x {PUB}\r\n",
    "crlf with blank and comment lines": f"# signers\r\n\r\na@x {PUB}\r\n\r\n",
    "tab between fields": f"a@x\t{TYPE}\t{B64}\n",
    "cr between principals and key": f"a@x\r{PUB}\n",
    "cr inside the comment": f"a@x {PUB} who\rwhere\n",
    "no final newline": f"a@x {PUB}",
    "leading cr": f"\ra@x {PUB}\n",
    "cr inside the principals": f"b@x\ra@x {PUB}\n",
    "cr inside the key": f"a@x {TYPE}\r{B64}\n",
    "only cr as line ends": f"# c\ra@x {PUB}\r",
    **{f"comment then {sep!r}": f"# revoked{sep}a@x {PUB}\n" for sep in SEPARATORS},
    **{f"signer then {sep!r}": f"b@x {PUB}{sep}a@x {PUB}\n" for sep in SEPARATORS},
    **{f"{sep!r} between principals and key": f"a@x{sep}{PUB}\n" for sep in SEPARATORS[1:]},
    # ssh-keygen ends a line at a NUL (a C string): what follows it is never read there.
    "nul after a principal list": f"a@x,b\0 {PUB}\n",
    "nul after a negated principal": f"!a@x\0,* {PUB}\n",
    "nul inside a principal": f"a\0@x {PUB}\n",
    "nul after the key": f"a@x {PUB}\0 trailing\n",
    "nul line before a signer": f"\0\na@x {PUB}\n",
}
# Lines ssh-keygen reads as ending at a NUL: both verifiers refuse the whole file (exit 3).
NUL_SHAPES = [n for n in SHAPES if n.startswith("nul ")]


def _reading(signers: list[tuple[str, str]] | None) -> str:
    """'refused', 'trusted' (a@x with the signing key) or 'not trusted'."""
    if signers is None:
        return "refused"
    return "trusted" if ("a@x", B64) in signers else "not trusted"


def _python(text: str) -> str:
    try:
        read = sshsig.parse_allowed_signers(text, source="s")
    except BundlerError:
        return _reading(None)
    return _reading([(s.principals, base64.b64encode(s.key_blob).decode()) for s in read])


def _python_from_file(tmp: Path, text: str) -> str:
    path = tmp / "from-file"
    path.write_bytes(text.encode("utf-8"))
    try:
        read = sshsig.load_allowed_signers(path)
    except BundlerError:
        return _reading(None)
    return _reading([(s.principals, base64.b64encode(s.key_blob).decode()) for s in read])


def _node(texts: list[str]) -> list[str]:
    script = (
        "import { parseAllowedSigners } from './js/src/sshsig.mjs';"
        "const texts = JSON.parse(process.argv[1]);"
        "console.log(JSON.stringify(texts.map((t) => { try {"
        " return parseAllowedSigners(t, 's').map((s) =>"
        " [s.principals, Buffer.from(s.keyBlob).toString('base64')]);"
        " } catch { return null; } })));"
    )
    r = subprocess.run(
        [NODE, "--input-type=module", "-e", script, json.dumps(texts)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [_reading(None if s is None else [tuple(x) for x in s]) for s in json.loads(r.stdout)]


def test_every_line_shape_is_read_as_ssh_keygen_reads_it(keygen_signed: Path) -> None:
    names = sorted(SHAPES)
    node = dict(zip(names, _node([SHAPES[n] for n in names]), strict=True))
    rows = {
        n: (
            keygen_verifies(keygen_signed, SHAPES[n]),
            _python(SHAPES[n]),
            _python_from_file(keygen_signed, SHAPES[n]),
            node[n],
        )
        for n in names
    }
    disagree = {n: r for n, r in rows.items() if not r[1] == r[2] == r[3]}
    assert disagree == {}
    # Never a key ssh-keygen does not trust; every key it trusts, unless the whole file
    # is refused.
    wrongly_trusted = {n: r for n, r in rows.items() if not r[0] and r[1] == "trusted"}
    assert wrongly_trusted == {}
    missed = {n: r for n, r in rows.items() if r[0] and r[1] == "not trusted"}
    assert missed == {}
    assert {n: rows[n][1:] for n in NUL_SHAPES} == {n: ("refused",) * 3 for n in NUL_SHAPES}
    # The shapes that matter read as they must.
    for n in ("plain", "crlf", "crlf with blank and comment lines", "tab between fields",
              "cr between principals and key", "cr inside the comment", "no final newline"):  # fmt: skip
        assert rows[n] == (True, "trusted", "trusted", "trusted"), n
    for sep in SEPARATORS:
        assert rows[f"comment then {sep!r}"][0] is False
        assert rows[f"comment then {sep!r}"][1] != "trusted", sep
