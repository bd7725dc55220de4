"""No import cycle in the package, deferred imports included (issue 36).

Every ``import`` and ``from ... import`` of every module counts, wherever it stands: at the top,
inside a function (a deferred import), under ``if TYPE_CHECKING``. A deferred import only hides a
cycle until the day the import moves, or runs in another order. ``from pkg import name`` counts as
an import of ``pkg.name`` when that is a module, else of ``pkg``. The parent packages that Python
runs first (``reflexr_graph/__init__.py`` before any of its modules) are not counted: every module
would then be in a cycle with a package that re-exports it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import reflexr_graph

PACKAGE = Path(reflexr_graph.__file__).parent
NAME = "reflexr_graph"


def _modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own, for its __init__)."""
    found: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """The package's modules that module ``name`` imports, anywhere in its source."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            source = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                if f"{source}.{alias.name}" in modules:
                    yield f"{source}.{alias.name}"
                elif source in modules:
                    yield source


def imports() -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    modules = _modules()
    return {name: set(_imported(name, path, modules)) - {name} for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each group of modules that import each other, as a path back to its start."""
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                found.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return found


def test_the_walk_sees_deferred_imports_and_the_package_has_no_cycle() -> None:
    graph = imports()
    assert len(graph) > 150 and all(name.startswith(NAME) for name in graph), "the walk found the package"
    # Seen: a top-level import, and a deferred one (build_registry imports the ai package when a
    # graph's code loaded pydantic-ai's external events).
    assert "reflexr_graph.api.problems" in graph["reflexr_graph.api.models"]
    assert "reflexr_graph.ai" in graph["reflexr_graph.graph_registry"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles(graph) == [], "modules that import each other (deferred imports count)"
