"""The committed fixture stores are exactly what the generator writes."""

from __future__ import annotations

from pathlib import Path

from bundler.testing.fixturegen import MAIN_STORE, build_fixture_store
from bundler.testing.fixtures_audit import AUDIT_STORE, build_audit_store

REPO = Path(__file__).resolve().parents[1]


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_committed_fixture_store_equals_a_fresh_generation(tmp_path: Path) -> None:
    fresh = tmp_path / MAIN_STORE
    build_fixture_store(fresh)
    committed = _tree(REPO / "fixtures" / "stores" / MAIN_STORE)
    generated = _tree(fresh)
    assert sorted(committed) == sorted(generated), "run `make fixtures` and commit the result"
    changed = [name for name in generated if committed[name] != generated[name]]
    assert changed == [], f"stale fixture files (run `make fixtures`): {changed[:5]}"


def test_generation_is_deterministic(tmp_path: Path) -> None:
    build_fixture_store(tmp_path / "a")
    build_fixture_store(tmp_path / "b")
    first, second = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    assert len(first) > 200
    assert first == second


def test_committed_audit_store_equals_a_fresh_generation(tmp_path: Path) -> None:
    build_audit_store(tmp_path / AUDIT_STORE)
    committed = _tree(REPO / "fixtures" / "stores" / AUDIT_STORE)
    assert committed, "fixtures/stores/audit is missing: run `make fixtures`"
    assert committed == _tree(tmp_path / AUDIT_STORE), "run `make fixtures` and commit the result"
