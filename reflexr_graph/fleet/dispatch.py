"""Sending the Celery message that asks a worker to run one attempt of a run.

Each graph has its own queue, ``<REFLEXR_QUEUE>.<graph>``, which only workers that load
the graph consume: a worker never receives a run it cannot run. The base queue
(``REFLEXR_QUEUE``) stays the contract for foreign producers; a worker that takes a
message there for a graph it lacks forwards it to the graph's queue.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

TASK_NAME = "reflexr_graph.run"
"""The task name foreign producers send; part of the public contract."""


def graph_queue(base: str, graph: str) -> str:
    """The queue of ``graph``'s runs: ``reflexr.triage`` for base queue ``reflexr``."""
    return f"{base}.{graph}"


def send_run(app: Celery, run_id: str, graph: str, *, base_queue: str | None = None) -> None:
    """Send ``reflexr_graph.run`` for the recorded run ``run_id`` to its graph's queue, now.

    The message carries the run id (as the task id) and the graph, never the inputs: the
    worker reads them from the run record, so a large or private input is not copied into
    the broker and shows in no monitoring tool. Never with a countdown or ETA: on Redis, a
    message held back longer than the visibility timeout is delivered again and again.
    Delayed retries wait in the store's due set, and the reaper calls this when they are due.
    """
    base = base_queue or app.conf.task_default_queue
    app.send_task(TASK_NAME, kwargs={"graph": graph}, task_id=run_id, queue=graph_queue(base, graph))


def forward(app: Celery, run_id: str, kwargs: dict[str, Any], graph: str) -> None:
    """Send a foreign producer's message on to its graph's queue, as it came (inputs and all)."""
    base = app.conf.task_default_queue
    app.send_task(TASK_NAME, kwargs=kwargs, task_id=run_id, queue=graph_queue(base, graph))
