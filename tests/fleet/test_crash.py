"""Crash and shutdown tests with real worker subprocesses (G1-G5)."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.config.dispatch import send_run
from reflexr_graph.model import Status
from reflexr_graph.store.redis_store import RedisStore
from tests.fleet import graphs
from tests.fleet.conftest import (
    Fleet,
    Worker,
    assert_consistent,
    count,
    events,
    executions,
    open_gate,
)
from tests.redis_server import RedisFactory, RedisServer
from tests.tcp_proxy import TcpProxy
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def entered(r: redis.Redis, run_id: str, node: str, attempt: int) -> Callable[[], bool]:
    return lambda: f"{node}:{attempt}" in executions(r, run_id)


def attempt_started_at(store: RedisStore, run_id: str, attempt: int) -> float | None:
    for e in events(store, run_id, "attempt_started"):
        if e.fields.get("attempt") == str(attempt):
            return e.at
    return None


def test_happy_path(fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis) -> None:
    """A run enqueued through the Client runs every step once on a real worker and succeeds."""
    worker = fleet.start()
    client = client_for(fleet)
    run_id = client.enqueue("steps", {"value": 7})
    info = client.wait(run_id, timeout=30)
    assert info.status is Status.SUCCEEDED
    assert info.output == {"value": 7, "steps": ["s1", "s2", "s3"], "attempt": 1}
    assert executions(redis_client, run_id) == ["s1:1", "s2:1", "s3:1"]
    assert_consistent(redis_client, run_id)
    (started,) = [e for e in client.history(run_id) if e.type == "attempt_started"]
    assert started.fields["worker"].split("@")[0] == worker.name, "the attempt names the node it ran on"


def test_sigkill_of_pool_child_mid_step_resumes_from_checkpoint(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """G1/G2: SIGKILL of the pool child mid-step; the run still succeeds and the step before the
    checkpoint (s1) ran exactly once; only the step in flight (s2) ran again."""
    worker = fleet.start()
    client = client_for(fleet)
    run_id = client.enqueue("steps", {"value": 1, "gate": "s2"})
    open_gate(redis_client, run_id, attempt=2)  # only the resumed attempt passes s2
    wait_for(entered(redis_client, run_id, "s2", 1), 30, "s2 to start")
    os.kill(worker.child(), signal.SIGKILL)  # the pool child only: the worker itself stays up
    info = client.wait(run_id, timeout=60)
    assert info.status is Status.SUCCEEDED, info
    assert info.attempts == 2
    assert count(redis_client, run_id, "s1") == 1
    assert executions(redis_client, run_id) == ["s1:1", "s2:1", "s2:2", "s3:2"]
    assert [e.fields.get("reason") for e in events(client.store, run_id, "attempt_failed")] == ["abandoned"]
    assert worker.alive()
    assert_consistent(redis_client, run_id)


def test_sigkill_of_whole_worker_resumes_on_another_within_a_lease_ttl(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """G5: SIGKILL of the worker's main process mid-step (lease TTL 3 s, visibility timeout
    3600 s); a second worker resumes the run from its checkpoint after about one lease TTL,
    not the visibility timeout. The recovery time is printed, not asserted."""
    first = fleet.start()
    client = client_for(fleet)
    run_id = client.enqueue("steps", {"value": 2, "gate": "s2"})
    open_gate(redis_client, run_id, attempt=2)
    wait_for(entered(redis_client, run_id, "s2", 1), 30, "s2 to start on the first worker")
    second = fleet.start()
    killed_at = time.time()
    first.signal(signal.SIGKILL)
    first.wait_exit(10)
    resumed_at = wait_for(lambda: attempt_started_at(client.store, run_id, 2), 60, "attempt 2 to start")
    info = client.wait(run_id, timeout=60)
    done_at = time.time()
    print(
        f"\nSIGKILL of the whole worker: attempt 2 started {resumed_at - killed_at:.2f}s after the kill, "
        f"run succeeded {done_at - killed_at:.2f}s after it (lease TTL 3s, visibility timeout 3600s)"
    )
    assert info.status is Status.SUCCEEDED, info
    assert count(redis_client, run_id, "s1") == 1
    assert executions(redis_client, run_id) == ["s1:1", "s2:1", "s2:2", "s3:2"]
    assert f"run {run_id}: attempt 2" in second.log()
    assert_consistent(redis_client, run_id)


def test_sigterm_mid_step_requeues_and_resumes_elsewhere(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """Soft shutdown: SIGTERM (remapped to SIGQUIT) mid-step releases the lease and requeues the
    message, so another worker resumes the run from its checkpoint without waiting for the
    lease (TTL 20 s here) to lapse; the stopped worker exits cleanly."""
    fleet.env["REFLEXR_LEASE_TTL_S"] = "20"
    first = fleet.start()
    client = client_for(fleet)
    run_id = client.enqueue("steps", {"value": 3, "gate": "s2"})
    open_gate(redis_client, run_id, attempt=2)
    wait_for(entered(redis_client, run_id, "s2", 1), 30, "s2 to start on the first worker")
    second = fleet.start()
    stopped_at = time.time()
    first.signal(signal.SIGTERM)
    resumed_at = wait_for(lambda: attempt_started_at(client.store, run_id, 2), 60, "attempt 2 to start")
    info = client.wait(run_id, timeout=60)
    first.wait_exit(30)
    print(
        f"\nSIGTERM: attempt 2 started {resumed_at - stopped_at:.2f}s after the signal "
        f"(soft shutdown timeout 1s, lease TTL 20s)"
    )
    assert info.status is Status.SUCCEEDED, info
    assert count(redis_client, run_id, "s1") == 1
    assert executions(redis_client, run_id) == ["s1:1", "s2:1", "s2:2", "s3:2"]
    retrying = [e.fields.get("reason") for e in events(client.store, run_id, "run_retrying")]
    assert retrying == ["shutdown"], "the lease was not released at shutdown"
    assert f"run {run_id}: attempt 2" in second.log()
    assert_consistent(redis_client, run_id)


def test_always_failing_step_is_dead_after_exactly_max_attempts(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """G4: a step that always raises is dead-lettered after exactly max_attempts (3), with its
    last error; the step before the checkpoint ran once."""
    fleet.start()
    client = client_for(fleet)
    run_id = client.enqueue("always_fails", {})
    info = client.wait(run_id, timeout=60)
    assert info.status is Status.DEAD
    assert (info.attempts, info.reason) == (3, "max_attempts")
    assert info.error is not None and "boom on purpose" in info.error
    assert count(redis_client, run_id, "bad") == 3
    assert count(redis_client, run_id, "s1") == 1
    assert [d.run_id for d in client.dead_letters()] == [run_id]
    tb = client.traceback(run_id)
    assert tb is not None and "RuntimeError" in tb
    assert_consistent(redis_client, run_id)


def test_step_that_kills_its_worker_every_time_is_dead_lettered(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """G4: a step that SIGKILLs its own process on every attempt is dead-lettered after exactly
    max_attempts (Redis keeps no delivery count; the run's attempt counter stops it), and the
    worker keeps serving."""
    # Each attempt ends as its lease lapses: a short lease, as no step here runs long.
    fleet.env["REFLEXR_LEASE_TTL_S"] = "1.5"
    worker = fleet.start()
    client = client_for(fleet)
    run_id = client.enqueue("kills_worker", {})
    info = client.wait(run_id, timeout=90)
    assert info.status is Status.DEAD
    assert (info.attempts, info.reason) == (3, "abandoned")
    assert count(redis_client, run_id, "bad") == 3
    assert worker.alive()
    ok = client.enqueue("steps", {"value": 5})
    assert client.wait(ok, timeout=30).status is Status.SUCCEEDED
    assert_consistent(redis_client, run_id)


def test_permanent_failure_is_dead_after_one_attempt(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """G4: RunFailure(permanent=True) dead-letters the run after its first attempt, with the
    step's reason code."""
    fleet.start()
    client = client_for(fleet)
    run_id = client.enqueue("permanent", {})
    info = client.wait(run_id, timeout=30)
    assert info.status is Status.DEAD
    assert (info.attempts, info.reason) == (1, "bad_document")
    assert info.error is not None and "can never be processed" in info.error
    assert count(redis_client, run_id, "bad") == 1


def test_same_message_twice_at_once_runs_one_attempt(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """G3: the same message delivered twice at once (two pool children) runs one attempt; the
    duplicate is dropped as busy and runs no step."""
    worker = fleet.start(concurrency=2)
    client = client_for(fleet)
    run_id = client.enqueue("steps", {"value": 4, "gate": "s2"})
    send_run(client.app, run_id, "steps")
    wait_for(entered(redis_client, run_id, "s2", 1), 30, "s2 to start")
    worker.wait_log(f"run {run_id}: another attempt holds a live lease", 30)
    open_gate(redis_client, run_id)
    info = client.wait(run_id, timeout=30)
    assert info.status is Status.SUCCEEDED
    assert info.attempts == 1
    assert len(events(client.store, run_id, "attempt_started")) == 1
    assert executions(redis_client, run_id) == ["s1:1", "s2:1", "s3:1"]


def serves_afterwards(fleet: Fleet, client: Client, survivor: Worker) -> None:
    """``survivor`` lives on and serves runs: with every other worker killed, a new run succeeds on it."""
    for worker in fleet.workers:
        if worker is not survivor:
            worker.kill_group()
    assert survivor.alive(), f"{survivor.name} died\n{survivor.log()[-3000:]}"
    run_id = client.enqueue("steps", {"value": 8})
    info = client.wait(run_id, timeout=60)
    assert info.status is Status.SUCCEEDED and info.attempts == 1
    (started,) = [e for e in client.history(run_id) if e.type == "attempt_started"]
    assert started.fields["worker"].split("@")[0] == survivor.name


@pytest.mark.parametrize("frozen", ["pool child", "process group"])
def test_stale_attempt_cannot_write_checkpoint_or_outcome(
    frozen: str, fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """G3: an attempt frozen mid-step (SIGSTOP of its pool child, or of its worker's whole process
    group: main process, reaper and heartbeat too) loses its lease; another attempt takes over and
    finishes the run. When the frozen one wakes (SIGCONT) and finishes its step, it writes no
    checkpoint and no outcome: the run keeps the second attempt's result. The woken worker lives on
    and serves runs afterwards."""
    first = fleet.start()
    client = client_for(fleet)
    run_id = client.enqueue("steps", {"value": 6, "gate": "s2"})
    wait_for(entered(redis_client, run_id, "s2", 1), 30, "s2 to start on the first worker")
    child = first.child()
    fleet.start()
    open_gate(redis_client, run_id, attempt=2)
    freeze, thaw = (
        (lambda: os.kill(child, signal.SIGSTOP), lambda: os.kill(child, signal.SIGCONT))
        if frozen == "pool child"
        else (lambda: os.killpg(first.pid, signal.SIGSTOP), lambda: os.killpg(first.pid, signal.SIGCONT))
    )
    freeze()
    try:
        info = client.wait(run_id, timeout=60)
    finally:
        thaw()
    assert info.status is Status.SUCCEEDED and info.attempts == 2
    checkpoints_before = info.checkpoints
    events_before = len(events(client.store, run_id))
    open_gate(redis_client, run_id, attempt=1)
    # The woken attempt finishes s2 (its step was in flight), then is fenced out.
    wait_for(entered(redis_client, run_id, "s2", 1), 5, "s2 of attempt 1")
    first.wait_log("records nothing more", 30)
    after = client.get(run_id)
    assert after.status is Status.SUCCEEDED
    assert after.output == info.output and after.output["attempt"] == 2
    assert after.checkpoints == checkpoints_before
    assert len(events(client.store, run_id)) == events_before
    assert "s3:1" not in executions(redis_client, run_id)
    assert_consistent(redis_client, run_id)
    serves_afterwards(fleet, client, first)


PARTITION_S = 15.0
"""How long the partition lasts: five lease TTLs (FAST_ENV), long past every retry of the cut worker."""


def test_a_worker_cut_off_from_redis_is_fenced_out_and_serves_runs_once_healed(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis, redis_server: RedisServer
) -> None:
    """A worker whose Redis (store and broker) is behind a TCP proxy that stops forwarding for 15 s,
    mid-step: the run finishes on another worker; the cut attempt, its step let through during the
    partition, writes nothing once the partition heals (fenced, G3); and the worker lives on and
    serves runs afterwards. Its steps keep their records and gates on a direct connection, so the
    test can see and steer them whatever the proxy does."""
    proxy = TcpProxy(redis_server.port).start()
    try:
        cut = fleet.start(REFLEXR_REDIS_URL=proxy.url(), **{graphs.EXECUTIONS_URL_ENV: fleet.redis_url})
        client = client_for(fleet)
        run_id = client.enqueue("steps", {"value": 9, "gate": "s2"})
        wait_for(entered(redis_client, run_id, "s2", 1), 30, "s2 to start on the worker to be cut off")
        proxy.stall()
        cut_at = time.monotonic()
        fleet.start()
        open_gate(redis_client, run_id, attempt=2)
        info = client.wait(run_id, timeout=60)
        assert info.status is Status.SUCCEEDED and info.attempts == 2, info
        events_before = len(events(client.store, run_id))
        open_gate(redis_client, run_id, attempt=1)  # the cut attempt finishes its step, unheard
        wait_for(lambda: time.monotonic() - cut_at >= PARTITION_S, PARTITION_S + 1, "the partition to last")
        proxy.heal()
        # The cut attempt ends writing nothing: its lease lapsed (the heartbeat says so), or its step
        # ended first and its failure, unwritable while the lease held, is not recorded.
        ended = ("records nothing more", "so it is not recorded")
        wait_for(lambda: any(line in cut.log() for line in ended), 30, "the cut attempt to end")
        after = client.get(run_id)
        assert after.output == info.output and after.output["attempt"] == 2
        assert after.checkpoints == info.checkpoints
        assert len(events(client.store, run_id)) == events_before
        assert "s3:1" not in executions(redis_client, run_id)
        assert_consistent(redis_client, run_id)
        serves_afterwards(fleet, client, cut)
    finally:
        proxy.close()


def test_runs_finish_when_redis_restarts_mid_flight(
    private_redis: RedisFactory, tmp_path: Path, client_for: Callable[[Fleet], Client]
) -> None:
    """G1: Redis (AOF, fsync always) restarted while runs are in flight; workers reconnect and
    every run still succeeds."""
    server = private_redis(appendfsync="always")
    fleet = Fleet(server.url, tmp_path, queue=f"restart-{uuid.uuid4().hex[:6]}")
    try:
        fleet.start()
        fleet.start()
        client = client_for(fleet)
        run_ids = [client.enqueue("steps", {"value": i, "sleep_s": 0.3}) for i in range(6)]
        r = redis.Redis.from_url(server.url)
        wait_for(lambda: any(executions(r, rid) for rid in run_ids), 30, "a run to start")
        r.close()
        server.restart()
        for rid in run_ids:
            info = client.wait(rid, timeout=90)
            assert info.status is Status.SUCCEEDED, info
        r = redis.Redis.from_url(server.url)
        for rid in run_ids:
            assert count(r, rid, "s3") >= 1
            assert_consistent(r, rid)
        r.close()
    except BaseException:
        print(fleet.dump_logs())
        raise
    finally:
        fleet.close()


def test_short_redis_outage_mid_step_costs_nothing(
    private_redis: RedisFactory, tmp_path: Path, client_for: Callable[[Fleet], Client]
) -> None:
    """Issue 14, item 4: Redis (AOF, fsync always) is killed for a moment while two steps run. The lease
    is still valid for its TTL (10 s here), so both attempts keep running, their heartbeats retry the
    renewal until Redis is back, and both runs finish on their first attempt: no attempt failed, none
    was interrupted, no step ran twice. Before the fix Celery cancelled both attempts on losing the
    broker connection and the runs were re-enqueued a lease TTL after Redis was back."""
    server = private_redis(appendfsync="always")
    fleet = Fleet(server.url, tmp_path, queue=f"blip-{uuid.uuid4().hex[:6]}")
    fleet.env["REFLEXR_LEASE_TTL_S"] = "10"
    gate = tmp_path / "gate"
    try:
        worker = fleet.start(concurrency=2)
        client = client_for(fleet)
        run_ids = [
            client.enqueue("steps", {"value": i, "gate": "s2", "file_gate": str(gate)}) for i in range(2)
        ]
        with redis.Redis.from_url(server.url) as r:
            for run_id in run_ids:
                wait_for(entered(r, run_id, "s2", 1), 30, "s2 to start")
        server.kill()
        worker.wait_log("Redis unreachable while renewing the lease", 30)
        server.start()
        gate.touch()
        client = client_for(fleet)  # fresh connections: the old pool's died with the server
        for run_id in run_ids:
            info = client.wait(run_id, timeout=60)
            assert (info.status, info.attempts, info.interruptions) == (Status.SUCCEEDED, 1, 0), info
            assert events(client.store, run_id, "attempt_failed") == []
        with redis.Redis.from_url(server.url) as r:
            for run_id in run_ids:
                assert executions(r, run_id) == ["s1:1", "s2:1", "s3:1"]
                assert_consistent(r, run_id)
        assert worker.alive()
    except BaseException:
        print(fleet.dump_logs())
        raise
    finally:
        fleet.close()


def test_redis_down_while_checkpoint_is_saved(
    private_redis: RedisFactory, tmp_path: Path, client_for: Callable[[Fleet], Client]
) -> None:
    """G1: Redis goes down exactly as a step returns, and stays down longer than the lease (3 s), so
    the checkpoint cannot be saved: the attempt retries the save while the lease holds, then ends
    without writing anything. Once Redis is back the reaper, which saw the outage, recovers the run
    as an interruption (store_unavailable, not one of max_attempts): it is retried from the
    checkpoint before that step and succeeds, nothing corrupted. (test_attempt.py drives the
    StoreUnavailable branch deterministically, in process.)"""
    server = private_redis(appendfsync="always")
    fleet = Fleet(server.url, tmp_path, queue=f"down-{uuid.uuid4().hex[:6]}")
    try:
        worker = fleet.start()
        client = client_for(fleet)
        run_id = client.enqueue("steps", {"value": 8, "shutdown_redis": "s2"})
        wait_for(lambda: not server.running, 30, "the step to shut Redis down")
        ended = f"run {run_id} attempt 1 failed (store_unavailable), but Redis stayed unreachable"
        worker.wait_log(ended, 30)
        _recovered_after_redis_is_back(server, fleet, client_for, run_id, worker)
        with redis.Redis.from_url(server.url) as r:
            # s1's checkpoint survived; s2 (in flight when Redis went down) ran again.
            assert executions(r, run_id)[:2] == ["s1:1", "s2:1"]
    except BaseException:
        print(fleet.dump_logs())
        raise
    finally:
        fleet.close()


def _recovered_after_redis_is_back(
    server: RedisServer, fleet: Fleet, client_for: Callable[[Fleet], Client], run_id: str, worker: Worker
) -> None:
    """Restart Redis; the run then succeeds on its second attempt, the first an interruption
    (store_unavailable) that did not count toward max_attempts, s1 (before the checkpoint) ran once,
    the records agree, and the worker survived."""
    server.start()
    client = client_for(fleet)  # fresh connections: the old pool's died with the server
    info = client.wait(run_id, timeout=60)
    assert info.status is Status.SUCCEEDED, info
    assert (info.attempts, info.interruptions) == (1, 1)
    with redis.Redis.from_url(server.url) as r:
        assert count(r, run_id, "s1") == 1
        assert [e.fields.get("reason") for e in events(client.store, run_id, "attempt_failed")] == [
            "store_unavailable"
        ]
        assert_consistent(r, run_id)
    assert worker.alive()
