"""Every Lua script's contract, one entry each: what it takes, what it answers, what it is made of.

An entry names the script's KEYS, in order, and its argument dataclass (``contracts.py``), whose
field order is its ARGV order. ``scripts.source`` makes a ``local`` of each from them at the top
of the script's body (:meth:`Script.locals`), so the Lua reads ``token``, never ``ARGV[4]``: a
field added, removed or moved in the dataclass moves the script's ARGV with it, and the call's
(``Args.argv``). A script that takes a variable number of keys or arguments after the named ones
gets the first index of that tail as a local (``slots_from``), which it loops from.

The per-run scripts (``lua/_lib.lua``'s prelude) share its KEYS and ARGV: the prelude names
KEYS[1..18] and the last five (``keys.script_keys``) and ARGV[1..3] (run id, now, the idempotency
key guess, which ``ops.per_run`` adds); their entries name the keys and arguments after those.

Also derived from here: which scripts get which prelude, which write nothing (declared
``no-writes``), and which arguments are payloads (store/payload_args.py). The contract test
(tests/store/test_contracts.py) walks these entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType

from reflexr_graph.store import contracts as c

LIB, HISTORY, PASS, LIMIT, PARENT = "lib", "history", "pass", "limit", "parent"
"""The preludes (``lua/_<name>.lua``), prepended in this order."""
PRELUDES = (LIB, HISTORY, PASS, LIMIT, PARENT)

PER_RUN_ARGV = 3
"""ARGV[1..3] of a per-run script are the prelude's: run id, now ms, idempotency key guess."""
PER_RUN_KEYS = 18
"""KEYS[1..18] of a per-run script are the prelude's (keys.script_keys), and so are its last five."""


@dataclass(frozen=True)
class Script:
    """One Lua script's contract (``lua/<name>.lua``)."""

    name: str
    args: type[c.Args]
    """Its ARGV (after the prelude's, for a per-run script), in field order."""
    keys: tuple[str, ...] = ()
    """The Lua names of its KEYS, in order (after the prelude's, for a per-run script)."""
    keys_tail: str = ""
    """The name of the keys that follow, as many as the call has: ``<name>_from`` is the first's
    index (a per-run script's run to ``#KEYS - 5``, before the prelude's last five)."""
    args_tail: str = ""
    """The name of the arguments that follow its dataclass's: ``<name>_from`` is the first's index."""
    reply: type | None = None
    """What it answers, where a type says (an enum, or a dataclass that parses it)."""
    preludes: tuple[str, ...] = ()
    read_only: bool = False
    """It writes nothing: declared ``no-writes``, so a full Redis still runs it."""
    payloads: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Its arguments that are payloads, each with the run's field it is (payload_codec.FIELDS)."""

    @property
    def per_run(self) -> bool:
        return LIB in self.preludes

    @property
    def first_arg(self) -> int:
        """The 0-based ARGV position of its dataclass's first field."""
        return PER_RUN_ARGV if self.per_run else 0

    @property
    def arg_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in fields(self.args))

    def payload_positions(self) -> tuple[tuple[int, str], ...]:
        """The 0-based ARGV positions of its payloads, each with its run field."""
        index = {name: i for i, name in enumerate(self.arg_names)}
        return tuple((self.first_arg + index[name], run_field) for name, run_field in self.payloads.items())

    def names(self) -> dict[str, str]:
        """Each generated local and what it holds (``ARGV[4]``, ``KEYS[19]``, an index)."""
        out: dict[str, str] = {}
        key_at = PER_RUN_KEYS if self.per_run else 0
        for i, name in enumerate(self.keys, start=key_at + 1):
            out[name] = f"KEYS[{i}]"
        if self.keys_tail:
            out[f"{self.keys_tail}_from"] = str(key_at + len(self.keys) + 1)
        for i, name in enumerate(self.arg_names, start=self.first_arg + 1):
            out[name] = f"ARGV[{i}]"
        if self.args_tail:
            out[f"{self.args_tail}_from"] = str(self.first_arg + len(self.arg_names) + 1)
        return out

    def locals(self) -> str:
        """The Lua lines that name its KEYS and ARGV, for the top of its body."""
        lines = [f"-- KEYS and ARGV as store/registry.py's entry {self.name!r} names them."]
        lines += [f"local {name} = {value}" for name, value in self.names().items()]
        return "\n".join(lines)


def _payloads(**names: str) -> Mapping[str, str]:
    return MappingProxyType(names)


ENTRIES: tuple[Script, ...] = (
    # -- per-run: the prelude's keys and arguments first -------------------------------------------
    Script(
        "create_run",
        c.CreateArgs,
        keys=("K_EXPECTED", "K_TEMPLATE"),
        keys_tail="more",
        reply=c.Created,
        preludes=(LIB, HISTORY, PARENT),
        payloads=_payloads(
            inputs="inputs", state="state", fork_checkpoint="checkpoint", fork_output="output"
        ),
    ),
    Script("claim", c.ClaimArgs, reply=c.ClaimReply, preludes=(LIB, HISTORY)),
    Script(
        "succeed",
        c.SucceedArgs,
        reply=c.Succeeded,
        preludes=(LIB, HISTORY),
        payloads=_payloads(output="output", checkpoint="checkpoint"),
    ),
    Script("fail", c.FailArgs, reply=c.Failed, preludes=(LIB,)),
    Script(
        "dead_letter",
        c.DeadLetterArgs,
        keys=("K_TEMPLATE",),
        reply=c.DeadLettered,
        preludes=(LIB,),
        payloads=_payloads(inputs="inputs", state="state"),
    ),
    Script("release", c.ReleaseArgs, reply=c.Released, preludes=(LIB,)),
    Script("reap", c.ReapArgs, reply=c.Reaped, preludes=(LIB,)),
    Script("cancel", c.CancelArgs, preludes=(LIB,)),
    Script("replay", c.ReplayArgs, preludes=(LIB, HISTORY)),
    Script("purge", c.NoArgs, preludes=(LIB,)),
    Script("prune", c.PruneArgs, preludes=(LIB,)),
    Script("hold_unserved", c.HoldArgs, reply=c.Unserved, preludes=(LIB,)),
    Script("hold_version", c.HoldVersionArgs, keys=("K_HELD",), reply=c.VersionHold, preludes=(LIB,)),
    Script("wake_version", c.WakeVersionArgs, keys=("K_HELD",), preludes=(LIB,)),
    Script(
        "upgrade",
        c.UpgradeArgs,
        keys=("K_HELD",),
        preludes=(LIB, HISTORY),
        payloads=_payloads(checkpoint="checkpoint"),
    ),
    Script("wait", c.WaitArgs, reply=c.WaitReply, preludes=(LIB,)),
    Script(
        "signal",
        c.SignalArgs,
        keys=("K_BROKER",),
        reply=c.SignalReply,
        preludes=(LIB,),
        payloads=_payloads(value="signal"),
    ),
    Script("wait_children", c.WaitChildrenArgs, reply=c.WaitChildrenReply, preludes=(LIB,)),
    Script("child_ended", c.ChildEndedArgs, reply=c.ToldParentReply, preludes=(LIB,)),
    Script("call_retried", c.CallRetriedArgs, reply=c.CallRetried, preludes=(LIB,)),
    # -- standalone: their own small KEYS layout ---------------------------------------------------
    Script("renew_lease", c.RenewArgs, keys=("K_RUN", "K_LEASES"), reply=c.Lease),
    Script("ack_due", c.AckDueArgs, keys=("K_DUE",)),
    Script("lock_release", c.LockReleaseArgs, keys=("K_LOCK",)),
    Script("swap_payload", c.SwapPayloadArgs, keys=("K_HOLDER",)),
    Script("reschedule_due", c.RescheduleArgs, keys=("K_DUE", "K_RUN")),
    Script(
        "save_checkpoint",
        c.SaveArgs,
        keys=("K_RUN", "K_CKPT", "K_EVENTS", "K_MEMO"),
        keys_tail="slots",
        args_tail="members",
        reply=c.Saved,
        preludes=(HISTORY,),
        payloads=_payloads(payload="checkpoint"),
    ),
    Script(
        "record",
        c.RecordArgs,
        keys=("K_RUN", "K_MEMO", "K_LANES"),
        keys_tail="slots",
        args_tail="members",
        payloads=_payloads(value="record"),
    ),
    Script("emit", c.EmitArgs, keys=("K_RUN", "K_STREAM", "K_MEMO"), args_tail="items", reply=c.EmitReply),
    Script(
        "read_checkpoint",
        c.ReadCheckpointArgs,
        keys=("K_RUN", "K_CKPT", "K_INPUTS"),
        reply=c.CheckpointReply,
        preludes=(HISTORY,),
        read_only=True,
    ),
    Script(
        "list_checkpoints",
        c.NoArgs,
        keys=("K_RUN",),
        reply=c.CheckpointListReply,
        preludes=(HISTORY,),
        read_only=True,
    ),
    Script("worker_beat", c.WorkerBeatArgs, keys=("K_WORKERS", "K_WORKER"), keys_tail="served"),
    Script("worker_leave", c.WorkerLeaveArgs, keys=("K_WORKERS", "K_WORKER"), keys_tail="served"),
    Script(
        "limit_acquire",
        c.LimitArgs,
        keys=("K_RUN", "K_EVENTS", "K_LIMITS", "K_TAT", "K_SLOTS", "K_STATS"),
        reply=c.LimitReply,
        preludes=(LIMIT,),
    ),
    Script(
        "limit_take",
        c.TakeArgs,
        keys=("K_TAT", "K_SLOTS", "K_STATS", "K_GRANT"),
        reply=c.LimitReply,
        preludes=(LIMIT,),
    ),
    Script("limit_granted", c.GrantedArgs, keys=("K_RUN", "K_EVENTS"), preludes=(LIMIT,)),
    Script(
        "reaper_tick",
        c.TickArgs,
        keys=("K_LOCK", "K_LEASES", "K_DUE", "K_SUCCEEDED", "K_DEAD", "K_CANCELLED", "K_PASS", "K_ENDED"),
        reply=c.TickReply,
        preludes=(PASS,),
    ),
    Script("schedule_put", c.SchedulePutArgs, keys=("K_SCHEDULES", "K_NEXT")),
    Script("schedule_advance", c.ScheduleAdvanceArgs, keys=("K_NEXT", "K_LAST")),
    Script(
        "activity_counts",
        c.ActivityArgs,
        keys=("K_ALL", "K_SUCCEEDED", "K_DEAD", "K_RETRIES"),
        read_only=True,
    ),
    Script(
        "child_started",
        c.ChildStartedArgs,
        keys=("K_PARENT", "K_PARENT_MEMO", "K_PARENT_MAILBOX"),
        preludes=(PARENT,),
    ),
    Script("unhold_version", c.UnholdArgs, keys=("K_HELD",)),
    Script("prune_tag", c.NoArgs, keys=("K_NAMES", "K_INDEX"), keys_tail="runs", args_tail="run_ids"),
)

SCRIPTS: Mapping[str, Script] = MappingProxyType({entry.name: entry for entry in ENTRIES})
"""Each script's entry, by name."""


def entry(name: str) -> Script:
    """Script ``name``'s entry; KeyError names a script that has none."""
    try:
        return SCRIPTS[name]
    except KeyError:
        raise KeyError(f"no Lua script named {name!r}") from None
