"""The run's stream in the store (store/streams.py, lua/emit.lua): offsets, fencing, the bound,
the memo marks that restart items void from, and retention, against a real Redis."""

from __future__ import annotations

import pytest
import redis

from reflexr_graph import errors
from reflexr_graph.core.port import Emission
from reflexr_graph.store import RedisStore, keys
from reflexr_graph.store.ops import drive
from reflexr_graph.store.streams import stream_page
from tests.store.conftest import RUN_RETENTION_S
from tests.store.support import fail_once, make_run, start


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
    store.append_stream(ctx, items(2, "s1", "s|s1|"), -1, max_items=100)
    store.append_stream(ctx, items(2, "s1", "s|s1|"), 2, max_items=100)  # set once: the first stays
    assert raw.hget(keys.memo("run-1"), "s|s1|") == b"1"
    assert store.load_records("run-1") == {"s|s1|": "1"}
    store.save_checkpoint(ctx, '{"seq": 1}', seq=1, next_node="s2")
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
