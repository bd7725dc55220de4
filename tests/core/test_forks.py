"""Cases 5 and 6: map and broadcast forks, then a join."""

from __future__ import annotations

import logging

import pytest

from tests.core import graphs
from tests.core.graphs import CALLS, FAIL, Boom
from tests.core.harness import Harness


@pytest.mark.parametrize("closest", [False, True], ids=["start-is-parent-fork", "map-is-parent-fork"])
def test_failing_branch_reruns_branches_not_the_plan(harness: Harness, closest: bool) -> None:
    """Seed + DESIGN: a failure inside a fork resumes from the boundary before the map; plan ran once."""
    action = graphs.map_join(closest=closest)
    parent = action.graph.parent_forks["reduce_list_append"].fork_id
    assert parent == ("map" if closest else "__start__")
    run_id = harness.create(action, 3)
    FAIL["work1"] = 1
    with pytest.raises(Boom):
        harness.attempt(action, run_id, inputs=3)
    assert harness.progressed(run_id) == ["map"]
    assert harness.attempt(action, run_id, inputs=3) == 30
    assert CALLS["plan"] == 1 and CALLS["total"] == 1
    assert CALLS["work1"] == 2
    assert harness.progressed(run_id) == ["map", "total", ""]


def test_no_checkpoint_inside_the_map(harness: Harness) -> None:
    """Seed: boundaries between a fork and its join are never saved."""
    action = graphs.map_join()
    run_id = harness.create(action, 4)
    harness.attempt(action, run_id, inputs=4)
    assert "work" not in harness.progressed(run_id)
    assert "work" in action.boundaries.in_region


def test_broadcast_boundary_before_the_fork_is_saved(harness: Harness) -> None:
    """Seed: the boundary before a broadcast fork is saved (its type is inferred from the step before)."""
    action = graphs.broadcast()
    run_id = harness.create(action, 1)
    FAIL["left"] = 1
    with pytest.raises(Boom):
        harness.attempt(action, run_id, inputs=1)
    assert harness.progressed(run_id) == ["broadcast"]
    assert harness.attempt(action, run_id, inputs=1) == [4, 6]
    assert CALLS["first"] == 1 and CALLS["left"] == 2 and CALLS["done"] == 1


@pytest.mark.parametrize("closest", [False, True], ids=["start-is-parent-fork", "map-is-parent-fork"])
def test_a_map_over_one_item_skips_no_boundary(
    harness: Harness, closest: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 25 item 6: the join's task for the only item of a map is quiescent, but it is still
    inside the fork run: it is never a boundary, so nothing is skipped and nothing advises
    input_types for a join (which input_types refuses)."""
    action = graphs.map_join(closest=closest)
    run_id = harness.create(action, 1)
    with caplog.at_level(logging.WARNING, logger="reflexr_graph.core.tally"):
        assert harness.attempt(action, run_id, inputs=1) == 0
    assert harness.store.get(run_id).skipped_boundaries == 0
    assert not [r for r in caplog.records if "not checkpointed" in r.getMessage()]
    assert harness.progressed(run_id) == ["map", "total", ""]
    assert "reduce_list_append" in action.boundaries.in_region
