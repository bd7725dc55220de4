"""The run's stream: the items its steps emitted (core/emit.py), appended by ``lua/emit.lua`` and read live.

Entries have the ids ``0-<offset>``, offsets 1, 2, 3 ... as written, so a reader resumes after
an offset with an XRANGE, and blocks for the next one with an XREAD on the stream and, in the
same call, on the run's event stream: the run's end (its last event) wakes the reader too, which
then reads what is left and stops. No polling.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import chain
from typing import Any

from reflexr_graph import errors
from reflexr_graph.core.port import AttemptContext, Emission
from reflexr_graph.model import TERMINAL, Status, StreamItem, StreamPage
from reflexr_graph.store import keys
from reflexr_graph.store.base import _fenced
from reflexr_graph.store.contracts import EmitArgs, EmitReply, Emitted, emit_item
from reflexr_graph.store.ops import Eval, Op, batch, cmd, not_found
from reflexr_graph.store.records import text

PAGE = 500
"""The most items one read returns."""
DEFAULT_STREAM_MAX_ITEMS = 10_000
"""REFLEXR_STREAM_MAX_ITEMS's default."""


def stream_item(entry_id: Any, fields: Any) -> StreamItem:
    values = {text(k): text(v) for k, v in fields.items()}
    return StreamItem(
        offset=int(text(entry_id).partition("-")[2]),
        topic=values.get("t", ""),
        node=values.get("n", ""),
        branch=values.get("b", ""),
        call=values.get("c", ""),
        attempt=int(values.get("a") or 0),
        value=json.loads(values.get("v") or "null"),
        restart=values.get("r") == "1",
    )


def _entries_of(reply: Any, key: str) -> list[Any]:
    """The entries of stream ``key`` in an XREAD reply, RESP2 (``[[key, entries]]``) or RESP3
    (``{key: [entries]}``) alike."""
    for name, entries in reply.items() if isinstance(reply, dict) else reply or []:
        if text(name) == key:
            if entries and isinstance(entries[0], list):
                entries = entries[0]  # RESP3 nests them once more
            return list(entries)
    return []


def stream_page(run_id: str, after: int, block_ms: int | None, chunk_limit: int | None) -> Op[StreamPage]:
    """The run's items after offset ``after``; with ``block_ms`` (0: forever), wait that long for one
    or for the run to end, in XREAD BLOCKs of at most ``chunk_limit`` ms. RunNotFound for no run."""
    key, events = keys.stream(run_id), keys.events(run_id)
    remaining = block_ms
    while True:
        # The status first: the items a run's steps emitted are written before it ends, so an
        # ended run whose read after that finds nothing new has nothing more to give.
        status, latest, entries = yield batch(
            [
                cmd("hget", keys.run(run_id), "status"),
                cmd("xrevrange", events, "+", "-", count=1),
                cmd("xrange", key, min=f"0-{after + 1}", max="+", count=PAGE),
            ]
        )
        if status is None:
            raise not_found(run_id)
        newest = text(latest[0][0]) if latest else "0-0"
        items = [stream_item(entry_id, fields) for entry_id, fields in entries or []]
        ended = Status(text(status)) in TERMINAL
        if items or ended or remaining is None:
            return StreamPage(items, ended and len(items) < PAGE)
        chunk = remaining if remaining > 0 else (chunk_limit or 0)
        if chunk_limit is not None:
            chunk = min(chunk, chunk_limit)
        # Woken by an item, the reply holds it: handed over at once, one round trip after the write.
        # Woken by an event (the run may have ended), read again.
        found = yield cmd("xread", {key: f"0-{after}", events: newest}, count=PAGE, block=chunk)
        woke = _entries_of(found, key)
        if woke:
            return StreamPage([stream_item(entry_id, fields) for entry_id, fields in woke], False)
        if not found and block_ms:
            remaining -= chunk
            if remaining <= 0:
                return StreamPage([], False)


def append_stream(
    ctx: AttemptContext, items: Sequence[Emission], after: int, *, max_items: int = DEFAULT_STREAM_MAX_ITEMS
) -> Op[int]:
    """Append ``items`` in one EVALSHA, fenced by ``ctx.token``; returns the last offset held.

    FencedOut when the token does not own the run; StreamFull when the stream would pass
    ``max_items`` (the items that fit are written).
    """
    args = [
        *EmitArgs(ctx.token, max_items, ctx.attempt, after, len(items)).argv(),
        *chain.from_iterable(
            emit_item(i.topic, i.node, i.branch, i.call, i.restart, i.value, i.mark) for i in items
        ),
    ]
    script_keys = [keys.run(ctx.run_id), keys.stream(ctx.run_id), keys.memo(ctx.run_id)]
    reply = EmitReply.parse((yield Eval("emit", script_keys, args)))
    if reply.outcome is Emitted.FENCED:
        raise _fenced(ctx, "stream items")
    if reply.outcome is Emitted.FULL:
        raise errors.StreamFull(run_id=ctx.run_id, node=items[-1].node, max_items=max_items)
    return reply.last_offset
