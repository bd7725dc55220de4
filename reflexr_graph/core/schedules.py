"""Schedules, sans-IO: what one is, when it fires, and which fires a late scheduler still makes.

A schedule fires a run of its graph on a clock: a cron expression (five fields, UTC, parsed and
stepped by croniter) or a fixed period (``--every 30s``), whose fires fall on whole multiples of
the period since the epoch, so every scheduler computes the same fire times. Each fire is one
run, tagged ``schedule=<name>``, with the idempotency key ``schedule:<name>:<fire time>``
(:func:`fire_key`): however many schedulers see a fire, it makes one run.

A fire found more than :data:`LATE_GRACE_S` late was missed (the workers were down); the
schedule's ``catchup`` decides what becomes of the missed ones: ``none`` drops them, ``latest``
runs the last of them, ``all`` runs each (at most :data:`MAX_CATCHUP` per pass).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from croniter import croniter
from pydantic import BaseModel, ConfigDict

from reflexr_graph import errors

LATE_GRACE_S = 3.0
"""A fire found this late or less is on time, whatever ``catchup`` says: a busy scheduler that
wakes a little late still makes it."""
MAX_CATCHUP = 1000
"""The most missed fires one pass makes with ``catchup=all``; the next pass goes on with the rest."""
MIN_EVERY_S = 1
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
_EVERY = re.compile(r"(\d+)(s|m|h|d)")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class Overlap(StrEnum):
    """What a fire does while the schedule's previous run is still active."""

    SKIP = "skip"
    ALLOW = "allow"


class Catchup(StrEnum):
    """What becomes of the fires missed while no scheduler ran."""

    NONE = "none"
    LATEST = "latest"
    ALL = "all"


class Schedule(BaseModel):
    """A schedule as stored (``rg:schedules``): its clock, what it runs, and its policies."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    graph: str
    cron: str | None = None
    every_s: int | None = None
    inputs: Any = None
    overlap: Overlap = Overlap.ALLOW
    catchup: Catchup = Catchup.LATEST
    paused: bool = False
    created_at: float = 0.0


def _invalid(field: str, msg: str) -> errors.InvalidInputs:
    return errors.InvalidInputs(f"invalid schedule: {msg}", [{"loc": [field], "msg": msg, "type": field}])


def check_name(name: str) -> str:
    """A schedule's name: 1 to 64 of ``A-Z a-z 0-9 _ . -`` (it goes into a tag and a key)."""
    if not _NAME.fullmatch(name):
        raise _invalid("name", "a schedule name is 1 to 64 of A-Z a-z 0-9 _ . - starting with a letter/digit")
    return name


def parse_every(text: str) -> int:
    """``30s``, ``5m``, ``2h`` or ``1d`` as whole seconds (at least one)."""
    found = _EVERY.fullmatch(text.strip())
    seconds = int(found[1]) * _UNITS[found[2]] if found else 0
    if seconds < MIN_EVERY_S:
        raise _invalid("every", "a period is a whole number and a unit, s, m, h or d (at least 1s), e.g. 30s")
    return seconds


def check_cron(expr: str) -> str:
    """A five-field cron expression (minute hour day month weekday, UTC), as croniter reads it."""
    if len(expr.split()) != 5 or not croniter.is_valid(expr):
        raise _invalid("cron", "a cron expression has five fields: minute hour day-of-month month weekday")
    return expr


def check_clock(cron: str | None, every_s: int | None) -> None:
    if (cron is None) == (every_s is None):
        raise _invalid("cron", "give a schedule exactly one of a cron expression and a period (every)")


def next_fire_ms(schedule: Schedule, after_ms: int) -> int:
    """The schedule's first fire time strictly after ``after_ms`` (epoch ms, whole seconds)."""
    if schedule.every_s is not None:
        period = schedule.every_s * 1000
        return (after_ms // period + 1) * period
    assert schedule.cron is not None
    start = datetime.fromtimestamp(after_ms / 1000, UTC)
    return int(croniter(schedule.cron, start).get_next(float) * 1000)


def plan(schedule: Schedule, due_ms: int, now_ms: int) -> tuple[list[int], int]:
    """The fires to make now, oldest first, of a schedule whose next fire was ``due_ms``, and its
    next fire time after them. Fires more than LATE_GRACE_S late are missed: ``catchup`` says which
    of those still run."""
    grace_ms = int(LATE_GRACE_S * 1000)
    missed: list[int] = []
    on_time: list[int] = []
    fire = due_ms
    while fire <= now_ms:
        if now_ms - fire <= grace_ms:
            on_time.append(fire)
        elif schedule.catchup is Catchup.ALL:
            if len(missed) >= MAX_CATCHUP:
                return missed, fire  # the next pass goes on from here
            missed.append(fire)
        else:
            # Only the latest missed fire is ever kept; a period schedule gets there in one step.
            fire = _skip_ahead(schedule, fire, now_ms - grace_ms)
            missed[-1:] = [fire]
        fire = next_fire_ms(schedule, fire)
    kept = [] if schedule.catchup is Catchup.NONE else missed
    return [*kept, *on_time], fire


def _skip_ahead(schedule: Schedule, fire: int, limit_ms: int) -> int:
    """The last fire before ``limit_ms`` from ``fire`` on, in one step for a period schedule."""
    if schedule.every_s is None:
        return fire
    period = schedule.every_s * 1000
    return max(fire, ((limit_ms - 1) // period) * period)


def fire_time(fire_ms: int) -> str:
    """A fire time as its idempotency key and events name it: ISO 8601, UTC, whole seconds."""
    return datetime.fromtimestamp(fire_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fire_key(name: str, fire_ms: int) -> str:
    """The idempotency key of the run a fire makes: one run per schedule and fire time."""
    return f"schedule:{name}:{fire_time(fire_ms)}"


SCHEDULE_TAG = "schedule"
"""The tag every run of a schedule carries: ``schedule=<name>``."""
