"""The store as an attempt writes to it: create, claim, renew, checkpoint, succeed, fail, release."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from reflexr_graph import clock, errors
from reflexr_graph.core.port import NO_NOTES, AttemptContext, Boundary, Notes, Record
from reflexr_graph.core.tags import Tags, tags_json, tags_of
from reflexr_graph.store import keys, limits, registry
from reflexr_graph.store.base import (
    EVENTS_MAXLEN,
    TRACEBACK_LIMIT,
    _digest,
    _fenced,
    _guess,
    _idem_guess,
)
from reflexr_graph.store.contracts import (
    ClaimArgs,
    ClaimReply,
    CreateArgs,
    Created,
    DeadLetterArgs,
    DeadLettered,
    FailArgs,
    Failed,
    Lease,
    RecordArgs,
    ReleaseArgs,
    Released,
    RenewArgs,
    SaveArgs,
    Saved,
    SucceedArgs,
    Succeeded,
)
from reflexr_graph.store.ops import IDEM_ROUNDS, Eval, Op, QueuedMessage, ScriptArg, cmd, layout, per_run
from reflexr_graph.store.records import (
    Claim,
    ClaimOutcome,
    ForkSeed,
    lane_args,
    pairs_to_map,
    text,
    text_map,
)
from reflexr_graph.store.settings import DEFAULT_RUN_RETENTION_S, StoreSettings
from reflexr_graph.store.versions import latest_checkpoints

__all__ = [
    "Lease",
    "NewRun",
    "QueuedMessage",
    "Slots",
    "StepWriter",
    "create_args",
    "new_run",
]


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
    tags: Tags = field(default_factory=dict)
    """Checked tags (core/tags.py: check_tags): kept on the run and indexed, in the same script."""
    priority: int | None = None
    """The run's priority (config/dispatch.py: PRIORITIES), kept on its record; None for none."""
    message: QueuedMessage | None = None
    """The run's message, when the broker is the store's Redis; None: the caller sends it."""
    parent: str = ""
    """The parent run of a child run (store/children.py), '' for none."""
    parent_token: str = ""
    """The parent attempt's token when the same script records the child in the parent (one
    Redis), '' when it does not."""
    parent_field: str = ""
    """The parent's memo field that records the child."""


def create_args(run: NewRun, now_ms: int, *, expected: str = "", digest: str = "") -> list[ScriptArg]:
    """create_run.lua's ARGV after the per-run prefix: the run, its dispatch deadline, the idem
    key owner the caller expects (``expected``), the request's ``digest``, and the fork's part."""
    fork = run.fork
    return CreateArgs(
        graph=run.graph,
        inputs=run.inputs_json,
        state=run.state_json,
        idempotency_key=run.idempotency_key,
        max_attempts=run.max_attempts,
        due_ms=now_ms + run.dispatch_grace_ms,
        expected_owner=expected,
        trace=run.trace_context,
        digest=digest,
        fork_checkpoint=fork.checkpoint if fork else "",
        fork_seq=fork.seq if fork else 0,
        fork_next_node=fork.next_node if fork else None,
        fork_source=fork.source_run_id if fork else "",
        fork_state_edited=fork.state_edited if fork else False,
        fork_output=fork.output_json if fork else None,
        retention_s=run.retention_s,
        tags=tags_json(run.tags),
        priority=run.priority,
        message=run.message.item if run.message else "",
        parent=run.parent,
        parent_token=run.parent_token,
        parent_field=run.parent_field,
    ).argv()


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

    With ``message``, the script pushes the run's Celery message too, only if it creates the run:
    an existing run named by the key gets no second message, and a run is never recorded
    without its message.
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
        shards = yield from layout()
        extra = [owner_key, keys.events_template(shards.of(run.run_id))]
        if run.message is not None:
            extra.append(run.message.queue_key)
        if run.parent_token:
            extra.extend([keys.run(run.parent), keys.memo(run.parent), keys.mailbox(run.parent)])
        if run.tags:
            shard = shards.of(run.run_id)
            extra.append(keys.tag_indexes(shard))
            extra.extend(keys.tag_index(k, v, shard) for k, v in run.tags.items())
        reply = yield from per_run("create_run", run.run_id, guess, now, args, extra)
        outcome, found = Created(text(reply[0])), text(reply[1])
        if outcome is Created.FENCED:
            raise errors.FencedOut(f"run {run.parent} no longer owns its attempt; its child was not made")
        if outcome is Created.CANCELLED:
            raise errors.CancelRequested(run.parent)
        if outcome is Created.CONFLICT:
            assert key is not None
            raise errors.IdempotencyConflict(graph=run.graph, idempotency_key=key, run_id=found)
        if outcome is not Created.RETRY:
            return found, outcome is Created.CREATED
        expected = found  # another caller took the key since; check the run it names
    raise errors.OperationRefused(f"idempotency key of run {run.run_id} kept changing hands; try again")


class _NoteArgs(TypedDict):
    """The four fields of a script's arguments that carry an attempt's :class:`Notes`."""

    skipped: int
    skip_kinds: str
    reused_steps: int
    reused_calls: int


def _note_args(notes: Notes) -> _NoteArgs:
    """``notes`` as the save, success and failure scripts' arguments take them (store/contracts.py)."""
    return _NoteArgs(
        skipped=notes.skipped,
        skip_kinds=notes.skip_kinds,
        reused_steps=notes.reused_steps,
        reused_calls=notes.reused_calls,
    )


Slots = Sequence[tuple[str, str]]
"""Limit slots an attempt's write gives back: (limit key, slot member)."""


class StepWriter(Protocol):
    """What sends an attempt's per-step writes (a save, a record), each one script call: the
    store's client (``RedisStore.write_step``) or the attempt's held connection
    (store/hot_path.py). Both take the same keys and arguments, built once, by the write."""

    def write_step(
        self, name: str, script_keys: Sequence[str], args: Sequence[ScriptArg], returning: Slots = ()
    ) -> Any:
        """Script ``name``'s reply; the call also gives back the limit slots ``returning``
        (limit key, slot member), whether the script's write was fenced or not."""
        ...


def given_back(
    script_keys: Sequence[str], args: Sequence[ScriptArg], returning: Slots
) -> tuple[Sequence[str], Sequence[ScriptArg]]:
    """A per-step write's keys and arguments with the slots ``returning`` given back by the same
    script: each slot's limit key after its KEYS, each member after its ARGV (save_checkpoint.lua,
    record.lua)."""
    if not returning:
        return script_keys, args
    return (
        [*script_keys, *(keys.limit_slots(key) for key, _ in returning)],
        [*args, *(member for _, member in returning)],
    )


_SAVE_FIELDS = registry.entry("save_checkpoint").arg_names
_NOW, _PAYLOAD, _SEQ, _NEXT_NODE = (_SAVE_FIELDS.index(f) for f in ("now_ms", "payload", "seq", "next_node"))
"""Where the arguments a save changes every time stand in its ARGV (SaveArgs' order)."""


@functools.lru_cache(maxsize=256)
def _saving(token: str, history: int, notes: Notes) -> tuple[ScriptArg, ...]:
    """A save's ARGV (SaveArgs) as an attempt repeats it, built once for its saves rather than at
    every step: each call puts in what changes (now, the payload, seq, the next node)."""
    return tuple(
        SaveArgs(
            now_ms=0,
            token=token,
            payload="",
            seq=0,
            next_node=None,
            events_cap=EVENTS_MAXLEN,
            **_note_args(notes),
            history=history,
        ).argv()
    )


@functools.lru_cache(maxsize=256)
def _save_keys(run_id: str) -> tuple[str, ...]:
    """save_checkpoint.lua's KEYS, built once per run rather than at every step."""
    return keys.run(run_id), keys.ckpt(run_id), keys.events(run_id), keys.memo(run_id)


@functools.lru_cache(maxsize=256)
def _record_keys(run_id: str) -> tuple[str, ...]:
    """record.lua's KEYS."""
    return keys.run(run_id), keys.memo(run_id), keys.lanes(run_id)


_SAVED = {int(s): s for s in Saved}
"""save_checkpoint.lua's reply -> Saved, by a dict rather than the enum's call (a few hundred ns)."""


def save_call(ctx: AttemptContext, boundary: Boundary, history: int) -> tuple[Sequence[str], list[ScriptArg]]:
    """save_checkpoint.lua's keys and arguments, built once per save (``RedisStore.save_checkpoint``)
    for whichever :class:`StepWriter` sends it: the attempt's cached part, then what changes."""
    args = list(_saving(ctx.token, history, boundary.notes))
    # The arguments that change at every save, as Args.argv writes them (a missing node: '').
    args[_NOW], args[_PAYLOAD], args[_SEQ] = clock.now_ms(), boundary.payload, boundary.seq
    next_node = boundary.next_node
    args[_NEXT_NODE] = "" if next_node is None else next_node
    return _save_keys(ctx.run_id), args


def saved(ctx: AttemptContext, reply: Any) -> bool:
    """save_checkpoint.lua's reply: True when the run was asked to cancel; FencedOut when the
    token lost the run."""
    outcome = _SAVED[int(reply)]
    if outcome is Saved.FENCED:
        raise _fenced(ctx, "checkpoint")
    return outcome is Saved.CANCEL_REQUESTED


def record_call(ctx: AttemptContext, record: Record) -> tuple[Sequence[str], list[ScriptArg]]:
    """record.lua's keys and arguments (``RedisStore.save_record``)."""
    lane_field, times = lane_args(ctx, record.lane)
    args = RecordArgs(ctx.token, record.field, record.value, lane_field, times).argv()
    return _record_keys(ctx.run_id), args


def step_write(name: str, script_keys: Sequence[str], args: Sequence[ScriptArg], returning: Slots) -> Op[Any]:
    """One per-step write through the store's client (``RedisStore.write_step``): script ``name``,
    which gives the slots ``returning`` back too; on a cluster store, whose limits' slots are not
    the run's, in their slots right after it, fenced or not."""
    if returning and (yield from layout()).count > 1:
        try:
            return (yield Eval(name, script_keys, args))
        finally:
            yield from limits.give_back(returning)
    return (yield Eval(name, *given_back(script_keys, args, returning)))


# -- the store's table (store/redis_store.py) ---------------------------------------------------


def create_run(
    store: StoreSettings,
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
) -> Op[tuple[str, bool]]:
    """Create a queued run (or a fork, with ``fork``); returns ``(run_id, True)``, or
    ``(existing_id, False)`` if it exists.

    See :func:`new_run`, the operation it runs.
    """
    return new_run(
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
            store.options.run_retention_s,
        )
    )


def claim(
    store: StoreSettings,
    run_id: str,
    token: str,
    *,
    lease_ttl_ms: int,
    graph: str = "",
    idempotency_key: str | None = None,
    worker: str = "",
    version: str = "",
    newest: str = "",
) -> Op[Claim]:
    """Start an attempt under ``token``; see :class:`ClaimOutcome` for what can happen.

    ``graph`` and ``idempotency_key`` are only a hint that saves a round trip when the run
    is dead-lettered here; the run's own key is used either way. ``worker`` names the
    claiming worker on the ``attempt_started`` event, so operators see where each
    attempt ran. ``version`` is the claiming worker's version of the graph: a run on another
    one is not claimed (``ClaimOutcome.VERSION``, with the run's ``version``), nor is a run not
    started yet when ``newest`` (the newest served version) is another; '' checks none.
    """
    now = clock.now_ms()
    args = ClaimArgs(
        token, now + lease_ttl_ms, store.options.dead_retention_s, worker, version, newest
    ).argv()
    guess = _idem_guess(graph, idempotency_key, run_id)
    if store.shards.count > 1 and not keys.same_shard(run_id, guess):
        # Only a foreign producer's id can be outside its key's shard: the claim then asks
        # with the run id, in one slot, and the script names the key if it needs it.
        guess = run_id
    try:
        reply = yield from per_run("claim", run_id, guess, now, args)
    except errors.PayloadUnreadable as exc:
        # The claim took the run (only a claimed run's payloads are read back): the attempt
        # owns it, and records the permanent failure that it cannot read them.
        return Claim(ClaimOutcome.CLAIMED, run_id, token, graph=graph, unreadable=str(exc))
    return _claimed(run_id, token, graph, reply)


def _claimed(run_id: str, token: str, graph: str, reply: Any) -> Claim:
    """claim.lua's reply, read as the :class:`Claim` it tells of."""
    found, memo = ClaimReply.parse([text(v) for v in reply])
    outcome = ClaimOutcome(found.outcome)
    if outcome is ClaimOutcome.MISSING:
        return Claim(outcome, run_id, token)
    if outcome is ClaimOutcome.VERSION:
        return Claim(
            outcome,
            run_id,
            token,
            graph=graph,
            version=found.status,
            pinned=found.attempt == "pinned",
            moving=found.attempt in ("moving", "move"),
        )
    return Claim(
        outcome=outcome,
        run_id=run_id,
        token=token,
        status=found.status,
        attempt=int(found.attempt or 0),
        counted=int(found.counted or 0),
        resume_seq=int(found.resumes or 0),
        graph=found.graph,
        inputs_json=found.inputs,
        state_json=found.state or None,
        idempotency_key=found.idempotency_key,
        max_attempts=int(found.max_attempts or 0),
        trace_context=found.trace,
        checkpoint=found.checkpoint or None,
        records=pairs_to_map(memo),
        tags=tags_of(found.tags),
    )


def renew_lease(store: StoreSettings, run_id: str, token: str, *, lease_ttl_ms: int) -> Op[Lease]:
    """Extend the lease; ``Lease.LOST`` (falsy) when ``token`` lost the run (superseded, reaped,
    cancelled now, or its lease lapsed before this renewal landed), ``Lease.CANCEL_REQUESTED``
    when it holds but the run is to stop at its next boundary."""
    now = clock.now_ms()
    args = RenewArgs(run_id, token, now + lease_ttl_ms, now).argv()
    script_keys = [keys.run(run_id), keys.leases(store.shards.of(run_id))]
    return Lease(int((yield Eval("renew_lease", script_keys, args))))


def load_checkpoint(run_id: str) -> Op[str | None]:
    """The latest checkpoint's JSON, or None (the claim returns it; this is for inspection)."""
    [(_seq, checkpoint, _inputs)] = yield from latest_checkpoints([run_id])
    return checkpoint


def load_records(store: StoreSettings, run_id: str) -> Op[dict[str, str]]:
    """The work recorded since the run's latest checkpoint, field -> JSON."""
    found = text_map((yield cmd("hgetall", keys.memo(run_id))))
    return {name: store.options.codec.decode(value, run_id, field="record") for name, value in found.items()}


def succeed(
    store: StoreSettings,
    ctx: AttemptContext,
    output_json: str,
    *,
    checkpoint: str = "",
    seq: int = 0,
    notes: Notes = NO_NOTES,
) -> Op[bool]:
    """Record the output and start the retention of every key of the run.

    ``checkpoint`` (with its ``seq``) is the finished checkpoint, written in the same script;
    the one it replaces moves into the run's history, as a save does. False when the run was
    asked to cancel while its last step ran: it ends cancelled, and the finished checkpoint is
    kept, so a replay records the output without running anything.
    """
    args = SucceedArgs(
        token=ctx.token,
        output=output_json,
        retention_s=store.options.run_retention_s,
        checkpoint=checkpoint,
        seq=seq,
        **_note_args(notes),
        history=store.options.checkpoint_history,
    ).argv()
    outcome = Succeeded(int((yield from per_run("succeed", ctx.run_id, _guess(ctx), clock.now_ms(), args))))
    if outcome is Succeeded.FENCED:
        raise _fenced(ctx, "output")
    return outcome is not Succeeded.CANCELLED


def fail(
    store: StoreSettings,
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
) -> Op[str]:
    """Record a failed attempt; returns ``'dead'``, ``'retrying'``, or ``'cancelled'`` when the run
    was asked to cancel while the attempt ran (it ends cancelled instead).

    ``counted=False`` records an infrastructure failure (Redis unreachable mid-attempt): an
    interruption, bounded by ``max_interruptions``, rather than one of ``max_attempts``.
    """
    now = clock.now_ms()
    args = FailArgs(
        token=ctx.token,
        error_type=error_type,
        message=message,
        traceback=(traceback or "")[-TRACEBACK_LIMIT:],
        reason=reason,
        permanent=permanent,
        retry_due_ms=now + retry_delay_ms,
        dead_retention_s=store.options.dead_retention_s,
        counted=counted,
        max_interruptions=store.options.max_interruptions,
        **_note_args(notes),
    ).argv()
    outcome = Failed(text((yield from per_run("fail", ctx.run_id, _guess(ctx), now, args))))
    if outcome is Failed.FENCED:
        raise _fenced(ctx, "failure")
    return outcome.value


def dead_letter(
    store: StoreSettings,
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
) -> Op[bool]:
    """Dead-letter a run whose message is bad (unknown graph, invalid inputs), without a claim.

    Creates the record from the message's fields when there is none. Not fenced: the
    message itself is bad, whoever runs it. False when the run is already terminal.
    """
    args = DeadLetterArgs(
        reason=reason,
        error_type=error_type,
        message=message,
        graph=graph,
        inputs=inputs_json,
        state=state_json,
        idempotency_key=idempotency_key,
        max_attempts=max_attempts,
        dead_retention_s=store.options.dead_retention_s,
        digest=_digest(inputs_json, state_json) if idempotency_key else "",
    ).argv()
    guess = _idem_guess(graph, idempotency_key, run_id)
    template = [keys.events_template(store.shards.of(run_id))]
    outcome = DeadLettered(
        int((yield from per_run("dead_letter", run_id, guess, clock.now_ms(), args, template)))
    )
    return outcome is DeadLettered.DEAD


def release(store: StoreSettings, ctx: AttemptContext) -> Op[str]:
    """Give the run back on soft shutdown: retrying, due now; ``'released'``, ``'dead'``, ``'fenced'``,
    or ``'cancelled'`` when the run was asked to cancel (it ends cancelled instead).

    The attempt is an interruption, not one of ``max_attempts``; past ``max_interruptions``
    the run is dead-lettered (``max_interruptions``) so a run cut short forever still ends.
    """
    args = ReleaseArgs(ctx.token, store.options.max_interruptions, store.options.dead_retention_s).argv()
    outcome = Released(int((yield from per_run("release", ctx.run_id, _guess(ctx), clock.now_ms(), args))))
    return outcome.name.lower()
