"""The job that publishes a worker's graphs: their schemas and versions, once a minute.

Clients validate inputs against the published schemas without the graphs' code, and the versions
tell which worker serves what (fleet/versions.py). Every reaper publishes, holder or not: each worker
publishes its own graphs. It reads nothing from the pass's read, and runs before it.
"""

from __future__ import annotations

import logging
import time

from reflexr_graph import schemas
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.reaping.job import Pass
from reflexr_graph.store import versions as store_versions
from reflexr_graph.store.redis_store import RedisStore

log = logging.getLogger(__name__)

PUBLISH_EVERY_S = 60.0


class Publish:
    """Publishes the graphs' schemas and versions when due: at the first pass, then every minute."""

    holder_only = False

    def __init__(self, app: FleetApp, store: RedisStore) -> None:
        self.app = app
        self.store = store
        self._next = 0.0

    def run(self, current: Pass) -> None:
        if current.now >= self._next:
            self.publish()

    def publish(self) -> None:
        """Publish the graphs' schemas, so clients validate inputs without the graphs' code."""
        settings = self.app.reflexr_settings
        written = schemas.publish(self.store, self.app.reflexr_registry.values(), settings.max_attempts)
        actions = list(self.app.reflexr_registry.values())
        entries = [
            store_versions.entry_of(
                a.version, a.fingerprint, a.label, sorted(a.kinds), (a.on_new_version, a.on_incompatible)
            )
            for a in actions
        ]
        first = self._next == 0.0
        self.store.publish_versions(entries, [a.name for a in actions], reconcile=first)
        if written:
            log.info("published the schemas of %s", ", ".join(written))
        self._next = time.monotonic() + PUBLISH_EVERY_S
