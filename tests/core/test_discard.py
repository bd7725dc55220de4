"""Case 4: a checkpoint that cannot be resumed is discarded with a reason, and the run starts over."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from reflexr_graph import GraphAction
from reflexr_graph.core.port import Boundary
from reflexr_graph.core.tracing import (
    ATTR_DISCARD_ERROR,
    ATTR_DISCARD_REASON,
    EVENT_DISCARDED,
    INVOKE_WORKFLOW,
)
from tests.core import graphs
from tests.core.graphs import CALLS, FAIL, Boom
from tests.core.harness import Harness

SECRET = "hunter2-private-value"


def _plant(harness: Harness, action: GraphAction, payload: str) -> str:
    run_id = harness.create(action, 1)
    harness.store.save_checkpoint(harness.claim(run_id), Boundary(payload, seq=1, next_node="s1"))
    return run_id


def _discards(spans: InMemorySpanExporter) -> list[dict[str, Any]]:
    found = []
    for span in spans.get_finished_spans():
        if span.name == INVOKE_WORKFLOW:
            found += [dict(e.attributes or {}) for e in span.events if e.name == EVENT_DISCARDED]
    return found


def _valid(action: GraphAction, **override: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format": 1,
        "graph": action.name,
        "fingerprint": action.fingerprint,
        "seq": 1,
        "state": {"steps": ["s0"]},
        "inputs": 1,
        "next": {
            "node_id": "s1",
            "inputs": 2,
            "fork_stack": [{"fork_id": "__start__", "node_run_id": "task:0", "thread_index": 0}],
        },
    }
    doc.update(override)
    return doc


def _starts_over(
    harness: Harness, action: GraphAction, run_id: str, spans: InMemorySpanExporter
) -> dict[str, Any]:
    assert harness.attempt(action, run_id, inputs=1) == 4
    assert CALLS["s0"] == 1, "the run started over from the first step"
    (event,) = _discards(spans)
    return event


@pytest.mark.parametrize(
    "payload",
    ["not json at all", "[1, 2]", json.dumps({"format": 2, "anything": True}), json.dumps({"format": 1})],
    ids=["garbage", "not-an-object", "other-version", "missing-fields"],
)
def test_format(harness: Harness, spans: InMemorySpanExporter, payload: str) -> None:
    """Amendment 09-29: not a checkpoint, or another format version -> reason 'format'."""
    action = graphs.linear()
    event = _starts_over(harness, action, _plant(harness, action, payload), spans)
    assert event[ATTR_DISCARD_REASON] == "format"


@pytest.mark.parametrize("change", ["node", "edge", "type"])
def test_graph_changed(harness: Harness, spans: InMemorySpanExporter, change: str) -> None:
    """DESIGN: the fingerprint hashes nodes, edges and known types; any change -> 'graph_changed'."""
    before = graphs.linear()
    run_id = harness.create(before, 1)
    FAIL["s2"] = 1
    with pytest.raises(Boom):
        harness.attempt(before, run_id, inputs=1)
    CALLS.clear()
    after = {
        "node": lambda: graphs.linear(n=4),
        "edge": lambda: graphs.linear(transform=True),
        "type": lambda: GraphAction(graphs.linear().graph, input_types={"s1": float}),
    }[change]()
    assert after.fingerprint != before.fingerprint
    assert harness.attempt(after, run_id, inputs=1) == (5 if change == "node" else 4)
    assert CALLS["s0"] == 1
    (event,) = _discards(spans)
    assert event[ATTR_DISCARD_REASON] == "graph_changed"


def test_untyped(harness: Harness, spans: InMemorySpanExporter) -> None:
    """Amendment 09-29: a checkpoint whose next node has no known type -> 'untyped'."""
    action = graphs.decision_after_step(annotate="none")
    doc = _valid(action, next={"node_id": "decide", "inputs": 3, "fork_stack": []}, state={"steps": []})
    run_id = harness.create(action, 3)
    harness.store.save_checkpoint(harness.claim(run_id), Boundary(json.dumps(doc), seq=1, next_node="decide"))
    assert harness.attempt(action, run_id, inputs=3) == "odd"
    assert CALLS["read"] == 1
    (event,) = _discards(spans)
    assert event[ATTR_DISCARD_REASON] == "untyped"


@pytest.mark.parametrize(
    ("override", "where"),
    [
        ({"state": {"steps": SECRET}}, "state.steps"),
        ({"inputs": SECRET}, "inputs"),
        ({"next": {"node_id": "s1", "inputs": 2, "fork_stack": [{"fork_id": SECRET}]}}, "next.fork_stack"),
        ({"next": {"node_id": "s1", "inputs": SECRET, "fork_stack": []}}, "next.inputs"),
    ],
    ids=["state", "inputs", "fork-stack", "next-inputs"],
)
def test_invalid(harness: Harness, spans: InMemorySpanExporter, override: dict[str, Any], where: str) -> None:
    """Amendment 09-29: a saved value that no longer validates -> 'invalid', with where and why, no values."""
    action = graphs.linear()
    event = _starts_over(
        harness, action, _plant(harness, action, json.dumps(_valid(action, **override))), spans
    )
    assert event[ATTR_DISCARD_REASON] == "invalid"
    error = str(event[ATTR_DISCARD_ERROR])
    assert error.startswith(where) and SECRET not in error


def test_valid_planted_checkpoint_resumes(harness: Harness, spans: InMemorySpanExporter) -> None:
    """Control for the cases above: the same planted checkpoint, unaltered, resumes at s1."""
    action = graphs.linear()
    run_id = _plant(harness, action, json.dumps(_valid(action)))
    assert harness.attempt(action, run_id, inputs=1) == 4
    assert CALLS["s0"] == 0 and _discards(spans) == []
