"""An envelope's status and its supersession fields say one thing (SPEC 3.2, 5, 14).

A current report is superseded by no report, at no time, for no reason; a superseded
report names the report that supersedes it. The tie lives in the envelope schema and in
every record schema that carries an envelope (verification, audit, reports --json), so:
the store reader refuses the contradiction before export (exit 3, naming the field), a
verifier fails a bundle that holds one (claim "envelope is schema-valid"), and render
refuses a record that carries one (exit 3, naming the field); since a record's envelope
is one the verifier found schema-valid, a record the tool writes is never refused.
By class: every status x every supersession field x (null, text).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import records
import repack
from conftest import run_cli
from test_record_coherence import _render, _renders
from test_tamper import deep

from bundler.core import schemas
from bundler.core.claims import Verdict
from bundler.core.errors import SchemaError

AT = "2026-11-02T00:00:00Z"
TEXT = {"superseded_by": "rpt-clean", "superseded_at": AT, "superseded_reason": "a typo"}


def _envelopes() -> list[tuple[dict[str, Any], frozenset[str]]]:
    """Every status with each supersession field null or set, and the fields SPEC 3.2's
    tie can blame (empty: coherent; with several wrong, the one named is any of them)."""
    out = []
    for status in ("current", "superseded"):
        for chosen in itertools.product((False, True), repeat=3):
            env: dict[str, Any] = {"status": status, "url": None}
            for (key, value), on in zip(TEXT.items(), chosen, strict=True):
                env[key] = value if on else None
            if status == "current":
                bad = frozenset(k for k in TEXT if env[k] is not None)
            else:
                bad = frozenset() if env["superseded_by"] else frozenset({"superseded_by"})
            out.append((env, bad))
    empty = {**TEXT, "status": "superseded", "superseded_by": "", "url": None}
    out.append((empty, frozenset({"superseded_by"})))
    return out


ENVELOPES = _envelopes()


def _record_envelope(env: dict[str, Any]) -> dict[str, Any]:
    """The envelope as a verification record carries it."""
    return {
        "status": env["status"],
        "superseded_by": env["superseded_by"],
        "superseded_at": env["superseded_at"],
        "reason": env["superseded_reason"],
    }


@pytest.mark.parametrize(
    ("env", "bad"), ENVELOPES, ids=lambda x: json.dumps(x, sort_keys=True, default=sorted)
)
def test_the_envelope_schema_ties_status_and_supersession(
    env: dict[str, Any], bad: frozenset[str]
) -> None:
    if not bad:
        schemas.validate("envelope", env, source="envelope.json")
    else:
        with pytest.raises(SchemaError) as caught:
            schemas.validate("envelope", env, source="envelope.json")
        assert any(caught.value.message.startswith(f"envelope.json: /{b}: ") for b in bad)
        assert "SPEC 3.2" in caught.value.message


@pytest.mark.parametrize(
    ("env", "bad"), ENVELOPES, ids=lambda x: json.dumps(x, sort_keys=True, default=sorted)
)
def test_render_refuses_exactly_what_the_envelope_schema_refuses(
    tmp_path: Path, env: dict[str, Any], bad: frozenset[str]
) -> None:
    """A record's envelope is refused exactly when the bundle's would be: what verify
    writes (a schema-valid envelope) always renders."""
    shown = _record_envelope(env)
    verification = records.consistent(records.verification(envelope=shown))
    audit = records.consistent(records.audit())
    audit["verification"]["envelope"] = shown
    blamed = {"reason" if b == "superseded_reason" else b for b in bad}
    for record, pointer in ((verification, "/envelope"), (audit, "/verification/envelope")):
        if not blamed:
            _renders(tmp_path, record)
            continue
        proc = _render(tmp_path, record)
        err = proc.stderr.decode()
        assert proc.returncode == 3, err
        assert len(err.splitlines()) == 1 and "Traceback" not in err
        assert any(f"record.json: {pointer}/{b}: " in err for b in blamed), err
        assert "SPEC 3.2" in err
        assert not (tmp_path / "page.html").exists()


@pytest.mark.parametrize(
    ("env", "bad"),
    [e for e in ENVELOPES if e[1]],
    ids=lambda x: json.dumps(x, sort_keys=True, default=sorted),
)
def test_export_refuses_a_store_envelope_that_contradicts_itself(
    store_copy: Path, tmp_path: Path, env: dict[str, Any], bad: frozenset[str]
) -> None:
    (store_copy / "reports" / "rpt-clean" / "envelope.json").write_text(json.dumps(env))
    out = tmp_path / "out.tar.zst"
    proc = run_cli(
        "export",
        "--store",
        str(store_copy),
        "--report",
        "rpt-clean",
        "--principal",
        "alice",
        "--out",
        str(out),
    )
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert len(err.splitlines()) == 1, err
    assert any(f"envelope.json: /{b}: " in err for b in bad), err
    assert not out.exists()


@pytest.mark.parametrize(
    "edit",
    [
        {"status": "current", "superseded_by": "rpt-elsewhere"},
        {"status": "superseded", "superseded_by": None, "superseded_at": AT},
        {"status": "superseded", "superseded_by": " ", "superseded_at": AT},
        {"status": "superseded", "superseded_by": "rpt-clean", "superseded_at": AT},
        {"status": "superseded", "superseded_by": "rpt-x", "superseded_at": "2000-01-01T00:00:00Z"},
    ],
    ids=["current-with-successor", "superseded-without", "blank", "itself", "before-issue"],
)
def test_a_bundle_holding_a_contradicting_envelope_fails_verification(
    bundles: dict[str, Path], edit: dict[str, Any]
) -> None:
    def change(eb: repack.EditableBag) -> None:
        eb.edit_json("data/report/envelope.json", lambda env: env.update(edit))

    result = deep(bundles, "rpt-clean/alice", change)
    assert result.verdict is Verdict.FAILED
    failed = [c for c in result.claims if c.state.value == "failed"]
    assert [c.subject for c in failed] == ["envelope is schema-valid"], failed
    assert result.envelope is None


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        ({"superseded_by": "rpt-clean"}, "superseded_by"),
        ({"superseded_by": "rpt-x", "superseded_at": "2000-01-01T00:00:00Z"}, "superseded_at"),
    ],
    ids=["itself", "before-issue"],
)
def test_export_refuses_a_supersession_its_report_contradicts(
    store_copy: Path, tmp_path: Path, edit: dict[str, Any], field: str
) -> None:
    """What the schema cannot see without the report (core/envelope.py)."""
    env = {"status": "superseded", "superseded_at": None, "superseded_reason": None, "url": None}
    (store_copy / "reports" / "rpt-clean" / "envelope.json").write_text(json.dumps({**env, **edit}))
    out = tmp_path / "out.tar.zst"
    proc = run_cli(
        "export", "--store", str(store_copy), "--report", "rpt-clean", "--principal", "alice",
        "--out", str(out),
    )  # fmt: skip
    err = proc.stderr.decode()
    assert proc.returncode == 3 and len(err.splitlines()) == 1, err
    assert f"envelope.json: /{field}: " in err and "SPEC 3.2" in err, err
    assert not out.exists()
