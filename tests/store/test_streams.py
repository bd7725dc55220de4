"""The run's stream in the store (store/streams.py, lua/emit.lua): offsets, fencing, the bound,
the memo marks that restart items void from, and retention, against a real Redis."""

from __future__ import annotations

import asyncio

import pytest
import redis
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction, StreamItem, current_run, durable_call, emit, errors
from reflexr_graph.core.driver import run_attempt
from reflexr_graph.core.port import Boundary, Emission
from reflexr_graph.store import RedisStore, keys
from reflexr_graph.store.ops import drive
from reflexr_graph.store.streams import stream_page
from tests.store.conftest import RUN_RETENTION_S
from tests.store.support import FakeClock, fail_once, make_run, start


def items(n: int, node: str = "s1", first_mark: str = "") -> list[Emission]:
    return [Emission("output", node, "", f'"t{i}"', mark=first_mark if i == 0 else "") for i in range(n)]


def read(store: RedisStore, run_id: str = "run-1", after: int = 0) -> list[tuple[int, object]]:
    page = drive(stream_page(run_id, after, None, None), store.handle)
    return [(i.offset, i.value) for i in page.items]


def test_items_get_offsets_from_1_in_order_and_a_reader_resumes_after_one(store: RedisStore) -> None:
    make_run(store)
    ctx = start(store)
    assert store.append_stream(ctx, items(3), -1, max_items=100) == 3
    assert store.append_stream(ctx, items(2), 3, max_items=100) == 5
    assert read(store) == [(1, "t0"), (2, "t1"), (3, "t2"), (4, "t0"), (5, "t1")]
    assert read(store, after=3) == [(4, "t0"), (5, "t1")]
    page = drive(stream_page("run-1", 0, None, None), store.handle)
    assert {(i.topic, i.node, i.attempt, i.restart) for i in page.items} == {("output", "s1", 1, False)}


def test_a_batch_retried_after_a_lost_reply_is_not_appended_twice(store: RedisStore) -> None:
    make_run(store)
    ctx = start(store)
    store.append_stream(ctx, items(2), -1, max_items=100)
    assert store.append_stream(ctx, items(2), 2, max_items=100) == 4
    # The same batch again, as if the reply to the first write was lost: the stream is past 2.
    assert store.append_stream(ctx, items(2), 2, max_items=100) == 4
    assert len(read(store)) == 4


def test_a_fenced_out_attempt_appends_nothing(store: RedisStore, raw: redis.Redis) -> None:
    make_run(store)
    stale = start(store)
    store.append_stream(stale, items(1), -1, max_items=100)
    fail_once(store, stale)
    start(store)  # the retry owns the run now
    with pytest.raises(errors.FencedOut):
        store.append_stream(stale, items(5), 1, max_items=100)
    assert raw.xlen(keys.stream("run-1")) == 1


def test_the_bound_writes_what_fits_and_names_the_setting(store: RedisStore) -> None:
    make_run(store)
    ctx = start(store)
    with pytest.raises(errors.StreamFull, match="REFLEXR_STREAM_MAX_ITEMS=5") as raised:
        store.append_stream(ctx, items(7), -1, max_items=5)
    assert raised.value.reason == "stream_full" and raised.value.permanent
    assert len(read(store)) == 5
    with pytest.raises(errors.StreamFull):
        store.append_stream(ctx, items(1), 5, max_items=5)


def test_the_first_item_of_a_node_is_marked_in_the_memo_which_the_next_checkpoint_drops(
    store: RedisStore, raw: redis.Redis
) -> None:
    make_run(store)
    ctx = start(store)
    store.append_stream(ctx, items(2, "s1", "s|s1||"), -1, max_items=100)
    store.append_stream(ctx, items(2, "s1", "s|s1||"), 2, max_items=100)  # set once: the first stays
    assert raw.hget(keys.memo("run-1"), "s|s1||") == b"1"
    assert store.load_records("run-1") == {"s|s1||": "1"}
    store.save_checkpoint(ctx, Boundary('{"seq": 1}', seq=1, next_node="s2"))
    assert not raw.exists(keys.memo("run-1"))


def test_the_stream_expires_with_the_run_and_a_run_without_one_touches_none(
    store: RedisStore, raw: redis.Redis
) -> None:
    make_run(store)
    ctx = start(store)
    store.append_stream(ctx, items(2), -1, max_items=100)
    assert raw.ttl(keys.stream("run-1")) == -1, "an active run's stream does not expire"
    store.succeed(ctx, '"done"')
    assert 0 < raw.ttl(keys.stream("run-1")) <= RUN_RETENTION_S
    make_run(store, "run-2")
    store.succeed(start(store, "run-2"), '"done"')
    assert not raw.exists(keys.stream("run-2"))


def test_purge_deletes_the_stream(store: RedisStore, raw: redis.Redis) -> None:
    make_run(store, max_attempts=1)
    ctx = start(store)
    store.append_stream(ctx, items(2), -1, max_items=100)
    assert fail_once(store, ctx) == "dead"
    store.purge("run-1")
    assert not raw.exists(keys.stream("run-1"))


def test_an_unknown_run_has_no_stream(store: RedisStore) -> None:
    with pytest.raises(errors.RunNotFound):
        read(store, "nope")


# -- the driver against the store: restart items across checkpoints ---------------------------

FAIL_AT: dict[str, int] = {}
"""The loop's run of ``speak`` that fails after one item on attempt 1 (set by the test)."""


def _loop() -> GraphAction:
    """``speak`` runs for n = 0, 1, 2, 3 through a decision, a checkpoint before each run, and emits
    ``r<n>`` twice; on attempt 1 the run n = FAIL_AT["n"] fails after its first item."""
    g = GraphBuilder(name="loop", input_type=int, output_type=int, auto_instrument=False)

    @g.step
    async def speak(ctx: StepContext[None, None, int]) -> int:
        await emit(f"r{ctx.inputs}")
        if current_run().attempt == 1 and ctx.inputs == FAIL_AT.get("n"):
            raise RuntimeError("failing mid-step on purpose")
        await emit(f"r{ctx.inputs}")
        return ctx.inputs + 1

    @g.step
    async def done(ctx: StepContext[None, None, int]) -> int:
        return ctx.inputs

    again = g.decision(node_id="again").branch(g.match(int, matches=lambda n: n < 4).to(speak))
    g.add(g.edge_from(g.start_node).to(speak), g.edge_from(speak).to(again.branch(g.match(int).to(done))))
    g.add(g.edge_from(done).to(g.end_node))
    return GraphAction(g.build())


def test_a_node_that_runs_again_in_a_loop_is_restarted_from_its_latest_run_only(store: RedisStore) -> None:
    """The checkpoints between the loop's runs drop what came before: the retry's restart item voids
    only the failed run's item, and the run after the next checkpoint gets none."""
    action = _loop()
    FAIL_AT["n"] = 2
    make_run(store)
    first = start(store)
    with pytest.raises(RuntimeError):
        asyncio.run(run_attempt(action, store, first, inputs=0))
    fail_once(store, first)
    second = start(store)
    records = store.load_records("run-1")
    assert records == {"s|speak||": "5"}, "the failed run's first item, noted after the checkpoint before it"
    asyncio.run(run_attempt(action, store, second, inputs=0))
    page = drive(stream_page("run-1", 0, None, None), store.handle)
    shown = [("restart", i.value["void_from"]) if i.restart else i.value for i in page.items]
    assert shown == ["r0", "r0", "r1", "r1", "r2", ("restart", 5), "r2", "r2", "r3", "r3"]


def _calling() -> GraphAction:
    """``talk`` emits ``a``, makes durable call ``f`` (which emits ``x y``), emits ``b``, and makes
    ``f`` again (``z``, then, on attempt 1, it raises; else ``w``)."""
    g = GraphBuilder(name="calling", input_type=int, output_type=int, auto_instrument=False)

    async def f(words: list[str]) -> int:
        for w in words:
            await emit(w)
            if w == "z" and current_run().attempt == 1:
                raise RuntimeError("failing inside the call on purpose")
        return len(words)

    @g.step
    async def talk(ctx: StepContext[None, None, int]) -> int:
        await emit("a")
        n = await durable_call("f", f, ["x", "y"])
        await emit("b")
        return n + await durable_call("f", f, ["z", "w"])

    g.add(g.edge_from(g.start_node).to(talk), g.edge_from(talk).to(g.end_node))
    return GraphAction(g.build())


def test_a_recorded_durable_call_emits_nothing_again_and_its_items_stand(store: RedisStore) -> None:
    """The retry restarts the step's own items and those of the call that did not finish; the
    recorded call's items are never voided and not sent again."""
    action = _calling()
    make_run(store)
    first = start(store)
    with pytest.raises(RuntimeError):
        asyncio.run(run_attempt(action, store, first, inputs=0))
    fail_once(store, first)
    asyncio.run(run_attempt(action, store, start(store), inputs=0))
    page = drive(stream_page("run-1", 0, None, None), store.handle)
    shown = [
        (i.offset, i.call, ("restart", i.value["void_from"]) if i.restart else i.value) for i in page.items
    ]
    assert shown == [
        (1, "", "a"), (2, "f#0", "x"), (3, "f#0", "y"), (4, "", "b"), (5, "f#1", "z"),
        (6, "", ("restart", 1)), (7, "", "a"), (8, "", "b"),
        (9, "f#1", ("restart", 5)), (10, "f#1", "z"), (11, "f#1", "w"),
    ]  # fmt: skip
    kept = _kept(page.items)
    assert [i.value for i in kept] == ["x", "y", "a", "b", "z", "w"]


def _kept(items: list[StreamItem]) -> list[StreamItem]:
    """What a reader keeps: every item but those a later restart item voids (docs/guide.md, Streaming)."""
    void: set[int] = set()
    for marker in (i for i in items if i.restart):
        scope = (marker.node, marker.branch, marker.call)
        void |= {
            i.offset for i in items
            if (i.node, i.branch, i.call) == scope and marker.value["void_from"] <= i.offset < marker.offset
        }  # fmt: skip
    return [i for i in items if not i.restart and i.offset not in void]


def test_prune_deletes_the_stream_of_a_run_whose_record_expired(
    store: RedisStore, raw: redis.Redis, fake_clock: FakeClock
) -> None:
    make_run(store)
    ctx = start(store)
    store.append_stream(ctx, items(2), -1, max_items=100)
    store.succeed(ctx, '"done"')
    raw.delete(keys.run("run-1"))  # as if Redis had expired the record first
    fake_clock.advance(RUN_RETENTION_S * 1000 + 1)
    assert store.prune() == 1
    assert not raw.exists(keys.stream("run-1"))
