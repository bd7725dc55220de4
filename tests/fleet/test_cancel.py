"""Issue 25 item 4 with real workers: ``cancel`` of a running run lets its step finish and stops at
the next boundary; ``cancel --now`` interrupts the step with CancelledError, which it can clean up on."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.model import Status
from tests.fleet.conftest import Fleet, assert_consistent, events, executions, open_gate
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(120)


def test_cancel_lets_the_step_in_flight_finish_and_stops_at_its_boundary(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start(1)
    client = client_for(fleet)
    run_id = client.enqueue("steps", {"value": 3, "gate": "s2", "async_gate": True})
    wait_for(lambda: "s2:1" in executions(redis_client, run_id), what="s2 to start")
    asked = client.cancel(run_id)
    assert (asked.status, asked.cancel_requested) == (Status.RUNNING, True)
    store = client.store
    # The worker learns of the cancel from its next renewal (every TTL/3 = 1 s) and keeps the lease.
    wait_for(lambda: events(store, run_id, "cancel_requested"), what="the cancel request")
    open_gate(redis_client, run_id)
    info = client.wait(run_id, timeout=30)
    assert (info.status, info.reason) == (Status.CANCELLED, "cancelled")
    assert executions(redis_client, run_id) == ["s1:1", "s2:1"], "s2 was not cut, and s3 never ran"
    assert [e.fields["next_node"] for e in events(store, run_id, "run_progressed")] == ["s2", "s3"]
    assert_consistent(redis_client, run_id)
    # The boundary after s2 was checkpointed with s2's work in it: a replay resumes at s3.
    client.replay(run_id)
    done = client.wait(run_id, timeout=30)
    assert done.status is Status.SUCCEEDED
    assert done.output["steps"] == ["s1", "s2", "s3"]
    assert executions(redis_client, run_id) == ["s1:1", "s2:1", "s3:1"]


def test_cancel_now_interrupts_the_step_which_can_clean_up(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start(1)
    client = client_for(fleet)
    run_id = client.enqueue("steps", {"value": 3, "gate": "s2", "async_gate": True})
    wait_for(lambda: "s2:1" in executions(redis_client, run_id), what="s2 to start")
    info = client.cancel(run_id, now=True)
    assert (info.status, info.cancel_requested) == (Status.CANCELLED, False)
    wait_for(lambda: "s2-cleanup:1" in executions(redis_client, run_id), what="s2's CancelledError")
    assert executions(redis_client, run_id) == ["s1:1", "s2:1", "s2-cleanup:1"]
    assert [e.fields["next_node"] for e in events(client.store, run_id, "run_progressed")] == ["s2"]
    assert_consistent(redis_client, run_id)
