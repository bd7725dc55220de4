"""Issue 9 part 3 on a real fleet: a worker SIGKILLed mid-agent-run costs no model request that finished.

The step runs tests/ai/graphs.py's agent: three model requests and one tool call, each logged in
the run's Redis list. The worker is killed after the second request was recorded (the step says
so in Redis from the output validator that runs right after it, and waits there), and a second
worker finishes the run from the records.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.model import Status
from tests.ai import graphs
from tests.fleet.conftest import Fleet, assert_consistent
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

REFS = "tests.ai.graphs:report"


def logged(r: redis.Redis, run_id: str) -> list[str]:
    return [v.decode() for v in r.lrange(graphs.log_key(run_id), 0, -1)]


def test_a_worker_killed_after_the_second_model_request_costs_one_more_request(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """Across both attempts the model function ran 3 times (not 5) and the tool once; the retry
    answered 3 durable calls from their records, and the output equals an uncrashed run's."""
    first = fleet.start(REFLEXR_GRAPHS=REFS)
    client = client_for(fleet)
    clean = client.wait(client.enqueue("ai_report", {"topic": "tea"}), timeout=60)
    assert clean.status is Status.SUCCEEDED, clean
    assert logged(redis_client, clean.run_id) == ["model:1", "tool:1", "model:1", "model:1"]

    run_id = client.enqueue("ai_report", {"topic": "tea", "crash": "block"})
    wait_for(lambda: redis_client.llen(graphs.validating_key(run_id)), 60, "the second model request")
    assert logged(redis_client, run_id) == ["model:1", "tool:1", "model:1"]
    first.kill_group()  # SIGKILL to the worker and its pool child, mid-step
    fleet.start(REFLEXR_GRAPHS=REFS)

    info = client.wait(run_id, timeout=90)
    assert info.status is Status.SUCCEEDED, info
    assert info.output == clean.output
    assert info.attempts == 2
    assert logged(redis_client, run_id) == ["model:1", "tool:1", "model:1", "model:2"]
    assert info.reused_calls == 3  # the two model requests and the tool call of attempt 1
    assert_consistent(redis_client, run_id)
