"""Ordinary operations must not kill healthy runs (issue 14): rolling deploys, mixed fleets, pools.

Real ``celery worker`` subprocesses on a real Redis; each test reproduces what a new team hit.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Callable

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.config.dispatch import TASK_NAME
from reflexr_graph.model import Status
from tests.fleet.conftest import Fleet, assert_consistent, count, events, executions, open_gate
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def started(r: redis.Redis, run_id: str, node: str, attempt: int) -> Callable[[], bool]:
    return lambda: f"{node}:{attempt}" in executions(r, run_id)


def test_rolling_deploys_mid_step_do_not_use_up_attempts(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """Item 1: a long step whose worker gets SIGTERM three times (three deploys), with max_attempts 3,
    still succeeds: each soft shutdown hands the run back as an interruption, not a failed attempt.
    Before the fix the run ended dead (max_attempts) with no error."""
    worker = fleet.start()
    client = client_for(fleet)
    run_id = client.enqueue("steps", {"value": 5, "gate": "s2"})
    open_gate(redis_client, run_id, attempt=4)  # only the attempt after the third deploy finishes s2
    for attempt in (1, 2, 3):
        wait_for(started(redis_client, run_id, "s2", attempt), 60, f"s2 to start on attempt {attempt}")
        successor = fleet.start()
        worker.signal(signal.SIGTERM)  # the deploy: soft shutdown, then the run is handed back
        worker.wait_exit(30)
        worker = successor
    info = client.wait(run_id, timeout=60)
    assert info.status is Status.SUCCEEDED, info
    assert (info.attempts, info.interruptions, info.max_attempts) == (1, 3, 3)
    assert [e.fields.get("reason") for e in events(client.store, run_id, "run_retrying")] == ["shutdown"] * 3
    assert count(redis_client, run_id, "s1") == 1, "the step before the checkpoint never ran again"
    assert_consistent(redis_client, run_id)


def test_a_worker_without_the_graph_never_dead_letters_its_runs(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """Item 2: one worker with the graph and one without it (REFLEXR_GRAPHS empty), 6 runs from the
    Client and 6 a foreign producer sends to the base queue: all 12 succeed. Client runs go to the
    graph's own queue, which only the first worker consumes; the foreign messages the second worker
    takes are forwarded there. Before the fix 4 of 6 came back dead (unknown_graph)."""
    with_graph = fleet.start()
    without = fleet.start(REFLEXR_GRAPHS="")
    client = client_for(fleet)
    ours = [client.enqueue("steps", {"value": i}) for i in range(6)]
    foreign = [f"foreign-{uuid.uuid4().hex[:8]}" for _ in range(6)]
    for i, run_id in enumerate(foreign):
        kwargs = {"graph": "steps", "inputs": {"value": 100 + i}}
        client.app.send_task(TASK_NAME, kwargs=kwargs, task_id=run_id, queue=fleet.queue)
    for run_id in ours + foreign:
        info = client.wait(run_id, timeout=60)
        assert (info.status, info.attempts) == (Status.SUCCEEDED, 1), info
    assert "forwarded to queue" in without.log(), "the worker without the graph took none of the foreign ones"
    assert "unknown_graph" not in with_graph.log() + without.log()


def test_a_run_whose_graph_no_worker_serves_waits_out_the_grace_then_is_dead(
    fleet: Fleet, client_for: Callable[[Fleet], Client]
) -> None:
    """Item 2: with no live worker for its graph a run waits (it is not dead-lettered at once); a worker
    that loads the graph, started within the grace period, runs it. A run of a graph no worker ever
    serves is dead-lettered as unknown_graph once the grace period is over, saying what to do."""
    # Long enough for the second worker to start (a few seconds on a loaded machine) within it.
    fleet.env["REFLEXR_UNKNOWN_GRAPH_GRACE_S"] = "10"
    fleet.start(REFLEXR_GRAPHS="")
    client = client_for(fleet)
    late = f"late-{uuid.uuid4().hex[:8]}"
    client.app.send_task(TASK_NAME, kwargs={"graph": "steps", "inputs": {}}, task_id=late, queue=fleet.queue)
    never = f"never-{uuid.uuid4().hex[:8]}"
    client.app.send_task(TASK_NAME, kwargs={"graph": "nope", "inputs": {}}, task_id=never, queue=fleet.queue)
    wait_for(lambda: events(client.store, late, "waiting_for_worker"), 30, "the run to wait for a worker")
    assert client.get(late).status is Status.QUEUED
    fleet.start()  # the deploy that adds the graph
    assert client.wait(late, timeout=60).status is Status.SUCCEEDED
    dead = client.wait(never, timeout=60)
    assert (dead.status, dead.reason) == (Status.DEAD, "unknown_graph")
    assert dead.error is not None and "no live worker served graph 'nope' for 10s" in dead.error


@pytest.mark.parametrize("pool", ["threads", "solo"])
def test_threads_and_solo_pools_run_and_hand_runs_back_on_shutdown(
    pool: str, fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """Item 3: ``-P threads -c 8`` runs 8 concurrent runs whose step takes a while, all on their first
    attempt (before the fix 5 of 8 were dead-lettered with "This event loop is already running"), and
    ``-P solo`` runs them one by one. SIGTERM mid-step hands the running run back (an interruption,
    not a failure: solo used to record Celery's NotImplementedError as the step's error) and it resumes
    on another worker."""
    concurrency = 8 if pool == "threads" else 1
    worker = fleet.start(concurrency=concurrency, pool=pool)
    client = client_for(fleet)
    run_ids = [client.enqueue("steps", {"value": i, "sleep_s": 1.0}) for i in range(concurrency)]
    for run_id in run_ids:
        info = client.wait(run_id, timeout=90)
        assert (info.status, info.attempts, info.interruptions) == (Status.SUCCEEDED, 1, 0), info
    # A step that yields: a thread cannot be stopped from outside, so one blocking the event loop
    # keeps a threads or solo worker until it returns (docs/guarantees.md: supported pools).
    held = client.enqueue("steps", {"value": 99, "gate": "s2", "async_gate": True})
    open_gate(redis_client, held, attempt=2)
    wait_for(started(redis_client, held, "s2", 1), 30, "s2 to start")
    fleet.start()
    worker.signal(signal.SIGTERM)
    assert worker.wait_exit(30) is not None
    info = client.wait(held, timeout=60)
    assert (info.status, info.attempts, info.interruptions) == (Status.SUCCEEDED, 1, 1), info
    assert [e.fields.get("reason") for e in events(client.store, held, "run_retrying")] == ["shutdown"]
    assert events(client.store, held, "attempt_failed") == []
    # The soft shutdown cancels the step in flight with CancelledError, which lets it clean up.
    assert executions(redis_client, held) == ["s1:1", "s2:1", "s2-cleanup:1", "s2:2", "s3:2"]
