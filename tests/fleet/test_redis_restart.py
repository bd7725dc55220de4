"""Redis restarted (SIGTERM, AOF written, started again on the same port and dir) while a step runs.

The crash tests' steps are short, so their restarts rarely find an attempt in flight; here a
step waits, without blocking its event loop, for a file the test creates once Redis is back.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.model import Status
from tests.fleet.conftest import Fleet, Worker, assert_consistent, events, executions
from tests.redis_server import RedisFactory, RedisServer
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

LAPSED = "lease lost (Redis stayed unreachable for a whole lease TTL"
"""What the heartbeat of an attempt logs when Redis stayed away for longer than its lease."""


@pytest.fixture
def server(private_redis: RedisFactory) -> RedisServer:
    return private_redis()


@pytest.fixture
def restart_fleet(server: RedisServer, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Fleet]:
    fleet = Fleet(server.url, tmp_path, queue=f"restart-{uuid.uuid4().hex[:6]}")
    try:
        yield fleet
    finally:
        fleet.close()
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            print(fleet.dump_logs())


def start_waiting_run(server: RedisServer, client: Client, gate: Path) -> str:
    """A run whose step s2 runs (an awaiting step) until ``gate`` exists; returns once s2 started."""
    run_id = client.enqueue("steps", {"value": 1, "gate": "s2", "file_gate": str(gate), "async_gate": True})
    with redis.Redis.from_url(server.url) as r:
        wait_for(lambda: "s2:1" in executions(r, run_id), 30, "s2 to start")
    return run_id


def outage_past_the_lease(server: RedisServer, workers: list[Worker]) -> None:
    """Stop Redis until the attempt's lease lapsed (or a worker exited), then start it again."""
    server.stop()
    lapsed = lambda: any(LAPSED in w.log() or not w.alive() for w in workers)  # noqa: E731
    wait_for(lapsed, 30, "the lease to lapse in the outage")
    server.start()


def test_a_redis_restart_with_a_step_in_flight_stops_no_worker(
    server: RedisServer, restart_fleet: Fleet, client_for: Callable[[Fleet], Client], tmp_path: Path
) -> None:
    """Issue 25, item 1: Celery closes the lost connection, which detached kombu's transport from its
    parameters before the channel restored the running attempt's message; the restore raised
    AttributeError ('NoneType' object has no attribute 'hostname') and the worker holding the message
    exited. Now every worker outlives the restart, and the run finishes."""
    workers = [restart_fleet.start(concurrency=2), restart_fleet.start(concurrency=2)]
    gate = tmp_path / "gate"
    run_id = start_waiting_run(server, client_for(restart_fleet), gate)
    outage_past_the_lease(server, workers)
    gate.touch()
    client = client_for(restart_fleet)  # fresh connections: the old pool's died with the server
    info = client.wait(run_id, timeout=60)
    assert info.status is Status.SUCCEEDED, info
    for worker in workers:
        assert worker.alive(), worker.log()[-3000:]
        assert "Unrecoverable error" not in worker.log()
        assert "object has no attribute" not in worker.log()
    with redis.Redis.from_url(server.url) as r:
        assert_consistent(r, run_id)
    assert events(client.store, run_id, "run_succeeded")
