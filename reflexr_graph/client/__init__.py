"""The Python clients: enqueue runs, read them, wait for them, and act on dead letters.

``Client`` blocks (redis-py); ``AsyncClient`` has the same methods for asyncio code, on
``redis.asyncio``. Both run the same operations (``client/core.py``, ``store/ops.py``): each
method of either is one operation, run by its own executor.
"""

from reflexr_graph.client.aio import AsyncClient
from reflexr_graph.client.bulk import BulkCancel
from reflexr_graph.client.core import (
    BULK_LIMIT,
    DISPATCH_GRACE_MS,
    SCHEMA_CACHE_S,
    BulkReplay,
    Enqueued,
    Refused,
)
from reflexr_graph.client.sync import Client
from reflexr_graph.model import DeadLetter, LimitUsage, Quarantined, QuarantinedItem, RunPage, ScheduleInfo

__all__ = [
    "BULK_LIMIT",
    "DISPATCH_GRACE_MS",
    "SCHEMA_CACHE_S",
    "AsyncClient",
    "BulkCancel",
    "BulkReplay",
    "Client",
    "DeadLetter",
    "Enqueued",
    "LimitUsage",
    "Quarantined",
    "QuarantinedItem",
    "Refused",
    "RunPage",
    "ScheduleInfo",
]
