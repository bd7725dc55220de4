"""Create, claim, checkpoint, succeed and fail: the attempt's path through the store."""

from __future__ import annotations

import json
import threading

import pytest
import redis

from reflexr_graph import clock, errors
from reflexr_graph.core.port import Boundary, CheckpointPort, Emission, Lane, Notes, Record
from reflexr_graph.model import Status
from reflexr_graph.store import ClaimOutcome, RedisStore, asks, fanout, keys
from reflexr_graph.store.attempts import Lease
from tests.store.conftest import DEAD_RETENTION_S, RUN_RETENTION_S
from tests.store.support import LEASE_MS, FakeClock, fail_once, make_run, new_token, start


def _ttls(raw: redis.Redis, run_id: str) -> dict[str, int]:
    """The TTL of each key of the run that exists (the memo exists only while work is recorded)."""
    return {key: int(raw.ttl(key)) for key in keys.run_keys(run_id) if raw.exists(key)}


def test_happy_path_create_claim_save_succeed(store: RedisStore, raw: redis.Redis) -> None:
    """A run goes queued -> running -> succeeded, with its checkpoint, output and events recorded."""
    make_run(store)
    info = store.get("run-1")
    assert (info.status, info.attempts, info.max_attempts, info.checkpoints) == (Status.QUEUED, 0, 3, 0)
    assert raw.zscore(keys.status_index(Status.QUEUED, keys.STANDALONE.of("run-1")), "run-1") is not None

    claim = store.claim("run-1", "tok-a", lease_ttl_ms=LEASE_MS)
    assert claim.outcome is ClaimOutcome.CLAIMED
    assert (claim.attempt, claim.resume_seq, claim.graph, claim.max_attempts) == (1, 1, "demo", 3)
    assert (claim.inputs_json, claim.state_json, claim.idempotency_key) == (
        '{"n": 1}',
        '{"count": 0}',
        "run-1",
    )
    ctx = claim.context()

    assert store.load_checkpoint("run-1") is None
    store.save_checkpoint(ctx, Boundary('{"v": 1, "state": {}}', seq=1, next_node="step_b"))
    assert store.load_checkpoint("run-1") == '{"v": 1, "state": {}}'
    ckpt = store.checkpoint_info("run-1")
    assert ckpt is not None and ckpt["seq"] == 1 and ckpt["next_node"] == "step_b"
    assert ckpt["size"] == len('{"v": 1, "state": {}}')

    store.succeed(ctx, '{"answer": 42}')
    info = store.get("run-1")
    assert info.status is Status.SUCCEEDED
    assert (info.output, info.error, info.attempts, info.checkpoints, info.next_node) == (
        {"answer": 42}, None, 1, 1, "step_b",
    )  # fmt: skip
    assert raw.zscore(keys.leases(keys.STANDALONE.of("run-1")), "run-1") is None
    assert raw.zscore(keys.due(keys.STANDALONE.of("run-1")), "run-1") is None
    assert raw.zscore(keys.status_set(Status.QUEUED, keys.STANDALONE.of("run-1")), "run-1") is None
    assert raw.zscore(keys.status_set(Status.SUCCEEDED, keys.STANDALONE.of("run-1")), "run-1") is not None
    types = [e.type for e in store.events("run-1")]
    assert types == ["run_enqueued", "attempt_started", "run_progressed", "run_succeeded"]


def test_the_notes_of_saves_add_up_on_the_run(store: RedisStore) -> None:
    """Each save adds its notes to the run's counters, whichever saves had none in between."""
    make_run(store)
    ctx = start(store)
    store.save_checkpoint(ctx, Boundary("{}", seq=1, next_node="b", notes=Notes(5, "a: state x5", 1, 3)))
    store.save_checkpoint(ctx, Boundary("{}", seq=2, next_node="c"))
    store.save_checkpoint(ctx, Boundary("{}", seq=3, next_node="d", notes=Notes(1, "c: state", 2, 4)))
    info = store.get("run-1")
    assert (info.skipped_boundaries, info.reused_steps, info.reused_calls) == (6, 3, 7)
    assert [c.seq for c in store.checkpoints("run-1")] == [1, 2, 3]


def test_create_puts_run_in_due_after_dispatch_grace(store: RedisStore, raw: redis.Redis) -> None:
    """create_run adds a due entry at now + dispatch_grace_ms: the safety net for a lost enqueue."""
    now = clock.now_ms()
    make_run(store, dispatch_grace_ms=15_000)
    assert raw.zscore(keys.due(keys.STANDALONE.of("run-1")), "run-1") == now + 15_000
    assert raw.zscore(keys.all_runs(keys.STANDALONE.of("run-1")), "run-1") == now
    store.claim("run-1", new_token(), lease_ttl_ms=LEASE_MS)
    assert (
        raw.zscore(keys.due(keys.STANDALONE.of("run-1")), "run-1") is None
    )  # the claim means the message arrived


def test_create_existing_run_id_changes_nothing(store: RedisStore) -> None:
    """A second create_run with the same run id returns (run_id, False) and keeps the first record."""
    make_run(store)
    assert store.create_run(
        "run-1", graph="other", inputs_json="{}", max_attempts=9, dispatch_grace_ms=0
    ) == ("run-1", False)
    info = store.get("run-1")
    assert (info.graph, info.max_attempts) == ("demo", 3)


def test_idempotent_create_from_two_threads_makes_one_run(store: RedisStore, raw: redis.Redis) -> None:
    """2 threads x 20 create_run calls with one idempotency key create exactly one run (race-free)."""
    results: list[tuple[str, bool]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(2)

    def enqueue(worker: int) -> None:
        barrier.wait()
        for i in range(20):
            got = store.create_run(
                f"run-{worker}-{i}",
                graph="demo",
                inputs_json="{}",
                idempotency_key="order-17",
                max_attempts=3,
                dispatch_grace_ms=1_000,
            )
            with lock:
                results.append(got)

    threads = [threading.Thread(target=enqueue, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(results) == 40
    assert sum(created for _, created in results) == 1
    assert len({run_id for run_id, _ in results}) == 1
    assert fanout.total(raw, keys.all_runs) == 1
    winner = results[0][0]
    assert raw.get(keys.idem(keys.idem_scope("demo", "order-17"))) == winner.encode()
    assert store.get(winner).status is Status.QUEUED


def test_idempotency_key_is_reusable_once_its_run_is_gone(store: RedisStore, raw: redis.Redis) -> None:
    """An idem key whose run record no longer exists does not block a new run."""
    make_run(store, "run-1", idempotency_key="k")
    raw.delete(*keys.run_keys("run-1"))  # as if its retention had passed
    assert store.create_run(
        "run-2", graph="demo", inputs_json="{}", idempotency_key="k", max_attempts=3, dispatch_grace_ms=0
    ) == ("run-2", True)
    assert raw.get(keys.idem(keys.idem_scope("demo", "k"))) == b"run-2"


def test_stale_token_is_fenced_out(store: RedisStore, fake_clock: FakeClock) -> None:
    """After a newer claim, the old attempt can save no checkpoint and record no outcome."""
    make_run(store)
    old = start(store, lease_ms=1_000)
    fake_clock.advance(2_000)
    store.reap()
    new = start(store)
    assert new.attempt == 2 and new.resume_seq == 2

    with pytest.raises(errors.FencedOut):
        store.save_checkpoint(old, Boundary('{"stale": true}', seq=5, next_node="x"))
    with pytest.raises(errors.FencedOut):
        store.succeed(old, '"stale"')
    with pytest.raises(errors.FencedOut):
        fail_once(store, old)
    assert store.renew_lease("run-1", old.token, lease_ttl_ms=LEASE_MS) is Lease.LOST
    assert store.release(old) == "fenced"

    assert store.load_checkpoint("run-1") is None
    info = store.get("run-1")
    assert (info.status, info.attempts, info.output) == (Status.RUNNING, 2, None)
    store.save_checkpoint(new, Boundary('{"fresh": true}', seq=1, next_node="y"))  # the owner still can
    assert store.load_checkpoint("run-1") == '{"fresh": true}'


def test_renew_lease_extends_only_for_the_owner(
    store: RedisStore, raw: redis.Redis, fake_clock: FakeClock
) -> None:
    """renew_lease moves the lease score to now + ttl for the owning token, and refuses others."""
    make_run(store)
    ctx = start(store, lease_ms=1_000)
    fake_clock.advance(500)
    assert store.renew_lease("run-1", ctx.token, lease_ttl_ms=10_000) is Lease.HELD
    assert raw.zscore(keys.leases(keys.STANDALONE.of("run-1")), "run-1") == clock.now_ms() + 10_000
    assert store.renew_lease("run-1", "someone-else", lease_ttl_ms=10_000) is Lease.LOST
    assert store.renew_lease("run-1", "", lease_ttl_ms=10_000) is Lease.LOST
    assert store.renew_lease("missing", ctx.token, lease_ttl_ms=10_000) is Lease.LOST


def test_fail_schedules_retry_at_now_plus_delay(store: RedisStore, raw: redis.Redis) -> None:
    """A non-permanent failure with attempts left -> retrying, due at now + retry_delay_ms, lease dropped."""
    make_run(store)
    ctx = start(store)
    assert fail_once(store, ctx, delay_ms=7_500) == "retrying"
    info = store.get("run-1")
    assert (info.status, info.reason, info.error) == (
        Status.RETRYING,
        "step_failed",
        "ValueError: step broke",
    )
    assert raw.zscore(keys.due(keys.STANDALONE.of("run-1")), "run-1") == clock.now_ms() + 7_500
    assert raw.zscore(keys.leases(keys.STANDALONE.of("run-1")), "run-1") is None
    assert store.traceback("run-1") is not None and "ValueError: step broke" in str(store.traceback("run-1"))
    assert "step broke" not in str(raw.hgetall(keys.run("run-1")).get(b"traceback", b""))
    failed = [e for e in store.events("run-1") if e.type == "attempt_failed"]
    assert failed[0].fields == {
        "attempt": "1",
        "reason": "step_failed",
        "error_type": "ValueError",
        "counted": "1",
    }
    assert _ttls(raw, "run-1")[keys.run("run-1")] == -1  # still active: no retention yet


def test_permanent_fail_dead_letters_at_once(store: RedisStore, raw: redis.Redis) -> None:
    """permanent=True -> dead at once, in rg:dead, every run key expiring after the dead retention."""
    make_run(store, idempotency_key="idem-p")
    ctx = start(store)
    store.save_checkpoint(ctx, Boundary("{}", seq=1, next_node="b"))
    assert fail_once(store, ctx, permanent=True) == "dead"
    info = store.get("run-1")
    assert (info.status, info.attempts, info.reason) == (Status.DEAD, 1, "step_failed")
    assert raw.zscore(keys.dead(keys.STANDALONE.of("run-1")), "run-1") is not None
    assert (
        raw.zscore(keys.due(keys.STANDALONE.of("run-1")), "run-1") is None
        and raw.zscore(keys.leases(keys.STANDALONE.of("run-1")), "run-1") is None
    )
    ttls = _ttls(raw, "run-1")
    assert all(RUN_RETENTION_S < ttl <= DEAD_RETENTION_S for ttl in ttls.values()), ttls
    assert 0 < raw.ttl(keys.idem(keys.idem_scope("demo", "idem-p"))) <= DEAD_RETENTION_S
    assert [e.type for e in store.events("run-1")][-1] == "run_dead_lettered"


def test_fail_on_last_attempt_dead_letters_with_max_attempts(
    store: RedisStore, fake_clock: FakeClock
) -> None:
    """Failing the last allowed attempt dead-letters the run (reason max_attempts), keeping the error."""
    make_run(store, max_attempts=2)
    assert fail_once(store, start(store)) == "retrying"
    assert fail_once(store, start(store)) == "dead"
    info = store.get("run-1")
    assert (info.status, info.attempts, info.reason, info.error) == (
        Status.DEAD, 2, "max_attempts", "ValueError: step broke",
    )  # fmt: skip


def test_succeed_sets_ttl_on_every_run_key(store: RedisStore, raw: redis.Redis) -> None:
    """succeed() expires every key in keys.run_keys (and the idem key) after the run retention."""
    long_inputs = json.dumps({"text": "x" * 100})  # a key of their own (keys.inputs)
    make_run(store, idempotency_key="idem-s", inputs_json=long_inputs)
    first = start(store)
    store.save_checkpoint(first, Boundary("{}", seq=1, next_node="b"))  # creates the ckpt key
    store.save_record(first, Record("c|b|x", "1"))  # creates the memo key
    store.save_record(first, Record("b|b|m:0|x", "1", lane=Lane("b", "m:0", 1, 2)))  # and the lanes key
    fail_once(store, first)  # creates the tb key
    store.signal("run-1", "later", "1", dispatch_grace_ms=0)  # creates the mailbox key
    ctx = start(store)
    store.append_stream(ctx, [Emission("output", "b", "", '"t"')], -1, max_items=10)  # the stream key
    store.open_event(ctx, token=asks.new_token("run-1"), entry_json="{}", name="ok")  # the asks key
    store.succeed(ctx, "null", checkpoint='{"finished": true}', seq=2)  # moves seq 1 to the history
    for key in keys.run_keys("run-1"):
        assert raw.exists(key), key
        assert 0 < raw.ttl(key) <= RUN_RETENTION_S, key
    assert 0 < raw.ttl(keys.idem(keys.idem_scope("demo", "idem-s"))) <= RUN_RETENTION_S
    assert store.get("run-1").output is None


def test_succeed_retried_with_same_token_is_a_no_op(store: RedisStore) -> None:
    """A succeed() repeated by the same attempt (lost reply, client retry) is accepted, not fenced."""
    make_run(store)
    ctx = start(store)
    store.succeed(ctx, "1")
    store.succeed(ctx, "1")
    assert [e.type for e in store.events("run-1")].count("run_succeeded") == 1


def test_claim_of_missing_and_finished_runs(store: RedisStore) -> None:
    """claim() answers missing for no record and finished for a terminal run, changing nothing."""
    assert store.claim("nope", new_token(), lease_ttl_ms=LEASE_MS).outcome is ClaimOutcome.MISSING
    make_run(store)
    store.succeed(start(store), "1")
    claim = store.claim("run-1", new_token(), lease_ttl_ms=LEASE_MS)
    assert (claim.outcome, claim.status, claim.attempt) == (ClaimOutcome.FINISHED, "succeeded", 1)
    with pytest.raises(errors.OperationRefused):
        claim.context()


def test_claim_retried_with_same_token_answers_claimed_once(store: RedisStore) -> None:
    """The same token claiming again (a retried call) gets its claim back; attempts are not counted twice."""
    make_run(store)
    first = store.claim("run-1", "tok", lease_ttl_ms=LEASE_MS)
    again = store.claim("run-1", "tok", lease_ttl_ms=LEASE_MS)
    assert again.outcome is ClaimOutcome.CLAIMED
    assert (first.attempt, again.attempt) == (1, 1)
    assert store.get("run-1").attempts == 1


def test_store_satisfies_the_checkpoint_port(store: RedisStore) -> None:
    """RedisStore is a CheckpointPort (checked by mypy here), usable by the sans-IO attempt driver."""
    port: CheckpointPort = store
    make_run(store)
    ctx = start(store)
    port.save_checkpoint(ctx, Boundary('{"k": 1}', seq=1, next_node=None))
    assert port.load_checkpoint("run-1") == '{"k": 1}'
    assert store.get("run-1").next_node is None


def test_claim_records_the_worker_on_the_attempt(store: RedisStore, raw: redis.Redis) -> None:
    """Operators see which worker each attempt ran on: the claim names it on attempt_started."""
    make_run(store)
    store.claim("run-1", "tok-a", lease_ttl_ms=LEASE_MS, worker="w1@host")
    (started,) = [e for e in store.events("run-1") if e.type == "attempt_started"]
    assert started.fields["worker"] == "w1@host"
    # Told once, on the event: the run hash does not repeat it (memory per run, issue 15).
    assert raw.hget(keys.run("run-1"), "worker") is None


def test_claim_before_the_retry_is_due_is_refused(store: RedisStore, fake_clock: FakeClock) -> None:
    """G4 backoff: a stray duplicate message cannot start the next attempt before its retry is due."""
    make_run(store)
    ctx = store.claim("run-1", "tok-a", lease_ttl_ms=LEASE_MS).context()
    store.fail(
        ctx,
        error_type="E",
        message="m",
        traceback="",
        reason="step_failed",
        permanent=False,
        retry_delay_ms=10_000,
    )
    fake_clock.advance(9_999)
    assert store.claim("run-1", "tok-b", lease_ttl_ms=LEASE_MS).outcome is ClaimOutcome.EARLY
    assert store.get("run-1").attempts == 1, "an early claim changes nothing"
    fake_clock.advance(1)
    assert store.claim("run-1", "tok-c", lease_ttl_ms=LEASE_MS).outcome is ClaimOutcome.CLAIMED


def test_idempotency_keys_are_scoped_per_graph(store: RedisStore) -> None:
    """One key used by two graphs makes two runs: a key means one request to one graph."""
    a = store.create_run(
        "run-a",
        graph="docproc",
        inputs_json="{}",
        idempotency_key="doc-77",
        max_attempts=3,
        dispatch_grace_ms=0,
    )
    b = store.create_run(
        "run-b",
        graph="fanout",
        inputs_json="{}",
        idempotency_key="doc-77",
        max_attempts=3,
        dispatch_grace_ms=0,
    )
    assert (a, b) == (("run-a", True), ("run-b", True))


def test_idempotency_key_with_other_inputs_is_a_conflict(store: RedisStore) -> None:
    """The same key with the same inputs (however the JSON is spaced or ordered) returns the run; with
    other inputs or state it raises IdempotencyConflict naming the run the key already names."""

    def create(run_id: str, inputs_json: str, state_json: str | None = None) -> tuple[str, bool]:
        return store.create_run(
            run_id, graph="docproc", inputs_json=inputs_json, state_json=state_json,
            idempotency_key="doc-77", max_attempts=3, dispatch_grace_ms=0,
        )  # fmt: skip

    assert create("run-1", '{"a": 1, "b": [1, 2]}') == ("run-1", True)
    assert create("run-2", '{"b":[1,2],"a":1}') == ("run-1", False)
    with pytest.raises(errors.IdempotencyConflict) as conflict:
        create("run-3", '{"a": 2, "b": [1, 2]}')
    assert (conflict.value.run_id, conflict.value.graph, conflict.value.idempotency_key) == (
        "run-1", "docproc", "doc-77",
    )  # fmt: skip
    assert "run-1" in str(conflict.value) and '"a": 2' not in str(conflict.value)
    with pytest.raises(errors.IdempotencyConflict):
        create("run-4", '{"a": 1, "b": [1, 2]}', state_json='{"x": 1}')
    assert not store.client.exists(keys.run("run-3")) and not store.client.exists(keys.run("run-4"))
