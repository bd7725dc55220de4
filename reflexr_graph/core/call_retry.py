"""``CallRetry``: a durable call tried again inside its step, spending none of the run's attempts.

A provider's 503 is not the step's failure: failing the step for it spends one of the run's
attempts, so a handful of them dead-letter a run whose steps are sound, and they share that
budget with worker crashes. Temporal retries an activity under its own policy, DBOS a step; here
``durable_call(..., retry=CallRetry(...))`` tries the call again where it is, in the same
attempt, after a full-jitter backoff (core/backoff.py), or after the ``retry_after`` the error
asks for. The attempt's lease heartbeat runs while the step sleeps, and the step's timeout still
bounds the whole. Each retry is a ``call_retried`` event in the run's history and counted in
``reflexr.call.retries``. Once the tries run out, the last error fails the step as it would have
without a policy.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from reflexr_graph.core import backoff, metrics, tracing
from reflexr_graph.errors import (
    AttemptTimeout,
    ChildFailed,
    GraphDefinitionError,
    OutputNotSerializable,
    PayloadTooLarge,
    PayloadUnreadable,
    ReflexrError,
    RunFailure,
    StepTimeout,
    StreamFull,
)

T = TypeVar("T")

RetryAfter = Callable[[BaseException], float | None]
"""How long an error asks to wait before the next try (seconds), None when it asks nothing."""

_NEVER_RETRIED = (StepTimeout, AttemptTimeout, ChildFailed, OutputNotSerializable, StreamFull,
                  PayloadUnreadable, PayloadTooLarge)  # fmt: skip
"""Failures reflexr raises about the run, not about the call: trying the call again changes nothing."""


@dataclass(frozen=True)
class CallRetry:
    """How a failing ``durable_call`` is tried again inside its step.

    Args:
        max_attempts: tries of the call in all, the first included (1: no retry).
        backoff_s: the first retry's backoff cap; each retry doubles it (full jitter: the wait is
            uniform between 0 and the cap).
        backoff_max_s: the largest backoff cap, and the longest wait a ``retry_after`` may ask for
            in the step: an error asking for longer fails the step, and the run's own retry waits
            it out holding no worker (an attempt of the run is spent then).
        non_retryable: exception types that fail the step at once, subclasses included.

    An error carrying ``retry_after`` (seconds; ``RunFailure(..., retry_after=s)`` does) is tried
    again after that wait instead of the backoff. reflexr's own failures about the run (a step
    timeout, a permanent ``RunFailure``, a child that failed...) are never tried again.
    """

    max_attempts: int = 3
    backoff_s: float = 0.5
    backoff_max_s: float = 30.0
    non_retryable: tuple[type[BaseException], ...] = field(default=())

    def __post_init__(self) -> None:
        if not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise GraphDefinitionError(
                f"CallRetry(max_attempts=...) must be at least 1, got {self.max_attempts}"
            )
        for name in ("backoff_s", "backoff_max_s"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0 < value < math.inf:
                raise GraphDefinitionError(f"CallRetry({name}=...) must be a number of seconds > 0")
        if not isinstance(self.non_retryable, tuple) or not all(
            isinstance(t, type) and issubclass(t, BaseException) for t in self.non_retryable
        ):
            raise GraphDefinitionError("CallRetry(non_retryable=...) must be a tuple of exception types")

    def retryable(self, exc: Exception) -> bool:
        """Whether ``exc`` may be tried again under this policy (the tries left aside)."""
        if self.non_retryable and isinstance(exc, self.non_retryable):
            return False
        if isinstance(exc, RunFailure):
            return not exc.permanent and not isinstance(exc, _NEVER_RETRIED)
        return not isinstance(exc, ReflexrError)  # a control of the run: fenced, cancelled, not in a run

    def delay_s(self, failed_try: int, asked_s: float | None) -> float | None:
        """The wait before the try after ``failed_try`` (1-based): what the error asked for, else
        the backoff; None when the error asks for longer than ``backoff_max_s``."""
        if asked_s is not None:
            return asked_s if asked_s <= self.backoff_max_s else None
        return backoff.backoff_s(failed_try, base_s=self.backoff_s, max_s=self.backoff_max_s)


def retry_after_of(exc: BaseException) -> float | None:
    """The ``retry_after`` attribute an error carries, in seconds, when it is a number >= 0."""
    asked = getattr(exc, "retry_after", None)
    if isinstance(asked, int | float) and not isinstance(asked, bool) and 0 <= asked < math.inf:
        return float(asked)
    return None


Notify = Callable[[int, Exception, float], None]
"""Told of each retry before its wait: the try that failed, its error and the wait in seconds."""


async def with_retries(
    policy: CallRetry,
    call: Callable[[], Awaitable[T]],
    *,
    retry_after: RetryAfter,
    notify: Notify,
    labels: dict[str, str],
) -> T:
    """``call()``, tried again under ``policy`` while it raises what the policy retries."""
    failed = 0
    while True:
        try:
            return await call()
        except Exception as exc:
            failed += 1
            if failed >= policy.max_attempts or not policy.retryable(exc):
                raise
            delay = policy.delay_s(failed, retry_after(exc))
            if delay is None:
                raise  # a wait longer than the step may hold its worker: the run's retry waits it
            notify(failed, exc, delay)
            metrics.CALL_RETRIES.add(1, labels)
            await asyncio.sleep(delay)


def call_labels(graph: str, node: str, call: str) -> dict[str, str]:
    """The attributes of ``reflexr.call.retries``."""
    return {tracing.ATTR_GRAPH: graph, tracing.ATTR_NODE: node, tracing.ATTR_CALL: call}
