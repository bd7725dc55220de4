"""Retry policies: how many attempts, how long to wait between them, which errors never retry.

A policy is declared for the whole action (``GraphAction(retry=RetryPolicy(...))``) and may
be refined per node (``step_retries={"node": RetryPolicy(...)}``); a node's policy takes
each field it leaves unset from the action's. What a failure comes to is decided here,
sans-IO: the fleet records it (fleet/recorder.py).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from reflexr_graph.errors import GraphDefinitionError, RunFailure

TIMEOUT_REASONS = frozenset({"step_timeout", "attempt_timeout"})
"""Failures whose dead letter keeps their own reason when the attempts run out: ``max_attempts``
would not say that the cure is a faster step or a longer timeout."""
NON_RETRYABLE = "non_retryable"
MAX_ATTEMPTS = "max_attempts"
DEFAULT_MAX_ATTEMPTS = 5
"""``REFLEXR_MAX_ATTEMPTS`` when it is not set: the budget of a graph whose action sets none."""


@dataclass(frozen=True)
class RetryPolicy:
    """How a failing run is retried.

    Args:
        max_attempts: attempts before the run is dead-lettered. On the action it sets the run's
            budget (as ``GraphAction(max_attempts=...)``); on a node, a failure of that node
            dead-letters the run once the run has used that many attempts.
        backoff_s: the first retry's backoff cap; each retry doubles it (full jitter).
        backoff_max_s: the largest backoff cap.
        non_retryable: exception types that dead-letter the run at once (reason
            ``non_retryable``), subclasses included.
    """

    max_attempts: int | None = None
    backoff_s: float | None = None
    backoff_max_s: float | None = None
    non_retryable: tuple[type[BaseException], ...] = field(default=())

    def __post_init__(self) -> None:
        if self.max_attempts is not None and self.max_attempts < 1:
            raise GraphDefinitionError(
                f"RetryPolicy(max_attempts=...) must be at least 1, got {self.max_attempts}"
            )
        for name in ("backoff_s", "backoff_max_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise GraphDefinitionError(f"RetryPolicy({name}=...) must be a number of seconds > 0")
        if not isinstance(self.non_retryable, tuple) or not all(
            isinstance(t, type) and issubclass(t, BaseException) for t in self.non_retryable
        ):
            raise GraphDefinitionError("RetryPolicy(non_retryable=...) must be a tuple of exception types")

    def under(self, base: RetryPolicy) -> RetryPolicy:
        """This policy, with each field it leaves unset taken from ``base``."""
        return RetryPolicy(
            max_attempts=self.max_attempts if self.max_attempts is not None else base.max_attempts,
            backoff_s=self.backoff_s if self.backoff_s is not None else base.backoff_s,
            backoff_max_s=self.backoff_max_s if self.backoff_max_s is not None else base.backoff_max_s,
            non_retryable=self.non_retryable + base.non_retryable,
        )


NO_POLICY = RetryPolicy()


@dataclass(frozen=True)
class Verdict:
    """What a failure comes to: its recorded reason, whether it is final, the retry's delay (None:
    the policy's backoff, drawn by the caller)."""

    reason: str
    permanent: bool
    retry_after_s: float | None = None


def judge(
    exc: BaseException, *, reason: str, permanent: bool, policy: RetryPolicy, counted: int, run_max: int
) -> Verdict:
    """The verdict on failure ``exc`` (already classified as ``reason``/``permanent``) under ``policy``.

    ``counted`` is how many attempts of the run counted so far, this one included; ``run_max`` is
    the run's own ``max_attempts``, which the store enforces for every failure.
    """
    if permanent:
        return Verdict(reason, True)
    if policy.non_retryable and isinstance(exc, policy.non_retryable):
        return Verdict(NON_RETRYABLE, True)
    limit = min(run_max, policy.max_attempts) if policy.max_attempts is not None else run_max
    if counted >= limit:
        # The store would say max_attempts; a timeout says more, and a node's own budget must be
        # applied here, since the store only knows the run's.
        if reason in TIMEOUT_REASONS:
            return Verdict(reason, True)
        if limit < run_max:
            return Verdict(MAX_ATTEMPTS, True)
    retry_after = exc.retry_after if isinstance(exc, RunFailure) else None
    return Verdict(reason, False, retry_after)


_NODE_ATTR = "__reflexr_node__"


def tag_node(exc: BaseException, node_id: str) -> None:
    """Remember on ``exc`` the node it escaped from (the innermost one), for the node's policy."""
    if getattr(exc, _NODE_ATTR, None) is None:
        # An exception type without a __dict__ cannot be tagged: the action's policy applies.
        with contextlib.suppress(AttributeError, TypeError):
            setattr(exc, _NODE_ATTR, node_id)


def failed_node(exc: BaseException) -> str | None:
    """The node ``exc`` escaped from, when the step wrapper saw it."""
    node: Any = getattr(exc, _NODE_ATTR, None)
    return node if isinstance(node, str) else None
