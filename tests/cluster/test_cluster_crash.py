"""The crash tests of tests/fleet/test_crash.py, unchanged, with the store on the session's Redis
Cluster and the broker on the session's standalone Redis (issue 19).

The test functions are taken from that module, not copied: every one but those in :data:`LEFT_OUT`,
so a crash test added there runs here too. Pytest collects them here, where ``fleet`` starts workers
on a ``redis+cluster://`` store and ``redis_client`` is a cluster client, so every read a test makes
(the run's record, its status indexes, the graphs' executions and gates) goes to the cluster.

Four tests of that module are left out, for they do not run on whatever store the fixtures give:
``test_runs_finish_when_redis_restarts_mid_flight``, ``test_short_redis_outage_mid_step_costs_nothing``
and ``test_redis_down_while_checkpoint_is_saved`` each start their own standalone Redis as store and
broker, and restart or kill it. On a cluster the loss of a primary is a failover, which
test_cluster_failover.py tests. ``test_a_worker_cut_off_from_redis_is_fenced_out_and_serves_runs_once_healed``
puts one standalone Redis behind its TCP proxy, as store and broker of the worker it cuts off;
a cluster's clients follow its nodes' own addresses (CLUSTER SLOTS), past any one proxy.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.fleet import test_crash
from tests.fleet.conftest import Fleet, closing_fleet
from tests.fleet.conftest import client_for as client_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

LEFT_OUT = frozenset({
    "test_runs_finish_when_redis_restarts_mid_flight",
    "test_short_redis_outage_mid_step_costs_nothing",
    "test_redis_down_while_checkpoint_is_saved",
    "test_a_worker_cut_off_from_redis_is_fenced_out_and_serves_runs_once_healed",
})  # fmt: skip
"""The tests that build their own standalone Redis (see the module's docstring)."""
CRASH_TESTS = {name: test for name, test in vars(test_crash).items() if name.startswith("test_")}
assert CRASH_TESTS.keys() >= LEFT_OUT, "a test left out is no longer in test_crash.py"
globals().update({name: test for name, test in CRASH_TESTS.items() if name not in LEFT_OUT})


@pytest.fixture
def fleet(
    cluster_url: str, redis_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Fleet]:
    """Workers whose store is the session cluster (their graphs record executions there too) and
    whose broker is the session's standalone Redis."""
    env = {"REFLEXR_BROKER_URL": redis_url}
    f = Fleet(cluster_url, tmp_path, queue=f"crash-{uuid.uuid4().hex[:8]}", env=env)
    with closing_fleet(f, request) as started:
        yield started


@pytest.fixture
def redis_client(cluster_client: redis.RedisCluster) -> redis.RedisCluster:
    """The cluster, where the store and the graphs' executions and gates are."""
    return cluster_client
