"""The attempt driver: one attempt of a run, stepped through ``Graph.iter``.

It resumes from the latest checkpoint when one validates, saves a checkpoint at every
safe boundary through the store port (one round trip each), and returns the graph's
output as JSON. It knows nothing of Redis or Celery.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from reflexr_graph.core import metrics, pg, tracing
from reflexr_graph.core.action import GraphAction
from reflexr_graph.core.checkpoint import Discarded, Restored, prefix_fork_stack
from reflexr_graph.core.context import CurrentRun, reset_current, set_current
from reflexr_graph.core.pg import Kind
from reflexr_graph.core.port import AttemptContext, CheckpointPort
from reflexr_graph.core.readback import NotReadable
from reflexr_graph.errors import OutputNotSerializable

log = logging.getLogger(__name__)


@dataclass
class _Saver:
    """Writes checkpoints for one attempt; the graph inputs are dumped once, not at every step."""

    action: GraphAction
    port: CheckpointPort
    ctx: AttemptContext
    seq: int
    span: trace.Span
    """The attempt's ``invoke_workflow`` span. Not the current span: a boundary is reached inside
    pydantic-graph's ``run graph`` span, when the graph emits it."""
    inputs_json: str = "null"
    inputs_ok: bool = True
    skipped: dict[str, int] = field(default_factory=dict)

    def prepare(self, inputs: Any) -> None:
        try:
            self.inputs_json = self.action.checkpoints.inputs.dump(inputs)
        except NotReadable:
            # The graph inputs would not restore as they were: no boundary of this attempt is saved.
            self.inputs_ok = False

    def boundary(self, run: pg.AnyRun, batch: Any) -> None:
        if not self.inputs_ok or not pg.is_quiescent(run, batch):
            return
        task = batch[0]
        if self.action.kinds.get(task.node_id) is Kind.END:
            # The end node runs no code: the finished checkpoint follows at once, so a save here
            # would protect nothing and cost a round trip.
            return
        stack = pg.task_fork_stack(task)
        codec = self.action.node_codec(task.node_id)
        if codec is None or not self.action.boundaries.is_safe(task.node_id, (f for f, _, _ in stack)):
            return
        try:
            state = self.action.checkpoints.state.dump(run.state)
            node_inputs = codec.dump(task.inputs, same_class=self.action.is_decision(task.node_id))
        except NotReadable as why:
            self.skipped[task.node_id] = self.skipped.get(task.node_id, 0) + 1
            log.debug(
                "boundary before %s not saved (%s); a retry resumes from the one before", task.node_id, why
            )
            return
        payload = self.action.checkpoints.encode(
            seq=self.seq + 1,
            state=state,
            inputs=self.inputs_json,
            next_task=(task.node_id, node_inputs, stack),
        )
        self._save(payload, task.node_id)

    def finish(self, run: pg.AnyRun, output: Any) -> Any:
        try:
            output_json = self.action.checkpoints.output.dump(output)
        except NotReadable as why:
            raise OutputNotSerializable(
                f"graph {self.action.name!r} finished, but its output cannot be recorded: it {why} "
                "through the graph's output type; make the output type serializable"
            ) from None
        # A finished checkpoint restores only the output, so it holds no state: a state that
        # would not read back must not stop the output from being kept.
        self._save(self.action.checkpoints.encode(seq=self.seq + 1, output=output_json, finished=True), None)
        return json.loads(output_json)

    def _save(self, payload: str, next_node: str | None) -> None:
        started = time.perf_counter()
        self.port.save_checkpoint(self.ctx, payload, seq=self.seq + 1, next_node=next_node)
        attrs = {tracing.ATTR_GRAPH: self.action.name}
        metrics.CHECKPOINT_SAVE.record(time.perf_counter() - started, attrs)
        metrics.CHECKPOINT_SIZE.record(len(payload), attrs)
        self.seq += 1
        self.span.set_attribute(tracing.ATTR_SEQ, self.seq)
        self.span.add_event(
            tracing.EVENT_SAVED, {tracing.ATTR_SEQ: self.seq, tracing.ATTR_NODE: next_node or "__end__"}
        )


def _load(
    action: GraphAction, port: CheckpointPort, ctx: AttemptContext, span: trace.Span
) -> Restored | Discarded | None:
    payload = port.load_checkpoint(ctx.run_id)
    if payload is None:
        return None
    restored = action.checkpoints.decode(payload)
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
    action: GraphAction, port: CheckpointPort, ctx: AttemptContext, *, inputs: Any, state: Any = None
) -> Any:
    """Run one attempt of a run and return the graph's output, as JSON-able data.

    Raises whatever a step raised (the caller decides on a retry), ``InvalidInputs`` for
    inputs or state that do not validate, ``OutputNotSerializable`` for an output that
    cannot be recorded, and ``FencedOut`` when another attempt took the run over.
    """
    attrs: dict[str, str | int] = {
        tracing.ATTR_RUN_ID: ctx.run_id,
        tracing.ATTR_GRAPH: action.name,
        tracing.ATTR_ATTEMPT: ctx.attempt,
    }
    parent = tracing.run_trace_parent(ctx.trace_context)
    with tracing.TRACER.start_as_current_span(
        tracing.INVOKE_WORKFLOW, context=parent, attributes=attrs
    ) as span:
        token = set_current(CurrentRun(ctx.run_id, ctx.attempt, ctx.idempotency_key, action.name))
        try:
            return await _drive(action, port, ctx, span, inputs, state)
        finally:
            reset_current(token)


async def _drive(
    action: GraphAction, port: CheckpointPort, ctx: AttemptContext, span: trace.Span, inputs: Any, state: Any
) -> Any:
    restored = _load(action, port, ctx, span)
    seq = restored.seq if restored is not None else 0
    if isinstance(restored, Restored) and restored.finished:
        log.info(
            "run %s: graph already finished in an earlier attempt; recording its saved output", ctx.run_id
        )
        return restored.output_json
    requests: list[pg.GraphTaskRequest] | None = None
    if isinstance(restored, Restored):
        graph_inputs, graph_state = restored.inputs, restored.state
        assert restored.node_id is not None
        stack = prefix_fork_stack(restored.fork_stack, ctx.resume_seq)
        requests = [pg.make_request(restored.node_id, restored.node_inputs, stack)]
    else:
        graph_inputs, graph_state = action.validate_inputs(inputs), action.initial_state(state)
    saver = _Saver(action, port, ctx, seq, span)
    saver.prepare(graph_inputs)
    deps = action.deps() if action.deps is not None else None
    async with action.runnable.iter(
        state=graph_state, deps=deps, inputs=graph_inputs, infer_name=False
    ) as run:
        event: Any = await run.next(requests) if requests else await run.next()
        while not isinstance(event, pg.EndMarker):
            saver.boundary(run, event)
            event = await run.next(event)
        return saver.finish(run, event.value)
