"""Shared fixtures: real redis-server processes, one per session plus private ones per test."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
import redis

# pytest-celery's legacy in-process worker fixture (celery.contrib.pytest): the plugin shadows it
# with its container fixture, which needs Docker. Tests that need a worker but kill nothing take
# this one, on the fleet's own Celery app (their module's ``celery_app`` fixture; docs/design.md).
from celery.contrib.pytest import celery_worker  # noqa: F401

from reflexr_graph import clock
from tests import otel, subprocesses
from tests.redis_server import RedisFactory, RedisServer
from tests.store.support import FakeClock

subprocesses.install()  # before any test starts a subprocess, which inherits it

XDIST_GROUPS = {
    "tests/fleet/test_rabbitmq.py": "rabbitmq",
    "tests/surfaces/test_console.py": "browser",
    "tests/observability/test_graph_spans.py": "graph-spans",
    "tests/test_demo.py": "demo",
    **{
        f"tests/cluster/test_cluster_{name}.py": "cluster"
        for name in ("fixture", "url", "runs", "store", "surfaces", "features")
    },
}
"""Modules whose tests share a costly session or module fixture (a RabbitMQ node, a Chromium, the
probe's spans, one demo run): under ``--dist loadgroup`` each runs on one xdist worker, which starts
it once.
Everything else is free to run on either worker: each has its own session Redis, and every port,
directory and queue a test uses is its own."""


def _long(item: pytest.Item) -> bool:
    """A crash/chaos test, or one given more time than the global timeout: it may take a while."""
    timeout = item.get_closest_marker("timeout")
    return item.get_closest_marker("slow") is not None or bool(
        timeout is not None and timeout.args and float(timeout.args[0]) > float(item.config.getini("timeout"))
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        group = XDIST_GROUPS.get(item.nodeid.split("::")[0])
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    # Long tests first (grouped ones stay in place: a group is one unit of xdist's work), so that
    # the suite's last tests are short ones and neither worker idles while the other finishes a
    # long one. xdist hands the groups out first in any case (--loadscope-reorder).
    items.sort(key=lambda item: not (_long(item) and item.get_closest_marker("xdist_group") is None))


@pytest.fixture(scope="module", autouse=True)
def _the_module_closes_what_it_opens() -> Iterator[None]:
    """Collect the garbage as each module ends: a socket its tests left open (a client never closed,
    in a reference cycle) warns now, and fails that module's last test, rather than whichever test of
    another module runs when the collector next happens to (filterwarnings = error)."""
    yield
    gc.collect()


@pytest.fixture(scope="session", autouse=True)
def _in_memory_telemetry() -> None:
    """Spans and metrics of the whole session go to memory (tests/otel.py); nothing is exported."""
    otel.install()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One AOF-enabled server shared by the session (under xdist, one per worker); never restart or
    kill it in a test."""
    server = RedisServer()
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """URL of the session server, emptied first so tests never see each other's keys."""
    with redis.Redis.from_url(redis_server.url) as r:
        r.flushall()
    return redis_server.url


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=False)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def private_redis() -> Iterator[RedisFactory]:
    """Start servers owned by one test (free to kill/restart); all are closed at teardown.

    Usage: ``server = private_redis(appendfsync="always", password="pw")``.
    """
    servers: list[RedisServer] = []

    def start(**kwargs: Any) -> RedisServer:
        server = RedisServer(**kwargs)
        servers.append(server)
        return server.start()

    try:
        yield start
    finally:
        for server in servers:
            server.close()


@pytest.fixture
def fake_clock() -> Iterator[FakeClock]:
    """reflexr's clock (reflexr_graph/clock.py) faked for one test and restored after it; tests
    move it by hand. tests/core and the schedule tests have clocks of their own."""
    fake = FakeClock()
    previous = clock.set_source(fake)
    try:
        yield fake
    finally:
        clock.set_source(previous)
