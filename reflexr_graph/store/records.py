"""Values the store hands back: claim results, run events read from streams, RunInfo from a run hash."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from reflexr_graph import errors
from reflexr_graph.core.port import AttemptContext, Lane
from reflexr_graph.core.tags import Tags, tags_of
from reflexr_graph.model import BranchLane, CheckpointInfo, LastFailure, RunEvent, RunInfo, Status
from reflexr_graph.store import event_codec


class ClaimOutcome(StrEnum):
    CLAIMED = "claimed"
    """This attempt owns the run now."""
    BUSY = "busy"
    """Another attempt holds a live lease; nothing changed."""
    FINISHED = "finished"
    """The run is terminal; nothing changed."""
    MISSING = "missing"
    """No such run (never created, or its retention passed)."""
    DEAD = "dead"
    """The run had no attempts left and was dead-lettered by this claim."""
    EARLY = "early"
    """The run is retrying and its backoff has not passed; nothing changed (a stray duplicate message)."""
    WAITING = "waiting"
    """The run waits for a signal, or for a timer that has not fired; nothing changed (a stray message)."""
    VERSION = "version"
    """The run is on another version of the graph (``Claim.version``), or starts on the newest;
    nothing changed: the message goes on to that version's queue (G9)."""


@dataclass(frozen=True)
class Claim:
    """The result of ``RedisStore.claim``; counters and payloads are filled in when the run exists."""

    outcome: ClaimOutcome
    run_id: str
    token: str
    status: str = ""
    attempt: int = 0
    """The attempt's number: every claim since the last replay, interrupted ones included."""
    counted: int = 0
    """Attempts so far that count toward ``max_attempts`` (this one included)."""
    resume_seq: int = 0
    graph: str = ""
    inputs_json: str = ""
    state_json: str | None = None
    idempotency_key: str = ""
    max_attempts: int = 0
    trace_context: str = ""
    """The enqueuer's trace context (W3C headers as JSON), or '' when none was recorded."""
    checkpoint: str | None = None
    """The run's checkpoint JSON as the claim found it, so the attempt need not load it again."""
    records: dict[str, str] = field(default_factory=dict)
    """The work recorded since that checkpoint (branch results, durable calls), field -> JSON."""
    tags: Tags = field(default_factory=dict)
    """The run's tags (``enqueue(..., tags=...)``), which a step reads as ``current_run().tags``."""
    unreadable: str = ""
    """Why the run's payloads cannot be read here (errors.PayloadUnreadable), '' when they can:
    the claimed attempt then fails the run permanently, running nothing."""
    version: str = ""
    """With ``ClaimOutcome.VERSION``: the graph version the run is to run on."""
    pinned: bool = False
    """With ``ClaimOutcome.VERSION``: the run started on ``version`` (else it starts on it, the newest)."""
    moving: bool = False
    """With ``ClaimOutcome.VERSION``: ``upgrade --include-running`` moves the run to ``version``, and
    its attempt is over (a worker of ``version`` moves it, store/upgrades.py)."""

    @property
    def claimed(self) -> bool:
        return self.outcome is ClaimOutcome.CLAIMED

    def context(self) -> AttemptContext:
        """The fencing context the attempt passes to every write."""
        if not self.claimed:
            raise errors.OperationRefused(
                f"claim of run {self.run_id} ended {self.outcome.value}; only a claimed run has an attempt"
            )
        return AttemptContext(
            run_id=self.run_id,
            token=self.token,
            attempt=self.attempt,
            resume_seq=self.resume_seq,
            idempotency_key=self.idempotency_key,
            graph=self.graph,
            trace_context=self.trace_context,
            tags=self.tags,
        )


@dataclass(frozen=True)
class SavedCheckpoint:
    """One checkpoint as the store keeps it, with what a reader needs of its run."""

    info: CheckpointInfo
    payload: str
    """The checkpoint's JSON, as the attempt wrote it (``core/checkpoint.py``)."""
    graph: str
    inputs_json: str
    """The run's recorded inputs, which a checkpoint with ``inputs_ref`` refers to."""
    state_json: str | None
    """The run's recorded initial state (the one it was enqueued with), if any."""


@dataclass(frozen=True)
class ForkSeed:
    """What makes a new run a fork: the checkpoint its first attempt resumes from, and its lineage."""

    source_run_id: str
    seq: int
    checkpoint: str
    """The checkpoint JSON the fork starts from: the source's, with its state replaced if asked."""
    next_node: str | None
    state_edited: bool
    output_json: str | None
    """The output when the checkpoint is the finished one: the fork is created succeeded."""
    digest: str
    """Identifies the request (source, seq, state), for the idempotency key."""


def saved_next_nodes(events: list[RunEvent]) -> list[str]:
    """The next node of each checkpoint the events tell, oldest first: each ``run_progressed``'s,
    and ``''`` for a ``run_succeeded`` that carries the finished checkpoint (its ``seq``; succeed.lua
    tells the graph's end saved with the success, not with a ``run_progressed`` of its own)."""
    return [
        e.fields.get("next_node", "") if e.type == "run_progressed" else ""
        for e in events
        if e.type == "run_progressed" or (e.type == "run_succeeded" and e.fields.get("seq"))
    ]


def request_digest(inputs: Any, state: Any) -> str:
    """What identifies a request's inputs and state, however its JSON was spaced or ordered."""
    canonical = json.dumps([inputs, state], sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def text(value: object) -> str:
    """A reply value as str, whether the client decodes responses or not."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return "" if value is None else str(value)


def text_map(reply: Mapping[Any, Any]) -> dict[str, str]:
    return {text(k): text(v) for k, v in reply.items()}


def pairs_to_map(flat: list[Any]) -> dict[str, str]:
    """A flat [k1, v1, k2, v2, ...] reply (HGETALL inside Lua) as a dict."""
    values = [text(v) for v in flat]
    return dict(zip(values[::2], values[1::2], strict=True))


def _seconds(ms: str) -> float:
    return int(ms or 0) / 1000


def _output(raw: str) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        # Written by succeed() from validated JSON; a foreign writer's text is shown as is.
        return raw


def _error(record: Mapping[str, str]) -> str | None:
    error_type, message = record.get("error_type", ""), record.get("error", "")
    if error_type:
        return f"{error_type}: {message}"
    return message or None


def _last_failure(record: Mapping[str, str]) -> LastFailure | None:
    """The run's latest failed attempt, from its 'failed' field (lua/_lib.lua note_failure)."""
    attempt, at_ms, reason, with_error = (record.get("failed") or "|||").split("|", 3)
    if not attempt:
        return None
    return LastFailure(
        attempt=int(attempt),
        time=_seconds(at_ms),
        reason=reason,
        error=_error(record) if with_error == "1" else None,
    )


_ENDED_WITH_REASON = frozenset({Status.DEAD, Status.CANCELLED})


def _present(
    record: Mapping[str, str], status: Status, attempt: int, failure: LastFailure | None
) -> tuple[str | None, str | None]:
    """``error`` and ``reason`` of the run as it is now: a dead or cancelled run's (a dead one keeps
    its last error, G4), a retrying run's (the error only when the attempt that just ended left
    it: a run released by a shutdown retries with none), and none for a run that is queued,
    running, waiting or succeeded, whatever an earlier attempt left (that is ``last_failure``)."""
    reason = record.get("reason") or None
    if status in _ENDED_WITH_REASON:
        return _error(record), reason
    if status is not Status.RETRYING:
        return None, None
    if failure is None:
        return _error(record), reason  # recorded before 'failed' was kept
    return (failure.error if failure.attempt == attempt else None), reason


def run_info(record: Mapping[str, str], run_id: str) -> RunInfo:
    """RunInfo of run ``run_id`` from its decoded run hash (which names the run by its key only)."""
    counted, interrupted, suspended = (
        int(record.get(k) or 0) for k in ("attempts", "interruptions", "suspensions")
    )
    status = Status(record["status"])
    # As _lib.lua's attempt_number() numbers the attempt in the run's events.
    attempt = counted + interrupted + suspended
    failure = _last_failure(record)
    error, reason = _present(record, status, attempt, failure)
    return RunInfo(
        run_id=run_id,
        graph=record.get("graph", ""),
        status=status,
        attempt=attempt,
        attempts=counted,
        suspensions=suspended,
        max_attempts=int(record.get("max_attempts") or 0),
        output=_output(record.get("output", "")),
        error=error,
        reason=reason,
        last_failure=failure,
        next_node=record.get("next_node") or None,
        checkpoints=int(record.get("checkpoints") or 0),
        created_at=_seconds(record.get("created_at", "")),
        updated_at=_seconds(record.get("updated_at", "")),
        interruptions=interrupted,
        skipped_boundaries=int(record.get("skipped") or 0),
        replays=int(record.get("replays") or 0),
        reused_steps=int(record.get("reused_steps") or 0),
        reused_calls=int(record.get("reused_calls") or 0),
        forked_from=record.get("forked_from") or None,
        forked_at_seq=int(record["forked_at_seq"]) if record.get("forked_at_seq") else None,
        waiting_for=record.get("waiting_for") or None,
        version=record.get("version") or None,
        upgrade_to=record.get("upgrade_to") or None,
        # The mark is '<0, 1 or 2>[a]:<version it leaves>' (store/upgrades.py mark_of).
        upgrade_resumes=not record["upgrade_mark"].startswith("0") if record.get("upgrade_mark") else None,
        wake_at=_seconds(record["wake_at"]) if record.get("wake_at") else None,
        limit_waits=int(record.get("limit_waits") or 0),
        limit_wait_s=int(record.get("limit_wait_ms") or 0) / 1000,
        priority=int(record.get("priority") or 0),
        cancel_requested=bool(record.get("cancel")) and record.get("status") == Status.RUNNING,
        tags=tags_of(record.get("tags", "")),
        parent_run_id=record.get("parent") or None,
    )


LATEST_CHECKPOINT = "ck_last"
"""The run hash's field naming the seq of its latest checkpoint (lua/_history.lua)."""


def checkpoint_field(seq: int | str) -> str:
    """The run hash's field holding checkpoint ``seq``'s entry: ``saved_at ms|size|attempt|next_node``."""
    return f"c:{seq}"


FROM_OUTPUT = "o"
"""Before an entry: a succeeded run's finished checkpoint kept as its entry alone, since its JSON
is the run's output in an envelope the run hash tells (``finished_checkpoint``; lua/_history.lua
``CKPT_FROM_OUTPUT``, succeed.lua). Its payload is not in the ``ckpt`` hash."""


def from_output(entry: str) -> bool:
    """Whether a checkpoint entry is a finished checkpoint kept without its payload (FROM_OUTPUT)."""
    return entry.startswith(FROM_OUTPUT)


def finished_checkpoint(graph: str, version: str, seq: int | str, output: str) -> str:
    """The JSON of a finished checkpoint kept as its entry alone, from the run hash's ``graph``,
    ``version`` (the fingerprint: succeed.lua keeps only a checkpoint that is exactly this text),
    its seq and the run's output JSON (decoded from its payload codec): byte for byte what
    core/checkpoint.py wrote (format 1)."""
    head = json.dumps({"format": 1, "graph": graph, "fingerprint": version}, separators=(",", ":"))[:-1]
    return (
        f'{head},"seq":{int(seq)},"finished":true,"state":null,"inputs":null,"inputs_ref":"run",'
        f'"next":null,"output":{output}}}'
    )


def checkpoint_entry(seq: int | str, entry: str) -> CheckpointInfo:
    """CheckpointInfo from a checkpoint's entry in the run hash (lua/_history.lua)."""
    saved_at, size, attempt, next_node = entry.removeprefix(FROM_OUTPUT).split("|", 3)
    return checkpoint_info(str(seq), saved_at, size, attempt, next_node)


def checkpoint_info(seq: str, saved_at: str, size: str, attempt: str, next_node: str) -> CheckpointInfo:
    """CheckpointInfo from the fields the store keeps of a checkpoint (lua/_history.lua)."""
    return CheckpointInfo(
        seq=int(seq),
        saved_at=_seconds(saved_at),
        next_node=next_node or None,
        size=int(size or 0),
        attempt=int(attempt or 0),
        finished=not next_node,
    )


def run_event(entry_id: object, entry: Mapping[Any, Any]) -> RunEvent:
    """One stream entry under its public names, however compactly it was stored (``event_codec``)."""
    kind, at_ms, fields = event_codec.decode(text_map(entry))
    return RunEvent(id=text(entry_id), type=kind, at=at_ms / 1000, fields=fields)


def lane_args(ctx: AttemptContext, lane: Lane | None) -> list[str]:
    """RecordArgs' ``lane`` and ``times`` for a branch step's lane: its field in the run's lanes hash
    (``<claim>|<attempt>|<node>|<branch>``: the claim's ``resume_seq`` never repeats, so a replay's
    attempt 1 keeps the lanes of the one before) and its times (``<started ms>|<ended ms>``);
    '' '' for none."""
    if lane is None:
        return ["", ""]
    field = f"{ctx.resume_seq}|{ctx.attempt}|{lane.node}|{lane.branch}"
    return [field, f"{lane.started_ms}|{lane.ended_ms}"]


def branch_lanes(stored: Mapping[str, str]) -> list[BranchLane]:
    """The lanes hash (``keys.lanes``) as BranchLanes, in the order the branches started."""
    found = []
    for name, times in stored.items():
        _, attempt, node, branch = name.split("|", 3)
        started, ended = times.split("|", 1)
        found.append(
            BranchLane(
                node=node,
                branch=branch,
                attempt=int(attempt),
                started_at=_seconds(started),
                ended_at=_seconds(ended),
            )
        )
    return sorted(found, key=lambda lane: (lane.started_at, lane.attempt, lane.branch))
