"""``current_run()``: what a step needs to know about the attempt running it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from reflexr_graph.errors import NotInRun


class RunningStep(Protocol):
    """The step execution running in this context (core/steps.py), as far as ``current_run`` needs it."""

    @property
    def step_key(self) -> str | None: ...


@dataclass(frozen=True)
class CurrentRun:
    """The running attempt, as seen from inside a step.

    ``idempotency_key`` is stable across every attempt and replay of the run: pass it to
    the services a step calls so that a step repeated after a crash does its side effect once.
    ``step_key`` is stable across attempts and replays of one step execution, and different
    for each branch of a map: derived from the idempotency key, the node id and the branch
    path. Pass it to payment and email APIs from a step that runs once per item. It is None
    outside a step.
    """

    run_id: str
    attempt: int
    idempotency_key: str
    graph: str
    tags: Mapping[str, str] = field(default_factory=dict)
    """The run's tags (``enqueue(..., tags={...})``): a step can route or label its work by them."""
    _step: RunningStep | None = field(default=None, repr=False, compare=False)
    """The step execution running (core/steps.py); None outside a step."""

    @property
    def step_key(self) -> str | None:
        # Derived on request, not for every step: most steps never ask.
        return self._step.step_key if self._step is not None else None


_current: ContextVar[CurrentRun | None] = ContextVar("reflexr_current_run", default=None)
_running: ContextVar[RunningStep | None] = ContextVar("reflexr_step", default=None)


def current_run() -> CurrentRun:
    """The run id, attempt number and idempotency key of the attempt running this step."""
    run = current_run_or_none()
    if run is None:
        raise NotInRun("current_run() was called outside a reflexr-graph attempt; call it from a step")
    return run


def current_run_or_none() -> CurrentRun | None:
    run = _current.get()
    step = _running.get()
    if run is None or step is None:
        return run
    return dataclasses.replace(run, _step=step)


def running_step() -> RunningStep | None:
    return _running.get()


T = TypeVar("T")


@contextmanager
def bound(var: ContextVar[T], value: T) -> Iterator[None]:
    """``var`` holds ``value`` in this context until the block ends, then what it held before."""
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


def step_running(step: RunningStep) -> AbstractContextManager[None]:
    """``step`` is the step execution running in this context while the block runs."""
    return bound(_running, step)


def running_as(run: CurrentRun) -> AbstractContextManager[None]:
    """``current_run()`` answers ``run`` while the block runs."""
    return bound(_current, run)
