"""``wait_for_signal`` and ``sleep``: a step that waits for a person or a time, holding no worker.

The first time a step waits, the store suspends its run as ``waiting`` (store/lua/wait.lua):
the attempt ends, its lease and message are let go, and it does not count toward
``max_attempts``. A signal, or the timer in the due set, queues the run again; the step runs
again from the checkpoint before it, its durable calls answer from their records, and this
time the wait returns. What the wait came to (the signal's value, or that its timer fired) is
recorded like a durable call's result, and its wake time is kept from the first time, so a
step that runs again never restarts its timer and never loses a signal it took.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any, TypeVar, overload

from pydantic import ValidationError

from reflexr_graph import clock
from reflexr_graph.core import invalid
from reflexr_graph.core.durable import codec_of
from reflexr_graph.core.steps import StepExecution, require_execution
from reflexr_graph.errors import RunFailure, SignalTimeout

T = TypeVar("T")

SLEEP_IN_PLACE_S = 1.0
"""A shorter sleep just sleeps: suspending and waking costs about as much as it saves."""


def _seconds(value: float | timedelta, what: str) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds != seconds or seconds < 0:  # NaN or negative
        raise ValueError(f"{what} must be a number of seconds >= 0 (or a timedelta)")
    return seconds


def _execution(call: str) -> StepExecution:
    return require_execution(call, "no run to suspend")


def _key(execution: StepExecution, signal: str, call: str) -> str:
    key = execution.wait_key(signal)
    if key is None:
        raise RunFailure(
            f"{call} in step {execution.node_id!r} cannot be kept across a suspension: the step's inputs "
            "cannot be written down, so nothing would tell this wait from another; give the step an "
            "input type that reads back as it was",
            reason="not_recordable",
            permanent=True,
        )
    return key


@overload
async def wait_for_signal(name: str, type_: type[T], *, timeout: float | timedelta | None = None) -> T: ...
@overload
async def wait_for_signal(name: str, type_: Any, *, timeout: float | timedelta | None = None) -> Any: ...
async def wait_for_signal(name: str, type_: Any, *, timeout: float | timedelta | None = None) -> Any:
    """Wait, holding no worker, until signal ``name`` is sent to the run; return its value as ``type_``.

    Call it from inside a step. When the signal was sent already (it waits in the run's
    mailbox), it returns at once. Otherwise the run is suspended as ``waiting``: the attempt
    ends here, without counting toward ``max_attempts``, and when the signal arrives the run is
    queued again and the step runs again from the checkpoint before it; durable calls it made
    before the wait return their records, and this call returns the value.

    ``timeout`` (seconds or a timedelta), counted from the first time the step got here:
    when it passes first, the run is woken and this raises :class:`SignalTimeout`, which the
    step may catch. ``name`` must be declared with ``GraphAction(graph, signals={name: type})``.
    """
    call = f"wait_for_signal({name!r})"
    execution = _execution(call)
    signals = execution.scope.signals
    if name not in signals:
        declared = ", ".join(repr(n) for n in signals) or "none"
        raise RunFailure(
            f"step {execution.node_id!r} waits for signal {name!r}, which its graph does not declare "
            f"(it declares: {declared}); declare it with GraphAction(graph, signals={{{name!r}: type}})",
            reason="undeclared_signal",
            permanent=True,
        )
    timeout_s = None if timeout is None else _seconds(timeout, "timeout")
    outcome = await wait_outcome(name, timeout_s, call)
    if "signal" not in outcome:
        raise SignalTimeout(signal=name, timeout_s=timeout_s or 0.0)
    try:
        return codec_of(type_).load(outcome["signal"])
    except ValidationError as exc:
        raise RunFailure(
            f"signal {name!r} does not validate as {getattr(type_, '__name__', repr(type_))} in step "
            f"{execution.node_id!r} ({invalid.describe(exc)}); declare the signal with the type the step "
            "waits for",
            reason="invalid_signal",
            permanent=True,
        ) from None


async def wait_outcome(signal: str, timeout_s: float | None, call: str) -> dict[str, Any]:
    """What the step's next wait for ``signal`` came to, suspending the run until it comes to
    something: ``{"signal": value}``, or ``{"due": true}`` when ``timeout_s`` passed first.

    ``signal`` is not checked against the graph's declared signals: wait_for_signal checks its
    own, and an external event's wait (ai/events.py) waits for ``event:<name>``.
    """
    execution = _execution(call)
    key = _key(execution, signal, call)
    record = execution.journal.get(key)
    if record is None:
        wake = None if timeout_s is None else clock.now_ms() + int(timeout_s * 1000)
        await execution.flush_emitted()  # before the run may suspend, which fences out any write after it
        record = execution.journal.wait(key, signal=signal, wake_at_ms=wake)
    outcome: dict[str, Any] = json.loads(record)
    return outcome


async def sleep(delay: float | timedelta) -> None:
    """A durable timer: wait ``delay`` (seconds or a timedelta) holding no worker.

    Call it from inside a step. The first time, the wake time is recorded and the run is
    suspended as ``waiting``; the fleet's reaper queues it again at that time, the step runs
    again from the checkpoint before it, and this call returns at once, as it does on any run
    of the step after that time: a step that runs again never restarts its timer. A delay
    under a second just sleeps in place.
    """
    seconds = _seconds(delay, "delay")
    if seconds < SLEEP_IN_PLACE_S:
        await asyncio.sleep(seconds)
        return
    execution = _execution(f"sleep({seconds:g})")
    journal = execution.journal
    key = _key(execution, "", "sleep()")
    # The wake time kept from an earlier run of this step: once passed, no round trip is needed.
    kept = journal.get(f"{key}|at")
    if journal.get(key) is not None or (kept is not None and int(kept) <= clock.now_ms()):
        return
    await execution.flush_emitted()  # before the run may suspend, which fences out any write after it
    journal.wait(key, signal="", wake_at_ms=clock.now_ms() + int(seconds * 1000))
