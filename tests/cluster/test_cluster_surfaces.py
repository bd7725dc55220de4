"""The CLI and the HTTP API (on the AsyncClient) with the store on a real Redis Cluster: their
listings merge every shard, and the API's pages go on from their cursors."""

from __future__ import annotations

import json

import pytest

from reflexr_graph.client import Client
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from tests.fleet.conftest import Fleet
from tests.surfaces.cli_runner import run_cli
from tests.surfaces.conftest import serving

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def test_the_cli_and_the_api_list_runs_of_every_shard(
    cluster_fleet: Fleet, cluster_client_for: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster_fleet.start(concurrency=2)
    client = cluster_client_for
    dead = [client.enqueue("permanent", {"value": n}) for n in range(6)]
    done = [client.enqueue("steps", {"value": n}) for n in range(6)]
    assert len({keys.shard_of(r) for r in dead + done}) > 3
    for run_id in dead + done:
        client.wait(run_id, timeout=60)
    env = {
        "REFLEXR_REDIS_URL": cluster_fleet.redis_url,
        "REFLEXR_BROKER_URL": cluster_fleet.env["REFLEXR_BROKER_URL"],
        "REFLEXR_QUEUE": cluster_fleet.queue,
    }
    listed = run_cli(["dlq", "list", "--json"], env, monkeypatch)
    assert listed.returncode == 0, listed.stderr
    assert sorted(r["run_id"] for r in json.loads(listed.stdout)) == sorted(dead)
    runs = run_cli(["runs", "--status", "succeeded", "--json"], env, monkeypatch)
    assert sorted(r["run_id"] for r in json.loads(runs.stdout)) == sorted(done)
    with serving(env) as server, server.http() as http:
        seen, cursor = [], None
        while True:
            params = {"limit": 4, **({"cursor": cursor} if cursor else {})}
            page = http.get("/api/runs", params=params).json()
            seen += [r["run_id"] for r in page["runs"]]
            cursor = page["cursor"]
            if cursor is None:
                break
        assert sorted(seen) == sorted(dead + done) and len(seen) == 12
        letters = http.get("/api/dead-letters").json()["runs"]
        assert {r["status"] for r in letters} == {Status.DEAD.value} and len(letters) == 6
