"""The engine's own layering: private names cross modules only from the internal modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[2] / "engine"
INTERNAL = {"engine._kernels", "engine._validation", "engine._possible"}
MODULES = sorted(ENGINE.rglob("*.py"))


def _module_name(path: Path) -> str:
    parts = path.relative_to(ENGINE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _private_imports(path: Path) -> list[str]:
    """``module.name`` of every ``_`` name imported from another engine module that is not internal."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "engine":
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                if alias.name.startswith("_") and target not in INTERNAL and node.module not in INTERNAL:
                    found.append(target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "engine" and any(p.startswith("_") for p in parts) and alias.name not in INTERNAL:
                    found.append(alias.name)
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ENGINE)))
def test_no_private_name_crosses_engine_modules(path):
    assert _private_imports(path) == [], f"{_module_name(path)} imports private names of other engine modules"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ENGINE)))
def test_no_engine_module_imports_the_app(path):
    for node in ast.walk(ast.parse(path.read_text())):
        modules = [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        for module in modules:
            assert module.split(".")[0] not in {"app", "streamlit", "sqlalchemy"}, f"{path.name} imports {module}"


def test_internal_modules_import_no_public_engine_module():
    # The kernels sit below every public module: importing one from them would bring back
    # cycles like the old engine._possible <-> engine.winners.
    public = {_module_name(p) for p in MODULES} - INTERNAL - {"engine", "engine.exceptions", "engine.choices"}
    for name in INTERNAL:
        path = ENGINE / f"{name.split('.')[1]}.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module not in public, f"{name} imports {node.module}"
                if node.module == "engine":
                    assert all(f"engine.{a.name}" not in public for a in node.names), f"{name} imports a public module"
