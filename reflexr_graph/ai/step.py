"""What a durable agent needs to know of the step it runs in: whether there is one, and its runs there."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from reflexr_graph.core.context import current_run_or_none
from reflexr_graph.core.steps import StepExecution, current_execution
from reflexr_graph.errors import DurableAgentError

_RUN_ID_NAMESPACE = uuid.UUID("5f0c6d2e-3b7a-4e59-9d1c-8a4f2e6b7c10")

_running: dict[int, tuple[StepExecution, set[str]]] = {}
"""Per step execution (by id; the entry holds it, so the id is not reused while it is there): the
durable agents with a run in progress in it. An entry goes when its last run ends."""


def in_step() -> bool:
    """Whether this code runs inside a step of a durable attempt, where durable calls are recorded."""
    return current_execution() is not None


def stable_run_id(agent_name: str) -> str | None:
    """The same pydantic-ai run id on every attempt for the n-th run of this agent in this step.

    None (pydantic-ai then draws a random one) outside a step, and where the step's calls are
    not recorded either.
    """
    execution = current_execution()
    run = current_run_or_none()
    if execution is None or run is None or run.step_key is None:
        return None
    # The n-th run of the agent in this execution, counted as durable_call counts a name's calls.
    key = execution.call_key(f"{agent_name}.run")
    if key is None:
        return None
    return str(uuid.uuid5(_RUN_ID_NAMESPACE, f"{run.step_key}|{key}"))


@contextmanager
def one_run_at_a_time(agent_name: str) -> Iterator[None]:
    """Refuse a second run of the same durable agent while one is running in this step.

    Records are matched by name and order, and two runs at once would interleave their model
    requests in an order a retry does not reproduce: a run could be answered with the other's
    recorded responses.
    """
    execution = current_execution()
    if execution is None:
        yield
        return
    _, running = _running.setdefault(id(execution), (execution, set()))
    if agent_name in running:
        raise DurableAgentError(
            f"durable agent {agent_name!r} was run twice at once in step {execution.node_id!r}: its "
            "recorded calls are matched by order, which two concurrent runs do not keep on a retry; run "
            "them one after another, or give each its own durable_agent(agent, name=...)"
        )
    running.add(agent_name)
    try:
        yield
    finally:
        running.discard(agent_name)
        if not running:
            del _running[id(execution)]
