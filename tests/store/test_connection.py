"""Connections: URLs with AUTH and TLS, StoreUnavailable, and the single round trip of a save."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from reflexr_graph import errors
from reflexr_graph.core.port import Boundary
from reflexr_graph.model import Status
from reflexr_graph.store import RedisStore
from tests.redis_server import RedisServer
from tests.store.support import make_run, start
from tests.tls import tls_redis

RedisFactory = Callable[..., RedisServer]  # the private_redis fixture


class CountingRedis(redis.Redis):
    """A client that records every command it sends, to count round trips without timing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[str] = []

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.sent.append(str(args[0]).upper())
        return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]


def _commandstats(client: redis.Redis) -> dict[str, int]:
    return {name: int(stats["calls"]) for name, stats in client.info("commandstats").items()}


@pytest.mark.usefixtures("fake_clock")
def test_save_checkpoint_is_one_round_trip(redis_url: str) -> None:
    """save_checkpoint sends exactly one command (EVALSHA), by client-side count and server commandstats."""
    client = CountingRedis(connection_pool=redis.ConnectionPool.from_url(redis_url))
    store = RedisStore(client)
    observer = redis.Redis.from_url(redis_url)
    try:
        make_run(store)
        ctx = start(store)
        store.preload_scripts()
        before = _commandstats(observer)
        client.sent.clear()
        store.save_checkpoint(ctx, Boundary('{"big": "' + "x" * 10_000 + '"}', seq=1, next_node="b"))
        assert client.sent == ["EVALSHA"]
        after = _commandstats(observer)
        changed = {
            name: after[name] - before.get(name, 0) for name in after if after[name] != before.get(name, 0)
        }
        # The server also counts the commands the script runs inside that one EVALSHA.
        assert changed.pop("cmdstat_evalsha") == 1
        # del: the records of work since the previous checkpoint, which this one holds; z*: the
        # history the checkpoint it replaces would move into.
        inside_script = {
            "hget", "hmget", "hset", "hincrby", "zadd", "xadd", "del", "info", "zrangebyscore", "zcard",
        }  # fmt: skip
        assert {name.removeprefix("cmdstat_") for name in changed} <= inside_script, changed
    finally:
        store.close()
        client.connection_pool.disconnect()
        observer.close()


@pytest.mark.usefixtures("fake_clock")
def test_unreachable_redis_raises_store_unavailable(private_redis: RedisFactory) -> None:
    """With the server down, every operation raises errors.StoreUnavailable, without payload values."""
    server = private_redis()
    no_retry = Retry(NoBackoff(), 0)
    store = RedisStore.from_url(server.url, socket_timeout=1.0, socket_connect_timeout=1.0, retry=no_retry)
    try:
        make_run(store)
        ctx = start(store)
        server.kill()
        calls: list[Callable[[], object]] = [
            lambda: store.get("run-1"),
            lambda: store.save_checkpoint(ctx, Boundary('{"secret": "VALUE"}', seq=1, next_node=None)),
            lambda: store.create_run(
                "run-2", graph="g", inputs_json='"VALUE"', max_attempts=1, dispatch_grace_ms=0
            ),
            lambda: store.events("run-1", block_ms=100),
            lambda: store.reap(),
        ]
        for call in calls:
            with pytest.raises(errors.StoreUnavailable) as caught:
                call()
            assert "VALUE" not in str(caught.value)
        server.start()  # same port: the store reconnects by itself
        assert store.create_run(
            "run-3", graph="g", inputs_json="{}", max_attempts=1, dispatch_grace_ms=0
        ) == ("run-3", True)
    finally:
        store.close()


def test_from_url_with_password(private_redis: RedisFactory) -> None:
    """A password in the URL is used for AUTH; a wrong one is reported as StoreUnavailable."""
    server = private_redis(password="s3cret/pw")
    store = RedisStore.from_url(server.url)
    try:
        make_run(store)
        assert store.get("run-1").status is Status.QUEUED
    finally:
        store.close()
    wrong = RedisStore.from_url(f"redis://:wrong@127.0.0.1:{server.port}/0", retry=Retry(NoBackoff(), 0))
    try:
        with pytest.raises(errors.StoreUnavailable):
            wrong.get("run-1")
    finally:
        wrong.close()


def test_from_url_rediss_tls_with_auth(private_redis: RedisFactory, tmp_path: Path) -> None:
    """A rediss:// URL connects over TLS (verifying the server's certificate) and authenticates."""
    _server, tls_port, cert = tls_redis(private_redis, tmp_path, "pw")
    store = RedisStore.from_url(f"rediss://:pw@127.0.0.1:{tls_port}/0", ssl_ca_certs=str(cert))
    try:
        make_run(store)
        assert store.get("run-1").graph == "demo"
    finally:
        store.close()
