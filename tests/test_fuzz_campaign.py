"""The bounded fuzz campaign (issue 13, Deliver 3).

Hypothesis mutates one JSON field (or adds or drops one) of a document inside a real
exported bundle: bundle.json, a case line, a check result, the suite, a dataset
manifest, an evidence manifest, the report body, and in an eval-banana bundle the run's
report.json and check files; then every digest is resealed (tests/repack.py, plus the
digest of the edited file wherever bundle.json names it) so the edit reaches the deep
checks instead of stopping at a digest. Each mutant goes through verify, inspect,
extract, prove and audit, and mutated proof files through check-proof, as library
calls; a sample also runs through the CLI as a subprocess, measured against the
resource budget (tests/test_resource_budget.py).

Invariants: no exception other than a BundlerError subclass (an unexpected type is a
traceback for the user), no example over its deadline, no sampled command over 300 MB.

The default is about a minute of CI; ``make fuzz-long`` (``FUZZ_EXAMPLES``) runs the
same campaign for longer.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import repack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_resource_budget import BUDGET_BYTES, run_measured

from bundler.core import canonical
from bundler.core.errors import BundlerError
from bundler.evalbanana.export import EbExportConfig, export_eb_bundle

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "12"))
# One example runs five commands over a small bundle: well under a second normally.
EXAMPLE_DEADLINE_SECONDS = 60
CLI_SAMPLE_EVERY = int(os.environ.get("FUZZ_CLI_EVERY", "6"))
REPO = Path(__file__).resolve().parents[1]
EB_RUN = REPO / "fixtures" / "eval-banana" / "runs" / "flat"
EB_PROJECT = REPO / "fixtures" / "eval-banana" / "project"
BASES = ["rpt-evidence-manifest/alice", "rpt-every-reason/bob", "rpt-retention/alice", "eb"]

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,  # enforced per example by an alarm: a hang must fail, not just be slow
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
    derandomize=os.environ.get("FUZZ_RANDOM") is None,
)


class ExampleTimeout(Exception):
    """An example outlived EXAMPLE_DEADLINE_SECONDS."""


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    def expire(signum: int, frame: object) -> None:
        raise ExampleTimeout(f"example still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# ------------------------------------------------------------------------ mutations

_TEXT = st.text(
    alphabet=st.sampled_from(
        [*"aZ09_-.@/:", "\x1b", "\r", "\n", "\u202e", "\u200b", "\u0661", "\ufeff", "é", "\x00"]
    ),
    max_size=40,
)
_HOSTILE_STRINGS = st.sampled_from(
    [
        "",
        "sha256:" + "0" * 64,
        "sha256:" + "A" * 64,
        "sha256:" + "f" * 63,
        "x@1",
        "x@01",
        "x@\u0661",
        "../etc/passwd",
        "data/../data/bundle.json",
        "data/bundle.json",
        "a" * 5000,
        "\x1b[2J\x1b[HVerdict: VERIFIED",
        "inline",
        "sso",
        "traces",
        "payload_at_sso",
        "case_limit",
        "missing_from_store",
        "2026-11-30T00:00:00Z",
    ]
)
_NUMBERS = st.one_of(
    st.integers(min_value=-(2**53) - 5, max_value=2**53 + 5),
    st.sampled_from([0, -1, 1, 20_000, 20_001, 262_144, 262_145, 10**9, 100_000_000]),
    st.floats(allow_nan=False, allow_infinity=False),
)
_SCALARS = st.one_of(st.none(), st.booleans(), _NUMBERS, _TEXT, _HOSTILE_STRINGS)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_TEXT, inner, max_size=4)),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every field of a JSON value, depth first, the root included."""
    yield prefix
    if isinstance(value, dict):
        for key in value:
            yield from _paths(value[key], (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _mutate(value: Any, data: st.DataObject) -> Any:
    """``value`` with one field replaced, dropped, duplicated or joined by a new one."""
    paths = list(_paths(value))
    path = data.draw(st.sampled_from(paths), label="path")
    action = data.draw(
        st.sampled_from(["replace", "replace", "drop", "add", "dup"]), label="action"
    )
    if not path:
        return data.draw(_VALUES, label="root")
    parent = value
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if action == "replace":
        parent[last] = data.draw(_VALUES, label="new value")
    elif action == "drop":
        del parent[last]
    elif action == "add" and isinstance(parent, dict):
        parent[data.draw(_TEXT, label="new key")] = data.draw(_VALUES, label="new value")
    elif action == "dup" and isinstance(parent, list):
        parent.insert(last, json.loads(json.dumps(parent[last])))
    else:
        parent[last] = data.draw(_VALUES, label="new value")
    return value


def _targets(eb: repack.EditableBag) -> list[str]:
    """The JSON documents of a bag worth mutating (case files count once per line)."""
    out = []
    for path, data in eb.files.items():
        if not path.startswith("data/") or "/examples/" in path:
            continue
        if path.endswith(".jsonl"):
            out += [f"{path}#{i}" for i in range(min(3, len(data.splitlines())))]
        elif path.endswith(".json") or data.startswith(b'{"check_id":'):
            out.append(path)
    return sorted(out)


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _replace_strings(value: Any, old: str, new: str) -> Any:
    if isinstance(value, dict):
        return {k: _replace_strings(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_strings(v, old, new) for v in value]
    return new if value == old else value


def _apply(eb: repack.EditableBag, target: str, data: st.DataObject) -> None:
    path, _, line = target.partition("#")
    if line:
        lines = eb.lines(path)
        index = int(line)
        value = _mutate(json.loads(lines[index]), data)
        lines[index] = _dumps(value)
        eb.set_lines(path, lines)
    else:
        eb.files[path] = _dumps(_mutate(json.loads(eb.files[path]), data))


def _dumps(value: Any) -> bytes:
    # A value JCS cannot write (an integer past 2^53) is written as plain JSON: the
    # reader must refuse it, not crash on it.
    try:
        return canonical.dumps(value)
    except BundlerError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode(
            "utf-8", "surrogatepass"
        )


def _reseal(
    eb: repack.EditableBag, target: str, before: dict[str, bytes], *, evalbook: bool
) -> None:
    """Make bundle.json and the tag files follow an edit of another document.

    For an EvalBook bundle repack recomputes every digest, count and the case tree; for
    an eval-banana bundle every string in bundle.json equal to the edited file's old
    digest becomes the new one. An edit of bundle.json itself is kept as made; only the
    tag files follow it.
    """
    if not target.startswith("data/bundle.json"):
        if evalbook:
            with contextlib.suppress(BundlerError, KeyError, TypeError, ValueError, AttributeError):
                repack.refresh_bundle_json(eb)
        else:
            bundle = json.loads(eb.files["data/bundle.json"])
            for path, old in before.items():
                if eb.files.get(path) != old:
                    bundle = _replace_strings(bundle, _sha(old), _sha(eb.files[path]))
            eb.files["data/bundle.json"] = _dumps(bundle)
    try:
        repack.refresh_tag_files(eb, head=evalbook)
    except (BundlerError, KeyError, TypeError, ValueError, AttributeError):
        repack.refresh_tag_files(eb, head=False)


# ---------------------------------------------------------------------- the commands


def _first_case_id(eb: repack.EditableBag) -> str:
    for path in sorted(eb.files):
        if path.startswith("data/cases/") and eb.files[path]:
            with contextlib.suppress(ValueError, TypeError, KeyError, IndexError):
                return str(json.loads(eb.lines(path)[0])["case_id"])
    return "accuracy-00000"


def run_library_commands(archive: Path, case_id: str, work: Path) -> dict[str, str]:
    """verify, inspect, extract, prove, audit on ``archive``; each one's outcome."""
    from bundler.bundles.audit import audit_bundle
    from bundler.bundles.extract import extract_bundle
    from bundler.bundles.inspect import inspect_bundle
    from bundler.bundles.proof import prove_case
    from bundler.bundles.verify import verify_bundle
    from bundler.core.claims import VerifyOptions
    from bundler.trust.proof import check_proof, proof_file_bytes

    options = VerifyOptions()
    outcomes: dict[str, str] = {}

    def attempt(name: str, action: Any) -> Any:
        try:
            result = action()
        except BundlerError as exc:
            outcomes[name] = f"{type(exc).__name__}: {exc.message}"
            return None
        outcomes[name] = "ok"
        return result

    attempt("verify", lambda: verify_bundle(str(archive), options))
    attempt("inspect", lambda: inspect_bundle(str(archive)))
    attempt("extract", lambda: extract_bundle(str(archive), work / "extracted", options))
    proof = attempt("prove", lambda: prove_case(str(archive), case_id, options=options))
    if proof is not None:
        data = proof_file_bytes(proof)
        attempt("check-proof", lambda: check_proof(data, source="proof.json"))
    attempt("audit", lambda: audit_bundle(str(archive), options))
    return outcomes


@pytest.fixture(scope="module")
def bases(bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("fuzz-bases")
    made = {key: bundles[key] for key in BASES if key != "eb"}
    eb_out = out / "eb.tar.zst"
    export_eb_bundle(
        EbExportConfig(EB_RUN, EB_PROJECT, datetime(2026, 11, 30, 3, tzinfo=UTC), out=eb_out)
    )
    made["eb"] = eb_out
    return made


@pytest.fixture(scope="module")
def clean_proof(bundles: dict[str, Path]) -> dict[str, Any]:
    from bundler.bundles.proof import prove_case

    return prove_case(str(bundles["rpt-evidence-manifest/alice"]), "accuracy-00000")


_counter = {"examples": 0}


@pytest.mark.parametrize("base", BASES)
@FUZZ
@given(data=st.data())
def test_a_mutated_document_never_crashes_any_command(
    base: str, bases: dict[str, Path], data: st.DataObject
) -> None:
    eb = repack.open_bundle(bases[base])
    before = dict(eb.files)
    target = data.draw(st.sampled_from(_targets(eb)), label="document")
    _apply(eb, target, data)
    _reseal(eb, target, before, evalbook=base != "eb")
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        work = Path(tmp)
        archive = work / "mutant.tar.zst"
        archive.write_bytes(repack.compress(repack.tar_bytes(eb), level=1))
        with deadline(EXAMPLE_DEADLINE_SECONDS):
            run_library_commands(archive, _first_case_id(eb), work)
        _counter["examples"] += 1
        if _counter["examples"] % CLI_SAMPLE_EVERY == 0:
            for args in (["verify", str(archive)], ["audit", str(archive)]):
                run = run_measured(args, work)
                assert "Traceback" not in run.stderr, run.stderr[-2000:]
                assert not run.killed and run.peak_bytes < BUDGET_BYTES, run


@FUZZ
@given(data=st.data())
def test_a_mutated_proof_never_crashes_check_proof(
    clean_proof: dict[str, Any], data: st.DataObject
) -> None:
    from bundler.trust.proof import check_proof

    proof = _mutate(json.loads(json.dumps(clean_proof)), data)
    raw = _dumps(proof) + data.draw(st.sampled_from([b"", b"\n", b"\n\n", b" "]), label="tail")
    with deadline(EXAMPLE_DEADLINE_SECONDS), contextlib.suppress(BundlerError):
        check_proof(raw, source="proof.json")
