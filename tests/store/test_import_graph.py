"""The store's modules import each other without a cycle, counting imports inside functions
(issue 23, item 7: app.store.db imported app.store.staging inside open_store, and staging
imports db)."""

from __future__ import annotations

import ast
from pathlib import Path

STORE = Path(__file__).resolve().parents[2] / "app" / "store"


def store_imports() -> dict[str, set[str]]:
    modules = {f"app.store.{p.stem}": p for p in STORE.glob("*.py") if p.stem != "__init__"}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):  # every import, however deeply nested
            if isinstance(node, ast.ImportFrom) and node.module == "app.store":
                found |= {f"app.store.{a.name}" for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = found & modules.keys()
    return graph


def test_db_does_not_import_staging():
    assert "app.store.staging" not in store_imports()["app.store.db"]


def test_the_store_modules_have_no_import_cycle():
    graph = store_imports()
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for dependency in sorted(graph[module]):
            assert state.get(dependency) != "open", f"import cycle: {' -> '.join(path + [module, dependency])}"
            if dependency not in state:
                visit(dependency, path + [module])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
