"""Graphs for surface tests. Steps count their executions in Redis, so a test sees them across processes.

``counter``: three steps ``s1 -> s2 -> s3``; ``s2`` fails until the Redis flag ``rgtest:ok:<key>``
is set. ``blocker``: one step that waits until ``rgtest:release:<key>`` gets an item.
``chain``: six steps ``t1 -> ... -> t6`` (time travel); ``t<i>`` adds ``i`` to the state's total
and notes its name, and ``t6`` returns the total. While the flag ``rgtest:bad:<key>`` is set,
``t4`` adds 1000 instead (a bad step), and ``t5`` refuses a total above 500 for good.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import redis
from pydantic import BaseModel, Field
from pydantic_graph import GraphBuilder, StepContext
from pydantic_graph.join import reduce_list_append

from reflexr_graph import GraphAction, RetryPolicy, RunFailure, current_run, emit, run_child, wait_for_signal


class Job(BaseModel):
    key: str = Field(min_length=1)
    n: int = Field(ge=0)


@dataclass
class Tally:
    total: int = 0


def _redis() -> redis.Redis:
    return redis.Redis.from_url(os.environ["REFLEXR_REDIS_URL"])


def count_key(key: str, step: str) -> str:
    return f"rgtest:count:{key}:{step}"


def ok_key(key: str) -> str:
    return f"rgtest:ok:{key}"


def release_key(key: str) -> str:
    return f"rgtest:release:{key}"


def bad_key(key: str) -> str:
    return f"rgtest:bad:{key}"


@dataclass
class Ledger:
    total: int = 0
    visited: list[str] = field(default_factory=list)


CHAIN_STEPS = tuple(f"t{i}" for i in range(1, 7))
BAD_TOTAL = 500


def _add(i: int) -> Callable[[StepContext[Ledger, None, str]], Awaitable[str]]:
    async def add(ctx: StepContext[Ledger, None, str]) -> str:
        r = _redis()
        r.incr(count_key(ctx.inputs, f"t{i}"))
        if i == 5 and ctx.state.total > BAD_TOTAL:
            raise RunFailure("t5 refuses a total this large", reason="bad_total", permanent=True)
        bad = i == 4 and r.exists(bad_key(ctx.inputs))
        ctx.state.total += 1000 if bad else i
        ctx.state.visited.append(f"t{i}")
        return ctx.inputs

    return add


def _chain(*, changed: bool = False) -> GraphAction:
    """``changed``: the same graph with one more step at the end, as a later deploy might have it."""
    g = GraphBuilder(name="chain", state_type=Ledger, input_type=str, output_type=int)
    steps = [g.step(_add(i), node_id=f"t{i}") for i in range(1, 6)]

    @g.step(node_id="t6")
    async def t6(ctx: StepContext[Ledger, None, str]) -> int:
        _redis().incr(count_key(ctx.inputs, "t6"))
        ctx.state.total += 6
        ctx.state.visited.append("t6")
        return ctx.state.total

    edges = [g.edge_from(g.start_node).to(steps[0])]
    edges += [g.edge_from(a).to(b) for a, b in zip(steps, [*steps[1:], t6], strict=True)]
    if changed:

        @g.step(node_id="t7")
        async def t7(ctx: StepContext[Ledger, None, int]) -> int:
            return ctx.inputs

        edges += [g.edge_from(t6).to(t7), g.edge_from(t7).to(g.end_node)]
    else:
        edges.append(g.edge_from(t6).to(g.end_node))
    g.add(*edges)
    return GraphAction(g.build(), max_attempts=1)


def _counter() -> GraphAction:
    g = GraphBuilder(name="counter", state_type=Tally, input_type=Job, output_type=int)

    @g.step
    async def s1(ctx: StepContext[Tally, None, Job]) -> Job:
        _redis().incr(count_key(ctx.inputs.key, "s1"))
        ctx.state.total += ctx.inputs.n
        return ctx.inputs

    @g.step
    async def s2(ctx: StepContext[Tally, None, Job]) -> Job:
        r = _redis()
        r.incr(count_key(ctx.inputs.key, "s2"))
        if not r.exists(ok_key(ctx.inputs.key)):
            raise RunFailure("s2 is told to fail until its flag is set", reason="flag_missing")
        ctx.state.total += 1
        return ctx.inputs

    @g.step
    async def s3(ctx: StepContext[Tally, None, Job]) -> int:
        _redis().incr(count_key(ctx.inputs.key, "s3"))
        return ctx.state.total

    g.add(
        g.edge_from(g.start_node).to(s1),
        g.edge_from(s1).to(s2),
        g.edge_from(s2).to(s3),
        g.edge_from(s3).to(g.end_node),
    )
    return GraphAction(g.build(), max_attempts=1)


def _blocker() -> GraphAction:
    g = GraphBuilder(name="blocker", input_type=str, output_type=str)

    @g.step
    async def hold(ctx: StepContext[None, None, str]) -> str:
        _redis().blpop([release_key(ctx.inputs)], timeout=60)
        return ctx.inputs

    g.add(g.edge_from(g.start_node).to(hold), g.edge_from(hold).to(g.end_node))
    return GraphAction(g.build())


class Approval(BaseModel):
    approved: bool
    by: str = Field(min_length=1)


def _approvals() -> GraphAction:
    """One step that waits for the signal ``approval`` and returns who decided."""
    g = GraphBuilder(name="approvals", input_type=str, output_type=str)

    @g.step
    async def decide(ctx: StepContext[None, None, str]) -> str:
        answer = await wait_for_signal("approval", Approval)
        return f"{ctx.inputs}: {'approved' if answer.approved else 'rejected'} by {answer.by}"

    g.add(g.edge_from(g.start_node).to(decide), g.edge_from(decide).to(g.end_node))
    return GraphAction(g.build(), signals={"approval": Approval})


class Go(BaseModel):
    go: bool = True


def _journey() -> GraphAction:
    """``fetch -> pause -> finish``: ``fetch`` fails its first time (a retry, with a short
    backoff), ``pause`` waits for the signal ``go``: a run with two attempts, a backoff and a wait."""
    g = GraphBuilder(name="journey", input_type=str, output_type=str)

    @g.step
    async def fetch(ctx: StepContext[None, None, str]) -> str:
        if _redis().incr(count_key(ctx.inputs, "fetch")) == 1:
            raise RunFailure("fetch fails its first time", reason="first_time")
        return ctx.inputs

    @g.step
    async def pause(ctx: StepContext[None, None, str]) -> str:
        await wait_for_signal("go", Go)
        return ctx.inputs

    @g.step
    async def finish(ctx: StepContext[None, None, str]) -> str:
        return f"{ctx.inputs}: done"

    g.add(
        g.edge_from(g.start_node).to(fetch),
        g.edge_from(fetch).to(pause),
        g.edge_from(pause).to(finish),
        g.edge_from(finish).to(g.end_node),
    )
    return GraphAction(g.build(), retry=RetryPolicy(max_attempts=3, backoff_s=0.3), signals={"go": Go})


TALK = ("Hello", ", ", "world", "!")


def _talker() -> GraphAction:
    """One step, ``speak``, that streams ``TALK`` token by token: its first time it fails after two
    tokens (a retry, with a short backoff, and a restart item), its second it stops after two tokens
    until ``rgtest:release:<key>`` gets an item, then emits the rest."""
    g = GraphBuilder(name="talker", input_type=str, output_type=str)

    @g.step
    async def speak(ctx: StepContext[None, None, str]) -> str:
        r = _redis()
        first = r.incr(count_key(ctx.inputs, "speak")) == 1
        for i, token in enumerate(TALK):
            if i == 2 and first:
                raise RunFailure("speak fails its first time, mid-stream", reason="first_time")
            if i == 2:
                # Blocks the step's loop, as synchronous code does: the items before are written anyway.
                deadline = time.monotonic() + 60
                while not r.blpop([release_key(ctx.inputs)], timeout=1) and time.monotonic() < deadline:
                    pass
            await emit(token)
        return "".join(TALK)

    g.add(g.edge_from(g.start_node).to(speak), g.edge_from(speak).to(g.end_node))
    return GraphAction(g.build(), retry=RetryPolicy(max_attempts=3, backoff_s=0.3))


class Spread(BaseModel):
    key: str = ""


SPREAD_ITEMS = 4
SPREAD_FAILS = 3
"""The item of ``spread`` whose branch fails its first time: the slowest, so its siblings have
recorded their results when it fails."""


async def _released(key: str) -> None:
    """Back once ``rgtest:release:<key>`` gets an item (or after a minute), the loop free meanwhile."""
    deadline = time.monotonic() + 60
    while _redis().lpop(release_key(key)) is None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


def _spread() -> GraphAction:
    """``plan`` -> a map over four items -> ``work`` -> join -> ``total``: item i's branch takes
    (i + 1) x 150 ms, and item 3's fails its first time, after its siblings finished (with inputs
    ``hold-...``, attempt 1's item i ends once ``rgtest:release:<inputs>:<i>`` gets an item). Attempt
    1 records their results (and their lanes); attempt 2, after a short backoff, runs item 3 alone."""
    g = GraphBuilder(name="spread", state_type=Spread, input_type=str, output_type=list[int])

    @g.step
    async def plan(ctx: StepContext[Spread, None, str]) -> list[int]:
        ctx.state.key = ctx.inputs
        return list(range(SPREAD_ITEMS))

    @g.step
    async def work(ctx: StepContext[Spread, None, int]) -> int:
        await asyncio.sleep((ctx.inputs + 1) * 0.15)
        first = current_run().attempt == 1
        if first and ctx.state.key.startswith("hold"):
            await _released(f"{ctx.state.key}:{ctx.inputs}")
        if first and ctx.inputs == SPREAD_FAILS:
            raise RunFailure("item 3 fails its first time", reason="first_time")
        return ctx.inputs * 10

    collect = g.join(reduce_list_append, initial_factory=list[int])

    @g.step
    async def total(ctx: StepContext[Spread, None, list[int]]) -> list[int]:
        return sorted(ctx.inputs)

    g.add(
        g.edge_from(g.start_node).to(plan),
        g.edge_from(plan).map().to(work),
        g.edge_from(work).to(collect),
        g.edge_from(collect).to(total),
        g.edge_from(total).to(g.end_node),
    )
    return GraphAction(g.build(), retry=RetryPolicy(max_attempts=3, backoff_s=0.3))


def _kin() -> GraphAction:
    """One step, ``ask``, that runs a ``spread`` child over its inputs and returns its output: the
    run waits for the child, holding no worker, and its step runs again once the child ended."""
    g = GraphBuilder(name="kin", input_type=str, output_type=list[int])

    @g.step
    async def ask(ctx: StepContext[None, None, str]) -> list[int]:
        output: list[int] = await run_child("spread", f"{ctx.inputs}-child")
        return output

    g.add(g.edge_from(g.start_node).to(ask), g.edge_from(ask).to(g.end_node))
    return GraphAction(g.build())


counter = _counter()
blocker = _blocker()
talker = _talker()
chain = _chain()
approvals = _approvals()
journey = _journey()
spread = _spread()
kin = _kin()
ACTIONS = (counter, blocker, approvals)
WORKER_ACTIONS = (*ACTIONS, chain, journey, talker, spread, kin)
"""What the surface tests' worker runs: the published test graphs, and ``chain``, which time-travel
tests publish themselves, so graph listings elsewhere stay as they are, ``journey`` (the console's
timeline), ``talker`` (streaming), ``spread`` (a map's branches in the timeline) and ``kin`` (a
wait for a child run)."""


class Order(BaseModel):
    """Inputs whose fields have defaults, one a boolean that defaults to True, one an Optional[float]
    (the console's form)."""

    item: str
    require_approval: bool = True
    rush: bool = False
    copies: int = 2
    discount: float | None = None


def _orders() -> GraphAction:
    """One step that says how the order goes; published by the console's test only, never run."""
    g = GraphBuilder(name="orders", input_type=Order, output_type=str)

    @g.step
    async def place(ctx: StepContext[None, None, Order]) -> str:
        return f"{ctx.inputs.copies} x {ctx.inputs.item}"

    g.add(g.edge_from(g.start_node).to(place), g.edge_from(place).to(g.end_node))
    return GraphAction(g.build())


orders = _orders()
