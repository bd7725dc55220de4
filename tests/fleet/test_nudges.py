"""fleet/nudges.py: the subscription that ends a loop's sleep early, on a real redis-server, and
what it does when Redis drops it (the reaper's and the scheduler's loops both wait on one)."""

from __future__ import annotations

import threading

import redis

from reflexr_graph.fleet.nudges import Nudges
from reflexr_graph.store import RedisStore, keys
from tests.waiting import wait_for

CHANNEL = keys.REAPER_NUDGE


def _subscribers(r: redis.Redis) -> int:
    return int(dict(r.pubsub_numsub(CHANNEL)).get(CHANNEL.encode(), 0))


def _drop_subscribers(r: redis.Redis) -> None:
    """Close every subscribed connection from the server's side, as a restart would."""
    r.client_kill_filter(_type="pubsub")
    wait_for(lambda: _subscribers(r) == 0, 10, "the subscriptions to drop")


def test_a_nudge_ends_the_wait_and_a_burst_of_them_wakes_it_once(
    redis_url: str, redis_client: redis.Redis
) -> None:
    store = RedisStore.from_url(redis_url)
    nudges = Nudges(store.reaper_nudges, threading.Event(), fresh_is_nudge=False)
    try:
        nudges.open()
        assert _subscribers(redis_client) == 1
        for _ in range(5):
            store.nudge_reaper()
        # A wait may also end on the subscription's own confirmations (redis-py hands back None
        # for them); the loop then waits again, as this does.
        wait_for(lambda: nudges.wait(0.5), 10, "the nudge")
        assert not any(nudges.wait(0.05) for _ in range(5))  # the burst was answered by one wake
    finally:
        nudges.close()
        store.close()


def test_a_subscription_redis_dropped_is_made_again_on_the_next_wait(
    redis_url: str, redis_client: redis.Redis
) -> None:
    store = RedisStore.from_url(redis_url)
    reread, planned = (
        Nudges(store.reaper_nudges, threading.Event(), fresh_is_nudge=fresh) for fresh in (True, False)
    )
    try:
        reread.open()
        planned.open()
        _drop_subscribers(redis_client)
        # A loop whose nudges say "read again" reads once it has subscribed again: a nudge sent
        # while it had no subscription is lost.
        wait_for(lambda: reread.wait(0.05), 10, "the new subscription to count as a nudge")
        # The other subscribes again on a wait, and is woken by what is published after.
        wait_for(lambda: planned.wait(0.05) or _subscribers(redis_client) == 2, 10, "its new subscription")
        store.nudge_reaper()
        wait_for(lambda: planned.wait(0.5), 10, "the nudge after the drop")
        wait_for(lambda: reread.wait(0.5), 10, "the nudge after the drop")
    finally:
        reread.close()
        planned.close()
        store.close()
