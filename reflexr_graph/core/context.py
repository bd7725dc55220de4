"""``current_run()``: what a step needs to know about the attempt running it."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from reflexr_graph.errors import NotInRun


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
    step_key: str | None = None


_current: ContextVar[CurrentRun | None] = ContextVar("reflexr_current_run", default=None)


def current_run() -> CurrentRun:
    """The run id, attempt number and idempotency key of the attempt running this step."""
    run = _current.get()
    if run is None:
        raise NotInRun("current_run() was called outside a reflexr-graph attempt; call it from a step")
    return run


def current_run_or_none() -> CurrentRun | None:
    return _current.get()


def set_current(run: CurrentRun | None) -> object:
    return _current.set(run)


def reset_current(token: object) -> None:
    _current.reset(token)  # type: ignore[arg-type]
