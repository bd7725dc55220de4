"""The only module that touches pydantic-graph's internals.

pydantic-graph (>=2.51) exposes ``Graph.iter`` and ``GraphRun.next`` publicly, but not
what reflexr needs to decide whether a boundary is quiescent (the run's in-flight tasks
and join reducers) or what each node's input is annotated with. Keeping those reads in
one module means a pydantic-graph upgrade is checked against one file. Other modules use
only its public API: ``core/driver.py`` steps a run with ``Graph.iter`` and ``GraphRun.next``,
and ``graph_registry.py`` recognises a bare ``Graph`` to wrap it.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from types import FrameType
from typing import Annotated, Any, TypeAlias, TypeVar, get_args, get_origin, get_type_hints

from pydantic_graph import (
    Decision,
    EndMarker,
    EndNode,
    Fork,
    Graph,
    GraphRun,
    GraphTask,
    GraphTaskRequest,
    Join,
    StartNode,
    Step,
    StepContext,
)
from pydantic_graph.id_types import ForkStackItem, NodeID, NodeRunID
from pydantic_graph.paths import DestinationMarker, LabelMarker, Path, TransformMarker
from pydantic_graph.step import NodeStep

__all__ = [
    "START_ID",
    "AnyGraph",
    "AnyRun",
    "Edge",
    "EndMarker",
    "ForkStackItem",
    "GraphRun",
    "GraphTask",
    "GraphTaskRequest",
    "Kind",
    "NodeID",
    "NodeRunID",
    "Unknown",
    "current_fork_stack",
    "edges",
    "is_quiescent",
    "make_request",
    "node_kinds",
    "parent_forks",
    "step_input_type",
    "step_return_type",
    "with_wrapped_steps",
]

AnyGraph: TypeAlias = Graph
"""pydantic-graph's generics use variance-inferring TypeVars that mypy does not read; use them bare."""
AnyRun: TypeAlias = GraphRun

START_ID = StartNode.id
END_ID = EndNode.id


class Kind(StrEnum):
    START = "start"
    STEP = "step"
    NODE_STEP = "node_step"
    FORK = "fork"
    DECISION = "decision"
    JOIN = "join"
    END = "end"


class Unknown:
    """Marks a type reflexr cannot read (no annotation, a transform, a join's value...)."""

    def __repr__(self) -> str:
        return "<unknown>"


UNKNOWN = Unknown()


@dataclass(frozen=True)
class Edge:
    """One edge as reflexr sees it: where it runs, and whether it transforms what it carries."""

    source: str
    destination: str
    transforms: tuple[str, ...]


def node_kinds(graph: AnyGraph) -> dict[str, Kind]:
    kinds: dict[str, Kind] = {}
    for node_id, node in graph.nodes.items():
        kinds[node_id] = _kind(node)
    return kinds


def _kind(node: object) -> Kind:
    # NodeStep subclasses Step, so it is tested first.
    order: list[tuple[type, Kind]] = [
        (StartNode, Kind.START),
        (EndNode, Kind.END),
        (NodeStep, Kind.NODE_STEP),
        (Step, Kind.STEP),
        (Fork, Kind.FORK),
        (Decision, Kind.DECISION),
        (Join, Kind.JOIN),
    ]
    for cls, kind in order:
        if isinstance(node, cls):
            return kind
    raise TypeError(f"unsupported pydantic-graph node type {type(node).__name__}")


def edges(graph: AnyGraph) -> list[Edge]:
    """Every edge, including a decision's branches, flattened to source -> destination."""
    found: list[Edge] = []
    for source, paths in graph.edges_by_source.items():
        for path in paths:
            found.extend(_walk(source, path))
    for node_id, node in graph.nodes.items():
        if isinstance(node, Decision):
            for branch in node.branches:
                found.extend(_walk(node_id, branch.path))
    return found


def _walk(source: str, path: Path, transforms: tuple[str, ...] = ()) -> Iterator[Edge]:
    for item in path.items:
        if isinstance(item, TransformMarker):
            transforms = (*transforms, _callable_name(item.transform))
        elif isinstance(item, DestinationMarker):
            yield Edge(source, item.destination_id, transforms)
        elif not isinstance(item, LabelMarker):
            raise TypeError(f"unexpected path item {type(item).__name__} on an edge from {source!r}")


def _callable_name(func: object) -> str:
    return getattr(func, "__qualname__", None) or type(func).__qualname__


def parent_forks(graph: AnyGraph) -> dict[str, tuple[str, frozenset[str]]]:
    """Each join's parent fork and the nodes between them, as pydantic-graph computed them."""
    return {
        join_id: (parent.fork_id, frozenset(parent.intermediate_nodes))
        for join_id, parent in graph.parent_forks.items()
    }


def _context_input(hint: Any) -> Any:
    """The Input of a ``StepContext[State, Deps, Input]`` hint; a TypeVar reads as Any, as pydantic does."""
    if get_origin(hint) is not StepContext:
        return UNKNOWN
    args = get_args(hint)
    if len(args) != 3:
        return UNKNOWN
    return Any if isinstance(args[2], TypeVar) else _strip_annotated(args[2])


def _strip_annotated(hint: Any) -> Any:
    # Annotated metadata was never checked by the graph, so a resumed run must not check it either.
    while get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    return hint


def _hints(func: Callable[..., Any]) -> dict[str, Any]:
    try:
        return get_type_hints(func)
    except Exception:
        # An annotation that does not resolve is one reflexr cannot read: the node stays untyped.
        return {}


def step_input_type(step_node: object) -> Any:
    """The input type a step's ``StepContext`` annotation names, or UNKNOWN."""
    if not isinstance(step_node, Step):
        return UNKNOWN
    call = step_node.call
    params = list(inspect.signature(call).parameters.values())
    if not params:
        return UNKNOWN
    hint = _hints(call).get(params[0].name, UNKNOWN)
    return UNKNOWN if hint is UNKNOWN else _context_input(hint)


def step_return_type(step_node: object) -> Any:
    """A step's return annotation without Annotated metadata; UNKNOWN when absent, Any or a TypeVar."""
    if not isinstance(step_node, Step) or isinstance(step_node, NodeStep):
        return UNKNOWN
    hint = _hints(step_node.call).get("return", UNKNOWN)
    if hint is UNKNOWN or hint is Any or isinstance(hint, TypeVar):
        return UNKNOWN
    return _strip_annotated(hint)


def step_function(step_node: object) -> Callable[..., Any] | None:
    """The user's function behind a step node, or None for other nodes."""
    if not isinstance(step_node, Step) or isinstance(step_node, NodeStep):
        return None
    call: Callable[..., Any] = step_node.call
    return call


def node_of(graph: AnyGraph, node_id: str) -> object:
    return graph.nodes[NodeID(node_id)]


StepWrapper = Callable[[str, Callable[[Any], Awaitable[Any]]], Callable[[Any], Awaitable[Any]]]


def with_wrapped_steps(graph: AnyGraph, wrap: StepWrapper) -> AnyGraph:
    """A copy of ``graph`` whose steps run through ``wrap(node_id, call)``; the user's graph is untouched.

    The copy keeps the graph's ``auto_instrument``: a graph that emits pydantic-graph's own
    ``run graph {name}`` and ``run node {id}`` spans (its default, which Logfire users see) still
    does when run durably, nested under the attempt's ``invoke_workflow`` span. ``wrap`` runs
    inside ``run node``, so a step's ``execute_step`` span is that span's child.
    """
    nodes: dict[NodeID, Any] = {}
    for node_id, node in graph.nodes.items():
        if isinstance(node, Step):
            clone = copy.copy(node)
            clone._call = wrap(node_id, node.call)  # type: ignore[assignment]  # private: see module docstring
            nodes[node_id] = clone
        else:
            nodes[node_id] = node
    return dataclasses.replace(graph, nodes=nodes)


def is_quiescent(run: AnyRun, batch: object) -> bool:
    """True when exactly one task comes next and nothing else is in flight.

    At a yield the task that produced ``batch`` is still listed as active (it is retired
    right after), so at most one other entry may be there. A source that is not finished
    (a map over an async iterable) only yields tasks inside its own fork, which the
    boundary analysis rejects on its own.
    """
    if not isinstance(batch, list | tuple) or len(batch) != 1:
        return False
    iterator = run._iterator_instance  # private: see module docstring
    if iterator is None:
        return False
    return len(iterator.active_tasks) <= 1 and not iterator.active_reducers


def make_request(node_id: str, inputs: Any, fork_stack: list[ForkStackItem]) -> GraphTaskRequest:
    return GraphTaskRequest(NodeID(node_id), inputs, tuple(fork_stack))


def task_fork_stack(task: GraphTaskRequest) -> list[ForkStackItem]:
    return list(task.fork_stack)


def step_context_inputs(ctx: Any) -> Any:
    return ctx.inputs


_FRAME_DEPTH = 12


def current_fork_stack() -> tuple[ForkStackItem, ...] | None:
    """The fork stack of the task whose step is running, or None if it cannot be found.

    pydantic-graph hands a step only its StepContext (state, deps, inputs), not its task, so the
    task's fork stack is read from the frame of ``_GraphIterator._run_task`` that awaits the step,
    a few frames up (private: see module docstring). None means "unknown", which callers treat
    as a step whose branch they cannot tell: nothing is recorded for it.
    """
    frame: FrameType | None = sys._getframe(1)
    for _ in range(_FRAME_DEPTH):
        if frame is None:
            return None
        if frame.f_code.co_name == "_run_task" and "fork_stack" in frame.f_locals:
            stack = frame.f_locals["fork_stack"]
            return tuple(stack) if isinstance(stack, tuple | list) else None
        frame = frame.f_back
    return None
