"""The Celery task ``reflexr_graph.run``: one attempt of one run.

The Celery task id is the run id. A message is only a nudge: the run record in Redis is
the truth, so a duplicate, late or replayed message is harmless. The claim decides
whether this delivery runs anything, and every write of the attempt is fenced by the
claim's token (G3).

Messages the Client and the reaper send carry only the graph; a foreign producer's first
message carries the inputs too and creates the record. Nothing a message carries may crash
the worker: a bad message is dead-lettered with a reason (``bad_message``,
``invalid_inputs``, ``idempotency_conflict``) and acknowledged. A message for a graph this
worker does not run goes on to the graph's own queue, or waits for a worker that runs it.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from celery import Task
from celery.exceptions import Ignore, Reject
from pydantic import ValidationError

from reflexr_graph.config.dispatch import TASK_NAME
from reflexr_graph.core import invalid
from reflexr_graph.core.action import GraphAction
from reflexr_graph.errors import (
    AttemptFailed,
    IdempotencyConflict,
    InvalidInputs,
    RunDeadLettered,
    StoreUnavailable,
)
from reflexr_graph.fleet import attempt, observe, unserved, versions
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.message import (
    MAX_KEY_LENGTH,
    MAX_RUN_ID_LENGTH,
    BadMessage,
    RunMessage,
    create_from_message,
    parse_message,
    to_json,
)
from reflexr_graph.fleet.outcome import Delivered, Outcome
from reflexr_graph.model import Reason, Status
from reflexr_graph.store import keys
from reflexr_graph.store.records import Claim, ClaimOutcome
from reflexr_graph.store.redis_store import RedisStore

log = logging.getLogger(__name__)

REQUEUE_PAUSE_S = 1.0
"""Pause before requeueing a message while Redis is unreachable, so it does not spin."""


def check_inputs(action: GraphAction, msg: RunMessage) -> None:
    """A foreign producer's inputs and state, validated against the graph, or BadMessage."""
    if not msg.has_inputs:
        return  # a recorded run: its inputs were validated at enqueue, and again by the attempt
    try:
        action.validate_inputs(msg.inputs)
        action.initial_state(msg.state)
    except InvalidInputs as exc:
        raise BadMessage(Reason.INVALID_INPUTS, str(exc)) from None
    except ValidationError as exc:  # a validator of the graph's own types raised outside the adapter
        raise BadMessage(Reason.INVALID_INPUTS, f"graph {msg.graph!r}: {invalid.describe(exc)}") from None


def dead_letter_message(
    store: RedisStore, run_id: str, bad: BadMessage, kwargs: dict[str, Any], *, keep_key: bool = True
) -> Delivered:
    """Dead-letter a bad message, keeping what it did carry so an operator can see it."""
    graph = kwargs.get("graph")
    try:
        inputs_json = to_json(kwargs.get("inputs"), "inputs") if "inputs" in kwargs else ""
    except BadMessage:
        inputs_json = ""
    key = kwargs.get("idempotency_key")
    usable_key = isinstance(key, str) and 0 < len(key) <= MAX_KEY_LENGTH and keep_key
    recorded = store.dead_letter(
        run_id,
        reason=bad.reason.value,
        error_type=type(bad).__name__,
        message=str(bad),
        graph=graph if isinstance(graph, str) else "",
        inputs_json=inputs_json,
        idempotency_key=key if usable_key and isinstance(key, str) else None,
    )
    if not recorded:
        log.warning("run %s: bad message (%s) for a run that already finished; message dropped", run_id, bad)
        return Delivered(Outcome.DROPPED, run_id, bad.reason.value)
    observe.run_ended(graph if isinstance(graph, str) else "", Status.DEAD, bad.reason.value)
    log.error(
        "run %s dead-lettered (%s): %s; once that is fixed, replay it with `reflexr-graph dlq replay %s`",
        run_id,
        bad.reason.value,
        bad,
        run_id,
    )
    return Delivered(Outcome.DEAD, run_id, bad.reason.value, str(bad))


def claim_run(
    app: FleetApp,
    store: RedisStore,
    run_id: str,
    msg: RunMessage,
    action: GraphAction,
    worker: str = "",
    kwargs: dict[str, Any] | None = None,
) -> Claim | Delivered:
    """Claim the run under a fresh token, creating its record first for a message-only producer."""
    ttl_ms = app.reflexr_settings.lease_ttl_ms
    token = uuid.uuid4().hex

    def claim() -> Claim:
        return store.claim(
            run_id,
            token,
            lease_ttl_ms=ttl_ms,
            graph=msg.graph,
            idempotency_key=msg.idempotency_key,
            worker=worker,
            version=action.version,
            # A run not started yet starts on the newest served version (a foreign producer's too).
            newest=versions.VIEW.newest(store, msg.graph),
        )

    found = claim()
    if found.outcome is ClaimOutcome.MISSING:
        settings = app.reflexr_settings
        owner = create_from_message(store, run_id, msg, action, settings.max_attempts, settings.lease_ttl_ms)
        if owner != run_id:
            log.info(
                "run %s: idempotency key already names run %s; this message is a duplicate request, dropped",
                run_id,
                owner,
            )
            return Delivered(Outcome.DROPPED, run_id, "duplicate_request")
        found = claim()
    if found.claimed:
        return found
    if found.outcome is ClaimOutcome.VERSION:
        return versions.route(app, store, found, kwargs or {"graph": msg.graph})
    if found.outcome is ClaimOutcome.DEAD:
        # Only an attempt that died with its worker leaves a run to be dead-lettered at a claim.
        observe.attempt_ended(found.graph, "abandoned")
        reason = store.get(run_id).reason or Reason.MAX_ATTEMPTS.value
        observe.run_ended(found.graph, Status.DEAD, reason)
        log_not_claimed(found)
        return Delivered(Outcome.DEAD, run_id, reason, f"run {run_id} used all its attempts")
    log_not_claimed(found)
    return Delivered(Outcome.DROPPED, run_id, found.outcome.value)


DROPPED_BECAUSE = {
    ClaimOutcome.BUSY: "run %s: another attempt holds a live lease; this duplicate delivery is dropped (if "
    "that attempt's worker died, the reaper re-enqueues the run once its lease lapses)",
    ClaimOutcome.EARLY: "run %s is waiting out its retry backoff; this early delivery is dropped and the "
    "reaper sends the run again when the retry is due",
    ClaimOutcome.WAITING: "run %s is waiting for a signal or a timer; this stray delivery is dropped (the "
    "signal or the timer queues the run again)",
}
"""Why a delivery the claim refused is dropped, and what sends the run again (logged at info)."""


def log_not_claimed(claim: Claim) -> None:
    run_id = claim.run_id
    if claim.outcome in DROPPED_BECAUSE:
        log.info(DROPPED_BECAUSE[claim.outcome], run_id)
    elif claim.outcome is ClaimOutcome.FINISHED:
        log.info("run %s is already %s; this delivery is dropped", run_id, claim.status)
    elif claim.outcome is ClaimOutcome.DEAD:
        log.error(
            "run %s used all %d attempts and is dead-lettered; replay it with `reflexr-graph dlq replay %s` "
            "once the cause is fixed",
            run_id,
            claim.max_attempts,
            run_id,
        )
    else:
        log.warning("run %s: no record (its retention passed?); this delivery is dropped", run_id)


def _deliver(
    app: FleetApp, store: RedisStore, run_id: str, args: tuple[Any, ...], kwargs: dict[str, Any], worker: str
) -> Claim | Delivered:
    """Everything up to the claim: a Claim to run, or what became of the delivery instead."""
    try:
        msg = parse_message(args, kwargs, app.reflexr_settings.payload_limit)
        action = app.reflexr_registry.get(msg.graph)
        if action is None:
            return unserved.route(app, store, run_id, msg, kwargs)
        check_inputs(action, msg)
        return claim_run(app, store, run_id, msg, action, worker, kwargs)
    except BadMessage as bad:
        return dead_letter_message(store, run_id, bad, kwargs, keep_key=bad.keep_key)
    except IdempotencyConflict as conflict:
        refused = BadMessage(Reason.IDEMPOTENCY_CONFLICT, str(conflict))
        return dead_letter_message(store, run_id, refused, kwargs, keep_key=False)


def handle(
    app: FleetApp, run_id: str | None, args: tuple[Any, ...], kwargs: dict[str, Any], worker: str = ""
) -> Delivered:
    """Everything one delivery does: validate, claim, run one attempt, record its outcome.

    ``worker`` (the Celery node name) is recorded with the attempt, so operators see where it ran.
    """
    if run_id is None or not keys.valid_run_id(run_id):
        log.error(
            "message with an unusable task id (not 1 to %d of A-Z a-z 0-9 _ . - starting with a letter "
            "or digit) dropped; fix the producer",
            MAX_RUN_ID_LENGTH,
        )
        return Delivered(Outcome.DROPPED, str(run_id)[:MAX_RUN_ID_LENGTH], Reason.BAD_MESSAGE.value)
    store = app.store()
    try:
        found = _deliver(app, store, run_id, args, kwargs, worker)
    except StoreUnavailable:
        # Before the claim the message may be the run's only record: it must not be acked.
        log.warning("run %s: Redis unreachable before the attempt started; requeueing the message", run_id)
        time.sleep(REQUEUE_PAUSE_S)
        raise Reject("Redis unreachable", requeue=True) from None
    if isinstance(found, Delivered):
        return found
    return attempt.run_claimed(app, store, found)


def report(delivered: Delivered) -> dict[str, str]:
    """The Celery task's own outcome: success only for a finished run.

    A failed attempt and a dead letter fail the task (AttemptFailed, RunDeadLettered, declared
    in the task's ``throws``, so Celery records the state without logging a traceback: the
    run's own log lines already said what happened). Every other delivery ran nothing to its
    end (a duplicate, a forwarded or held message, an attempt cut short) and is ``Ignore``d:
    Celery acks it without recording the task id as successful. That matters because every
    delivery of a run has the run's id: a worker that had once seen the id "succeed" as a
    dropped duplicate refused to cancel that run's real attempt at shutdown, and hung.
    """
    if delivered.outcome is Outcome.SUCCEEDED:
        return delivered.as_result()
    if delivered.outcome is Outcome.RETRYING:
        raise AttemptFailed(
            delivered.detail or f"run {delivered.run_id}: attempt failed ({delivered.reason})"
        )
    if delivered.outcome is Outcome.DEAD:
        raise RunDeadLettered(
            delivered.detail or f"run {delivered.run_id} dead-lettered ({delivered.reason})"
        )
    raise Ignore(f"run {delivered.run_id}: {delivered.outcome.value} ({delivered.reason or 'nothing ran'})")


def register(app: FleetApp) -> None:
    """Register ``reflexr_graph.run`` on ``app``."""

    # shared=False: a shared task would be added to every app finalized later (a Client's
    # producer app, another FleetApp) and run there with this app's registry.
    @app.task(
        name=TASK_NAME,
        bind=True,
        shared=False,
        typing=False,
        # Checks each message's shape before Celery unpacks it in the worker's main process.
        Strategy="reflexr_graph.fleet.guard:strategy",
        acks_late=True,
        reject_on_worker_lost=True,
        ignore_result=True,
        throws=(AttemptFailed, RunDeadLettered),
    )
    def run(task: Task[Any, Any], *args: Any, **kwargs: Any) -> dict[str, str]:
        run_id = task.request.id
        try:
            delivered = handle(app, run_id, args, kwargs, worker=task.request.hostname or "")
        except Reject:
            raise
        except Exception:
            # A bug here must not take the worker down. A claimed run keeps its lease (or its
            # due entry), so the reaper retries it; the message itself is acked.
            log.exception(
                "run %s: unexpected error handling this delivery; the message is acked, and a claimed "
                "run is retried by the reaper once its lease lapses",
                run_id,
            )
            raise Ignore(f"run {run_id}: internal error, see the log") from None
        return report(delivered)

    _ = run  # registered by the decorator; the name is not used
