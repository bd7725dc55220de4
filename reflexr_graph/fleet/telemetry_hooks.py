"""OpenTelemetry in worker processes: set up where Celery forks, flushed where it stops.

Exporters hold threads and sockets, so each prefork child configures its own after the
fork (``worker_process_init``); the main process, which runs the reaper, does the same at
``worker_init``. Each flushes its spans and metrics when it stops.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import signals

from reflexr_graph import telemetry

log = logging.getLogger(__name__)


def _start(**_: Any) -> None:
    telemetry.setup_process()


def _stop(**_: Any) -> None:
    try:
        telemetry.shutdown()
    except Exception as exc:  # an exporter failing at exit must not hide the real shutdown cause
        log.warning(
            "flushing telemetry at shutdown failed (%s); the last spans may be lost", type(exc).__name__
        )


def install() -> None:
    signals.worker_init.connect(_start, weak=False)
    signals.worker_process_init.connect(_start, weak=False)
    signals.worker_process_shutdown.connect(_stop, weak=False)
    signals.worker_shutdown.connect(_stop, weak=False)
