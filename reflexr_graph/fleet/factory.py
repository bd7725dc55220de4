"""Assemble the fleet's Celery app: configuration, the ``reflexr_graph.run`` task and the worker hooks.

Apart from fleet/app.py so that the hook modules can import ``FleetApp`` without an import cycle.
"""

from __future__ import annotations

from collections.abc import Mapping

from reflexr_graph.config.celery import celery_config
from reflexr_graph.config.settings import Settings
from reflexr_graph.core.action import GraphAction
from reflexr_graph.fleet import (
    connection_loss,
    leaving,
    pools,
    preflight,
    reaper,
    routing,
    scheduler,
    sigterm,
    startup_log,
    stopping,
    task,
    telemetry_hooks,
    versions,
    watchdog,
)
from reflexr_graph.fleet.app import FleetApp


def create_app(settings: Settings, registry: Mapping[str, GraphAction]) -> FleetApp:
    """A configured app with the ``reflexr_graph.run`` task and the worker hooks registered."""
    app = FleetApp(settings, registry)
    app.conf.update(celery_config(settings))
    task.register(app)
    # Each install() connects module-level receivers to Celery's signals; Celery keeps one entry
    # per receiver, so building many apps in one process (tests, clients) connects each once.
    reaper.install()
    scheduler.install()
    routing.install()
    versions.install()
    pools.install()
    watchdog.install()
    preflight.install()
    telemetry_hooks.install()
    sigterm.install()
    stopping.install()
    startup_log.install()
    connection_loss.install()
    leaving.add_to(app)
    return app
