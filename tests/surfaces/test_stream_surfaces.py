"""Streaming on the surfaces, with a real worker: ``reflexr-graph stream``, ``GET /api/runs/{id}/stream``
(SSE behind the token, resumed with Last-Event-ID) and bad input (an unknown run, a bad topic)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
import redis

from reflexr_graph import schemas
from reflexr_graph.client import Client
from reflexr_graph.errors import InvalidInputs, RunNotFound
from tests.surfaces.conftest import ApiServer, Cli
from tests.surfaces.graphs import release_key, talker

RESTART_LINE = "[step speak runs again (attempt 2): what it emitted above is void]"


@pytest.fixture
def talking(redis_client: redis.Redis) -> None:
    schemas.publish(redis_client, [talker])


def _sse(lines: Iterator[str], until: str = "end") -> list[tuple[str, str, dict[str, object]]]:
    """(event, id, data) of each frame of an SSE response's lines, up to the first ``until`` event."""
    frames: list[tuple[str, str, dict[str, object]]] = []
    kind = ident = ""
    for line in lines:
        if line.startswith("id: "):
            ident = line[4:]
        elif line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            frames.append((kind, ident, json.loads(line[6:])))
            if kind == until:
                break
            ident = ""
    return frames


def test_the_cli_prints_text_as_a_chat_would_with_the_restart_on_a_line_of_its_own(
    cli: Cli, client: Client, talking: None, worker: subprocess.Popen[bytes], redis_client: redis.Redis
) -> None:
    redis_client.rpush(release_key("cli"), "go")
    run_id = client.enqueue("talker", "cli")
    done = cli("stream", run_id)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"Hello, \n{RESTART_LINE}\nHello, world!\n"
    as_json = [json.loads(line) for line in cli("stream", run_id, "--json").stdout.splitlines()]
    assert [i["offset"] for i in as_json] == [1, 2, 3, 4, 5, 6, 7]
    assert as_json[2] == {
        "offset": 3, "topic": "", "node": "speak", "branch": "", "call": "", "attempt": 2,
        "value": {"void_from": 1}, "restart": True,
    }  # fmt: skip
    assert cli("stream", run_id, "--topic", "other").stdout == f"{RESTART_LINE}\n"


def test_the_cli_refuses_an_unknown_run_and_a_bad_topic(cli: Cli, client: Client) -> None:
    unknown = cli("stream", "no-such-run")
    assert unknown.returncode == 2 and "no-such-run" in unknown.stderr
    bad = cli("stream", "no-such-run", "--topic", "not a topic!")
    assert bad.returncode == 2 and "topic" in bad.stderr
    with pytest.raises(InvalidInputs):
        next(client.stream("x", topic="bad topic"))
    with pytest.raises(RunNotFound):
        next(client.stream("no-such-run"))


def test_sse_streams_items_live_behind_the_token_and_resumes_with_last_event_id(
    api_server: ApiServer, talking: None, worker: subprocess.Popen[bytes], redis_client: redis.Redis
) -> None:
    with api_server.http() as http:
        run_id = http.post("/api/runs", json={"graph": "talker", "inputs": "sse"}).json()["run_id"]
        with api_server.http(token=None) as anon:
            assert anon.get(f"/api/runs/{run_id}/stream").status_code == 401
        with http.stream("GET", f"/api/runs/{run_id}/stream") as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            # Attempt 2 stops mid-stream until released: these frames came while the run ran.
            lines = response.iter_lines()
            live = _sse(lines, until="restart")
            live += _sse(lines, until="item") + _sse(lines, until="item")
            assert http.get(f"/api/runs/{run_id}").json()["status"] == "running"
        assert [(k, i) for k, i, _ in live] == [("item", "1"), ("item", "2"), ("restart", "3"),
                                                ("item", "4"), ("item", "5")]  # fmt: skip
        assert [d["value"] for _, _, d in live] == ["Hello", ", ", {"void_from": 1}, "Hello", ", "]
        redis_client.rpush(release_key("sse"), "go")
        with http.stream("GET", f"/api/runs/{run_id}/stream", headers={"Last-Event-ID": "4"}) as response:
            rest = _sse(response.iter_lines())
        assert [(k, i) for k, i, _ in rest] == [("item", "5"), ("item", "6"), ("item", "7"), ("end", "")]
        assert rest[-1][2]["status"] == "succeeded" and rest[-1][2]["output"] == "Hello, world!"
        topic = http.get(f"/api/runs/{run_id}/stream", params={"topic": "output", "after": 6})
        assert [k for k, _, _ in _sse(topic.iter_lines())] == ["item", "end"]


def test_sse_refuses_an_unknown_run_and_a_bad_topic(api_server: ApiServer) -> None:
    with api_server.http() as http:
        assert http.get("/api/runs/no-such-run/stream").status_code == 404
        bad = http.get("/api/runs/no-such-run/stream", params={"topic": "not a topic!"})
        assert bad.status_code == 422 and "not a topic" not in bad.text
        assert http.get("/api/runs/x/stream", params={"after": -1}).status_code == 422
