"""Schedules in the store: their definitions, next fire times and last fires, and the run a fire
makes (operations both clients and the fleet's scheduler run).

A fire's run is created with the idempotency key of its fire time (core/schedules.py: fire_key),
so two schedulers that make the same fire get the same run, and the one whose
``schedule_advance.lua`` moves the schedule on is the only one that moves it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from reflexr_graph import clock, errors
from reflexr_graph.core.schedules import SCHEDULE_TAG, Schedule, fire_key, next_fire_ms
from reflexr_graph.core.tracing import current_trace_context
from reflexr_graph.model import TERMINAL, ScheduleInfo, Status
from reflexr_graph.store import keys
from reflexr_graph.store.attempts import NewRun, new_run
from reflexr_graph.store.contracts import ScheduleAdvanceArgs, SchedulePutArgs
from reflexr_graph.store.ops import Eval, Op, batch, cmd
from reflexr_graph.store.records import text, text_map

DUE_BATCH = 100
"""The most schedules one scheduler pass reads from the low end of the next-fire index."""


@dataclass(frozen=True)
class Due:
    """What one read of the next-fire index found: the schedules due now with the fire time each
    was planned at (epoch ms), and the first fire time after them (None: none scheduled)."""

    due: list[tuple[str, int]]
    next_ms: int | None


def _missing(name: str) -> errors.ScheduleNotFound:
    return errors.ScheduleNotFound(f"no schedule named {name!r}; see `schedule list`")


def put_schedule(schedule: Schedule, *, change: bool) -> Op[None]:
    """Write a schedule with its next fire time (none while paused). Adding one whose name is taken
    is refused (OperationRefused); changing one that does not exist is ScheduleNotFound."""
    next_ms = None if schedule.paused else next_fire_ms(schedule, clock.now_ms())
    args = SchedulePutArgs(schedule.name, schedule.model_dump_json(), next_ms, change).argv()
    written = yield Eval("schedule_put", [keys.SCHEDULES, keys.SCHEDULE_NEXT], args)
    if int(written) == 0:
        raise errors.OperationRefused(
            f"a schedule named {schedule.name!r} exists; delete it first, or pick another name"
        )
    if int(written) < 0:
        raise _missing(schedule.name)


def read_schedule(name: str) -> Op[Schedule]:
    """The definition of schedule ``name``; ScheduleNotFound when there is none."""
    raw = yield cmd("hget", keys.SCHEDULES, name)
    if raw is None:
        raise _missing(name)
    return Schedule.model_validate_json(raw)


def _last(raw: object) -> tuple[float | None, str | None]:
    if raw is None:
        return None, None
    fire, _, run_id = text(raw).partition("|")
    return int(fire) / 1000, run_id or None


def list_schedules() -> Op[list[ScheduleInfo]]:
    """Every schedule, by name, with its next and last fire."""
    defs, nexts, lasts = yield batch(
        [
            cmd("hgetall", keys.SCHEDULES),
            cmd("zrange", keys.SCHEDULE_NEXT, 0, -1, withscores=True),
            cmd("hgetall", keys.SCHEDULE_LAST),
        ]
    )
    next_of = {text(m): float(s) / 1000 for m, s in nexts}
    last_of = text_map(lasts)
    found = []
    for name, raw in sorted(text_map(defs).items()):
        fire, run_id = _last(last_of.get(name))
        info = ScheduleInfo(
            schedule=Schedule.model_validate_json(raw),
            next_fire_at=next_of.get(name),
            last_fire_at=fire,
            last_run_id=run_id,
        )
        found.append(info)
    return found


def delete_schedule(name: str) -> Op[None]:
    """Delete schedule ``name`` (its runs stay); ScheduleNotFound when there is none."""
    removed, _next, _last_fire = yield batch(
        [
            cmd("hdel", keys.SCHEDULES, name),
            cmd("zrem", keys.SCHEDULE_NEXT, name),
            cmd("hdel", keys.SCHEDULE_LAST, name),
        ],
        transaction=True,
    )
    if not removed:
        raise _missing(name)


def due_schedules(now_ms: int, limit: int = DUE_BATCH) -> Op[Due]:
    """The schedules due at ``now_ms`` and the first fire time after them, in one command."""
    rows = yield cmd("zrange", keys.SCHEDULE_NEXT, 0, limit, withscores=True)
    due = [(text(m), int(s)) for m, s in rows if int(s) <= now_ms][:limit]
    later = [int(s) for _m, s in rows if int(s) > now_ms]
    return Due(due, later[0] if later else None)


def previous_active(name: str) -> Op[bool]:
    """Whether the schedule's last run is still active (queued, running, retrying or waiting)."""
    last = yield cmd("hget", keys.SCHEDULE_LAST, name)
    _fire, run_id = _last(last)
    if run_id is None:
        return False
    status = yield cmd("hget", keys.run(run_id), "status")
    return status is not None and Status(text(status)) not in TERMINAL


def fire_run(
    schedule: Schedule, fire_ms: int, max_attempts: int, dispatch_grace_ms: int
) -> Op[tuple[str, bool]]:
    """Create the run of one fire, tagged ``schedule=<name>`` with the fire's idempotency key;
    ``(run_id, created)``, created False when another scheduler (or a trigger) made it first. The
    caller sends its message when created."""
    key = fire_key(schedule.name, fire_ms)
    run = NewRun(
        # In the key's shard, so the run and its key are one slot on a cluster (keys.run_id_in).
        run_id=keys.new_run_id(schedule.graph, key),
        graph=schedule.graph,
        # Validated as JSON when the schedule was added (the client's schema check).
        inputs_json=json.dumps(schedule.inputs, separators=(",", ":")),
        state_json=None,
        idempotency_key=key,
        max_attempts=max_attempts,
        dispatch_grace_ms=dispatch_grace_ms,
        trace_context=current_trace_context(),
        tags={SCHEDULE_TAG: schedule.name},
    )
    return (yield from new_run(run))


def advance(name: str, planned_ms: int, next_ms: int, last: tuple[int, str] | None) -> Op[bool]:
    """Move the schedule's next fire from ``planned_ms`` to ``next_ms`` and record its last fire;
    False when another scheduler moved it first, or it was paused or deleted meanwhile."""
    fire, run_id = last if last is not None else (None, "")
    args = ScheduleAdvanceArgs(name, planned_ms, next_ms, fire, run_id).argv()
    moved = yield Eval("schedule_advance", [keys.SCHEDULE_NEXT, keys.SCHEDULE_LAST], args)
    return bool(int(moved))


def record_last(name: str, fire_ms: int, run_id: str) -> Op[None]:
    """Record a run made outside the clock (``schedule trigger``) as the schedule's last, so
    ``--overlap skip`` waits for it too."""
    yield cmd("hset", keys.SCHEDULE_LAST, name, f"{fire_ms}|{run_id}")
