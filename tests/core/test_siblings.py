"""Issue 25 item 3: when one branch of a fork fails or times out, the branches still running
finish and record their results before the attempt fails, so the retry does not run them again."""

from __future__ import annotations

import pytest

from reflexr_graph.errors import StepTimeout
from tests.core import graphs
from tests.core.graphs import CALLS, FAIL, Boom
from tests.core.harness import Harness


def test_siblings_in_flight_finish_when_one_branch_fails(harness: Harness) -> None:
    action = graphs.map_siblings()
    run_id = harness.create(action, 4)
    FAIL["work0"] = 1
    with pytest.raises(Boom):
        harness.attempt(action, run_id, inputs=4)
    assert harness.attempt(action, run_id, inputs=4) == 60
    assert [CALLS[f"work{i}"] for i in range(4)] == [2, 1, 1, 1]
    assert CALLS["plan"] == 1 and CALLS["total"] == 1
    assert harness.store.get(run_id).reused_steps == 3


def test_a_sibling_that_outlasts_the_grace_is_cancelled(harness: Harness) -> None:
    """The wait is bounded: a branch still running after the grace is cancelled, and runs again."""
    action = graphs.map_siblings()
    graphs.PHASE["hang"] = 2
    run_id = harness.create(action, 3)
    FAIL["work0"] = 1
    with pytest.raises(Boom):
        harness.attempt(action, run_id, inputs=3, sibling_grace_s=0.3)
    assert CALLS["work1"] == 1 and CALLS["work2"] == 1
    del graphs.PHASE["hang"]
    assert harness.attempt(action, run_id, inputs=3) == 30
    assert CALLS["work1"] == 1, "item 1 finished within the grace: recorded, not run again"
    assert CALLS["work2"] == 2, "item 2 was cancelled after the grace: it runs again"


def test_siblings_in_flight_finish_when_one_branch_times_out(harness: Harness) -> None:
    action = graphs.broadcast_timeout()
    run_id = harness.create(action, 1)
    graphs.PHASE["slow_hangs"] = True
    with pytest.raises(StepTimeout):
        harness.attempt(action, run_id, inputs=1)
    assert harness.attempt(action, run_id, inputs=1) == [2, 3]
    assert CALLS["slow"] == 2 and CALLS["steady"] == 1
