"""The package's layout (docs/architecture.md): imports go one way, no module imports
another in a cycle, and no module is much over 800 lines.

Every import is counted, also those inside functions (a lazy import is still a
dependency). The allowed directions are written here, not derived from the code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "bundler"

# Each part and the parts it may import. `bundler` is the library face at the top;
# `testing` holds the fixture generators, which nothing at runtime may import.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "archive": {"core"},
    "trust": {"core", "archive"},
    "storage": {"core", "archive"},
    "evalbook": {"core", "archive", "trust", "storage"},
    "evalbanana": {"core", "archive", "trust", "evalbook"},
    "bundles": {"core", "archive", "trust", "storage", "evalbook", "evalbanana"},
    "fixity": {"core", "archive", "trust", "storage", "evalbook", "evalbanana", "bundles"},
    "report": {"core", "archive", "trust", "evalbook", "evalbanana", "bundles"},
    # Runs of other tools (SPEC 16) become store documents; --check reads a bundle.
    "importers": {"core", "archive", "trust", "evalbook", "bundles"},
    "api": {
        "core", "archive", "trust", "storage", "evalbook", "evalbanana", "bundles", "fixity",
        "report", "importers",
    },
    "cli": {
        "core", "archive", "trust", "storage", "evalbook", "evalbanana", "bundles", "fixity",
        "report", "api", "importers",
    },
    "testing": {"core", "archive", "trust", "evalbook", "evalbanana"},
    "bundler": {
        "core", "archive", "trust", "storage", "evalbook", "evalbanana", "bundles", "fixity",
        "report", "api", "importers",
    },
    # The command's entry point: its signals first, then the command line.
    "entry": {"cli"},
    "__main__": {"entry"},
}
MAX_LINES = 800


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    name = ".".join(parts)
    return name.removesuffix(".__init__")


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _part(module: str) -> str:
    """``bundler.evalbook.verify`` -> ``evalbook``; ``bundler`` -> ``bundler``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "bundler"


def _imports(module: str) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every bundler import in ``module``, lazy ones too."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "bundler":
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            if base.split(".")[0] != "bundler":
                continue
            for alias in node.names:
                target = f"{base}.{alias.name}"
                yield node.lineno, target if target in MODULES else base


def _edges() -> dict[str, set[str]]:
    return {m: {t for _, t in _imports(m) if t in MODULES and t != m} for m in MODULES}


def test_every_part_is_named_in_the_allowed_directions() -> None:
    assert {_part(m) for m in MODULES} <= set(ALLOWED), set(map(_part, MODULES)) - set(ALLOWED)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_one_way(module: str) -> None:
    part = _part(module)
    wrong = [
        f"line {line}: {target}"
        for line, target in _imports(module)
        if _part(target) != part and _part(target) not in ALLOWED[part]
    ]
    assert not wrong, f"{module} ({part}) may import only {sorted(ALLOWED[part])}: {wrong}"


def test_no_import_cycle() -> None:
    edges = _edges()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_over_800_lines(module: str) -> None:
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{module}: {lines} lines; split it along its seams"


def test_the_checker_sees_a_planted_upward_import(tmp_path: Path) -> None:
    """The test itself can fail: an upward import is found as such."""
    assert "cli" not in ALLOWED["core"]
    assert _part("bundler.cli.app") == "cli" and _part("bundler.core.errors") == "core"
    assert any(_part(t) == "core" for m in MODULES if _part(m) == "cli" for _, t in _imports(m))
