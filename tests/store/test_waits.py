"""Issue 10 in the store: a step's wait suspends the run as waiting, holding only Redis data (G8), and a
signal or the timer in the due set queues it again; every change is one atomic script."""

from __future__ import annotations

import json
import threading

import pytest
import redis

from reflexr_graph import errors
from reflexr_graph.core.port import Boundary
from reflexr_graph.model import SignalOutcome, Status
from reflexr_graph.store import RedisStore, keys
from reflexr_graph.store.ops import QueuedMessage
from reflexr_graph.store.records import ClaimOutcome
from tests.store.support import FakeClock, make_run, new_token, start

REC = "w|review|-|d1|approval|0"
GRACE_MS = 30_000


def suspend(store: RedisStore, *, wake_at_ms: int | None = None, signal: str = "approval") -> None:
    ctx = start(store)
    result = store.wait(ctx, field=REC, signal=signal, wake_at_ms=wake_at_ms)
    assert result.record is None, result


def test_a_wait_without_its_signal_suspends_the_run_holding_nothing_but_redis(
    store: RedisStore, raw: redis.Redis
) -> None:
    make_run(store)
    ctx = start(store)
    result = store.wait(ctx, field=REC, signal="approval", wake_at_ms=None)
    assert result.record is None and result.wake_at_ms is None
    info = store.get("run-1")
    assert (info.status, info.waiting_for, info.wake_at) == (Status.WAITING, "approval", None)
    assert info.attempts == 0, "a suspended attempt does not count toward max_attempts"
    assert (
        raw.zscore(keys.leases(keys.STANDALONE.of("run-1")), "run-1") is None
        and raw.zscore(keys.due(keys.STANDALONE.of("run-1")), "run-1") is None
    )
    assert raw.zscore(keys.status_set(Status.WAITING, keys.STANDALONE.of("run-1")), "run-1") is not None
    assert not store.renew_lease("run-1", ctx.token, lease_ttl_ms=30_000), "the attempt's lease is given back"
    with pytest.raises(errors.FencedOut):
        store.save_checkpoint(ctx, Boundary("{}", seq=1, next_node="x"))
    assert [e.type for e in store.events("run-1")][-1] == "run_waiting"
    assert store.events("run-1")[-1].fields["signal"] == "approval"
    claim = store.claim("run-1", new_token(), lease_ttl_ms=30_000)
    assert claim.outcome is ClaimOutcome.WAITING, "a stray message does not wake a waiting run"
    assert all(raw.ttl(k) == -1 for k in keys.run_keys("run-1") if raw.exists(k)), (
        "a waiting run never expires"
    )


def test_the_signal_queues_the_waiting_run_and_its_wait_then_returns_the_value(
    store: RedisStore, raw: redis.Redis
) -> None:
    make_run(store)
    suspend(store)
    outcome, graph = store.signal("run-1", "approval", '{"ok":true}', dispatch_grace_ms=GRACE_MS)
    assert (outcome, graph) == (SignalOutcome.QUEUED, "demo")
    info = store.get("run-1")
    assert (info.status, info.waiting_for) == (Status.QUEUED, None)
    assert raw.zscore(keys.due(keys.STANDALONE.of("run-1")), "run-1") is not None, (
        "the reaper sends it if the sender's message is lost"
    )
    ctx = start(store)
    result = store.wait(ctx, field=REC, signal="approval", wake_at_ms=None)
    assert json.loads(result.record or "") == {"signal": {"ok": True}}
    assert not raw.exists(keys.mailbox("run-1")), "the signal moved into the step's record"
    assert store.load_records("run-1")[REC] == result.record
    assert [e.type for e in store.events("run-1")].count("signal_received") == 1


def test_the_claim_that_wakes_the_run_takes_its_signal_so_the_wait_needs_no_round_trip(
    store: RedisStore, raw: redis.Redis, fake_clock: FakeClock
) -> None:
    """The claim after the signal moves it from the mailbox into the wait's record, atomically,
    and returns it with the records: the step that runs again needs no wait.lua for it. A claim
    after a crash of that attempt finds it in the records again, never in the mailbox."""
    make_run(store)
    suspend(store)
    store.signal("run-1", "approval", '{"ok":true}', dispatch_grace_ms=GRACE_MS)
    claim = store.claim("run-1", new_token(), lease_ttl_ms=1_000)
    assert claim.claimed and json.loads(claim.records[REC]) == {"signal": {"ok": True}}
    assert not raw.exists(keys.mailbox("run-1")), "taken from the mailbox by the claim"
    # That attempt dies before its step reaches the wait: the next attempt's claim gives it the
    # same record, and the signal is still not in the mailbox for another wait to take.
    fake_clock.advance(2_000)
    store.reap()
    again = store.claim("run-1", new_token(), lease_ttl_ms=30_000)
    assert again.claimed and again.records[REC] == claim.records[REC]
    assert not raw.exists(keys.mailbox("run-1"))
    result = store.wait(again.context(), field=REC, signal="approval", wake_at_ms=None)
    assert result.record == claim.records[REC], "a wait.lua call, were one made, answers the same"


def test_a_signal_that_wakes_the_run_pushes_its_message_in_the_same_script(
    store: RedisStore, raw: redis.Redis
) -> None:
    """The run's message lands with the write that queued it (issue 18, change 7b), and only when
    the signal wakes it: never for a signal kept, refused as pending, or for another wait."""
    message = QueuedMessage("broker-list", '{"headers": {"id": "run-1"}}')
    make_run(store)
    suspend(store, signal="other")
    kept, _ = store.signal("run-1", "approval", "1", dispatch_grace_ms=GRACE_MS, message=message)
    assert kept is SignalOutcome.KEPT and raw.llen("broker-list") == 0, "it waits for another signal"
    with pytest.raises(errors.SignalPending):
        store.signal("run-1", "approval", "2", dispatch_grace_ms=GRACE_MS, message=message)
    outcome, graph = store.signal("run-1", "other", "3", dispatch_grace_ms=GRACE_MS, message=message)
    assert (outcome, graph) == (SignalOutcome.SENT, "demo")
    assert raw.lrange("broker-list", 0, -1) == [message.item.encode()]
    assert store.get("run-1").status is Status.QUEUED
    assert raw.zscore(keys.due(0), "run-1") is not None, "the reaper still sends it if the message is lost"


def test_a_signal_sent_first_is_kept_and_the_wait_takes_it_without_suspending(store: RedisStore) -> None:
    make_run(store)
    ctx = start(store)
    outcome, _ = store.signal("run-1", "approval", '"yes"', dispatch_grace_ms=GRACE_MS)
    assert outcome is SignalOutcome.KEPT
    assert store.get("run-1").status is Status.RUNNING
    result = store.wait(ctx, field=REC, signal="approval", wake_at_ms=None)
    assert json.loads(result.record or "") == {"signal": "yes"}
    assert "run_waiting" not in [e.type for e in store.events("run-1")]


def test_a_second_signal_before_the_first_is_taken_and_signals_to_finished_runs_are_refused(
    store: RedisStore,
) -> None:
    make_run(store)
    store.signal("run-1", "approval", "1", dispatch_grace_ms=GRACE_MS)
    with pytest.raises(errors.SignalPending) as pending:
        store.signal("run-1", "approval", "2", dispatch_grace_ms=GRACE_MS)
    assert (pending.value.signal, pending.value.status) == ("approval", "queued")
    assert store.client.hget(keys.mailbox("run-1"), "approval") == b"1", "the first value stands"
    store.cancel("run-1")
    with pytest.raises(errors.OperationRefused) as refused:
        store.signal("run-1", "other", "1", dispatch_grace_ms=GRACE_MS)
    assert refused.value.status == "cancelled"
    with pytest.raises(errors.RunNotFound):
        store.signal("no-such-run", "approval", "1", dispatch_grace_ms=GRACE_MS)


def test_concurrent_signals_queue_the_run_once(redis_url: str, store: RedisStore) -> None:
    """Ten senders race the same signal at a waiting run: one wins, nine are told it is pending."""
    make_run(store)
    suspend(store)
    outcomes: list[object] = []
    barrier = threading.Barrier(10)

    def send(i: int) -> None:
        own = RedisStore.from_url(redis_url)
        barrier.wait(timeout=10)
        try:
            outcomes.append(own.signal("run-1", "approval", str(i), dispatch_grace_ms=GRACE_MS)[0])
        except errors.SignalPending:
            outcomes.append("pending")
        finally:
            own.close()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert sorted(map(str, outcomes)) == ["pending"] * 9 + ["queued"]
    assert [e.type for e in store.events("run-1")].count("signal_received") == 1


def test_a_timer_wakes_the_run_through_the_due_set_and_is_never_restarted(
    store: RedisStore, raw: redis.Redis, fake_clock: FakeClock
) -> None:
    make_run(store)
    wake = fake_clock.ms + 60_000
    suspend(store, wake_at_ms=wake, signal="")
    info = store.get("run-1")
    assert (info.status, info.waiting_for, info.wake_at) == (Status.WAITING, None, wake / 1000)
    assert raw.zscore(keys.due(keys.STANDALONE.of("run-1")), "run-1") == wake, (
        "the timer is the due entry, not a Celery countdown"
    )
    fake_clock.advance(30_000)
    assert store.claim("run-1", new_token(), lease_ttl_ms=30_000).outcome is ClaimOutcome.WAITING
    fake_clock.advance(30_000)
    claim = store.claim("run-1", new_token(), lease_ttl_ms=30_000)
    assert claim.claimed and store.get("run-1").waiting_for is None
    # The claim records that the timer fired, so the step that runs again needs no wait.lua.
    assert json.loads(claim.records[REC]) == {"due": True}
    # Were one made, with a fresh wake time: the first one kept wins, and it has passed.
    result = store.wait(claim.context(), field=REC, signal="", wake_at_ms=fake_clock.ms + 60_000)
    assert json.loads(result.record or "") == {"due": True}


def test_a_wait_with_a_timeout_suspends_until_the_signal_or_the_timer(
    store: RedisStore, raw: redis.Redis, fake_clock: FakeClock
) -> None:
    make_run(store)
    wake = fake_clock.ms + 10_000
    suspend(store, wake_at_ms=wake)
    assert store.get("run-1").waiting_for == "approval"
    assert raw.zscore(keys.due(keys.STANDALONE.of("run-1")), "run-1") == wake
    fake_clock.advance(10_000)
    ctx = start(store)
    result = store.wait(ctx, field=REC, signal="approval", wake_at_ms=None)
    assert json.loads(result.record or "") == {"due": True}, "the timeout came first"
    # A signal sent after the timeout waits for the next wait of that name.
    assert store.signal("run-1", "approval", "1", dispatch_grace_ms=GRACE_MS)[0] is SignalOutcome.KEPT


def test_cancel_ends_a_waiting_run_and_its_keys_then_expire(store: RedisStore, raw: redis.Redis) -> None:
    make_run(store)
    store.signal("run-1", "other", "1", dispatch_grace_ms=GRACE_MS)
    suspend(store)
    info = store.cancel("run-1")
    assert info.status is Status.CANCELLED
    assert raw.zscore(keys.status_set(Status.WAITING, keys.STANDALONE.of("run-1")), "run-1") is None
    assert raw.ttl(keys.mailbox("run-1")) > 0, "the mailbox expires with the run"
    store.purge("run-1")
    assert not any(raw.exists(k) for k in keys.run_keys("run-1"))


def test_a_replay_counts_attempts_afresh_after_waits(store: RedisStore) -> None:
    make_run(store, max_attempts=1)
    for _ in range(3):
        suspend(store)
        store.signal("run-1", "approval", "1", dispatch_grace_ms=GRACE_MS)
        ctx = start(store)
        store.wait(ctx, field=REC, signal="approval", wake_at_ms=None)
        store.client.delete(keys.memo("run-1"))  # as the next checkpoint would
        store.release(ctx)
    info = store.get("run-1")
    assert info.status is not Status.DEAD, "three waits on a one-attempt budget are not failures"
    assert info.attempts == 0


def test_a_timer_that_fires_while_no_worker_serves_the_graph_holds_the_run_like_a_queued_one(
    store: RedisStore, fake_clock: FakeClock
) -> None:
    make_run(store)
    suspend(store, wake_at_ms=fake_clock.ms + 1_000, signal="")
    args = {"grace_ms": 60_000, "recheck_ms": 1_000, "message": "no worker"}
    fake_clock.advance(1_000)
    assert store.hold_unserved("run-1", **args) == "began", "a due waiting run waits for a worker"
    fake_clock.advance(60_000)
    assert store.hold_unserved("run-1", **args) == "dead"
    assert store.get("run-1").reason == "unknown_graph"
