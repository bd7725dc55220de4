"""The reaper in process, against a real Redis, with the store's clock faked."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reflexr_graph import clock, schemas
from reflexr_graph.config.dispatch import graph_queue
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.reaper import IDLE_MAX_S, Reaper, lock_ttl_ms
from reflexr_graph.fleet.reaping.job import Pass
from reflexr_graph.model import Status, WorkerInfo
from reflexr_graph.store import keys
from reflexr_graph.store.redis_store import RedisStore
from tests.fleet import graphs
from tests.fleet.inproc import claim, create_run, fleet_app, queued_messages
from tests.store.support import FakeClock
from tests.waiting import wait_for


@pytest.fixture
def fake() -> Iterator[FakeClock]:
    fake = FakeClock()
    previous = clock.set_source(fake)
    yield fake
    clock.set_source(previous)


SERVING_TTL_MS = 10 * 24 * 3600 * 1000
"""A worker registered by hand stays live however far a test moves the fake clock."""


def steps_queue(app: FleetApp) -> str:
    return graph_queue(app.conf.task_default_queue, "steps")


@pytest.fixture
def app(redis_url: str, fake: FakeClock) -> Iterator[FleetApp]:
    app = fleet_app(redis_url, graphs.steps, lease_ttl_s=3)
    # A live worker serves "steps", as the fleet's presence beat would say.
    app.store().worker_beat(WorkerInfo(name="w@test", graphs=("steps",)), ttl_ms=SERVING_TTL_MS)
    yield app
    app.store().close()
    app.close()


def test_lapsed_lease_is_reaped_and_sent_again(app: FleetApp, fake: FakeClock) -> None:
    """G5: a run whose lease lapsed counts an abandoned attempt and gets a fresh message now, on its
    graph's queue, naming the graph only, with no countdown or ETA."""
    store = app.store()
    run_id = create_run(store, "steps", {"value": 3})
    claim(app, store, run_id)
    reaper = Reaper(app, store)
    reaper.tick()
    assert queued_messages(store, steps_queue(app)) == []  # lease still live
    fake.advance(3001)
    reaper.tick()
    info = store.get(run_id)
    assert (info.status, info.reason) == (Status.RETRYING, "abandoned")
    [message] = queued_messages(store, steps_queue(app))
    assert message["id"] == run_id and message["task"] == "reflexr_graph.run"
    # Only a nudge: the graph, never the inputs (the worker reads them from the run record).
    assert message["kwargs"] == {"graph": "steps"}
    assert message["args"] == [] and message["eta"] is None and message["countdown"] is None
    # Kept as a safety net, two lease TTLs later, in case the message is lost before a claim.
    assert store.client.zscore(keys.due(keys.STANDALONE.of(run_id)), run_id) == clock.now_ms() + 6000


def test_a_lease_that_lapses_just_after_an_outage_is_an_interruption(app: FleetApp, fake: FakeClock) -> None:
    """A lease last renewed before Redis went away can lapse a little after Redis is back: its
    renewals fell due in the outage, so its run is interrupted (store_unavailable), not charged
    an attempt. A lease renewed after the outage lapses more than a lease TTL past its end, and
    counts (abandoned)."""
    store = app.store()
    lost, later = create_run(store, "steps", {"value": 1}), create_run(store, "steps", {"value": 2})
    start = clock.now_ms()
    claim(app, store, lost)  # its lease lapses at start + 3000
    reaper = Reaper(app, store)
    reaper.outage.saw((start, start + 2900))  # Redis was back 100 ms before that
    fake.advance(2950)
    claim(app, store, later)  # after the outage: its lease lapses at start + 5950
    fake.advance(3100)
    reaper.tick()
    assert (store.get(lost).reason, store.get(lost).interruptions) == ("store_unavailable", 1)
    assert (store.get(later).reason, store.get(later).interruptions) == ("abandoned", 0)


def test_message_lost_before_any_claim_is_sent_again_later_and_later(app: FleetApp, fake: FakeClock) -> None:
    """G1/G5: a worker SIGKILLed after prefetching a message, before claiming the run, takes the
    message with it until the visibility timeout, and the run holds no lease; the reaper sends it
    again after 2 lease TTLs, then twice as late each time, until a claim ends it."""
    store = app.store()
    queue = steps_queue(app)
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
    assert store.client.zscore(keys.due(keys.STANDALONE.of(run_id)), run_id) is None, (
        "the claim ends the resends"
    )


def test_retry_is_sent_only_when_due(app: FleetApp, fake: FakeClock) -> None:
    """A failed attempt's retry waits in the due set, not in a Celery countdown: nothing is sent early."""
    store = app.store()
    run_id = create_run(store, "steps", {})
    ctx = claim(app, store, run_id).context()
    store.fail(ctx, error_type="E", message="m", traceback=None, reason="step_failed", permanent=False,
               retry_delay_ms=5000)  # fmt: skip
    reaper = Reaper(app, store)
    reaper.tick()
    assert queued_messages(store, steps_queue(app)) == []
    fake.advance(5000)
    reaper.tick()
    assert [m["id"] for m in queued_messages(store, steps_queue(app))] == [run_id]


def test_reaper_sleeps_until_the_next_due_time_not_a_whole_tick(app: FleetApp, fake: FakeClock) -> None:
    """A retry due before the next tick is sent at its time: the pass's tick names the next due
    entry, and the loop sleeps until it (one ms past it). With nothing due soon and no lease to
    lapse it sleeps ``idle_s`` (its lease TTL here); another reaper sleeps until the lock would lapse."""
    store = app.store()
    run_id = create_run(store, "steps", {})
    ctx = claim(app, store, run_id).context()
    store.fail(ctx, error_type="E", message="m", traceback=None, reason="step_failed", permanent=False,
               retry_delay_ms=300)  # fmt: skip
    reaper, other = Reaper(app, store), Reaper(app, store)
    assert reaper.next_wait_s() == reaper.interval_s  # no pass yet
    reaper.tick()
    other.tick()
    assert reaper.next_wait_s() == pytest.approx(0.301)
    # It does not hold the lock: nothing to send until the holder's lock would lapse.
    assert other.interval_s < other.next_wait_s() <= lock_ttl_ms() / 1000
    fake.advance(250)
    assert reaper.next_wait_s() == pytest.approx(0.051)
    fake.advance(51)
    reaper.tick()
    assert [m["id"] for m in queued_messages(store, steps_queue(app))] == [run_id]
    # Its entry is kept as a safety net, seconds later, and no lease can lapse: the longest sleep.
    assert reaper.next_wait_s() == pytest.approx(reaper.idle_s + 0.001)
    assert reaper.idle_s == app.reflexr_settings.lease_ttl_s


def test_running_reaper_sends_a_retry_due_before_its_next_tick(redis_url: str) -> None:
    """The loop sleeps until the next due time its pass saw, not a whole tick: with a tick of a
    minute, a retry due in a second is sent well before the next tick (real clock, real thread)."""
    app = fleet_app(redis_url, graphs.steps, lease_ttl_s=3)
    store = app.store()
    store.worker_beat(WorkerInfo(name="w@test", graphs=("steps",)), ttl_ms=SERVING_TTL_MS)
    run_id = create_run(store, "steps", {})
    ctx = claim(app, store, run_id).context()
    store.fail(ctx, error_type="E", message="m", traceback=None, reason="step_failed", permanent=False,
               retry_delay_ms=1000)  # fmt: skip
    reaper = Reaper(app, store, interval_s=60)
    reaper.start()
    try:
        sent = wait_for(lambda: queued_messages(store, steps_queue(app)), 30, "the retry to be sent")
        assert [m["id"] for m in sent] == [run_id]
    finally:
        reaper.stop()
        store.close()
        app.close()


def test_a_nudge_wakes_a_reaper_sleeping_until_a_later_time(redis_url: str) -> None:
    """An idle reaper sleeps up to its lease TTL (a minute here), not a tick: a retry written
    meanwhile comes with a nudge (Recorder, on a retry, a timer or a release), which wakes it now
    (real clock, real thread)."""
    app = fleet_app(redis_url, graphs.steps, lease_ttl_s=60)
    store = app.store()
    store.worker_beat(WorkerInfo(name="w@test", graphs=("steps",)), ttl_ms=SERVING_TTL_MS)
    reaper = Reaper(app, store)
    assert reaper.idle_s == IDLE_MAX_S
    reaper.start()
    try:
        wait_for(lambda: reaper.holding and reaper.next_wait_s() > IDLE_MAX_S / 2, 30, "the reaper to sleep")
        run_id = create_run(store, "steps", {})
        ctx = claim(app, store, run_id).context()
        store.fail(ctx, error_type="E", message="m", traceback=None, reason="step_failed", permanent=False,
                   retry_delay_ms=0)  # fmt: skip
        store.nudge_reaper()
        sent = wait_for(lambda: queued_messages(store, steps_queue(app)), IDLE_MAX_S / 2, "the nudged send")
        assert [m["id"] for m in sent] == [run_id]
    finally:
        reaper.stop()
        store.close()
        app.close()


def test_enqueued_run_whose_message_was_never_sent_is_sent_after_the_grace(
    app: FleetApp, fake: FakeClock
) -> None:
    """G1: a run created by a producer that died before sending its message is sent by the reaper."""
    store = app.store()
    run_id = create_run(store, "steps", {"value": 1})
    reaper = Reaper(app, store)
    reaper.tick()
    assert queued_messages(store, steps_queue(app)) == []
    fake.advance(60_000)
    reaper.tick()
    assert [m["id"] for m in queued_messages(store, steps_queue(app))] == [run_id]


def test_due_entry_of_a_vanished_run_is_dropped(app: FleetApp) -> None:
    """A due entry whose run record expired is removed instead of being sent every second forever."""
    store = app.store()
    store.client.zadd(keys.due(keys.STANDALONE.of("ghost")), {"ghost": 0})
    Reaper(app, store).dispatch.send_due()
    assert store.client.zscore(keys.due(keys.STANDALONE.of("ghost")), "ghost") is None
    assert queued_messages(store, steps_queue(app)) == []


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
    assert queued_messages(store, steps_queue(app)) == []  # the non-holder did nothing
    first.stop()
    second.tick()
    assert second.holding
    assert [m["id"] for m in queued_messages(store, steps_queue(app))] == [run_id]


def test_holder_only_jobs_run_in_the_lock_holders_pass_alone(app: FleetApp) -> None:
    """The pass runs a job marked ``holder_only`` only while its reaper holds the lock, as the pass's
    read left it (the read answers a reaper without it no runs, but a job may act on none, as the
    payload sweep does); the other jobs run in every reaper's pass."""
    store = app.store()
    first, second = Reaper(app, store), Reaper(app, store)
    ran: list[tuple[str, bool]] = []

    class Probe:
        def __init__(self, name: str, holder_only: bool) -> None:
            self.name, self.holder_only = name, holder_only

        def run(self, current: Pass) -> None:
            ran.append((self.name, self.holder_only))

    for name, reaper in (("first", first), ("second", second)):
        reaper.jobs += [Probe(name, holder_only=True), Probe(name, holder_only=False)]
    first.tick()
    second.tick()
    assert ran == [("first", True), ("first", False), ("second", False)]


def test_lock_ttl_is_three_ticks_whatever_the_lease() -> None:
    """G5: a dead reaper is replaced within three ticks, before any lease it should reap lapses."""
    assert lock_ttl_ms() == 3000
    assert lock_ttl_ms(0.5) == 1500


def test_first_tick_publishes_the_graph_schemas(app: FleetApp, redis_url: str) -> None:
    """Workers publish their graphs' schemas, so clients can validate inputs without the graph code."""
    store: RedisStore = app.store()
    Reaper(app, store).tick()
    assert schemas.load(store, "steps").fingerprint == graphs.steps.fingerprint


def test_due_run_of_a_graph_no_live_worker_serves_waits_then_is_dead(redis_url: str, fake: FakeClock) -> None:
    """Issue 14: a due run whose graph no live worker serves gets no message (nobody would take it) and
    waits, saying so in its history; if a worker for it appears it is sent; past the grace period with
    none, it is dead-lettered as unknown_graph, with a message that says what to do."""
    app = fleet_app(redis_url, graphs.steps, lease_ttl_s=3, unknown_graph_grace_s=60)
    store = app.store()
    queue = steps_queue(app)
    waits, dies = create_run(store, "steps", {}), create_run(store, "steps", {})
    fake.advance(60_000)  # past the enqueue's dispatch grace
    reaper = Reaper(app, store)
    reaper.tick()
    assert queued_messages(store, queue) == []
    assert [e.type for e in store.events(waits)][-1] == "waiting_for_worker"
    assert store.get(waits).status is Status.QUEUED
    fake.advance(30_000)
    reaper.tick()
    store.client.zrem(keys.due(keys.STANDALONE.of(dies)), dies)  # let only one of them find a worker
    store.worker_beat(WorkerInfo(name="w@late", graphs=("steps",)), ttl_ms=5_000)
    fake.advance(5_000)
    reaper.tick()
    assert [m["id"] for m in queued_messages(store, queue)] == [waits]
    store.client.zadd(keys.due(keys.STANDALONE.of(dies)), {dies: clock.now_ms()})
    fake.advance(30_000)  # the late worker's beat has expired: nobody serves steps again
    reaper.tick()
    info = store.get(dies)
    assert (info.status, info.reason) == (Status.DEAD, "unknown_graph")
    assert info.error is not None and "no live worker served graph 'steps' for 60s" in info.error
    assert "replay" in info.error
    app.close()
