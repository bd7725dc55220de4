"""Durable runs with the store on a real 3-primary Redis Cluster and the broker on a standalone Redis:
real worker subprocesses, crashed by pid."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
import redis

from reflexr_graph.client import AsyncClient, Client
from reflexr_graph.config.dispatch import TASK_NAME
from reflexr_graph.model import RunInfo, Status
from reflexr_graph.store import keys
from tests.fleet.conftest import Fleet, assert_consistent, count, events, executions, open_gate
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def test_a_run_goes_from_enqueue_through_a_worker_to_success(
    cluster_fleet: Fleet,
    cluster_client_for: Client,
    redis_client: redis.Redis,
    cluster_client: redis.RedisCluster,
) -> None:
    cluster_fleet.start()
    client = cluster_client_for
    run_id = client.enqueue("steps", {"value": 7})
    info = client.wait(run_id, timeout=30)
    assert info.status is Status.SUCCEEDED
    assert info.output == {"value": 7, "steps": ["s1", "s2", "s3"], "attempt": 1}
    assert executions(redis_client, run_id) == ["s1:1", "s2:1", "s3:1"]
    assert_consistent(cluster_client, run_id)


def test_a_sigkilled_worker_resumes_from_its_checkpoint(
    cluster_fleet: Fleet,
    cluster_client_for: Client,
    redis_client: redis.Redis,
    cluster_client: redis.RedisCluster,
) -> None:
    """SIGKILL of the pool child mid-step: the step before the checkpoint ran once; only the step in
    flight ran again, after the reaper of its shard found the lease lapsed."""
    worker = cluster_fleet.start()
    client = cluster_client_for
    run_id = client.enqueue("steps", {"value": 1, "gate": "s2"})
    open_gate(redis_client, run_id, attempt=2)
    wait_for(lambda: "s2:1" in executions(redis_client, run_id), 30, "s2 to start")
    os.kill(worker.child(), signal.SIGKILL)
    info = client.wait(run_id, timeout=60)
    assert info.status is Status.SUCCEEDED, info
    assert count(redis_client, run_id, "s1") == 1
    assert executions(redis_client, run_id) == ["s1:1", "s2:1", "s2:2", "s3:2"]
    assert [e.fields.get("reason") for e in events(client.store, run_id, "attempt_failed")] == ["abandoned"]
    assert_consistent(cluster_client, run_id)


def test_dead_letters_are_listed_across_shards_and_replayed(
    cluster_fleet: Fleet, cluster_client_for: Client, cluster_client: redis.RedisCluster
) -> None:
    cluster_fleet.start(concurrency=2)
    client = cluster_client_for
    run_ids = [client.enqueue("permanent", {"value": n}) for n in range(8)]
    assert len({keys.shard_of(r) for r in run_ids}) > 1, "the runs span shards"
    for run_id in run_ids:
        assert client.wait(run_id, timeout=60).status is Status.DEAD
    assert sorted(info.run_id for info in client.dead_letters()) == sorted(run_ids)
    client.replay(run_ids[0])
    assert client.wait(run_ids[0], timeout=60).status is Status.DEAD
    assert client.get(run_ids[0]).attempts == 1, "a replay starts a fresh budget"
    for run_id in run_ids:
        assert_consistent(cluster_client, run_id)


def test_an_idempotency_key_names_one_run_on_the_cluster(
    cluster_fleet: Fleet, cluster_client_for: Client
) -> None:
    cluster_fleet.start()
    client = cluster_client_for
    first = client.enqueue("steps", {"value": 3}, idempotency_key="order-42")
    assert client.enqueue("steps", {"value": 3}, idempotency_key="order-42") == first
    assert keys.shard_of(first) == keys.shard_of(keys.idem_scope("steps", "order-42"))
    assert client.wait(first, timeout=30).status is Status.SUCCEEDED
    assert client.enqueue("steps", {"value": 3}, idempotency_key="order-42") == first


def test_signals_sleep_and_forks_across_shards(cluster_fleet: Fleet, cluster_client_for: Client) -> None:
    """A run waits for a signal and wakes on it, a durable sleep wakes from its shard's due set,
    and a fork (another shard, likely) resumes from the source's checkpoint."""
    cluster_fleet.start(concurrency=2)
    client = cluster_client_for
    waiting = client.enqueue("approve", {"ticket": "t-1"})
    wait_for(lambda: client.get(waiting).status is Status.WAITING, 30, "the run to wait for its signal")
    assert client.signal(waiting, "approval", {"approved": True, "by": "ana"}) is True
    assert client.wait(waiting, timeout=30).output == "summary of t-1: approved by ana"
    napper = client.enqueue("napper", 0.5)
    assert client.wait(napper, timeout=30).status is Status.SUCCEEDED
    source = client.enqueue("steps", {"value": 5})
    assert client.wait(source, timeout=30).status is Status.SUCCEEDED
    fork = client.fork(source, from_seq=1, idempotency_key="fork-of-source")
    assert client.fork(source, from_seq=1, idempotency_key="fork-of-source") == fork
    info = client.wait(fork, timeout=30)
    assert (info.status, info.forked_from) == (Status.SUCCEEDED, source)
    assert info.output["value"] == 5


def test_the_async_client_enqueues_and_waits_on_the_cluster(cluster_fleet: Fleet) -> None:
    """redis.asyncio's cluster client for the store, the message through kombu to the broker."""
    cluster_fleet.start()

    async def run() -> RunInfo:
        async with AsyncClient(cluster_fleet.settings()) as client:
            run_id = await client.enqueue("steps", {"value": 9}, idempotency_key="async-9")
            assert await client.enqueue("steps", {"value": 9}, idempotency_key="async-9") == run_id
            return await client.wait(run_id, timeout=30)

    info = asyncio.run(run())
    assert (info.status, info.output["value"]) == (Status.SUCCEEDED, 9)


def test_a_foreign_producers_keyed_message_runs_when_its_id_is_in_its_keys_shard(
    cluster_fleet: Fleet, cluster_client_for: Client
) -> None:
    """A message from another language: with its task id in its idempotency key's shard it runs, and a
    second one with the key is a duplicate; with an id elsewhere it is dead-lettered saying how to fix
    it, not dropped (the two keys would be in two slots)."""
    cluster_fleet.start()
    client = cluster_client_for
    scope_shard = keys.shard_of(keys.idem_scope("steps", "ext-1"))
    inside = keys.run_id_in(scope_shard)
    kwargs = {"graph": "steps", "inputs": {"value": 1}, "idempotency_key": "ext-1"}
    client.app.send_task(TASK_NAME, kwargs=kwargs, task_id=inside, queue=cluster_fleet.queue)
    assert client.wait(inside, timeout=30).status is Status.SUCCEEDED
    assert client.enqueue("steps", {"value": 1}, idempotency_key="ext-1") == inside
    other = {"graph": "steps", "inputs": {"value": 2}, "idempotency_key": "ext-2"}
    elsewhere = keys.run_id_in((keys.shard_of(keys.idem_scope("steps", "ext-2")) + 1) % keys.SHARDS)
    client.app.send_task(TASK_NAME, kwargs=other, task_id=elsewhere, queue=cluster_fleet.queue)
    info = client.wait(elsewhere, timeout=30)
    assert (info.status, info.reason) == (Status.DEAD, "bad_message")
    assert "key's shard" in (info.error or "")
