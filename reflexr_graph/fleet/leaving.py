"""A stopping worker leaves the registry at once, however it stops; only a SIGKILL waits out the TTL.

The reaper (and with it the worker's presence), the scheduler and the telemetry exporters of the main
process stop on Celery's ``worker_shutdown``. Celery sends it from a warm shutdown only
(``WorkController.stop``: SIGTERM left unremapped, a first Ctrl+C, an error at start). A cold shutdown
(SIGQUIT, SIGTERM remapped to it as the fleet runs, a second Ctrl+C, the end of the soft-shutdown
timeout) ends in ``WorkController.terminate``, which sends nothing: the worker stayed in ``workers``,
``graphs`` and ``versions`` until its heartbeat's TTL ran out (issue 34). The worker step here sends
``worker_shutdown`` on that path, once, while the worker terminates. A worker that does not stop in
time ends itself (fleet/stopping.py) and leaves first, within :data:`LEAVE_WAIT_S`.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery import bootsteps, signals

from reflexr_graph.fleet import reaper
from reflexr_graph.fleet.app import FleetApp

log = logging.getLogger(__name__)

LEAVE_WAIT_S = 2.0
"""The longest a worker ending itself at its stop deadline waits to leave: Redis being unreachable is
the likely reason it did not stop in time, and then the heartbeat's TTL takes it out instead."""


class ShutdownOnTerminate(bootsteps.StartStopStep):
    """Sends ``worker_shutdown`` when the worker terminates (a cold shutdown), as a warm stop does.

    Before the pool in the teardown (it requires the pool, so it stops first): a pool that is slow to
    terminate does not keep the worker in the registry.
    """

    requires = ("celery.worker.components:Pool",)

    def terminate(self, parent: Any) -> None:
        if isinstance(getattr(parent, "app", None), FleetApp):
            signals.worker_shutdown.send(sender=parent)


def add_to(app: FleetApp) -> None:
    """Make every worker of ``app`` send ``worker_shutdown`` on a cold shutdown too."""
    app.steps["worker"].add(ShutdownOnTerminate)


def leave_within(app: FleetApp, timeout_s: float = LEAVE_WAIT_S) -> None:
    """Stop this worker's reaper, which takes it out of the registry, waiting at most ``timeout_s``."""
    thread = threading.Thread(target=reaper.stop_for, args=(app,), name="reflexr-leave", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        log.warning(
            "leaving the registry did not finish within %.0fs; this worker drops out of it once its "
            "heartbeat expires",
            timeout_s,
        )
