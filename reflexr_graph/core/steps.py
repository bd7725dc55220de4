"""What runs around every step of a durable attempt: its span, its execution key, its records.

Each step gets an ``execute_step {node}`` span under ``invoke_workflow`` (when an OpenTelemetry
SDK is installed: without one, no span is made). In a durable attempt (one with a scope,
attempt_scope.py, and its records journal, journal.py) the step also gets its *execution*: the
node, the branch path of its fork stack, and a digest of its inputs. ``durable_call`` keys its
records by it, and ``current_run().step_key`` derives from it. Both keys are derived on first
use, from the inputs as the step started (the JSON the boundary before it wrote down, when it
saved one: core/handoff.py).

A step inside a fork (a map or a broadcast, up to its join) records its result when it
returns, and a retry returns the recorded result without running the step, so the join
reduces the same values as before. Two conditions keep that sound:

- the result must read back as it was through the step's return annotation (the read-back
  rule of checkpoints, docs/design.md#the-read-back-rule); otherwise it is not recorded;
- the state must not change while the step runs: a recorded result would skip the
  mutation. The state is written down before and after the step; a step whose run
  coincided with a state change (its own, or a concurrent branch's) is not recorded.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any

from opentelemetry import trace
from pydantic import TypeAdapter, ValidationError

from reflexr_graph import clock
from reflexr_graph.core import metrics, pg, tracing
from reflexr_graph.core.attempt_scope import AttemptScope, current_scope
from reflexr_graph.core.context import running_step, step_running
from reflexr_graph.core.controls import NO_CONTROLS, StepCall, StepControls, controlled
from reflexr_graph.core.journal import RecordJournal, digest
from reflexr_graph.core.port import Lane
from reflexr_graph.core.readback import Codec, NotReadable
from reflexr_graph.errors import NotInRun

log = logging.getLogger(__name__)

ANY_CODEC = Codec(TypeAdapter(Any))


@dataclass(frozen=True)
class StepSpec:
    """What the runner needs to know of a graph's steps (built once, by its GraphAction)."""

    fingerprint: str
    state: Codec
    inputs: Callable[[str], Codec | None]
    """The codec of a node's input type, when known."""
    results: Mapping[str, Codec]
    """The codec of each step's return annotation, for the steps that have one."""
    controls: StepControls = NO_CONTROLS
    """The steps' timeouts and limits."""
    forked: frozenset[str] | None = None
    """The nodes a fork reaches: only their tasks can carry a fork in their fork stack. The others'
    branch path is '' without reading the stack. None: any node may (the stack is always read)."""


@dataclass(eq=False)
class StepExecution:
    """One execution of one step: the key its records are found by, and its calls so far.

    The key is derived when something asks for it (a durable call, a wait, a branch result,
    ``current_run().step_key``), from what the step started with: most steps never ask.
    """

    scope: AttemptScope
    """The attempt's scope (core/attempt_scope.py): its limits, stream and records journal."""
    node_id: str
    branch: str | None
    """The branch path (``fork:index`` for each real fork of the task's fork stack); None when
    the fork stack could not be read."""
    inputs_json: str | None
    """The step's inputs as it started, as JSON; None when they cannot be written down."""
    fingerprint: str
    calls: dict[tuple[str, str], int] = field(default_factory=dict)
    emitted: bool = False
    """The step emitted items (core/emit.py): they are written before it returns."""

    @property
    def journal(self) -> RecordJournal:
        """The attempt's records journal, which this execution's records are in."""
        return self.scope.journal

    async def flush_emitted(self) -> None:
        """The items the step emitted so far, written to the run's stream; nothing to do for a step
        that emitted none (core/emit.py)."""
        stream = self.scope.stream
        if self.emitted and stream is not None:
            await stream.flush()

    @property
    def path(self) -> str:
        return self.branch or ""

    @cached_property
    def prefix(self) -> str | None:
        """``node|path|digest``; None when the execution cannot be keyed (inputs not written down)."""
        if self.branch is None or self.inputs_json is None:
            return None
        return f"{self.node_id}|{self.branch or '-'}|{digest(self.fingerprint, self.inputs_json)}"

    @cached_property
    def step_key(self) -> str | None:
        """``current_run().step_key``: the idempotency key, the node id and the branch path."""
        branch = self.branch if self.branch is not None else "?"
        return digest(self.journal.ctx.idempotency_key, self.node_id, branch)

    def call_key(self, name: str) -> str | None:
        """The key of the next call of ``name`` in this execution (loops call it again and again)."""
        return self._next("c", name)

    def wait_key(self, name: str) -> str | None:
        """The key of the next wait for signal ``name`` ('' for a sleep) in this execution."""
        return self._next("w", name)

    def _next(self, kind: str, name: str) -> str | None:
        prefix = self.prefix
        if prefix is None:
            return None
        n = self.calls.get((kind, name), 0)
        self.calls[(kind, name)] = n + 1
        return f"{kind}|{prefix}|{name}|{n}"


def current_execution() -> StepExecution | None:
    """The step execution running in this context, or None outside a durable step."""
    step = running_step()
    return step if isinstance(step, StepExecution) else None


def require_execution(call: str, lacks: str) -> StepExecution:
    """The step execution running in this context; NotInRun naming ``call`` outside one (a plain
    ``graph.run()`` has ``lacks``, e.g. "no run to suspend")."""
    execution = current_execution()
    if execution is None:
        raise NotInRun(
            f"{call} was called outside a step of a reflexr-graph run; call it from a step of a graph a "
            f"worker runs (a plain graph.run() has {lacks})"
        )
    return execution


def branch_path(stack: tuple[pg.ForkStackItem, ...]) -> str:
    """``map:7`` for item 7 of fork ``map``; nested forks are joined with ``/``. Node-run ids are
    left out: an attempt numbers them afresh."""
    return "/".join(f"{item.fork_id}:{item.thread_index}" for item in stack if item.fork_id != pg.START_ID)


def _dump(codec: Codec | None, value: Any) -> str | None:
    if codec is None:
        return None
    try:
        return codec.dump(value)
    except NotReadable:
        return None


def wrapper(spec: StepSpec) -> pg.StepWrapper:
    """The ``with_wrapped_steps`` wrapper of a GraphAction: a span for each step, records in an attempt."""

    def wrap(node_id: str, step: StepCall) -> StepCall:
        call = controlled(spec.controls, node_id, step)
        name = tracing.step_span_name(node_id)
        span_attrs = {tracing.ATTR_NODE: node_id}

        async def run_step(ctx: Any) -> Any:
            started = time.perf_counter()
            try:
                scope = current_scope()
                traced = scope.traced if scope is not None else tracing.recording()
                if not traced:  # no SDK: a span would record nothing, and cost a context switch
                    if scope is None:
                        return await call(ctx)
                    return await _journaled(spec, scope, node_id, call, ctx, trace.INVALID_SPAN)
                with tracing.TRACER.start_as_current_span(name, attributes=span_attrs) as span:
                    if scope is None:
                        return await call(ctx)
                    return await _journaled(spec, scope, node_id, call, ctx, span)
            finally:
                metrics.STEP_DURATION.record(time.perf_counter() - started, span_attrs)

        return run_step

    return wrap


def _execution(spec: StepSpec, scope: AttemptScope, node_id: str, ctx: Any) -> StepExecution:
    if spec.forked is not None and node_id not in spec.forked:
        branch: str | None = ""  # no fork reaches this node: its stack holds none
    else:
        stack = pg.current_fork_stack()
        branch = branch_path(stack) if stack is not None else None
    inputs = pg.step_context_inputs(ctx)
    # The inputs as the step starts: the boundary before it wrote them down already, as a rule.
    inputs_json = scope.handoff.take(node_id, inputs)
    if inputs_json is None:
        inputs_json = _dump(spec.inputs(node_id) or ANY_CODEC, inputs)
    return StepExecution(scope, node_id, branch, inputs_json, scope.journal.record_fingerprint)


STEP_SCOPES: list[Callable[[], contextlib.AbstractContextManager[object]]] = []
"""Context managers entered around every durable step, registered by what builds on core without
it importing them: ``reflexr_graph.ai`` installs the wait that ``wait_for_external_event`` called
directly in a step uses (ai/events.py)."""


async def _journaled(
    spec: StepSpec, scope: AttemptScope, node_id: str, call: StepCall, ctx: Any, span: Any
) -> Any:
    execution = _execution(spec, scope, node_id, ctx)
    with step_running(execution):
        scope.in_flight.enter()
        scopes = contextlib.ExitStack()
        try:
            for step_scope in STEP_SCOPES:
                scopes.enter_context(step_scope())
            result_codec = spec.results.get(node_id)
            if execution.branch and result_codec is not None and execution.prefix is not None:
                flushed = partial(_flushed, execution, call)
                return await _branch(spec, execution, result_codec, flushed, ctx, span)
            return await _flushed(execution, call, ctx)
        finally:
            # A limited step's slots that its record did not carry go back now (core/limits.py); a
            # step that no fork reaches runs alone, and the boundary right after it carries them
            # instead.
            if execution.branch != "":
                scope.return_slots()
            scopes.close()
            scope.in_flight.leave()


async def _flushed(execution: StepExecution, call: StepCall, ctx: Any) -> Any:
    """``call``, then the items it emitted written: before its branch result is recorded and before
    the boundary after it, so a step that a retry will not run again has all its items in the stream."""
    try:
        output = await call(ctx)
    except BaseException:
        # A failed step's items are written too, before the failure is (which would fence
        # them out): a reader sees what it emitted, then the restart item of its retry.
        with contextlib.suppress(Exception):
            await execution.flush_emitted()
        raise
    await execution.flush_emitted()
    return output


async def _branch(
    spec: StepSpec, execution: StepExecution, codec: Codec, call: StepCall, ctx: Any, span: Any
) -> Any:
    """A branch step: its recorded result if there is one, else run it and record what it returned."""
    journal, tally = execution.journal, execution.scope.tally
    before = _dump(spec.state, ctx.state)
    key = f"b|{execution.prefix}|{digest(before or '')}"
    recorded = journal.get(key) if before is not None else None
    if recorded is not None:
        try:
            value = codec.load(json.loads(recorded))
        except (ValueError, ValidationError):
            value = _MISSING  # a type changed since: run the step again
        if value is not _MISSING:
            tally.reused_steps += 1
            span.set_attribute(tracing.ATTR_REUSED, True)
            span.add_event(tracing.EVENT_STEP_REUSED, {tracing.ATTR_NODE: execution.node_id})
            return value
    started_ms = clock.now_ms()
    output = await call(ctx)
    lane = Lane(execution.node_id, execution.branch or "", started_ms, clock.now_ms())
    if before is None or _dump(spec.state, ctx.state) != before:
        tally.note_once(
            execution.node_id,
            "branch step %s ran while the state changed (or the state cannot be written down), so its "
            "result is not recorded and a retry runs it again; keep branch steps pure",
        )
        return output
    try:
        journal.put(key, codec.dump(output, same_class=True), lane)
    except NotReadable as why:
        tally.note_once(
            execution.node_id,
            f"branch step %s returned a value that {why} through its return annotation, so it is not "
            "recorded and a retry runs it again",
        )
    return output


class _Missing:
    pass


_MISSING = _Missing()
