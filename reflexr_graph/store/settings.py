"""What a store operation may read of the store that runs it: its settings, read only.

An operation of the store's table (``store/operation.py``) takes them first, then its call's
arguments; the executor that runs it (``RedisStore``) is them, seen through this Protocol, so a
setting changed on the store (a test's shorter history) is the one its next operation reads.
"""

from __future__ import annotations

from typing import Protocol

from reflexr_graph.store.keys import Shards
from reflexr_graph.store.payload_codec import PayloadCodec


class StoreSettings(Protocol):
    """The settings of a store, as its operations read them (the store's own attributes)."""

    shards: Shards
    """How the store's indexes are sharded (keys.Shards)."""
    run_retention_s: int
    """How long a finished run is kept (REFLEXR_RUN_RETENTION_S)."""
    dead_retention_s: int
    """How long a dead run is kept (REFLEXR_DEAD_RETENTION_S)."""
    max_interruptions: int
    """Interrupted attempts (not counted in ``max_attempts``) a run may have before it is dead."""
    checkpoint_history: int
    """How many checkpoints before the latest a run keeps (REFLEXR_CHECKPOINT_HISTORY)."""
    codec: PayloadCodec
    """How payloads are kept at rest (store/payload_codec.py)."""

    @property
    def max_block_ms(self) -> int | None:
        """The longest XREAD BLOCK the store's client survives (None: any)."""
