"""Which step boundaries are safe to checkpoint, from the graph's structure alone.

A boundary is quiescent (docs/design.md#quiescent-boundaries) when exactly one task comes
next, that task is not between a fork and its join (the join's region per
``graph.parent_forks``) nor the join itself, and no fork without a join is in its fork stack.

A join's task carries one branch's value into the join's reducer, under that branch's fork
stack: it is still inside the fork run. A map over several items never shows it alone (its
siblings are in flight), but the only item of a map over one does, so the join is part of
the region by rule rather than by the timing of its branches.

Refinement (docs/design.md#refinements): ``__start__`` acts as a fork in ``parent_forks`` but runs a
single thread. A join whose parent is ``__start__`` would otherwise put every node
before the first real fork in its region, so "plan, then map, then join" could not be
saved before the map. The region used here keeps only the nodes that a real fork
reaches on the way to the join.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from reflexr_graph.core.pg import START_ID, Edge, Kind


def _successors(edges: Iterable[Edge]) -> dict[str, set[str]]:
    succ: dict[str, set[str]] = defaultdict(set)
    for e in edges:
        succ[e.source].add(e.destination)
    return succ


def _reachable_from(start: str, succ: Mapping[str, set[str]]) -> set[str]:
    """Nodes reachable from ``start`` through one edge or more."""
    seen: set[str] = set()
    frontier = list(succ.get(start, ()))
    while frontier:
        node = frontier.pop()
        if node not in seen:
            seen.add(node)
            frontier.extend(succ.get(node, ()))
    return seen


@dataclass(frozen=True)
class BoundaryMap:
    """The structural half of the safety test; the runtime half is ``pg.is_quiescent``."""

    in_region: frozenset[str]
    """Nodes that lie between a real fork and a join, and the joins: a task there is never saved."""
    unjoined_forks: frozenset[str]
    """Real forks no join closes: a task with one in its fork stack is never saved."""

    def is_safe(self, node_id: str, fork_ids: Iterable[str]) -> bool:
        if node_id in self.in_region:
            return False
        if not self.unjoined_forks:  # most graphs: every fork is joined, so no stack rules a task out
            return True
        return not any(f in self.unjoined_forks for f in fork_ids if f != START_ID)


def forked_nodes(kinds: Mapping[str, Kind], edges: Iterable[Edge]) -> frozenset[str]:
    """The nodes some real fork reaches: only their tasks can carry a fork in their fork stack.

    A wide over-approximation (it includes the nodes after a join), which is all a step needs
    to know that its branch path is '' without reading its fork stack.
    """
    succ = _successors(edges)
    reached: set[str] = set()
    for node, kind in kinds.items():
        if kind is Kind.FORK:
            reached |= _reachable_from(node, succ)
    return frozenset(reached)


def build_boundary_map(
    kinds: Mapping[str, Kind], edges: Iterable[Edge], parents: Mapping[str, tuple[str, frozenset[str]]]
) -> BoundaryMap:
    succ = _successors(edges)
    reach = {node: _reachable_from(node, succ) for node in kinds}
    real_forks = {n for n, k in kinds.items() if k is Kind.FORK}
    in_region: set[str] = {n for n, k in kinds.items() if k is Kind.JOIN}
    joined: set[str] = set()
    for join_id, (parent, between) in parents.items():
        candidates = (between | {parent}) & real_forks
        forks = {f for f in candidates if join_id in reach[f]}
        joined |= forks
        for node in between:
            if join_id in reach[node] and any(node in reach[f] for f in forks):
                in_region.add(node)
    return BoundaryMap(frozenset(in_region), frozenset(real_forks - joined))
