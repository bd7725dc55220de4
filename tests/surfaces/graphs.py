"""Graphs for surface tests. Steps count their executions in Redis, so a test sees them across processes.

``counter``: three steps ``s1 -> s2 -> s3``; ``s2`` fails until the Redis flag ``rgtest:ok:<key>``
is set. ``blocker``: one step that waits until ``rgtest:release:<key>`` gets an item.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import redis
from pydantic import BaseModel, Field
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction, RunFailure, wait_for_signal


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


counter = _counter()
blocker = _blocker()
approvals = _approvals()
ACTIONS = (counter, blocker, approvals)
