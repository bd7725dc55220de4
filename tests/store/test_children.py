"""Child runs in the store (store/children.py): made once per step record, in the parent's
script on one Redis; every way a child ends reaches its parent; the parent waits without a lease."""

from __future__ import annotations

import pytest
import redis

from reflexr_graph import errors
from reflexr_graph.core.port import AttemptContext
from reflexr_graph.model import Status
from reflexr_graph.store import RedisStore, keys
from reflexr_graph.store.children import ChildRequest
from tests.store.support import fail_once, make_run, start


def _request(record: str = "c|spawn|-|d|child:demo|0") -> ChildRequest:
    return ChildRequest("demo", '{"n": 2}', {"tenant": "acme"}, 3, record)


def _child(store: RedisStore, ctx: AttemptContext, record: str = "c|spawn|-|d|child:demo|0") -> str:
    child, _created = store.make_child(ctx, _request(record), dispatch_grace_ms=60_000)
    return child


def test_a_child_is_made_with_its_parents_record_in_one_script_and_once_per_record(
    store: RedisStore, raw: redis.Redis
) -> None:
    make_run(store, "parent")
    ctx = start(store, "parent")
    child, created = store.make_child(ctx, _request(), dispatch_grace_ms=60_000)
    assert created
    assert raw.hget(keys.memo("parent"), "c|spawn|-|d|child:demo|0") == f'"{child}"'.encode()
    assert raw.hget(keys.mailbox("parent"), f"child:{child}") == b""
    info = store.get(child)
    assert (info.parent_run_id, info.tags, info.status) == ("parent", {"tenant": "acme"}, Status.QUEUED)
    assert store.get("parent").children == [child]
    # The step runs again: the same record names the same child, and no other is made.
    assert store.make_child(ctx, _request(), dispatch_grace_ms=60_000) == (child, False)
    assert store.get("parent").children == [child]
    other = _child(store, ctx, "c|spawn|-|d|child:demo|1")
    assert other != child and store.get("parent").children == sorted([child, other])


def test_an_attempt_that_lost_its_parent_makes_no_child(store: RedisStore, raw: redis.Redis) -> None:
    make_run(store, "parent")
    ctx = start(store, "parent")
    fail_once(store, ctx)  # the attempt's token no longer owns the run
    with pytest.raises(errors.FencedOut):
        store.make_child(ctx, _request(), dispatch_grace_ms=60_000)
    assert raw.hlen(keys.mailbox("parent")) == 0
    assert raw.zcard(keys.all_runs(0)) == 1, "only the parent exists"


@pytest.mark.parametrize("end", ["succeed", "dead_letter", "cancel"])
def test_every_way_a_child_ends_wakes_its_waiting_parent(
    store: RedisStore, raw: redis.Redis, end: str
) -> None:
    make_run(store, "parent")
    parent = start(store, "parent")
    child = _child(store, parent)
    assert store.wait_for_children(parent, [child], f"child:{child}") is None
    info = store.get("parent")
    assert (info.status, info.waiting_for) == (Status.WAITING, f"child:{child}")
    assert raw.zscore(keys.leases(0), "parent") is None and raw.zscore(keys.due(0), "parent") is None
    if end == "cancel":
        store.cancel(child)
    else:
        ctx = start(store, child)
        if end == "succeed":
            store.succeed(ctx, '"done"')
        else:
            fail_once(store, ctx, permanent=True)
    assert raw.zrange(keys.children_ended(0), 0, -1) == [child.encode()]
    assert store.tell_parent(child) == ("parent", "demo")
    assert raw.zcard(keys.children_ended(0)) == 0
    assert store.get("parent").status is Status.QUEUED
    status = {"succeed": "succeeded", "dead_letter": "dead", "cancel": "cancelled"}[end]
    again = start(store, "parent")
    [outcome] = store.wait_for_children(again, [child], f"child:{child}") or []
    assert f'"status": "{status}"' in outcome
    assert store.children_of("parent")[child] is not None


def test_a_child_that_ends_before_its_parent_waits_is_not_waited_for(store: RedisStore) -> None:
    make_run(store, "parent")
    parent = start(store, "parent")
    child = _child(store, parent)
    store.succeed(start(store, child), "7")
    assert store.tell_parent(child) is None  # the parent runs: the outcome waits in its mailbox
    ended = store.wait_for_children(parent, [child], f"child:{child}")
    assert ended is not None and store.get("parent").status is Status.RUNNING
    assert store.child_output(child) == "7"


def test_cancelling_a_parent_cancels_its_unfinished_children_and_theirs(store: RedisStore) -> None:
    make_run(store, "parent")
    parent = start(store, "parent")
    child = _child(store, parent)
    middle = start(store, child)
    grandchild = _child(store, middle)
    store.wait_for_children(middle, [grandchild], f"child:{grandchild}")
    store.wait_for_children(parent, [child], f"child:{child}")
    assert store.cancel("parent").status is Status.CANCELLED
    assert store.get(child).status is Status.CANCELLED
    assert store.get(grandchild).status is Status.CANCELLED


def test_a_parent_asked_to_cancel_makes_no_child(store: RedisStore, raw: redis.Redis) -> None:
    make_run(store, "parent")
    ctx = start(store, "parent")
    assert store.cancel("parent").cancel_requested  # its step is in flight: cooperative
    with pytest.raises(errors.CancelRequested):
        store.make_child(ctx, _request(), dispatch_grace_ms=60_000)
    assert raw.zcard(keys.all_runs(0)) == 1, "only the parent exists"
