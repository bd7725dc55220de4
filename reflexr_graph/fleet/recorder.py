"""Recording how an attempt ended: its output, its failure, its release, its cancel or its wait.

Each outcome is one fenced write, retried while the lease holds (fleet/fenced.py); a write
that cannot land says why in the log (another attempt owns the run, or Redis stayed
unreachable and the reaper takes the run over) and records nothing. A failure is judged by
the retry policy of the node that raised it (core/policy.py), then either scheduled for a
retry after its backoff or dead-lettered; its message and traceback are stored without the
values they might quote (fleet/redaction.py).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field

from reflexr_graph import clock
from reflexr_graph.core import backoff as retry
from reflexr_graph.core.action import GraphAction
from reflexr_graph.core.driver import Finished
from reflexr_graph.core.policy import NO_POLICY, failed_node, judge
from reflexr_graph.core.port import AttemptContext
from reflexr_graph.core.tally import Tally
from reflexr_graph.errors import CancelRequested, OperationRefused, OutputNotSerializable, StoreUnavailable
from reflexr_graph.fleet import observe
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.attempt_port import Suspension
from reflexr_graph.fleet.failure import Failure, classify
from reflexr_graph.fleet.fenced import LeaseLeft, Written, fenced_write
from reflexr_graph.fleet.outcome import Delivered, Outcome
from reflexr_graph.fleet.redaction import safe_message, safe_traceback
from reflexr_graph.model import LIMIT_WAIT_PREFIX, Reason, Status, waits_on
from reflexr_graph.store.redis_store import RedisStore

log = logging.getLogger(__name__)


@dataclass
class Recorder:
    """Records one attempt's outcome; every write fenced by its token and retried while the lease holds."""

    app: FleetApp
    store: RedisStore
    ctx: AttemptContext
    lease_left_s: LeaseLeft
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
            f"run {ctx.run_id}: the failed attempt {ctx.attempt}",
        )
        if result is not Written.OK:
            return self._unrecorded(f"failed ({how.reason})", result)
        if outcome == "cancelled":
            return self._cancelled("failed, and the run had been cancelled meanwhile")
        observe.attempt_ended(ctx.graph, "failed" if how.counted else "interrupted")
        detail = f"run {ctx.run_id} attempt {ctx.attempt} failed ({how.reason}: {type(exc).__name__})"
        if outcome == "dead":
            return self._dead(exc, how, detail)
        self._nudge_reaper()
        log.warning(
            "%s; %s in %.1fs from its last checkpoint",
            detail,
            "retrying"
            if how.counted
            else "not counted toward max_attempts (Redis, not the step, failed); retrying",
            delay_ms / 1000,
        )
        return Delivered(Outcome.RETRYING, ctx.run_id, how.reason, detail)

    def _nudge_reaper(self) -> None:
        """The run is due soon (a retry, a timer, a release): wake the reaper, which may be sleeping
        until a later due time. Best effort: without it the reaper comes at its next planned wake."""
        try:
            self.store.nudge_reaper()
        except StoreUnavailable:
            log.info(
                "run %s: the reaper could not be woken (Redis unreachable); it sends the run later",
                self.ctx.run_id,
            )

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
                    self.lease_left_s,
                    lambda: self.store.cancel(self.ctx.run_id, now=True),
                    f"run {self.ctx.run_id}: its cancel",
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
            f"run {ctx.run_id}: its success",
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
        if (key := waits_on(suspension.signal, LIMIT_WAIT_PREFIX)) is not None:
            what = f"a slot or token of limit {key!r}"
        else:
            what = f"signal {suspension.signal!r}" if suspension.signal else "a timer"
        wake = suspension.wake_at_ms
        if wake is not None:
            self._nudge_reaper()
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

        result, outcome = fenced_write(
            left, lambda: self.store.release(ctx), f"run {ctx.run_id}: the hand-back of attempt {ctx.attempt}"
        )
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
                self.store.options.max_interruptions + 1,
                ctx.run_id,
            )
            return Delivered(Outcome.DEAD, ctx.run_id, Reason.MAX_INTERRUPTIONS.value)
        self._nudge_reaper()
        log.warning(
            "run %s attempt %d: %s mid-attempt; lease released (not counted toward max_attempts), the run "
            "is due now and resumes on another worker from its last checkpoint",
            ctx.run_id,
            ctx.attempt,
            why,
        )
        return Delivered(Outcome.RELEASED, ctx.run_id, Reason.SHUTDOWN.value)
