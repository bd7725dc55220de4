"""Records of work finished between two checkpoints (issue 9): fenced, brought by the claim, dropped by
the next checkpoint, gone with the run."""

from __future__ import annotations

import pytest
import redis

from reflexr_graph import errors
from reflexr_graph.core.port import Boundary, Record
from reflexr_graph.store import RedisStore, keys
from tests.store.support import FakeClock, fail_once, make_run, new_token, start


def test_records_come_with_the_claim_and_go_with_the_next_checkpoint(
    store: RedisStore, raw: redis.Redis
) -> None:
    make_run(store)
    first = start(store)
    store.save_record(first, Record("b|classify|map:7|k1", '{"label": "urgent"}'))
    store.save_record(first, Record("c|plan|-|k2|llm|0", '"plan text"'))
    fail_once(store, first)
    claim = store.claim("run-1", new_token(), lease_ttl_ms=30_000)
    assert claim.records == {"b|classify|map:7|k1": '{"label": "urgent"}', "c|plan|-|k2|llm|0": '"plan text"'}
    store.save_checkpoint(claim.context(), Boundary("{}", seq=1, next_node="after_join"))
    assert not raw.exists(keys.memo("run-1")), "the checkpoint holds that work now"
    assert store.load_records("run-1") == {}


def test_a_record_is_fenced_by_the_attempts_token(store: RedisStore, fake_clock: FakeClock) -> None:
    make_run(store)
    stale = start(store, lease_ms=1_000)
    fake_clock.advance(2_000)
    store.reap()
    start(store)
    with pytest.raises(errors.FencedOut):
        store.save_record(stale, Record("c|s|-|k|x|0", "1"))
    assert store.load_records("run-1") == {}


def test_records_expire_with_the_run_and_a_replay_from_the_start_drops_them(
    store: RedisStore, raw: redis.Redis
) -> None:
    make_run(store)
    ctx = start(store)
    store.save_record(ctx, Record("c|s|-|k|x|0", "1"))
    fail_once(store, ctx, permanent=True)
    assert raw.ttl(keys.memo("run-1")) > 0, "a dead run's records expire with it"
    store.replay("run-1")
    assert store.load_records("run-1") == {"c|s|-|k|x|0": "1"}, "a replay resumes, records and all"
    fail_once(store, start(store), permanent=True)
    store.replay("run-1", from_start=True)
    assert store.load_records("run-1") == {}, "from the start repeats everything"
    fail_once(store, start(store), permanent=True)
    store.purge("run-1")
    assert not raw.exists(keys.memo("run-1"))
