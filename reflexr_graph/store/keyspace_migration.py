"""Moving the keys written before the user-text namespace (store/keys.py: USER_TEXT) to it.

Before it, a tag index was ``rg:{s<n>}:tag:<key>=<value>`` and an idempotency key
``rg:{s<n>}:idem:<graph>:<key>``: user text in a key name, which could forge a run's key. Each
worker runs :func:`migrate` once at start (fleet/preflight.py), before its consumer takes a
message, so a store is moved by the first worker of the new release, with no step for an operator
to forget; the later ones read the marker (:data:`keys.MIGRATED`) and do nothing more. It is
idempotent and safe to run from several workers at once: each move is one transaction on one slot
(a key keeps its shard's hash tag), and a key already moved is not found again.

A tag index is merged into its new name (a run created since the upgrade is in both), then
deleted; an idempotency key is renamed unless the new name exists already (a run keyed since the
upgrade owns it now), keeping its expiry. A key of another type under an old name, or a string
that holds no run id (the keys of a run whose id was ``tag:...`` or ``idem:...``, which run ids
can no longer be), is left as it is.
"""

from __future__ import annotations

import logging

import redis

from reflexr_graph.store import keys
from reflexr_graph.store.records import text

log = logging.getLogger(__name__)

SCAN_COUNT = 1000
_TYPES = {"tag": b"zset", "idem": b"string"}
_MAX_OLD_RUN_ID = 200
"""The longest run id an idempotency key of the old layout could name (fleet/message.py then)."""
_JSON_OPENERS = ("{", "[", '"')


def _move(client: redis.Redis, old: str, new: str) -> bool:
    """Move one key of the old layout; False when it is not one (another type)."""
    kind = "tag" if f"}}:{keys.USER_TEXT}tag:" in new else "idem"
    if client.type(old) != _TYPES[kind]:
        return False
    if kind == "idem":
        owner = text(client.get(old))
        # A run of an id like 'idem:g:k' had a string too, its long inputs ('rg:{s<n>}:idem:g:k:in'):
        # JSON or an envelope, never a run id.
        if not owner or len(owner) > _MAX_OLD_RUN_ID or owner.startswith(_JSON_OPENERS):
            return False
        # RENAMENX keeps the TTL, and refuses when a newer key took the name: the old one goes.
        if not client.renamenx(old, new):
            client.delete(old)
        return True
    pipe = client.pipeline(transaction=True)
    pipe.zunionstore(new, [new, old], aggregate="MIN")
    pipe.delete(old)
    pipe.sadd(keys.tag_indexes(keys.shard_in(new)), new)
    pipe.execute()
    return True


def migrate(client: redis.Redis) -> int:
    """Move every key of the old layout, once per store; how many were moved (0 once marked)."""
    if client.exists(keys.MIGRATED):
        return 0
    moved = 0
    for pattern in keys.old_user_text_keys():
        for key in client.scan_iter(match=pattern, count=SCAN_COUNT):
            old = text(key)
            new = keys.migrated_name(old)
            if new and _move(client, old, new):
                moved += 1
    client.set(keys.MIGRATED, "1")
    if moved:
        log.info("moved %d tag indexes and idempotency keys to the current key layout", moved)
    return moved
