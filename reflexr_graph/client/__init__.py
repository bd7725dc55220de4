"""The Python clients: enqueue runs, read them, wait for them, and act on dead letters.

``Client`` blocks (redis-py); ``AsyncClient`` has the same methods for asyncio code, on
``redis.asyncio``. Both run the same operations (``client/core.py``, ``store/ops.py``).
"""

from reflexr_graph.client.aio import AsyncClient
from reflexr_graph.client.core import DISPATCH_GRACE_MS, SCHEMA_CACHE_S, Enqueued
from reflexr_graph.client.sync import Client
from reflexr_graph.store.reads import RunPage

__all__ = ["DISPATCH_GRACE_MS", "SCHEMA_CACHE_S", "AsyncClient", "Client", "Enqueued", "RunPage"]
