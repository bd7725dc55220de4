"""The attempt port's saves and records (fleet/attempt_port.py): each is the store's one write,
sent by the attempt's writer, its held connection (store/hot_path.py), whatever it carries."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from reflexr_graph import errors
from reflexr_graph.core.port import Boundary, Record
from reflexr_graph.fleet.attempt_port import AttemptPort
from reflexr_graph.local_redis import RedisServer
from reflexr_graph.store import RedisStore, keys
from reflexr_graph.store.hot_path import HotPath
from tests.redis_server import RedisFactory
from tests.store.support import fail_once, make_run, start


@pytest.fixture
def server(private_redis: RedisFactory) -> RedisServer:
    return private_redis()


@pytest.fixture
def store(server: RedisServer) -> Iterator[RedisStore]:
    s = RedisStore.from_url(server.url)
    try:
        yield s
    finally:
        s.close()


def _port(store: RedisStore, hot: HotPath) -> AttemptPort:
    return AttemptPort(store, None, {}, lambda: 30.0, hot=hot)


def _clients(r: redis.Redis) -> int:
    return int(r.info("clients")["connected_clients"])


def test_a_lost_token_is_the_stores_own_fenced_out(store: RedisStore) -> None:
    """The FencedOut the write raised reaches the driver as it is: it says which write was lost."""
    make_run(store)
    stale = start(store)
    fail_once(store, stale)  # the attempt's token no longer owns the run
    with HotPath(store) as hot:
        port = _port(store, hot)
        with pytest.raises(errors.FencedOut, match="its checkpoint was not written"):
            port.save_checkpoint(stale, Boundary("{}", seq=1, next_node="s2"))
        with pytest.raises(errors.FencedOut, match="its record was not written"):
            port.save_record(stale, Record("c|s|-|k|x|0", "1"))


def test_a_write_that_gives_slots_back_goes_on_the_held_connection(
    store: RedisStore, server: RedisServer
) -> None:
    """The slots a step held ride in its save or record, on the attempt's own connection: no
    other connection is taken from the pool for them."""
    make_run(store)
    ctx = start(store)
    r = redis.Redis.from_url(server.url)
    store.client.zadd(keys.limit_slots("a"), {"slot-a": 1})
    store.client.zadd(keys.limit_slots("b"), {"slot-b": 1})
    with HotPath(store) as hot, r:
        port = _port(store, hot)
        port.save_checkpoint(ctx, Boundary("{}", seq=1, next_node="s2"))  # the attempt's connection, held
        held = _clients(r)
        port.save_record(ctx, Record("c|s2|-|k|x|0", "1"), returning=[("a", "slot-a")])
        port.save_checkpoint(ctx, Boundary('{"n": 1}', seq=2, next_node="s3"), returning=[("b", "slot-b")])
        assert _clients(r) == held, "a connection more was taken for the writes that gave slots back"
    assert store.client.zcard(keys.limit_slots("a")) == store.client.zcard(keys.limit_slots("b")) == 0
    assert store.get("run-1").checkpoints == 2
    assert store.load_records("run-1") == {}, "the second save dropped the record before it"
