"""The Celery task ``reflexr_graph.run``: one attempt of one run.

The Celery task id is the run id. A message is only a nudge: the run record in Redis is
the truth, so a duplicate, late or replayed message is harmless. The claim decides
whether this delivery runs anything, and every write of the attempt is fenced by the
claim's token (G3).

Nothing a message carries may crash the worker: a bad message is dead-lettered with a
reason (``bad_message``, ``unknown_graph``, ``invalid_inputs``) and acknowledged.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from celery import Task
from celery.exceptions import Reject
from pydantic import ValidationError

from reflexr_graph.core.action import GraphAction
from reflexr_graph.core.tracing import current_trace_context
from reflexr_graph.errors import InvalidInputs, StoreUnavailable
from reflexr_graph.fleet import attempt, observe
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.dispatch import TASK_NAME
from reflexr_graph.model import Reason, Status
from reflexr_graph.store.records import Claim, ClaimOutcome
from reflexr_graph.store.redis_store import RedisStore

log = logging.getLogger(__name__)

KWARGS = ("graph", "inputs", "state", "idempotency_key")
MAX_RUN_ID_LENGTH = 200
MAX_KEY_LENGTH = 512
REQUEUE_PAUSE_S = 1.0
"""Pause before requeueing a message while Redis is unreachable, so it does not spin."""


class BadMessage(Exception):
    """The message cannot become a run; it is dead-lettered with ``reason``."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class RunMessage:
    """The validated keyword arguments of one ``reflexr_graph.run`` message."""

    graph: str
    inputs: Any
    state: Any
    idempotency_key: str | None
    inputs_json: str
    state_json: str | None


def to_json(value: Any, what: str) -> str:
    """Compact JSON text, or BadMessage: NaN and Infinity are not JSON other languages read."""
    try:
        return json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError):
        raise BadMessage(
            Reason.BAD_MESSAGE,
            f"{what} is not plain JSON (NaN, Infinity or a non-JSON type); send JSON values",
        ) from None


def parse_message(args: tuple[Any, ...], kwargs: dict[str, Any]) -> RunMessage:
    """Check the message's shape; BadMessage names what is wrong (never a value)."""
    if args:
        raise BadMessage(
            Reason.BAD_MESSAGE,
            f"{len(args)} positional argument(s) given; send graph, inputs, state and idempotency_key "
            "as keyword arguments",
        )
    unexpected = sorted(str(k) for k in kwargs if k not in KWARGS)
    if unexpected:
        raise BadMessage(
            Reason.BAD_MESSAGE,
            f"unexpected keyword argument(s) {', '.join(unexpected)}; the task takes {', '.join(KWARGS)}",
        )
    graph = kwargs.get("graph")
    if not isinstance(graph, str) or not graph:
        raise BadMessage(Reason.BAD_MESSAGE, "keyword argument 'graph' is missing or not a non-empty string")
    if "inputs" not in kwargs:
        raise BadMessage(
            Reason.BAD_MESSAGE, "keyword argument 'inputs' is missing; send the graph's inputs as JSON"
        )
    key = kwargs.get("idempotency_key")
    if key is not None and (not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH):
        raise BadMessage(
            Reason.BAD_MESSAGE,
            f"'idempotency_key' must be a non-empty string of at most {MAX_KEY_LENGTH} characters",
        )
    inputs, state = kwargs["inputs"], kwargs.get("state")
    return RunMessage(
        graph=graph,
        inputs=inputs,
        state=state,
        idempotency_key=key,
        inputs_json=to_json(inputs, "'inputs'"),
        state_json=None if state is None else to_json(state, "'state'"),
    )


def check_graph(app: FleetApp, msg: RunMessage) -> GraphAction:
    """The message's graph, validated against its inputs and state, or BadMessage."""
    action = app.reflexr_registry.get(msg.graph)
    if action is None:
        known = ", ".join(sorted(app.reflexr_registry)) or "none"
        raise BadMessage(
            Reason.UNKNOWN_GRAPH,
            f"this worker has no graph named {msg.graph!r} (it runs: {known}); deploy a worker that "
            "loads it (REFLEXR_GRAPHS)",
        )
    try:
        action.validate_inputs(msg.inputs)
        action.initial_state(msg.state)
    except InvalidInputs as exc:
        raise BadMessage(Reason.INVALID_INPUTS, str(exc)) from None
    except ValidationError as exc:  # a validator of the graph's own types raised outside the adapter
        raise BadMessage(
            Reason.INVALID_INPUTS, f"graph {msg.graph!r}: {exc.error_count()} validation error(s)"
        ) from None
    return action


def dead_letter_message(store: RedisStore, run_id: str, bad: BadMessage, kwargs: dict[str, Any]) -> None:
    """Dead-letter a bad message, keeping what it did carry so an operator can see it."""
    graph = kwargs.get("graph")
    try:
        inputs_json = to_json(kwargs.get("inputs"), "inputs") if "inputs" in kwargs else ""
    except BadMessage:
        inputs_json = ""
    key = kwargs.get("idempotency_key")
    recorded = store.dead_letter(
        run_id,
        reason=bad.reason.value,
        error_type=type(bad).__name__,
        message=str(bad),
        graph=graph if isinstance(graph, str) else "",
        inputs_json=inputs_json,
        idempotency_key=key if isinstance(key, str) and 0 < len(key) <= MAX_KEY_LENGTH else None,
    )
    if recorded:
        observe.run_ended(graph if isinstance(graph, str) else "", Status.DEAD, bad.reason.value)
        log.error(
            "run %s dead-lettered (%s): %s; once that is fixed, replay it with `reflexr-graph dlq replay %s`",
            run_id,
            bad.reason.value,
            bad,
            run_id,
        )
    else:
        log.warning("run %s: bad message (%s) for a run that already finished; message dropped", run_id, bad)


def claim_run(
    app: FleetApp, store: RedisStore, run_id: str, msg: RunMessage, action: GraphAction, worker: str = ""
) -> Claim | None:
    """Claim the run under a fresh token, creating its record first for a message-only producer."""
    ttl_ms = app.reflexr_settings.lease_ttl_ms
    token = uuid.uuid4().hex
    claim = store.claim(
        run_id, token, lease_ttl_ms=ttl_ms, idempotency_key=msg.idempotency_key, worker=worker
    )
    if claim.outcome is ClaimOutcome.MISSING:
        owner, _created = store.create_run(
            run_id,
            graph=msg.graph,
            inputs_json=msg.inputs_json,
            state_json=msg.state_json,
            idempotency_key=msg.idempotency_key,
            max_attempts=action.max_attempts or app.reflexr_settings.max_attempts,
            # If this worker dies before claiming, the reaper sends the run again after this.
            dispatch_grace_ms=ttl_ms,
            # The producer's trace, as the Celery instrumentation carried it in the message.
            trace_context=current_trace_context(),
        )
        if owner != run_id:
            log.info(
                "run %s: idempotency key already names run %s; this message is a duplicate request, dropped",
                run_id,
                owner,
            )
            return None
        claim = store.claim(
            run_id, token, lease_ttl_ms=ttl_ms, idempotency_key=msg.idempotency_key, worker=worker
        )
    if claim.claimed:
        return claim
    if claim.outcome is ClaimOutcome.DEAD:
        # Only an attempt that died with its worker leaves a run to be dead-lettered at a claim.
        observe.attempt_ended(claim.graph, "abandoned")
        observe.run_ended(claim.graph, Status.DEAD, store.get(run_id).reason or Reason.MAX_ATTEMPTS.value)
    log_not_claimed(claim)
    return None


def log_not_claimed(claim: Claim) -> None:
    run_id = claim.run_id
    if claim.outcome is ClaimOutcome.BUSY:
        log.info(
            "run %s: another attempt holds a live lease; this duplicate delivery is dropped (if that "
            "attempt's worker died, the reaper re-enqueues the run once its lease lapses)",
            run_id,
        )
    elif claim.outcome is ClaimOutcome.EARLY:
        log.info(
            "run %s is waiting out its retry backoff; this early delivery is dropped and the reaper sends "
            "the run again when the retry is due",
            claim.run_id,
        )
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


def valid_run_id(run_id: object) -> bool:
    return isinstance(run_id, str) and 0 < len(run_id) <= MAX_RUN_ID_LENGTH and run_id.isprintable()


def handle(
    app: FleetApp, run_id: str | None, args: tuple[Any, ...], kwargs: dict[str, Any], worker: str = ""
) -> None:
    """Everything one delivery does: validate, claim, run one attempt, record its outcome.

    ``worker`` (the Celery node name) is recorded with the attempt, so operators see where it ran.
    """
    if run_id is None or not valid_run_id(run_id):
        log.error(
            "message with an unusable task id (empty, too long or unprintable) dropped; fix the producer"
        )
        return
    store = app.store()
    try:
        try:
            msg = parse_message(args, kwargs)
            action = check_graph(app, msg)
        except BadMessage as bad:
            dead_letter_message(store, run_id, bad, kwargs)
            return
        claim = claim_run(app, store, run_id, msg, action, worker)
    except StoreUnavailable:
        # Before the claim the message may be the run's only record: it must not be acked.
        log.warning("run %s: Redis unreachable before the attempt started; requeueing the message", run_id)
        time.sleep(REQUEUE_PAUSE_S)
        raise Reject("Redis unreachable", requeue=True) from None
    if claim is not None:
        attempt.run_claimed(app, store, claim)


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
    )
    def run(task: Task[Any, Any], *args: Any, **kwargs: Any) -> None:
        run_id = task.request.id
        try:
            handle(app, run_id, args, kwargs, worker=task.request.hostname or "")
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

    _ = run  # registered by the decorator; the name is not used
