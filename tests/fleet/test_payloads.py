"""Private payloads with real workers (G10): with REFLEXR_PAYLOAD_KEYS nothing a run holds is
readable in Redis, a client without keys still works, and a worker without the key dead-letters
the run with a reason instead of running it on garbage."""

from __future__ import annotations

import base64
import os
from collections.abc import Callable

import redis

from reflexr_graph.client import Client
from reflexr_graph.model import Status
from tests.fleet.conftest import Fleet
from tests.store.test_payloads import every_value
from tests.waiting import wait_for

MARKER = "okapi-marker-51c9"
KEY_SPEC = f"k1:{base64.b64encode(os.urandom(32)).decode()}"


def _waiting(client: Client, run_id: str) -> None:
    wait_for(lambda: client.get(run_id).status is Status.WAITING, 60, f"run {run_id} to wait")


def test_with_keys_a_marker_in_inputs_state_calls_and_signals_is_nowhere_in_redis(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.env["REFLEXR_PAYLOAD_KEYS"] = KEY_SPEC
    fleet.start()
    client = client_for(fleet)
    approve = client.enqueue("approve", {"ticket": MARKER})
    _waiting(client, approve)
    client.signal(approve, "approval", {"approved": True, "by": MARKER})
    steps = client.enqueue("steps", {"secret": MARKER}, state={"steps": [MARKER]})
    for run_id in (approve, steps):
        assert client.wait(run_id, timeout=60).status is Status.SUCCEEDED
    assert client.get(approve).output == f"summary of {MARKER}: approved by {MARKER}"
    assert MARKER in str(client.get(steps).output)
    assert MARKER.encode() not in every_value(redis_client)

    keyless = Client(fleet.settings(payload_keys=""))
    try:
        shown = {info.run_id: info.output for info in keyless.runs()}
        assert shown == {approve: "<encrypted with key k1>", steps: "<encrypted with key k1>"}
    finally:
        keyless.close()


def test_a_worker_without_the_key_dead_letters_the_run_naming_it_and_the_key(
    fleet: Fleet, client_for: Callable[[Fleet], Client]
) -> None:
    fleet.start()  # no REFLEXR_PAYLOAD_KEYS
    client = client_for(fleet)
    writer = Client(fleet.settings(payload_keys=KEY_SPEC))
    try:
        run_id = writer.enqueue("steps", {"secret": MARKER})
    finally:
        writer.close()
    done = client.wait(run_id, timeout=60)
    assert (done.status, done.reason) == (Status.DEAD, "payload_unreadable")
    assert done.error is not None and f"run {run_id}" in done.error and "key k1" in done.error
    assert MARKER not in done.error
