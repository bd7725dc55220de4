"""Graphs the benchmark workers load via ``REFLEXR_GRAPHS=bench.fleet_graph:NAME``.

``five_steps`` is the throughput graph: checkpoint_cost's chain of trivial steps, five long,
so the plain baseline (``bench.baseline_app``) runs exactly the same pydantic-graph graph.
``recover`` records each start of its slow step in Redis, so the benchmark sees when it
runs again after its worker was killed. ``hold`` waits mid-run, after one checkpoint, until
the benchmark has measured its memory. ``bench_wait`` waits for a signal or sleeps durably, for
the cost of waiting runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from functools import cache

import redis
from pydantic import BaseModel
from pydantic_graph import GraphBuilder, StepContext

from bench.checkpoint_cost import chain
from reflexr_graph import GraphAction, current_run, sleep, wait_for_signal
from reflexr_graph.config.settings import load_settings

FIVE = 5
HOLD_TIMEOUT_S = 120.0
"""A held run gives up after this, so a benchmark that died cannot leave a worker waiting forever."""

five_steps = chain(FIVE)
fifty_steps = chain(50)
one_step = chain(1)
"""A 50-step and a 1-step chain: their difference inside a worker is the fleet's cost per step."""


@cache
def worker_redis() -> redis.Redis:
    """The worker's own Redis (``REFLEXR_REDIS_URL``); one connection pool per process."""
    return redis.Redis.from_url(load_settings().redis_url, socket_timeout=10)


def starts_key(run_id: str) -> str:
    return f"bench:starts:{run_id}"


def gate_key(run_id: str) -> str:
    return f"bench:gate:{run_id}"


class RecoverIn(BaseModel):
    sleep_s: float = 60.0


class Progress(BaseModel):
    notes: list[str] = []


def _recover() -> GraphAction:
    g = GraphBuilder(
        name="bench_recover",
        state_type=Progress,
        input_type=RecoverIn,
        output_type=int,
        auto_instrument=False,
    )

    @g.step
    async def prepare(ctx: StepContext[Progress, None, RecoverIn]) -> float:
        ctx.state.notes.append("prepared")
        return ctx.inputs.sleep_s

    @g.step
    async def work(ctx: StepContext[Progress, None, float]) -> int:
        run = current_run()
        # The pool child's parent is the worker's main process: the benchmark kills that group.
        start = {"t": time.time(), "worker": os.getppid(), "attempt": run.attempt}
        worker_redis().rpush(starts_key(run.run_id), json.dumps(start))
        if run.attempt == 1:  # only the first attempt is slow: the one the benchmark kills
            await asyncio.sleep(ctx.inputs)
        return run.attempt

    g.add(
        g.edge_from(g.start_node).to(prepare), g.edge_from(prepare).to(work), g.edge_from(work).to(g.end_node)
    )
    return GraphAction(g.build(), max_attempts=3)


class HoldIn(BaseModel):
    payload: str = ""


def _hold() -> GraphAction:
    g = GraphBuilder(
        name="bench_hold", state_type=Progress, input_type=HoldIn, output_type=int, auto_instrument=False
    )

    @g.step
    async def record(ctx: StepContext[Progress, None, HoldIn]) -> int:
        ctx.state.notes.append(ctx.inputs.payload)
        return len(ctx.inputs.payload)

    @g.step
    async def wait_gate(ctx: StepContext[Progress, None, int]) -> int:
        key = gate_key(current_run().run_id)
        deadline = time.monotonic() + HOLD_TIMEOUT_S
        while not worker_redis().exists(key) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return ctx.inputs

    g.add(
        g.edge_from(g.start_node).to(record),
        g.edge_from(record).to(wait_gate),
        g.edge_from(wait_gate).to(g.end_node),
    )
    return GraphAction(g.build())


def _waiter() -> GraphAction:
    """One step that records each of its starts, then waits for the signal ``go`` (or sleeps, when its
    input is a number of seconds) and returns."""
    g = GraphBuilder(name="bench_wait", input_type=float, output_type=int, auto_instrument=False)

    @g.step
    async def ask(ctx: StepContext[None, None, float]) -> int:
        run = current_run()
        worker_redis().rpush(starts_key(run.run_id), json.dumps({"t": time.time(), "attempt": run.attempt}))
        if ctx.inputs:
            await sleep(ctx.inputs)
            return 0
        return await wait_for_signal("go", int)

    g.add(g.edge_from(g.start_node).to(ask), g.edge_from(ask).to(g.end_node))
    return GraphAction(g.build(), signals={"go": int})


recover = _recover()
hold = _hold()
waiter = _waiter()
REFS = ",".join(
    f"bench.fleet_graph:{name}"
    for name in ("five_steps", "fifty_steps", "one_step", "recover", "hold", "waiter")
)
"""REFLEXR_GRAPHS for every benchmark worker."""
