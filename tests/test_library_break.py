"""Trying to break the library face (SPEC 7.1): for every public function, calls that
replace one parameter of a good call with a value of the wrong type, a naive time, an
empty or NUL-holding path, a missing file (relative and absolute) or a special file
(a FIFO, a directory, /dev/null). Each call ends in a ``BundlerError`` whose message
names the parameter, or (for the functions that report a bad bundle instead of raising)
in a result that says it failed; never another exception, never a hang.
"""

from __future__ import annotations

import inspect
import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import EXPORTED_AT, REPO

import bundler

STORE = REPO / "fixtures" / "stores" / "main"
RUN = sorted((REPO / "fixtures" / "eval-banana" / "runs" / "default").iterdir())[0]
PROJECT = REPO / "fixtures" / "eval-banana" / "project"
NOWHERE = "http://127.0.0.1:9"  # an endpoint nothing listens on: no call may get that far

# What each parameter is, by name (one vocabulary across the functions).
INPUTS = {
    "store", "bundle", "run_dir", "project", "allowed_signers", "key", "result", "proof",
    "source", "signature",
}
OUTPUTS = {"out", "directory", "html", "dest", "ledger", "record"}
TIMES = {"exported_at", "retain_until"}
TEXTS = {
    "report_id", "principal", "identity", "case_id", "endpoint_url", "scheduler", "prefix",
    "url", "upload", "older_than", "sample", "retention_mode", "bundle_key", "reason",
}
INTEGERS = {"max_bytes", "limit", "limit_bytes", "workers"}
FLAGS = {"strict", "upload_record"}
DIGESTS = {"expect_bundle_digest", "expect_report_digest"}


@dataclass(frozen=True)
class World:
    tmp: Path
    archive: Path
    key: Path
    allowed: Path
    proof: Path
    record: Path
    fifo: Path
    empty_dir: Path
    bundles_dir: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    tmp = tmp_path_factory.mktemp("break")
    bundles_dir = tmp / "bundles"
    bundles_dir.mkdir()
    result = bundler.export(
        STORE, "rpt-clean", principal="alice", out=bundles_dir, exported_at=EXPORTED_AT
    )
    key = Ed25519PrivateKey.generate()
    key_path = tmp / "id_ed25519"
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    allowed = tmp / "allowed_signers"
    allowed.write_text(f"alice@example.org {public.decode()}\n")
    proof = bundler.prove(result.path, "accuracy-00003", out=tmp / "p.proof.json")
    record = tmp / "verification.json"
    import orjson

    record.write_bytes(orjson.dumps(bundler.verify(result.path).to_json()))
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    empty = tmp / "empty"
    empty.mkdir()
    assert proof.out is not None
    return World(tmp, result.path, key_path, allowed, proof.out, record, fifo, empty, bundles_dir)


def good_calls(w: World) -> dict[str, dict[str, Any]]:
    """A call of each function that gets as far as its work (or its network)."""
    return {
        "reports": {"store": STORE},
        "export": {
            "store": STORE,
            "report_id": "rpt-clean",
            "principal": "alice",
            "out": w.tmp / "never.tar.zst",
            "exported_at": EXPORTED_AT,
            "key": w.key,
            "upload": "s3://bucket/p",
            "endpoint_url": NOWHERE,
        },
        "export_eb": {"run_dir": RUN, "project": PROJECT, "out": w.tmp / "never-eb.tar.zst"},
        "verify": {
            "bundle": w.archive,
            "expect_bundle_digest": None,
            "allowed_signers": w.allowed,
            "identity": "alice@example.org",
            "max_bytes": 1 << 30,
        },
        "inspect": {"bundle": w.archive, "max_bytes": 1 << 30},
        "extract": {"bundle": w.archive, "directory": w.tmp / "never-bag", "strict": False},
        "audit": {"bundle": w.archive, "allowed_signers": w.allowed, "strict": False},
        "prove": {"bundle": w.archive, "case_id": "accuracy-00003", "out": w.tmp / "never.json"},
        "check_proof": {"proof": w.proof, "allowed_signers": w.allowed},
        "sign": {"bundle": w.archive, "key": w.key},
        "render": {"result": w.record, "html": w.tmp / "never.html"},
        "upload": {
            "bundle": w.archive,
            "prefix": "s3://bucket/p",
            "retain_until": EXPORTED_AT,
            "endpoint_url": NOWHERE,
        },
        "list_bundles": {"prefix": "s3://bucket/p", "report_id": "rpt-clean", "endpoint_url": NOWHERE},
        "download": {
            "url": "s3://bucket/k.tar.zst",
            "dest": w.tmp / "never-copy.tar.zst",
            "endpoint_url": NOWHERE,
        },
        "retire": {
            "source": w.bundles_dir,
            "bundle_key": "b.tar.zst",
            "reason": "restored from tape",
            "ledger": w.tmp / "never.sqlite",
        },
        "fixity": {
            "source": w.bundles_dir,
            "ledger": w.tmp / "never.sqlite",
            "record": w.tmp / "never.jsonl",
            "workers": 1,
            "limit": 1,
        },
    }


# Text no file name and no text can hold: a lone surrogate that stands for no raw byte
# (U+DC80..U+DCFF do, as Python decodes a file name that is not UTF-8).
UNENCODABLE = [("lone-high-surrogate", "\ud800"), ("lone-low-surrogate", "a\udfff")]


def bad_values(name: str, w: World) -> Iterator[tuple[str, Any]]:
    """(label, value) of each bad value for the parameter ``name``."""
    wrong_types: list[tuple[str, Any]] = [("int", 3), ("list", ["x"]), ("object", object())]
    if name in INPUTS | OUTPUTS | TIMES | TEXTS | DIGESTS:
        yield from UNENCODABLE
    if name in INPUTS or name in OUTPUTS:
        yield from wrong_types
        if name not in ("signature", "proof"):  # bytes are their contents, not a path
            yield ("bytes-path", b"x")
        yield from [("empty", ""), ("nul", "a\0b")]
        if name in INPUTS:
            yield from [
                ("missing-relative", "no/such/file"),
                ("missing-absolute", str(w.tmp / "absent")),
                ("fifo", w.fifo),
                ("dev-null", "/dev/null"),
            ]
            if name not in ("store", "run_dir", "project", "source"):
                yield ("directory", w.empty_dir)
        else:
            yield from [("fifo", w.fifo), ("dev-null", "/dev/null")]
            yield ("missing-parent", w.tmp / "absent" / "x")
    elif name in TIMES:
        yield from wrong_types
        yield from [
            ("naive", datetime(2026, 11, 30)),
            ("no-zone-text", "2026-11-30T00:00:00"),
            ("words", "yesterday"),
        ]
    elif name in TEXTS:
        yield from wrong_types
        yield from [("bytes", b"x"), ("empty", ""), ("nul", "a\0b")]
    elif name in INTEGERS:
        yield from [("text", "3"), ("bool", True), ("float", 3.0), ("negative", -1)]
    elif name in FLAGS:
        yield from [("text", "yes"), ("int", 1)]
    elif name in DIGESTS:
        yield from [("int", 3), ("malformed", "sha256:xyz"), ("uppercase", "sha256:" + "A" * 64)]
    elif name == "on_progress":
        yield ("not-callable", 3)
    elif name == "level":
        yield from [("text", "fast"), ("bool", True), ("zero", 0)]


def cases() -> list[tuple[str, str]]:
    """(function, parameter) for every parameter of every public function."""
    found = []
    for fname in sorted(n for n in bundler.__all__ if n[0].islower() and n != "__version__"):
        for pname in inspect.signature(getattr(bundler, fname)).parameters:
            # check_proof's source is only a label; retire's names what the ledger
            # recorded, which may be gone (test_retire_checks_its_parameters).
            if (fname, pname) in (("check_proof", "source"), ("retire", "source")):
                continue
            found.append((fname, pname))
    return found


class Hang(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise Hang()


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(30)
    try:
        return "returned", call()
    except bundler.BundlerError as exc:
        return "raised", exc
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _failed_result(value: Any) -> bool:
    code = getattr(value, "exit_code", None)
    return isinstance(code, int) and code != 0


REPORT_BAD_BUNDLES = {"verify", "extract", "audit"}  # they return a result with the error


@pytest.mark.parametrize(("function", "param"), cases())
def test_every_bad_value_is_a_bundler_error_naming_the_parameter(
    function: str, param: str, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EVALBOOK_PRINCIPAL", raising=False)
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    monkeypatch.chdir(world.tmp)  # relative paths resolve here
    before = sorted(p.name for p in world.tmp.iterdir())
    call = getattr(bundler, function)
    good = good_calls(world)[function]
    bad = list(bad_values(param, world))
    for label, value in bad:
        args = {**good, param: value}
        kind, got = _outcome(lambda a=args: call(**a))
        where = f"{function}({param}={label})"
        if kind == "raised":
            assert param in got.message, f"{where}: {got.message!r} does not name {param}"
            assert "\n" not in got.message, where
        else:
            assert function in REPORT_BAD_BUNDLES and param == "bundle", f"{where} returned {got!r}"
            assert _failed_result(got), f"{where}: {got!r}"
    # Nothing was written beside the inputs by a call that failed.
    assert sorted(p.name for p in world.tmp.iterdir()) == before


TEXT_KINDS = INPUTS | OUTPUTS | TIMES | TEXTS | DIGESTS


def text_cases() -> list[tuple[str, str]]:
    """(function, parameter) for every parameter that takes a path or a text, and
    check_proof's label ``source``."""
    return [(f, p) for f, p in cases() if p in TEXT_KINDS] + [
        ("check_proof", "source"),
        ("retire", "source"),
    ]


@pytest.mark.parametrize(("function", "param"), text_cases())
@pytest.mark.parametrize(("label", "value"), UNENCODABLE)
def test_a_lone_surrogate_is_a_parameter_error_naming_the_parameter(
    function: str, param: str, label: str, value: str, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused before any work (exit 2), as a NUL is: never a UnicodeEncodeError, and
    for verify, extract and audit no verdict either (it is the parameter that is bad)."""
    monkeypatch.chdir(world.tmp)
    before = sorted(p.name for p in world.tmp.iterdir())
    args = {**good_calls(world)[function], param: value}
    with pytest.raises(bundler.ParameterError) as caught:
        getattr(bundler, function)(**args)
    assert caught.value.param == param and caught.value.exit_code == 2
    assert caught.value.message.startswith(param), caught.value.message
    assert "\n" not in caught.value.message
    if param not in TIMES | {"retention_mode"}:  # those name their own form
        assert "surrogate" in caught.value.message, caught.value.message
    caught.value.message.encode("utf-8")  # the message itself is text
    assert sorted(p.name for p in world.tmp.iterdir()) == before


def path_cases() -> list[tuple[str, str]]:
    return [(f, p) for f, p in cases() if p in INPUTS]


@pytest.mark.parametrize(("function", "param"), path_cases())
def test_a_raw_byte_in_a_path_is_a_file_name_not_a_bad_parameter(
    function: str, param: str, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """"\\udcff" is the byte 0xff of a file name that is not UTF-8: a name like any
    other, here of a file that does not exist (or a label), never refused as text."""
    monkeypatch.chdir(world.tmp)
    args = {**good_calls(world)[function], param: "\udcff"}
    kind, got = _outcome(lambda: getattr(bundler, function)(**args))
    if kind == "raised":
        assert not isinstance(got, bundler.ParameterError), got.message
        assert got.exit_code == 3 and got.message.startswith(param), got.message
    else:
        assert function in REPORT_BAD_BUNDLES and _failed_result(got), got


def required_cases() -> list[tuple[str, str]]:
    """Every parameter a caller must give (no default)."""
    return [
        (f, p)
        for f, p in cases()
        if inspect.signature(getattr(bundler, f)).parameters[p].default is inspect.Parameter.empty
    ]


@pytest.mark.parametrize(("function", "param"), required_cases())
def test_none_for_a_required_parameter_is_a_parameter_error(
    function: str, param: str, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(world.tmp)
    args = {**good_calls(world)[function], param: None}
    with pytest.raises(bundler.ParameterError) as caught:
        getattr(bundler, function)(**args)
    assert caught.value.param == param and caught.value.message.startswith(f"{param}: ")


def test_no_assert_guards_the_library() -> None:
    """Under ``python -O`` an assert is skipped: none may stand between a caller's value
    and the work."""
    api = REPO / "bundler" / "api"
    found = [
        f"{path.name}:{n}"
        for path in sorted(api.glob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if line.strip().startswith("assert ")
    ]
    assert found == []


def test_every_function_and_parameter_is_tried(world: World) -> None:
    """The table above covers every parameter: a new one needs its bad values."""
    missing = [(f, p) for f, p in cases() if not list(bad_values(p, world))]
    assert missing == [], missing
    assert set(good_calls(world)) == {n for n in bundler.__all__ if n[0].islower() and n != "__version__"}


def test_a_naive_datetime_names_the_parameter_and_exits_2() -> None:
    with pytest.raises(bundler.ParameterError) as caught:
        bundler.export(STORE, "rpt-clean", principal="alice", exported_at=datetime(2026, 11, 30))
    assert caught.value.exit_code == 2 and caught.value.param == "exported_at"
    assert caught.value.message.startswith("exported_at: naive datetime")


def test_no_principal_reads_the_environment(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("EVALBOOK_PRINCIPAL", raising=False)
    with pytest.raises(bundler.ParameterError, match=r"principal: .*EVALBOOK_PRINCIPAL"):
        bundler.export(STORE, "rpt-clean", out=tmp_path)
    monkeypatch.setenv("EVALBOOK_PRINCIPAL", "alice")
    result = bundler.export(STORE, "rpt-clean", out=tmp_path, exported_at="2026-11-30T00:00:00Z")
    assert result.path.read_bytes() == world.archive.read_bytes()


@pytest.mark.parametrize(
    ("label", "value"),
    [("int", 3), ("bytes", b"x"), ("empty", ""), ("nul", "a\0b"), *UNENCODABLE],
)
def test_retire_checks_its_source(world: World, label: str, value: Any) -> None:
    args = {**good_calls(world)["retire"], "source": value}
    with pytest.raises(bundler.ParameterError) as caught:
        bundler.retire(**args)
    assert caught.value.param == "source", caught.value.message


def test_retire_refuses_a_blank_reason_and_a_missing_ledger(world: World) -> None:
    args = good_calls(world)["retire"]
    with pytest.raises(bundler.ParameterError, match=r"^reason: blank"):
        bundler.retire(**{**args, "reason": " \t"})
    with pytest.raises(bundler.InputError, match=r"^ledger: .*no such ledger") as caught:
        bundler.retire(**args)
    assert caught.value.param == "ledger" and caught.value.exit_code == 3
