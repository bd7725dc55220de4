"""The attempt port's saves and records (fleet/attempt_port.py), on the attempt's held connection
(store/hot_path.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reflexr_graph import errors
from reflexr_graph.fleet.attempt_port import AttemptPort
from reflexr_graph.store import RedisStore
from reflexr_graph.store.hot_path import HotPath
from tests.redis_server import RedisFactory
from tests.store.support import fail_once, make_run, start


@pytest.fixture
def store(private_redis: RedisFactory) -> Iterator[RedisStore]:
    s = RedisStore.from_url(private_redis().url)
    try:
        yield s
    finally:
        s.close()


def _port(store: RedisStore, hot: HotPath) -> AttemptPort:
    return AttemptPort(store, None, {}, lambda: 30.0, hot=hot)


def test_a_lost_token_is_the_stores_own_fenced_out(store: RedisStore) -> None:
    """The FencedOut the write raised reaches the driver as it is: it says which write was lost."""
    make_run(store)
    stale = start(store)
    fail_once(store, stale)  # the attempt's token no longer owns the run
    with HotPath(store, stale) as hot:
        port = _port(store, hot)
        with pytest.raises(errors.FencedOut, match="its checkpoint was not written"):
            port.save_checkpoint(stale, "{}", seq=1, next_node="s2")
        with pytest.raises(errors.FencedOut, match="its record was not written"):
            port.save_record(stale, "c|s|-|k|x|0", "1")
