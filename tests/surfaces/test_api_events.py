"""``POST /api/events/{token}`` (issue 35): a wait takes one answer (then 409), a token that is not
one or names no wait gets one clear line, and no answer ever comes back in an error."""

from __future__ import annotations

import json

import redis

from reflexr_graph import clock
from reflexr_graph.client import Client
from reflexr_graph.store import asks, keys
from reflexr_graph.store.redis_store import RedisStore
from tests.surfaces.conftest import ApiServer
from tests.surfaces.test_api import SECRET, _problem


def test_a_wait_takes_one_answer_and_a_bad_token_one_line(
    api_server: ApiServer, client: Client, redis_url: str, redis_client: redis.Redis
) -> None:
    run_id = client.enqueue("approvals", "ticket")  # no worker: the wait is kept as a step keeps it
    token = asks.new_token(run_id)
    entry = asks.entry_json(token, "approve", "approvals", "payer", clock.now_ms(), None, [])
    store = RedisStore.from_url(redis_url)
    try:
        store.do(asks.open_wait(run_id, token, entry, "approve"))
    finally:
        store.close()
    with api_server.http() as http:
        (kept,) = http.get(f"/api/runs/{run_id}/event-waits").json()
        assert (kept["token"], kept["agent"], kept["answer"]) == (token, "payer", None)
        first = http.post(f"/api/events/{token}", json={"payload": {"approvals": {"c1": True}}})
        assert first.status_code == 200, first.text
        assert first.json() == {"woke": False, "run_id": run_id}  # the run is not at its wait yet
        answer = json.loads(redis_client.hget(keys.mailbox(run_id), "event:approve") or b"{}")
        # The server's one REFLEXR_API_TOKEN is the admin token named "admin" (api/tokens.py).
        assert (answer["payload"], answer["by"]) == ({"approvals": {"c1": True}}, "admin")

        again = _problem(http.post(f"/api/events/{token}", json={"error": SECRET}), 409)
        assert (
            again["detail"]
            == f"the wait 'approve' of run {run_id} was answered already by admin; it takes no second answer"
        )
        malformed = _problem(http.post("/api/events/nope", json={"payload": SECRET}), 422)
        assert malformed["detail"] == "this is not an event token: copy the whole token the run handed out"
        unknown = _problem(http.post(f"/api/events/{run_id}~{'A' * 32}", json={"payload": SECRET}), 404)
        assert (
            unknown["detail"]
            == f"no wait of run {run_id} has this event token: check it, or the run was purged"
        )
        both = http.post(f"/api/events/{token}", json={"payload": SECRET, "error": SECRET})
        assert both.status_code == 422
        for refused in (again, malformed, unknown):
            assert SECRET not in json.dumps(refused)
        assert SECRET not in both.text
        waits = http.get(f"/api/runs/{run_id}/event-waits").json()
        assert [(w["name"], w["answer"]["by"]) for w in waits] == [("approve", "admin")]
