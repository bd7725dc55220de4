"""``run_child``, ``start_child`` and ``wait_child``: a step runs other runs and waits for them,
holding no worker.

A child is made once per step execution: its record is keyed like a durable call's (journal.py),
and the store makes it with an idempotency key named after the parent run and that record
(store/children.py), so a retried step finds the same child, and a crash between making it and
recording it makes no second one. The step then waits as a signal wait does: the run is
suspended as ``waiting`` (``waiting_for`` is ``child:<id>``, or ``children:<n>``), and the end of
its last child queues it again. The step runs again from the checkpoint before it, its durable
calls and its children answer from their records, and this time the wait returns each child's
output, read from the child's record. ``asyncio.gather`` over several ``run_child`` calls makes
every child first, then waits once for all of them.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pydantic_core
from pydantic import TypeAdapter

from reflexr_graph.core.context import current_run
from reflexr_graph.core.port import AttemptContext
from reflexr_graph.core.steps import StepExecution, require_execution
from reflexr_graph.errors import ChildFailed, NotInRun, RunFailure, Suspended
from reflexr_graph.model import CHILD_WAIT_PREFIX, CHILDREN_WAIT_PREFIX

GATHER_YIELDS = 3
"""How many times the first waiter gives way before it waits: each call of an ``asyncio.gather``
makes its child in its first turn, so they all join the one wait."""


class ChildPort(Protocol):
    """What the attempt's store does for child runs (fleet/attempt_port.py)."""

    def make_child(
        self, ctx: AttemptContext, *, graph: str, inputs_json: str, tags: Mapping[str, str], record: str
    ) -> str: ...

    def wait_children(
        self, ctx: AttemptContext, children: Sequence[str], waiting_for: str
    ) -> list[str] | None: ...

    def child_output(self, child_id: str) -> str | None: ...


@dataclass
class _Batch:
    """The children one wait is for: every call that joined before the wait began."""

    children: list[str] = field(default_factory=list)
    done: asyncio.Future[dict[str, str]] | None = None


_batches: weakref.WeakKeyDictionary[StepExecution, _Batch] = weakref.WeakKeyDictionary()


def _execution(call: str) -> StepExecution:
    return require_execution(call, "no run to be the parent")


def _port(execution: StepExecution) -> ChildPort:
    port = execution.journal.port
    if not hasattr(port, "make_child"):
        raise NotInRun("child runs need a store that keeps them; this attempt's store keeps none")
    return port  # type: ignore[return-value]


def _graph_name(graph: Any) -> str:
    name = graph if isinstance(graph, str) else getattr(graph, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError("run_child takes a graph's name, or a GraphAction")
    return name


async def start_child(
    graph: Any, inputs: Any, *, key: str | None = None, tags: Mapping[str, str] | None = None
) -> str:
    """Make a child run of ``graph`` (its name, or its GraphAction) with ``inputs``; its run id.

    Call it from inside a step. The child is made once per step execution, keyed like a durable
    call by ``key`` (default: the graph's name) and how many times that key was used in this
    execution: a retried step gets the same child back. It inherits the run's tags, merged with
    ``tags``. It does not wait: :func:`wait_child` does.
    """
    name = _graph_name(graph)
    execution = _execution(f"start_child({name!r})")
    record = execution.call_key(f"child:{key or name}")
    if record is None:
        raise RunFailure(
            f"start_child({name!r}) in step {execution.node_id!r} cannot be kept across a retry: the "
            "step's inputs cannot be written down, so nothing would tell this child from another; give "
            "the step an input type that reads back as it was",
            reason="not_recordable",
            permanent=True,
        )
    journal = execution.journal
    recorded = journal.get(record)
    if recorded is not None:
        execution.scope.tally.reused_calls += 1
        return str(json.loads(recorded))
    merged = {**current_run().tags, **(tags or {})}
    try:
        inputs_json = pydantic_core.to_json(inputs).decode()
    except pydantic_core.PydanticSerializationError:
        raise RunFailure(
            f"start_child({name!r}) in step {execution.node_id!r} got inputs that cannot be written as "
            "JSON; pass a pydantic model, a dataclass or JSON data",
            reason="not_recordable",
            permanent=True,
        ) from None
    child = _port(execution).make_child(
        journal.ctx, graph=name, inputs_json=inputs_json, tags=merged, record=record
    )
    journal.records[record] = json.dumps(child)  # the script that made the child recorded it
    return child


async def wait_child(run_id: str, *, output_type: Any = None) -> Any:
    """Wait, holding no worker, until child run ``run_id`` ends; return its output.

    The output is JSON data, or validated as ``output_type`` when given (a pydantic model, a
    dataclass, ``list[int]``...). Call it from inside a step. A child that ended dead or
    cancelled raises :class:`ChildFailed`. Until it ends, the run is suspended as ``waiting``,
    and the step runs again once it did. Several waits given way to together
    (``asyncio.gather``) suspend the run once for all.
    """
    execution = _execution(f"wait_child({run_id!r})")
    outcomes = await _join(execution, run_id)
    outcome = json.loads(outcomes[run_id])
    if outcome["status"] != "succeeded":
        raise ChildFailed(child_run_id=run_id, status=outcome["status"], reason=outcome.get("reason"))
    output = _port(execution).child_output(run_id)
    data = None if output is None else json.loads(output)
    return data if output_type is None else TypeAdapter(output_type).validate_python(data)


async def run_child(
    graph: Any, inputs: Any, *, key: str | None = None, tags: Mapping[str, str] | None = None
) -> Any:
    """Run a child run of ``graph`` with ``inputs`` and return its output: :func:`start_child`,
    then :func:`wait_child`. :class:`ChildFailed` when it ends dead or cancelled.

    Given the child's GraphAction, the output is validated as the graph's output type; given
    its name, it is JSON data."""
    child = await start_child(graph, inputs, key=key, tags=tags)
    adapter = getattr(graph, "output_adapter", None)
    output = await wait_child(child)
    return output if adapter is None else adapter.validate_python(output)


async def _join(execution: StepExecution, child: str) -> dict[str, str]:
    """The outcomes of the batch ``child`` joins: the first to join waits for all of them."""
    batch = _batches.get(execution)
    if batch is not None and batch.done is not None and not batch.done.done():
        batch.children.append(child)
        return await asyncio.shield(batch.done)
    batch = _Batch([child], asyncio.get_running_loop().create_future())
    _batches[execution] = batch
    for _ in range(GATHER_YIELDS):
        await asyncio.sleep(0)
    assert batch.done is not None
    try:
        outcomes = _wait(execution, batch.children)
    except BaseException as exc:
        batch.done.set_exception(exc)
        batch.done.exception()  # retrieved here: the calls that joined raise it themselves
        raise
    batch.done.set_result(outcomes)
    return outcomes


def _wait(execution: StepExecution, children: list[str]) -> dict[str, str]:
    unique = list(dict.fromkeys(children))
    one = len(unique) == 1
    waiting_for = f"{CHILD_WAIT_PREFIX}{unique[0]}" if one else f"{CHILDREN_WAIT_PREFIX}{len(unique)}"
    ended = _port(execution).wait_children(execution.journal.ctx, unique, waiting_for)
    if ended is None:
        raise Suspended(signal=waiting_for, wake_at_ms=None)
    return dict(zip(unique, ended, strict=True))
