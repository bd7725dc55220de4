"""A worker's presence in the registry: which graphs each live worker serves.

The main process of every worker beats every few seconds (from its reaper thread), so the
fleet can tell a graph nobody runs right now from one that is only slow to be picked up:
``graphs`` lists the live workers of each graph, ``enqueue`` warns when none serves it, and
a run waits for a worker (see ``unserved.py``) only while none does.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from importlib import metadata
from typing import Any

from reflexr_graph import clock
from reflexr_graph.store.records import WorkerInfo
from reflexr_graph.store.redis_store import RedisStore
from reflexr_graph.store.workers import HEARTBEAT_TTL_S

log = logging.getLogger(__name__)

BEAT_EVERY_S = 10.0
"""A third of the heartbeat's TTL: two beats can be missed before the worker counts as gone."""
TTL_S = HEARTBEAT_TTL_S
FULL_EVERY = 3
"""Every third beat (once per TTL) trims the entries of workers that stopped beating; the others
only refresh this worker's own."""
"""A worker that stopped beating counts as gone this long after its last beat (readers of the
registry know it too: store/workers.py tells the last beat from the heartbeat's expiry)."""


def describe(consumer: Any, graphs: list[str], versions: dict[str, str] | None = None) -> WorkerInfo:
    """What a worker says about itself, read from the Celery consumer that just became ready."""
    queues: tuple[str, ...] = ()
    task_consumer = getattr(consumer, "task_consumer", None)
    if task_consumer is not None:
        queues = tuple(sorted(q.name for q in task_consumer.queues))
    pool = getattr(consumer, "pool", None)
    controller = getattr(consumer, "controller", None)
    return WorkerInfo(
        name=str(getattr(consumer, "hostname", "") or f"pid-{os.getpid()}"),
        graphs=tuple(sorted(graphs)),
        queues=queues,
        pid=os.getpid(),
        pool=type(pool).__module__.rsplit(".", 1)[-1] if pool is not None else "",
        concurrency=int(getattr(controller, "concurrency", 0) or 0),
        version=metadata.version("reflexr-graph"),
        started_at=clock.now(),
        graph_versions=dict(versions or {}),
    )


class Presence:
    """Beats for one worker; :meth:`maybe_beat` is called from the reaper's loop."""

    def __init__(
        self, store: RedisStore, info: WorkerInfo, on_beat: Callable[[], None] | None = None
    ) -> None:
        self.store = store
        self.info = info
        self.on_beat = on_beat
        """Called after each beat: this worker takes back the runs held for its versions."""
        self._next = 0.0
        self._beats = 0

    def maybe_beat(self) -> None:
        now = time.monotonic()
        if now >= self._next:
            # The first beat and every FULL_EVERY-th also trim the registry (lua/worker_beat.lua).
            full = self._beats % FULL_EVERY == 0
            self.store.worker_beat(self.info, ttl_ms=int(TTL_S * 1000), full=full)
            self._beats += 1
            self._next = now + BEAT_EVERY_S
            if self.on_beat is not None:
                self.on_beat()

    def leave(self) -> None:
        """Leave the registry at shutdown, so the fleet stops counting this worker at once."""
        self.store.worker_leave(self.info)
