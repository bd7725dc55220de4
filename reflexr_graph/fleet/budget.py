"""The attempt budget of a new run the fleet records: one rule for every way a worker makes a run."""

from __future__ import annotations

from reflexr_graph import schemas
from reflexr_graph.core.action import GraphAction
from reflexr_graph.errors import UnknownGraph
from reflexr_graph.store.redis_store import RedisStore


def new_run_budget(store: RedisStore, graph: str, action: GraphAction | None, default: int) -> int:
    """The attempt budget of a new run of ``graph`` that this worker records: a foreign producer's
    message, a schedule's fire, a child run.

    The graph's published one first, as a Client's enqueue gives it (``schemas.run_max_attempts``;
    README: ``REFLEXR_MAX_ATTEMPTS``), even when this worker serves the graph with another: a
    worker's own setting plays no part while the graph is published. Only for a graph nobody
    published, what this worker would publish for it: ``action``'s own, else ``default`` (its
    ``REFLEXR_MAX_ATTEMPTS``).
    """
    try:
        return schemas.load(store, graph).max_attempts
    except UnknownGraph:
        return schemas.run_max_attempts(action, default)
