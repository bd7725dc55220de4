"""The store port: what the attempt driver needs from storage, and nothing more."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class AttemptContext:
    """Who is running: the run, this attempt's fencing token and its counters.

    ``resume_seq`` increases on every claim of the run and never resets (replay resets
    ``attempt``), so it can prefix fork-stack ids without colliding with an earlier resume.
    """

    run_id: str
    token: str
    attempt: int
    resume_seq: int
    idempotency_key: str
    graph: str
    trace_context: str = ""
    """The run's trace (W3C headers as JSON): every attempt's span joins it, '' for a fresh trace."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """The run's tags, as the producer gave them (core/tags.py)."""


@dataclass(frozen=True)
class Lane:
    """When one branch step of a map ran, kept with its result for the run's timeline (ms)."""

    node: str
    branch: str
    """Its branch path (``map:7``: core/steps.py branch_path)."""
    started_ms: int
    ended_ms: int


@dataclass(frozen=True)
class Record:
    """One piece of finished work an attempt records until its next checkpoint
    (``RecordPort.save_record``): the records journal (core/journal.py) builds it once, and the
    attempt's port and the store hand it on as it is."""

    field: str
    """Its key among the run's records: the step execution or durable call it is the result of
    (core/journal.py)."""
    value: str
    """The work's result, as JSON."""
    lane: Lane | None = None
    """When the branch step it is the result of ran, kept for the run's timeline; None for other
    work, or past the branch steps an attempt keeps the times of."""


@dataclass(frozen=True)
class Notes:
    """What an attempt hands the store with its next write, so it costs no round trip of its own.

    ``skipped``: boundaries it could not checkpoint since its last write, with ``skip_kinds`` a
    short text for operators (``"s2: state x2; d1: untyped x1"``), never a value.
    ``reused_steps`` and ``reused_calls``: branch steps and durable calls answered from their
    records instead of running again.
    """

    skipped: int = 0
    skip_kinds: str = ""
    reused_steps: int = 0
    reused_calls: int = 0


NO_NOTES = Notes()


@dataclass(frozen=True)
class Boundary:
    """What one checkpoint save carries (``CheckpointPort.save_checkpoint``): the attempt driver
    builds it once per safe boundary, and the attempt's port and the store hand it on as it is."""

    payload: str
    """The checkpoint's JSON (core/checkpoint.py): the state and the next task."""
    _: KW_ONLY
    seq: int
    """The checkpoint's number in the run (its field in the run's history), from 1 up."""
    next_node: str | None
    """The node the run resumes at from this checkpoint, kept on the run for operators (None: none)."""
    notes: Notes = NO_NOTES
    """What rides along with this write (:class:`Notes`): the boundaries skipped since the
    attempt's previous save, and the work reused instead of run again."""


@dataclass(frozen=True)
class WaitResult:
    """What the store answers a step's wait: its record once the wait is over, else the suspension.

    ``record`` is the wait's JSON record (``{"signal": value}`` or ``{"due": true}``), or None
    when the run was suspended as ``waiting``; then ``wake_at_ms`` says when its timer wakes it
    (None: only the signal does).
    """

    record: str | None
    wake_at_ms: int | None = None


@dataclass(frozen=True)
class Emission:
    """One item a step emitted (``reflexr_graph.emit``), as the store appends it to the run's stream.

    ``call`` is the durable call it was emitted in (``name#n``), '' outside one. ``restart`` marks
    the item that says the items of ``node``, ``branch`` and ``call`` from offset ``value``'s
    ``void_from`` on came from an attempt that did not finish them (core/emit.py).
    ``mark`` is the memo field the store sets to this item's offset if it has none ('' for none).
    """

    topic: str
    node: str
    branch: str
    value: str
    """The value as JSON."""
    call: str = ""
    restart: bool = False
    mark: str = ""


class StreamPort(Protocol):
    """Where an attempt's emitted items go: the run's stream, fenced by the attempt's token."""

    def append_stream(self, ctx: AttemptContext, items: Sequence[Emission], after: int) -> int:
        """Append ``items`` in one round trip; returns the offset of the last item the stream holds.

        ``after`` is the last offset this attempt knows the stream held (-1 before its first
        write), so a write retried after a lost reply is not appended twice. Raises
        ``errors.FencedOut`` when the token no longer owns the run, ``errors.StreamFull`` past
        REFLEXR_STREAM_MAX_ITEMS.
        """
        ...


class StopSignal(Protocol):
    """Set when the run was asked to cancel (``threading.Event`` is one): the attempt stops at
    its next boundary. The fleet's heartbeat sets it from its lease renewal, in process."""

    def is_set(self) -> bool: ...


class RecordPort(Protocol):
    """What an attempt's records journal (core/journal.py) writes through: each one round trip,
    fenced by the attempt's token."""

    def save_record(
        self, ctx: AttemptContext, record: Record, *, returning: Sequence[tuple[str, str]] = ()
    ) -> None:
        """Keep ``record`` (:class:`Record`), if ``ctx.token`` owns the run: one round trip, which
        also gives back the limit slots ``returning`` (key, member), owned or not, and keeps the
        record's ``lane`` for the run's timeline."""
        ...

    def wait(
        self, ctx: AttemptContext, *, field: str, signal: str, wake_at_ms: int | None, waited_ms: int = 0
    ) -> WaitResult:
        """Take signal ``signal`` ('' for a sleep) or see the timer fired, else suspend the run.

        One round trip, fenced by ``ctx.token``.

        ``field`` is the wait's record; ``wake_at_ms`` the wake time kept if the wait has none yet;
        ``waited_ms`` how long a limited step waited in place before this release (counted with it).
        """
        ...

    def call_retried(
        self, ctx: AttemptContext, *, node: str, call: str, try_number: int, error_type: str, delay_ms: int
    ) -> None:
        """Tell the run's history that a durable call failed try ``try_number`` with an error of
        type ``error_type`` and is tried again in ``delay_ms``. One round trip, fenced by ``ctx.token``."""
        ...

    def open_event(self, ctx: AttemptContext, *, token: str, entry_json: str, name: str) -> None:
        """Keep an external event wait (store/asks.py) before its token is handed out."""
        ...

    def settle_event(self, ctx: AttemptContext, *, token: str, answer_json: str) -> str:
        """Give the wait of ``token`` its one answer unless it has one; the answer it holds."""
        ...


class CheckpointPort(RecordPort, Protocol):
    """Checkpoint storage, fenced by the attempt's token.

    ``save_checkpoint`` is one round trip. It raises ``errors.FencedOut`` when the token
    no longer owns the run, and ``errors.StoreUnavailable`` when storage cannot be reached.
    """

    def load_checkpoint(self, run_id: str) -> str | None:
        """The latest checkpoint's JSON, or None when the run has none."""
        ...

    def load_records(self, run_id: str) -> Mapping[str, str]:
        """The work recorded since the latest checkpoint (core/journal.py), field -> JSON."""
        ...

    def save_checkpoint(
        self, ctx: AttemptContext, boundary: Boundary, *, returning: Sequence[tuple[str, str]] = ()
    ) -> bool | None:
        """Replace the run's checkpoint by ``boundary``'s and append a ``run_progressed`` event, if
        ``ctx.token`` owns the run.

        ``returning`` (limit key, slot member): the slots of the step that just ended, given back in
        the same round trip, owned or not. True when the run was asked to cancel meanwhile: the
        attempt stops at this boundary.
        """
        ...
