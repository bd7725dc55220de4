"""Child runs on a Redis Cluster: a parent and its child are in different shards, so the child is
made first (its idempotency key named after the parent and the step's record) and the parent's
record written next; a crash between the two leaves nothing a retry of the step cannot finish."""

from __future__ import annotations

import pytest

from reflexr_graph import errors
from reflexr_graph.model import Status
from reflexr_graph.store import RedisStore, keys
from reflexr_graph.store.attempts import NewRun, new_run
from reflexr_graph.store.children import ChildRequest, child_key
from tests.store.support import make_run, start

RECORD = "c|spawn|-|d|child:demo|0"


def test_a_child_in_another_shard_is_made_then_recorded_and_a_crash_between_is_finished(
    store: RedisStore,
) -> None:
    make_run(store, "parent")
    parent = start(store, "parent")
    key = child_key("parent", RECORD)
    child_id = keys.new_run_id("demo", key)
    assert keys.shard_of(child_id) != keys.shard_of("parent"), "the two are in different shards"
    # The first try made the child and crashed before the parent's record (child_started.lua).
    made = NewRun(child_id, "demo", '{"n": 2}', None, key, 3, 60_000, parent="parent")
    assert store.do(new_run(made)) == (child_id, True)
    assert store.get("parent").children == []
    # The retried step makes the same request: the key names that child, and the record lands.
    request = ChildRequest("demo", '{"n": 2}', {}, 3, RECORD)
    assert store.make_child(parent, request, dispatch_grace_ms=60_000) == (child_id, False)
    assert store.get("parent").children == [child_id]
    assert store.get(child_id).parent_run_id == "parent"
    # Its end reaches the parent in the other shard, which wakes.
    assert store.wait_for_children(parent, [child_id], f"child:{child_id}") is None
    store.succeed(start(store, child_id), "20")
    assert store.tell_parent(child_id) == ("parent", "demo")
    assert store.get("parent").status is Status.QUEUED
    again = start(store, "parent")
    assert store.wait_for_children(again, [child_id], f"child:{child_id}") is not None
    assert store.child_output(child_id) == "20"


def test_a_child_made_as_its_parent_is_asked_to_cancel_is_cancelled_too(store: RedisStore) -> None:
    make_run(store, "parent")
    parent = start(store, "parent")
    assert store.cancel("parent").cancel_requested
    request = ChildRequest("demo", '{"n": 2}', {}, 3, RECORD)
    with pytest.raises(errors.CancelRequested):
        store.make_child(parent, request, dispatch_grace_ms=60_000)
    [child] = store.get("parent").children
    assert store.get(child).status is Status.CANCELLED
