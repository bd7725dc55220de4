"""Redis clients from a store URL: ``redis://``, ``rediss://`` (TLS), ``redis+sentinel://`` or
``redis+cluster://`` (``rediss+cluster://``).

The one place a URL becomes a client, so the store, the clients and the worker's own helpers
all reach the same primary, and follow it through a Sentinel failover.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio

from reflexr_graph.store import cluster, sentinel, url_check
from reflexr_graph.store.tls import HandshakeBoundSSLConnection

SETTING = "the Redis URL (REFLEXR_REDIS_URL, or REFLEXR_BROKER_URL for the broker)"
"""How an unusable URL is named here, where which setting it came from is not known."""


def blocking_client(url: str, **options: Any) -> redis.Redis:
    """A redis-py client of ``url``; a TLS handshake counts as connecting (``store/tls.py``).
    SettingsError, never quoting the URL, when it does not parse (store/url_check.py)."""
    url_check.check(url, SETTING)
    if sentinel.is_sentinel_url(url):
        return sentinel.client(url, **options)
    if cluster.is_cluster_url(url):
        return cluster.client(url, **options)
    if url.startswith("rediss://"):
        options.setdefault("connection_class", HandshakeBoundSSLConnection)
    return redis.Redis.from_url(url, **options)


def async_client(url: str, **options: Any) -> redis.asyncio.Redis:
    """A redis.asyncio client of ``url``."""
    url_check.check(url, SETTING)
    if sentinel.is_sentinel_url(url):
        return sentinel.async_client(url, **options)
    if cluster.is_cluster_url(url):
        return cluster.async_client(url, **options)
    return redis.asyncio.Redis.from_url(url, **options)
