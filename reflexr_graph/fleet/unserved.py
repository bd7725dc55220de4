"""Runs of a graph this worker does not run: forwarded to a worker that does, or held for one.

During a rolling deploy that adds a graph, some workers have it and some do not, and for a
moment none may have it at all. A run must not die of that: a message for a graph this
worker lacks goes on to the graph's own queue when a live worker serves it, and otherwise
the run waits (in the store's due set, holding no message) until one does. Only after
``REFLEXR_UNKNOWN_GRAPH_GRACE_S`` with no live worker for its graph is it dead-lettered as
``unknown_graph``; an operator replays it once such a worker runs.
"""

from __future__ import annotations

import logging
from typing import Any

from reflexr_graph.config.dispatch import forward, graph_queue
from reflexr_graph.fleet import observe
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.message import RunMessage, create_from_message
from reflexr_graph.fleet.outcome import Delivered, Outcome
from reflexr_graph.model import Reason, Status
from reflexr_graph.store.contracts import Unserved
from reflexr_graph.store.redis_store import RedisStore

log = logging.getLogger(__name__)

RECHECK_MS = 5000
"""How often a held run looks again for a live worker that serves its graph."""


def route(
    app: FleetApp, store: RedisStore, run_id: str, msg: RunMessage, kwargs: dict[str, Any]
) -> Delivered:
    """Forward a delivery of a graph this worker does not run, or hold its run for a worker that will."""
    graph = msg.graph
    serving = store.serving([graph])[graph]
    if serving:
        forward(app, run_id, kwargs, graph)
        log.info(
            "run %s: this worker does not run graph %r; forwarded to queue %s, which %d live worker(s) "
            "consume (%s)",
            run_id,
            graph,
            graph_queue(app.conf.task_default_queue, graph),
            len(serving),
            ", ".join(serving),
        )
        return Delivered(Outcome.FORWARDED, run_id)
    if store.graph_of(run_id) is None:
        # A foreign producer's first message: it is the run's only record until this one exists.
        settings = app.reflexr_settings
        create_from_message(store, run_id, msg, None, settings.max_attempts, settings.lease_ttl_ms)
    return hold(app, store, run_id, graph)


def hold(app: FleetApp, store: RedisStore, run_id: str, graph: str) -> Delivered:
    """Keep a run whose graph no live worker serves; dead-letter it once the grace period is over."""
    grace_s = app.reflexr_settings.unknown_graph_grace_s
    outcome = store.hold_unserved(
        run_id,
        grace_ms=int(grace_s * 1000),
        recheck_ms=min(RECHECK_MS, max(100, int(grace_s * 1000))),
        message=(
            f"no live worker served graph {graph!r} for {grace_s:g}s; deploy a worker that loads it "
            "(REFLEXR_GRAPHS), then replay the run"
        ),
    )
    if outcome is Unserved.DEAD:
        observe.run_ended(graph, Status.DEAD, Reason.UNKNOWN_GRAPH.value)
        log.error(
            "run %s dead-lettered (unknown_graph): no live worker served graph %r for %gs; replay it "
            "with `reflexr-graph dlq replay %s` once a worker loads it",
            run_id,
            graph,
            grace_s,
            run_id,
        )
        return Delivered(Outcome.DEAD, run_id, Reason.UNKNOWN_GRAPH.value, f"no live worker serves {graph!r}")
    if outcome is Unserved.BEGAN:
        log.warning(
            "run %s: no live worker serves graph %r; the run waits up to %gs for one "
            "(REFLEXR_UNKNOWN_GRAPH_GRACE_S), then is dead-lettered as unknown_graph",
            run_id,
            graph,
            grace_s,
        )
    return Delivered(Outcome.HELD, run_id, outcome.value)
