"""The fleet at a glance, read from what the store holds (no rollup): ``reflexr-graph top``.

Runs by status are the sizes of the status sets; queued, retrying and running runs, which have
none (keys.status_index), are read from the due set and the leases (at most :data:`QUEUED_SCAN`
of each), and so is the queue depth per graph, with since when its oldest queued run waits;
dead letters are the size of the dead-letter index.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from reflexr_graph.model import GraphQueue, Overview, Status
from reflexr_graph.store import keys
from reflexr_graph.store.ops import Op, batch, cmd, layout
from reflexr_graph.store.records import text
from reflexr_graph.store.workers import worker_statuses

QUEUED_SCAN = 5000
"""At most this many queued runs are read for their graph; ``queued_scanned`` says when fewer."""


LIVE = (Status.QUEUED, Status.RETRYING, Status.RUNNING)
"""Statuses without a set of their own (keys.status_index): counted from the runs of the due set
and the leases, whose members' statuses are read (at most :data:`QUEUED_SCAN` of each)."""


def _queues(live: list[tuple[str, str, str]]) -> dict[str, GraphQueue]:
    found: dict[str, GraphQueue] = {}
    for status, graph, updated_ms in live:
        if status != Status.QUEUED:
            continue
        since = float(updated_ms or 0) / 1000
        kept = found.get(graph)
        count, oldest = (kept.queued, kept.oldest_at) if kept else (0, since)
        found[graph] = GraphQueue(queued=count + 1, oldest_at=min(oldest, since))
    return dict(sorted(found.items()))


def _live_runs() -> Op[tuple[list[tuple[str, str, str]], bool]]:
    """(status, graph, updated_at ms) of the runs in the due set and the leases, and whether all
    of them were read."""
    # Every shard's due set and leases, each read up to its part of QUEUED_SCAN.
    shards = yield from layout()
    per_shard = -(-QUEUED_SCAN // shards.count)
    indexes = sorted({keys.status_index(s, shard) for s in LIVE for shard in shards.all})
    sizes = yield batch([cmd("zcard", index) for index in indexes])
    pages = yield batch([cmd("zrange", index, 0, per_shard - 1) for index in indexes])
    run_ids = sorted({text(member) for page in pages for member in page})
    fields = yield batch([cmd("hmget", keys.run(r), "status", "graph", "updated_at") for r in run_ids])
    live = [(text(st), text(gr) or "?", text(up)) for st, gr, up in fields if st is not None]
    return live, all(int(n) <= per_shard for n in sizes)


def overview() -> Op[Overview]:
    """The fleet now, in five round trips plus the workers' three."""
    kept = [s for s in Status if s not in LIVE]
    counted: list[Callable[[int], str]] = [*(partial(keys.status_set, s) for s in kept), keys.dead]
    shards = (yield from layout()).count
    found = yield batch([cmd("zcard", index(shard)) for index in counted for shard in range(shards)])
    sizes = [sum(int(n) for n in found[i * shards : (i + 1) * shards]) for i in range(len(counted))]
    live, complete = yield from _live_runs()
    by_status = {s.value: int(n) for s, n in zip(kept, sizes[:-1], strict=True)}
    for status in LIVE:
        by_status[status.value] = sum(1 for found, _, _ in live if found == status)
    return Overview(
        by_status={s.value: by_status[s.value] for s in Status},
        queues=_queues(live),
        queued_scanned=complete,
        dead_letters=int(sizes[-1]),
        workers=(yield from worker_statuses()),
    )
