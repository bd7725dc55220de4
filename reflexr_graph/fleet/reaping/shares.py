"""The job that shares the shards among the reapers: each acts on its part, the shards over the
live workers, and hands the rest back for the others to take.

The read takes the lock of every shard it can (``found.shards``); without this job the first reaper
would hold them all. A standalone store has one shard: nothing to share, and no count to read. It runs
in every reaper's pass, after the presence beat, so this worker counts among the live ones.
"""

from __future__ import annotations

import logging
import math

from reflexr_graph.fleet.reaping.job import Pass
from reflexr_graph.store.redis_store import RedisStore

log = logging.getLogger(__name__)


class ShareShards:
    """The shards whose lock ``owner`` holds after its last pass (:attr:`shards`)."""

    holder_only = False

    def __init__(self, store: RedisStore, owner: str) -> None:
        self.store = store
        self.owner = owner
        self.shards: tuple[int, ...] = ()

    def run(self, current: Pass) -> None:
        """Hand back the shards held beyond this reaper's part, for the other reapers to take; this
        pass still acts on them (a brief overlap is harmless: every change re-checks its run)."""
        held = current.found.shards
        self.shards = held
        if len(held) <= 1:
            return
        part = math.ceil(self.store.shards.count / max(1, self.store.live_worker_count()))
        extra = held[part:]
        if extra:
            self.store.release_lock(self.owner, extra)
            log.info(
                "reaper %s holds %d shards, hands back %d for the other reapers",
                self.owner,
                len(held),
                len(extra),
            )
            self.shards = held[:part]
