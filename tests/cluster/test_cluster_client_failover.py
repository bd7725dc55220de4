"""A client waiting on a run while the cluster primary that holds the run's keys is SIGKILLed: the
wait rides the failover out (REFLEXR_CLIENT_RETRY_S) and returns the run's outcome.

The replica is frozen (SIGSTOP) until the client has met the outage, then woken to be promoted: a
failover slower than redis-py's own few retries, as a loaded cluster's was when the issue saw it.

On main, ``Client.wait`` raised ``StoreUnavailable: cannot connect to Redis at the Redis Cluster
(connection refused)`` at once, though the cluster promoted a replica within seconds.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from tests.cluster.conftest import ClusterFleet
from tests.cluster.test_cluster_failover import SAFETY
from tests.fleet.conftest import closing_fleet, executions
from tests.fleet.test_failover import wait_across
from tests.redis_cluster import RedisCluster
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture
def replicated() -> Iterator[RedisCluster]:
    # A replica frozen for a while may still be promoted (its data is as fresh as its primary's was).
    cluster = RedisCluster(
        primaries=3, replicas=1, extra_args=(*SAFETY, "--cluster-replica-validity-factor", "0")
    ).start()
    try:
        yield cluster
    finally:
        cluster.close()


def test_a_client_waiting_on_a_run_rides_out_a_primary_kill(
    replicated: RedisCluster,
    caplog: pytest.LogCaptureFixture,
    redis_client: redis.Redis,
    redis_url: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    env = {"REFLEXR_BROKER_URL": redis_url}
    queue = f"cw-{uuid.uuid4().hex[:8]}"
    fleet = ClusterFleet(replicated.url, tmp_path, queue=queue, env=env, executions_url=redis_url)
    with closing_fleet(fleet, request), replicated.client() as cluster:
        fleet.start()
        with Client(fleet.settings()) as client:
            run_id = client.enqueue("steps", {"value": 5, "gate": "s2"}, idempotency_key="held")
            wait_for(lambda: executions(redis_client, run_id)[-1:] == ["s2:1"], 30, "s2 to start")
            port = cluster.get_node_from_key(keys.run(run_id)).port
            (victim,) = [node for node in replicated.primary_nodes() if node.port == port]
            with redis.Redis(port=port) as primary:
                # The run's record must be on the replica the kill promotes: replication is asynchronous.
                written = primary.info("replication")["master_repl_offset"]
                wait_for(
                    lambda: primary.info("replication")["slave0"]["offset"] >= written, 30, "replication"
                )
                replica_port = int(primary.info("replication")["slave0"]["port"])
            (replica,) = [node for node in replicated.nodes if node.port == replica_port]

            def kill(waiting: Callable[[], bool]) -> None:
                os.kill(replica.pid, signal.SIGSTOP)
                try:
                    victim.kill()
                    wait_for(waiting, 60, "the client to meet the outage")
                finally:
                    os.kill(replica.pid, signal.SIGCONT)
                wait_for(lambda: len(replicated.primary_nodes()) == 3, 60, "the replica to be promoted")
                victim.start()  # rejoins as the new primary's replica: the primary takes writes again
                replicated.wait_ok(60)

            info = wait_across(client, redis_client, run_id, kill, caplog)
        assert info.status is Status.SUCCEEDED and info.output["value"] == 5, info
        assert all(w.alive() for w in fleet.workers), "the worker died in the failover"
