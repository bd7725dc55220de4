"""An attempt's held connection for its saves and records (store/hot_path.py): the same writes as the
store's client makes, fenced the same way, and it survives what a pooled connection survives."""

from __future__ import annotations

import pytest
import redis

from reflexr_graph import errors
from reflexr_graph.core.port import Boundary, Notes, Record
from reflexr_graph.store import RedisStore, keys
from reflexr_graph.store.hot_path import HotPath
from tests.redis_server import RedisFactory
from tests.store.support import FakeClock, make_run, start


def _evalshas(raw: redis.Redis) -> int:
    return int(raw.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


def test_a_save_and_a_record_land_as_the_stores_own(store: RedisStore, raw: redis.Redis) -> None:
    make_run(store)
    ctx = start(store)
    store.preload_scripts()  # as a worker does at start
    raw.config_resetstat()
    with HotPath(store) as hot:
        store.save_record(ctx, Record("c|s|-|k|x|0", "1"), via=hot)
        assert store.save_checkpoint(ctx, Boundary('{"a": 1}', seq=1, next_node="s2"), via=hot) is False
        big = '{"a": "' + "x" * 100_000 + '"}'  # sent as a chunk of its own
        notes = Notes(1, "s2: state", 1, 0)
        store.save_checkpoint(ctx, Boundary(big, seq=2, next_node="s3", notes=notes), via=hot)
        store.save_record(ctx, Record("c|s3|-|k|x|0", "2"), via=hot)
    assert _evalshas(raw) == 4, "one EVALSHA each, nothing else"
    info = store.get("run-1")
    assert (info.checkpoints, info.next_node) == (2, "s3")
    assert store.load_checkpoint("run-1") == big
    assert store.load_records("run-1") == {"c|s3|-|k|x|0": "2"}, "the save dropped the records before it"
    assert [c.seq for c in store.checkpoints("run-1")] == [1, 2], "the history keeps the first"
    types = [e.type for e in store.events("run-1")]
    assert types.count("run_progressed") == 2 and "boundaries_skipped" in types and "work_reused" in types


def test_a_cancel_asked_comes_back_from_the_save(store: RedisStore) -> None:
    make_run(store)
    ctx = start(store)
    store.cancel("run-1")
    with HotPath(store) as hot:
        assert store.save_checkpoint(ctx, Boundary("{}", seq=1, next_node="s2"), via=hot) is True


def test_the_hot_path_is_fenced_by_the_attempts_token(store: RedisStore, fake_clock: FakeClock) -> None:
    make_run(store)
    stale = start(store, lease_ms=1_000)
    fake_clock.advance(2_000)
    store.reap()
    start(store)
    with HotPath(store) as hot:
        with pytest.raises(errors.FencedOut):
            store.save_checkpoint(stale, Boundary("{}", seq=1, next_node="s2"), via=hot)
        with pytest.raises(errors.FencedOut):
            store.save_record(stale, Record("c|s|-|k|x|0", "1"), via=hot)
    assert store.get("run-1").checkpoints == 0 and store.load_records("run-1") == {}


def test_a_flushed_script_cache_and_a_killed_connection_cost_nothing(
    store: RedisStore, raw: redis.Redis
) -> None:
    make_run(store)
    ctx = start(store)
    with HotPath(store) as hot:
        store.save_checkpoint(ctx, Boundary("{}", seq=1, next_node="s2"), via=hot)
        raw.script_flush()
        # NOSCRIPT: loaded again and sent again
        store.save_checkpoint(ctx, Boundary("{}", seq=2, next_node="s3"), via=hot)
        held = [c for c in raw.client_list() if c["cmd"] == "evalsha"]
        raw.client_kill_filter(_id=held[0]["id"])
        # The stale socket is replaced at once.
        store.save_checkpoint(ctx, Boundary("{}", seq=3, next_node="s4"), via=hot)
    assert store.get("run-1").checkpoints == 3


def test_redis_down_is_store_unavailable_and_the_connection_comes_back(private_redis: RedisFactory) -> None:
    server = private_redis(appendfsync="always")
    store = RedisStore.from_url(server.url, socket_timeout=2.0, socket_connect_timeout=1.0)
    try:
        make_run(store)
        ctx = start(store)
        with HotPath(store) as hot:
            store.save_checkpoint(ctx, Boundary("{}", seq=1, next_node="s2"), via=hot)
            server.kill()
            with pytest.raises(errors.StoreUnavailable):
                store.save_checkpoint(ctx, Boundary("{}", seq=2, next_node="s3"), via=hot)
            with pytest.raises(errors.StoreUnavailable):
                store.save_record(ctx, Record("c|s|-|k|x|0", "1"), via=hot)
            server.start()
            store.save_checkpoint(ctx, Boundary("{}", seq=2, next_node="s3"), via=hot)
        assert store.get("run-1").checkpoints == 2
    finally:
        store.close()


def test_each_save_sends_what_changed_and_reuses_only_what_repeats(
    store: RedisStore, raw: redis.Redis
) -> None:
    """The held connection packs again only what is not the same object as the last call's: saves
    whose notes, node, payload size or slots given back differ from the one before land as given."""
    make_run(store)
    ctx = start(store)
    raw.zadd(keys.limit_slots("a"), {"slot-a": 1})
    big = '{"a": "' + "y" * 40_000 + '"}'  # a chunk of its own, between two inline payloads

    def landed(seq: int, payload: str, next_node: str | None) -> None:
        info = store.get("run-1")
        assert (store.load_checkpoint("run-1"), info.next_node, info.checkpoints) == (payload, next_node, seq)

    with HotPath(store) as hot:
        store.save_checkpoint(
            ctx, Boundary('{"n": 1}', seq=1, next_node="s2", notes=Notes(2, "s1: state", 0, 0)), via=hot
        )
        landed(1, '{"n": 1}', "s2")
        store.save_checkpoint(ctx, Boundary(big, seq=2, next_node=None), via=hot)
        landed(2, big, None)
        store.save_checkpoint(
            ctx, Boundary('{"n": 3}', seq=3, next_node="s4"), returning=[("a", "slot-a")], via=hot
        )
        landed(3, '{"n": 3}', "s4")
        store.save_checkpoint(ctx, Boundary('{"n": 4}', seq=4, next_node="s5"), via=hot)
        landed(4, '{"n": 4}', "s5")
    assert raw.zcard(keys.limit_slots("a")) == 0, "the third save gave the slot back"
    assert [e.type for e in store.events("run-1")].count("boundaries_skipped") == 1, (
        "only the first had notes"
    )
