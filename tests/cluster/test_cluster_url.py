"""``REFLEXR_REDIS_URL=redis+cluster://...``: parsing, the broker it needs, and the clients it makes."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
import redis
import redis.asyncio.cluster

from reflexr_graph import local_processes
from reflexr_graph.config.settings import load_settings
from reflexr_graph.errors import SettingsError
from reflexr_graph.store import cluster, connect
from reflexr_graph.store.aio import AsyncStore
from reflexr_graph.store.redis_store import RedisStore


def test_a_cluster_url_names_its_nodes_and_credentials() -> None:
    address = cluster.parse("redis+cluster://app:s%40cret@10.0.0.1:7000,[::1]:7001")
    assert address.nodes == (("10.0.0.1", 7000), ("::1", 7001))
    assert (address.username, address.password, address.tls) == ("app", "s@cret", False)
    assert cluster.parse("rediss+cluster://h:7000").tls


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+cluster://", "at least one node"),
        ("redis+cluster://:pw@h1", "is not host:port"),
        ("redis+cluster://h1:7000/0", "takes no database"),
        ("redis+cluster://h1:7000?x=1", "takes no database"),
    ],
)
def test_a_bad_cluster_url_says_what_to_fix_without_its_password(url: str, says: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(redis_url=url, broker_url="redis://b:6379/0")
    assert says in str(caught.value)
    assert "pw" not in str(caught.value)


def test_a_cluster_store_without_a_broker_url_refuses_in_one_line() -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(redis_url="redis+cluster://:pw@h1:7000")
    message = str(caught.value)
    assert "REFLEXR_BROKER_URL" in message and "\n" not in message and "pw" not in message
    with pytest.raises(SettingsError, match="cannot be a Redis Cluster"):
        load_settings(redis_url="redis://h:6379/0", broker_url="redis+cluster://h1:7000")
    assert load_settings(redis_url="redis+cluster://h1:7000", broker_url="redis://b:6379/0").broker_url


def test_a_worker_on_a_cluster_store_without_a_broker_url_stops_with_that_line() -> None:
    env = local_processes.environment({"REFLEXR_REDIS_URL": "redis+cluster://127.0.0.1:1"})
    done = subprocess.run(
        [sys.executable, "-m", "reflexr_graph", "worker"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if "REFLEXR_BROKER_URL" in line]
    assert len(lines) == 1, done.stderr


def test_the_store_url_makes_cluster_clients_that_reach_every_primary(cluster_url: str) -> None:
    client = connect.blocking_client(cluster_url)
    assert isinstance(client, redis.RedisCluster)
    client.close()
    store = RedisStore.from_url(cluster_url)
    try:
        store.ping()
        store.preload_scripts()
        assert store.max_block_ms is not None
    finally:
        store.close()

    async def use() -> None:
        aio = AsyncStore.from_url(cluster_url)
        assert isinstance(aio.client, redis.asyncio.cluster.RedisCluster)
        await aio.ping()
        await aio.close()

    asyncio.run(use())
