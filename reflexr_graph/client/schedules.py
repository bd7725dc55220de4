"""What a client does with schedules, written once as operations for ``Client`` and ``AsyncClient``:
add one (its clock and inputs checked against the published graph first), pause, resume, trigger."""

from __future__ import annotations

from typing import Any

from reflexr_graph import clock, errors, schemas
from reflexr_graph.client.core import DISPATCH_GRACE_MS, ClientCore
from reflexr_graph.client.payload import plain, to_json
from reflexr_graph.core.schedules import (
    Catchup,
    Overlap,
    Schedule,
    check_clock,
    check_cron,
    check_name,
    parse_every,
)
from reflexr_graph.model import ScheduleInfo
from reflexr_graph.store.ops import Op, Publish
from reflexr_graph.store.schedules import fire_run, list_schedules, put_schedule, read_schedule, record_last


def _every(every: str | int | None) -> int | None:
    if every is None or isinstance(every, int):
        return parse_every(f"{every}s") if isinstance(every, int) else None
    return parse_every(every)


def add_schedule(
    core: ClientCore,
    name: str,
    graph: str,
    *,
    cron: str | None,
    every: str | int | None,
    inputs: Any,
    overlap: Overlap | str,
    catchup: Catchup | str,
) -> Op[ScheduleInfo]:
    """Check and add a schedule; OperationRefused when the name is taken."""
    check_name(name)
    every_s = _every(every)
    check_clock(cron, every_s)
    if cron is not None:
        check_cron(cron)
    entry, _workers = yield from core.published(graph)
    inputs = plain(inputs, "inputs")
    schemas.validate(entry, inputs, None)
    to_json(inputs, "inputs", core.settings.payload_limit)
    try:
        schedule = Schedule(
            name=name, graph=graph, cron=cron, every_s=every_s, inputs=inputs,
            overlap=Overlap(overlap), catchup=Catchup(catchup), created_at=clock.now(),
        )  # fmt: skip
    except ValueError:
        raise errors.InvalidInputs(
            "invalid schedule: overlap is skip or allow, and catchup none, latest or all",
            [{"loc": ["overlap"], "msg": "skip or allow; catchup: none, latest or all", "type": "enum"}],
        ) from None
    yield from put_schedule(schedule, change=False)
    return (yield from schedule_info(name))


def schedule_info(name: str) -> Op[ScheduleInfo]:
    """Schedule ``name`` with its next and last fire; ScheduleNotFound when there is none."""
    yield from read_schedule(name)
    found = [s for s in (yield from list_schedules()) if s.schedule.name == name]
    if not found:
        raise errors.ScheduleNotFound(f"no schedule named {name!r}; see `schedule list`")
    return found[0]


def set_paused(name: str, paused: bool) -> Op[ScheduleInfo]:
    """Pause a schedule (no fire until resumed), or resume it from its next fire after now: the
    fires of the pause are not caught up."""
    schedule = yield from read_schedule(name)
    yield from put_schedule(schedule.model_copy(update={"paused": paused}), change=True)
    return (yield from schedule_info(name))


def trigger(core: ClientCore, name: str) -> Op[str]:
    """Fire schedule ``name`` now, outside its clock (paused or not): one run, as a fire at the
    current second makes (the same run, if its clock fires in that second too)."""
    schedule = yield from read_schedule(name)
    entry, _workers = yield from core.published(schedule.graph)
    fire_ms = clock.now_ms() // 1000 * 1000
    run_id, created = yield from fire_run(schedule, fire_ms, entry.max_attempts, DISPATCH_GRACE_MS)
    if created:
        yield Publish(run_id, schedule.graph)
    yield from record_last(name, fire_ms, run_id)
    return run_id
