"""Client: validation before queueing, idempotent enqueue, blocking wait, operator actions."""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import subprocess
import threading
from collections.abc import Callable

import pytest
import redis

from reflexr_graph import schemas
from reflexr_graph.client import AsyncClient, Client
from reflexr_graph.config.settings import load_settings
from reflexr_graph.errors import InvalidInputs, OperationRefused, RunNotFound, UnknownGraph, WaitTimeout
from reflexr_graph.model import Status
from reflexr_graph.store import fanout, keys
from tests.surfaces.graphs import ACTIONS, counter, release_key
from tests.waiting import wait_for

SECRET = "hunter2-private-value"


def queued(r: redis.Redis, queue: str) -> tuple[int, int]:
    """Messages in the broker's queues (the base queue and its graphs' queues), and runs in the store."""
    lists = [k for k in r.keys(f"{queue}*") if r.type(k) == b"list"]
    return sum(int(r.llen(k)) for k in lists), fanout.total(r, keys.all_runs)


def test_enqueue_creates_a_run_and_one_message(client: Client, redis_client: redis.Redis, queue: str) -> None:
    run_id = client.enqueue("counter", {"key": "a", "n": 2})
    info = client.get(run_id)
    assert (info.graph, info.status, info.max_attempts) == ("counter", Status.QUEUED, 1)
    assert queued(redis_client, queue) == (1, 1)
    assert [e.type for e in client.history(run_id)] == ["run_enqueued"]


@pytest.mark.parametrize(("grace_s", "due_in_ms"), [(None, 30_000), (3.0, 3000)])
def test_a_runs_message_is_sent_again_after_the_clients_dispatch_grace(
    redis_url: str,
    queue: str,
    published: None,
    redis_client: redis.Redis,
    grace_s: float | None,
    due_in_ms: int,
) -> None:
    """The reaper's safety net for an enqueued run is due ``dispatch_grace_s`` after it is recorded."""
    settings = {} if grace_s is None else {"dispatch_grace_s": grace_s}
    with Client(load_settings(redis_url=redis_url, queue=queue, **settings)) as c:
        run_id = c.enqueue("counter", {"key": "g", "n": 1})
        created_ms = round(c.get(run_id).created_at * 1000)
    due_ms = redis_client.zscore(keys.due(0), run_id)
    assert due_ms is not None and 0 <= due_ms - created_ms - due_in_ms < 1000


def test_two_threads_with_one_idempotency_key_get_one_run(
    client: Client, redis_client: redis.Redis, queue: str
) -> None:
    barrier = threading.Barrier(8)
    results: list[str] = []

    def call() -> None:
        barrier.wait()
        results.append(client.enqueue("counter", {"key": "k", "n": 1}, idempotency_key="order-42"))

    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(results) == 8 and len(set(results)) == 1
    assert queued(redis_client, queue) == (1, 1)


def test_validation_errors_name_each_failing_field_and_never_the_value(
    client: Client, redis_client: redis.Redis, queue: str
) -> None:
    with pytest.raises(InvalidInputs) as caught:
        client.enqueue("counter", {"key": "", "n": SECRET})
    locs = sorted(tuple(e["loc"]) for e in caught.value.errors)  # type: ignore[arg-type]
    assert locs == [("inputs", "key"), ("inputs", "n")]
    assert "inputs.n must be of type integer" in str(caught.value)
    assert SECRET not in str(caught.value) and SECRET not in repr(caught.value.errors)
    with pytest.raises(InvalidInputs) as missing:
        client.enqueue("counter", {"key": "x"})
    assert missing.value.errors[0]["loc"] == ["inputs", "n"]
    assert missing.value.errors[0]["msg"] == "is required"
    with pytest.raises(InvalidInputs, match=r"state\.total"):
        client.enqueue("counter", {"key": "x", "n": 1}, state={"total": SECRET})
    assert queued(redis_client, queue) == (0, 0)


def test_unknown_graph_queues_nothing(client: Client, redis_client: redis.Redis, queue: str) -> None:
    with pytest.raises(UnknownGraph, match="counter"):
        client.enqueue("no-such-graph", {})
    assert queued(redis_client, queue) == (0, 0)


def test_wait_times_out_cleanly(client: Client) -> None:
    run_id = client.enqueue("counter", {"key": "a", "n": 1})
    with pytest.raises(WaitTimeout, match="still queued"):
        client.wait(run_id, timeout=0.2)


def test_wait_wakes_when_the_run_ends(client: Client) -> None:
    run_id = client.enqueue("counter", {"key": "a", "n": 1})
    seen: list[Status] = []
    waiter = threading.Thread(target=lambda: seen.append(client.wait(run_id, timeout=30).status))
    waiter.start()
    client.cancel(run_id)
    waiter.join(timeout=30)
    assert seen == [Status.CANCELLED]


def test_operator_actions_refuse_wrong_statuses(client: Client) -> None:
    run_id = client.enqueue("counter", {"key": "a", "n": 1})
    with pytest.raises(OperationRefused, match="only dead or cancelled"):
        client.replay(run_id)
    client.cancel(run_id)
    with pytest.raises(OperationRefused):
        client.cancel(run_id)
    assert client.replay(run_id).status is Status.QUEUED
    with pytest.raises(RunNotFound):
        client.get("missing-run")
    with pytest.raises(RunNotFound):
        client.history("missing-run")


def test_publish_rewrites_an_entry_only_when_what_it_says_changes(redis_client: redis.Redis) -> None:
    assert schemas.publish(redis_client, ACTIONS) == ["counter", "blocker", "approvals"]
    assert schemas.publish(redis_client, ACTIONS) == []
    entry = schemas.load(redis_client, "counter")
    assert entry.fingerprint == counter.fingerprint and "s2" in entry.mermaid
    redis_client.hset(
        schemas.GRAPHS, "counter", entry.model_copy(update={"fingerprint": "old"}).model_dump_json()
    )
    assert schemas.publish(redis_client, ACTIONS) == ["counter"]
    signals = schemas.load(redis_client, "approvals").signals
    assert signals["approval"]["required"] == ["approved", "by"], "a signal's schema is published"
    redis_client.hset(
        schemas.GRAPHS,
        "approvals",
        schemas.load(redis_client, "approvals").model_copy(update={"signals": {}}).model_dump_json(),
    )
    assert schemas.publish(redis_client, ACTIONS) == ["approvals"], "a changed signal is published again"
    assert [g.name for g in schemas.list_graphs(redis_client)] == ["approvals", "blocker", "counter"]


def test_async_client(redis_url: str, queue: str, published: None) -> None:
    async def scenario() -> Status:
        async with AsyncClient.from_url(redis_url, queue=queue) as aclient:
            run_id = await aclient.enqueue("counter", {"key": "a", "n": 1})
            await aclient.cancel(run_id)
            return (await aclient.wait(run_id, timeout=10)).status

    assert asyncio.run(scenario()) is Status.CANCELLED


def test_non_json_inputs_are_refused_before_queueing(
    client: Client, redis_client: redis.Redis, queue: str
) -> None:
    with pytest.raises(InvalidInputs, match="inputs"):
        client.enqueue("blocker", float("nan"))
    assert queued(redis_client, queue) == (0, 0)


def _public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, callable)
        if not name.startswith("_")
    }


def test_async_client_has_every_method_of_the_client() -> None:
    """docs/guide.md says AsyncClient has the same methods: same names, same parameters, awaitable
    (or, for what the sync client yields, an async iterator)."""
    sync, async_ = _public_methods(Client), _public_methods(AsyncClient)
    assert set(sync) == set(async_), set(sync) ^ set(async_)
    for name, signature in sync.items():
        assert list(signature.parameters) == list(async_[name].parameters), name
        defaults = [p.default for p in signature.parameters.values()]
        assert defaults == [p.default for p in async_[name].parameters.values()], name
        if name not in ("from_url", "from_settings"):
            method = getattr(AsyncClient, name)
            assert inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method), name


def test_async_client_reads_and_purges(redis_url: str, queue: str, published: None) -> None:
    async def scenario() -> None:
        async with AsyncClient.from_url(redis_url, queue=queue) as aclient:
            run_id = await aclient.enqueue("counter", {"key": "a", "n": 1})
            assert [r.run_id for r in await aclient.runs(status="queued", limit=5)] == [run_id]
            assert [g.name for g in await aclient.graphs()] == ["approvals", "blocker", "counter"]
            assert (await aclient.graph("counter")).name == "counter"
            assert [e.type for e in await aclient.events(run_id)] == ["run_enqueued"]
            assert await aclient.traceback(run_id) is None
            assert await aclient.checkpoint_info(run_id) is None
            waiter = await aclient.enqueue("approvals", "t")
            assert await aclient.signal(waiter, "approval", {"approved": True, "by": "ana"}) is False
            await aclient.cancel(waiter)
            await aclient.purge(waiter)
            await aclient.cancel(run_id)
            assert [r.run_id for r in await aclient.dead_letters(limit=10)] == []
            assert await aclient.purge(run_id) is True
            with pytest.raises(RunNotFound):
                await aclient.get(run_id)

    asyncio.run(scenario())


def test_a_run_whose_worker_was_killed_runs_again_without_the_abandoned_reason(
    client: Client, env: dict[str, str], start_worker: Callable[[], subprocess.Popen[bytes]]
) -> None:
    """Issue 34: the worker of attempt 1 is SIGKILLed mid-step; another worker's reaper counts the
    attempt abandoned and runs the step again. Running again, the run shows no reason: the
    abandoned attempt is its ``last_failure``, with no error (it left none)."""
    env["REFLEXR_LEASE_TTL_S"] = "2"  # the killed worker's lease lapses soon
    first = start_worker()
    run_id = client.enqueue("blocker", "killed")
    wait_for(lambda: client.get(run_id).status is Status.RUNNING, what="attempt 1 running")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=30)
    start_worker()
    wait_for(lambda: client.get(run_id).attempt == 2, timeout=90, what="attempt 2 on the other worker")
    info = client.get(run_id)
    assert (info.status, info.reason, info.error) == (Status.RUNNING, None, None)
    assert info.last_failure is not None
    assert (info.last_failure.attempt, info.last_failure.reason, info.last_failure.error) == (
        1,
        "abandoned",
        None,
    )
    redis.Redis.from_url(env["REFLEXR_REDIS_URL"]).rpush(release_key("killed"), 1)
    done = client.wait(run_id, timeout=60)
    assert (done.status, done.reason, done.last_failure) == (Status.SUCCEEDED, None, None)
