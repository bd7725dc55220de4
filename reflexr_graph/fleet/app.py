"""The Celery app of the fleet: Celery plus the fleet's settings, graph registry and store.

Its configuration is in config/celery.py, shared with the clients that send runs; the app with its task
and hooks is assembled in fleet/factory.py.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any

from celery import Celery
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry

from reflexr_graph.config.settings import Settings
from reflexr_graph.config.store import store_options
from reflexr_graph.core.action import GraphAction
from reflexr_graph.errors import StoreUnavailable
from reflexr_graph.store.redis_store import RedisStore

SOCKET_TIMEOUT_S = 10.0
SOCKET_CONNECT_TIMEOUT_S = 5.0
STORE_RETRIES = 2


class FleetApp(Celery):
    """A Celery app that also carries the fleet's settings, graph registry and store."""

    def __init__(self, settings: Settings, registry: Mapping[str, GraphAction], **kwargs: Any) -> None:
        super().__init__("reflexr_graph", **kwargs)
        self.reflexr_settings = settings
        self.reflexr_registry: dict[str, GraphAction] = dict(registry)
        self._store: RedisStore | None = None
        self._store_pid = 0

    def new_store(self) -> RedisStore:
        """A store with its own connection pool, for a thread that must not share one."""
        settings = self.reflexr_settings
        return RedisStore.from_url(
            settings.redis_url,
            options=store_options(settings, strict=True),
            # A renewal must fail before the lease lapses, not hang past it.
            socket_timeout=min(SOCKET_TIMEOUT_S, max(1.0, settings.lease_ttl_s / 2)),
            socket_connect_timeout=min(SOCKET_CONNECT_TIMEOUT_S, max(1.0, settings.lease_ttl_s / 2)),
            # redis-py's default retries back off for seconds; an attempt must learn of an
            # outage well within its lease TTL, so a blip is retried quickly and no more.
            retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), STORE_RETRIES),
        )

    def store(self) -> RedisStore:
        """This process's store, created on first use (pool children each get their own)."""
        pid = os.getpid()
        if self._store is None or self._store_pid != pid:
            store = self.new_store()
            with contextlib.suppress(StoreUnavailable):
                # Loaded now, no first call pays a NOSCRIPT round trip; if Redis is down, the
                # first calls load them (redis-py retries NOSCRIPT with the script's text).
                store.preload_scripts()
            # Every time this process compares is Redis's (clock.py): sampled before its first
            # call. A pool child inherits its parent's sample, fresh at the fork, and keeps it.
            store.keep_clock()
            self._store, self._store_pid = store, pid
        return self._store
