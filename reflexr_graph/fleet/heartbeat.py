"""The lease heartbeat: a thread that keeps a running attempt's lease alive.

A thread rather than an asyncio task, so a step that blocks the event loop with
synchronous code does not lose its lease. When the lease is lost (another attempt took
the run over, the run was cancelled, or Redis stayed unreachable for a whole TTL), the
heartbeat cancels the asyncio task running the attempt: the attempt must stop writing,
since every later write would be fenced out anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from typing import Protocol

from reflexr_graph.core.port import AttemptContext
from reflexr_graph.errors import StoreUnavailable

log = logging.getLogger(__name__)

RENEWALS_PER_TTL = 3
"""Renew every TTL/3: two renewals can fail in a row before the lease lapses."""


class LeaseStore(Protocol):
    def renew_lease(self, run_id: str, token: str, *, lease_ttl_ms: int) -> bool: ...


class Heartbeat:
    """Renews ``ctx``'s lease every TTL/3 until stopped, and cancels the attempt when it is lost.

    Use as a context manager around the attempt; :meth:`bind` names the asyncio task to
    cancel. ``lost`` says why the lease was lost, or is None while it is held.
    """

    def __init__(self, store: LeaseStore, ctx: AttemptContext, *, lease_ttl_s: float) -> None:
        self._store = store
        self._ctx = ctx
        self._ttl_s = lease_ttl_s
        self._interval_s = lease_ttl_s / RENEWALS_PER_TTL
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._target: tuple[asyncio.AbstractEventLoop, asyncio.Task[object]] | None = None
        self._cancel_requested = False
        self.lost: str | None = None
        self._thread = threading.Thread(target=self._run, name=f"reflexr-heartbeat-{ctx.run_id}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop renewing; the lease then lapses on its own unless the run was finished or released."""
        with self._lock:
            self._target = None
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            # A renewal in flight is bounded by the store's socket timeout.
            self._thread.join(timeout=self._ttl_s)

    def bind(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[object]) -> None:
        """The task to cancel when the lease is lost; cancelled at once if it already was."""
        with self._lock:
            self._target = (loop, task)
            if self.lost is not None:
                self._cancel_locked()

    def _run(self) -> None:
        last_ok = time.monotonic()
        while not self._stop.wait(self._interval_s):
            try:
                held = self._store.renew_lease(
                    self._ctx.run_id, self._ctx.token, lease_ttl_ms=int(self._ttl_s * 1000)
                )
            except StoreUnavailable:
                if time.monotonic() - last_ok < self._ttl_s:
                    log.warning(
                        "run %s attempt %d: Redis unreachable while renewing the lease; retrying in %.1fs",
                        self._ctx.run_id,
                        self._ctx.attempt,
                        self._interval_s,
                    )
                    continue
                self._lose("Redis stayed unreachable for a whole lease TTL; the lease may have lapsed")
                return
            except Exception:
                # Anything else is a bug, but the attempt must not lose its lease to it silently.
                log.exception("run %s: lease renewal failed unexpectedly; retrying", self._ctx.run_id)
                continue
            if not held:
                self._lose("the run was taken over, reaped or cancelled")
                return
            last_ok = time.monotonic()

    def _lose(self, why: str) -> None:
        log.warning(
            "run %s attempt %d: lease lost (%s); cancelling this attempt, which records nothing more",
            self._ctx.run_id,
            self._ctx.attempt,
            why,
        )
        with self._lock:
            self.lost = why
            self._cancel_locked()

    def _cancel_locked(self) -> None:
        if self._target is None or self._cancel_requested:
            return
        loop, task = self._target
        self._cancel_requested = True
        # RuntimeError: the loop already closed, so the attempt has ended on its own.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(task.cancel)
