"""The native AsyncClient: no threads, waits that leave the loop free, messages a real worker takes."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import threading

import redis
from opentelemetry import trace

from reflexr_graph.client import AsyncClient, Client
from reflexr_graph.client.publish import envelope
from reflexr_graph.config.dispatch import graph_queue, send_run
from reflexr_graph.model import Status
from tests.surfaces.graphs import ok_key

WAITERS = 100
TICKS = 20


def _blocked_clients(r: redis.Redis) -> int:
    return int(r.info("clients")["blocked_clients"])


def test_a_hundred_waits_block_in_redis_while_the_loop_keeps_ticking(
    redis_url: str, queue: str, published: None, redis_client: redis.Redis
) -> None:
    """100 concurrent waits are 100 XREAD BLOCKs held by Redis, none by a thread; a ticker on the
    same loop runs all its ticks while every wait is still blocked, then every wait wakes."""

    async def scenario() -> tuple[list[int], list[Status], int]:
        async with AsyncClient.from_url(redis_url, queue=queue) as aclient:
            run_ids = [await aclient.enqueue("counter", {"key": f"k{i}", "n": 1}) for i in range(WAITERS)]
            threads_before = threading.active_count()
            waits = [asyncio.create_task(aclient.wait(r, timeout=60)) for r in run_ids]
            while _blocked_clients(redis_client) < WAITERS:  # the loop must run for them to block
                await asyncio.sleep(0.01)
            observed: list[int] = []
            for tick in range(TICKS):
                await asyncio.sleep(0.005)
                # Each tick sees every wait still pending and still blocked in Redis.
                pending = sum(not w.done() for w in waits)
                observed.append(min(pending, _blocked_clients(redis_client)))
                assert tick == len(observed) - 1
            extra_threads = threading.active_count() - threads_before
            for run_id in run_ids:
                await aclient.cancel(run_id)
            ended = [info.status for info in await asyncio.gather(*waits)]
            return observed, ended, extra_threads

    observed, ended, extra_threads = asyncio.run(scenario())
    assert observed == [WAITERS] * TICKS
    assert ended == [Status.CANCELLED] * WAITERS
    assert extra_threads <= 0


def test_the_async_message_is_the_one_kombu_writes(
    redis_url: str, queue: str, redis_client: redis.Redis
) -> None:
    """The queue item the async client pushes matches kombu's own for the same run, field by field."""
    with (
        Client.from_url(redis_url, queue=queue) as client,
        trace.get_tracer("test").start_as_current_span("send"),
    ):
        send_run(client.app, "run-1", "counter")
        target = graph_queue(queue, "counter")
        theirs = json.loads(redis_client.rpop(target) or b"")
        ours = json.loads(envelope(client.app, "run-1", "counter", target))
    # Both carry the sender's trace (kombu's under a publish span of its own).
    assert ours["headers"]["traceparent"].split("-")[1] == theirs["headers"]["traceparent"].split("-")[1]
    assert set(ours) == set(theirs)
    assert (ours["content-type"], ours["content-encoding"]) == (
        theirs["content-type"],
        theirs["content-encoding"],
    )
    assert json.loads(base64.b64decode(ours["body"])) == json.loads(base64.b64decode(theirs["body"]))
    same_headers = {k for k in theirs["headers"] if k not in ("origin", "ignore_result", "traceparent")}
    assert {k: ours["headers"][k] for k in same_headers} == {k: theirs["headers"][k] for k in same_headers}
    props_theirs = {k: v for k, v in theirs["properties"].items() if k not in ("delivery_tag", "reply_to")}
    props_ours = {k: v for k, v in ours["properties"].items() if k not in ("delivery_tag", "reply_to")}
    assert props_ours == props_theirs


def test_a_real_worker_runs_what_the_async_client_enqueued(
    redis_url: str, queue: str, published: None, redis_client: redis.Redis, worker: subprocess.Popen[bytes]
) -> None:
    redis_client.set(ok_key("async"), 1)

    async def scenario() -> tuple[Status, object, bool, bool]:
        async with AsyncClient.from_url(redis_url, queue=queue) as aclient:
            first = await aclient.enqueue_run("counter", {"key": "async", "n": 2}, idempotency_key="a-1")
            again = await aclient.enqueue_run("counter", {"key": "async", "n": 2}, idempotency_key="a-1")
            assert again.run_id == first.run_id
            info = await aclient.wait(first.run_id, timeout=60)
            return info.status, info.output, first.created, again.created

    assert asyncio.run(scenario()) == (Status.SUCCEEDED, 3, True, False)


def test_pages_continue_where_the_last_ended(redis_url: str, queue: str, published: None) -> None:
    async def scenario() -> tuple[list[str], list[str]]:
        async with AsyncClient.from_url(redis_url, queue=queue) as aclient:
            made = [await aclient.enqueue("counter", {"key": f"p{i}", "n": 1}) for i in range(7)]
            seen: list[str] = []
            cursor = None
            while True:
                page = await aclient.runs_page(limit=3, cursor=cursor)
                seen += [r.run_id for r in page.runs]
                if page.cursor is None:
                    break
                cursor = page.cursor
            return made, seen

    made, seen = asyncio.run(scenario())
    assert sorted(seen) == sorted(made) and len(seen) == len(made)
