"""The native asyncio client: the :class:`~reflexr_graph.client.sync.Client` API on ``redis.asyncio``.

Every call runs the same operations as ``Client`` (``client/core.py`` and the store's), answered
on the event loop: ``wait`` and ``events`` block in XREAD BLOCK on a socket of the loop, so a
hundred concurrent waits hold a hundred Redis connections and no thread.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

from celery import Celery

from reflexr_graph import clock, schemas
from reflexr_graph.client.bulk import (
    BulkCancel,
    BulkPurge,
    RunFilter,
    cancel_many,
    cancellable_runs,
    purge_many,
    purgeable_runs,
)
from reflexr_graph.client.core import BULK_LIMIT, BulkReplay, ClientBase, Enqueued, ForkChange, WaitUntil
from reflexr_graph.client.failover import PROBE, READ, WRITE, Repeat, call_async, keyed
from reflexr_graph.client.publish import MessageSender
from reflexr_graph.client.schedules import add_schedule, schedule_info, set_paused, trigger
from reflexr_graph.client.streaming import StreamCursor
from reflexr_graph.config.settings import Settings
from reflexr_graph.core.action import GraphAction
from reflexr_graph.core.schedules import Catchup, Overlap
from reflexr_graph.core.tags import check_tags
from reflexr_graph.model import (
    BranchLane,
    CheckpointDetail,
    CheckpointInfo,
    DeadLetter,
    LimitUsage,
    Overview,
    Quarantined,
    RunEvent,
    RunInfo,
    RunPage,
    ScheduleInfo,
    Status,
    StreamItem,
    WorkerInfo,
    WorkerStatus,
)
from reflexr_graph.store.activity import Activity, activity
from reflexr_graph.store.aio import AsyncStore
from reflexr_graph.store.asks import EventWait, waits_of
from reflexr_graph.store.audit import AuditEntry
from reflexr_graph.store.audit import entries as audit_entries
from reflexr_graph.store.durability import Durability, read_durability
from reflexr_graph.store.history import checkpoint_list
from reflexr_graph.store.interventions import cancel_run, purge_run
from reflexr_graph.store.limits import limit_usage
from reflexr_graph.store.ops import Envelope, Op, Publish, Request, drive_async, ping
from reflexr_graph.store.overview import overview
from reflexr_graph.store.quarantine import purge_quarantine, quarantined
from reflexr_graph.store.reads import (
    dead_letter,
    dead_listing,
    last_traceback,
    latest_checkpoint,
    run_events,
    run_lanes,
    run_record,
    runs_listing,
)
from reflexr_graph.store.run_ids import resolve_run_id
from reflexr_graph.store.schedules import delete_schedule, list_schedules
from reflexr_graph.store.streams import StreamPage, stream_page
from reflexr_graph.store.upgrades import UpgradePlan
from reflexr_graph.store.versions import ServedVersion, served_versions
from reflexr_graph.store.workers import live_workers, serving, worker_statuses

T = TypeVar("T")


class AsyncClient(ClientBase):
    """Enqueue and manage runs from asyncio code; the same methods and arguments as ``Client``."""

    def __init__(
        self,
        settings: Settings,
        store: AsyncStore | None = None,
        *,
        max_connections: int | None = None,
        by: str = "client",
    ) -> None:
        """``max_connections`` bounds the store's pool (store/aio.py's MAX_CONNECTIONS otherwise);
        ``by`` is who the client acts as (see ``ClientBase.by``)."""
        super().__init__(settings, by)
        bound = {"max_connections": max_connections} if max_connections else {}
        self.store = store or AsyncStore.from_url(settings.redis_url, **self.store_options, **bound)
        self._sender = MessageSender(settings)

    @property
    def app(self) -> Celery:
        """The producer Celery app the messages are built with."""
        return self._sender.app

    async def _handle(self, request: Request) -> Any:
        if isinstance(request, Publish):
            return await self._sender.send(self.store, request.run_id, request.graph, request.priority)
        if isinstance(request, Envelope):
            return self._sender.message(request.run_id, request.graph, request.priority)
        return await self.store.handle(request)

    async def _do(self, op: Op[T], repeat: Repeat = READ) -> T:
        await self.store.keep_clock()  # the operation's times are the store's (clock.py)
        # Each request is retried while Redis is unavailable, as ``repeat`` allows (client/failover.py).
        return await drive_async(
            op, lambda request: call_async(self._failover, self._handle, request, repeat)
        )

    async def close(self) -> None:
        """Release the Redis connections."""
        self._sender.close()
        await self.store.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- the Client's methods, awaited: the same operations (client/core.py, store/) --------

    async def graph(self, name: str) -> schemas.GraphSchema:
        """See :meth:`Client.graph`."""
        return await self._do(schemas.published_graph(name))

    async def graphs(self) -> list[schemas.GraphSchema]:
        """See :meth:`Client.graphs`."""
        return await self._do(schemas.published_graphs())

    async def publish(self, actions: Iterable[GraphAction]) -> list[str]:
        """See :meth:`Client.publish`."""
        return await self._do(self._core.publish(actions))

    async def upgrade_plan(
        self,
        graph: str,
        from_version: str,
        *,
        resume_compatible: bool = False,
        include_running: bool = False,
        code: GraphAction | None = None,
    ) -> UpgradePlan:
        """See :meth:`Client.upgrade_plan`."""
        op = self._core.upgrade(
            graph, from_version, resume_compatible=resume_compatible, include_running=include_running,
            code=code, dry_run=True,
        )  # fmt: skip
        return await self._do(op)

    async def upgrade(
        self,
        graph: str,
        from_version: str,
        *,
        resume_compatible: bool = False,
        include_running: bool = False,
        code: GraphAction | None = None,
    ) -> UpgradePlan:
        """See :meth:`Client.upgrade`."""
        op = self._core.upgrade(
            graph, from_version, resume_compatible=resume_compatible, include_running=include_running,
            code=code,
        )  # fmt: skip
        return await self._do(op, WRITE)

    async def versions(self, graph: str) -> list[ServedVersion]:
        """See :meth:`Client.versions`."""
        return await self._do(served_versions(graph))

    async def serving(self, graphs: list[str]) -> dict[str, list[str]]:
        """See :meth:`Client.serving`."""
        return await self._do(serving(graphs))

    async def workers(self) -> list[WorkerInfo]:
        """See :meth:`Client.workers`."""
        return await self._do(live_workers())

    async def worker_statuses(self) -> list[WorkerStatus]:
        """Every live worker with when it last beat and the runs it holds now (the workers page)."""
        return await self._do(worker_statuses())

    async def overview(self) -> Overview:
        """Runs by status now, queued runs per graph, the live workers and the dead letters."""
        return await self._do(overview())

    async def activity(self, minutes: int = 60) -> Activity:
        """See :meth:`Client.activity`."""
        await self.store.keep_clock()  # "now" is read before the operation starts
        return await self._do(activity(clock.now_ms(), minutes))

    async def ping(self) -> None:
        """See :meth:`Client.ping`."""
        await self._do(ping(), PROBE)

    async def durability(self) -> Durability:
        """See :meth:`Client.durability`."""
        return await self._do(read_durability())

    async def enqueue(
        self,
        graph: str,
        inputs: Any,
        *,
        state: Any = None,
        idempotency_key: str | None = None,
        priority: int | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str:
        """See :meth:`Client.enqueue`."""
        return (
            await self.enqueue_run(
                graph, inputs, state=state, idempotency_key=idempotency_key, priority=priority, tags=tags
            )
        ).run_id

    async def enqueue_run(
        self,
        graph: str,
        inputs: Any,
        *,
        state: Any = None,
        idempotency_key: str | None = None,
        priority: int | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> Enqueued:
        """See :meth:`Client.enqueue_run`."""
        return await self._do(
            self._core.enqueue(graph, inputs, state, idempotency_key, priority, tags), keyed(idempotency_key)
        )

    async def resolve_run_id(self, run_id: str) -> str:
        """See :meth:`Client.resolve_run_id`."""
        return await self._do(resolve_run_id(run_id))

    async def get(self, run_id: str) -> RunInfo:
        """See :meth:`Client.get`."""
        return await self._do(run_record(run_id))

    async def runs(
        self,
        *,
        status: Status | str | None = None,
        graph: str | None = None,
        limit: int = 50,
        tags: Mapping[str, str] | None = None,
    ) -> list[RunInfo]:
        """See :meth:`Client.runs`."""
        return await self._do(self._core.runs(status, graph, limit, tags))

    async def runs_page(
        self,
        *,
        status: Status | str | None = None,
        graph: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        tags: Mapping[str, str] | None = None,
        matching: str | None = None,
    ) -> RunPage:
        """See :meth:`Client.runs_page`."""
        listing = runs_listing(status, graph, limit, cursor, tags=check_tags(tags), matching=matching)
        return await self._do(listing)

    async def history(self, run_id: str) -> list[RunEvent]:
        """See :meth:`Client.history`."""
        return await self._do(self._core.history(run_id))

    async def branches(self, run_id: str) -> list[BranchLane]:
        """See :meth:`Client.branches`."""
        return await self._do(run_lanes(run_id))

    async def events(self, run_id: str, after: str = "0-0", block_ms: int | None = None) -> list[RunEvent]:
        """See :meth:`Client.events`; a blocking read waits on the loop, holding no thread."""
        return await self._do(run_events(run_id, after, block_ms, None, self.store.max_block_ms))

    async def stream(
        self,
        run_id: str,
        *,
        topic: str | None = None,
        after: int | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[StreamItem]:
        """See :meth:`Client.stream`: an async iterator, which waits on the loop, holding no thread."""
        cursor = StreamCursor.start(run_id, topic, after, timeout, self.store.max_block_ms)
        while not cursor.done:
            for item in cursor.take(await self._do(cursor.read())):
                yield item

    async def stream_page(self, run_id: str, *, after: int = 0, block_ms: int | None = None) -> StreamPage:
        """One read of the run's stream: its items after offset ``after`` (at most 500), waiting up to
        ``block_ms`` (0: forever) for one; ``ended`` once the run has ended and nothing is left.
        :meth:`stream` reads page after page; a server that must also do other work between pages
        (the HTTP API's keep-alives) reads them itself."""
        return await self._do(stream_page(run_id, after, block_ms, self.store.max_block_ms))

    async def traceback(self, run_id: str) -> str | None:
        """See :meth:`Client.traceback`."""
        return await self._do(last_traceback(run_id))

    async def checkpoint_info(self, run_id: str) -> dict[str, Any] | None:
        """See :meth:`Client.checkpoint_info`."""
        return await self._do(latest_checkpoint(run_id))

    async def wait(self, run_id: str, timeout: float | None = None, until: WaitUntil = "ended") -> RunInfo:
        """See :meth:`Client.wait`; it waits on the loop, holding no thread."""
        return await self._do(self._core.wait(run_id, timeout, self.store.max_block_ms, until))

    async def dead_letters(
        self,
        graph: str | None = None,
        reason: str | None = None,
        *,
        limit: int = 1000,
        tags: Mapping[str, str] | None = None,
    ) -> list[RunInfo]:
        """See :meth:`Client.dead_letters`."""
        return await self._do(self._core.dead_letters(graph, reason, limit, tags))

    async def dead_letters_page(
        self,
        graph: str | None = None,
        reason: str | None = None,
        *,
        limit: int = 100,
        cursor: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> RunPage:
        """See :meth:`Client.dead_letters_page`."""
        return await self._do(dead_listing(graph, reason, limit, cursor, tags=check_tags(tags)))

    async def dead_letter(self, run_id: str) -> DeadLetter:
        """See :meth:`Client.dead_letter`."""
        return await self._do(dead_letter(run_id))

    async def replay_many(
        self,
        run_ids: Sequence[str] | None = None,
        *,
        graph: str | None = None,
        reason: str | None = None,
        from_start: bool = False,
        progress: Callable[[str], None] | None = None,
        tags: Mapping[str, str] | None = None,
        by: str | None = None,
    ) -> BulkReplay:
        """See :meth:`Client.replay_many`."""
        return await self._do(
            self._core.replay_many(run_ids, graph, reason, from_start, progress, tags, by or self.by), WRITE
        )

    async def replay(
        self, run_id: str, *, from_start: bool = False, from_seq: int | None = None, by: str | None = None
    ) -> RunInfo:
        """See :meth:`Client.replay`."""
        return await self._do(self._core.replay(run_id, from_start, from_seq, by or self.by), WRITE)

    async def checkpoints(self, run_id: str) -> list[CheckpointInfo]:
        """See :meth:`Client.checkpoints`."""
        return await self._do(checkpoint_list(run_id))

    async def checkpoint(self, run_id: str, seq: int) -> CheckpointDetail:
        """See :meth:`Client.checkpoint`."""
        return await self._do(self._core.checkpoint(run_id, seq))

    async def fork(
        self,
        run_id: str,
        *,
        from_seq: int,
        state: Any = None,
        patch: Any = None,
        priority: int | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        """See :meth:`Client.fork`."""
        change = ForkChange(from_seq, state, patch, priority)
        return await self._do(self._core.fork(run_id, change, idempotency_key), keyed(idempotency_key, WRITE))

    async def check_fork(
        self, run_id: str, *, from_seq: int, state: Any = None, patch: Any = None
    ) -> CheckpointDetail:
        """See :meth:`Client.check_fork`."""
        return await self._do(self._core.check_fork(run_id, ForkChange(from_seq, state, patch)))

    async def signal(self, run_id: str, name: str, value: Any, *, by: str | None = None) -> bool:
        """See :meth:`Client.signal`."""
        return await self._do(self._core.signal(run_id, name, value, by or self.by), WRITE)

    async def resolve_event(self, token: str, payload: Any, *, by: str | None = None) -> bool:
        """See :meth:`Client.resolve_event`."""
        return await self._do(self._core.answer_event(token, {"payload": payload}, by or self.by), WRITE)

    async def fail_event(self, token: str, reason: str, *, by: str | None = None) -> bool:
        """See :meth:`Client.fail_event`."""
        return await self._do(self._core.answer_event(token, {"error": str(reason)}, by or self.by), WRITE)

    async def pending_events(self, graph: str | None = None) -> list[EventWait]:
        """See :meth:`Client.pending_events`."""
        return await self._do(self._core.pending_events(graph))

    async def event_waits(self, run_id: str) -> list[EventWait]:
        """See :meth:`Client.event_waits`."""
        return await self._do(waits_of(run_id, open_only=False))

    async def cancel(self, run_id: str, *, now: bool = False, by: str | None = None) -> RunInfo:
        """See :meth:`Client.cancel`."""
        return await self._do(cancel_run(run_id, self.store.run_retention_s, now, by or self.by), WRITE)

    async def cancellable(
        self,
        *,
        status: Status | str | None = None,
        graph: str | None = None,
        tags: Mapping[str, str] | None = None,
        limit: int = BULK_LIMIT,
        now: bool = False,
    ) -> list[RunInfo]:
        """See :meth:`Client.cancellable`."""
        wanted = RunFilter(None if status is None else Status(status), graph, tags)
        return await self._do(cancellable_runs(wanted, limit, now))

    async def cancel_many(
        self,
        run_ids: Sequence[str] | None = None,
        *,
        status: Status | str | None = None,
        graph: str | None = None,
        tags: Mapping[str, str] | None = None,
        now: bool = False,
        all: bool = False,
        progress: Callable[[str], None] | None = None,
        by: str | None = None,
    ) -> BulkCancel:
        """See :meth:`Client.cancel_many`."""
        wanted = RunFilter(None if status is None else Status(status), graph, tags)
        return await self._do(
            cancel_many(run_ids, wanted, self.store.run_retention_s, now, progress, all, by or self.by), WRITE
        )

    async def purge(self, run_id: str, *, by: str | None = None) -> bool:
        """See :meth:`Client.purge`."""
        return await self._do(purge_run(run_id, by or self.by), WRITE)

    async def purgeable(
        self,
        *,
        status: Status | str | None = None,
        graph: str | None = None,
        tags: Mapping[str, str] | None = None,
        limit: int = BULK_LIMIT,
    ) -> list[RunInfo]:
        """See :meth:`Client.purgeable`."""
        wanted = RunFilter(None if status is None else Status(status), graph, tags)
        return await self._do(purgeable_runs(wanted, limit))

    async def purge_many(
        self,
        run_ids: Sequence[str] | None = None,
        *,
        status: Status | str | None = None,
        graph: str | None = None,
        tags: Mapping[str, str] | None = None,
        all: bool = False,
        progress: Callable[[str], None] | None = None,
        by: str | None = None,
    ) -> BulkPurge:
        """See :meth:`Client.purge_many`."""
        wanted = RunFilter(None if status is None else Status(status), graph, tags)
        return await self._do(purge_many(run_ids, wanted, progress, all, by or self.by), WRITE)

    # -- schedules --------------------------------------------------------------------------

    async def add_schedule(
        self,
        name: str,
        graph: str,
        *,
        cron: str | None = None,
        every: str | int | None = None,
        inputs: Any = None,
        overlap: Overlap | str = Overlap.ALLOW,
        catchup: Catchup | str = Catchup.LATEST,
    ) -> ScheduleInfo:
        """See :meth:`Client.add_schedule`."""
        op = add_schedule(
            self._core, name, graph, cron=cron, every=every, inputs=inputs, overlap=overlap, catchup=catchup
        )
        return await self._do(op, WRITE)

    async def schedules(self) -> list[ScheduleInfo]:
        """See :meth:`Client.schedules`."""
        return await self._do(list_schedules())

    async def schedule(self, name: str) -> ScheduleInfo:
        """See :meth:`Client.schedule`."""
        return await self._do(schedule_info(name))

    async def pause_schedule(self, name: str) -> ScheduleInfo:
        """See :meth:`Client.pause_schedule`."""
        return await self._do(set_paused(name, True))

    async def resume_schedule(self, name: str) -> ScheduleInfo:
        """See :meth:`Client.resume_schedule`."""
        return await self._do(set_paused(name, False))

    async def delete_schedule(self, name: str) -> None:
        """See :meth:`Client.delete_schedule`."""
        await self._do(delete_schedule(name), WRITE)

    async def trigger_schedule(self, name: str) -> str:
        """See :meth:`Client.trigger_schedule`."""
        return await self._do(trigger(self._core, name), WRITE)

    async def limits(self) -> list[LimitUsage]:
        """See :meth:`Client.limits`."""
        return await self._do(limit_usage())

    async def quarantined(self, limit: int = 50) -> Quarantined:
        """See :meth:`Client.quarantined`."""
        return await self._do(quarantined(limit))

    async def purge_quarantine(self, *, by: str | None = None) -> int:
        """See :meth:`Client.purge_quarantine`."""
        return await self._do(purge_quarantine(by or self.by), WRITE)

    async def audit(self, limit: int = 100) -> list[AuditEntry]:
        """See :meth:`Client.audit`."""
        return await self._do(audit_entries(limit))
