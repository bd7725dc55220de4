"""Operator actions (cancel, replay, purge) and listings."""

from __future__ import annotations

import pytest
import redis

from reflexr_graph import clock, errors
from reflexr_graph.core.port import Boundary
from reflexr_graph.model import Status
from reflexr_graph.store import ClaimOutcome, RedisStore, keys
from reflexr_graph.store.attempts import Lease
from tests.store.conftest import RUN_RETENTION_S
from tests.store.support import LEASE_MS, FakeClock, fail_once, make_run, new_token, start


def _dead_run(store: RedisStore, run_id: str = "run-1", **kw: object) -> None:
    make_run(store, run_id, **kw)  # type: ignore[arg-type]
    ctx = start(store, run_id)
    store.save_checkpoint(ctx, Boundary('{"at": "b"}', seq=1, next_node="b"))
    fail_once(store, ctx, permanent=True)


def test_cancel_now_fences_out_the_running_attempt(store: RedisStore, raw: redis.Redis) -> None:
    """cancel(now=True) clears the token: the running attempt's renew_lease is LOST and its save raises
    FencedOut."""
    make_run(store, idempotency_key="idem-c")
    ctx = start(store)
    info = store.cancel("run-1", now=True)
    assert (info.status, info.reason) == (Status.CANCELLED, "cancelled")
    assert store.renew_lease("run-1", ctx.token, lease_ttl_ms=LEASE_MS) is Lease.LOST
    with pytest.raises(errors.FencedOut):
        store.save_checkpoint(ctx, Boundary("{}", seq=1, next_node=None))
    with pytest.raises(errors.FencedOut):
        store.succeed(ctx, "1")
    assert (
        raw.zscore(keys.leases(keys.STANDALONE.of("run-1")), "run-1") is None
        and raw.zscore(keys.due(keys.STANDALONE.of("run-1")), "run-1") is None
    )
    assert raw.zscore(keys.status_set(Status.CANCELLED, keys.STANDALONE.of("run-1")), "run-1") is not None
    assert all(0 < raw.ttl(k) <= RUN_RETENTION_S for k in keys.run_keys("run-1") if raw.exists(k))
    assert 0 < raw.ttl(keys.idem(keys.idem_scope("demo", "idem-c"))) <= RUN_RETENTION_S
    assert store.events("run-1")[-1].type == "run_cancelled"
    assert store.claim("run-1", new_token(), lease_ttl_ms=LEASE_MS).outcome is ClaimOutcome.FINISHED


def test_cancel_of_a_running_run_waits_for_its_boundary(store: RedisStore, raw: redis.Redis) -> None:
    """Issue 25 item 4: cancel() without now marks a running run: the lease holds (renewal says
    CANCEL_REQUESTED), the next checkpoint is saved and answers that the run is to stop, and the
    attempt's own cancel(now=True) then ends it, cancelled."""
    make_run(store, idempotency_key="idem-c")
    ctx = start(store)
    info = store.cancel("run-1")
    assert (info.status, info.cancel_requested) == (Status.RUNNING, True)
    assert store.cancel("run-1").cancel_requested, "asked again: still one request"
    assert store.renew_lease("run-1", ctx.token, lease_ttl_ms=LEASE_MS) is Lease.CANCEL_REQUESTED
    assert store.save_checkpoint(ctx, Boundary('{"at": "b"}', seq=1, next_node="b")) is True
    done = store.cancel("run-1", now=True)
    assert (done.status, done.reason, done.cancel_requested) == (Status.CANCELLED, "cancelled", False)
    assert store.load_checkpoint("run-1") == '{"at": "b"}'
    ended = [e.type for e in store.events("run-1")][-3:]
    assert ended == ["cancel_requested", "run_progressed", "run_cancelled"]
    assert raw.zscore(keys.leases(keys.STANDALONE.of("run-1")), "run-1") is None
    assert all(0 < raw.ttl(k) <= RUN_RETENTION_S for k in keys.run_keys("run-1") if raw.exists(k))


def test_a_requested_cancel_wins_over_a_retry_a_release_and_a_wait(store: RedisStore) -> None:
    """An attempt that ends some other way while a cancel is asked ends the run cancelled; one
    that finishes the graph keeps its finished checkpoint."""
    for i, end in enumerate(["fail", "release", "wait", "succeed"]):
        run_id = f"run-{end}"
        make_run(store, run_id)
        ctx = start(store, run_id)
        store.cancel(run_id)
        if end == "fail":
            assert fail_once(store, ctx) == "cancelled"
        elif end == "release":
            assert store.release(ctx) == "cancelled"
        elif end == "wait":
            with pytest.raises(errors.CancelRequested):
                store.wait(ctx, field=f"w|{i}", signal="go", wake_at_ms=None)
        else:
            assert store.succeed(ctx, "7", checkpoint='{"done": 1}', seq=1) is False
            assert store.load_checkpoint(run_id) == '{"done": 1}', "the output is kept for a replay"
        info = store.get(run_id)
        assert (info.status, info.reason) == (Status.CANCELLED, "cancelled"), end


def test_the_reaper_ends_a_requested_cancel_whose_worker_died(
    store: RedisStore, fake_clock: FakeClock
) -> None:
    make_run(store)
    start(store)
    store.cancel("run-1")
    fake_clock.advance(LEASE_MS + 1)
    store.reap()
    info = store.get("run-1")
    assert (info.status, info.reason, info.attempts) == (Status.CANCELLED, "cancelled", 1)


def test_cancel_refuses_missing_and_terminal_runs(store: RedisStore) -> None:
    """cancel() raises RunNotFound for no run and OperationRefused naming the status for a finished one."""
    with pytest.raises(errors.RunNotFound):
        store.cancel("nope")
    make_run(store)
    store.succeed(start(store), "1")
    with pytest.raises(errors.OperationRefused, match="succeeded"):
        store.cancel("run-1")


@pytest.mark.parametrize("finish", ["running", "succeeded", "queued"])
def test_replay_refuses_runs_that_are_not_dead_or_cancelled(store: RedisStore, finish: str) -> None:
    """replay() of a running, succeeded or queued run raises OperationRefused naming its status."""
    make_run(store)
    if finish != "queued":
        ctx = start(store)
        if finish == "succeeded":
            store.succeed(ctx, "1")
    with pytest.raises(errors.OperationRefused, match=f"is {finish}; only dead or cancelled runs replay"):
        store.replay("run-1")
    with pytest.raises(errors.RunNotFound):
        store.replay("nope")


def test_replay_resets_attempts_keeps_checkpoint_and_removes_ttl(store: RedisStore, raw: redis.Redis) -> None:
    """replay() of a dead run: attempts 0, queued, due now, out of rg:dead, checkpoint kept, no TTL left."""
    _dead_run(store, idempotency_key="idem-r")
    resumes_before = int(raw.hget(keys.run("run-1"), "resumes") or 0)
    info = store.replay("run-1")
    assert (info.status, info.attempts, info.reason, info.error) == (Status.QUEUED, 0, None, None)
    assert (info.checkpoints, info.next_node) == (1, "b")
    assert store.load_checkpoint("run-1") == '{"at": "b"}'
    assert raw.hget(keys.run("run-1"), "prev_error") == b"ValueError: step broke"
    assert raw.zscore(keys.dead(keys.STANDALONE.of("run-1")), "run-1") is None
    assert raw.zscore(keys.due(keys.STANDALONE.of("run-1")), "run-1") == clock.now_ms()
    for key in keys.run_keys("run-1")[:4]:  # not the memo: the run recorded no work
        assert raw.ttl(key) == -1, key  # -1: exists without expiry
    assert raw.ttl(keys.idem(keys.idem_scope("demo", "idem-r"))) == -1
    replayed = store.events("run-1")[-1]
    assert (replayed.type, replayed.fields["from_start"]) == ("run_replayed", "0")
    claim = store.claim("run-1", new_token(), lease_ttl_ms=LEASE_MS)
    assert (claim.attempt, claim.resume_seq) == (1, resumes_before + 1)  # resume counter never resets


def test_replay_from_start_drops_the_checkpoint(store: RedisStore, raw: redis.Redis) -> None:
    """replay(from_start=True) deletes the checkpoint and zeroes checkpoints/next_node."""
    _dead_run(store)
    info = store.replay("run-1", from_start=True)
    assert (info.checkpoints, info.next_node) == (0, None)
    assert store.load_checkpoint("run-1") is None and store.checkpoint_info("run-1") is None
    assert not raw.exists(keys.ckpt("run-1"))
    assert store.events("run-1")[-1].fields["from_start"] == "1"


def test_replay_of_cancelled_run(store: RedisStore) -> None:
    """A cancelled run replays too, and runs again with a fresh budget."""
    make_run(store)
    store.cancel("run-1")
    assert store.replay("run-1").status is Status.QUEUED
    assert store.claim("run-1", new_token(), lease_ttl_ms=LEASE_MS).attempt == 1


def test_purge_deletes_keys_and_index_entries(store: RedisStore, raw: redis.Redis) -> None:
    """purge() of a dead run deletes its keys, idem key and index entries; active runs are refused."""
    _dead_run(store, idempotency_key="idem-purge")
    assert store.purge("run-1") is True
    for key in [*keys.run_keys("run-1"), keys.idem(keys.idem_scope("demo", "idem-purge"))]:
        assert not raw.exists(key), key
    shard = keys.STANDALONE.of("run-1")
    indexes = [keys.all_runs, keys.dead, keys.leases, keys.due]
    for index in [*(i(shard) for i in indexes), *(keys.status_set(s, shard) for s in keys.STATUS_ORDER)]:
        assert raw.zscore(index, "run-1") is None, index
    assert store.purge("run-1") is False
    with pytest.raises(errors.RunNotFound):
        store.get("run-1")

    make_run(store, "active")
    with pytest.raises(errors.OperationRefused, match="queued"):
        store.purge("active")
    assert store.get("active").status is Status.QUEUED


def test_a_succeeded_run_can_be_purged_too(store: RedisStore, raw: redis.Redis) -> None:
    """Every finished run, not only a dead or cancelled one, is purged with its keys and index entries."""
    make_run(store, "done")
    ctx = start(store, "done")
    store.succeed(ctx, output_json="1")
    assert store.get("done").status is Status.SUCCEEDED
    assert store.purge("done") is True
    assert not any(raw.exists(key) for key in keys.run_keys("done"))
    shard = keys.STANDALONE.of("done")
    assert raw.zscore(keys.status_set(Status.SUCCEEDED, shard), "done") is None
    assert raw.zscore(keys.all_runs(shard), "done") is None


def test_list_runs_newest_first_with_filters(store: RedisStore, fake_clock: FakeClock) -> None:
    """list_runs() returns newest first, by status set or rg:all, filtered by graph, capped by limit."""
    for i in range(5):
        store.create_run(
            f"r{i}",
            graph="even" if i % 2 == 0 else "odd",
            inputs_json="{}",
            max_attempts=3,
            dispatch_grace_ms=0,
        )
        fake_clock.advance(10)
    start(store, "r1")
    assert [r.run_id for r in store.list_runs()] == ["r4", "r3", "r2", "r1", "r0"]
    assert [r.run_id for r in store.list_runs(limit=2)] == ["r4", "r3"]
    assert [r.run_id for r in store.list_runs(graph="even")] == ["r4", "r2", "r0"]
    assert [r.run_id for r in store.list_runs(status=Status.RUNNING)] == ["r1"]
    assert [r.run_id for r in store.list_runs(status="queued", graph="odd")] == ["r3"]


def test_dead_letters_filters_by_graph_and_reason(store: RedisStore, fake_clock: FakeClock) -> None:
    """dead_letters() lists rg:dead newest first, filtered by graph and reason."""
    _dead_run(store, "d1")
    fake_clock.advance(10)
    store.dead_letter("d2", reason="unknown_graph", error_type="UnknownGraph", message="m", graph="ghost")
    fake_clock.advance(10)
    _dead_run(store, "d3")
    assert [r.run_id for r in store.dead_letters()] == ["d3", "d2", "d1"]
    assert [r.run_id for r in store.dead_letters(graph="ghost")] == ["d2"]
    assert [r.run_id for r in store.dead_letters(reason="step_failed")] == ["d3", "d1"]
    assert [r.run_id for r in store.dead_letters(limit=1)] == ["d3"]


def test_listings_drop_runs_whose_keys_expired(store: RedisStore, raw: redis.Redis) -> None:
    """An index entry whose run record expired is skipped by listings and pruned from every index."""
    _dead_run(store, "old")
    raw.delete(*keys.run_keys("old"))  # as if the dead retention had passed
    assert store.dead_letters() == []
    assert store.list_runs() == []
    assert (
        raw.zscore(keys.all_runs(keys.STANDALONE.of("old")), "old") is None
        and raw.zscore(keys.dead(keys.STANDALONE.of("old")), "old") is None
    )


def test_prune_drops_expired_terminal_runs_from_indexes(
    store: RedisStore, raw: redis.Redis, fake_clock: FakeClock
) -> None:
    """prune() drops index entries of terminal runs past retention whose keys are gone; keeps live ones."""
    make_run(store, "gone")
    store.succeed(start(store, "gone"), "1")
    make_run(store, "kept")
    store.succeed(start(store, "kept"), "1")
    raw.delete(*keys.run_keys("gone"))
    assert store.prune() == 0  # retention not passed yet: not even looked at
    fake_clock.advance(RUN_RETENTION_S * 1000 + 1)
    assert store.prune() == 1
    assert raw.zscore(keys.all_runs(keys.STANDALONE.of("gone")), "gone") is None
    assert raw.zscore(keys.status_set(Status.SUCCEEDED, keys.STANDALONE.of("gone")), "gone") is None
    assert raw.zscore(keys.all_runs(keys.STANDALONE.of("kept")), "kept") is not None
