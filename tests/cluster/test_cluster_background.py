"""What an idle fleet costs each primary of a real 3-primary Redis Cluster: its reaper's pass and
its workers' presence beats, with no run to work on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from reflexr_graph.config.settings import Settings
from reflexr_graph.fleet import versions
from reflexr_graph.fleet.factory import create_app
from reflexr_graph.fleet.presence import Presence
from reflexr_graph.fleet.reaper import Reaper
from reflexr_graph.model import Status, WorkerInfo
from reflexr_graph.store import keys
from reflexr_graph.store.contracts import VersionHold
from reflexr_graph.store.redis_store import RedisStore
from tests.fleet import version_graphs
from tests.fleet.inproc import fleet_app
from tests.fleet.test_command_budget import _five_steps
from tests.redis_cluster import RedisCluster

GETKEYS = "cmdstat_command|getkeys"


@pytest.fixture
def primaries(cluster_url: str, redis_cluster: RedisCluster) -> Iterator[list[redis.Redis]]:
    """A plain client of each primary, to read what it ran (INFO commandstats)."""
    clients = [redis.Redis(port=n.port) for n in redis_cluster.primary_nodes()]
    try:
        yield clients
    finally:
        for r in clients:
            r.close()


def _calls(r: redis.Redis, command: str) -> int:
    stats: dict[str, Any] = r.info("commandstats")
    return int(stats.get(command, {}).get("calls", 0))


def test_a_reaper_pass_asks_no_primary_for_its_scripts_keys(
    cluster_url: str, redis_url: str, primaries: list[redis.Redis]
) -> None:
    """The pass's scripts are pipelined per shard: each is routed by its keys' slot, computed by the
    client, as a single script call is; none costs a COMMAND GETKEYS on a primary."""
    app = create_app(Settings(redis_url=cluster_url, broker_url=redis_url, queue="idle-reaper"), {})
    store = app.store()
    try:
        store.preload_scripts()
        reaper = Reaper(app, store, interval_s=0.1)
        reaper.tick()  # the first pass takes the shards' locks; the one measured keeps them
        for r in primaries:
            r.config_resetstat()
        reaper.tick()
        assert len(reaper.shards) == keys.SHARDS, "the pass went over every shard"
        assert [_calls(r, GETKEYS) for r in primaries] == [0, 0, 0]
        assert sum(_calls(r, "cmdstat_evalsha") for r in primaries) >= keys.SHARDS
    finally:
        app.close()


def _commands(r: redis.Redis) -> int:
    stats: dict[str, Any] = r.info("commandstats")
    own = ("cmdstat_config", "cmdstat_info", "cmdstat_cluster", "cmdstat_ping")
    return sum(int(s["calls"]) for name, s in stats.items() if not name.startswith(own))


def _control_primary(primaries: list[redis.Redis], cluster_client: redis.RedisCluster) -> int:
    port = cluster_client.get_node_from_key(keys.held_versions()).port
    return next(i for i, r in enumerate(primaries) if r.connection_pool.connection_kwargs["port"] == port)


def test_an_idle_beat_costs_the_control_slot_a_few_commands_and_no_other_primary_any(
    cluster_url: str, redis_url: str, primaries: list[redis.Redis], cluster_client: redis.RedisCluster
) -> None:
    """A worker of two graphs beats with no run held anywhere: its beat and its look for held runs
    read the control slot, whatever the number of shards and graphs, and no shard."""
    app = fleet_app(cluster_url, _five_steps(), version_graphs.v1, broker_url=redis_url)
    store = app.store()
    try:
        store.preload_scripts()
        info = WorkerInfo(name="idle-w", graphs=tuple(sorted(app.reflexr_registry)))
        beat = Presence(store, info, on_beat=lambda: versions.wake_held(app, store))
        for r in primaries:
            r.config_resetstat()
        beat.maybe_beat()
        calls = [_commands(r) for r in primaries]
        control = calls.pop(_control_primary(primaries, cluster_client))
        assert calls == [0, 0], "no shard is looked in"
        assert 0 < control <= 16, control
    finally:
        app.close()


def _held_run(store: RedisStore, cluster_client: redis.RedisCluster, n: int) -> str:
    run_id, _ = store.create_run(
        f"held-{n}", graph=version_graphs.NAME, inputs_json="{}", max_attempts=3, dispatch_grace_ms=60_000
    )
    cluster_client.hset(keys.run(run_id), "version", version_graphs.v1.version)  # as a v1 claim wrote it
    graph, version = version_graphs.NAME, version_graphs.v1.version
    assert store.hold_version(run_id, graph, version, grace_ms=0, recheck_ms=1000) is VersionHold.WAITING
    return run_id


def test_runs_held_in_many_shards_are_woken_by_a_beat_of_their_version_then_it_is_struck_off(
    cluster_url: str, redis_url: str, cluster_client: redis.RedisCluster
) -> None:
    app = fleet_app(cluster_url, version_graphs.v1, broker_url=redis_url)
    store = app.store()
    pair = (version_graphs.NAME, version_graphs.v1.version)
    try:
        run_ids = [_held_run(store, cluster_client, n) for n in range(6)]
        assert len({keys.shard_of(r) for r in run_ids}) > 1
        assert pair in store.held_versions()
        assert versions.wake_held(app, store) == len(run_ids)
        assert {store.get(r).status for r in run_ids} == {Status.QUEUED}
        assert versions.wake_held(app, store) == 0
        assert store.held_versions() == {}, "none is held any more: the next beats read one key"
    finally:
        app.close()


def test_a_version_held_again_after_a_beat_read_the_index_stays_on_it(
    store: RedisStore, cluster_client: redis.RedisCluster
) -> None:
    """The beat strikes a pair off with the generation it read; a hold since then raised it."""
    cluster_client.zincrby(keys.held_versions(), 1, "demo@v1")
    ((pair, generation),) = store.held_versions().items()
    cluster_client.zincrby(keys.held_versions(), 1, "demo@v1")  # as hold_version does after its script
    assert not store.unhold_version(*pair, generation)
    assert store.held_versions() == {pair: generation + 1}
    assert store.unhold_version(*pair, generation + 1)
    assert store.held_versions() == {}
