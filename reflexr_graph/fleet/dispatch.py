"""Sending the Celery message that asks a worker to run one attempt of a run."""

from __future__ import annotations

from typing import Any

from celery import Celery
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from reflexr_graph import errors
from reflexr_graph.store import connection_errors

TASK_NAME = "reflexr_graph.run"
"""The task name foreign producers send; part of the public contract."""


def send_run(
    app: Celery,
    run_id: str,
    graph: str,
    inputs: Any,
    state: Any = None,
    idempotency_key: str | None = None,
) -> None:
    """Send ``reflexr_graph.run`` for ``run_id`` now.

    Never with a countdown or ETA: on Redis, a message held back longer than the
    visibility timeout is delivered again and again. Delayed retries wait in the store's
    due set instead, and the reaper calls this when they are due. A broker that cannot be
    reached raises ``errors.StoreUnavailable`` (or ``RedisMisconfigured``), as the store does.
    """
    kwargs: dict[str, Any] = {"graph": graph, "inputs": inputs}
    if state is not None:
        kwargs["state"] = state
    if idempotency_key is not None:
        kwargs["idempotency_key"] = idempotency_key
    try:
        app.send_task(TASK_NAME, kwargs=kwargs, task_id=run_id, queue=app.conf.task_default_queue)
    except (OperationalError, RedisError) as exc:
        # kombu wraps redis-py's error; the same translation as the store's says what to fix.
        at = connection_errors.Endpoint.of_url(app.conf.broker_url)
        translated = connection_errors.translate(exc, at) or errors.StoreUnavailable(
            f"the broker at {at.where} did not take the message of run {run_id} ({type(exc).__name__}); "
            "retry once Redis is back",
            endpoint=at.where,
        )
        raise translated from exc
