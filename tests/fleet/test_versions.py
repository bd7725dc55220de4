"""A rolling deploy that changes a graph, with real workers of two versions side by side (G9).

A run finishes on the graph version it started on; a new run (a foreign producer's too) starts
on the newest version a live worker serves; a run whose version no live worker serves is held,
then waits (``waiting_for = version:<v>``) holding no worker and no message, until a worker of
its version takes it back and finishes it without repeating what had finished.
"""

from __future__ import annotations

import json
import signal
import uuid
from collections.abc import Callable

import pytest
import redis
from celery import Celery

from reflexr_graph.client import Client
from reflexr_graph.config.dispatch import TASK_NAME, graph_queue, version_queue
from reflexr_graph.fleet.outcome import Outcome
from reflexr_graph.fleet.task import handle
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from reflexr_graph.store.redis_store import RedisStore
from reflexr_graph.store.versions import entry_of
from tests import otel
from tests.fleet import version_graphs
from tests.fleet.conftest import Fleet, events, executions, open_gate
from tests.fleet.inproc import fleet_app
from tests.surfaces.cli_runner import run_cli
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

GRAPH = version_graphs.NAME
V1, V2 = version_graphs.v1.version, version_graphs.v2.version
V1_REF, V2_REF = "tests.fleet.version_graphs:v1", "tests.fleet.version_graphs:v2"


def _status(client: Client, run_id: str) -> Status:
    return client.get(run_id).status


def _entered(r: redis.Redis, run_id: str, node: str) -> Callable[[], bool]:
    return lambda: any(e.startswith(f"{node}:") for e in executions(r, run_id))


def _ran(r: redis.Redis, run_id: str) -> list[str]:
    """The nodes the run executed (``s1@v1``...), in order, attempts left out."""
    return [e.rsplit(":", 1)[0] for e in executions(r, run_id)]


def _holds_no_message(r: redis.Redis, fleet: Fleet, run_id: str) -> bool:
    """No queue of the graph holds a message of the run: nothing for a worker to take. (The stopped
    worker's own delivery stays in kombu's unacked hash until the visibility timeout restores it,
    as after any crash; a claim then drops it, the run waiting.)"""
    base = fleet.queue
    queues = [base, graph_queue(base, GRAPH), version_queue(base, GRAPH, V1), version_queue(base, GRAPH, V2)]
    queued = [item for q in queues for item in r.lrange(keys.broker_queue(q), 0, -1)]
    return not any(run_id.encode() in item for item in queued)


def test_a_run_finishes_on_its_version_and_is_held_not_restarted_when_that_version_goes(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """Two runs in flight on v1 while a v2 worker starts: a new run goes to v2, the two finish on v1.
    With the last v1 worker stopped mid-step, both are held waiting for version v1 (no message, no
    lease, nothing restarted on v2); a v1 worker that comes back finishes them, and no step that had
    finished runs twice."""
    r = redis_client
    old = fleet.start(concurrency=2, REFLEXR_GRAPHS=V1_REF, REFLEXR_VERSION_GRACE_S="2")
    client = client_for(fleet)
    runs = [client.enqueue(GRAPH, {"value": n, "gate": "s2@v1"}) for n in range(2)]
    for run_id in runs:
        wait_for(_entered(r, run_id, "s2@v1"), 30, f"run {run_id} at s2 on v1")
        assert client.get(run_id).version == V1
    fleet.start(REFLEXR_GRAPHS=V2_REF, REFLEXR_VERSION_GRACE_S="2")

    fresh = client.enqueue(GRAPH, {"value": 9})
    assert client.wait(fresh, timeout=60).output == {
        "ran_on": "v2",
        "steps": ["s1@v2", "s2@v2", "s2b@v2", "s3@v2"],
    }
    assert client.get(fresh).version == V2

    old.signal(signal.SIGTERM)  # mid-step: the soft shutdown (1 s) ends, the attempts are cut short
    old.wait_exit()
    for run_id in runs:
        wait_for(lambda run_id=run_id: _status(client, run_id) is Status.WAITING, 60, f"run {run_id} held")
        info = client.get(run_id)
        assert (info.waiting_for, info.version) == (f"version:{V1}", V1)
        assert r.zscore(keys.due(0), run_id) is None and r.zscore(keys.leases(0), run_id) is None
        # A copy of its delivery put back at the stop may still be on the graph's queue: a live
        # worker takes it and drops it (the run waits). None stays where no worker would take it.
        wait_for(
            lambda run_id=run_id: _holds_no_message(r, fleet, run_id), 30, f"run {run_id}'s queues empty"
        )
        assert _status(client, run_id) is Status.WAITING
        assert not any(node.endswith("@v2") for node in _ran(r, run_id)), "nothing ran on v2"
    waiting = {i.run_id for i in client.runs(status="waiting")}
    assert set(runs) <= waiting

    for run_id in runs:
        open_gate(r, run_id)
    fleet.start(REFLEXR_GRAPHS=V1_REF, REFLEXR_VERSION_GRACE_S="2")
    for run_id in runs:
        info = client.wait(run_id, timeout=60)
        assert info.status is Status.SUCCEEDED
        assert info.output["ran_on"] == "v1"  # type: ignore[index]
        ran = _ran(r, run_id)
        # s1 finished before the stop: its checkpoint holds it. s2 was cut short mid-step.
        assert ran.count("s1@v1") == 1 and ran.count("s3@v1") == 1, ran
        assert ran.count("s2@v1") == 2, ran
        assert [e.fields.get("version") for e in events(fleet_store(fleet), run_id, "run_woken")] == [V1]


def fleet_store(fleet: Fleet) -> RedisStore:
    return RedisStore.from_url(fleet.redis_url)


def test_new_runs_and_foreign_producers_get_the_newest_served_version(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """With the only v2 worker busy, an idle v1 worker takes every new message (the Client's and a
    foreign producer's send_task), and hands it on to v2's queue instead of running it on v1."""
    r = redis_client
    store = fleet_store(fleet)
    # v1 was deployed first (as it is in a rolling deploy to v2): v2 is the newer version.
    store.publish_versions([entry_of(V1, version_graphs.v1.fingerprint, None, ["s1", "s2", "s3"])], [GRAPH])
    fleet.start(REFLEXR_GRAPHS=V2_REF)
    client = client_for(fleet)
    busy = client.enqueue(GRAPH, {"value": 0, "gate": "s1@v2"})
    wait_for(_entered(r, busy, "s1@v2"), 30, "the v2 worker busy")
    fleet.start(REFLEXR_GRAPHS=V1_REF)
    enqueued = [client.enqueue(GRAPH, {"value": n}) for n in range(1, 3)]
    producer = Celery("foreign", broker=fleet.redis_url, set_as_current=False)
    foreign = [f"foreign-{n}" for n in range(2)]
    for run_id in foreign:
        producer.send_task(
            TASK_NAME, kwargs={"graph": GRAPH, "inputs": {"value": 5}}, task_id=run_id, queue=fleet.queue
        )
    producer.close()
    on_v2 = keys.broker_queue(version_queue(fleet.queue, GRAPH, V2))
    for run_id in enqueued + foreign:
        wait_for(lambda run_id=run_id: _queued_on(r, on_v2, run_id), 30, f"run {run_id} handed on to v2")
    open_gate(r, busy)
    for run_id in [busy, *enqueued, *foreign]:
        info = client.wait(run_id, timeout=60)
        assert (info.status, info.version) == (Status.SUCCEEDED, V2), run_id
        assert info.output["ran_on"] == "v2"  # type: ignore[index]


def _queued_on(r: redis.Redis, queue: str, run_id: str) -> bool:
    return any(run_id.encode() in item for item in r.lrange(queue, 0, -1))


def test_a_worker_restarting_within_the_grace_period_holds_no_run(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """The only v1 worker is killed mid-step and a new one starts within REFLEXR_VERSION_GRACE_S,
    with a v2 worker up all along: the run never waits, and finishes on v1."""
    r = redis_client
    grace = {"REFLEXR_VERSION_GRACE_S": "60"}
    old = fleet.start(REFLEXR_GRAPHS=V1_REF, **grace)
    client = client_for(fleet)
    run_id = client.enqueue(GRAPH, {"value": 1, "gate": "s2@v1"})
    wait_for(_entered(r, run_id, "s2@v1"), 30, "the run at s2 on v1")
    fleet.start(REFLEXR_GRAPHS=V2_REF, **grace)
    old.kill_group()
    store = fleet_store(fleet)
    # Its lease lapses, the reaper sends it again, and the v2 worker that takes it holds it.
    wait_for(lambda: events(store, run_id, "waiting_for_version"), 60, "the run held for v1")
    open_gate(r, run_id)
    fleet.start(REFLEXR_GRAPHS=V1_REF, **grace)
    info = client.wait(run_id, timeout=60)
    assert (info.status, info.version, info.output["ran_on"]) == (Status.SUCCEEDED, V1, "v1")  # type: ignore[index]
    assert not events(store, run_id, "run_waiting"), "it never waited"
    assert not any(node.endswith("@v2") for node in _ran(r, run_id))


def test_a_run_sent_to_another_version_waits_for_its_own_and_is_counted(redis_url: str) -> None:
    """In process, with no grace: a run pinned to v1 delivered to a v2 worker is not claimed; it waits
    for version v1 at once, in v1's held set, and reflexr.runs.held_for_version counts it."""
    app = fleet_app(redis_url, version_graphs.v2, version_grace_s=0)
    store = app.store()
    r = redis.Redis.from_url(redis_url)
    try:
        run_id, _ = store.create_run(
            f"pinned-{uuid.uuid4().hex[:8]}",
            graph=GRAPH,
            inputs_json="{}",
            max_attempts=3,
            dispatch_grace_ms=60_000,
        )
        r.hset(keys.run(run_id), "version", V1)  # as its first claim, on a v1 worker, wrote it
        before = otel.metric_total("reflexr.runs.held_for_version", reflexr__graph__version=V1)
        delivered = handle(app, run_id, (), {"graph": GRAPH})
        assert delivered.outcome is Outcome.HELD
        info = store.get(run_id)
        assert (info.status, info.waiting_for, info.attempts) == (Status.WAITING, f"version:{V1}", 0)
        assert r.sismember(keys.version_held(GRAPH, V1, 0), run_id)
        assert otel.metric_total("reflexr.runs.held_for_version", reflexr__graph__version=V1) - before == 1
    finally:
        r.close()
        store.close()
        app.close()


def test_upgrade_moves_the_runs_held_for_a_version_to_the_newest_from_their_first_step(
    fleet: Fleet,
    client_for: Callable[[Fleet], Client],
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run held for v1 (its only worker killed, v2 up): `upgrade --from v1` says first that it
    would start over, and changes nothing when declined; with --yes it runs again on v2 from s1."""
    r = redis_client
    grace = {"REFLEXR_VERSION_GRACE_S": "1"}
    old = fleet.start(REFLEXR_GRAPHS=V1_REF, **grace)
    client = client_for(fleet)
    run_id = client.enqueue(GRAPH, {"value": 3, "gate": "s2@v1"})
    wait_for(_entered(r, run_id, "s2@v1"), 30, "the run at s2 on v1")
    fleet.start(REFLEXR_GRAPHS=V2_REF, **grace)
    old.kill_group()
    wait_for(lambda: client.get(run_id).waiting_for == f"version:{V1}", 60, "the run held for v1")
    env = {"REFLEXR_REDIS_URL": fleet.redis_url, "REFLEXR_QUEUE": fleet.queue}

    declined = run_cli(["upgrade", GRAPH, "--from", V1], env, monkeypatch, stdin="n\n")
    assert declined.returncode == 1
    assert (
        f"1 run(s) held for version {V1} would move to {V2}: 0 would resume, 1 would start over"
        in declined.stderr
    )
    assert client.get(run_id).waiting_for == f"version:{V1}", "nothing changed"

    done = run_cli(["upgrade", GRAPH, "--from", V1, "--yes", "--json"], env, monkeypatch)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["run_ids"] == [run_id]
    info = client.wait(run_id, timeout=60)
    assert (info.status, info.version, info.output["ran_on"]) == (Status.SUCCEEDED, V2, "v2")  # type: ignore[index]
    assert _ran(r, run_id) == ["s1@v1", "s2@v1", "s1@v2", "s2@v2", "s2b@v2", "s3@v2"], "started over on v2"
    refused = run_cli(["upgrade", GRAPH, "--from", V2, "--yes"], env, monkeypatch)
    assert refused.returncode == 1 and "nothing newer" in refused.stderr
