"""Client.signal is lean (issue 18, change 7b): four fields of the run, then signal.lua, which stores
the value, queues the waiting run and pushes its Celery message, all in one script. No worker and no
reaper runs here, so the message on the broker list can only be the signal's own."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
import redis

from reflexr_graph import schemas
from reflexr_graph.client import Client
from reflexr_graph.config.dispatch import graph_queue
from reflexr_graph.config.settings import load_settings
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from tests.redis_server import RedisFactory
from tests.surfaces.graphs import ACTIONS

APPROVED = {"approved": True, "by": "ana"}
QUEUE = "signal-cost"


@pytest.fixture
def server_url(private_redis: RedisFactory) -> str:
    return private_redis().url


@pytest.fixture
def client(server_url: str) -> Iterator[Client]:
    with redis.Redis.from_url(server_url) as r:
        schemas.publish(r, ACTIONS)
    c = Client(load_settings(redis_url=server_url, queue=QUEUE))
    try:
        yield c
    finally:
        c.close()


def waiting_run(client: Client, signal: str = "approval") -> str:
    """A run of ``approvals`` suspended for ``signal``, as a worker would leave it, its first message gone."""
    run_id = client.enqueue("approvals", "t")
    store = client.store
    ctx = store.claim(run_id, "token-1", lease_ttl_ms=30_000).context()
    assert store.wait(ctx, field="w|decide|-|d|x|0", signal=signal, wake_at_ms=None).record is None
    assert client.get(run_id).status is Status.WAITING
    store.client.delete(graph_queue(QUEUE, "approvals"))
    return run_id


def commands_of(client: Client, url: str, call: Callable[[], object]) -> list[str]:
    """The commands every connection but Lua's sent while ``call()`` ran, seen with MONITOR."""
    seen: list[dict[str, str]] = []
    with redis.Redis.from_url(url) as observer, observer.monitor() as monitor:
        call()
        client.store.client.echo("end of the call")
        while not seen or "end of the call" not in seen[-1]["command"]:
            seen.append(monitor.next_command())
    return [c["command"].split()[0].upper() for c in seen[:-1] if c["client_type"] != "lua"]


def test_a_signal_that_wakes_a_run_is_one_read_and_one_script(client: Client, server_url: str) -> None:
    run_id = waiting_run(client)
    client.store.preload_scripts()  # the first EVALSHA of a fresh server would load its script
    woke: list[bool] = []
    sent = commands_of(client, server_url, lambda: woke.append(client.signal(run_id, "approval", APPROVED)))
    assert woke == [True]
    assert sent == ["HMGET", "EVALSHA"], "the graph's schema is cached; the message goes with the script"
    info = client.get(run_id)
    assert (info.status, info.waiting_for) == (Status.QUEUED, None)
    messages = client.store.client.lrange(graph_queue(QUEUE, "approvals"), 0, -1)
    assert len(messages) == 1, "the script pushed the run's message itself"
    message = json.loads(messages[0])
    assert message["headers"]["id"] == run_id and message["headers"]["task"] == "reflexr_graph.run"
    assert client.store.client.zscore(keys.due(0), run_id) is not None, "the reaper's safety net stays"


def test_a_signal_kept_for_a_wait_to_come_pushes_no_message(client: Client, server_url: str) -> None:
    run_id = waiting_run(client, signal="other")
    client.store.preload_scripts()
    assert client.signal(run_id, "approval", APPROVED) is False
    assert client.get(run_id).status is Status.WAITING, "a run waiting for another signal is not woken"
    assert client.store.client.llen(graph_queue(QUEUE, "approvals")) == 0
