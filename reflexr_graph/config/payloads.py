"""The payload codec a process builds from its settings (``REFLEXR_PAYLOAD_*``, ``REFLEXR_OFFLOAD_BYTES``)."""

from __future__ import annotations

from reflexr_graph.config.settings import Settings
from reflexr_graph.store.payload_codec import PayloadCodec
from reflexr_graph.store.payload_keys import KeyRing
from reflexr_graph.store.payload_store import open_store


def payload_codec(settings: Settings, *, strict: bool = False) -> PayloadCodec:
    """How this process keeps payloads at rest. ``strict`` (workers): a payload it cannot read is a
    permanent failure of its run; otherwise it reads as ``"<encrypted with key k1>"`` and the like."""
    store = open_store(settings.payload_store) if settings.payload_store else None
    return PayloadCodec(
        KeyRing.parse(settings.payload_keys),
        store,
        offload_bytes=settings.offload_bytes,
        max_offload_bytes=settings.max_offload_bytes,
        strict=strict,
    )
