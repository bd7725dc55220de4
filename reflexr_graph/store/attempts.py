"""The store as an attempt writes to it: create, claim, renew, checkpoint, succeed, fail, release."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from reflexr_graph import clock, errors
from reflexr_graph.core.port import NO_NOTES, AttemptContext, Notes
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from reflexr_graph.store.base import (
    DEFAULT_RUN_RETENTION_S,
    EVENTS_MAXLEN,
    TRACEBACK_LIMIT,
    StoreBase,
    _digest,
    _fenced,
    _guess,
    _idem_guess,
    translate_errors,
)
from reflexr_graph.store.ops import IDEM_ROUNDS, Op, ScriptArg, per_run
from reflexr_graph.store.records import Claim, ClaimOutcome, ForkSeed, pairs_to_map, text, text_map


class Lease(IntEnum):
    """What a lease renewal found (renew_lease.lua)."""

    LOST = 0
    """The token lost the run: superseded, reaped, or cancelled now."""
    HELD = 1
    CANCEL_REQUESTED = 2
    """Held, but the run was cancelled without ``now``: its attempt stops at its next boundary."""


SAVED_CANCEL_REQUESTED = 2
"""save_checkpoint.lua's answer for a checkpoint saved on a run that was asked to cancel."""
SUCCEEDED_CANCELLED = 2
"""succeed.lua's answer when the run was asked to cancel: it ended cancelled, its output kept."""


@dataclass(frozen=True)
class NewRun:
    """What creating a run writes (``create_run.lua``)."""

    run_id: str
    graph: str
    inputs_json: str
    state_json: str | None
    idempotency_key: str | None
    max_attempts: int
    dispatch_grace_ms: int
    trace_context: str = ""
    fork: ForkSeed | None = None
    """A fork's checkpoint and lineage: the run is created with them (``time_travel.py``)."""
    retention_s: int = DEFAULT_RUN_RETENTION_S
    """How long a run created finished (a fork of a finished checkpoint) is kept."""


def _fork_args(run: NewRun) -> list[ScriptArg]:
    """create_run's ARGV[13..19]: a fork's checkpoint and lineage, or empty ones for a plain run."""
    fork = run.fork
    if fork is None:
        return ["", 0, "", "", "0", "", run.retention_s]
    return [
        fork.checkpoint,
        fork.seq,
        fork.next_node or "",
        fork.source_run_id,
        "1" if fork.state_edited else "0",
        fork.output_json or "",
        run.retention_s,
    ]


def create_args(run: NewRun, now_ms: int, *, expected: str = "", digest: str = "") -> list[ScriptArg]:
    """create_run.lua's ARGV after the per-run prefix: the run, its dispatch deadline, the idem
    key owner the caller expects (``expected``), the request's ``digest``, and the fork's part."""
    return [
        run.graph,
        run.inputs_json,
        run.state_json or "",
        run.idempotency_key or "",
        run.max_attempts,
        now_ms + run.dispatch_grace_ms,
        expected,
        run.trace_context,
        digest,
        *_fork_args(run),
    ]


def new_run(run: NewRun) -> Op[tuple[str, bool]]:
    """Create a queued run; returns ``(run_id, True)``, or ``(existing_id, False)`` if it exists.

    With an idempotency key, a live run of the same graph created with the same key is
    returned instead, decided inside the script so concurrent callers create one run; if
    that run was made from other inputs or state, IdempotencyConflict names it. The run is
    also put in ``rg:due`` at now + ``dispatch_grace_ms``: if the caller dies before sending
    the Celery message, the reaper sends it. ``trace_context`` (W3C headers as JSON) is the
    trace every attempt of the run joins.

    With ``fork``, the run is created with the fork's checkpoint as its latest, and its
    lineage; one forked from a finished checkpoint is created succeeded, with its output, and
    the caller sends no message. The idempotency key then compares the fork's digest.
    """
    now = clock.now_ms()
    key = run.idempotency_key
    digest = ""
    if key:
        digest = run.fork.digest if run.fork is not None else _digest(run.inputs_json, run.state_json)
    expected = ""
    for _ in range(IDEM_ROUNDS):
        args = create_args(run, now, expected=expected, digest=digest)
        owner_key = keys.run(expected or run.run_id)
        guess = _idem_guess(run.graph, key, run.run_id)
        reply = yield from per_run("create_run", run.run_id, guess, now, args, [owner_key])
        outcome, found = text(reply[0]), text(reply[1])
        if outcome == "conflict":
            assert key is not None
            raise errors.IdempotencyConflict(graph=run.graph, idempotency_key=key, run_id=found)
        if outcome != "retry":
            return found, outcome == "created"
        expected = found  # another caller took the key since; check the run it names
    raise errors.OperationRefused(f"idempotency key of run {run.run_id} kept changing hands; try again")


class AttemptWrites(StoreBase):
    """Creating runs and everything one attempt writes, each fenced by its token."""

    # -- lifecycle ---------------------------------------------------------------------------

    def create_run(
        self,
        run_id: str,
        *,
        graph: str,
        inputs_json: str,
        state_json: str | None = None,
        idempotency_key: str | None = None,
        max_attempts: int,
        dispatch_grace_ms: int,
        trace_context: str = "",
        fork: ForkSeed | None = None,
    ) -> tuple[str, bool]:
        """Create a queued run (or a fork, with ``fork``); returns ``(run_id, True)``, or
        ``(existing_id, False)`` if it exists.

        See :func:`new_run`, the operation it runs.
        """
        return self.do(
            new_run(
                NewRun(
                    run_id,
                    graph,
                    inputs_json,
                    state_json,
                    idempotency_key,
                    max_attempts,
                    dispatch_grace_ms,
                    trace_context,
                    fork,
                    self.run_retention_s,
                )
            )
        )

    @translate_errors
    def claim(
        self,
        run_id: str,
        token: str,
        *,
        lease_ttl_ms: int,
        graph: str = "",
        idempotency_key: str | None = None,
        worker: str = "",
    ) -> Claim:
        """Start an attempt under ``token``; see :class:`ClaimOutcome` for what can happen.

        ``graph`` and ``idempotency_key`` are only a hint that saves a round trip when the run
        is dead-lettered here; the run's own key is used either way. ``worker`` names the
        claiming worker on the ``attempt_started`` event, so operators see where each
        attempt ran.
        """
        now = clock.now_ms()
        args: list[ScriptArg] = [token, now + lease_ttl_ms, self.dead_retention_s, worker]
        guess = _idem_guess(graph, idempotency_key, run_id)
        reply = [text(v) for v in self.do(per_run("claim", run_id, guess, now, args))]
        outcome = ClaimOutcome(reply[0])
        if outcome is ClaimOutcome.MISSING:
            return Claim(outcome, run_id, token)
        status, number, counted, resumes, graph, inputs, state, idem, max_attempts, trace, checkpoint = reply[
            1:12
        ]
        return Claim(
            outcome=outcome,
            run_id=run_id,
            token=token,
            status=status,
            attempt=int(number or 0),
            counted=int(counted or 0),
            resume_seq=int(resumes or 0),
            graph=graph,
            inputs_json=inputs,
            state_json=state or None,
            idempotency_key=idem,
            max_attempts=int(max_attempts or 0),
            trace_context=trace,
            checkpoint=checkpoint or None,
            records=pairs_to_map(reply[12:]),
        )

    @translate_errors
    def renew_lease(self, run_id: str, token: str, *, lease_ttl_ms: int) -> Lease:
        """Extend the lease; ``Lease.LOST`` (falsy) when ``token`` lost the run (superseded, reaped or
        cancelled now), ``Lease.CANCEL_REQUESTED`` when it holds but the run is to stop at its next
        boundary."""
        now = clock.now_ms()
        return Lease(int(self.do(per_run("renew_lease", run_id, run_id, now, [token, now + lease_ttl_ms]))))

    @translate_errors
    def load_checkpoint(self, run_id: str) -> str | None:
        data = self._r.hget(keys.ckpt(run_id), "data")
        return None if data is None else text(data)

    @translate_errors
    def save_checkpoint(
        self,
        ctx: AttemptContext,
        payload: str,
        *,
        seq: int,
        next_node: str | None,
        notes: Notes = NO_NOTES,
    ) -> bool:
        """Replace the checkpoint, fenced by ``ctx.token``: one EVALSHA, one round trip.

        True when the run was asked to cancel (``cancel`` without ``now``): the attempt stops at
        this boundary. The same call tells it, so a cancel costs no extra round trip per step.

        It runs at every step boundary, so its script takes only the keys it touches rather
        than the per-run prelude's. ``notes`` (boundaries the attempt could not save since its
        last write, work it reused) are recorded in the same call, and the work recorded since
        the previous checkpoint is dropped: this one holds it. The checkpoint it replaces moves
        into the run's history, which the same call trims to ``checkpoint_history``.
        """
        run_id = ctx.run_id
        script_keys = [
            keys.run(run_id),
            keys.ckpt(run_id),
            keys.events(run_id),
            keys.status_set(Status.RUNNING),
            keys.memo(run_id),
            keys.history(run_id),
            keys.history_data(run_id),
        ]
        args: list[ScriptArg] = [
            run_id,
            clock.now_ms(),
            ctx.token,
            payload,
            seq,
            next_node or "",
            EVENTS_MAXLEN,
            notes.skipped,
            notes.skip_kinds,
            notes.reused_steps,
            notes.reused_calls,
            self.checkpoint_history,
        ]
        saved = int(self._scripts("save_checkpoint", script_keys, args))
        if not saved:
            raise _fenced(ctx, "checkpoint")
        return saved == SAVED_CANCEL_REQUESTED

    @translate_errors
    def save_record(self, ctx: AttemptContext, field: str, value: str) -> None:
        """Keep one piece of finished work until the next checkpoint, fenced by ``ctx.token``: one EVALSHA."""
        script_keys = [keys.run(ctx.run_id), keys.memo(ctx.run_id)]
        if not self._scripts("record", script_keys, [ctx.token, field, value]):
            raise _fenced(ctx, "record")

    @translate_errors
    def load_records(self, run_id: str) -> dict[str, str]:
        """The work recorded since the run's latest checkpoint, field -> JSON."""
        return text_map(self._r.hgetall(keys.memo(run_id)))

    @translate_errors
    def succeed(
        self,
        ctx: AttemptContext,
        output_json: str,
        *,
        checkpoint: str = "",
        seq: int = 0,
        notes: Notes = NO_NOTES,
    ) -> bool:
        """Record the output and start the retention of every key of the run.

        ``checkpoint`` (with its ``seq``) is the finished checkpoint, written in the same script;
        the one it replaces moves into the run's history, as a save does. False when the run was
        asked to cancel while its last step ran: it ends cancelled, and the finished checkpoint is
        kept, so a replay records the output without running anything.
        """
        args: list[ScriptArg] = [
            ctx.token,
            output_json,
            self.run_retention_s,
            checkpoint,
            seq,
            notes.skipped,
            notes.skip_kinds,
            notes.reused_steps,
            notes.reused_calls,
            self.checkpoint_history,
        ]
        outcome = int(self.do(per_run("succeed", ctx.run_id, _guess(ctx), clock.now_ms(), args)))
        if not outcome:
            raise _fenced(ctx, "output")
        return outcome != SUCCEEDED_CANCELLED

    @translate_errors
    def fail(
        self,
        ctx: AttemptContext,
        *,
        error_type: str,
        message: str,
        traceback: str | None,
        reason: str,
        permanent: bool,
        retry_delay_ms: int,
        counted: bool = True,
        notes: Notes = NO_NOTES,
    ) -> str:
        """Record a failed attempt; returns ``'dead'``, ``'retrying'``, or ``'cancelled'`` when the run
        was asked to cancel while the attempt ran (it ends cancelled instead).

        ``counted=False`` records an infrastructure failure (Redis unreachable mid-attempt): an
        interruption, bounded by ``max_interruptions``, rather than one of ``max_attempts``.
        """
        now = clock.now_ms()
        args: list[ScriptArg] = [
            ctx.token,
            error_type,
            message,
            (traceback or "")[-TRACEBACK_LIMIT:],
            reason,
            "1" if permanent else "0",
            now + retry_delay_ms,
            self.dead_retention_s,
            "1" if counted else "0",
            self.max_interruptions,
            notes.skipped,
            notes.skip_kinds,
            notes.reused_steps,
            notes.reused_calls,
        ]
        outcome = text(self.do(per_run("fail", ctx.run_id, _guess(ctx), now, args)))
        if outcome == "fenced":
            raise _fenced(ctx, "failure")
        return outcome

    @translate_errors
    def dead_letter(
        self,
        run_id: str,
        *,
        reason: str,
        error_type: str,
        message: str,
        graph: str = "",
        inputs_json: str = "",
        state_json: str | None = None,
        idempotency_key: str | None = None,
        max_attempts: int = 1,
    ) -> bool:
        """Dead-letter a run whose message is bad (unknown graph, invalid inputs), without a claim.

        Creates the record from the message's fields when there is none. Not fenced: the
        message itself is bad, whoever runs it. False when the run is already terminal.
        """
        args: list[ScriptArg] = [
            reason,
            error_type,
            message,
            graph,
            inputs_json,
            state_json or "",
            idempotency_key or "",
            max_attempts,
            self.dead_retention_s,
            _digest(inputs_json, state_json) if idempotency_key else "",
        ]
        guess = _idem_guess(graph, idempotency_key, run_id)
        return bool(self.do(per_run("dead_letter", run_id, guess, clock.now_ms(), args)))

    @translate_errors
    def release(self, ctx: AttemptContext) -> str:
        """Give the run back on soft shutdown: retrying, due now; ``'released'``, ``'dead'``, ``'fenced'``,
        or ``'cancelled'`` when the run was asked to cancel (it ends cancelled instead).

        The attempt is an interruption, not one of ``max_attempts``; past ``max_interruptions``
        the run is dead-lettered (``max_interruptions``) so a run cut short forever still ends.
        """
        args: list[ScriptArg] = [ctx.token, self.max_interruptions, self.dead_retention_s]
        outcome = int(self.do(per_run("release", ctx.run_id, _guess(ctx), clock.now_ms(), args)))
        return {0: "fenced", 1: "released", 2: "dead", 3: "cancelled"}[outcome]
