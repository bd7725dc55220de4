"""``reflexr-graph rekey``: every stored payload encrypted again under the first key, bound to
its run and its field (store/payload_codec.py: a payload written before either was bound is
written again bound to both).

Run by run, field by field, each rewrite is a WATCH/MULTI of its one hash that lands only if the
field still holds what was read: a run that moves on meanwhile keeps its newer value (written
under the first key already), so rekey can run beside a live fleet, be interrupted, and be run
again; a second pass finds nothing left to do. An offloaded payload gets a new file; the old one
is an orphan that the reaper's sweep deletes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import redis

from reflexr_graph import errors
from reflexr_graph.store import keys
from reflexr_graph.store.base import StoreBase
from reflexr_graph.store.key_types import wrong_type
from reflexr_graph.store.payload_codec import PLAIN
from reflexr_graph.store.records import text

SCAN_COUNT = 500
RUN_PAYLOAD_FIELDS = keys.RUN_PAYLOADS
"""The run hash's fields that hold payloads; its other fields are the run's bookkeeping."""


@dataclass
class RekeyReport:
    """What a rekey pass did."""

    key_id: str
    runs: int = 0
    """Runs looked at."""
    rewritten: int = 0
    """Payloads written again under ``key_id``."""
    unreadable: dict[str, str] = field(default_factory=dict)
    """Runs with a payload this process cannot read (a key it lacks, a missing file): run -> why."""


def _fields(r: redis.Redis, run_id: str) -> list[tuple[str, str, str]]:
    """(hash key, field, stored value) of each payload of the run that may be rewritten.

    The memo's plain values are left alone: some are its own bookkeeping (a wait's wake time),
    and the next checkpoint takes in the rest."""
    run_key = keys.run(run_id)
    stored = r.hmget(run_key, list(RUN_PAYLOAD_FIELDS))
    found = [(run_key, name, text(v)) for name, v in zip(RUN_PAYLOAD_FIELDS, stored, strict=True) if v]
    plain_too = {keys.ckpt(run_id): True, keys.mailbox(run_id): True, keys.memo(run_id): False}
    for hash_key, any_value in plain_too.items():
        for name, value in r.hgetall(hash_key).items():
            if any_value or PLAIN.key_of(text(value)) is not None:
                found.append((hash_key, text(name), text(value)))
    long_inputs = r.get(keys.inputs(run_id))
    if long_inputs is not None:
        found.append((keys.inputs(run_id), "", text(long_inputs)))
    return found


def _swap(r: redis.Redis, hash_key: str, name: str, old: str, new: str) -> bool:
    """Set the field to ``new`` if it still holds ``old``; False when the run changed it meanwhile.

    ``name`` '' is a string key of its own (a run's long inputs, keys.inputs), not a hash field."""

    swapped = False

    def swap(pipe: redis.client.Pipeline) -> None:
        # Runs again if the hash changes before EXEC (WATCH): the check then sees the change.
        nonlocal swapped
        swapped = text(pipe.hget(hash_key, name) if name else pipe.get(hash_key)) == old
        if swapped:
            pipe.multi()
            if name:
                pipe.hset(hash_key, name, new)
            else:
                # KEEPTTL: a finished run's inputs expire with its other keys, as before the rekey.
                pipe.set(hash_key, new, keepttl=True)

    r.transaction(swap, hash_key)
    return swapped


def rekey_run(store: StoreBase, run_id: str, report: RekeyReport) -> None:
    """Rewrite each payload of one run that is not under the first key yet."""
    report.runs += 1
    for hash_key, name, stored in _fields(store.client, run_id):
        try:
            new = store.codec.recode(stored, run_id, keys.payload_field(hash_key, name))
        except errors.PayloadUnreadable as exc:
            report.unreadable[run_id] = str(exc)
            continue
        if new is not None and _swap(store.client, hash_key, name, stored, new):
            report.rewritten += 1


def rekey(store: StoreBase, *, graph: str | None = None) -> RekeyReport:
    """Every run's payloads (of ``graph`` only, if given) under the store's first key."""
    ring = store.codec.ring
    if ring is None:
        raise errors.SettingsError("REFLEXR_PAYLOAD_KEYS is not set: rekey encrypts under its first key")
    report = RekeyReport(ring.primary)
    suffix = ":run"
    for key in store.client.scan_iter(match=keys.every_run_key(), count=SCAN_COUNT):
        name = text(key)
        run_id = keys.run_of(name)
        if not name.endswith(suffix) or name != keys.run(run_id):
            continue
        try:
            if graph is not None and text(store.client.hget(name, "graph")) != graph:
                continue
            rekey_run(store, run_id, report)
        except redis.ResponseError as exc:
            # A key of another type under a run's name (store/key_types.py): its run is skipped.
            if not wrong_type(exc, name, "rekey"):
                raise
    return report
