"""The registry of live workers: which graphs each serves, kept by heartbeats.

A worker is live while its entry in ``rg:workers`` (score: its heartbeat's expiry) is ahead of
now; its frequent beats refresh only that. Its description and served entries are written by
its full beats, less often, and outlive its heartbeat: every reader here takes them only for a
live worker (:func:`served_reads`, :func:`live_servers`), so nothing counts a worker gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reflexr_graph import clock
from reflexr_graph.model import Event, Status, WorkerInfo, WorkerStatus
from reflexr_graph.store import keys
from reflexr_graph.store.base import time_reply_ms
from reflexr_graph.store.contracts import WorkerBeatArgs, WorkerLeaveArgs
from reflexr_graph.store.ops import Command, Eval, Op, ScriptArg, batch, cmd, layout
from reflexr_graph.store.records import run_event, text

HEARTBEAT_TTL_S = 30.0
"""A worker that stopped beating counts as gone this long after its last beat (fleet/presence.py
beats with it): a heartbeat's expiry less this is when the worker last beat."""
IN_FLIGHT_SCAN = 1000
"""At most this many running runs are read to tell which worker runs each (the oldest first)."""
RECENT_EVENTS = 32
"""How far back a running run's events are read for the attempt that runs it now."""


def live_workers() -> Op[list[WorkerInfo]]:
    """Every worker whose heartbeat has not expired, by name."""
    names = [text(n) for n in (yield cmd("zrangebyscore", keys.WORKERS, clock.now_ms(), "+inf"))]
    if not names:
        return []
    raw = yield cmd("mget", [keys.worker(n) for n in names])
    return sorted(
        (WorkerInfo.model_validate_json(text(r)) for r in raw if r is not None), key=lambda w: w.name
    )


def _runner(entries: list[Any]) -> str | None:
    """The worker that started the newest attempt among a run's latest events (newest first)."""
    for entry_id, fields in entries:
        event = run_event(entry_id, fields)
        if event.type == Event.ATTEMPT_STARTED:
            return event.fields.get("worker") or None
    return None


def worker_statuses() -> Op[list[WorkerStatus]]:
    """Every live worker with its last heartbeat and runs in flight (three round trips)."""
    now = clock.now_ms()
    beats = yield cmd("zrangebyscore", keys.WORKERS, now, "+inf", withscores=True)
    expiry = {text(name): float(score) for name, score in beats}
    if not expiry:
        return []
    raw = yield cmd("mget", [keys.worker(n) for n in expiry])
    # Running runs have no status set of their own: they are the leases (keys.status_index).
    shards = yield from layout()
    leases = [cmd("zrange", keys.status_index(Status.RUNNING, n), 0, IN_FLIGHT_SCAN - 1) for n in shards.all]
    running = sorted(text(r) for page in (yield batch(leases)) for r in page)[:IN_FLIGHT_SCAN]
    recent = [cmd("xrevrange", keys.events(r), max="+", min="-", count=RECENT_EVENTS) for r in running]
    held: dict[str, list[str]] = {}
    for run_id, entries in zip(running, (yield batch(recent)) if running else [], strict=True):
        if (worker := _runner(entries or [])) is not None:
            held.setdefault(worker, []).append(run_id)
    infos = sorted(
        (WorkerInfo.model_validate_json(text(r)) for r in raw if r is not None), key=lambda w: w.name
    )
    return [
        WorkerStatus(
            info=info,
            last_beat_at=(expiry[info.name] - HEARTBEAT_TTL_S * 1000) / 1000,
            in_flight=tuple(sorted(held.get(info.name, []))),
        )
        for info in infos
    ]


def served_reads(served_keys: Sequence[str]) -> list[Command]:
    """The reads of who serves ``served_keys`` (``keys.served``, ``keys.served_version``): the live
    workers, then each set's entries not expired; send them in one batch, with other reads if
    need be, and give their replies to :func:`live_servers`."""
    now = clock.now_ms()
    reads = [cmd("zrangebyscore", key, now, "+inf") for key in served_keys]
    return [cmd("zrangebyscore", keys.WORKERS, now, "+inf"), *reads]


def live_servers(replies: Sequence[Any]) -> list[list[str]]:
    """The replies of :func:`served_reads` -> for each set, its workers that are live now, by name."""
    live, *found = replies
    names = {text(n) for n in live}
    return [sorted(name for name in (text(m) for m in members) if name in names) for members in found]


def serving(graphs: Sequence[str]) -> Op[dict[str, list[str]]]:
    """For each graph, the names of the live workers that serve it (one round trip)."""
    if not graphs:
        return {}
    replies = yield batch(served_reads([keys.served(graph) for graph in graphs]))
    return dict(zip(graphs, live_servers(replies), strict=True))


def full_beat(script_keys: Sequence[str], args: Sequence[ScriptArg]) -> Op[None]:
    """worker_beat.lua, whose reply is Redis's time: sampled into this process's clock, timed
    from just before the request (clock.probe)."""
    started = clock.probe()
    reply = yield Eval("worker_beat", script_keys, args)
    started.record(time_reply_ms(reply))


def _served_keys(info: WorkerInfo) -> list[str]:
    # A graph's set and its version's: the script treats them alike (member = the worker's name).
    versions = [keys.served_version(g, v) for g, v in sorted(info.graph_versions.items())]
    return [*(keys.served(g) for g in info.graphs), *versions]


# -- the store's table (store/redis_store.py) ---------------------------------------------------


def worker_beat(
    info: WorkerInfo,
    *,
    ttl_ms: int,
    described_ms: int | None = None,
    sets_ms: int | None = None,
    trim: bool = True,
) -> Op[None]:
    """A full beat: record ``info.name`` as live for ``ttl_ms``, with its description and the
    sets of the graphs it serves, kept ``described_ms`` (default ``ttl_ms``), in one round trip,
    which also samples Redis's time into this process's clock.

    ``trim`` also drops the entries of workers that stopped beating and sets the served sets'
    expiry, ``sets_ms`` (default twice the longer of the two); ``lua/worker_beat.lua``.
    """
    described = ttl_ms if described_ms is None else described_ms
    script_keys = [keys.WORKERS, keys.worker(info.name), *_served_keys(info)]
    args = WorkerBeatArgs(
        name=info.name,
        now_ms=clock.now_ms(),
        ttl_ms=ttl_ms,
        description=info.model_dump_json(),
        described_ms=described,
        sets_ms=2 * max(ttl_ms, described) if sets_ms is None else sets_ms,
        trim=trim,
    ).argv()
    yield from full_beat(script_keys, args)


def worker_alive(name: str, *, ttl_ms: int) -> Op[bool]:
    """A beat between full ones: ``name`` is live for ``ttl_ms`` more (one ZADD); its
    description and served entries stay as its last :func:`worker_beat` wrote them. False when
    ``name`` was not in the registry (trimmed after a stall, or Redis lost its data): a full
    beat must follow, as its entries may be gone too.

    It samples no time: the full beat's reply, about once a minute, does, which is as often as
    the clock wants a sample (clock.py), and an idle worker's commands stay within their budget
    (tests/fleet/test_idle_cost.py)."""
    expiry = {name: clock.now_ms() + ttl_ms}
    return not (yield cmd("zadd", keys.WORKERS, expiry))


def worker_leave(info: WorkerInfo) -> Op[None]:
    """Take a stopping worker out of the registry at once."""
    script_keys = [keys.WORKERS, keys.worker(info.name), *_served_keys(info)]
    yield Eval("worker_leave", script_keys, WorkerLeaveArgs(info.name).argv())


def live_worker_count() -> Op[int]:
    """How many workers' heartbeats have not expired (one ZCOUNT)."""
    return int((yield cmd("zcount", keys.WORKERS, clock.now_ms(), "+inf")))
