"""upgrade.lua and claim.lua on a real Redis for the runs ``upgrade --include-running`` marks (G9):
a running run is marked, not moved, and no attempt of it starts on the version it leaves; a run
waiting for a signal moves at once, and resuming goes on waiting on the new version."""

from __future__ import annotations

from typing import cast

import redis

from reflexr_graph.core.action import GraphAction
from reflexr_graph.core.port import AttemptContext, Boundary
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from reflexr_graph.store.records import ClaimOutcome
from reflexr_graph.store.redis_store import RedisStore
from reflexr_graph.store.upgrades import mark_of, move_marked, upgrade_run
from reflexr_graph.store.versions import latest_checkpoints
from tests.store.support import make_run, new_token, start

VERSIONS = ("v1", "v2")
OLD_CHECKPOINT = '{"seq": 1, "by": "v1"}'
NEW_CHECKPOINT = '{"seq": 1, "by": "v2"}'


def _on_v1(store: RedisStore, r: redis.Redis, run_id: str) -> AttemptContext:
    """A run whose attempt on v1 saved checkpoint 1 and is still running."""
    make_run(store, run_id)
    ctx = start(store, run_id)
    r.hset(keys.run(run_id), "version", "v1")  # as its first claim, on a v1 worker, wrote it
    store.save_checkpoint(ctx, Boundary(OLD_CHECKPOINT, seq=1, next_node="b"))
    return ctx


def _mark(store: RedisStore, run_id: str, *, resume: bool = True) -> str:
    return store.do(upgrade_run(run_id, "demo", VERSIONS, mark=mark_of("v1", resume)))


def test_a_running_run_is_marked_not_moved_and_its_next_attempt_starts_on_no_other_version(
    store: RedisStore, redis_client: redis.Redis
) -> None:
    ctx = _on_v1(store, redis_client, "marked-1")
    assert _mark(store, "marked-1") == "marked"
    moved = store.do(upgrade_run("marked-1", "demo", VERSIONS, resume_with=NEW_CHECKPOINT, replaces_seq="1"))
    assert moved == "running", "its attempt goes on"
    assert (store.get("marked-1").status, store.load_checkpoint("marked-1")) == (
        Status.RUNNING,
        OLD_CHECKPOINT,
    )

    store.release(ctx)  # the attempt ends (a worker's stop hands it back)
    on_v1 = store.claim("marked-1", new_token(), lease_ttl_ms=30_000, graph="demo", version="v1")
    assert (on_v1.outcome, on_v1.version, on_v1.moving) == (ClaimOutcome.VERSION, "v2", True)
    assert store.get("marked-1").status is Status.RETRYING, "no attempt started on v1"


def test_a_run_waiting_for_a_signal_moves_at_once_and_goes_on_waiting_when_it_resumes(
    store: RedisStore, redis_client: redis.Redis
) -> None:
    ctx = _on_v1(store, redis_client, "waits-1")
    assert store.wait(ctx, field="w|b|-|x|approval|0", signal="approval", wake_at_ms=None).record is None
    assert _mark(store, "waits-1") == "marked"
    moved = store.do(upgrade_run("waits-1", "demo", VERSIONS, resume_with=NEW_CHECKPOINT, replaces_seq="1"))
    assert moved == "resumed"
    info = store.get("waits-1")
    assert (info.status, info.version, info.waiting_for) == (Status.WAITING, "v2", "approval")
    assert store.load_checkpoint("waits-1") == NEW_CHECKPOINT
    assert redis_client.hmget(keys.run("waits-1"), "upgrade_to", "upgrade_mark") == [None, None], "not marked"


def test_a_marked_run_that_starts_over_is_queued_from_its_first_step(
    store: RedisStore, redis_client: redis.Redis
) -> None:
    ctx = _on_v1(store, redis_client, "over-1")
    assert _mark(store, "over-1", resume=False) == "marked"
    store.release(ctx)
    assert store.do(move_marked("over-1", "demo", cast(GraphAction, _Code()))) is not None
    info = store.get("over-1")
    assert (info.status, info.version, store.load_checkpoint("over-1")) == (Status.QUEUED, "v2", None)


class _Code:
    """Enough of a GraphAction of version v2 for a move that starts over (no checkpoint is judged)."""

    name = "demo"
    version = "v2"


def test_a_marked_run_that_finished_on_its_version_loses_its_mark(
    store: RedisStore, redis_client: redis.Redis
) -> None:
    """Its attempt finished it on v1: nothing moves, and a replay of it is claimed where it is."""
    ctx = _on_v1(store, redis_client, "done-1")
    assert _mark(store, "done-1") == "marked"
    store.succeed(ctx, "{}")
    assert redis_client.hmget(keys.run("done-1"), "upgrade_to", "upgrade_mark") == [None, None], (
        "the mark went when the run ended, before any upgrade looked at it again"
    )
    assert store.do(upgrade_run("done-1", "demo", VERSIONS)) == "skip"


def test_a_marked_run_that_dies_or_is_cancelled_loses_its_mark(
    store: RedisStore, redis_client: redis.Redis
) -> None:
    """Every script that ends a run (set_status) drops the mark, not only succeed."""
    for run_id in ("dead-1", "cancelled-1"):
        ctx = _on_v1(store, redis_client, run_id)
        assert _mark(store, run_id) == "marked"
        if run_id == "dead-1":
            store.fail(
                ctx,
                error_type="Boom",
                message="m",
                traceback=None,
                reason="step_failed",
                permanent=True,
                retry_delay_ms=0,
            )
        else:
            store.cancel(run_id, now=True)
        assert store.get(run_id).status in (Status.DEAD, Status.CANCELLED)
        assert redis_client.hmget(keys.run(run_id), "upgrade_to", "upgrade_mark") == [None, None], run_id


def test_an_upgrade_judges_a_run_by_its_inputs_short_or_long(store: RedisStore) -> None:
    """Inputs over a listpack value are a key of their own (keys.inputs): the upgrade's read of
    each run's latest checkpoint finds them there, as it finds short ones in the run hash."""
    long_inputs = '{"text": "' + "x" * 200 + '"}'
    make_run(store, "short-in")
    make_run(store, "long-in", inputs_json=long_inputs)
    for run_id in ("short-in", "long-in"):
        store.save_checkpoint(start(store, run_id), Boundary(OLD_CHECKPOINT, seq=1, next_node="b"))
    assert store.do(latest_checkpoints(["short-in", "long-in", "none-such"])) == [
        ("1", OLD_CHECKPOINT, '{"n": 1}'),
        ("1", OLD_CHECKPOINT, long_inputs),
        ("", None, None),
    ]


def test_a_run_an_auto_upgrade_leaves_held_says_why_once_and_a_worker_of_its_version_still_wakes_it(
    store: RedisStore, redis_client: redis.Redis
) -> None:
    """upgrade.lua's hold (an auto-upgrade whose new graph cannot read the checkpoint): the run
    stays held for v1, its wait names why, 'upgrade_held' is recorded once however often the
    worker looks, and a v1 worker that comes back takes it as any held run."""
    ctx = _on_v1(store, redis_client, "kept-1")
    store.release(ctx)
    for _ in range(2):  # looked at within its grace, then after it: it waits for a v1 worker
        store.hold_version("kept-1", "demo", "v1", grace_ms=0, recheck_ms=100)
    assert store.get("kept-1").waiting_for == "version:v1"
    why = "version v2 cannot resume it: its next node 'b' no longer exists"
    outcomes = [store.do(upgrade_run("kept-1", "demo", VERSIONS, held_because=why)) for _ in range(2)]
    assert outcomes == ["kept", "still"]
    info = store.get("kept-1")
    assert (info.status, info.version, info.waiting_for) == (Status.WAITING, "v1", f"version:v1 ({why})")
    held = [e.fields for e in store.events("kept-1") if e.type == "upgrade_held"]
    assert held == [{"from_version": "v1", "version": "v2", "reason": why}]
    assert store.held_for_version("demo", "v1", 10) == ["kept-1"], "still in its version's held set"
    assert store.wake_version("kept-1", "demo", "v1", due_ms=1000)
    assert store.get("kept-1").status is Status.QUEUED
