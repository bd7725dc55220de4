"""The Celery pools a worker supports: prefork (the default), threads and solo.

Celery's soft shutdown ends the attempts still running when its timeout passes by
"terminating" their jobs. Prefork does that with a signal to the pool child, where the
attempt hands its run back (attempt.py). The threads and solo pools cannot terminate a
job, and Celery raises NotImplementedError there: in solo that error surfaced inside the
step and was recorded as the step's failure. Their subclasses here end the jobs the
fleet's way instead: each running attempt is cancelled and hands its run back, to resume
on another worker at once. eventlet and gevent are refused at start: they patch the
standard library under asyncio, which the attempts run on.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from celery import signals
from celery.concurrency import solo, thread

from reflexr_graph.fleet import heartbeat, loops

log = logging.getLogger(__name__)

SUPPORTED = ("prefork", "threads", "solo")
_SHUTDOWN = "the worker is shutting down"


class ThreadsPool(thread.TaskPool):
    """Celery's threads pool; each thread runs its attempts on an event loop of its own (loops.py)."""

    def terminate_job(self, pid: int, signal: Any = None) -> None:
        # Every job of this pool lives in this process: ending one at shutdown ends them all.
        heartbeat.interrupt_attempts(_SHUTDOWN)


class SoloPool(solo.TaskPool):
    """Celery's solo pool; attempts run on a loop thread so the main thread stays free for signals."""

    def on_start(self) -> None:
        loops.offload_from_main_thread()
        super().on_start()

    def terminate_job(self, pid: int, signal: Any = None) -> None:
        heartbeat.interrupt_attempts(_SHUTDOWN)


_REPLACE = {thread.TaskPool: ThreadsPool, solo.TaskPool: SoloPool}


def _pool_name(pool_cls: Any) -> str:
    if isinstance(pool_cls, str):
        return pool_cls.rsplit(":", 1)[0].rsplit(".", 1)[-1]
    return str(getattr(pool_cls, "__module__", "")).rsplit(".", 1)[-1]


def _adopt(sender: Any = None, **_: Any) -> None:
    """At ``worker_init``: swap in the fleet's threads and solo pools, and refuse the others."""
    from reflexr_graph.fleet.app import FleetApp

    if not isinstance(getattr(sender, "app", None), FleetApp):
        return
    pool_cls = sender.pool_cls
    if isinstance(pool_cls, str):
        from celery.concurrency import get_implementation

        pool_cls = get_implementation(pool_cls)
    if pool_cls in _REPLACE:
        sender.pool_cls = _REPLACE[pool_cls]
        return
    if isinstance(pool_cls, type) and issubclass(pool_cls, (ThreadsPool, SoloPool)):
        return
    from celery.concurrency.prefork import TaskPool as PreforkPool

    if isinstance(pool_cls, type) and issubclass(pool_cls, PreforkPool):
        return
    log.critical(
        "the %s pool is not supported: its monkey-patching breaks the asyncio loop attempts run on; "
        "start the worker with -P prefork (the default), -P threads or -P solo",
        _pool_name(pool_cls),
    )
    sys.exit(1)


def install() -> None:
    signals.worker_init.connect(_adopt, weak=False)
