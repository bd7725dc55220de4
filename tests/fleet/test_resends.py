"""The reaper's safety net for a queued run's message, with real workers: under a backlog it sends
no copy of a message that still waits in its queue, and it still sends again one that was lost
while the queue held others, once the queue drains (at-least-once)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from reflexr_graph import clock
from reflexr_graph.client import Client
from reflexr_graph.config.dispatch import graph_queue
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from tests.fleet.conftest import Fleet, count, open_gate
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(90)

BACKLOG = 12


def due_key(run_id: str) -> str:
    return keys.due(keys.STANDALONE.of(run_id))


def backlog(fleet: Fleet, client: Client, r: redis.Redis, runs: int) -> tuple[str, list[str]]:
    """A gated run holding the one slot of a worker on 1 s leases, and ``runs`` runs queued behind it."""
    fleet.env["REFLEXR_LEASE_TTL_S"] = "1"  # the reaper looks every second, and resends after 5 s
    fleet.start(concurrency=1)
    blocker = client.enqueue("steps", {"gate": "s1"})
    wait_for(lambda: count(r, blocker, "s1") == 1, 30, "the blocker to hold the slot")
    return blocker, [client.enqueue("steps", {"value": i}) for i in range(runs)]


def fall_due(r: redis.Redis, run_ids: list[str]) -> None:
    """Make the queued runs' safety net fall due now, as it does once they wait out the enqueue's
    dispatch grace (30 s), then wait until the reaper has acted on every one."""
    # A ms after it was queued: a run due the very ms it was queued is one queued for the reaper
    # to send (a reaped or replayed run), not one queued with its message.
    due = {run_id: int(r.hget(keys.run(run_id), "updated_at") or 0) + 1 for run_id in run_ids}
    wait_for(lambda: clock.now_ms() >= max(due.values()), 5, "the clock to pass the due times")
    now = clock.now_ms()
    for run_id, at in due.items():
        assert r.zadd(due_key(run_id), {run_id: at}, xx=True) == 0  # moved, not added
    wait_for(
        lambda: all(float(r.zscore(due_key(run_id), run_id) or 0) > now + 1000 for run_id in run_ids),
        30,
        "the reaper to resend or postpone every due run",
    )


def test_a_backlog_gets_no_copies_of_its_queued_messages(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    client = client_for(fleet)
    blocker, run_ids = backlog(fleet, client, redis_client, BACKLOG)
    queue = graph_queue(fleet.queue, "steps")
    queued = redis_client.llen(queue)
    assert queued >= BACKLOG - 4, "the worker prefetches a few at most"
    fall_due(redis_client, run_ids)
    # Without the queue's length, every one of them was sent again: twice as many messages.
    assert redis_client.llen(queue) == queued, "no copy of a message still in its queue"
    sends = [redis_client.hget(keys.run(run_id), "dispatches") for run_id in run_ids]
    assert sends == [None] * BACKLOG, "the reaper sent none of them again"
    open_gate(redis_client, blocker)
    for run_id in [blocker, *run_ids]:
        assert client.wait(run_id, timeout=60).status is Status.SUCCEEDED


def test_a_message_lost_behind_a_backlog_is_sent_again_once_the_queue_drains(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    client = client_for(fleet)
    blocker, run_ids = backlog(fleet, client, redis_client, 4)
    queue = graph_queue(fleet.queue, "steps")
    items = redis_client.lrange(queue, 0, -1)
    # The oldest still queued (the list is popped from its right end), the others stay behind it.
    lost = next(run_id for run_id in run_ids if any(run_id.encode() in item for item in items))
    (item,) = [item for item in items if lost.encode() in item]
    assert redis_client.lrem(queue, 1, item) == 1  # as a worker SIGKILLed after taking it would
    assert redis_client.llen(queue) > 0, "others still wait in the queue"
    fall_due(redis_client, run_ids)
    assert redis_client.hget(keys.run(lost), "dispatches") is None, "postponed while others wait"
    open_gate(redis_client, blocker)
    for run_id in [blocker, *run_ids]:
        assert client.wait(run_id, timeout=60).status is Status.SUCCEEDED
    assert redis_client.hget(keys.run(lost), "attempts") == b"1"
