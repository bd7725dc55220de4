"""Issue 10 with real workers: a waiting run holds no worker slot and no broker message (G8), a signal or
its timer brings it back, and nothing finished before the wait is paid for twice."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial

import pytest
import redis

from reflexr_graph import errors
from reflexr_graph.client import Client
from reflexr_graph.config.dispatch import graph_queue
from reflexr_graph.model import Status
from reflexr_graph.store import fanout, keys
from tests.fleet.conftest import Fleet, assert_consistent, count, events, open_gate
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

APPROVED = {"approved": True, "by": "ana"}


def waiting(client: Client, run_id: str, timeout: float = 60) -> None:
    wait_for(lambda: client.get(run_id).status is Status.WAITING, timeout, f"run {run_id} to be waiting")


def holds_nothing(client: Client, r: redis.Redis, fleet: Fleet, graph: str) -> None:
    """No lease, no queued message, and no worker running a task."""
    assert fanout.total(r, keys.leases) == 0
    # The reaper sends no copy of a message while its queue still holds others (fleet/backlog.py),
    # so under load too the queues hold nothing once every run waits.
    assert r.llen(fleet.queue) == 0 and r.llen(graph_queue(fleet.queue, graph)) == 0

    # The suspension is written before the task returns, so the last one may still be finishing:
    # a run that held its worker would keep the task active for as long as it waits.
    def idle() -> bool:
        active = client.app.control.inspect(timeout=2).active() or {}
        return bool(active) and all(tasks == [] for tasks in active.values())

    wait_for(idle, 20, "every worker process to be idle")


def test_wait_then_signal_runs_nothing_before_the_wait_again(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start()
    client = client_for(fleet)
    run_id = client.enqueue("approve", {"ticket": "t-7"})
    waiting(client, run_id)
    info = client.get(run_id)
    assert (info.waiting_for, info.wake_at, info.attempts) == ("approval", None, 0)
    holds_nothing(client, redis_client, fleet, "approve")
    assert client.signal(run_id, "approval", APPROVED) is True
    done = client.wait(run_id, timeout=60)
    assert done.status is Status.SUCCEEDED, done
    assert done.output == "summary of t-7: approved by ana"
    assert [count(redis_client, run_id, n) for n in ("prepare", "summarize", "review", "close")] == [
        1,
        1,
        2,
        1,
    ]
    assert (done.attempts, done.reused_calls) == (1, 1), "the suspended attempt did not count"
    kinds = [e.type for e in events(client.store, run_id)]
    assert kinds.index("run_waiting") < kinds.index("signal_received") < kinds.index("run_succeeded")
    assert_consistent(redis_client, run_id)


def test_a_signal_that_arrives_first_means_no_suspension(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start()
    client = client_for(fleet)
    # Queued behind a gated run on the one-slot worker, so the signal surely comes before the wait.
    blocker = client.enqueue("steps", {"gate": "s1"})
    wait_for(lambda: count(redis_client, blocker, "s1") == 1, 30, "the blocker to hold the slot")
    run_id = client.enqueue("approve", {"ticket": "t-8"})
    assert client.signal(run_id, "approval", {"approved": False, "by": "bo"}) is False
    open_gate(redis_client, blocker)
    done = client.wait(run_id, timeout=60)
    assert done.output == "summary of t-8: rejected by bo"
    assert count(redis_client, run_id, "review") == 1
    assert not events(client.store, run_id, "run_waiting")


def test_a_durable_sleep_frees_the_worker_and_resumes_after_its_wake_time(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """A 3 s durable sleep on a one-slot worker: while it waits, no task is active and another run
    takes the slot; the sleeper resumes from its timer, not before it."""
    fleet.start()
    client = client_for(fleet)
    run_id = client.enqueue("napper", 3.0)
    waiting(client, run_id)
    wake_at = client.get(run_id).wake_at
    assert wake_at is not None and client.get(run_id).waiting_for is None
    # Read while it still waits: on a loaded machine the timer can fire during the slower checks
    # of holds_nothing (a worker inspect), which then takes the due entry, as it should.
    pipe = redis_client.pipeline(transaction=True)
    pipe.hget(keys.run(run_id), "status").zscore(keys.due(keys.STANDALONE.of(run_id)), run_id)
    assert pipe.execute() == [b"waiting", int(wake_at * 1000)], "the timer is the due entry"
    holds_nothing(client, redis_client, fleet, "napper")
    other = client.wait(client.enqueue("steps", {}), timeout=30)
    assert other.status is Status.SUCCEEDED
    done = client.wait(run_id, timeout=60)
    assert done.status is Status.SUCCEEDED and done.output == 3.0
    resumed = events(client.store, run_id, "attempt_started")[-1]
    assert resumed.at >= wake_at, "woken by its timer, not before"
    assert (count(redis_client, run_id, "nap"), count(redis_client, run_id, "woke")) == (2, 1)


def test_concurrent_signals_give_one_attempt(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start()
    client = client_for(fleet)
    run_id = client.enqueue("approve", {})
    waiting(client, run_id)
    results: list[object] = []
    barrier = threading.Barrier(8)

    def send() -> None:
        own = client_for(fleet)
        barrier.wait(timeout=10)
        try:
            results.append(own.signal(run_id, "approval", APPROVED))
        except errors.SignalPending:
            results.append("pending")
        except errors.OperationRefused:
            results.append("finished")  # the woken attempt already ended the run: refused, no attempt

    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    # One sender wakes the run. The others are told theirs is pending, or, once the woken attempt
    # has taken the first value, have theirs kept for a later wait, or, once it has ended the run,
    # are refused: none starts an attempt.
    assert results.count(True) == 1 and len(results) == 8, results
    assert all(r in (False, "pending", "finished") for r in results if r is not True), results
    assert client.wait(run_id, timeout=60).status is Status.SUCCEEDED
    assert len(events(client.store, run_id, "attempt_started")) == 2


@pytest.mark.slow
@pytest.mark.parametrize("kill", ["before_wait", "after_suspend"])
def test_a_sigkill_at_the_moment_of_suspension_loses_nothing(
    kill: str, fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """The worker's pool child is SIGKILLed just before the wait (the reaper recovers the run, which then
    suspends), or just after the store suspended the run (its message, not acked yet, is delivered again
    and dropped: the run stays waiting). Either way one signal finishes it, and the durable call made
    before the wait ran once."""
    worker = fleet.start()
    client = client_for(fleet)
    run_id = client.enqueue("approve", {"ticket": "t-9", "kill": kill})
    waiting(client, run_id, timeout=90)
    if kill == "after_suspend":
        worker.wait_log("is waiting for a signal or a timer; this stray delivery is dropped")
        assert client.get(run_id).status is Status.WAITING
    assert client.signal(run_id, "approval", APPROVED) is True
    done = client.wait(run_id, timeout=90)
    assert done.status is Status.SUCCEEDED, done
    assert done.output == "summary of t-9: approved by ana"
    assert (count(redis_client, run_id, "prepare"), count(redis_client, run_id, "summarize")) == (1, 1)
    assert count(redis_client, run_id, "review") == (3 if kill == "before_wait" else 2)
    assert_consistent(redis_client, run_id)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_thousand_waiting_runs_hold_no_worker(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """1,000 runs waiting at once on one worker with 2 processes: all waiting, the queues empty, no task
    active, and the worker still takes a new run at once; then 1,000 signals, and all of them finish."""
    fleet.start(concurrency=2)
    client = client_for(fleet)
    run_ids = [client.enqueue("approve", {"ticket": f"t-{i}"}) for i in range(1000)]
    waiting_set = partial(keys.status_set, Status.WAITING)
    wait_for(lambda: fanout.total(redis_client, waiting_set) == 1000, 300, "1,000 waiting runs", poll_s=0.5)
    holds_nothing(client, redis_client, fleet, "approve")
    assert client.wait(client.enqueue("steps", {}), timeout=30).status is Status.SUCCEEDED
    for run_id in run_ids:
        assert client.signal(run_id, "approval", APPROVED) is True
    succeeded = partial(keys.status_set, Status.SUCCEEDED)
    wait_for(lambda: fanout.total(redis_client, succeeded) == 1001, 300, "all 1,000 to finish", poll_s=0.5)
    assert fanout.total(redis_client, waiting_set) == 0
    assert {client.get(r).output for r in run_ids[:5]} == {
        f"summary of t-{i}: approved by ana" for i in range(5)
    }
