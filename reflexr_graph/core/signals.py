"""The signals a graph declares: their names, their types, and the waits its steps name.

``GraphAction(graph, signals={"approval": Approval})`` declares what a run of the graph
may wait for. Workers publish each signal's JSON Schema with the graph's other schemas, so a
client validates a value without the graph's code. A step that waits for an undeclared
name fails permanently when it runs; where the step names it with a literal
(``wait_for_signal("approval", ...)``), building the GraphAction finds it first.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import TypeAdapter

from reflexr_graph.core.input_types import adapter_or_none
from reflexr_graph.errors import GraphDefinitionError

SIGNAL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
"""Signal names: they appear in record keys, events and the CLI, so they stay plain."""

_WAIT = "wait_for_signal"


def declare(signals: Mapping[str, Any] | None, graph_name: str) -> dict[str, TypeAdapter[Any]]:
    """Each declared signal's adapter; GraphDefinitionError for a bad name or an unserializable type."""
    declared: dict[str, TypeAdapter[Any]] = {}
    for name, tp in (signals or {}).items():
        if not isinstance(name, str) or not SIGNAL_NAME.fullmatch(name):
            raise GraphDefinitionError(
                f"graph {graph_name!r}: signal name {name!r} is not usable; use 1 to 100 letters, digits, "
                "'_', '.' or '-', starting with a letter or digit"
            )
        adapter = adapter_or_none(tp)
        if adapter is None:
            raise GraphDefinitionError(
                f"graph {graph_name!r}: the type of signal {name!r} ({tp!r}) cannot be serialized by "
                "pydantic; use a pydantic model, a dataclass or JSON types"
            )
        declared[name] = adapter
    return declared


def _literal_waits(fn: Callable[..., Any]) -> set[str]:
    """The signal names ``fn``'s own body passes as a literal to ``wait_for_signal``."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return set()  # no source (a builtin, a REPL, a zipped module): the run-time check remains
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        first = node.args[0]
        if called == _WAIT and isinstance(first, ast.Constant) and isinstance(first.value, str):
            names.add(first.value)
    return names


def check_waits(
    steps: Iterable[tuple[str, Callable[..., Any]]], declared: Mapping[str, object], graph_name: str
) -> None:
    """GraphDefinitionError naming each step that waits, by a literal name, for an undeclared signal."""
    problems = []
    for node_id, fn in steps:
        for name in sorted(_literal_waits(fn) - set(declared)):
            problems.append(f"step {node_id!r} waits for signal {name!r}")
    if problems:
        known = ", ".join(repr(n) for n in declared) or "none"
        raise GraphDefinitionError(
            f"graph {graph_name!r}: {'; '.join(problems)}, which the graph does not declare (it declares: "
            f"{known}); declare it with GraphAction(graph, signals={{name: type}})"
        )
