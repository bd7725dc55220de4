"""One rooted exception tree: every error reflexr-graph raises derives from ReflexrError.

Messages name what is wrong and what to do about it, and never carry the values of
graph state or inputs, which may be private.

Every class has a :class:`Kind`, its own or its parent's. The surfaces map a kind, never a
class, to their answer (``api/problems.py`` to an HTTP status, ``cli/report.py`` to an exit
code), so a new class is answered as its kind says, and a class without one cannot be defined.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar


class Kind(StrEnum):
    """What kind of failure an error is, which is all a surface needs to answer it."""

    NOT_FOUND = "not_found"
    """The run, graph or checkpoint named does not exist (or no longer does)."""
    INVALID = "invalid"
    """What was given is wrong: inputs, a setting, a graph definition, a message; fix it and retry."""
    CONFLICT = "conflict"
    """Valid, but the run's current status or an earlier request does not allow it."""
    UNAVAILABLE = "unavailable"
    """Redis cannot be reached or used; nothing about the request is wrong."""
    TIMEOUT = "timeout"
    """What was waited for did not happen in time."""
    FAILED = "failed"
    """The work ran and failed, or something failed that the caller cannot fix by asking again."""


class ReflexrError(Exception):
    """Root of every reflexr-graph error.

    ``error_kind`` is the class's :class:`Kind`; each class below the root declares one or has
    a parent other than the root that does (``TypeError`` at class definition otherwise). A
    bare ``ReflexrError`` is a failure.
    """

    error_kind: ClassVar[Kind] = Kind.FAILED

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not any("error_kind" in vars(base) for base in cls.__mro__ if base is not ReflexrError):
            raise TypeError(
                f"{cls.__qualname__} declares no error_kind: set error_kind = Kind.<...> on it, so that "
                "the API and the CLI know how to answer it"
            )


class NotInRun(ReflexrError):
    """A function that only works inside a step of a run (``current_run``, ``durable_call``,
    ``wait_for_signal``, ``sleep``) was called outside one."""

    error_kind = Kind.INVALID


class GraphDefinitionError(ReflexrError, ValueError):
    """A graph or GraphAction cannot be registered as written (bad name, type, input_types...)."""

    error_kind = Kind.INVALID


class SettingsError(ReflexrError, ValueError):
    """A REFLEXR_* setting is missing, unknown or invalid."""

    error_kind = Kind.INVALID


class RunFailure(ReflexrError):
    """Raised by a step to fail the attempt with a stable reason code.

    ``permanent=True`` dead-letters the run at once instead of retrying it. ``retry_after``
    (seconds) says when to try again, as a 429's ``Retry-After`` does: it replaces the retry
    policy's backoff for this failure.
    """

    error_kind = Kind.FAILED

    def __init__(
        self,
        message: str,
        *,
        reason: str = "step_failed",
        permanent: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        if retry_after is not None and not retry_after >= 0:  # also refuses NaN
            raise ValueError("retry_after must be a number of seconds >= 0")
        self.reason = reason
        self.permanent = permanent
        self.retry_after = retry_after


class StepTimeout(RunFailure):
    """A step ran past its timeout (``GraphAction(step_timeouts=...)``) and was cancelled.

    ``blocked`` is True when the step blocked the event loop in synchronous code, so it could
    not be cancelled: the heartbeat thread saw it overdue, recorded this failure and ended the
    worker process's attempt.
    """

    def __init__(self, *, node: str, timeout_s: float, blocked: bool = False) -> None:
        how = " (blocked in synchronous code, so the pool child was replaced)" if blocked else ""
        super().__init__(
            f"step {node!r} ran past its timeout of {timeout_s:g}s and was cancelled{how}; make it faster, "
            "or raise its timeout in GraphAction(step_timeouts=...)",
            reason="step_timeout",
        )
        self.node = node
        self.timeout_s = timeout_s
        self.blocked = blocked


class AttemptTimeout(RunFailure):
    """The whole attempt ran past ``GraphAction(attempt_timeout=...)`` and was cancelled."""

    def __init__(self, *, timeout_s: float, node: str = "") -> None:
        where = f" (in step {node!r})" if node else ""
        super().__init__(
            f"the attempt ran past its timeout of {timeout_s:g}s{where} and was cancelled; the run resumes "
            "from its last checkpoint",
            reason="attempt_timeout",
        )
        self.timeout_s = timeout_s
        self.node = node


class ChildFailed(RunFailure):
    """Raised inside a step by ``run_child`` or ``wait_child`` when the child run ended dead or
    cancelled. ``child_run_id`` is the child, ``status`` how it ended (``dead`` or ``cancelled``)
    and ``reason`` its reason code. Uncaught, it fails the step's attempt, and the parent's retry
    policy decides what follows; a retry finds the same child, ended as it was."""

    error_kind = Kind.FAILED

    def __init__(self, *, child_run_id: str, status: str, reason: str | None) -> None:
        super().__init__(
            f"child run {child_run_id} ended {status} ({reason or 'no reason given'}); see its run, "
            "replay it, or handle ChildFailed in the step",
            reason="child_failed",
        )
        self.child_run_id = child_run_id
        self.status = status
        self.child_reason = reason


class OutputNotSerializable(RunFailure):
    """The graph finished, but its output does not read back through the output type."""

    def __init__(self, message: str) -> None:
        super().__init__(message, reason="output_not_serializable", permanent=True)


class StreamFull(RunFailure):
    """A step emitted more items than a run's stream may hold (``REFLEXR_STREAM_MAX_ITEMS``)."""

    def __init__(self, *, run_id: str, node: str, max_items: int) -> None:
        super().__init__(
            f"run {run_id}: step {node!r} emitted past the {max_items} items a run's stream may hold "
            f"(REFLEXR_STREAM_MAX_ITEMS={max_items}); raise REFLEXR_STREAM_MAX_ITEMS on the workers, or "
            "emit fewer, larger items",
            reason="stream_full",
            permanent=True,
        )
        self.run_id = run_id
        self.node = node
        self.max_items = max_items


class PayloadUnreadable(RunFailure):
    """A stored payload of a run cannot be read back: it is encrypted under a key this process
    does not hold, or it is missing from (or corrupt in) the payload store. Permanent: retrying
    reads the same bytes. The message names the run and the key id or the payload's digest,
    never a value."""

    error_kind = Kind.FAILED

    def __init__(self, message: str) -> None:
        super().__init__(message, reason="payload_unreadable", permanent=True)
        self.placeholder = "unreadable payload"
        """How a reader without the means to read it shows the value: ``<encrypted with key k1>``."""


class PayloadTooLarge(RunFailure):
    """A payload is above the limit of a single payload (``REFLEXR_MAX_OFFLOAD_BYTES`` with a
    payload store). Permanent: the same work makes the same payload."""

    error_kind = Kind.INVALID

    def __init__(self, message: str) -> None:
        super().__init__(message, reason="payload_too_large", permanent=True)


class FencedOut(ReflexrError):
    """This attempt no longer owns the run (its token was superseded), so it may write nothing."""

    error_kind = Kind.CONFLICT


class AttemptCancelled(ReflexrError):
    """The attempt stopped because its lease was lost or the run was cancelled."""

    error_kind = Kind.FAILED


class CancelRequested(AttemptCancelled):
    """The run was cancelled without ``now`` while this attempt ran: it stops at a step boundary.

    ``ended`` is True when the store already ended the run cancelled (the attempt's write found
    the request and did it in the same call); else the attempt ends it.
    """

    def __init__(self, run_id: str, *, ended: bool = False) -> None:
        super().__init__(f"run {run_id} was cancelled; its attempt stops at this boundary")
        self.run_id = run_id
        self.ended = ended


class StoreUnavailable(ReflexrError):
    """Redis could not be reached or used; the attempt fails and is retried.

    ``endpoint`` is ``host:port`` (never credentials) when known; ``kind`` names what went
    wrong (``refused``, ``timeout``, ``auth``, ``db_index``, ``tls_mismatch``...), so callers
    can act on it without parsing the message.
    """

    error_kind = Kind.UNAVAILABLE

    def __init__(self, message: str, *, endpoint: str = "", kind: str = "unavailable") -> None:
        super().__init__(message)
        self.endpoint = endpoint
        self.kind = kind


class StoreFull(StoreUnavailable):
    """Redis is at its ``maxmemory`` and refuses writes (``OOM``): nothing was written.

    An outage like any other to the fleet (attempts wait while their lease holds, and none is
    counted); to a producer it says what to do: free memory, raise maxmemory, shorten retention.
    """


class RedisMisconfigured(StoreUnavailable):
    """Redis answered, but the URL or the server's setup is wrong: a password, the database
    number, TLS, or not a Redis server at all. Retrying does not help until that is fixed."""


class RunNotFound(ReflexrError, LookupError):
    """No run has this id (it never existed, or its retention has passed)."""

    error_kind = Kind.NOT_FOUND


class AmbiguousRunId(ReflexrError, LookupError):
    """A run id prefix that more than one run's id starts with; give more of the id."""

    error_kind = Kind.INVALID


class ScheduleNotFound(ReflexrError, LookupError):
    """No schedule has this name."""

    error_kind = Kind.NOT_FOUND


class UnknownGraph(ReflexrError, LookupError):
    """No worker has published a graph with this name."""

    error_kind = Kind.NOT_FOUND


class InvalidInputs(ReflexrError, ValueError):
    """The inputs or state do not validate against the graph's schema."""

    error_kind = Kind.INVALID

    def __init__(self, message: str, errors: list[dict[str, object]] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or []


class OperationRefused(ReflexrError):
    """The run is not in a status that allows this operation (replay of a running run, ...).

    ``status`` is the run's status that refused it, when a run's status did.
    """

    error_kind = Kind.CONFLICT

    def __init__(self, message: str, *, status: str | None = None) -> None:
        super().__init__(message)
        self.status = status


class SignalPending(OperationRefused):
    """A signal of this name was sent to the run already and no wait has taken it yet.

    A second value would silently replace what the first sender meant; send it again once the
    run has taken the first (its history shows ``run_waiting`` again, or the run moved on).
    """

    def __init__(self, *, run_id: str, signal: str, status: str) -> None:
        super().__init__(
            f"run {run_id} already has a signal {signal!r} that no wait has taken yet; a second one "
            "would replace it, so it is refused: send it again after the run takes the first",
            status=status,
        )
        self.run_id = run_id
        self.signal = signal


class UnknownSignal(ReflexrError, LookupError):
    """The graph declares no signal of this name (``GraphAction(..., signals={...})``)."""

    error_kind = Kind.INVALID

    def __init__(self, *, graph: str, signal: str, declared: tuple[str, ...]) -> None:
        names = ", ".join(repr(n) for n in declared) or "none"
        super().__init__(
            f"graph {graph!r} declares no signal {signal!r} (it declares: {names}); check the name, or "
            "declare it with GraphAction(graph, signals={name: type})"
        )
        self.graph = graph
        self.signal = signal
        self.declared = declared


class SignalTimeout(ReflexrError, TimeoutError):
    """Raised inside a step by ``wait_for_signal`` when its timeout passed before the signal came.

    The step may catch it (to escalate, to go on without the answer); if it does not, the attempt
    fails as any step failure does and is retried, and the retry sees the same timeout at once.
    """

    error_kind = Kind.TIMEOUT

    def __init__(self, *, signal: str, timeout_s: float) -> None:
        super().__init__(f"signal {signal!r} did not arrive within {timeout_s:g}s")
        self.signal = signal
        self.timeout_s = timeout_s


class EventTokenInvalid(ReflexrError, ValueError):
    """A string that is not an external event's token (pydantic-ai's ``wait_for_external_event``)."""

    error_kind = Kind.INVALID

    def __init__(self) -> None:
        super().__init__("this is not an event token: copy the whole token the run handed out")


class EventNotFound(ReflexrError, LookupError):
    """No open or past wait has this token: wrong, or its run was purged."""

    error_kind = Kind.NOT_FOUND

    def __init__(self, run_id: str) -> None:
        super().__init__(f"no wait of run {run_id} has this event token: check it, or the run was purged")
        self.run_id = run_id


class EventAnswered(ReflexrError):
    """The wait of this token was answered already, or its timeout passed: it takes no second answer."""

    error_kind = Kind.CONFLICT

    def __init__(self, run_id: str, name: str, how: str) -> None:
        super().__init__(f"the wait {name!r} of run {run_id} {how}; it takes no second answer")
        self.run_id = run_id
        self.name = name


class Suspended(BaseException):
    """The attempt suspended the run to wait for a signal or a timer; never an error.

    Raised inside a step by ``wait_for_signal`` and ``sleep`` when the run must wait, and caught
    by the worker, which ends the attempt as suspended. A BaseException, like
    ``asyncio.CancelledError``, so that a step's ``except Exception`` does not swallow it: do not
    catch it. It sits outside the ReflexrError tree because nothing should handle it as an error.
    """

    def __init__(self, *, signal: str | None, wake_at_ms: int | None) -> None:
        what = f"signal {signal!r}" if signal else "a timer"
        super().__init__(f"the run waits for {what}; the worker ends this attempt as suspended")
        self.signal = signal
        self.wake_at_ms = wake_at_ms


class IdempotencyConflict(ReflexrError, ValueError):
    """The idempotency key already names a run of this graph that was enqueued with other inputs.

    ``run_id`` is that run. A key means one request: reusing it with new inputs would silently
    drop them, so it is refused. Use a new key for new inputs.
    """

    error_kind = Kind.CONFLICT

    def __init__(self, *, graph: str, idempotency_key: str, run_id: str) -> None:
        super().__init__(
            f"idempotency key {idempotency_key!r} of graph {graph!r} already names run {run_id}, "
            "which was enqueued with other inputs or state; send the same inputs to get that run, "
            "or use a new key for a new request"
        )
        self.graph = graph
        self.idempotency_key = idempotency_key
        self.run_id = run_id


class CheckpointNotFound(ReflexrError, LookupError):
    """The run keeps no checkpoint with this seq: never saved, or trimmed from its history.

    ``kept`` are the seqs the run does keep, oldest first (``Client.checkpoints`` lists them).
    """

    error_kind = Kind.NOT_FOUND

    def __init__(self, *, run_id: str, seq: int, kept: list[int]) -> None:
        if not kept:
            keeps = "it keeps none"
        elif len(kept) == 1:
            keeps = f"it keeps only #{kept[0]}"
        else:
            keeps = f"it keeps {len(kept)}, #{kept[0]} to #{kept[-1]}"
        super().__init__(
            f"run {run_id} has no checkpoint #{seq} ({keeps}); list them with "
            f"`reflexr-graph checkpoints {run_id}`, or raise REFLEXR_CHECKPOINT_HISTORY to keep more"
        )
        self.run_id = run_id
        self.seq = seq
        self.kept = kept


class StaleCheckpoint(OperationRefused):
    """A checkpoint a worker would not resume, so a fork or a replay from it is refused.

    ``reason`` is the one a worker would discard it for: ``graph_changed`` (saved by another
    version of the graph, by fingerprint) or ``format`` (not a checkpoint this version reads).
    """

    def __init__(self, *, run_id: str, seq: int, graph: str, reason: str) -> None:
        why = (
            f"was saved by another version of graph {graph!r} (its nodes, edges or input types changed since)"
            if reason == "graph_changed"
            else "is not in a checkpoint format this version reads"
        )
        super().__init__(
            f"checkpoint #{seq} of run {run_id} {why}: a worker would discard it and start the run over, "
            "so it is refused; use a checkpoint saved by the graph as it is deployed now, or enqueue anew"
        )
        self.run_id = run_id
        self.seq = seq
        self.graph = graph
        self.reason = reason


class CannotListen(ReflexrError):
    """``serve`` cannot listen on the address given: its port is in use, the address is not this
    machine's, or the port needs privileges."""

    error_kind = Kind.CONFLICT


class AttemptFailed(ReflexrError):
    """The Celery task's failure when its attempt failed and the run is retried.

    Raised only to set the task's own state (Flower, ``celery events``): the run record
    already holds the error, and the retry is scheduled by the store, not by Celery.
    """

    error_kind = Kind.FAILED


class RunDeadLettered(ReflexrError):
    """The Celery task's failure when its delivery dead-lettered the run."""

    error_kind = Kind.FAILED


class WaitTimeout(ReflexrError, TimeoutError):
    """The run did not reach a terminal status within the timeout (the CLI exits 124).

    The message says what the run is doing: a waiting run waits for a signal, a limit or a
    timer, not for a worker.
    """

    error_kind = Kind.TIMEOUT


class DurabilityWarning(UserWarning):
    """A GraphAction was built in a way that leaves some of its runs without checkpoints.

    A warning, not an error: the graph still runs, and retries still work, but from further
    back than the user may believe. Turn it into an error with ``-W error::...DurabilityWarning``.
    """


class ExtraNotInstalled(ReflexrError, ImportError):
    """An optional part of reflexr-graph was imported without the extra that brings its dependencies.

    An ``ImportError`` too, so code that imports it optionally (``try: ... except ImportError``)
    keeps working.
    """

    error_kind = Kind.FAILED


class DurableAgentError(ReflexrError):
    """A pydantic-ai agent cannot be made durable, or was run in a way its records cannot follow."""

    error_kind = Kind.INVALID
