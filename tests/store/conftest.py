"""Fixtures for the store tests: a RedisStore on the faked clock (``fake_clock``, tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from reflexr_graph.store import RedisStore
from reflexr_graph.store.settings import StoreOptions
from tests.store.support import FakeClock

RUN_RETENTION_S = 3_600
DEAD_RETENTION_S = 7_200


@pytest.fixture
def store(redis_url: str, fake_clock: FakeClock) -> Iterator[RedisStore]:
    s = RedisStore.from_url(
        redis_url, options=StoreOptions(run_retention_s=RUN_RETENTION_S, dead_retention_s=DEAD_RETENTION_S)
    )
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def raw(store: RedisStore) -> redis.Redis:
    """The store's own client, for asserting on keys directly."""
    return store.client
