"""Building the fleet's app from settings, and starting a worker programmatically."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Iterable, Sequence

from reflexr_graph.core.action import GraphAction
from reflexr_graph.fleet.app import FleetApp, create_app
from reflexr_graph.fleet.registry import build_registry, describe
from reflexr_graph.fleet.settings import Settings, load_settings

log = logging.getLogger(__name__)

APP_MODULE = "workers"
"""The deployable app package: ``celery -A workers worker`` and :func:`run_worker` both load it."""
REMAP = ("REMAP_SIGTERM", "SIGQUIT")
"""SIGTERM starts Celery's soft shutdown, which requeues the running message at once."""


def build_app(settings: Settings | None = None, *, extra_actions: Iterable[GraphAction] = ()) -> FleetApp:
    """The app a worker runs: the graphs of ``REFLEXR_GRAPHS`` plus ``extra_actions``."""
    settings = settings or load_settings()
    registry = build_registry(settings.graphs, extra_actions)
    log.debug("fleet app built with graphs: %s", describe(registry))
    return create_app(settings, registry)


def _remap_effective() -> bool:
    """Whether billiard, which reads REMAP_SIGTERM once at import, will remap SIGTERM."""
    common = sys.modules.get("billiard.common")
    if common is None:
        return True  # not imported yet: setting the variable now is enough
    return getattr(common, "REMAP_SIGTERM", None) == REMAP[1]


def _status(code: object) -> int:
    """A SystemExit code as a process exit status, as the interpreter would turn it into one."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run_worker(argv: Sequence[str] | None = None) -> int:
    """Run ``celery -A workers worker [argv...]`` in this process; returns its exit status.

    It runs Celery's own command line as ``celery`` does (``app.worker_main`` would discard the
    status), so both exit with the same status: 1 after an unrecoverable error at start or
    SIGINT, 2 for bad usage.

    SIGTERM must be remapped to SIGQUIT before billiard is imported. If it already was
    imported without that, the worker is started by replacing this process with the
    ``celery`` command, so the behaviour is the same either way.
    """
    args = list(argv or [])
    os.environ.setdefault(*REMAP)
    if not _remap_effective():
        command = [sys.executable, "-m", "celery", "-A", APP_MODULE, "worker", *args]
        os.execv(sys.executable, command)  # does not return
    # Loaded first so that invalid settings raise SettingsError, which the CLI reports in one
    # line (exit 2, as Celery's own exit for an app that does not load).
    importlib.import_module(APP_MODULE)
    from celery.bin.celery import celery as celery_command

    try:
        celery_command.main(
            args=["-A", APP_MODULE, "worker", *args],
            prog_name="celery",
            auto_envvar_prefix="CELERY",
            standalone_mode=True,
        )
    except SystemExit as exc:
        return _status(exc.code)
    return 0
