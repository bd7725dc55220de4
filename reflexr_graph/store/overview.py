"""The fleet at a glance, read from what the store holds (no rollup): ``reflexr-graph top``.

Runs by status are the sizes of the status sets; queue depth per graph reads the queued runs'
graphs (at most :data:`QUEUED_SCAN` of them, the oldest first, each set's score being the time
the run was last updated); dead letters are the size of the dead-letter index.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from reflexr_graph.model import Status
from reflexr_graph.store import keys
from reflexr_graph.store.ops import Op, batch, cmd
from reflexr_graph.store.records import text
from reflexr_graph.store.workers import WorkerStatus, worker_statuses

QUEUED_SCAN = 5000
"""At most this many queued runs are read for their graph; ``queued_scanned`` says when fewer."""


class GraphQueue(BaseModel):
    """Queued runs of one graph, and since when the oldest of them has waited (epoch seconds)."""

    model_config = ConfigDict(frozen=True)

    queued: int
    oldest_at: float


class Overview(BaseModel):
    """Runs by status now, queued runs per graph, the live workers and the dead letters."""

    model_config = ConfigDict(frozen=True)

    by_status: dict[str, int]
    queues: dict[str, GraphQueue]
    queued_scanned: bool
    """False when more runs were queued than :data:`QUEUED_SCAN`: ``queues`` counts the oldest."""
    dead_letters: int
    workers: list[WorkerStatus]


def _queues(rows: list[tuple[str, float]], graphs: list[object]) -> dict[str, GraphQueue]:
    found: dict[str, GraphQueue] = {}
    for (_, since_ms), raw in zip(rows, graphs, strict=True):
        graph = text(raw) or "?"
        kept = found.get(graph)
        count, oldest = (kept.queued, kept.oldest_at) if kept else (0, since_ms / 1000)
        found[graph] = GraphQueue(queued=count + 1, oldest_at=min(oldest, since_ms / 1000))
    return dict(sorted(found.items()))


def overview() -> Op[Overview]:
    """The fleet now, in four round trips plus the workers' three."""
    statuses = list(Status)
    sizes = yield batch([*(cmd("zcard", keys.status_set(s)) for s in statuses), cmd("zcard", keys.DEAD)])
    raw = yield cmd("zrange", keys.status_set(Status.QUEUED), 0, QUEUED_SCAN - 1, withscores=True)
    rows = [(text(member), float(score)) for member, score in raw]
    graphs = (yield batch([cmd("hget", keys.run(run_id), "graph") for run_id, _ in rows])) if rows else []
    return Overview(
        by_status={s.value: int(n) for s, n in zip(statuses, sizes[:-1], strict=True)},
        queues=_queues(rows, list(graphs)),
        queued_scanned=int(sizes[statuses.index(Status.QUEUED)]) <= QUEUED_SCAN,
        dead_letters=int(sizes[-1]),
        workers=(yield from worker_statuses()),
    )
