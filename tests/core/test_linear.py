"""Cases 1-3 and 11 of the engine issue: linear graphs, a failing step, a finished graph, a stale attempt."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction
from reflexr_graph.core.port import Boundary
from reflexr_graph.core.tracing import ATTR_ATTEMPT, ATTR_GRAPH, ATTR_RUN_ID, INVOKE_WORKFLOW
from reflexr_graph.errors import FencedOut
from tests.core import graphs
from tests.core.graphs import CALLS, FAIL, Boom
from tests.core.harness import Harness


def test_linear_graph_checkpoints_after_each_step(harness: Harness, spans: InMemorySpanExporter) -> None:
    """Seed: after each completed step a checkpoint is saved and run_progressed recorded."""
    action = graphs.linear()
    run_id = harness.create(action, 1)
    assert harness.attempt(action, run_id, inputs=1) == 4
    # After s0 and s1 the next step is saved; after s2 the output is: the end node runs no code,
    # so no boundary is saved before it.
    assert harness.progressed(run_id) == ["s1", "s2", ""]
    ckpt = harness.checkpoint(run_id)
    assert ckpt is not None and ckpt["finished"] and ckpt["output"] == 4 and ckpt["seq"] == 3
    assert dict(CALLS) == {"s0": 1, "s1": 1, "s2": 1}


def test_spans_execute_step_under_invoke_workflow(harness: Harness, spans: InMemorySpanExporter) -> None:
    """Seed: one execute_step {node} span per step, under the attempt's invoke_workflow span."""
    action = graphs.linear()
    run_id = harness.create(action, 1)
    harness.attempt(action, run_id, inputs=1)
    finished = spans.get_finished_spans()
    (root,) = [s for s in finished if s.name == INVOKE_WORKFLOW]
    assert root.attributes is not None
    assert root.attributes[ATTR_RUN_ID] == run_id and root.attributes[ATTR_GRAPH] == "linear"
    assert root.attributes[ATTR_ATTEMPT] == 1
    steps = [s for s in finished if s.name.startswith("execute_step ")]
    assert [s.name for s in steps] == ["execute_step s0", "execute_step s1", "execute_step s2"]
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id for s in steps)


def test_failed_step_resumes_after_last_completed_step(harness: Harness) -> None:
    """G2: a retry resumes from the latest checkpoint; completed steps do not run again."""
    action = graphs.linear()
    run_id = harness.create(action, 1)
    FAIL["s2"] = 1
    with pytest.raises(Boom):
        harness.attempt(action, run_id, inputs=1)
    assert harness.attempt(action, run_id, inputs=1) == 4
    assert dict(CALLS) == {"s0": 1, "s1": 1, "s2": 2}
    keys = graphs.SEEN["s2"]
    assert keys[0] == keys[1] == run_id, "steps see the same idempotency key on every attempt"


def test_state_is_restored_on_resume(harness: Harness) -> None:
    """Seed: the graph state saved at the boundary is what the resumed attempt continues with."""
    action = graphs.linear()
    run_id = harness.create(action, 1)
    FAIL["s2"] = 1
    with pytest.raises(Boom):
        harness.attempt(action, run_id, inputs=1)
    ckpt = harness.checkpoint(run_id)
    assert ckpt is not None and ckpt["state"] == {"steps": ["s0", "s1"]} and ckpt["next"]["node_id"] == "s2"
    harness.attempt(action, run_id, inputs=1)
    assert harness.checkpoint(run_id) is not None


def test_finished_graph_does_not_run_again(harness: Harness) -> None:
    """Seed: a run that finished its graph but not its recording returns the saved output, running no step."""
    action = graphs.linear()
    run_id = harness.create(action, 1)
    assert harness.attempt(action, run_id, inputs=1, crash_before_success=True) == 4
    # The attempt "crashed" before recording success: the next attempt claims after the lease lapses.
    assert harness.attempt(action, run_id, inputs=1) == 4
    assert dict(CALLS) == {"s0": 1, "s1": 1, "s2": 1}


def test_stale_attempt_cannot_save_a_checkpoint(harness: Harness) -> None:
    """G3: an attempt whose token no longer owns the run cannot write a checkpoint."""
    action = graphs.linear()
    run_id = harness.create(action, 1)
    stale = harness.claim(run_id)
    fresh = harness.claim(run_id)
    assert fresh.token != stale.token
    with pytest.raises(FencedOut):
        harness.store.save_checkpoint(stale, Boundary(json.dumps({"x": 1}), seq=1, next_node="s1"))
    assert harness.checkpoint(run_id) is None


def test_stale_attempt_stops_at_its_first_boundary(harness: Harness) -> None:
    """G3: a running attempt that lost the run stops at its next boundary and writes nothing."""
    import asyncio

    from reflexr_graph.core.driver import run_attempt

    action = graphs.linear()
    run_id = harness.create(action, 1)
    stale = harness.claim(run_id)
    harness.claim(run_id)
    with pytest.raises(FencedOut):
        asyncio.run(run_attempt(action, harness.store, stale, inputs=1))
    assert CALLS["s1"] == 0 and harness.checkpoint(run_id) is None


def test_fork_stack_ids_are_prefixed_by_a_growing_resume_counter(harness: Harness) -> None:
    """DESIGN: a resumed task's fork-stack ids carry the claim's resume counter, which only increases."""
    action = graphs.linear(n=4)
    run_id = harness.create(action, 1)
    FAIL["s1"] = 1
    FAIL["s2"] = 1
    stacks = []
    for _ in range(2):
        with pytest.raises(Boom):
            harness.attempt(action, run_id, inputs=1)
        ckpt = harness.checkpoint(run_id)
        assert ckpt is not None
        stacks.append([item["node_run_id"] for item in ckpt["next"]["fork_stack"]])
    assert harness.ctx is not None and harness.ctx.resume_seq == 2
    assert stacks == [["task:0"], ["r2/task:0"]]
    assert harness.attempt(action, run_id, inputs=1) == 5
    assert dict(CALLS) == {"s0": 1, "s1": 2, "s2": 2, "s3": 1}


def _document_graph() -> GraphAction:
    """read(document) -> count(length) -> end: a large input that only the first step reads."""
    g = GraphBuilder(name="documents", state_type=graphs.Counted, input_type=str, output_type=int)

    @g.step
    async def read(ctx: StepContext[graphs.Counted, None, str]) -> int:
        graphs.hit("read")
        return len(ctx.inputs)

    @g.step
    async def count(ctx: StepContext[graphs.Counted, None, int]) -> int:
        graphs.hit("count")
        return ctx.inputs

    g.add(g.edge_from(g.start_node).to(read), g.edge_from(read).to(count), g.edge_from(count).to(g.end_node))
    return GraphAction(g.build())


def test_the_graph_inputs_are_stored_once_not_in_every_checkpoint(harness: Harness) -> None:
    """Issue 14: a 1 MB input made checkpoints of 1 MB each. Checkpoints now refer to the run's recorded
    inputs ("inputs_ref": "run"), so the one after the first step is a few hundred bytes, and a retry
    resumes from it with the run's inputs."""
    action = _document_graph()
    document = "x" * 1_000_000
    run_id = harness.create(action, document)
    FAIL["count"] = 1
    with pytest.raises(Boom):
        harness.attempt(action, run_id)
    saved = harness.checkpoint(run_id)
    assert saved is not None and saved["inputs"] is None and saved["inputs_ref"] == "run"
    size = harness.store.checkpoint_info(run_id)
    assert size is not None and size["size"] < 1000, size
    assert harness.attempt(action, run_id) == 1_000_000
    assert dict(CALLS) == {"read": 1, "count": 2}
