"""SIGTERM starts Celery's soft shutdown, however the worker was started.

Soft shutdown lets a running attempt finish within ``worker_soft_shutdown_timeout``, then
requeues it at once; Celery's plain SIGTERM is a warm shutdown that waits for a running
attempt with no timeout, so a supervisor's grace period ends it with SIGKILL. Celery gives
SIGTERM the soft shutdown only with ``REMAP_SIGTERM=SIGQUIT`` in the environment, and
billiard and Celery read that once, when they are imported. ``celery -A reflexr_graph.worker
worker`` imports them before it loads the app, so nothing set there can help: at
``celeryd_init`` (sent by ``celery worker`` only, early, before the pool starts) a worker whose
SIGTERM is not remapped re-executes its own command line once, with the variable set, keeping
its pid. ``reflexr-graph worker`` sets the variable before anything imports billiard, so it
never needs to.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from celery import signals

from reflexr_graph.fleet.app import FleetApp

log = logging.getLogger(__name__)

REMAP = ("REMAP_SIGTERM", "SIGQUIT")
_REEXECUTED = "_REFLEXR_REMAP_REEXEC"
"""Set for the re-executed process, so a remap that still does not take is not retried forever
(not ``REFLEXR_*``: those are settings, and an unknown one stops the worker)."""


def remap_effective() -> bool:
    """Whether SIGTERM is remapped in the modules already imported (both read the variable once)."""
    for name in ("billiard.common", "celery.apps.worker"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "REMAP_SIGTERM", None) != REMAP[1]:
            return False
    return True


def _reexec() -> None:
    os.environ[REMAP[0]] = REMAP[1]
    os.environ[_REEXECUTED] = "1"
    log.warning(
        "SIGTERM would be a warm shutdown with no timeout (REMAP_SIGTERM is not set): re-executing this "
        "worker with REMAP_SIGTERM=SIGQUIT, same pid and arguments, for the soft shutdown; set "
        "REMAP_SIGTERM=SIGQUIT in its environment to skip this step"
    )
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os.execv(sys.executable, sys.orig_argv)  # does not return


def ensure_remapped() -> None:
    """Re-execute this worker with SIGTERM remapped, unless it is, or was asked not to be."""
    if remap_effective():
        os.environ.pop(_REEXECUTED, None)
        return
    value = os.environ.get(REMAP[0])
    if value is not None and value != REMAP[1]:
        log.warning(
            "REMAP_SIGTERM=%r: SIGTERM stays Celery's warm shutdown, which waits for running attempts "
            "without a timeout; unset it or set SIGQUIT for the soft shutdown",
            value,
        )
        return
    if os.environ.get(_REEXECUTED) or not sys.orig_argv:
        log.warning(
            "SIGTERM is not remapped to the soft shutdown even with REMAP_SIGTERM=SIGQUIT (billiard was "
            "imported before it was set); the worker goes on, and SIGTERM waits for running attempts"
        )
        return
    _reexec()


def _on_celeryd_init(sender: Any = None, instance: Any = None, **_: Any) -> None:
    if isinstance(getattr(instance, "app", None), FleetApp):
        ensure_remapped()


def install() -> None:
    """Check the remap when a worker of a FleetApp starts."""
    signals.celeryd_init.connect(_on_celeryd_init, weak=False)
