"""Issue 9: finished branch steps and durable calls are not paid for twice (in process, real Redis)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel
from pydantic_graph import GraphBuilder, StepContext
from pydantic_graph.join import reduce_list_append

from reflexr_graph import GraphAction, ReflexrError, RunFailure, current_run, durable_call
from reflexr_graph.core.port import Record
from reflexr_graph.core.tracing import ATTR_REUSED, EVENT_STEP_REUSED
from reflexr_graph.store import keys
from reflexr_graph.store.redis_store import RedisStore
from tests.core.graphs import CALLS, FAIL, SEEN, Boom, hit
from tests.core.harness import Harness


@dataclass
class Seen:
    touched: list[int] = field(default_factory=list)


def mapped(
    name: str = "mapped", *, mutate: bool = False, plan_offset: list[int] | None = None
) -> GraphAction:
    """plan -> map over its items -> work (per item) -> join -> total. ``mutate``: work appends to the state.
    ``plan_offset``: plan's items are shifted by the list's first value, read at run time."""
    g = GraphBuilder(name=name, state_type=Seen, input_type=int, output_type=list[int])

    @g.step
    async def plan(ctx: StepContext[Seen, None, int]) -> list[int]:
        hit("plan")
        shift = plan_offset[0] if plan_offset else 0
        return [i + shift for i in range(ctx.inputs)]

    @g.step
    async def work(ctx: StepContext[Seen, None, int]) -> int:
        hit(f"work{ctx.inputs}", current_run().step_key)
        await asyncio.sleep(0)
        if mutate:
            ctx.state.touched.append(ctx.inputs)
        return ctx.inputs * 10

    collect = g.join(reduce_list_append, initial_factory=list[int])

    @g.step
    async def total(ctx: StepContext[Seen, None, list[int]]) -> list[int]:
        hit("total")
        # The mutating variant returns what the branches did to the state: a skipped mutation shows.
        return sorted(ctx.state.touched) if mutate else sorted(ctx.inputs)

    g.add(
        g.edge_from(g.start_node).to(plan),
        g.edge_from(plan).map().to(work),
        g.edge_from(work).to(collect),
        g.edge_from(collect).to(total),
        g.edge_from(total).to(g.end_node),
    )
    return GraphAction(g.build())


def clean_run(harness: Harness, action: GraphAction, inputs: int) -> list[int]:
    run_id = harness.create(action, inputs)
    output = harness.attempt(action, run_id)
    CALLS.clear()
    SEEN.clear()
    return list(output)


def test_only_the_failed_branch_runs_again(harness: Harness) -> None:
    """A map over 10 items whose item 7 raises once: on the retry only item 7's branch runs again (every
    other item's step ran once: the ones that finished in attempt 1 are answered from their records),
    the plan before the fork ran once, and the output equals a clean run's."""
    action = mapped()
    expected = clean_run(harness, action, 10)
    run_id = harness.create(action, 10)
    FAIL["work7"] = 1
    with pytest.raises(Boom):
        harness.attempt(action, run_id)
    finished_first = {i for i in range(10) if i != 7 and CALLS[f"work{i}"] == 1}
    assert finished_first, "some branches finished before item 7 raised"
    assert harness.attempt(action, run_id) == expected
    assert {i: CALLS[f"work{i}"] for i in range(10)} == {i: 2 if i == 7 else 1 for i in range(10)}
    assert CALLS["plan"] == 1 and CALLS["total"] == 1
    info = harness.store.get(run_id)
    assert info.reused_steps == len(finished_first)
    reused = [e for e in harness.store.events(run_id) if e.type == "work_reused"]
    assert sum(int(e.fields["steps"]) for e in reused) == info.reused_steps
    assert harness.store.load_records(run_id) == {}, "the checkpoint past the join dropped the records"


def test_a_branch_step_that_changes_the_state_is_never_skipped(harness: Harness) -> None:
    """A recorded result would skip the step's state change: a branch step that mutates the state is not
    recorded, so it runs again on the retry, and the final state equals a clean run's."""
    action = mapped("mutating", mutate=True)
    expected = clean_run(harness, action, 5)
    assert expected == [0, 1, 2, 3, 4]
    run_id = harness.create(action, 5)
    FAIL["work3"] = 1
    with pytest.raises(Boom):
        harness.attempt(action, run_id)
    ran_first = {i for i in range(5) if CALLS[f"work{i}"] == 1}
    assert harness.attempt(action, run_id) == expected
    assert all(CALLS[f"work{i}"] == 2 for i in ran_first), "every branch that ran once ran again"
    assert harness.store.get(run_id).reused_steps == 0


def test_records_are_used_only_for_the_same_items(harness: Harness) -> None:
    """The map's items mean the same work on the retry because they come from the checkpoint before the
    fork. Were they different (here the plan runs again and shifts them), no record would be used."""
    shift = [0]
    action = mapped("shifting", plan_offset=shift)
    run_id = harness.create(action, 4)
    FAIL["work2"] = 1
    with pytest.raises(Boom):
        harness.attempt(action, run_id)
    records = harness.store.load_records(run_id)
    assert records, "the finished branches were recorded"
    # Start over as a changed plan would: drop the checkpoint before the fork, shift the items.
    harness.store.client.delete(keys.ckpt(run_id))
    shift[0] = 100
    assert harness.attempt(action, run_id) == [1000, 1010, 1020, 1030]
    assert harness.store.get(run_id).reused_steps == 0


def test_step_keys_are_stable_per_branch_and_differ_between_branches(harness: Harness) -> None:
    action = mapped("keyed")
    run_id = harness.create(action, 3)
    FAIL["work1"] = 1
    with pytest.raises(Boom):
        harness.attempt(action, run_id)
    harness.attempt(action, run_id)
    first, again = SEEN["work1"]
    assert first == again and first is not None, "item 1's key is the same on the retry"
    assert len({SEEN[f"work{i}"][0] for i in range(3)}) == 3, "each item has its own key"


# -- durable_call ---------------------------------------------------------------------------------


class Reply(BaseModel):
    text: str
    tokens: int


def calling(
    name: str, *, calls: int = 4, fail_at: int | None = None, loop: bool = False, tail: bool = False
) -> GraphAction:
    """One step that makes ``calls`` durable calls (to one name in a loop, or to distinct names), and
    raises right before call ``fail_at`` the first time (the crash before the 4th call). ``tail``
    adds a step after it: another graph, with another fingerprint."""
    g = GraphBuilder(name=name, input_type=str, output_type=list[str])

    async def model(prompt: str, n: int) -> Reply:
        hit(f"model{n}")
        return Reply(text=f"{prompt}:{n}", tokens=n)

    @g.step
    async def ask(ctx: StepContext[None, None, str]) -> list[str]:
        answers = []
        for n in range(calls):
            if n == fail_at and FAIL["ask"] > 0:
                FAIL["ask"] -= 1
                raise Boom("crash before the call")
            reply = await durable_call("model" if loop else f"model{n}", model, ctx.inputs, n)
            answers.append(reply.text)
        return answers

    g.add(g.edge_from(g.start_node).to(ask))
    if tail:

        @g.step
        async def after(ctx: StepContext[None, None, list[str]]) -> list[str]:
            return ctx.inputs

        g.add(g.edge_from(ask).to(after), g.edge_from(after).to(g.end_node))
    else:
        g.add(g.edge_from(ask).to(g.end_node))
    return GraphAction(g.build())


@pytest.mark.parametrize("loop", [False, True], ids=["distinct-names", "one-name-in-a-loop"])
def test_recorded_calls_are_not_made_again(harness: Harness, loop: bool) -> None:
    """A step makes 3 durable calls and fails before its 4th; after the retry each of the first 3 ran
    once and the 4th once. The same holds for 5 calls to one name in a loop."""
    calls = 5 if loop else 4
    action = calling(f"calls-{loop}", calls=calls, fail_at=3)
    run_id = harness.create(action, "q")
    FAIL["ask"] = 1
    with pytest.raises(Boom):
        harness.attempt(action, run_id)
    assert harness.attempt(action, run_id) == [f"q:{n}" for n in range(calls)]
    assert {n: CALLS[f"model{n}"] for n in range(calls)} == dict.fromkeys(range(calls), 1)
    assert harness.store.get(run_id).reused_calls == 3


def test_a_result_that_does_not_read_back_fails_the_run_naming_the_call(harness: Harness) -> None:
    g = GraphBuilder(name="unrecordable", input_type=int, output_type=int)

    @g.step
    async def step(ctx: StepContext[None, None, int]) -> int:
        await durable_call("opaque", lambda: object())
        return 1

    g.add(g.edge_from(g.start_node).to(step), g.edge_from(step).to(g.end_node))
    action = GraphAction(g.build())
    run_id = harness.create(action, 0)
    with pytest.raises(RunFailure, match="durable_call 'opaque' in step 'step'") as failure:
        harness.attempt(action, run_id)
    assert failure.value.permanent and "result_type" in str(failure.value)


def test_durable_call_outside_a_step_says_so() -> None:
    async def outside() -> None:
        await durable_call("x", lambda: 1)

    with pytest.raises(ReflexrError, match="outside a step"):
        asyncio.run(outside())


def test_a_changed_graph_never_uses_the_records_of_the_old_one(harness: Harness) -> None:
    """Records are keyed by the graph's fingerprint: after a deploy that changes the graph (a step added
    after the one that made the calls), its calls are made again rather than answered with another
    graph's results; with the same graph they are answered."""
    old = calling("versioned", calls=4, fail_at=3)
    run_id = harness.create(old, "q")
    FAIL["ask"] = 1
    with pytest.raises(Boom):
        harness.attempt(old, run_id)
    changed = calling("versioned", calls=4, tail=True)
    assert changed.fingerprint != old.fingerprint
    assert harness.attempt(changed, run_id) == [f"q:{n}" for n in range(4)]
    assert [CALLS[f"model{n}"] for n in range(4)] == [2, 2, 2, 1]
    assert harness.store.get(run_id).reused_calls == 0


def test_the_step_span_says_its_result_was_recorded(harness: Harness, spans: InMemorySpanExporter) -> None:
    """A branch step answered from its record gets a reflexr.step.reused event on its execute_step span,
    and a durable call answered from its record one on the span it ran in."""
    action = mapped("traced")
    run_id = harness.create(action, 3)
    FAIL["work2"] = 1
    with pytest.raises(Boom):
        harness.attempt(action, run_id)
    spans.clear()
    harness.attempt(action, run_id)
    reused = [s for s in spans.get_finished_spans() if any(e.name == EVENT_STEP_REUSED for e in s.events)]
    assert reused and all(s.name == "execute_step work" for s in reused)
    assert all(s.attributes is not None and s.attributes[ATTR_REUSED] is True for s in reused)


def test_a_record_costs_one_round_trip(harness: Harness) -> None:
    """Recording a branch result or a durable call is one EVALSHA (the record script), nothing else."""
    from tests.store.test_connection import CountingRedis

    client = CountingRedis(connection_pool=harness.store.client.connection_pool)
    store = RedisStore(client)
    store.preload_scripts()
    run_id = harness.create(mapped("counted"), 1)
    ctx = harness.claim(run_id)
    client.sent.clear()
    store.save_record(ctx, Record("c|step|-|k|name|0", '"result"'))
    assert client.sent == ["EVALSHA"]
