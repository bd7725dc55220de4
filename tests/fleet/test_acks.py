"""kombu's unacked bookkeeping only where a message is a run's only record (fleet/acks.py).

A delivery that only names a recorded run is held in memory: the run's due entry or lease brings
it back whatever happens to the message. A foreign producer's message, which carries the inputs,
is kept in kombu's ``unacked`` hash until it is acked, as before.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.config.dispatch import TASK_NAME
from reflexr_graph.model import Status
from tests.fleet.conftest import Fleet, executions, open_gate
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

UNACKED = "unacked"
"""kombu's Redis transport's hash of the deliveries not acked yet (``Channel.unacked_key``)."""


def _unacked_runs(r: redis.Redis) -> list[str]:
    """The run ids (task ids) of the deliveries in kombu's unacked hash."""
    return [json.loads(v)[0]["headers"]["id"] for v in r.hvals(UNACKED)]


def _blocked_at_s2(r: redis.Redis, run_id: str) -> Callable[[], bool]:
    return lambda: "s2:1" in executions(r, run_id)


def test_a_message_that_only_names_its_run_is_not_copied_into_the_unacked_hash(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start()
    client = client_for(fleet)
    run_id = client.enqueue("steps", {"value": 1, "gate": "s2"})
    wait_for(_blocked_at_s2(redis_client, run_id), 30, "s2 to start")
    # The delivery is held (the attempt runs with its message not acked), but only in memory.
    assert run_id not in _unacked_runs(redis_client)
    open_gate(redis_client, run_id)
    info = client.wait(run_id, timeout=30)
    assert (info.status, info.attempts) == (Status.SUCCEEDED, 1)


def test_a_foreign_producers_message_stays_in_the_unacked_hash_until_its_ack(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start()
    client = client_for(fleet)
    run_id = f"foreign-{uuid.uuid4().hex[:8]}"
    kwargs = {"graph": "steps", "inputs": {"value": 2, "gate": "s2"}}
    client.app.send_task(TASK_NAME, kwargs=kwargs, task_id=run_id, queue=fleet.queue)
    wait_for(_blocked_at_s2(redis_client, run_id), 30, "s2 to start")
    assert run_id in _unacked_runs(redis_client)
    open_gate(redis_client, run_id)
    info = client.wait(run_id, timeout=30)
    assert info.status is Status.SUCCEEDED
    wait_for(lambda: run_id not in _unacked_runs(redis_client), 10, "the ack")
