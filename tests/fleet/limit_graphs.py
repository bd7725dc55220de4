"""Graphs for the tests of issue 13 (timeouts, retry policies, limits), loaded by worker subprocesses
via ``REFLEXR_GRAPHS`` (:data:`REFS`).

Limited steps run a *detector*: one Lua script counts the steps of a limit key in flight and keeps
the most ever seen at once (``active:<key>``, ``peak:<key>``), so a test reads, across every
process of the fleet, how many ran together. Limit keys come from the run's state (``tag``), so
each test, and each tenant, has a budget of its own.
"""

from __future__ import annotations

import asyncio
import os
import time

from pydantic import BaseModel
from pydantic_graph import GraphBuilder, StepContext
from pydantic_graph.join import reduce_list_append

from reflexr_graph import GraphAction, Limit, RetryPolicy, RunFailure, current_run
from tests.fleet.graphs import GATE_TIMEOUT_S, r, record

ENTER = """
local n = redis.call('INCR', KEYS[1])
if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], n) end
return n
"""


STAMP = """
local t = redis.call('TIME')
return redis.call('RPUSH', KEYS[1], t[1] * 1000 + math.floor(t[2] / 1000))
"""


class Tag(BaseModel):
    tag: str = "t"


class Fan(BaseModel):
    items: int = 10
    sleep_s: float = 0.0
    gated: bool = False


def peak_key(key: str) -> str:
    return f"peak:{key}"


def gate_key(run_id: str) -> str:
    return f"lgate:{run_id}"


async def _gate() -> None:
    # Waits without blocking the loop and without taking the gate: every branch passes once it opens.
    run_id, deadline = current_run().run_id, time.monotonic() + GATE_TIMEOUT_S
    while not r().exists(gate_key(run_id)):
        if time.monotonic() > deadline:
            raise TimeoutError("gate never opened")
        await asyncio.sleep(0.05)


async def detected(key: str, fan: Fan) -> None:
    """Count this step in flight under ``key`` while it sleeps or waits for its gate."""
    r().eval(ENTER, 2, f"active:{key}", peak_key(key))
    r().rpush(f"pids:{key}", os.getpid())
    try:
        if fan.gated:
            await _gate()
        await asyncio.sleep(fan.sleep_s)
    finally:
        r().decr(f"active:{key}")


def conc_key(ctx: StepContext[Tag, None, object]) -> str:
    return f"conc:{ctx.state.tag}"


def rate_key(ctx: StepContext[Tag, None, object]) -> str:
    return f"rate:{ctx.state.tag}"


def _mapped(name: str, limit: Limit, starts: bool = False) -> GraphAction:
    """plan -> map over ``items`` -> work (limited) -> join -> total."""
    g = GraphBuilder(name=name, state_type=Tag, input_type=Fan, output_type=int)

    @g.step
    async def plan(ctx: StepContext[Tag, None, Fan]) -> list[Fan]:
        return [ctx.inputs] * ctx.inputs.items

    @g.step
    async def work(ctx: StepContext[Tag, None, Fan]) -> int:
        key = limit.key_for(ctx)
        if starts:  # when the step started, by the store's clock (a worker's own may be off)
            r().eval(STAMP, 1, f"starts:{key}")
        await detected(key, ctx.inputs)
        return 1

    collect = g.join(reduce_list_append, initial_factory=list[int])

    @g.step
    async def total(ctx: StepContext[Tag, None, list[int]]) -> int:
        return sum(ctx.inputs)

    g.add(
        g.edge_from(g.start_node).to(plan),
        g.edge_from(plan).map().to(work),
        g.edge_from(work).to(collect),
        g.edge_from(collect).to(total),
        g.edge_from(total).to(g.end_node),
    )
    return GraphAction(g.build(), limits={"work": limit})


class Slow(BaseModel):
    how: str = "async"
    """``async``: awaits past the timeout; ``sync``: blocks the event loop past it."""


def _slow() -> GraphAction:
    g = GraphBuilder(name="slow", input_type=Slow, output_type=str)

    @g.step
    async def crawl(ctx: StepContext[None, None, Slow]) -> str:
        record("crawl")
        if ctx.inputs.how == "sync":
            time.sleep(60)  # blocks the loop: only the heartbeat thread sees it overdue
        else:
            await asyncio.sleep(60)
        return "never"

    g.add(g.edge_from(g.start_node).to(crawl), g.edge_from(crawl).to(g.end_node))
    return GraphAction(g.build(), step_timeouts={"crawl": 0.5}, retry=RetryPolicy(max_attempts=2))


class Flaky(BaseModel):
    how: str = "non_retryable"


def _flaky() -> GraphAction:
    g = GraphBuilder(name="flaky", input_type=Flaky, output_type=str)

    @g.step
    async def call_api(ctx: StepContext[None, None, Flaky]) -> str:
        record("call_api")
        if ctx.inputs.how == "non_retryable":
            raise KeyError("no such customer")
        if current_run().attempt == 1:
            raise RunFailure("the API answered 429", reason="rate_limited", retry_after=1.5)
        return "ok"

    g.add(g.edge_from(g.start_node).to(call_api), g.edge_from(call_api).to(g.end_node))
    return GraphAction(
        g.build(),
        retry=RetryPolicy(max_attempts=4, backoff_s=0.05, backoff_max_s=0.1),
        step_retries={"call_api": RetryPolicy(non_retryable=(KeyError,))},
    )


def _trickle() -> GraphAction:
    """One step behind a rate of one start per 6 s: a second run would wait past the in-place bound."""
    g = GraphBuilder(name="trickle", state_type=Tag, input_type=int, output_type=int)

    @g.step
    async def drip(ctx: StepContext[Tag, None, int]) -> int:
        record("drip")
        return ctx.inputs

    g.add(g.edge_from(g.start_node).to(drip), g.edge_from(drip).to(g.end_node))
    return GraphAction(
        g.build(), limits={"drip": Limit(key=lambda ctx: f"trickle:{ctx.state.tag}", rate="1/6s")}
    )


conc = _mapped("conc", Limit(key=conc_key, concurrency=5))
rated = _mapped("rated", Limit(key=rate_key, rate="20/s"), starts=True)
slots3 = _mapped("slots3", Limit(key=conc_key, concurrency=3))
slots2 = _mapped("slots2", Limit(key=conc_key, concurrency=2))
slow = _slow()
flaky = _flaky()
trickle = _trickle()

ALL = (conc, rated, slots3, slots2, slow, flaky, trickle)
REFS = ",".join(f"tests.fleet.limit_graphs:{a.name}" for a in ALL)
