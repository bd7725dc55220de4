"""``reflexr-graph rekey``: every stored payload encrypted again under the first key, bound to
its run and its field (store/payload_codec.py: a payload written before either was bound is
written again bound to both).

Run by run, field by field, each rewrite is one script call on its one key (swap_payload.lua)
that lands only if the field still holds what was read: a run that moves on meanwhile keeps its
newer value (written under the first key already), so rekey can run beside a live fleet, be
interrupted, and be run again; a second pass finds nothing left to do. An offloaded payload gets
a new file; the old one is an orphan that the reaper's sweep deletes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import redis

from reflexr_graph import errors
from reflexr_graph.store import keys, keyspace
from reflexr_graph.store.base import StoreBase
from reflexr_graph.store.contracts import SwapPayloadArgs
from reflexr_graph.store.key_types import wrong_type
from reflexr_graph.store.ops import Eval, Op, as_stored
from reflexr_graph.store.payload_codec import PLAIN
from reflexr_graph.store.reads import graph_of
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


def _fields(run_id: str) -> Op[list[tuple[str, str, str]]]:
    """(hash key, field, stored value) of each payload of the run that may be rewritten, read as
    stored (envelopes not decoded: rekey writes them again itself).

    The memo's plain values are left alone: some are its own bookkeeping (a wait's wake time),
    and the next checkpoint takes in the rest."""
    run_key = keys.run(run_id)
    stored = yield as_stored("hmget", run_key, list(RUN_PAYLOAD_FIELDS))
    found = [(run_key, name, text(v)) for name, v in zip(RUN_PAYLOAD_FIELDS, stored, strict=True) if v]
    plain_too = {keys.ckpt(run_id): True, keys.mailbox(run_id): True, keys.memo(run_id): False}
    for hash_key, any_value in plain_too.items():
        for name, value in (yield as_stored("hgetall", hash_key)).items():
            if any_value or PLAIN.key_of(text(value)) is not None:
                found.append((hash_key, text(name), text(value)))
    long_inputs = yield as_stored("get", keys.inputs(run_id))
    if long_inputs is not None:
        found.append((keys.inputs(run_id), "", text(long_inputs)))
    return found


def _swap(hash_key: str, name: str, old: str, new: str) -> Op[bool]:
    """Set the field to ``new`` if it still holds ``old``; False when the run changed it meanwhile
    (swap_payload.lua: one round trip, the compare and the write one atomic step).

    ``name`` '' is a string key of its own (a run's long inputs, keys.inputs), not a hash field;
    its expiry is kept."""
    swapped = yield Eval(
        "swap_payload", [hash_key], SwapPayloadArgs(field=name, read=old, rewritten=new).argv()
    )
    return bool(swapped)


def rekey_run(store: StoreBase, run_id: str, report: RekeyReport) -> None:
    """Rewrite each payload of one run that is not under the first key yet."""
    report.runs += 1
    for hash_key, name, stored in store.do(_fields(run_id)):
        try:
            new = store.codec.recode(stored, run_id, keys.payload_field(hash_key, name))
        except errors.PayloadUnreadable as exc:
            report.unreadable[run_id] = str(exc)
            continue
        if new is not None and store.do(_swap(hash_key, name, stored, new)):
            report.rewritten += 1


def rekey(store: StoreBase, *, graph: str | None = None) -> RekeyReport:
    """Every run's payloads (of ``graph`` only, if given) under the store's first key."""
    ring = store.codec.ring
    if ring is None:
        raise errors.SettingsError("REFLEXR_PAYLOAD_KEYS is not set: rekey encrypts under its first key")
    report = RekeyReport(ring.primary)
    suffix = ":run"
    for name in keyspace.every_key(store, keys.every_run_key(), SCAN_COUNT):
        run_id = keys.run_of(name)
        if not name.endswith(suffix) or name != keys.run(run_id):
            continue
        try:
            if graph is not None and store.do(graph_of(run_id)) != graph:
                continue
            rekey_run(store, run_id, report)
        except redis.ResponseError as exc:
            # A key of another type under a run's name (store/key_types.py): its run is skipped.
            if not wrong_type(exc, name, "rekey"):
                raise
    return report
