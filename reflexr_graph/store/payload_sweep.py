"""Deleting payload store files that no run refers to any more (the reaper runs it).

A file is written before the script that refers to it, so a young file without a reference may
be one whose script is about to run: only files older than a grace period are candidates. Once a
run's retention passes its keys expire, nothing refers to its files, and the next sweep deletes
them. With no candidate the sweep reads nothing from Redis.
"""

from __future__ import annotations

import logging

import redis

from reflexr_graph import clock
from reflexr_graph.store import keys, keyspace
from reflexr_graph.store.base import StoreBase
from reflexr_graph.store.key_types import wrong_type
from reflexr_graph.store.ops import Op, as_stored
from reflexr_graph.store.payload_codec import PayloadCodec
from reflexr_graph.store.records import text

log = logging.getLogger(__name__)

ORPHAN_GRACE_S = 3600.0
"""How old an unreferenced file must be before a sweep deletes it: far longer than any write
waits for the script that refers to it."""
SCAN_COUNT = 1000


_SUFFIXES = tuple(f":{name}" for name in keys.RUN_HASHES)


def _values(name: str) -> Op[list[bytes | str]]:
    """The values a run's key ``name`` holds that may be payloads, as stored (envelopes not
    decoded: their references are what the sweep reads); none for another key, or for one of the
    wrong type (store/key_types.py)."""
    run_id = keys.run_of(name)
    if not run_id:
        return []  # not a run's key (a shard's index shares the pattern)
    try:
        if name.endswith(_SUFFIXES):
            return list((yield as_stored("hvals", name)))
        if name == keys.inputs(run_id):
            return [(yield as_stored("get", name)) or b""]
    except redis.ResponseError as exc:
        if not wrong_type(exc, name, "payload sweep"):
            raise
    return []


def referenced(store: StoreBase, codec: PayloadCodec) -> set[str]:
    """Every digest a run in Redis refers to (its run, checkpoint, memo and mailbox hashes, and
    its long inputs' key): one SCAN a page, one read a key, each through the store's executor."""
    found: set[str] = set()
    for key in keyspace.every_key(store, keys.every_run_key(), SCAN_COUNT):
        for value in store.do(_values(key)):
            digest = codec.references(text(value))
            if digest:
                found.add(digest)
    return found


def sweep(store: StoreBase, *, grace_s: float = ORPHAN_GRACE_S) -> int:
    """Delete the files of the store's payload store older than ``grace_s`` that no run refers
    to; how many were deleted (0 without a payload store)."""
    blobs = store.codec.blobs
    if blobs is None:
        return 0
    cutoff = clock.now() - grace_s
    candidates = [digest for digest, mtime in blobs.entries() if mtime <= cutoff]
    if not candidates:
        return 0
    live = referenced(store, store.codec)
    gone = [digest for digest in candidates if digest not in live]
    for digest in gone:
        # Writing the same bytes again renews a file's age: one written again since it was
        # listed may have a new reference already.
        blobs.delete_if_older(digest, cutoff)
    if gone:
        log.info("payload store: deleted %d files no run refers to; %d kept", len(gone), len(live))
    return len(gone)
