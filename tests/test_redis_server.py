"""The test harness itself: the servers other tests rely on behave as promised."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from tests.redis_server import NO_RETRY, RedisFactory, RedisServer
from tests.waiting import wait_for


def config_value(r: redis.Redis, name: str) -> str:
    # redis-py 8 decodes CONFIG GET replies even with decode_responses=False; older ones don't.
    ((key, value),) = r.config_get(name).items()
    assert (key.decode() if isinstance(key, bytes) else key) == name
    return value.decode() if isinstance(value, bytes) else str(value)


def test_session_server_answers_and_has_aof(redis_client: redis.Redis) -> None:
    assert redis_client.ping() is True
    assert config_value(redis_client, "appendonly") == "yes"


def test_redis_url_starts_empty(redis_client: redis.Redis, redis_server: RedisServer) -> None:
    assert redis_client.dbsize() == 0
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    redis_client.set("left-behind", b"1")  # the next test's redis_url must flush it


def test_redis_url_flushes_previous_test(redis_client: redis.Redis) -> None:
    assert redis_client.exists("left-behind") == 0


def test_restart_keeps_data_on_same_port_with_new_pid(private_redis: RedisFactory) -> None:
    server = private_redis(appendfsync="always")
    port, pid = server.port, server.pid
    with redis.Redis.from_url(server.url) as r:
        r.set("k", b"v")

    server.restart()

    assert (server.port, server.url) == (port, f"redis://127.0.0.1:{port}/0")
    assert server.pid != pid
    with redis.Redis.from_url(server.url) as r:
        assert r.get("k") == b"v"


def test_kill_then_start_keeps_fsynced_data(private_redis: RedisFactory) -> None:
    # appendfsync=always fsyncs before replying, so an acknowledged write survives SIGKILL.
    server = private_redis(appendfsync="always")
    with redis.Redis.from_url(server.url) as r:
        r.rpush("q", b"a", b"b")

    server.kill()
    assert not server.running
    server.start()

    with redis.Redis.from_url(server.url) as r:
        assert r.lrange("q", 0, -1) == [b"a", b"b"]


def test_password_is_required_and_url_carries_it(private_redis: RedisFactory) -> None:
    server = private_redis(password="s3cret/pw")
    assert server.url == f"redis://:s3cret%2Fpw@127.0.0.1:{server.port}/0"

    # NO_RETRY: redis-py retries a failed handshake 3 times with backoff (seconds) by default.
    anon = redis.Redis(host="127.0.0.1", port=server.port, retry=NO_RETRY)
    with anon, pytest.raises(redis.AuthenticationError):
        anon.ping()
    with redis.Redis.from_url(server.url) as authed:
        assert authed.ping() is True


def test_without_aof(private_redis: RedisFactory) -> None:
    server = private_redis(appendonly=False)
    with server.client() as r:
        assert config_value(r, "appendonly") == "no"


def test_missing_binary_error_mentions_make_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    server = RedisServer()
    try:
        with pytest.raises(RuntimeError, match="make redis"):
            server.start()
    finally:
        server.close()


_START_AND_EXIT = """
import sys
from reflexr_graph.local_redis import RedisServer
server = RedisServer(own_session=True).start()
pid = server.detach() if sys.argv[1] == "detach" else server.pid
print(server.url, pid, server.dir, flush=True)
"""


def _started_by_a_process_that_exits(how: str) -> tuple[str, int, Path]:
    done = subprocess.run(
        [sys.executable, "-c", _START_AND_EXIT, how], capture_output=True, text=True, timeout=60, check=True
    )
    url, pid, data_dir = done.stdout.split()
    return url, int(pid), Path(data_dir)


def _answering_pid(url: str) -> int | None:
    try:
        with redis.Redis.from_url(url, socket_timeout=1.0, retry=NO_RETRY) as r:
            return int(r.info("server")["process_id"])
    except redis.ConnectionError:
        return None


@pytest.mark.timeout(60)
def test_a_server_is_stopped_when_the_process_that_started_it_exits() -> None:
    """Without detach, the atexit cleanup stops the server and removes its temporary data dir."""
    url, _pid, data_dir = _started_by_a_process_that_exits("just-exit")
    assert _answering_pid(url) is None
    assert not data_dir.exists()


@pytest.mark.timeout(60)
def test_a_detached_server_outlives_the_process_that_started_it() -> None:
    """detach() leaves the server running, data dir and all, after its starter exits (demo --keep);
    own_session made it lead a session of its own, out of reach of the starter's Ctrl-C."""
    url, pid, data_dir = _started_by_a_process_that_exits("detach")
    try:
        assert _answering_pid(url) == pid
        assert data_dir.is_dir()
        assert os.getsid(pid) == pid
    finally:
        with contextlib.suppress(redis.ConnectionError), redis.Redis.from_url(url, retry=NO_RETRY) as r:
            r.shutdown(nosave=True)
        shutil.rmtree(data_dir, ignore_errors=True)
    wait_for(lambda: _answering_pid(url) is None, 10, "the detached server to shut down")
