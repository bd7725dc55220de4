"""Issue 25 item 4: a cancel asked of a running run is cooperative. The step in flight finishes,
the boundary after it is checkpointed, and the attempt stops there without running further."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction, current_run
from reflexr_graph.core.driver import run_attempt
from reflexr_graph.core.tally import Tally
from reflexr_graph.errors import CancelRequested
from reflexr_graph.model import Status
from reflexr_graph.store.redis_store import RedisStore
from tests.core import graphs
from tests.core.graphs import CALLS, Counted, hit
from tests.core.harness import Harness

STORE: list[RedisStore] = []


def _cancelling_chain() -> GraphAction:
    """first -> middle -> last; middle asks to cancel its own run, then goes on and finishes."""
    g = GraphBuilder(name="cancelling", state_type=Counted, input_type=int, output_type=int)

    @g.step
    async def first(ctx: StepContext[Counted, None, int]) -> int:
        hit("first")
        return ctx.inputs + 1

    @g.step
    async def middle(ctx: StepContext[Counted, None, int]) -> int:
        hit("middle")
        STORE[0].cancel(current_run().run_id)
        await asyncio.sleep(0)  # the step goes on after the cancel: it is not cut
        hit("middle_finished")
        return ctx.inputs + 1

    @g.step
    async def last(ctx: StepContext[Counted, None, int]) -> int:
        hit("last")
        return ctx.inputs + 1

    g.add(
        g.edge_from(g.start_node).to(first),
        g.edge_from(first).to(middle),
        g.edge_from(middle).to(last),
        g.edge_from(last).to(g.end_node),
    )
    return GraphAction(g.build())


def _run(harness: Harness, action: GraphAction, run_id: str, **kw: Any) -> Any:
    ctx = harness.claim(run_id)
    inputs, state = harness.recorded
    tally = Tally(action.name, run_id)
    return asyncio.run(run_attempt(action, harness.store, ctx, inputs=inputs, state=state, tally=tally, **kw))


def test_the_step_in_flight_finishes_and_the_attempt_stops_at_its_boundary(harness: Harness) -> None:
    STORE[:] = [harness.store]
    action = _cancelling_chain()
    run_id = harness.create(action, 1)
    with pytest.raises(CancelRequested):
        _run(harness, action, run_id)
    assert CALLS["middle_finished"] == 1, "the step was not cut"
    assert CALLS["last"] == 0, "nothing ran after the boundary"
    assert harness.progressed(run_id) == ["middle", "last"], "the boundary after the step is saved"
    info = harness.store.get(run_id)
    assert (info.status, info.cancel_requested) == (Status.RUNNING, True)
    harness.store.cancel(run_id, now=True)  # what the worker does next (fleet/recorder.py)
    assert harness.store.get(run_id).status is Status.CANCELLED
    harness.store.replay(run_id)
    assert harness.attempt(action, run_id) == 4  # the replay resumes at the saved boundary
    assert CALLS["first"] == 1 and CALLS["middle"] == 1 and CALLS["last"] == 1


def test_a_cancel_seen_by_the_heartbeat_stops_a_map_once_its_branches_finish(harness: Harness) -> None:
    """The stop signal (set by the heartbeat's renewal) is read at every boundary, saved or not: inside
    a map the branches in flight finish and record their results, and nothing after the map runs."""
    action = graphs.map_siblings()
    run_id = harness.create(action, 3)
    stop = graphs.PHASE["stop"] = threading.Event()  # item 0 sets it while the others run
    with pytest.raises(CancelRequested):
        _run(harness, action, run_id, stop=stop)
    assert [CALLS[f"work{i}"] for i in range(3)] == [1, 1, 1]
    assert CALLS["total"] == 0
    harness.store.cancel(run_id, now=True)
    harness.store.replay(run_id)
    assert harness.attempt(action, run_id) == 30
    assert [CALLS[f"work{i}"] for i in range(3)] == [1, 1, 1], "every branch was recorded before the stop"
