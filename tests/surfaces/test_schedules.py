"""Schedules on the Client, the CLI and the API, and the scheduler's passes on a real Redis with
the clock set by the test (reflexr_graph/clock.py): fires, catch-up, overlap, pause, races."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator

import pytest
import redis

from reflexr_graph import clock
from reflexr_graph.client import Client
from reflexr_graph.core.schedules import LATE_GRACE_S
from reflexr_graph.errors import InvalidInputs, OperationRefused, ScheduleNotFound, UnknownGraph
from reflexr_graph.fleet.scheduler import MIN_WAIT_S, Scheduler
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from reflexr_graph.store.redis_store import RedisStore
from tests.surfaces.conftest import ApiServer, Cli
from tests.waiting import wait_for

JOB = {"key": "a", "n": 1}
T0 = 1_800_000_000.0
"""A whole minute (epoch s), where the fake clock starts."""


class FakeClock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake_clock() -> Iterator[FakeClock]:
    fake = FakeClock()
    previous = clock.set_source(fake)
    try:
        yield fake
    finally:
        clock.set_source(previous)


@pytest.fixture
def store(redis_url: str) -> Iterator[RedisStore]:
    s = RedisStore.from_url(redis_url)
    try:
        yield s
    finally:
        s.close()


def scheduler(store: RedisStore, sent: list[str] | None = None) -> Scheduler:
    def send(run_id: str, _graph: str) -> None:
        if sent is not None:
            sent.append(run_id)

    return Scheduler(store, send, default_max_attempts=1)


def fired(client: Client, name: str, r: redis.Redis) -> list[str]:
    """The fire times of the schedule's runs (their idempotency keys), oldest first."""
    runs = client.runs(tags={"schedule": name}, limit=10_000)
    found = [r.hget(keys.run(i.run_id), "idempotency_key") for i in runs]
    return sorted(k.decode().removeprefix(f"schedule:{name}:") for k in found if k is not None)


def test_a_schedule_is_added_listed_paused_resumed_and_deleted(client: Client, fake_clock: FakeClock) -> None:
    info = client.add_schedule("minutely", "counter", every="1m", inputs=JOB, overlap="skip")
    assert info.next_fire_at == T0 + 60 and info.last_run_id is None
    assert (info.schedule.every_s, info.schedule.overlap.value, info.schedule.catchup.value) == (
        60,
        "skip",
        "latest",
    )
    client.add_schedule("daily", "counter", cron="0 9 * * *", inputs=JOB)
    assert [s.schedule.name for s in client.schedules()] == ["daily", "minutely"]
    paused = client.pause_schedule("minutely")
    assert paused.schedule.paused and paused.next_fire_at is None
    fake_clock.now += 3600
    assert client.resume_schedule("minutely").next_fire_at == T0 + 3660
    client.delete_schedule("minutely")
    with pytest.raises(ScheduleNotFound):
        client.schedule("minutely")
    with pytest.raises(ScheduleNotFound):
        client.delete_schedule("minutely")


def test_what_a_schedule_refuses_is_refused_before_anything_is_written(
    client: Client, redis_client: redis.Redis
) -> None:
    client.add_schedule("taken", "counter", every=60, inputs=JOB)
    with pytest.raises(OperationRefused):
        client.add_schedule("taken", "counter", every=60, inputs=JOB)
    with pytest.raises(UnknownGraph):
        client.add_schedule("s", "nope", every=60, inputs=JOB)
    for bad in (
        {"every": 60, "inputs": {"key": "", "n": "secret-value"}},
        {"inputs": JOB},
        {"every": "1m", "cron": "* * * * *", "inputs": JOB},
        {"cron": "61 * * * *", "inputs": JOB},
        {"every": "1m", "inputs": JOB, "overlap": "sometimes"},
    ):
        with pytest.raises(InvalidInputs) as caught:
            client.add_schedule("s", "counter", **bad)  # type: ignore[arg-type]
        assert "secret-value" not in str(caught.value)
    assert redis_client.hkeys(keys.SCHEDULES) == [b"taken"]


def test_a_fire_makes_one_tagged_run_with_its_fire_key_and_sends_it(
    client: Client, store: RedisStore, fake_clock: FakeClock, redis_client: redis.Redis
) -> None:
    client.add_schedule("minutely", "counter", every="1m", inputs=JOB)
    sent: list[str] = []
    sched = scheduler(store, sent)
    assert sched.tick() == sched.interval_s  # nothing due: it sleeps its most
    fake_clock.now = T0 + 60.2
    sched.tick()
    assert fired(client, "minutely", redis_client) == ["2027-01-15T08:01:00Z"]
    (run,) = client.runs(tags={"schedule": "minutely"})
    assert sent == [run.run_id] and run.tags == {"schedule": "minutely"} and run.max_attempts == 1
    info = client.schedule("minutely")
    assert (info.last_run_id, info.last_fire_at, info.next_fire_at) == (run.run_id, T0 + 60, T0 + 120)
    sched.tick()
    assert len(sent) == 1  # the fire is made once


@pytest.mark.parametrize(("catchup", "runs"), [("none", 0), ("latest", 1), ("all", 10)])
def test_after_an_outage_catchup_decides_the_missed_fires(
    client: Client,
    store: RedisStore,
    fake_clock: FakeClock,
    redis_client: redis.Redis,
    catchup: str,
    runs: int,
) -> None:
    client.add_schedule("minutely", "counter", every="1m", inputs=JOB, catchup=catchup)
    fake_clock.now = T0 + 10 * 60 + LATE_GRACE_S + 1  # fires 1 to 10 were missed
    sched = scheduler(store)
    while sched.tick() == MIN_WAIT_S:  # a pass that made fires reads again at once
        pass
    found = fired(client, "minutely", redis_client)
    assert len(found) == runs
    if runs == 1:
        assert found == ["2027-01-15T08:10:00Z"]  # the latest of the missed fires
    assert client.schedule("minutely").next_fire_at == T0 + 11 * 60


def test_overlap_skip_makes_no_run_while_the_previous_one_is_active(
    client: Client, store: RedisStore, fake_clock: FakeClock, redis_client: redis.Redis
) -> None:
    client.add_schedule("minutely", "counter", every="1m", inputs=JOB, overlap="skip")
    sched = scheduler(store)
    fake_clock.now = T0 + 60
    sched.tick()
    fake_clock.now = T0 + 120
    sched.tick()  # the first run is still queued: no second
    assert fired(client, "minutely", redis_client) == ["2027-01-15T08:01:00Z"]
    client.cancel_many(tags={"schedule": "minutely"})
    fake_clock.now = T0 + 180
    sched.tick()
    assert fired(client, "minutely", redis_client) == ["2027-01-15T08:01:00Z", "2027-01-15T08:03:00Z"]


def test_a_paused_schedule_does_not_fire_and_trigger_fires_it_now(
    client: Client, store: RedisStore, fake_clock: FakeClock, redis_client: redis.Redis
) -> None:
    client.add_schedule("minutely", "counter", every="1m", inputs=JOB)
    client.pause_schedule("minutely")
    fake_clock.now = T0 + 600
    scheduler(store).tick()
    assert fired(client, "minutely", redis_client) == []
    run_id = client.trigger_schedule("minutely")
    assert client.get(run_id).tags == {"schedule": "minutely"}
    assert fired(client, "minutely", redis_client) == ["2027-01-15T08:10:00Z"]
    assert client.trigger_schedule("minutely") == run_id  # the same second is the same fire
    assert client.schedule("minutely").last_run_id == run_id


def test_schedulers_racing_on_the_same_fires_make_one_run_each(
    client: Client, redis_url: str, fake_clock: FakeClock, redis_client: redis.Redis
) -> None:
    client.add_schedule("fast", "counter", every="1s", inputs=JOB, catchup="all")
    fake_clock.now = T0 + 20  # twenty fires due at once
    stores = [RedisStore.from_url(redis_url) for _ in range(4)]
    sent: list[str] = []
    barrier = threading.Barrier(len(stores))

    def race(s: RedisStore) -> None:
        barrier.wait()
        sched = scheduler(s, sent)
        while sched.tick() == MIN_WAIT_S:
            pass

    threads = [threading.Thread(target=race, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for s in stores:
        s.close()
    found = fired(client, "fast", redis_client)
    assert len(found) == 20 and len(set(found)) == 20
    assert len(sent) == 20 and len(set(sent)) == 20  # each run's message sent once


def test_the_cli_manages_schedules(client: Client, cli: Cli, env: dict[str, str]) -> None:
    added = cli("schedule", "add", "nightly", "--graph", "counter", "--cron", "0 2 * * *",
                "--input", json.dumps(JOB), "--overlap", "skip", "--catchup", "none", "--json")  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["schedule"]["cron"] == "0 2 * * *"
    listed = cli("schedule", "list")
    assert "nightly" in listed.stdout and "cron 0 2 * * *" in listed.stdout
    assert cli("schedule", "pause", "nightly").returncode == 0
    assert "paused" in cli("schedule", "list").stdout
    assert cli("schedule", "resume", "nightly").returncode == 0
    run_id = cli("schedule", "trigger", "nightly").stdout.strip()
    assert client.get(run_id).status is Status.QUEUED
    env["COLUMNS"] = "80"  # issue 34: the last run's id is whole, to be copied, even at 80 columns
    assert run_id in cli("schedule", "list").stdout
    declined = cli("schedule", "delete", "nightly", stdin="n\n")
    assert declined.returncode == 1 and client.schedule("nightly")
    assert cli("schedule", "delete", "nightly", "--yes").returncode == 0
    assert cli("schedule", "pause", "nightly").returncode == 2
    bad = cli("schedule", "add", "x", "--graph", "counter", "--every", "soon", "--input", json.dumps(JOB))
    assert bad.returncode == 2 and "period" in bad.stderr
    both = cli("schedule", "add", "x", "--graph", "counter", "--input", json.dumps(JOB))
    assert both.returncode == 2


def test_the_api_manages_schedules(client: Client, api_server: ApiServer) -> None:
    with api_server.http() as http:
        body = {"name": "often", "graph": "counter", "every": "30s", "inputs": JOB}
        made = http.post("/api/schedules", json=body)
        assert made.status_code == 201, made.text
        assert made.json()["schedule"]["every_s"] == 30
        assert http.post("/api/schedules", json=body).status_code == 409
        assert http.post("/api/schedules", json={**body, "name": "b", "every": "x"}).status_code == 422
        assert [s["schedule"]["name"] for s in http.get("/api/schedules").json()] == ["often"]
        assert http.post("/api/schedules/often/pause").json()["next_fire_at"] is None
        assert http.post("/api/schedules/often/resume").json()["next_fire_at"] is not None
        run_id = http.post("/api/schedules/often/trigger").json()["run_id"]
        assert client.get(run_id).tags == {"schedule": "often"}
        assert http.get("/api/schedules/often").json()["last_run_id"] == run_id
        assert http.delete("/api/schedules/often").status_code == 204
        assert http.get("/api/schedules/often").status_code == 404


def test_a_scheduler_acting_on_a_stale_read_moves_nothing(
    client: Client, store: RedisStore, fake_clock: FakeClock, redis_client: redis.Redis
) -> None:
    client.add_schedule("minutely", "counter", every="1m", inputs=JOB)
    sched = scheduler(store)
    fake_clock.now = T0 + 60
    sched.tick()
    fake_clock.now = T0 + 120
    sched.tick()
    # A slow scheduler that read the index when the first fire was due acts only now.
    sched.fire_due("minutely", int((T0 + 60) * 1000), int((T0 + 60) * 1000) + 100)
    assert client.schedule("minutely").next_fire_at == T0 + 180
    assert len(fired(client, "minutely", redis_client)) == 2
    # One that read it before a pause does not resume it.
    client.pause_schedule("minutely")
    fake_clock.now = T0 + 180
    sched.fire_due("minutely", int((T0 + 180) * 1000), int((T0 + 180) * 1000))
    assert client.schedule("minutely").next_fire_at is None


def _counting(passes: list[float]) -> type[Scheduler]:
    """A Scheduler that notes the time of each of its passes in ``passes``."""

    class Counting(Scheduler):
        def tick(self) -> float:
            passes.append(clock.now())
            return super().tick()

    return Counting


def test_a_scheduler_says_once_that_redis_is_unreachable(
    dead_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    passes: list[float] = []
    Counting = _counting(passes)

    unreachable = RedisStore.from_url(dead_url)
    sched = Counting(unreachable, lambda _r, _g: None, default_max_attempts=1, interval_s=0.05)
    with caplog.at_level(logging.WARNING, logger="reflexr_graph.fleet.scheduler"):
        sched.start()
        try:
            wait_for(lambda: len(passes) >= 4, 30, "four scheduler passes")
        finally:
            sched.stop()
            unreachable.close()
    assert [r.getMessage() for r in caplog.records].count(
        "Redis unreachable; the scheduler tries again every 0.1s"
    ) == 1


def test_a_schedule_added_while_the_scheduler_sleeps_wakes_it_for_its_first_fire(
    client: Client, store: RedisStore
) -> None:
    passes: list[float] = []
    Counting = _counting(passes)

    sent: list[str] = []
    # With nothing scheduled, it sleeps its most: far longer than the waits below.
    sched = Counting(store, lambda run_id, _g: sent.append(run_id), default_max_attempts=1, interval_s=600)
    sched.start()
    try:
        wait_for(lambda: passes, 30, "the scheduler's first pass")
        client.add_schedule("soon", "counter", every="1s", inputs=JOB)
        # The add's note wakes it; its next read sleeps only until the fire time.
        wait_for(lambda: sent, 60, "the schedule's first fire")
    finally:
        sched.stop()
    assert len(passes) >= 2
