"""Time travel over HTTP, against a real server, Redis and worker: checkpoints listed without
values and shown with them, a fork with an edited state, idempotent forks, bad input and unknown
seqs as problems, and a dead run replayed from an earlier checkpoint."""

from __future__ import annotations

import uuid

import httpx
import pytest
import redis

from reflexr_graph import schemas
from tests.surfaces.conftest import ApiServer
from tests.surfaces.graphs import bad_key, chain, count_key
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("worker")]

SECRET = "hunter2-private-value"


@pytest.fixture
def chain_server(api_server: ApiServer, redis_client: redis.Redis) -> ApiServer:
    schemas.publish(redis_client, [chain])
    return api_server


def _finished(http: httpx.Client, run_id: str, status: str = "succeeded") -> dict[str, object]:
    wait_for(lambda: http.get(f"/api/runs/{run_id}").json()["status"] == status, what=f"run {status}")
    run: dict[str, object] = http.get(f"/api/runs/{run_id}").json()
    return run


def _problem(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "Traceback" not in response.text and SECRET not in response.text
    body: dict[str, object] = response.json()
    return body


def test_checkpoints_are_listed_shown_and_forked_with_an_edited_state(
    chain_server: ApiServer, redis_client: redis.Redis
) -> None:
    key = uuid.uuid4().hex
    with chain_server.http() as http:
        source = http.post("/api/runs", json={"graph": "chain", "inputs": key}).json()["run_id"]
        _finished(http, source)
        listed = http.get(f"/api/runs/{source}/checkpoints").json()
        assert [(c["seq"], c["next_node"], c["finished"]) for c in listed] == [
            *((seq, f"t{seq + 1}", False) for seq in range(1, 6)),
            (6, None, True),
        ]
        assert all("state" not in c for c in listed), "the list carries no values"
        shown = http.get(f"/api/runs/{source}/checkpoints/3").json()
        assert (shown["state"], shown["next_inputs"]) == ({"total": 6, "visited": ["t1", "t2", "t3"]}, key)
        assert _problem(http.get(f"/api/runs/{source}/checkpoints/99"), 404)["kept"] == [1, 2, 3, 4, 5, 6]
        _problem(http.get(f"/api/runs/{uuid.uuid4()}/checkpoints"), 404)

        bad = {"from_seq": 3, "state": {"total": SECRET, "visited": []}}
        invalid = _problem(http.post(f"/api/runs/{source}/fork", json=bad), 422)
        assert invalid["errors"] and all(SECRET not in str(e) for e in invalid["errors"])  # type: ignore[union-attr]
        _problem(http.post(f"/api/runs/{source}/fork", json={"from_seq": 42}), 404)
        unknown = _problem(
            http.post(f"/api/runs/{source}/fork", json={"from_seq": 3, "patch": {"totl": 1}}), 422
        )
        assert [e["loc"] for e in unknown["errors"]] == [["state", "totl"]]  # type: ignore[union-attr]
        patched = http.post(
            f"/api/runs/{source}/fork", json={"from_seq": 3, "patch": {"total": 0}, "priority": 7}
        )
        assert patched.status_code == 201 and patched.json()["priority"] == 7, patched.text
        assert _finished(http, patched.json()["run_id"])["output"] == 15, "0 + t4 + t5 + t6"

        edited = {"from_seq": 3, "state": {"total": 100, "visited": ["edited"]}}
        forked = http.post(f"/api/runs/{source}/fork", json=edited, headers={"Idempotency-Key": "fix-1"})
        assert forked.status_code == 201, forked.text
        fork = forked.json()
        assert (fork["forked_from"], fork["forked_at_seq"]) == (source, 3)
        assert forked.headers["location"] == f"/api/runs/{fork['run_id']}"
        again = http.post(f"/api/runs/{source}/fork", json={**edited, "idempotency_key": "fix-1"})
        assert again.json()["run_id"] == fork["run_id"], "the same key gives the same fork"
        assert _finished(http, fork["run_id"])["output"] == 115  # 100 + t4 + t5 + t6
    # The source ran t1..t6; each of the two forks from checkpoint 3 ran t4..t6.
    assert [int(redis_client.get(count_key(key, f"t{i}")) or 0) for i in range(1, 7)] == [1, 1, 1, 3, 3, 3]


def test_a_dead_run_is_replayed_from_an_earlier_checkpoint(
    chain_server: ApiServer, redis_client: redis.Redis
) -> None:
    key = uuid.uuid4().hex
    redis_client.set(bad_key(key), 1)  # t4 goes wrong, and t5 refuses its total for good
    with chain_server.http() as http:
        run_id = http.post("/api/runs", json={"graph": "chain", "inputs": key}).json()["run_id"]
        assert _finished(http, run_id, "dead")["reason"] == "bad_total"
        redis_client.delete(bad_key(key))
        _problem(http.post(f"/api/runs/{run_id}/replay", json={"from_seq": 3, "from_start": True}), 422)
        replayed = http.post(f"/api/runs/{run_id}/replay", json={"from_seq": 3})
        assert replayed.status_code == 200, replayed.text
        assert _finished(http, run_id)["output"] == 21
        assert http.get(f"/api/runs/{run_id}/checkpoints/4").json()["state"]["total"] == 10
