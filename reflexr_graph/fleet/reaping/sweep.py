"""The job that sweeps the payload store for files no run refers to, every ten minutes.

Only with a payload store (``store.codec.blobs``), and only the holder: one sweep for the fleet
(store/payload_sweep.py does the sweep). It reads nothing from the pass's read.
"""

from __future__ import annotations

from reflexr_graph.fleet.reaping.job import Pass
from reflexr_graph.store import payload_sweep
from reflexr_graph.store.redis_store import RedisStore

PAYLOAD_SWEEP_S = 600.0
"""How often the reaper holding the lock sweeps the payload store for files no run refers to."""


class SweepPayloads:
    """Now and then, deletes the payload store's files no run refers to."""

    holder_only = True

    def __init__(self, store: RedisStore) -> None:
        self.store = store
        self._next = 0.0

    def run(self, current: Pass) -> None:
        if self.store.codec.blobs is None or current.now < self._next:
            return
        self._next = current.now + PAYLOAD_SWEEP_S
        payload_sweep.sweep(self.store)
