"""The fleet over the last hour, for the console's overview, read from what the store holds.

Nothing is written per run for it: runs started per minute are counted in ``rg:all`` (scored by
creation), succeeded ones in their status set and dead ones in the dead-letter index (both
scored by when they ended), each minute one ZCOUNT. Retries have no index of their own, so the
script that makes a run retry adds it to a rollup trimmed to the hour (:func:`keys.retries`):
only a run that retries pays for it. Durations come from the latest succeeded runs, waiting
runs by reason from the waiting set and the due set, dead letters by reason from the dead
runs of the hour; each of these reads at most a fixed number of runs (:data:`SAMPLE`).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from reflexr_graph import errors
from reflexr_graph.model import CHILD_WAIT_PREFIX, CHILDREN_WAIT_PREFIX, VERSION_WAIT_PREFIX, Status
from reflexr_graph.store import keys
from reflexr_graph.store.ops import Command, Op, batch, cmd, layout
from reflexr_graph.store.records import text

MINUTE_MS = 60_000
MAX_MINUTES = 60
"""The longest window: the retries rollup keeps an hour (``lua/_lib.lua``, RETRIES_KEPT_MS)."""
SAMPLE = 1000
"""At most this many runs are read for durations, for waiting runs and for the hour's dead letters."""
LIMIT_PREFIX = "limit:"
WAIT_REASONS = ("signal", "timer", "limit", "worker", "version", "children")
"""Why a run waits: a signal, a durable sleep, a limit's token or slot, a live worker for its graph,
a live worker of the graph version it is pinned to (``waiting_for = version:<v>``), its child runs
(``child:<id>``, ``children:<n>``)."""


class GraphDurations(BaseModel):
    """How long a graph's latest succeeded runs took, from creation to success (seconds)."""

    model_config = ConfigDict(frozen=True)

    runs: int
    p50_s: float
    p95_s: float


class Activity(BaseModel):
    """Per minute, oldest first, the minutes ending at ``until`` (epoch seconds)."""

    model_config = ConfigDict(frozen=True)

    until: float
    minutes: int
    started: list[int]
    succeeded: list[int]
    dead: list[int]
    retried: list[int]
    dead_by_reason: dict[str, list[int]] = Field(
        description="The minute's dead letters by reason (at most SAMPLE of the window read)"
    )
    durations: dict[str, GraphDurations] = Field(
        description="Per graph, from the latest SAMPLE succeeded runs of all graphs"
    )
    waiting: dict[str, int] = Field(
        description="Runs waiting now, by reason (signal, timer, limit, worker, version, children)"
    )


def _per_minute(index: str, start_ms: int, minutes: int) -> list[Command]:
    return [
        cmd("zcount", index, start_ms + i * MINUTE_MS, f"({start_ms + (i + 1) * MINUTE_MS}")
        for i in range(minutes)
    ]


def percentile(sorted_values: list[float], share: float) -> float:
    """The nearest-rank percentile of values sorted ascending (``share`` in 0..1)."""
    rank = max(1, math.ceil(share * len(sorted_values)))
    return sorted_values[rank - 1]


def _durations(rows: list[list[object]]) -> dict[str, GraphDurations]:
    taken: dict[str, list[float]] = {}
    for graph, created, updated in rows:
        if graph is None or not created or not updated:
            continue
        seconds = max(0, int(text(updated)) - int(text(created))) / 1000
        taken.setdefault(text(graph), []).append(seconds)
    found = {}
    for graph, values in sorted(taken.items()):
        values.sort()
        found[graph] = GraphDurations(
            runs=len(values), p50_s=percentile(values, 0.5), p95_s=percentile(values, 0.95)
        )
    return found


def _wait_reason(status: str, waiting_for: str, unserved_since: str) -> str | None:
    if unserved_since:
        return "worker"  # its timer fired, or it was queued, and no live worker runs its graph
    if status != Status.WAITING:
        return None
    if waiting_for.startswith(LIMIT_PREFIX):
        return "limit"
    if waiting_for.startswith(VERSION_WAIT_PREFIX):
        return "version"
    if waiting_for.startswith((CHILD_WAIT_PREFIX, CHILDREN_WAIT_PREFIX)):
        return "children"
    return "signal" if waiting_for else "timer"


def _dead_by_reason(
    scored: list[tuple[bytes, float]], reasons: list[object], start_ms: int, minutes: int
) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for (_, score), reason in zip(scored, reasons, strict=True):
        minute = int((score - start_ms) // MINUTE_MS)
        if 0 <= minute < minutes:
            found.setdefault(text(reason) or "unknown", [0] * minutes)[minute] += 1
    return dict(sorted(found.items()))


def activity(now_ms: int, minutes: int = MAX_MINUTES) -> Op[Activity]:
    """The last ``minutes`` (at most :data:`MAX_MINUTES`) up to ``now_ms``, in two round trips."""
    if (yield from layout()).count > 1:
        raise errors.OperationRefused(
            "the hour's activity reads one store's indexes per minute: not offered on a Redis Cluster store"
        )
    minutes = max(1, min(minutes, MAX_MINUTES))
    start_ms = now_ms + 1 - minutes * MINUTE_MS  # the last minute ends with now, inclusive
    # One shard (0): a standalone store's (a cluster's would need each of its shards read).
    indexes = (keys.all_runs(0), keys.status_set(Status.SUCCEEDED, 0), keys.dead(0), keys.retries(0))
    first = yield batch(
        [
            *(c for index in indexes for c in _per_minute(index, start_ms, minutes)),
            cmd("zrevrange", keys.status_set(Status.SUCCEEDED, 0), 0, SAMPLE - 1),
            cmd("zrange", keys.status_set(Status.WAITING, 0), 0, SAMPLE - 1),
            cmd("zrange", keys.due(0), 0, SAMPLE - 1),
            cmd("zrevrangebyscore", keys.dead(0), now_ms, start_ms, start=0, num=SAMPLE, withscores=True),
        ]
    )
    counts = [[int(n) for n in first[i * minutes : (i + 1) * minutes]] for i in range(len(indexes))]
    succeeded, waiting, due, dead = first[len(indexes) * minutes :]
    held = sorted({text(m) for m in [*waiting, *due]})
    second = yield batch(
        [
            *(cmd("hmget", keys.run(text(r)), "graph", "created_at", "updated_at") for r in succeeded),
            *(cmd("hmget", keys.run(r), "status", "waiting_for", "unserved_since") for r in held),
            *(cmd("hget", keys.run(text(m)), "reason") for m, _ in dead),
        ]
    )
    done, holds, reasons = (
        second[: len(succeeded)],
        second[len(succeeded) : len(succeeded) + len(held)],
        second[len(succeeded) + len(held) :],
    )
    waits = dict.fromkeys(WAIT_REASONS, 0)
    for status, waiting_for, unserved in holds:
        reason = _wait_reason(text(status), text(waiting_for), text(unserved))
        if reason is not None:
            waits[reason] += 1
    return Activity(
        until=now_ms / 1000,
        minutes=minutes,
        started=counts[0],
        succeeded=counts[1],
        dead=counts[2],
        retried=counts[3],
        dead_by_reason=_dead_by_reason(dead, reasons, start_ms, minutes),
        durations=_durations(done),
        waiting=waits,
    )
