"""Step limits with the store on a real 3-primary Redis Cluster: a grant is a script on the limit's slot
and then one on the run's (store/limits.py), with its slots given back apart from the run's writes."""

from __future__ import annotations

import os
import signal

import pytest
import redis

from reflexr_graph import clock, errors
from reflexr_graph.client import Client
from reflexr_graph.core.limits import LimitRequest
from reflexr_graph.core.port import Boundary, Record
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from reflexr_graph.store.redis_store import RedisStore
from tests.fleet import limit_graphs
from tests.fleet.conftest import Fleet
from tests.fleet.limit_graphs import gate_key, peak_key
from tests.store.support import FakeClock, make_run, start
from tests.waiting import wait_for

SLOT_TTL_MS = 3_000


def slots(member: str, concurrency: int = 2, *, key: str = "crm", waited_ms: int = 0) -> LimitRequest:
    return LimitRequest(key, 0.0, 1, concurrency, member, "work", waited_ms)


def stats(r: redis.RedisCluster, key: str) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in r.hgetall(keys.limit_stats(key)).items()}


def test_slots_are_granted_refused_and_given_back_with_the_steps_next_write(
    store: RedisStore, cluster_client: redis.RedisCluster, fake_clock: FakeClock
) -> None:
    ctx = start(store, make_run(store, "lim-1"))
    assert [store.acquire_limit(ctx, slots(m), slot_ttl_ms=SLOT_TTL_MS).ok for m in ("a", "b", "c")] == [
        True,
        True,
        False,
    ]
    assert [(u.key, u.in_use, u.concurrency) for u in store.limit_usage()] == [("crm", 2, 2)]
    store.save_record(ctx, Record("s|work|r0", '"x"'), returning=[("crm", "a")])
    store.save_checkpoint(ctx, Boundary("{}", seq=1, next_node="n"), returning=[("crm", "b")])
    assert cluster_client.zcard(keys.limit_slots("crm")) == 0, "each write gave its step's slot back"
    assert store.load_records("lim-1") == {} and store.load_checkpoint("lim-1") == "{}"


def test_a_retried_grant_takes_its_slot_once_and_a_fenced_one_gives_it_back(
    store: RedisStore, cluster_client: redis.RedisCluster, fake_clock: FakeClock
) -> None:
    ctx = start(store, make_run(store, "lim-2"))
    # The reply of the first call was lost, say: the call comes again, with the same acquisition.
    assert store.acquire_limit(ctx, slots("same", 1), slot_ttl_ms=SLOT_TTL_MS).ok
    assert store.acquire_limit(ctx, slots("same", 1), slot_ttl_ms=SLOT_TTL_MS).ok, "its own grant, again"
    assert cluster_client.zcard(keys.limit_slots("crm")) == 1 and stats(cluster_client, "crm")["granted"] == 1
    assert not store.acquire_limit(ctx, slots("other", 1), slot_ttl_ms=SLOT_TTL_MS).ok, (
        "the one slot is taken"
    )
    store.release_slot("crm", "same")
    stale = ctx
    store.release(stale)
    with pytest.raises(errors.FencedOut):
        store.acquire_limit(stale, slots("stale", 1), slot_ttl_ms=SLOT_TTL_MS)
    assert cluster_client.zcard(keys.limit_slots("crm")) == 0, "a fenced attempt's slot went back at once"


def test_a_slot_whose_holder_stopped_renewing_it_lapses_within_its_ttl(
    store: RedisStore, fake_clock: FakeClock
) -> None:
    """A holder that died between the two halves of its grant, or after: nothing renews its slot."""
    held = start(store, make_run(store, "lim-3"))
    waiter = start(store, make_run(store, "lim-4"))
    assert store.acquire_limit(held, slots("dead", 1), slot_ttl_ms=SLOT_TTL_MS).ok
    assert not store.acquire_limit(waiter, slots("w", 1), slot_ttl_ms=SLOT_TTL_MS).ok
    fake_clock.advance(SLOT_TTL_MS + 1)
    assert store.acquire_limit(waiter, slots("w", 1), slot_ttl_ms=SLOT_TTL_MS).ok


def test_a_wait_is_counted_on_the_run_and_the_limit_once(
    store: RedisStore, cluster_client: redis.RedisCluster, fake_clock: FakeClock
) -> None:
    ctx = start(store, make_run(store, "lim-5"))
    for _ in range(2):  # the second call: a retry whose first reply was lost
        assert store.acquire_limit(ctx, slots("m", waited_ms=1_500), slot_ttl_ms=SLOT_TTL_MS).ok
    info = store.get("lim-5")
    assert (info.limit_waits, info.limit_wait_s) == (1, 1.5)
    assert [e.fields["waited_ms"] for e in store.events("lim-5") if e.type == "limit_waited"] == ["1500"]
    assert stats(cluster_client, "crm")["waited_ms"] == 1_500


def test_a_wait_through_a_release_is_counted_from_its_start_on_the_run_and_the_limit(
    store: RedisStore, cluster_client: redis.RedisCluster, fake_clock: FakeClock
) -> None:
    """The run's half knows when the wait began (the run's hash); the limit's half adds the rest."""
    run_id = make_run(store, "lim-6")
    released = store.wait(
        start(store, run_id), field="l|work|r0|1000", signal="limit:crm", wake_at_ms=fake_clock.ms + 3_000,
        waited_ms=1_000,
    )  # fmt: skip
    assert released.record is None, "released as waiting"
    fake_clock.advance(3_000)
    assert store.acquire_limit(start(store, run_id), slots("m"), slot_ttl_ms=SLOT_TTL_MS).ok
    info = store.get(run_id)
    assert (info.limit_waits, info.limit_wait_s) == (1, 4.0), "1 s in place, then 3 s released"
    assert stats(cluster_client, "crm")["waited_ms"] == 4_000


GRAPHS = {"REFLEXR_GRAPHS": limit_graphs.REFS}


def live_slots(r: redis.RedisCluster, key: str) -> int:
    return int(r.zcount(keys.limit_slots(key), f"({clock.now_ms()}", "+inf"))


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_limit_of_2_over_6_runs_on_3_processes_never_has_3_steps_inside(
    cluster_fleet: Fleet,
    cluster_client_for: Client,
    redis_client: redis.Redis,
    cluster_client: redis.RedisCluster,
) -> None:
    """The steps count themselves in and out on the broker's Redis (limit_graphs.detected)."""
    cluster_fleet.start(3, **GRAPHS)
    client = cluster_client_for
    runs = [client.enqueue("slots2", {"items": 1, "sleep_s": 0.2}, state={"tag": "c2"}) for _ in range(6)]
    assert len({keys.shard_of(r) for r in runs}) > 1, "the runs span shards"
    for run_id in runs:
        done = client.wait(run_id, timeout=90)
        assert (done.status, done.output) == (Status.SUCCEEDED, 1), done
    assert int(redis_client.get(peak_key("conc:c2")) or 0) <= 2, "never more than two at once, fleet-wide"
    assert len(set(redis_client.lrange("pids:conc:c2", 0, -1))) >= 2, "the steps ran in several processes"
    assert stats(cluster_client, "conc:c2")["granted"] == 6
    assert cluster_client.zcard(keys.limit_slots("conc:c2")) == 0, "every slot was given back"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_slots_of_a_killed_holder_are_freed_within_a_lease_ttl(
    cluster_fleet: Fleet,
    cluster_client_for: Client,
    redis_client: redis.Redis,
    cluster_client: redis.RedisCluster,
) -> None:
    cluster_fleet.start(2, **GRAPHS)
    client = cluster_client_for
    holder = client.enqueue("slots2", {"items": 2, "gated": True}, state={"tag": "k2"})
    wait_for(lambda: live_slots(cluster_client, "conc:k2") == 2, 30, "the holder to take both slots")
    slots_key, ttl = keys.limit_slots("conc:k2"), cluster_fleet.settings().lease_ttl_s
    taken = dict(cluster_client.zrange(slots_key, 0, -1, withscores=True))

    def renewed() -> bool:
        return all((cluster_client.zscore(slots_key, m) or 0) > score for m, score in taken.items())

    wait_for(renewed, 2 * ttl, "the heartbeat to renew the 2 slots it holds (a pipeline over the slots)")
    waiter = client.enqueue("slots2", {"items": 1}, state={"tag": "k2"})
    wait_for(lambda: stats(cluster_client, "conc:k2").get("denied", 0) > 0, 30, "the waiter to be refused")
    os.kill(int(redis_client.lindex("pids:conc:k2", 0) or 0), signal.SIGKILL)  # the holder's pool child

    def lapsed() -> bool:
        now = clock.now_ms()
        return all((cluster_client.zscore(slots_key, m) or 0) <= now for m in taken)

    wait_for(lapsed, 2 * ttl, "the dead holder's 2 slots to lapse")
    # The holder's run is recovered as its lease lapses too: its gate opens now, as in tests/fleet.
    redis_client.set(gate_key(holder), 1)
    assert client.wait(waiter, timeout=60).status is Status.SUCCEEDED, "the waiter took a freed slot"
    assert client.wait(holder, timeout=60).output == 2
    assert cluster_client.zcard(keys.limit_slots("conc:k2")) == 0
