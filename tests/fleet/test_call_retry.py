"""Issue 34 item 5 with a real worker: a flaky call is tried again inside its step, spending none
of the run's attempts (the failure cases run in process: tests/core/test_call_retry.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.model import Status
from tests.fleet.conftest import Fleet, count, events

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_a_call_that_fails_twice_makes_three_calls_in_one_attempt_of_one_step(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """``flaky_call`` (max_attempts=1 for the run) calls its model under CallRetry(max_attempts=3):
    a 429 asking for 0.3 s, then a 503, then the answer. The run succeeds on its one attempt, the
    step ran once, the model was called three times, and the history tells both retries, the first
    with the wait its error asked for."""
    fleet.start()
    client = client_for(fleet)
    run_id = client.enqueue("flaky_call", {"retry_after": 0.3})
    info = client.wait(run_id, timeout=60)
    assert (info.status, info.output, info.attempts, info.attempt) == (Status.SUCCEEDED, "answer", 1, 1)
    assert (count(redis_client, run_id, "summarize"), count(redis_client, run_id, "model")) == (1, 3)
    retried = [e.fields for e in events(client.store, run_id, "call_retried")]
    assert [(e["node"], e["call"], e["try"], e["error_type"]) for e in retried] == [
        ("summarize", "model", "1", "RunFailure"),
        ("summarize", "model", "2", "ConnectionError"),
    ]
    assert int(retried[0]["delay_ms"]) >= 300, "the retry_after the error carried"
    assert 0 <= int(retried[1]["delay_ms"]) <= 100, "full jitter under the second try's cap (2 x 0.05 s)"
    assert not any("provider" in str(e.fields) for e in client.store.events(run_id)), "no error text"
    assert events(client.store, run_id, "attempt_failed") == []
