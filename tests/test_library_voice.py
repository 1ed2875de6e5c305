"""The library's voice, by class of input (SPEC 7.1, 8): every integer parameter is
bounded; a wrong type never reaches an assert; a missing stored object is "not found"
(3), not a storage failure (5); messages name parameters, never command-line options,
and name what was given; audit answers for an unreadable bundle as verify does; a
proof that proves nothing has the record check-proof prints; results are frozen all
the way down.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import EXPORTED_AT, run_cli

import bundler
from bundler.core.errors import BundlerError, InputError, ParameterError, StorageError
from bundler.core.frozen import FrozenDict, FrozenList, freeze

REPO = Path(__file__).resolve().parent.parent
STORE = REPO / "fixtures" / "stores" / "main"
NOWHERE = "http://127.0.0.1:9"  # nothing listens: a call that got that far would fail late
HUGE = (2**63, 2**64, 10**40, 10**5000)


def _refused(call: Any, param: str, kind: type[BundlerError] = ParameterError) -> BundlerError:
    """``call()`` raises ``kind`` whose one-line message begins with ``param``."""
    with pytest.raises(BundlerError) as caught:
        call()
    exc = caught.value
    assert isinstance(exc, kind), f"{type(exc).__name__}: {exc}"
    assert exc.message.startswith(f"{param}"), exc.message
    assert "\n" not in exc.message and len(exc.message) < 600, exc.message
    assert "--" not in exc.message.split(":", 1)[0], exc.message
    return exc


# ------------------------------------------------------------------ integers, bounded


def _int_calls(bundle: Path, tmp: Path) -> dict[str, Any]:
    ledger = tmp / "ledger.sqlite"
    return {
        "fixity.limit": ("limit", lambda v: bundler.fixity(tmp, ledger=ledger, workers=1, limit=v)),
        "fixity.limit_bytes": (
            "limit_bytes",
            lambda v: bundler.fixity(tmp, ledger=ledger, workers=1, limit_bytes=v),
        ),
        "fixity.workers": ("workers", lambda v: bundler.fixity(tmp, ledger=ledger, workers=v)),
        "verify.max_bytes": ("max_bytes", lambda v: bundler.verify(bundle, max_bytes=v)),
        "inspect.max_bytes": ("max_bytes", lambda v: bundler.inspect(bundle, max_bytes=v)),
        "audit.max_bytes": ("max_bytes", lambda v: bundler.audit(bundle, max_bytes=v)),
        "extract.max_bytes": (
            "max_bytes",
            lambda v: bundler.extract(bundle, tmp / "x", max_bytes=v),
        ),
        "export.level": (
            "level",
            lambda v: bundler.export(
                STORE,
                "rpt-clean",
                principal="alice",
                out=tmp / "o.tar.zst",
                level=v,
                exported_at=EXPORTED_AT,
            ),
        ),
    }


CALLS = (
    "fixity.limit", "fixity.limit_bytes", "fixity.workers", "verify.max_bytes",
    "inspect.max_bytes", "audit.max_bytes", "extract.max_bytes", "export.level",
)  # fmt: skip


@pytest.mark.parametrize("value", HUGE, ids=("2**63", "2**64", "10**40", "10**5000"))
@pytest.mark.parametrize("call", CALLS)
def test_huge_integers_are_refused_naming_the_parameter(
    bundles: dict[str, Path], tmp_path: Path, call: str, value: int
) -> None:
    param, run = _int_calls(bundles["rpt-clean/alice"], tmp_path)[call]
    exc = _refused(lambda: run(value), param)
    assert exc.exit_code == 2 and "out of range" in exc.message
    # Nothing was created: no ledger, no output, no extracted directory.
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_largest_allowed_limit_runs_and_keeps_its_ledger(tmp_path: Path) -> None:
    ledger = tmp_path / "l.sqlite"
    (tmp_path / "archive").mkdir()
    summary = bundler.fixity(tmp_path / "archive", ledger=ledger, workers=1, limit=2**63 - 1)
    assert summary.exit_code == 0 and ledger.is_file()


# ------------------------------------------------------------- None and wrong types


@pytest.mark.parametrize("value", [None, 1, 1.5, b"x.html", ["x"], {"x": 1}, True])
def test_render_html_of_a_wrong_type_is_a_parameter_error(tmp_path: Path, value: object) -> None:
    record = {"schema": "evalbook.verification.v1"}
    exc = _refused(lambda: bundler.render(record, html=value), "html")  # type: ignore[arg-type]
    assert exc.exit_code == 2
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------- missing stored objects: 3


@pytest.mark.parametrize("command", ["inspect", "prove", "sign", "download"])
def test_a_missing_stored_object_keeps_its_command_line_exit_and_words(
    s3_server: Any, bucket: str, tmp_path: Path, command: str
) -> None:
    """The command line is unchanged: exit 3, the message naming the URL as given."""
    url = f"s3://{bucket}/arch/reports/bundles/rpt-x/{'cd' * 32}.tar.zst"
    key = tmp_path / "key"
    keygen = shutil.which("ssh-keygen")
    assert keygen is not None
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    args = {
        "inspect": ["inspect", url],
        "prove": ["prove", url, "--case", "case-1"],
        "sign": ["sign", url, "--key", str(key)],
        "download": ["download", url, str(tmp_path / "d.tar.zst")],
    }[command]
    done = run_cli(*args, "--endpoint-url", s3_server.endpoint)
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith(f"evalbook-bundle: error: {url}: ".encode()), done.stderr
    assert b"no such object" in done.stderr and done.stderr.count(b"\n") == 1


@pytest.mark.parametrize(
    ("kind", "code"), [("not_found", 3), ("refused", 5), ("transient", 5), ("unverifiable", 5)]
)
def test_storage_error_exit_code_follows_its_kind(kind: str, code: int) -> None:
    from bundler.storage import AlteredAtRest

    assert StorageError("x", kind=kind).exit_code == code
    # A subclass keeps its own code: bytes altered at rest are a failed verification.
    url = f"s3://bkt/k{'0' * 3}.tar.zst"
    assert AlteredAtRest("x", url=url, recorded="a", observed="b").exit_code == 1


@pytest.mark.parametrize(
    "command", ["verify", "inspect", "audit", "extract", "prove", "sign", "download"]
)
def test_a_missing_stored_object_is_not_found(
    s3_server: Any, bucket: str, tmp_path: Path, command: str
) -> None:
    url = f"s3://{bucket}/arch/reports/bundles/rpt-x/{'ab' * 32}.tar.zst"
    ep = s3_server.endpoint
    key = tmp_path / "key"  # never read: the object is looked for first
    calls: dict[str, Any] = {
        "verify": lambda: bundler.verify(url, endpoint_url=ep),
        "inspect": lambda: bundler.inspect(url, endpoint_url=ep),
        "audit": lambda: bundler.audit(url, endpoint_url=ep),
        "extract": lambda: bundler.extract(url, tmp_path / "bag", endpoint_url=ep),
        "prove": lambda: bundler.prove(url, "case-1", endpoint_url=ep),
        "sign": lambda: bundler.sign(url, key=key, endpoint_url=ep),
        "download": lambda: bundler.download(url, tmp_path / "d.tar.zst", endpoint_url=ep),
    }
    if command == "sign":
        keygen = shutil.which("ssh-keygen")
        assert keygen is not None
        subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    try:
        result = calls[command]()
    except BundlerError as exc:
        # Not found is the input's trouble: the not-found class (an InputError), its
        # message beginning with the parameter; StorageError is the service's (exit 5).
        assert isinstance(exc, bundler.NotFound), f"{type(exc).__name__}[{exc.exit_code}]: {exc}"
        assert isinstance(exc, InputError) and not isinstance(exc, StorageError)
        assert exc.exit_code == 3, f"{type(exc).__name__}[{exc.exit_code}]: {exc}"
        param = "url" if command == "download" else "bundle"
        assert exc.param == param and exc.message.startswith(f"{param}: {url}: "), exc.message
        assert "no such object" in exc.message, exc.message
    else:
        assert command in ("verify", "audit", "extract"), f"{command} did not refuse"
        assert not (tmp_path / "bag").exists()
        assert result.exit_code == 3, result
        assert result.to_json()["exit_code"] == 3


# ------------------------------------------------------- parameters, not options


def test_messages_name_parameters_not_options(bundles: dict[str, Path], tmp_path: Path) -> None:
    bundle = bundles["rpt-clean/alice"]
    exc = _refused(lambda: bundler.inspect(bundle, max_bytes=1), "bundle", InputError)
    assert "max_bytes" in exc.message and "--" not in exc.message
    for call, param in [
        (lambda: bundler.fixity("s3://bkt/arch/x.tar.zst", ledger=tmp_path / "l"), "source"),
        (lambda: bundler.list_bundles("s3://bkt/arch/x.tar.zst", endpoint_url=NOWHERE), "prefix"),
        (lambda: bundler.upload(bundle, "s3://bkt/arch/x.tar.zst", endpoint_url=NOWHERE), "prefix"),
    ]:
        exc = _refused(call, param)
        assert "upload takes" not in exc.message and "--" not in exc.message
        assert "an archive prefix is needed here, not a key" in exc.message


def test_retain_until_in_the_past_names_the_parameter() -> None:
    from bundler.storage.retention import _retention

    when = EXPORTED_AT.replace(year=2000)
    with pytest.raises(ParameterError) as caught:
        _retention(when, None)
    assert caught.value.message.startswith("retain_until: ")
    assert "not in the future" in str(caught.value) and "retain-until" not in str(caught.value)


def test_a_project_without_definitions_names_the_parameter(tmp_path: Path) -> None:
    run = REPO / "fixtures" / "eval-banana" / "runs" / "default" / "20261130_022618_e23eabf2"
    exc = _refused(
        lambda: bundler.export_eb(
            run, project=STORE, out=tmp_path / "b.tar.zst", exported_at=EXPORTED_AT
        ),
        "project",
        InputError,
    )
    assert "--project" not in exc.message and "no check definition found under it" in exc.message
    assert list(tmp_path.iterdir()) == []


def _fifo_dir(tmp_path: Path) -> Path:
    d = tmp_path / "fifo-dir"
    d.mkdir()
    os.mkfifo(d / "fifo")
    return d


@pytest.mark.parametrize(
    ("case", "param", "code"),
    [
        ("report not found", "report_id", 3),
        ("not a store", "store", 3),
        ("report id ../x", "report_id", 2),
        ("report id .", "report_id", 2),
        ("report id long", "report_id", 2),
        ("no such case", "case_id", 3),
        ("bag with a fifo", "bundle", 3),
        ("extract into non-empty", "directory", 3),
        ("ledger is a directory", "ledger", 3),
        ("list report id ../x", "report_id", 2),
        ("endpoint not a url", "endpoint_url", 2),
        ("render a non-JSON file", "result", 3),
        ("check_proof of garbage", "proof", 3),
        ("exported_at before issued_at", "exported_at", 2),
    ],
)
def test_errors_begin_with_the_parameter(
    bundles: dict[str, Path], tmp_path: Path, case: str, param: str, code: int
) -> None:
    bundle = bundles["rpt-clean/alice"]
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    junk = tmp_path / "junk.json"
    junk.write_text("not json")

    def export(**kw: Any) -> Any:
        args = {"principal": "alice", "out": tmp_path / "o.tar.zst", "exported_at": EXPORTED_AT}
        return lambda: bundler.export(**{**args, **kw})

    calls: dict[str, Any] = {
        "report not found": export(store=STORE, report_id="rpt-nope"),
        "not a store": export(store=full, report_id="rpt-clean"),
        "report id ../x": export(store=STORE, report_id="../x"),
        "report id .": export(store=STORE, report_id="."),
        "report id long": export(store=STORE, report_id="r" * 5000),
        "no such case": lambda: bundler.prove(bundle, "nope"),
        "bag with a fifo": lambda: bundler.inspect(_fifo_dir(tmp_path)),
        "extract into non-empty": lambda: bundler.extract(bundle, full),
        "ledger is a directory": lambda: bundler.fixity(full, ledger=full, workers=1),
        "list report id ../x": lambda: bundler.list_bundles(
            "s3://bkt/p", report_id="../x", endpoint_url=NOWHERE
        ),
        "endpoint not a url": lambda: bundler.list_bundles("s3://bkt/p", endpoint_url="not a url"),
        "render a non-JSON file": lambda: bundler.render(junk, html=tmp_path / "p.html"),
        "check_proof of garbage": lambda: bundler.check_proof(b"x"),
        "exported_at before issued_at": export(
            store=STORE, report_id="rpt-clean", exported_at="1999-01-01T00:00:00Z"
        ),
    }
    exc = _refused(calls[case], param, BundlerError)
    assert exc.exit_code == code, exc
    if code == 2:
        assert isinstance(exc, ParameterError)
    assert not (tmp_path / "o.tar.zst").exists() and not (tmp_path / "p.html").exists()


# ------------------------------------------------------- URLs are not local paths


@pytest.mark.parametrize("url", ["s3://bkt/nope.tar.zst", "http://example.org/x", "file:///x"])
def test_a_url_given_for_a_local_path_is_named_as_given(
    bundles: dict[str, Path], tmp_path: Path, url: str
) -> None:
    bundle = bundles["rpt-clean/alice"]
    calls = [
        ("result", lambda: bundler.render(url, html=tmp_path / "p.html")),
        ("out", lambda: bundler.export(
            STORE, "rpt-clean", principal="alice", out=url, exported_at=EXPORTED_AT)),
        ("directory", lambda: bundler.extract(bundle, url)),
        ("html", lambda: bundler.render({"schema": "x"}, html=url)),
    ]  # fmt: skip
    if not url.startswith("s3://"):
        calls.append(("bundle", lambda: bundler.verify(url)))
    for param, call in calls:
        exc = _refused(call, param)
        assert repr(url) in exc.message, exc.message
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------- audit does not raise


@pytest.mark.parametrize("what", ["missing", "/dev/null", "fifo", "empty directory"])
def test_audit_answers_for_an_unreadable_bundle_as_verify_does(tmp_path: Path, what: str) -> None:
    target = {
        "missing": tmp_path / "nope.tar.zst",
        "/dev/null": Path("/dev/null"),
        "fifo": tmp_path / "fifo",
        "empty directory": tmp_path / "empty",
    }[what]
    if what == "fifo":
        os.mkfifo(target)
    if what == "empty directory":
        target.mkdir()
    audited = bundler.audit(target)
    verified = bundler.verify(target)
    assert audited.verdict.value == "error" and audited.exit_code == 3
    assert verified.exit_code == 3
    record = audited.to_json()
    assert record["exit_code"] == 3 and record["input"] == str(target)


def test_audit_reason_counts_claims_in_words(bundles: dict[str, Path]) -> None:
    from bundler.bundles.audit import _verification_reason
    from bundler.core.claims import Claim, State, Verdict, Verification

    def failed(n: int) -> str:
        claims = tuple(Claim("g", f"s{i}", State.FAILED) for i in range(n))
        return _verification_reason(Verification("x", Verdict.FAILED, claims=claims))

    assert "(1 claim failed)" in failed(1) and "(2 claims failed)" in failed(2)
    assert "(s)" not in failed(1) + failed(2)


# ------------------------------------------------------- NotProven has its record


def test_not_proven_gives_the_record_check_proof_prints(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    from conftest import run_cli

    proof = bundler.prove(bundles["rpt-clean/alice"], _first_case(bundles), out=tmp_path)
    keygen = shutil.which("ssh-keygen")
    assert keygen is not None
    key = tmp_path / "key"
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    signers = tmp_path / "allowed"
    public = Path(f"{key}.pub").read_text().split()[:2]
    signers.write_text(f"someone@example.org {' '.join(public)}\n")
    with pytest.raises(bundler.NotProven) as caught:
        bundler.check_proof(proof.out, allowed_signers=signers)  # type: ignore[arg-type]
    record = caught.value.to_json()
    done = run_cli("check-proof", str(proof.out), "--allowed-signers", str(signers), "--json")
    assert done.returncode == 1
    import orjson

    printed = orjson.loads(done.stdout)
    assert record == printed
    assert record["proven"] is False and record["exit_code"] == 1
    # An unreadable allowed_signers file is named as the parameter.
    empty = tmp_path / "empty"
    empty.write_text("")
    exc = _refused(
        lambda: bundler.check_proof(proof.out, allowed_signers=empty),  # type: ignore[arg-type]
        "allowed_signers",
        InputError,
    )
    assert str(empty) in exc.message


def _first_case(bundles: dict[str, Path]) -> str:
    info = bundler.inspect(bundles["rpt-clean/alice"]).to_json()
    import tarfile

    import zstandard

    with open(bundles["rpt-clean/alice"], "rb") as fh:
        reader = zstandard.ZstdDecompressor().stream_reader(fh)
        with tarfile.open(fileobj=reader, mode="r|") as tar:
            for member in tar:
                if "/cases/" in member.name and member.name.endswith(".jsonl"):
                    import orjson

                    data = tar.extractfile(member)
                    assert data is not None
                    return str(orjson.loads(data.readline())["case_id"])
    raise AssertionError(f"no case in {info}")


# ------------------------------------------------------- frozen all the way down


def test_freeze_refuses_every_change_and_copies_thaw() -> None:
    import copy

    value = freeze({"a": [1, {"b": 2}], "c": (1, 2)})
    assert value == {"a": [1, {"b": 2}], "c": [1, 2]} and hash(value) == hash(freeze(value))
    changes = [
        lambda: value.__setitem__("x", 1),
        lambda: value.update(x=1),
        lambda: value.pop("a"),
        lambda: value["a"].append(3),
        lambda: value["a"][1].__setitem__("b", 3),
        lambda: value["a"].sort(),
    ]
    for change in changes:
        with pytest.raises(TypeError):
            change()
    thawed = copy.deepcopy(value)
    thawed["a"][1]["b"] = 5
    assert type(thawed["a"]) is list and value["a"][1]["b"] == 2


def test_results_are_frozen_all_the_way_down(bundles: dict[str, Path], tmp_path: Path) -> None:
    bundle = bundles["rpt-clean/alice"]
    proof = bundler.prove(bundle, _first_case(bundles), out=tmp_path)
    check = bundler.check_proof(proof.out)  # type: ignore[arg-type]
    inspected = bundler.inspect(bundle)
    verified = bundler.verify(bundle)
    (tmp_path / "archive").mkdir()
    summary = bundler.fixity(tmp_path / "archive", ledger=tmp_path / "l.sqlite", workers=1)
    listing = bundler.reports(STORE)
    for mapping in [
        check.record, inspected.record, proof.record, verified.summary, summary.counts,
        summary.selection, summary.shares, listing.items[0],
    ]:  # fmt: skip
        assert isinstance(mapping, FrozenDict)
        with pytest.raises(TypeError):
            mapping["case_status"] = "fail"  # type: ignore[index]
    for sequence in [summary.problems, summary.carried]:
        assert isinstance(sequence, FrozenList)
        with pytest.raises(TypeError):
            sequence.append({})
    for result in [check, inspected, proof, summary, listing, verified]:
        hash(result)
        record = result.to_json()
        mutable = record[0] if isinstance(record, list) else record
        mutable["extra"] = 1  # the copy to_json gives is the caller's to change
    assert check.to_json()["case_status"] == check.case_status


# ------------------------------------------------------- reports of a non-store


def test_reports_of_what_is_not_a_store_is_refused(tmp_path: Path) -> None:
    exc = _refused(lambda: bundler.reports(tmp_path), "store", InputError)
    assert exc.exit_code == 3 and "not a store" in exc.message
    (tmp_path / "access.json").write_text('{"principals": {}}')
    assert len(bundler.reports(tmp_path)) == 0  # an empty store is one


def test_download_into_a_missing_directory_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    url = f"s3://bkt/arch/reports/bundles/rpt-x/{'ab' * 32}.tar.zst"
    target = tmp_path / "newdir"
    _refused(lambda: bundler.download(url, f"{target}/", endpoint_url=NOWHERE), "dest")
    assert not target.exists()


# ------------------------------------------------ each message names its own parameter


def test_a_non_signers_file_for_fixity_names_allowed_signers(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    archive = tmp_path / "a"
    archive.mkdir()
    shutil.copyfile(bundles["rpt-clean/alice"], archive / "b.tar.zst")
    (tmp_path / "x").write_text("not an allowed signers line\n")
    with pytest.raises(InputError) as caught:
        bundler.fixity(archive, ledger=tmp_path / "l.sqlite", allowed_signers=tmp_path / "x")
    assert caught.value.param == "allowed_signers"
    assert caught.value.message.startswith(f"allowed_signers: {tmp_path / 'x'}"), caught.value
    assert not (tmp_path / "l.sqlite").exists()


@pytest.mark.parametrize("param", ["run_dir", "project"])
@pytest.mark.parametrize("url", ["s3://r3b/x", "http://example.org//x"])
def test_export_eb_refuses_a_url_as_given_naming_its_parameter(
    tmp_path: Path, param: str, url: str
) -> None:
    from conftest import REPO

    run = sorted((REPO / "fixtures" / "eval-banana" / "runs" / "default").iterdir())[0]
    args: dict[str, Any] = {"run_dir": run, "project": REPO / "fixtures" / "eval-banana" / "project"}
    args[param] = url
    with pytest.raises(ParameterError) as caught:
        bundler.export_eb(args.pop("run_dir"), out=tmp_path, **args)
    assert caught.value.param == param
    assert caught.value.message.startswith(f"{param} {url!r}: "), caught.value.message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("function", ["export", "export_eb", "sign", "fixity"])
@pytest.mark.parametrize("content", [b"not a key\n", b"", b"ssh-ed25519 AAAA public only\n"])
def test_a_file_that_holds_no_key_is_a_bad_key_parameter(
    bundles: dict[str, Path], tmp_path: Path, function: str, content: bytes
) -> None:
    from conftest import REPO

    key = tmp_path / "k"
    key.write_bytes(content)
    out = tmp_path / "out"
    out.mkdir()
    archive = tmp_path / "a"
    archive.mkdir()
    shutil.copyfile(bundles["rpt-clean/alice"], archive / "b.tar.zst")
    run = sorted((REPO / "fixtures" / "eval-banana" / "runs" / "default").iterdir())[0]
    calls: dict[str, Any] = {
        "export": lambda: bundler.export(
            REPO / "fixtures" / "stores" / "main", "rpt-clean", principal="alice", out=out,
            exported_at=EXPORTED_AT, key=key,
        ),
        "export_eb": lambda: bundler.export_eb(
            run, project=REPO / "fixtures" / "eval-banana" / "project", out=out, key=key
        ),
        "sign": lambda: bundler.sign(archive / "b.tar.zst", key=key),
        "fixity": lambda: bundler.fixity(
            archive, ledger=tmp_path / "l.sqlite", record=tmp_path / "r.jsonl", key=key
        ),
    }
    with pytest.raises(ParameterError) as caught:
        calls[function]()
    assert caught.value.param == "key" and caught.value.exit_code == 2
    assert caught.value.message.startswith(f"key: {key}: "), caught.value.message
    assert list(out.iterdir()) == [] and sorted(p.name for p in archive.iterdir()) == ["b.tar.zst"]


def test_a_file_that_holds_no_key_keeps_the_command_lines_words(tmp_path: Path) -> None:
    key = tmp_path / "k"
    key.write_bytes(b"not a key\n")
    key.chmod(0o600)
    from conftest import REPO

    done = run_cli(
        "export", "--store", str(REPO / "fixtures" / "stores" / "main"), "--report", "rpt-clean",
        "--principal", "alice", "--out", str(tmp_path) + "/", "--key", str(key),
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"evalbook-bundle: error: {key}: not an OpenSSH".encode())
