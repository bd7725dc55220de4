"""The attempt driver: one attempt of a run, stepped through ``Graph.iter``.

It resumes from the latest checkpoint when one validates, saves a checkpoint at every
safe boundary through the store port (one round trip each), and returns the outcome: the
graph's output as JSON and the finished checkpoint, which the caller writes together with
the run's success. It knows nothing of Redis or Celery.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Coroutine
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context

from reflexr_graph.core import metrics, pg, tracing
from reflexr_graph.core.action import GraphAction
from reflexr_graph.core.attempt_scope import AttemptScope, in_scope
from reflexr_graph.core.checkpoint import Discarded, Restored, prefix_fork_stack
from reflexr_graph.core.context import CurrentRun, running_as
from reflexr_graph.core.deadlines import Deadlines
from reflexr_graph.core.handoff import Written
from reflexr_graph.core.inflight import DEFAULT_SIBLING_GRACE_S, InFlight
from reflexr_graph.core.journal import RecordJournal
from reflexr_graph.core.limits import Limiter
from reflexr_graph.core.pg import Kind
from reflexr_graph.core.port import AttemptContext, Boundary, CheckpointPort, StopSignal
from reflexr_graph.core.readback import NotReadable
from reflexr_graph.core.tally import SkipReason, Tally
from reflexr_graph.errors import (
    AttemptTimeout,
    CancelRequested,
    FencedOut,
    OutputNotSerializable,
    StoreUnavailable,
    Suspended,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Finished:
    """What a finished attempt hands back: the output, and the checkpoint that records it.

    ``checkpoint`` is '' when the attempt resumed from a finished checkpoint: the output was
    already written down, and nothing new needs saving.
    """

    output: Any
    checkpoint: str
    seq: int


@dataclass
class _Saver:
    """Writes checkpoints for one attempt. The graph inputs are not repeated in them: they are
    the run's recorded inputs, checked once here to read back as they were."""

    action: GraphAction
    port: CheckpointPort
    ctx: AttemptContext
    seq: int
    scope: AttemptScope
    span: trace.Span
    """The attempt's ``invoke_workflow`` span. Not the current span: a boundary is reached inside
    pydantic-graph's ``run graph`` span, when the graph emits it."""
    inputs_ok: bool = True
    cancel_asked: bool = False
    """The store said, with the last save, that the run was asked to cancel."""
    returning: list[tuple[str, str]] = field(default_factory=list)
    """The limit slots of the step that just ended (core/limits.py): this boundary's save gives
    them back, or, with no save, a release of their own."""

    def prepare(self, inputs: Any) -> None:
        try:
            self.action.checkpoints.inputs.dump(inputs)
        except NotReadable:
            # The graph inputs would not restore as they were: no boundary of this attempt is saved.
            self.inputs_ok = False

    @property
    def tally(self) -> Tally:
        return self.scope.tally

    def boundary(self, run: pg.AnyRun, batch: Any) -> None:
        """Save a checkpoint here if the boundary is quiescent and safe; the step about to run is
        handed what it wrote down (core/handoff.py), and keys its records by it."""
        limiter = self.scope.limiter
        self.returning = limiter.take_returning() if limiter is not None else []
        written: Written | None = None
        try:
            written = self._boundary(run, batch)
        finally:
            self.scope.handoff.give(written)
            if limiter is not None and self.returning:  # no save carried them
                limiter.returning.extend(self.returning)
                self.returning = []
                limiter.give_back_now()

    def _boundary(self, run: pg.AnyRun, batch: Any) -> Written | None:
        """The next task as the checkpoint saved here wrote it down; None when none was saved."""
        if not pg.is_quiescent(run, batch):
            return None
        task = batch[0]
        node_id, action = task.node_id, self.action
        kind = action.kinds.get(node_id)
        if kind is Kind.END:
            # The end node runs no code: the finished checkpoint follows at once, so a save here
            # would protect nothing and cost a round trip.
            return None
        stack = pg.task_fork_stack(task)
        if not action.boundaries.is_safe(node_id, (item.fork_id for item in stack)):
            return None  # inside a fork's region: never a boundary, by the seed's rule
        codec = action.node_codec(node_id)
        if codec is None:
            self.tally.skip(node_id, SkipReason.UNTYPED, "its input type is not known")
            return None
        if not self.inputs_ok:
            self.tally.skip(node_id, SkipReason.INPUTS, "the graph inputs do not read back")
            return None
        checkpoints = action.checkpoints
        try:
            state = checkpoints.state.dump(run.state)
        except NotReadable as why:
            self.tally.skip(node_id, SkipReason.STATE, f"the state {why}")
            return None
        try:
            # A decision routes by class, so its inputs must read back as theirs.
            node_inputs = codec.dump(task.inputs, same_class=kind is Kind.DECISION)
        except NotReadable as why:
            self.tally.skip(node_id, SkipReason.NODE_INPUTS, f"its inputs {why}")
            return None
        payload = checkpoints.encode(seq=self.seq + 1, state=state, next_task=(node_id, node_inputs, stack))
        self._save(payload, node_id)
        return Written(node_id, task.inputs, node_inputs)

    def finish(self, output: Any) -> Finished:
        try:
            output_json = self.action.checkpoints.output.dump(output)
        except NotReadable as why:
            raise OutputNotSerializable(
                f"graph {self.action.name!r} finished, but its output cannot be recorded: it {why} "
                "through the graph's output type; make the output type serializable"
            ) from None
        # A finished checkpoint restores only the output, so it holds no state: a state that
        # would not read back must not stop the output from being kept.
        payload = self.action.checkpoints.encode(seq=self.seq + 1, output=output_json, finished=True)
        self.span.set_attribute(tracing.ATTR_SEQ, self.seq + 1)
        return Finished(json.loads(output_json), payload, self.seq + 1)

    def _save(self, payload: str, next_node: str) -> None:
        started = time.perf_counter()
        boundary = Boundary(payload, seq=self.seq + 1, next_node=next_node, notes=self.tally.take())
        asked = self.port.save_checkpoint(self.ctx, boundary, returning=self.returning)
        self.returning = []
        self.cancel_asked = self.cancel_asked or bool(asked)
        self.scope.saved()
        attrs = self._metric_attrs
        metrics.CHECKPOINT_SAVE.record(time.perf_counter() - started, attrs)
        metrics.CHECKPOINT_SIZE.record(len(payload), attrs)
        self.seq += 1
        if self.scope.traced:  # without an SDK the span records nothing: its event is not built
            self.span.set_attribute(tracing.ATTR_SEQ, self.seq)
            saved: dict[str, str | int] = {tracing.ATTR_SEQ: self.seq, tracing.ATTR_NODE: next_node}
            self.span.add_event(tracing.EVENT_SAVED, saved)

    @cached_property
    def _metric_attrs(self) -> dict[str, str]:
        return {tracing.ATTR_GRAPH: self.action.name}


@dataclass(frozen=True)
class _Advance:
    """Moves the graph on by one batch; when a step fails, lets the steps in flight finish first."""

    in_flight: InFlight
    grace_s: float
    run_id: str
    stop: StopSignal | None = None

    async def unless_cancelled(self, asked: bool) -> None:
        """At a boundary: raise CancelRequested if the run was asked to cancel, once the steps
        still in flight (a fork's other branches) finished and recorded their results."""
        if not asked and (self.stop is None or not self.stop.is_set()):
            return
        await self.in_flight.settle(self.grace_s, run_id=self.run_id, why="the run was cancelled")
        raise CancelRequested(self.run_id)

    async def __call__(self, run: pg.AnyRun, value: Any) -> Any:
        try:
            return await run.next(value)
        except (FencedOut, StoreUnavailable):
            raise  # the others' records could not be written either
        except Exception as exc:
            # Leaving Graph.iter cancels the branches still running, and a retry would run them
            # again: let them finish and record their results first (core/inflight.py).
            why = f"a step failed ({type(exc).__name__})"
            await self.in_flight.settle(self.grace_s, run_id=self.run_id, why=why)
            raise


def _load(
    action: GraphAction, port: CheckpointPort, ctx: AttemptContext, span: trace.Span, inputs: Any
) -> Restored | Discarded | None:
    payload = port.load_checkpoint(ctx.run_id)
    if payload is None:
        return None
    restored = action.checkpoints.decode(payload, run_inputs=inputs)
    if isinstance(restored, Discarded):
        attrs = {tracing.ATTR_DISCARD_REASON: restored.reason.value}
        if restored.error:
            attrs[tracing.ATTR_DISCARD_ERROR] = restored.error
        span.add_event(tracing.EVENT_DISCARDED, attrs)
        log.warning(
            "run %s: checkpoint discarded (%s); starting over from the first step",
            ctx.run_id,
            restored.reason.value,
        )
    else:
        span.add_event(tracing.EVENT_RESUMED, {tracing.ATTR_SEQ: restored.seq})
        span.set_attribute(tracing.ATTR_SEQ, restored.seq)
    return restored


async def run_attempt(
    action: GraphAction,
    port: CheckpointPort,
    ctx: AttemptContext,
    *,
    inputs: Any,
    state: Any = None,
    tally: Tally | None = None,
    limiter: Limiter | None = None,
    deadlines: Deadlines | None = None,
    sibling_grace_s: float = DEFAULT_SIBLING_GRACE_S,
    stop: StopSignal | None = None,
) -> Finished:
    """Run one attempt of a run and return its outcome: the output and the finished checkpoint.

    ``inputs`` and ``state`` are the run's recorded JSON values. ``tally`` collects the
    boundaries that could not be saved; the caller records what is left of it with the
    attempt's outcome. Raises whatever a step raised (the caller decides on a retry),
    ``InvalidInputs`` for inputs or state that do not validate, ``OutputNotSerializable`` for
    an output that cannot be recorded, ``FencedOut`` when another attempt took the run over,
    ``Suspended`` when a step suspended the run to wait for a signal, a timer or a limit, and
    ``AttemptTimeout`` past the action's ``attempt_timeout``. ``limiter`` enforces the steps'
    limits (none without it); ``deadlines`` receives the deadlines of steps in flight. When a
    step fails, the steps still in flight (a fork's other branches) get ``sibling_grace_s``
    seconds to finish and record their results before the failure is raised.

    A run asked to cancel (``stop`` set, or the store's answer to a checkpoint save) stops at the
    next boundary, after the same wait: ``CancelRequested``. The step in flight is not cut.
    """
    attrs: dict[str, str | int] = {
        tracing.ATTR_RUN_ID: ctx.run_id,
        tracing.ATTR_GRAPH: action.name,
        tracing.ATTR_ATTEMPT: ctx.attempt,
    }
    tally = tally if tally is not None else Tally(action.name, ctx.run_id)
    parent = tracing.run_trace_parent(ctx.trace_context)
    traced = tracing.recording()
    current = CurrentRun(ctx.run_id, ctx.attempt, ctx.idempotency_key, action.name, ctx.tags)
    with _attempt_span(traced, parent, attrs) as span, running_as(current):
        records = dict(port.load_records(ctx.run_id))
        journal = RecordJournal(port, ctx, action.fingerprint, records, limiter)
        scope = AttemptScope(journal, tally, action.signals, limiter, deadlines or Deadlines(), traced=traced)
        with in_scope(scope):
            try:
                advance = _Advance(scope.in_flight, sibling_grace_s, ctx.run_id, stop)
                drive = _drive(action, port, ctx, span, (inputs, state), scope, advance)
                return await _within(action.attempt_timeout, scope.deadlines, drive)
            except Suspended as suspended:
                # Not an error: the attempt ends here and the run waits in Redis (G8).
                attrs_s: dict[str, str | int] = {tracing.ATTR_SIGNAL: suspended.signal or ""}
                if suspended.wake_at_ms is not None:
                    attrs_s[tracing.ATTR_WAKE_AT] = suspended.wake_at_ms
                span.add_event(tracing.EVENT_SUSPENDED, attrs_s)
                raise
            finally:
                scope.return_slots()  # a limited step's, when the attempt ends before its boundary


def _attempt_span(
    traced: bool, parent: Context | None, attrs: dict[str, str | int]
) -> AbstractContextManager[trace.Span]:
    """The attempt's ``invoke_workflow`` span, made current. Without an SDK and without a recorded
    trace to carry on, the API's span would be the current one again, recording nothing: none is
    started (some 10 µs an attempt). With a recorded trace, the API's span still carries its context,
    so what the steps send (child runs) stays in the run's trace."""
    if not traced and parent is None:
        return contextlib.nullcontext(trace.get_current_span())
    return tracing.TRACER.start_as_current_span(tracing.INVOKE_WORKFLOW, context=parent, attributes=attrs)


async def _within(
    limit: float | None, deadlines: Deadlines, drive: Coroutine[Any, Any, Finished]
) -> Finished:
    """``drive`` under the action's ``attempt_timeout``, if it has one."""
    if limit is None:
        return await drive
    deadlines.attempt(limit)
    scope = asyncio.timeout(limit)
    try:
        async with scope:
            return await drive
    except TimeoutError:
        if scope.expired():
            raise AttemptTimeout(timeout_s=limit, node=deadlines.running()) from None
        raise


async def _drive(
    action: GraphAction,
    port: CheckpointPort,
    ctx: AttemptContext,
    span: trace.Span,
    payload: tuple[Any, Any],
    scope: AttemptScope,
    advance: _Advance,
) -> Finished:
    inputs, state = payload
    restored = _load(action, port, ctx, span, inputs)
    seq = restored.seq if restored is not None else 0
    if isinstance(restored, Restored) and restored.finished:
        log.info(
            "run %s: graph already finished in an earlier attempt; recording its saved output", ctx.run_id
        )
        return Finished(restored.output_json, "", restored.seq)
    requests: list[pg.GraphTaskRequest] | None = None
    if isinstance(restored, Restored):
        graph_inputs, graph_state = restored.inputs, restored.state
        assert restored.node_id is not None
        stack = prefix_fork_stack(restored.fork_stack, ctx.resume_seq)
        scope.journal.keyed_by = restored.records_fingerprint  # set on a checkpoint an upgrade moved
        requests = [pg.make_request(restored.node_id, restored.node_inputs, stack)]
    else:
        graph_inputs, graph_state = action.validate_inputs(inputs), action.initial_state(state)
    saver = _Saver(action, port, ctx, seq, scope, span)
    saver.prepare(graph_inputs)
    deps = action.deps() if action.deps is not None else None
    async with action.runnable.iter(
        state=graph_state, deps=deps, inputs=graph_inputs, infer_name=False
    ) as run:
        event: Any = await advance(run, requests or None)
        while not isinstance(event, pg.EndMarker):
            saver.boundary(run, event)
            await advance.unless_cancelled(saver.cancel_asked)
            event = await advance(run, event)
        return saver.finish(event.value)
