"""What runs around every step of a durable attempt: its span, its execution key, its records.

Each step gets an ``execute_step {node}`` span under ``invoke_workflow``. In a durable
attempt (one with a journal, see journal.py) the step also gets its *execution*: the node,
the branch path of its fork stack, and a digest of its inputs. ``durable_call`` keys its
records by it, and ``current_run().step_key`` derives from it.

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

import dataclasses
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from reflexr_graph.core import metrics, pg, tracing
from reflexr_graph.core.context import current_run_or_none, reset_current, set_current
from reflexr_graph.core.controls import NO_CONTROLS, StepCall, StepControls, controlled
from reflexr_graph.core.journal import Journal, current_journal, digest
from reflexr_graph.core.readback import Codec, NotReadable

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


@dataclass
class StepExecution:
    """One execution of one step: the key its records are found by, and its calls so far."""

    journal: Journal
    node_id: str
    path: str
    """The branch path: ``fork:index`` for each real fork of the task's fork stack."""
    prefix: str | None
    """``node|path|digest``; None when the execution cannot be keyed (inputs not written down)."""
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)

    def call_key(self, name: str) -> str | None:
        """The key of the next call of ``name`` in this execution (loops call it again and again)."""
        return self._next("c", name)

    def wait_key(self, name: str) -> str | None:
        """The key of the next wait for signal ``name`` ('' for a sleep) in this execution."""
        return self._next("w", name)

    def _next(self, kind: str, name: str) -> str | None:
        if self.prefix is None:
            return None
        n = self.calls[(kind, name)]
        self.calls[(kind, name)] += 1
        return f"{kind}|{self.prefix}|{name}|{n}"


_execution: ContextVar[StepExecution | None] = ContextVar("reflexr_step_execution", default=None)


def current_execution() -> StepExecution | None:
    """The step execution running in this context, or None outside a durable step."""
    return _execution.get()


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

        async def run_step(ctx: Any) -> Any:
            started = time.perf_counter()
            name = tracing.step_span_name(node_id)
            try:
                with tracing.TRACER.start_as_current_span(
                    name, attributes={tracing.ATTR_NODE: node_id}
                ) as span:
                    journal = current_journal()
                    if journal is None:
                        return await call(ctx)
                    return await _journaled(spec, journal, node_id, call, ctx, span)
            finally:
                metrics.STEP_DURATION.record(time.perf_counter() - started, {tracing.ATTR_NODE: node_id})

        return run_step

    return wrap


async def _journaled(
    spec: StepSpec, journal: Journal, node_id: str, call: StepCall, ctx: Any, span: Any
) -> Any:
    stack = pg.current_fork_stack()
    path = branch_path(stack) if stack is not None else None
    inputs_json = _dump(spec.inputs(node_id) or ANY_CODEC, pg.step_context_inputs(ctx))
    prefix = None
    if path is not None and inputs_json is not None:
        prefix = f"{node_id}|{path or '-'}|{digest(spec.fingerprint, inputs_json)}"
    execution = StepExecution(journal, node_id, path or "", prefix)
    run = current_run_or_none()
    run_token = None
    if run is not None:
        step_key = digest(run.idempotency_key, node_id, path if path is not None else "?")
        run_token = set_current(dataclasses.replace(run, step_key=step_key))
    token = _execution.set(execution)
    journal.in_flight.enter()
    try:
        result_codec = spec.results.get(node_id)
        if path and prefix is not None and result_codec is not None:
            return await _branch(spec, execution, result_codec, call, ctx, span)
        return await call(ctx)
    finally:
        journal.in_flight.leave()
        _execution.reset(token)
        if run_token is not None:
            reset_current(run_token)


async def _branch(
    spec: StepSpec, execution: StepExecution, codec: Codec, call: StepCall, ctx: Any, span: Any
) -> Any:
    """A branch step: its recorded result if there is one, else run it and record what it returned."""
    journal = execution.journal
    before = _dump(spec.state, ctx.state)
    key = f"b|{execution.prefix}|{digest(before or '')}"
    recorded = journal.get(key) if before is not None else None
    if recorded is not None:
        try:
            value = codec.load(json.loads(recorded))
        except (ValueError, ValidationError):
            value = _MISSING  # a type changed since: run the step again
        if value is not _MISSING:
            journal.tally.reused_steps += 1
            span.set_attribute(tracing.ATTR_REUSED, True)
            span.add_event(tracing.EVENT_STEP_REUSED, {tracing.ATTR_NODE: execution.node_id})
            return value
    output = await call(ctx)
    if before is None or _dump(spec.state, ctx.state) != before:
        journal.tally.note_once(
            execution.node_id,
            "branch step %s ran while the state changed (or the state cannot be written down), so its "
            "result is not recorded and a retry runs it again; keep branch steps pure",
        )
        return output
    try:
        journal.put(key, codec.dump(output, same_class=True))
    except NotReadable as why:
        journal.tally.note_once(
            execution.node_id,
            f"branch step %s returned a value that {why} through its return annotation, so it is not "
            "recorded and a retry runs it again",
        )
    return output


class _Missing:
    pass


_MISSING = _Missing()
