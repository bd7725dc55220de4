"""Run event streams: contents, the blocking read that `wait` relies on, and the length cap."""

from __future__ import annotations

import threading
import time

import redis

from reflexr_graph.core.port import Boundary
from reflexr_graph.store import RedisStore, keys
from reflexr_graph.store.records import saved_next_nodes
from tests.store.support import fail_once, make_run, start

WAIT_S = 10.0


def _until(condition: object, what: str) -> None:
    """Spin on a condition (each check is a Redis round trip) until it holds; no fixed sleeps."""
    deadline = time.monotonic() + WAIT_S
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"


def test_events_carry_no_payload_values(store: RedisStore) -> None:
    """Events record types, counters and codes, never checkpoint payloads, outputs or error messages."""
    make_run(store)
    ctx = start(store)
    store.save_checkpoint(ctx, Boundary('{"secret": "SECRET-STATE"}', seq=1, next_node="b"))
    store.fail(
        ctx,
        error_type="ValueError",
        message="SECRET-MESSAGE",
        traceback="SECRET-TB",
        reason="step_failed",
        permanent=False,
        retry_delay_ms=0,
    )
    events = store.events("run-1")
    assert [e.type for e in events] == [
        "run_enqueued", "attempt_started", "run_progressed", "attempt_failed", "run_retrying",
    ]  # fmt: skip
    assert all("SECRET" not in value for e in events for value in e.fields.values())
    assert events[2].fields == {"seq": "1", "next_node": "b", "size": str(len('{"secret": "SECRET-STATE"}'))}
    assert events[0].at == 1_800_000_000.0  # the faked clock, in seconds


def test_the_success_tells_the_finished_checkpoint_in_one_event(store: RedisStore) -> None:
    """succeed with the finished checkpoint writes one run_succeeded holding its seq and size (no
    run_progressed of its own), and the readers still see that checkpoint saved."""
    make_run(store)
    ctx = start(store)
    store.save_checkpoint(ctx, Boundary('{"n": 1}', seq=1, next_node="b"))
    store.succeed(ctx, "2", checkpoint='{"n": 2}', seq=2)
    events = store.events("run-1")
    assert [e.type for e in events] == ["run_enqueued", "attempt_started", "run_progressed", "run_succeeded"]
    assert events[-1].fields == {"attempt": "1", "seq": "2", "size": str(len('{"n": 2}'))}
    assert saved_next_nodes(events) == ["b", ""]
    assert [c.seq for c in store.checkpoints("run-1")] == [1, 2]


def test_events_after_an_id(store: RedisStore) -> None:
    """events(after=id) returns only entries after that stream id."""
    make_run(store)
    first = store.events("run-1")
    start(store)
    later = store.events("run-1", after=first[-1].id)
    assert [e.type for e in later] == ["attempt_started"]
    assert store.events("run-1", after=later[-1].id) == []
    assert store.events("never-created") == []


def test_blocking_read_returns_when_an_event_is_appended(store: RedisStore, raw: redis.Redis) -> None:
    """events(block_ms=...) sleeps in XREAD BLOCK and wakes when another thread appends an event."""
    make_run(store)
    ctx = start(store)
    after = store.events("run-1")[-1].id
    got: list[str] = []

    def reader() -> None:
        got.extend(e.type for e in store.events("run-1", after=after, block_ms=60_000))

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    _until(lambda: int(raw.info("clients")["blocked_clients"]) >= 1, "the reader to block in XREAD")
    assert got == []
    store.save_checkpoint(ctx, Boundary("{}", seq=1, next_node=None))
    thread.join(timeout=WAIT_S)
    assert not thread.is_alive()
    assert got == ["run_progressed"]


def test_blocking_read_longer_than_socket_timeout_returns_empty(redis_url: str) -> None:
    """A block longer than the socket timeout is split in chunks: [] comes back, not StoreUnavailable."""
    store = RedisStore.from_url(redis_url, socket_timeout=0.3)
    try:
        assert store.events("quiet-run", block_ms=700) == []
    finally:
        store.close()


def test_event_stream_is_capped(store: RedisStore, raw: redis.Redis) -> None:
    """XADD MAXLEN ~ 1000 keeps a long run's stream near 1000 entries."""
    make_run(store)
    ctx = start(store)
    for seq in range(1, 1501):
        store.save_checkpoint(ctx, Boundary("{}", seq=seq, next_node=None))
    length = int(raw.xlen(keys.events("run-1")))
    assert 1000 <= length < 1200
    fail_once(store, ctx)
    assert store.events("run-1")[-1].type == "run_retrying"
