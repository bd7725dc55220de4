"""Durable runs with logfire configured, in a process of their own; prints their spans as JSON.

``test_graph_spans.py`` runs this as a subprocess: configuring logfire is process-wide (it
replaces the global propagator and patches executors), which the test session must not get.
pydantic-graph sends its spans through logfire-api, which forwards to logfire once it is
installed; configured with the session's in-memory exporter, logfire puts them beside ours.

Usage: ``python -m tests.observability.graph_spans_probe REDIS_URL``
"""

from __future__ import annotations

import json
import sys
from typing import Any

import logfire
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction
from reflexr_graph.fleet import attempt
from tests import otel
from tests.core import graphs
from tests.fleet.inproc import claim, create_run, fleet_app


def quiet() -> GraphAction:
    """A graph built without pydantic-graph's instrumentation: durable runs must keep it that way."""
    g = GraphBuilder(name="quiet", input_type=int, output_type=int, auto_instrument=False)

    @g.step
    async def q0(ctx: StepContext[None, None, int]) -> int:
        return ctx.inputs + 1

    g.add(g.edge_from(g.start_node).to(q0), g.edge_from(q0).to(g.end_node))
    return GraphAction(g.build())


def _span(span: Any) -> dict[str, Any]:
    return {
        "name": span.name,
        "id": span.context.span_id,
        "parent": span.parent.span_id if span.parent else None,
        "attributes": {k: v for k, v in (span.attributes or {}).items() if k.startswith("reflexr.")},
    }


def main(redis_url: str) -> None:
    otel.install()
    logfire.configure(
        send_to_logfire=False,
        console=False,
        metrics=False,
        inspect_arguments=False,
        distributed_tracing=True,
        additional_span_processors=[SimpleSpanProcessor(otel.SPANS)],
    )
    app = fleet_app(redis_url, graphs.linear(), quiet(), max_attempts=2)
    store = app.store()
    graphs.FAIL["s2"] = 1  # the first attempt of `linear` fails at s2; the second resumes there
    runs = {name: create_run(store, name, 1, max_attempts=2) for name in ("linear", "quiet")}
    for name, attempts in (("linear", 2), ("quiet", 1)):
        for _ in range(attempts):
            attempt.run_claimed(app, store, claim(app, store, runs[name]))
    store.close()
    app.close()
    print(json.dumps([_span(s) for s in otel.SPANS.get_finished_spans()]))


if __name__ == "__main__":
    main(sys.argv[1])
