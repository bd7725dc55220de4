"""The registry of live workers: which graphs each serves, kept by heartbeats."""

from __future__ import annotations

from collections.abc import Sequence

from reflexr_graph import clock
from reflexr_graph.store import keys
from reflexr_graph.store.base import StoreBase, translate_errors
from reflexr_graph.store.ops import Op, ScriptArg, batch, cmd
from reflexr_graph.store.records import (
    WorkerInfo,
    text,
)


def live_workers() -> Op[list[WorkerInfo]]:
    """Every worker whose heartbeat has not expired, by name."""
    names = [text(n) for n in (yield cmd("zrangebyscore", keys.WORKERS, clock.now_ms(), "+inf"))]
    if not names:
        return []
    raw = yield cmd("mget", [keys.worker(n) for n in names])
    return sorted(
        (WorkerInfo.model_validate_json(text(r)) for r in raw if r is not None), key=lambda w: w.name
    )


def serving(graphs: Sequence[str]) -> Op[dict[str, list[str]]]:
    """For each graph, the names of the live workers that serve it (one round trip)."""
    now = clock.now_ms()
    commands = [cmd("zrangebyscore", keys.served(graph), now, "+inf") for graph in graphs]
    replies = (yield batch(commands)) if graphs else []
    return {g: sorted(text(n) for n in names) for g, names in zip(graphs, replies, strict=True)}


class Workers(StoreBase):
    """Worker heartbeats, and who serves which graph."""

    # -- live workers ------------------------------------------------------------------------------

    @translate_errors
    def worker_beat(self, info: WorkerInfo, *, ttl_ms: int) -> None:
        """Record ``info.name`` as live for ``ttl_ms``, serving ``info.graphs`` (one round trip)."""
        script_keys = [keys.WORKERS, keys.worker(info.name), *(keys.served(g) for g in info.graphs)]
        args: list[ScriptArg] = [info.name, clock.now_ms(), ttl_ms, info.model_dump_json()]
        self._scripts("worker_beat", script_keys, args)

    @translate_errors
    def worker_leave(self, info: WorkerInfo) -> None:
        """Take a stopping worker out of the registry at once."""
        script_keys = [keys.WORKERS, keys.worker(info.name), *(keys.served(g) for g in info.graphs)]
        self._scripts("worker_leave", script_keys, [info.name])

    def live_workers(self) -> list[WorkerInfo]:
        """Every worker whose heartbeat has not expired, by name."""
        return self.do(live_workers())

    def serving(self, graphs: Sequence[str]) -> dict[str, list[str]]:
        """For each graph, the names of the live workers that serve it (one round trip)."""
        return self.do(serving(graphs))
