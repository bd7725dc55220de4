"""Each script, called through the real store with a distinct value in every field of its contract,
writes each value where its name says (store/registry.py, tests/store/test_contracts.py).

The registry makes a field's ARGV position and its Lua name one thing, so a field moved in its
dataclass moves in the script too. What no position check sees is meaning: a caller that builds a
contract by position, or a script that reads ``graph`` where it means ``inputs``. Two fields of one
type swapped either way put each value where the other belongs: every value here is distinct from
every other, and each is looked for where its name says it goes. A field a script only compares
(never stores) is checked by the outcome it decides. Left out: save_checkpoint's ``events_cap``
(Redis trims a stream to about MAXLEN, by whole nodes: a cap leaves no exact trace), and fail's
bounds (dead retention, counted, max interruptions), which tests/store/test_lifecycle.py drives.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import redis

from reflexr_graph import clock, errors
from reflexr_graph.core.port import Boundary, Lane, Notes, Record
from reflexr_graph.core.schedules import Schedule, next_fire_ms
from reflexr_graph.model import RunEvent
from reflexr_graph.store import ClaimOutcome, RedisStore, hot_path, keys
from reflexr_graph.store.attempts import NewRun, new_run
from reflexr_graph.store.contracts import SwapPayloadArgs
from reflexr_graph.store.interventions import cancel_run
from reflexr_graph.store.ops import Eval, QueuedMessage, one
from reflexr_graph.store.records import ForkSeed
from reflexr_graph.store.schedules import put_schedule
from reflexr_graph.store.waits import send_signal
from tests.store.conftest import DEAD_RETENTION_S
from tests.store.support import make_run, start


def _hash(raw: redis.Redis, key: str) -> dict[str, str]:
    return {_s(k): _s(v) for k, v in raw.hgetall(key).items()}


def _s(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _event(store: RedisStore, run_id: str, kind: str) -> RunEvent:
    return next(e for e in reversed(store.events(run_id)) if e.type == kind)


def _lives(raw: redis.Redis, key: str, ttl_s: int) -> bool:
    """The key expires in ``ttl_s`` (the clock is faked; Redis's own counts down while the test runs)."""
    return ttl_s - 5 < int(raw.ttl(key)) <= ttl_s


def test_create_run_keeps_each_argument_as_its_name_says(store: RedisStore, raw: redis.Redis) -> None:
    parent = start(store, make_run(store, "parent-1"))
    now = clock.now_ms()
    run = NewRun(
        run_id="child-1",
        graph="graph-g",
        inputs_json='{"inputs": 1}',
        state_json='{"state": 2}',
        idempotency_key="key-k",
        max_attempts=7,
        dispatch_grace_ms=4_111,
        trace_context='{"trace": 3}',
        tags={"tag": "t"},
        priority=3,
        message=QueuedMessage(queue_key="broker-list", item="message-m"),
        parent="parent-1",
        parent_token=parent.token,
        parent_field="parent-field-f",
    )
    child_id, created = store.do(new_run(run))
    assert (child_id, created) == ("child-1", True)
    kept = _hash(raw, keys.run("child-1"))
    assert (kept["graph"], kept["inputs"], kept["state"]) == ("graph-g", '{"inputs": 1}', '{"state": 2}')
    assert (kept["idempotency_key"], kept["max_attempts"], kept["trace"]) == ("key-k", "7", '{"trace": 3}')
    assert (kept["tags"], kept["priority"], kept["parent"]) == ('{"tag":"t"}', "3", "parent-1")
    assert kept["digest"] != ""  # the request's inputs and state, which a second create compares
    assert raw.zscore(keys.due(keys.STANDALONE.of("child-1")), "child-1") == now + 4_111
    assert [_s(v) for v in raw.lrange("broker-list", 0, -1)] == ["message-m"]
    assert raw.zscore(keys.tag_index("tag", "t", keys.STANDALONE.of("child-1")), "child-1") == now
    # parent_token fenced the write into the parent; parent_field is where it is recorded.
    assert _s(raw.hget(keys.memo("parent-1"), "parent-field-f") or b"") == '"child-1"'
    # expected_owner and digest are compared, not kept as given: the key's owner is found (the
    # caller expected none first), then the digest tells the same request from another.
    same = NewRun("child-2", "graph-g", '{"inputs": 1}', '{"state": 2}', "key-k", 1, 1)
    assert store.do(new_run(same)) == ("child-1", False)
    with pytest.raises(errors.IdempotencyConflict):
        store.do(new_run(NewRun("child-3", "graph-g", '{"inputs": 9}', '{"state": 2}', "key-k", 1, 1)))


def test_a_fork_keeps_each_of_its_arguments_as_its_name_says(store: RedisStore, raw: redis.Redis) -> None:
    fork = ForkSeed(
        source_run_id="source-s",
        seq=5,
        checkpoint='{"checkpoint": 5}',
        next_node="node-n",
        state_edited=True,
        output_json=None,
        digest="",
    )
    store.do(new_run(NewRun("fork-1", "graph-g", "{}", None, None, 2, 1, fork=fork)))
    kept = _hash(raw, keys.run("fork-1"))
    assert (kept["forked_from"], kept["forked_at_seq"], kept["next_node"]) == ("source-s", "5", "node-n")
    assert _s(raw.hget(keys.ckpt("fork-1"), "5") or b"") == '{"checkpoint": 5}'
    forked = _event(store, "fork-1", "run_forked").fields
    assert (forked["from_run"], forked["seq"], forked["state_edited"]) == ("source-s", "5", "1")
    # fork_output and retention_s: a fork of a finished checkpoint is created succeeded, kept that long.
    done = ForkSeed("source-s", 6, '{"checkpoint": 6}', None, False, '"output-o"', "")
    store.do(new_run(NewRun("fork-2", "graph-g", "{}", None, None, 2, 1, fork=done, retention_s=1_234)))
    assert _hash(raw, keys.run("fork-2"))["output"] == '"output-o"'
    assert _lives(raw, keys.run("fork-2"), 1_234)


def test_claim_keeps_each_argument_as_its_name_says(store: RedisStore, raw: redis.Redis) -> None:
    make_run(store, "run-1")
    # newest is only compared: an unstarted run goes on the newest version a worker serves.
    worker = "worker-w"
    refused = store.claim("run-1", "token-t", lease_ttl_ms=1_000, worker=worker, version="v1", newest="v2")
    assert (refused.outcome, refused.version) == (ClaimOutcome.VERSION, "v2")
    claim = store.claim("run-1", "token-t", lease_ttl_ms=2_345, worker=worker, version="v2", newest="v2")
    assert claim.claimed
    kept = _hash(raw, keys.run("run-1"))
    assert (kept["token"], kept["version"]) == ("token-t", "v2")
    assert raw.zscore(keys.leases(keys.STANDALONE.of("run-1")), "run-1") == clock.now_ms() + 2_345
    assert _event(store, "run-1", "attempt_started").fields["worker"] == "worker-w"
    # dead_retention_s: a run out of attempts is dead-lettered by the claim, and kept that long.
    make_run(store, "run-2", max_attempts=1)
    raw.hset(keys.run("run-2"), "attempts", 1)
    assert store.claim("run-2", "token-u", lease_ttl_ms=1_000).outcome is ClaimOutcome.DEAD
    assert _lives(raw, keys.run("run-2"), DEAD_RETENTION_S)


def _saved_where_named(store: RedisStore, raw: redis.Redis, run_id: str, seq: int) -> None:
    kept = _hash(raw, keys.run(run_id))
    assert _s(raw.hget(keys.ckpt(run_id), str(seq)) or b"") == f'{{"checkpoint": {seq}}}'
    assert (kept["ck_last"], kept["next_node"]) == (str(seq), f"node-{seq}")
    assert kept["updated_at"] == str(clock.now_ms())
    assert (kept["skipped"], kept["reused_steps"], kept["reused_calls"]) == ("2", "3", "4")
    skipped = _event(store, run_id, "boundaries_skipped").fields
    assert (skipped["count"], skipped["kinds"]) == ("2", "kinds-k")


def test_save_checkpoint_keeps_each_argument_as_its_name_says(store: RedisStore, raw: redis.Redis) -> None:
    """Through the store's client and through the attempt's held connection (store/hot_path.py)."""
    store.options = dataclasses.replace(store.options, checkpoint_history=1)
    ctx = start(store, make_run(store, "run-1"))
    raw.zadd(keys.limit_slots("limit-l"), {"member-m": 1})
    notes = Notes(skipped=2, skip_kinds="kinds-k", reused_steps=3, reused_calls=4)
    returning = [("limit-l", "member-m")]
    store.save_checkpoint(ctx, Boundary('{"checkpoint": 1}', seq=1, next_node="node-1"), returning=returning)
    assert raw.zcard(keys.limit_slots("limit-l")) == 0  # the member given back from its slots
    store.save_checkpoint(ctx, Boundary('{"checkpoint": 2}', seq=2, next_node="node-2", notes=notes))
    _saved_where_named(store, raw, "run-1", 2)
    with hot_path.HotPath(store) as held:
        store.save_checkpoint(ctx, Boundary('{"checkpoint": 3}', seq=3, next_node="node-3"), via=held)
    kept = _hash(raw, keys.run("run-1"))
    assert (kept["ck_last"], kept["next_node"], kept["ck_first"]) == ("3", "node-3", "2")  # history: 1 kept
    assert raw.hexists(keys.ckpt("run-1"), "1") is False


def test_record_keeps_each_argument_as_its_name_says(store: RedisStore, raw: redis.Redis) -> None:
    ctx = start(store, make_run(store, "run-1"))
    raw.zadd(keys.limit_slots("limit-l"), {"member-m": 1})
    lane = Lane(node="node-n", branch="map:1", started_ms=11, ended_ms=22)
    store.save_record(ctx, Record("field-f", '"value-v"', lane=lane), returning=[("limit-l", "member-m")])
    with hot_path.HotPath(store) as held:
        store.save_record(ctx, Record("field-g", '"value-w"', lane=Lane("node-o", "map:2", 33, 44)), via=held)
    assert _hash(raw, keys.memo("run-1")) == {"field-f": '"value-v"', "field-g": '"value-w"'}
    lanes = _hash(raw, keys.lanes("run-1"))
    assert lanes == {"1|1|node-n|map:1": "11|22", "1|1|node-o|map:2": "33|44"}
    assert raw.zcard(keys.limit_slots("limit-l")) == 0


def test_signal_keeps_each_argument_as_its_name_says(store: RedisStore, raw: redis.Redis) -> None:
    ctx = start(store, make_run(store, "run-1"))
    store.wait(ctx, field="wait-f", signal="name-n", wake_at_ms=None)
    message = QueuedMessage(queue_key="broker-list", item="message-m")
    store.do(send_signal("run-1", "name-n", '"value-v"', 3_210, message, by="by-b"))
    assert _hash(raw, keys.mailbox("run-1")) == {"name-n": '"value-v"'}
    assert raw.zscore(keys.due(keys.STANDALONE.of("run-1")), "run-1") == clock.now_ms() + 3_210
    assert [_s(v) for v in raw.lrange("broker-list", 0, -1)] == ["message-m"]
    received = _event(store, "run-1", "signal_received").fields
    assert (received["signal"], received["by"]) == ("name-n", "by-b")


def test_wait_keeps_each_argument_as_its_name_says(store: RedisStore, raw: redis.Redis) -> None:
    ctx = start(store, make_run(store, "run-1"))
    wake = clock.now_ms() + 5_000
    store.wait(ctx, field="wait-f", signal="limit:key-k", wake_at_ms=wake, waited_ms=678)
    assert _s(raw.hget(keys.memo("run-1"), "wait-f|at") or b"") == str(wake)
    kept = _hash(raw, keys.run("run-1"))
    assert (kept["waiting_for"], kept["wake_at"]) == ("limit:key-k", str(wake))
    assert kept["limit_since_key"] == "key-k"
    assert kept["limit_since"] == str(clock.now_ms() - 678)


def test_cancel_keeps_each_argument_as_its_name_says(store: RedisStore, raw: redis.Redis) -> None:
    start(store, make_run(store, "run-1"))
    # now = False: a running run is only marked, with the retention its end will keep it for.
    store.do(cancel_run("run-1", 2_468, False, "by-b"))
    assert _hash(raw, keys.run("run-1"))["cancel"] == "2468"
    assert _event(store, "run-1", "cancel_requested").fields["by"] == "by-b"
    make_run(store, "run-2")
    store.do(cancel_run("run-2", 1_357, True, "by-c"))
    assert _lives(raw, keys.run("run-2"), 1_357)
    assert _event(store, "run-2", "run_cancelled").fields["by"] == "by-c"


def test_fail_keeps_each_argument_as_its_name_says(store: RedisStore, raw: redis.Redis) -> None:
    ctx = start(store, make_run(store, "run-1"))
    notes = Notes(skipped=2, skip_kinds="kinds-k", reused_steps=3, reused_calls=4)
    outcome = store.fail(
        ctx,
        error_type="type-t",
        message="message-m",
        traceback="traceback-b",
        reason="reason-r",
        permanent=False,
        retry_delay_ms=1_111,
        notes=notes,
    )
    assert outcome == "retrying"
    kept = _hash(raw, keys.run("run-1"))
    assert (kept["error_type"], kept["error"], kept["reason"]) == ("type-t", "message-m", "reason-r")
    assert _s(raw.get(keys.tb("run-1")) or b"") == "traceback-b"
    assert kept["retry_at"] == str(clock.now_ms() + 1_111)
    assert (kept["skipped"], kept["reused_steps"], kept["reused_calls"]) == ("2", "3", "4")


def test_schedule_put_keeps_each_argument_as_its_name_says(store: RedisStore, raw: redis.Redis) -> None:
    schedule = Schedule(name="name-n", graph="graph-g", every_s=60)
    store.do(put_schedule(schedule, change=False))
    assert _s(raw.hget(keys.SCHEDULES, "name-n") or b"") == schedule.model_dump_json()
    assert raw.zscore(keys.SCHEDULE_NEXT, "name-n") == next_fire_ms(schedule, clock.now_ms())
    # change: False adds, and refuses a name taken; True changes, and refuses a name not there.
    with pytest.raises(errors.OperationRefused):
        store.do(put_schedule(schedule, change=False))
    with pytest.raises(errors.ScheduleNotFound):
        store.do(put_schedule(schedule.model_copy(update={"name": "other-o"}), change=True))
    paused = schedule.model_copy(update={"paused": True})
    store.do(put_schedule(paused, change=True))  # next_ms None: no fire is due
    assert raw.zscore(keys.SCHEDULE_NEXT, "name-n") is None
    assert json.loads(_s(raw.hget(keys.SCHEDULES, "name-n") or b""))["paused"] is True


def test_swap_payload_keeps_each_argument_as_its_name_says(store: RedisStore, raw: redis.Redis) -> None:
    """rekey's compare-and-set (store/rekey.py): ``rewritten`` lands in ``field`` only while it holds
    ``read``; field '' is the key itself, a string whose expiry stays (KEEPTTL)."""

    def swap(key: str, field: str, read: str, rewritten: str) -> int:
        args = SwapPayloadArgs(field=field, read=read, rewritten=rewritten).argv()
        return int(store.do(one(Eval("swap_payload", [key], args))))

    raw.hset("hash-h", mapping={"field-f": "expected-e", "field-g": "other-o"})
    assert swap("hash-h", "field-f", "expected-e", "value-v") == 1
    assert _hash(raw, "hash-h") == {"field-f": "value-v", "field-g": "other-o"}
    # read is only compared: a field that holds another value (changed since it was read) stays.
    assert swap("hash-h", "field-g", "expected-e", "value-w") == 0
    assert _hash(raw, "hash-h") == {"field-f": "value-v", "field-g": "other-o"}
    raw.set("string-s", "expected-x", ex=900)
    assert swap("string-s", "", "expected-y", "value-y") == 0
    assert swap("string-s", "", "expected-x", "value-z") == 1
    assert _s(raw.get("string-s") or b"") == "value-z" and _lives(raw, "string-s", 900)
