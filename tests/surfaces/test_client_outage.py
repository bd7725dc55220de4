"""A client during a partition from Redis (a real TCP proxy that stops forwarding): reads and
idempotent writes are tried again until Redis answers (REFLEXR_CLIENT_RETRY_S); an enqueue
without an idempotency key is not sent twice blindly, and says it may or may not be recorded."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator

import pytest
import redis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

from reflexr_graph import errors
from reflexr_graph.client import AsyncClient, Client
from reflexr_graph.config.settings import load_settings
from reflexr_graph.model import RunInfo, Status
from reflexr_graph.store import RedisStore
from reflexr_graph.store.aio import AsyncStore
from tests.redis_server import RedisServer
from tests.tcp_proxy import TcpProxy
from tests.waiting import wait_for

SOCKET_TIMEOUT_S = 1.0
"""How long the client waits for a reply before it counts the connection lost."""


@pytest.fixture
def proxy(redis_server: RedisServer) -> Iterator[TcpProxy]:
    p = TcpProxy(redis_server.port).start()
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def cut_client(proxy: TcpProxy, queue: str, published: None) -> Iterator[Client]:
    """A client whose Redis is behind the proxy, with a short read timeout and none of redis-py's
    own retries: what the test sees is the client's policy alone."""
    settings = load_settings(redis_url=proxy.url(), queue=queue)
    store = RedisStore.from_url(proxy.url(), socket_timeout=SOCKET_TIMEOUT_S, retry=Retry(NoBackoff(), 0))
    c = Client(settings, store=store)
    try:
        yield c
    finally:
        c.close()


def test_an_enqueue_without_a_key_cut_off_after_sending_may_or_may_not_be_recorded(
    cut_client: Client, proxy: TcpProxy
) -> None:
    cut_client.enqueue("counter", {"key": "a", "n": 1})  # the graph's schema is cached for 2 s
    proxy.stall()
    try:
        with pytest.raises(errors.StoreUnavailable) as caught:
            cut_client.enqueue("counter", {"key": "b", "n": 1})
    finally:
        proxy.heal()
    said = str(caught.value)
    assert "the run may or may not have been recorded" in said and "idempotency key" in said, said
    assert caught.value.kind == "timeout"


def test_an_enqueue_with_a_key_and_reads_ride_out_a_partition(
    cut_client: Client, proxy: TcpProxy, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    first = cut_client.enqueue("counter", {"key": "a", "n": 1})
    got: list[object] = []

    def during() -> None:
        try:
            got.append(cut_client.enqueue("counter", {"key": "k", "n": 1}, idempotency_key="k"))
            got.append(cut_client.get(first))
        except BaseException as exc:  # reported by the test, not lost in the thread
            got.append(exc)

    thread = threading.Thread(target=during, name="producer")
    with caplog.at_level(logging.WARNING, logger="reflexr_graph.client"):
        proxy.stall()
        thread.start()
        try:
            wait_for(lambda: got or "REFLEXR_CLIENT_RETRY_S" in caplog.text, 30, "the client to meet the cut")
        finally:
            proxy.heal()
        thread.join(60)
    assert len(got) == 2 and isinstance(got[0], str), got
    assert got[0] == cut_client.enqueue("counter", {"key": "k", "n": 1}, idempotency_key="k"), "one run"
    assert getattr(got[1], "status", None) is Status.QUEUED


def test_the_async_client_rides_out_a_partition_too(
    proxy: TcpProxy, queue: str, published: None, caplog: pytest.LogCaptureFixture
) -> None:
    """The same policy, awaited: AsyncClient's reads wait for Redis to answer again."""
    settings = load_settings(redis_url=proxy.url(), queue=queue)

    async def main() -> RunInfo:
        store = AsyncStore.from_url(
            proxy.url(), socket_timeout=SOCKET_TIMEOUT_S, retry=AsyncRetry(NoBackoff(), 0)
        )
        async with AsyncClient(settings, store=store) as client:
            run_id = await client.enqueue("counter", {"key": "a", "n": 1})
            proxy.stall()
            try:
                reading = asyncio.ensure_future(client.get(run_id))
                while "REFLEXR_CLIENT_RETRY_S" not in caplog.text and not reading.done():
                    await asyncio.sleep(0.05)  # a poll of the condition, as wait_for's
            finally:
                proxy.heal()
            return await asyncio.wait_for(reading, 30)

    with caplog.at_level(logging.WARNING, logger="reflexr_graph.client"):
        info = asyncio.run(main())
    assert info.status is Status.QUEUED


def test_a_read_gives_up_after_the_retry_time_saying_how_long_it_waited(
    proxy: TcpProxy, queue: str, published: None
) -> None:
    """Past REFLEXR_CLIENT_RETRY_S the client raises, saying what it waited for and how long."""
    settings = load_settings(redis_url=proxy.url(), queue=queue, client_retry_s=2)
    store = RedisStore.from_url(proxy.url(), socket_timeout=SOCKET_TIMEOUT_S, retry=Retry(NoBackoff(), 0))
    with Client(settings, store=store) as client:
        run_id = client.enqueue("counter", {"key": "a", "n": 1})
        proxy.stall()
        try:
            with pytest.raises(errors.StoreUnavailable) as caught:
                client.get(run_id)
        finally:
            proxy.heal()
    said = str(caught.value)
    assert "did not answer" in said and "REFLEXR_CLIENT_RETRY_S=2" in said, said
    waited = float(said.split("after waiting ")[1].split("s ")[0])
    assert waited >= 2, said
