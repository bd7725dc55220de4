"""The Redis adapter of the store port: runs, checkpoints, leases, events and dead letters.

All key names are in :mod:`reflexr_graph.store.keys`; every multi-key change is one Lua
script in ``store/lua``.
"""

from reflexr_graph.store.records import Claim, ClaimOutcome
from reflexr_graph.store.redis_store import RedisStore
from reflexr_graph.store.settings import StoreOptions

__all__ = ["Claim", "ClaimOutcome", "RedisStore", "StoreOptions"]
