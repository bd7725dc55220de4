"""Every node's input type: from annotations, from edges (decisions and forks), or from input_types.

The rules are those of docs/design.md#input-types (the checkpoint ADR's "Input types"
finding, as amended on 2026-09-29):

- a step's type is the Input of its ``StepContext[State, Deps, Input]`` annotation;
- the end node's is the graph's output type;
- a decision's or fork's type is what every edge into it carries, when all of them
  carry the same known type: a step's return annotation, the graph's input type (from
  the start), or a typed decision's type. Inference repeats until it learns nothing;
- explicit ``input_types`` win, and an inferred type pydantic has no schema for is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter
from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError

from reflexr_graph.core import pg
from reflexr_graph.core.pg import UNKNOWN, AnyGraph, Edge, Kind
from reflexr_graph.errors import GraphDefinitionError


def adapter_or_none(tp: Any) -> TypeAdapter[Any] | None:
    """A TypeAdapter for ``tp``, or None when pydantic has no schema for it."""
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(tp)
        adapter.json_schema()
    except (PydanticSchemaGenerationError, PydanticUserError, TypeError, NameError):
        return None
    return adapter


def _check_explicit(graph: AnyGraph, kinds: Mapping[str, Kind], explicit: Mapping[str, Any]) -> None:
    unknown = sorted(n for n in explicit if n not in kinds)
    if unknown:
        raise GraphDefinitionError(
            f"input_types names nodes that are not in the graph: {', '.join(unknown)}; "
            f"the graph's nodes are: {', '.join(sorted(kinds))}"
        )
    refused = sorted(n for n in explicit if kinds[n] in (Kind.JOIN, Kind.END, Kind.START))
    if refused:
        raise GraphDefinitionError(
            f"input_types cannot type {', '.join(refused)}: a join's input is its reduced value, "
            "the end node takes the graph's output type and the start node the graph's input type"
        )
    for node_id, tp in explicit.items():
        if adapter_or_none(tp) is None:
            raise GraphDefinitionError(
                f"input_types[{node_id!r}] is {tp!r}, a type pydantic cannot serialize; "
                "name a type pydantic can validate and dump to JSON"
            )


def _annotated_types(graph: AnyGraph, kinds: Mapping[str, Kind]) -> dict[str, Any]:
    types: dict[str, Any] = {}
    for node_id, kind in kinds.items():
        if kind in (Kind.STEP, Kind.NODE_STEP):
            tp = pg.step_input_type(pg.node_of(graph, node_id))
            if tp is not UNKNOWN and adapter_or_none(tp) is not None:
                types[node_id] = tp
        elif kind is Kind.END:
            types[node_id] = graph.output_type
    return types


def _carried(edge: Edge, graph: AnyGraph, kinds: Mapping[str, Kind], types: Mapping[str, Any]) -> Any:
    """The type an edge carries into a decision or fork, UNKNOWN when reflexr cannot tell, None if not yet."""
    if edge.transforms:
        return UNKNOWN
    kind = kinds[edge.source]
    if kind is Kind.START:
        return graph.input_type
    if kind is Kind.STEP:
        return pg.step_return_type(pg.node_of(graph, edge.source))
    if kind is Kind.DECISION:
        return types.get(edge.source)
    # Joins carry their reduced value, forks their items or copies, node steps a node: none is known.
    return UNKNOWN


def _infer_one(
    node_id: str,
    incoming: list[Edge],
    graph: AnyGraph,
    kinds: Mapping[str, Kind],
    types: Mapping[str, Any],
) -> Any:
    carried = [_carried(e, graph, kinds, types) for e in incoming]
    if not carried or any(c is UNKNOWN for c in carried):
        return UNKNOWN
    if any(c is None for c in carried):
        return None
    first = carried[0]
    return first if all(c == first for c in carried) else UNKNOWN


def infer_input_types(graph: AnyGraph, explicit: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Map each node id whose input type is known to that type."""
    kinds = pg.node_kinds(graph)
    explicit = dict(explicit or {})
    _check_explicit(graph, kinds, explicit)
    types = _annotated_types(graph, kinds)
    types.update(explicit)
    all_edges = pg.edges(graph)
    pending = {n for n, k in kinds.items() if k in (Kind.DECISION, Kind.FORK) and n not in explicit}
    changed = True
    while changed:
        changed = False
        for node_id in sorted(pending):
            incoming = [e for e in all_edges if e.destination == node_id]
            tp = _infer_one(node_id, incoming, graph, kinds, types)
            if tp is None:
                continue
            pending.discard(node_id)
            changed = True
            if tp is not UNKNOWN and adapter_or_none(tp) is not None:
                types[node_id] = tp
    return types
