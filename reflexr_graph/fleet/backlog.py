"""How many run messages still wait in a graph's broker queues, for the reaper's resends.

A run queued with its message is kept in the due set as a safety net: a worker SIGKILLed
after it took the message but before its claim loses it, and kombu, with no unacked copy of a
run-id message (fleet/acks.py), never restores it. Under a backlog, though, a run may simply
wait in its queue past the resend delay; sending it again then only adds a message that the
claim refuses, at the moment the fleet is busiest. While a graph's queues hold messages, a run
of that graph whose message was sent is taken in turn or lost: either way its resend can wait
until the queues drain (fleet/reaping/dispatch.py: Dispatch._postponed).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from reflexr_graph.config import broker
from reflexr_graph.config.dispatch import PRIORITIES, graph_queue, version_queue
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.store import keys

log = logging.getLogger(__name__)


def queue_lists(app: FleetApp, graph: str) -> list[str]:
    """The broker lists a run message of ``graph`` can wait in: its graph queue's and, for the
    version this worker has of it, its version queue's, one list per priority."""
    base = app.conf.task_default_queue
    queues = [graph_queue(base, graph)]
    action = app.reflexr_registry.get(graph)
    if action is not None:
        queues.append(version_queue(base, graph, action.version))
    return [keys.broker_queue(queue, priority) for queue in queues for priority in PRIORITIES]


def waiting(app: FleetApp, graphs: Iterable[str]) -> dict[str, int] | None:
    """The messages waiting in each graph's broker lists, with one pipelined LLEN per list; None
    for a broker with no cheap count (RabbitMQ), whose resends then stay as they were."""
    if broker.kind_of(app.reflexr_settings.broker) is broker.BrokerKind.AMQP:
        return None
    lists = {graph: queue_lists(app, graph) for graph in graphs}
    if not lists:
        return {}
    pool: Any = app.pool  # Celery's pool of broker connections
    try:
        with pool.acquire(block=True) as conn:
            # The broker's own client (it may be another Redis than the store's).
            pipe = conn.default_channel.client.pipeline(transaction=False)
            for names in lists.values():
                for name in names:
                    pipe.llen(name)
            lengths = iter(pipe.execute())
    except (OperationalError, RedisError, OSError) as exc:
        log.warning(
            "reading the queues' lengths failed (%s); due runs are sent as they fall due", type(exc).__name__
        )
        return None
    return {graph: sum(next(lengths) for _ in names) for graph, names in lists.items()}
