"""The pass's one read: ``reaper_tick.lua`` takes or keeps the lock and reads all the pass acts on.

One script per shard, pipelined (store/recovery.py: reaper_tick): an idle reaper costs one round trip
a pass, whatever the jobs after it look at (tests/fleet/test_idle_cost.py counts it). It runs in
every reaper's pass: a reaper without the lock learns from it when the lock would lapse. It also
says when to wake next, which the loop sleeps until (fleet/reaper.py: Reaper.next_wait_s).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field

from reflexr_graph.fleet.reaping.job import Pass
from reflexr_graph.fleet.reaping.prune import Prune
from reflexr_graph.store.redis_store import RedisStore


@dataclass(eq=False)
class Read:
    """Makes the pass's read for ``owner``, the runs to prune with it when ``prune`` says so."""

    holder_only = False

    store: RedisStore
    owner: str
    _: KW_ONLY
    lock_ttl_ms: int
    idle_ms: int
    """The longest sleep between passes."""
    margin_ms: int
    """How long past its planned wake the holder keeps the lock."""
    prune: Prune
    wake_ms: float | None = field(default=None, init=False)
    """When the last pass's read said to wake next (epoch ms); None before any, or after a read
    that failed."""

    def run(self, current: Pass) -> None:
        self.wake_ms = None
        current.prune = self.prune.due(current.now)
        current.found = self.store.reaper_tick(
            self.owner,
            self.lock_ttl_ms,
            idle_ms=self.idle_ms,
            margin_ms=self.margin_ms,
            prune=current.prune,
        )
        self.wake_ms = current.found.wake
