"""Issue 13 in the engine: step and attempt timeouts, retry policies and their verdicts, limits declared on
the action, and the deadlines the heartbeat thread reads for a step that blocks the event loop."""

from __future__ import annotations

import asyncio
import time

import pytest
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction, Limit, RetryPolicy, RunFailure
from reflexr_graph.core.attempt_scope import AttemptScope, in_scope
from reflexr_graph.core.controls import NO_CONTROLS, controlled
from reflexr_graph.core.deadlines import Deadlines
from reflexr_graph.core.journal import RecordJournal
from reflexr_graph.core.limits import Limiter, parse_rate
from reflexr_graph.core.policy import failed_node, judge
from reflexr_graph.core.port import AttemptContext
from reflexr_graph.core.tally import Tally
from reflexr_graph.errors import AttemptTimeout, GraphDefinitionError, StepTimeout
from tests.core.harness import Harness

pytestmark = pytest.mark.timeout(30)


def _two_steps(pause_s: float, **options: object) -> GraphAction:
    g = GraphBuilder(name="paced", input_type=int, output_type=int)

    @g.step
    async def first(ctx: StepContext[None, None, int]) -> int:
        return ctx.inputs + 1

    @g.step
    async def second(ctx: StepContext[None, None, int]) -> int:
        await asyncio.sleep(pause_s)
        if ctx.inputs < 0:
            raise KeyError("negative")
        return ctx.inputs * 2

    g.add(
        g.edge_from(g.start_node).to(first), g.edge_from(first).to(second), g.edge_from(second).to(g.end_node)
    )
    return GraphAction(g.build(), **options)  # type: ignore[arg-type]


def test_a_step_past_its_timeout_is_cancelled_and_named(harness: Harness) -> None:
    action = _two_steps(30, step_timeouts={"second": 0.05})
    run_id = harness.create(action, 1)
    started = time.monotonic()
    with pytest.raises(StepTimeout) as caught:
        harness.attempt(action, run_id)
    assert time.monotonic() - started < 10, "cancelled, not waited out"
    assert (caught.value.node, caught.value.timeout_s, caught.value.reason) == (
        "second",
        0.05,
        "step_timeout",
    )
    assert failed_node(caught.value) == "second"
    assert not caught.value.blocked


def test_default_and_attempt_timeouts(harness: Harness) -> None:
    within = _two_steps(0.0, default_step_timeout=5)
    assert harness.attempt(within, harness.create(within, 1)) == 4
    whole = _two_steps(30, attempt_timeout=0.05)
    with pytest.raises(AttemptTimeout) as caught:
        harness.attempt(whole, harness.create(whole, 1))
    assert (caught.value.reason, caught.value.node) == ("attempt_timeout", "second")


def test_a_step_that_raises_its_own_timeout_error_is_not_taken_for_a_timeout(harness: Harness) -> None:
    g = GraphBuilder(name="own_timeout", input_type=int, output_type=int)

    @g.step
    async def call(ctx: StepContext[None, None, int]) -> int:
        raise TimeoutError("the API timed out")

    g.add(g.edge_from(g.start_node).to(call), g.edge_from(call).to(g.end_node))
    action = GraphAction(g.build(), step_timeouts={"call": 5})
    with pytest.raises(TimeoutError, match="the API timed out") as caught:
        harness.attempt(action, harness.create(action, 1))
    assert not isinstance(caught.value, StepTimeout) and failed_node(caught.value) == "call"


def test_deadlines_say_which_step_is_overdue() -> None:
    deadlines = Deadlines()
    handle = deadlines.start("crawl", 0.01)
    assert deadlines.overdue(grace_s=60) is None
    time.sleep(0.02)  # the deadline itself passing, not a wait for something
    late = deadlines.overdue(grace_s=0.0)
    assert late is not None and (late.node, late.timeout_s, late.attempt) == ("crawl", 0.01, False)
    deadlines.end(handle)
    assert deadlines.overdue(grace_s=0.0) is None


def test_the_verdict_of_a_policy() -> None:
    policy = RetryPolicy(max_attempts=2, non_retryable=(KeyError,))
    common = {"reason": "step_failed", "permanent": False, "policy": policy, "run_max": 5}
    assert judge(KeyError("x"), counted=1, **common).reason == "non_retryable"  # type: ignore[arg-type]
    assert judge(ValueError("x"), counted=1, **common).permanent is False  # type: ignore[arg-type]
    exhausted = judge(ValueError("x"), counted=2, **common)  # type: ignore[arg-type]
    assert (exhausted.reason, exhausted.permanent) == ("max_attempts", True), "the node's own budget"
    timeout = StepTimeout(node="n", timeout_s=1)
    last = judge(timeout, reason="step_timeout", permanent=False, policy=RetryPolicy(), counted=5, run_max=5)
    assert (last.reason, last.permanent) == ("step_timeout", True), "a timeout keeps its reason"
    told = RunFailure("429", reason="rate_limited", retry_after=1.5)
    verdict = judge(told, reason="rate_limited", permanent=False, policy=RetryPolicy(), counted=1, run_max=5)
    assert (verdict.reason, verdict.permanent, verdict.retry_after_s) == ("rate_limited", False, 1.5)


def test_a_node_policy_takes_what_it_leaves_unset_from_the_actions() -> None:
    action = _two_steps(
        0.0,
        retry=RetryPolicy(max_attempts=4, backoff_s=1, non_retryable=(ValueError,)),
        step_retries={"second": RetryPolicy(backoff_s=3, non_retryable=(KeyError,))},
    )
    node = action.policy_for("second")
    assert (node.max_attempts, node.backoff_s, node.non_retryable) == (4, 3, (KeyError, ValueError))
    assert action.policy_for("first") == action.retry and action.policy_for(None) == action.retry
    assert action.max_attempts == 4, "the action's policy sets the run's budget"


@pytest.mark.parametrize(
    ("rate", "interval_ms"), [("60/m", 1000.0), ("20/s", 50.0), ("5/10s", 2000.0), ("1/h", 3_600_000.0)]
)
def test_rates(rate: str, interval_ms: float) -> None:
    assert parse_rate(rate) == interval_ms


@pytest.mark.parametrize(
    "options",
    [
        {"step_timeouts": {"nope": 1}},
        {"step_timeouts": {"second": 0}},
        {"default_step_timeout": -1},
        {"attempt_timeout": 0},
        {"limits": {"nope": Limit(key="k", rate="1/s")}},
        {"limits": {"second": "60/m"}},
        {"step_retries": {"nope": RetryPolicy()}},
        {"max_attempts": 3, "retry": RetryPolicy(max_attempts=4)},
    ],
)
def test_controls_that_do_not_fit_the_graph_are_refused_when_the_action_is_built(
    options: dict[str, object],
) -> None:
    with pytest.raises(GraphDefinitionError):
        _two_steps(0.0, **options)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Limit(key="k"),
        lambda: Limit(key="k", rate="fast"),
        lambda: Limit(key="k", rate="0/s"),
        lambda: Limit(key="k", concurrency=0),
        lambda: Limit(key="has space", concurrency=1),
        lambda: Limit(key="k", rate="1/s", burst=0),
        lambda: RetryPolicy(max_attempts=0),
        lambda: RetryPolicy(backoff_s=0),
        lambda: RetryPolicy(non_retryable=[KeyError]),  # type: ignore[arg-type]
    ],
)
def test_bad_limits_and_policies_are_refused(make: object) -> None:
    with pytest.raises(GraphDefinitionError):
        make()  # type: ignore[operator]


def test_retry_after_must_be_seconds() -> None:
    with pytest.raises(ValueError, match="retry_after"):
        RunFailure("x", retry_after=-1)


def test_a_computed_limit_key_that_is_not_usable_fails_the_run_at_once() -> None:
    limit = Limit(key=lambda ctx: f"tenant {ctx}", concurrency=1)
    with pytest.raises(RunFailure) as caught:
        limit.key_for("a b", "work")
    assert (caught.value.reason, caught.value.permanent) == ("invalid_limit_key", True)
    assert "a b" not in str(caught.value), "the message never carries the computed value"
    assert Limit(key=lambda ctx: f"crm:{ctx}", concurrency=1).key_for("acme") == "crm:acme"


def test_a_step_with_no_deadline_counts_as_the_attempts_work_while_it_runs() -> None:
    """Issue 18: a step with neither timeout nor an attempt timeout runs in controlled's own frame,
    and is still counted as running while it does, so that a limited sibling waits in place for its
    slot rather than suspending the run (core/limits.py: bound_s)."""
    ctx = AttemptContext("r", "t", 1, 1, "k", "g")
    limiter = Limiter(port=None, ctx=ctx)  # type: ignore[arg-type]  # no limit is taken: never used
    journal = RecordJournal(port=None, ctx=ctx, fingerprint="f", limiter=limiter)  # type: ignore[arg-type]
    scope = AttemptScope(journal, Tally("g", "r"), limiter=limiter)
    seen: list[int] = []

    async def step(_: object) -> int:
        seen.append(limiter.running)
        raise KeyError("the step's own failure")

    call = controlled(NO_CONTROLS, "s", step)
    with in_scope(scope), pytest.raises(KeyError) as caught:
        asyncio.run(call(None))
    assert seen == [1] and limiter.running == 0, "counted while it ran, and no longer once it failed"
    assert failed_node(caught.value) == "s", "its failure is tagged with its node, for its policy"
