"""What a client does, written once as operations (``store/ops.py``) for ``Client`` and ``AsyncClient``.

Both clients run these with their own executor: ``Client`` on redis-py, ``AsyncClient`` on
``redis.asyncio``. The logic of enqueueing (schema cache, validation, the idempotent create,
the message), of waiting, and of replaying is here and nowhere else.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Self

from celery import Celery

from reflexr_graph import clock, errors, schemas, telemetry, time_travel
from reflexr_graph.client.failover import FailoverPolicy
from reflexr_graph.client.payload import plain, to_json
from reflexr_graph.config.dispatch import check_priority
from reflexr_graph.config.settings import Settings, load_settings
from reflexr_graph.config.store import store_options
from reflexr_graph.core.action import GraphAction
from reflexr_graph.core.tags import check_tags
from reflexr_graph.core.tracing import current_trace_context
from reflexr_graph.graph_registry import build_registry
from reflexr_graph.model import (
    CHILD_WAIT_PREFIX,
    CHILDREN_WAIT_PREFIX,
    LIMIT_WAIT_PREFIX,
    TERMINAL,
    VERSION_WAIT_PREFIX,
    CheckpointDetail,
    EventWait,
    RunEvent,
    RunInfo,
    SignalOutcome,
    Status,
    UpgradePlan,
    waits_on,
)
from reflexr_graph.schemas import GraphSchema
from reflexr_graph.store import asks, cluster, keys, sentinel
from reflexr_graph.store.attempts import NewRun, new_run
from reflexr_graph.store.history import saved_checkpoint
from reflexr_graph.store.interventions import replay_children, replay_run
from reflexr_graph.store.ops import Envelope, Op, Publish
from reflexr_graph.store.reads import dead_listing, run_events, run_record, runs_listing
from reflexr_graph.store.records import ForkSeed, SavedCheckpoint
from reflexr_graph.store.settings import StoreOptions
from reflexr_graph.store.upgrades import upgrade, upgrade_plan
from reflexr_graph.store.waits import SignalTarget, send_signal, signal_target

log = logging.getLogger("reflexr_graph.client")

SCHEMA_CACHE_S = 2.0
"""How long a client trusts a published schema before reading it again (a redeploy shows within this)."""
DISPATCH_GRACE_MS = 30_000
"""If a producer dies between creating a run and sending its message, the reaper sends it after this
(a client's is its settings' ``dispatch_grace_s``; schedules' fires use this)."""

"""The message of (run id, graph, priority) for ``create_run.lua`` to push with the record."""


PENDING_LIMIT = 1000
"""The most waiting runs one inbox listing reads."""

BULK_LIMIT = 1000
"""The most dead runs one bulk replay by filter touches; narrow the filter, or call again, for more."""


@dataclass(frozen=True)
class Refused:
    """A run a bulk replay did not replay, and why: RunNotFound, or OperationRefused (its status)."""

    run_id: str
    error: errors.RunNotFound | errors.OperationRefused


def one_by_one(
    run_ids: Sequence[str], act: Callable[[str], Op[object]], progress: Callable[[str], None] | None
) -> Op[tuple[list[str], list[Refused]]]:
    """``act`` on each run in turn: those it did, and those it refused with why (the others go on);
    ``progress`` is told each run id once it is done."""
    done: list[str] = []
    refused: list[Refused] = []
    for run_id in run_ids:
        try:
            yield from act(run_id)
        except (errors.RunNotFound, errors.OperationRefused) as exc:
            refused.append(Refused(run_id, exc))
        else:
            done.append(run_id)
        if progress is not None:
            progress(run_id)
    return done, refused


@dataclass(frozen=True)
class BulkReplay:
    """What a bulk replay did: the runs queued again, and those it could not replay."""

    replayed: list[str]
    refused: list[Refused]


@dataclass(frozen=True)
class ForkChange:
    """What a fork asks for besides its source: the checkpoint, a new state or a patch of the
    checkpoint's (not both), and a priority (None: the source's)."""

    from_seq: int
    state: Any = None
    patch: Any = None
    priority: int | None = None


@dataclass(frozen=True)
class Enqueued:
    """What enqueueing did: the run's id, and whether it was created now (False: the idempotency
    key already named it)."""

    run_id: str
    created: bool


class ClientBase:
    """How both clients are built: from settings, or a URL with settings from the environment."""

    def __init__(self, settings: Settings, by: str = "client") -> None:
        self.settings = settings
        self.by = by
        """Who this client acts as: recorded as ``by`` on the signals, cancels and replays it sends
        (and logged for its purges), unless a call names its own ``by``."""
        self._core = ClientCore(settings)
        url = settings.redis_url
        self._failover = FailoverPolicy(
            settings.client_retry_s, fails_over=cluster.is_cluster_url(url) or sentinel.is_sentinel_url(url)
        )
        # Producer side of tracing: the enqueuer's trace is recorded with the run and carried in
        # the message. With no OTEL_* configuration and no provider, nothing is installed.
        telemetry.setup_process()

    @classmethod
    def from_url(cls, redis_url: str, **overrides: Any) -> Self:
        """A client on ``redis_url``; other settings come from ``REFLEXR_*`` or ``overrides``."""
        return cls(load_settings(strict=False, redis_url=redis_url, **overrides))

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> Self:
        """A client configured from ``REFLEXR_*`` environment variables (or the given settings)."""
        return cls(settings or load_settings(strict=False))

    @property
    def app(self) -> Celery:
        """The producer Celery app the messages are built with (each client has its own)."""
        raise NotImplementedError

    @property
    def store_options(self) -> StoreOptions:
        """What the client's store is built with besides the URL."""
        return store_options(self.settings)


class ClientCore:
    """The state a client keeps between calls (published schemas, news to tell) and its operations."""

    def __init__(self, settings: Settings, by: str = "client") -> None:
        self.settings = settings
        self.by = by
        """Who this client acts as: recorded as ``by`` on the signals, cancels and replays it sends
        (and logged for its purges), unless a call names its own ``by``."""
        self._schemas: dict[str, tuple[float, schemas.GraphSchema, list[str]]] = {}
        self._unserved_news: set[str] = set()

    @property
    def _grace_s(self) -> float:
        return self.settings.dispatch_grace_s

    def published(self, name: str) -> Op[tuple[schemas.GraphSchema, list[str]]]:
        """The published entry of ``name`` and its live workers, read at most every SCHEMA_CACHE_S:
        enqueue is a hot path."""
        now = time.monotonic()
        cached = self._schemas.get(name)
        if cached is not None and cached[0] > now:
            return cached[1], cached[2]
        entry, workers = yield from schemas.published_with_workers(name)
        self._schemas[name] = (now + SCHEMA_CACHE_S, entry, workers)
        if not workers:
            # Said once the run is queued, and at most every SCHEMA_CACHE_S: a producer that
            # enqueues thousands of runs while the workers are down gets the news, not a line each.
            self._unserved_news.add(name)
        return entry, workers

    def enqueue(
        self,
        graph: str,
        inputs: Any,
        state: Any,
        idempotency_key: str | None,
        priority: int | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> Op[Enqueued]:
        """Validate and queue a run; ``(run_id, created)``, created False when the key named a run.

        ``priority`` (config/dispatch.py: PRIORITIES) is kept on the run, so every message sent for
        it later (retries, wakes, recovery, replay) has it too. ``tags`` (core/tags.py) are
        written and indexed by the create script itself. When the broker is the store's Redis,
        that script also pushes the run's message: one round trip in all.
        """
        priority = check_priority(priority)
        checked_tags = check_tags(tags)
        entry, _workers = yield from self.published(graph)
        inputs, state = plain(inputs, "inputs"), None if state is None else plain(state, "state")
        schemas.validate(entry, inputs, state)
        limit = self.settings.payload_limit
        run_id = keys.new_run_id(graph, idempotency_key)
        run = NewRun(
            run_id=run_id,
            graph=graph,
            inputs_json=to_json(inputs, "inputs", limit),
            state_json=None if state is None else to_json(state, "state", limit),
            idempotency_key=idempotency_key,
            # The graph's published budget (schemas.run_max_attempts), not this producer's setting.
            max_attempts=entry.max_attempts,
            dispatch_grace_ms=self.settings.dispatch_grace_ms,
            # Every attempt of the run joins the caller's trace, however it is re-sent.
            trace_context=current_trace_context(),
            tags=checked_tags,
            priority=priority,
            message=(yield Envelope(run_id, graph, priority)),
        )
        run_id, created = yield from new_run(run)
        if created and run.message is None:
            advice = "enqueue again with the same idempotency key to get the same run"
            yield from _publish(run_id, graph, f"run {run_id} is recorded", advice, priority, self._grace_s)
        self._tell_unserved(graph, run_id)
        return Enqueued(run_id, created)

    def signal(self, run_id: str, name: str, value: Any, by: str = "") -> Op[bool]:
        """Validate and send a signal; True when it woke the run (its message is sent), False when
        the value waits in the run's mailbox for the wait to come.

        Two round trips with the graph's schema cached (four fields of the run, then signal.lua,
        which pushes the message of the wake itself when the broker is the store's Redis).
        """
        target = yield from signal_target(run_id)
        if target.status in TERMINAL:
            raise errors.OperationRefused(
                f"run {run_id} is {target.status.value}; only a run that has not finished takes signals",
                status=target.status.value,
            )
        entry, _workers = yield from self.published(target.graph)
        value = plain(value, "value")
        schemas.validate_signal(entry, name, value)
        value_json = to_json(value, "value", self.settings.payload_limit)
        return (yield from self._deliver(target, run_id, name, value_json, by, ("signal", "send it")))

    def _deliver(
        self, target: SignalTarget, run_id: str, name: str, value_json: str, by: str, said: tuple[str, str]
    ) -> Op[bool]:
        """Put ``value_json`` in the run's mailbox as signal ``name`` and send the wake it makes:
        True when it woke the run, False when the value waits for the run's wait. ``said`` names
        what was delivered and the act not to repeat, for the error of a failed send."""
        # The message is built only for the wake this signal will likely make; a run that begins
        # to wait for it meanwhile is queued by the script all the same, and sent below.
        message = None
        if target.status is Status.WAITING and target.waiting_for == name:
            message = yield Envelope(run_id, target.graph, target.priority or None)
        outcome, graph = yield from send_signal(
            run_id, name, value_json, self.settings.dispatch_grace_ms, message, by
        )
        if outcome is SignalOutcome.KEPT:
            return False
        if outcome is SignalOutcome.QUEUED:
            what, act = said
            recorded = f"the {what} is recorded and run {run_id} queued"
            yield from _publish(
                run_id, graph, recorded, f"do not {act} again", target.priority, self._grace_s
            )
        return True

    def answer_event(self, token: str, answer: dict[str, Any], by: str) -> Op[bool]:
        """Give an external event's wait its one answer (``{"payload": ...}`` or ``{"error": ...}``)
        and wake its run; True when it woke the run, False when the answer waits for the run to
        get to its wait (it is between handing the token out and suspending).

        EventTokenInvalid, EventNotFound, EventAnswered (a second answer, or its timeout passed),
        OperationRefused for a finished run. No error names the payload.
        """
        run_id, digest = asks.parse_token(token)
        wait = yield from asks.read_wait(run_id, digest)
        if wait is None:
            raise errors.EventNotFound(run_id)
        if wait.answer is not None:
            raise asks.refusal(wait)
        target = yield from signal_target(run_id)
        if target.status in TERMINAL:
            raise errors.OperationRefused(
                f"run {run_id} is {target.status.value}; only a run that has not finished takes answers",
                status=target.status.value,
            )
        stamped = {**answer, "by": by, "at": clock.now_ms()}
        answer_json = to_json(plain(stamped, "payload"), "payload", self.settings.payload_limit)
        won, _held = yield from asks.settle(run_id, digest, answer_json)
        if not won:
            settled = yield from asks.read_wait(run_id, digest)
            raise asks.refusal(settled or wait)
        # The answer carries who gave it (stamped above); the signal itself names no one.
        signal = asks.signal_of(wait.name)
        return (yield from self._deliver(target, run_id, signal, answer_json, "", ("answer", "answer")))

    def pending_events(self, graph: str | None) -> Op[list[EventWait]]:
        """Every open external event wait of the waiting runs (of ``graph``), oldest first."""
        page = yield from runs_listing(Status.WAITING, graph, PENDING_LIMIT)
        found: list[EventWait] = []
        for run in page.runs:
            if (run.waiting_for or "").startswith(asks.SIGNAL_PREFIX):
                found.extend((yield from asks.waits_of(run.run_id, open_only=True)))
        return sorted(found, key=lambda w: w.since_ms)

    def _tell_unserved(self, graph: str, run_id: str) -> None:
        if graph in self._unserved_news:
            self._unserved_news.discard(graph)
            log.warning(
                "run %s queued, but no live worker serves graph %r right now: its runs wait up to %gs "
                "(REFLEXR_UNKNOWN_GRAPH_GRACE_S) for one, then are dead-lettered as unknown_graph",
                run_id,
                graph,
                self.settings.unknown_graph_grace_s,
            )

    def publish(self, actions: Iterable[GraphAction]) -> Op[list[str]]:
        """Publish the graphs' entries, each with this process's REFLEXR_MAX_ATTEMPTS as the budget
        of a graph whose action sets none; the names whose entry changed."""
        entries = [schemas.GraphSchema.from_action(a, self.settings.max_attempts) for a in actions]
        written = yield from schemas.published_entries(entries)
        # What this client read before is stale now.
        for name in written:
            self._schemas.pop(name, None)
        return written

    def upgrade(
        self,
        graph: str,
        from_version: str,
        *,
        resume_compatible: bool,
        include_running: bool,
        code: GraphAction | None,
        dry_run: bool = False,
    ) -> Op[UpgradePlan]:
        """Plan (``dry_run``) or make an upgrade; with ``resume_compatible``, judged by ``code``, else
        by the graph as this process's REFLEXR_GRAPHS defines it (the new version's workers' code)."""
        action = self._new_code(graph, code) if resume_compatible else None
        step = upgrade_plan if dry_run else upgrade
        return (yield from step(graph, from_version, code=action, include_running=include_running))

    def _new_code(self, graph: str, code: GraphAction | None) -> GraphAction:
        if code is not None:
            return code
        found = build_registry(self.settings.graphs).get(graph)
        if found is None:
            raise errors.OperationRefused(
                f"--resume-compatible judges each checkpoint with the new version's code, and "
                f"REFLEXR_GRAPHS names no graph {graph!r} here: set it as the new version's workers have it"
            )
        return found

    def runs(
        self,
        status: Status | str | None,
        graph: str | None,
        limit: int,
        tags: Mapping[str, str] | None = None,
    ) -> Op[list[RunInfo]]:
        """Runs newest first, read on until ``limit`` are found or the index ends."""
        return (yield from runs_listing(status, graph, limit, scan=None, tags=check_tags(tags))).runs

    def dead_letters(
        self, graph: str | None, reason: str | None, limit: int, tags: Mapping[str, str] | None = None
    ) -> Op[list[RunInfo]]:
        """Dead runs, most recently dead first, read on until ``limit`` are found or the index ends."""
        return (yield from dead_listing(graph, reason, limit, scan=None, tags=check_tags(tags))).runs

    def checkpoint(self, run_id: str, seq: int) -> Op[CheckpointDetail]:
        """Checkpoint ``seq`` of the run with its values, as JSON."""
        return time_travel.detail(run_id, (yield from saved_checkpoint(run_id, seq)))

    def history(self, run_id: str) -> Op[list[RunEvent]]:
        """The run's events, oldest first; RunNotFound if there is no such run."""
        yield from run_record(run_id)
        return (yield from run_events(run_id, "0-0", None, None, None))

    def replay(self, run_id: str, from_start: bool, from_seq: int | None = None, by: str = "") -> Op[RunInfo]:
        """Queue a dead or cancelled run again and send its message; with ``from_seq``, from that
        checkpoint of its history, if the graph as published now would resume it."""
        if from_seq is not None:
            if from_start:
                raise errors.InvalidInputs(
                    "replay from the start or from a checkpoint, not both",
                    [{"loc": ["from_seq"], "msg": "cannot be given with from_start", "type": "conflict"}],
                )
            saved = yield from saved_checkpoint(run_id, from_seq)
            entry, _workers = yield from self.published(saved.graph)
            time_travel.check_current(run_id, saved, entry)
        # A parent's failed children go again first; its succeeded ones are reused as they are.
        for child in (yield from replay_children(run_id)):
            yield Publish(child.run_id, child.graph, child.priority)
        info = yield from replay_run(run_id, from_start, from_seq, by)
        yield Publish(run_id, info.graph, info.priority)
        return info

    def replay_many(
        self,
        run_ids: Sequence[str] | None,
        graph: str | None,
        reason: str | None,
        from_start: bool,
        progress: Callable[[str], None] | None = None,
        tags: Mapping[str, str] | None = None,
        by: str = "",
    ) -> Op[BulkReplay]:
        """Replay each run of ``run_ids``, or, without them, every dead run of ``graph``, ``reason``
        and/or ``tags`` (at most BULK_LIMIT: a replayed run is no longer dead, so calling again goes
        on with the rest); a run that cannot be replayed is listed with why, and the others go on.
        ``progress`` is told each run id once it is done."""
        if run_ids is not None and (graph or reason or tags):
            raise errors.InvalidInputs(
                "give run ids or a filter (graph, reason), not both",
                [{"loc": ["run_ids"], "msg": "cannot be combined with graph or reason", "type": "exclusive"}],
            )
        if run_ids is None:
            found = yield from dead_listing(graph, reason, BULK_LIMIT, scan=None, tags=check_tags(tags))
            run_ids = [info.run_id for info in found.runs]
        done = yield from one_by_one(run_ids, lambda run_id: self.replay(run_id, from_start, by=by), progress)
        return BulkReplay(*done)

    def fork_seed(self, run_id: str, change: ForkChange) -> Op[tuple[SavedCheckpoint, GraphSchema, ForkSeed]]:
        """What a fork of checkpoint ``change.from_seq`` starts from, validated (time_travel.seed):
        everything a fork refuses is refused here, before anything is written."""
        saved = yield from saved_checkpoint(run_id, change.from_seq)
        entry, _workers = yield from self.published(saved.graph)
        limit = self.settings.payload_limit
        edited = None if change.state is None else plain(change.state, "state")
        patch = None if change.patch is None else plain(change.patch, "patch")
        for value, part in ((edited, "state"), (patch, "patch")):
            if value is not None:
                to_json(value, part, limit)
        return saved, entry, time_travel.seed(run_id, saved, entry, edited, patch)

    def check_fork(self, run_id: str, change: ForkChange) -> Op[CheckpointDetail]:
        """The checkpoint a fork would start from, with the state it would get; nothing is written."""
        saved, _entry, seed = yield from self.fork_seed(run_id, change)
        return time_travel.detail(run_id, dataclasses.replace(saved, payload=seed.checkpoint))

    def fork(self, run_id: str, change: ForkChange, idempotency_key: str | None) -> Op[str]:
        """A new run of the source's graph that resumes from its checkpoint ``change.from_seq``,
        its state replaced or patched as ``change`` says, with the source's priority unless it
        gives one; the message is sent unless the checkpoint is the finished one (the fork is
        created succeeded)."""
        priority = check_priority(change.priority)
        saved, entry, seed = yield from self.fork_seed(run_id, change)
        if priority is None:
            priority = (yield from run_record(run_id)).priority
        new_id = keys.new_run_id(saved.graph, idempotency_key)
        finished = seed.output_json is not None
        # A fork of the finished checkpoint is created succeeded: no message, no attempt.
        message = None if finished else (yield Envelope(new_id, saved.graph, priority or None))
        run = NewRun(
            run_id=new_id,
            graph=saved.graph,
            inputs_json=saved.inputs_json,
            state_json=saved.state_json,
            idempotency_key=idempotency_key,
            max_attempts=entry.max_attempts,
            dispatch_grace_ms=self.settings.dispatch_grace_ms,
            trace_context=current_trace_context(),
            fork=seed,
            retention_s=self.settings.run_retention_s,
            priority=priority or None,
            message=message,
        )
        new_id, created = yield from new_run(run)
        if not finished:
            if created and run.message is None:
                advice = "fork again with the same idempotency key to get the same fork"
                yield from _publish(
                    new_id, saved.graph, f"fork {new_id} is recorded", advice, priority, self._grace_s
                )
            self._tell_unserved(saved.graph, new_id)
        return new_id

    def wait(
        self, run_id: str, timeout: float | None, chunk_limit: int | None, until: WaitUntil = "ended"
    ) -> Op[RunInfo]:
        """Until the run is terminal (``until="ended"``), or also waiting for a signal, a timer, a
        child or a version (``until="waiting"``), sleeping on its event stream (XREAD BLOCK), which
        a status change wakes; WaitTimeout after ``timeout`` seconds. A run not recorded yet (a
        foreign producer's) is waited for too."""
        done = _until_statuses(until)
        deadline = None if timeout is None else time.monotonic() + timeout
        last = "0-0"
        while True:
            try:
                info: RunInfo | None = yield from run_record(run_id)
            except errors.RunNotFound:
                info = None
            if info is not None and info.status in done:
                return info
            block_ms = 0
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise errors.WaitTimeout(_wait_timeout(run_id, info, timeout))
                block_ms = max(1, int(remaining * 1000))
            # XREAD BLOCK on a stream that does not exist yet wakes when its first event is added.
            found = yield from run_events(run_id, last, block_ms, None, chunk_limit)
            if found:
                last = found[-1].id


WaitUntil = Literal["ended", "waiting"]
"""What :meth:`Client.wait` waits for: the run's end, or also its first wait (for a person's
signal, a timer, a child run or a worker of its version), whichever comes first."""
_UNTIL: dict[str, frozenset[Status]] = {"ended": TERMINAL, "waiting": TERMINAL | {Status.WAITING}}


def _until_statuses(until: str) -> frozenset[Status]:
    try:
        return _UNTIL[until]
    except KeyError:
        raise errors.InvalidInputs(
            f"until must be 'ended' or 'waiting', not {until!r}",
            [{"loc": ["until"], "msg": "must be 'ended' or 'waiting'", "type": "until"}],
        ) from None


def _publish(
    run_id: str, graph: str, recorded: str, advice: str, priority: int | None, grace_s: float
) -> Op[None]:
    """Send the run's message; the run is recorded and due, so a failed send is reported as such."""
    try:
        yield Publish(run_id, graph, priority)
    except errors.StoreUnavailable as exc:
        # Whoever retries must know the run goes ahead anyway: the reaper sends the due run.
        raise type(exc)(
            f"{exc}; {recorded}, and a worker sends it within {grace_s:g}s once Redis answers ({advice})",
            endpoint=exc.endpoint,
            kind=exc.kind,
        ) from exc


def _wait_timeout(run_id: str, info: RunInfo | None, timeout: float | None) -> str:
    if info is None:
        return (
            f"no run {run_id} appeared within {timeout:g}s: a run sent with send_task is recorded when a "
            "worker takes its first delivery; check the id, and that a worker consumes the queue it was "
            "sent to"
        )
    if info.status is Status.WAITING:
        return f"run {run_id} is still waiting after {timeout:g}s: {_waiting_for(info)}, holding no worker"
    return f"run {run_id} is still {info.status.value} after {timeout:g}s; wait longer or check its workers"


def _waiting_for(info: RunInfo) -> str:
    """What a waiting run waits for, and what ends the wait: nothing a worker does."""
    wake = ""
    if info.wake_at is not None:
        wake = f" at {datetime.fromtimestamp(info.wake_at, UTC):%Y-%m-%d %H:%M:%S} UTC"
    if (key := waits_on(info.waiting_for, LIMIT_WAIT_PREFIX)) is not None:
        return f"it waits for limit {key!r} and wakes by itself{wake or ' when the limit allows'}"
    if (version := waits_on(info.waiting_for, VERSION_WAIT_PREFIX)) is not None:
        return f"it waits for a live worker of graph version {version!r}, which takes it back when it starts"
    if info.waiting_for and info.waiting_for.startswith((CHILD_WAIT_PREFIX, CHILDREN_WAIT_PREFIX)):
        return f"it waits for its child runs ({info.waiting_for}), and goes on once they ended"
    if info.waiting_for:
        timeout = f", or its wait times out{wake}" if wake else ""
        return f"it waits for signal {info.waiting_for!r}, and goes on once the signal is sent{timeout}"
    return f"it sleeps on a durable timer and wakes by itself{wake}"
