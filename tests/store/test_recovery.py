"""Leases, abandoned attempts, the reaper, the due set, soft-shutdown release and bad messages."""

from __future__ import annotations

import dataclasses

import pytest
import redis

from reflexr_graph import clock, errors
from reflexr_graph.core.port import Boundary
from reflexr_graph.model import Status
from reflexr_graph.store import ClaimOutcome, RedisStore, keys
from reflexr_graph.store.attempts import Lease
from reflexr_graph.store.contracts import Lock
from reflexr_graph.store.recovery import TICK_BATCH
from tests.redis_server import RedisFactory
from tests.store.conftest import DEAD_RETENTION_S
from tests.store.support import LEASE_MS, FakeClock, fail_once, make_run, new_token, start


def test_claim_is_busy_while_another_lease_is_live(store: RedisStore, fake_clock: FakeClock) -> None:
    """A claim while another attempt holds an unexpired lease answers busy and changes nothing."""
    make_run(store)
    owner = start(store, lease_ms=10_000)
    fake_clock.advance(9_999)
    before = store.events("run-1")
    claim = store.claim("run-1", new_token(), lease_ttl_ms=LEASE_MS)
    assert claim.outcome is ClaimOutcome.BUSY
    assert store.get("run-1").attempts == 1
    assert store.events("run-1") == before
    store.save_checkpoint(owner, Boundary("{}", seq=1, next_node=None))  # the owner is untouched


def test_claim_over_a_lapsed_lease_leaves_recovery_to_the_reaper(
    store: RedisStore, fake_clock: FakeClock
) -> None:
    """A claim over a lapsed, not yet reaped lease answers busy and changes nothing: only the reaper
    knows whether the lease lapsed in a Redis outage (an interruption) or with its worker (a counted
    attempt). Once reaped (abandoned, counted as attempt 1), the run is claimed as attempt 2."""
    make_run(store)
    start(store, lease_ms=1_000)
    fake_clock.advance(1_000)  # lease score == now: lapsed
    before = store.events("run-1")
    assert store.claim("run-1", new_token(), lease_ttl_ms=LEASE_MS).outcome is ClaimOutcome.BUSY
    assert store.events("run-1") == before
    assert store.reap() == ["run-1"]
    claim = store.claim("run-1", new_token(), lease_ttl_ms=LEASE_MS)
    assert (claim.outcome, claim.attempt, claim.resume_seq) == (ClaimOutcome.CLAIMED, 2, 2)
    events = store.events("run-1")
    failed = [e for e in events if e.type == "attempt_failed"]
    assert [(e.fields["attempt"], e.fields["reason"]) for e in failed] == [("1", "abandoned")]
    assert [e.type for e in events][-3:] == ["attempt_failed", "run_retrying", "attempt_started"]


def test_reaping_the_last_attempt_dead_letters(
    store: RedisStore, raw: redis.Redis, fake_clock: FakeClock
) -> None:
    """A lapsed last attempt is dead-lettered by the reaper (reason abandoned), keeping the last error;
    a later claim finds it finished."""
    make_run(store, max_attempts=2, idempotency_key="idem-x")
    fail_once(store, start(store))
    start(store, lease_ms=1_000)  # attempt 2 of 2, then its worker dies
    fake_clock.advance(5_000)
    assert store.reap() == ["run-1"]
    claim = store.claim("run-1", new_token(), lease_ttl_ms=LEASE_MS)
    assert (claim.outcome, claim.status, claim.attempt) == (ClaimOutcome.FINISHED, "dead", 2)
    info = store.get("run-1")
    assert (info.status, info.reason, info.error) == (Status.DEAD, "abandoned", "ValueError: step broke")
    assert raw.zscore(keys.dead(keys.STANDALONE.of("run-1")), "run-1") is not None
    assert raw.zscore(keys.leases(keys.STANDALONE.of("run-1")), "run-1") is None
    assert 0 < raw.ttl(keys.run("run-1")) <= DEAD_RETENTION_S
    assert (
        0 < raw.ttl(keys.idem(keys.idem_scope("demo", "idem-x"))) <= DEAD_RETENTION_S
    )  # found without the caller's hint


def test_run_released_on_its_last_attempt_is_claimed_again(store: RedisStore) -> None:
    """A soft shutdown is not the run's failure: a run released on its last allowed attempt is claimed
    again, as attempt 2 of which 1 counts, instead of being dead-lettered as out of attempts."""
    make_run(store, max_attempts=1)
    assert store.release(start(store)) == "released"
    claim = store.claim("run-1", new_token(), lease_ttl_ms=LEASE_MS)
    assert (claim.outcome, claim.attempt, claim.counted) == (ClaimOutcome.CLAIMED, 2, 1)
    info = store.get("run-1")
    assert (info.status, info.attempts, info.interruptions) == (Status.RUNNING, 1, 1)


def test_reap_recovers_lapsed_leases_only(store: RedisStore, raw: redis.Redis, fake_clock: FakeClock) -> None:
    """reap() fails lapsed attempts as abandoned: retrying + due now, or dead when out of attempts."""
    make_run(store, "live")
    make_run(store, "lapsed")
    make_run(store, "last", max_attempts=1)
    start(store, "live", lease_ms=60_000)
    start(store, "lapsed", lease_ms=1_000)
    start(store, "last", lease_ms=1_000)
    fake_clock.advance(2_000)
    now = clock.now_ms()

    assert sorted(store.reap()) == ["lapsed", "last"]
    lapsed = store.get("lapsed")
    assert (lapsed.status, lapsed.reason, lapsed.attempts) == (Status.RETRYING, "abandoned", 1)
    assert raw.zscore(keys.due(keys.STANDALONE.of("lapsed")), "lapsed") == now
    assert store.get("last").status is Status.DEAD
    assert store.get("last").reason == "abandoned"
    assert store.get("live").status is Status.RUNNING
    assert [e.type for e in store.events("lapsed")][-2:] == ["attempt_failed", "run_retrying"]
    assert store.reap() == []  # nothing left to do: handled once


def test_reap_skips_a_lease_renewed_since_it_was_read(store: RedisStore, fake_clock: FakeClock) -> None:
    """The reap script re-checks the lease: a renewal after the scan wins, the run keeps running."""
    make_run(store)
    ctx = start(store, lease_ms=1_000)
    scan_time = clock.now_ms() + 1_000
    fake_clock.advance(900)
    assert store.renew_lease("run-1", ctx.token, lease_ttl_ms=10_000)
    assert store.reap(scan_time) == []  # scan time before the renewal's expiry: re-check says live
    assert store.get("run-1").status is Status.RUNNING


def test_a_renewal_that_lands_after_the_lease_lapsed_does_not_revive_it(
    store: RedisStore, fake_clock: FakeClock
) -> None:
    """A renewal sent before a Redis outage and landing after it finds the lease lapsed: it is
    refused, so the lapse stays where it happened (inside the outage) for the reaper to judge."""
    make_run(store)
    ctx = start(store, lease_ms=1_000)
    fake_clock.advance(1_001)
    assert store.renew_lease("run-1", ctx.token, lease_ttl_ms=10_000) is Lease.LOST
    reaped = store.reap()
    assert reaped == ["run-1"]


def test_reaped_attempt_is_fenced_out(store: RedisStore, fake_clock: FakeClock) -> None:
    """After the reaper took the run back, the hung attempt can neither renew nor write."""
    make_run(store)
    ctx = start(store, lease_ms=1_000)
    fake_clock.advance(1_001)
    store.reap()
    assert store.renew_lease("run-1", ctx.token, lease_ttl_ms=LEASE_MS) is Lease.LOST
    with pytest.raises(errors.FencedOut):
        store.save_checkpoint(ctx, Boundary("{}", seq=1, next_node=None))
    with pytest.raises(errors.FencedOut):
        store.succeed(ctx, "1")


def test_due_and_ack_due(store: RedisStore, raw: redis.Redis, fake_clock: FakeClock) -> None:
    """due() lists entries at or before now; ack_due removes one only if its score did not change."""
    make_run(store, "a", dispatch_grace_ms=1_000)
    make_run(store, "b", dispatch_grace_ms=5_000)
    assert store.due() == []
    fake_clock.advance(1_000)
    due = store.due()
    assert [run_id for run_id, _ in due] == ["a"]
    run_id, score = due[0]

    assert store.bump_due("a", 3_000) is True  # rescheduled after the read: the ack must not drop it
    assert store.ack_due(run_id, score) is False
    assert raw.zscore(keys.due(keys.STANDALONE.of("a")), "a") == clock.now_ms() + 3_000

    fake_clock.advance(5_000)
    rows = dict(store.due())
    assert set(rows) == {"a", "b"}
    assert store.ack_due("a", rows["a"]) is True
    assert store.ack_due("a", rows["a"]) is False  # already gone
    assert [r for r, _ in store.due()] == ["b"]
    assert store.bump_due("gone", 1_000) is False  # only existing entries move
    assert raw.zscore(keys.due(keys.STANDALONE.of("gone")), "gone") is None


def test_due_limit(store: RedisStore, fake_clock: FakeClock) -> None:
    """due(limit=n) returns at most n entries, earliest first."""
    for i in range(5):
        make_run(store, f"r{i}", dispatch_grace_ms=i)
    fake_clock.advance(10)
    assert [r for r, _ in store.due(limit=2)] == ["r0", "r1"]


def test_reaper_tick_names_the_first_due_time_after_the_runs_it_returns(
    store: RedisStore, raw: redis.Redis, fake_clock: FakeClock
) -> None:
    """The tick's reply carries the due score that follows the due runs it returns, in the same
    round trip, from the one read of the due set: the reaper sleeps until then, not a whole tick."""
    make_run(store, "a", dispatch_grace_ms=0)
    make_run(store, "b", dispatch_grace_ms=300)
    found = store.reaper_tick("reaper-a", 3_000)
    assert [r for r, _ in found.due] == ["a"]
    assert found.next_due == clock.now_ms() + 300
    assert store.reaper_tick("reaper-b", 3_000).next_due is None  # not the lock holder
    # A backlog larger than one pass: the next due entry is already due.
    raw.zadd(
        keys.due(keys.STANDALONE.of("a")), {f"r{i}": clock.now_ms() - 1000 + i for i in range(TICK_BATCH + 1)}
    )
    found = store.reaper_tick("reaper-a", 3_000)
    assert len(found.due) == TICK_BATCH
    assert found.next_due == clock.now_ms() - 1000 + TICK_BATCH
    # Only what falls due before the lock would lapse can shorten the reaper's sleep.
    raw.delete(keys.due(0))
    raw.zadd(keys.due(keys.STANDALONE.of("later")), {"later": clock.now_ms() + 3_001})
    assert store.reaper_tick("reaper-a", 3_000).next_due is None
    raw.zadd(keys.due(keys.STANDALONE.of("sooner")), {"sooner": clock.now_ms() + 3_000})
    assert store.reaper_tick("reaper-a", 3_000).next_due == clock.now_ms() + 3_000


def test_release_makes_run_due_now_as_an_interruption(store: RedisStore, raw: redis.Redis) -> None:
    """release() on soft shutdown: retrying, lease removed, due now, run_retrying(reason=shutdown); the
    attempt moves from attempts to interruptions, and the next one is still numbered 2."""
    make_run(store)
    ctx = start(store)
    assert store.release(ctx) == "released"
    info = store.get("run-1")
    assert (info.status, info.attempts, info.interruptions) == (Status.RETRYING, 0, 1)
    assert raw.zscore(keys.due(keys.STANDALONE.of("run-1")), "run-1") == clock.now_ms()
    assert raw.zscore(keys.leases(keys.STANDALONE.of("run-1")), "run-1") is None
    last = store.events("run-1")[-1]
    assert (last.type, last.fields["reason"]) == ("run_retrying", "shutdown")
    assert store.claim("run-1", new_token(), lease_ttl_ms=LEASE_MS).attempt == 2


def test_dead_letter_creates_missing_record(store: RedisStore, raw: redis.Redis) -> None:
    """dead_letter() of an unknown run creates it dead, from the message's graph and raw inputs."""
    assert store.dead_letter(
        "foreign-1",
        reason="unknown_graph",
        error_type="UnknownGraph",
        message="no worker has published graph 'nope'",
        graph="nope",
        inputs_json='{"x": 1}',
        idempotency_key="ext-7",
        max_attempts=4,
    )
    info = store.get("foreign-1")
    assert (info.status, info.graph, info.reason, info.attempts, info.max_attempts) == (
        Status.DEAD, "nope", "unknown_graph", 0, 4,
    )  # fmt: skip
    assert info.error == "UnknownGraph: no worker has published graph 'nope'"
    assert raw.hget(keys.run("foreign-1"), "inputs") == b'{"x": 1}'
    assert raw.zscore(keys.dead(keys.STANDALONE.of("foreign-1")), "foreign-1") is not None
    assert raw.get(keys.idem(keys.idem_scope("nope", "ext-7"))) == b"foreign-1"
    assert 0 < raw.ttl(keys.idem(keys.idem_scope("nope", "ext-7"))) <= DEAD_RETENTION_S
    assert [e.type for e in store.events("foreign-1")] == ["run_enqueued", "run_dead_lettered"]


def test_dead_letter_updates_active_run_and_refuses_terminal(store: RedisStore, raw: redis.Redis) -> None:
    """dead_letter() moves an active run to dead (fencing its attempt) and refuses a terminal one."""
    make_run(store, idempotency_key="idem-d")
    ctx = start(store)
    assert store.dead_letter("run-1", reason="invalid_inputs", error_type="InvalidInputs", message="bad")
    info = store.get("run-1")
    assert (info.status, info.reason, info.error) == (Status.DEAD, "invalid_inputs", "InvalidInputs: bad")
    assert raw.zscore(keys.leases(keys.STANDALONE.of("run-1")), "run-1") is None
    assert store.renew_lease("run-1", ctx.token, lease_ttl_ms=LEASE_MS) is Lease.LOST
    assert (
        raw.ttl(keys.idem(keys.idem_scope("demo", "idem-d"))) > 0
    )  # the run's own key found although the caller gave none
    assert not store.dead_letter("run-1", reason="bad_message", error_type="X", message="again")
    assert store.get("run-1").reason == "invalid_inputs"


def test_reaper_lock_belongs_to_its_owner(store: RedisStore, raw: redis.Redis) -> None:
    """A reaper tick takes the lock when nobody holds it; only its owner keeps or releases it."""
    assert store.reaper_tick("reaper-a", 30_000).lock is Lock.TAKEN
    assert store.reaper_tick("reaper-b", 30_000).lock is Lock.OTHER
    assert store.release_lock("reaper-b") is False
    assert raw.get(keys.reaper_lock(0)) == b"reaper-a"
    assert store.reaper_tick("reaper-a", 60_000).lock is Lock.HELD
    assert store.release_lock("reaper-a") is True
    assert store.reaper_tick("reaper-b", 30_000).lock is Lock.TAKEN


def test_interruptions_are_bounded(store: RedisStore) -> None:
    """A run cut short more than max_interruptions times is dead-lettered (max_interruptions), so a run
    that is always interrupted cannot loop forever; released once more than allowed, it ends dead."""
    store.options = dataclasses.replace(store.options, max_interruptions=2)
    make_run(store, max_attempts=1)
    assert [store.release(start(store)) for _ in range(3)] == ["released", "released", "dead"]
    info = store.get("run-1")
    assert (info.status, info.reason, info.attempts, info.interruptions) == (
        Status.DEAD, "max_interruptions", 0, 3,
    )  # fmt: skip


def test_infrastructure_failure_does_not_count_toward_max_attempts(store: RedisStore) -> None:
    """fail(counted=False), Redis unreachable mid-attempt, is an interruption: a run on its last allowed
    attempt retries instead of being dead-lettered, and the failure says it did not count."""
    make_run(store, max_attempts=1)
    ctx = start(store)
    outcome = store.fail(
        ctx, error_type="StoreUnavailable", message="Redis could not be reached", traceback=None,
        reason="store_unavailable", permanent=False, retry_delay_ms=0, counted=False,
    )  # fmt: skip
    assert outcome == "retrying"
    info = store.get("run-1")
    assert (info.status, info.attempts, info.interruptions) == (Status.RETRYING, 0, 1)
    failed = [e for e in store.events("run-1") if e.type == "attempt_failed"]
    assert failed[-1].fields["counted"] == "0"
    assert fail_once(store, start(store)) == "dead", "a step's own failure still counts"


def test_lease_lapsed_in_an_outage_is_reaped_as_an_interruption(
    store: RedisStore, fake_clock: FakeClock
) -> None:
    """A lease that lapsed inside a window the reaper found Redis unreachable in was lost to the outage:
    reaped as store_unavailable, not counted; a lease that lapsed outside it is abandoned, counted."""
    make_run(store, "in-outage", max_attempts=1)
    make_run(store, "crashed", max_attempts=2)
    start(store, "in-outage", lease_ms=1_000)
    start(store, "crashed", lease_ms=1_000)
    lapsed_at = fake_clock.ms + 1_000
    fake_clock.advance(5_000)
    assert sorted(store.reap(outage=(lapsed_at - 500, lapsed_at + 500))) == ["crashed", "in-outage"]
    hit = store.get("in-outage")
    assert (hit.status, hit.reason, hit.attempts, hit.interruptions) == (
        Status.RETRYING, "store_unavailable", 0, 1,
    )  # fmt: skip
    make_run(store, "later", max_attempts=2)
    start(store, "later", lease_ms=1_000)
    fake_clock.advance(5_000)
    store.reap(outage=(lapsed_at - 500, lapsed_at + 500))
    late = store.get("later")
    assert (late.status, late.reason, late.attempts, late.interruptions) == (
        Status.RETRYING, "abandoned", 1, 0,
    )  # fmt: skip


def test_a_pass_after_a_redis_restart_knows_since_when_redis_was_away(private_redis: RedisFactory) -> None:
    """A reaper tick marks its pass: the passes on one server tell nothing; the first pass after the
    server restarted (it has a new run_id, and its AOF kept the last pass) returns the window since
    that pass, which reap() then treats as an outage, whoever runs it."""
    server = private_redis()
    store = RedisStore.from_url(server.url)
    try:
        assert store.reaper_tick("reaper-a", 60_000, 1_000).restart is None  # the first pass ever
        assert store.reaper_tick("reaper-a", 60_000, 2_000).restart is None
        server.restart()
        assert store.reaper_tick("reaper-a", 60_000, 9_000).restart == (2_000, 9_000)
        assert store.reaper_tick("reaper-a", 60_000, 10_000).restart is None
    finally:
        store.close()


def test_a_pass_on_a_server_that_refuses_info_gives_no_evidence(private_redis: RedisFactory) -> None:
    """An ACL user without INFO: a tick's pass mark neither fails the reaper's pass nor invents an outage."""
    server = private_redis()
    with server.client() as admin:
        admin.acl_setuser("reaper", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-info"])
    store = RedisStore.from_url(f"redis://reaper:pw@127.0.0.1:{server.port}/0")
    try:
        assert store.reaper_tick("reaper-a", 60_000, 1_000).restart is None
        assert store.reaper_tick("reaper-a", 60_000, 2_000).restart is None
    finally:
        store.close()


def test_reaper_tick_wakes_at_the_first_lease_that_could_lapse_and_keeps_the_lock_until_then(
    store: RedisStore, raw: redis.Redis, fake_clock: FakeClock
) -> None:
    """An idle reaper sleeps up to ``idle_ms``, less when a lease could lapse or a run falls due
    sooner; the holder keeps the lock a margin past that wake, and another reaper wakes when the
    lock would lapse, so it takes over within the margin of a holder that died."""
    now = clock.now_ms()
    idle = store.reaper_tick("reaper-a", 3_000, idle_ms=10_000, margin_ms=1_000)
    assert idle.wake == now + 10_000
    assert 10_000 < raw.pttl(keys.reaper_lock(0)) <= 11_000
    other = store.reaper_tick("reaper-b", 3_000, idle_ms=10_000, margin_ms=1_000)
    assert other.lock is Lock.OTHER and now + 10_000 < other.wake <= now + 11_000
    make_run(store, "r", dispatch_grace_ms=60_000)
    start(store, "r", lease_ms=4_000)
    found = store.reaper_tick("reaper-a", 3_000, idle_ms=10_000, margin_ms=1_000)
    assert found.wake == now + 4_000, "the lease could lapse then"
    assert 3_000 < raw.pttl(keys.reaper_lock(0)) <= 5_000
    fake_clock.advance(4_001)
    found = store.reaper_tick("reaper-a", 3_000, idle_ms=10_000, margin_ms=1_000)
    assert found.lapsed == ["r"] and found.wake == clock.now_ms() + 1_000, "another may lapse next"


def test_reaper_tick_reads_the_runs_to_prune_only_when_asked(store: RedisStore, raw: redis.Redis) -> None:
    """The reaper prunes about once a minute: its other ticks skip the three reads of the status sets."""
    raw.zadd(keys.status_set(Status.SUCCEEDED, 0), {"old": 1})  # far past any retention
    assert store.reaper_tick("reaper-a", 3_000, prune=False).prunable == {
        s: [] for s in ("succeeded", "dead", "cancelled")
    }
    assert store.reaper_tick("reaper-a", 3_000).prunable["succeeded"] == ["old"]
