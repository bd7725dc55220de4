"""Which queues a worker consumes: the base queue and one queue per graph it loads.

The Client and the reaper send each run to its graph's queue (``dispatch.graph_queue``),
so a worker only ever receives runs it can run. The base queue (``REFLEXR_QUEUE``) is the
contract for foreign producers; a worker that takes a message there for a graph it lacks
forwards it (unserved.py). The graph queues are added even when ``-Q`` names other queues:
without them, the worker would never see its graphs' runs.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import signals

from reflexr_graph.config.dispatch import graph_queue, version_queue

log = logging.getLogger(__name__)


def _add_graph_queues(sender: Any = None, **_: Any) -> None:
    # worker_init: after the worker selected its queues (-Q), before its consumer starts.
    from reflexr_graph.fleet.app import FleetApp

    app = getattr(sender, "app", None)
    if not isinstance(app, FleetApp):
        return
    base = app.reflexr_settings.queue
    queues = app.amqp.queues
    for graph, action in sorted(app.reflexr_registry.items()):
        # Built as Celery builds the queue a producer names in send_task (an exchange and routing
        # key of that name, and on RabbitMQ the quorum type): a queue declared any other way
        # is refused by RabbitMQ as inequivalent to the one the other side declared.
        queues.select_add(queues.new_missing(graph_queue(base, graph)))
        # Its version's queue: the runs pinned to this version, handed on by other versions' workers.
        queues.select_add(queues.new_missing(version_queue(base, graph, action.version)))


def install() -> None:
    signals.worker_init.connect(_add_graph_queues, weak=False)
