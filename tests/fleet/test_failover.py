"""Redis high availability: the fleet on a primary + replica + Sentinel, the primary SIGKILLed in
the middle of 100 runs.

The store and the broker both use the ``redis+sentinel://`` URL, so every worker, the reaper and
the client follow the promotion. Steps record their executions in the session's Redis, which
does not fail over, so the record survives what it measures: replication is asynchronous, and
whatever the primary had not yet sent its replica when it died is gone from the new one.

What is asserted is what the fleet guarantees across a failover (docs/operations.md, "High availability"):
every run whose record the new primary holds reaches a terminal status, and none is dead. What
is lost is measured and printed: runs whose record vanished, runs that ran a second attempt,
steps that ran again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from reflexr_graph import clock
from reflexr_graph.client import AsyncClient, Client
from reflexr_graph.core.port import Boundary
from reflexr_graph.errors import RunNotFound, StoreUnavailable
from reflexr_graph.model import TERMINAL, RunInfo, Status
from reflexr_graph.store import keys
from reflexr_graph.store.hot_path import HotPath
from reflexr_graph.store.redis_store import RedisStore
from tests.fleet import graphs
from tests.fleet.conftest import Fleet, closing_fleet, executions
from tests.fleet.sentinel import SentinelTopology
from tests.redis_server import RedisFactory, RedisServerError
from tests.store.support import make_run, start
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

RUNS = 100
KILL_AFTER = 50
"""The primary is killed once this many enqueues have returned."""
STEP_S = 0.05
"""Each of the three steps takes this long, so runs are in every state when the primary dies."""
ENQUEUE_DEADLINE_S = 60.0
DISPATCH_GRACE_ENV = {"REFLEXR_DISPATCH_GRACE_S": "5"}
"""A run recorded whose message a failover lost is sent again by a reaper once its dispatch grace is
over: 5 s rather than the default 30 s, which the test would otherwise wait out (here and in
tests/cluster/test_cluster_failover.py). A run still queued when it is over is sent twice, and the
claim drops the second message."""


UNPROTECTED_ENV = "FAILOVER_UNPROTECTED"
"""Set to 1 to also run the partition without min-replicas-to-write: the loss it measures is the
last row of docs/operations.md's failover table. Off by default: it only measures (45 s), and what
it shows is the reason the topology runs with the setting."""


@pytest.fixture
def topology(request: pytest.FixtureRequest) -> Iterator[SentinelTopology]:
    t = SentinelTopology(safety=getattr(request, "param", "") != "unprotected")
    try:
        t.start()
    except (RedisServerError, RuntimeError) as exc:
        t.close()
        pytest.skip(f"the failover test needs redis-server and redis-sentinel that start here: {exc}")
    try:
        yield t
    finally:
        t.close()


@dataclass
class Enqueuer:
    """Enqueues RUNS runs from a thread, each with its idempotency key, retrying while Redis fails
    over (as a producer should: the key makes the retry safe)."""

    client: Client
    run_ids: list[str] = field(default_factory=list)
    retries: int = 0
    error: BaseException | None = None

    def run(self) -> None:
        try:
            for i in range(RUNS):
                self.run_ids.append(self._enqueue(i))
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.error = exc

    def _enqueue(self, i: int) -> str:
        deadline = time.monotonic() + ENQUEUE_DEADLINE_S
        while True:
            try:
                return self.client.enqueue("steps", {"value": i, "sleep_s": STEP_S}, idempotency_key=f"k{i}")
            except StoreUnavailable:
                if time.monotonic() > deadline:
                    raise
                self.retries += 1
                time.sleep(0.1)  # a producer's backoff between retries, not a test wait


async def enqueue_async(fleet: Fleet) -> RunInfo:
    """One more run through the AsyncClient (redis.asyncio's Sentinel, the LPUSH fast path) on the
    new primary, and its outcome."""
    async with AsyncClient(fleet.settings()) as client:
        run_id = await client.enqueue("steps", {"value": -1})
        return await client.wait(run_id, timeout=60)


def wait_across(
    client: Client,
    gates: redis.Redis,
    run_id: str,
    fail_over: Callable[[Callable[[], bool]], object],
    caplog: pytest.LogCaptureFixture,
) -> RunInfo:
    """``client.wait(run_id)`` from a thread while ``fail_over(waiting)`` runs, then the run's gated
    step is let through (every attempt's gate: the failover may have cost the attempt its lease);
    what the wait returned. ``waiting()`` says the client has met the outage: it said it rides it
    out, or its wait ended (it raised at once). It must ride it out (REFLEXR_CLIENT_RETRY_S)."""
    waited: list[RunInfo | BaseException] = []

    def wait() -> None:
        try:
            waited.append(client.wait(run_id, timeout=150))
        except BaseException as exc:  # reported by the test, not lost in the thread
            waited.append(exc)

    def waiting() -> bool:
        return bool(waited) or "REFLEXR_CLIENT_RETRY_S" in caplog.text

    thread = threading.Thread(target=wait, name="waiter")
    with caplog.at_level(logging.WARNING, logger="reflexr_graph.client"):
        thread.start()
        try:
            fail_over(waiting)
        finally:
            for _ in range(3):
                gates.rpush(graphs.gate_key(run_id), b"open")
            thread.join(160)
    assert waited and isinstance(waited[0], RunInfo), f"the wait did not return the run: {waited!r}"
    return waited[0]


def outcome(client: Client, run_id: str) -> RunInfo | None:
    """The run's info once terminal; None while it is not; raises RunNotFound if it vanished."""
    info = client.get(run_id)
    return info if info.status in TERMINAL else None


def settle(client: Client, run_ids: list[str], timeout: float) -> tuple[dict[str, RunInfo], list[str]]:
    """Wait until every run is terminal or gone; (terminal infos, ids whose record is gone)."""
    done: dict[str, RunInfo] = {}
    gone: list[str] = []

    def all_settled() -> bool:
        for run_id in run_ids:
            if run_id in done or run_id in gone:
                continue
            try:
                info = outcome(client, run_id)
            except RunNotFound:
                gone.append(run_id)
                continue
            except StoreUnavailable:
                return False
            if info is not None:
                done[run_id] = info
        return len(done) + len(gone) == len(run_ids)

    def explain() -> str:
        unsettled = [r for r in run_ids if r not in done and r not in gone]
        return f"{len(unsettled)} are not; {unsettled_report(client, unsettled[:5])}"

    wait_for(all_settled, timeout, "every run to be terminal (or found gone)", poll_s=0.2, explain=explain)
    return done, gone


def unsettled_report(client: Client, run_ids: list[str]) -> str:
    """What the store says of runs that did not settle: their status and counters, whether they
    wait in the due set, and whether a live worker serves their graph (a held run waits for one)."""
    store = client.store
    now_ms = clock.now_ms()
    due = dict(store.due(now_ms + 3_600_000))
    parts = [f"live workers serving 'steps': {store.serving(['steps'])['steps']}"]
    for run_id in run_ids:
        try:
            info = client.get(run_id)
        except (RunNotFound, StoreUnavailable) as exc:
            parts.append(f"{run_id}: {type(exc).__name__}")
            continue
        when = f"due in {due[run_id] - now_ms:.0f} ms" if run_id in due else "not due"
        parts.append(
            f"{run_id}: {info.status.value} ({info.reason}), attempts {info.attempts}, "
            f"interruptions {info.interruptions}, {when}"
        )
    return "; ".join(parts)


@pytest.mark.parametrize(
    ("failure", "topology"),
    [
        ("kill", "safe"),
        ("partition", "safe"),
        pytest.param(
            "partition",
            "unprotected",
            marks=pytest.mark.skipif(
                os.environ.get(UNPROTECTED_ENV) != "1",
                reason=f"a measurement only; {UNPROTECTED_ENV}=1 runs it",
            ),
        ),
    ],
    indirect=["topology"],
)
def test_fleet_recovers_from_a_failover_in_the_middle_of_100_runs(
    failure: str,
    topology: SentinelTopology,
    redis_client: redis.Redis,
    redis_url: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """``kill``: the primary is SIGKILLed, so only what it had not yet replicated is lost.
    ``partition``: the primary is frozen (SIGSTOP) until the replica is promoted, then woken, and
    takes writes until the sentinel demotes it: with min-replicas-to-write it refuses them instead;
    without (``unprotected``), the writes of that window are lost too."""
    queue = f"ha-{uuid.uuid4().hex[:8]}"
    with closing_fleet(Fleet(topology.url, tmp_path, queue, env=dict(DISPATCH_GRACE_ENV)), request) as fleet:
        for _ in range(2):  # started side by side, then waited for
            fleet.start(concurrency=2, wait=False, **{graphs.EXECUTIONS_URL_ENV: redis_url})
        for worker in fleet.workers:
            fleet.wait_ready(worker)
        with Client(fleet.settings()) as client:
            enqueuer = Enqueuer(client)
            thread = threading.Thread(target=enqueuer.run, name="enqueuer")
            thread.start()
            wait_for(lambda: len(enqueuer.run_ids) >= KILL_AFTER or enqueuer.error, 60, "half the enqueues")
            killed_at = time.monotonic()
            topology.kill_primary() if failure == "kill" else topology.stall_primary()
            failed_over_s = time.monotonic() - killed_at
            thread.join(ENQUEUE_DEADLINE_S + 10)
            assert enqueuer.error is None, f"an enqueue failed for good: {enqueuer.error!r}"
            assert len(set(enqueuer.run_ids)) == RUNS
            done, gone = settle(client, enqueuer.run_ids, 150)
            recovered_s = time.monotonic() - killed_at
        safety = "min-replicas-to-write" if topology.safety else "unprotected"
        report(f"{failure}, {safety}", enqueuer, done, gone, redis_client, (failed_over_s, recovered_s))
        statuses = Counter(info.status for info in done.values())
        assert statuses == Counter({Status.SUCCEEDED: len(done)}), statuses
        after = asyncio.run(enqueue_async(fleet))
        assert (after.status, after.attempts) == (Status.SUCCEEDED, 1), after
        assert all(w.alive() for w in fleet.workers), "a worker died in the failover"


def report(
    failure: str,
    enqueuer: Enqueuer,
    done: dict[str, RunInfo],
    gone: list[str],
    r: redis.Redis,
    seconds: tuple[float, float],
) -> None:
    """Print what the failover cost; nothing here is asserted (it depends on replication lag).
    ``seconds``: from the failure to the end of the failover, and to the last run settled."""
    failed_over_s, recovered_s = seconds
    repeated = 0
    for run_id in enqueuer.run_ids:
        nodes = Counter(e.split(":")[0] for e in executions(r, run_id))
        repeated += sum(n - 1 for n in nodes.values() if n > 1)
    rerun = sum(1 for info in done.values() if info.attempts + info.interruptions > 1)
    gone_ran = sum(1 for run_id in gone if executions(r, run_id))
    print(
        f"\nfailover ({failure}) in the middle of {RUNS} runs, after {KILL_AFTER} enqueues: the replica "
        f"was promoted and the old primary followed it {failed_over_s:.1f}s after the failure; every run "
        f"settled {recovered_s:.1f}s after it.\n"
        f"  enqueue retries during the failover: {enqueuer.retries}\n"
        f"  runs succeeded: {len(done)}; runs whose record was lost: {len(gone)} "
        f"({gone_ran} of them had started)\n"
        f"  runs that needed another attempt: {rerun}; steps that ran again: {repeated}"
    )


@pytest.mark.timeout(30)
def test_a_primary_refusing_writes_for_want_of_replicas_is_store_unavailable(
    private_redis: RedisFactory,
) -> None:
    """min-replicas-to-write with no replica: the store reports NOREPLICAS as StoreUnavailable
    (retried like an outage, passes once a replica is back), saying what it is, not a raw error."""
    server = private_redis(extra_args=("--min-replicas-to-write", "1"))
    store = RedisStore.from_url(server.url)
    try:
        with pytest.raises(StoreUnavailable) as err:
            store.reaper_tick("owner", 1000)
    finally:
        store.close()
    assert err.value.kind == "no_replicas"
    assert "min-replicas-to-write" in str(err.value)


@pytest.mark.timeout(90)
def test_an_attempts_held_connection_follows_a_failover(topology: SentinelTopology) -> None:
    """The hot path (store/hot_path.py) holds one connection for the attempt's saves. After a
    failover it must save on the new primary: a connection that reconnects by itself goes back to
    the address it had, the old primary, now a replica refusing writes as read-only, while the
    lease renewed through the pool held on; the attempt then waited for ever (CI saw it)."""
    store = RedisStore.from_url(topology.url)
    try:
        make_run(store)
        ctx = start(store, lease_ms=60_000)
        with HotPath(store) as hot:
            store.save_checkpoint(ctx, Boundary("{}", seq=1, next_node="s2"), via=hot)
            # Replication is asynchronous: the failover must not lose the claim this test keeps.
            assert store.client.execute_command("WAIT", 1, 10_000) == 1
            old = topology.primary_port()
            topology.fail_over()
            assert topology.primary_port() != old

            def saved() -> bool:
                try:
                    store.save_checkpoint(ctx, Boundary("{}", seq=2, next_node="s3"), via=hot)
                except StoreUnavailable:
                    return False  # the failover is still settling: the fenced retry waits so
                return True

            wait_for(saved, 30, "a save of the held connection to land on the new primary")
        assert store.get("run-1").checkpoints == 2
    finally:
        store.close()


@pytest.mark.timeout(180)
def test_a_client_waiting_on_a_run_rides_out_a_primary_kill(
    topology: SentinelTopology,
    caplog: pytest.LogCaptureFixture,
    redis_client: redis.Redis,
    redis_url: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """``Client.wait`` on a run in flight while Sentinel's primary is SIGKILLed and the replica
    promoted: the wait follows the new primary and returns the run's outcome."""
    queue = f"hw-{uuid.uuid4().hex[:8]}"
    with closing_fleet(Fleet(topology.url, tmp_path, queue), request) as fleet:
        fleet.start(**{graphs.EXECUTIONS_URL_ENV: redis_url})
        with Client(fleet.settings()) as client:
            run_id = client.enqueue("steps", {"value": 4, "gate": "s2"}, idempotency_key="held")
            wait_for(lambda: executions(redis_client, run_id)[-1:] == ["s2:1"], 30, "s2 to start")
            # The run's record must be on the replica the kill promotes: replication is asynchronous.
            assert topology.replica is not None
            with topology.replica.client() as replica:
                wait_for(lambda: replica.hget(keys.run(run_id), "status") == b"running", 30, "replication")
            info = wait_across(client, redis_client, run_id, lambda _waiting: topology.kill_primary(), caplog)
        assert info.status is Status.SUCCEEDED and info.output["value"] == 4, info
        assert all(w.alive() for w in fleet.workers), "the worker died in the failover"
