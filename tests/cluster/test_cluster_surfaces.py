"""The CLI and the HTTP API (on the AsyncClient) with the store on a real Redis Cluster: their
listings merge every shard, and the API's pages go on from their cursors; the overview adds up
every shard's counts."""

from __future__ import annotations

import json

import httpx
import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from reflexr_graph.store.activity import percentile
from tests.fleet.conftest import Fleet
from tests.surfaces.cli_runner import run_cli
from tests.surfaces.conftest import serving
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def _pages(http: httpx.Client) -> list[str]:
    seen, cursor = [], None
    while True:
        params = {"limit": 4, **({"cursor": cursor} if cursor else {})}
        page = http.get("/api/runs", params=params).json()
        seen += [r["run_id"] for r in page["runs"]]
        cursor = page["cursor"]
        if cursor is None:
            return seen


def test_the_cli_and_the_api_list_every_shards_runs_and_add_up_their_overview(
    cluster_fleet: Fleet,
    cluster_client_for: Client,
    cluster_client: redis.RedisCluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Listings merge every shard; GET /api/overview (and `top`) adds the shards' counts per minute,
    retries and waits, and takes the durations' percentiles over every shard's runs together. (One
    test: a fleet and a server cost most of its time.)"""
    worker = cluster_fleet.start(concurrency=2)
    client = cluster_client_for
    done = [client.enqueue("steps", {"value": n}) for n in range(6)]
    dead = [client.enqueue("permanent", {"value": n}) for n in range(3)]
    retried = [client.enqueue("always_fails", {"value": n}) for n in range(2)]
    waiting = [client.enqueue("approve", {"ticket": f"t-{n}"}) for n in range(2)]
    assert len({keys.shard_of(r) for r in done + dead}) > 3
    for run_id in done + dead + retried:
        client.wait(run_id, timeout=60)
    for run_id in waiting:
        wait_for(
            lambda r=run_id: client.get(r).status is Status.WAITING, 30, "the run to wait for its signal"
        )
    worker.kill_group()  # what is enqueued now stays queued
    queued = [client.enqueue("steps", {"value": n}) for n in range(3)]
    everything = done + dead + retried + waiting + queued
    env = {
        "REFLEXR_REDIS_URL": cluster_fleet.redis_url,
        "REFLEXR_BROKER_URL": cluster_fleet.env["REFLEXR_BROKER_URL"],
        "REFLEXR_QUEUE": cluster_fleet.queue,
    }
    listed = run_cli(["dlq", "list", "--json"], env, monkeypatch)
    assert listed.returncode == 0, listed.stderr
    assert sorted(r["run_id"] for r in json.loads(listed.stdout)) == sorted(dead + retried)
    runs = run_cli(["runs", "--status", "succeeded", "--json"], env, monkeypatch)
    assert sorted(r["run_id"] for r in json.loads(runs.stdout)) == sorted(done)
    top = run_cli(["top"], env, monkeypatch)
    assert top.returncode == 0, top.stderr
    with serving(env) as server, server.http() as http:
        seen = _pages(http)
        assert sorted(seen) == sorted(everything) and len(seen) == len(everything)
        letters = http.get("/api/dead-letters").json()["runs"]
        assert {r["status"] for r in letters} == {Status.DEAD.value} and len(letters) == 5
        answer = http.get("/api/overview", params={"minutes": 5})
        assert answer.status_code == 200, answer.text
    activity, now = answer.json()["activity"], answer.json()["now"]
    assert sum(activity["started"]) == len(everything)
    assert (sum(activity["succeeded"]), sum(activity["dead"])) == (6, 5)
    assert sum(activity["retried"]) == 2 * 2, "each always_fails run retried twice (3 attempts)"
    assert {k: sum(v) for k, v in activity["dead_by_reason"].items()} == {
        "bad_document": 3,
        "max_attempts": 2,
    }
    assert activity["waiting"]["signal"] == 2
    taken = sorted(
        (int(u) - int(c)) / 1000
        for c, u in (cluster_client.hmget(keys.run(r), "created_at", "updated_at") for r in done)
    )
    assert activity["durations"]["steps"] == {
        "runs": 6, "p50_s": percentile(taken, 0.5), "p95_s": percentile(taken, 0.95),
    }  # fmt: skip
    assert now["queues"]["steps"]["queued"] == 3 and now["by_status"]["queued"] == 3
    assert (now["by_status"]["succeeded"], now["dead_letters"]) == (6, 5)
