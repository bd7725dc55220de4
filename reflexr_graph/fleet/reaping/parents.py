"""The job that tells the parent of each child run that ended (``found.ended``), holder only.

Every script that ends a run notes a child in its shard's ``children:ended`` set, in the same write;
this job tells the parent (store/children.py: tell_parent, in the parent's shard, which may be
another), which queues it once its children ended. A parent queued now is due now, so this job runs
before the dispatch.
"""

from __future__ import annotations

import logging

from reflexr_graph.fleet.reaping.job import Pass
from reflexr_graph.store.redis_store import RedisStore

log = logging.getLogger(__name__)


class TellParents:
    """Tells the parents of the child runs that ended; counts the parents that queued."""

    holder_only = True

    def __init__(self, store: RedisStore) -> None:
        self.store = store

    def run(self, current: Pass) -> None:
        for child in current.found.ended:
            woke = self.store.tell_parent(child)
            if woke is not None:
                current.requeued += 1
                log.info("run %s: its children ended; it is queued, and its message is sent next", woke[0])
