"""Fixtures for engine tests: real attempts against a real Redis, spans in memory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from reflexr_graph import clock
from reflexr_graph.store.redis_store import RedisStore
from tests import otel
from tests.core import graphs
from tests.core.harness import Harness

_EXPORTER = otel.SPANS


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


@pytest.fixture
def store(redis_url: str) -> Iterator[RedisStore]:
    s = RedisStore.from_url(redis_url)
    yield s
    s.close()


@pytest.fixture(autouse=True)
def _reset_graph_knobs() -> Iterator[None]:
    graphs.reset()
    yield
    graphs.reset()


@pytest.fixture
def fake_clock() -> Iterator[list[float]]:
    """A clock the test moves by hand: ``fake_clock[0] += 60`` lets every lease lapse."""
    now = [clock.now()]
    previous = clock.set_source(lambda: now[0])
    yield now
    clock.set_source(previous)


@pytest.fixture
def harness(store: RedisStore, fake_clock: list[float]) -> Harness:
    return Harness(store, fake_clock)
