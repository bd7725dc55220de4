"""Private payloads with real workers (G10): with REFLEXR_PAYLOAD_KEYS nothing a run holds is
readable in Redis, a client without keys still works, and a worker without the key dead-letters
the run with a reason instead of running it on garbage."""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from reflexr_graph.api.app import create_app
from reflexr_graph.client import Client
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from reflexr_graph.store.payload_s3 import S3PayloadStore
from tests.fleet import graphs
from tests.fleet.conftest import Fleet, executions
from tests.s3_server import S3Server, s3_server
from tests.store.test_payloads import every_value
from tests.waiting import wait_for

MARKER = "okapi-marker-51c9"
__all__ = ["s3_server"]
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


def _run_memory(r: redis.Redis, run_id: str) -> int:
    """Bytes Redis holds for the run's own keys (MEMORY USAGE of each)."""
    return sum(int(r.memory_usage(key, samples=0) or 0) for key in keys.run_keys(run_id))


@pytest.mark.slow
def test_a_large_state_goes_through_20_steps_and_a_sigkill_holding_little_redis(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis, tmp_path: Path
) -> None:
    payloads = tmp_path / "payloads"
    fleet.env.update(REFLEXR_PAYLOAD_KEYS=KEY_SPEC, REFLEXR_PAYLOAD_STORE=f"file://{payloads}")
    fleet.start(REFLEXR_GRAPHS=graphs.BULKY_REFS)
    client = client_for(fleet)
    # 8 MiB of JSON text, four times what Redis alone would take (REFLEXR_MAX_PAYLOAD_BYTES).
    text = MARKER + os.urandom(4 * 1024 * 1024).hex()
    run_id = client.enqueue("bulky", 0, state={"text": text, "kill_at": 10})
    done = client.wait(run_id, timeout=110)
    assert done.status is Status.SUCCEEDED, done
    assert done.output == [*range(graphs.BULKY_LAPS), len(text)]
    laps = [e.split(":")[0] for e in executions(redis_client, run_id)]
    assert laps == [f"lap{n}" for n in [*range(11), *range(10, graphs.BULKY_LAPS)]]  # lap 10 was in flight
    assert done.attempt == 2
    assert _run_memory(redis_client, run_id) < 1024 * 1024
    assert MARKER.encode() not in every_value(redis_client)
    assert all(MARKER.encode() not in p.read_bytes() for p in payloads.rglob("*") if p.is_file())


def test_a_payload_missing_from_the_store_dead_letters_the_run_naming_it(
    fleet: Fleet, client_for: Callable[[Fleet], Client], tmp_path: Path
) -> None:
    payloads = tmp_path / "payloads"
    fleet.env.update(REFLEXR_PAYLOAD_STORE=f"file://{payloads}", REFLEXR_OFFLOAD_BYTES="1024")
    fleet.start().kill_group()  # it published the graph; no worker runs the run before its file is gone
    client = client_for(fleet)
    run_id = client.enqueue("steps", {"secret": "x" * 5000})
    (lost,) = [p for p in payloads.rglob("*") if p.is_file()]
    lost.unlink()
    fleet.start()
    done = client.wait(run_id, timeout=60)
    assert (done.status, done.reason) == (Status.DEAD, "payload_unreadable")
    assert done.error is not None and f"run {run_id}" in done.error and lost.name in done.error


def test_fork_replay_and_the_api_read_encrypted_offloaded_payloads(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis, tmp_path: Path
) -> None:
    fleet.env.update(
        REFLEXR_PAYLOAD_KEYS=KEY_SPEC,
        REFLEXR_PAYLOAD_STORE=f"file://{tmp_path / 'payloads'}",
        REFLEXR_OFFLOAD_BYTES="1024",
    )
    fleet.start(REFLEXR_GRAPHS=graphs.BULKY_REFS)
    client = client_for(fleet)
    text = MARKER + "y" * 5000
    source = client.enqueue("bulky", 0, state={"text": text})
    assert client.wait(source, timeout=60).status is Status.SUCCEEDED
    shown = [client.checkpoint(source, c.seq) for c in client.checkpoints(source)]
    (at_five,) = [c for c in shown if c.next_node == "lap" and c.next_inputs == 5]
    assert (at_five.state["text"], at_five.state["done"]) == (text, [0, 1, 2, 3, 4])

    fork = client.fork(source, from_seq=at_five.seq, state={"text": MARKER, "done": []})
    done = client.wait(fork, timeout=60)
    assert (done.status, done.output) == (Status.SUCCEEDED, [*range(5, graphs.BULKY_LAPS), len(MARKER)])

    # A waiting run cancelled, then replayed from its checkpoint: its offloaded inputs read back.
    ticket = MARKER + "z" * 5000
    waiting = client.enqueue("approve", {"ticket": ticket})
    _waiting(client, waiting)
    client.cancel(waiting)
    client.replay(waiting)
    _waiting(client, waiting)
    client.signal(waiting, "approval", {"approved": True, "by": MARKER})
    assert client.wait(waiting, timeout=60).output == f"summary of {ticket}: approved by {MARKER}"
    assert MARKER.encode() not in every_value(redis_client)

    # An app made in process answers loopback names only (api/sites.py): not TestClient's "testserver".
    with TestClient(create_app(fleet.settings()), base_url="http://localhost") as api:
        body = api.get(f"/api/runs/{waiting}").json()
        assert body["output"] == f"summary of {ticket}: approved by {MARKER}"
    with TestClient(create_app(fleet.settings(payload_keys="")), base_url="http://localhost") as api:
        assert api.get(f"/api/runs/{fork}").json()["output"] == "<encrypted with key k1>"


def test_a_fleet_on_the_s3_payload_store(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis, s3_server: S3Server,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)  # for this process's client, as for the worker's environment
    bucket = s3_server.new_bucket()
    fleet.env.update(
        REFLEXR_PAYLOAD_KEYS=KEY_SPEC, REFLEXR_PAYLOAD_STORE=f"s3://{bucket}/p", REFLEXR_OFFLOAD_BYTES="1024"
    )
    fleet.start(**s3_server.env())
    client = client_for(fleet)
    secret = MARKER + "s" * 5000
    run_id = client.enqueue("steps", {"secret": secret}, state={"steps": [secret]})
    done = client.wait(run_id, timeout=60)
    assert done.status is Status.SUCCEEDED, done
    assert done.output == {"value": 0, "steps": [secret, "s1", "s2", "s3"], "attempt": 1}
    assert MARKER.encode() not in every_value(redis_client)
    blobs = S3PayloadStore(bucket, "p")
    stored = [blobs.get(digest) for digest, _ in blobs.entries()]
    assert stored and all(MARKER.encode() not in data for data in stored)


def test_a_checkpoint_above_the_offload_limit_dead_letters_the_run(
    fleet: Fleet, client_for: Callable[[Fleet], Client], tmp_path: Path
) -> None:
    payloads = tmp_path / "payloads"
    fleet.env.update(REFLEXR_PAYLOAD_STORE=f"file://{payloads}", REFLEXR_MAX_OFFLOAD_BYTES="1024")
    fleet.start(REFLEXR_GRAPHS=graphs.BULKY_REFS)
    client = client_for(fleet)
    # The state fits the limit; the first checkpoint, which holds it and more, does not.
    run_id = client.enqueue("bulky", 0, state={"text": "t" * 900})
    done = client.wait(run_id, timeout=60)
    assert (done.status, done.reason) == (Status.DEAD, "payload_too_large"), done
    assert done.error is not None and "REFLEXR_MAX_OFFLOAD_BYTES" in done.error
