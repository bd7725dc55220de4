"""The store's options a process builds from its settings: each ``REFLEXR_*`` setting the store
reads is mapped to it here, once, for the workers, the clients and the CLI alike."""

from __future__ import annotations

from reflexr_graph.config.payloads import payload_codec
from reflexr_graph.config.settings import Settings
from reflexr_graph.store.settings import StoreOptions


def store_options(settings: Settings, *, strict: bool = False) -> StoreOptions:
    """What this process's store is built with besides its URL and client options. ``strict``
    (workers) is the payload codec's: a payload it cannot read fails its run (config/payloads.py)."""
    return StoreOptions(
        run_retention_s=settings.run_retention_s,
        dead_retention_s=settings.dead_retention_s,
        max_interruptions=settings.max_interruptions,
        checkpoint_history=settings.checkpoint_history,
        codec=payload_codec(settings, strict=strict),
    )
