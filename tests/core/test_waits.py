"""Issue 10 in the engine: wait_for_signal and sleep suspend the run, and a re-run of the step after the
wake returns at once, repeating nothing recorded before the wait (real attempts, real Redis, no Celery)."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import (
    GraphAction,
    GraphDefinitionError,
    ReflexrError,
    RunFailure,
    durable_call,
    sleep,
    wait_for_signal,
)
from reflexr_graph.core.tracing import EVENT_SUSPENDED
from reflexr_graph.errors import Suspended
from reflexr_graph.model import Status
from tests.core.graphs import CALLS, hit, review_graph
from tests.core.harness import Harness

GRACE_MS = 30_000


def test_wait_then_signal_repeats_nothing_before_the_wait(
    harness: Harness, spans: InMemorySpanExporter
) -> None:
    action = review_graph()
    run_id = harness.create(action, "ticket-7")
    with pytest.raises(Suspended) as suspended:
        harness.attempt(action, run_id)
    assert (suspended.value.signal, suspended.value.wake_at_ms) == ("approval", None)
    info = harness.store.get(run_id)
    assert (info.status, info.waiting_for, info.attempts) == (Status.WAITING, "approval", 0)
    step_events = [
        e.name for s in spans.get_finished_spans() if s.name == "execute_step review" for e in s.events
    ]
    assert EVENT_SUSPENDED in step_events, "the step's span ends with the suspension"
    harness.store.signal(run_id, "approval", '{"approved": true, "by": "ana"}', dispatch_grace_ms=GRACE_MS)
    assert harness.attempt(action, run_id) == "summary of TICKET-7: approved by ana"
    assert (CALLS["prepare"], CALLS["summarize"], CALLS["close"]) == (1, 1, 1)
    assert CALLS["review"] == 2, "the waiting step runs again, from the checkpoint before it"
    assert harness.store.get(run_id).reused_calls == 1


def test_a_signal_that_arrived_first_means_no_suspension(harness: Harness) -> None:
    action = review_graph()
    run_id = harness.create(action, "t")
    harness.store.signal(run_id, "approval", '{"approved": false, "by": "bo"}', dispatch_grace_ms=GRACE_MS)
    assert harness.attempt(action, run_id) == "summary of T: rejected by bo"
    assert CALLS["review"] == 1
    assert "run_waiting" not in [e.type for e in harness.store.events(run_id)]


def test_a_timeout_raises_signal_timeout_in_the_step_which_decides(
    harness: Harness, fake_clock: list[float]
) -> None:
    action = review_graph(timeout=3600)
    run_id = harness.create(action, "t")
    with pytest.raises(Suspended) as suspended:
        harness.attempt(action, run_id)
    assert suspended.value.wake_at_ms is not None
    assert harness.store.get(run_id).wake_at == pytest.approx(fake_clock[0] + 3600, abs=1)
    fake_clock[0] += 3600
    assert harness.attempt(action, run_id) == "summary of T: escalated"
    assert CALLS["summarize"] == 1


def test_a_wait_for_an_undeclared_signal_is_found_when_the_graph_is_built() -> None:
    g = GraphBuilder(name="undeclared", input_type=int, output_type=int)

    @g.step
    async def ask(ctx: StepContext[None, None, int]) -> int:
        return await wait_for_signal("aproval", int)

    g.add(g.edge_from(g.start_node).to(ask), g.edge_from(ask).to(g.end_node))
    with pytest.raises(
        GraphDefinitionError, match=r"step 'ask' waits for signal 'aproval'.*declares: 'approval'"
    ):
        GraphAction(g.build(), signals={"approval": int})


def test_a_wait_for_a_name_known_only_at_run_time_fails_the_run_permanently(harness: Harness) -> None:
    g = GraphBuilder(name="dynamic", input_type=str, output_type=int)

    @g.step
    async def ask(ctx: StepContext[None, None, str]) -> int:
        return await wait_for_signal(ctx.inputs, int)

    g.add(g.edge_from(g.start_node).to(ask), g.edge_from(ask).to(g.end_node))
    action = GraphAction(g.build(), signals={"approval": int})
    run_id = harness.create(action, "other")
    with pytest.raises(
        RunFailure, match="waits for signal 'other', which its graph does not declare"
    ) as failed:
        harness.attempt(action, run_id)
    assert (failed.value.reason, failed.value.permanent) == ("undeclared_signal", True)


def test_a_signal_that_does_not_validate_names_where_and_why_never_the_value(harness: Harness) -> None:
    """Its value reached the store unchecked (store.signal does not validate): the run fails for good."""
    action = review_graph()
    run_id = harness.create(action, "t")
    harness.store.signal(run_id, "approval", '{"approved": true, "by": 4711}', dispatch_grace_ms=GRACE_MS)
    with pytest.raises(RunFailure) as failed:
        harness.attempt(action, run_id)
    assert (failed.value.reason, failed.value.permanent) == ("invalid_signal", True)
    assert "(by: Input should be a valid string)" in str(failed.value) and "4711" not in str(failed.value)


def sleeper(seconds: float) -> GraphAction:
    g = GraphBuilder(name="sleeper", input_type=int, output_type=int)

    @g.step
    async def nap(ctx: StepContext[None, None, int]) -> int:
        hit("nap")
        await durable_call("before", lambda: hit("before"))
        await sleep(seconds)
        hit("after")
        return ctx.inputs + 1

    g.add(g.edge_from(g.start_node).to(nap), g.edge_from(nap).to(g.end_node))
    return GraphAction(g.build())


def test_a_durable_sleep_suspends_once_and_a_rerun_after_the_wake_returns_at_once(
    harness: Harness, fake_clock: list[float]
) -> None:
    action = sleeper(120)
    run_id = harness.create(action, 1)
    with pytest.raises(Suspended):
        harness.attempt(action, run_id)
    info = harness.store.get(run_id)
    assert (info.status, info.waiting_for) == (Status.WAITING, None)
    assert info.wake_at == pytest.approx(fake_clock[0] + 120, abs=1)
    fake_clock[0] += 121
    assert harness.attempt(action, run_id) == 2
    assert (CALLS["nap"], CALLS["before"], CALLS["after"]) == (2, 1, 1)


def test_a_short_sleep_sleeps_in_place(harness: Harness) -> None:
    action = sleeper(0.05)
    run_id = harness.create(action, 1)
    assert harness.attempt(action, run_id) == 2
    assert "run_waiting" not in [e.type for e in harness.store.events(run_id)]


def test_waits_outside_a_step_say_where_to_call_them() -> None:
    with pytest.raises(ReflexrError, match="outside a step"):
        asyncio.run(wait_for_signal("approval", int))
    with pytest.raises(ReflexrError, match="outside a step"):
        asyncio.run(sleep(5))
    with pytest.raises(ValueError, match="delay must be a number of seconds"):
        asyncio.run(sleep(-1))
