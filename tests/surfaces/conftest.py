"""Fixtures for surface tests: the CLI (in process), real worker subprocesses, a Client, and
Redis URLs that cannot be used (a killed server, an HTTP server)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import redis

from reflexr_graph import local_processes, schemas
from reflexr_graph.client import Client
from reflexr_graph.config.settings import load_settings
from reflexr_graph.local_processes import free_port
from reflexr_graph.store import keys
from tests import subprocesses
from tests.redis_server import RedisFactory, RedisServer
from tests.surfaces.cli_runner import (
    cli_here,  # noqa: F401  (a fixture of these tests)
    run_cli,
)
from tests.surfaces.graphs import ACTIONS
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CLI_TIMEOUT_S = 60
PASSWORD = "s3cret-in-the-url"
"""The password of the Redis URLs in error tests: it must never show in a message."""

Cli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def queue() -> str:
    """One queue per module, so that its tests can share one API server (:func:`api_server`); each
    test still starts on an emptied Redis (``redis_url``), so none sees another's messages."""
    return f"surfaces-{uuid.uuid4().hex[:8]}"


def environment(redis_url: str, queue: str) -> dict[str, str]:
    return local_processes.environment(
        {
            "REFLEXR_REDIS_URL": redis_url,
            "REFLEXR_QUEUE": queue,
            "PYTHONPATH": subprocesses.PYTHONPATH,
            "COLUMNS": "200",
        }
    )


@pytest.fixture
def env(redis_url: str, queue: str) -> dict[str, str]:
    """The environment of CLI and worker subprocesses: only our REFLEXR_* settings."""
    return environment(redis_url, queue)


@pytest.fixture
def published(redis_client: redis.Redis) -> None:
    """The test graphs' schemas, as a worker publishes them."""
    schemas.publish(redis_client, ACTIONS)


@pytest.fixture
def client(redis_url: str, queue: str, published: None) -> Iterator[Client]:
    c = Client(load_settings(redis_url=redis_url, queue=queue))
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def cli(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """Run ``reflexr-graph ARGS...`` on ``env`` as the console script does, in this process
    (tests/surfaces/cli_runner.py); ``env`` is read at each call, so a test may change it between."""

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return run_cli(list(args), env, monkeypatch, stdin)

    return run


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process's group (a worker and its pool children): a test's worker is killed, not
    stopped, at teardown, where nothing waits for what it would finish (a warm or cold shutdown
    takes 2 s); the next test starts on an emptied Redis and a queue of its own."""
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


@pytest.fixture
def start_worker(
    env: dict[str, str], queue: str, published: None
) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    """Start real ``celery worker`` subprocesses for the test graphs when the test says; each is
    killed with its process group at teardown."""
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        name = f"surfaces-{uuid.uuid4().hex[:6]}"
        argv = local_processes.celery_worker_argv(
            "tests.surfaces.worker_app", queue, name, loglevel="warning"
        )
        # Killed at teardown (_kill): REMAP_SIGTERM set spares the worker its re-exec to set it.
        fast = {"REMAP_SIGTERM": "SIGQUIT", "REFLEXR_SOFT_SHUTDOWN_TIMEOUT_S": "1"}
        procs.append(local_processes.spawn(argv, {**env, **fast}, cwd=ROOT))  # its output is the test's
        return procs[-1]

    try:
        yield start
    finally:
        for proc in procs:
            _kill(proc)


@pytest.fixture
def worker(
    start_worker: Callable[[], subprocess.Popen[bytes]], redis_client: redis.Redis
) -> subprocess.Popen[bytes]:
    """A real ``celery worker`` subprocess for the test graphs, live (in the workers' registry)
    before the test starts, and killed with its group at teardown.

    Waiting here, not in each test's own wait: on a loaded machine a worker's start alone can
    use up the half minute a console test gives its page."""
    before = set(redis_client.zrange(keys.WORKERS, 0, -1))
    proc = start_worker()

    def live() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"the worker exited at startup with status {proc.returncode}")
        return bool(set(redis_client.zrange(keys.WORKERS, 0, -1)) - before)

    wait_for(live, 60, "the worker to join the registry")
    return proc


class _Silent(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass  # a test's stderr is not an access log


@pytest.fixture
def http_port() -> Iterator[int]:
    """A plain HTTP server on a free port: something that answers, but not as Redis."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Silent)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def dead_url(private_redis: RedisFactory) -> str:
    """The URL of a Redis that was running and is gone: its port refuses connections."""
    server = private_redis(password=PASSWORD)
    url = f"redis://:{PASSWORD}@127.0.0.1:{server.port}/0"
    server.kill()
    return url


API_TOKEN = "test-token-0123456789-abcdefghijklmnop"


@dataclass
class ApiServer:
    url: str
    token: str
    proc: subprocess.Popen[bytes]
    printed: str = ""
    """What it printed as it started, when it was started with no token (:func:`serving`)."""

    def http(
        self,
        *,
        token: str | None = "default",
        as_json: bool = True,
        transport: httpx.BaseTransport | None = None,
    ) -> httpx.Client:
        """An httpx client on the server; with the server's token unless ``token`` says otherwise,
        and, as the console does, declaring every request JSON (the API refuses a POST that is not,
        body or not) unless ``as_json`` is False."""
        given = self.token if token == "default" else token
        headers = {"Authorization": f"Bearer {given}"} if given else {}
        if as_json:
            headers["Content-Type"] = "application/json"
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, transport=transport)


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def serving(
    env: dict[str, str], port: int | None = None, token: str | None = API_TOKEN
) -> Iterator[ApiServer]:
    """A real ``reflexr-graph serve`` subprocess with ``token`` and a small body limit, on ``env``'s
    Redis, on ``port`` (a free one unless given). With ``token`` None it starts with none, and the
    token is the one it generates, read from the console's URL it prints."""
    port = port or free_port()
    server_env = {**env, "REFLEXR_API_MAX_BODY": "65536"}
    server_env.pop("REFLEXR_API_TOKEN", None)
    if token is not None:
        server_env["REFLEXR_API_TOKEN"] = token
    cmd = [str(BIN / "reflexr-graph"), "serve", "--host", "127.0.0.1", "--port", str(port)]
    out = subprocess.PIPE if token is None else None
    proc = subprocess.Popen(cmd, env=server_env, cwd=ROOT, start_new_session=True, stdout=out)
    url = f"http://127.0.0.1:{port}"
    try:
        printed = proc.stdout.readline().decode() if proc.stdout is not None else ""
        found = re.search(r"/#token=([A-Za-z0-9_-]+) ", printed)
        token = found.group(1) if found else token
        wait_for(lambda: proc.poll() is not None or _ready(url), timeout=30, what="the API server to answer")
        assert proc.poll() is None and token, f"the server exited at start, or printed no token: {printed!r}"
        yield ApiServer(url, token, proc, printed)
    finally:
        _stop(proc)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture(scope="module")
def shared_api_server(redis_server: RedisServer, queue: str) -> Iterator[ApiServer]:
    """One ``reflexr-graph serve`` for a module's tests (it starts in 2 s): it holds no state of its
    own between requests, everything is read from Redis, which each test empties."""
    with serving(environment(redis_server.url, queue)) as server:
        yield server


@pytest.fixture
def api_server(shared_api_server: ApiServer, redis_url: str, published: None) -> ApiServer:
    """A real ``reflexr-graph serve`` on the test's Redis, with the test graphs published; shared
    by the module's tests, so a test that stops its server takes :func:`own_api_server`."""
    assert shared_api_server.proc.poll() is None, "a test stopped the module's shared API server"
    return shared_api_server


@pytest.fixture
def own_api_server(env: dict[str, str], published: None) -> Iterator[ApiServer]:
    """A ``reflexr-graph serve`` of the test's own, for a test that stops it."""
    with serving(env) as server:
        yield server
