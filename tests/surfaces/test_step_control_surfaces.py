"""Issue 13 on the surfaces: priorities on every way in (Client, AsyncClient, CLI, HTTP) land each message
on the list kombu's Redis transport keeps for that priority, and the run keeps it for later messages;
``reflexr-graph limits`` shows each limit key."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
import redis
from kombu.transport.redis import Channel

from reflexr_graph import InvalidInputs
from reflexr_graph.client import AsyncClient, Client
from reflexr_graph.config.dispatch import graph_queue
from reflexr_graph.core.limits import LimitRequest, parse_rate
from reflexr_graph.store import RedisStore, fanout, keys
from tests.surfaces.conftest import ApiServer, Cli

pytestmark = pytest.mark.timeout(60)


def queued_at(r: redis.Redis, queue: str, priority: int) -> list[str]:
    """The run ids of the messages on the list of ``priority`` of the counter graph's queue."""
    items = r.lrange(keys.broker_queue(graph_queue(queue, "counter"), priority), 0, -1)
    return [json.loads(item)["headers"]["id"] for item in items]


def test_our_separator_is_kombus() -> None:
    assert Channel.sep == keys.BROKER_PRIORITY_SEP


def test_the_client_and_the_async_client_send_to_the_priority_list(
    client: Client, redis_url: str, queue: str, redis_client: redis.Redis
) -> None:
    bulk = client.enqueue("counter", {"key": "p", "n": 1}, priority=9)
    plain = client.enqueue("counter", {"key": "p", "n": 1})

    async def enqueue_async() -> str:
        async with AsyncClient.from_url(redis_url, queue=queue) as aclient:
            return await aclient.enqueue("counter", {"key": "p", "n": 1}, priority=9)

    bulk_async = asyncio.run(enqueue_async())
    assert sorted(queued_at(redis_client, queue, 9)) == sorted([bulk, bulk_async])
    assert queued_at(redis_client, queue, 0) == [plain]
    assert (client.get(bulk).priority, client.get(plain).priority) == (9, 0)


def test_a_replay_keeps_the_runs_priority(client: Client, queue: str, redis_client: redis.Redis) -> None:
    run_id = client.enqueue("counter", {"key": "p", "n": 1}, priority=4)
    redis_client.delete(keys.broker_queue(graph_queue(queue, "counter"), 4))
    client.cancel(run_id)
    client.replay(run_id)
    assert queued_at(redis_client, queue, 4) == [run_id]


@pytest.mark.parametrize("priority", [-1, 10, True, 2.5])
def test_a_priority_out_of_range_is_refused_before_anything_is_queued(
    client: Client, priority: object, redis_client: redis.Redis
) -> None:
    with pytest.raises(InvalidInputs, match="priority must be an integer from 0"):
        client.enqueue("counter", {"key": "p", "n": 1}, priority=priority)  # type: ignore[arg-type]
    assert fanout.total(redis_client, keys.all_runs) == 0


def test_the_cli_and_the_http_api_take_a_priority(
    env: dict[str, str], api_server: ApiServer, queue: str, redis_client: redis.Redis
) -> None:
    cli = [sys.executable, "-m", "reflexr_graph", "enqueue", "counter", "--input", '{"key": "c", "n": 1}']
    out = subprocess.run([*cli, "--priority", "7"], env=env, capture_output=True, text=True, check=True)
    bad = subprocess.run([*cli, "--priority", "12"], env=env, capture_output=True, text=True)
    assert bad.returncode == 2
    with api_server.http() as http:
        answer = http.post(
            "/api/runs", json={"graph": "counter", "inputs": {"key": "h", "n": 1}, "priority": 7}
        )
        refused = http.post(
            "/api/runs", json={"graph": "counter", "inputs": {"key": "h", "n": 1}, "priority": 10}
        )
    assert answer.status_code == 201 and answer.json()["priority"] == 7
    assert refused.status_code == 422
    assert sorted(queued_at(redis_client, queue, 7)) == sorted([out.stdout.strip(), answer.json()["run_id"]])


def test_the_limits_command_shows_each_keys_configuration_and_use(cli: Cli, redis_url: str) -> None:
    store = RedisStore.from_url(redis_url)
    store.create_run("run-l", graph="counter", inputs_json="{}", max_attempts=3, dispatch_grace_ms=60_000)
    ctx = store.claim("run-l", "token-l", lease_ttl_ms=30_000).context()
    for member in ("a", "b", "c"):
        store.acquire_limit(
            ctx, LimitRequest("crm:acme", 0.0, 1, 2, member, "work", 0, None, 5_000), slot_ttl_ms=30_000
        )
    store.acquire_limit(
        ctx,
        LimitRequest("openai", parse_rate("60/m"), 1, 0, "x", "work", 0, "60/m", 5_000),
        slot_ttl_ms=30_000,
    )
    store.close()
    listed = cli("limits", "--json")
    assert listed.returncode == 0, listed.stderr
    shown = {u["key"]: u for u in json.loads(listed.stdout)}
    assert shown["crm:acme"] == {
        "key": "crm:acme", "rate": None, "burst": 1, "concurrency": 2,
        "in_use": 2, "granted": 2, "denied": 1, "waited_s": 0.0,
    }  # fmt: skip
    assert shown["openai"] == {
        "key": "openai", "rate": "60/m", "burst": 1, "concurrency": None,
        "in_use": 0, "granted": 1, "denied": 0, "waited_s": 0.0,
    }  # fmt: skip
    table = cli("limits")
    assert (
        table.returncode == 0
        and "crm:acme" in table.stdout
        and "2/2" in table.stdout
        and "60/m" in table.stdout
    )
