"""One claimed attempt: drive the graph under a lease heartbeat, then record the outcome.

Every write here is fenced by the claim's token, so an attempt that lost the run (to the
reaper, a duplicate delivery or a cancel) records nothing more (G3). A write that finds
Redis unreachable is retried for as long as the lease still holds: a short outage costs
nothing. Error messages and tracebacks are stored, so they must not carry the values of
state or inputs (G6): pydantic's ValidationError, which quotes the values it rejected, is
rewritten without them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import ValidationError

from reflexr_graph import clock
from reflexr_graph.core import invalid
from reflexr_graph.core.action import GraphAction
from reflexr_graph.core.deadlines import Deadlines
from reflexr_graph.core.driver import Finished, run_attempt
from reflexr_graph.core.limits import Grant, HeldSlots, Limiter, LimitRequest
from reflexr_graph.core.policy import NO_POLICY, failed_node, judge
from reflexr_graph.core.port import NO_NOTES, AttemptContext, Notes, WaitResult
from reflexr_graph.core.tally import Tally
from reflexr_graph.errors import (
    AttemptCancelled,
    CancelRequested,
    FencedOut,
    InvalidInputs,
    OperationRefused,
    OutputNotSerializable,
    RunFailure,
    StoreUnavailable,
)
from reflexr_graph.fleet import loops, observe, retry
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.heartbeat import Heartbeat
from reflexr_graph.fleet.outcome import Delivered, Outcome
from reflexr_graph.fleet.watchdog import Watch
from reflexr_graph.model import LIMIT_WAIT_PREFIX, Reason, Status
from reflexr_graph.store.records import Claim
from reflexr_graph.store.redis_store import RedisStore

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_MESSAGE_LENGTH = 4000
RELEASE_BUDGET_S = 2.0
"""How long a worker that is stopping keeps trying to hand a run back before it gives up
(the lease then lapses and the reaper recovers the run)."""


# -- describing an error without private values ------------------------------------------------


def safe_message(exc: BaseException) -> str:
    """``str(exc)``, except that a ValidationError lists locations and reasons, not values."""
    message = invalid.summary(exc) if isinstance(exc, ValidationError) else str(exc)
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


@dataclass(frozen=True)
class Failure:
    """How a failed attempt is recorded: its reason code, whether it is final, whether it counts."""

    reason: str
    permanent: bool = False
    counted: bool = True
    """False for an infrastructure failure: an interruption, not one of max_attempts."""


def classify(exc: BaseException) -> Failure:
    """How the failure ``exc`` is recorded."""
    if isinstance(exc, RunFailure):
        return Failure(exc.reason, exc.permanent)
    if isinstance(exc, InvalidInputs):
        return Failure(Reason.INVALID_INPUTS.value, permanent=True)
    if isinstance(exc, StoreUnavailable):
        # Redis, not the step, failed: the step gets its attempt back.
        return Failure(Reason.STORE_UNAVAILABLE.value, counted=False)
    return Failure(Reason.STEP_FAILED.value)


# -- writing while the lease holds ---------------------------------------------------------------


class Written(StrEnum):
    OK = "ok"
    FENCED = "fenced"
    """Another attempt owns the run (or it was cancelled): this one may write nothing more."""
    UNREACHABLE = "unreachable"
    """Redis stayed unreachable for as long as the lease held."""


def fenced_write(lease_left_s: Callable[[], float], op: Callable[[], T]) -> tuple[Written, T | None]:
    """Run one of the attempt's fenced writes, retrying while Redis is unreachable and the lease holds.

    The lease is the attempt's right to the run for its TTL whatever Redis does meanwhile: a
    write that waits out a short outage loses nothing, while giving up at once would throw
    the attempt away. ``lease_left_s`` says how long that right lasts.
    """
    delay = 0.1
    while True:
        try:
            return Written.OK, op()
        except FencedOut:
            return Written.FENCED, None
        except StoreUnavailable:
            if lease_left_s() <= delay:
                return Written.UNREACHABLE, None
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


@dataclass
class Recorder:
    """Records one attempt's outcome; every write fenced by its token and retried while the lease holds."""

    app: FleetApp
    store: RedisStore
    ctx: AttemptContext
    lease_left_s: Callable[[], float]
    tally: Tally = field(default_factory=lambda: Tally("", ""))
    action: GraphAction | None = None
    """Whose retry policies judge a failure; None: the settings' backoff, the store's max_attempts."""
    counted: int = 0
    """Attempts of the run counted so far, this one included (from the claim)."""
    run_max: int = 0
    """The run's max_attempts, as its record holds it (from the claim)."""

    def _verdict(self, exc: BaseException, how: Failure) -> tuple[Failure, int]:
        """The failure as the retry policy of its node judges it, and the retry's delay in ms."""
        settings = self.app.reflexr_settings
        policy = self.action.policy_for(failed_node(exc)) if self.action is not None else NO_POLICY
        retry_after = None
        if how.counted and self.action is not None:
            verdict = judge(
                exc,
                reason=how.reason,
                permanent=how.permanent,
                policy=policy,
                counted=self.counted,
                run_max=self.run_max,
            )
            how = Failure(verdict.reason, verdict.permanent, how.counted)
            retry_after = verdict.retry_after_s
        if retry_after is not None:
            return how, int(retry_after * 1000)  # the step said when: no jitter
        base_s = policy.backoff_s or settings.retry_backoff_s
        max_s = max(base_s, policy.backoff_max_s or settings.retry_backoff_max_s)
        return how, retry.backoff_ms(self.ctx.attempt, base_s=base_s, max_s=max_s)

    def _unrecorded(self, what: str, result: Written) -> Delivered:
        ctx = self.ctx
        if result is Written.FENCED:
            observe.attempt_ended(ctx.graph, "fenced")
            log.info(
                "run %s attempt %d %s, but another attempt owns the run now; nothing recorded",
                ctx.run_id,
                ctx.attempt,
                what,
            )
            return Delivered(Outcome.FENCED, ctx.run_id)
        log.warning(
            "run %s attempt %d %s, but Redis stayed unreachable while the lease held, so it is not "
            "recorded; the reaper re-enqueues the run once its lease lapses, and the next attempt resumes "
            "from the last checkpoint saved",
            ctx.run_id,
            ctx.attempt,
            what,
        )
        return Delivered(Outcome.UNRECORDED, ctx.run_id, Reason.STORE_UNAVAILABLE.value)

    def failure(self, exc: BaseException) -> Delivered:
        """Record the failed attempt: retry after a backoff, or dead-letter the run."""
        ctx = self.ctx
        how, delay_ms = self._verdict(exc, classify(exc))
        notes = self.tally.take()
        result, outcome = fenced_write(
            self.lease_left_s,
            lambda: self.store.fail(
                ctx,
                error_type=type(exc).__name__,
                message=safe_message(exc),
                traceback=safe_traceback(exc),
                reason=how.reason,
                permanent=how.permanent,
                retry_delay_ms=delay_ms,
                counted=how.counted,
                notes=notes,
            ),
        )
        if result is not Written.OK:
            return self._unrecorded(f"failed ({how.reason})", result)
        if outcome == "cancelled":
            return self._cancelled("failed, and the run had been cancelled meanwhile")
        observe.attempt_ended(ctx.graph, "failed" if how.counted else "interrupted")
        detail = f"run {ctx.run_id} attempt {ctx.attempt} failed ({how.reason}: {type(exc).__name__})"
        if outcome == "dead":
            return self._dead(exc, how, detail)
        log.warning(
            "%s; %s in %.1fs from its last checkpoint",
            detail,
            "retrying"
            if how.counted
            else "not counted toward max_attempts (Redis, not the step, failed); retrying",
            delay_ms / 1000,
        )
        return Delivered(Outcome.RETRYING, ctx.run_id, how.reason, detail)

    def _dead(self, exc: BaseException, how: Failure, detail: str) -> Delivered:
        ctx = self.ctx
        reason = self.store.get(ctx.run_id).reason or Reason.MAX_ATTEMPTS.value
        observe.run_ended(ctx.graph, Status.DEAD, reason)
        log.error(
            "%s and the run is dead-lettered (%s); replay it with `reflexr-graph dlq replay %s` once the "
            "cause is fixed",
            detail,
            "permanent failure" if how.permanent else reason,
            ctx.run_id,
        )
        return Delivered(Outcome.DEAD, ctx.run_id, reason, f"{detail}; dead-lettered ({reason})")

    def cancelled(self, exc: CancelRequested) -> Delivered:
        """The run was cancelled without ``now``: the attempt stopped at a boundary; end the run so.

        One write, at the end of a cancelled attempt only (none per step); it is the operator's
        own cancel, made at once now that the step in flight finished.
        """
        if not exc.ended:
            try:
                result, _ = fenced_write(
                    self.lease_left_s, lambda: self.store.cancel(self.ctx.run_id, now=True)
                )
            except OperationRefused:
                result = Written.OK  # already ended (the reaper, another write): cancelled all the same
            if result is Written.UNREACHABLE:
                return self._unrecorded("stopped for a cancel", result)
        return self._cancelled("stopped at a boundary once its step in flight finished")

    def _cancelled(self, how: str) -> Delivered:
        ctx = self.ctx
        observe.attempt_ended(ctx.graph, "cancelled")
        observe.run_ended(ctx.graph, Status.CANCELLED, Reason.CANCELLED.value)
        log.info(
            "run %s attempt %d %s; the run is cancelled, nothing more runs", ctx.run_id, ctx.attempt, how
        )
        return Delivered(Outcome.CANCELLED, ctx.run_id, Reason.CANCELLED.value)

    def success(self, finished: Finished) -> Delivered:
        """Record the output, with the finished checkpoint in the same write when there is one."""
        ctx = self.ctx
        try:
            output_json = json.dumps(finished.output, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError):
            return self.failure(
                OutputNotSerializable(
                    f"graph {ctx.graph!r} finished, but its output is not plain JSON (NaN, Infinity or a "
                    "non-JSON type); make the output type JSON-serializable"
                )
            )
        notes = self.tally.take()
        result, succeeded = fenced_write(
            self.lease_left_s,
            lambda: self.store.succeed(
                ctx, output_json, checkpoint=finished.checkpoint, seq=finished.seq, notes=notes
            ),
        )
        if result is not Written.OK:
            return self._unrecorded("finished", result)
        if not succeeded:
            return self._cancelled("finished the graph after the run was cancelled (its output is kept)")
        observe.attempt_ended(ctx.graph, "succeeded")
        observe.run_ended(ctx.graph, Status.SUCCEEDED)
        log.info("run %s succeeded on attempt %d", ctx.run_id, ctx.attempt)
        return Delivered(Outcome.SUCCEEDED, ctx.run_id)

    def suspended(self, suspension: Suspension) -> Delivered:
        """The run waits for a signal or a timer: the store recorded it, so this only tells it."""
        ctx = self.ctx
        observe.suspended(ctx.graph, suspension.signal)
        if suspension.signal.startswith(LIMIT_WAIT_PREFIX):
            what = f"a slot or token of limit {suspension.signal.removeprefix(LIMIT_WAIT_PREFIX)!r}"
        else:
            what = f"signal {suspension.signal!r}" if suspension.signal else "a timer"
        wake = suspension.wake_at_ms
        left_s = 0.0 if wake is None else max(0, wake - clock.now_ms()) / 1000
        timer = f" (it wakes by itself in {left_s:.1f}s)" if wake is not None else ""
        log.info(
            "run %s attempt %d suspended: the run waits for %s%s, holding no worker; it then resumes from "
            "its last checkpoint (this attempt does not count toward max_attempts)",
            ctx.run_id,
            ctx.attempt,
            what,
            timer,
        )
        return Delivered(Outcome.SUSPENDED, ctx.run_id, "waiting")

    def release(self, why: str, budget_s: float | None = None) -> Delivered:
        """Hand the run back when the worker stops mid-attempt, so another worker resumes it at once.

        Not counted toward max_attempts: a deploy is not the run's failure.
        """
        ctx = self.ctx
        deadline = time.monotonic() + (budget_s if budget_s is not None else 1e9)

        def left() -> float:
            return min(self.lease_left_s(), deadline - time.monotonic())

        result, outcome = fenced_write(left, lambda: self.store.release(ctx))
        if outcome == "cancelled":
            return self._cancelled(f"was stopped ({why}), and the run had been cancelled meanwhile")
        if result is not Written.OK or outcome == "fenced":
            return self._unrecorded(f"was stopped ({why})", Written.FENCED if outcome == "fenced" else result)
        observe.attempt_ended(ctx.graph, "interrupted")
        if outcome == "dead":
            observe.run_ended(ctx.graph, Status.DEAD, Reason.MAX_INTERRUPTIONS.value)
            log.error(
                "run %s attempt %d: %s, and the run was cut short %d times: dead-lettered "
                "(max_interruptions); replay it with `reflexr-graph dlq replay %s`",
                ctx.run_id,
                ctx.attempt,
                why,
                self.store.max_interruptions + 1,
                ctx.run_id,
            )
            return Delivered(Outcome.DEAD, ctx.run_id, Reason.MAX_INTERRUPTIONS.value)
        log.warning(
            "run %s attempt %d: %s mid-attempt; lease released (not counted toward max_attempts), the run "
            "is due now and resumes on another worker from its last checkpoint",
            ctx.run_id,
            ctx.attempt,
            why,
        )
        return Delivered(Outcome.RELEASED, ctx.run_id, Reason.SHUTDOWN.value)


# -- the store as one attempt sees it -------------------------------------------------------------


@dataclass(frozen=True)
class Suspension:
    """A step suspended the run: what it waits for ('' for a sleep) and when its timer wakes it."""

    signal: str
    wake_at_ms: int | None


@dataclass
class AttemptPort:
    """The checkpoint port of one attempt: the checkpoint came with the claim, so loading it costs
    nothing; a save that finds Redis unreachable is retried for as long as the lease holds."""

    store: RedisStore
    claimed: str | None
    records: Mapping[str, str]
    lease_left_s: Callable[[], float]
    on_suspend: Callable[[], None] = lambda: None
    """Called once the store suspended the run: the lease is given back, so stop renewing it."""
    suspension: Suspension | None = None
    """Set when a step suspended the run: the attempt ends as suspended, whatever it raises next."""
    slot_ttl_ms: int = 30_000
    """How long a limit slot holds without renewal: the lease TTL."""

    def wait(
        self, ctx: AttemptContext, *, field: str, signal: str, wake_at_ms: int | None, waited_ms: int = 0
    ) -> WaitResult:
        what = f"wait for {'signal ' + repr(signal) if signal else 'a timer'}"
        found: list[WaitResult] = []

        def wait() -> None:
            found.append(
                self.store.wait(ctx, field=field, signal=signal, wake_at_ms=wake_at_ms, waited_ms=waited_ms)
            )

        self._write(ctx, what, wait)
        result = found[-1]
        if result.record is None:
            self.suspension = Suspension(signal, result.wake_at_ms)
            self.on_suspend()
        return result

    def acquire_limit(self, ctx: AttemptContext, request: LimitRequest) -> Grant:
        found: list[Grant] = []
        self._write(
            ctx,
            f"limit {request.key}",
            lambda: found.append(self.store.acquire_limit(ctx, request, slot_ttl_ms=self.slot_ttl_ms)),
        )
        return found[-1]

    def release_slot(self, key: str, member: str) -> None:
        try:
            self.store.release_slot(key, member)
        except StoreUnavailable:
            log.warning(
                "a slot of limit %s could not be given back (Redis unreachable); it lapses with its lease",
                key,
            )

    def load_checkpoint(self, run_id: str) -> str | None:
        return self.claimed

    def load_records(self, run_id: str) -> Mapping[str, str]:
        return self.records

    def save_record(self, ctx: AttemptContext, field: str, value: str) -> None:
        self._write(
            ctx, f"record {field.split('|', 1)[0]}", lambda: self.store.save_record(ctx, field, value)
        )

    def save_checkpoint(
        self,
        ctx: AttemptContext,
        payload: str,
        *,
        seq: int,
        next_node: str | None,
        notes: Notes = NO_NOTES,
    ) -> bool | None:
        return self._write(
            ctx,
            f"checkpoint {seq}",
            lambda: self.store.save_checkpoint(ctx, payload, seq=seq, next_node=next_node, notes=notes),
        )

    def _write(self, ctx: AttemptContext, what: str, op: Callable[[], T]) -> T | None:
        """One fenced write of the running graph: raised as the driver expects when it cannot land."""
        result, value = fenced_write(self.lease_left_s, op)
        if result is Written.FENCED:
            raise FencedOut(f"attempt {ctx.attempt} of run {ctx.run_id} no longer owns the run")
        if result is Written.UNREACHABLE:
            raise StoreUnavailable(
                f"Redis stayed unreachable while the lease of run {ctx.run_id} held; {what} not saved"
            )
        return value


# -- running ---------------------------------------------------------------------------------------


async def _drive(
    heartbeat: Heartbeat,
    action: GraphAction,
    port: AttemptPort,
    watch: Watch,
    payload: tuple[Any, Any],
    tally: Tally,
    sibling_grace_s: float,
) -> Finished:
    task = asyncio.current_task()
    assert task is not None
    heartbeat.bind(asyncio.get_running_loop(), task)
    inputs, state = payload
    limiter = Limiter(port, watch.ctx, watch.held)
    return await run_attempt(
        action,
        port,
        watch.ctx,
        inputs=inputs,
        state=state,
        tally=tally,
        limiter=limiter,
        deadlines=watch.deadlines,
        sibling_grace_s=sibling_grace_s,
        stop=heartbeat.cancel_asked,
    )


def _payload(claim: Claim) -> tuple[Any, Any]:
    try:
        inputs = json.loads(claim.inputs_json)
        state = json.loads(claim.state_json) if claim.state_json else None
    except ValueError:
        raise InvalidInputs(
            f"run {claim.run_id}: its recorded inputs or state are not JSON; enqueue the run again"
        ) from None
    return inputs, state


def _stopped(recorder: Recorder, heartbeat: Heartbeat, exc: BaseException) -> Delivered:
    """The attempt's task was cancelled: by the fleet (shutdown), by a lost lease, or by the step itself."""
    ctx = recorder.ctx
    if heartbeat.interrupted is not None:
        return recorder.release(heartbeat.interrupted)
    if heartbeat.lost is None and isinstance(exc, asyncio.CancelledError):
        return recorder.failure(exc)  # a step cancelled itself: an ordinary failure
    observe.attempt_ended(ctx.graph, "fenced")
    log.info(
        "run %s attempt %d stopped: lease lost (%s); nothing more is recorded",
        ctx.run_id,
        ctx.attempt,
        heartbeat.lost,
    )
    return Delivered(Outcome.FENCED, ctx.run_id)


def _run_and_record(app: FleetApp, store: RedisStore, action: GraphAction, claim: Claim) -> Delivered:
    ctx = claim.context()
    settings = app.reflexr_settings
    tally = Tally(action.name, ctx.run_id)
    recorder = Recorder(
        app, store, ctx, lambda: settings.lease_ttl_s, tally, action, claim.counted, claim.max_attempts
    )
    watch = Watch(store, ctx, settings.lease_ttl_ms, HeldSlots(), Deadlines(), recorder.failure)
    heartbeat = Heartbeat(store, ctx, lease_ttl_s=settings.lease_ttl_s, watch=watch)
    recorder.lease_left_s = heartbeat.lease_left_s
    port = AttemptPort(
        store,
        claim.checkpoint,
        claim.records,
        heartbeat.lease_left_s,
        heartbeat.let_go,
        slot_ttl_ms=settings.lease_ttl_ms,
    )
    # The heartbeat keeps renewing while the outcome is written, so a write that waits out a
    # Redis outage still holds the lease when it lands.
    with heartbeat:
        try:
            drive = _drive(heartbeat, action, port, watch, _payload(claim), tally, settings.sibling_grace_s)
            finished = loops.run(drive)
        except (SystemExit, KeyboardInterrupt):
            # Celery's soft shutdown terminates a prefork child with a signal that billiard turns
            # into SystemExit. The message is requeued; handing the run back lets the redelivery
            # claim it now instead of being dropped as busy until the lease lapses.
            if port.suspension is None:
                recorder.release("worker stopping", budget_s=RELEASE_BUDGET_S)
            raise
        except BaseException as exc:
            # Once a step suspended the run, the store holds it as waiting: whatever the graph raised
            # on the way out (Suspended, or a concurrent branch fenced out by it) ends the attempt so.
            if port.suspension is not None:
                return recorder.suspended(port.suspension)
            return _ended_by(recorder, heartbeat, exc)
        return recorder.success(finished)


def _ended_by(recorder: Recorder, heartbeat: Heartbeat, exc: BaseException) -> Delivered:
    """What an attempt that raised comes to: fenced, stopped, or failed; anything else propagates."""
    ctx = recorder.ctx
    if isinstance(exc, FencedOut):
        observe.attempt_ended(ctx.graph, "fenced")
        log.info(
            "run %s attempt %d: another attempt took the run over; this one records nothing more",
            ctx.run_id,
            ctx.attempt,
        )
        return Delivered(Outcome.FENCED, ctx.run_id)
    if isinstance(exc, CancelRequested):
        return recorder.cancelled(exc)
    if isinstance(exc, (AttemptCancelled, asyncio.CancelledError)):
        return _stopped(recorder, heartbeat, exc)
    if isinstance(exc, Exception):
        return recorder.failure(exc)
    raise exc


def run_claimed(app: FleetApp, store: RedisStore, claim: Claim) -> Delivered:
    """Run one claimed attempt to its outcome; on a prefork child's shutdown, hand the run back, re-raise."""
    ctx = claim.context()
    action = app.reflexr_registry.get(claim.graph)
    if action is None:
        failure = RunFailure(
            f"this worker has no graph named {claim.graph!r}; deploy a worker that loads it, "
            "then replay the run",
            reason=Reason.UNKNOWN_GRAPH.value,
            permanent=True,
        )
        return Recorder(app, store, ctx, lambda: app.reflexr_settings.lease_ttl_s).failure(failure)
    if claim.attempt == 1:
        observe.run_started(claim.graph)
    log.info(
        "run %s: attempt %d started (graph %s; %d of %d counted attempts)",
        ctx.run_id,
        ctx.attempt,
        claim.graph,
        claim.counted,
        claim.max_attempts,
    )
    return _run_and_record(app, store, action, claim)
