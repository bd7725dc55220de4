"""The fleet over the last hour, for the console's overview, read from what the store holds.

Nothing is written per run for it: runs started per minute are counted in ``rg:all`` (scored by
creation), succeeded ones in their status set and dead ones in the dead-letter index (both
scored by when they ended), each minute one ZCOUNT, a shard's all in one script
(``lua/activity_counts.lua``). Retries have no index of their own, so the script that makes a
run retry adds it to a rollup trimmed to the hour (:func:`keys.retries`):
only a run that retries pays for it. Durations come from the latest succeeded runs, waiting
runs by reason from the waiting set and the due set, dead letters by reason from the dead
runs of the hour; each of these reads at most a fixed number of runs (:data:`SAMPLE`).

Each index is kept per shard (store/keys.py: Shards), so every read goes to every shard's copy
in the same round trip: a minute's count is the shards' counts added, a sample is the shards'
newest merged, and a percentile is taken over the merged sample's values (never averaged).
"""

from __future__ import annotations

import math
from functools import partial

from reflexr_graph.model import (
    CHILD_WAIT_PREFIX,
    CHILDREN_WAIT_PREFIX,
    VERSION_WAIT_PREFIX,
    Activity,
    GraphDurations,
    Status,
)
from reflexr_graph.store import fanout, keys, scripts
from reflexr_graph.store.contracts import ActivityArgs
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


def _per_minute(shard_indexes: list[str], start_ms: int, minutes: int) -> Command:
    """One shard's counts per minute of its four indexes: one EVAL (``lua/activity_counts.lua``)."""
    # As a plain command: a cluster pipeline has no eval() of its own, and scripts are not loaded on
    # its nodes (store/scripts.py: queue); Redis caches the script by its hash after the first.
    source = scripts.source("activity_counts")
    args = ActivityArgs(start_ms, minutes, MINUTE_MS).argv()
    return cmd("execute_command", "EVAL", source, len(shard_indexes), *shard_indexes, *args)


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


def _newest(pages: list[list[tuple[bytes, float]]]) -> list[tuple[bytes, float]]:
    """The shards' pages of (member, score) merged newest first, at most :data:`SAMPLE` of them."""
    rows = [row for page in pages for row in page]
    rows.sort(key=lambda row: (row[1], row[0]), reverse=True)
    return rows[:SAMPLE]


def _newest_of(index: str, top: float | str, bottom: float | str, num: int) -> Command:
    return cmd("zrevrangebyscore", index, top, bottom, start=0, num=num, withscores=True)


def _first_reads(shards: keys.Shards, now_ms: int, start_ms: int, minutes: int) -> list[Command]:
    """Every shard's per-minute counts of its four indexes, then its part of each sample."""
    counted = (keys.all_runs, partial(keys.status_set, Status.SUCCEEDED), keys.dead, keys.retries)
    # Each shard's newest, for the newest SAMPLE of all (a margin for the busiest shard); a
    # standalone store's one shard gives exactly SAMPLE, as one index would.
    newest = SAMPLE if shards.count == 1 else fanout.per_shard(SAMPLE, shards)
    part = -(-SAMPLE // shards.count)
    return [
        *(_per_minute([index_of(n) for index_of in counted], start_ms, minutes) for n in shards.all),
        *(_newest_of(keys.status_set(Status.SUCCEEDED, n), "+inf", "-inf", newest) for n in shards.all),
        *(cmd("zrange", keys.status_set(Status.WAITING, n), 0, part - 1) for n in shards.all),
        *(cmd("zrange", keys.due(n), 0, part - 1) for n in shards.all),
        *(_newest_of(keys.dead(n), now_ms, start_ms, newest) for n in shards.all),
    ]


def _counts(replies: list[list[int]], minutes: int) -> list[list[int]]:
    """Per index, the minutes' counts summed over the shards' replies."""
    return [
        [sum(int(counts[i * minutes + m]) for counts in replies) for m in range(minutes)] for i in range(4)
    ]


def activity(now_ms: int, minutes: int = MAX_MINUTES) -> Op[Activity]:
    """The last ``minutes`` (at most :data:`MAX_MINUTES`) up to ``now_ms``, in two round trips,
    each over every shard: counts add up, the samples merge newest first, and the durations'
    percentiles are taken over the merged sample's runs."""
    shards = yield from layout()
    minutes = max(1, min(minutes, MAX_MINUTES))
    start_ms = now_ms + 1 - minutes * MINUTE_MS  # the last minute ends with now, inclusive
    first = yield batch(_first_reads(shards, now_ms, start_ms, minutes))
    per = shards.count
    counts = _counts(first[:per], minutes)
    pages = [first[per + i * per : per + (i + 1) * per] for i in range(4)]
    succeeded, dead = _newest(pages[0]), _newest(pages[3])
    held = sorted({text(m) for page in pages[1] + pages[2] for m in page})
    second = yield batch(
        [
            *(cmd("hmget", keys.run(text(r)), "graph", "created_at", "updated_at") for r, _ in succeeded),
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
