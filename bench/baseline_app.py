"""The baselines: plain Celery running the same graph, without reflexr.

``celery -A bench.baseline_app worker`` runs ``bench.plain`` (the whole five-step graph in
one task, ``graph.run``, no checkpoints) and ``bench.step`` (one step per task, for a chain
of five). Both use the fleet's own Celery configuration (``celery_config``: JSON, acks_late,
prefetch multiplier 1, same visibility timeout), so only reflexr's work differs. Completion
is counted with one INCR per run, on the same Redis, which the benchmark polls.
"""

from __future__ import annotations

import asyncio
from typing import Any

from celery import Celery, chain

from bench.checkpoint_cost import Blob
from bench.fleet_graph import FIVE, five_steps, worker_redis
from reflexr_graph.config.celery import celery_config
from reflexr_graph.config.settings import Settings, load_settings

PLAIN = "bench.plain"
STEP = "bench.step"


def make_app(settings: Settings) -> Celery:
    app = Celery("bench.baseline", set_as_current=False)
    app.conf.update(celery_config(settings))
    return app


# In a worker, settings come from REFLEXR_* like the fleet's; the benchmark process only
# imports this module for the task names and builds its own producer with make_app.
app = make_app(load_settings())


@app.task(name=PLAIN, shared=False, acks_late=True, ignore_result=True)
def plain(counter: str) -> None:
    asyncio.run(five_steps.graph.run(state=Blob(), inputs=0))
    worker_redis().incr(counter)


@app.task(name=STEP, shared=False, acks_late=True, ignore_result=True)
def step(value: int, counter: str, last: bool = False) -> int:
    if last:
        worker_redis().incr(counter)
    return value + 1


def send_plain(producer: Celery, counter: str, queue: str) -> None:
    producer.send_task(PLAIN, args=[counter], queue=queue)


def send_chain(producer: Celery, counter: str, queue: str) -> None:
    """Five ``bench.step`` tasks; each passes its value to the next (no result backend needed)."""
    sigs: list[Any] = [producer.signature(STEP, args=(0, counter), queue=queue)]
    sigs += [producer.signature(STEP, args=(counter,), queue=queue) for _ in range(FIVE - 2)]
    sigs.append(producer.signature(STEP, args=(counter,), kwargs={"last": True}, queue=queue))
    chain(*sigs).apply_async()
