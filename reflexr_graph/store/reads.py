"""Reading runs: records, events (blocking reads included), listings, checkpoint metadata."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from reflexr_graph import clock
from reflexr_graph.model import RunInfo, Status
from reflexr_graph.store import keys
from reflexr_graph.store.base import (
    _BLOCK_MARGIN_MS,
    _DEFAULT_SOCKET_TIMEOUT_S,
    _LIST_PAGE,
    StoreBase,
    _not_found,
    translate_errors,
)
from reflexr_graph.store.records import (
    RunEvent,
    run_event,
    run_info,
    text,
    text_map,
)


class Reads(StoreBase):
    """Everything the clients and the CLI read about runs."""

    # -- reads -----------------------------------------------------------------------------------

    @translate_errors
    def get(self, run_id: str) -> RunInfo:
        record = text_map(self._r.hgetall(keys.run(run_id)))
        if not record:
            raise _not_found(run_id)
        return run_info(record)

    @translate_errors
    def trace_context(self, run_id: str) -> str:
        """The W3C trace context recorded when the run was enqueued (JSON), or '' without one."""
        return text(self._r.hget(keys.run(run_id), "trace"))

    @translate_errors
    def graphs_of(self, run_ids: Sequence[str]) -> dict[str, str | None]:
        """:meth:`graph_of` for many runs, in one round trip."""
        pipe = self._r.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.hget(keys.run(run_id), "graph")
        replies = pipe.execute() if run_ids else []
        return {run_id: (text(g) or None) for run_id, g in zip(run_ids, replies, strict=True)}

    @translate_errors
    def graph_of(self, run_id: str) -> str | None:
        """The graph a run belongs to, which its message names; None once the run is gone.

        A message is only a nudge: the worker reads inputs and state from the run record.
        """
        graph = text(self._r.hget(keys.run(run_id), "graph"))
        return graph or None

    @translate_errors
    def traceback(self, run_id: str) -> str | None:
        """The last failed attempt's traceback, if it had one."""
        tb = self._r.get(keys.tb(run_id))
        return None if tb is None else text(tb)

    @translate_errors
    def checkpoint_info(self, run_id: str) -> dict[str, Any] | None:
        """The latest checkpoint's metadata (``seq``, ``saved_at`` s, ``size`` bytes, ``next_node``)."""
        seq, saved_at, size, next_node = self._r.hmget(
            keys.ckpt(run_id), ["seq", "saved_at", "size", "next_node"]
        )
        if seq is None:
            return None
        return {
            "seq": int(text(seq)),
            "saved_at": int(text(saved_at) or 0) / 1000,
            "size": int(text(size) or 0),
            "next_node": text(next_node) or None,
        }

    @translate_errors
    def events(
        self, run_id: str, after: str = "0-0", block_ms: int | None = None, *, count: int | None = None
    ) -> list[RunEvent]:
        """Events after stream id ``after``, oldest first.

        With ``block_ms``, waits up to that long (0: forever) for the first new event, with
        XREAD BLOCK: this is how ``wait`` sleeps on a notification instead of polling.
        """
        key = keys.events(run_id)
        found = self._range(key, after, count)
        if found or block_ms is None:
            return found
        return self._read_blocking(key, after, block_ms, count)

    def _range(self, key: str, after: str, count: int | None) -> list[RunEvent]:
        entries: list[Any] = self._r.xrange(key, min=f"({after}", max="+", count=count) or []
        return [run_event(entry_id, fields) for entry_id, fields in entries]

    def _read_blocking(self, key: str, after: str, block_ms: int, count: int | None) -> list[RunEvent]:
        # XREAD BLOCK only as the wake-up: its reply shape differs between RESP2 and RESP3
        # (and redis-py versions), while XRANGE reads the events the same way everywhere.
        chunk_limit = self._max_block_ms()
        remaining = block_ms
        while True:
            chunk = remaining if remaining > 0 else (chunk_limit or 0)
            if chunk_limit is not None:
                chunk = min(chunk, chunk_limit)
            if self._r.xread({key: after}, count=1, block=chunk):
                return self._range(key, after, count)
            if block_ms > 0:
                remaining -= chunk
                if remaining <= 0:
                    return []

    def _max_block_ms(self) -> int | None:
        kw = self._r.connection_pool.connection_kwargs
        # redis-py 8 leaves its default socket timeout out of connection_kwargs; an explicit
        # None (present in kw) means reads never time out.
        if "socket_timeout" in kw:
            timeout = kw["socket_timeout"]
        else:
            timeout = kw.get("orig_socket_timeout", _DEFAULT_SOCKET_TIMEOUT_S)
        if not timeout:
            return None
        timeout_ms = int(float(timeout) * 1000)
        return max(1, timeout_ms - min(_BLOCK_MARGIN_MS, timeout_ms // 2))

    @translate_errors
    def list_runs(
        self, *, status: Status | str | None = None, graph: str | None = None, limit: int = 50
    ) -> list[RunInfo]:
        """Runs newest first: by update time within a status, else by creation time."""
        index = keys.status_set(status) if status else keys.ALL
        return self._scan_index(index, limit, lambda info: graph is None or info.graph == graph)

    @translate_errors
    def dead_letters(
        self, *, graph: str | None = None, reason: str | None = None, limit: int = 1000
    ) -> list[RunInfo]:
        """Dead-lettered runs, most recently dead first."""

        def keep(info: RunInfo) -> bool:
            return (graph is None or info.graph == graph) and (reason is None or info.reason == reason)

        return self._scan_index(keys.DEAD, limit, keep)

    def _scan_index(self, index: str, limit: int, keep: Callable[[RunInfo], bool]) -> list[RunInfo]:
        found: list[RunInfo] = []
        start = 0
        while len(found) < limit:
            members = [text(m) for m in self._r.zrevrange(index, start, start + _LIST_PAGE - 1)]
            if not members:
                break
            start += len(members)
            pipe = self._r.pipeline(transaction=False)
            for run_id in members:
                pipe.hgetall(keys.run(run_id))
            for run_id, raw in zip(members, pipe.execute(), strict=True):
                record = text_map(raw)
                if not record:
                    # Its keys expired; drop the stale index entries while we are here.
                    self._run("prune", run_id, run_id, clock.now_ms(), [])
                    continue
                info = run_info(record)
                if keep(info):
                    found.append(info)
        return found[:limit]
