"""The reaper: re-enqueues runs whose lease lapsed and runs whose retry is due.

Every worker runs one in its main process. The store is split in shards (store/keys.py), each
with its own lock: a reaper acts on the shards whose lock it holds, so the fleet sends each due
message once. The reapers share the shards: one holding more than its part (the shards over the
live workers) hands the rest back, and the shards of a reaper that died are taken by the others
once their locks lapse. It is what makes recovery take about one lease
TTL (G5) instead of one broker visibility timeout: a worker that died leaves its message
unacked for an hour, but its lease lapses in seconds, and the reaper then sends a new
message. Retries wait in the store's due set rather than in a Celery countdown, which on
Redis is delivered again and again once it outlives the visibility timeout.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from celery import signals

from reflexr_graph import clock, schemas
from reflexr_graph.config.dispatch import send_run
from reflexr_graph.core import metrics, tracing
from reflexr_graph.errors import RunNotFound, StoreUnavailable
from reflexr_graph.fleet import auto_upgrade, backlog, observe, presence, unserved, versions
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.nudges import Nudges
from reflexr_graph.model import Reason, Status
from reflexr_graph.store import payload_sweep
from reflexr_graph.store import versions as store_versions
from reflexr_graph.store.contracts import Lock
from reflexr_graph.store.reads import DueTarget
from reflexr_graph.store.recovery import TICK_BATCH
from reflexr_graph.store.redis_store import RedisStore

log = logging.getLogger(__name__)

INTERVAL_S = 1.0
"""The reaper's tick: how soon it tries again after a failed pass, how long past its planned wake
the lock outlives it, and how often its loop touches the health file and beats presence."""
IDLE_MAX_S = 10.0
"""The longest the reaper sleeps between passes when nothing is due and no lease can lapse before:
at most the lease TTL too, so a lease taken meanwhile cannot lapse before it wakes. A write that
makes a run due sooner nudges it awake (:meth:`RedisStore.nudge_reaper`)."""
STOP_CHECK_S = 1.0
"""The longest a nudge wait blocks before the loop looks at its stop flag again, whatever the
tick: a worker that stops does not wait out a reaper's sleep."""
MIN_WAIT_S = 0.01
"""The shortest sleep between passes, for a due backlog larger than one pass takes."""
PUBLISH_EVERY_S = 60.0
PRUNE_EVERY_S = 60.0
"""How often the holder's tick reads the finished runs past retention to prune (three reads): their
keys expire by themselves, and retention is days, so only the indexes wait. While a read comes back
full (TICK_BATCH), every pass prunes, as before, so it keeps up with a busy fleet."""
PAYLOAD_SWEEP_S = 600.0
"""How often the reaper holding the lock sweeps the payload store for files no run refers to."""
MIN_RESEND_S = 5.0
"""The shortest wait before a sent but unclaimed message is sent again."""
SEND_RETRY_DELAY_MS = 2000
"""A message that could not be sent is tried again this much later."""
_WARN_EVERY_S = 30.0
_OUTAGE_REASONS = (Reason.STORE_UNAVAILABLE.value, Reason.MAX_INTERRUPTIONS.value)
"""The reasons reap.lua gives a run whose lease lapsed in an outage."""


LOCK_TICKS = 3
"""The reaper lock outlives its holder by this many ticks."""


def lock_ttl_ms(interval_s: float = INTERVAL_S) -> int:
    """How long the reaper lock outlives its holder: three ticks, whatever the lease TTL.

    A reaper that died with its worker must be replaced before that worker's leases lapse,
    or recovery waits for the lock on top of the lease (G5); a lock that followed a 30 s
    lease held up a fleet on 3 s leases for 10 s. Three ticks let a merely slow holder keep
    it, and a brief overlap of two reapers is harmless: each reap is atomic per run and the
    claim drops duplicate messages.
    """
    return int(LOCK_TICKS * interval_s * 1000)


class Reaper:
    """One reaper loop. :meth:`tick` is one pass; :meth:`start` runs it in a thread every
    ``interval_s``, or sooner when a due entry falls before that (:meth:`next_wait_s`)."""

    def __init__(
        self,
        app: FleetApp,
        store: RedisStore,
        *,
        interval_s: float = INTERVAL_S,
        presence: presence.Presence | None = None,
    ) -> None:
        self.app = app
        self.store = store
        self.interval_s = interval_s
        self.presence = presence
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        settings = app.reflexr_settings
        self.lock_ttl_ms = lock_ttl_ms(interval_s)
        self.idle_s = max(interval_s, min(IDLE_MAX_S, settings.lease_ttl_s))
        """The longest sleep between passes (see :data:`IDLE_MAX_S`)."""
        # A sent message that no worker claims within about two lease TTLs is sent again, then
        # twice as late each time: never later than kombu itself would restore it.
        self.resend_base_ms = int(max(2 * settings.lease_ttl_s, MIN_RESEND_S) * 1000)
        self.resend_cap_ms = int(settings.visibility_timeout_s * 1000)
        self.holding = False
        self.shards: tuple[int, ...] = ()
        """The shards whose lock this reaper held after its last pass."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_publish = 0.0
        self._next_sweep = 0.0
        self._next_prune = 0.0
        self._prune_behind = False
        self._tag_cursors: dict[int, int] = {}
        """Where the walk of each shard's tag indexes is (store/recovery.py: prune_tag_indexes)."""
        self._last_warning = 0.0
        self._unreachable_since_ms: int | None = None
        self.outage: tuple[int, int] | None = None
        """The last window (epoch ms) in which this reaper found Redis unreachable, while it matters."""
        self._outage_until = 0.0
        self._wake_ms: float | None = None
        """When the last pass's tick said to wake next (epoch ms)."""
        self._nudges = Nudges(self.store.reaper_nudges, self._stop, fresh_is_nudge=False)
        """The subscription to nudges (store.reaper_nudges): the wake it planned is still right."""

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        # Subscribed before the first pass, so no nudge sent after it is missed.
        self._nudges.open()
        self._thread = threading.Thread(target=self._loop, name="reflexr-reaper", daemon=True)
        self._thread.start()
        log.info(
            "reaper %s started: checks lapsed leases every %.1fs, and sends due runs as they fall due",
            self.owner,
            self.interval_s,
        )

    def stop(self) -> None:
        """Stop the loop and hand the lock over, so another worker's reaper takes over at once."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=max(5.0, 2 * self.interval_s))
        self._nudges.close()
        if self.presence is not None:
            try:
                self.presence.leave()
            except StoreUnavailable:
                log.info(
                    "worker %s stopped; it drops out of the registry within %gs",
                    self.presence.info.name,
                    presence.TTL_S,
                )
        if self.holding:
            try:
                self.store.release_lock(self.owner)
                log.info(
                    "reaper %s stopped and released its lock; another worker's reaper takes over", self.owner
                )
            except StoreUnavailable:
                log.info("reaper %s stopped; its lock expires within %d ms", self.owner, self.lock_ttl_ms)
            self.holding = False

    def _loop(self) -> None:
        while not self._stop.is_set():
            wait_s = self.interval_s
            try:
                self.tick()
                wait_s = self.next_wait_s()
            except StoreUnavailable:
                # The lock (if held) survives a Redis restart with AOF; the next extend says.
                if self._unreachable_since_ms is None:
                    self._unreachable_since_ms = clock.now_ms() - int(self.interval_s * 1000)
                self._warn("Redis unreachable; the reaper tries again in %.1fs", self.interval_s)
                self._nudges.close()
            except Exception:
                # The reaper is what recovers runs: a bug in one pass must not stop the next.
                log.exception("reaper pass failed; trying again in %.1fs", self.interval_s)
            self._sleep(wait_s)

    def _sleep(self, wait_s: float) -> None:
        """Sleep ``wait_s``, or until stopped or nudged; every tick meanwhile, touch the health file
        and beat presence (neither waits for a pass)."""
        until = time.monotonic() + wait_s
        while not self._stop.is_set():
            self._beat()
            if self.presence is not None:
                with contextlib.suppress(StoreUnavailable):  # the next pass says Redis is unreachable
                    self.presence.maybe_beat()
            left = until - time.monotonic()
            # Only the holder acts on a nudge: another reaper could not take the lock before it lapses.
            if left <= 0 or (self._nudges.wait(min(left, self.interval_s, STOP_CHECK_S)) and self.holding):
                return

    def next_wait_s(self) -> float:
        """How long to sleep after a pass: until the wake its tick named (the next due entry, the
        first lease that could lapse, or ``idle_s``; for a reaper without the lock, when the lock
        would lapse), or ``interval_s`` before any pass.

        A timer wakes on time, and an idle reaper makes one round trip per ``idle_s``, not per tick.
        A due entry written after the tick for a time before the planned wake comes with a nudge,
        which ends the sleep (:meth:`_sleep`); a lost nudge makes it at most ``idle_s`` late.
        """
        if self._wake_ms is None:
            return self.interval_s
        # One ms past the score's whole ms: the tick compares whole ms, and the clock truncates.
        until_s = (math.floor(self._wake_ms) + 1 - clock.now_ms()) / 1000
        # Another reaper's wake is when the lock would lapse: up to a tick past the holder's.
        return min(self.idle_s + self.interval_s, max(MIN_WAIT_S, until_s))

    def _reachable(self) -> None:
        """Redis answered: close the outage window, if one was open, before anything is reaped."""
        if self._unreachable_since_ms is not None:
            self._saw_outage((self._unreachable_since_ms, clock.now_ms()))
            self._unreachable_since_ms = None
            log.warning(
                "Redis is reachable again; runs whose lease lapsed meanwhile resume without losing an attempt"
            )
        elif self.outage is not None and time.monotonic() > self._outage_until:
            self.outage = None

    def _saw_outage(self, window: tuple[int, int]) -> None:
        """Leases that lapsed in ``window``, or within a lease TTL after it, were lost to an outage,
        not to a crash: reaped as interruptions (see reap.lua) while one may still lapse so."""
        if self.outage is not None:
            window = (min(window[0], self.outage[0]), max(window[1], self.outage[1]))
        self.outage = window
        self._outage_until = time.monotonic() + 2 * self.app.reflexr_settings.lease_ttl_s

    def _lost_to_outage(self) -> tuple[int, int] | None:
        """When a lease that lapsed was lost to the outage: in it, or up to a lease TTL after it
        ended. Such a lease was last renewed before the outage, or in it, and its renewals fell due
        while Redis could not take them; a lease renewed after the outage lapses later than that."""
        if self.outage is None:
            return None
        return (self.outage[0], self.outage[1] + int(self.app.reflexr_settings.lease_ttl_s * 1000))

    def _restarted(self, window: tuple[int, int] | None) -> None:
        """Redis restarted or failed over since the last pass of any reaper holding the lock, in
        ``window`` (the tick's pass mark found it), or None.

        This reaper may not have seen that outage: it started after it, or it did not hold the
        lock and another reaper went down with its worker.
        """
        if window is None:
            return
        self._saw_outage(window)
        log.warning(
            "Redis restarted or failed over since the last reaper pass (%.1fs ago); runs whose lease "
            "lapsed meanwhile resume without losing an attempt",
            (window[1] - window[0]) / 1000,
        )

    def _beat(self) -> None:
        """Touch the health file: this worker's main process is alive and looping, Redis or not."""
        path = self.app.reflexr_settings.health_file
        if not path:
            return
        try:
            Path(path).touch()
        except OSError as exc:
            self._warn("cannot touch the health file %s (%s); liveness probes will fail", path, exc)

    def _warn(self, msg: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._last_warning >= _WARN_EVERY_S:
            self._last_warning = now
            log.warning(msg, *args)

    # -- one pass ----------------------------------------------------------------------------

    def tick(self) -> None:
        """One pass: publish schemas when due, take or keep the lock, then reap and dispatch.

        The lock and every read of the pass are one script (``reaper_tick.lua``): an idle
        reaper costs one round trip a tick; each run it finds is then changed by its own script.
        """
        now = time.monotonic()
        if now >= self._next_publish:
            self.publish()
        if self.presence is not None:
            self.presence.maybe_beat()
        self._wake_ms = None
        prune = self._prune_behind or now >= self._next_prune
        found = self.store.reaper_tick(
            self.owner,
            self.lock_ttl_ms,
            idle_ms=int(self.idle_s * 1000),
            margin_ms=int(self.interval_s * 1000),
            prune=prune,
        )
        self._wake_ms = found.wake
        holding = self._hold_lock(found.lock)
        self._share(found.shards)
        # Redis answers: the outage this reaper saw must be known before this pass reaps a lease
        # that lapsed in it.
        self._reachable()
        if not holding:
            return
        self._restarted(found.restart)
        # A run reaped now is due now, as is a parent its children's end just queued: read the
        # due set again then, so it is sent this pass.
        recovered = self.reap(found.lapsed)
        woken = self.tell_parents(found.ended)
        self.dispatch_due(None if recovered or woken else found.due)
        if prune:
            self._prune(found.prunable, now)
        self._sweep_payloads(now)

    def _prune(self, prunable: dict[str, list[str]], now: float) -> None:
        """Prune what the tick found; a read that came back full makes the next pass prune too: a
        pass every few minutes fell behind any fleet finishing more than a few runs a second."""
        self._next_prune = now + PRUNE_EVERY_S
        self._prune_behind = any(len(found) >= TICK_BATCH for found in prunable.values())
        pruned = self.store.prune(found=prunable)
        pruned += self.store.prune_tag_indexes(self._tag_cursors)
        if pruned:
            log.debug("pruned %d index entries of expired runs", pruned)

    def _sweep_payloads(self, now: float) -> None:
        """Now and then, delete the payload store's files no run refers to (store/payload_sweep.py)."""
        if self.store.codec.blobs is None or now < self._next_sweep:
            return
        self._next_sweep = now + PAYLOAD_SWEEP_S
        payload_sweep.sweep(self.store)

    def publish(self) -> None:
        """Publish the graphs' schemas, so clients validate inputs without the graphs' code."""
        settings = self.app.reflexr_settings
        written = schemas.publish(self.store, self.app.reflexr_registry.values(), settings.max_attempts)
        actions = list(self.app.reflexr_registry.values())
        entries = [
            store_versions.entry_of(
                a.version, a.fingerprint, a.label, sorted(a.kinds), (a.on_new_version, a.on_incompatible)
            )
            for a in actions
        ]
        first = self._next_publish == 0.0
        self.store.publish_versions(entries, [a.name for a in actions], reconcile=first)
        if written:
            log.info("published the schemas of %s", ", ".join(written))
        self._next_publish = time.monotonic() + PUBLISH_EVERY_S

    def _share(self, held: tuple[int, ...]) -> None:
        """Hand back the shards held beyond this reaper's part, for the other reapers to take; this
        pass still acts on them (a brief overlap is harmless: every change re-checks its run)."""
        self.shards = held
        if len(held) <= 1:
            return  # nothing to share (a standalone store has one shard): no count to read
        part = math.ceil(self.store.shards.count / max(1, self.store.live_worker_count()))
        extra = held[part:]
        if extra:
            self.store.release_lock(self.owner, extra)
            log.info(
                "reaper %s holds %d shards, hands back %d for the other reapers",
                self.owner,
                len(held),
                len(extra),
            )
            self.shards = held[:part]

    def _hold_lock(self, lock: Lock) -> bool:
        """Whether this reaper acts this pass, as the tick left the lock; says when that changed."""
        held = lock is not Lock.OTHER
        if self.holding and not held:
            log.warning("reaper %s lost its lock; another worker's reaper acts now", self.owner)
        elif held and not self.holding:
            log.info("reaper %s took the lock; it now re-enqueues lapsed and due runs", self.owner)
        self.holding = held
        return held

    def reap(self, lapsed: list[str] | None = None) -> list[str]:
        """Recover runs whose lease lapsed (``lapsed``: as the tick found them, else read now); each
        becomes due now, or dead when out of attempts."""
        lease_ttl_ms = int(self.app.reflexr_settings.lease_ttl_s * 1000)
        recovered = self.store.reap(outage=self._lost_to_outage(), lapsed=lapsed, lease_ttl_ms=lease_ttl_ms)
        for run_id in recovered:
            if self._count_recovered(run_id):
                log.warning(
                    "run %s: its lease lapsed while Redis was unreachable; an interruption, not a failed "
                    "attempt: re-enqueued now (or dead-lettered past REFLEXR_MAX_INTERRUPTIONS)",
                    run_id,
                )
                continue
            log.warning(
                "run %s: its worker stopped renewing the lease; counted as an abandoned attempt, "
                "re-enqueued now (or dead-lettered if it had no attempts left)",
                run_id,
            )
        return recovered

    def _count_recovered(self, run_id: str) -> bool:
        """Count the recovered run's lost attempt; True if it was lost to an outage (an interruption)."""
        try:
            info = self.store.get(run_id)
        except RunNotFound:
            return False
        interrupted = info.reason in _OUTAGE_REASONS
        observe.recovered(info.graph, interrupted=interrupted)
        # The crashed attempt's own span never ended, so it was never exported: this one stands
        # for it in the run's trace, between the attempt that died and the one that resumes.
        trace_context = self.store.trace_context(run_id)
        attrs: dict[str, str | int] = {
            tracing.ATTR_RUN_ID: run_id,
            tracing.ATTR_GRAPH: info.graph,
            tracing.ATTR_ATTEMPT: info.attempts,
            metrics.ATTR_OUTCOME: "interrupted" if interrupted else "abandoned",
        }
        parent = tracing.run_trace_parent(trace_context)
        with tracing.TRACER.start_as_current_span(tracing.RECOVER_RUN, context=parent, attributes=attrs):
            if info.status is Status.DEAD:
                observe.run_ended(info.graph, Status.DEAD, info.reason or "abandoned")
        return interrupted

    def tell_parents(self, ended: list[str]) -> int:
        """Tell the parent of each child run that ended; returns how many parents that queued."""
        woken = 0
        for child in ended:
            woke = self.store.tell_parent(child)
            if woke is not None:
                woken += 1
                log.info("run %s: its children ended; it is queued, and its message is sent next", woke[0])
        return woken

    def dispatch_due(self, due: list[tuple[str, float]] | None = None) -> int:
        """Send the Celery message of every due run whose graph a live worker serves; returns how many.

        A run whose graph no live worker serves is held instead (no message that nobody would
        take), and dead-lettered as ``unknown_graph`` once it has waited out the grace period.
        ``due`` is the due runs as the tick found them, else they are read now.
        """
        sent = 0
        if due is None:
            due = self.store.due()
        targets = self.store.dispatch_of([run_id for run_id, _ in due])
        serving = self.store.serving(sorted({t.graph for t in targets.values() if t.graph}))
        postponed = self._postponed(due, targets, serving)
        for run_id, score in due:
            graph, priority, _ = targets[run_id]
            if graph is None:
                # Its record expired or was purged: nothing to run.
                self.store.ack_due(run_id, score)
            elif not serving[graph]:
                unserved.hold(self.app, self.store, run_id, graph)
            elif run_id not in postponed and self._send(run_id, graph, score, priority):
                sent += 1
        return sent

    def _postponed(
        self, due: list[tuple[str, float]], targets: dict[str, DueTarget], serving: Mapping[str, object]
    ) -> set[str]:
        """The due runs whose message was sent and may still wait in its graph's queue, which holds
        messages: their resend waits one base delay more (fleet/backlog.py), and the others are sent.

        A run queued for the reaper to send (a reaped, replayed, upgraded or woken parent run) is due
        the moment it was queued; one queued with its message (an enqueue's, a signal's, or the
        reaper's own send) is due later, as a safety net. A message lost with a crashed worker is
        then sent again within about that delay of its queue draining, and always once its run
        waited unclaimed as long as kombu would hold an unacked message (the visibility timeout).
        """
        since = clock.now_ms() - self.resend_cap_ms
        sent = {}
        for run_id, score in due:
            graph, _, queued_at = targets[run_id]
            if graph and serving.get(graph) and queued_at is not None and since < queued_at < score:
                sent[run_id] = graph
        if not sent:
            return set()
        waiting = backlog.waiting(self.app, set(sent.values()))
        if not waiting:
            return set()
        postponed = {run_id for run_id, graph in sent.items() if waiting[graph] > 0}
        if postponed:
            self.store.postpone_due(postponed, self.resend_base_ms)
            log.debug(
                "%d queued runs' messages may still wait in their queues (%s); sent again once those "
                "drain, or in %.0f s",
                len(postponed),
                ", ".join(f"{g}: {n}" for g, n in sorted(waiting.items()) if n),
                self.resend_base_ms / 1000,
            )
        return postponed

    def _send(self, run_id: str, graph: str, score: float, priority: int | None = None) -> bool:
        try:
            send_run(self.app, run_id, graph, priority=priority)
        except Exception as exc:
            log.warning(
                "run %s: sending its message failed (%s); trying again in %d ms",
                run_id,
                type(exc).__name__,
                SEND_RETRY_DELAY_MS,
            )
            self.store.bump_due(run_id, SEND_RETRY_DELAY_MS)
            return False
        wait_ms = self.store.reschedule_due(
            run_id, score, base_ms=self.resend_base_ms, cap_ms=self.resend_cap_ms
        )
        log.info(
            "run %s: due; sent its message, a worker claims it next (sent again in %.0f s if unclaimed)",
            run_id,
            wait_ms / 1000,
        )
        return True


# -- wiring into the worker's main process ----------------------------------------------------

_reapers: dict[int, Reaper] = {}


def _on_worker_ready(sender: Any = None, **_: Any) -> None:
    app = getattr(sender, "app", None)
    if not isinstance(app, FleetApp) or id(app) in _reapers:
        return
    # Started here, after the pool forked its children: they must not inherit a running thread.
    store = app.new_store()
    graph_versions = {name: action.version for name, action in app.reflexr_registry.items()}
    info = presence.describe(sender, sorted(app.reflexr_registry), graph_versions)
    versions.VIEW.enable()
    beat = presence.Presence(store, info, on_beat=lambda: _wake_held(app, store))
    reaper = Reaper(app, store, presence=beat)
    _reapers[id(app)] = reaper
    try:
        # Before the worker reports ready, so a client told "ready" can enqueue at once.
        reaper.publish()
        info_beat = reaper.presence
        assert info_beat is not None
        info_beat.maybe_beat()
    except StoreUnavailable:
        log.warning("Redis unreachable; the graphs' schemas are published once it is back")
    reaper.start()


def _wake_held(app: FleetApp, store: RedisStore) -> None:
    try:
        marked = store.held_versions()
        versions.wake_held(app, store, marked)
        auto_upgrade.auto_upgrade(app, store, marked)
    except Exception as exc:  # the beat goes on; the held runs are looked at again next beat
        log.warning(
            "taking back or auto-upgrading the runs held for this worker's graphs failed (%s); trying "
            "again at the next beat",
            exc,
        )


def stop_for(app: object) -> None:
    """Stop the reaper of ``app``'s worker in this process, if it runs: once, however often called."""
    reaper = _reapers.pop(id(app), None)
    if reaper is not None:
        reaper.stop()


def _on_worker_shutdown(sender: Any = None, **_: Any) -> None:
    stop_for(getattr(sender, "app", None))


def install() -> None:
    """Start a reaper in the main process of every worker of a FleetApp, and stop it at shutdown."""
    signals.worker_ready.connect(_on_worker_ready, weak=False)
    signals.worker_shutdown.connect(_on_worker_shutdown, weak=False)
