"""Reading runs: records, events (blocking reads included), listings, checkpoint metadata.

Each read is an operation (``store/ops.py``) that the blocking store and the async client both
run; the blocking store's table (store/redis_store.py) runs them and the few below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from reflexr_graph import clock, errors
from reflexr_graph.core.tags import matches
from reflexr_graph.model import BranchLane, DeadLetter, RunEvent, RunInfo, RunPage, Status
from reflexr_graph.store import fanout, keys
from reflexr_graph.store.contracts import PruneArgs
from reflexr_graph.store.ops import Op, batch, cmd, layout, not_found, per_run
from reflexr_graph.store.records import (
    LATEST_CHECKPOINT,
    branch_lanes,
    checkpoint_entry,
    checkpoint_field,
    run_event,
    run_info,
    text,
    text_map,
)
from reflexr_graph.store.settings import StoreSettings

_LIST_PAGE = 200
SCAN_BUDGET = 2000
"""Index entries one page request (the HTTP API's, ``runs_page``) examines at most."""


class DueTarget(NamedTuple):
    """What the reaper needs to send a due run's message (:meth:`Reads.dispatch_of`)."""

    graph: str | None
    """None once the run is gone."""
    priority: int | None
    queued_at_ms: int | None
    """When the run was queued (epoch ms), if its status is queued; else None."""


# -- operations ----------------------------------------------------------------------------------


def run_record(run_id: str) -> Op[RunInfo]:
    """The run's record, with its children's ids for a parent; RunNotFound for no run."""
    record = text_map((yield cmd("hgetall", keys.run(run_id))))
    if not record:
        raise not_found(run_id)
    info = run_info(record, run_id)
    if record.get("children"):
        # A parent's children are its mailbox's child:<id> fields (store/children.py); a run
        # without children reads nothing more.
        fields = yield cmd("hkeys", keys.mailbox(run_id))
        found = sorted(name[6:] for name in map(text, fields) if name.startswith("child:"))
        info = info.model_copy(update={"children": found})
    return info


def last_traceback(run_id: str) -> Op[str | None]:
    """The last failed attempt's traceback, if it had one."""
    tb = yield cmd("get", keys.tb(run_id))
    return None if tb is None else text(tb)


def latest_checkpoint(run_id: str) -> Op[dict[str, Any] | None]:
    """The latest checkpoint's metadata (``seq``, ``saved_at`` s, ``size`` bytes, ``next_node``)."""
    seq = yield cmd("hget", keys.run(run_id), LATEST_CHECKPOINT)
    entry = None if seq is None else (yield cmd("hget", keys.run(run_id), checkpoint_field(text(seq))))
    if entry is None:
        return None
    latest = checkpoint_entry(text(seq), text(entry))
    return {
        "seq": latest.seq,
        "saved_at": latest.saved_at,
        "size": latest.size,
        "next_node": latest.next_node,
    }


def dead_letter(run_id: str) -> Op[DeadLetter]:
    """The run (usually a dead one), its last traceback and its checkpoint; RunNotFound for none."""
    run = yield from run_record(run_id)
    traceback = yield from last_traceback(run_id)
    checkpoint = yield from latest_checkpoint(run_id)
    return DeadLetter(run, traceback, checkpoint)


def _past_marker(after: str) -> str:
    """``after``, or the marker entry every stream starts with (keys.EVENTS_MARKER) when it is earlier."""
    return keys.EVENTS_MARKER if after in ("", "-", "0", "0-0") else after


def _range(key: str, after: str, count: int | None) -> Op[list[RunEvent]]:
    entries: list[Any] = (yield cmd("xrange", key, min=f"({_past_marker(after)}", max="+", count=count)) or []
    return [run_event(entry_id, fields) for entry_id, fields in entries]


def run_events(
    run_id: str, after: str, block_ms: int | None, count: int | None, chunk_limit: int | None
) -> Op[list[RunEvent]]:
    """Events after stream id ``after``, oldest first; with ``block_ms``, wait up to that long
    (0: forever) for the first new one, in XREAD BLOCKs of at most ``chunk_limit`` ms."""
    key = keys.events(run_id)
    after = _past_marker(after)
    found = yield from _range(key, after, count)
    if found or block_ms is None:
        return found
    # XREAD BLOCK only as the wake-up: its reply shape differs between RESP2 and RESP3
    # (and redis-py versions), while XRANGE reads the events the same way everywhere.
    remaining = block_ms
    while True:
        chunk = remaining if remaining > 0 else (chunk_limit or 0)
        if chunk_limit is not None:
            chunk = min(chunk, chunk_limit)
        if (yield cmd("xread", {key: after}, count=1, block=chunk)):
            return (yield from _range(key, after, count))
        if block_ms > 0:
            remaining -= chunk
            if remaining <= 0:
                return []


def run_lanes(run_id: str) -> Op[list[BranchLane]]:
    """When each branch step of the run's maps ran (``keys.lanes``), in the order they started."""
    stored = text_map((yield cmd("hgetall", keys.lanes(run_id))))
    if not stored and not (yield cmd("exists", keys.run(run_id))):
        raise not_found(run_id)
    return branch_lanes(stored)


def _parse_cursor(cursor: str) -> tuple[float, str]:
    score, sep, run_id = cursor.partition(":")
    try:
        if not sep or not run_id:
            raise ValueError
        return float(int(score)), run_id
    except ValueError:
        raise errors.InvalidInputs(
            "the cursor is not one a listing returned; pass the `cursor` of the previous page",
            [{"loc": ["cursor"], "msg": "is not a listing cursor", "type": "cursor"}],
        ) from None


def listing(
    index_of: Callable[[int], str],
    limit: int,
    keep: Callable[[RunInfo], bool],
    cursor: str | None = None,
    scan: int | None = SCAN_BUDGET,
) -> Op[RunPage]:
    """Runs of the shards' index ``index_of(shard)`` that ``keep`` accepts, highest score first,
    from ``cursor`` on (store/fanout.py merges the shards).

    With ``scan``, one call examines at most that many index entries (at least ``limit``): a
    filter that few runs match returns a short page whose cursor goes on from the last entry
    examined, rather than reading the whole index in one request. ``scan=None`` reads on until
    ``limit`` runs are found or the index ends (the blocking lists, the CLI).
    """
    position = None if cursor is None else _parse_cursor(cursor)
    budget = None if scan is None else max(scan, limit)
    found: list[RunInfo] = []
    examined = 0
    while len(found) < limit:
        # The first read asks for what is still missing: a listing without a filter reads exactly
        # ``limit`` records. A filter that rejected some reads on in pages of _LIST_PAGE.
        want = _LIST_PAGE if examined else min(_LIST_PAGE, limit)
        if budget is not None:
            want = min(want, budget - examined)
        rows, more = yield from fanout.newest(index_of, position, want)
        more, rows = more or len(rows) > want, rows[:want]
        if not rows:
            return RunPage(found, None)
        records = yield batch([cmd("hgetall", keys.run(m)) for m, _ in rows])
        for (run_id, score), raw in zip(rows, records, strict=True):
            position, examined = (score, run_id), examined + 1
            record = text_map(raw)
            if not record:
                # Its keys expired; drop the stale index entries while we are here.
                yield from per_run("prune", run_id, run_id, clock.now_ms(), PruneArgs("").argv())
                stale = index_of((yield from layout()).of(run_id))
                if keys.is_tag_index(stale):
                    # The prune knows no tags of a run that is gone; the listing that met it does.
                    yield cmd("zrem", stale, run_id)
                continue
            info = run_info(record, run_id)
            if keep(info):
                found.append(info)
                if len(found) == limit:
                    return RunPage(found, f"{int(score)}:{run_id}")
        if budget is not None and examined >= budget and position is not None:
            return RunPage(found, f"{int(position[0])}:{position[1]}")
        if not more:
            return RunPage(found, None)
    return RunPage(found, None)


def runs_listing(
    status: Status | str | None,
    graph: str | None,
    limit: int,
    cursor: str | None = None,
    scan: int | None = SCAN_BUDGET,
    *,
    tags: Mapping[str, str] | None = None,
    matching: str | None = None,
) -> Op[RunPage]:
    """Runs newest first: by update time within a status (queued runs by due time, running ones by
    lease expiry: keys.status_index), else by creation time. With ``tags`` (checked, core/tags.py),
    only runs carrying every one, read from the first tag's index (by creation time), so the
    listing costs what that tag finds, not the size of the store. ``matching`` keeps the runs
    whose id starts with it or whose graph's name holds it (ignoring case)."""
    wanted = Status(status) if status else None
    needle = (matching or "").lower()

    def index(shard: int) -> str:
        if tags:
            return keys.tag_index(*next(iter(tags.items())), shard)
        return keys.status_index(status, shard) if status else keys.all_runs(shard)

    def keep(info: RunInfo) -> bool:
        return (
            (graph is None or info.graph == graph)
            and (wanted is None or info.status is wanted)
            and (not tags or matches(info.tags, tags))
            and (not needle or info.run_id.lower().startswith(needle) or needle in info.graph.lower())
        )

    return listing(index, limit, keep, cursor, scan)


def dead_listing(
    graph: str | None,
    reason: str | None,
    limit: int,
    cursor: str | None = None,
    scan: int | None = SCAN_BUDGET,
    *,
    tags: Mapping[str, str] | None = None,
) -> Op[RunPage]:
    """Dead-lettered runs, most recently dead first; with ``tags``, the dead runs carrying every
    one, newest first, read from the first tag's index (as :func:`runs_listing` reads it)."""

    def keep(info: RunInfo) -> bool:
        return (
            (graph is None or info.graph == graph)
            and (reason is None or info.reason == reason)
            and (not tags or (info.status is Status.DEAD and matches(info.tags, tags)))
        )

    def index(shard: int) -> str:
        return keys.tag_index(*next(iter(tags.items())), shard) if tags else keys.dead(shard)

    return listing(index, limit, keep, cursor, scan)


# -- the store's table (store/redis_store.py) ---------------------------------------------------


def trace_context(run_id: str) -> Op[str]:
    """The W3C trace context recorded when the run was enqueued (JSON), or '' without one."""
    return text((yield cmd("hget", keys.run(run_id), "trace")))


def dispatch_of(run_ids: Sequence[str]) -> Op[dict[str, DueTarget]]:
    """Each due run's graph (None once the run is gone), message priority, and when it was
    queued if it is (:class:`DueTarget`), in one round trip."""
    fields = ["graph", "priority", "status", "updated_at"]
    replies = (yield batch([cmd("hmget", keys.run(run_id), fields) for run_id in run_ids])) if run_ids else []
    found: dict[str, DueTarget] = {}
    for run_id, (graph, priority, status, updated) in zip(run_ids, replies, strict=True):
        # Every write that queues a run sets updated_at (set_status in _lib.lua).
        queued = text(status) == Status.QUEUED.value and bool(updated)
        found[run_id] = DueTarget(
            text(graph) or None, int(priority) if priority else None, int(updated) if queued else None
        )
    return found


def graph_of(run_id: str) -> Op[str | None]:
    """The graph a run belongs to, which its message names; None once the run is gone.

    A message is only a nudge: the worker reads inputs and state from the run record.
    """
    graph = text((yield cmd("hget", keys.run(run_id), "graph")))
    return graph or None


def events(
    store: StoreSettings,
    run_id: str,
    after: str = "0-0",
    block_ms: int | None = None,
    *,
    count: int | None = None,
) -> Op[list[RunEvent]]:
    """Events after stream id ``after``, oldest first.

    With ``block_ms``, waits up to that long (0: forever) for the first new event, with
    XREAD BLOCK: this is how ``wait`` sleeps on a notification instead of polling.
    """
    return run_events(run_id, after, block_ms, count, store.max_block_ms)


def list_runs(
    *, status: Status | str | None = None, graph: str | None = None, limit: int = 50
) -> Op[list[RunInfo]]:
    """Runs newest first: by update time within a status, else by creation time."""
    return (yield from runs_listing(status, graph, limit, scan=None)).runs


def dead_letters(
    *, graph: str | None = None, reason: str | None = None, limit: int = 1000
) -> Op[list[RunInfo]]:
    """Dead-lettered runs, most recently dead first."""
    return (yield from dead_listing(graph, reason, limit, scan=None)).runs
