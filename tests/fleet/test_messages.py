"""Malformed messages against a real worker subprocess: each is dead-lettered with a reason or moved
aside to the quarantine list with one, pickle is never loaded (G6), and the worker stays healthy (G4)."""

from __future__ import annotations

import base64
import json
import pickle
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
from kombu import Connection, Exchange, Queue

from reflexr_graph.client import Client
from reflexr_graph.config.dispatch import TASK_NAME
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from reflexr_graph.store.quarantine import Quarantine
from tests.fleet.conftest import Fleet
from tests.fleet.garbage import EMBED, envelope, headers
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(180)


class Touch:
    """Unpickling this creates a file: proof that a worker loaded a pickle payload."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.path,))


def publish_raw(
    url: str, queue: str, body: bytes, *, content_type: str = "application/json", task_id: str | None = None,
    task: str = TASK_NAME, encoding: str = "utf-8",
) -> str:  # fmt: skip
    """Put one message on the queue exactly as given, bypassing Celery's serializer."""
    task_id = task_id or str(uuid.uuid4())
    q = Queue(queue, Exchange(queue, type="direct"), routing_key=queue)
    with Connection(url) as conn:
        conn.Producer().publish(
            body, exchange=q.exchange, routing_key=queue, declare=[q], content_type=content_type,
            content_encoding=encoding, headers=headers(task_id, task), correlation_id=task_id,
        )  # fmt: skip
    return task_id


def json_body(args: Any, kwargs: Any) -> bytes:
    return json.dumps([args, kwargs, EMBED]).encode()


def protocol1(r: redis.Redis, queue: str, body: dict[str, Any]) -> str:
    """Push a Celery protocol 1 message (the task's name and id in the body, none in the headers)."""
    env = envelope(queue, {})
    task_id = env["headers"]["id"]
    del env["headers"]["task"]
    env["body"] = base64.b64encode(json.dumps({"id": task_id, **body}).encode()).decode()
    r.lpush(queue, json.dumps(env))
    return task_id


def dead_reason(r: redis.Redis, run_id: str) -> str | None:
    status, reason = r.hmget(keys.run(run_id), ["status", "reason"])
    if status is None or status.decode() != "dead":
        return None
    return reason.decode() if reason else ""


def test_each_kind_of_bad_message(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Unknown graph, invalid inputs, missing kwargs, NaN and positional args are dead-lettered with a
    clear reason; pickle, garbage JSON, a body of the wrong shape, an unregistered task, none at all
    and one Celery chokes on are quarantined with theirs, without a run record; the pickle is never
    loaded; the worker serves a good run after."""
    fleet.env["REFLEXR_UNKNOWN_GRAPH_GRACE_S"] = "0"  # an unknown graph is dead at once, not after a wait
    worker = fleet.start()
    url, queue = fleet.redis_url, fleet.queue
    marker = tmp_path / "unpickled"
    dead_cases = {
        publish_raw(url, queue, json_body([], {"graph": "nope", "inputs": {}})): "unknown_graph",
        publish_raw(
            url, queue, json_body([], {"graph": "steps", "inputs": {"value": "x"}})
        ): "invalid_inputs",
        publish_raw(url, queue, json_body([], {"graph": "steps"})): "bad_message",
        publish_raw(url, queue, json_body([], {"inputs": {}})): "bad_message",
        publish_raw(url, queue, json_body([1], {"graph": "steps", "inputs": {}})): "bad_message",
        publish_raw(url, queue, b'[[], {"graph": "steps", "inputs": {"value": NaN}}, {}]'): "bad_message",
    }
    quarantined = {
        publish_raw(url, queue, pickle.dumps(((), {"graph": "steps", "inputs": Touch(marker)}, EMBED)),
                    content_type="application/x-python-serialize", encoding="binary"): "content_not_allowed",
        publish_raw(url, queue, b"{not json"): "undecodable_body",
        publish_raw(url, queue, b'"just a string"'): "invalid_task",
        publish_raw(url, queue, json_body([], ["not", "a", "dict"])): "invalid_task",
        publish_raw(url, queue, json_body([], {"graph": "steps", "inputs": {}}),
                    task="no.such.task"): "unknown_task",
        protocol1(redis_client, queue, {"args": [], "kwargs": {}}): "not_a_task",
        # Celery looks the task up by a name that cannot be a dict key: nothing foresaw that one.
        protocol1(redis_client, queue, {"task": ["a", "list"], "args": [], "kwargs": {}}): "handler_error",
    }  # fmt: skip
    client = client_for(fleet)
    good = client.enqueue("steps", {"value": 1})
    assert client.wait(good, timeout=60).status is Status.SUCCEEDED
    for run_id, reason in dead_cases.items():
        assert (
            wait_for(lambda run_id=run_id: dead_reason(redis_client, run_id), 30, f"{run_id} dead") == reason
        )
    quarantine = Quarantine(redis_client)
    wait_for(
        lambda: quarantine.length() >= len(quarantined), 30, "the rejected messages in the quarantine list"
    )
    entries = quarantine.items()
    assert {json.loads(e.raw)["headers"]["id"]: e.reason for e in entries} == quarantined
    for run_id in quarantined:
        assert not redis_client.exists(keys.run(run_id)), run_id
    assert not marker.exists(), "the worker unpickled a message"
    assert worker.alive()
    errors = {d.run_id: d.error or "" for d in client.dead_letters()}
    assert "no live worker served graph 'nope'" in errors[next(iter(dead_cases))]
    print(
        "\n" + "\n".join(line for line in worker.log().splitlines() if "ERROR" in line or "WARNING" in line)
    )


def test_a_hundred_malformed_messages_leave_the_worker_healthy(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """G4: 100 malformed messages in a row neither crash nor wedge the worker: its main process is
    the same one, and a good run enqueued after them succeeds. 40 became dead runs, 60 are in the
    quarantine list."""
    fleet.env["REFLEXR_UNKNOWN_GRAPH_GRACE_S"] = "0"
    worker = fleet.start()
    url, queue = fleet.redis_url, fleet.queue
    bodies: list[tuple[bytes, str]] = [
        (b"{not json", "application/json"),
        (b'"just a string"', "application/json"),
        (json_body([], {"graph": "nope", "inputs": {}}), "application/json"),
        (json_body([], {"graph": "steps"}), "application/json"),
        (b"\x80\x04K\x01.", "application/x-python-serialize"),
    ]
    for i in range(100):
        body, content_type = bodies[i % len(bodies)]
        publish_raw(url, queue, body, content_type=content_type,
                    encoding="binary" if "python" in content_type else "utf-8")  # fmt: skip
    client = client_for(fleet)
    good = client.enqueue("steps", {"value": 2})
    assert client.wait(good, timeout=90).status is Status.SUCCEEDED
    assert worker.alive()
    # The good run's own queue may be served before the rest of the base queue's garbage.
    wait_for(lambda: len(client.dead_letters()) == 40, 60, "the 40 bad messages to be dead-lettered")
    # The last message sent is one to quarantine: it may still be on its way once the 40th is dead.
    wait_for(lambda: Quarantine(redis_client).length() >= 60, 60, "the 60 others to be quarantined")
    assert Quarantine(redis_client).length() == 60
