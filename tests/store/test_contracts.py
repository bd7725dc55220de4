"""Each script's ARGV is described once (store/contracts.py): the dataclass's fields are the ARGV
positions the script reads, in order, so a field added or removed shows in the script too."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest

from reflexr_graph.store import contracts, scripts

PREFIX = 3
"""ARGV[1..3] of every per-run script: run id, now, idempotency key guess (ops.per_run)."""

DESCRIBED: dict[str, type[contracts.Args]] = {
    "create_run": contracts.CreateArgs,
    "claim": contracts.ClaimArgs,
    "renew_lease": contracts.RenewArgs,
    "save_checkpoint": contracts.SaveArgs,
    "succeed": contracts.SucceedArgs,
    "fail": contracts.FailArgs,
    "release": contracts.ReleaseArgs,
    "dead_letter": contracts.DeadLetterArgs,
    "reap": contracts.ReapArgs,
    "prune": contracts.PruneArgs,
    "cancel": contracts.CancelArgs,
    "replay": contracts.ReplayArgs,
    "reaper_tick": contracts.TickArgs,
    "wait": contracts.WaitArgs,
    "signal": contracts.SignalArgs,
    "hold_unserved": contracts.HoldArgs,
    "limit_acquire": contracts.LimitArgs,
    "limit_take": contracts.TakeArgs,
    "limit_granted": contracts.GrantedArgs,
    "schedule_put": contracts.SchedulePutArgs,
    "schedule_advance": contracts.ScheduleAdvanceArgs,
    "emit": contracts.EmitArgs,
}


@pytest.mark.parametrize("name", sorted(DESCRIBED))
def test_the_dataclass_covers_exactly_the_argv_the_script_reads(name: str) -> None:
    body = scripts._read(name)
    code = "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("--"))
    read = {int(n) for n in re.findall(r"ARGV\[(\d+)\]", code)}
    header = "\n".join(line for line in body.splitlines() if line.startswith("--"))
    assert f"contracts.py {DESCRIBED[name].__name__}" in header, "the header names its contract"
    offset = PREFIX if name in scripts.PER_RUN else 0
    last = offset + len(fields(DESCRIBED[name]))
    assert max(read, default=offset) <= last, "the script reads an ARGV the dataclass does not describe"
    # Every described position is named in the script's header.
    for n in range(offset + 1, last + 1):
        assert f"ARGV[{n}]" in header, n


def test_argv_lays_flags_and_missing_values_out_as_lua_reads_them() -> None:
    args = contracts.ReplayArgs(from_start=True, from_seq=None)
    assert args.argv() == ["1", "", ""]  # and no one named as who replays
    assert contracts.CancelArgs(60, now=False).argv() == [60, "0", ""]
    assert contracts.CancelArgs(60, now=True, by="ana").argv() == [60, "1", "ana"]
