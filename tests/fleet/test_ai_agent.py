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


def test_a_worker_killed_mid_stream_restarts_the_request_in_flight_and_repeats_no_recorded_one(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """``durable_agent(agent, stream="agent")`` on a fleet: the model's tool call and the first
    chunk of its answer reach a reader, the worker is SIGKILLed mid-answer, and another finishes
    the run. The first request was recorded: the model is not asked for it again and its item
    stands; the answer streams again after a restart item of its own request."""
    first = fleet.start(REFLEXR_GRAPHS="tests.ai.graphs:talk")
    client = client_for(fleet)
    run_id = client.enqueue("ai_talk", "hi")
    wait_for(lambda: redis_client.llen(graphs.validating_key(run_id)), 60, "the answer to be mid-stream")
    seen = []
    for item in client.stream(run_id, topic="agent", timeout=60):
        seen.append(item)
        if item.value == "The ":
            break
    first.kill_group()  # SIGKILL to the worker and its pool child, mid-stream
    fleet.start(REFLEXR_GRAPHS="tests.ai.graphs:talk")
    items = list(client.stream(run_id, topic="agent", timeout=90))
    info = client.get(run_id)
    assert info.status is Status.SUCCEEDED and info.output == "".join(graphs.ANSWER)
    assert logged(redis_client, run_id) == ["model:1", "tool:1", "model:1", "model:2"]
    shown = [("restart", i.value["void_from"]) if i.restart else i.value for i in items]
    assert shown == [{"tool_call": "look", "tool_call_id": "c1"}, "The ", ("restart", 2), *graphs.ANSWER]
    assert [i.value for i in seen] == shown[:2], "read live, before the crash"
    assert [i.call for i in items] == ["talker.model.stream#0", *["talker.model.stream#1"] * 6]
