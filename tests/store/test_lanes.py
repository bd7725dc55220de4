"""The lanes of a run's timeline (issue 24): when each branch step ran, kept by the write that
records its result (record.lua), past the next checkpoint, gone with the run."""

from __future__ import annotations

from typing import Any

import redis

from reflexr_graph.client import Client
from reflexr_graph.core.port import Boundary, Lane, Record
from reflexr_graph.model import BranchLane
from reflexr_graph.store import RedisStore, hot_path, keys
from tests.store.support import fail_once, make_run, start


def _calls(r: redis.Redis) -> dict[str, int]:
    stats: dict[str, Any] = r.info("commandstats")
    return {
        name: int(s["calls"])
        for name, s in stats.items()
        if not name.startswith(("cmdstat_config", "cmdstat_info"))
    }


def test_a_branch_lane_rides_with_its_record_in_one_round_trip(store: RedisStore, raw: redis.Redis) -> None:
    make_run(store)
    ctx = start(store)
    store.preload_scripts()
    raw.config_resetstat()
    store.save_record(ctx, Record("b|work|map:0|k", "1", lane=Lane("work", "map:0", 1_000_500, 1_002_000)))
    calls = _calls(raw)
    assert calls.pop("cmdstat_evalsha") == 1, "the lane costs no round trip of its own"
    # Inside the script: the owner's HMGET, the record's HSET, the lane's, the flags'.
    assert calls == {"cmdstat_hmget": 1, "cmdstat_hset": 3}, calls
    raw.config_resetstat()
    store.save_record(ctx, Record("b|work|map:1|k", "2", lane=Lane("work", "map:1", 1_000_700, 1_001_000)))
    assert _calls(raw) == {"cmdstat_evalsha": 1, "cmdstat_hmget": 1, "cmdstat_hset": 2}, "flags set once"
    raw.config_resetstat()
    store.save_record(ctx, Record("c|s|-|k|x|0", "3"))  # a durable call: no lane, as before
    assert _calls(raw) == {"cmdstat_evalsha": 1, "cmdstat_hmget": 1, "cmdstat_hset": 1}
    assert raw.hgetall(keys.lanes("run-1")) == {
        b"1|1|work|map:0": b"1000500|1002000",
        b"1|1|work|map:1": b"1000700|1001000",
    }


def test_the_hot_path_keeps_the_lane_too(store: RedisStore, raw: redis.Redis) -> None:
    make_run(store)
    ctx = start(store)
    with hot_path.HotPath(store) as hot:
        store.save_record(
            ctx, Record("b|work|map:3|k", "1", lane=Lane("work", "map:3", 5_000, 6_250)), via=hot
        )
        store.save_record(ctx, Record("c|s|-|k|x|0", "2"), via=hot)
    assert raw.hgetall(keys.lanes("run-1")) == {b"1|1|work|map:3": b"5000|6250"}
    assert raw.hget(keys.run("run-1"), "lanes") == b"1"


def test_lanes_outlive_the_checkpoint_and_expire_with_the_run(
    store: RedisStore, raw: redis.Redis, redis_url: str
) -> None:
    make_run(store)
    first = start(store)
    store.save_record(first, Record("b|work|map:1|k", "1", lane=Lane("work", "map:1", 2_000, 3_000)))
    fail_once(store, first)
    second = start(store)
    store.save_record(second, Record("b|work|map:0|k", "1", lane=Lane("work", "map:0", 4_000, 4_500)))
    store.save_checkpoint(second, Boundary("{}", seq=1, next_node="after_join"))
    assert not raw.exists(keys.memo("run-1")), "the checkpoint holds the results"
    with Client.from_url(redis_url) as client:
        assert client.branches("run-1") == [
            BranchLane(node="work", branch="map:1", attempt=1, started_at=2.0, ended_at=3.0),
            BranchLane(node="work", branch="map:0", attempt=2, started_at=4.0, ended_at=4.5),
        ]
        fail_once(store, second, permanent=True)
        assert 0 < raw.ttl(keys.lanes("run-1")) <= raw.ttl(keys.run("run-1")), "they expire with the run"
        store.replay("run-1", from_start=True)
        assert raw.ttl(keys.lanes("run-1")) == -1, "a replayed run keeps them, as it keeps its events"
        again = start(store)
        assert again.attempt == 1, "a replay numbers its attempts afresh"
        store.save_record(again, Record("b|work|map:1|k", "1", lane=Lane("work", "map:1", 8_000, 9_000)))
        twice = [
            (lane.attempt, lane.started_at) for lane in client.branches("run-1") if lane.branch == "map:1"
        ]
        assert twice == [(1, 2.0), (1, 8.0)], "the replay's attempt 1 keeps the lane of the one before"
        fail_once(store, again, permanent=True)
        store.purge("run-1")
        assert not raw.exists(keys.lanes("run-1"))


def test_a_run_without_maps_has_no_lanes(store: RedisStore, redis_url: str) -> None:
    make_run(store)
    with Client.from_url(redis_url) as client:
        assert client.branches("run-1") == []
