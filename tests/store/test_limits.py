"""Issue 13 in the store: one atomic script takes a limit's rate token (GCRA) and concurrency slot, fenced
by the attempt's token; slots are leases that lapse when nobody renews them. Time is the fake clock."""

from __future__ import annotations

import pytest
import redis

from reflexr_graph import errors
from reflexr_graph.core.limits import LimitRequest, parse_rate
from reflexr_graph.core.port import AttemptContext
from reflexr_graph.store import RedisStore, keys
from tests.store.support import FakeClock, make_run, start

pytestmark = pytest.mark.timeout(30)

SLOT_TTL_MS = 3_000
RESERVE_MS = 5_000


def request(key: str, member: str = "", *, rate: str | None = None, burst: int = 1, concurrency: int = 0,
            waited_ms: int = 0) -> LimitRequest:  # fmt: skip
    emission = parse_rate(rate) if rate else 0.0
    member = member or f"m-{key}"
    return LimitRequest(key, emission, burst, concurrency, member, "work", waited_ms, rate, RESERVE_MS)


def acquire(store: RedisStore, ctx: AttemptContext, req: LimitRequest) -> tuple[bool, int, int]:
    grant = store.acquire_limit(ctx, req, slot_ttl_ms=SLOT_TTL_MS)
    return grant.ok, grant.wait_ms, grant.retry_after_ms


def test_a_rate_reserves_tokens_one_interval_apart_and_refuses_beyond_the_reserve(
    store: RedisStore, fake_clock: FakeClock
) -> None:
    make_run(store)
    ctx = start(store)
    # 20/s: one token every 50 ms, and 5 s of reserve: calls 0..100 at once get a start time each.
    granted = [acquire(store, ctx, request("api", rate="20/s")) for _ in range(101)]
    assert all(ok for ok, _, _ in granted)
    assert [wait for _, wait, _ in granted] == [50 * i for i in range(101)], "one interval apart, in order"
    refused = acquire(store, ctx, request("api", rate="20/s"))
    assert refused == (False, 0, 5_050), "beyond the reserve: refused, and told when a token comes"
    fake_clock.advance(1_000)
    assert acquire(store, ctx, request("api", rate="20/s")) == (True, 4_050, 0), "the refusal spent nothing"


def test_a_burst_lets_that_many_start_at_once_then_spaces_the_rest(store: RedisStore) -> None:
    make_run(store)
    ctx = start(store)
    waits = [acquire(store, ctx, request("ocr", rate="10/s", burst=3))[1] for _ in range(6)]
    assert waits == [0, 0, 0, 100, 200, 300]


def test_concurrency_slots_are_counted_released_and_lapse_when_not_renewed(
    store: RedisStore, raw: redis.Redis, fake_clock: FakeClock
) -> None:
    make_run(store)
    ctx = start(store)
    got = [acquire(store, ctx, request("crm", f"s{i}", concurrency=2))[0] for i in range(3)]
    assert got == [True, True, False]
    store.release_slot("crm", "s0")
    assert acquire(store, ctx, request("crm", "s3", concurrency=2))[0] is True
    # s1 is renewed, s3 is not: only s3 lapses one slot TTL later.
    fake_clock.advance(SLOT_TTL_MS - 1_000)
    store.renew_slots({"s1": "crm"}, slot_ttl_ms=SLOT_TTL_MS)
    fake_clock.advance(1_001)
    assert acquire(store, ctx, request("crm", "s4", concurrency=2))[0] is True
    assert sorted(m.decode() for m in raw.zrange(keys.limit_slots("crm"), 0, -1)) == ["s1", "s4"]
    # A lapsed slot is not brought back by a late renewal: another step may hold it now.
    store.renew_slots({"s3": "crm"}, slot_ttl_ms=SLOT_TTL_MS)
    assert raw.zscore(keys.limit_slots("crm"), "s3") is None


def test_no_slot_means_no_token_spent(store: RedisStore) -> None:
    make_run(store)
    ctx = start(store)
    assert acquire(store, ctx, request("both", "a", rate="1/s", concurrency=1))[:2] == (True, 0)
    assert acquire(store, ctx, request("both", "b", rate="1/s", concurrency=1))[0] is False
    store.release_slot("both", "a")
    # The refused call spent nothing: the next token is one interval after the first, not two.
    assert acquire(store, ctx, request("both", "c", rate="1/s", concurrency=1))[:2] == (True, 1_000)


def test_keys_are_separate_budgets(store: RedisStore) -> None:
    make_run(store)
    ctx = start(store)
    for tenant in ("crm:acme", "crm:globex"):
        assert acquire(store, ctx, request(tenant, f"{tenant}-1", concurrency=1))[0] is True
        assert acquire(store, ctx, request(tenant, f"{tenant}-2", concurrency=1))[0] is False
    usage = {u.key: u for u in store.limit_usage()}
    assert {k: (u.in_use, u.granted, u.denied, u.concurrency) for k, u in usage.items()} == {
        "crm:acme": (1, 1, 1, 1),
        "crm:globex": (1, 1, 1, 1),
    }


def test_a_stale_attempt_spends_nothing_and_a_wait_is_recorded_on_the_run(store: RedisStore) -> None:
    make_run(store)
    stale = start(store)
    store.release(stale)
    with pytest.raises(errors.FencedOut):
        acquire(store, stale, request("api", rate="1/s"))
    assert store.limit_usage() == []
    ctx = start(store)
    assert acquire(store, ctx, request("api", rate="1/s", waited_ms=1_500))[0] is True
    info = store.get("run-1")
    assert (info.limit_waits, info.limit_wait_s) == (1, 1.5)
    waited = [e for e in store.events("run-1") if e.type == "limit_waited"]
    assert [(e.fields["key"], e.fields["node"], e.fields["waited_ms"]) for e in waited] == [
        ("api", "work", "1500")
    ]


def release_for(store: RedisStore, ctx: AttemptContext, key: str, *, waited_ms: int, wake_at_ms: int) -> None:
    """The step gave up waiting in place for ``key`` after ``waited_ms``: the run is released."""
    result = store.wait(
        ctx, field=f"l|work|r0|{waited_ms}", signal=f"limit:{key}", wake_at_ms=wake_at_ms, waited_ms=waited_ms
    )
    assert result.record is None, "released as waiting"


def test_a_wait_that_releases_the_run_is_counted_once_from_its_start_through_every_release(
    store: RedisStore, fake_clock: FakeClock
) -> None:
    make_run(store)
    # 1 s in place, released for 3 s; woken, 0.5 s in place again, released for 1.5 s; then granted.
    release_for(store, start(store), "api", waited_ms=1_000, wake_at_ms=fake_clock.ms + 3_000)
    fake_clock.advance(3_000)
    ctx = start(store)
    fake_clock.advance(500)
    release_for(store, ctx, "api", waited_ms=500, wake_at_ms=fake_clock.ms + 1_500)
    fake_clock.advance(1_500)
    ctx = start(store)
    other = acquire(store, ctx, request("other", rate="1/s"))
    assert other[:2] == (True, 0) and store.get("run-1").limit_waits == 0, "another key's grant ends no wait"
    assert acquire(store, ctx, request("api", rate="1/s"))[:2] == (True, 0)
    info = store.get("run-1")
    assert (info.limit_waits, info.limit_wait_s) == (1, 6.0), "1 + 3 + 0.5 + 1.5 s: one step's wait"
    waited = [e.fields for e in store.events("run-1") if e.type == "limit_waited"]
    assert [(f["key"], f["waited_ms"]) for f in waited] == [("api", "6000")]
    fake_clock.advance(1_000)
    assert acquire(store, ctx, request("api", rate="1/s"))[:2] == (True, 0)
    assert store.get("run-1").limit_waits == 1, "the next grant without a wait counts nothing"
