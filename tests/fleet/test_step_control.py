"""Issue 13 with real workers: step timeouts (a step that awaits, and one that blocks the event loop),
non-retryable errors, a step's own ``retry_after``, and message priorities."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from tests.fleet import limit_graphs
from tests.fleet.conftest import Fleet, assert_consistent, count, events, open_gate
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

GRAPHS = {"REFLEXR_GRAPHS": limit_graphs.REFS}


@pytest.mark.parametrize("how", ["async", pytest.param("sync", marks=pytest.mark.slow)])
def test_a_step_past_its_timeout_is_cancelled_retried_then_dead_lettered_naming_the_node(
    how: str, fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    worker = fleet.start(1, **GRAPHS)
    first_child = worker.child()
    client = client_for(fleet)
    run_id = client.enqueue("slow", {"how": how})
    done = client.wait(run_id, timeout=60)
    assert (done.status, done.reason, done.attempts) == (Status.DEAD, "step_timeout", 2), done
    assert done.error is not None and "StepTimeout" in done.error and "'crawl'" in done.error
    assert count(redis_client, run_id, "crawl") == 2, "retried once, as any failure"
    failed = events(client.store, run_id, "attempt_failed")
    assert [e.fields["reason"] for e in failed] == ["step_timeout", "step_timeout"]
    assert_consistent(redis_client, run_id)
    assert redis_client.zscore(keys.leases(keys.STANDALONE.of(run_id)), run_id) is None
    if how == "sync":
        # The loop never came back: the heartbeat thread ended the attempt, and the pool replaced
        # the child that ran it, twice.
        assert "blocked in synchronous code" in done.error
        assert worker.log().count("blocked the event loop past its 0.5s step timeout") == 2
        assert worker.alive() and worker.child() != first_child
    else:
        assert "blocked" not in done.error and worker.child() == first_child


def test_a_non_retryable_error_dead_letters_after_one_attempt(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start(1, **GRAPHS)
    client = client_for(fleet)
    run_id = client.enqueue("flaky", {"how": "non_retryable"})
    done = client.wait(run_id, timeout=60)
    assert (done.status, done.reason, done.attempts) == (Status.DEAD, "non_retryable", 1), done
    assert done.error is not None and done.error.startswith("KeyError")
    dead = events(client.store, run_id, "run_dead_lettered")
    assert [(e.fields["reason"], e.fields["error_type"]) for e in dead] == [("non_retryable", "KeyError")]
    assert count(redis_client, run_id, "call_api") == 1


def test_retry_after_replaces_the_backoff(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start(1, **GRAPHS)
    client = client_for(fleet)
    run_id = client.enqueue("flaky", {"how": "retry_after"})
    done = client.wait(run_id, timeout=60)
    assert (done.status, done.output, done.attempts) == (Status.SUCCEEDED, "ok", 2), done
    (retrying,) = events(client.store, run_id, "run_retrying")
    # The policy's backoff is at most 0.1 s; the step said 1.5 s, exactly, without jitter.
    assert int(retrying.fields["due_at"]) - round(retrying.at * 1000) == 1500
    assert retrying.fields["reason"] == "rate_limited"


def test_a_run_enqueued_with_a_lower_priority_number_is_served_first(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start(1)
    client = client_for(fleet)
    # The one process is busy, so what follows waits in the queue, in priority lists.
    blocker = client.enqueue("steps", {"gate": "s1"})
    wait_for(lambda: count(redis_client, blocker, "s1") == 1, 30, "the blocker to hold the process")
    bulk = [client.enqueue("steps", {"value": i}, priority=9) for i in range(2)]
    urgent = client.enqueue("steps", {"value": 7}, priority=0)
    open_gate(redis_client, blocker)
    for run_id in (blocker, *bulk, urgent):
        assert client.wait(run_id, timeout=60).status is Status.SUCCEEDED
    started = {run_id: events(client.store, run_id, "attempt_started")[0].at for run_id in (*bulk, urgent)}
    assert started[urgent] < min(started[run_id] for run_id in bulk), started
    assert [client.get(run_id).priority for run_id in (urgent, *bulk)] == [0, 9, 9]
