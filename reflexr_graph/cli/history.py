"""``history``: a run's events as a timeline, with readable times and how long each step took.

Event fields ending in ``_at`` (and ``until``) are epoch milliseconds (``due_at`` of a retry); they are shown
as a time of day and relative to their event ("in 2.0s"). A step's duration is the time from
the start of the attempt, or the previous checkpoint, to the next ``run_progressed`` (or the
``attempt_failed`` or ``run_succeeded`` that ended it). Between two checkpoints there may be
several steps, when the boundaries between them are not safe to save.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from rich import box
from rich.table import Table

from reflexr_graph.cli import render
from reflexr_graph.model import (
    CHILD_WAIT_PREFIX,
    CHILDREN_WAIT_PREFIX,
    LIMIT_WAIT_PREFIX,
    VERSION_WAIT_PREFIX,
    Event,
    RunEvent,
)

_MS_EPOCH_FLOOR = 10**11
"""An ``*_at`` value above this is epoch milliseconds (1973 in ms); below, epoch seconds."""


@dataclass(frozen=True)
class Row:
    at: float
    took: float | None
    event: str
    details: str


def duration(seconds: float) -> str:
    """``850ms``, ``3.2s``, ``4m05s``, ``2h03m``."""
    seconds = abs(seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


def clock_time(epoch_s: float, with_date: bool = False) -> str:
    moment = datetime.fromtimestamp(epoch_s, UTC)
    text = moment.strftime("%H:%M:%S.%f")[:-3]
    return f"{moment:%Y-%m-%d} {text}" if with_date else text


def _epoch_s(raw: str) -> float | None:
    if not raw.isdigit():
        return None
    value = int(raw)
    return value / 1000 if value > _MS_EPOCH_FLOOR else float(value)


_MOMENTS = frozenset({"until"})
"""Fields that hold epoch milliseconds without the ``_at`` suffix (``waiting_for_worker``'s)."""


WAITS_FOR = (
    (LIMIT_WAIT_PREFIX, "limit {}"),
    (CHILD_WAIT_PREFIX, "child {}"),
    (CHILDREN_WAIT_PREFIX, "{} children"),
    (VERSION_WAIT_PREFIX, "version {}"),
)
"""What a run waits for, other than a signal, as a wait's ``signal`` field says it (model.py)."""


def _detail(key: str, value: str, event_at: float) -> str:
    is_moment = key.endswith("_at") or key in _MOMENTS
    if is_moment and (moment := _epoch_s(value)) is not None:
        delta = moment - event_at
        relative = f"in {duration(delta)}" if delta >= 0 else f"{duration(delta)} before"
        return f"{key.removesuffix('_at')} {clock_time(moment)} ({relative})"
    if key == "seq":
        return f"checkpoint #{value}"
    if key == "from_run":
        return f"forked from {value}"
    if key == "state_edited":
        return "state replaced" if value == "1" else "state as saved"
    if key == "dropped":
        return f"{value} later checkpoint(s) dropped"
    if key == "next_node":
        return f"next {value}"
    if key == "size" and value.isdigit():
        return render.size(int(value))
    if key == "waited_ms" and value.isdigit():
        return f"waited {duration(int(value) / 1000)}"
    if key == "delay_ms" and value.isdigit():
        return f"next try in {duration(int(value) / 1000)}"
    if key == "signal":
        for prefix, text in WAITS_FOR:
            if value.startswith(prefix):
                return text.format(value.removeprefix(prefix))
    return f"{key}={value}"


def details(event: RunEvent) -> str:
    """The event's fields in the order they were written, empty ones left out."""
    return ", ".join(_detail(k, v, event.at) for k, v in event.fields.items() if v != "")


_WITHIN_A_STEP = frozenset(
    {
        Event.LIMIT_WAITED,
        Event.BOUNDARIES_SKIPPED,
        Event.WORK_REUSED,
        Event.CANCEL_REQUESTED,
        Event.CALL_RETRIED,
    }
)
"""Events written while a step runs, on its way to the next checkpoint (a limit's grant, the notes
a checkpoint carries, a cancel that waits for the step, a durable call tried again): the step goes
on, and so does its time."""
_ENDING_A_STEP = frozenset({Event.RUN_PROGRESSED, Event.ATTEMPT_FAILED, Event.RUN_SUCCEEDED})
"""Events that end the step(s) since the previous one: a checkpoint, a failure, the graph's end."""


def rows(events: list[RunEvent]) -> list[Row]:
    """One row per event, with the duration of the step a progress or failure event ends."""
    found: list[Row] = []
    step_began: float | None = None
    for event in events:
        took = None
        if event.type == Event.ATTEMPT_STARTED:
            step_began = event.at
        elif event.type in _ENDING_A_STEP and step_began is not None:
            took = event.at - step_began
            step_began = event.at if event.type == Event.RUN_PROGRESSED else None
        elif event.type != Event.RUN_PROGRESSED and event.type not in _WITHIN_A_STEP:
            step_began = None  # retrying, dead, cancelled...: no step runs until the next attempt
        found.append(Row(event.at, took, event.type, details(event)))
    return found


def show(events: list[RunEvent], run_id: str) -> None:
    """A run's events, oldest first; times are UTC, the date is in the title."""
    if not events:
        render.out.print(f"no events for {render.plain(run_id)}")
        return
    first_day = datetime.fromtimestamp(events[0].at, UTC).date()
    table = Table(
        title=f"history of {render.plain(run_id)}, {first_day:%Y-%m-%d} UTC",
        box=box.SIMPLE_HEAD,
        show_edge=False,
    )
    table.add_column("time", no_wrap=True)
    table.add_column("took", justify="right", no_wrap=True)
    table.add_column("event", no_wrap=True)
    table.add_column("details", overflow="fold")
    for row in rows(events):
        other_day = datetime.fromtimestamp(row.at, UTC).date() != first_day
        took = "" if row.took is None else duration(row.took)
        table.add_row(clock_time(row.at, with_date=other_day), took, row.event, render.plain(row.details))
    render.out.print(table)
