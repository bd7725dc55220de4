"""The overview's last hour, read from the store's indexes and the retries rollup."""

from __future__ import annotations

import redis

from reflexr_graph import clock
from reflexr_graph.store import RedisStore, keys
from reflexr_graph.store.activity import _wait_reason, activity, percentile
from tests.store.support import FakeClock, fail_once, make_run, new_token, start

MINUTE_MS = 60_000


def _activity(store: RedisStore, minutes: int = 60):  # type: ignore[no-untyped-def]
    return store.do(activity(clock.now_ms(), minutes))


def test_the_hour_counts_runs_started_succeeded_dead_and_retried_per_minute(
    store: RedisStore, fake_clock: FakeClock
) -> None:
    make_run(store, "ok")
    fail_once(store, start(store, "ok"))  # a retry, due at once
    fake_clock.advance(5_000)
    store.succeed(start(store, "ok"), '"done"')
    fake_clock.advance(2 * MINUTE_MS)
    make_run(store, "bad")
    fail_once(store, start(store, "bad"), permanent=True)
    make_run(store, "held")
    store.wait(start(store, "held"), field="w|a|-|d1|go|0", signal="go", wake_at_ms=None)
    make_run(store, "nap")
    store.wait(start(store, "nap"), field="w|b|-|d1||0", signal="", wake_at_ms=clock.now_ms() + 60_000)

    seen = _activity(store, minutes=5)
    assert seen.minutes == 5 and len(seen.started) == 5
    assert seen.started == [0, 0, 1, 0, 3], "'ok' two minutes before the others"
    assert seen.retried == [0, 0, 1, 0, 0]
    assert seen.succeeded == [0, 0, 1, 0, 0]
    assert seen.dead == [0, 0, 0, 0, 1]
    assert seen.dead_by_reason == {"step_failed": [0, 0, 0, 0, 1]}
    assert seen.durations["demo"].runs == 1 and seen.durations["demo"].p50_s == 5.0
    assert seen.waiting == {"signal": 1, "timer": 1, "limit": 0, "worker": 0, "version": 0, "children": 0}


def test_a_run_held_for_its_graph_version_waits_for_a_version_not_a_signal() -> None:
    assert _wait_reason("waiting", "version:v1", "") == "version"
    assert _wait_reason("waiting", "child:c1", "") == "children"
    assert _wait_reason("waiting", "children:3", "") == "children"
    assert _wait_reason("waiting", "limit:conc:k", "") == "limit"
    assert _wait_reason("waiting", "approval", "") == "signal"
    assert _wait_reason("waiting", "", "") == "timer"
    assert _wait_reason("queued", "", "1796000000000") == "worker"


def test_the_retries_rollup_keeps_an_hour_and_costs_a_run_that_never_retries_nothing(
    store: RedisStore, raw: redis.Redis, fake_clock: FakeClock
) -> None:
    make_run(store, "first")
    fail_once(store, start(store, "first"))
    assert raw.zcard(keys.retries(0)) == 1
    fake_clock.advance(61 * MINUTE_MS)
    make_run(store, "later")
    fail_once(store, start(store, "later"))
    assert [m.decode() for m in raw.zrange(keys.retries(0), 0, -1)] == ["later|1"], "the older one dropped"
    make_run(store, "clean")
    store.succeed(start(store, "clean"), '"ok"')
    assert raw.zcard(keys.retries(0)) == 1
    claim = store.claim("later", new_token(), lease_ttl_ms=30_000)
    assert claim.claimed


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.95)) == (50.0, 95.0)
    assert percentile([3.0], 0.95) == 3.0
