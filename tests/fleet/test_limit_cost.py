"""A step under a concurrency limit costs one round trip (issue 18, change 8): the slot is taken by
limit_acquire.lua and given back by the write that follows the step (a branch step's record), not
by a ZREM of its own. In-process attempts through the fleet's own AttemptPort and limiter, against
a private Redis watched with MONITOR."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
import redis
from pydantic import BaseModel
from pydantic_graph import GraphBuilder, StepContext
from pydantic_graph.join import reduce_list_append

from reflexr_graph import GraphAction, Limit
from reflexr_graph.core.driver import run_attempt
from reflexr_graph.core.limits import Limiter
from reflexr_graph.fleet.attempt_port import AttemptPort
from reflexr_graph.store import RedisStore, keys
from tests.redis_server import RedisFactory

BRANCHES = 6
KEY = "cost"


class Box(BaseModel):
    n: int = 0


def mapped(concurrency: int, *, change_state: bool = False) -> GraphAction:
    """``plan`` maps its items over ``call`` (limited), then ``total`` joins them. With
    ``change_state`` each branch changes the state, so its result is not recorded."""
    g = GraphBuilder(
        name=f"limit_cost_{uuid.uuid4().hex[:6]}",
        state_type=Box,
        input_type=int,
        output_type=int,
        auto_instrument=False,
    )

    @g.step
    async def plan(ctx: StepContext[Box, None, int]) -> list[int]:
        return list(range(ctx.inputs))

    @g.step
    async def call(ctx: StepContext[Box, None, int]) -> int:
        if change_state:
            ctx.state.n += 1
        return ctx.inputs

    collect = g.join(reduce_list_append, initial_factory=list[int])

    @g.step
    async def total(ctx: StepContext[Box, None, list[int]]) -> int:
        return len(ctx.inputs)

    g.add(
        g.edge_from(g.start_node).to(plan),
        g.edge_from(plan).map().to(call),
        g.edge_from(call).to(collect),
        g.edge_from(collect).to(total),
        g.edge_from(total).to(g.end_node),
    )
    return GraphAction(g.build(), limits={"call": Limit(key=KEY, concurrency=concurrency)})


@pytest.fixture
def store(private_redis: RedisFactory) -> Iterator[RedisStore]:
    s = RedisStore.from_url(private_redis().url)
    s.preload_scripts()
    try:
        yield s
    finally:
        s.close()


def attempt(store: RedisStore, action: GraphAction) -> tuple[object, list[str]]:
    """One attempt of ``action`` over BRANCHES items: its output, and the commands every connection
    but Lua's sent meanwhile."""
    run_id = uuid.uuid4().hex
    store.create_run(
        run_id, graph=action.name, inputs_json=str(BRANCHES), max_attempts=3, dispatch_grace_ms=600_000
    )
    ctx = store.claim(run_id, uuid.uuid4().hex, lease_ttl_ms=600_000).context()
    port = AttemptPort(store, None, {}, lambda: 600.0, slot_ttl_ms=600_000)
    seen: list[dict[str, str]] = []
    with redis.Redis(connection_pool=store.client.connection_pool).monitor() as monitor:
        outcome = asyncio.run(run_attempt(action, port, ctx, inputs=BRANCHES, limiter=Limiter(port, ctx)))
        store.client.echo("end of the attempt")
        while not seen or "end of the attempt" not in seen[-1]["command"]:
            seen.append(monitor.next_command())
    # The monitor took the pool's connection: the store's next call opens one (HELLO, PING).
    setup = ("HELLO", "PING")
    return outcome, [
        c["command"] for c in seen[:-1] if c["client_type"] != "lua" and not c["command"].startswith(setup)
    ]


def test_a_limited_branch_step_is_one_round_trip_its_record_gives_the_slot_back(store: RedisStore) -> None:
    outcome, sent = attempt(store, mapped(concurrency=1))
    assert getattr(outcome, "output", None) == BRANCHES, outcome
    assert [c for c in sent if c.split()[0].upper() == "ZREM"] == [], "no release of its own"
    # Per branch: the acquisition and the record (which carries the release); the saves before
    # ``plan`` and before ``total`` are the attempt's own (its success is written by its caller).
    assert len(sent) == 2 * BRANCHES + 2, "\n".join(c[:60] for c in sent)
    assert store.client.zcard(keys.limit_slots(KEY)) == 0, "every slot was given back"
    stats = store.client.hgetall(keys.limit_stats(KEY))
    assert stats.get(b"denied") is None, "with a concurrency of 1, each branch found the slot free"


def test_a_branch_whose_result_is_not_recorded_still_gives_its_slot_back(store: RedisStore) -> None:
    outcome, sent = attempt(store, mapped(concurrency=1, change_state=True))
    assert getattr(outcome, "output", None) == BRANCHES, outcome
    assert sum(c.split()[0].upper() == "ZREM" for c in sent) == BRANCHES, "released at the step's end"
    assert store.client.zcard(keys.limit_slots(KEY)) == 0
    assert store.client.hgetall(keys.limit_stats(KEY)).get(b"denied") is None


def linear(*, fail: bool = False) -> GraphAction:
    """``first -> limited -> last``: no fork reaches ``limited``, so the save before ``last``
    gives its slot back. With ``fail``, ``limited`` raises."""
    g = GraphBuilder(name=f"limit_line_{uuid.uuid4().hex[:6]}", input_type=int, output_type=int)

    @g.step
    async def first(ctx: StepContext[None, None, int]) -> int:
        return ctx.inputs

    @g.step
    async def limited(ctx: StepContext[None, None, int]) -> int:
        if fail:
            raise RuntimeError("the limited step fails")
        return ctx.inputs + 1

    @g.step
    async def last(ctx: StepContext[None, None, int]) -> int:
        return ctx.inputs * 2

    g.add(
        g.edge_from(g.start_node).to(first),
        g.edge_from(first).to(limited),
        g.edge_from(limited).to(last),
        g.edge_from(last).to(g.end_node),
    )
    return GraphAction(g.build(), limits={"limited": Limit(key=KEY, concurrency=1)})


def test_a_limited_step_outside_a_fork_gives_its_slot_back_with_the_next_save(store: RedisStore) -> None:
    outcome, sent = attempt(store, linear())
    assert getattr(outcome, "output", None) == 2 * (BRANCHES + 1), outcome
    assert [c for c in sent if c.split()[0].upper() == "ZREM"] == [], "no release of its own"
    # The save before ``limited``, the acquisition, and the save before ``last`` (with the slot).
    assert len(sent) == 3, "\n".join(c[:60] for c in sent)
    assert store.client.zcard(keys.limit_slots(KEY)) == 0, "the save gave the slot back"


def test_a_limited_step_that_fails_gives_its_slot_back(store: RedisStore) -> None:
    with pytest.raises(RuntimeError):
        attempt(store, linear(fail=True))
    assert store.client.zcard(keys.limit_slots(KEY)) == 0
