"""Building the fleet's app from settings, and starting a worker programmatically."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Sequence

from celery.utils.imports import import_from_cwd

from reflexr_graph.config.settings import Settings, load_settings
from reflexr_graph.core.action import GraphAction
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.factory import create_app
from reflexr_graph.fleet.sigterm import REMAP
from reflexr_graph.graph_registry import build_registry, describe

log = logging.getLogger(__name__)

APP_MODULE = "reflexr_graph.worker"
"""The app a worker runs: ``celery -A reflexr_graph.worker worker`` and :func:`run_worker` both load it."""


def build_app(settings: Settings | None = None, *, extra_actions: Iterable[GraphAction] = ()) -> FleetApp:
    """The app a worker runs: the graphs of ``REFLEXR_GRAPHS`` plus ``extra_actions``."""
    settings = settings or load_settings()
    registry = build_registry(settings.graphs, extra_actions)
    log.debug("fleet app built with graphs: %s", describe(registry))
    return create_app(settings, registry)


def _status(code: object) -> int:
    """A SystemExit code as a process exit status, as the interpreter would turn it into one."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run_worker(argv: Sequence[str] | None = None) -> int:
    """Run ``celery -A reflexr_graph.worker worker [argv...]`` in this process; returns its exit status.

    It runs Celery's own command line as ``celery`` does (``app.worker_main`` would discard the
    status), so both exit with the same status: 1 after an unrecoverable error at start or
    SIGINT, 2 for bad usage. SIGTERM is remapped to the soft shutdown by setting
    ``REMAP_SIGTERM=SIGQUIT`` before billiard is imported; if it already was, the worker
    re-executes itself with it (fleet/sigterm.py).
    """
    os.environ.setdefault(*REMAP)
    # Loaded first so that invalid settings raise SettingsError, which the CLI reports in one
    # line (exit 2, as Celery's own exit for an app that does not load). With the working directory
    # first on sys.path while it loads, as `celery -A` loads it: the console script's sys.path starts
    # with its own bin directory, and REFLEXR_GRAPHS names the project's modules.
    import_from_cwd(APP_MODULE)
    from celery.bin.celery import celery as celery_command

    try:
        celery_command.main(
            args=["-A", APP_MODULE, "worker", *(argv or [])],
            prog_name="celery",
            auto_envvar_prefix="CELERY",
            standalone_mode=True,
        )
    except SystemExit as exc:
        return _status(exc.code)
    return 0
