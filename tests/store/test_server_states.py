"""Transient server states are outages (issue 33, item 2): each of the seven replies is a
StoreUnavailable of its own kind, provoked on a real server where one can be, and a script that
would write to a full Redis is refused before its first write."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
import redis
from redis import exceptions as redis_errors
from redis._parsers.base import BaseParser

from reflexr_graph import errors
from reflexr_graph.core.port import Boundary
from reflexr_graph.local_processes import free_port
from reflexr_graph.store import RedisStore, connection_errors
from reflexr_graph.store.aio import AsyncStore
from reflexr_graph.store.hot_path import HotPath
from reflexr_graph.store.ops import cmd
from tests.redis_server import RedisFactory, RedisServer, fill_past_maxmemory, free_the_fill
from tests.store.support import make_run, start
from tests.waiting import wait_for


@pytest.fixture
def full_server(private_redis: RedisFactory) -> RedisServer:
    return private_redis(extra_args=("--maxmemory", "4mb", "--maxmemory-policy", "noeviction"))


@pytest.fixture
def full_store(full_server: RedisServer) -> Iterator[RedisStore]:
    store = RedisStore.from_url(full_server.url)
    try:
        yield store
    finally:
        store.close()


def _snapshot(r: redis.Redis) -> dict[bytes, bytes | None]:
    """Every key but the fill, as DUMP serializes it: the run's hash, its history, its events, the
    indexes. Equal snapshots: nothing was written."""
    return {key: r.dump(key) for key in r.scan_iter() if not key.startswith(b"fill:")}


def test_a_full_redis_is_store_full_naming_its_maxmemory_and_policy(full_store: RedisStore) -> None:
    """A blocking store's script and the enqueue's create_run: StoreFull, an outage, with the figures."""
    fill_past_maxmemory(full_store.client)
    with pytest.raises(errors.StoreFull) as raised:
        make_run(full_store, "run-full")
    assert raised.value.kind == "out_of_memory"
    assert isinstance(raised.value, errors.StoreUnavailable)
    assert (
        "out of memory (maxmemory 4mb, policy noeviction): free memory, raise maxmemory, or shorten "
        in str(raised.value)
    )


def test_a_full_redis_on_the_hot_path_and_the_async_store_is_store_full(
    full_server: RedisServer, full_store: RedisStore
) -> None:
    make_run(full_store, "run-hot")
    ctx = start(full_store, "run-hot")
    fill_past_maxmemory(full_store.client)
    with HotPath(full_store) as hot, pytest.raises(errors.StoreFull, match="maxmemory 4mb"):
        full_store.save_checkpoint(ctx, Boundary('{"n": 1}', seq=1, next_node="s2"), via=hot)

    async def enqueue() -> None:
        store = AsyncStore.from_url(full_server.url)
        try:
            await store.handle(cmd("set", "one-more", "x" * 65536))
        finally:
            await store.client.aclose()

    with pytest.raises(errors.StoreFull, match="maxmemory 4mb, policy noeviction"):
        asyncio.run(enqueue())


def test_a_full_redis_whose_info_is_refused_says_so_without_figures(full_server: RedisServer) -> None:
    """Managed Redis often refuses INFO and CONFIG: the error still names memory, and says why no figures."""
    with full_server.client() as admin:
        admin.execute_command("ACL", "SETUSER", "app", "on", ">pw", "~*", "&*", "+@all", "-info", "-config")
    store = RedisStore.from_url(full_server.url.replace("redis://", "redis://app:pw@"))
    try:
        fill_past_maxmemory(full_server.client())
        with pytest.raises(errors.StoreFull) as raised:
            make_run(store, "run-acl")
    finally:
        store.close()
    assert "is out of memory (its maxmemory and policy could not be read): free memory" in str(raised.value)


@pytest.mark.parametrize("finish", ["succeed", "release"])
def test_a_script_that_would_write_to_a_full_redis_writes_nothing(
    full_store: RedisStore, finish: str
) -> None:
    """succeed.lua's and release.lua's first writes free memory (a ZREM): undeclared, Redis judged
    each command as the script ran and let these run on past maxmemory, so the run finished while
    every other write was refused. Declared (#!lua), each is refused before it runs: the run hash,
    its history and events are as they were, and the same call lands once memory is freed."""
    make_run(full_store, "run-full")
    ctx = start(full_store, "run-full")
    full_store.save_checkpoint(ctx, Boundary('{"count": 1}', seq=1, next_node="s2"))
    r = full_store.client
    before = _snapshot(r)
    call = {
        "succeed": lambda: full_store.succeed(ctx, output_json='{"done": true}'),
        "release": lambda: full_store.release(ctx),
    }[finish]
    fill_past_maxmemory(r)
    with pytest.raises(errors.StoreFull):
        call()
    assert _snapshot(r) == before
    free_the_fill(r)
    assert call()
    assert _snapshot(r) != before


def test_a_read_only_replica_is_read_only(private_redis: RedisFactory) -> None:
    primary = private_redis()
    replica = private_redis()
    with replica.client() as r:
        r.replicaof("127.0.0.1", primary.port)
        wait_for(lambda: r.info("replication")["master_link_status"] == "up", 10, "the replica to sync")
    store = RedisStore.from_url(replica.url)
    try:
        with pytest.raises(errors.StoreUnavailable) as raised:
            make_run(store, "run-ro")
    finally:
        store.close()
    assert raised.value.kind == "read_only"


def test_a_replica_cut_off_from_its_primary_is_master_down(private_redis: RedisFactory) -> None:
    """A replica that serves no stale data answers MASTERDOWN while its primary is gone."""
    gone = private_redis()
    port = gone.port
    gone.stop()
    replica = private_redis(
        extra_args=("--replicaof", "127.0.0.1", str(port), "--replica-serve-stale-data", "no")
    )
    store = RedisStore.from_url(replica.url)
    try:
        with pytest.raises(errors.StoreUnavailable) as raised:
            store.handle(cmd("hgetall", "rg:{run-x}:run"))
    finally:
        store.close()
    assert raised.value.kind == "master_down"


def test_a_cluster_node_without_its_slots_is_cluster_down(private_redis: RedisFactory) -> None:
    # Its bus on a port of its own: the default (client port + 10000) can lie past 65535, which
    # refuses to start (tests/redis_cluster.py starts its nodes the same way).
    node = private_redis(
        extra_args=("--cluster-enabled", "yes", "--cluster-port", str(free_port()), "--appendonly", "no")
    )
    with node.client() as r, pytest.raises(redis_errors.ResponseError) as raised:
        r.get("x")
    found = connection_errors.translate(raised.value, connection_errors.Endpoint(host="127.0.0.1"))
    assert isinstance(found, errors.StoreUnavailable) and found.kind == "cluster_down"


def test_a_server_busy_running_a_script_is_busy(private_redis: RedisFactory) -> None:
    server = private_redis(extra_args=("--busy-reply-threshold", "50"))
    looping = threading.Thread(target=_loop_until_killed, args=(server,), daemon=True)
    looping.start()
    store = RedisStore.from_url(server.url)
    try:
        with server.client() as r:
            wait_for(lambda: _busy(r), 10, "the script to pass busy-reply-threshold")
        with pytest.raises(errors.StoreUnavailable) as raised:
            store.ping()
    finally:
        with server.client() as r:
            r.script_kill()
        looping.join(10)
        store.close()
    assert raised.value.kind == "busy"


def _loop_until_killed(server: RedisServer) -> None:
    with server.client() as r, pytest.raises(redis_errors.ResponseError, match="killed"):
        r.eval("while true do end", 0)


def _busy(r: redis.Redis) -> bool:
    try:
        r.ping()
    except redis_errors.ResponseError as exc:
        return str(exc).startswith("BUSY")
    return False


SEVEN = {
    "OOM command not allowed when used memory > 'maxmemory'.": "out_of_memory",
    "LOADING Redis is loading the dataset in memory": "loading",
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.": "busy",
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.": "master_down",
    "READONLY You can't write against a read only replica.": "read_only",
    "TRYAGAIN Multiple keys request during rehashing of slot": "try_again",
    "CLUSTERDOWN The cluster is down": "cluster_down",
}


@pytest.mark.parametrize(("reply", "kind"), SEVEN.items(), ids=[k.split()[0] for k in SEVEN])
def test_each_transient_reply_is_an_outage_of_its_own_kind(reply: str, kind: str) -> None:
    """The exception redis-py's reply parser makes of each server reply (no server needed to read it)."""
    exc = BaseParser.parse_error(reply)
    found = connection_errors.translate(exc, connection_errors.Endpoint(host="127.0.0.1", port=6379))
    assert isinstance(found, errors.StoreUnavailable) and not isinstance(found, errors.RedisMisconfigured)
    assert found.kind == kind
    assert "127.0.0.1:6379" in str(found)
    assert len(set(SEVEN.values())) == len(SEVEN)


def test_busykey_is_not_busy() -> None:
    """A reply that merely starts with the same letters is the caller's error, not an outage."""
    exc = BaseParser.parse_error("BUSYKEY Target key name already exists.")
    assert connection_errors.translate(exc, connection_errors.Endpoint()) is None


def test_a_probe_closed_leaves_no_connection_open(private_redis: RedisFactory) -> None:
    """The client of its own that an error's message asks the server with (how many databases it
    has) closes its connection when closed, rather than leaving the socket to the garbage collector
    (which warned of it as unclosed, in whichever test was running then)."""
    server = private_redis()
    watcher = server.client()
    store = RedisStore.from_url(server.url)
    try:
        before = len(watcher.client_list())
        probe = connection_errors._probe(store.client)
        assert probe is not None
        probe.ping()
        assert len(watcher.client_list()) == before + 1
        probe.close()
        wait_for(lambda: len(watcher.client_list()) == before, 5, "the probe's connection to close")
    finally:
        store.close()
        watcher.close()
