"""On the store's own Redis, enqueue is one round trip: ``create_run.lua`` records the run and pushes
its Celery message in the same script, so a run is never recorded without its message."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import redis

from reflexr_graph import schemas
from reflexr_graph.client import Client, core
from reflexr_graph.config.dispatch import graph_queue
from reflexr_graph.config.settings import load_settings
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from tests.redis_server import RedisFactory
from tests.surfaces.graphs import ACTIONS, ok_key


def _sent_while(url: str, act: Callable[[], object]) -> list[dict[str, Any]]:
    """Every command Redis ran while ``act`` ran (MONITOR), a script's own marked ``lua``."""
    marker = f"end-{uuid.uuid4().hex}"
    with redis.Redis.from_url(url) as watcher, redis.Redis.from_url(url) as other:
        other.ping()  # connected before: its handshake is not in what is seen
        with watcher.monitor() as seen:
            act()
            other.echo(marker)  # on its own connection, after everything act sent
            commands: list[dict[str, Any]] = []
            while marker not in (command := seen.next_command())["command"]:
                commands.append(command)
    return commands


def _messages(r: redis.Redis, queue: str) -> dict[str, list[dict[str, Any]]]:
    """The broker lists of ``queue``'s graphs and their priorities, each with its messages."""
    lists = [k.decode() for k in r.keys(f"{queue}*") if r.type(k) == b"list"]
    return {name: [json.loads(item) for item in r.lrange(name, 0, -1)] for name in lists}


def test_enqueue_is_one_round_trip_that_records_the_run_and_pushes_its_message(
    private_redis: RedisFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = private_redis()
    # The published schema is read once here; a re-read would be a round trip of its own.
    monkeypatch.setattr(core, "SCHEMA_CACHE_S", 3600.0)
    queue = f"one-rtt-{uuid.uuid4().hex[:6]}"
    with Client(load_settings(redis_url=server.url, queue=queue)) as client:
        schemas.publish(client.store, ACTIONS)
        warm = client.enqueue(
            "counter", {"key": "warm", "n": 1}
        )  # connects, reads the schema, loads the script
        made: list[str] = []
        sent = _sent_while(server.url, lambda: made.append(client.enqueue("counter", {"key": "a", "n": 2})))
        info = client.get(made[0])
    from_clients = [c["command"].split()[0].upper() for c in sent if c["client_type"] != "lua"]
    assert from_clients == ["EVALSHA"], sent
    in_script = [c["command"].split()[:2] for c in sent if c["client_type"] == "lua"]
    target = graph_queue(queue, "counter")
    assert [[verb.upper(), key] for verb, key in in_script].count(["LPUSH", target]) == 1, in_script
    assert info.status is Status.QUEUED
    with redis.Redis.from_url(server.url) as r:
        pushed = _messages(r, queue)[target]
    assert [m["headers"]["id"] for m in pushed] == [made[0], warm]  # LPUSH: the newest first


def test_an_idempotent_enqueue_again_pushes_no_second_message(
    client: Client, redis_client: redis.Redis, queue: str
) -> None:
    first = client.enqueue_run("counter", {"key": "i", "n": 1}, idempotency_key="once", priority=3)
    again = client.enqueue_run("counter", {"key": "i", "n": 1}, idempotency_key="once", priority=3)
    assert (again.run_id, first.created, again.created) == (first.run_id, True, False)
    # Priority 3 has its own list, named as kombu's Redis transport names it.
    target = keys.broker_queue(graph_queue(queue, "counter"), 3)
    messages = _messages(redis_client, queue)
    assert list(messages) == [target]
    assert [m["headers"]["id"] for m in messages[target]] == [first.run_id]
    assert messages[target][0]["properties"]["priority"] == 3
    assert client.get(first.run_id).priority == 3


def test_a_real_worker_runs_the_messages_the_script_pushed(
    client: Client, redis_client: redis.Redis, worker: subprocess.Popen[bytes]
) -> None:
    redis_client.set(ok_key("pushed"), 1)
    plain = client.enqueue("counter", {"key": "pushed", "n": 2})
    later = client.enqueue("counter", {"key": "pushed", "n": 5}, priority=9)
    done = [client.wait(run_id, timeout=60) for run_id in (plain, later)]
    assert [(i.status, i.output) for i in done] == [(Status.SUCCEEDED, 3), (Status.SUCCEEDED, 6)]
