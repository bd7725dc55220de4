"""Redis at its maxmemory (noeviction) while runs are in flight (issue 33, item 2).

A full Redis is an outage: an attempt whose save meets it waits while its lease holds, as for a
lost connection, and none is counted against max_attempts; nothing dies or is lost, and every
run finishes once memory frees. A producer meanwhile gets one error that names memory: the
Client's StoreFull, the CLI's one line and exit 3, the API's 503 with Retry-After.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from reflexr_graph import errors, local_processes
from reflexr_graph.client import Client
from reflexr_graph.model import Status
from tests import subprocesses
from tests.fleet import graphs
from tests.fleet.conftest import Fleet, assert_consistent, closing_fleet, executions
from tests.redis_server import RedisFactory, RedisServer, fill_past_maxmemory, free_the_fill
from tests.surfaces.cli_runner import run_cli
from tests.surfaces.conftest import ApiServer, serving
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]

RUNS = 4
FULL = "out of memory (maxmemory 48mb, policy noeviction): free memory, raise maxmemory, or shorten retention"
LEASE_TTL_S = "12"
"""Renewed every 4 s: the outage spans a renewal of each lease, and every lease outlives it."""


@pytest.fixture
def full_server(private_redis: RedisFactory) -> RedisServer:
    return private_redis(
        appendonly=False, extra_args=("--maxmemory", "48mb", "--maxmemory-policy", "noeviction")
    )


@pytest.fixture
def full_fleet(full_server: RedisServer, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Fleet]:
    # A recorded run whose message was lost is sent again by the reaper once its dispatch grace passed.
    env = {"REFLEXR_LEASE_TTL_S": LEASE_TTL_S, "REFLEXR_DISPATCH_GRACE_S": "2"}
    queue = f"full-{uuid.uuid4().hex[:6]}"
    with closing_fleet(Fleet(full_server.url, tmp_path, queue=queue, env=env), request) as f:
        yield f


@pytest.fixture
def api(full_fleet: Fleet) -> Iterator[ApiServer]:
    env = {"REFLEXR_REDIS_URL": full_fleet.redis_url, "REFLEXR_QUEUE": full_fleet.queue}
    with serving(local_processes.environment({**env, "PYTHONPATH": subprocesses.PYTHONPATH})) as server:
        yield server


def _waiting_on_the_outage(fleet: Fleet, run_ids: list[str]) -> bool:
    """Every run's save after s2 met the full Redis and is retried while its lease holds, and a
    renewal of its lease met it too, and was retried rather than taken for a lost lease."""
    lines = [line for w in fleet.workers for line in w.log().splitlines()]
    saving = [line for line in lines if "not written yet" in line and FULL in line]
    renewing = [
        line for line in lines if "Redis unreachable while renewing the lease (out_of_memory)" in line
    ]
    return all(
        any(f"run {run_id}: " in line for line in saving)
        and any(f"run {run_id} " in line for line in renewing)
        for run_id in run_ids
    )


def test_a_full_redis_is_an_outage_that_loses_nothing_and_tells_producers(
    full_server: RedisServer,
    full_fleet: Fleet,
    api: ApiServer,
    redis_url: str,
    client_for: Callable[[Fleet], Client],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Steps record executions in another Redis (``redis_url``), so the record is not itself refused.
    workers = [full_fleet.start(concurrency=2, **{graphs.EXECUTIONS_URL_ENV: redis_url}) for _ in range(2)]
    client = client_for(full_fleet)
    gate = tmp_path / "gate"
    knobs = {"value": 1, "gate": "s2", "file_gate": str(gate), "async_gate": True}
    run_ids = [client.enqueue("steps", knobs) for _ in range(RUNS)]
    record = redis.Redis.from_url(redis_url)
    wait_for(lambda: all("s2:1" in executions(record, r) for r in run_ids), 60, "every run to reach s2")

    fill_past_maxmemory(full_server.client())
    with pytest.raises(errors.StoreFull) as refused:
        client.enqueue("steps", {"value": 2})
    assert FULL in str(refused.value)
    said = run_cli(["enqueue", "steps", "--input", '{"value": 3}'], _cli_env(full_fleet), monkeypatch)
    assert said.returncode == 3, said
    assert said.stderr.count("\n") == 1 and FULL in said.stderr, said.stderr
    with api.http() as http:
        answer = http.post("/api/runs", json={"graph": "steps", "inputs": {"value": 4}})
    assert answer.status_code == 503 and answer.headers["Retry-After"] == "5", answer.text
    assert FULL in answer.json()["detail"]

    gate.touch()  # s2 ends in every run; its save meets the full Redis
    wait_for(lambda: _waiting_on_the_outage(full_fleet, run_ids), 30, "the saves to wait on the outage")
    free_the_fill(full_server.client())

    run_ids.append(client.enqueue("steps", {"value": 2}))  # the refused enqueue, sent again
    for run_id in run_ids:
        info = client.wait(run_id, timeout=60)
        assert info.status is Status.SUCCEEDED, info
        assert info.attempts == 1 and info.interruptions == 0, info  # the outage counted nothing
        assert sorted(executions(record, run_id)) == ["s1:1", "s2:1", "s3:1"], "a step ran twice"
    with full_server.client() as r:
        for run_id in run_ids:
            assert_consistent(r, run_id)
    for worker in workers:
        assert worker.alive(), worker.log()[-3000:]
        assert "unexpected error" not in worker.log()
        assert "Traceback" not in worker.log()  # kombu's restore tick, refused, said nothing either
        assert "lease lost" not in worker.log()


def _cli_env(fleet: Fleet) -> dict[str, str]:
    return {"REFLEXR_REDIS_URL": fleet.redis_url, "REFLEXR_QUEUE": fleet.queue, "COLUMNS": "200"}


def test_a_delivery_taken_while_redis_is_full_runs_once_memory_frees(
    full_server: RedisServer,
    full_fleet: Fleet,
    redis_url: str,
    client_for: Callable[[Fleet], Client],
    tmp_path: Path,
) -> None:
    """A queued run's message taken while Redis is full (BRPOP still works at maxmemory) can be
    neither claimed nor put back (LPUSH is refused): the worker drops it, the run being recorded
    with its due entry, and lives on (the refused LPUSH stopped it). A worker started meanwhile
    cannot declare its queues: it retries as for a lost connection (the refusal stopped it at
    start). Once memory frees the reaper sends the run again, and it runs once, its first attempt."""
    full_fleet.env["REFLEXR_LEASE_TTL_S"] = "30"  # the held run's lease outlives the late start
    record = {graphs.EXECUTIONS_URL_ENV: redis_url}
    busy = full_fleet.start(concurrency=1, **record)
    taker = full_fleet.start(concurrency=1, **record)
    client = client_for(full_fleet)
    gate = tmp_path / "gate"
    held = client.enqueue("steps", {"value": 1, "gate": "s2", "file_gate": str(gate), "async_gate": True})
    executed = redis.Redis.from_url(redis_url)
    wait_for(lambda: "s2:1" in executions(executed, held), 60, "the first run to hold a worker")
    holder, idle = (busy, taker) if held in busy.log() else (taker, busy)
    idle.signal(signal.SIGSTOP)  # takes nothing until Redis is full; the holder prefetches no more
    try:
        queued = client.enqueue("steps", {"value": 2})
        fill_past_maxmemory(full_server.client())
        late = full_fleet.start(concurrency=1, wait=False, **record)
    finally:
        idle.signal(signal.SIGCONT)
    wait_for(lambda: "not put back on queue" in idle.log(), 30, "the queued run's claim to meet OOM")
    wait_for(lambda: "Redis cannot serve the broker now (out_of_memory)" in late.log(), 30, "the late start")
    gate.touch()
    free_the_fill(full_server.client())
    full_fleet.wait_ready(late)
    for run_id in (held, queued):
        info = client.wait(run_id, timeout=60)
        assert (info.status, info.attempts, info.interruptions) == (Status.SUCCEEDED, 1, 0), info
        assert sorted(executions(executed, run_id)) == ["s1:1", "s2:1", "s3:1"], "a step ran twice"
    for worker in (holder, idle, late):
        assert worker.alive(), worker.log()[-3000:]
        assert "Unrecoverable error" not in worker.log()
    assert "Traceback" not in holder.log()  # (the idle one logs Celery's Reject with its traceback)
