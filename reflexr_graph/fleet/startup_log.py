"""What a worker says when it starts, at Celery's default log level too.

Celery's default level is WARNING, so a worker started without ``-l`` printed neither Celery's
"ready" line nor reflexr_graph's INFO lines (which graphs it loaded, the reaper, attempts
starting and ending). Unless ``-l``/``--loglevel`` was given, the ``reflexr_graph`` logger gets
level INFO (and a handler of its own if Celery's setup left it none); then, once the worker
consumes, one INFO line names the graphs it serves and the queues it consumes, read from the
consumer so that queues added by routing or ``-Q`` are the ones named.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import click
from celery import signals
from click.core import ParameterSource

from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.graph_registry import describe

log = logging.getLogger(__name__)
PACKAGE_LOGGER = "reflexr_graph"
FORMAT = "[%(asctime)s: %(levelname)s/%(processName)s] %(message)s"
"""Celery's own format, for the handler added when there is none."""


def loglevel_given() -> bool:
    """Whether the worker's command line (or CELERY_WORKER_LOGLEVEL) chose a log level."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return True  # started from code, not Celery's command line: its logging is its own
    source = ctx.get_parameter_source("loglevel")
    return source not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)


def show_info_logs() -> None:
    """Let reflexr_graph's INFO lines through, unless its logger's level was set already."""
    logger = logging.getLogger(PACKAGE_LOGGER)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    if not logger.hasHandlers():
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(FORMAT))
        logger.addHandler(handler)


def consumed_queues(consumer: Any) -> list[str]:
    """The names of the queues ``consumer`` consumes."""
    task_consumer = getattr(consumer, "task_consumer", None)
    queues = getattr(task_consumer, "queues", None)
    if queues is None:
        queues = consumer.app.amqp.queues.consume_from.values()
    return sorted(str(q.name) for q in queues)


def _on_after_setup(sender: Any = None, instance: Any = None, **_: Any) -> None:
    # Sent after Celery set its logging up, before the pool forks: its children inherit the level.
    if isinstance(getattr(instance, "app", None), FleetApp) and not loglevel_given():
        show_info_logs()


def _on_worker_ready(sender: Any = None, **_: Any) -> None:
    app = getattr(sender, "app", None)
    if not isinstance(app, FleetApp):
        return
    log.info(
        "worker %s ready: serves graphs %s; consumes queues %s",
        getattr(sender, "hostname", "?"),
        describe(app.reflexr_registry),
        ", ".join(consumed_queues(sender)) or "(none)",
    )


def install() -> None:
    signals.celeryd_after_setup.connect(_on_after_setup, weak=False)
    signals.worker_ready.connect(_on_worker_ready, weak=False)
