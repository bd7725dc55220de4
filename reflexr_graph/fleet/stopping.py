"""A worker told to stop (SIGTERM) exits within its soft-shutdown timeout plus a margin, Redis or not.

Celery's soft shutdown waits ``worker_soft_shutdown_timeout`` for the running attempts, then
cancels them and tears the worker down: it requeues their messages, stops the pool, closes the
broker connection, and the reaper leaves. Against a Redis that went away at the same moment
(``docker compose down`` stops every service at once), each of those steps waits out a socket
timeout or a retry, one after the other, and a supervisor's grace period ended the worker with
SIGKILL anyway. A deadline armed by SIGTERM ends the worker itself once the margin is spent: it
leaves the registry (fleet/leaving.py, a bounded wait), kills its pool processes and exits. The
runs they held resume elsewhere once their leases lapse (the reaper sends them again); kombu
restores their messages after the visibility timeout.

The same handler keeps Celery from printing "Hitting Ctrl+C again will terminate all running
tasks!" on that SIGTERM: advice for a terminal, printed for a supervisor's signal.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from celery import signals

from reflexr_graph.fleet import leaving
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.sigterm import remap_effective

log = logging.getLogger(__name__)

STOP_MARGIN_S = 10.0
"""What a stopping worker may take beyond its soft-shutdown timeout before it exits on its own."""
EXIT_STATUS = 1
"""The status of a worker that ended itself at its deadline (Celery's own for a cold shutdown)."""
CTRL_C_HINT = "Hitting Ctrl+C again"

_handling_sigterm = threading.Event()


def _quiet_say(say: Callable[..., Any]) -> Callable[..., Any]:
    def safe_say(msg: str, *args: Any, **kwargs: Any) -> Any:
        if _handling_sigterm.is_set() and CTRL_C_HINT in msg:
            return None
        return say(msg, *args, **kwargs)

    return safe_say


class Deadline:
    """Ends this worker ``after_s`` seconds after :meth:`arm`, unless it exited before; ``on_expire``
    runs first (the worker leaves the registry)."""

    def __init__(self, after_s: float, on_expire: Callable[[], None] | None = None) -> None:
        self.after_s = after_s
        self.on_expire = on_expire
        self._timer: threading.Timer | None = None

    def arm(self) -> None:
        if self._timer is not None:
            return
        self._timer = threading.Timer(self.after_s, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self) -> None:
        log.error(
            "this worker did not stop within %.0fs of SIGTERM (Redis unreachable, most likely); killing its "
            "pool processes and exiting now: the runs they held resume elsewhere once their leases lapse",
            self.after_s,
        )
        if self.on_expire is not None:
            self.on_expire()
        _kill_pool()
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(EXIT_STATUS)


def _kill_pool() -> None:
    """SIGKILL this process's pool children, so no attempt outlives the worker that supervised it."""
    import billiard.process

    for child in billiard.process.active_children():
        pid = child.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def wrap_sigterm(celery_handler: Callable[[int, FrameType | None], Any], deadline: Deadline) -> Any:
    """Celery's SIGTERM handler, with the deadline armed first and the Ctrl+C hint left out."""

    def on_sigterm(signum: int, frame: FrameType | None) -> Any:
        deadline.arm()
        _handling_sigterm.set()
        try:
            return celery_handler(signum, frame)
        finally:
            _handling_sigterm.clear()

    return on_sigterm


def _on_worker_ready(sender: Any = None, **_: Any) -> None:
    # After Celery installed its own signal handlers (install_platform_tweaks, at start).
    app = getattr(sender, "app", None)
    if not isinstance(app, FleetApp) or threading.current_thread() is not threading.main_thread():
        return
    if not remap_effective():
        return  # Celery's warm shutdown, asked for: it waits for running attempts, by design
    celery_handler = signal.getsignal(signal.SIGTERM)
    if not callable(celery_handler) or getattr(celery_handler, "__name__", "") == "on_sigterm":
        return
    deadline = Deadline(
        app.reflexr_settings.soft_shutdown_timeout_s + STOP_MARGIN_S,
        on_expire=lambda: leaving.leave_within(app),
    )
    signal.signal(signal.SIGTERM, wrap_sigterm(celery_handler, deadline))


def install() -> None:
    """Bound the stop of every worker of a FleetApp, and quiet Celery's Ctrl+C hint on SIGTERM."""
    # Imported here: celery.apps.worker reads REMAP_SIGTERM once, when imported, and the worker's
    # entry point sets it only after it loaded the CLI (fleet/sigterm.py). on_cold_shutdown looks
    # safe_say up in that module each time it runs (the stubs do not list it).
    from celery.apps import worker as celery_worker

    say = getattr(celery_worker, "safe_say", None)
    if say is not None and not getattr(say, "_reflexr_quiet", False):
        quiet = _quiet_say(say)
        setattr(quiet, "_reflexr_quiet", True)  # noqa: B010
        setattr(celery_worker, "safe_say", quiet)  # noqa: B010
    signals.worker_ready.connect(_on_worker_ready, weak=False)
