"""What runs around a step's own code to control its cost: its limit, its timeout.

The limit is taken first (core/limits.py), so a step's timeout counts only its own run, not
its wait for a slot; then a step with a timeout runs under ``asyncio.timeout``, and in a
durable attempt its deadline is also left where the heartbeat thread can see it
(core/deadlines.py), for a step that blocks the loop. A step without a timeout, in an attempt
without one, runs bare: no timeout scope, no deadline entry. An exception leaving the step
is tagged with its node, so the node's retry policy applies to it (core/policy.py).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reflexr_graph.core.attempt_scope import AttemptScope, current_scope
from reflexr_graph.core.limits import Limit, WaitTooLong, holding, wake_at_ms
from reflexr_graph.core.policy import tag_node
from reflexr_graph.errors import GraphDefinitionError, StepTimeout
from reflexr_graph.model import LIMIT_WAIT_PREFIX

StepCall = Callable[[Any], Awaitable[Any]]


@dataclass(frozen=True)
class StepControls:
    """A graph's step timeouts and limits, checked once when its GraphAction is built."""

    timeouts: Mapping[str, float] = field(default_factory=dict)
    default_timeout: float | None = None
    limits: Mapping[str, Limit] = field(default_factory=dict)

    def timeout_for(self, node_id: str) -> float | None:
        return self.timeouts.get(node_id, self.default_timeout)


NO_CONTROLS = StepControls()


def seconds_or_none(value: float | None, what: str) -> float | None:
    if value is not None and not (isinstance(value, (int, float)) and value > 0):
        raise GraphDefinitionError(f"{what} must be a number of seconds > 0, or None")
    return None if value is None else float(value)


async def _timed(
    scope: AttemptScope | None, node_id: str, timeout: float | None, call: StepCall, ctx: Any
) -> Any:
    # A step is registered when some deadline could catch it: its own timeout (the heartbeat
    # thread then sees it blocked past it), or the attempt's (which names the step it caught).
    # Otherwise it takes neither the deadlines lock nor a timeout scope.
    watch = scope is not None and (timeout is not None or scope.deadlines.attempt_timed)
    if not watch and timeout is None:
        return await call(ctx)
    handle = scope.deadlines.start(node_id, timeout) if scope is not None and watch else None
    try:
        if timeout is None:
            return await call(ctx)
        return await _under_timeout(node_id, timeout, call, ctx)
    finally:
        if scope is not None and handle is not None:
            scope.deadlines.end(handle)


async def _under_timeout(node_id: str, timeout: float, call: StepCall, ctx: Any) -> Any:
    scope = asyncio.timeout(timeout)
    try:
        async with scope:
            return await call(ctx)
    except TimeoutError:
        if scope.expired():
            raise StepTimeout(node=node_id, timeout_s=timeout) from None
        raise  # the step's own TimeoutError


async def _limited(
    scope: AttemptScope, node_id: str, limit: Limit, timeout: float | None, call: StepCall, ctx: Any
) -> Any:
    assert scope.limiter is not None
    try:
        async with holding(scope.limiter, limit, ctx, node_id):  # counts the step as running
            return await _timed(scope, node_id, timeout, call, ctx)
    except WaitTooLong as wait:
        # A fresh record key each time: a run woken to try again must not find this wait over.
        key = f"l|{node_id}|r{scope.journal.ctx.resume_seq}|{uuid.uuid4().hex[:12]}"
        signal = f"{LIMIT_WAIT_PREFIX}{wait.key}"
        scope.journal.wait(key, signal=signal, wake_at_ms=wake_at_ms(wait), waited_ms=wait.waited_ms)
        raise AssertionError("unreachable: a limit wait always suspends") from None


async def _running(
    scope: AttemptScope | None, node_id: str, timeout: float | None, call: StepCall, ctx: Any
) -> Any:
    """The step's own run, counted as the attempt's work while it lasts (core/limits.py: bound_s)."""
    limiter = scope.limiter if scope is not None else None
    if limiter is None:
        return await _timed(scope, node_id, timeout, call, ctx)
    limiter.running += 1
    try:
        return await _timed(scope, node_id, timeout, call, ctx)
    finally:
        limiter.running -= 1


def controlled(controls: StepControls, node_id: str, call: StepCall) -> StepCall:
    """``call`` under the node's limit and timeout; the call itself when it has neither."""
    limit = controls.limits.get(node_id)
    timeout = controls.timeout_for(node_id)

    async def run(ctx: Any) -> Any:
        scope = current_scope()
        try:
            if limit is not None and scope is not None and scope.limiter is not None:
                return await _limited(scope, node_id, limit, timeout, call, ctx)
            if timeout is None and (scope is None or not scope.deadlines.attempt_timed):
                # No deadline can catch the step (the common case): it runs here, without the two
                # frames of _running and _timed, counted as the attempt's work as _running counts it.
                limiter = scope.limiter if scope is not None else None
                if limiter is None:
                    return await call(ctx)
                limiter.running += 1
                try:
                    return await call(ctx)
                finally:
                    limiter.running -= 1
            return await _running(scope, node_id, timeout, call, ctx)
        except Exception as exc:
            tag_node(exc, node_id)
            raise

    return run
