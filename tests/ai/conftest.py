"""Fixtures for agent tests: real attempts against a real Redis, the graph's Redis set for its steps."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reflexr_graph import clock
from reflexr_graph.store.redis_store import RedisStore
from tests.core.harness import Harness


@pytest.fixture
def store(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[RedisStore]:
    # tests/ai/graphs.py logs the model's requests and the tool's calls in the worker's Redis.
    monkeypatch.setenv("REFLEXR_REDIS_URL", redis_url)
    s = RedisStore.from_url(redis_url)
    yield s
    s.close()


@pytest.fixture
def harness(store: RedisStore) -> Iterator[Harness]:
    now = [clock.now()]
    previous = clock.set_source(lambda: now[0])
    yield Harness(store, now)
    clock.set_source(previous)
