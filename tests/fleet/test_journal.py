"""Issue 9 with real workers killed by pid: finished branches and recorded calls survive a crash."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.model import Status
from tests.fleet.conftest import Fleet, assert_consistent, count, open_gate
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def test_branches_that_finished_before_a_sigkill_do_not_run_again(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """A map over 10 items; the worker's pool child is SIGKILLed while item 7's step is still in flight
    (the nine others have finished). The run resumes on the worker's next child from the checkpoint
    before the fork; the nine finished branches return their recorded results, item 7 runs again, and
    the output equals an uncrashed run's."""
    worker = fleet.start()
    client = client_for(fleet)
    clean = client.wait(client.enqueue("fanout", {"items": 10}), timeout=60)
    assert clean.status is Status.SUCCEEDED
    run_id = client.enqueue("fanout", {"items": 10, "hold": 7})
    open_gate(redis_client, run_id, attempt=2)
    finished = [i for i in range(10) if i != 7]
    wait_for(
        lambda: all(count(redis_client, run_id, f"work{i}") == 1 for i in [*finished, 7]), 60, "nine done"
    )
    wait_for(lambda: len(client.store.load_records(run_id)) == 9, 30, "the nine results recorded")
    os.kill(worker.child(), signal.SIGKILL)
    info = client.wait(run_id, timeout=90)
    assert info.status is Status.SUCCEEDED, info
    assert info.output == clean.output
    assert {i: count(redis_client, run_id, f"work{i}") for i in range(10)} == {
        i: 2 if i == 7 else 1 for i in range(10)
    }
    assert count(redis_client, run_id, "plan") == 1
    assert info.reused_steps == 9
    assert_consistent(redis_client, run_id)


@pytest.mark.parametrize("loop", [False, True], ids=["distinct-names", "one-name-in-a-loop"])
def test_calls_recorded_before_a_sigkill_are_not_made_again(
    loop: bool, fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """A step makes 3 durable calls, then its worker is SIGKILLed before the 4th. After recovery each of
    the first 3 calls has run once and the 4th once; the same for 5 calls to one name in a loop."""
    fleet.start()
    client = client_for(fleet)
    calls = 5 if loop else 4
    run_id = client.enqueue("calls", {"calls": calls, "kill_before": 3, "loop": loop})
    info = client.wait(run_id, timeout=90)
    assert info.status is Status.SUCCEEDED, info
    assert info.output == [n * n for n in range(calls)]
    assert {n: count(redis_client, run_id, f"call{n}") for n in range(calls)} == dict.fromkeys(
        range(calls), 1
    )
    assert (info.attempts, info.reused_calls) == (2, 3)


@pytest.mark.parametrize("grace", ["default", "0"])
def test_siblings_in_flight_when_a_branch_fails_finish_and_are_not_run_again(
    grace: str, fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """Issue 25 item 3: a map over 10 items where item 7 raises once while the nine others still run.
    They finish and record their results before the attempt fails, so the retry runs only item 7
    (REFLEXR_SIBLING_GRACE_S=0 cancels them, as before: they run again)."""
    fleet.start(**({} if grace == "default" else {"REFLEXR_SIBLING_GRACE_S": grace}))
    client = client_for(fleet)
    run_id = client.enqueue("fanout", {"items": 10, "fail": 7})
    info = client.wait(run_id, timeout=90)
    assert info.status is Status.SUCCEEDED, info
    assert info.output == [i * 10 for i in range(10)]
    counts = [count(redis_client, run_id, f"work{i}") for i in range(10)]
    if grace == "default":
        assert counts == [1] * 7 + [2] + [1] * 2
        assert info.reused_steps == 9
    else:
        assert counts == [2] * 10
    assert (count(redis_client, run_id, "plan"), info.attempts) == (1, 2)
    assert_consistent(redis_client, run_id)


def test_a_map_over_one_item_skips_no_boundary(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """Issue 25 item 6: the only item's join task looked quiescent and was reported as a skipped
    (untyped) boundary; a join's task is inside its fork, so a map over one skips nothing, as over 5."""
    fleet.start()
    client = client_for(fleet)
    for items in (1, 5):
        info = client.wait(client.enqueue("fanout", {"items": items}), timeout=60)
        assert info.status is Status.SUCCEEDED, info
        assert info.skipped_boundaries == 0, items
        assert info.output == [i * 10 for i in range(items)]
