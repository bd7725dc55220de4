"""What the reaper asks of the store: lapsed leases, the due set, runs waiting for a worker, the lock."""

from __future__ import annotations

from typing import Any

from redis import exceptions as redis_errors

from reflexr_graph import clock
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from reflexr_graph.store.base import StoreBase, translate_errors
from reflexr_graph.store.ops import ScriptArg, per_run
from reflexr_graph.store.records import text

PRUNE_BATCH = 1000
"""Index entries of each terminal status one prune call looks at, at most."""


class Recovery(StoreBase):
    """Recovering runs: reaping lapsed leases, due messages, unserved graphs, pruning, the reaper lock."""

    # -- reaper --------------------------------------------------------------------------------

    @translate_errors
    def reap(
        self, now_ms: int | None = None, *, limit: int = 100, outage: tuple[int, int] | None = None
    ) -> list[str]:
        """Recover runs whose lease lapsed: each is re-checked and changed by one script call.

        Each counts as a failed ``abandoned`` attempt; the run is dead-lettered when out of
        attempts, else made due now. A lease that lapsed inside ``outage`` (a window, in epoch
        ms, in which the caller found Redis unreachable, or that :meth:`mark_pass` found Redis
        restarted in) was lost to the outage: that attempt is an interruption
        (``store_unavailable``) instead. Returns the ids of the runs recovered.
        """
        now = clock.now_ms() if now_ms is None else now_ms
        lapsed = self._r.zrangebyscore(keys.LEASES, "-inf", now, start=0, num=limit)
        window: list[ScriptArg] = [outage[0], outage[1]] if outage else ["", ""]
        args: list[ScriptArg] = [self.dead_retention_s, *window, self.max_interruptions]
        handled: list[str] = []
        for member in lapsed:
            run_id = text(member)
            outcome = text(self.do(per_run("reap", run_id, run_id, now, args)))
            if outcome in ("dead", "retrying"):
                handled.append(run_id)
        return handled

    @translate_errors
    def mark_pass(self, now_ms: int | None = None) -> tuple[int, int] | None:
        """Record a pass of the reaper holding the lock; the window since the last one if Redis
        restarted or failed over in between, else None.

        The window (epoch ms, from the last pass to now) is evidence of an outage that holds even
        for a reaper that was not running during it, or did not hold the lock: a server answers
        with a new ``run_id`` each time it starts, and a promoted replica with its own. A server
        whose ACL refuses INFO gives no evidence: its outages are then known only to the reapers
        that saw them.
        """
        now = clock.now_ms() if now_ms is None else now_ms
        try:
            server = text(self._r.info("server")["run_id"])
        except redis_errors.ResponseError:
            return None
        pipe = self._r.pipeline(transaction=True)
        pipe.get(keys.REAPER_PASS)
        pipe.set(keys.REAPER_PASS, f"{now} {server}")
        last, _ = pipe.execute()
        if last is None:
            return None
        at, _, before = text(last).partition(" ")
        if before == server or not at.isdigit():
            return None
        return int(at), now

    @translate_errors
    def due(self, now_ms: int | None = None, *, limit: int = 100) -> list[tuple[str, float]]:
        """Runs that need a Celery message sent: ``(run_id, due score)``, earliest first."""
        now = clock.now_ms() if now_ms is None else now_ms
        rows: list[Any] = self._r.zrangebyscore(keys.DUE, "-inf", now, start=0, num=limit, withscores=True)
        return [(text(member), float(score)) for member, score in rows]

    @translate_errors
    def ack_due(self, run_id: str, score: float) -> bool:
        """Drop the entry after its message was sent, unless it was rescheduled since."""
        return bool(self._scripts("ack_due", [keys.DUE], [run_id, repr(float(score))]))

    @translate_errors
    def reschedule_due(self, run_id: str, score: float, *, base_ms: int, cap_ms: int) -> int:
        """After sending a due run's message, keep its entry as a safety net, later; the wait in ms or 0.

        A worker SIGKILLed after prefetching the message but before claiming the run takes
        the message with it until the broker's visibility timeout; the entry brings the run
        back sooner. The wait doubles with each send (``base_ms``, twice that, ... up to
        ``cap_ms``), and the claim removes the entry and resets the count.
        """
        args: list[ScriptArg] = [run_id, score, clock.now_ms(), base_ms, cap_ms]
        return int(self._scripts("reschedule_due", [keys.DUE, keys.run(run_id)], args))

    @translate_errors
    def bump_due(self, run_id: str, delay_ms: int) -> bool:
        """Move an existing due entry to now + ``delay_ms`` (sending its message failed)."""
        changed = self._r.zadd(keys.DUE, {run_id: clock.now_ms() + delay_ms}, xx=True, ch=True)
        return bool(changed)

    @translate_errors
    def prune(self, now_ms: int | None = None, *, limit: int = PRUNE_BATCH) -> int:
        """Drop index entries of terminal runs whose keys expired; returns how many were dropped.

        Redis expires the per-run keys but not their entries in the global indexes, so without
        this the indexes grow with every run ever finished. Each call looks at no more than
        ``limit`` of the oldest entries of each terminal status set, past its retention (a
        ZRANGEBYSCORE from the low end: O(log N + limit), whatever the store holds), and prunes
        them in one pipelined round trip per status. The reaper calls it every tick, so it keeps
        up with up to ``limit`` finished runs per second per status.
        """
        now = clock.now_ms() if now_ms is None else now_ms
        retention_s = {Status.SUCCEEDED: self.run_retention_s, Status.CANCELLED: self.run_retention_s}
        retention_s[Status.DEAD] = self.dead_retention_s
        pruned = 0
        for status, seconds in retention_s.items():
            old = self._r.zrangebyscore(keys.status_set(status), "-inf", now - seconds * 1000, 0, limit)
            if not old:
                continue
            pipe = self._r.pipeline(transaction=False)
            for member in old:
                run_id = text(member)
                # prune.lua never answers {'idem', ...}: it touches no idempotency key.
                self._scripts.queue(pipe, "prune", keys.script_keys(run_id, run_id), [run_id, now, run_id])
            pruned += sum(int(done) for done in pipe.execute())
        return pruned

    # -- graphs without a live worker -----------------------------------------------------------

    @translate_errors
    def hold_unserved(self, run_id: str, *, grace_ms: int, recheck_ms: int, message: str) -> str:
        """Keep a due run of a graph no live worker serves; dead-letter it once it waited ``grace_ms``.

        Returns ``'held'`` (looked at again in ``recheck_ms``), ``'dead'`` (``unknown_graph``),
        ``'skip'`` (claimed or finished meanwhile) or ``'gone'``. The wait starts when a run is
        first found unserved and ends at its next claim.
        """
        now = clock.now_ms()
        args: list[ScriptArg] = [grace_ms, now + recheck_ms, self.dead_retention_s, message]
        return text(self.do(per_run("hold_unserved", run_id, run_id, now, args)))

    # -- reaper lock -----------------------------------------------------------------------------

    @translate_errors
    def acquire_lock(self, owner: str, ttl_ms: int) -> bool:
        """Take the reaper lock for ``ttl_ms`` if nobody holds it."""
        return bool(self._r.set(keys.REAPER_LOCK, owner, nx=True, px=ttl_ms))

    @translate_errors
    def extend_lock(self, owner: str, ttl_ms: int) -> bool:
        """Extend the reaper lock; False when ``owner`` no longer holds it."""
        return bool(self._scripts("lock_extend", [keys.REAPER_LOCK], [owner, ttl_ms]))

    @translate_errors
    def release_lock(self, owner: str) -> bool:
        """Release the reaper lock, only if ``owner`` still holds it."""
        return bool(self._scripts("lock_release", [keys.REAPER_LOCK], [owner]))
