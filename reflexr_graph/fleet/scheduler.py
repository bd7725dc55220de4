"""The scheduler: fires each schedule's runs at their times (core/schedules.py).

Every worker runs one in its main process, beside the reaper, and holds no lock: each fire's run
has the fire's idempotency key, so schedulers that make the same fire make one run, and only the
one whose ``schedule_advance.lua`` finds the fire time it planned from moves the schedule on. A
scheduler sleeps until the next fire time it read, at most ``interval_s``: idle, it costs one
ZRANGE per ``interval_s``. A schedule added, changed or resumed meanwhile wakes it at once: the
script that writes it publishes a note the scheduler listens for (``schedule_put.lua``); a note
lost (a dropped subscription) makes that fire at most ``interval_s`` late. A delete or a pause
needs no note: the scheduler that wakes for that fire finds nothing due.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from celery import signals

from reflexr_graph import clock
from reflexr_graph.config.dispatch import send_run
from reflexr_graph.core.schedules import Overlap, Schedule, fire_time, plan
from reflexr_graph.errors import ScheduleNotFound, StoreUnavailable
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.budget import new_run_budget
from reflexr_graph.fleet.nudges import Nudges
from reflexr_graph.store.redis_store import RedisStore
from reflexr_graph.store.schedules import advance, due_schedules, fire_run, previous_active, read_schedule

log = logging.getLogger(__name__)

INTERVAL_S = 10.0
"""The longest a scheduler sleeps, as the reaper's ``IDLE_MAX_S``: the bound on seeing a schedule
added, resumed or changed when its note is lost."""
RETRY_S = 1.0
"""How soon a scheduler tries again after a failed pass (at most ``interval_s``)."""
STOP_CHECK_S = 1.0
"""The longest one wait for a note blocks before the loop looks at its stop flag again."""
MIN_WAIT_S = 0.005
DISPATCH_GRACE_MS = 30_000
"""If the scheduler dies between creating a fire's run and sending its message, the reaper sends
it after this (the run is due then, as any enqueued run)."""

Send = Callable[[str, str], None]
"""Send the Celery message of a run: ``send(run_id, graph)``."""


class Scheduler:
    """One scheduler loop. :meth:`tick` is one pass and says how long to sleep; :meth:`start`
    runs passes in a thread until :meth:`stop`."""

    def __init__(
        self, store: RedisStore, send: Send, *, default_max_attempts: int, interval_s: float = INTERVAL_S
    ) -> None:
        self.store = store
        self.send = send
        self.default_max_attempts = default_max_attempts
        self.interval_s = interval_s
        self.retry_s = min(RETRY_S, interval_s)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._unreachable = False
        self._notes = Nudges(self.store.schedule_nudges, self._stop, fresh_is_nudge=True)
        """The subscription to schedule_put.lua's notes (store.schedule_nudges)."""

    def start(self) -> None:
        # Subscribed before the first pass, so no schedule written after it is missed.
        self._notes.open()
        self._thread = threading.Thread(target=self._loop, name="reflexr-scheduler", daemon=True)
        self._thread.start()
        log.info("scheduler started: fires each schedule's runs at their times")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=max(5.0, 2 * STOP_CHECK_S))
        self._notes.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            wait_s = self.retry_s
            try:
                wait_s = self.tick()
                if self._unreachable:
                    self._unreachable = False
                    log.warning("Redis is reachable again; the scheduler makes the fires due meanwhile")
            except StoreUnavailable:
                if not self._unreachable:  # once per outage, not once a second
                    self._unreachable = True
                    log.warning("Redis unreachable; the scheduler tries again every %.1fs", self.retry_s)
            except Exception:
                # A bug in one pass must not stop the schedules.
                log.exception("scheduler pass failed; trying again in %.1fs", self.retry_s)
            self._sleep(wait_s)

    def _sleep(self, wait_s: float) -> None:
        """Sleep ``wait_s``, or until stopped or a schedule's note comes."""
        until = time.monotonic() + wait_s
        while not self._stop.is_set():
            left = until - time.monotonic()
            if left <= 0 or self._notes.wait(min(left, STOP_CHECK_S)):
                return

    def tick(self) -> float:
        """Make every fire due now; the seconds until the next fire time read (at most ``interval_s``)."""
        now_ms = clock.now_ms()
        found = self.store.do(due_schedules(now_ms))
        for name, planned_ms in found.due:
            self.fire_due(name, planned_ms, now_ms)
        if found.due:
            return MIN_WAIT_S  # read again at once: more may be due, and the next fire times moved
        if found.next_ms is None:
            return self.interval_s
        # One ms past the fire's whole ms: the index compares whole ms, and the clock truncates.
        until_s = (math.floor(found.next_ms) + 1 - clock.now_ms()) / 1000
        return min(self.interval_s, max(MIN_WAIT_S, until_s))

    def fire_due(self, name: str, planned_ms: int, now_ms: int) -> None:
        """Make the fires of schedule ``name`` due since ``planned_ms`` that its catch-up allows,
        then move it on, unless another scheduler did first."""
        try:
            schedule = self.store.do(read_schedule(name))
        except ScheduleNotFound:
            return  # deleted since the read: its index entry went with it
        fires, next_ms = plan(schedule, planned_ms, now_ms)
        last: tuple[int, str] | None = None
        for fire_ms in fires:
            if schedule.overlap is Overlap.SKIP and (
                last is not None or self.store.do(previous_active(name))
            ):
                log.info(
                    "schedule %s: fire %s skipped: its previous run is still active", name, fire_time(fire_ms)
                )
                continue
            last = (fire_ms, self._fire(schedule, fire_ms))
        # The plan starts at the planned fire unless catch-up dropped missed fires (none, latest).
        dropped = not fires or fires[0] != planned_ms
        if not self.store.do(advance(name, planned_ms, next_ms, last)):
            return  # another scheduler moved it on: its fires were these same runs
        if dropped:
            log.warning(
                "schedule %s: fires missed while no scheduler ran were dropped (catchup=%s); next fire %s",
                name,
                schedule.catchup.value,
                fire_time(next_ms),
            )

    def _fire(self, schedule: Schedule, fire_ms: int) -> str:
        run_id, created = self.store.do(
            fire_run(
                schedule,
                fire_ms,
                new_run_budget(self.store, schedule.graph, None, self.default_max_attempts),
                DISPATCH_GRACE_MS,
            )
        )
        if created:
            try:
                self.send(run_id, schedule.graph)
            except Exception as exc:
                log.warning(
                    "schedule %s: run %s recorded, but sending its message failed (%s); the reaper sends it",
                    schedule.name,
                    run_id,
                    type(exc).__name__,
                )
            log.info("schedule %s: fire %s queued run %s", schedule.name, fire_time(fire_ms), run_id)
        return run_id


# -- wiring into the worker's main process ----------------------------------------------------

_schedulers: dict[int, Scheduler] = {}


def _on_worker_ready(sender: Any = None, **_: Any) -> None:
    app = getattr(sender, "app", None)
    if not isinstance(app, FleetApp) or id(app) in _schedulers:
        return
    # Started here, after the pool forked its children: they must not inherit a running thread.
    fleet_app = app

    def send(run_id: str, graph: str) -> None:
        send_run(fleet_app, run_id, graph)

    scheduler = Scheduler(app.new_store(), send, default_max_attempts=app.reflexr_settings.max_attempts)
    _schedulers[id(app)] = scheduler
    scheduler.start()


def _on_worker_shutdown(sender: Any = None, **_: Any) -> None:
    scheduler = _schedulers.pop(id(getattr(sender, "app", None)), None)
    if scheduler is not None:
        scheduler.stop()


def install() -> None:
    """Start a scheduler in the main process of every worker of a FleetApp, and stop it at shutdown."""
    signals.worker_ready.connect(_on_worker_ready, weak=False)
    signals.worker_shutdown.connect(_on_worker_shutdown, weak=False)
