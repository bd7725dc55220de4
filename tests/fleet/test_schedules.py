"""Schedules fired by the schedulers of real workers: two workers, one run per fire time."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
import redis

from reflexr_graph import clock
from reflexr_graph.client import Client
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from tests.fleet.conftest import Fleet
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

FIRES = 8
"""Fires of an every-1s schedule the test waits for: seven seconds and more."""


def _fire_times(client: Client, r: redis.Redis, name: str) -> list[int]:
    """The fire time (epoch s) of each of the schedule's runs, from its idempotency key, sorted."""
    found = []
    for info in client.runs(tags={"schedule": name}, limit=10_000):
        key = r.hget(keys.run(info.run_id), "idempotency_key")
        assert key is not None
        stamp = key.decode().removeprefix(f"schedule:{name}:")
        found.append(int(datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()))
    return sorted(found)


def test_an_every_second_schedule_on_two_workers_makes_one_run_per_tick(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start()
    fleet.start()
    client = client_for(fleet)
    client.add_schedule("tick", "steps", every="1s", inputs={"value": 1})
    wait_for(lambda: len(client.runs(tags={"schedule": "tick"})) >= FIRES, 60, f"{FIRES} fires")
    client.pause_schedule("tick")
    fires = _fire_times(client, redis_client, "tick")
    assert len(fires) == len(set(fires)), "a fire time made two runs"
    assert fires == list(range(fires[0], fires[-1] + 1)), "a tick was missed"
    assert all("scheduler started" in w.log() for w in fleet.workers), "both workers run a scheduler"
    runs = client.runs(tags={"schedule": "tick"}, limit=100)
    wait_for(
        lambda: all(client.get(r.run_id).status is Status.SUCCEEDED for r in runs), 60, "the runs to end"
    )
    late = [
        info.created_at - fire
        for info, fire in zip(sorted(runs, key=lambda i: i.created_at), fires, strict=True)
    ]
    print(
        f"fire lateness (s): max {max(late):.3f}, mean {sum(late) / len(late):.3f}"
    )  # measured, not asserted


def test_the_fires_missed_while_the_workers_were_down_are_caught_up(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    client = client_for(fleet)
    worker = fleet.start()
    client.add_schedule("tock", "steps", every="1s", inputs={"value": 1}, catchup="all")
    wait_for(lambda: len(client.runs(tags={"schedule": "tock"})) >= 2, 60, "two fires")
    worker.kill_group()
    down = len(_fire_times(client, redis_client, "tock"))
    # The fires due while no worker runs pile up in the schedule's next fire time.
    wait_for(lambda: (client.schedule("tock").next_fire_at or 0) + 5 < clock.now(), 60, "fires to be missed")
    fleet.start()
    wait_for(lambda: len(client.runs(tags={"schedule": "tock"})) >= down + 6, 60, "the missed fires")
    client.pause_schedule("tock")
    fires = _fire_times(client, redis_client, "tock")
    assert fires == list(range(fires[0], fires[-1] + 1)), "catchup=all makes every missed fire"
