"""The operation table: every method ``Client`` and ``AsyncClient`` share, written once.

Each method here takes the call's arguments and returns the sans-IO operation that answers it
(``client/core.py``, ``store/``); ``@operation`` names its retry class (``client/failover.py``)
and makes it a method of both clients (``client/operation.py``): blocking on ``Client``,
awaited on ``AsyncClient``, with this name, signature and docstring. A new client operation is
one method here. The few methods whose shape differs per client (``stream``, an iterator or an
async one; closing and the context managers) are written in ``client/sync.py`` and
``client/aio.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from reflexr_graph import clock, schemas
from reflexr_graph.client.bulk import (
    BulkCancel,
    BulkPurge,
    Chosen,
    RunFilter,
    cancel_many,
    cancellable_runs,
    purge_many,
    purgeable_runs,
)
from reflexr_graph.client.core import BULK_LIMIT, BulkReplay, Enqueued, ForkChange, WaitUntil
from reflexr_graph.client.failover import ENQUEUE, PROBE, READ, WRITE
from reflexr_graph.client.operation import Facade, Keyed, operation
from reflexr_graph.client.schedules import add_schedule, schedule_info, set_paused, trigger
from reflexr_graph.core.action import GraphAction
from reflexr_graph.core.schedules import Catchup, Overlap
from reflexr_graph.core.tags import check_tags
from reflexr_graph.model import (
    Activity,
    AuditEntry,
    BranchLane,
    CheckpointDetail,
    CheckpointInfo,
    DeadLetter,
    Durability,
    EventWait,
    LimitUsage,
    Overview,
    Quarantined,
    RunEvent,
    RunInfo,
    RunPage,
    ScheduleInfo,
    ServedVersion,
    Status,
    StreamPage,
    UpgradePlan,
    WorkerInfo,
    WorkerStatus,
)
from reflexr_graph.store.activity import activity
from reflexr_graph.store.asks import waits_of
from reflexr_graph.store.audit import entries as audit_entries
from reflexr_graph.store.durability import read_durability
from reflexr_graph.store.history import checkpoint_list
from reflexr_graph.store.interventions import cancel_run, purge_run
from reflexr_graph.store.limits import limit_usage
from reflexr_graph.store.ops import Op, ping
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
from reflexr_graph.store.streams import stream_page
from reflexr_graph.store.versions import served_versions
from reflexr_graph.store.workers import live_workers, serving, worker_statuses


class Operations(Facade):
    """The methods both clients share: each builds its operation; the client runs it (``_do``)."""

    # -- graphs and workers ------------------------------------------------------------------

    @operation(READ)
    def graph(self, name: str) -> Op[schemas.GraphSchema]:
        """The published schema entry of graph ``name``; UnknownGraph if no worker published it.

        Its ``max_attempts`` is the budget every new run of the graph gets (see :meth:`enqueue`).
        """
        return schemas.published_graph(name)

    @operation(READ)
    def graphs(self) -> Op[list[schemas.GraphSchema]]:
        """Every graph a worker (or ``reflexr-graph publish``) has published, by name."""
        return schemas.published_graphs()

    @operation(READ)
    def publish(self, actions: Iterable[GraphAction]) -> Op[list[str]]:
        """Publish the schemas of ``actions``, as a worker does when it starts, so that producers
        can enqueue before any worker runs; returns the names whose entry was written (changed).

        A graph whose action sets no ``max_attempts`` is published with this client's
        ``REFLEXR_MAX_ATTEMPTS``: publish with the workers' settings. Workers overwrite the entry
        with their own when it differs.
        """
        return self._core.publish(actions)

    @operation(READ)
    def upgrade_plan(
        self,
        graph: str,
        from_version: str,
        *,
        resume_compatible: bool = False,
        include_running: bool = False,
        code: GraphAction | None = None,
    ) -> Op[UpgradePlan]:
        """What :meth:`upgrade` would do, changing nothing: the runs that would move, the newest
        served version they would move to, and whether each would resume or start over, and why.
        OperationRefused when no newer version is served."""
        return self._core.upgrade(
            graph, from_version, resume_compatible=resume_compatible, include_running=include_running,
            code=code, dry_run=True,
        )  # fmt: skip

    @operation(WRITE)
    def upgrade(
        self,
        graph: str,
        from_version: str,
        *,
        resume_compatible: bool = False,
        include_running: bool = False,
        code: GraphAction | None = None,
    ) -> Op[UpgradePlan]:
        """Move the runs held for ``from_version`` (waiting for a worker of it) to the newest version a
        live worker serves; the plan lists the runs moved. They start over from their first step,
        the rule for a changed graph, unless ``resume_compatible``: then a run whose latest
        checkpoint the new graph reads (``check-checkpoints``' check, core/compat.py) resumes from
        it, with the records of the work finished since it; ``code`` is the new version's
        GraphAction, by default the graph as this process's REFLEXR_GRAPHS defines it.

        With ``include_running``, the version's live runs move too: queued, retrying and waiting ones now,
        running ones once their attempt ends (``running`` lists them; a worker of the new version
        moves each, judging its checkpoint then), never cut mid-step."""
        return self._core.upgrade(
            graph, from_version, resume_compatible=resume_compatible, include_running=include_running,
            code=code,
        )  # fmt: skip

    @operation(READ)
    def versions(self, graph: str) -> Op[list[ServedVersion]]:
        """Every published version of ``graph``, newest first, with the live workers that serve it."""
        return served_versions(graph)

    @operation(READ)
    def serving(self, graphs: list[str]) -> Op[dict[str, list[str]]]:
        """For each graph, the names of the live workers that run it."""
        return serving(graphs)

    @operation(READ)
    def workers(self) -> Op[list[WorkerInfo]]:
        """Every live worker: its name, graphs, queues, pool and concurrency."""
        return live_workers()

    @operation(READ)
    def worker_statuses(self) -> Op[list[WorkerStatus]]:
        """Every live worker with when it last beat and the runs it holds now (the workers page)."""
        return worker_statuses()

    @operation(READ)
    def overview(self) -> Op[Overview]:
        """Runs by status now, queued runs per graph, the live workers and the dead letters."""
        return overview()

    @operation(READ)
    def activity(self, minutes: int = 60) -> Op[Activity]:
        """The last ``minutes`` (at most 60), per minute: runs started, succeeded, dead-lettered
        and retried, dead letters by reason; the latest succeeded runs' durations per graph; the
        runs waiting now, by reason (the console's overview)."""
        # A generator: "now" is read once the client has sampled Redis's clock, as the operation starts.
        return (yield from activity(clock.now_ms(), minutes))

    @operation(PROBE)
    def ping(self) -> Op[None]:
        """One round trip to Redis; StoreUnavailable (saying what to fix) when it does not answer."""
        return ping()

    @operation(READ)
    def durability(self) -> Op[Durability]:
        """Redis's maxmemory-policy, appendonly and save (``checked`` False where CONFIG is refused);
        ``store.durability.durability_warning`` says whether it may lose runs."""
        return read_durability()

    # -- enqueue ----------------------------------------------------------------------------

    @operation(ENQUEUE)
    def enqueue(
        self,
        graph: str,
        inputs: Any,
        *,
        state: Any = None,
        idempotency_key: str | None = None,
        priority: int | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> Keyed[str]:
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
        return Keyed(
            _run_id(self._core.enqueue(graph, inputs, state, idempotency_key, priority, tags)),
            idempotency_key,
        )

    @operation(ENQUEUE)
    def enqueue_run(
        self,
        graph: str,
        inputs: Any,
        *,
        state: Any = None,
        idempotency_key: str | None = None,
        priority: int | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> Keyed[Enqueued]:
        """:meth:`enqueue`, saying also whether the run was created now or the key already named it."""
        return Keyed(
            self._core.enqueue(graph, inputs, state, idempotency_key, priority, tags), idempotency_key
        )

    # -- reads ------------------------------------------------------------------------------

    @operation(READ)
    def resolve_run_id(self, run_id: str) -> Op[str]:
        """The id of the run ``run_id`` names, which may be the start of its id (8 characters or
        more, as copied from a listing): the whole id of the one run it starts, or ``run_id`` as
        given when it is a run's id or starts none. AmbiguousRunId when it starts more than one;
        RunNotFound when it is shorter than 8 characters and no run's id. The index is walked
        whole: a person's lookup, not for a hot path."""
        return resolve_run_id(run_id)

    @operation(READ)
    def get(self, run_id: str) -> Op[RunInfo]:
        """A snapshot of the run; RunNotFound if there is no such run."""
        return run_record(run_id)

    @operation(READ)
    def runs(
        self,
        *,
        status: Status | str | None = None,
        graph: str | None = None,
        limit: int = 50,
        tags: Mapping[str, str] | None = None,
    ) -> Op[list[RunInfo]]:
        """Runs newest first, optionally only those in ``status``, of ``graph``, or carrying every
        tag of ``tags`` (read from that tag's index: it costs what it finds)."""
        return self._core.runs(status, graph, limit, tags)

    @operation(READ)
    def runs_page(
        self,
        *,
        status: Status | str | None = None,
        graph: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        tags: Mapping[str, str] | None = None,
        matching: str | None = None,
    ) -> Op[RunPage]:
        """:meth:`runs` one page at a time: pass the page's ``cursor`` to get the next one.
        ``tags`` keeps the runs carrying every one; ``matching`` the runs whose id starts with it
        or whose graph's name holds it."""
        return runs_listing(status, graph, limit, cursor, tags=check_tags(tags), matching=matching)

    @operation(READ)
    def history(self, run_id: str) -> Op[list[RunEvent]]:
        """The run's events, oldest first; RunNotFound if there is no such run."""
        return self._core.history(run_id)

    @operation(READ)
    def branches(self, run_id: str) -> Op[list[BranchLane]]:
        """When each branch step of the run's maps ran, in the order they started: its node,
        branch, attempt and times (the timeline's lanes); RunNotFound if there is no such run."""
        return run_lanes(run_id)

    @operation(READ)
    def events(self, run_id: str, after: str = "0-0", block_ms: int | None = None) -> Op[list[RunEvent]]:
        """Events after stream id ``after``; with ``block_ms``, wait that long (0: forever) for one
        (on ``AsyncClient``, on the event loop, holding no thread)."""
        return run_events(run_id, after, block_ms, None, self.store.max_block_ms)

    @operation(READ)
    def stream_page(self, run_id: str, *, after: int = 0, block_ms: int | None = None) -> Op[StreamPage]:
        """One read of the run's stream: its items after offset ``after`` (at most 500), waiting up to
        ``block_ms`` (0: forever) for one; ``ended`` once the run has ended and nothing is left.
        :meth:`stream` reads page after page; a caller that must do other work between pages (the
        HTTP API's keep-alives) reads them itself."""
        return stream_page(run_id, after, block_ms, self.store.max_block_ms)

    @operation(READ)
    def traceback(self, run_id: str) -> Op[str | None]:
        """The last failed attempt's traceback, if any."""
        return last_traceback(run_id)

    @operation(READ)
    def checkpoint_info(self, run_id: str) -> Op[dict[str, Any] | None]:
        """The latest checkpoint's ``seq``, ``saved_at``, ``size`` and ``next_node``, if any."""
        return latest_checkpoint(run_id)

    @operation(READ)
    def wait(self, run_id: str, timeout: float | None = None, until: WaitUntil = "ended") -> Op[RunInfo]:
        """Block until the run is terminal and return it; WaitTimeout after ``timeout`` seconds.

        With ``until="waiting"``, return as soon as the run is ``waiting`` too (for a person's
        signal, a timer, a child run or a worker of its version), or has ended, whichever comes
        first: what a caller that must answer an approval waits for.

        Sleeps on the run's event stream (XREAD BLOCK), so it wakes as soon as the run
        changes. A run a foreign producer sent with ``send_task`` has no record until a
        worker takes its first delivery: ``wait`` waits for the record to appear too, within
        the same timeout. ``timeout=None`` waits for as long as it takes. ``AsyncClient`` waits on
        the event loop, holding no thread.
        """
        return self._core.wait(run_id, timeout, self.store.max_block_ms, until)

    # -- dead letters -----------------------------------------------------------------------

    @operation(READ)
    def dead_letters(
        self,
        graph: str | None = None,
        reason: str | None = None,
        *,
        limit: int = 1000,
        tags: Mapping[str, str] | None = None,
    ) -> Op[list[RunInfo]]:
        """Dead-lettered runs, most recently dead first, optionally of one graph or reason; with
        ``tags``, the dead runs carrying every one, newest first."""
        return self._core.dead_letters(graph, reason, limit, tags)

    @operation(READ)
    def dead_letters_page(
        self,
        graph: str | None = None,
        reason: str | None = None,
        *,
        limit: int = 100,
        cursor: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> Op[RunPage]:
        """:meth:`dead_letters` one page at a time: pass the page's ``cursor`` to get the next one."""
        return dead_listing(graph, reason, limit, cursor, tags=check_tags(tags))

    @operation(READ)
    def dead_letter(self, run_id: str) -> Op[DeadLetter]:
        """A run (usually a dead one) with what an operator needs to decide: the run, the traceback
        of its last failed attempt, and its latest checkpoint's metadata (where a replay resumes).
        RunNotFound if there is no such run."""
        return dead_letter(run_id)

    @operation(WRITE)
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
    ) -> Op[BulkReplay]:
        """Replay each of ``run_ids`` as :meth:`replay` does, or, without them, every dead run of
        ``graph``, ``reason`` and/or ``tags`` (at most ``BULK_LIMIT`` per call: a replayed run is
        no longer dead, so calling again with the same filter goes on with the rest).

        A run that cannot be replayed (RunNotFound, or OperationRefused for its status) is listed
        in ``refused`` with its error, and the others go on. InvalidInputs when both ``run_ids``
        and a filter are given. ``progress``, when given, is called with each run id once done.
        """
        return self._core.replay_many(run_ids, graph, reason, from_start, progress, tags, by or self.by)

    # -- operator actions -------------------------------------------------------------------

    @operation(WRITE)
    def replay(
        self, run_id: str, *, from_start: bool = False, from_seq: int | None = None, by: str | None = None
    ) -> Op[RunInfo]:
        """Queue a dead or cancelled run again, with a fresh attempt budget; it resumes from its
        checkpoint unless ``from_start``.

        ``from_seq`` resumes it from an earlier checkpoint of its own history instead, to back
        out of a bad step: that checkpoint becomes the latest, and the ones after it are dropped.
        It is refused (StaleCheckpoint) when saved by another version of the graph, and
        CheckpointNotFound names the seqs the run keeps when it keeps no such one.

        OperationRefused for a run in any other status, RunNotFound for an unknown id. ``by`` (the
        client's own when None) is recorded as who replayed it, on its ``run_replayed`` event.
        """
        return self._core.replay(run_id, from_start, from_seq, by or self.by)

    # -- time travel ------------------------------------------------------------------------

    @operation(READ)
    def checkpoints(self, run_id: str) -> Op[list[CheckpointInfo]]:
        """Every checkpoint the run keeps, oldest first, the latest last: ``seq``, ``saved_at``,
        ``next_node``, ``size`` and the ``attempt`` that saved it. No values: see :meth:`checkpoint`.

        A run keeps its latest checkpoint and up to ``REFLEXR_CHECKPOINT_HISTORY`` before it (as
        the workers are configured); RunNotFound if there is no such run.
        """
        return checkpoint_list(run_id)

    @operation(READ)
    def checkpoint(self, run_id: str, seq: int) -> Op[CheckpointDetail]:
        """Checkpoint ``seq`` of the run with its values as JSON: the state, the graph inputs and
        the next task's inputs (the output, for the finished one).

        RunNotFound, or CheckpointNotFound (naming the seqs the run keeps).
        """
        return self._core.checkpoint(run_id, seq)

    @operation(WRITE)
    def fork(
        self,
        run_id: str,
        *,
        from_seq: int,
        state: Any = None,
        patch: Any = None,
        priority: int | None = None,
        idempotency_key: str | None = None,
    ) -> Keyed[str]:
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
        return Keyed(self._core.fork(run_id, change, idempotency_key), idempotency_key)

    @operation(READ)
    def check_fork(
        self, run_id: str, *, from_seq: int, state: Any = None, patch: Any = None
    ) -> Op[CheckpointDetail]:
        """What :meth:`fork` would start from, validated as it validates, without creating
        anything: checkpoint ``from_seq`` with the state the fork would get (its values, as
        :meth:`checkpoint` shows them). Raises what :meth:`fork` raises for the same arguments."""
        return self._core.check_fork(run_id, ForkChange(from_seq, state, patch))

    @operation(WRITE)
    def signal(self, run_id: str, name: str, value: Any, *, by: str | None = None) -> Op[bool]:
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
        return self._core.signal(run_id, name, value, by or self.by)

    @operation(WRITE)
    def resolve_event(self, token: str, payload: Any, *, by: str | None = None) -> Op[bool]:
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
        return self._core.answer_event(token, {"payload": payload}, by or self.by)

    @operation(WRITE)
    def fail_event(self, token: str, reason: str, *, by: str | None = None) -> Op[bool]:
        """End the wait of ``token`` without a payload: the wait raises ``ExternalEventError(reason)``
        (a ``HandleDeferredToolCalls`` handler denies its calls with ``reason``). As :meth:`resolve_event`."""
        return self._core.answer_event(token, {"error": str(reason)}, by or self.by)

    @operation(READ)
    def pending_events(self, graph: str | None = None) -> Op[list[EventWait]]:
        """Every open external event wait: run, graph, agent, since when, and for deferred tool
        calls each call's tool name and validated arguments; oldest first."""
        return self._core.pending_events(graph)

    @operation(READ)
    def event_waits(self, run_id: str) -> Op[list[EventWait]]:
        """The run's waits for external events (the latest of each name), open or answered: who
        answered, when and with what."""
        return waits_of(run_id, open_only=False)

    @operation(WRITE)
    def cancel(self, run_id: str, *, now: bool = False, by: str | None = None) -> Op[RunInfo]:
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
        return cancel_run(run_id, self.store.options.run_retention_s, now, by or self.by)

    @operation(READ)
    def cancellable(
        self,
        *,
        status: Status | str | None = None,
        graph: str | None = None,
        tags: Mapping[str, str] | None = None,
        limit: int = BULK_LIMIT,
        now: bool = False,
    ) -> Op[list[RunInfo]]:
        """Up to ``limit`` queued, running, retrying or waiting runs (of ``status``, one of those,
        when given) of ``graph`` and carrying every tag of ``tags``: what :meth:`cancel_many` with
        the same filter would change (a running run already asked to stop only with ``now``)."""
        wanted = RunFilter.of(status, graph, tags)
        return cancellable_runs(wanted, limit, now)

    @operation(WRITE)
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
    ) -> Op[BulkCancel]:
        """Cancel each of ``run_ids`` as :meth:`cancel` does (``now`` too), or, without them, the
        runs the filter matches (see :meth:`cancellable`; at most ``BULK_LIMIT`` per call: a
        cancelled run no longer matches, so calling again goes on with the rest, and an interrupted
        bulk cancel resumes that way). A run that cannot be cancelled is listed in ``refused`` with
        its error, and the others go on. With no ids and no filter it cancels nothing: pass
        ``all=True`` to cancel every cancellable run (InvalidInputs otherwise, as when both
        ``run_ids`` and a filter are given, or a status a cancel does not take)."""
        chosen = Chosen(run_ids, RunFilter.of(status, graph, tags), all)
        return cancel_many(chosen, self.store.options.run_retention_s, now, progress, by or self.by)

    @operation(WRITE)
    def purge(self, run_id: str, *, by: str | None = None) -> Op[bool]:
        """Delete a finished run (succeeded, dead or cancelled) for good; False if there was no such
        run. OperationRefused for a run that has not finished: cancel it first. Its events go with
        it, so ``by`` (the client's own when None) is logged as who purged it."""
        return purge_run(run_id, by or self.by)

    @operation(READ)
    def purgeable(
        self,
        *,
        status: Status | str | None = None,
        graph: str | None = None,
        tags: Mapping[str, str] | None = None,
        limit: int = BULK_LIMIT,
    ) -> Op[list[RunInfo]]:
        """Up to ``limit`` finished runs (of ``status``, one of succeeded, dead and cancelled, when
        given) of ``graph`` and carrying every tag of ``tags``: what :meth:`purge_many` with the
        same filter would delete."""
        wanted = RunFilter.of(status, graph, tags)
        return purgeable_runs(wanted, limit)

    @operation(WRITE)
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
    ) -> Op[BulkPurge]:
        """Delete each of ``run_ids`` for good as :meth:`purge` does, or, without them, the finished
        runs the filter matches (see :meth:`purgeable`; at most ``BULK_LIMIT`` per call: a purged
        run is gone, so calling again goes on with the rest, and an interrupted bulk purge resumes
        that way). A run not finished, or not there, is listed in ``refused`` with its error, and
        the others go on. With no ids and no filter it deletes nothing: pass ``all=True`` to
        delete every finished run (InvalidInputs otherwise, as when both ``run_ids`` and a filter
        are given, or a status that is not a finished one)."""
        return purge_many(Chosen(run_ids, RunFilter.of(status, graph, tags), all), progress, by or self.by)

    # -- schedules --------------------------------------------------------------------------

    @operation(WRITE)
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
    ) -> Op[ScheduleInfo]:
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
        return add_schedule(
            self._core, name, graph, cron=cron, every=every, inputs=inputs, overlap=overlap, catchup=catchup
        )

    @operation(READ)
    def schedules(self) -> Op[list[ScheduleInfo]]:
        """Every schedule, by name, with its next fire time (None while paused) and its last fire and run."""
        return list_schedules()

    @operation(READ)
    def schedule(self, name: str) -> Op[ScheduleInfo]:
        """Schedule ``name``; ScheduleNotFound when there is none."""
        return schedule_info(name)

    @operation(READ)
    def pause_schedule(self, name: str) -> Op[ScheduleInfo]:
        """Stop schedule ``name`` firing until :meth:`resume_schedule`."""
        return set_paused(name, True)

    @operation(READ)
    def resume_schedule(self, name: str) -> Op[ScheduleInfo]:
        """Resume schedule ``name`` from its next fire time after now (the fires of the pause are not
        caught up)."""
        return set_paused(name, False)

    @operation(WRITE)
    def delete_schedule(self, name: str) -> Op[None]:
        """Delete schedule ``name``; the runs it made stay. ScheduleNotFound when there is none."""
        return delete_schedule(name)

    @operation(WRITE)
    def trigger_schedule(self, name: str) -> Op[str]:
        """Fire schedule ``name`` now, paused or not; returns the run's id (the same run as its
        clock's fire in the same second, if there is one)."""
        return trigger(self._core, name)

    # -- the fleet's shared state -----------------------------------------------------------

    @operation(READ)
    def limits(self) -> Op[list[LimitUsage]]:
        """Every limit key the fleet has used (``GraphAction(limits={...})``), by key: its rate,
        burst and concurrency, the slots in use now, and how often it granted, refused and made a
        step wait (``reflexr-graph limits``)."""
        return limit_usage()

    @operation(READ)
    def quarantined(self, limit: int = 50) -> Op[Quarantined]:
        """The queue items workers could not run and moved aside (not runs: garbage, unknown
        tasks...): the newest ``limit`` entries, newest first, the list's length and the count per
        reason since the last purge, read at one moment (``reflexr-graph dlq messages``)."""
        return quarantined(limit)

    @operation(WRITE)
    def purge_quarantine(self, *, by: str | None = None) -> Op[int]:
        """Delete every quarantined queue item and the counts; returns how many entries there were.
        Recorded in the audit trail as by ``by`` (this client's name when not given)."""
        return purge_quarantine(by or self.by)

    @operation(READ)
    def audit(self, limit: int = 100) -> Op[list[AuditEntry]]:
        """The newest ``limit`` destructive actions (purges, cancels, quarantine purges), newest
        first: what, on which run, by whom, when; kept after the runs are gone (store/audit.py)."""
        return audit_entries(limit)


def _run_id(enqueue: Op[Enqueued]) -> Op[str]:
    """The id of the run ``enqueue`` names."""
    return (yield from enqueue).run_id
