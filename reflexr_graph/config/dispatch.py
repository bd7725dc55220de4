"""Sending the Celery message that asks a worker to run one attempt of a run.

Each graph has its own queue, ``<REFLEXR_QUEUE>.<graph>``, which only workers that load
the graph consume: a worker never receives a run it cannot run. The base queue
(``REFLEXR_QUEUE``) stays the contract for foreign producers; a worker that takes a
message there for a graph it lacks forwards it to the graph's queue.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from celery import Celery
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from reflexr_graph import errors
from reflexr_graph.store import connection_errors

TASK_NAME = "reflexr_graph.run"
"""The task name foreign producers send; part of the public contract."""


def graph_queue(base: str, graph: str) -> str:
    """The queue of ``graph``'s runs: ``reflexr.triage`` for base queue ``reflexr``."""
    return f"{base}.{graph}"


def version_queue(base: str, graph: str, version: str) -> str:
    """The queue of the runs of one version of ``graph``, which only workers of that version consume:
    ``reflexr.triage@v2`` (G9: a run finishes on the version it started on)."""
    return f"{graph_queue(base, graph)}@{version}"


AMQP_SCHEMES = ("amqp", "amqps")
"""Broker URLs of RabbitMQ, where messages carry no priority."""
PRIORITIES = range(10)
"""Message priorities, 0 (the default, served first) to 9 (served last): the order kombu's Redis
transport gives them, one list per priority (``broker_transport_options["priority_steps"]``).
A worker pops the lists of a priority before those of the next, so a run enqueued with a lower
number is taken before those with higher numbers already queued."""


def check_priority(priority: object) -> int | None:
    """``priority`` if it is None or one of :data:`PRIORITIES`; InvalidInputs otherwise."""
    if priority is None or (
        isinstance(priority, int) and not isinstance(priority, bool) and priority in PRIORITIES
    ):
        return priority
    raise errors.InvalidInputs(
        "priority must be an integer from 0 (served first, the default) to 9 (served last)",
        [{"loc": ["priority"], "msg": "must be an integer from 0 to 9", "type": "priority"}],
    )


def _publish(
    app: Celery, run_id: str, kwargs: dict[str, Any], queue: str, priority: int | None = None
) -> None:
    if urlsplit(str(app.conf.broker_url or "")).scheme in AMQP_SCHEMES:
        # RabbitMQ orders priorities the other way (a higher number first) and its quorum queues
        # keep at most two levels: the run's priority stays in its record, not in the message.
        priority = None
    try:
        app.send_task(TASK_NAME, kwargs=kwargs, task_id=run_id, queue=queue, priority=priority)
    except (OperationalError, RedisError) as exc:
        # kombu wraps redis-py's error; the same translation as the store's says what to fix.
        at = connection_errors.Endpoint.of_url(app.conf.broker_url)
        translated = connection_errors.translate(exc, at) or errors.StoreUnavailable(
            f"the broker at {at.where} did not take the message of run {run_id} ({type(exc).__name__}); "
            "retry once the broker is back",
            endpoint=at.where,
        )
        raise translated from exc


def send_run(
    app: Celery,
    run_id: str,
    graph: str,
    *,
    base_queue: str | None = None,
    priority: int | None = None,
    version: str | None = None,
) -> None:
    """Send ``reflexr_graph.run`` for the recorded run ``run_id`` to its graph's queue, now.

    The message carries the run id (as the task id) and the graph, never the inputs: the
    worker reads them from the run record, so a large or private input is not copied into
    the broker and shows in no monitoring tool. Never with a countdown or ETA: on Redis, a
    message held back longer than the visibility timeout is delivered again and again.
    Delayed retries wait in the store's due set, and the reaper calls this when they are due.
    A broker that cannot be reached raises ``errors.StoreUnavailable`` (or
    ``RedisMisconfigured``), as the store does. ``priority`` is the run's (:data:`PRIORITIES`).

    With ``version``, the message goes to that version's queue (:func:`version_queue`).
    """
    base = base_queue or app.conf.task_default_queue
    queue = graph_queue(base, graph) if version is None else version_queue(base, graph, version)
    _publish(app, run_id, {"graph": graph}, queue, priority)


def forward(app: Celery, run_id: str, kwargs: dict[str, Any], graph: str, version: str | None = None) -> None:
    """Send a foreign producer's message on to its graph's queue (or its version's), as it came."""
    base = app.conf.task_default_queue
    queue = graph_queue(base, graph) if version is None else version_queue(base, graph, version)
    _publish(app, run_id, kwargs, queue)
