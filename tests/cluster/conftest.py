"""Fixtures for the store on a Redis Cluster: one real 3-primary cluster per session, emptied for
each test, and a standalone Redis as the broker (kombu has no cluster transport)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.redis_cluster import RedisCluster


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    """Three primaries from ``redis-server --cluster-enabled yes``, joined by ``redis-cli --cluster
    create``; stopped after the session. Never kill a node of it in a test."""
    cluster = RedisCluster(primaries=3).start()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def cluster_url(redis_cluster: RedisCluster) -> str:
    """The ``redis+cluster://`` URL of the session cluster, emptied first."""
    redis_cluster.flush()
    return redis_cluster.url


@pytest.fixture
def cluster_client(cluster_url: str, redis_cluster: RedisCluster) -> Iterator[redis.RedisCluster]:
    client = redis_cluster.client()
    try:
        yield client
    finally:
        client.close()
