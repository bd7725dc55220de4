"""The API's guard against a real ``reflexr-graph serve`` started with no token, as a browser on
another site, a DNS-rebinding page and a token guesser would try it: the token it generates, the
Host it answers, the origin of what changes something, the 401s it slows, a short token at start,
what /readyz says, and where a redirect points."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from reflexr_graph.client import Client
from reflexr_graph.local_processes import free_port
from reflexr_graph.model import Status
from tests.redis_server import RedisServer
from tests.surfaces.conftest import PASSWORD, ApiServer, Cli, environment, serving

EVIL = "http://evil.example"
OTHER_NAME = "console.example.test"
"""A name the server is told to answer besides its address (REFLEXR_API_HOSTS)."""


@pytest.fixture(scope="module")
def served(redis_server: RedisServer, queue: str) -> Iterator[ApiServer]:
    """One ``serve`` started with no token, for the module's tests."""
    env = {**environment(redis_server.url, queue), "REFLEXR_API_HOSTS": OTHER_NAME}
    with serving(env, token=None) as server:
        yield server


@pytest.fixture
def guarded(served: ApiServer, redis_url: str, published: None) -> ApiServer:
    assert served.proc.poll() is None
    return served


def _port(server: ApiServer) -> int:
    return int(server.url.rsplit(":", 1)[1])


def test_serve_without_a_token_generates_one_prints_it_with_its_url_and_requires_it(
    guarded: ApiServer,
) -> None:
    assert len(guarded.token) >= 32
    assert guarded.printed.startswith(f"reflexr-graph console: {guarded.url}/#token={guarded.token} ")
    assert "REFLEXR_API_TOKEN" in guarded.printed
    with httpx.Client(base_url=guarded.url, timeout=30) as anon:
        for path in ("/api/runs", "/api/schedules", "/api/graphs"):
            assert anon.get(path).status_code == 401
        assert anon.get("/api/runs", headers={"Authorization": "Basic eDp5"}).status_code == 401
        assert anon.get("/healthz").status_code == 200 and anon.get("/readyz").status_code == 200
    with guarded.http() as http:
        assert http.get("/api/runs").status_code == 200


def test_a_cross_site_or_undeclared_post_changes_nothing(guarded: ApiServer, client: Client) -> None:
    """Even with the token (which a page on another site would not have), a POST that says it
    comes from another site, or that is not declared JSON (a form), is refused, and nothing moves."""
    client.add_schedule("nightly", "counter", every="1h", inputs={"key": "a", "n": 1})
    client.pause_schedule("nightly")
    run_id = client.enqueue("blocker", "held")
    resume, cancel = "/api/schedules/nightly/resume", f"/api/runs/{run_id}/cancel"
    with guarded.http() as http:
        for headers in (
            {"Origin": EVIL},
            {"Sec-Fetch-Site": "cross-site"},
            {"Sec-Fetch-Site": "same-site"},
            {"Origin": "null"},
            {"Origin": EVIL, "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"},
        ):
            for path in (resume, cancel):
                refused = http.post(path, headers=headers)
                assert refused.status_code == 403, (headers, refused.text)
                assert "another site" in refused.json()["detail"]
        for form in ("application/x-www-form-urlencoded", "text/plain", "multipart/form-data"):
            for path in (resume, cancel):
                assert http.post(path, headers={"Content-Type": form}).status_code == 415
        with httpx.Client(base_url=guarded.url, timeout=30) as bare:  # a body-less POST, token or not
            auth = {"Authorization": f"Bearer {guarded.token}"}
            assert bare.post(resume, headers=auth).status_code == 415
            assert bare.post(cancel, headers=auth).status_code == 415
            assert bare.delete("/api/schedules/nightly", headers=auth).status_code == 415
        assert client.schedule("nightly").schedule.paused and client.get(run_id).status is Status.QUEUED
        own = {"Origin": guarded.url, "Sec-Fetch-Site": "same-origin"}
        assert http.post(resume, headers=own).status_code == 200, "the console's own requests pass"
        assert not client.schedule("nightly").schedule.paused
        assert http.post(cancel).json()["status"] == "cancelled", "clients that send no Origin pass"


def test_a_host_the_server_does_not_answer_to_is_refused(guarded: ApiServer) -> None:
    """A DNS-rebinding page's requests name its own host: they read nothing, token or not."""
    port = _port(guarded)
    with guarded.http() as http:
        for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1:{port + 1}",
                     f"localhost.evil:{port}", f"127.0.0.1.nip.io:{port}", ""):  # fmt: skip
            refused = http.get("/api/runs", headers={"Host": host})
            assert refused.status_code == 400, (host, refused.text)
            assert "REFLEXR_API_HOSTS" in refused.json()["detail"] and "runs" not in refused.json()
            assert http.get("/", headers={"Host": host}).status_code == 400, "the console page too"
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"LOCALHOST:{port}",
                     OTHER_NAME, f"{OTHER_NAME}:443"):  # fmt: skip
            assert http.get("/api/runs", headers={"Host": host}).status_code == 200, host


def test_the_trailing_slash_redirect_is_relative(guarded: ApiServer) -> None:
    with guarded.http() as http:
        for host in (OTHER_NAME, f"localhost:{_port(guarded)}"):
            moved = http.get("/api/runs/", headers={"Host": host})
            assert moved.status_code == 307 and moved.headers["location"] == "/api/runs", moved.headers


def test_wrong_tokens_from_one_address_are_slowed_and_others_are_not(guarded: ApiServer) -> None:
    """Wrong tokens from 127.0.0.2 (a client address of its own): after ten, it is answered 429
    with Retry-After, its right token too; 127.0.0.1 is still served."""
    guesser = httpx.HTTPTransport(local_address="127.0.0.2")
    with guarded.http(token="x" * 43, transport=guesser) as guess:
        answers = [guess.get("/api/runs").status_code for _ in range(12)]
        assert answers[:10] == [401] * 10 and answers[10:] == [429, 429], answers
        slowed = guess.get("/api/runs", headers={"Authorization": f"Bearer {guarded.token}"})
        assert slowed.status_code == 429 and 0 < int(slowed.headers["retry-after"]) <= 60
    with guarded.http() as http:
        assert http.get("/api/runs").status_code == 200


def test_a_short_token_is_refused_at_start_without_its_value(cli: Cli, env: dict[str, str]) -> None:
    env["REFLEXR_API_TOKEN"] = "short-but-secret-value"
    done = cli("serve", "--port", str(free_port()))
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert len(done.stderr.splitlines()) == 1 and "REFLEXR_API_TOKEN" in done.stderr
    assert "32 characters" in done.stderr and "short-but-secret-value" not in done.stderr


def test_readyz_says_redis_is_unavailable_without_its_address(env: dict[str, str], dead_url: str) -> None:
    port = dead_url.rsplit(":", 1)[1].split("/")[0]
    with serving({**env, "REFLEXR_REDIS_URL": dead_url}, token=None) as server, server.http() as http:
        response = http.get("/readyz")
        assert response.status_code == 503
        detail = response.json()["detail"]
        assert detail.startswith("Redis unavailable") and "REFLEXR_REDIS_URL" in detail
        assert port not in response.text and "127.0.0.1" not in response.text
        assert PASSWORD not in response.text
