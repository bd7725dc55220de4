"""Sending the Celery message that asks a worker to run one attempt of a run."""

from __future__ import annotations

from typing import Any

from celery import Celery

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
    due set instead, and the reaper calls this when they are due.
    """
    kwargs: dict[str, Any] = {"graph": graph, "inputs": inputs}
    if state is not None:
        kwargs["state"] = state
    if idempotency_key is not None:
        kwargs["idempotency_key"] = idempotency_key
    app.send_task(TASK_NAME, kwargs=kwargs, task_id=run_id, queue=app.conf.task_default_queue)
