"""Waits: a step suspends its run for a signal or a timer, and a signal wakes it (G8).

A waiting run is only Redis data: its record with ``waiting_for`` and ``wake_at``, its
status-set entry, a due-set entry when a timer wakes it, and the memo record that keeps the
wait's wake time. No lease, no Celery message, no worker slot.
"""

from __future__ import annotations

from dataclasses import dataclass

from reflexr_graph import clock, errors
from reflexr_graph.core.port import AttemptContext, WaitResult
from reflexr_graph.model import SignalOutcome, Status
from reflexr_graph.store import asks, keys
from reflexr_graph.store.base import _fenced, _guess
from reflexr_graph.store.contracts import (
    CallRetried,
    CallRetriedArgs,
    SignalArgs,
    Signalled,
    SignalReply,
    WaitArgs,
    Waited,
    WaitReply,
)
from reflexr_graph.store.ops import Op, QueuedMessage, cmd, not_found, per_run
from reflexr_graph.store.records import text


@dataclass(frozen=True)
class SignalTarget:
    """What a sender reads of a run before it signals it: enough to validate the value (the
    graph's schema) and to build the message of the wake it will likely make."""

    status: Status
    graph: str
    priority: int
    waiting_for: str


def signal_target(run_id: str) -> Op[SignalTarget]:
    """Four fields of the run in one HMGET (not its whole record); RunNotFound for an unknown run."""
    found = yield cmd("hmget", keys.run(run_id), "status", "graph", "priority", "waiting_for")
    status, graph, priority, waiting_for = ("" if v is None else text(v) for v in found)
    if not status:
        raise not_found(run_id)
    return SignalTarget(Status(status), graph, int(priority or 0), waiting_for)


def send_signal(
    run_id: str,
    name: str,
    value_json: str,
    dispatch_grace_ms: int,
    message: QueuedMessage | None = None,
    by: str = "",
) -> Op[tuple[SignalOutcome, str]]:
    """Keep a signal for the run, and queue the run if it waits for it: one atomic script.

    ``message`` is the run's Celery message (ops.Envelope's reply) when the broker is the store's
    Redis: if the signal wakes the run, the script pushes it (SENT). Returns the outcome and the
    run's graph (for the message to send when QUEUED). RunNotFound for an unknown run,
    OperationRefused for a finished one, SignalPending when one of that name was sent and not
    taken yet. ``by`` (who sends it) is recorded on the run's ``signal_received`` event.
    """
    now = clock.now_ms()
    item = message.item if message else ""
    args = SignalArgs(name, value_json, now + dispatch_grace_ms, item, by).argv()
    extra = [message.queue_key] if message else []
    reply = SignalReply.parse(
        [text(v) for v in (yield from per_run("signal", run_id, run_id, now, args, extra))]
    )
    if reply.outcome is Signalled.MISSING:
        raise not_found(run_id)
    if reply.outcome is Signalled.REFUSED:
        status = reply.detail
        raise errors.OperationRefused(
            f"run {run_id} is {status}; only a run that has not finished takes signals", status=status
        )
    if reply.outcome is Signalled.DUPLICATE:
        raise errors.SignalPending(run_id=run_id, signal=name, status=reply.detail)
    woke = reply.outcome in (Signalled.QUEUED, Signalled.SENT)
    return SignalOutcome(reply.outcome.value), reply.detail if woke else ""


# -- the store's table (store/redis_store.py) ---------------------------------------------------


def wait(
    ctx: AttemptContext, *, field: str, signal: str, wake_at_ms: int | None, waited_ms: int = 0
) -> Op[WaitResult]:
    """Take the signal (or see the timer fired), or suspend the run: one EVALSHA, fenced by the token.

    ``field`` is the wait's record in the memo; ``wake_at_ms`` the wake time to keep when this
    wait has none yet (the first one kept wins, so a step that runs again does not restart
    its timer). ``signal`` is '' for a durable sleep. ``waited_ms`` is how long a step released
    to wait for a limit (``limit:<key>``) waited in place first: the run keeps when its wait
    began, and the grant that ends it counts the whole wait (store/lua/limit_acquire.lua).
    """
    args = WaitArgs(ctx.token, signal, field, wake_at_ms, waited_ms).argv()
    raw = yield from per_run("wait", ctx.run_id, _guess(ctx), clock.now_ms(), args)
    reply = WaitReply.parse([text(v) for v in raw])
    if reply.outcome is Waited.FENCED:
        raise _fenced(ctx, "wait")
    if reply.outcome is Waited.RECORDED:
        return WaitResult(record=reply.detail)
    if reply.outcome is Waited.CANCELLED:
        raise errors.CancelRequested(ctx.run_id, ended=True)  # the run ends rather than waits
    return WaitResult(record=None, wake_at_ms=int(reply.detail) if reply.detail else None)


def call_retried(
    ctx: AttemptContext, *, node: str, call: str, try_number: int, error_type: str, delay_ms: int
) -> Op[None]:
    """Tell the run's history that durable call ``call`` of step ``node`` failed its try
    ``try_number`` with an error of type ``error_type`` and is tried again in ``delay_ms``: one
    EVALSHA, fenced by the token (FencedOut when another attempt owns the run)."""
    args = CallRetriedArgs(ctx.token, node, call, try_number, error_type, delay_ms).argv()
    reply = yield from per_run("call_retried", ctx.run_id, _guess(ctx), clock.now_ms(), args)
    if CallRetried(text(reply)) is CallRetried.FENCED:
        raise _fenced(ctx, "call retry")


def signal(
    run_id: str, name: str, value_json: str, *, dispatch_grace_ms: int, message: QueuedMessage | None = None
) -> Op[tuple[SignalOutcome, str]]:
    """Keep a signal for the run, and queue the run if it waits for it; see :func:`send_signal`."""
    return send_signal(run_id, name, value_json, dispatch_grace_ms, message)


def open_event(ctx: AttemptContext, *, token: str, entry_json: str, name: str) -> Op[None]:
    """Keep an external event wait before its token is handed out (store/asks.py)."""
    return asks.open_wait(ctx.run_id, token, entry_json, name)


def settle_event(ctx: AttemptContext, *, token: str, answer_json: str) -> Op[str]:
    """Give the wait of ``token`` its one answer, unless it has one: the answer it holds."""
    _won, holding = yield from asks.settle(ctx.run_id, asks.token_digest(token), answer_json)
    return holding
