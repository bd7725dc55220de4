"""The graph registry: ``module:attribute`` references resolved to GraphActions.

The worker runs the graphs it resolves; the CLI (``publish``, ``versions``) and the client (an
upgrade judged by the new version's code) resolve them too, so it sits below fleet and the
surfaces. It imports no worker code.

A worker that cannot resolve a reference must refuse to start, with a message that
names the reference and what is wrong with it, rather than dead-letter every run of
that graph as ``unknown_graph`` later.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic_graph import Graph

from reflexr_graph.core.action import GraphAction
from reflexr_graph.errors import GraphDefinitionError, SettingsError

Registry = dict[str, GraphAction]
"""Graph name -> GraphAction, as the task looks graphs up."""


def _split(ref: str) -> tuple[str, str]:
    module, sep, attr = ref.strip().partition(":")
    if not sep or not module or not attr or ":" in attr:
        raise SettingsError(
            f"graph reference {ref!r} is not of the form 'module:attribute' "
            "(e.g. 'myapp.graphs:triage'); fix REFLEXR_GRAPHS"
        )
    return module, attr


def searched(missing: str) -> list[str]:
    """The directories Python looked in for the module ``missing``, in order: its parent package's
    directories for a submodule, else ``sys.path`` (``''`` being the working directory)."""
    parent = sys.modules.get(missing.rpartition(".")[0]) if "." in missing else None
    paths = getattr(parent, "__path__", None)
    where = list(paths) if paths is not None else sys.path
    return [os.path.abspath(p or os.curdir) for p in where if isinstance(p, str)]


def _import(module: str, ref: str) -> Any:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module == exc.name or module.startswith(exc.name + ".")):
            raise SettingsError(
                f"graph reference {ref!r}: no module named {exc.name!r}; searched "
                f"{', '.join(searched(exc.name))}; check the spelling, and install it or start the "
                "worker from the directory that holds it (or add that directory to PYTHONPATH)"
            ) from None
        raise SettingsError(
            f"graph reference {ref!r}: module {module!r} failed to import because it needs "
            f"{exc.name!r}, which is not installed"
        ) from exc
    except Exception as exc:
        raise SettingsError(
            f"graph reference {ref!r}: importing module {module!r} raised {type(exc).__name__}: {exc}"
        ) from exc


def resolve(ref: str) -> GraphAction:
    """The GraphAction a ``module:attribute`` reference names; a bare Graph is wrapped."""
    module_name, attr_path = _split(ref)
    obj = _import(module_name, ref)
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SettingsError(
                f"graph reference {ref!r}: module {module_name!r} has no attribute {attr_path!r}"
            ) from None
    if isinstance(obj, GraphAction):
        return obj
    if isinstance(obj, Graph):
        try:
            return GraphAction(obj)
        except GraphDefinitionError as exc:
            raise SettingsError(f"graph reference {ref!r}: {exc}") from exc
    raise SettingsError(
        f"graph reference {ref!r} names a {type(obj).__name__}, not a GraphAction or a "
        "pydantic_graph Graph; point it at GraphAction(...) or GraphBuilder(...).build()"
    )


def build_registry(refs: Iterable[str], actions: Iterable[GraphAction] = ()) -> Registry:
    """Resolve every reference and add ``actions``; two different graphs under one name is an error.

    The same GraphAction listed twice (say, in REFLEXR_GRAPHS and in ``actions``) is kept once. A
    conflict names both sources: a reference as written, an action by where it was created.
    """
    registry: Registry = {}
    sources: dict[str, str] = {}
    entries: list[tuple[str, GraphAction]] = [(repr(ref.strip()), resolve(ref)) for ref in refs]
    # An action passed in code has no reference string; name where it was created instead.
    entries += [(f"GraphAction(...) in {a.created_in}", a) for a in actions]
    for source, action in entries:
        existing = registry.get(action.name)
        if existing is None:
            registry[action.name] = action
            sources[action.name] = source
        elif existing is not action:
            raise SettingsError(
                f"two graphs are named {action.name!r} ({sources[action.name]} and {source}); "
                "give one of them another name with GraphAction(graph, name=...)"
            )
    if "pydantic_ai.external_events" in sys.modules:
        # A graph may call wait_for_external_event in a step without a durable agent: importing
        # reflexr_graph.ai installs the durable wait for every step (ai/events.py).
        import reflexr_graph.ai  # noqa: F401
    return registry


def describe(registry: Mapping[str, GraphAction]) -> str:
    """``a, b, c`` for log lines, or a hint when the registry is empty."""
    return ", ".join(sorted(registry)) or "(none: set REFLEXR_GRAPHS)"
