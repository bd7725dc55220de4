"""Redis restarted (SIGTERM, AOF written, started again on the same port and dir) while a step runs.

The crash tests' steps are short, so their restarts rarely find an attempt in flight; here a
step waits, without blocking its event loop, for a file the test creates once Redis is back.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from reflexr_graph import errors
from reflexr_graph.client import Client
from reflexr_graph.model import Status
from tests.fleet.conftest import Fleet, Worker, assert_consistent, closing_fleet, events, executions
from tests.redis_server import RedisFactory, RedisServer
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

LAPSED = "lease lost (Redis stayed unreachable for a whole lease TTL; the lease has lapsed); cancelling"
"""What the heartbeat of an attempt logs, once, when Redis stayed away for longer than its lease."""


@pytest.fixture
def server(private_redis: RedisFactory) -> RedisServer:
    return private_redis()


@pytest.fixture
def restart_fleet(server: RedisServer, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Fleet]:
    """Workers on ``server``, the Redis this test stops and starts."""
    with closing_fleet(Fleet(server.url, tmp_path, queue=f"restart-{uuid.uuid4().hex[:6]}"), request) as f:
        yield f


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
    exited. Now every worker outlives the restart, and the run finishes. The workers run Celery's
    gossip, mingle and heartbeat, as the deploy's do; gossip logged AttributeError tracebacks in every
    outage."""
    workers = [restart_fleet.start(concurrency=2, chatty=True) for _ in range(2)]
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


def lapses(workers: list[Worker]) -> int:
    return sum(w.log().count(LAPSED) for w in workers)


def test_outages_longer_than_the_lease_are_interruptions_not_attempts(
    server: RedisServer, restart_fleet: Fleet, client_for: Callable[[Fleet], Client], tmp_path: Path
) -> None:
    """Issue 25, item 2: with max_attempts=2, Redis is shut down twice for longer than the lease (3 s)
    while the step runs. Each lapsed lease was lost to the outage, so each is an interruption: the run
    succeeds on its first counted attempt. Before, the reaper that took the lock first after the restart
    had not noted the outage yet, reaped both as abandoned attempts, and the second dead-lettered it."""
    restart_fleet.env["REFLEXR_MAX_ATTEMPTS"] = "2"
    workers = [restart_fleet.start(concurrency=2), restart_fleet.start(concurrency=2)]
    gate = tmp_path / "gate"
    run_id = start_waiting_run(server, client_for(restart_fleet), gate)
    for attempt in (2, 3):
        server.stop()
        wait_for(lambda n=attempt - 1: lapses(workers) >= n, 30, f"attempt {attempt - 1}'s lease to lapse")
        server.start()
        with redis.Redis.from_url(server.url) as r:
            node = f"s2:{attempt}"
            wait_for(lambda r=r, node=node: node in executions(r, run_id), 30, f"{node} to start")
    gate.touch()
    client = client_for(restart_fleet)
    info = client.wait(run_id, timeout=30)
    assert (info.status, info.attempts, info.interruptions) == (Status.SUCCEEDED, 1, 2), info
    reasons = [e.fields.get("reason") for e in events(client.store, run_id, "attempt_failed")]
    assert reasons == ["store_unavailable", "store_unavailable"]
    assert all(w.alive() for w in workers)


def test_a_reaper_that_did_not_see_the_outage_knows_redis_restarted(
    server: RedisServer, restart_fleet: Fleet, client_for: Callable[[Fleet], Client], tmp_path: Path
) -> None:
    """As `docker compose down` then `up`: Redis and the worker running the step stop together, and a
    new worker starts once Redis is back. Its reaper never saw the outage, but Redis has a new run_id
    since the last reaper pass, so the lease that lapsed in between is an interruption. A worker that
    dies while Redis is up is still an abandoned attempt (test_crash.py), as G4 needs."""
    first = restart_fleet.start()
    gate = tmp_path / "gate"
    run_id = start_waiting_run(server, client_for(restart_fleet), gate)
    server.stop()
    first.signal(signal.SIGTERM)
    first.wait_exit(30)
    server.start()
    gate.touch()
    second = restart_fleet.start()
    client = client_for(restart_fleet)
    info = client.wait(run_id, timeout=30)
    assert (info.status, info.attempts, info.interruptions) == (Status.SUCCEEDED, 1, 1), info
    assert [e.fields.get("reason") for e in events(client.store, run_id, "attempt_failed")] == [
        "store_unavailable"
    ]
    assert "Redis restarted or failed over since the last reaper pass" in second.log()


def test_an_idle_worker_rides_out_an_outage_without_tracebacks(
    server: RedisServer, restart_fleet: Fleet
) -> None:
    """Issue 25, log noise: a worker started as the deploy's are (Celery's gossip, mingle and heartbeat
    on) logged "AttributeError: 'NoneType' object has no attribute 'connection_errors'" with a traceback
    in every Redis outage: Celery stopped the gossip step after clearing the consumer's connection. The
    fleet runs no gossip now; the outage logs what happens and nothing else."""
    worker = restart_fleet.start(concurrency=1, chatty=True)
    server.stop()
    worker.wait_log("Trying again in", 30)
    server.start()
    wait_for(lambda: worker.log().count("Connected to") >= 2, 30, "the worker to reconnect")
    assert "Traceback" not in worker.log()
    # Issue 34: Celery's notice of the setting's future default, at each connection loss; the
    # setting is chosen (config/celery.py says why), so the notice is noise.
    assert "worker_cancel_long_running_tasks_on_connection_loss" not in worker.log()


def test_a_worker_told_to_stop_while_redis_hangs_exits_by_its_deadline(
    server: RedisServer, restart_fleet: Fleet, client_for: Callable[[Fleet], Client], tmp_path: Path
) -> None:
    """Issue 25, item 1's hang: `reflexr-graph worker` gets SIGTERM while its Redis stops answering
    (frozen here, as a server whose network went away with it). Each step of Celery's teardown waited
    out a socket timeout; now the worker ends itself once its soft shutdown (1 s) and the margin are
    spent, kills its pool, says so, and never prints Celery's Ctrl+C hint. The run resumes elsewhere."""
    worker = restart_fleet.start(concurrency=2, entry="reflexr-graph")
    gate = tmp_path / "gate"
    run_id = start_waiting_run(server, client_for(restart_fleet), gate)
    children = worker.children()
    os.kill(server.pid, signal.SIGSTOP)
    try:
        worker.signal(signal.SIGTERM)
        worker.wait_exit(60)
    finally:
        os.kill(server.pid, signal.SIGCONT)
    assert "did not stop within 11s of SIGTERM" in worker.log()
    assert "Hitting Ctrl+C" not in worker.log()
    wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in children), 10, "the pool to be gone")
    gate.touch()
    restart_fleet.start()
    info = client_for(restart_fleet).wait(run_id, timeout=30)
    assert info.status is Status.SUCCEEDED, info


BALLAST_KEYS = 50_000
SLOW_LOAD = ("--key-load-delay", "50", "--loading-process-events-interval-bytes", "1024")
"""Loading its 50,000 keys takes seconds (each waits 50 µs), and it answers clients meanwhile
(LOADING) rather than after each 2 MB read: a large AOF's restart, made slow on purpose."""


def _loading(server: RedisServer) -> bool:
    with redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=2) as r:
        return int(r.info("persistence")["loading"]) == 1


def test_a_redis_still_loading_its_aof_is_an_outage(
    server: RedisServer, restart_fleet: Fleet, client_for: Callable[[Fleet], Client], tmp_path: Path
) -> None:
    """Issue 33, item 2 (LOADING): Redis restarts on a large AOF while a run is in flight, and a
    producer enqueues while it loads. A client that does not wait (REFLEXR_CLIENT_RETRY_S=0) fails
    at once with StoreUnavailable of kind loading, saying so (not a crash, not a hang); one that
    rides out outages (the default) enqueues once Redis has loaded. The worker lives on, and both
    runs finish, the interrupted attempt not counted."""
    worker = restart_fleet.start(concurrency=2)
    gate = tmp_path / "gate"
    run_id = start_waiting_run(server, client_for(restart_fleet), gate)
    with server.client() as r:
        r.eval(f"for i = 1, {BALLAST_KEYS} do redis.call('SET', 'ballast:' .. i, 'x') end", 0)
        r.bgrewriteaof()  # into the AOF's base file, which a restart loads key by key
        wait_for(lambda: int(r.info("persistence")["aof_rewrite_in_progress"]) == 0, 30, "the rewrite")
    server.stop()
    server.extra_args = (*server.extra_args, *SLOW_LOAD)
    server.start(loaded=False)
    assert _loading(server)
    with (
        Client(restart_fleet.settings(client_retry_s=0)) as impatient,
        pytest.raises(errors.StoreUnavailable) as refused,
    ):
        impatient.enqueue("steps", {"value": 2}, idempotency_key="while-loading")
    assert refused.value.kind == "loading", refused.value
    assert "is loading its data after a restart" in str(refused.value)
    assert _loading(server), "Redis loaded before the enqueue was tried: the test proved nothing"
    client = client_for(restart_fleet)
    again = client.enqueue("steps", {"value": 2}, idempotency_key="while-loading")  # rides it out
    gate.touch()
    wait_for(lambda: not _loading(server), 60, "Redis to load its AOF")
    for each in (run_id, again):
        info = client.wait(each, timeout=60)
        assert (info.status, info.attempts) == (Status.SUCCEEDED, 1), info
    assert worker.alive(), worker.log()[-3000:]
    assert "unexpected error" not in worker.log()
