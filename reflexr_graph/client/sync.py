"""The Python client: enqueue runs, read them, wait for them, and act on dead letters.

The client talks to the same Redis as the fleet: the store for run records, and the
broker for the ``reflexr_graph.run`` Celery messages. It never imports a graph's code;
inputs are validated against the JSON Schema a worker published (``schemas.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
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
from reflexr_graph.client.failover import PROBE, READ, WRITE, Repeat, call, keyed
from reflexr_graph.client.publish import queued_message
from reflexr_graph.client.schedules import add_schedule, schedule_info, set_paused, trigger
from reflexr_graph.client.streaming import StreamCursor
from reflexr_graph.config.celery import celery_config
from reflexr_graph.config.dispatch import send_run
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
from reflexr_graph.store.asks import EventWait, waits_of
from reflexr_graph.store.audit import AuditEntry
from reflexr_graph.store.audit import entries as audit_entries
from reflexr_graph.store.durability import Durability, read_durability
from reflexr_graph.store.history import checkpoint_list
from reflexr_graph.store.interventions import cancel_run, purge_run
from reflexr_graph.store.limits import limit_usage
from reflexr_graph.store.ops import Envelope, Op, Publish, Request, drive, ping
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
from reflexr_graph.store.redis_store import RedisStore
from reflexr_graph.store.run_ids import resolve_run_id
from reflexr_graph.store.schedules import delete_schedule, list_schedules
from reflexr_graph.store.streams import StreamPage, stream_page
from reflexr_graph.store.upgrades import UpgradePlan
from reflexr_graph.store.versions import ServedVersion, served_versions
from reflexr_graph.store.workers import live_workers, serving, worker_statuses

T = TypeVar("T")


def producer_app(settings: Settings) -> Celery:
    """A Celery app that only sends messages, configured like the fleet (JSON, same queue)."""
    app = Celery("reflexr_graph.client", set_as_current=False)
    app.conf.update(celery_config(settings))
    return app


class Client(ClientBase):
    """Enqueue and manage runs. Build it with :meth:`from_url` or :meth:`from_settings`."""

    def __init__(self, settings: Settings, store: RedisStore | None = None, *, by: str = "client") -> None:
        """``by`` is who the client acts as, recorded on what it does (see ``ClientBase.by``)."""
        super().__init__(settings, by)
        self.store = store or RedisStore.from_url(settings.redis_url, **self.store_options)
        self._app: Celery | None = None

    @property
    def app(self) -> Celery:
        """The producer Celery app, created on first send."""
        if self._app is None:
            self._app = producer_app(self.settings)
        return self._app

    def close(self) -> None:
        """Release the Redis and broker connections."""
        if self._app is not None:
            self._app.close()
            self._app = None
        self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- operations: each one written once (client/core.py, store/), run by both clients ----

    def _handle(self, request: Request) -> Any:
        if isinstance(request, Publish):
            return send_run(self.app, request.run_id, request.graph, priority=request.priority)
        if isinstance(request, Envelope):
            if not self.settings.broker_is_store:
                return None
            return queued_message(self.app, request.run_id, request.graph, request.priority)
        return self.store.handle(request)

    def _do(self, op: Op[T], repeat: Repeat = READ) -> T:
        self.store.keep_clock()  # the operation's times are the store's (clock.py)
        # Each request is retried while Redis is unavailable, as ``repeat`` allows (client/failover.py).
        return drive(op, lambda request: call(self._failover, self._handle, request, repeat))

    # -- graphs and workers ------------------------------------------------------------------

    def graph(self, name: str) -> schemas.GraphSchema:
        """The published schema entry of graph ``name``; UnknownGraph if no worker published it.

        Its ``max_attempts`` is the budget every new run of the graph gets (see :meth:`enqueue`).
        """
        return self._do(schemas.published_graph(name))

    def graphs(self) -> list[schemas.GraphSchema]:
        """Every graph a worker (or ``reflexr-graph publish``) has published, by name."""
        return self._do(schemas.published_graphs())

    def publish(self, actions: Iterable[GraphAction]) -> list[str]:
        """Publish the schemas of ``actions``, as a worker does when it starts, so that producers
        can enqueue before any worker runs; returns the names whose entry was written (changed).

        A graph whose action sets no ``max_attempts`` is published with this client's
        ``REFLEXR_MAX_ATTEMPTS``: publish with the workers' settings. Workers overwrite the entry
        with their own when it differs.
        """
        return self._do(self._core.publish(actions))

    def upgrade_plan(
        self,
        graph: str,
        from_version: str,
        *,
        resume_compatible: bool = False,
        include_running: bool = False,
        code: GraphAction | None = None,
    ) -> UpgradePlan:
        """What :meth:`upgrade` would do, changing nothing: the runs that would move, the newest
        served version they would move to, and whether each would resume or start over, and why.
        OperationRefused when no newer version is served."""
        op = self._core.upgrade(
            graph, from_version, resume_compatible=resume_compatible, include_running=include_running,
            code=code, dry_run=True,
        )  # fmt: skip
        return self._do(op)

    def upgrade(
        self,
        graph: str,
        from_version: str,
        *,
        resume_compatible: bool = False,
        include_running: bool = False,
        code: GraphAction | None = None,
    ) -> UpgradePlan:
        """Move the runs held for ``from_version`` (waiting for a worker of it) to the newest version a
        live worker serves; the plan lists the runs moved. They start over from their first step,
        the rule for a changed graph, unless ``resume_compatible``: then a run whose latest
        checkpoint the new graph reads (``check-checkpoints``' check, core/compat.py) resumes from
        it, with the records of the work finished since it; ``code`` is the new version's
        GraphAction, by default the graph as this process's REFLEXR_GRAPHS defines it.

        With ``include_running``, the version's live runs move too: queued, retrying and waiting ones now,
        running ones once their attempt ends (``running`` lists them; a worker of the new version
        moves each, judging its checkpoint then), never cut mid-step."""
        op = self._core.upgrade(
            graph, from_version, resume_compatible=resume_compatible, include_running=include_running,
            code=code,
        )  # fmt: skip
        return self._do(op, WRITE)

    def versions(self, graph: str) -> list[ServedVersion]:
        """Every published version of ``graph``, newest first, with the live workers that serve it."""
        return self._do(served_versions(graph))

    def serving(self, graphs: list[str]) -> dict[str, list[str]]:
        """For each graph, the names of the live workers that run it."""
        return self._do(serving(graphs))

    def workers(self) -> list[WorkerInfo]:
        """Every live worker: its name, graphs, queues, pool and concurrency."""
        return self._do(live_workers())

    def worker_statuses(self) -> list[WorkerStatus]:
        """Every live worker with when it last beat and the runs it holds now (the workers page)."""
        return self._do(worker_statuses())

    def overview(self) -> Overview:
        """Runs by status now, queued runs per graph, the live workers and the dead letters."""
        return self._do(overview())

    def activity(self, minutes: int = 60) -> Activity:
        """The last ``minutes`` (at most 60), per minute: runs started, succeeded, dead-lettered
        and retried, dead letters by reason; the latest succeeded runs' durations per graph; the
        runs waiting now, by reason (the console's overview)."""
        self.store.keep_clock()  # "now" is read before the operation starts
        return self._do(activity(clock.now_ms(), minutes))

    def ping(self) -> None:
        """One round trip to Redis; StoreUnavailable (saying what to fix) when it does not answer."""
        self._do(ping(), PROBE)

    def durability(self) -> Durability:
        """Redis's maxmemory-policy, appendonly and save (``checked`` False where CONFIG is refused);
        ``store.durability.durability_warning`` says whether it may lose runs."""
        return self._do(read_durability())

    # -- enqueue ----------------------------------------------------------------------------

    def enqueue(
        self,
        graph: str,
        inputs: Any,
        *,
        state: Any = None,
        idempotency_key: str | None = None,
        priority: int | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str:
        """Validate and queue a run of ``graph``; returns its run id.

        ``inputs`` and ``state`` are JSON values, or the graph's own pydantic models and
        dataclasses. Raises UnknownGraph or InvalidInputs (listing each failing location)
        before anything is queued; logs a warning when no live worker serves the graph (the
        run then waits for one, up to REFLEXR_UNKNOWN_GRAPH_GRACE_S).

        With ``idempotency_key``, every caller using the same key for the same graph, with
        the same inputs and state, gets the same run id while that run's record lives (its
        retention), and only the first sends a message; a dead run's key names the dead run,
        which ``replay`` runs again. The same key with other inputs raises IdempotencyConflict.

        ``priority``, 0 (the default, served first) to 9 (served last), orders the run's messages
        among those waiting on its graph's queue (Celery's Redis transport priorities); the run
        keeps it for every message sent later (retries, wakes, recovery, replay).

        ``tags`` (``{"tenant": "acme"}``) label the run: ``RunInfo.tags`` shows them, and
        :meth:`runs`, :meth:`dead_letters` and the bulk operations filter by them. At most 16; keys
        are 1 to 63 of ``A-Z a-z 0-9 _ . - /``, values 1 to 128 of those and ``: @`` (InvalidInputs
        otherwise). They are written in the same round trip as the run.

        The run's ``max_attempts`` is the graph's published one (``graph(name).max_attempts``):
        the action's own ``max_attempts``, else the workers' ``REFLEXR_MAX_ATTEMPTS``. This
        client's ``REFLEXR_MAX_ATTEMPTS`` plays no part, so a run gets the same budget whether
        a Client or a foreign ``send_task`` producer made it.
        """
        return self.enqueue_run(
            graph, inputs, state=state, idempotency_key=idempotency_key, priority=priority, tags=tags
        ).run_id

    def enqueue_run(
        self,
        graph: str,
        inputs: Any,
        *,
        state: Any = None,
        idempotency_key: str | None = None,
        priority: int | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> Enqueued:
        """:meth:`enqueue`, saying also whether the run was created now or the key already named it."""
        return self._do(
            self._core.enqueue(graph, inputs, state, idempotency_key, priority, tags), keyed(idempotency_key)
        )

    # -- reads ------------------------------------------------------------------------------

    def resolve_run_id(self, run_id: str) -> str:
        """The id of the run ``run_id`` names, which may be the start of its id (8 characters or
        more, as copied from a listing): the whole id of the one run it starts, or ``run_id`` as
        given when it is a run's id or starts none. AmbiguousRunId when it starts more than one;
        RunNotFound when it is shorter than 8 characters and no run's id. The index is walked
        whole: a person's lookup, not for a hot path."""
        return self._do(resolve_run_id(run_id))

    def get(self, run_id: str) -> RunInfo:
        """A snapshot of the run; RunNotFound if there is no such run."""
        return self._do(run_record(run_id))

    def runs(
        self,
        *,
        status: Status | str | None = None,
        graph: str | None = None,
        limit: int = 50,
        tags: Mapping[str, str] | None = None,
    ) -> list[RunInfo]:
        """Runs newest first, optionally only those in ``status``, of ``graph``, or carrying every
        tag of ``tags`` (read from that tag's index: it costs what it finds)."""
        return self._do(self._core.runs(status, graph, limit, tags))

    def runs_page(
        self,
        *,
        status: Status | str | None = None,
        graph: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        tags: Mapping[str, str] | None = None,
        matching: str | None = None,
    ) -> RunPage:
        """:meth:`runs` one page at a time: pass the page's ``cursor`` to get the next one.
        ``tags`` keeps the runs carrying every one; ``matching`` the runs whose id starts with it
        or whose graph's name holds it."""
        return self._do(runs_listing(status, graph, limit, cursor, tags=check_tags(tags), matching=matching))

    def history(self, run_id: str) -> list[RunEvent]:
        """The run's events, oldest first; RunNotFound if there is no such run."""
        return self._do(self._core.history(run_id))

    def branches(self, run_id: str) -> list[BranchLane]:
        """When each branch step of the run's maps ran, in the order they started: its node,
        branch, attempt and times (the timeline's lanes); RunNotFound if there is no such run."""
        return self._do(run_lanes(run_id))

    def events(self, run_id: str, after: str = "0-0", block_ms: int | None = None) -> list[RunEvent]:
        """Events after stream id ``after``; with ``block_ms``, wait that long (0: forever) for one."""
        return self._do(run_events(run_id, after, block_ms, None, self.store.max_block_ms))

    def stream(
        self,
        run_id: str,
        *,
        topic: str | None = None,
        after: int | None = None,
        timeout: float | None = None,
    ) -> Iterator[StreamItem]:
        """The items the run's steps emit (``reflexr_graph.emit``), live, oldest first, until the run ends.

        Starts after offset ``after`` (from the first item when None) and yields only ``topic``'s
        items when given (and the restart items, whatever their topic: see :class:`StreamItem`).
        It sleeps in XREAD BLOCK between items, and stops once the run has ended and every item
        it emitted was yielded. RunNotFound for no such run; WaitTimeout when the run has not
        ended within ``timeout`` seconds (None: as long as it takes).
        """
        cursor = StreamCursor.start(run_id, topic, after, timeout, self.store.max_block_ms)
        while not cursor.done:
            yield from cursor.take(self._do(cursor.read()))

    def stream_page(self, run_id: str, *, after: int = 0, block_ms: int | None = None) -> StreamPage:
        """One read of the run's stream: its items after offset ``after`` (at most 500), waiting up to
        ``block_ms`` (0: forever) for one; ``ended`` once the run has ended and nothing is left.
        :meth:`stream` reads page after page; a caller that must do other work between pages reads
        them itself."""
        return self._do(stream_page(run_id, after, block_ms, self.store.max_block_ms))

    def traceback(self, run_id: str) -> str | None:
        """The last failed attempt's traceback, if any."""
        return self._do(last_traceback(run_id))

    def checkpoint_info(self, run_id: str) -> dict[str, Any] | None:
        """The latest checkpoint's ``seq``, ``saved_at``, ``size`` and ``next_node``, if any."""
        return self._do(latest_checkpoint(run_id))

    def wait(self, run_id: str, timeout: float | None = None, until: WaitUntil = "ended") -> RunInfo:
        """Block until the run is terminal and return it; WaitTimeout after ``timeout`` seconds.

        With ``until="waiting"``, return as soon as the run is ``waiting`` too (for a person's
        signal, a timer, a child run or a worker of its version), or has ended, whichever comes
        first: what a caller that must answer an approval waits for.

        Sleeps on the run's event stream (XREAD BLOCK), so it wakes as soon as the run
        changes. A run a foreign producer sent with ``send_task`` has no record until a
        worker takes its first delivery: ``wait`` waits for the record to appear too, within
        the same timeout. ``timeout=None`` waits for as long as it takes.
        """
        return self._do(self._core.wait(run_id, timeout, self.store.max_block_ms, until))

    # -- dead letters -----------------------------------------------------------------------

    def dead_letters(
        self,
        graph: str | None = None,
        reason: str | None = None,
        *,
        limit: int = 1000,
        tags: Mapping[str, str] | None = None,
    ) -> list[RunInfo]:
        """Dead-lettered runs, most recently dead first, optionally of one graph or reason; with
        ``tags``, the dead runs carrying every one, newest first."""
        return self._do(self._core.dead_letters(graph, reason, limit, tags))

    def dead_letters_page(
        self,
        graph: str | None = None,
        reason: str | None = None,
        *,
        limit: int = 100,
        cursor: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> RunPage:
        """:meth:`dead_letters` one page at a time: pass the page's ``cursor`` to get the next one."""
        return self._do(dead_listing(graph, reason, limit, cursor, tags=check_tags(tags)))

    def dead_letter(self, run_id: str) -> DeadLetter:
        """A run (usually a dead one) with what an operator needs to decide: the run, the traceback
        of its last failed attempt, and its latest checkpoint's metadata (where a replay resumes).
        RunNotFound if there is no such run."""
        return self._do(dead_letter(run_id))

    def replay_many(
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
        """Replay each of ``run_ids`` as :meth:`replay` does, or, without them, every dead run of
        ``graph``, ``reason`` and/or ``tags`` (at most ``BULK_LIMIT`` per call: a replayed run is
        no longer dead, so calling again with the same filter goes on with the rest).

        A run that cannot be replayed (RunNotFound, or OperationRefused for its status) is listed
        in ``refused`` with its error, and the others go on. InvalidInputs when both ``run_ids``
        and a filter are given. ``progress``, when given, is called with each run id once done.
        """
        replay = self._core.replay_many(run_ids, graph, reason, from_start, progress, tags, by or self.by)
        return self._do(replay, WRITE)

    # -- operator actions -------------------------------------------------------------------

    def replay(
        self, run_id: str, *, from_start: bool = False, from_seq: int | None = None, by: str | None = None
    ) -> RunInfo:
        """Queue a dead or cancelled run again, with a fresh attempt budget; it resumes from its
        checkpoint unless ``from_start``.

        ``from_seq`` resumes it from an earlier checkpoint of its own history instead, to back
        out of a bad step: that checkpoint becomes the latest, and the ones after it are dropped.
        It is refused (StaleCheckpoint) when saved by another version of the graph, and
        CheckpointNotFound names the seqs the run keeps when it keeps no such one.

        OperationRefused for a run in any other status, RunNotFound for an unknown id. ``by`` (the
        client's own when None) is recorded as who replayed it, on its ``run_replayed`` event.
        """
        return self._do(self._core.replay(run_id, from_start, from_seq, by or self.by), WRITE)

    # -- time travel ------------------------------------------------------------------------

    def checkpoints(self, run_id: str) -> list[CheckpointInfo]:
        """Every checkpoint the run keeps, oldest first, the latest last: ``seq``, ``saved_at``,
        ``next_node``, ``size`` and the ``attempt`` that saved it. No values: see :meth:`checkpoint`.

        A run keeps its latest checkpoint and up to ``REFLEXR_CHECKPOINT_HISTORY`` before it (as
        the workers are configured); RunNotFound if there is no such run.
        """
        return self._do(checkpoint_list(run_id))

    def checkpoint(self, run_id: str, seq: int) -> CheckpointDetail:
        """Checkpoint ``seq`` of the run with its values as JSON: the state, the graph inputs and
        the next task's inputs (the output, for the finished one).

        RunNotFound, or CheckpointNotFound (naming the seqs the run keeps).
        """
        return self._do(self._core.checkpoint(run_id, seq))

    def fork(
        self,
        run_id: str,
        *,
        from_seq: int,
        state: Any = None,
        patch: Any = None,
        priority: int | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        """Create a new run of the same graph that resumes from checkpoint ``from_seq`` of
        ``run_id``; returns the new run's id. Nothing of the source run changes, whatever its
        status (it must still exist).

        ``state`` (JSON, or the graph's own model or dataclass), when given, replaces the
        checkpoint's state; ``patch`` (a JSON object) is merged into it instead: objects key by
        key, any other value (null too) replaces. Either is validated against the published
        state schema first, and a field the state type lacks is refused (InvalidInputs, naming
        locations). A checkpoint saved by another version of the graph is refused
        (StaleCheckpoint). A fork from the finished checkpoint is created succeeded with the
        same output, and no attempt runs. The new run records ``forked_from`` and
        ``forked_at_seq``, and has the source's priority unless ``priority`` (0 to 9) is given.
        The same ``idempotency_key`` gives the same fork, as for :meth:`enqueue`.
        """
        change = ForkChange(from_seq, state, patch, priority)
        return self._do(self._core.fork(run_id, change, idempotency_key), keyed(idempotency_key, WRITE))

    def check_fork(
        self, run_id: str, *, from_seq: int, state: Any = None, patch: Any = None
    ) -> CheckpointDetail:
        """What :meth:`fork` would start from, validated as it validates, without creating
        anything: checkpoint ``from_seq`` with the state the fork would get (its values, as
        :meth:`checkpoint` shows them). Raises what :meth:`fork` raises for the same arguments."""
        return self._do(self._core.check_fork(run_id, ForkChange(from_seq, state, patch)))

    def signal(self, run_id: str, name: str, value: Any, *, by: str | None = None) -> bool:
        """Send signal ``name`` with ``value`` to a run; True when it woke the run, False when it waits.

        The value (JSON, or the signal's own pydantic model or dataclass) is validated against
        the schema the graph publishes for the signal before anything is written: UnknownSignal
        for a name the graph does not declare, InvalidInputs listing each failing location. When
        the run is waiting for this signal, it is queued at once (True). Otherwise the value is
        kept in the run's mailbox, and the step's ``wait_for_signal(name, ...)`` takes it when it
        gets there, without suspending (False). RunNotFound for an unknown run;
        OperationRefused for a finished one; SignalPending when a signal of this name was sent
        and not taken yet (a second would replace it). ``by`` (the client's own when None) is
        recorded as who sent it, on the run's ``signal_received`` event.
        """
        return self._do(self._core.signal(run_id, name, value, by or self.by), WRITE)

    def resolve_event(self, token: str, payload: Any, *, by: str | None = None) -> bool:
        """Answer the external event wait of ``token`` (pydantic-ai's ``wait_for_external_event``,
        ``HandleDeferredToolCalls`` with a token) with ``payload``, and wake its run.

        For deferred tool calls the payload is the JSON form of ``DeferredToolResults``
        (``{"approvals": {"<tool_call_id>": true}}``); ``by`` (default: the client's own, "client"
        unless given) is recorded as who answered, and as each call's ``answered_by``. True when it
        woke the run; False when the run has not suspended yet and takes the answer when it gets to
        its wait. EventTokenInvalid for a string that is no token, EventNotFound for an unknown one,
        EventAnswered when the wait has its answer already (or its timeout passed),
        OperationRefused for a finished run.
        """
        return self._do(self._core.answer_event(token, {"payload": payload}, by or self.by), WRITE)

    def fail_event(self, token: str, reason: str, *, by: str | None = None) -> bool:
        """End the wait of ``token`` without a payload: the wait raises ``ExternalEventError(reason)``
        (a ``HandleDeferredToolCalls`` handler denies its calls with ``reason``). As :meth:`resolve_event`."""
        return self._do(self._core.answer_event(token, {"error": str(reason)}, by or self.by), WRITE)

    def pending_events(self, graph: str | None = None) -> list[EventWait]:
        """Every open external event wait: run, graph, agent, since when, and for deferred tool
        calls each call's tool name and validated arguments; oldest first."""
        return self._do(self._core.pending_events(graph))

    def event_waits(self, run_id: str) -> list[EventWait]:
        """The run's waits for external events (the latest of each name), open or answered: who
        answered, when and with what."""
        return self._do(waits_of(run_id, open_only=False))

    def cancel(self, run_id: str, *, now: bool = False, by: str | None = None) -> RunInfo:
        """Cancel a queued, running, retrying or waiting run; OperationRefused for a finished one.

        A queued, retrying or waiting run is cancelled at once. A running run is cooperative: the
        step in flight finishes (and a fork's other branches in flight), the boundary after it is
        checkpointed as usual, and the run ends ``cancelled`` there without running further; until
        then it is ``running`` with ``cancel_requested``. The worker learns of it from its next
        checkpoint or lease renewal (within a third of ``REFLEXR_LEASE_TTL_S``). A run whose last
        step finishes meanwhile ends cancelled too, its output kept in its finished checkpoint:
        ``replay`` records it without running anything.

        ``now=True`` cancels a running run at once: its step is interrupted with
        ``asyncio.CancelledError`` (within a third of the lease TTL), so it can clean up in
        ``except CancelledError`` / ``finally``; nothing it does after that is recorded. ``by``
        (the client's own when None) is recorded as who cancelled it.
        """
        return self._do(cancel_run(run_id, self.store.run_retention_s, now, by or self.by), WRITE)

    def cancellable(
        self,
        *,
        status: Status | str | None = None,
        graph: str | None = None,
        tags: Mapping[str, str] | None = None,
        limit: int = BULK_LIMIT,
        now: bool = False,
    ) -> list[RunInfo]:
        """Up to ``limit`` queued, running, retrying or waiting runs (of ``status``, one of those,
        when given) of ``graph`` and carrying every tag of ``tags``: what :meth:`cancel_many` with
        the same filter would change (a running run already asked to stop only with ``now``)."""
        wanted = RunFilter(None if status is None else Status(status), graph, tags)
        return self._do(cancellable_runs(wanted, limit, now))

    def cancel_many(
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
        """Cancel each of ``run_ids`` as :meth:`cancel` does (``now`` too), or, without them, the
        runs the filter matches (see :meth:`cancellable`; at most ``BULK_LIMIT`` per call: a
        cancelled run no longer matches, so calling again goes on with the rest, and an interrupted
        bulk cancel resumes that way). A run that cannot be cancelled is listed in ``refused`` with
        its error, and the others go on. With no ids and no filter it cancels nothing: pass
        ``all=True`` to cancel every cancellable run (InvalidInputs otherwise, as when both
        ``run_ids`` and a filter are given, or a status a cancel does not take)."""
        wanted = RunFilter(None if status is None else Status(status), graph, tags)
        retention = self.store.run_retention_s
        return self._do(cancel_many(run_ids, wanted, retention, now, progress, all, by or self.by), WRITE)

    def purge(self, run_id: str, *, by: str | None = None) -> bool:
        """Delete a finished run (succeeded, dead or cancelled) for good; False if there was no such
        run. OperationRefused for a run that has not finished: cancel it first. Its events go with
        it, so ``by`` (the client's own when None) is logged as who purged it."""
        return self._do(purge_run(run_id, by or self.by), WRITE)

    def purgeable(
        self,
        *,
        status: Status | str | None = None,
        graph: str | None = None,
        tags: Mapping[str, str] | None = None,
        limit: int = BULK_LIMIT,
    ) -> list[RunInfo]:
        """Up to ``limit`` finished runs (of ``status``, one of succeeded, dead and cancelled, when
        given) of ``graph`` and carrying every tag of ``tags``: what :meth:`purge_many` with the
        same filter would delete."""
        wanted = RunFilter(None if status is None else Status(status), graph, tags)
        return self._do(purgeable_runs(wanted, limit))

    def purge_many(
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
        """Delete each of ``run_ids`` for good as :meth:`purge` does, or, without them, the finished
        runs the filter matches (see :meth:`purgeable`; at most ``BULK_LIMIT`` per call: a purged
        run is gone, so calling again goes on with the rest, and an interrupted bulk purge resumes
        that way). A run not finished, or not there, is listed in ``refused`` with its error, and
        the others go on. With no ids and no filter it deletes nothing: pass ``all=True`` to
        delete every finished run (InvalidInputs otherwise, as when both ``run_ids`` and a filter
        are given, or a status that is not a finished one)."""
        wanted = RunFilter(None if status is None else Status(status), graph, tags)
        return self._do(purge_many(run_ids, wanted, progress, all, by or self.by), WRITE)

    # -- schedules --------------------------------------------------------------------------

    def add_schedule(
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
        """Add schedule ``name``: a run of ``graph`` with ``inputs`` (validated against the published
        schema now) at each time of ``cron`` (five fields, UTC) or ``every`` (``"30s"``, ``"5m"``,
        ``"2h"``, ``"1d"``, or whole seconds, counted from the epoch). Exactly one of the two.

        The workers' schedulers make each fire one run, tagged ``schedule=<name>``, with the
        idempotency key ``schedule:<name>:<fire time>``. ``overlap="skip"`` makes no run while the
        schedule's previous one is active. ``catchup`` says what the fires missed while no worker
        ran (found more than 3 s late) become: ``"none"``, the ``"latest"`` of them (the default),
        or ``"all"``. OperationRefused when the name is taken, InvalidInputs for a bad clock,
        inputs or policy.
        """
        op = add_schedule(
            self._core, name, graph, cron=cron, every=every, inputs=inputs, overlap=overlap, catchup=catchup
        )
        return self._do(op, WRITE)

    def schedules(self) -> list[ScheduleInfo]:
        """Every schedule, by name, with its next fire time (None while paused) and its last fire and run."""
        return self._do(list_schedules())

    def schedule(self, name: str) -> ScheduleInfo:
        """Schedule ``name``; ScheduleNotFound when there is none."""
        return self._do(schedule_info(name))

    def pause_schedule(self, name: str) -> ScheduleInfo:
        """Stop schedule ``name`` firing until :meth:`resume_schedule`."""
        return self._do(set_paused(name, True))

    def resume_schedule(self, name: str) -> ScheduleInfo:
        """Resume schedule ``name`` from its next fire time after now (the fires of the pause are not
        caught up)."""
        return self._do(set_paused(name, False))

    def delete_schedule(self, name: str) -> None:
        """Delete schedule ``name``; the runs it made stay. ScheduleNotFound when there is none."""
        self._do(delete_schedule(name), WRITE)

    def trigger_schedule(self, name: str) -> str:
        """Fire schedule ``name`` now, paused or not; returns the run's id (the same run as its
        clock's fire in the same second, if there is one)."""
        return self._do(trigger(self._core, name), WRITE)

    # -- the fleet's shared state -----------------------------------------------------------

    def limits(self) -> list[LimitUsage]:
        """Every limit key the fleet has used (``GraphAction(limits={...})``), by key: its rate,
        burst and concurrency, the slots in use now, and how often it granted, refused and made a
        step wait (``reflexr-graph limits``)."""
        return self._do(limit_usage())

    def quarantined(self, limit: int = 50) -> Quarantined:
        """The queue items workers could not run and moved aside (not runs: garbage, unknown
        tasks...): the newest ``limit`` entries, newest first, the list's length and the count per
        reason since the last purge, read at one moment (``reflexr-graph dlq messages``)."""
        return self._do(quarantined(limit))

    def purge_quarantine(self, *, by: str | None = None) -> int:
        """Delete every quarantined queue item and the counts; returns how many entries there were.
        Recorded in the audit trail as by ``by`` (this client's name when not given)."""
        return self._do(purge_quarantine(by or self.by), WRITE)

    def audit(self, limit: int = 100) -> list[AuditEntry]:
        """The newest ``limit`` destructive actions (purges, cancels, quarantine purges), newest
        first: what, on which run, by whom, when; kept after the runs are gone (store/audit.py)."""
        return self._do(audit_entries(limit))
