"""The job that prunes the indexes of finished runs past retention, holder only.

The pass's read fetches the runs to prune (three reads of the status sets) only when
:meth:`Prune.due` says so, before the read (see :data:`PRUNE_EVERY_S`); the job then prunes what it
found, and walks the tag indexes a step.
"""

from __future__ import annotations

import logging

from reflexr_graph.fleet.reaping.job import Pass
from reflexr_graph.store.recovery import TICK_BATCH
from reflexr_graph.store.redis_store import RedisStore

log = logging.getLogger(__name__)

PRUNE_EVERY_S = 60.0
"""How often the holder's tick reads the finished runs past retention to prune (three reads): their
keys expire by themselves, and retention is days, so only the indexes wait. While a read comes back
full (TICK_BATCH), every pass prunes, as before, so it keeps up with a busy fleet."""


class Prune:
    """Prunes what the read found (``found.prunable``), and walks the tag indexes a step."""

    holder_only = True

    def __init__(self, store: RedisStore) -> None:
        self.store = store
        self._next = 0.0
        self._behind = False
        self._tag_cursors: dict[int, int] = {}
        """Where the walk of each shard's tag indexes is (store/recovery.py: prune_tag_indexes)."""

    def due(self, now: float) -> bool:
        """Whether the pass that begins at ``now`` reads the runs to prune."""
        return self._behind or now >= self._next

    def run(self, current: Pass) -> None:
        """Prune what the read found; a read that came back full makes the next pass prune too: a
        pass every few minutes fell behind any fleet finishing more than a few runs a second."""
        if not current.prune:
            return
        prunable = current.found.prunable
        self._next = current.now + PRUNE_EVERY_S
        self._behind = any(len(found) >= TICK_BATCH for found in prunable.values())
        pruned = self.store.prune(found=prunable)
        pruned += self.store.prune_tag_indexes(self._tag_cursors)
        if pruned:
            log.debug("pruned %d index entries of expired runs", pruned)
