"""The store's work across shards, on a real 3-primary Redis Cluster: listings that merge every
shard with a cursor, keys spread over the primaries, and the reapers' shard locks shared and
taken over."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from reflexr_graph.config.settings import Settings
from reflexr_graph.fleet.factory import create_app
from reflexr_graph.fleet.outcome import Outcome
from reflexr_graph.fleet.reaper import Reaper
from reflexr_graph.fleet.task import handle
from reflexr_graph.model import WorkerInfo
from reflexr_graph.store import keys, keyspace
from reflexr_graph.store.reads import runs_listing
from reflexr_graph.store.redis_store import RedisStore
from tests.fleet.inproc import fleet_app
from tests.fleet.test_command_budget import _five_steps
from tests.redis_cluster import RedisCluster
from tests.store.support import make_run
from tests.surfaces.cli_runner import run_cli
from tests.waiting import wait_for


def test_listings_merge_every_shard_newest_first_and_page_with_a_cursor(store: RedisStore) -> None:
    run_ids = [make_run(store, f"list-{n}") for n in range(40)]
    assert len({keys.shard_of(r) for r in run_ids}) > 10
    infos = store.list_runs(limit=100)
    order = [(i.created_at, i.run_id) for i in infos]
    assert sorted(i.run_id for i in infos) == sorted(run_ids)
    assert order == sorted(order, reverse=True), "newest first, ties by run id as ZREVRANGE orders them"
    pages, cursor = [], None
    while True:
        page = store.do(runs_listing(None, None, 7, cursor))
        pages.extend(i.run_id for i in page.runs)
        if page.cursor is None:
            break
        cursor = page.cursor
    assert pages == [i.run_id for i in infos], "the pages together are the listing, each run once"


def test_dead_letters_and_bulk_replay_go_over_every_shard(store: RedisStore) -> None:
    run_ids = [make_run(store, f"dead-{n}") for n in range(12)]
    for run_id in run_ids:
        assert store.dead_letter(run_id, reason="bad_message", error_type="X", message="no")
    assert sorted(i.run_id for i in store.dead_letters()) == sorted(run_ids)
    for run_id in run_ids:
        store.replay(run_id)
    assert store.dead_letters() == []
    assert {i.status.value for i in store.list_runs(status="queued", limit=100)} == {"queued"}
    assert len(store.list_runs(status="queued", limit=100)) == 12


def test_the_cli_replays_dead_letters_in_bulk_by_reason_shard_by_shard(
    store: RedisStore, cluster_url: str, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``dlq replay --all --reason``: its listing and its replays go over every shard, and the runs of
    another reason stay dead."""
    run_ids = [make_run(store, f"bulk-{n}") for n in range(12)]
    assert len({keys.shard_of(r) for r in run_ids}) > 3
    for n, run_id in enumerate(run_ids):
        store.dead_letter(run_id, reason="bad_message" if n % 3 else "other", error_type="X", message="no")
    env = {"REFLEXR_REDIS_URL": cluster_url, "REFLEXR_BROKER_URL": redis_url, "REFLEXR_QUEUE": "bulk-replay"}
    replayed = run_cli(["dlq", "replay", "--all", "--reason", "bad_message", "--yes"], env, monkeypatch)
    assert replayed.returncode == 0, replayed.stderr
    assert sorted(i.run_id for i in store.dead_letters()) == run_ids[::3], "the other reason stays dead"
    queued = {i.run_id for i in store.list_runs(status="queued", limit=100)}
    assert queued == set(run_ids) - set(run_ids[::3])


def test_each_primary_holds_its_part_of_the_runs(store: RedisStore, redis_cluster: RedisCluster) -> None:
    for n in range(300):
        make_run(store, f"spread-{n}")
    held = []
    for node in redis_cluster.primary_nodes():
        with redis.Redis(port=node.port) as r:
            held.append(sum(1 for _ in r.scan_iter("rg:{s*}:spread-*:run", count=1000)))
    assert sum(held) == 300
    assert min(held) >= 0.15 * 300, held


def test_a_walk_of_the_keyspace_goes_through_every_primary_a_page_a_request(store: RedisStore) -> None:
    """store/keyspace.py (the payload sweep's, rekey's and the migration's walk): each page is one
    request through the executor (ops.Scan), and each primary's keys are walked to their end."""
    run_ids = [make_run(store, f"walk-{n}") for n in range(120)]
    found = list(keyspace.every_key(store, "rg:{s*}:walk-*:run", count=10))
    assert sorted(set(found)) == sorted(keys.run(r) for r in run_ids)


def test_reapers_share_the_shards_and_take_over_a_dead_ones(cluster_url: str, redis_url: str) -> None:
    settings = Settings(redis_url=cluster_url, broker_url=redis_url, queue="shards", lease_ttl_s=1.0)
    app = create_app(settings, {})
    store = app.store()
    try:
        store.worker_beat(WorkerInfo(name="w-a", graphs=()), ttl_ms=60_000)
        store.worker_beat(WorkerInfo(name="w-b", graphs=()), ttl_ms=60_000)
        # A beat between full ones pipelines the ZADD with TIME (the store's clock): a cluster
        # pipeline sends the TIME to its default node.
        assert store.worker_alive("w-b", ttl_ms=60_000), "w-b was in the registry"
        a, b = Reaper(app, store, interval_s=0.1), Reaper(app, store, interval_s=0.1)
        a.tick()
        assert len(a.shards) == keys.SHARDS // 2, "it handed back what is beyond its part"
        b.tick()
        assert sorted(a.shards + b.shards) == list(keys.CLUSTER.all), "every shard has one reaper"
        a.tick()
        assert len(a.shards) == keys.SHARDS // 2
        # a dies: it ticks no more, and its worker leaves the registry.
        store.worker_leave(WorkerInfo(name="w-a", graphs=()))

        def b_holds_all() -> bool:
            b.tick()
            return len(b.shards) == keys.SHARDS

        wait_for(b_holds_all, 10, "b to take over a's shards once their locks lapse")
    finally:
        app.close()


def _calls(r: redis.Redis) -> int:
    stats: dict[str, Any] = r.info("commandstats")
    own = ("cmdstat_config", "cmdstat_info", "cmdstat_cluster", "cmdstat_ping")
    return sum(int(s["calls"]) for name, s in stats.items() if not name.startswith(own))


def test_the_work_of_runs_spreads_over_the_primaries(
    cluster_url: str, redis_url: str, redis_cluster: RedisCluster
) -> None:
    """300 five-step runs through the task path in process: the busiest primary's commands are at
    most 1.6 times the mean (no primary does per-run work for runs it does not hold)."""
    action = _five_steps()
    app = fleet_app(cluster_url, action, broker_url=redis_url)
    store = app.store()
    primaries = [redis.Redis(port=n.port) for n in redis_cluster.primary_nodes()]
    try:
        store.preload_scripts()
        for r in primaries:
            r.config_resetstat()
        for _ in range(300):
            run_id = keys.new_run_id(action.name, None)
            store.create_run(
                run_id, graph=action.name, inputs_json="0", max_attempts=3, dispatch_grace_ms=60_000
            )
            assert handle(app, run_id, (), {"graph": action.name}).outcome is Outcome.SUCCEEDED
        calls = [_calls(r) for r in primaries]
        assert max(calls) <= 1.6 * sum(calls) / len(calls), calls
    finally:
        for r in primaries:
            r.close()
        app.close()
