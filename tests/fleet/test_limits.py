"""Issue 13 with real workers: fleet-wide concurrency and rate limits, slots that are leases, budgets per
key, and a long wait that releases the run as waiting instead of holding a worker."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from reflexr_graph import clock
from reflexr_graph.client import Client
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from tests.fleet import limit_graphs
from tests.fleet.conftest import Fleet, assert_consistent, events
from tests.fleet.limit_graphs import gate_key, peak_key
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

GRAPHS = {"REFLEXR_GRAPHS": limit_graphs.REFS}
CLOCK_SLACK_MS = 20
"""Steps read the wall clock, asyncio sleeps on the monotonic one: they may disagree by a few ms."""


def live_slots(r: redis.Redis, key: str) -> int:
    """Slots of ``key`` whose lease has not lapsed (a lapsed one is swept by the next acquisition)."""
    return int(r.zcount(keys.limit_slots(key), f"({clock.now_ms()}", "+inf"))


def stats(r: redis.Redis, key: str) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in r.hgetall(keys.limit_stats(key)).items()}


@pytest.mark.slow
def test_a_concurrency_of_5_holds_across_2_workers_of_2_processes(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start(2, **GRAPHS)
    fleet.start(2, **GRAPHS)
    client = client_for(fleet)
    # Four runs of a 10-branch map: 40 branches that reach every process of the fleet at once.
    runs = [client.enqueue("conc", {"items": 10, "sleep_s": 0.15}, state={"tag": "c5"}) for _ in range(4)]
    for run_id in runs:
        done = client.wait(run_id, timeout=90)
        assert (done.status, done.output, done.attempts) == (Status.SUCCEEDED, 10, 1), done
    assert int(redis_client.get(peak_key("conc:c5")) or 0) <= 5, "never more than 5 at once, fleet-wide"
    assert len(set(redis_client.lrange("pids:conc:c5", 0, -1))) >= 2, "the branches ran in several processes"
    counted = stats(redis_client, "conc:c5")
    assert counted["granted"] == 40 and counted["denied"] > 0, counted
    assert redis_client.zcard(keys.limit_slots("conc:c5")) == 0, "every slot was given back"
    waited = [e for run_id in runs for e in events(client.store, run_id, "limit_waited")]
    assert waited and all(e.fields["key"] == "conc:c5" and e.fields["node"] == "work" for e in waited)
    assert sum(client.get(run_id).limit_waits for run_id in runs) == len(waited)


def test_a_rate_of_20_per_second_spaces_60_calls_and_never_bursts(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start(2, **GRAPHS)
    client = client_for(fleet)
    enqueued_ms = clock.now_ms()
    runs = [client.enqueue("rated", {"items": 30}, state={"tag": "r20"}) for _ in range(2)]
    for run_id in runs:
        assert client.wait(run_id, timeout=60).status is Status.SUCCEEDED
    starts = sorted(int(t) for t in redis_client.lrange("starts:rate:r20", 0, -1))
    assert len(starts) == 60
    assert stats(redis_client, "rate:r20")["granted"] == 60
    # One token each 50 ms and a bucket of 1: the k-th start comes k intervals after the first grant
    # at the earliest, which was after the enqueue. A slow machine only makes starts later, so this
    # cannot fail by slowness; a burst past the bucket breaks it. (The ms allow for the two clocks.)
    early = [(k, t - enqueued_ms) for k, t in enumerate(starts) if t < enqueued_ms + 50 * k - CLOCK_SLACK_MS]
    assert not early, f"starts before their token (k, ms after enqueue): {early}"
    assert starts[-1] - enqueued_ms >= 59 * 50 - CLOCK_SLACK_MS, "60 starts at 20/s take about 3 s"


@pytest.mark.slow
def test_slots_of_a_killed_worker_come_back_within_a_lease_ttl(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    doomed = fleet.start(1, **GRAPHS)
    client = client_for(fleet)
    holder = client.enqueue("slots3", {"items": 3, "gated": True}, state={"tag": "k3"})
    wait_for(lambda: live_slots(redis_client, "conc:k3") == 3, 30, "the holder to take all 3 slots")
    slots, ttl = keys.limit_slots("conc:k3"), fleet.settings().lease_ttl_s
    taken = dict(redis_client.zrange(slots, 0, -1, withscores=True))

    def renewed() -> bool:
        return all((redis_client.zscore(slots, m) or 0) > score for m, score in taken.items())

    wait_for(renewed, 2 * ttl, "the heartbeat to renew the 3 slots it holds")
    fleet.start(1, **GRAPHS)
    waiter = client.enqueue("slots3", {"items": 2}, state={"tag": "k3"})
    wait_for(lambda: stats(redis_client, "conc:k3").get("denied", 0) > 0, 30, "the waiter to be refused")
    doomed.kill_group()
    # The killed steps never left the detector: count afresh (no step can enter before a slot lapses).
    redis_client.delete("active:conc:k3", peak_key("conc:k3"))

    def lapsed() -> bool:
        now = clock.now_ms()
        return all((redis_client.zscore(slots, m) or 0) <= now for m in taken)

    # One lease TTL after their last renewal, and the heartbeat renewed them every TTL/3.
    wait_for(lapsed, ttl + 1, "the dead worker's 3 slots to lapse")
    # The reaper recovers the holder as its lease lapses, at the same moment: its new attempt may
    # take the freed slots before the waiter, and would hold them at the gate, so the gate opens
    # now that the lapse is seen (not after the waiter, which would then wait for the holder).
    redis_client.set(gate_key(holder), 1)
    assert client.wait(waiter, timeout=30).status is Status.SUCCEEDED, "the waiting branches proceeded"
    done = client.wait(holder, timeout=60)
    assert done.status is Status.SUCCEEDED and done.output == 3, done
    assert redis_client.zcard(keys.limit_slots("conc:k3")) == 0, "given back, or swept once lapsed"
    assert int(redis_client.get(peak_key("conc:k3")) or 0) <= 3


def test_two_tenants_each_get_their_own_budget(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start(2, **GRAPHS)
    client = client_for(fleet)
    acme = client.enqueue("conc", {"items": 7, "gated": True}, state={"tag": "acme"})
    wait_for(lambda: live_slots(redis_client, "conc:acme") == 5, 30, "acme to fill its 5 slots")
    globex = client.enqueue("conc", {"items": 3, "gated": True}, state={"tag": "globex"})
    # acme is full and waits; globex, on another key, is not held back by it.
    wait_for(lambda: live_slots(redis_client, "conc:globex") == 3, 30, "globex to take 3 slots of its own")
    assert live_slots(redis_client, "conc:acme") == 5 and stats(redis_client, "conc:acme")["denied"] > 0
    usage = {u.key: u for u in client.store.limit_usage()}
    assert (usage["conc:acme"].in_use, usage["conc:globex"].in_use, usage["conc:acme"].concurrency) == (
        5,
        3,
        5,
    )
    for run_id in (acme, globex):
        redis_client.set(gate_key(run_id), 1)
    assert [client.wait(run_id, timeout=60).output for run_id in (acme, globex)] == [7, 3]


@pytest.mark.slow
def test_a_long_wait_releases_the_run_and_its_worker_until_its_token_is_due(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start(1, **GRAPHS)
    client = client_for(fleet)
    first = client.enqueue("trickle", 1, state={"tag": "tr"})
    assert client.wait(first, timeout=30).status is Status.SUCCEEDED
    second = client.enqueue("trickle", 2, state={"tag": "tr"})
    wait_for(lambda: client.get(second).status is Status.WAITING, 30, "the second run to be released")
    info = client.get(second)
    assert info.waiting_for == "limit:trickle:tr" and info.wake_at is not None and info.attempts == 0
    assert redis_client.zscore(keys.leases(keys.STANDALONE.of(second)), second) is None, (
        "it holds no lease while it waits"
    )
    assert redis_client.zscore(keys.due(keys.STANDALONE.of(second)), second) is not None, (
        "its wake time is on the due set"
    )
    # The worker's one process is free meanwhile: a run of another graph does not wait behind it.
    other = client.enqueue("conc", {"items": 1}, state={"tag": "other"})
    assert client.wait(other, timeout=30).status is Status.SUCCEEDED
    assert client.get(second).status is Status.WAITING
    done = client.wait(second, timeout=30)
    assert (done.status, done.output, done.attempts) == (Status.SUCCEEDED, 2, 1), done
    found = events(client.store, second)
    kinds = [e.type for e in found]
    assert kinds.index("run_waiting") < kinds.index("run_succeeded")
    # The released wait is counted, once, from before the release to after the wake (issue 25).
    at = kinds.index("run_waiting")
    released, woken = found[at].at, found[kinds.index("attempt_started", at)].at
    assert done.limit_waits == 1 and done.limit_wait_s >= woken - released, done
    assert [e.fields["key"] for e in found if e.type == "limit_waited"] == ["trickle:tr"]
    assert_consistent(redis_client, second)
