"""What each Lua script takes and answers, written once.

Redis passes a script's arguments by position (ARGV[1], ARGV[2] ...), and its reply is a flat
list. Each script's arguments are a frozen dataclass here whose *field order is the ARGV order*:
:meth:`Args.argv` lays them out, and the script's registry entry (``registry.py``) gives each field
a Lua ``local`` of its name at the same position, so a field added in the middle moves the call
and the script together, and nothing is counted by hand. Replies are enums (or a dataclass that
names each position), so a caller compares names, never numbers.

The per-run scripts (``lua/_lib.lua``'s prelude) start with ARGV[1..3] = run id, now ms and the
idempotency key guess, which ``ops.per_run`` adds; their dataclasses hold the ARGV after those. A
standalone script's dataclass holds its whole ARGV (a variadic tail, as the slots given back, follows).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import IntEnum, StrEnum

from reflexr_graph.store.ops import ScriptArg


def _arg(value: object) -> ScriptArg:
    # Lua sees strings: a flag is '1' / '0', a missing value ''.
    if value.__class__ is str or value.__class__ is int:  # most arguments, passed as they are
        return value
    if isinstance(value, bool):
        return "1" if value else "0"
    if value is None:
        return ""
    assert isinstance(value, str | int | float)
    return value


@dataclass(frozen=True)
class Args:
    """The ARGV of one script call, in field order."""

    def argv(self) -> list[ScriptArg]:
        # Each field read as it is: every field is a str, number, bool or None, so astuple's deep
        # copy of each value (some 9 µs a call) bought nothing.
        names = _NAMES.get(type(self))
        if names is None:
            names = _NAMES[type(self)] = tuple(f.name for f in fields(self))
        return [_arg(getattr(self, name)) for name in names]


_NAMES: dict[type[Args], tuple[str, ...]] = {}
"""Each script's argument fields, in ARGV order, read once per class."""


# -- creating and claiming ----------------------------------------------------------------------


@dataclass(frozen=True)
class CreateArgs(Args):
    """create_run.lua."""

    graph: str
    inputs: str
    state: str | None
    idempotency_key: str | None
    max_attempts: int
    due_ms: int
    """When the reaper sends the message if the enqueuer's own is lost (now + dispatch grace)."""
    expected_owner: str
    """The run the caller expects the idempotency key to name, '' for none."""
    trace: str
    digest: str
    fork_checkpoint: str = ""
    fork_seq: int = 0
    fork_next_node: str | None = None
    fork_source: str = ""
    fork_state_edited: bool = False
    fork_output: str | None = None
    """The output when the fork's checkpoint is the finished one: the run is created succeeded."""
    retention_s: int = 0
    tags: str = ""
    """The run's tags as JSON (core/tags.py: tags_json), '' for none; their index keys follow
    the script's other KEYS."""
    priority: int | None = None
    """The run's priority (config/dispatch.py: PRIORITIES), kept on the run; None for none given."""
    message: str = ""
    """The run's Celery message as kombu's Redis transport queues it, '' for none: the script
    pushes it onto the broker list it is given, only when it creates the run."""
    parent: str = ""
    """The parent run of a child run (core/children.py), '' for none."""
    parent_token: str = ""
    """The parent attempt's token when the parent records the child in the same script (one
    Redis), '' otherwise (then ``child_started.lua`` records it next)."""
    parent_field: str = ""
    """The parent's memo field for the child (its record is the child's id as JSON)."""


class Created(StrEnum):
    """create_run.lua's outcome, the first item of ``{outcome, run_id}``."""

    CREATED = "created"
    EXISTING = "existing"
    CONFLICT = "conflict"
    """The idempotency key names a run made from other inputs."""
    RETRY = "retry"
    """The key changed hands since the caller looked; call again expecting the run named."""
    FENCED = "fenced"
    """The parent attempt that would record the child no longer owns the parent: none is made."""
    CANCELLED = "cancelled"
    """The parent was asked to cancel: no child is made, and the parent's attempt ends it."""


@dataclass(frozen=True)
class ClaimArgs(Args):
    """claim.lua."""

    token: str
    lease_expiry_ms: int
    dead_retention_s: int
    worker: str
    version: str = ""
    """The claiming worker's version of the graph ('' checks none)."""
    newest: str = ""
    """The newest version a live worker serves, as the claiming worker last saw it."""


@dataclass(frozen=True)
class ClaimReply:
    """claim.lua's reply, by position; the memo's field/value pairs follow ``checkpoint``."""

    outcome: str
    status: str = ""
    attempt: str = ""
    counted: str = ""
    resumes: str = ""
    graph: str = ""
    inputs: str = ""
    state: str = ""
    idempotency_key: str = ""
    max_attempts: str = ""
    trace: str = ""
    checkpoint: str = ""
    tags: str = ""
    """The run's tags as JSON (core/tags.py: tags_json), '' for none: ``current_run().tags``."""

    SIZE = 13

    @classmethod
    def parse(cls, reply: list[str]) -> tuple[ClaimReply, list[str]]:
        """The named part of the reply, and the memo's pairs after it."""
        return cls(*reply[: cls.SIZE]), reply[cls.SIZE :]


@dataclass(frozen=True)
class RenewArgs(Args):
    """renew_lease.lua (standalone)."""

    run_id: str
    token: str
    lease_expiry_ms: int
    now_ms: int
    """A lease already lapsed by now is the reaper's: a late renewal does not revive it."""


class Lease(IntEnum):
    """What a lease renewal found (renew_lease.lua)."""

    LOST = 0
    """The token lost the run: superseded, reaped, cancelled now, or its lease lapsed."""
    HELD = 1
    CANCEL_REQUESTED = 2
    """Held, but the run was cancelled without ``now``: its attempt stops at its next boundary."""


# -- an attempt's writes ------------------------------------------------------------------------


@dataclass(frozen=True)
class SaveArgs(Args):
    """save_checkpoint.lua (standalone); then the members of the limit slots given back."""

    now_ms: int
    token: str
    payload: str
    seq: int
    next_node: str | None
    events_cap: int
    skipped: int
    skip_kinds: str
    reused_steps: int
    reused_calls: int
    history: int
    """How many checkpoints are kept before the latest (REFLEXR_CHECKPOINT_HISTORY)."""


class Saved(IntEnum):
    """save_checkpoint.lua's answer."""

    FENCED = 0
    SAVED = 1
    CANCEL_REQUESTED = 2
    """Saved, and the run was asked to cancel: the attempt stops at this boundary."""


@dataclass(frozen=True)
class SucceedArgs(Args):
    """succeed.lua."""

    token: str
    output: str
    retention_s: int
    checkpoint: str
    """The finished checkpoint, '' when the one saved before stays."""
    seq: int
    skipped: int
    skip_kinds: str
    reused_steps: int
    reused_calls: int
    history: int


class Succeeded(IntEnum):
    """succeed.lua's answer."""

    FENCED = 0
    RECORDED = 1
    CANCELLED = 2
    """The run was asked to cancel while its last step ran: it ended cancelled, its output kept."""


@dataclass(frozen=True)
class FailArgs(Args):
    """fail.lua."""

    token: str
    error_type: str
    message: str
    traceback: str
    reason: str
    permanent: bool
    retry_due_ms: int
    dead_retention_s: int
    counted: bool
    """False for an infrastructure failure: an interruption, not one of max_attempts."""
    max_interruptions: int
    skipped: int
    skip_kinds: str
    reused_steps: int
    reused_calls: int


class Failed(StrEnum):
    """fail.lua's answer."""

    DEAD = "dead"
    RETRYING = "retrying"
    CANCELLED = "cancelled"
    FENCED = "fenced"


@dataclass(frozen=True)
class ReleaseArgs(Args):
    """release.lua."""

    token: str
    max_interruptions: int
    dead_retention_s: int


class Released(IntEnum):
    """release.lua's answer."""

    FENCED = 0
    RELEASED = 1
    DEAD = 2
    """Released past the interruption bound."""
    CANCELLED = 3


@dataclass(frozen=True)
class DeadLetterArgs(Args):
    """dead_letter.lua."""

    reason: str
    error_type: str
    message: str
    graph: str
    inputs: str
    state: str | None
    idempotency_key: str | None
    max_attempts: int
    dead_retention_s: int
    digest: str


class DeadLettered(IntEnum):
    """dead_letter.lua's answer."""

    ALREADY_FINISHED = 0
    DEAD = 1


@dataclass(frozen=True)
class WaitArgs(Args):
    """wait.lua."""

    token: str
    signal: str
    """The signal waited for, '' for a durable sleep."""
    record_field: str
    """The wait's record field in the memo (not ``field``: the prelude's function of that name)."""
    first_wake_ms: int | None
    """The wake time to keep if this wait has none yet, None for no timer."""
    waited_ms: int
    """How long a step released to wait for a limit ('limit:<key>') waited in place first."""


@dataclass(frozen=True)
class CallRetriedArgs(Args):
    """call_retried.lua."""

    token: str
    node: str
    call: str
    try_number: int
    """The try that failed, 1 for the first."""
    error_type: str
    delay_ms: int
    """How long the step waits before the next try."""


class CallRetried(StrEnum):
    """call_retried.lua's reply."""

    OK = "ok"
    FENCED = "fenced"


class Waited(StrEnum):
    """wait.lua's outcome, the first item of ``{outcome, detail}``."""

    FENCED = "fenced"
    RECORDED = "recorded"
    """The signal was taken or the timer fired: the detail is the wait's record JSON."""
    WAITING = "waiting"
    """The run is suspended: the detail is its wake time ms, '' for none."""
    CANCELLED = "cancelled"
    """A cancel was asked: the run ended instead of waiting."""


@dataclass(frozen=True)
class WaitChildrenArgs(Args):
    """wait_children.lua."""

    token: str
    waiting_for: str
    """What the run waits for, as ``RunInfo.waiting_for`` shows it: ``child:<id>`` or ``children:<n>``."""
    children: str
    """The children's run ids, apart by spaces."""


class WaitedChildren(StrEnum):
    """wait_children.lua's outcome, the first item of its reply."""

    FENCED = "fenced"
    ENDED = "ended"
    """Every child ended: their outcomes follow, in the order asked."""
    WAITING = "waiting"
    """The run is suspended until its last child ends."""
    CANCELLED = "cancelled"
    """A cancel was asked: the run ended instead of waiting."""


@dataclass(frozen=True)
class WaitChildrenReply:
    """wait_children.lua's reply: its outcome, then (``ended``) each child's outcome JSON, in the
    order the children were asked for."""

    outcome: WaitedChildren
    outcomes: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, reply: list[str]) -> WaitChildrenReply:
        return cls(WaitedChildren(reply[0]), reply[1:])


@dataclass(frozen=True)
class ChildEndedArgs(Args):
    """child_ended.lua."""

    child: str
    outcome: str
    """The child's outcome JSON: ``{"status": ..., "reason": ...}``."""


class ToldParent(StrEnum):
    """child_ended.lua's outcome, the first item of ``{outcome, detail}``."""

    MISSING = "missing"
    FINISHED = "finished"
    """The parent ended already: nothing was written."""
    QUEUED = "queued"
    """The parent waited for its children, which all ended: it is queued, its message due now."""
    KEPT = "kept"
    """The outcome waits in the parent's mailbox for its wait to come (or for others to end)."""


@dataclass(frozen=True)
class ToldParentReply:
    """child_ended.lua's reply, by position: the detail is the parent's status, or its graph when
    the parent was queued (its message to send)."""

    outcome: ToldParent
    detail: str = ""

    @classmethod
    def parse(cls, reply: list[str]) -> ToldParentReply:
        return cls(ToldParent(reply[0]), *reply[1:2])


@dataclass(frozen=True)
class WaitReply:
    """wait.lua's reply, by position."""

    outcome: Waited
    detail: str = ""

    @classmethod
    def parse(cls, reply: list[str]) -> WaitReply:
        return cls(Waited(reply[0]), *reply[1:2])


@dataclass(frozen=True)
class EmitArgs(Args):
    """emit.lua (standalone); then :data:`EMIT_ITEM_ARGS` per item (:func:`emit_item`)."""

    token: str
    max_items: int
    """The most items the run's stream may hold (REFLEXR_STREAM_MAX_ITEMS)."""
    attempt: int
    """The attempt number every item of the batch carries."""
    after: int
    """The last offset the attempt knows the stream held, -1 before its first write: a stream past
    it means this batch landed already (a write retried after a lost reply)."""
    count: int
    """How many items follow."""


EMIT_ITEM_ARGS = 7
"""ARGV per item of emit.lua, after EmitArgs: topic, node, branch, durable call, restart flag,
value JSON, the memo field to set to the item's offset ('' for none)."""
EMIT_ITEM_VALUE = 5
"""Where an item's value JSON is among its EMIT_ITEM_ARGS (store/payload_args.py encodes it)."""


def emit_item(
    topic: str, node: str, branch: str, call: str, restart: bool, value: str, mark: str
) -> list[ScriptArg]:
    """One item's ARGV for emit.lua, in its order."""
    return [topic, node, branch, call, _arg(restart), value, mark]


class Emitted(IntEnum):
    """emit.lua's outcome, the first item of ``{outcome, last offset}``."""

    FENCED = 0
    WRITTEN = 1
    FULL = 2
    """The stream holds REFLEXR_STREAM_MAX_ITEMS: the items that fit were written, the rest not."""


@dataclass(frozen=True)
class EmitReply:
    """emit.lua's reply, by position: the outcome and the offset of the last item the stream holds."""

    outcome: Emitted
    last_offset: int = 0

    @classmethod
    def parse(cls, reply: list[int]) -> EmitReply:
        return cls(Emitted(int(reply[0])), int(reply[1]))


@dataclass(frozen=True)
class SignalArgs(Args):
    """signal.lua."""

    name: str
    value: str
    """The value's JSON, validated by the caller."""
    due_ms: int
    """When the reaper sends the message if the caller's own send is lost."""
    message: str = ""
    """The run's Celery message, the item pushed onto the broker list (K_BROKER) if the signal wakes
    the run; '' when the caller sends it itself (the broker is not the store's Redis)."""
    by: str = ""
    """Who sends it (a token's name, ``cli@user@host``), recorded as ``by``; '' for none."""


class Signalled(StrEnum):
    """signal.lua's outcome, the first item of ``{outcome, detail}``."""

    MISSING = "missing"
    REFUSED = "refused"
    """The run finished: the detail is its status."""
    DUPLICATE = "duplicate"
    """One of that name is in the mailbox already: the detail is the run's status."""
    QUEUED = "queued"
    """The run waited for it and is queued: the detail is its graph, whose message to send."""
    SENT = "sent"
    """The run waited for it and is queued, its message pushed by the script: the detail is its graph."""
    KEPT = "kept"
    """Kept in the mailbox for a wait to come: the detail is the run's status."""


@dataclass(frozen=True)
class SignalReply:
    """signal.lua's reply, by position."""

    outcome: Signalled
    detail: str = ""

    @classmethod
    def parse(cls, reply: list[str]) -> SignalReply:
        return cls(Signalled(reply[0]), *reply[1:2])


@dataclass(frozen=True)
class LimitArgs(Args):
    """limit_acquire.lua (standalone)."""

    token: str
    now_ms: int
    key: str
    emission_ms: float
    """0: no rate."""
    burst: int
    concurrency: int
    """0: none."""
    member: str
    """The slot's member in the slots set."""
    slot_expiry_ms: int
    node: str
    waited_ms: int
    """How long the step waited so far."""
    config: str
    """The limit's configuration JSON, for ``reflexr-graph limits``."""
    events_cap: int
    max_reserve_ms: int
    """The longest rate wait to reserve a token for."""


@dataclass(frozen=True)
class TakeArgs(Args):
    """limit_take.lua (a cluster store's limit half of a grant)."""

    now_ms: int
    emission_ms: float
    """0: no rate."""
    burst: int
    concurrency: int
    """0: none."""
    member: str
    """The slot's member in the slots set; names the acquisition's grant."""
    slot_expiry_ms: int
    max_reserve_ms: int
    """The longest rate wait to reserve a token for."""
    waited_ms: int
    """How long the step waited in place so far."""


@dataclass(frozen=True)
class GrantedArgs(Args):
    """limit_granted.lua (a cluster store's run half of a grant)."""

    token: str
    now_ms: int
    key: str
    node: str
    waited_ms: int
    """How long the step waited in place so far."""
    wait_ms: int
    """How long the grant said to wait before starting (a reserved rate token)."""
    member: str
    events_cap: int


class Acquired(StrEnum):
    """limit_acquire.lua's, limit_take.lua's and limit_granted.lua's outcome."""

    FENCED = "fenced"
    OK = "ok"
    DENIED = "denied"


@dataclass(frozen=True)
class LimitReply:
    """limit_acquire.lua's and limit_take.lua's reply, by position: ``{outcome, slots in use, wait ms}``.

    The wait is, granted, the ms before the step starts (a reserved rate token); denied, the ms
    until the rate allows (0: a slot is missing, poll).
    """

    outcome: Acquired
    in_use: int = 0
    wait_ms: int = 0

    @classmethod
    def parse(cls, reply: list[str]) -> LimitReply:
        return cls(Acquired(reply[0]), *(int(v) for v in reply[1:3]))


# -- reading the checkpoint history ------------------------------------------------------------


class Kept(StrEnum):
    """list_checkpoints.lua's and read_checkpoint.lua's outcome, the first item of their reply."""

    MISSING = "missing"
    """No such run."""
    NONE = "none"
    """The run keeps no checkpoint of that seq (read_checkpoint.lua only)."""
    OK = "ok"


@dataclass(frozen=True)
class CheckpointListReply:
    """list_checkpoints.lua's reply: its outcome, then each checkpoint's seq and entry in the run
    hash (``saved_at ms|size|attempt|next_node``), oldest first, the latest last."""

    outcome: Kept
    entries: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def parse(cls, reply: list[str]) -> CheckpointListReply:
        return cls(Kept(reply[0]), list(zip(reply[1::2], reply[2::2], strict=True)))


@dataclass(frozen=True)
class CheckpointReply:
    """read_checkpoint.lua's reply, by position: one checkpoint with the run's graph and recorded
    inputs and state. A finished checkpoint kept as its entry alone has an empty ``payload`` and
    comes with the run's ``version`` and ``output``, which make it (records.finished_checkpoint)."""

    outcome: Kept
    seq: str = ""
    saved_at: str = ""
    size: str = ""
    attempt: str = ""
    next_node: str = ""
    payload: str = ""
    graph: str = ""
    inputs: str = ""
    state: str = ""
    version: str = ""
    output: str | None = None
    """None but for a finished checkpoint kept as its entry alone."""

    @classmethod
    def parse(cls, reply: list[str]) -> CheckpointReply:
        return cls(Kept(reply[0]), *reply[1:12])


# -- recovery and operators ---------------------------------------------------------------------


@dataclass(frozen=True)
class ReapArgs(Args):
    """reap.lua; the outage window is '' '' when there was none."""

    dead_retention_s: int
    outage_from_ms: int | None
    outage_to_ms: int | None
    max_interruptions: int
    lease_ttl_ms: int | None = None
    """The fleet's lease TTL, to tell when an abandoned attempt's heartbeat last renewed its lease."""


class Reaped(StrEnum):
    """reap.lua's answer."""

    DEAD = "dead"
    RETRYING = "retrying"
    CANCELLED = "cancelled"
    SKIP = "skip"
    """Not lapsed any more, or a stale entry."""


@dataclass(frozen=True)
class CancelArgs(Args):
    """cancel.lua."""

    retention_s: int
    now: bool
    """Cancel a running run at once (its attempt fenced out), not at its next boundary."""
    by: str = ""
    """Who cancels, recorded as ``by``; '' for none (a parent's cancel of its children says its own)."""


@dataclass(frozen=True)
class ReplayArgs(Args):
    """replay.lua."""

    from_start: bool
    from_seq: int | None
    """The checkpoint to resume from, None for the latest."""
    by: str = ""
    """Who replays, recorded as ``by``; '' for none."""


@dataclass(frozen=True)
class PruneArgs(Args):
    """prune.lua: the terminal status whose set the run was found in, '' for not known."""

    status: str


@dataclass(frozen=True)
class HoldArgs(Args):
    """hold_unserved.lua."""

    grace_ms: int
    recheck_due_ms: int
    """When to look again."""
    dead_retention_s: int
    message: str
    """The error message to keep if the run is dead-lettered."""


class Unserved(StrEnum):
    """hold_unserved.lua's answer."""

    BEGAN = "began"
    """The wait for a worker just began."""
    HELD = "held"
    DEAD = "dead"
    """Dead-lettered (unknown_graph): it waited out the grace period."""
    SKIP = "skip"
    """Claimed or finished meanwhile."""
    GONE = "gone"


@dataclass(frozen=True)
class HoldVersionArgs(Args):
    """hold_version.lua."""

    version: str
    grace_ms: int
    recheck_due_ms: int


class VersionHold(StrEnum):
    """hold_version.lua's answer."""

    BEGAN = "began"
    """The grace period just began: the run is looked at again soon."""
    HELD = "held"
    WAITING = "waiting"
    """It waits (``waiting_for = version:<v>``) for a worker of its version to wake it."""
    SKIP = "skip"
    GONE = "gone"


@dataclass(frozen=True)
class WakeVersionArgs(Args):
    """wake_version.lua."""

    version: str
    due_ms: int


@dataclass(frozen=True)
class UpgradeArgs(Args):
    """upgrade.lua."""

    from_version: str
    to_version: str
    checkpoint: str = ""
    """The run's latest checkpoint written over to ``to_version`` (compat.rebase), to resume from
    (a payload: store/payload_args.py encodes it); '' starts the run over."""
    replaces_seq: str = ""
    """The seq of the latest checkpoint ``checkpoint`` replaces: another one now means 'skip'."""
    mark: str = ""
    """Only mark the run to move once its attempt ends, with this mark (store/upgrades.py)."""
    held_because: str = ""
    """Only leave the run where it is, held, for this reason (the new version cannot read its
    checkpoint, and its graph holds such runs: ``on_incompatible="hold"``)."""
    by: str = ""
    """Who moves it (``auto_upgrade``; '' for an operator's ``upgrade``), recorded on its event."""

    def argv(self) -> list[ScriptArg]:
        mode = "1" if self.mark else "2" if self.held_because else ""
        return [*super().argv()[:-3], mode, self.mark or self.held_because, self.by]


@dataclass(frozen=True)
class TickArgs(Args):
    """reaper_tick.lua (standalone)."""

    owner: str
    lock_ttl_ms: int
    now_ms: int
    limit: int
    run_retention_s: int
    dead_retention_s: int
    idle_ms: int
    """The longest the reaper may sleep: at most its lease TTL, so a lease taken meanwhile cannot
    lapse before it wakes."""
    margin_ms: int
    """How long past the holder's planned wake the lock is kept: one tick."""
    prune: bool
    """Whether to read the finished runs past their retention (``TickReply.prunable``)."""


class Lock(StrEnum):
    """What reaper_tick.lua did with the reaper lock."""

    HELD = "held"
    """This reaper held it, and keeps it for another TTL."""
    TAKEN = "taken"
    """Nobody held it: this reaper does now."""
    OTHER = "other"
    """Another reaper holds it: this one does nothing this pass."""


@dataclass(frozen=True)
class TickReply:
    """reaper_tick.lua's reply, by position."""

    lock: Lock
    lapsed: list[str]
    """Runs whose lease lapsed, to reap."""
    due: list[tuple[str, float]]
    """Runs whose message is due: (run id, due score), earliest first."""
    prunable: dict[str, list[str]]
    """Finished runs past their retention, by the status set they are in."""
    restart: tuple[int, int] | None
    """The window (epoch ms) since the last reaper pass when Redis restarted or failed over in it."""
    next_due: float | None
    """The due score (epoch ms) of the first due entry after ``due``, None when none falls before
    ``wake``."""
    wake: float
    """When the reaper wakes next (epoch ms): the holder at the first due entry after ``due``, the
    first lease that could lapse, or its longest sleep; another reaper when the lock would lapse."""
    shards: tuple[int, ...] = ()
    """The shards whose lock the reaper holds after the pass (store/recovery.py merges the replies
    of every shard's tick into one)."""
    ended: list[str] = field(default_factory=list)
    """Child runs that ended and whose parent is not told yet (store/children.py)."""


# -- schedules ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SchedulePutArgs(Args):
    """schedule_put.lua."""

    name: str
    definition: str
    next_ms: int | None
    """None while paused: no fire is due."""
    change: bool
    """True to change an existing schedule, False to add a new one."""


@dataclass(frozen=True)
class ScheduleAdvanceArgs(Args):
    """schedule_advance.lua."""

    name: str
    planned_ms: int
    next_ms: int
    last_fire_ms: int | None
    last_run_id: str


# -- the scripts' smaller contracts ---------------------------------------------------------------


@dataclass(frozen=True)
class NoArgs(Args):
    """A script that takes no ARGV of its own (a per-run one's are the prelude's)."""


@dataclass(frozen=True)
class RecordArgs(Args):
    """record.lua (standalone); then the members of the limit slots given back."""

    token: str
    field: str
    """The record's field in the memo."""
    value: str
    """The record's JSON (a payload)."""
    lane: str
    """The branch step's lane field, '' for none (a durable call)."""
    times: str
    """The lane's times (store/records.py: lane_args)."""


@dataclass(frozen=True)
class ReadCheckpointArgs(Args):
    """read_checkpoint.lua (standalone)."""

    seq: int


@dataclass(frozen=True)
class ChildStartedArgs(Args):
    """child_started.lua (standalone): the parent's record of the child its step made."""

    token: str
    """The parent attempt's token."""
    field: str
    """The parent's memo field for the child (its record: the child's id as JSON)."""
    child: str
    """The child's run id."""


@dataclass(frozen=True)
class AckDueArgs(Args):
    """ack_due.lua (standalone)."""

    run_id: str
    read_score: str
    """The score the caller read with the due entry (``repr`` of a float)."""


@dataclass(frozen=True)
class RescheduleArgs(Args):
    """reschedule_due.lua (standalone)."""

    run_id: str
    read_score: float
    """The score the caller read with the due entry."""
    now_ms: int
    base_ms: int
    """The first wait; each send doubles it."""
    cap_ms: int
    """The longest wait."""


@dataclass(frozen=True)
class LockReleaseArgs(Args):
    """lock_release.lua (standalone)."""

    owner: str


@dataclass(frozen=True)
class SwapPayloadArgs(Args):
    """swap_payload.lua (standalone): rekey's compare-and-set of one stored payload."""

    field: str
    """The hash field that holds it, '' for a string key of its own (a run's long inputs)."""
    read: str
    """The value rekey read there, as stored."""
    rewritten: str
    """What to write instead: the same payload encoded again by rekey, so no payload of the call's
    (the codec leaves its arguments as they are)."""


@dataclass(frozen=True)
class UnholdArgs(Args):
    """unhold_version.lua (standalone)."""

    pair: str
    """``<graph>@<version>``."""
    generation: int
    """The generation the beat read."""


@dataclass(frozen=True)
class ActivityArgs(Args):
    """activity_counts.lua (standalone)."""

    start_ms: int
    """The window's first ms."""
    minutes: int
    width_ms: int
    """Ms per minute."""


@dataclass(frozen=True)
class WorkerBeatArgs(Args):
    """worker_beat.lua (standalone)."""

    name: str
    now_ms: int
    ttl_ms: int
    """The heartbeat's TTL."""
    description: str
    """The worker's description JSON."""
    described_ms: int
    """The description's and served entries' lifetime: longer than the gap between two full
    beats plus a heartbeat TTL, so a live worker's are always there."""
    sets_ms: int
    """The served sets' lifetime (a set disappears this long after its last worker's last trim)."""
    trim: bool
    """Drop the entries of workers that stopped beating, and set the served sets' expiry."""


@dataclass(frozen=True)
class WorkerLeaveArgs(Args):
    """worker_leave.lua (standalone)."""

    name: str
