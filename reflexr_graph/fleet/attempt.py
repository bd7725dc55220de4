"""One claimed attempt: drive the graph under a lease heartbeat, then record the outcome.

Every write here is fenced by the claim's token, so an attempt that lost the run (to the
reaper, a duplicate delivery or a cancel) records nothing more (G3). Error messages and
tracebacks are stored, so they must not carry the values of state or inputs (G6):
pydantic's ValidationError, which quotes the values it rejected, is rewritten without them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import traceback
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from reflexr_graph.core.action import GraphAction
from reflexr_graph.core.driver import run_attempt
from reflexr_graph.core.port import AttemptContext
from reflexr_graph.errors import (
    AttemptCancelled,
    FencedOut,
    InvalidInputs,
    OutputNotSerializable,
    RunFailure,
    StoreUnavailable,
)
from reflexr_graph.fleet import observe, retry
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.heartbeat import Heartbeat
from reflexr_graph.model import Reason, Status
from reflexr_graph.store.records import Claim
from reflexr_graph.store.redis_store import RedisStore

log = logging.getLogger(__name__)

MAX_MESSAGE_LENGTH = 4000


# -- describing an error without private values ------------------------------------------------


def safe_message(exc: BaseException) -> str:
    """``str(exc)``, except that a ValidationError lists locations and reasons, not values."""
    if isinstance(exc, ValidationError):
        where = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
            for e in exc.errors(include_input=False, include_url=False, include_context=False)
        )
        message = f"{exc.error_count()} validation error(s) for {exc.title}: {where}"
    else:
        message = str(exc)
    if len(message) > MAX_MESSAGE_LENGTH:
        message = message[:MAX_MESSAGE_LENGTH] + "... (truncated)"
    return message


def safe_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` and the exceptions it chains, with :func:`safe_message` lines."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    parts: list[str] = []
    for i, item in enumerate(reversed(chain)):
        if i:
            parts.append("\nThe above exception led to the following one:\n\n")
        parts.append("Traceback (most recent call last):\n")
        parts.extend(traceback.format_tb(item.__traceback__))
        parts.append(f"{type(item).__module__}.{type(item).__qualname__}: {safe_message(item)}\n")
    return "".join(parts)


def classify(exc: BaseException) -> tuple[str, bool]:
    """The reason code of a failed attempt, and whether it is permanent."""
    if isinstance(exc, RunFailure):
        return exc.reason, exc.permanent
    if isinstance(exc, InvalidInputs):
        return Reason.INVALID_INPUTS.value, True
    if isinstance(exc, StoreUnavailable):
        return Reason.STORE_UNAVAILABLE.value, False
    return Reason.STEP_FAILED.value, False


# -- recording outcomes --------------------------------------------------------------------------


def record_failure(app: FleetApp, store: RedisStore, ctx: AttemptContext, exc: BaseException) -> None:
    """Record the failed attempt: retry after a backoff, or dead-letter the run."""
    settings = app.reflexr_settings
    reason, permanent = classify(exc)
    delay_ms = retry.backoff_ms(
        ctx.attempt, base_s=settings.retry_backoff_s, max_s=settings.retry_backoff_max_s
    )
    try:
        outcome = store.fail(
            ctx,
            error_type=type(exc).__name__,
            message=safe_message(exc),
            traceback=safe_traceback(exc),
            reason=reason,
            permanent=permanent,
            retry_delay_ms=delay_ms,
        )
    except FencedOut:
        observe.attempt_ended(ctx.graph, "fenced")
        log.info(
            "run %s attempt %d failed, but another attempt owns the run now; nothing recorded",
            ctx.run_id,
            ctx.attempt,
        )
        return
    except StoreUnavailable:
        log.warning(
            "run %s attempt %d failed (%s) and Redis is unreachable, so the failure is not recorded; "
            "the lease lapses and the reaper re-enqueues the run as an abandoned attempt",
            ctx.run_id,
            ctx.attempt,
            reason,
        )
        return
    observe.attempt_ended(ctx.graph, "failed")
    if outcome == "dead":
        observe.run_ended(ctx.graph, Status.DEAD, reason if permanent else Reason.MAX_ATTEMPTS.value)
        log.error(
            "run %s attempt %d failed (%s: %s) and the run is dead-lettered (%s); replay it with "
            "`reflexr-graph dlq replay %s` once the cause is fixed",
            ctx.run_id,
            ctx.attempt,
            reason,
            type(exc).__name__,
            "permanent failure" if permanent else "no attempts left",
            ctx.run_id,
        )
    else:
        log.warning(
            "run %s attempt %d failed (%s: %s); retrying in %.1fs from its last checkpoint",
            ctx.run_id,
            ctx.attempt,
            reason,
            type(exc).__name__,
            delay_ms / 1000,
        )


def record_success(
    app: FleetApp, store: RedisStore, ctx: AttemptContext, output: Any, final: tuple[str, int] | None = None
) -> None:
    """Record the output, with the finished checkpoint (``final``) in the same write when there is one."""
    try:
        output_json = json.dumps(output, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError):
        failure = OutputNotSerializable(
            f"graph {ctx.graph!r} finished, but its output is not plain JSON (NaN, Infinity or a "
            "non-JSON type); make the output type JSON-serializable"
        )
        record_failure(app, store, ctx, failure)
        return
    try:
        payload, seq = final or ("", 0)
        store.succeed(ctx, output_json, checkpoint=payload, seq=seq)
    except FencedOut:
        observe.attempt_ended(ctx.graph, "fenced")
        log.info(
            "run %s attempt %d finished, but another attempt owns the run now; output not recorded",
            ctx.run_id,
            ctx.attempt,
        )
        return
    except StoreUnavailable:
        log.warning(
            "run %s attempt %d finished but Redis is unreachable, so neither its output nor its final "
            "checkpoint is recorded; the reaper re-enqueues the run once its lease lapses, and the next "
            "attempt resumes from the last checkpoint saved, repeating only the step after it",
            ctx.run_id,
            ctx.attempt,
        )
        return
    observe.attempt_ended(ctx.graph, "succeeded")
    observe.run_ended(ctx.graph, Status.SUCCEEDED)
    log.info("run %s succeeded on attempt %d", ctx.run_id, ctx.attempt)


def release_on_shutdown(store: RedisStore, ctx: AttemptContext) -> None:
    """Hand the run back when the worker stops mid-attempt, so another worker claims it at once."""
    try:
        released = store.release(ctx)
    except Exception as exc:
        log.warning(
            "run %s attempt %d: worker stopping mid-attempt and the lease could not be released (%s); "
            "the reaper re-enqueues the run once its lease lapses",
            ctx.run_id,
            ctx.attempt,
            type(exc).__name__,
        )
        return
    if released:
        log.warning(
            "run %s attempt %d: worker stopping mid-attempt; lease released, the run is due now and "
            "resumes on another worker from its last checkpoint",
            ctx.run_id,
            ctx.attempt,
        )


# -- the store as one attempt sees it -------------------------------------------------------------


@dataclass
class AttemptPort:
    """The checkpoint port of one attempt: two round trips fewer per run than the bare store.

    The checkpoint came with the claim, so loading it costs nothing; the finished checkpoint
    is held back and written by ``succeed`` in the same script as the outcome.
    """

    store: RedisStore
    claimed: str | None
    final: tuple[str, int] | None = None

    def load_checkpoint(self, run_id: str) -> str | None:
        return self.claimed

    def save_checkpoint(self, ctx: AttemptContext, payload: str, *, seq: int, next_node: str | None) -> None:
        if next_node is None:
            self.final = (payload, seq)
            return
        self.store.save_checkpoint(ctx, payload, seq=seq, next_node=next_node)


# -- running ---------------------------------------------------------------------------------------

_runners: dict[int, asyncio.Runner] = {}


def _runner() -> asyncio.Runner:
    """This process's event loop, kept across attempts: building one per attempt was a tenth of a
    short run's cost. Keyed by pid, so a forked pool child never reuses its parent's loop."""
    pid = os.getpid()
    runner = _runners.get(pid)
    if runner is None:
        runner = _runners[pid] = asyncio.Runner()
    return runner


async def _drive(
    heartbeat: Heartbeat, action: GraphAction, port: AttemptPort, ctx: AttemptContext, inputs: Any, state: Any
) -> Any:
    task = asyncio.current_task()
    assert task is not None
    heartbeat.bind(asyncio.get_running_loop(), task)
    return await run_attempt(action, port, ctx, inputs=inputs, state=state)


def _payload(claim: Claim) -> tuple[Any, Any]:
    try:
        inputs = json.loads(claim.inputs_json)
        state = json.loads(claim.state_json) if claim.state_json else None
    except ValueError:
        raise InvalidInputs(
            f"run {claim.run_id}: its recorded inputs or state are not JSON; enqueue the run again"
        ) from None
    return inputs, state


def _run_and_record(app: FleetApp, store: RedisStore, action: GraphAction, claim: Claim) -> None:
    ctx = claim.context()
    heartbeat = Heartbeat(store, ctx, lease_ttl_s=app.reflexr_settings.lease_ttl_s)
    port = AttemptPort(store, claim.checkpoint)
    try:
        inputs, state = _payload(claim)
        with heartbeat:
            output = _runner().run(_drive(heartbeat, action, port, ctx, inputs, state))
    except FencedOut:
        observe.attempt_ended(ctx.graph, "fenced")
        log.info(
            "run %s attempt %d: another attempt took the run over; this one records nothing more",
            ctx.run_id,
            ctx.attempt,
        )
        return
    except (AttemptCancelled, asyncio.CancelledError) as exc:
        if heartbeat.lost is None and isinstance(exc, asyncio.CancelledError):
            record_failure(app, store, ctx, exc)  # a step cancelled itself: an ordinary failure
        else:
            observe.attempt_ended(ctx.graph, "fenced")
            log.info(
                "run %s attempt %d stopped: lease lost (%s); nothing more is recorded",
                ctx.run_id,
                ctx.attempt,
                heartbeat.lost,
            )
        return
    except Exception as exc:
        record_failure(app, store, ctx, exc)
        return
    record_success(app, store, ctx, output, port.final)


def run_claimed(app: FleetApp, store: RedisStore, claim: Claim) -> None:
    """Run one claimed attempt to its outcome; on worker shutdown, release the lease and re-raise."""
    ctx = claim.context()
    action = app.reflexr_registry.get(claim.graph)
    if action is None:
        failure = RunFailure(
            f"this worker has no graph named {claim.graph!r}; "
            "deploy a worker that loads it, then replay the run",
            reason=Reason.UNKNOWN_GRAPH.value,
            permanent=True,
        )
        record_failure(app, store, ctx, failure)
        return
    if claim.attempt == 1:
        observe.run_started(claim.graph)
    log.info(
        "run %s: attempt %d of %d started (graph %s)",
        ctx.run_id,
        ctx.attempt,
        claim.max_attempts,
        claim.graph,
    )
    try:
        _run_and_record(app, store, action, claim)
    except (SystemExit, KeyboardInterrupt):
        # Celery's soft shutdown terminates the pool child with a signal that billiard turns
        # into SystemExit. The message is requeued; releasing the lease lets the redelivery
        # claim the run now instead of being dropped as busy until the lease lapses.
        release_on_shutdown(store, ctx)
        raise
