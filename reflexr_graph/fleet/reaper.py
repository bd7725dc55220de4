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

This module is the loop: when to pass, sleep and wake, and its start and stop in the worker. A
pass's jobs (publish, read, lock, share, outage, reap, tell parents, dispatch, prune, sweep) live
one module each in fleet/reaping/, so each is read on its own; their order, and why, is written
once, in :meth:`Reaper._jobs`.
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
from pathlib import Path
from typing import Any

from celery import signals

from reflexr_graph import clock
from reflexr_graph.errors import StoreUnavailable
from reflexr_graph.fleet import presence, versions
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.nudges import Nudges
from reflexr_graph.fleet.reaping.beat import Beat
from reflexr_graph.fleet.reaping.dispatch import Dispatch
from reflexr_graph.fleet.reaping.held import wake_held
from reflexr_graph.fleet.reaping.job import Job, Pass
from reflexr_graph.fleet.reaping.lock import HoldLock
from reflexr_graph.fleet.reaping.outage import Outage
from reflexr_graph.fleet.reaping.parents import TellParents
from reflexr_graph.fleet.reaping.prune import Prune
from reflexr_graph.fleet.reaping.publish import Publish
from reflexr_graph.fleet.reaping.read import Read
from reflexr_graph.fleet.reaping.reap import Reap
from reflexr_graph.fleet.reaping.shares import ShareShards
from reflexr_graph.fleet.reaping.sweep import SweepPayloads
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
_WARN_EVERY_S = 30.0


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
    """One reaper loop. :meth:`tick` is one pass: its jobs in order (:meth:`_jobs`); :meth:`start`
    runs it in a thread every ``interval_s``, or sooner when a due entry falls before that
    (:meth:`next_wait_s`)."""

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
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_warning = 0.0
        self._nudges = Nudges(self.store.reaper_nudges, self._stop, fresh_is_nudge=False)
        """The subscription to nudges (store.reaper_nudges): the wake it planned is still right."""
        self.publish = Publish(app, store)
        self.prune = Prune(store)
        self.read = Read(
            store,
            self.owner,
            lock_ttl_ms=self.lock_ttl_ms,
            idle_ms=int(self.idle_s * 1000),
            margin_ms=int(interval_s * 1000),
            prune=self.prune,
        )
        self.lock = HoldLock(store, self.owner, self.lock_ttl_ms)
        self.share = ShareShards(store, self.owner)
        self.outage = Outage(settings.lease_ttl_s)
        self.reap = Reap(store, self.outage, settings.lease_ttl_s)
        self.dispatch = Dispatch(app, store)
        self.jobs: list[Job] = self._jobs()

    def _jobs(self) -> list[Job]:
        """The jobs of one pass, in the order they run; the reasons for that order are written here."""
        return [
            # Before the read, in every reaper's pass: a worker's own graphs and presence wait for no
            # lock, and the beat keeps this worker among the live ones the shares count.
            self.publish,
            *([Beat(self.presence)] if self.presence is not None else []),
            # The pass's one read (reaper_tick.lua): it takes or keeps the lock and reads what the jobs
            # below act on.
            self.read,
            # The lock as the read left it: whether the holder-only jobs below run this pass.
            self.lock,
            self.share,
            # Redis answered: the outage this reaper saw must be known before this pass reaps a lease
            # that lapsed in it.
            self.outage,
            self.reap,
            # A run reaped now is due now, as is a parent its children's end just queued: both come
            # before the dispatch, which then reads the due set again to send them this pass.
            TellParents(self.store),
            self.dispatch,
            # Housekeeping last: it delays no run.
            self.prune,
            SweepPayloads(self.store),
        ]

    @property
    def holding(self) -> bool:
        """Whether this reaper held the lock after its last pass."""
        return self.lock.holding

    @property
    def shards(self) -> tuple[int, ...]:
        """The shards whose lock this reaper held after its last pass."""
        return self.share.shards

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
        self.lock.release()

    def _loop(self) -> None:
        while not self._stop.is_set():
            wait_s = self.interval_s
            try:
                self.tick()
                wait_s = self.next_wait_s()
            except StoreUnavailable:
                # The lock (if held) survives a Redis restart with AOF; the next extend says.
                self.outage.unreachable(clock.now_ms() - int(self.interval_s * 1000))
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
        """How long to sleep after a pass: until the wake its read named (the next due entry, the
        first lease that could lapse, or ``idle_s``; for a reaper without the lock, when the lock
        would lapse), or ``interval_s`` before any pass.

        A timer wakes on time, and an idle reaper makes one round trip per ``idle_s``, not per tick.
        A due entry written after the tick for a time before the planned wake comes with a nudge,
        which ends the sleep (:meth:`_sleep`); a lost nudge makes it at most ``idle_s`` late.
        """
        wake_ms = self.read.wake_ms
        if wake_ms is None:
            return self.interval_s
        # One ms past the score's whole ms: the tick compares whole ms, and the clock truncates.
        until_s = (math.floor(wake_ms) + 1 - clock.now_ms()) / 1000
        # Another reaper's wake is when the lock would lapse: up to a tick past the holder's.
        return min(self.idle_s + self.interval_s, max(MIN_WAIT_S, until_s))

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
        """One pass: every job in turn, those for the holder only while this reaper holds the lock.

        The lock and every read of the pass are one script (``reaper_tick.lua``, the read job): an
        idle reaper costs one round trip a tick; each run it finds is then changed by its own script.
        """
        current = Pass(time.monotonic())
        for job in self.jobs:
            if job.holder_only and not current.holding:
                continue
            job.run(current)


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
    beat = presence.Presence(store, info, on_beat=lambda: wake_held(app, store))
    reaper = Reaper(app, store, presence=beat)
    _reapers[id(app)] = reaper
    try:
        # Before the worker reports ready, so a client told "ready" can enqueue at once.
        reaper.publish.publish()
        beat.maybe_beat()
    except StoreUnavailable:
        log.warning("Redis unreachable; the graphs' schemas are published once it is back")
    reaper.start()


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
