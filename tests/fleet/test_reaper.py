"""The reaper in process, against a real Redis, with the store's clock faked."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reflexr_graph import clock, schemas
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.reaper import Reaper, lock_ttl_ms
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from reflexr_graph.store.redis_store import RedisStore
from tests.fleet import graphs
from tests.fleet.inproc import claim, create_run, fleet_app, queued_messages
from tests.store.support import FakeClock


@pytest.fixture
def fake() -> Iterator[FakeClock]:
    fake = FakeClock()
    previous = clock.set_source(fake)
    yield fake
    clock.set_source(previous)


@pytest.fixture
def app(redis_url: str) -> Iterator[FleetApp]:
    app = fleet_app(redis_url, graphs.steps, lease_ttl_s=3)
    yield app
    app.store().close()
    app.close()


def test_lapsed_lease_is_reaped_and_sent_again(app: FleetApp, fake: FakeClock) -> None:
    """G5: a run whose lease lapsed counts an abandoned attempt and gets a fresh message now, carrying
    the run's own graph, inputs and idempotency key, with no countdown or ETA."""
    store = app.store()
    run_id = create_run(store, "steps", {"value": 3})
    claim(app, store, run_id)
    reaper = Reaper(app, store)
    reaper.tick()
    assert queued_messages(store, app.conf.task_default_queue) == []  # lease still live
    fake.advance(3001)
    reaper.tick()
    info = store.get(run_id)
    assert (info.status, info.reason) == (Status.RETRYING, "abandoned")
    [message] = queued_messages(store, app.conf.task_default_queue)
    assert message["id"] == run_id and message["task"] == "reflexr_graph.run"
    assert message["kwargs"] == {"graph": "steps", "inputs": {"value": 3}, "idempotency_key": run_id}
    assert message["args"] == [] and message["eta"] is None and message["countdown"] is None
    # Kept as a safety net, two lease TTLs later, in case the message is lost before a claim.
    assert store.client.zscore(keys.DUE, run_id) == clock.now_ms() + 6000


def test_message_lost_before_any_claim_is_sent_again_later_and_later(app: FleetApp, fake: FakeClock) -> None:
    """G1/G5: a worker SIGKILLed after prefetching a message, before claiming the run, takes the
    message with it until the visibility timeout, and the run holds no lease; the reaper sends it
    again after 2 lease TTLs, then twice as late each time, until a claim ends it."""
    store = app.store()
    queue = app.conf.task_default_queue
    run_id = create_run(store, "steps", {})
    fake.advance(60_000)  # past the enqueue's dispatch grace: the reaper sends it
    reaper = Reaper(app, store)
    reaper.tick()
    for wait_ms in (6000, 12000, 24000):
        assert [m["id"] for m in queued_messages(store, queue)] == [run_id]
        store.client.delete(queue)  # the message is lost with the worker that prefetched it
        fake.advance(wait_ms - 1)
        reaper.tick()
        assert queued_messages(store, queue) == [], f"sent again before its {wait_ms} ms wait was over"
        fake.advance(1)
        reaper.tick()
    assert [m["id"] for m in queued_messages(store, queue)] == [run_id]
    claim(app, store, run_id)
    assert store.client.zscore(keys.DUE, run_id) is None, "the claim ends the resends"


def test_retry_is_sent_only_when_due(app: FleetApp, fake: FakeClock) -> None:
    """A failed attempt's retry waits in the due set, not in a Celery countdown: nothing is sent early."""
    store = app.store()
    run_id = create_run(store, "steps", {})
    ctx = claim(app, store, run_id).context()
    store.fail(ctx, error_type="E", message="m", traceback=None, reason="step_failed", permanent=False,
               retry_delay_ms=5000)  # fmt: skip
    reaper = Reaper(app, store)
    reaper.tick()
    assert queued_messages(store, app.conf.task_default_queue) == []
    fake.advance(5000)
    reaper.tick()
    assert [m["id"] for m in queued_messages(store, app.conf.task_default_queue)] == [run_id]


def test_enqueued_run_whose_message_was_never_sent_is_sent_after_the_grace(
    app: FleetApp, fake: FakeClock
) -> None:
    """G1: a run created by a producer that died before sending its message is sent by the reaper."""
    store = app.store()
    run_id = create_run(store, "steps", {"value": 1})
    reaper = Reaper(app, store)
    reaper.tick()
    assert queued_messages(store, app.conf.task_default_queue) == []
    fake.advance(60_000)
    reaper.tick()
    assert [m["id"] for m in queued_messages(store, app.conf.task_default_queue)] == [run_id]


def test_due_entry_of_a_vanished_run_is_dropped(app: FleetApp) -> None:
    """A due entry whose run record expired is removed instead of being sent every second forever."""
    store = app.store()
    store.client.zadd(keys.DUE, {"ghost": 0})
    Reaper(app, store).dispatch_due()
    assert store.client.zscore(keys.DUE, "ghost") is None
    assert queued_messages(store, app.conf.task_default_queue) == []


def test_one_reaper_acts_at_a_time_and_hands_over_on_stop(app: FleetApp, fake: FakeClock) -> None:
    """Only the lock holder reaps and sends; when it stops, it releases the lock and another takes over."""
    store = app.store()
    first, second = Reaper(app, store), Reaper(app, store)
    first.tick()
    second.tick()
    assert (first.holding, second.holding) == (True, False)
    run_id = create_run(store, "steps", {})
    fake.advance(60_000)
    second.tick()
    assert queued_messages(store, app.conf.task_default_queue) == []  # the non-holder did nothing
    first.stop()
    second.tick()
    assert second.holding
    assert [m["id"] for m in queued_messages(store, app.conf.task_default_queue)] == [run_id]


def test_lock_ttl_is_three_ticks_whatever_the_lease() -> None:
    """G5: a dead reaper is replaced within three ticks, before any lease it should reap lapses."""
    assert lock_ttl_ms() == 3000
    assert lock_ttl_ms(0.5) == 1500


def test_first_tick_publishes_the_graph_schemas(app: FleetApp, redis_url: str) -> None:
    """Workers publish their graphs' schemas, so clients can validate inputs without the graph code."""
    store: RedisStore = app.store()
    Reaper(app, store).tick()
    assert schemas.load(store, "steps").fingerprint == graphs.steps.fingerprint
