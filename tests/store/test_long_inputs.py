"""Long inputs are a key of their own, so the run hash stays a compact listpack.

A hash with one value over 64 bytes is a hash table in Redis, where each field costs some 60
bytes more: inputs that long used to make every run hash one. Every reader finds them where
they are (the claim, a checkpoint read, a version export), and a run's end, replay and purge
treat the key as the run's others.
"""

from __future__ import annotations

import json

import redis

from reflexr_graph.core.port import Boundary
from reflexr_graph.store import RedisStore, keys
from tests.store.conftest import RUN_RETENTION_S
from tests.store.support import fail_once, make_run, start

LONG = json.dumps({"text": "x" * 200})
SHORT = '{"n": 1}'


def test_long_inputs_leave_the_run_hash_a_listpack(store: RedisStore, raw: redis.Redis) -> None:
    make_run(store, inputs_json=LONG)
    assert raw.object("encoding", keys.run("run-1")) == b"listpack"
    assert raw.get(keys.inputs("run-1")) == LONG.encode()
    assert raw.hget(keys.run("run-1"), "inputs") is None
    claim = store.claim("run-1", "token-a", lease_ttl_ms=5_000)
    assert claim.claimed and claim.inputs_json == LONG


def test_short_inputs_stay_in_the_run_hash_with_no_key_more(store: RedisStore, raw: redis.Redis) -> None:
    make_run(store, inputs_json=SHORT)
    assert not raw.exists(keys.inputs("run-1"))
    assert raw.hget(keys.run("run-1"), "inputs") == SHORT.encode()
    assert store.claim("run-1", "token-a", lease_ttl_ms=5_000).inputs_json == SHORT


def test_a_checkpoint_read_and_an_export_carry_the_long_inputs(store: RedisStore) -> None:
    make_run(store, inputs_json=LONG)
    ctx = start(store)
    store.save_checkpoint(ctx, Boundary('{"at": 1}', seq=1, next_node="b"))
    assert store.read_checkpoint("run-1", 1).inputs_json == LONG
    [exported] = store.stored_checkpoints([("run-1", "running", None)])
    assert (exported.inputs, exported.checkpoint) == (LONG, '{"at": 1}')


def test_the_long_inputs_expire_are_kept_on_replay_and_go_with_a_purge(
    store: RedisStore, raw: redis.Redis
) -> None:
    make_run(store, max_attempts=1, inputs_json=LONG)
    fail_once(store, start(store))  # out of attempts: dead, its keys expire
    assert raw.ttl(keys.inputs("run-1")) > 0
    store.replay("run-1")
    assert raw.ttl(keys.inputs("run-1")) == -1  # live again: nothing of it expires
    ctx = start(store)
    assert ctx.run_id == "run-1"
    store.succeed(ctx, "1")
    assert 0 < raw.ttl(keys.inputs("run-1")) <= RUN_RETENTION_S
    assert store.purge("run-1")
    assert not raw.exists(keys.inputs("run-1"))


def test_the_run_hash_does_not_repeat_its_run_id(store: RedisStore, raw: redis.Redis) -> None:
    """The key names the run: readers take the id from there, every one of them."""
    make_run(store)
    assert raw.hget(keys.run("run-1"), "run_id") is None
    assert store.get("run-1").run_id == "run-1"
    assert [r.run_id for r in store.list_runs()] == ["run-1"]
    assert store.cancel("run-1", now=True).run_id == "run-1"  # a script's snapshot of the run
