"""Reading the package's source as syntax trees, for tests of its layout rules."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "client_balance"


def imports(path: Path) -> set[str]:
    """The modules ``path`` imports (``import x`` and ``from x import y`` both give ``x``)."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
    return modules


def calls(path: Path, name: str) -> list[int]:
    """The lines where ``path`` calls the plain name ``name`` (``print``, say)."""
    return sorted(
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name
    )
