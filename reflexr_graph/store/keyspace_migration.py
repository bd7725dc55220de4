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

from reflexr_graph.store import keys, keyspace
from reflexr_graph.store.base import StoreBase
from reflexr_graph.store.ops import Op, as_stored, batch, cmd, one
from reflexr_graph.store.records import text

log = logging.getLogger(__name__)

SCAN_COUNT = 1000
_TYPES = {"tag": b"zset", "idem": b"string"}
_MAX_OLD_RUN_ID = 200
"""The longest run id an idempotency key of the old layout could name (fleet/message.py then)."""
_JSON_OPENERS = ("{", "[", '"')


def _move(old: str, new: str) -> Op[bool]:
    """Move one key of the old layout; False when it is not one (another type)."""
    kind = "tag" if f"}}:{keys.USER_TEXT}tag:" in new else "idem"
    if (yield cmd("type", old)) != _TYPES[kind]:
        return False
    if kind == "idem":
        # As stored: long inputs' envelope must read as one, not as the payload it holds.
        owner = text((yield as_stored("get", old)))
        # A run of an id like 'idem:g:k' had a string too, its long inputs ('rg:{s<n>}:idem:g:k:in'):
        # JSON or an envelope, never a run id.
        if not owner or len(owner) > _MAX_OLD_RUN_ID or owner.startswith(_JSON_OPENERS):
            return False
        # RENAMENX keeps the TTL, and refuses when a newer key took the name: the old one goes.
        if not (yield cmd("renamenx", old, new)):
            yield cmd("delete", old)
        return True
    merge = [
        cmd("zunionstore", new, [new, old], aggregate="MIN"),
        cmd("delete", old),
        cmd("sadd", keys.tag_indexes(keys.shard_in(new)), new),
    ]
    yield batch(merge, transaction=True)
    return True


def migrate(client: redis.Redis) -> int:
    """Move every key of the old layout, once per store; how many were moved (0 once marked).

    Its requests go through a store on ``client`` (the executor, store/base.py), as every store
    request does: Redis errors arrive as StoreUnavailable, a WRONGTYPE or other refusal as it is."""
    store = StoreBase(client)
    if store.do(one(cmd("exists", keys.MIGRATED))):
        return 0
    moved = 0
    for pattern in keys.old_user_text_keys():
        for old in keyspace.every_key(store, pattern, SCAN_COUNT):
            new = keys.migrated_name(old)
            if new and store.do(_move(old, new)):
                moved += 1
    store.do(one(cmd("set", keys.MIGRATED, "1")))
    if moved:
        log.info("moved %d tag indexes and idempotency keys to the current key layout", moved)
    return moved
