"""The lease heartbeat: a thread that keeps a running attempt's lease alive.

A thread rather than an asyncio task, so a step that blocks the event loop with
synchronous code does not lose its lease. When the lease is lost (another attempt took
the run over, the run was cancelled, or Redis stayed unreachable for a whole TTL), the
heartbeat cancels the asyncio task running the attempt: the attempt must stop writing,
since every later write would be fenced out anyway.

A cancel asked without ``now`` does not take the lease: the renewal says so, and the heartbeat
only sets ``cancel_asked``, which the attempt's driver reads at its next boundary (the step in
flight finishes). No Redis call is added for it: the renewal answers it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import threading
import time
from typing import Protocol

from reflexr_graph.core.deadlines import Overdue
from reflexr_graph.core.port import AttemptContext
from reflexr_graph.errors import StoreUnavailable
from reflexr_graph.store.attempts import Lease

log = logging.getLogger(__name__)

RENEWALS_PER_TTL = 3
"""Renew every TTL/3: two renewals can fail in a row before the lease lapses."""
RETRY_WHILE_UNREACHABLE_S = 1.0
"""While Redis is unreachable, try the renewal again this often: the lease is still valid for
its TTL, and the sooner a renewal lands once Redis is back, the less of that margin is used."""


class LeaseStore(Protocol):
    def renew_lease(self, run_id: str, token: str, *, lease_ttl_ms: int) -> Lease: ...


class AttemptWatch(Protocol):
    """What else the heartbeat does for its attempt (fleet/watchdog.py)."""

    def overdue(self) -> Overdue | None: ...

    def end_blocked(self, late: Overdue) -> None: ...

    def renew_slots(self) -> None: ...


class Heartbeat:
    """Renews ``ctx``'s lease every TTL/3 until stopped, and cancels the attempt when it is lost.

    Use as a context manager around the attempt; :meth:`bind` names the asyncio task to
    cancel. ``lost`` says why the lease was lost, or is None while it is held. The renewals
    run on the process's one heartbeat thread (:class:`_Beater`): starting and joining a
    thread for every attempt was a tenth of a short run's cost.
    """

    def __init__(
        self, store: LeaseStore, ctx: AttemptContext, *, lease_ttl_s: float, watch: AttemptWatch | None = None
    ) -> None:
        self._store = store
        self._watch = watch
        self._ctx = ctx
        self._ttl_s = lease_ttl_s
        self._interval_s = lease_ttl_s / RENEWALS_PER_TTL
        self._lock = threading.Lock()
        self._target: tuple[asyncio.AbstractEventLoop, asyncio.Task[object]] | None = None
        self._cancel_requested = False
        self._let_go = False
        self._ending = False
        self._last_ok = time.monotonic()
        self.lost: str | None = None
        self.interrupted: str | None = None
        """Why the fleet cut this attempt short (a worker shutting down), or None."""
        self.cancel_asked = threading.Event()
        """Set once a renewal found the run asked to cancel: the attempt stops at its next boundary."""

    def __enter__(self) -> Heartbeat:
        self._last_ok = time.monotonic()
        _beater().watch(self, self._interval_s)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop renewing; the lease then lapses on its own unless the run was finished or released.

        Returns once no renewal of this lease is in flight (bounded by the store's socket timeout).
        """
        with self._lock:
            self._target = None
        _beater().unwatch(self, timeout=self._ttl_s)

    def let_go(self) -> None:
        """The attempt gave its lease back itself (it suspended the run): stop renewing, cancel nothing.

        Does not wait for a renewal in flight: that one is refused by the store, and told apart
        from a lost lease here, so it neither warns nor cancels the attempt as it ends.
        """
        with self._lock:
            self._target = None
            self._let_go = True
        _beater().unwatch(self, timeout=0)

    def ending(self) -> None:
        """The attempt's graph has ended: its outcome's write (success, failure, cancel, hand-back)
        comes next, and gives the lease back when it lands.

        Renewals go on, so a write that waits out an outage still holds the lease when it lands. But
        a renewal in flight as that write lands finds the lease gone by the attempt's own hand: it is
        then no lost lease, neither warned of nor cancelling the attempt. A lease truly lost now is
        told by the outcome's write itself, which is fenced out.
        """
        with self._lock:
            self._ending = True

    def bind(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[object]) -> None:
        """The task to cancel when the lease is lost; cancelled at once if it already was."""
        with self._lock:
            self._target = (loop, task)
            if self.lost is not None:
                self._cancel_locked()

    def lease_left_s(self) -> float:
        """Seconds until the lease would lapse, counted from the last renewal that landed."""
        return self._last_ok + self._ttl_s - time.monotonic()

    def renew(self) -> float | None:
        """One renewal, on the heartbeat thread: seconds until the next one, or None once the lease is lost.

        A renewal that cannot reach Redis is not a lost lease: the lease stays valid for its
        TTL, so the attempt goes on and the renewal is retried every second until it lands or
        the lease would actually have lapsed. Only then is the attempt given up.

        A step found blocked past its deadline ends the attempt here instead (fleet/watchdog.py).
        """
        late = self._watch.overdue() if self._watch is not None else None
        if late is not None and self._watch is not None:
            with self._lock:
                self._let_go = True  # the failure recorded next gives the lease up on purpose
            self._watch.end_blocked(late)
            return None
        try:
            held = self._store.renew_lease(
                self._ctx.run_id, self._ctx.token, lease_ttl_ms=int(self._ttl_s * 1000)
            )
        except StoreUnavailable as exc:
            # Down, full, loading, busy, failing over: an outage, never a lost lease while it holds.
            left = self.lease_left_s()
            if left > 0:
                log.warning(
                    "run %s attempt %d: Redis unreachable while renewing the lease (%s); the lease holds "
                    "for %.1fs more, retrying the renewal every %.0fs meanwhile",
                    self._ctx.run_id,
                    self._ctx.attempt,
                    exc.kind,
                    left,
                    RETRY_WHILE_UNREACHABLE_S,
                )
                return min(RETRY_WHILE_UNREACHABLE_S, self._interval_s, left)
            self._lose("Redis stayed unreachable for a whole lease TTL; the lease has lapsed")
            return None
        except Exception:
            # Anything else is a bug, but the attempt must not lose its lease to it silently.
            log.exception("run %s: lease renewal failed unexpectedly; retrying", self._ctx.run_id)
            return self._interval_s
        if not held:
            self._lose("the run was taken over, reaped or cancelled with --now, or its lease lapsed")
            return None
        self._last_ok = time.monotonic()
        if held is Lease.CANCEL_REQUESTED and not self.cancel_asked.is_set():
            self.cancel_asked.set()
            log.info(
                "run %s attempt %d: the run was cancelled; its step in flight finishes, then the attempt "
                "stops at its next boundary",
                self._ctx.run_id,
                self._ctx.attempt,
            )
        if self._watch is not None:
            self._watch.renew_slots()
        return self._interval_s

    def interrupt(self, why: str) -> None:
        """Cut the attempt short for the fleet's sake (a worker shutting down); it then hands the run back."""
        self._warn("%s; stopping this attempt, which hands the run back to resume elsewhere", why)
        with self._lock:
            self.interrupted = why
            self._cancel_locked()

    def _lose(self, why: str) -> None:
        # Given back on purpose (a suspension), or by the outcome's write (``ending``): that write
        # itself tells a lease truly lost meanwhile, being fenced out.
        if self._let_go or self._ending:
            return
        self._warn("lease lost (%s); cancelling this attempt, which records nothing more", why)
        with self._lock:
            self.lost = why
            self._cancel_locked()

    def _warn(self, what: str, why: str) -> None:
        log.warning(f"run %s attempt %d: {what}", self._ctx.run_id, self._ctx.attempt, why)

    def _cancel_locked(self) -> None:
        if self._target is None or self._cancel_requested:
            return
        loop, task = self._target
        self._cancel_requested = True
        # RuntimeError: the loop already closed, so the attempt has ended on its own.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(task.cancel)


class _Beater:
    """The process's heartbeat thread: renews every watched lease when it is due.

    A thread, not an asyncio task, so a step that blocks the event loop does not stop it.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[Heartbeat, tuple[float, float]] = {}
        """Each watched heartbeat's next renewal time and interval (monotonic seconds)."""
        self._busy: Heartbeat | None = None
        self._wake_at = math.inf
        """When the thread wakes next on its own (monotonic; inf: only when told). -inf while it
        renews: it looks at every due time again before it waits."""
        self._thread = threading.Thread(target=self._run, name="reflexr-heartbeat", daemon=True)
        self._thread.start()

    def watch(self, heartbeat: Heartbeat, interval_s: float) -> bool:
        """Renew ``heartbeat`` every ``interval_s`` from now on; True when the thread was woken for it."""
        due = time.monotonic() + interval_s
        with self._cond:
            self._due[heartbeat] = (due, interval_s)
            # Waking the thread costs the attempt a thread switch (and the GIL) as it starts: only
            # when this renewal falls due before the thread would wake anyway. Back-to-back attempts
            # then wake it once per interval, not once each.
            if due >= self._wake_at:
                return False
            self._cond.notify_all()
            return True

    def watched(self) -> list[Heartbeat]:
        with self._cond:
            return list(self._due)

    def unwatch(self, heartbeat: Heartbeat, *, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            self._due.pop(heartbeat, None)
            # Never wait on ourselves: the heartbeat thread itself does not call stop().
            while self._busy is heartbeat and threading.current_thread() is not self._thread:
                left = deadline - time.monotonic()
                if left <= 0 or not self._cond.wait(left):
                    break

    def _next(self) -> tuple[Heartbeat | None, float]:
        if not self._due:
            return None, 0.0
        heartbeat = min(self._due, key=lambda h: self._due[h][0])
        return heartbeat, self._due[heartbeat][0] - time.monotonic()

    def _run(self) -> None:
        while True:
            with self._cond:
                heartbeat, wait_s = self._next()
                if heartbeat is None or wait_s > 0:
                    self._wake_at = math.inf if heartbeat is None else time.monotonic() + wait_s
                    self._cond.wait(None if heartbeat is None else wait_s)
                    self._wake_at = -math.inf
                    continue
                self._busy = heartbeat
            next_in = heartbeat.renew()
            with self._cond:
                self._busy = None
                if heartbeat in self._due:
                    if next_in is not None:
                        interval = self._due[heartbeat][1]
                        self._due[heartbeat] = (time.monotonic() + next_in, interval)
                    else:
                        del self._due[heartbeat]
                self._cond.notify_all()


_beaters: dict[int, _Beater] = {}
_beaters_lock = threading.Lock()


def _beater() -> _Beater:
    """This process's heartbeat thread, started on first use (a forked pool child starts its own)."""
    pid = os.getpid()
    with _beaters_lock:
        beater = _beaters.get(pid)
        if beater is None:
            beater = _beaters[pid] = _Beater()
        return beater


def interrupt_attempts(why: str) -> int:
    """Cut short every attempt running in this process (a threads or solo worker shutting down).

    Each hands its run back, as a prefork child's attempt does when Celery stops it, so the
    run resumes on another worker at once. Returns how many attempts were running.
    """
    heartbeats = _beater().watched()
    for heartbeat in heartbeats:
        heartbeat.interrupt(why)
    return len(heartbeats)
