"""Fixtures for the store on a Redis Cluster: one real 3-primary cluster per session, emptied for
each test, and a standalone Redis as the broker (kombu has no cluster transport)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.store.redis_store import RedisStore
from tests.fleet.conftest import Fleet, closing_fleet
from tests.fleet.conftest import pytest_runtest_makereport as pytest_runtest_makereport
from tests.fleet.graphs import EXECUTIONS_URL_ENV
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
def store(cluster_url: str) -> Iterator[RedisStore]:
    """A store on the session cluster."""
    s = RedisStore.from_url(cluster_url)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def cluster_client(cluster_url: str, redis_cluster: RedisCluster) -> Iterator[redis.RedisCluster]:
    client = redis_cluster.client()
    try:
        yield client
    finally:
        client.close()


@dataclass
class ClusterFleet(Fleet):
    """A fleet whose test graphs record their executions in ``executions_url`` (not the cluster)."""

    executions_url: str = ""

    def worker_env(self, extra: dict[str, str]) -> dict[str, str]:
        return super().worker_env({EXECUTIONS_URL_ENV: self.executions_url, **extra})


@pytest.fixture
def cluster_fleet(
    cluster_url: str, redis_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Fleet]:
    """Workers whose store is the session cluster and whose broker is the session's standalone Redis
    (which also holds the test graphs' records of executions and their gates)."""
    env = {"REFLEXR_BROKER_URL": redis_url}
    queue = f"cluster-{uuid.uuid4().hex[:8]}"
    f = ClusterFleet(cluster_url, tmp_path, queue=queue, env=env, executions_url=redis_url)
    with closing_fleet(f, request) as started:
        yield started


@pytest.fixture
def cluster_client_for(cluster_fleet: Fleet) -> Iterator[Client]:
    """A Client of the cluster fleet (its store the cluster, its broker the standalone Redis)."""
    client = Client(cluster_fleet.settings())
    try:
        yield client
    finally:
        client.close()
