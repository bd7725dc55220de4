"""A primary of the cluster SIGKILLed in the middle of 100 runs, its replica promoted: every run the
cluster knows reaches a terminal status, and none is dead.

A private cluster of 3 primaries with a replica each, with ``min-replicas-to-write 1`` as the
Sentinel test runs its primary: the killed node is restarted and rejoins as the new primary's
replica, which is also what lets that primary take writes again. The broker and the test graphs'
records are on the session's standalone Redis, which does not fail over.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.model import Status
from tests.cluster.conftest import ClusterFleet
from tests.fleet.conftest import closing_fleet
from tests.fleet.test_failover import (
    DISPATCH_GRACE_ENV,
    ENQUEUE_DEADLINE_S,
    KILL_AFTER,
    RUNS,
    Enqueuer,
    report,
    settle,
)
from tests.redis_cluster import RedisCluster
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SAFETY = ("--min-replicas-to-write", "1", "--min-replicas-max-lag", "2")


@pytest.fixture
def replicated() -> Iterator[RedisCluster]:
    cluster = RedisCluster(primaries=3, replicas=1, extra_args=SAFETY).start()
    try:
        yield cluster
    finally:
        cluster.close()


def test_a_primary_killed_in_the_middle_of_100_runs_loses_none_the_cluster_knows(
    replicated: RedisCluster,
    redis_client: redis.Redis,
    redis_url: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    env = {"REFLEXR_BROKER_URL": redis_url, **DISPATCH_GRACE_ENV}
    fleet = ClusterFleet(
        replicated.url, tmp_path, queue=f"cf-{uuid.uuid4().hex[:8]}", env=env, executions_url=redis_url
    )
    with closing_fleet(fleet, request):
        for _ in range(2):
            fleet.start(concurrency=2)
        with Client(fleet.settings()) as client:
            enqueuer = Enqueuer(client)
            thread = threading.Thread(target=enqueuer.run, name="enqueuer")
            thread.start()
            wait_for(lambda: len(enqueuer.run_ids) >= KILL_AFTER or enqueuer.error, 60, "half the enqueues")
            killed_at = time.monotonic()
            victim = replicated.primary_nodes()[0]
            victim.kill()
            wait_for(lambda: len(replicated.primary_nodes()) == 3, 60, "a replica to be promoted")
            victim.start()  # rejoins as the new primary's replica: the primary takes writes again
            replicated.wait_ok(60)
            failed_over_s = time.monotonic() - killed_at
            thread.join(ENQUEUE_DEADLINE_S + 10)
            assert enqueuer.error is None, f"an enqueue failed for good: {enqueuer.error!r}"
            assert len(set(enqueuer.run_ids)) == RUNS
            done, gone = settle(client, enqueuer.run_ids, 150)
            recovered_s = time.monotonic() - killed_at
        report(
            "cluster primary kill, min-replicas-to-write",
            enqueuer,
            done,
            gone,
            redis_client,
            (failed_over_s, recovered_s),
        )
        statuses = Counter(info.status for info in done.values())
        assert statuses == Counter({Status.SUCCEEDED: len(done)}), statuses
        assert all(w.alive() for w in fleet.workers), "a worker died in the failover"
