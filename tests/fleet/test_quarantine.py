"""Garbage pushed straight into the queue list with redis-py, against a real worker subprocess: every
item is moved aside to the quarantine list with its reason, the worker stays up (same process) and
serves the runs queued after it, and a worker started while garbage is queued starts and serves."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Callable

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.model import QuarantinedItem, Status
from reflexr_graph.store import keys
from reflexr_graph.store.quarantine import Quarantine
from tests.fleet import garbage
from tests.fleet.conftest import Fleet, Worker
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(240)


def matches(entry: QuarantinedItem, item: bytes) -> bool:
    """The entry holds this item: byte for byte, its first bytes when cut, or (for envelopes that
    Celery read before rejecting them) the same JSON."""
    kept = entry.raw_bytes()
    if entry.truncated:
        return entry.size == len(item) and item.startswith(kept)
    if kept == item:
        return True
    try:
        return bool(json.loads(kept) == json.loads(item))
    except ValueError:
        return False


def assert_all_quarantined(entries: list[QuarantinedItem], pushed: list[tuple[garbage.Kind, bytes]]) -> None:
    left = list(pushed)
    for entry in entries:
        found = next((p for p in left if p[0].reason == entry.reason and matches(entry, p[1])), None)
        assert found is not None, f"no pushed item for entry {entry.reason}: {entry.detail}"
        left.remove(found)
    assert not left, [kind.name for kind, _ in left]


def quarantined(worker: Worker, quarantine: Quarantine, n: int) -> bool:
    if not worker.alive():
        pytest.fail(f"the worker exited:\n{worker.log()[-3000:]}")
    return quarantine.length() >= n


def serves(fleet: Fleet, client: Client, r: redis.Redis) -> None:
    """A run enqueued by the client and one pushed as a raw envelope both succeed."""
    run_id = client.enqueue("steps", {"value": 3})
    raw_id = str(uuid.uuid4())
    r.lpush(fleet.queue, garbage.good(fleet.queue, value=4, task_id=raw_id))
    assert client.wait(run_id, timeout=60).status is Status.SUCCEEDED
    # A message-only producer's run exists once a worker took its message.
    wait_for(lambda: r.exists(keys.run(raw_id)), 60, "the worker to create the raw message's run")
    assert client.wait(raw_id, timeout=60).output == {"value": 4, "steps": ["s1", "s2", "s3"], "attempt": 1}


def test_a_hundred_garbage_items_of_ten_kinds_are_moved_aside_and_the_worker_goes_on(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    worker = fleet.start()
    pushed = garbage.items(fleet.queue, per_kind=10)
    assert len(pushed) == 100 and len({kind.name for kind, _ in pushed}) == 10
    quarantine = Quarantine(redis_client)
    started = time.monotonic()
    for _, item in pushed:
        redis_client.lpush(fleet.queue, item)
    wait_for(lambda: quarantined(worker, quarantine, len(pushed)), 120, "100 items in the quarantine list")
    print(f"\n100 garbage items moved aside in {time.monotonic() - started:.2f}s")
    assert worker.alive(), "the worker's main process (the same pid) is still up"
    entries = quarantine.items(limit=200)
    assert Counter(e.reason for e in entries) == Counter(kind.reason for kind, _ in pushed)
    assert quarantine.counts() == dict(Counter(kind.reason for kind, _ in pushed))
    assert {e.queue for e in entries} == {fleet.queue}
    assert_all_quarantined(entries, pushed)
    serves(fleet, client_for(fleet), redis_client)
    assert worker.alive()
    # Late acks: a run's outcome is written before its message is acked, so the ack may trail it.
    wait_for(
        lambda: redis_client.hlen("unacked") == 0, 30, "every message read to be acked (none comes back)"
    )
    log = worker.log()
    assert "Unrecoverable error" not in log
    assert log.count("moved aside to the quarantine list") == len(pushed), "logged once each"
    assert "just a json string" not in log and "x" * 64 not in log, "no item content in the log"


def test_a_worker_started_while_garbage_is_queued_starts_and_serves(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    pushed = garbage.items(fleet.queue, per_kind=1)
    for _, item in pushed:
        redis_client.lpush(fleet.queue, item)
    worker = fleet.start()  # fails the test if the worker exits at start
    quarantine = Quarantine(redis_client)
    wait_for(
        lambda: quarantined(worker, quarantine, len(pushed)), 60, "the queued garbage in the quarantine list"
    )
    assert_all_quarantined(quarantine.items(), pushed)
    serves(fleet, client_for(fleet), redis_client)
    assert worker.alive()
