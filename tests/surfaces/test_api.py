"""The HTTP API against a real server, a real Redis and real workers: every route, bad input, auth, 413."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
from collections.abc import Iterator

import httpx
import pytest
import redis
from fastapi.routing import APIRoute

from reflexr_graph.api.app import API_PREFIX, API_ROUTERS, OPEN_ROUTERS
from reflexr_graph.api.serve import SHUTDOWN_GRACE_S
from reflexr_graph.cli.failures import EXIT_CANNOT_LISTEN, EXIT_UNREACHABLE
from reflexr_graph.client import Client
from tests.surfaces.conftest import PASSWORD, ApiServer, Cli, serving
from tests.surfaces.graphs import ok_key, release_key
from tests.waiting import wait_for

SECRET = "hunter2-private-value"


def _dead_run(http: httpx.Client, key: str) -> str:
    """A counter run that dies at s2 (its flag is not set; max_attempts=1)."""
    run_id = str(
        http.post("/api/runs", json={"graph": "counter", "inputs": {"key": key, "n": 1}}).json()["run_id"]
    )
    wait_for(lambda: http.get(f"/api/runs/{run_id}").json()["status"] == "dead", what="the run to die")
    return run_id


def _problem(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, object] = response.json()
    assert body["status"] == status and "Traceback" not in response.text
    return body


def test_every_route_is_in_the_openapi_document(api_server: ApiServer) -> None:
    groups = ((API_PREFIX, API_ROUTERS), ("", OPEN_ROUTERS))
    routes = {(prefix + r.path, m.lower()) for prefix, routers in groups for router in routers
              for r in router.routes if isinstance(r, APIRoute) and r.include_in_schema
              for m in r.methods}  # fmt: skip
    document = httpx.get(f"{api_server.url}/openapi.json").json()
    documented = {(path, method) for path, item in document["paths"].items() for method in item}
    assert routes == documented
    assert {"/api/runs", "/api/runs/{run_id}", "/api/runs/{run_id}/events", "/api/dead-letters",
            "/api/dead-letters/replay", "/api/graphs", "/healthz", "/readyz", "/api/runs/{run_id}/fork",
            "/api/runs/{run_id}/checkpoints", "/api/runs/{run_id}/checkpoints/{seq}", "/api/workers",
            "/api/overview"} <= {
        p for p, _ in routes
    }  # fmt: skip
    assert "HTTPBearer" in json.dumps(document["components"]["securitySchemes"])


def test_the_token_guards_every_api_route_and_nothing_else(api_server: ApiServer) -> None:
    for token in (None, "wrong-token"):
        with api_server.http(token=token) as anon:
            for method, path in (("GET", "/api/runs"), ("GET", "/api/graphs"), ("GET", "/api/dead-letters"),
                                 ("GET", "/api/workers"), ("GET", "/api/overview"), ("POST", "/api/runs"),
                                 ("POST", "/api/runs/x/cancel")):  # fmt: skip
                response = anon.request(method, path, json={})
                _problem(response, 401)
                assert response.headers["www-authenticate"] == "Bearer"
            assert anon.get("/healthz").status_code == 200
            assert anon.get("/").status_code == 200 and "reflexr-graph" in anon.get("/").text
    with api_server.http() as http:
        assert http.get("/api/runs").status_code == 200
        assert http.get("/readyz").json() == {"status": "ready", "warning": None}


def test_security_headers_and_post_only_mutations(api_server: ApiServer) -> None:
    with api_server.http() as http:
        response = http.get("/")
        csp = response.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "style-src 'self';" in csp and "unsafe-inline" not in csp
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["x-frame-options"] == "DENY"
        assert "server" not in response.headers
        run_id = http.post("/api/runs", json={"graph": "blocker", "inputs": "h"}).json()["run_id"]
        for verb in ("cancel", "replay"):
            _problem(http.get(f"/api/runs/{run_id}/{verb}"), 405)


def test_enqueue_validates_and_maps_the_idempotency_key(
    api_server: ApiServer, redis_client: redis.Redis
) -> None:
    with api_server.http() as http:
        created = http.post("/api/runs", json={"graph": "counter", "inputs": {"key": "a", "n": 2}},
                            headers={"Idempotency-Key": "order-1"})  # fmt: skip
        assert created.status_code == 201
        run = created.json()
        assert (run["graph"], run["status"], run["max_attempts"]) == ("counter", "queued", 1)
        assert created.headers["location"] == f"/api/runs/{run['run_id']}"
        again = http.post("/api/runs", json={"graph": "counter", "inputs": {"key": "a", "n": 2},
                                             "idempotency_key": "order-1"})  # fmt: skip
        assert again.status_code == 200 and again.json()["run_id"] == run["run_id"]
        conflict = _problem(
            http.post("/api/runs", json={"graph": "counter", "inputs": {"key": "b", "n": 2}},
                      headers={"Idempotency-Key": "order-1"}), 409)  # fmt: skip
        assert conflict["run_id"] == run["run_id"]
        invalid = http.post("/api/runs", json={"graph": "counter", "inputs": {"key": "", "n": SECRET}})
        body = _problem(invalid, 422)
        assert sorted(tuple(e["loc"]) for e in body["errors"]) == [("inputs", "key"), ("inputs", "n")]  # type: ignore[attr-defined]
        assert SECRET not in invalid.text
        missing = _problem(http.post("/api/runs", json={"graph": "counter"}), 422)
        assert missing["errors"] == [{"loc": ["body", "inputs"], "msg": "Field required", "type": "missing"}]
        not_json = http.post(
            "/api/runs", content=f'{{"graph": "{SECRET}", ', headers={"content-type": "application/json"}
        )
        assert _problem(not_json, 400)["errors"][0]["type"] == "json_invalid"  # type: ignore[index]
        assert SECRET not in not_json.text
        unknown = _problem(http.post("/api/runs", json={"graph": "nope", "inputs": {}}), 404)
        assert "nope" in str(unknown["detail"])
        body_key = {"graph": "counter", "inputs": {"key": "a", "n": 2}, "idempotency_key": "x"}
        both = http.post("/api/runs", json=body_key, headers={"Idempotency-Key": "y"})
        _problem(both, 422)


def test_a_body_that_is_not_json_is_refused_with_415_naming_the_content_type(api_server: ApiServer) -> None:
    """``curl -d`` sends a form: the answer says to send JSON, not that the fields are missing."""
    form = {"content-type": "application/x-www-form-urlencoded"}
    with api_server.http() as http:
        refused = http.post("/api/runs", content=b"graph=counter&inputs=1", headers=form)
        body = _problem(refused, 415)
        assert (
            "Content-Type: application/json" in str(body["detail"])
            and body["title"] == "Unsupported Media Type"
        )
        assert refused.headers["accept-post"] == "application/json"
        typed = {"content-type": "application/json; charset=utf-8"}
        good = json.dumps({"graph": "counter", "inputs": {"key": "j", "n": 1}})
        assert http.post("/api/runs", content=good, headers=typed).status_code == 201
        _problem(http.post("/api/runs/no-such-run/cancel"), 404)  # no body, declared JSON
    with api_server.http(as_json=False) as bare:
        _problem(bare.post("/api/runs", content=good), 415)  # no Content-Type: FastAPI would not read it
        _problem(bare.post("/api/runs/no-such-run/cancel"), 415)  # no body: a cross-site form could send it
        assert bare.get("/api/runs").status_code == 200, "a GET needs no Content-Type"
    with api_server.http(token=None) as anon:
        _problem(anon.post("/api/runs", content=b"graph=counter", headers=form), 401)


def test_serve_on_a_port_in_use_says_so_in_one_line_before_it_announces_anything(cli: Cli) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = cli("serve", "--port", str(port))
    assert done.returncode == EXIT_CANNOT_LISTEN != EXIT_UNREACHABLE, done.stderr
    assert done.stdout == "", "no ready line for a server that never listened"
    assert done.stderr.splitlines() == [
        f"error: cannot listen on http://127.0.0.1:{port}/: the port is in use by another process; stop it, "
        "or serve on another with --port"
    ]


def test_bodies_over_the_limit_are_refused_with_413(api_server: ApiServer) -> None:
    big = {"graph": "blocker", "inputs": "x" * 70_000}
    with api_server.http() as http:
        declared = _problem(http.post("/api/runs", json=big), 413)
        assert "REFLEXR_API_MAX_BODY" in str(declared["detail"])

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit is counted as it streams
            data = json.dumps(big).encode()
            for i in range(0, len(data), 8192):
                yield data[i : i + 8192]

        streamed = http.post("/api/runs", content=chunks(), headers={"content-type": "application/json"})
        assert "REFLEXR_API_MAX_BODY" in str(_problem(streamed, 413)["detail"])
        assert http.get("/api/runs").json()["runs"] == []


def test_listing_filters_and_pages(api_server: ApiServer) -> None:
    with api_server.http() as http:
        ids = [
            http.post("/api/runs", json={"graph": "counter", "inputs": {"key": f"k{i}", "n": 1}}).json()[
                "run_id"
            ]
            for i in range(5)
        ]
        http.post("/api/runs", json={"graph": "blocker", "inputs": "b"})
        seen: list[str] = []
        cursor = None
        while True:
            params = {"graph": "counter", "limit": 2, **({"cursor": cursor} if cursor else {})}
            page = http.get("/api/runs", params=params).json()
            seen += [r["run_id"] for r in page["runs"]]
            if (cursor := page["cursor"]) is None:
                break
        assert seen == list(reversed(ids))
        assert len(http.get("/api/runs", params={"status": "queued"}).json()["runs"]) == 6
        assert http.get("/api/runs", params={"status": "succeeded"}).json()["runs"] == []
        assert _problem(http.get("/api/runs", params={"status": "bogus"}), 422)["errors"][0]["loc"] == [
            "query",
            "status",
        ]  # type: ignore[index]
        _problem(http.get("/api/runs", params={"limit": 0}), 422)
        _problem(http.get("/api/runs", params={"cursor": "not-a-cursor"}), 422)
        _problem(http.get("/api/runs/no-such-run"), 404)
        _problem(http.get("/api/runs/no-such-run/events"), 404)


def test_a_run_streams_its_events_live_until_it_ends(
    api_server: ApiServer, worker: subprocess.Popen[bytes], redis_client: redis.Redis
) -> None:
    redis_client.set(ok_key("live"), 1)
    with api_server.http() as http:
        run_id = http.post("/api/runs", json={"graph": "counter", "inputs": {"key": "live", "n": 1}}).json()[
            "run_id"
        ]
        frames: list[tuple[str, dict[str, object]]] = []
        with http.stream(
            "GET", f"/api/runs/{run_id}/events", headers={"Accept": "text/event-stream"}
        ) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            kind = ""
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    frames.append((kind, json.loads(line[6:])))
        kinds = [k for k, _ in frames]
        assert kinds[0] == "run_enqueued" and "attempt_started" in kinds and "run_succeeded" in kinds
        assert kinds[-1] == "end" and frames[-1][1]["status"] == "succeeded" and frames[-1][1]["output"] == 2
        history = http.get(f"/api/runs/{run_id}/events").json()
        assert [e["type"] for e in history] == kinds[:-1]


def test_a_stopped_server_ends_the_event_streams_still_open(
    own_api_server: ApiServer, capfd: pytest.CaptureFixture[str]
) -> None:
    """SIGTERM ends ``serve`` although a console still follows a run that goes on (no worker
    serves it here): the stream ends cleanly instead of holding the server up."""
    with own_api_server.http() as http:
        run_id = http.post("/api/runs", json={"graph": "blocker", "inputs": "open"}).json()["run_id"]
        with http.stream(
            "GET", f"/api/runs/{run_id}/events", headers={"Accept": "text/event-stream"}
        ) as stream:
            lines = stream.iter_lines()
            assert next(line for line in lines if line.startswith("event: ")) == "event: run_enqueued"
            own_api_server.proc.send_signal(signal.SIGTERM)
            assert own_api_server.proc.wait(timeout=SHUTDOWN_GRACE_S + 25) in (0, -signal.SIGTERM)
            assert not [line for line in lines if line.startswith("event: ")]  # ended, not cut
    assert "Exception in ASGI application" not in capfd.readouterr().err


def test_cancel_and_replay(
    api_server: ApiServer, worker: subprocess.Popen[bytes], redis_client: redis.Redis
) -> None:
    with api_server.http() as http:
        run_id = http.post("/api/runs", json={"graph": "blocker", "inputs": "c1"}).json()["run_id"]
        wait_for(
            lambda: http.get(f"/api/runs/{run_id}").json()["status"] == "running", what="the run to start"
        )
        assert _problem(http.post(f"/api/runs/{run_id}/replay"), 409)["detail"]
        asked = http.post(f"/api/runs/{run_id}/cancel").json()
        assert (asked["status"], asked["cancel_requested"]) == ("running", True)
        assert http.post(f"/api/runs/{run_id}/cancel", params={"now": "true"}).json()["status"] == "cancelled"
        _problem(http.post(f"/api/runs/{run_id}/cancel"), 409)
        redis_client.rpush(release_key("c1"), 1)
        replayed = http.post(f"/api/runs/{run_id}/replay", json={"from_start": True})
        assert replayed.status_code == 200 and replayed.json()["status"] == "queued"
        redis_client.rpush(release_key("c1"), 1)
        wait_for(lambda: http.get(f"/api/runs/{run_id}").json()["status"] == "succeeded", what="the replay")
        _problem(http.post("/api/runs/no-such-run/cancel"), 404)


def test_dead_letters_show_why_and_replay_by_selection_or_filter(
    api_server: ApiServer, worker: subprocess.Popen[bytes], redis_client: redis.Redis
) -> None:
    with api_server.http() as http:
        first, second = _dead_run(http, "d1"), _dead_run(http, "d2")
        page = http.get("/api/dead-letters", params={"graph": "counter"}).json()
        assert {r["run_id"] for r in page["runs"]} == {first, second}
        shown = http.get(f"/api/dead-letters/{first}").json()
        assert shown["run"]["reason"] == "max_attempts" and "s2 is told to fail" in shown["run"]["error"]
        assert "RunFailure" in shown["traceback"]
        assert shown["checkpoint"]["next_node"] == "s2"
        redis_client.set(ok_key("d1"), 1)
        redis_client.set(ok_key("d2"), 1)
        one = http.post("/api/dead-letters/replay", json={"run_ids": [first, "no-such-run"]}).json()
        assert one["replayed"] == [first] and [r["status"] for r in one["refused"]] == [404]
        _problem(http.post("/api/dead-letters/replay", json={"run_ids": [first], "graph": "counter"}), 422)
        by_filter = http.post(
            "/api/dead-letters/replay", json={"graph": "counter", "reason": "max_attempts"}
        ).json()
        assert by_filter["replayed"] == [second]
        for run_id in (first, second):
            wait_for(
                lambda r=run_id: http.get(f"/api/runs/{r}").json()["status"] == "succeeded", what="replays"
            )
        assert http.get("/api/dead-letters").json()["runs"] == []


def test_a_maps_branches_are_listed_with_their_attempt_and_times(
    api_server: ApiServer, worker: subprocess.Popen[bytes]
) -> None:
    """``spread`` maps over four items on a real worker; item 3 fails its first time, so attempt 1
    ran items 0 to 2 (their results recorded) and attempt 2 item 3 alone: the lanes say so."""
    with api_server.http() as http:
        wait_for(lambda: http.get("/api/graphs/spread").status_code == 200, what="the worker's graphs")
        run_id = http.post("/api/runs", json={"graph": "spread", "inputs": "lanes"}).json()["run_id"]
        wait_for(lambda: http.get(f"/api/runs/{run_id}").json()["status"] == "succeeded", what="the run")
        run = http.get(f"/api/runs/{run_id}").json()
        lanes = http.get(f"/api/runs/{run_id}/branches").json()
        _problem(http.get("/api/runs/no-such-run/branches"), 404)
    assert run["output"] == [0, 10, 20, 30]
    ran = sorted((lane["attempt"], int(lane["branch"].rpartition(":")[2])) for lane in lanes)
    assert ran == [(1, 0), (1, 1), (1, 2), (2, 3)], lanes
    assert {lane["node"] for lane in lanes} == {"work"}
    for lane in lanes:
        assert run["created_at"] <= lane["started_at"] <= lane["ended_at"] <= run["updated_at"], lane
    assert [lane["started_at"] for lane in lanes] == sorted(lane["started_at"] for lane in lanes)


def test_graphs_are_listed_with_schemas_diagrams_and_workers(
    api_server: ApiServer, worker: subprocess.Popen[bytes]
) -> None:
    with api_server.http() as http:
        wait_for(lambda: http.get("/api/graphs/counter").json()["workers"], what="the worker to be listed")
        graphs = {g["graph"]["name"]: g for g in http.get("/api/graphs").json()}
        assert set(graphs) == {
            "approvals",
            "blocker",
            "chain",
            "counter",
            "journey",
            "kin",
            "spread",
            "talker",
        }, "the worker's graphs"
        assert (
            graphs["approvals"]["graph"]["signals"]["approval"]["properties"]["approved"]["type"] == "boolean"
        )
        counter = graphs["counter"]["graph"]
        assert counter["inputs"]["properties"]["n"]["type"] == "integer"
        assert counter["mermaid"].startswith("stateDiagram-v2") and "s1 --> s2" in counter["mermaid"]
        _problem(http.get("/api/graphs/nope"), 404)


def test_runs_are_filtered_by_a_run_id_prefix_or_part_of_a_graph_name(api_server: ApiServer) -> None:
    with api_server.http() as http:
        counted = http.post("/api/runs", json={"graph": "counter", "inputs": {"key": "f", "n": 1}}).json()
        blocked = http.post("/api/runs", json={"graph": "blocker", "inputs": "f"}).json()
        by_graph = http.get("/api/runs", params={"q": "OUNT"}).json()["runs"]
        assert [r["run_id"] for r in by_graph] == [counted["run_id"]]
        prefix = blocked["run_id"][:8]
        assert [r["run_id"] for r in http.get("/api/runs", params={"q": prefix}).json()["runs"]] == [
            blocked["run_id"]
        ]
        assert http.get("/api/runs", params={"q": blocked["run_id"][4:]}).json()["runs"] == [], "a prefix"
        _problem(http.get("/api/runs", params={"q": ""}), 422)
        _problem(http.get("/api/runs", params={"q": "x" * 201}), 422)


def test_the_overview_counts_the_last_hour_per_minute_and_refuses_a_bad_window(
    api_server: ApiServer, worker: subprocess.Popen[bytes], redis_client: redis.Redis
) -> None:
    redis_client.set(ok_key("ov-ok"), 1)
    with api_server.http() as http:
        _dead_run(http, "ov")
        ok = http.post("/api/runs", json={"graph": "counter", "inputs": {"key": "ov-ok", "n": 1}}).json()
        wait_for(lambda: http.get(f"/api/runs/{ok['run_id']}").json()["status"] == "succeeded", what="ok")
        wait_for(lambda: http.get("/api/graphs/journey").status_code == 200, what="the worker's graphs")
        held = http.post("/api/runs", json={"graph": "journey", "inputs": "ov-wait"}).json()["run_id"]
        wait_for(lambda: http.get(f"/api/runs/{held}").json()["status"] == "waiting", what="the wait")
        body = http.get("/api/overview", params={"minutes": 5}).json()
        activity, now = body["activity"], body["now"]
        assert activity["minutes"] == 5 and len(activity["started"]) == 5
        assert sum(activity["started"]) == 3 and sum(activity["dead"]) == 1
        assert sum(activity["retried"]) == 1, "journey retries once before it waits; counter never"
        assert sum(activity["dead_by_reason"]["max_attempts"]) == 1
        assert activity["waiting"]["signal"] == 1
        assert now["by_status"]["dead"] == 1 and now["dead_letters"] == 1
        assert sum(activity["succeeded"]) == 1 and activity["durations"]["counter"]["runs"] == 1
        assert set(now["queues"]) == set(), "nothing queued"
        assert len(http.get("/api/overview").json()["activity"]["started"]) == 60, "an hour by default"
        for minutes in (0, 61, "an hour"):
            _problem(http.get("/api/overview", params={"minutes": minutes}), 422)


def test_a_graphs_versions_are_listed_with_their_workers_and_nodes(
    api_server: ApiServer, worker: subprocess.Popen[bytes]
) -> None:
    with api_server.http() as http:
        wait_for(lambda: http.get("/api/graphs/counter/versions").json(), what="the worker's version")
        (version,) = http.get("/api/graphs/counter/versions").json()
        assert version["version"] == version["fingerprint"] and version["label"] is None
        assert len(version["workers"]) == 1 and {"s1", "s2"} <= set(version["nodes"])
        assert version["first_published_at"] > 0
        _problem(http.get("/api/graphs/nope/versions"), 404)


def test_workers_are_listed_with_their_graphs_runs_in_flight_and_last_heartbeat(
    api_server: ApiServer, worker: subprocess.Popen[bytes], redis_client: redis.Redis
) -> None:
    with api_server.http() as http:
        run_id = http.post("/api/runs", json={"graph": "blocker", "inputs": "held"}).json()["run_id"]
        wait_for(
            lambda: http.get(f"/api/runs/{run_id}").json()["status"] == "running", what="the run to start"
        )
        wait_for(lambda: http.get("/api/workers").json(), what="the worker to be listed")
        (listed,) = http.get("/api/workers").json()
        assert listed["in_flight"] == [run_id]
        info = listed["info"]
        assert info["pid"] == worker.pid and info["pool"] == "prefork" and info["concurrency"] == 1
        assert {"blocker", "counter", "journey"} <= set(info["graphs"])
        assert info["started_at"] <= listed["last_beat_at"], "a heartbeat since the worker started"
        assert abs(info["clock_skew_ms"]) < 1000, "its clock against Redis's (the same machine's)"
        redis_client.rpush(release_key("held"), 1)
        wait_for(lambda: http.get(f"/api/runs/{run_id}").json()["status"] == "succeeded", what="the run")
        assert http.get("/api/workers").json()[0]["in_flight"] == []


def test_a_waiting_run_takes_a_signal_validated_against_its_schema(
    api_server: ApiServer, worker: subprocess.Popen[bytes]
) -> None:
    with api_server.http() as http:
        run_id = http.post("/api/runs", json={"graph": "approvals", "inputs": "doc"}).json()["run_id"]
        wait_for(
            lambda: http.get(f"/api/runs/{run_id}").json()["status"] == "waiting", what="the run to wait"
        )
        assert http.get(f"/api/runs/{run_id}").json()["waiting_for"] == "approval"
        signal = f"/api/runs/{run_id}/signal"
        invalid = http.post(signal, json={"name": "approval", "value": {"approved": SECRET}})
        assert sorted(tuple(e["loc"]) for e in _problem(invalid, 422)["errors"]) == [  # type: ignore[attr-defined]
            ("value", "approved"), ("value", "by"),
        ]  # fmt: skip
        assert SECRET not in invalid.text
        unknown = _problem(http.post(signal, json={"name": "nope", "value": 1}), 422)
        assert unknown["errors"] == [{"loc": ["body", "name"], "msg": "is not a signal the graph declares",
                                      "type": "unknown_signal"}]  # fmt: skip
        _problem(http.post(signal, json={"value": 1}), 422)
        sent = http.post(signal, json={"name": "approval", "value": {"approved": True, "by": "ops"}}).json()
        # The run is read after the wake, by when the worker may have claimed it already.
        assert sent["woke"] is True and sent["run"]["status"] in ("queued", "running", "succeeded")
        wait_for(
            lambda: http.get(f"/api/runs/{run_id}").json()["status"] == "succeeded", what="the run to end"
        )
        assert http.get(f"/api/runs/{run_id}").json()["output"] == "doc: approved by ops"
        _problem(http.post(signal, json={"name": "approval", "value": {"approved": True, "by": "x"}}), 409)
        _problem(http.post("/api/runs/no-such-run/signal", json={"name": "approval", "value": 1}), 404)


def test_an_unusable_redis_is_a_503_that_says_what_to_fix_without_the_password(
    env: dict[str, str], dead_url: str
) -> None:
    with serving({**env, "REFLEXR_REDIS_URL": dead_url}) as server, server.http() as http:
        assert http.get("/healthz").status_code == 200, "the process itself is alive"
        for path in ("/readyz", "/api/runs", "/api/graphs"):
            response = http.get(path)
            body = _problem(response, 503)
            assert "REFLEXR_REDIS_URL" in str(body["detail"]) and PASSWORD not in response.text


def test_serve_refuses_to_listen_beyond_loopback_without_a_token(cli: Cli) -> None:
    done = cli("serve", "--host", "0.0.0.0", "--port", "1")
    assert done.returncode == 2
    assert "REFLEXR_API_TOKEN" in done.stderr and "0.0.0.0" in done.stderr


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.8.9.1"])
def test_loopback_hosts_need_no_token(host: str) -> None:
    from reflexr_graph.api.security import check_bind

    check_bind(host, "")


def test_readiness_and_the_overview_name_a_redis_that_may_lose_runs(
    api_server: ApiServer, redis_client: redis.Redis
) -> None:
    """/readyz stays 200 (the API loses nothing itself; ``health --redis`` is the probe that fails)
    but names the setting, as the overview does for the console's banner."""
    with api_server.http() as http:
        assert http.get("/api/overview").json()["redis_warning"] is None
        redis_client.config_set("maxmemory-policy", "allkeys-lru")
        try:
            ready = http.get("/readyz")
            overview = http.get("/api/overview").json()
        finally:
            redis_client.config_set("maxmemory-policy", "noeviction")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    for said in (ready.json()["warning"], overview["redis_warning"]):
        assert "maxmemory-policy is allkeys-lru" in said and "set maxmemory-policy noeviction" in said


def test_a_run_that_failed_once_and_waits_shows_no_error_but_its_last_failure(
    api_server: ApiServer, worker: subprocess.Popen[bytes], client: Client, cli: Cli
) -> None:
    """Issue 34: ``journey`` fails its first attempt, retries, and waits for ``go``. Waiting is its
    present: no ``error`` nor ``reason`` on the API, the Client or ``status --json``; attempt 1's
    failure is its ``last_failure``, as such on each."""
    with api_server.http() as http:
        wait_for(lambda: http.get("/api/graphs/journey").status_code == 200, what="the worker's graphs")
        run_id = http.post("/api/runs", json={"graph": "journey", "inputs": "on-hold"}).json()["run_id"]
        wait_for(lambda: http.get(f"/api/runs/{run_id}").json()["status"] == "waiting", what="the wait")
        served = http.get(f"/api/runs/{run_id}").json()
    shown = json.loads(cli("status", run_id, "--json").stdout)
    info = client.get(run_id).model_dump(mode="json")
    for run in (served, shown, info):
        assert (run["status"], run["attempt"], run["error"], run["reason"]) == ("waiting", 2, None, None)
        failure = run["last_failure"]
        assert failure["time"] > 0 and failure["time"] <= run["updated_at"]
        assert {k: failure[k] for k in ("attempt", "reason", "error")} == {
            "attempt": 1,
            "reason": "first_time",
            "error": "RunFailure: fetch fails its first time",
        }
    text = cli("status", run_id).stdout
    assert re.search(r"reason +- *\n", text) and re.search(r"error +- *\n", text), text
    assert re.search(
        r"last failure\s+attempt 1 at .+: first_time, RunFailure: fetch fails its first time", text
    )
