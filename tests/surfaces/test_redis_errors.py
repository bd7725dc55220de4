"""Client, schemas and broker calls on a Redis that cannot be used raise StoreUnavailable.

Never a redis-py or kombu exception; a wrong URL (here a database the server does not
have) is RedisMisconfigured, so a caller can tell it from an outage. The password in the
URL never shows in a message.
"""

from __future__ import annotations

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from reflexr_graph import errors, schemas
from reflexr_graph.client import Client
from reflexr_graph.config.dispatch import send_run
from reflexr_graph.config.settings import load_settings
from reflexr_graph.store import RedisStore
from tests.redis_server import RedisFactory
from tests.surfaces.conftest import PASSWORD
from tests.surfaces.graphs import ACTIONS


def test_client_enqueue_with_redis_down_raises_store_unavailable(dead_url: str) -> None:
    client = Client.from_url(dead_url)
    try:
        with pytest.raises(errors.StoreUnavailable, match="connection refused") as caught:
            client.enqueue("counter", {"key": "a", "n": 1})
        assert not isinstance(caught.value, redis.RedisError)
        assert caught.value.kind == "refused" and PASSWORD not in str(caught.value)
    finally:
        client.close()


def test_schema_reads_and_writes_are_translated(redis_url: str, dead_url: str) -> None:
    """schemas.py reads Redis with its own calls; they raise StoreUnavailable like the store's."""
    store = RedisStore.from_url(dead_url)
    wrong_db = redis.Redis.from_url(redis_url.rsplit("/", 1)[0] + "/99")
    try:
        with pytest.raises(errors.StoreUnavailable):
            schemas.load(store, "counter")
        with pytest.raises(errors.StoreUnavailable):
            schemas.list_graphs(store)
        with pytest.raises(errors.RedisMisconfigured, match="no database 99"):
            schemas.publish(wrong_db, ACTIONS)
    finally:
        store.close()
        wrong_db.close()


def test_misconfiguration_is_told_apart_from_an_outage(redis_url: str, dead_url: str) -> None:
    """A wrong database number is RedisMisconfigured (retrying cannot help); a server that is
    down is only StoreUnavailable."""
    wrong = RedisStore.from_url(redis_url.rsplit("/", 1)[0] + "/99")
    down = RedisStore.from_url(dead_url)
    try:
        with pytest.raises(errors.RedisMisconfigured) as misconfigured:
            wrong.get("run-1")
        assert misconfigured.value.kind == "db_index"
        with pytest.raises(errors.StoreUnavailable) as unavailable:
            down.get("run-1")
        assert not isinstance(unavailable.value, errors.RedisMisconfigured)
    finally:
        wrong.close()
        down.close()


@pytest.mark.usefixtures("published")
def test_broker_publish_failures_are_translated(redis_url: str, dead_url: str, queue: str) -> None:
    """send_run goes through kombu; its OperationalError comes out as StoreUnavailable. When the
    run was already recorded, enqueue's error says a worker sends it anyway. (A broker that is the
    store's Redis gets a new run's message from the script that records it, so only another
    broker can be down while the store answers.)"""
    live_store = RedisStore.from_url(redis_url)
    client = Client(load_settings(redis_url=redis_url, broker_url=dead_url, queue=queue), store=live_store)
    try:
        with pytest.raises(errors.StoreUnavailable, match="connection refused") as direct:
            send_run(client.app, "run-x", "counter")
        assert direct.value.kind == "refused"
        with pytest.raises(errors.StoreUnavailable, match="is recorded, and a worker sends it") as caught:
            client.enqueue("counter", {"key": "a", "n": 1})
        assert PASSWORD not in str(caught.value)
        assert [info.status for info in live_store.list_runs()] == ["queued"]
    finally:
        client.close()


@pytest.mark.timeout(30)
def test_tls_handshake_is_bounded_by_the_connect_timeout(private_redis: RedisFactory) -> None:
    """rediss:// to a plain Redis port: the server never answers the TLS hello. The handshake
    is part of connecting, so it fails after the connect timeout (1s here), not the read
    timeout (longer than this test may run)."""
    server = private_redis()
    store = RedisStore.from_url(
        f"rediss://127.0.0.1:{server.port}/0",
        socket_connect_timeout=1.0,
        socket_timeout=120.0,
        retry=Retry(NoBackoff(), 0),
    )
    try:
        with pytest.raises(errors.StoreUnavailable, match="use redis://") as caught:
            store.ping()
        assert caught.value.kind == "tls_mismatch"
    finally:
        store.close()
