"""Issue 34 item 5: ``durable_call(..., retry=CallRetry(...))`` in real attempts on a real Redis.

The worker-run case (three calls in one attempt of one step) is tests/fleet/test_call_retry.py;
these check what fails the step: a non-retryable error, the tries running out, a wait too long.
"""

from __future__ import annotations

import pytest
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import CallRetry, GraphAction, GraphDefinitionError, RunFailure, StepTimeout, durable_call
from tests.core.graphs import CALLS, FAIL, Boom, hit
from tests.core.harness import Harness

pytestmark = pytest.mark.timeout(30)


class Denied(Exception):
    pass


def _flaky(
    policy: CallRetry, error: type[Exception] | None = None, retry_after: float | None = None
) -> GraphAction:
    """One step ``ask`` whose durable call ``service`` raises while FAIL["service"] lasts: a Boom, else
    ``error``, else (with ``retry_after``) a RunFailure that asks for that wait."""
    g = GraphBuilder(name="flaky_call", input_type=int, output_type=int)

    def service(n: int) -> int:
        if FAIL["service"] > 0 and (error is not None or retry_after is not None):
            FAIL["service"] -= 1
            CALLS["service"] += 1
            if error is not None:
                raise error("no")
            raise RunFailure("busy", retry_after=retry_after)
        hit("service")
        return n * 2

    @g.step
    async def ask(ctx: StepContext[None, None, int]) -> int:
        hit("ask")
        return await durable_call("service", service, ctx.inputs, retry=policy)

    g.add(g.edge_from(g.start_node).to(ask), g.edge_from(ask).to(g.end_node))
    return GraphAction(g.build())


def _retried(harness: Harness, run_id: str) -> list[dict[str, str]]:
    return [e.fields for e in harness.store.events(run_id) if e.type == "call_retried"]


def test_a_non_retryable_error_fails_the_step_at_once(harness: Harness) -> None:
    action = _flaky(CallRetry(max_attempts=5, backoff_s=0.01, non_retryable=(Denied,)), error=Denied)
    FAIL["service"] = 3
    run_id = harness.create(action, 4)
    with pytest.raises(Denied):
        harness.attempt(action, run_id)
    assert (CALLS["service"], CALLS["ask"]) == (1, 1)
    assert _retried(harness, run_id) == []


def test_when_the_tries_run_out_the_step_fails_as_without_a_policy(harness: Harness) -> None:
    action = _flaky(CallRetry(max_attempts=3, backoff_s=0.01, backoff_max_s=0.02))
    FAIL["service"] = 5
    run_id = harness.create(action, 4)
    with pytest.raises(Boom):
        harness.attempt(action, run_id)
    assert (CALLS["service"], CALLS["ask"]) == (3, 1), "three tries in the one execution of the step"
    assert [(e["try"], e["error_type"]) for e in _retried(harness, run_id)] == [("1", "Boom"), ("2", "Boom")]
    assert all(0 <= int(e["delay_ms"]) <= 20 for e in _retried(harness, run_id)), "full jitter under the cap"
    info = harness.store.get(run_id)
    assert (info.attempts, info.status.value, info.reason) == (1, "retrying", "step_failed")
    # The next attempt runs the step again, with the call's tries anew: two more fail, the third answers.
    FAIL["service"] = 2
    assert harness.attempt(action, run_id) == 8
    assert harness.store.get(run_id).attempts == 2


def test_a_retry_after_is_waited_and_one_past_backoff_max_is_left_to_the_run(harness: Harness) -> None:
    action = _flaky(CallRetry(max_attempts=3, backoff_s=5, backoff_max_s=1), retry_after=0.25)
    FAIL["service"] = 1
    run_id = harness.create(action, 4)
    assert harness.attempt(action, run_id) == 8
    assert [(e["try"], e["error_type"], e["delay_ms"]) for e in _retried(harness, run_id)] == [
        ("1", "RunFailure", "250")
    ], "the wait asked for, not the backoff (up to 1 s, drawn from a 5 s cap)"
    longer = _flaky(CallRetry(max_attempts=3, backoff_s=0.01, backoff_max_s=1), retry_after=60)
    FAIL["service"] = 1
    run_id = harness.create(longer, 4)
    with pytest.raises(RunFailure):
        harness.attempt(longer, run_id)
    assert _retried(harness, run_id) == [], "a minute's wait is the run's retry's, holding no worker"


def test_a_permanent_failure_is_never_tried_again(harness: Harness) -> None:
    g = GraphBuilder(name="permanent_call", input_type=int, output_type=int)

    def refuse(n: int) -> int:
        CALLS["refuse"] += 1
        raise RunFailure("bad document", permanent=True)

    @g.step
    async def ask(ctx: StepContext[None, None, int]) -> int:
        return await durable_call(
            "refuse", refuse, ctx.inputs, retry=CallRetry(max_attempts=4, backoff_s=0.01)
        )

    g.add(g.edge_from(g.start_node).to(ask), g.edge_from(ask).to(g.end_node))
    action = GraphAction(g.build())
    run_id = harness.create(action, 1)
    with pytest.raises(RunFailure):
        harness.attempt(action, run_id)
    assert CALLS["refuse"] == 1


@pytest.mark.parametrize(
    "kwargs", [{"max_attempts": 0}, {"backoff_s": 0}, {"backoff_max_s": -1}, {"non_retryable": [ValueError]}]
)
def test_a_bad_policy_is_refused_where_it_is_built(kwargs: dict[str, object]) -> None:
    with pytest.raises(GraphDefinitionError):
        CallRetry(**kwargs)  # type: ignore[arg-type]


def test_the_steps_timeout_bounds_the_waits_between_tries(harness: Harness) -> None:
    """A call that keeps asking for 5 s in a step allowed 0.5 s: the step times out in its first
    wait, as it would in a slow call, and nothing tries the call again."""
    g = GraphBuilder(name="timed_call", input_type=int, output_type=int)

    def busy(n: int) -> int:
        CALLS["busy"] += 1
        raise RunFailure("busy", retry_after=5)

    @g.step
    async def ask(ctx: StepContext[None, None, int]) -> int:
        policy = CallRetry(max_attempts=5, backoff_s=1, backoff_max_s=10)
        return await durable_call("busy", busy, ctx.inputs, retry=policy)

    g.add(g.edge_from(g.start_node).to(ask), g.edge_from(ask).to(g.end_node))
    action = GraphAction(g.build(), step_timeouts={"ask": 0.5})
    run_id = harness.create(action, 1)
    with pytest.raises(StepTimeout):
        harness.attempt(action, run_id)
    assert CALLS["busy"] == 1
    assert [e["delay_ms"] for e in _retried(harness, run_id)] == ["5000"]
