"""The checkpoint history: kept by the scripts that save, bounded, expired and purged with the run,
restored by a replay from a seq, and seeded into a fork."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis

from reflexr_graph import errors
from reflexr_graph.core.port import AttemptContext, Boundary, Record
from reflexr_graph.model import Status
from reflexr_graph.store import RedisStore, keys
from reflexr_graph.store.records import ForkSeed
from reflexr_graph.store.settings import StoreOptions
from tests.redis_server import RedisFactory
from tests.store.conftest import DEAD_RETENTION_S, RUN_RETENTION_S
from tests.store.support import FakeClock, fail_once, make_run, start
from tests.waiting import wait_for


def _payload(seq: int) -> str:
    return json.dumps({"seq": seq, "state": {"count": seq}})


def _save(store: RedisStore, ctx: AttemptContext, seqs: range) -> None:
    for seq in seqs:
        store.save_checkpoint(ctx, Boundary(_payload(seq), seq=seq, next_node=f"s{seq + 1}"))


def _kept(store: RedisStore, run_id: str = "run-1") -> list[int]:
    return [c.seq for c in store.checkpoints(run_id)]


@pytest.fixture
def bounded(redis_url: str, fake_clock: FakeClock) -> Iterator[RedisStore]:
    """A store whose runs keep three checkpoints before the latest."""
    s = RedisStore.from_url(
        redis_url,
        options=StoreOptions(
            run_retention_s=RUN_RETENTION_S, dead_retention_s=DEAD_RETENTION_S, checkpoint_history=3
        ),
    )
    try:
        yield s
    finally:
        s.close()


def test_every_checkpoint_is_kept_and_the_claim_still_gets_the_latest(
    store: RedisStore, fake_clock: FakeClock
) -> None:
    make_run(store)
    first = start(store)
    _save(store, first, range(1, 3))
    fail_once(store, first)
    second = start(store)
    for seq in range(3, 6):
        fake_clock.advance(1000)
        store.save_checkpoint(second, Boundary(_payload(seq), seq=seq, next_node=f"s{seq + 1}"))
    store.succeed(second, "5", checkpoint='{"finished": true}', seq=6)

    listed = store.checkpoints("run-1")
    assert [(c.seq, c.next_node, c.attempt, c.finished) for c in listed] == [
        (1, "s2", 1, False), (2, "s3", 1, False), (3, "s4", 2, False), (4, "s5", 2, False),
        (5, "s6", 2, False), (6, None, 2, True),
    ]  # fmt: skip
    assert [c.size for c in listed[:5]] == [len(_payload(s)) for s in range(1, 6)]
    assert listed[4].saved_at - listed[2].saved_at == 2.0
    for seq in range(1, 6):
        assert store.read_checkpoint("run-1", seq).payload == _payload(seq)
    assert store.read_checkpoint("run-1", 6).payload == '{"finished": true}'
    # The claim, and so the resume path, reads the latest alone, as before the history existed.
    assert store.load_checkpoint("run-1") == '{"finished": true}'


def test_the_bound_trims_the_oldest_in_the_same_script(bounded: RedisStore, raw: redis.Redis) -> None:
    make_run(bounded)
    _save(bounded, start(bounded), range(1, 8))
    assert _kept(bounded) == [4, 5, 6, 7]
    # Each kept checkpoint's payload is stored once: the trimmed ones are gone.
    assert sorted(int(f) for f in raw.hkeys(keys.ckpt("run-1"))) == [4, 5, 6, 7]
    with pytest.raises(errors.CheckpointNotFound) as caught:
        bounded.read_checkpoint("run-1", 2)
    assert caught.value.kept == [4, 5, 6, 7]
    assert "#4 to #7" in str(caught.value) and "REFLEXR_CHECKPOINT_HISTORY" in str(caught.value)


def test_a_bound_of_zero_keeps_only_the_latest(redis_url: str, raw: redis.Redis) -> None:
    store = RedisStore.from_url(redis_url, options=StoreOptions(checkpoint_history=0))
    try:
        make_run(store)
        ctx = start(store)
        _save(store, ctx, range(1, 5))
        assert _kept(store) == [4]
        store.succeed(ctx, "1", checkpoint='{"finished": true}', seq=5)
        assert _kept(store) == [5]
        assert raw.hkeys(keys.ckpt("run-1")) == [b"5"], "no payload of an earlier checkpoint is kept"
    finally:
        store.close()


def test_a_save_retried_after_a_lost_reply_keeps_one_entry(store: RedisStore) -> None:
    make_run(store)
    ctx = start(store)
    _save(store, ctx, range(1, 3))
    store.save_checkpoint(ctx, Boundary(_payload(2), seq=2, next_node="s3"))
    assert _kept(store) == [1, 2]


def test_the_history_expires_with_the_run_and_purge_deletes_it(store: RedisStore, raw: redis.Redis) -> None:
    make_run(store)
    ctx = start(store)
    _save(store, ctx, range(1, 4))
    history = (keys.ckpt("run-1"),)
    assert all(raw.ttl(k) == -1 for k in history), "no TTL while the run is active"
    fail_once(store, ctx, permanent=True)
    assert all(0 < raw.ttl(k) <= DEAD_RETENTION_S for k in history)
    store.replay("run-1")
    assert all(raw.ttl(k) == -1 for k in history), "a replay keeps the history for good again"
    store.cancel("run-1")
    assert all(0 < raw.ttl(k) <= RUN_RETENTION_S for k in history)
    assert store.purge("run-1")
    assert not any(raw.exists(k) for k in history)


def test_retention_removes_the_history_along_with_the_run(redis_url: str, raw: redis.Redis) -> None:
    store = RedisStore.from_url(redis_url, options=StoreOptions(run_retention_s=1))
    try:
        make_run(store)
        ctx = start(store)
        _save(store, ctx, range(1, 4))
        store.succeed(ctx, "1", checkpoint='{"finished": true}', seq=4)
        assert raw.hlen(keys.ckpt("run-1")) == 4
        wait_for(lambda: not any(raw.exists(k) for k in keys.run_keys("run-1")), 10, "the run's retention")
        with pytest.raises(errors.RunNotFound):
            store.checkpoints("run-1")
    finally:
        store.close()


def test_replay_from_a_seq_backs_out_of_the_steps_after_it(store: RedisStore, raw: redis.Redis) -> None:
    make_run(store)
    ctx = start(store)
    _save(store, ctx, range(1, 5))
    store.save_record(ctx, Record("c|s5|x", "1"))
    fail_once(store, ctx, permanent=True)

    info = store.replay("run-1", from_seq=2)
    assert (info.status, info.next_node) == (Status.QUEUED, "s3")
    assert _kept(store) == [1, 2]
    assert store.load_checkpoint("run-1") == _payload(2)
    assert not raw.exists(keys.memo("run-1")), "records of the dropped steps must not answer again"
    replayed = store.events("run-1")[-1]
    assert (replayed.type, replayed.fields["seq"], replayed.fields["dropped"]) == ("run_replayed", "2", "2")
    # Numbering goes on from the restored checkpoint.
    _save(store, start(store), range(3, 4))
    assert _kept(store) == [1, 2, 3]


def test_replay_from_an_unknown_seq_changes_nothing(store: RedisStore) -> None:
    make_run(store)
    ctx = start(store)
    _save(store, ctx, range(1, 3))
    fail_once(store, ctx, permanent=True)
    before = store.get("run-1")
    with pytest.raises(errors.CheckpointNotFound) as caught:
        store.replay("run-1", from_seq=7)
    assert caught.value.kept == [1, 2]
    assert store.get("run-1") == before and _kept(store) == [1, 2]


def test_replay_from_the_start_drops_the_history(store: RedisStore) -> None:
    make_run(store)
    ctx = start(store)
    _save(store, ctx, range(1, 4))
    fail_once(store, ctx, permanent=True)
    store.replay("run-1", from_start=True)
    assert _kept(store) == []
    with pytest.raises(errors.RunNotFound):
        store.checkpoints("no-such-run")
    with pytest.raises(errors.RunNotFound):
        store.read_checkpoint("no-such-run", 1)


def _seed(output_json: str | None = None) -> ForkSeed:
    return ForkSeed(
        source_run_id="src",
        seq=3,
        checkpoint='{"seq": 3}',
        next_node=None if output_json else "s4",
        state_edited=True,
        output_json=output_json,
        digest="d1",
    )


def _create_fork(store: RedisStore, run_id: str, seed: ForkSeed, key: str | None = None) -> tuple[str, bool]:
    return store.create_run(
        run_id,
        graph="demo",
        inputs_json='{"n": 1}',
        idempotency_key=key,
        max_attempts=3,
        dispatch_grace_ms=60_000,
        fork=seed,
    )


def test_a_fork_starts_with_its_seed_as_its_latest_checkpoint(store: RedisStore, raw: redis.Redis) -> None:
    assert _create_fork(store, "fork-1", _seed(), key="f") == ("fork-1", True)
    info = store.get("fork-1")
    assert (info.status, info.forked_from, info.forked_at_seq, info.next_node) == (
        Status.QUEUED,
        "src",
        3,
        "s4",
    )
    assert [(c.seq, c.attempt) for c in store.checkpoints("fork-1")] == [(3, 0)]
    assert store.claim("fork-1", "t", lease_ttl_ms=30_000).checkpoint == '{"seq": 3}'
    forked = store.events("fork-1")[1]
    assert (forked.type, forked.fields) == (
        "run_forked",
        {"from_run": "src", "seq": "3", "state_edited": "1"},
    )
    # The same key with the same request is the same fork; with another, a conflict.
    assert _create_fork(store, "fork-2", _seed(), key="f") == ("fork-1", False)
    other = ForkSeed(**{**_seed().__dict__, "digest": "d2"})
    with pytest.raises(errors.IdempotencyConflict):
        _create_fork(store, "fork-3", other, key="f")


def test_a_fork_of_the_finished_checkpoint_is_created_succeeded(store: RedisStore, raw: redis.Redis) -> None:
    _create_fork(store, "fork-1", _seed(output_json='{"answer": 42}'))
    info = store.get("fork-1")
    assert (info.status, info.output, info.attempts) == (Status.SUCCEEDED, {"answer": 42}, 0)
    assert raw.zscore(keys.due(keys.STANDALONE.of("fork-1")), "fork-1") is None, (
        "no message is due: no attempt runs"
    )
    assert 0 < raw.ttl(keys.run("fork-1")) <= RUN_RETENTION_S
    assert [e.type for e in store.events("fork-1")] == ["run_enqueued", "run_forked", "run_succeeded"]


def test_a_save_writes_its_own_payload_once_and_no_earlier_one(private_redis: RedisFactory) -> None:
    """Each checkpoint is stored once: a save writes its payload, and never reads or writes the one
    it replaces (which stays where it was written, as part of the history). Seen with MONITOR: no
    command of a save carries the previous checkpoint's payload."""
    server = private_redis()
    store = RedisStore.from_url(server.url)
    observer = redis.Redis.from_url(server.url)
    seen: list[str] = []
    try:
        make_run(store)
        ctx = start(store)
        store.preload_scripts()
        store.save_checkpoint(ctx, Boundary(_payload(1) + " " * 2000, seq=1, next_node="s2"))
        with observer.monitor() as monitor:  # watches from here
            store.save_checkpoint(ctx, Boundary(_payload(2) + " " * 2000, seq=2, next_node="s3"))
            store.client.echo("end of the save")
            while not seen or "end of the save" not in seen[-1]:
                seen.append(str(monitor.next_command()["command"]))
        with_payload = [c for c in seen if '"seq": 1' in c]
        assert with_payload == [], "the previous checkpoint was copied"
        assert sum('"seq": 2' in c for c in seen) == 2, "the EVALSHA, and one HSET of its payload"
        assert [c.seq for c in store.checkpoints("run-1")] == [1, 2]
        assert store.read_checkpoint("run-1", 1).payload.startswith(_payload(1))
    finally:
        observer.close()
        store.close()


def test_a_checkpoint_saved_before_the_upgrade_is_resumed_from(store: RedisStore, raw: redis.Redis) -> None:
    """A run whose latest checkpoint was written as the ckpt hash's 'data' (the layout before each
    checkpoint was stored once) resumes from it: the claim adopts it as seq -> JSON."""
    make_run(store)
    ctx = start(store)
    store.save_checkpoint(ctx, Boundary(_payload(3), seq=3, next_node="s4"))
    fail_once(store, ctx)
    # As that layout left it: the latest in 'data' and its fields, no pointer in the run hash.
    raw.delete(keys.ckpt("run-1"))
    raw.hset(
        keys.ckpt("run-1"),
        mapping={"data": _payload(3), "seq": 3, "saved_at": 1, "size": 9, "attempt": 1, "next_node": "s4"},
    )
    raw.hdel(keys.run("run-1"), "ck_first", "ck_last", "c:3")
    claim = store.claim("run-1", "tok-after", lease_ttl_ms=30_000)
    assert claim.claimed and claim.checkpoint == _payload(3)
    assert [(c.seq, c.next_node) for c in store.checkpoints("run-1")] == [(3, "s4")]
    store.save_checkpoint(claim.context(), Boundary(_payload(4), seq=4, next_node="s5"))
    assert _kept(store) == [3, 4]
    assert sorted(raw.hkeys(keys.ckpt("run-1"))) == [b"3", b"4"]
