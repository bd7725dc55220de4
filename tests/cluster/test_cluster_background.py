"""What an idle fleet costs each primary of a real 3-primary Redis Cluster: its reaper's pass and
its workers' presence beats, with no run to work on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from reflexr_graph.config.settings import Settings
from reflexr_graph.fleet.factory import create_app
from reflexr_graph.fleet.reaper import Reaper
from reflexr_graph.store import keys
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
