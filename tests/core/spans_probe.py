"""One durable run of ``linear`` in a process of its own; prints the names of the spans it started.

``test_hot_path.py`` runs this as a subprocess: the test session installs an OpenTelemetry SDK
for good (tests/otel.py), and this probe needs a process without one (unless ``--sdk``).

Usage: ``python -m tests.core.spans_probe REDIS_URL [--sdk]``
"""

from __future__ import annotations

import json
import sys
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


def main(redis_url: str, sdk: bool) -> None:
    if sdk:
        otel.install()
    tracer = CountingTracer()
    tracing.TRACER = tracer
    store = RedisStore.from_url(redis_url)
    harness = Harness(store, [clock.now()])
    action = graphs.linear("spans_probe")
    harness.attempt(action, harness.create(action, 1))
    store.close()
    print(json.dumps(tracer.started))


if __name__ == "__main__":
    main(sys.argv[1], "--sdk" in sys.argv[2:])
