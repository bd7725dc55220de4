"""One durable run of ``linear`` in a process of its own; prints the names of the spans it started.

``test_hot_path.py`` runs this as a subprocess: the test session installs an OpenTelemetry SDK
for good (tests/otel.py), and this probe needs a process without one (unless ``--sdk``).

Usage: ``python -m tests.core.spans_probe REDIS_URL [--sdk] [--traced-run]``; ``--traced-run``
records a W3C trace context with the run, as a traced producer's enqueue does.
"""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any

from opentelemetry import trace

from reflexr_graph import clock
from reflexr_graph.core import tracing
from reflexr_graph.store.redis_store import RedisStore
from tests import otel
from tests.core import graphs
from tests.core.harness import Harness


class CountingTracer(trace.ProxyTracer):
    """reflexr's tracer, noting the name of every span started through it."""

    def __init__(self) -> None:
        super().__init__("reflexr_graph")
        self.started: list[str] = []

    def start_as_current_span(self, name: str, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        self.started.append(name)
        return super().start_as_current_span(name, *args, **kwargs)


TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def main(redis_url: str, sdk: bool, traced_run: bool) -> None:
    if sdk:
        otel.install()
    tracer = CountingTracer()
    tracing.TRACER = tracer
    store = RedisStore.from_url(redis_url)
    harness = Harness(store, [clock.now()])
    action = graphs.linear("spans_probe")
    run_id = harness.create(action, 1) if not traced_run else f"run-{uuid.uuid4().hex[:12]}"
    if traced_run:
        store.create_run(
            run_id, graph=action.name, inputs_json="1", max_attempts=10, dispatch_grace_ms=60_000,
            trace_context=json.dumps({"traceparent": TRACEPARENT}),
        )  # fmt: skip
    harness.attempt(action, run_id)
    store.close()
    print(json.dumps(tracer.started))


if __name__ == "__main__":
    main(sys.argv[1], "--sdk" in sys.argv[2:], "--traced-run" in sys.argv[2:])
