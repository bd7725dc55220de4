"""The store's settings: the one value a store is built with, and what an operation reads of it.

:class:`StoreOptions` holds the five settings a store is built with (``RedisStore(client,
options=...)``, ``RedisStore.from_url``, ``AsyncStore.from_url``); a process maps its ``REFLEXR_*``
settings to it in one place (``config/store.py``). An operation of the store's table
(``store/operation.py``) takes :class:`StoreSettings` first, then its call's arguments; the
executor that runs it (``RedisStore``) is them, seen through this Protocol, so options replaced on
the store (a test's shorter history) are the ones its next operation reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from reflexr_graph.store.keys import Shards
from reflexr_graph.store.payload_codec import PLAIN, PayloadCodec

DEFAULT_RUN_RETENTION_S = 7 * 86400
DEFAULT_DEAD_RETENTION_S = 30 * 86400
DEFAULT_MAX_INTERRUPTIONS = 20
DEFAULT_CHECKPOINT_HISTORY = 100


@dataclass(frozen=True)
class StoreOptions:
    """What a store is built with besides its client: retention, bounds and the payload codec."""

    run_retention_s: int = DEFAULT_RUN_RETENTION_S
    """How long a finished run is kept (REFLEXR_RUN_RETENTION_S)."""
    dead_retention_s: int = DEFAULT_DEAD_RETENTION_S
    """How long a dead run is kept (REFLEXR_DEAD_RETENTION_S)."""
    max_interruptions: int = DEFAULT_MAX_INTERRUPTIONS
    """Interrupted attempts (not counted in ``max_attempts``) a run may have before it is dead
    (REFLEXR_MAX_INTERRUPTIONS)."""
    checkpoint_history: int = DEFAULT_CHECKPOINT_HISTORY
    """How many checkpoints before the latest a run keeps (REFLEXR_CHECKPOINT_HISTORY)."""
    codec: PayloadCodec = PLAIN
    """How payloads are kept at rest (store/payload_codec.py): compressed, encrypted, offloaded."""


DEFAULT_OPTIONS = StoreOptions()
"""The options of a store built without any: the defaults above, payloads as they are."""


class StoreSettings(Protocol):
    """The settings of a store, as its operations read them (the store's own attributes)."""

    shards: Shards
    """How the store's indexes are sharded (keys.Shards)."""
    options: StoreOptions
    """What the store was built with: retention, ``max_interruptions``, history, payload codec."""

    @property
    def max_block_ms(self) -> int | None:
        """The longest XREAD BLOCK the store's client survives (None: any)."""
