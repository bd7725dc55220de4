"""Issue 32: a checkpoint saved under one pydantic-graph release resumes under another, or is
discarded with a reason, never wrongly.

pydantic-graph 2.78 flattens broadcast paths first-in-first-out (2.68: last-in-first-out), makes
the node-run id counters closures of the iterator, and changes how an EndMarker cancels. A run
saved under the previous locked release (2.68, ``tests/core/refs/checkpoints-pg2.68.0.json``) is
resumed here under the installed one, at each of its checkpoints, as a worker would after a deploy
that upgraded pydantic-graph: the steps finished before the checkpoint never run again, the ones
after it run once, and the output is the one the old release computed. The same is done with the
checkpoints this release saves now, so a lock refresh that changes the saved shape shows here too.
"""

from __future__ import annotations

import json
import re
from importlib import metadata
from typing import Any

import pytest

from reflexr_graph.core.port import Boundary
from reflexr_graph.store.redis_store import RedisStore
from tests.core import graphs
from tests.core.graphs import CALLS
from tests.core.harness import Harness
from tests.core.refs.cases import CASES
from tests.core.refs.save_checkpoints import HERE, save_all

pytestmark = pytest.mark.timeout(120)

PREVIOUS = "2.68.0"
SAVED = json.loads((HERE / f"checkpoints-pg{PREVIOUS}.json").read_text())
# What each case's steps are called in CALLS, in the order a run reaches them.
STEPS: dict[str, list[str]] = {
    "linear": ["s0", "s1", "s2", "s3"],
    "map_join_farthest": ["plan", "total"],
    "map_join_closest": ["plan", "total"],
    "broadcast": ["first", "done"],
    "decision": ["read", "odd"],
}


def resume_from(
    harness: Harness, store: RedisStore, case: str, checkpoint: dict[str, Any]
) -> tuple[str, Any]:
    """A run of ``case`` whose latest checkpoint is ``checkpoint`` (saved by another release), then
    one attempt under this release, as after a crash right after that checkpoint was saved."""
    graphs.reset()
    make, inputs = CASES[case]
    action = make()
    run_id = harness.create(action, inputs)
    ctx = harness.claim(run_id)
    store.save_checkpoint(
        ctx, Boundary(checkpoint["payload"], seq=checkpoint["seq"], next_node=checkpoint["next_node"])
    )
    assert store.load_checkpoint(run_id) == checkpoint["payload"], "not saved as the run's latest"
    graphs.reset()
    return run_id, harness.attempt(action, run_id, inputs=inputs)


def stacks_saved_after(store: RedisStore, run_id: str, seq: int) -> list[list[tuple[str, str]]]:
    """The (fork id, node-run id) items of the fork stack of each checkpoint saved after ``seq``."""
    stacks = []
    for info in store.checkpoints(run_id):
        doc = json.loads(store.read_checkpoint(run_id, info.seq).payload)
        if info.seq > seq and doc["next"] is not None:
            stacks.append([(item["fork_id"], item["node_run_id"]) for item in doc["next"]["fork_stack"]])
    return stacks


def expected_calls(case: str, next_node: str | None) -> dict[str, int]:
    """Each listed step runs again only if the checkpoint comes before it."""
    order = STEPS[case]
    if next_node is None:  # the finished checkpoint: its output is kept, nothing runs
        return dict.fromkeys(order, 0)
    first = order.index(next_node) if next_node in order else _first_after(case, next_node)
    return {step: int(i >= first) for i, step in enumerate(order)}


def _first_after(case: str, next_node: str) -> int:
    # A boundary before a fork (map, broadcast) or a decision: the step before it has finished.
    after = {"map": "total", "broadcast": "done", "decide": "odd"}
    return STEPS[case].index(after[next_node])


def _cases(doc: dict[str, Any]) -> list[Any]:
    return [
        pytest.param(case, cp, id=f"{case}-seq{cp['seq']}-{cp['next_node'] or 'finished'}")
        for case, saved in doc["cases"].items()
        for cp in saved["checkpoints"]
    ]


def test_the_previous_release_saved_a_checkpoint_at_each_boundary() -> None:
    """The fixture holds what the old release saved: a chain saves before each step, the forks
    before their fork and after their join (the start's region ignored), the decision before it."""
    nodes = {case: [cp["next_node"] for cp in saved["checkpoints"]] for case, saved in SAVED["cases"].items()}
    assert nodes == {
        "linear": ["s1", "s2", "s3", None],
        "map_join_farthest": ["map", "total", None],
        "map_join_closest": ["map", "total", None],
        "broadcast": ["broadcast", "done", None],
        "decision": ["decide", "odd", None],
    }


@pytest.mark.parametrize(("case", "checkpoint"), _cases(SAVED))
def test_a_checkpoint_of_the_previous_release_resumes_under_this_one(
    harness: Harness, store: RedisStore, case: str, checkpoint: dict[str, Any]
) -> None:
    run_id, output = resume_from(harness, store, case, checkpoint)
    assert output == SAVED["cases"][case]["output"]
    ran = {step: CALLS[step] for step in STEPS[case]}
    assert ran == expected_calls(case, checkpoint["next_node"]), (
        "a finished step ran again, or one was skipped"
    )
    # The fork-stack prefix rule under the new release's id counters: the start's item, which the
    # resumed attempt carries on from the old release's run, is prefixed with its resume counter,
    # so it can never meet an id the new run numbers afresh (task:0, task:1, ... of a later fork).
    for stack in stacks_saved_after(store, run_id, checkpoint["seq"]):
        carried = [node_run_id for fork_id, node_run_id in stack if fork_id == "__start__"]
        fresh = [node_run_id for fork_id, node_run_id in stack if fork_id != "__start__"]
        assert carried and all(re.fullmatch(r"r\d+/task:\d+", i) for i in carried), stack
        assert not set(carried) & set(fresh), stack


def test_this_release_saves_what_it_resumes(harness: Harness, store: RedisStore) -> None:
    """The checkpoints the installed release saves resume under it at every boundary, with the
    previous release's outputs: a lock refresh that changed either shows here and above."""
    now = save_all(store, harness)
    assert {case: doc["output"] for case, doc in now.items()} == {
        case: doc["output"] for case, doc in SAVED["cases"].items()
    }
    for case, doc in now.items():
        for checkpoint in doc["checkpoints"]:
            assert resume_from(harness, store, case, checkpoint)[1] == doc["output"]
            ran = {step: CALLS[step] for step in STEPS[case]}
            assert ran == expected_calls(case, checkpoint["next_node"]), (case, checkpoint["next_node"])


def test_the_installed_release_is_not_the_fixture_s() -> None:
    """The cross-version tests above mean something only while the lock holds another release."""
    assert metadata.version("pydantic-graph") != PREVIOUS
