"""What the reaper asks of the store: lapsed leases, the due set, runs waiting for a worker, the lock."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from reflexr_graph import clock
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from reflexr_graph.store.contracts import (
    AckDueArgs,
    HoldArgs,
    Lock,
    LockReleaseArgs,
    PruneArgs,
    ReapArgs,
    Reaped,
    RescheduleArgs,
    TickArgs,
    TickReply,
    Unserved,
)
from reflexr_graph.store.ops import Eval, Op, batch, cmd, layout, per_run
from reflexr_graph.store.records import text
from reflexr_graph.store.settings import StoreSettings

PRUNE_BATCH = 1000
TAG_PRUNE_BATCH = 200
"""Entries of one tag index, the oldest, that one prune call looks at."""
TAG_INDEXES_PER_CALL = 50
"""About how many tag indexes of each shard one prune call looks at (an SSCAN's COUNT)."""
"""Index entries of each terminal status one prune call looks at, at most."""
TICK_BATCH = 100
"""Lapsed leases and due runs one reaper pass handles, at most."""
PRUNED: tuple[Status, ...] = (Status.SUCCEEDED, Status.DEAD, Status.CANCELLED)
"""The status sets prune looks at, in reaper_tick.lua's KEYS order."""


def _window(reply: list[Any]) -> tuple[int, int] | None:
    """A pass mark's answer (``lua/_pass.lua``): {from, to} ms, or {} for no restart."""
    return (int(reply[0]), int(reply[1])) if reply else None


def _widest(windows: Iterable[tuple[int, int] | None]) -> tuple[int, int] | None:
    """One window spanning every shard's (each shard's primary restarts or fails over on its own)."""
    found = [w for w in windows if w is not None]
    return (min(w[0] for w in found), max(w[1] for w in found)) if found else None


def _tick_keys(shard: int) -> list[str]:
    """reaper_tick.lua's KEYS for one shard: its lock, leases, due set, pruned status sets, pass mark."""
    return [
        keys.reaper_lock(shard),
        keys.leases(shard),
        keys.due(shard),
        *(keys.status_set(s, shard) for s in PRUNED),
        keys.reaper_pass(shard),
        keys.children_ended(shard),
    ]


def _tick_reply(reply: list[Any]) -> TickReply:
    lock, lapsed, due, *finished, restart, next_due, wake, ended = reply
    return TickReply(
        lock=Lock(text(lock)),
        lapsed=[text(m) for m in lapsed],
        due=[(text(due[i]), float(due[i + 1])) for i in range(0, len(due), 2)],
        prunable={s.value: [text(m) for m in found] for s, found in zip(PRUNED, finished, strict=True)},
        restart=_window(restart),
        next_due=float(next_due[1]) if next_due else None,
        wake=float(wake),
        ended=[text(m) for m in ended],
    )


def tick(shards: list[int], args: TickArgs) -> Op[TickReply]:
    """One reaper pass's reads over ``shards``, each shard's script in one pipeline, merged."""
    replies = yield batch([Eval("reaper_tick", _tick_keys(shard), args.argv()) for shard in shards])
    return _merge_ticks([_tick_reply(reply) for reply in replies], shards)


def lowest(index_of: Callable[[int], str], upto: int, limit: int) -> Op[list[tuple[str, float]]]:
    """The ``limit`` lowest entries scored at most ``upto`` of every shard's ``index_of(shard)``."""
    shards = yield from layout()
    pages = yield batch(
        [
            cmd("zrangebyscore", index_of(shard), "-inf", upto, start=0, num=limit, withscores=True)
            for shard in shards.all
        ]
    )
    rows = [(text(m), float(s)) for page in pages for m, s in page]
    return sorted(rows, key=lambda row: (row[1], row[0]))[:limit]


def prune_tags(cursors: dict[int, int], limit: int) -> Op[int]:
    """prune_tag_indexes's walk: per shard, an SSCAN of its tag index names, then per name the
    oldest entries and one prune_tag.lua (a round trip each, as they depend on each other)."""
    shards = yield from layout()
    dropped = 0
    for shard in shards.all:
        names_key = keys.tag_indexes(shard)
        cursor, names = yield cmd("sscan", names_key, cursors.get(shard, 0), count=TAG_INDEXES_PER_CALL)
        cursors[shard] = int(cursor)
        for name in map(text, names):
            run_ids = [text(m) for m in (yield cmd("zrange", name, 0, limit - 1))]
            run_keys = [keys.run(run_id) for run_id in run_ids]
            dropped += int((yield Eval("prune_tag", [names_key, name, *run_keys], run_ids)))
    return dropped


def _merge_ticks(replies: list[TickReply], shards: list[int]) -> TickReply:
    """One reply for the pass: the held shards' finds together; the lock TAKEN when any shard was
    taken, HELD when some were held, OTHER when this reaper holds none."""
    held = [(shard, r) for shard, r in zip(shards, replies, strict=True) if r.lock is not Lock.OTHER]
    mine = [r for _, r in held]
    lock = Lock.OTHER if not mine else Lock.TAKEN if any(r.lock is Lock.TAKEN for r in mine) else Lock.HELD
    next_due = [r.next_due for r in mine if r.next_due is not None]
    return TickReply(
        lock=lock,
        lapsed=[m for r in mine for m in r.lapsed],
        due=sorted((row for r in mine for row in r.due), key=lambda row: (row[1], row[0])),
        prunable={s.value: [m for r in mine for m in r.prunable[s.value]] for s in PRUNED},
        restart=_widest(r.restart for r in mine),
        next_due=min(next_due) if next_due else None,
        # The soonest of every shard's: a held shard's next work, or another reaper's lock lapsing.
        wake=min((r.wake for r in replies), default=0.0),
        shards=tuple(shard for shard, _ in held),
        ended=[m for r in mine for m in r.ended],
    )


# -- the store's table (store/redis_store.py) ---------------------------------------------------


def reaper_tick(
    store: StoreSettings,
    owner: str,
    lock_ttl_ms: int,
    now_ms: int | None = None,
    *,
    shards: Iterable[int] | None = None,
    idle_ms: int | None = None,
    margin_ms: int | None = None,
    prune: bool = True,
) -> Op[TickReply]:
    """One reaper pass's reads over ``shards`` (default: every shard of the store), in one
    pipeline: per shard, one script takes or keeps the shard's lock for ``owner`` and, when it
    holds it, reads the lapsed leases, the due runs, the finished runs past their retention,
    the due score of the first due entry after the runs returned, and when to wake next. The
    replies are merged into one (its ``shards``: the ones held; its ``wake``: the soonest).

    ``idle_ms`` is the longest the reaper may sleep (the lock TTL unless given), ``margin_ms``
    how long past that wake the lock is kept (none unless given: the lock TTL then bounds it).
    ``prune`` False skips the read of the finished runs past retention (``prunable`` is empty).
    It changes no run: :meth:`reap`, the dispatch and :meth:`prune` change each run found,
    each re-checking it in its own script.
    """
    now = clock.now_ms() if now_ms is None else now_ms
    order = list(store.shards.all if shards is None else shards)
    args = TickArgs(
        owner,
        lock_ttl_ms,
        now,
        TICK_BATCH,
        store.options.run_retention_s,
        store.options.dead_retention_s,
        lock_ttl_ms if idle_ms is None else idle_ms,
        0 if margin_ms is None else margin_ms,
        prune,
    )
    return tick(order, args)


def reap(
    store: StoreSettings,
    now_ms: int | None = None,
    *,
    limit: int = TICK_BATCH,
    outage: tuple[int, int] | None = None,
    lapsed: list[str] | None = None,
    lease_ttl_ms: int | None = None,
) -> Op[list[str]]:
    """Recover runs whose lease lapsed: each is re-checked and changed by one script call.

    Each counts as a failed ``abandoned`` attempt; the run is dead-lettered when out of
    attempts, else made due now. A lease that lapsed inside ``outage`` (a window, in epoch
    ms, in which the caller found Redis unreachable, or that a pass found Redis restarted
    in: :meth:`reaper_tick`) was lost to the outage: that attempt is an
    interruption (``store_unavailable``) instead. Returns the ids of the runs recovered.
    ``lapsed`` is the leases a reaper tick found (:meth:`reaper_tick`), else they are read here.
    With the fleet's ``lease_ttl_ms``, an abandoned attempt's event tells when its heartbeat
    last renewed its lease (``last_beat_at``), which the console's chart ends its bar at.
    """
    now = clock.now_ms() if now_ms is None else now_ms
    if lapsed is None:
        lapsed = [m for m, _ in (yield from lowest(keys.leases, now, limit))]
    args = ReapArgs(
        dead_retention_s=store.options.dead_retention_s,
        outage_from_ms=outage[0] if outage else None,
        outage_to_ms=outage[1] if outage else None,
        max_interruptions=store.options.max_interruptions,
        lease_ttl_ms=lease_ttl_ms,
    ).argv()
    handled: list[str] = []
    for run_id in lapsed:
        outcome = Reaped(text((yield from per_run("reap", run_id, run_id, now, args))))
        if outcome in (Reaped.DEAD, Reaped.RETRYING):
            handled.append(run_id)
    return handled


def due(now_ms: int | None = None, *, limit: int = TICK_BATCH) -> Op[list[tuple[str, float]]]:
    """Runs that need a Celery message sent: ``(run_id, due score)``, earliest first."""
    now = clock.now_ms() if now_ms is None else now_ms
    return lowest(keys.due, now, limit)


def ack_due(store: StoreSettings, run_id: str, score: float) -> Op[bool]:
    """Drop the entry after its message was sent, unless it was rescheduled since."""
    due_key = keys.due(store.shards.of(run_id))
    return bool((yield Eval("ack_due", [due_key], AckDueArgs(run_id, repr(float(score))).argv())))


def reschedule_due(store: StoreSettings, run_id: str, score: float, *, base_ms: int, cap_ms: int) -> Op[int]:
    """After sending a due run's message, keep its entry as a safety net, later; the wait in ms or 0.

    A worker SIGKILLed after prefetching the message but before claiming the run takes
    the message with it until the broker's visibility timeout; the entry brings the run
    back sooner. The wait doubles with each send (``base_ms``, twice that, ... up to
    ``cap_ms``), and the claim removes the entry and resets the count.
    """
    args = RescheduleArgs(run_id, score, clock.now_ms(), base_ms, cap_ms).argv()
    due_key = keys.due(store.shards.of(run_id))
    return int((yield Eval("reschedule_due", [due_key, keys.run(run_id)], args)))


def bump_due(store: StoreSettings, run_id: str, delay_ms: int) -> Op[bool]:
    """Move an existing due entry to now + ``delay_ms`` (sending its message failed)."""
    due_key = keys.due(store.shards.of(run_id))
    return bool((yield cmd("zadd", due_key, {run_id: clock.now_ms() + delay_ms}, xx=True, ch=True)))


def postpone_due(store: StoreSettings, run_ids: Iterable[str], delay_ms: int) -> Op[None]:
    """Move the existing due entries of ``run_ids`` to now + ``delay_ms``, one round trip.

    XX GT: an entry a claim removed stays removed, and one rescheduled later meanwhile stays.
    """
    until = clock.now_ms() + delay_ms
    yield batch(
        [
            cmd("zadd", keys.due(store.shards.of(run_id)), {run_id: until}, xx=True, gt=True)
            for run_id in run_ids
        ]
    )


def prune(
    store: StoreSettings,
    now_ms: int | None = None,
    *,
    limit: int = PRUNE_BATCH,
    found: dict[str, list[str]] | None = None,
) -> Op[int]:
    """Drop index entries of terminal runs whose keys expired; returns how many were dropped.

    Redis expires the per-run keys but not their entries in the global indexes, so without
    this the indexes grow with every run ever finished. Each call looks at no more than
    ``limit`` of the oldest entries of each terminal status set, past its retention (a
    ZRANGEBYSCORE from the low end: O(log N + limit), whatever the store holds), and prunes
    them in one pipelined round trip. The reaper calls it with what its tick found (``found``:
    run ids by status, :meth:`reaper_tick`), about once a minute, and at every pass while a
    read comes back full, so it keeps up with a tick's read of finished runs a pass per
    status. Each run is dropped from the one status set it is in (and from ``rg:all``, and
    ``rg:dead`` for a dead run), nothing else.
    """
    now = clock.now_ms() if now_ms is None else now_ms
    if found is None:
        run_s, dead_s = store.options.run_retention_s, store.options.dead_retention_s
        retention_s = {Status.SUCCEEDED: run_s, Status.CANCELLED: run_s, Status.DEAD: dead_s}
        found = {}
        for status, seconds in retention_s.items():
            rows = yield from lowest(partial(keys.status_set, status), now - seconds * 1000, limit)
            found[status.value] = [m for m, _ in rows]
    queued = [(status, run_id) for status, run_ids in found.items() for run_id in run_ids]
    if not queued:
        return 0
    # prune.lua never answers {'idem', ...}: it touches no idempotency key.
    calls = [
        Eval(
            "prune",
            keys.script_keys(run_id, run_id, store.shards),
            [run_id, now, run_id, *PruneArgs(status).argv()],
        )
        for status, run_id in queued
    ]
    return sum(int(done) for done in (yield batch(calls)))


def prune_tag_indexes(cursors: dict[int, int], *, limit: int = TAG_PRUNE_BATCH) -> Op[int]:
    """Drop tag index entries of runs whose keys expired; returns how many were dropped.

    A listing by tag drops the stale entries it meets, but a tag nobody lists would keep its
    index for ever: each call walks on through every shard's set of tag index names
    (``cursors``, shard -> SSCAN cursor, kept by the caller between calls), some
    :data:`TAG_INDEXES_PER_CALL` of them a shard, and looks at the ``limit`` oldest entries
    of each (prune_tag.lua), so an index goes, and its name with it, once its runs have.
    """
    return prune_tags(cursors, limit)


def hold_unserved(
    store: StoreSettings, run_id: str, *, grace_ms: int, recheck_ms: int, message: str
) -> Op[Unserved]:
    """Keep a due run of a graph no live worker serves; dead-letter it once it waited ``grace_ms``.

    Returns ``BEGAN`` or ``HELD`` (looked at again in ``recheck_ms``), ``DEAD``
    (``unknown_graph``), ``SKIP`` (claimed or finished meanwhile) or ``GONE``. The wait starts
    when a run is first found unserved and ends at its next claim.
    """
    now = clock.now_ms()
    args = HoldArgs(grace_ms, now + recheck_ms, store.options.dead_retention_s, message).argv()
    return Unserved(text((yield from per_run("hold_unserved", run_id, run_id, now, args))))


def release_lock(store: StoreSettings, owner: str, shards: Iterable[int] | None = None) -> Op[bool]:
    """Release the reaper locks of ``shards`` (default: every shard) that ``owner`` still holds;
    True if it held any."""
    order = store.shards.all if shards is None else shards
    calls = [
        Eval("lock_release", [keys.reaper_lock(shard)], LockReleaseArgs(owner).argv()) for shard in order
    ]
    return any(int(released) for released in (yield batch(calls)))


def nudge_reaper() -> Op[None]:
    """Wake the reapers now: a run was just made due soon (one PUBLISH, no key written)."""
    yield cmd("publish", keys.REAPER_NUDGE, b"")


def nudge_channels(shards: keys.Shards) -> list[str]:
    """The channels a reaper listens on: the nudges (:func:`nudge_reaper`), and each shard's note that a
    child run ended (published on a channel named as its set, by the script that ended the child:
    ``_lib.lua``), so its parent is told at once."""
    return [keys.REAPER_NUDGE, *(keys.children_ended(shard) for shard in shards.all)]
