"""Run records as users see them: statuses, status sets, events and reason codes, and the other
values the clients return (events, pages, dead letters, limits, quarantine, schedules, workers,
versions and upgrades, activity, audit entries, event waits, stream pages, signal outcomes)."""

from __future__ import annotations

import base64
import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from reflexr_graph import clock
from reflexr_graph.core.schedules import Schedule


class Status(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    CANCELLED = "cancelled"
    WAITING = "waiting"
    """Suspended until a signal arrives or a timer fires; it holds no worker and no message."""


TERMINAL: frozenset[Status] = frozenset({Status.SUCCEEDED, Status.DEAD, Status.CANCELLED})
"""A run in one of these never runs again unless an operator replays it."""
ACTIVE: frozenset[Status] = frozenset({Status.QUEUED, Status.RUNNING, Status.RETRYING})
"""A run in one of these will reach a terminal status on its own (G1)."""
REPLAYABLE: frozenset[Status] = frozenset({Status.DEAD, Status.CANCELLED})
"""An operator may replay a run only from one of these."""
WAITING: frozenset[Status] = frozenset({Status.WAITING})
"""A run in one of these waits for a signal or a timer (G8); without a timeout it waits until signalled."""
CANCELLABLE: frozenset[Status] = ACTIVE | WAITING


class Event(StrEnum):
    RUN_ENQUEUED = "run_enqueued"
    ATTEMPT_STARTED = "attempt_started"
    RUN_PROGRESSED = "run_progressed"
    ATTEMPT_FAILED = "attempt_failed"
    RUN_RETRYING = "run_retrying"
    RUN_SUCCEEDED = "run_succeeded"
    RUN_DEAD_LETTERED = "run_dead_lettered"
    RUN_REPLAYED = "run_replayed"
    RUN_CANCELLED = "run_cancelled"
    CANCEL_REQUESTED = "cancel_requested"
    BOUNDARIES_SKIPPED = "boundaries_skipped"
    WORK_REUSED = "work_reused"
    WAITING_FOR_WORKER = "waiting_for_worker"
    WAITING_FOR_VERSION = "waiting_for_version"
    RUN_WOKEN = "run_woken"
    RUN_UPGRADED = "run_upgraded"
    """A run moved to another version of its graph: ``from_version``, ``version``, ``how``
    (``resumed`` or ``restarted``) and ``by`` (``auto_upgrade``, or the operator's command)."""
    UPGRADE_HELD = "upgrade_held"
    """An auto-upgrade left a run where it is: the new version cannot read its checkpoint (``reason``)."""
    RUN_WAITING = "run_waiting"
    SIGNAL_RECEIVED = "signal_received"
    LIMIT_WAITED = "limit_waited"
    RUN_FORKED = "run_forked"
    CALL_RETRIED = "call_retried"
    """A durable call failed and is tried again inside its step (``CallRetry``)."""


class Reason(StrEnum):
    """Stable reason codes for failed attempts and dead letters."""

    STEP_FAILED = "step_failed"
    ABANDONED = "abandoned"
    MAX_ATTEMPTS = "max_attempts"
    SHUTDOWN = "shutdown"
    """A worker stopped mid-attempt (a deploy): an interruption, not a failed attempt."""
    MAX_INTERRUPTIONS = "max_interruptions"
    INVALID_INPUTS = "invalid_inputs"
    UNKNOWN_GRAPH = "unknown_graph"
    BAD_MESSAGE = "bad_message"
    OUTPUT_NOT_SERIALIZABLE = "output_not_serializable"
    STORE_UNAVAILABLE = "store_unavailable"
    """Redis was unreachable mid-attempt: an interruption, not a failed attempt."""
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"
    CANCELLED = "cancelled"
    STEP_TIMEOUT = "step_timeout"
    ATTEMPT_TIMEOUT = "attempt_timeout"
    NON_RETRYABLE = "non_retryable"
    PAYLOAD_UNREADABLE = "payload_unreadable"
    """A stored payload is under a key the worker lacks, or missing or corrupt in the payload store."""


LIMIT_WAIT_PREFIX = "limit:"
"""``waiting_for`` of a run released to wait for a limit: ``limit:<key>`` (signal names hold no ':')."""
VERSION_WAIT_PREFIX = "version:"
"""``waiting_for`` of a run held for a worker of its graph version: ``version:<v>`` (G9)."""
CHILD_WAIT_PREFIX = "child:"
"""``waiting_for`` of a run whose step waits for one child run: ``child:<run id>``."""
CHILDREN_WAIT_PREFIX = "children:"
"""``waiting_for`` of a run whose step waits for several child runs: ``children:<how many>``."""


def waits_on(waiting_for: str | None, prefix: str) -> str | None:
    """What a run's ``waiting_for`` names after ``prefix`` (one of the ``*_WAIT_PREFIX``: the limit's
    key, the version, the child run's id, how many children) when it waits on that; else None."""
    if waiting_for and waiting_for.startswith(prefix):
        return waiting_for.removeprefix(prefix)
    return None


class LastFailure(BaseModel):
    """The latest failed attempt of a run: its ``attempt`` number (as history numbers it), when it
    failed (``time``, epoch seconds), its ``reason`` code and its ``error`` (``Type: message``;
    None for an attempt that left none, such as one whose worker died: reason ``abandoned``)."""

    model_config = ConfigDict(frozen=True)

    attempt: int
    time: float
    reason: str
    error: str | None = None


class RunInfo(BaseModel):
    """A snapshot of one run, as ``Client.get`` and ``reflexr-graph status`` show it.

    ``attempt`` is the number of the latest attempt, as the run's history numbers it
    (``attempt=3``): every attempt since the last replay, 0 before the first. Of those,
    ``attempts`` count toward ``max_attempts``; ``interruptions`` were cut short by the fleet
    (a worker's soft shutdown, Redis unreachable) and ``suspensions`` ended with the run
    waiting for a signal, a timer or a limit, and neither counts. The CLI and the console show
    them the same way: ``attempt 3 (1/3 counted)``.

    ``skipped_boundaries`` counts step boundaries that could not be checkpointed (a value that
    does not read back through its type, an input type reflexr cannot know): a retry resumes
    from the boundary before them. ``reused_steps`` and ``reused_calls`` count the branch steps
    and durable calls a retry answered from their records instead of running them again. A
    fork (``Client.fork``) names the run it was forked from and the seq of that run's
    checkpoint it started from, ``forked_from`` and ``forked_at_seq``; both are None for any other run.

    A ``waiting`` run waits for the signal ``waiting_for`` (None for a durable sleep) until
    ``wake_at`` (epoch seconds; None without a timeout). ``waiting_for`` is
    ``limit:<key>`` for a run released to wait for a limit's rate token or slot, and
    ``version:<v>`` for a run whose graph version no live worker serves (a worker of it wakes it).

    ``version`` is the graph version the run started on (``GraphAction.version``: its label, else
    its fingerprint); it runs only on workers of that version. None before its first attempt.
    ``upgrade_to`` is the version ``upgrade --include-running`` moves a live run to when its
    attempt ends (None when no upgrade marked it; the mark goes if the run ends where it is), and
    ``upgrade_resumes`` whether it then resumes from its checkpoint where the new graph reads it
    (``--resume-compatible``) or starts over from its first step.

    ``limit_waits`` counts the steps that waited for a limit before they ran, in place or
    released as ``waiting`` (a released wait counts once, from the step's first refusal through
    every release to its grant), and ``limit_wait_s`` how long they waited in all (its history
    has a ``limit_waited`` event each).

    ``error`` and ``reason`` describe the run as it is now: set when it ended ``dead`` or
    ``cancelled`` (a dead run keeps its last error) or is ``retrying`` (why, and the error of the
    attempt that just failed), None while it is queued, running, waiting or succeeded. The latest
    failed attempt, whatever the run does since, is ``last_failure`` (None when no attempt failed
    since the run started or was last replayed; a succeeded run drops it, its history keeps it).

    ``cancel_requested`` is True for a ``running`` run that was cancelled without ``now``: its
    step in flight finishes, and the run ends ``cancelled`` at the next boundary.
    """

    model_config = ConfigDict(frozen=True)

    run_id: str
    graph: str
    status: Status
    attempt: int = Field(
        0, description="The latest attempt's number, as history numbers it; 0 before the first"
    )
    attempts: int = Field(description="Attempts that count toward max_attempts (of `attempt`)")
    max_attempts: int
    output: Any = None
    error: str | None = None
    reason: str | None = None
    last_failure: LastFailure | None = None
    next_node: str | None = None
    checkpoints: int = 0
    created_at: float
    updated_at: float
    interruptions: int = Field(0, description="Attempts cut short by the fleet, not counted")
    suspensions: int = Field(0, description="Attempts that ended waiting (signal, timer, limit), not counted")
    skipped_boundaries: int = 0
    replays: int = 0
    reused_steps: int = 0
    reused_calls: int = 0
    waiting_for: str | None = None
    wake_at: float | None = None
    version: str | None = None
    upgrade_to: str | None = None
    upgrade_resumes: bool | None = None
    limit_waits: int = 0
    limit_wait_s: float = 0.0
    priority: int = 0
    """The run's message priority: 0 (the default, served first) to 9 (served last)."""
    forked_from: str | None = None
    forked_at_seq: int | None = None
    cancel_requested: bool = False
    tags: dict[str, str] = Field(default_factory=dict)
    """The run's tags (``enqueue(..., tags={...})``), keys sorted; empty for none."""
    parent_run_id: str | None = None
    """The run whose step made this one (``run_child``, ``start_child``); None for a run enqueued."""
    children: list[str] = Field(default_factory=list)
    """The child runs its steps made, sorted (read with the run by ``Client.get``; a listing's
    runs leave it empty)."""


class CheckpointInfo(BaseModel):
    """One checkpoint a run keeps, as ``Client.checkpoints`` lists it (no values: see ``CheckpointDetail``).

    ``seq`` numbers the run's checkpoints (a fork's go on from the one it started from);
    ``saved_at`` is epoch seconds; ``size`` is what Redis keeps of it, in bytes (its JSON;
    compressed and encrypted with ``REFLEXR_PAYLOAD_KEYS``, a reference when offloaded); ``attempt`` is the
    number of the attempt that saved it, 0 when no attempt of this run did: the checkpoint a fork
    started from (copied from its source), or one saved before checkpoints recorded their attempt.
    ``finished`` marks the checkpoint of the graph's output, which has no ``next_node``.
    """

    model_config = ConfigDict(frozen=True)

    seq: int
    saved_at: float
    next_node: str | None
    size: int
    attempt: int
    finished: bool


class CheckpointDetail(CheckpointInfo):
    """One checkpoint with its values, as ``Client.checkpoint`` returns it, all as JSON values.

    ``state`` is the graph state, ``inputs`` the graph's inputs and ``next_inputs`` those of
    ``next_node``'s task; a finished checkpoint has ``output`` instead (and a null state). These
    are the only places reflexr shows values, because an operator asked for them.
    """

    run_id: str
    graph: str
    fingerprint: str
    state: Any = None
    inputs: Any = None
    next_inputs: Any = None
    output: Any = None


class BranchLane(BaseModel):
    """When one branch step of a map ran, as ``Client.branches`` lists it: its node, its branch
    path (``map:7`` is item 7 of fork ``map``; nested forks are joined with ``/``), the attempt
    that ran it, and when it started and ended, epoch seconds.

    Kept for each branch step whose result was recorded (a step that changed the state is not,
    core/steps.py), for up to ``core.journal.LANES_KEPT`` of them an attempt.
    """

    model_config = ConfigDict(frozen=True)

    node: str
    branch: str
    attempt: int
    started_at: float
    ended_at: float


class StreamItem(BaseModel):
    """One item of a run's stream, as ``Client.stream`` yields it (``reflexr_graph.emit`` wrote it).

    ``offset`` numbers the run's items from 1 in the order they were written; pass the last one
    seen as ``after`` to read on from there. ``topic`` is the one given to ``emit``, ``node`` the
    step that emitted it, ``branch`` its branch of a map or broadcast ('' outside one), ``call`` the
    durable call it was emitted in (``name#n``, '' outside one) and ``attempt`` the attempt's
    number. An item with ``restart=True`` (its topic is '') says that the step (or, with a
    ``call``, that durable call) runs again: the items of the same ``node``, ``branch`` and
    ``call`` from offset ``value["void_from"]`` up to this one came from an attempt that did not
    finish it, and it emits again after this one.
    """

    model_config = ConfigDict(frozen=True)

    offset: int
    topic: str
    node: str
    branch: str = ""
    call: str = ""
    attempt: int
    value: Any = None
    restart: bool = False


# -- what the clients read besides runs: events, listings, dead letters, limits, the quarantine
# list, schedules, workers and the fleet at a glance (the store builds them, store/*.py) ---------


@dataclass(frozen=True)
class RunEvent:
    """One entry of a run's event stream. ``at`` is epoch seconds; ``fields`` never holds payloads."""

    id: str
    type: str
    at: float
    fields: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunPage:
    """One page of a listing, newest first; ``cursor`` continues after its last run (None: no more)."""

    runs: list[RunInfo]
    cursor: str | None


@dataclass(frozen=True)
class DeadLetter:
    """A run with what an operator needs to decide about it (``dlq show``, ``/api/dead-letters/{id}``)."""

    run: RunInfo
    traceback: str | None
    """The traceback of its last failed attempt, if one had one."""
    checkpoint: dict[str, Any] | None
    """Its latest checkpoint's ``seq``, ``saved_at``, ``size`` and ``next_node``; None: it starts over."""


@dataclass(frozen=True)
class LimitUsage:
    """One limit key: its configuration and its use now (``Client.limits``, ``reflexr-graph limits``)."""

    key: str
    rate: str | None
    burst: int
    concurrency: int | None
    in_use: int
    granted: int
    denied: int
    waited_s: float

    def as_json(self) -> dict[str, object]:
        return asdict(self)


RAW_LIMIT = 16 * 1024
"""Bytes of an item kept in its quarantine entry; the rest is cut off (``truncated``), but
``size`` is the whole."""


@dataclass(frozen=True)
class QuarantinedItem:
    """One entry of the quarantine list (``store/quarantine.py``), as stored (JSON) and as the CLI
    shows it."""

    time_ms: int
    queue: str
    reason: str
    detail: str
    size: int
    raw: str
    """The item's first RAW_LIMIT bytes: text when they are UTF-8, else base64 (see ``encoding``)."""
    encoding: str
    """``text`` or ``base64``."""
    truncated: bool

    @classmethod
    def of(cls, *, queue: str, reason: str, detail: str, raw: bytes) -> QuarantinedItem:
        kept = raw[:RAW_LIMIT]
        if _valid_utf8(raw):
            # A cut may split the last character: only that partial character is dropped.
            body, encoding = kept.decode("utf-8", errors="ignore"), "text"
        else:
            body, encoding = base64.b64encode(kept).decode("ascii"), "base64"
        return cls(
            time_ms=clock.now_ms(),
            queue=queue,
            reason=reason,
            detail=detail,
            size=len(raw),
            raw=body,
            encoding=encoding,
            truncated=len(raw) > RAW_LIMIT,
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, value: str | bytes) -> QuarantinedItem:
        data: dict[str, Any] = json.loads(value)
        return cls(
            time_ms=int(data.get("time_ms") or 0),
            queue=str(data.get("queue", "")),
            reason=str(data.get("reason", "")),
            detail=str(data.get("detail", "")),
            size=int(data.get("size") or 0),
            raw=str(data.get("raw", "")),
            encoding=str(data.get("encoding", "text")),
            truncated=bool(data.get("truncated")),
        )

    def raw_bytes(self) -> bytes:
        """The kept bytes of the item, decoded from the entry."""
        return base64.b64decode(self.raw) if self.encoding == "base64" else self.raw.encode("utf-8")


@dataclass(frozen=True)
class Quarantined:
    """The quarantine list as ``Client.quarantined`` reads it: one moment of it."""

    items: list[QuarantinedItem]
    """The newest entries, newest first (as many as asked for)."""
    length: int
    """Entries in the list (at most ``store/quarantine.py``'s ``MAXLEN``)."""
    counts: dict[str, int]
    """Items moved aside since the last purge, by reason, including those past MAXLEN."""


class ScheduleInfo(BaseModel):
    """A schedule as ``schedules()`` lists it: its definition, when it fires next (epoch s; None
    while paused), and its last fire and run."""

    model_config = ConfigDict(frozen=True)

    schedule: Schedule
    next_fire_at: float | None = None
    last_fire_at: float | None = None
    last_run_id: str | None = None


class WorkerInfo(BaseModel):
    """What a live worker says about itself in the registry (``rg:worker:<name>``)."""

    model_config = ConfigDict(frozen=True)

    name: str
    """The Celery node name, e.g. ``w1@host``."""
    graphs: tuple[str, ...]
    queues: tuple[str, ...] = ()
    pid: int = 0
    pool: str = ""
    concurrency: int = 0
    version: str = ""
    """The reflexr-graph package version."""
    started_at: float = 0.0
    graph_versions: dict[str, str] = Field(default_factory=dict)
    """Graph name -> the graph's version this worker runs (``GraphAction.version``)."""
    clock_skew_ms: int | None = None
    """The worker's wall clock minus Redis's time, ms, at its latest sample (None before one). The
    fleet runs on Redis's time (clock.py), so a skew changes nothing but says NTP needs fixing."""


class WorkerStatus(BaseModel):
    """A live worker as the workers page and ``top`` show it: what it says about itself, when it
    last beat, and the runs it holds now (from the ``attempt_started`` of each running run)."""

    model_config = ConfigDict(frozen=True)

    info: WorkerInfo
    last_beat_at: float
    """Epoch seconds of the worker's latest heartbeat."""
    in_flight: tuple[str, ...]
    """Ids of the running runs whose current attempt this worker started."""


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
    """False when the due set or the leases held more runs than ``QUEUED_SCAN``
    (``store/overview.py``): the live statuses and ``queues`` count those read."""
    dead_letters: int
    workers: list[WorkerStatus]


@dataclass(frozen=True)
class Durability:
    """The settings read (None when CONFIG is refused, ``checked`` False)."""

    checked: bool
    maxmemory_policy: str | None = None
    appendonly: str | None = None
    save: str | None = None


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


@dataclass(frozen=True)
class AuditEntry:
    """One action: what, on which run ('' for none), by whom ('' when the caller gave no name),
    when (epoch ms)."""

    action: str
    run_id: str
    by: str
    at_ms: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class EventWait(BaseModel):
    """One wait of a run for an external event, and its answer once it has one."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    token: str
    name: str
    graph: str
    agent: str
    since_ms: int
    timeout_at_ms: int | None
    calls: list[dict[str, Any]]
    """Deferred tool calls the wait answers: ``tool_call_id``, ``tool_name``, ``kind``, ``args``
    (their validated arguments, pydantic-ai's ``DeferredToolRequests.validated_args``)."""
    answer: dict[str, Any] | None
    """``{"payload": ...}`` or ``{"error": reason}``, with ``by`` and ``at`` (ms); None while open."""

    def to_json(self) -> dict[str, Any]:
        return self.model_dump()


class VersionEntry(BaseModel):
    """One published version of a graph, as its first publisher wrote it."""

    model_config = ConfigDict(frozen=True)

    version: str
    fingerprint: str
    label: str | None = None
    first_published_at: float
    """Epoch seconds: the newest version is the one first published last."""
    nodes: tuple[str, ...] = ()
    on_new_version: str = "pinned"
    """What the runs of this version do once no live worker serves it (``GraphAction``): wait
    ("pinned"), or move by themselves to the newest served version ("auto_upgrade")."""
    on_incompatible: str = "hold"
    """What an auto-upgrading run does when the new version cannot read its checkpoint."""

    def behaviour(self) -> tuple[str, str]:
        return self.on_new_version, self.on_incompatible


class ServedVersion(VersionEntry):
    """A published version with the live workers that serve it now."""

    workers: tuple[str, ...] = ()


@dataclass(frozen=True)
class StreamPage:
    """What one read of a run's stream found: items after the offset asked for, and whether the run
    had ended before they were read (then nothing more comes once they are taken)."""

    items: list[StreamItem]
    ended: bool


class Move(BaseModel):
    """What an upgrade does, or would do, with one run."""

    run_id: str
    resumes: bool
    """From its latest checkpoint (True), or from its first step."""
    reason: str
    """Why, in a few words (core/compat.py; never a state or input value)."""
    newly: bool = True
    """For a run left held (``UpgradePlan.kept``): False when it was left held for this version before."""


class UpgradePlan(BaseModel):
    """What ``upgrade`` moves: the runs of ``from_version``, to the newest served version."""

    graph: str
    from_version: str
    to_version: str
    run_ids: list[str]
    """Held for ``from_version`` (and with ``include_running`` its queued, retrying and waiting
    runs), which move at once: planned, or moved (done)."""
    moves: list[Move] = []
    """What each of ``run_ids`` does on the new version."""
    running: list[str] = []
    """With ``include_running``: the runs with an attempt running, which move once it ends
    (planned, or marked), judged then by a worker of the new version."""
    kept: list[Move] = []
    """With ``hold_incompatible``: the runs left where they are, since the new version cannot read
    their checkpoint (done only)."""

    @property
    def resumed(self) -> list[str]:
        return [m.run_id for m in self.moves if m.resumes]

    @property
    def restarted(self) -> list[str]:
        return [m.run_id for m in self.moves if not m.resumes]

    def reasons(self) -> list[tuple[bool, str, int]]:
        """``(resumes, reason, runs)`` for each reason, most runs first."""
        counted = Counter((m.resumes, m.reason) for m in self.moves)
        return [(resumes, reason, n) for (resumes, reason), n in counted.most_common()]


class SignalOutcome(StrEnum):
    QUEUED = "queued"
    """The run waited for this signal and is queued now: its message must be sent."""
    SENT = "sent"
    """The run waited for this signal and is queued now, its message pushed with the signal."""
    KEPT = "kept"
    """The run does not wait for it yet: the value waits in its mailbox for the wait to come."""


def _valid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
