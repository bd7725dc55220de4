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
from reflexr_graph.model import WorkerInfo
from reflexr_graph.store.redis_store import RedisStore
from reflexr_graph.store.workers import HEARTBEAT_TTL_S

log = logging.getLogger(__name__)

BEAT_EVERY_S = 10.0
"""A third of the heartbeat's TTL: two beats can be missed before the worker counts as gone. A beat
refreshes only the heartbeat (one ZADD), unless it is a full one, which also samples Redis's time
(clock.py) in the same round trip; each beat says when this worker's clock is off it (SkewWatch)."""
TTL_S = HEARTBEAT_TTL_S
"""A worker that stopped beating counts as gone this long after its last beat (readers of the
registry know it too: store/workers.py tells the last beat from the heartbeat's expiry)."""
FULL_EVERY_S = 60.0
"""About this often a beat is a full one (lua/worker_beat.lua): it writes the worker's description
and its served entries again. Readers take those only for a live worker (store/workers.py)."""
DESCRIBED_S = 2 * FULL_EVERY_S
"""How long a full beat's description and served entries last: longer than a full beat's gap
(FULL_EVERY_S, less half a beat) plus a heartbeat TTL, so a live worker's are always there."""
TRIM_EVERY_S = 300.0
"""About this often a full beat also trims the entries of workers that stopped beating and sets
the served sets' expiry (SETS_S)."""
SETS_S = 2 * TRIM_EVERY_S
"""A served set disappears this long after the last trim of the last worker that served it: longer
than a trim's gap plus a full beat's plus a TTL, so a live worker's set stays."""


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


class SkewWatch:
    """Says once when a worker's wall clock is off Redis's by more than ``clock.SKEW_WARN_MS``, again
    when the skew moves by as much, and when it is back within: each beat measures it (clock.py)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._warned: int | None = None

    def check(self, skew_ms: int | None) -> None:
        if skew_ms is None:
            return
        if abs(skew_ms) > clock.SKEW_WARN_MS:
            if self._warned is None or abs(skew_ms - self._warned) > clock.SKEW_WARN_MS:
                log.warning(
                    "worker %s: its clock is %+.1fs off Redis's; the worker keeps the store's time for "
                    "every lease and due time, so nothing is affected; fix NTP on this host",
                    self.name,
                    skew_ms / 1000,
                )
                self._warned = skew_ms
        elif self._warned is not None:
            log.info("worker %s: its clock is within %+.1fs of Redis's again", self.name, skew_ms / 1000)
            self._warned = None


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
        self._last_full: float | None = None
        self._last_trim: float | None = None
        self._skew = SkewWatch(self.info.name)

    def maybe_beat(self) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        # Half a beat early, so beats every BEAT_EVERY_S make a full one every FULL_EVERY_S.
        slack = BEAT_EVERY_S / 2
        full = self._last_full is None or now - self._last_full >= FULL_EVERY_S - slack
        trim = full and (self._last_trim is None or now - self._last_trim >= TRIM_EVERY_S - slack)
        ttl_ms = int(TTL_S * 1000)
        # A worker the registry had lost (a stall past its TTL, or Redis lost its data) beats in full
        # at once: its description and served entries may be gone with it.
        if full or not self.store.worker_alive(self.info.name, ttl_ms=ttl_ms):
            described_ms, sets_ms = int(DESCRIBED_S * 1000), int(SETS_S * 1000)
            # The description carries the skew of the latest sample (the beat before, or the start).
            self.info = self.info.model_copy(update={"clock_skew_ms": clock.skew_ms()})
            self.store.worker_beat(
                self.info, ttl_ms=ttl_ms, described_ms=described_ms, sets_ms=sets_ms, trim=trim
            )
            self._last_full = now
            self._last_trim = now if trim else self._last_trim
        self._next = now + BEAT_EVERY_S
        self._skew.check(clock.skew_ms())
        if self.on_beat is not None:
            self.on_beat()

    def leave(self) -> None:
        """Leave the registry at shutdown, so the fleet stops counting this worker at once."""
        self.store.worker_leave(self.info)
