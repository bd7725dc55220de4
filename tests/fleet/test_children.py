"""Issue 23 with real workers: child runs. A parent's step runs children concurrently and waits
for them as a durable wait (``waiting``, no worker held), their ends wake it, a retried step gets
the same children back, and a dead child fails the parent's step with ChildFailed."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Callable

import pytest
import redis

from reflexr_graph import schemas
from reflexr_graph.client import Client
from reflexr_graph.model import Status
from tests.fleet import child_graphs
from tests.fleet.conftest import FAST_ENV, Fleet, assert_consistent, count
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(150)

GRAPHS = {"REFLEXR_GRAPHS": child_graphs.REFS}


def _children(client: Client, parent: str) -> dict[str, object]:
    return dict(client.store.children_of(parent))


@pytest.mark.slow
def test_three_children_one_worker_killed(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start(**GRAPHS)
    fleet.start(**GRAPHS)
    client = client_for(fleet)
    label = uuid.uuid4().hex
    parent = client.enqueue("family", {"children": 3, "label": label})
    parked = wait_for(lambda: redis_client.get(f"pid:{label}"), 60, "the labelled child to park")
    child, pid = parked.decode().split()
    # While a child runs, the parent waits for all three, holding no worker.
    wait_for(lambda: client.get(parent).status is Status.WAITING, 30, "the parent to wait")
    assert client.get(parent).waiting_for == "children:3"
    os.kill(int(pid), signal.SIGKILL)
    redis_client.rpush(f"gate:{child}", b"open")  # not needed by the retry; harmless for it
    done = client.wait(parent, timeout=90)
    assert done.status is Status.SUCCEEDED, done
    assert done.output == [0, 10, 20]
    children = _children(client, parent)
    assert len(children) == 3 and child in children
    assert len(client.runs(graph="kid")) == 3, "exactly three children exist"
    for kid in children:
        info = client.get(kid)
        assert info.status is Status.SUCCEEDED and info.parent_run_id == parent
        # The checkpoint after a finished step holds: only the killed step ran again.
        assert count(redis_client, kid, "first") == 1
        assert count(redis_client, kid, "second") == (2 if kid == child else 1)
        assert_consistent(redis_client, kid)
    assert_consistent(redis_client, parent)


def test_a_step_that_fails_after_its_children_reuses_them_and_they_inherit_tags(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start(**GRAPHS)
    client = client_for(fleet)
    parent = client.enqueue(
        "family", {"children": 2, "fail_once": True, "tags": {"role": "kid"}}, tags={"tenant": "acme"}
    )
    done = client.wait(parent, timeout=60)
    assert done.status is Status.SUCCEEDED, done
    assert done.output == [0, 10]
    assert redis_client.get(f"failed:{parent}") == b"2", "the step failed once, then ran again"
    children = _children(client, parent)
    assert len(children) == 2 and len(client.runs(graph="kid")) == 2
    for kid in children:
        assert count(redis_client, kid, "second") == 1, "the retry reused the children"
        assert client.get(kid).tags == {"role": "kid", "tenant": "acme"}


def test_a_dead_child_fails_the_parents_step_with_child_failed_and_a_replay_reuses_the_others(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start(**GRAPHS)
    client = client_for(fleet)
    fail_key = f"fail:{uuid.uuid4().hex}"
    redis_client.set(fail_key, b"1")
    parent = client.enqueue("family", {"children": 3, "fail_key": fail_key})
    done = client.wait(parent, timeout=60)
    assert done.status is Status.DEAD, done
    # Each attempt's step raised ChildFailed (a retryable failure), so the retry policy ran out.
    assert done.reason == "max_attempts" and "ChildFailed" in (done.error or ""), done
    dead = [kid for kid in _children(client, parent) if client.get(kid).status is Status.DEAD]
    assert len(dead) == 1 and dead[0] in (done.error or "")
    assert "kid_failed" in (done.error or ""), "the child's reason"
    # Replaying the dead parent replays its dead child, and reuses the two that succeeded.
    redis_client.delete(fail_key)
    client.replay(parent)
    done = client.wait(parent, timeout=60)
    assert done.status is Status.SUCCEEDED and done.output == [0, 10, 20], done
    assert len(client.runs(graph="kid")) == 3
    for kid in _children(client, parent):
        assert count(redis_client, kid, "second") == (2 if kid == dead[0] else 1), kid
    assert len(client.runs(graph="kid")) == 3, "the parent's retries made no other child"


def test_start_child_then_wait_child(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start(**GRAPHS)
    client = client_for(fleet)
    parent = client.enqueue("family", {"children": 1})
    done = client.wait(parent, timeout=60)
    assert done.status is Status.SUCCEEDED and done.output == [0], done


def test_a_child_takes_its_graphs_published_budget_even_from_a_worker_that_serves_the_graph(
    fleet: Fleet, client_for: Callable[[Fleet], Client]
) -> None:
    """Every new run takes its graph's published budget (README: REFLEXR_MAX_ATTEMPTS), a child too:
    here a deploy step published ``kid`` with 7 (``reflexr-graph publish`` with its own setting)
    while the worker that makes the child serves ``kid`` with its own 3. A client's enqueue of
    ``kid`` would get 7; the child got the worker's 3 (issue 36: two precedences)."""
    fleet.start(**GRAPHS)
    client = client_for(fleet)
    # The worker published its entry (3) before it reported ready, and does again a minute later.
    schemas.publish(client.store, [child_graphs.kid_graph], 7)
    try:
        parent = client.enqueue("family", {"children": 1})
        done = client.wait(parent, timeout=60)
        assert done.status is Status.SUCCEEDED, done
        (kid,) = _children(client, parent)
        assert client.graph("kid").max_attempts == 7, "the worker published its own meanwhile"
        assert client.get(kid).max_attempts == 7
    finally:
        schemas.publish(client.store, [child_graphs.kid_graph], int(FAST_ENV["REFLEXR_MAX_ATTEMPTS"]))


def test_cancelling_a_parent_cancels_its_children_that_wait_on_a_timer(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start(**GRAPHS)
    client = client_for(fleet)
    parent = client.enqueue("family", {"children": 2, "nap_s": 600})

    def napping() -> list[str]:
        kids = list(_children(client, parent))
        return [k for k in kids if client.get(k).status is Status.WAITING and client.get(k).wake_at]

    napper = wait_for(napping, 60, "a child to wait on its timer")[0]
    wait_for(lambda: client.get(parent).status is Status.WAITING, 30, "the parent to wait")
    assert client.cancel(parent).status is Status.CANCELLED
    assert client.get(napper).status is Status.CANCELLED
    assert all(client.get(k).status is not Status.WAITING for k in _children(client, parent))
    assert_consistent(redis_client, napper)
