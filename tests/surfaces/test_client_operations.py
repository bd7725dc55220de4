"""Issue 25, the clients' shape: both clients run the same operations, each written once, and the
operations the CLI and the API used to build themselves (limits, the quarantine, a dead run's
detail, bulk replay) are the clients' own, the same on both."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import redis

from reflexr_graph.client import AsyncClient, Client
from reflexr_graph.client.operation import Operation
from reflexr_graph.client.operations import Operations
from reflexr_graph.core.port import Boundary
from reflexr_graph.errors import InvalidInputs, OperationRefused, RunNotFound
from reflexr_graph.model import LimitUsage, QuarantinedItem, Status
from reflexr_graph.store import keys
from reflexr_graph.store.quarantine import Quarantine
from tests.store.support import fail_once, start
from tests.surfaces.graphs import ACTIONS

T = TypeVar("T")

SHARED = {"limits", "quarantined", "purge_quarantine", "dead_letter", "replay_many", "ping", "publish"}
"""The operations issue 25 put in the clients, which the CLI and the API reached into the store for."""

STORE_ATTRIBUTES = {"handle", "keep_clock", "max_block_ms", "options", "close"}
"""What a client may use of its store: the handler that answers operations, its clock's sample of
Redis's time (clock.py: an operation's times are the store's), and settings."""


def _public(cls: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls, callable) if not name.startswith("_")}


def test_both_clients_have_the_operations_the_cli_and_the_api_use() -> None:
    assert _public(Client) >= SHARED, SHARED - _public(Client)
    assert _public(AsyncClient) >= SHARED, SHARED - _public(AsyncClient)
    assert _public(Client) == _public(AsyncClient), _public(Client) ^ _public(AsyncClient)
    for name in SHARED:
        sync, async_ = inspect.signature(getattr(Client, name)), inspect.signature(getattr(AsyncClient, name))
        assert list(sync.parameters) == list(async_.parameters), name
        assert inspect.getdoc(getattr(Client, name)), f"Client.{name} has no docstring"


@pytest.mark.parametrize("cls", [Client, AsyncClient])
def test_a_client_uses_its_store_only_to_answer_operations(cls: type) -> None:
    """Every method runs an operation through ``_do``: none calls a store method of its own, so the
    two clients cannot drift apart (Client used to call self.store.get, .cancel, ._handle...). The
    operation table (client/operations.py), which both clients are built from, is read too."""
    sources = [inspect.getsource(c) for c in cls.__mro__ if c.__module__.startswith("reflexr_graph.client")]
    used = set(re.findall(r"self\.store\.(\w+)", "".join(sources)))
    assert used <= STORE_ATTRIBUTES, used - STORE_ATTRIBUTES


HAND_WRITTEN = {"stream", "close", "from_url", "from_settings"}
"""The public methods not in the operation table: an iterator on one client and an async iterator
on the other, closing, and the constructors."""


def test_every_method_of_both_clients_is_the_one_operation_of_the_table() -> None:
    """Issue 36: each operation is written once (client/operations.py), with its docstring: a
    method added to one client only, or written twice by hand, fails here."""
    table = {name for name, member in vars(Operations).items() if isinstance(member, Operation)}
    assert _public(Client) == _public(AsyncClient) == table | HAND_WRITTEN, _public(Client) ^ _public(
        AsyncClient
    )
    for name in table:
        sync, async_ = getattr(Client, name), getattr(AsyncClient, name)
        assert inspect.signature(sync) == inspect.signature(async_), name
        assert sync.__doc__ and sync.__doc__ is async_.__doc__, name
        assert inspect.iscoroutinefunction(async_) and not inspect.iscoroutinefunction(sync), name


def _both(
    redis_url: str, queue: str, sync: Callable[[Client], T], async_: Callable[[AsyncClient], Awaitable[T]]
) -> tuple[T, T]:
    """What ``sync`` answers on a Client and ``async_`` on an AsyncClient, on the same Redis."""

    async def run() -> T:
        async with AsyncClient.from_url(redis_url, queue=queue) as aclient:
            return await async_(aclient)

    with Client.from_url(redis_url, queue=queue) as client:
        return sync(client), asyncio.run(run())


def test_both_clients_publish_and_ping(redis_url: str, queue: str) -> None:
    async def publish_twice(aclient: AsyncClient) -> list[list[str]]:
        await aclient.ping()
        return [await aclient.publish(ACTIONS), await aclient.publish(ACTIONS)]

    def read(client: Client) -> list[str]:
        client.ping()
        return [g.name for g in client.graphs()]

    names, written = _both(redis_url, queue, read, publish_twice)
    assert names == [] and written == [["counter", "blocker", "approvals"], []]


def test_limits_are_read_by_both_clients(redis_url: str, queue: str, redis_client: redis.Redis) -> None:
    redis_client.hset(keys.LIMITS, "llm", '{"rate":"10/s","burst":4,"concurrency":2}')
    redis_client.zadd(keys.limit_slots("llm"), {"slot-a": 4_000_000_000_000})
    redis_client.hset(keys.limit_stats("llm"), mapping={"granted": 7, "denied": 3, "waited_ms": 1500})
    sync, async_ = _both(redis_url, queue, lambda c: c.limits(), lambda c: c.limits())
    expected = LimitUsage("llm", "10/s", 4, 2, in_use=1, granted=7, denied=3, waited_s=1.5)
    assert sync == async_ == [expected]


def test_the_quarantine_is_read_and_purged_by_both_clients(
    redis_url: str, queue: str, redis_client: redis.Redis
) -> None:
    quarantine = Quarantine(redis_client)
    for raw in (b"first", b"second"):
        quarantine.put(QuarantinedItem.of(queue="reflexr", reason="not_json", detail="not JSON", raw=raw))
    sync, async_ = _both(redis_url, queue, lambda c: c.quarantined(1), lambda c: c.quarantined(1))
    assert sync == async_
    assert ([i.raw for i in sync.items], sync.length, sync.counts) == (["second"], 2, {"not_json": 2})
    with Client.from_url(redis_url, queue=queue) as client:
        assert client.purge_quarantine() == 2
        assert client.quarantined().length == 0 and client.quarantined().counts == {}


def _dead(client: Client, inputs: dict[str, Any], *, checkpoint: bool = False) -> str:
    """A run of ``counter`` dead-lettered by a permanent failure, maybe after saving a checkpoint."""
    run_id = client.enqueue("counter", inputs)
    ctx = start(client.store, run_id)
    if checkpoint:
        client.store.save_checkpoint(ctx, Boundary("{}", seq=1, next_node="s2"))
    fail_once(client.store, ctx, permanent=True)
    return run_id


def test_a_dead_run_shows_the_same_detail_through_both_clients(
    client: Client, redis_url: str, queue: str
) -> None:
    run_id = _dead(client, {"key": "d", "n": 1}, checkpoint=True)
    sync, async_ = _both(redis_url, queue, lambda c: c.dead_letter(run_id), lambda c: c.dead_letter(run_id))
    assert sync == async_
    assert sync.run.status is Status.DEAD and sync.run.run_id == run_id
    assert sync.traceback is not None and "ValueError: step broke" in sync.traceback
    assert sync.checkpoint is not None and (sync.checkpoint["seq"], sync.checkpoint["next_node"]) == (1, "s2")
    with pytest.raises(RunNotFound):
        client.dead_letter("no-such-run")


def test_bulk_replay_by_ids_or_by_filter_lists_what_it_refused(client: Client, redis_url: str) -> None:
    first, second = _dead(client, {"key": "a", "n": 1}), _dead(client, {"key": "b", "n": 1})
    queued = client.enqueue("counter", {"key": "q", "n": 1})
    seen: list[str] = []
    done = client.replay_many([first, "no-such-run", queued], progress=seen.append)
    assert done.replayed == [first] and seen == [first, "no-such-run", queued]
    assert [(r.run_id, type(r.error)) for r in done.refused] == [
        ("no-such-run", RunNotFound),
        (queued, OperationRefused),
    ]
    assert client.get(first).status is Status.QUEUED

    async def by_filter() -> list[str]:
        async with AsyncClient.from_url(redis_url, queue=client.settings.queue) as aclient:
            return (await aclient.replay_many(graph="counter", reason="step_failed")).replayed

    assert asyncio.run(by_filter()) == [second], "only the runs still dead, of that graph and reason"
    with pytest.raises(InvalidInputs, match="not both"):
        client.replay_many([first], graph="counter")
