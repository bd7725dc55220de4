"""Not a job of the pass but of the presence beat: take back the runs held for this worker's graphs.

Runs held for a graph version no live worker served (fleet/versions.py) are woken once a worker
serving it beats, and runs whose graph asks for auto-upgrades move to a newer version
(fleet/auto_upgrade.py). It rides on the beat rather than the pass because every worker beats,
holder of the lock or not, and each worker takes back the runs of its own graphs.
"""

from __future__ import annotations

import logging

from reflexr_graph.fleet import auto_upgrade, versions
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.store.redis_store import RedisStore

log = logging.getLogger(__name__)


def wake_held(app: FleetApp, store: RedisStore) -> None:
    """Wake the runs held for ``app``'s graphs, and auto-upgrade those that ask for it."""
    try:
        marked = store.held_versions()
        versions.wake_held(app, store, marked)
        auto_upgrade.auto_upgrade(app, store, marked)
    except Exception as exc:  # the beat goes on; the held runs are looked at again next beat
        log.warning(
            "taking back or auto-upgrading the runs held for this worker's graphs failed (%s); trying "
            "again at the next beat",
            exc,
        )
