"""RedisStore: runs, checkpoints and their history, leases, run events, the dead-letter index and
the worker registry.

The class is the blocking executor (``StoreBase``, store/base.py: the client, the scripts,
``do``/``handle``, the clock, ``subscribe``) plus one table of its operations. Each entry names
a sans-IO operation of a concern module (attempts.py, reads.py, recovery.py...), which takes the
store's settings (``store_operation``) or none (``plain_operation``) and the call's arguments;
the descriptor (store/operation.py) makes it a method run by ``do`` (whose ``handle`` translates errors),
signed, documented and typed as the operation is. The few methods written here say why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from reflexr_graph.core.limits import Grant, LimitRequest
from reflexr_graph.core.port import AttemptContext, Boundary, Record
from reflexr_graph.store import (
    attempts,
    children,
    history,
    interventions,
    keys,
    limits,
    reads,
    recovery,
    streams,
    versions,
    waits,
    workers,
)
from reflexr_graph.store.attempts import Slots, StepWriter
from reflexr_graph.store.base import EVENTS_MAXLEN, TRACEBACK_LIMIT, StoreBase, _fenced, translate_errors
from reflexr_graph.store.operation import plain_operation, store_operation
from reflexr_graph.store.ops import ScriptArg
from reflexr_graph.store.settings import (
    DEFAULT_CHECKPOINT_HISTORY,
    DEFAULT_DEAD_RETENTION_S,
    DEFAULT_MAX_INTERRUPTIONS,
    DEFAULT_RUN_RETENTION_S,
    StoreOptions,
)

__all__ = [
    "DEFAULT_CHECKPOINT_HISTORY",
    "DEFAULT_DEAD_RETENTION_S",
    "DEFAULT_MAX_INTERRUPTIONS",
    "DEFAULT_RUN_RETENTION_S",
    "EVENTS_MAXLEN",
    "TRACEBACK_LIMIT",
    "RedisStore",
    "StoreOptions",
    "translate_errors",
]


class RedisStore(StoreBase):
    """The Redis adapter of ``core.port.CheckpointPort``, plus everything the fleet and surfaces need.

    Tokens passed to :meth:`claim` must be unique per attempt (a fresh uuid4): a claim with
    the token that already owns the run is taken for a retried call and answered ``claimed``.
    """

    # -- child runs (store/children.py) ------------------------------------------------------------
    make_child = store_operation(children.make_child)
    wait_for_children = plain_operation(children.wait_for_children)
    tell_parent = plain_operation(children.tell_parent)
    children_of = plain_operation(children.children_of)
    child_output = plain_operation(children.child_output)

    # -- checkpoint history (store/history.py) -----------------------------------------------------
    checkpoints = plain_operation(history.checkpoint_list)
    read_checkpoint = plain_operation(history.saved_checkpoint)

    # -- interventions (store/interventions.py) ----------------------------------------------------
    cancel = store_operation(interventions.cancel)
    replay = plain_operation(interventions.replay)
    purge = plain_operation(interventions.purge)

    # -- reads (store/reads.py) --------------------------------------------------------------------
    get = plain_operation(reads.run_record)
    trace_context = plain_operation(reads.trace_context)
    dispatch_of = plain_operation(reads.dispatch_of)
    graph_of = plain_operation(reads.graph_of)
    traceback = plain_operation(reads.last_traceback)
    checkpoint_info = plain_operation(reads.latest_checkpoint)
    events = store_operation(reads.events)
    list_runs = plain_operation(reads.list_runs)
    dead_letters = plain_operation(reads.dead_letters)

    # -- the run's stream (store/streams.py) -------------------------------------------------------
    append_stream = plain_operation(streams.append_stream)

    # -- live workers (store/workers.py) -----------------------------------------------------------
    worker_beat = plain_operation(workers.worker_beat)
    worker_alive = plain_operation(workers.worker_alive)
    worker_leave = plain_operation(workers.worker_leave)
    live_worker_count = plain_operation(workers.live_worker_count)
    live_workers = plain_operation(workers.live_workers)
    serving = plain_operation(workers.serving)

    # -- waits and signals (store/waits.py) --------------------------------------------------------
    wait = plain_operation(waits.wait)
    call_retried = plain_operation(waits.call_retried)
    signal = plain_operation(waits.signal)
    open_event = plain_operation(waits.open_event)
    settle_event = plain_operation(waits.settle_event)

    # -- graph versions (store/versions.py) --------------------------------------------------------
    publish_versions = plain_operation(versions.publish_versions)
    stored_checkpoints = plain_operation(versions.stored_checkpoints)
    live_versions = plain_operation(versions.live_versions)
    published_versions = plain_operation(versions.published_versions)
    hold_version = plain_operation(versions.hold_version)
    held_versions = plain_operation(versions.held_versions)
    unhold_version = plain_operation(versions.unhold_version)
    held_for_version = plain_operation(versions.held_sample)
    wake_version = plain_operation(versions.wake_version)

    # -- fleet-wide limits (store/limits.py) -------------------------------------------------------
    release_slot = plain_operation(limits.release_slot)
    renew_slots = plain_operation(limits.renew_slots)
    limit_usage = plain_operation(limits.limit_usage)

    def acquire_limit(self, ctx: AttemptContext, request: LimitRequest, *, slot_ttl_ms: int) -> Grant:
        """One EVALSHA: a grant (maybe of a rate token reserved up to ``request.max_reserve_ms``
        ahead, with the wait before it), or a refusal with the wait the rate requires; FencedOut if
        the attempt no longer owns the run (:func:`limits.acquire`)."""
        # Written: a cluster store first names the key in the control slot's index, once per
        # process, which this store's cache of the keys it indexed remembers (process state).
        if self.shards.count > 1:
            self.do(limits.index_limit(request, self._indexed_limits))
        return self.do(limits.acquire(ctx, request, slot_ttl_ms=slot_ttl_ms))

    # -- recovery: the reaper's reads and writes (store/recovery.py) --------------------------------
    reaper_tick = store_operation(recovery.reaper_tick)
    reap = store_operation(recovery.reap)
    due = plain_operation(recovery.due)
    ack_due = store_operation(recovery.ack_due)
    reschedule_due = store_operation(recovery.reschedule_due)
    bump_due = store_operation(recovery.bump_due)
    postpone_due = store_operation(recovery.postpone_due)
    prune = store_operation(recovery.prune)
    prune_tag_indexes = plain_operation(recovery.prune_tag_indexes)
    hold_unserved = store_operation(recovery.hold_unserved)
    release_lock = store_operation(recovery.release_lock)
    nudge_reaper = plain_operation(recovery.nudge_reaper)

    # Written: a subscription is no request and reply, so no operation (StoreBase.subscribe, which
    # translates its errors).

    def reaper_nudges(self) -> redis.client.PubSub:
        """A subscription to the reapers' nudges (:meth:`nudge_reaper`), subscribed now, and to each
        shard's note that a child run ended (published on a channel named as its set, by the
        script that ended the child: ``_lib.lua``), so its parent is told at once."""
        return self.subscribe(*recovery.nudge_channels(self.shards))

    def schedule_nudges(self) -> redis.client.PubSub:
        """A subscription, subscribed now, to the note ``schedule_put.lua`` publishes when it adds,
        changes or resumes a schedule (on a channel of :data:`keys.SCHEDULE_NEXT`'s name), so a
        sleeping scheduler reads the next fire times at once (fleet/scheduler.py)."""
        return self.subscribe(keys.SCHEDULE_NEXT)

    # -- an attempt's writes (store/attempts.py) ---------------------------------------------------
    create_run = store_operation(attempts.create_run)
    claim = store_operation(attempts.claim)
    renew_lease = store_operation(attempts.renew_lease)
    load_checkpoint = plain_operation(attempts.load_checkpoint)
    load_records = store_operation(attempts.load_records)
    succeed = store_operation(attempts.succeed)
    fail = store_operation(attempts.fail)
    dead_letter = store_operation(attempts.dead_letter)
    release = store_operation(attempts.release)

    # Written: a step's save and record pick their executor per call (``via``: the attempt's held
    # connection, store/hot_path.py, or this store), and this store is itself a StepWriter.

    def save_checkpoint(
        self, ctx: AttemptContext, boundary: Boundary, *, returning: Slots = (), via: StepWriter | None = None
    ) -> bool:
        """Replace the checkpoint by ``boundary``'s (:class:`Boundary`), fenced by ``ctx.token``: one
        EVALSHA, one round trip.

        True when the run was asked to cancel (``cancel`` without ``now``): the attempt stops at
        this boundary. The same call tells it, so a cancel costs no extra round trip per step.
        FencedOut when the token lost the run.

        It runs at every step boundary, so its script takes only the keys it touches rather
        than the per-run prelude's. ``boundary.notes`` (boundaries the attempt could not save since
        its last write, work it reused) are recorded in the same call, and the work recorded since
        the previous checkpoint is dropped, when there is any: this one holds it. The payload is
        written once, as the latest and into the history at the same time; the same call trims
        the history to ``checkpoint_history``. ``returning`` (limit key, slot member) are the slots
        of the step that just ended, given back with it, fenced or not (:meth:`write_step`).
        ``via`` sends it: the attempt's held connection (store/hot_path.py), the store's client
        when None."""
        if via is None:
            self.keep_clock()  # as ``do`` does, but before save_call reads the clock
        script_keys, args = attempts.save_call(ctx, boundary, self.options.checkpoint_history)
        writer = self if via is None else via
        return attempts.saved(ctx, writer.write_step("save_checkpoint", script_keys, args, returning))

    def save_record(
        self, ctx: AttemptContext, record: Record, *, returning: Slots = (), via: StepWriter | None = None
    ) -> None:
        """Keep ``record`` (:class:`Record`) until the next checkpoint, fenced by ``ctx.token``: one
        EVALSHA.

        ``returning`` (limit key, slot member) are slots given back with it, fenced or not
        (:meth:`write_step`); a branch step's ``record.lane`` is kept in the run's lanes
        (``keys.lanes``) by the same script. ``via`` sends it, as :meth:`save_checkpoint`'s.
        FencedOut when the token lost the run."""
        script_keys, args = attempts.record_call(ctx, record)
        writer = self if via is None else via
        if not writer.write_step("record", script_keys, args, returning):
            raise _fenced(ctx, "record")

    def write_step(
        self, name: str, script_keys: Sequence[str], args: Sequence[ScriptArg], returning: Slots = ()
    ) -> Any:
        """The store's client as a :class:`StepWriter`: one call of script ``name``, which gives the
        slots ``returning`` back too; on a cluster store, whose limits' slots are not the run's, in
        their slots right after it."""
        return self.do(attempts.step_write(name, script_keys, args, returning))
