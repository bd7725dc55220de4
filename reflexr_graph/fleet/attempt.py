"""One claimed attempt: drive the graph under a lease heartbeat, then record the outcome.

Read top-down: ``run_claimed`` finds the graph (a worker without it records a permanent
``unknown_graph`` failure), ``_run_and_record`` starts the lease heartbeat and drives the
graph through the attempt's port (fleet/attempt_port.py), and the recorder writes how the
attempt ended (fleet/recorder.py): success, failure, release, cancel or wait. Every write
is fenced by the claim's token and retried while the lease holds (fleet/fenced.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from reflexr_graph.config.dispatch import send_run
from reflexr_graph.core.action import GraphAction
from reflexr_graph.core.deadlines import Deadlines
from reflexr_graph.core.driver import Finished, run_attempt
from reflexr_graph.core.limits import HeldSlots, Limiter
from reflexr_graph.core.tally import Tally
from reflexr_graph.errors import (
    AttemptCancelled,
    CancelRequested,
    FencedOut,
    InvalidInputs,
    PayloadUnreadable,
    RunFailure,
)
from reflexr_graph.fleet import loops, observe
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.attempt_port import AttemptPort, ChildSender
from reflexr_graph.fleet.budget import new_run_budget
from reflexr_graph.fleet.fenced import lease_from_now
from reflexr_graph.fleet.heartbeat import Heartbeat
from reflexr_graph.fleet.outcome import Delivered, Outcome
from reflexr_graph.fleet.recorder import Recorder
from reflexr_graph.fleet.watchdog import Watch
from reflexr_graph.model import Reason
from reflexr_graph.store import hot_path
from reflexr_graph.store.records import Claim
from reflexr_graph.store.redis_store import RedisStore

log = logging.getLogger(__name__)

CHILD_DISPATCH_GRACE_MS = 5_000
"""When the reaper sends a child run's message if the worker's own send was lost."""

RELEASE_BUDGET_S = 2.0
"""How long a worker that is stopping keeps trying to hand a run back before it gives up
(the lease then lapses and the reaper recovers the run)."""


def _child_sender(app: FleetApp, store: RedisStore) -> ChildSender:
    """How this worker's attempts make child runs: each takes its graph's attempt budget as a
    Client's enqueue does (the published one, ``fleet/budget.py``), and its message goes out as a
    producer's does."""
    settings = app.reflexr_settings

    def max_attempts(graph: str) -> int:
        return new_run_budget(store, graph, app.reflexr_registry.get(graph), settings.max_attempts)

    def send(run_id: str, graph: str) -> None:
        send_run(app, run_id, graph)

    return ChildSender(max_attempts, send, CHILD_DISPATCH_GRACE_MS)


def run_claimed(app: FleetApp, store: RedisStore, claim: Claim) -> Delivered:
    """Run one claimed attempt to its outcome; on a prefork child's shutdown, hand the run back, re-raise."""
    ctx = claim.context()
    if claim.unreadable:
        log.warning("run %s: its stored payloads cannot be read here; the run is dead-lettered", ctx.run_id)
        lease = lease_from_now(app.reflexr_settings.lease_ttl_s)
        return Recorder(app, store, ctx, lease).failure(PayloadUnreadable(claim.unreadable))
    action = app.reflexr_registry.get(claim.graph)
    if action is None:
        failure = RunFailure(
            f"this worker has no graph named {claim.graph!r}; deploy a worker that loads it, "
            "then replay the run",
            reason=Reason.UNKNOWN_GRAPH.value,
            permanent=True,
        )
        # The claim just took the lease, and no heartbeat renews it: the write is retried only
        # until it would have lapsed, when the reaper takes the run over.
        lease = lease_from_now(app.reflexr_settings.lease_ttl_s)
        return Recorder(app, store, ctx, lease).failure(failure)
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


def _run_and_record(app: FleetApp, store: RedisStore, action: GraphAction, claim: Claim) -> Delivered:
    ctx = claim.context()
    settings = app.reflexr_settings
    tally = Tally(action.name, ctx.run_id)
    lease = lease_from_now(settings.lease_ttl_s)
    recorder = Recorder(app, store, ctx, lease, tally, action, claim.counted, claim.max_attempts)
    watch = Watch(store, ctx, settings.lease_ttl_ms, HeldSlots(), Deadlines(), recorder.failure)
    heartbeat = Heartbeat(store, ctx, lease_ttl_s=settings.lease_ttl_s, watch=watch)
    recorder.lease_left_s = heartbeat.lease_left_s
    hot = hot_path.for_attempt(store)
    port = AttemptPort(
        store,
        claim.checkpoint,
        claim.records,
        heartbeat.lease_left_s,
        heartbeat.let_go,
        slot_ttl_ms=settings.lease_ttl_ms,
        stream_max_items=settings.stream_max_items,
        hot=hot,
        children=_child_sender(app, store),
    )
    # The heartbeat keeps renewing while the outcome is written, so a write that waits out a
    # Redis outage still holds the lease when it lands.
    with heartbeat, hot if hot is not None else contextlib.nullcontext():
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
    try:
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
    finally:
        heartbeat.ending()  # the outcome's write comes next, and gives the lease back


def _payload(claim: Claim) -> tuple[Any, Any]:
    try:
        inputs = json.loads(claim.inputs_json)
        state = json.loads(claim.state_json) if claim.state_json else None
    except ValueError:
        raise InvalidInputs(
            f"run {claim.run_id}: its recorded inputs or state are not JSON; enqueue the run again"
        ) from None
    return inputs, state


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
