"""When schedules fire (core/schedules.py): periods, cron (croniter), and catch-up after an outage."""

from __future__ import annotations

import pytest

from reflexr_graph.core.schedules import (
    LATE_GRACE_S,
    MAX_CATCHUP,
    Catchup,
    Schedule,
    check_cron,
    check_name,
    fire_key,
    next_fire_ms,
    parse_every,
    plan,
)
from reflexr_graph.errors import InvalidInputs

S = 1000
MINUTE = 60 * S


def every(seconds: int, catchup: Catchup = Catchup.LATEST) -> Schedule:
    return Schedule(name="n", graph="g", every_s=seconds, catchup=catchup)


def cron(expr: str, catchup: Catchup = Catchup.LATEST) -> Schedule:
    return Schedule(name="n", graph="g", cron=expr, catchup=catchup)


def test_a_period_fires_on_its_multiples_since_the_epoch() -> None:
    assert next_fire_ms(every(30), 0) == 30 * S
    assert next_fire_ms(every(30), 29_999) == 30 * S
    assert next_fire_ms(every(30), 30 * S) == 60 * S


def test_a_cron_expression_fires_at_its_times_in_utc() -> None:
    # 2026-01-01T00:00:00Z
    midnight = 1767225600 * S
    assert next_fire_ms(cron("*/5 * * * *"), midnight) == midnight + 5 * MINUTE
    assert next_fire_ms(cron("0 9 * * *"), midnight) == midnight + 9 * 60 * MINUTE
    assert next_fire_ms(cron("0 0 * * 1"), midnight) == midnight + 4 * 24 * 60 * MINUTE  # a Thursday


def test_fires_on_time_are_made_whatever_the_catchup() -> None:
    late = int(LATE_GRACE_S * S)
    for catchup in Catchup:
        assert plan(every(1, catchup), 10 * S, 10 * S + late) == ([10 * S, 11 * S, 12 * S, 13 * S], 14 * S)


@pytest.mark.parametrize(
    ("catchup", "fires"),
    [
        (Catchup.NONE, [97, 98, 99, 100]),
        (Catchup.LATEST, [96, 97, 98, 99, 100]),
        (Catchup.ALL, list(range(10, 101))),
    ],
)
def test_fires_missed_in_an_outage_follow_the_catchup(catchup: Catchup, fires: list[int]) -> None:
    assert plan(every(1, catchup), 10 * S, 100 * S) == ([f * S for f in fires], 101 * S)


def test_catchup_latest_of_a_cron_runs_the_last_missed_fire_once() -> None:
    fires, next_ms = plan(cron("*/5 * * * *"), 5 * MINUTE, 61 * MINUTE)
    assert (fires, next_ms) == ([60 * MINUTE], 65 * MINUTE)
    assert plan(cron("*/5 * * * *", Catchup.NONE), 5 * MINUTE, 61 * MINUTE) == ([], 65 * MINUTE)


def test_catchup_all_goes_a_bounded_batch_per_pass() -> None:
    fires, next_ms = plan(every(1, Catchup.ALL), S, (MAX_CATCHUP + 100) * S)
    assert len(fires) == MAX_CATCHUP and next_ms == (MAX_CATCHUP + 1) * S


def test_the_fire_key_names_the_schedule_and_the_fire_time() -> None:
    assert fire_key("nightly", 1767225600 * S) == "schedule:nightly:2026-01-01T00:00:00Z"


@pytest.mark.parametrize("text", ["", "0s", "10", "1.5s", "5 minutes", "-1s", "1w"])
def test_bad_periods_are_refused(text: str) -> None:
    with pytest.raises(InvalidInputs):
        parse_every(text)


def test_periods_read_as_seconds() -> None:
    assert [parse_every(t) for t in ("1s", "90s", "5m", "2h", "1d")] == [1, 90, 300, 7200, 86400]


@pytest.mark.parametrize("expr", ["", "* * * *", "*/5 * * * * *", "61 * * * *", "nonsense"])
def test_bad_cron_expressions_are_refused(expr: str) -> None:
    with pytest.raises(InvalidInputs):
        check_cron(expr)


@pytest.mark.parametrize("name", ["", "a b", "a:b", "-x", "x" * 65])
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidInputs):
        check_name(name)
