"""The lease heartbeat against a real Redis: it renews, and cancels the attempt when the lease is lost."""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time

import pytest

from reflexr_graph.core.port import AttemptContext
from reflexr_graph.fleet import heartbeat
from reflexr_graph.fleet.heartbeat import Heartbeat
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from reflexr_graph.store.attempts import Lease
from reflexr_graph.store.redis_store import RedisStore
from tests.fleet.inproc import claim, create_run, fleet_app
from tests.redis_server import RedisFactory
from tests.waiting import wait_for

TTL_S = 0.6


async def hang_until_cancelled(heartbeat: Heartbeat) -> None:
    task = asyncio.current_task()
    assert task is not None
    heartbeat.bind(asyncio.get_running_loop(), task)
    await asyncio.sleep(60)


def test_renews_the_lease_until_stopped(redis_url: str) -> None:
    """The lease expiry moves forward while the heartbeat runs, and stops moving once it is stopped."""
    app = fleet_app(redis_url, lease_ttl_s=TTL_S)
    store = app.store()
    run_id = create_run(store, "g", 1)
    ctx = claim(app, store, run_id).context()
    first = store.client.zscore(keys.leases(keys.STANDALONE.of(run_id)), run_id)
    assert first is not None
    with Heartbeat(store, ctx, lease_ttl_s=TTL_S) as hb:
        wait_for(
            lambda: (
                (store.client.zscore(keys.leases(keys.STANDALONE.of(run_id)), run_id) or 0)
                > first + 2 * TTL_S * 1000
            ),
            20,
            "renewals",
        )
    assert hb.lost is None
    stopped = store.client.zscore(keys.leases(keys.STANDALONE.of(run_id)), run_id)
    assert hb not in heartbeat._beater()._due, "a stopped heartbeat is no longer renewed"
    assert store.client.zscore(keys.leases(keys.STANDALONE.of(run_id)), run_id) == stopped
    store.close()


def test_cancels_the_attempt_when_the_run_is_taken_away(redis_url: str) -> None:
    """Cancelling the run now makes the next renewal fail; the heartbeat then cancels the attempt's task."""
    app = fleet_app(redis_url, lease_ttl_s=TTL_S)
    store = app.store()
    run_id = create_run(store, "g", 1)
    ctx = claim(app, store, run_id).context()
    store.cancel(run_id, now=True)
    started = time.monotonic()
    with Heartbeat(store, ctx, lease_ttl_s=TTL_S) as hb, pytest.raises(asyncio.CancelledError):
        asyncio.run(hang_until_cancelled(hb))
    assert hb.lost is not None and "cancelled" in hb.lost
    assert time.monotonic() - started < 30
    store.close()


def test_a_cancel_without_now_keeps_the_lease_and_only_tells_the_attempt(redis_url: str) -> None:
    """Issue 25 item 4: a cancel asked without now is told by the renewal; the lease holds and the
    attempt's task is not cancelled (its driver stops at the next boundary)."""
    app = fleet_app(redis_url, lease_ttl_s=TTL_S)
    store = app.store()
    run_id = create_run(store, "g", 1)
    ctx = claim(app, store, run_id).context()
    store.cancel(run_id)

    async def until_told(hb: Heartbeat) -> None:
        while not hb.cancel_asked.is_set():
            await asyncio.sleep(0.02)

    with Heartbeat(store, ctx, lease_ttl_s=TTL_S) as hb:
        asyncio.run(asyncio.wait_for(until_told(hb), 30))
        assert hb.lost is None
    assert store.get(run_id).status is Status.RUNNING
    store.close()


def test_cancels_the_attempt_when_redis_stays_unreachable_for_a_ttl(private_redis: RedisFactory) -> None:
    """With Redis gone, renewals fail; after a whole TTL without one the heartbeat gives the attempt up."""
    server = private_redis()
    app = fleet_app(server.url, lease_ttl_s=TTL_S)
    store: RedisStore = app.store()
    run_id = create_run(store, "g", 1)
    ctx = claim(app, store, run_id).context()
    server.kill()
    with Heartbeat(store, ctx, lease_ttl_s=TTL_S) as hb, pytest.raises(asyncio.CancelledError):
        asyncio.run(hang_until_cancelled(hb))
    assert hb.lost is not None and "unreachable" in hb.lost
    store.close()


def test_a_renewal_that_lands_after_the_attempts_own_outcome_is_no_lost_lease(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A renewal in flight as the attempt's outcome is written finds the lease given back by the
    attempt itself: no lost lease, no warning, no cancel (issue 32: under a full Redis the renewals
    retry every second, so one often landed just after the success and warned "lease lost")."""
    app = fleet_app(redis_url, lease_ttl_s=TTL_S)
    store = app.store()
    run_id = create_run(store, "g", 1)
    ctx = claim(app, store, run_id).context()
    in_flight, outcome_written = threading.Event(), threading.Event()

    class HeldRenewal:
        """The real store's renewal, held on its way until the outcome is written."""

        def renew_lease(self, run_id: str, token: str, *, lease_ttl_ms: int) -> Lease:
            in_flight.set()
            outcome_written.wait(20)
            return store.renew_lease(run_id, token, lease_ttl_ms=lease_ttl_ms)

    async def attempt(hb: Heartbeat) -> str:
        task = asyncio.current_task()
        assert task is not None
        hb.bind(asyncio.get_running_loop(), task)
        assert await asyncio.to_thread(in_flight.wait, 20), "a renewal to be in flight"
        hb.ending()
        outcome = store.release(ctx)  # the outcome's write: it gives the lease back
        outcome_written.set()
        await asyncio.to_thread(hb.stop)  # returns once the renewal in flight has landed
        for _ in range(3):
            await asyncio.sleep(0)  # a cancel asked from the heartbeat thread would land here
        return outcome

    with (
        caplog.at_level(logging.WARNING, logger=heartbeat.__name__),
        Heartbeat(HeldRenewal(), ctx, lease_ttl_s=TTL_S) as hb,
    ):
        assert asyncio.run(attempt(hb)) == "released"
    assert hb.lost is None
    assert "lease lost" not in caplog.text
    store.close()


def test_one_thread_renews_every_attempt_of_a_process(redis_url: str) -> None:
    """Two attempts in one process: both leases are renewed, by the process's one heartbeat thread."""

    app = fleet_app(redis_url, lease_ttl_s=TTL_S)
    store = app.store()
    ctxs = [claim(app, store, create_run(store, "g", i)).context() for i in range(2)]
    firsts = [store.client.zscore(keys.leases(keys.STANDALONE.of(c.run_id)), c.run_id) or 0 for c in ctxs]
    before = {t.name for t in threading.enumerate()}
    with Heartbeat(store, ctxs[0], lease_ttl_s=TTL_S), Heartbeat(store, ctxs[1], lease_ttl_s=TTL_S):
        for ctx, first in zip(ctxs, firsts, strict=True):
            wait_for(
                lambda c=ctx, f=first: (
                    (store.client.zscore(keys.leases(keys.STANDALONE.of(c.run_id)), c.run_id) or 0)
                    > f + 2 * TTL_S * 1000
                ),
                20,
                "renewals of both leases",
            )
        started = {t.name for t in threading.enumerate()} - before
        assert started <= {"reflexr-heartbeat"}, started
    store.close()


def test_a_heartbeat_due_after_the_next_wake_does_not_wake_the_thread(redis_url: str) -> None:
    """Issue 18: back-to-back attempts wake the heartbeat thread once per interval, not once each
    (a wake costs the attempt starting a thread switch). A renewal due after the thread's next wake
    does not wake it; one due before does."""
    store = fleet_app(redis_url, lease_ttl_s=TTL_S).store()
    beater = heartbeat._Beater()  # a thread of the test's own: no other test's due times in it
    beats = [
        Heartbeat(store, AttemptContext(f"r{i}", "t", 1, 1, "k", "g"), lease_ttl_s=600.0) for i in range(7)
    ]
    assert beater.watch(beats[0], 100.0), "an idle thread is woken for its first renewal"
    wait_for(lambda: math.isfinite(beater._wake_at), 20, "the thread to wait for that renewal")
    for later in beats[1:6]:  # each attempt starts and ends while the thread waits for beats[0]
        assert not beater.watch(later, 200.0), "a renewal due later does not wake the thread"
        beater.unwatch(later, timeout=0)
    assert beater.watch(beats[6], 50.0), "a renewal due first wakes the thread to wait for it instead"
    soon = time.monotonic() + 60
    wait_for(lambda: -math.inf < beater._wake_at < soon, 20, "the thread to wait for the earlier renewal")
    for beat in (beats[0], beats[6]):
        beater.unwatch(beat, timeout=0)
    store.close()
