"""Traces and metrics of real attempts through the fleet's attempt path, against a real Redis.

A run's attempts share the trace it was enqueued in: the failed attempt and the resumed
one are siblings under the enqueuer's span, whatever re-sent their messages.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace

from reflexr_graph import clock
from reflexr_graph.core import tracing
from reflexr_graph.fleet import attempt
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.reaper import Reaper
from reflexr_graph.model import Status
from reflexr_graph.store.redis_store import RedisStore
from tests import otel
from tests.core import graphs
from tests.fleet import graphs as fleet_graphs
from tests.fleet.inproc import claim, fleet_app
from tests.store.support import FakeClock


@pytest.fixture
def app(redis_url: str) -> Iterator[FleetApp]:
    graphs.reset()
    actions = (graphs.linear(), graphs.linear(name="doomed"), fleet_graphs.steps, graphs.review_graph())
    app = fleet_app(redis_url, *actions, max_attempts=2)
    yield app
    app.store().close()
    app.close()
    graphs.reset()


def _enqueue(store: RedisStore, graph: str, inputs: object) -> str:
    run_id, _ = store.create_run(
        f"run-{graph}",
        graph=graph,
        inputs_json=str(inputs).lower(),
        max_attempts=2,
        dispatch_grace_ms=60_000,
        trace_context=tracing.current_trace_context(),
    )
    return run_id


def test_failed_and_resumed_attempts_share_the_run_trace(app: FleetApp) -> None:
    """Spans: each attempt's invoke_workflow is a child of the enqueuer's span, in one trace, with
    execute_step spans under it and the run's attributes; the resumed one carries its checkpoint seq."""
    store = app.store()
    otel.SPANS.clear()
    with tracing.TRACER.start_as_current_span("enqueue") as root:
        run_id = _enqueue(store, "linear", 1)
    graphs.FAIL["s2"] = 1
    for _ in range(2):
        attempt.run_claimed(app, store, claim(app, store, run_id))
    assert store.get(run_id).status is Status.SUCCEEDED
    spans = otel.SPANS.get_finished_spans()
    runs = sorted((s for s in spans if s.name == tracing.INVOKE_WORKFLOW), key=lambda s: s.start_time or 0)
    assert [s.attributes[tracing.ATTR_ATTEMPT] for s in runs if s.attributes] == [1, 2]
    trace_id = root.get_span_context().trace_id
    for span in runs:
        assert span.context is not None and span.context.trace_id == trace_id
        assert span.parent is not None and span.parent.span_id == root.get_span_context().span_id
        assert span.attributes is not None
        assert (
            span.attributes[tracing.ATTR_RUN_ID] == run_id and span.attributes[tracing.ATTR_GRAPH] == "linear"
        )
    assert runs[1].attributes is not None and runs[1].attributes[tracing.ATTR_SEQ] == 3
    steps = [
        (s.name, s.parent.span_id if s.parent else None) for s in spans if s.name.startswith("execute_step")
    ]
    first, second = (r.context.span_id for r in runs if r.context)
    assert steps == [
        ("execute_step s0", first),
        ("execute_step s1", first),
        ("execute_step s2", first),
        ("execute_step s2", second),
    ], "the resumed attempt ran only the step that failed"
    failed = runs[0]
    assert failed.status.status_code is trace.StatusCode.ERROR


def test_metrics_after_a_dead_lettered_run(app: FleetApp) -> None:
    """Metrics: a run that fails every attempt counts its attempts, its end, and a dead letter."""
    store = app.store()
    before = {
        "started": otel.metric_total("reflexr.runs.started", reflexr__graph="doomed"),
        "failed": otel.metric_total("reflexr.attempts", reflexr__graph="doomed", reflexr__outcome="failed"),
        "dead": otel.metric_total(
            "reflexr.runs.ended",
            reflexr__graph="doomed",
            reflexr__outcome="dead",
            reflexr__reason="max_attempts",
        ),
        "letters": otel.metric_total("reflexr.dead_letters", reflexr__graph="doomed"),
        "saves": otel.metric_total("reflexr.checkpoint.save.duration", reflexr__graph="doomed"),
    }
    run_id = _enqueue(store, "doomed", 1)
    graphs.FAIL["s1"] = 2  # s0 succeeds once and is checkpointed; s1 fails on both attempts
    for _ in range(2):
        attempt.run_claimed(app, store, claim(app, store, run_id))
    assert store.get(run_id).status is Status.DEAD
    assert otel.metric_total("reflexr.runs.started", reflexr__graph="doomed") - before["started"] == 1
    assert (
        otel.metric_total("reflexr.attempts", reflexr__graph="doomed", reflexr__outcome="failed")
        - before["failed"]
        == 2
    )
    assert (
        otel.metric_total(
            "reflexr.runs.ended",
            reflexr__graph="doomed",
            reflexr__outcome="dead",
            reflexr__reason="max_attempts",
        )
        - before["dead"]
        == 1
    )
    assert otel.metric_total("reflexr.dead_letters", reflexr__graph="doomed") - before["letters"] == 1
    assert (
        otel.metric_total("reflexr.checkpoint.save.duration", reflexr__graph="doomed") - before["saves"] == 1
    )


def test_a_crashed_attempt_is_counted_though_its_span_never_ends(app: FleetApp) -> None:
    """An attempt whose worker died is counted as abandoned when the reaper recovers its run, and a
    recover_run span stands for it in the run's trace, since its own span never ended."""
    store = app.store()
    fake = FakeClock()
    previous = clock.set_source(fake)
    otel.SPANS.clear()
    try:
        with tracing.TRACER.start_as_current_span("enqueue") as root:
            run_id = _enqueue(store, "steps", {})
        claim(app, store, run_id)  # ... and the worker dies: no span ends, nothing is recorded
        before = otel.metric_total("reflexr.attempts", reflexr__graph="steps", reflexr__outcome="abandoned")
        recovered = otel.metric_total("reflexr.runs.recovered", reflexr__graph="steps")
        fake.advance(int(app.reflexr_settings.lease_ttl_s * 1000) + 1)
        Reaper(app, store).tick()
    finally:
        clock.set_source(previous)
    assert store.get(run_id).status is Status.RETRYING
    after = otel.metric_total("reflexr.attempts", reflexr__graph="steps", reflexr__outcome="abandoned")
    assert after - before == 1
    assert otel.metric_total("reflexr.runs.recovered", reflexr__graph="steps") - recovered == 1
    (span,) = [s for s in otel.SPANS.get_finished_spans() if s.name == tracing.RECOVER_RUN]
    assert span.context is not None and span.context.trace_id == root.get_span_context().trace_id
    assert span.attributes is not None and span.attributes[tracing.ATTR_ATTEMPT] == 1
    assert span.attributes[tracing.ATTR_RUN_ID] == run_id, "the run's trace shows the attempt that died"


def test_a_suspended_attempt_ends_its_spans_without_error_and_the_woken_one_joins_the_trace(
    app: FleetApp,
) -> None:
    """The step's span ends with the suspension (an event naming the signal, never a value), nothing is
    marked an error, the attempt counts as suspended, and the attempt the signal wakes joins the trace."""
    store = app.store()
    otel.SPANS.clear()
    suspended = otel.metric_total("reflexr.attempts", reflexr__graph="review", reflexr__outcome="suspended")
    with tracing.TRACER.start_as_current_span("enqueue") as root:
        run_id = _enqueue(store, "review", '"t"')
    delivered = attempt.run_claimed(app, store, claim(app, store, run_id))
    assert (delivered.outcome.value, store.get(run_id).status) == ("suspended", Status.WAITING)
    store.signal(run_id, "approval", '{"approved": true, "by": "ana"}', dispatch_grace_ms=60_000)
    attempt.run_claimed(app, store, claim(app, store, run_id))
    assert store.get(run_id).status is Status.SUCCEEDED
    spans = otel.SPANS.get_finished_spans()
    runs = [s for s in spans if s.name == tracing.INVOKE_WORKFLOW]
    assert len(runs) == 2
    assert all(s.context is not None and s.context.trace_id == root.get_span_context().trace_id for s in runs)
    assert all(s.status.status_code is not trace.StatusCode.ERROR for s in spans)
    reviews = [s for s in spans if s.name == "execute_step review"]
    assert len(reviews) == 2, "the waiting step ran again once woken"
    (event,) = [e for e in reviews[0].events if e.name == tracing.EVENT_SUSPENDED]
    assert dict(event.attributes or {}) == {tracing.ATTR_SIGNAL: "approval"}
    assert tracing.EVENT_CALL_REUSED in [e.name for e in reviews[1].events]
    after = otel.metric_total("reflexr.attempts", reflexr__graph="review", reflexr__outcome="suspended")
    assert after - suspended == 1
