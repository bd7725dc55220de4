"""pydantic-graph's own spans survive durable execution: a graph that emits ``run graph {name}``
and ``run node {id}`` (its default, what Logfire users see) still does, under ``invoke_workflow``.

The runs happen in ``graph_spans_probe.py``, a subprocess, because configuring logfire is
process-wide; it prints the spans, and this test checks how they nest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reflexr_graph.core import tracing
from tests import subprocesses
from tests.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]
Span = dict[str, Any]


@pytest.fixture(scope="module")
def spans(redis_server: RedisServer) -> list[Span]:
    """The spans of the probe's runs: one run of each graph, on the session's Redis, emptied first."""
    with redis_server.client() as r:
        r.flushall()
    done = subprocess.run(
        [sys.executable, "-m", "tests.observability.graph_spans_probe", redis_server.url],
        cwd=ROOT, env=subprocesses.with_logfire(os.environ), capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    spans: list[Span] = json.loads(done.stdout)
    return spans


def _children(spans: list[Span], parent: Span) -> list[str]:
    return sorted(s["name"] for s in spans if s["parent"] == parent["id"])


def _only(spans: list[Span], parent: Span, name: str) -> Span:
    (span,) = [s for s in spans if s["parent"] == parent["id"] and s["name"] == name]
    return span


def _attempts(spans: list[Span], graph: str) -> list[Span]:
    found = [
        s
        for s in spans
        if s["name"] == tracing.INVOKE_WORKFLOW and s["attributes"][tracing.ATTR_GRAPH] == graph
    ]
    return sorted(found, key=lambda s: int(s["attributes"][tracing.ATTR_ATTEMPT]))


@pytest.mark.timeout(120)
def test_run_graph_and_run_node_spans_nest_under_invoke_workflow(spans: list[Span]) -> None:
    """Each attempt: invoke_workflow > run graph linear > run node {id} > execute_step {id}. The
    attempt that resumed at s2 runs (and traces) only s2, and the checkpoint seq stays on
    invoke_workflow, not on pydantic-graph's span around the boundary."""
    first, resumed = _attempts(spans, "linear")
    for attempt, nodes in ((first, ["s0", "s1", "s2"]), (resumed, ["s2"])):
        assert _children(spans, attempt) == ["run graph linear"]
        graph_span = _only(spans, attempt, "run graph linear")
        assert _children(spans, graph_span) == [f"run node {n}" for n in nodes]
        for node in nodes:
            node_span = _only(spans, graph_span, f"run node {node}")
            assert _children(spans, node_span) == [tracing.step_span_name(node)]
        assert tracing.ATTR_SEQ not in graph_span["attributes"]
    assert first["attributes"][tracing.ATTR_SEQ] == 2 and resumed["attributes"][tracing.ATTR_SEQ] == 3


@pytest.mark.timeout(120)
def test_a_graph_built_without_instrumentation_stays_without(spans: list[Span]) -> None:
    """The graph's own setting is kept either way: auto_instrument=False emits only reflexr's spans."""
    (attempt,) = _attempts(spans, "quiet")
    assert _children(spans, attempt) == [tracing.step_span_name("q0")]
    assert not [s for s in spans if s["name"] == "run graph quiet"]
