"""Named API tokens against a real ``reflexr-graph serve``: each role does what it may and gets 403
naming the role it needs for the rest; the token's name is recorded as ``by`` on what it does; a
malformed tokens file stops the server at start naming its line; the single token is an admin."""

from __future__ import annotations

import getpass
import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from reflexr_graph import clock
from reflexr_graph.api.app import create_app
from reflexr_graph.api.roles import NEEDS, operation
from reflexr_graph.api.tokens import token_hash
from reflexr_graph.client import Client
from reflexr_graph.store import asks, keys
from reflexr_graph.store.redis_store import RedisStore
from tests.redis_server import RedisServer
from tests.surfaces.conftest import BIN, ROOT, ApiServer, Cli, environment, free_port, serving

TOKENS = {
    "vera": ("viewer", "viewer-token-0123456789-abcdefghijklmn"),
    "otto": ("operator", "operator-token-0123456789-abcdefghijk"),
    "ada": ("admin", "admin-token-0123456789-abcdefghijklmnop"),
}
SIGNAL = {"name": "approval", "value": {"approved": True, "by": "ana"}}


def tokens_file(path: Path) -> Path:
    lines = ["# who may do what", ""]
    lines += [f"{name} {role} {token_hash(token)}  # {role}" for name, (role, token) in TOKENS.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def server(
    redis_server: RedisServer, queue: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ApiServer]:
    path = tokens_file(tmp_path_factory.mktemp("tokens") / "tokens")
    with serving({**environment(redis_server.url, queue), "REFLEXR_API_TOKENS": str(path)}) as api:
        yield api


def as_(server: ApiServer, name: str) -> httpx.Client:
    return server.http(token=TOKENS[name][1])


def detail(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    text: str = response.json()["detail"]
    return text


def by_of(http: httpx.Client, run_id: str, kind: str) -> list[str]:
    events = http.get(f"/api/runs/{run_id}/events").json()
    return [e["fields"].get("by", "") for e in events if e["type"] == kind]


def test_every_route_that_changes_something_has_a_role_in_the_one_table() -> None:
    app = create_app(token="t" * 40)
    changing = {
        operation(method.upper(), path)
        for path, ops in app.openapi()["paths"].items()
        for method in ops
        if method.upper() not in ("GET", "HEAD")
    }
    assert changing, "the app lists no route that changes anything"
    missing = changing - set(NEEDS)
    assert not missing, f"routes without a role in api/roles.py NEEDS: {sorted(missing)}"


def test_a_viewer_reads_and_gets_403_naming_operator_for_a_signal_or_a_cancel(
    server: ApiServer, client: Client, published: None
) -> None:
    run_id = client.enqueue("approvals", "ticket")
    with as_(server, "vera") as http:
        assert http.get(f"/api/runs/{run_id}").json()["status"] == "queued"
        assert http.get("/api/runs").status_code == 200
        for refused in (
            http.post(f"/api/runs/{run_id}/signal", json=SIGNAL),
            http.post(f"/api/runs/{run_id}/cancel"),
        ):
            why = detail(refused, 403)
            assert "'vera' has the role viewer" in why and "needs the role operator" in why
    assert client.get(run_id).status.value == "queued"
    assert client.history(run_id)[-1].type == "run_enqueued"


def test_an_operator_signals_cancels_and_replays_as_itself_but_may_not_purge(
    server: ApiServer, client: Client, published: None, cli: Cli
) -> None:
    run_id = client.enqueue("approvals", "ticket")
    with as_(server, "otto") as http:
        assert http.post(f"/api/runs/{run_id}/signal", json=SIGNAL).status_code == 200
        assert http.post(f"/api/runs/{run_id}/cancel").json()["status"] == "cancelled"
        assert http.post(f"/api/runs/{run_id}/replay").json()["status"] == "queued"
        assert by_of(http, run_id, "signal_received") == ["otto"]
        assert by_of(http, run_id, "run_cancelled") == ["otto"]
        assert by_of(http, run_id, "run_replayed") == ["otto"]
        http.post(f"/api/runs/{run_id}/cancel")
        why = detail(http.post("/api/runs/purge", json={"run_ids": [run_id]}), 403)
        assert "'otto' has the role operator" in why and "needs the role admin" in why
    history = cli("history", run_id).stdout
    assert "signal=approval, by=otto" in history and "by=otto" in history.split("run_cancelled", 1)[1]
    with as_(server, "ada") as http:
        done = http.post("/api/runs/purge", json={"run_ids": [run_id]}).json()
        assert done["purged"] == [run_id]


def test_the_single_token_still_works_as_an_admin_named_admin(
    server: ApiServer, client: Client, published: None
) -> None:
    run_id = client.enqueue("approvals", "ticket")
    with server.http() as http:  # REFLEXR_API_TOKEN, beside the file
        assert http.post(f"/api/runs/{run_id}/cancel").json()["status"] == "cancelled"
        assert by_of(http, run_id, "run_cancelled") == ["admin"]
        assert http.post("/api/runs/purge", json={"run_ids": [run_id]}).json()["purged"] == [run_id]


def test_only_a_role_that_may_answer_a_wait_is_shown_its_token(
    server: ApiServer, client: Client, redis_url: str
) -> None:
    # The token is what answers the wait: a viewer sees the wait and its calls, never the token.
    run_id = client.enqueue("approvals", "ticket")
    token = asks.new_token(run_id)
    calls = [{"tool_call_id": "c1", "tool_name": "pay", "args": {"to": "bob"}, "kind": "approval"}]
    entry = asks.entry_json(token, "approve", "approvals", "payer", clock.now_ms(), None, calls)
    store = RedisStore.from_url(redis_url)
    try:  # as the step's wait does it: the ask kept, then the run suspended waiting for it
        store.do(asks.open_wait(run_id, token, entry, "approve"))
        claim = store.claim(run_id, "attempt-1", lease_ttl_ms=30_000)
        assert claim.claimed, claim
        signal = asks.SIGNAL_PREFIX + "approve"
        store.wait(claim.context(), field="w|approve", signal=signal, wake_at_ms=None)
    finally:
        store.close()
    assert client.get(run_id).waiting_for == "event:approve"
    for name, expected in (("vera", None), ("otto", token), ("ada", token)):
        with as_(server, name) as http:
            inbox = [w for w in http.get("/api/events").json() if w["run_id"] == run_id]
            assert [(w["name"], w["token"], w["calls"]) for w in inbox] == [("approve", expected, calls)]
            (kept,) = http.get(f"/api/runs/{run_id}/event-waits").json()
            assert (kept["name"], kept["token"]) == ("approve", expected)


def test_a_wrong_token_is_401_whatever_the_file_holds(server: ApiServer) -> None:
    with server.http(token="not-a-token-of-this-server-0123456789") as http:
        detail(http.get("/api/runs"), 401)


def test_a_malformed_tokens_file_stops_serve_at_start_naming_the_file_and_line(
    tmp_path: Path, redis_server: RedisServer, queue: str
) -> None:
    path = tmp_path / "tokens"
    good = f"ada admin {token_hash(TOKENS['ada'][1])}"
    secret = "operator-token-0123456789-abcdefghijk"
    path.write_text(f"# team\n{good}\n\nbob operator {secret}\n")
    env = {**environment(redis_server.url, queue), "REFLEXR_API_TOKENS": str(path)}
    cmd = [str(BIN / "reflexr-graph"), "serve", "--port", str(free_port())]
    done = subprocess.run(
        cmd, env={**os.environ, **env}, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert f"{path}:4: the third field must be the token's SHA-256" in done.stderr
    assert secret not in done.stderr + done.stdout
    path.write_text(f"{good}\nbob superuser {token_hash(secret)}\n")
    done = subprocess.run(
        cmd, env={**os.environ, **env}, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert (
        done.returncode == 2 and f"{path}:2: the role must be one of viewer, operator, admin" in done.stderr
    )
    assert token_hash(secret) not in done.stderr + done.stdout


def test_cli_signals_cancels_and_replays_are_recorded_as_cli_user_at_host(
    cli: Cli, client: Client, published: None
) -> None:
    me = f"cli@{getpass.getuser()}@{socket.gethostname()}"
    run_id = client.enqueue("approvals", "ticket")
    assert cli("signal", run_id, "approval", "--value", '{"approved": true, "by": "ana"}').returncode == 0
    assert cli("cancel", run_id, "--yes").returncode == 0
    by = {e.type: e.fields.get("by") for e in client.history(run_id)}
    assert by["signal_received"] == me and by["run_cancelled"] == me
    assert f"by={me}" in cli("history", run_id).stdout
    client.replay(run_id)
    assert client.history(run_id)[-1].fields["by"] == "client"


def test_purges_cancels_and_quarantine_purges_are_kept_in_the_audit_trail_after_the_run_is_gone(
    server: ApiServer, client: Client, published: None, cli: Cli, redis_client: redis.Redis
) -> None:
    me = f"cli@{getpass.getuser()}@{socket.gethostname()}"
    run_id = client.enqueue("approvals", "ticket")
    with as_(server, "otto") as http:
        assert http.post(f"/api/runs/{run_id}/cancel").json()["status"] == "cancelled"
    with as_(server, "ada") as http:
        assert http.post("/api/runs/purge", json={"run_ids": [run_id]}).json()["purged"] == [run_id]
    assert redis_client.exists(keys.events(run_id)) == 0  # the run's own events went with it
    redis_client.lpush(keys.QUARANTINE, json.dumps({"reason": "garbage", "item": SIGNAL["value"]}))
    assert cli("dlq", "messages", "--purge", "--yes").returncode == 0
    other = client.enqueue("approvals", "ticket")
    assert cli("cancel", other, "--yes").returncode == 0

    expected = [
        ("cancel", other, me),
        ("quarantine purge", "", me),
        ("purge", run_id, "ada"),
        ("cancel", run_id, "otto"),
    ]
    with as_(server, "otto") as http:
        listed = http.get("/api/audit").json()
    assert [(e["action"], e["run_id"], e["by"]) for e in listed][:4] == expected
    assert all(set(e) == {"action", "run_id", "by", "at_ms"} and e["at_ms"] > 0 for e in listed)
    with as_(server, "vera") as http:
        why = detail(http.get("/api/audit"), 403)
        assert "'vera' has the role viewer" in why and "needs the role operator" in why

    done = cli("audit", "--json")
    assert done.returncode == 0, done.stderr
    assert [(e["action"], e["run_id"], e["by"]) for e in json.loads(done.stdout)][:4] == expected
    table = cli("audit", "-n", "2").stdout
    assert "quarantine purge" in table and other in table and run_id not in table
    assert "approved" not in done.stdout + table and "ticket" not in done.stdout  # no payload value
