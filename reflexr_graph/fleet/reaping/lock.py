"""The job that follows the lock as the pass's read left it: whether this reaper acts this pass.

The read takes or keeps the lock (``reaper_tick.lua``); this job only records the answer, says when
it changed, and gives the lock back when the reaper stops, so another worker's reaper takes over at
once instead of after the lock's TTL. It runs in every reaper's pass.
"""

from __future__ import annotations

import logging

from reflexr_graph.errors import StoreUnavailable
from reflexr_graph.fleet.reaping.job import Pass
from reflexr_graph.store.contracts import Lock
from reflexr_graph.store.redis_store import RedisStore

log = logging.getLogger(__name__)


class HoldLock:
    """Whether ``owner`` holds the lock (:attr:`holding`), after its last pass."""

    holder_only = False

    def __init__(self, store: RedisStore, owner: str, lock_ttl_ms: int) -> None:
        self.store = store
        self.owner = owner
        self.lock_ttl_ms = lock_ttl_ms
        self.holding = False

    def run(self, current: Pass) -> None:
        held = current.found.lock is not Lock.OTHER
        if self.holding and not held:
            log.warning("reaper %s lost its lock; another worker's reaper acts now", self.owner)
        elif held and not self.holding:
            log.info("reaper %s took the lock; it now re-enqueues lapsed and due runs", self.owner)
        self.holding = current.holding = held

    def release(self) -> None:
        """Hand the lock over, if held, so another worker's reaper takes over at once."""
        if not self.holding:
            return
        try:
            self.store.release_lock(self.owner)
            log.info(
                "reaper %s stopped and released its lock; another worker's reaper takes over", self.owner
            )
        except StoreUnavailable:
            log.info("reaper %s stopped; its lock expires within %d ms", self.owner, self.lock_ttl_ms)
        self.holding = False
